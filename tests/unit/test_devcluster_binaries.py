"""`tessera dev-cluster` needs only the binaries it runs. An SRE's trial: with helm missing from
the cache (a build still filling it), dev-cluster ran hack/build-control-plane.sh and sat 4 minutes
on the shared build's lock, though it never runs helm."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from scheduler.kube.controlplane import binaries, cluster
from scheduler.kube.controlplane.cluster import LocalControlPlane


def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *names: str) -> Path:
    """A cache holding only `names`; a build, if one is started, is recorded instead of run."""
    bin_dir = tmp_path / "cache" / f"k8s-{binaries.K8S_VERSION}" / "bin"
    bin_dir.mkdir(parents=True)
    for name in names:
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("TESSERA_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    return bin_dir


def _no_build(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    built: list[str] = []

    def build(log: object) -> Path:
        built.append("build")
        raise binaries.BinariesNotFound("built")

    monkeypatch.setattr(binaries, "_run_build", build)
    return built


def test_dev_cluster_runs_with_the_binaries_it_starts_without_waiting_for_a_build(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = _cache(tmp_path, monkeypatch, "etcd", "kube-apiserver", "kwok")
    built = _no_build(monkeypatch)
    plane = LocalControlPlane(tmp_path / "plane", with_kwok=True)  # dev-cluster's default
    found = plane.binaries
    assert built == [] and found.kube_apiserver == bin_dir / "kube-apiserver" and found.kwok == bin_dir / "kwok"
    assert found.helm is None and found.kube_controller_manager is None


def test_a_component_it_runs_that_is_missing_is_still_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _cache(tmp_path, monkeypatch, "etcd", "kube-apiserver", "kwok")
    built = _no_build(monkeypatch)
    with pytest.raises(binaries.BinariesNotFound, match="built"):
        LocalControlPlane(tmp_path / "plane", with_kwok=True, with_controller_manager=True).binaries
    assert built == ["build"]


def test_the_test_suites_lookup_still_wants_every_tool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """find_binaries() without a list (the e2e session's, helm for the chart's tests) builds when any is missing."""
    _cache(tmp_path, monkeypatch, "etcd", "kube-apiserver", "kwok")
    built = _no_build(monkeypatch)
    with pytest.raises(binaries.BinariesNotFound):
        binaries.find_binaries()
    assert built == ["build"] and cluster.find_binaries is binaries.find_binaries  # type: ignore[attr-defined]  # cluster's own import of it


def test_an_unknown_name_is_refused_naming_the_known_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`needed=("kube-apiservr",)` raised a bare KeyError('kube-apiservr') from deep in the lookup:
    a typo reads as a crash. It is a ValueError naming the tools it may ask for, before any
    lookup or build, whether the cache or KUBEBUILDER_ASSETS would answer."""
    bin_dir = _cache(tmp_path, monkeypatch, *binaries.EVERY_TOOL)
    built = _no_build(monkeypatch)
    known = "etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kwok, helm"
    with pytest.raises(ValueError, match=f"^unknown binary 'kube-apiservr' in needed: known are {known}$"):
        binaries.find_binaries(needed=("etcd", "kube-apiservr"))
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(bin_dir))
    with pytest.raises(ValueError, match="unknown binary 'kubelet'"):
        binaries.find_binaries(needed=("kubelet",))
    assert built == []


@pytest.mark.parametrize(("returncode", "said"), [
    (-15, "was killed by SIGTERM"),
    (-2, "was killed by SIGINT"),
    (2, "failed with exit status 2"),
])
def test_a_failed_build_names_the_signal_that_stopped_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, returncode: int, said: str) -> None:
    """An interrupted build said `failed with exit status -15`: subprocess's negative code is a signal."""
    script = tmp_path / "build-control-plane.sh"
    script.write_text("#!/bin/sh\n")
    monkeypatch.setattr(binaries, "build_script", lambda: script)
    monkeypatch.setattr("scheduler.kube.controlplane.binaries.shutil.which", lambda name: "/usr/bin/go")
    monkeypatch.setattr("scheduler.kube.controlplane.binaries.subprocess.run", lambda *a, **k: subprocess.CompletedProcess(a, returncode, b"", None))
    with pytest.raises(binaries.BinariesNotFound) as raised:
        binaries._run_build(None)
    assert str(raised.value) == f"{script} {said}"
