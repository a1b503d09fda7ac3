"""Where the control-plane binaries come from.

Why this lookup order: ``KUBEBUILDER_ASSETS`` is the envtest convention, so a developer who
already has ``setup-envtest`` binaries can point at them (docs/design.md §6). Otherwise we use the
version-pinned cache that ``hack/build-control-plane.sh`` fills from the Go module proxy (there is
no other way to get kube-apiserver on these machines), and build it once when it is missing.
Nothing is ever written inside the repository.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

__all__ = [
    "EVERY_TOOL",
    "K8S_VERSION",
    "BinariesNotFound",
    "ControlPlaneBinaries",
    "build_script",
    "default_bin_dir",
    "find_binaries",
]

K8S_VERSION = "v1.36.3"

_REQUIRED = ("etcd", "kube-apiserver")
_OPTIONAL = ("kube-scheduler", "kube-controller-manager", "kwok", "helm")
EVERY_TOOL = _REQUIRED + _OPTIONAL


class BinariesNotFound(RuntimeError):
    """Neither ``KUBEBUILDER_ASSETS`` nor the cache has the binaries, and building failed."""


@dataclass(frozen=True)
class ControlPlaneBinaries:
    etcd: Path
    kube_apiserver: Path
    kube_scheduler: Path | None
    kube_controller_manager: Path | None
    kwok: Path | None = None
    # Not a control-plane component: the tests render and lint deploy/helm with it, and the
    # cache is where every pinned tool of the test suite lives.
    helm: Path | None = None
    # Never needed nor built by default (WITH_KUBECTL=1 builds it): dev-cluster names it for a
    # user who has no kubectl of their own.
    kubectl: Path | None = None


def _repo_root() -> Path:
    # scheduler/kube/controlplane/binaries.py -> repository root
    return Path(__file__).resolve().parents[3]


def build_script() -> Path:
    return _repo_root() / "hack" / "build-control-plane.sh"


def default_bin_dir() -> Path:
    """``$TESSERA_CACHE/k8s-<version>/bin``; ``TESSERA_CACHE`` defaults to ``~/.cache/tessera``."""
    cache = os.environ.get("TESSERA_CACHE") or str(Path.home() / ".cache" / "tessera")
    return Path(cache) / f"k8s-{K8S_VERSION}" / "bin"


def _executable(directory: Path, name: str) -> Path | None:
    path = directory / name
    return path if path.is_file() and os.access(path, os.X_OK) else None


def _from_dir(directory: Path, wanted: Iterable[str]) -> ControlPlaneBinaries | None:
    """The binaries in `directory`, None unless it has etcd, kube-apiserver and every one of `wanted`."""
    found = {name: _executable(directory, name) for name in EVERY_TOOL}
    if any(found[name] is None for name in (*_REQUIRED, *wanted)):
        return None
    etcd, apiserver = found["etcd"], found["kube-apiserver"]
    assert etcd is not None and apiserver is not None
    return ControlPlaneBinaries(
        etcd=etcd,
        kube_apiserver=apiserver,
        kube_scheduler=found["kube-scheduler"],
        kube_controller_manager=found["kube-controller-manager"],
        kwok=found["kwok"],
        helm=found["helm"],
        kubectl=_executable(directory, "kubectl"),
    )


def _how_it_ended(returncode: int) -> str:
    """subprocess reports a signal as a negative code: an interrupted build read `exit status -15`."""
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"failed with exit status {returncode}"


def _run_build(log: IO[bytes] | None) -> Path:
    script = build_script()
    if not script.is_file():
        raise BinariesNotFound(f"build script {script} is missing")
    if shutil.which("go") is None:
        raise BinariesNotFound("the Go toolchain ('go') is not on PATH, so the binaries cannot be built")
    # one build at a time per cache: the script locks it itself (also when run by hand)
    proc = subprocess.run(
        ["bash", str(script)],
        stdout=subprocess.PIPE,
        stderr=log if log is not None else None,
        env={**os.environ, "K8S_VERSION": K8S_VERSION},
        check=False,
    )
    if proc.returncode != 0:
        raise BinariesNotFound(f"{script} {_how_it_ended(proc.returncode)}")
    lines = proc.stdout.decode().strip().splitlines()
    if not lines:
        raise BinariesNotFound(f"{script} printed no binary directory")
    return Path(lines[-1])


def find_binaries(*, build: bool = True, build_log: IO[bytes] | None = None,
                  needed: Iterable[str] = EVERY_TOOL) -> ControlPlaneBinaries:
    """Locate etcd, kube-apiserver and (if present) kube-scheduler / kube-controller-manager / kwok / helm.

    ``KUBEBUILDER_ASSETS`` wins when set and must hold etcd and kube-apiserver. Otherwise the
    cache (``default_bin_dir()``) is used; when it lacks etcd, kube-apiserver or any of ``needed``
    (by default every tool: the test suite's set, helm for the chart's tests) and ``build`` is
    true, ``hack/build-control-plane.sh`` runs. A caller that runs fewer names only those
    (`LocalControlPlane`: the components it starts): an SRE's `tessera dev-cluster` with helm not
    yet in the cache ran the build and waited 4 minutes on the shared build's lock for a tool it
    never runs. A cold build takes about 6 minutes on 2 idle cores, up to 30 on a busy machine;
    its progress goes to ``build_log`` or, by default, to our stderr. Raises
    :class:`BinariesNotFound` with the reason when nothing usable is found, and ValueError
    naming the known tools when ``needed`` names another (a typo fails at once, whichever
    directory would have answered, not as a KeyError from the lookup).
    """
    needed = tuple(needed)  # read twice: a generator would be spent by the check
    unknown = [name for name in needed if name not in EVERY_TOOL]
    if unknown:
        raise ValueError(f"unknown binary {', '.join(map(repr, unknown))} in needed: "
                         f"known are {', '.join(EVERY_TOOL)}")
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    if assets:
        found = _from_dir(Path(assets), ())
        if found is None:
            raise BinariesNotFound(
                f"KUBEBUILDER_ASSETS={assets} must contain executable etcd and kube-apiserver"
            )
        return found

    cached = _from_dir(default_bin_dir(), needed)
    if cached is not None:
        return cached
    if not build:
        raise BinariesNotFound(
            f"control-plane binaries not found in {default_bin_dir()}; "
            f"run 'bash {build_script()}' or set KUBEBUILDER_ASSETS"
        )
    bin_dir = _run_build(build_log)
    built = _from_dir(bin_dir, ())
    if built is None:
        raise BinariesNotFound(f"{build_script()} finished but {bin_dir} lacks etcd/kube-apiserver")
    return built
