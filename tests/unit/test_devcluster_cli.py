"""`tessera dev-cluster` argument and directory checks that must happen before anything starts.

A new user ran the README's command twice on the same --dir: the second one rewrote the first's
certificates, etcd data and kubeconfig under it, and the running `tessera run` got 401 on every
call. A bad --gpu-memory was found only by the apiserver after the whole plane had started."""

from __future__ import annotations

import argparse
import logging
import signal
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from scheduler.kube.controlplane import cli
from scheduler.kube.controlplane.binaries import build_script, default_bin_dir
from scheduler.kube.controlplane.fakenodes import fake_nodes


def _args(directory: Path | None, **overrides: object) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers())
    args = parser.parse_args(["dev-cluster", *(["--dir", str(directory)] if directory else [])])
    for key, value in overrides.items():
        setattr(args, key, value)
    return args


class NoPlane:
    """Fails the test if the command gets as far as starting a control plane."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise AssertionError("the control plane was started")


def test_a_directory_in_use_by_another_dev_cluster_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cli, "LocalControlPlane", NoPlane)
    (tmp_path / "kubeconfig").write_text("the running cluster's")
    with cli.DirectoryLock(tmp_path):  # what the running dev-cluster holds
        assert cli.run(_args(tmp_path)) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path} is in use by another dev-cluster (pid " in err and "--dir" in err
    assert (tmp_path / "kubeconfig").read_text() == "the running cluster's"


def test_the_lock_goes_with_its_holder(tmp_path: Path) -> None:
    with cli.DirectoryLock(tmp_path):
        pass
    with cli.DirectoryLock(tmp_path):  # released: a later dev-cluster may use the directory
        pass


@pytest.mark.parametrize("memory", ["32GiB", "lots", "-1Gi"])
def test_a_bad_gpu_memory_is_refused_before_anything_starts(memory: str, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cli, "LocalControlPlane", NoPlane)
    assert cli.run(_args(tmp_path, gpu_memory=memory)) == 2
    assert f"--gpu-memory {memory!r}" in capsys.readouterr().err


def test_a_dir_that_cannot_be_used_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Review: --dir naming a file gave a FileExistsError traceback once the lock came first."""
    monkeypatch.setattr(cli, "LocalControlPlane", NoPlane)
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    assert cli.run(_args(not_a_dir)) == 2
    err = capsys.readouterr().err
    assert err == f"dev-cluster: cannot use --dir {not_a_dir}: it is not a directory\n"


def test_a_free_directory_gets_as_far_as_starting_the_plane(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lock taken, the command goes on (and lets go of the lock on the way out)."""
    monkeypatch.setattr(cli, "LocalControlPlane", NoPlane)
    with pytest.raises(AssertionError, match="the control plane was started"):
        cli.run(_args(tmp_path))
    with cli.DirectoryLock(tmp_path):
        pass


class RecordingPlane:
    """Records the fake nodes asked for, then (once they are made) stops the command as a
    component failing would."""

    made: list[tuple[int, int, str, str]] = []

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.kubeconfig = "unused"

    def start(self) -> None:
        pass

    def add_fake_gpu_nodes(self, nodes: int, gpus: int, model: str, memory: str,
                           nvlink_groups: tuple[int, ...] = ()) -> None:
        RecordingPlane.made.append((nodes, gpus, model, memory))

    def log_files(self) -> dict[str, Path]:
        raise RuntimeError("enough")

    def stop(self) -> None:
        pass


@pytest.mark.parametrize(("given", "memory"), [
    (["--gpu-model", "T4"], "16Gi"), (["--gpu-model", "a100"], "80Gi"), ([], "32Gi"),
    (["--gpu-model", "RTX-6000"], "32Gi"), (["--gpu-model", "T4", "--gpu-memory", "15Gi"], "15Gi"),
])
def test_fake_gpus_get_their_models_memory_unless_told(given: list[str], memory: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A new user's trial: `--gpu-model T4` (which the README asks for the shipped T4 slicing
    example) made 32Gi T4s, and `--gpu-model A100` 32Gi A100s that the shipped `a100-80g` class
    (memory Gt 64Gi) does not match: the memory was 32Gi whatever the model."""
    monkeypatch.setattr(cli, "LocalControlPlane", RecordingPlane)
    RecordingPlane.made.clear()
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers())
    args = parser.parse_args(["dev-cluster", "--dir", str(tmp_path), "--nodes", "1", *given])
    assert cli.run(args) == 1
    assert RecordingPlane.made == [(1, 8, next(iter(given[1:2]), "V100"), memory)]


@pytest.mark.parametrize(("nodes", "gpus", "phrase"), [
    (1, 4, "1 fake node with 4 V100 GPUs"), (1, 1, "1 fake node with 1 V100 GPU"),
    (2, 4, "2 fake nodes with 4 V100 GPUs each"), (3, 1, "3 fake nodes with 1 V100 GPU each"),
])
def test_the_fake_nodes_are_counted_in_plain_english(nodes: int, gpus: int, phrase: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    """A new user's trial: `--nodes 1` printed `creating 1 fake node with 4 V100 GPUs each` (and
    `created ...` the same): "each" of one node. The plane's own `created` line says it the same way."""
    monkeypatch.setattr(cli, "LocalControlPlane", RecordingPlane)
    caplog.set_level(logging.INFO, logger="scheduler.kube")
    args = _args(tmp_path, nodes=nodes, gpus_per_node=gpus)
    assert cli.run(args) == 1
    assert f"creating {phrase}" in caplog.messages
    assert fake_nodes([(nodes, "V100")], gpus) == phrase


def _made(tmp_path: Path, given: list[str]) -> list[tuple[int, int, str, str]]:
    """The fake nodes `tessera dev-cluster GIVEN` asks its plane for."""
    RecordingPlane.made.clear()
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers())
    assert cli.run(parser.parse_args(["dev-cluster", "--dir", str(tmp_path), *given])) == 1
    return RecordingPlane.made


@pytest.mark.parametrize(("given", "made"), [
    (["--nodes", "4", "--gpu-model", "V100,T4"], [(2, 8, "V100", "32Gi"), (2, 8, "T4", "16Gi")]),
    (["--nodes", "3", "--gpu-model", "V100,T4"], [(2, 8, "V100", "32Gi"), (1, 8, "T4", "16Gi")]),
    (["--nodes", "5", "--gpu-model", "A100,V100,T4", "--gpus-per-node", "4"],
     [(2, 4, "A100", "80Gi"), (2, 4, "V100", "32Gi"), (1, 4, "T4", "16Gi")]),
    (["--nodes", "4", "--gpu-model", "V100,T4", "--gpu-memory", "24Gi"], [(2, 8, "V100", "24Gi"), (2, 8, "T4", "24Gi")]),
])
def test_a_list_of_models_goes_round_the_nodes_each_with_its_memory(given: list[str],
                                                                    made: list[tuple[int, int, str, str]],
                                                                    tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A new user's trial: the shipped examples need V100s (`pod.yaml`) and T4s (`shared-pod.yaml`),
    and `--gpu-model` took one model, so following them meant restarting dev-cluster (all state
    lost) half-way. Node i gets model i mod len(list); `--gpu-memory` applies to them all."""
    monkeypatch.setattr(cli, "LocalControlPlane", RecordingPlane)
    assert _made(tmp_path, given) == made


@pytest.mark.parametrize(("nodes", "phrase"), [
    (4, "creating 2 fake nodes with 8 V100 GPUs each and 2 with 8 T4 GPUs each"),
    (3, "creating 2 fake nodes with 8 V100 GPUs each and 1 with 8 T4 GPUs"),
    (2, "creating 1 fake node with 8 V100 GPUs and 1 with 8 T4 GPUs"),
])
def test_the_start_up_line_counts_the_nodes_of_each_model(nodes: int, phrase: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(cli, "LocalControlPlane", RecordingPlane)
    caplog.set_level(logging.INFO, logger="scheduler.kube")
    _made(tmp_path, ["--nodes", str(nodes), "--gpu-model", "V100,T4"])
    assert phrase in caplog.messages


@pytest.mark.parametrize(("given", "problem"), [
    (["--gpu-model", "V100,"], "--gpu-model 'V100,' names '' (each model is a label value on its nodes): at most 63 "
                               "letters, digits, '-', '_' or '.', starting and ending with a letter or digit; "
                               "e.g. A100-80GB, or V100,T4 for two"),
    (["--gpu-model", "V100 T4"], "--gpu-model 'V100 T4' names 'V100 T4' (each model is a label value on its nodes): "
                                 "at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or "
                                 "digit; e.g. A100-80GB, or V100,T4 for two"),
    (["--gpu-model", "V100,T4,v100"], "--gpu-model 'V100,T4,v100' names V100 twice"),
    (["--nodes", "1", "--gpu-model", "V100,T4"], "--nodes 1 leaves T4 without a node: give at least one node per "
                                                 "model of --gpu-model (2)"),
])
def test_a_model_list_that_cannot_be_made_is_refused_before_anything_starts(given: list[str], problem: str,
                                                                             tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch,
                                                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cli, "LocalControlPlane", NoPlane)
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers())
    assert cli.run(parser.parse_args(["dev-cluster", "--dir", str(tmp_path), *given])) == 2
    assert capsys.readouterr().err == f"dev-cluster: {problem}\n"


class StartedPlane:
    """Starts at once with binaries in `bin_dir`, then reports a component dead (the command stops)."""

    bin_dir = Path()

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.kubeconfig = "/tmp/dev/kubeconfig"
        kubectl = self.bin_dir / "kubectl"
        self.binaries = SimpleNamespace(kube_apiserver=self.bin_dir / "kube-apiserver",
                                        kubectl=kubectl if kubectl.exists() else None)

    def start(self) -> None:
        pass

    def log_files(self) -> dict[str, Path]:
        return {}

    def dead_components(self) -> list[str]:
        return ["etcd"]

    def stop(self) -> None:
        pass


@pytest.mark.parametrize(("has_kubectl", "on_path"), [(True, False), (True, True), (False, False), (False, True)])
def test_the_start_up_lines_say_where_kubectl_is(has_kubectl: bool, on_path: bool, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    """A new user's trial: dev-cluster said `export KUBECONFIG=...` but not where a kubectl was;
    the README's `WITH_KUBECTL=1` build puts one beside the control-plane binaries, and a user
    without kubectl on PATH had to find it."""
    cached, elsewhere = tmp_path / "bin", tmp_path / "path"
    for directory, present in ((cached, has_kubectl), (elsewhere, on_path)):
        directory.mkdir()
        if present:
            (directory / "kubectl").write_text("#!/bin/sh\n")
            (directory / "kubectl").chmod(0o755)
    monkeypatch.setenv("PATH", str(elsewhere))
    monkeypatch.setattr(StartedPlane, "bin_dir", cached)
    monkeypatch.setattr(cli, "LocalControlPlane", StartedPlane)
    caplog.set_level(logging.INFO, logger="scheduler.kube")
    assert cli.run(_args(tmp_path / "dev")) == 1
    kubectl = cached / "kubectl"
    named = f"kubectl beside the control-plane binaries: {kubectl}"
    expected = {
        (True, False): [f"{named} (none on PATH: alias kubectl={kubectl})"],
        (True, True): [named],
        (False, False): [f"no kubectl on PATH: `WITH_KUBECTL=1 bash {build_script()}` builds kubectl v1.36.3 into "
                         f"{default_bin_dir()}"],
        (False, True): [],
    }[has_kubectl, on_path]
    assert [m for m in caplog.messages if "kubectl" in m] == expected


def test_a_stop_signal_that_lands_inside_the_wait_ends_it() -> None:
    """The SIGKILL e2e (`test_a_dev_cluster_that_dies_leaves_no_control_plane_running`) hung once in
    ~15 runs: the second dev-cluster got SIGINT right after its ready line and never said
    "stopping". Its handler called `threading.Event.set()`; a Python signal handler runs in the main
    thread between two bytecodes — possibly inside `Event.wait`, holding the Event's non-reentrant
    lock — and `set()` then waits for that lock forever. The stop request takes no lock: here the
    "signal" lands in the middle of the wait itself (as the handler would run there), and the wait
    must end at once with the request seen."""
    stop = cli.StopRequest()
    original = time.sleep  # cli's wait sleeps through the time module
    landed: list[float] = []

    def sleep_then_signal(seconds: float) -> None:
        if not landed:
            landed.append(seconds)
            stop.request(signal.SIGINT, None)  # the handler, run mid-wait on the waiting thread
        original(min(seconds, 0.01))

    time.sleep = sleep_then_signal  # type: ignore[assignment]  # a float-only stand-in
    try:
        began = time.monotonic()
        assert stop.wait(5.0) and time.monotonic() - began < 1.0
    finally:
        time.sleep = original
    assert stop.signals == [signal.SIGINT]
    assert not cli.StopRequest().wait(0.05)  # nothing asked: the wait times out


class RestartedPlane(StartedPlane):
    """Gets SIGUSR1 (through the handler dev-cluster installed) at its first health check, counts
    the kube-apiserver restarts, then reports a component dead so the command stops."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.server = "https://127.0.0.1:6443"
        self.checks = 0
        self.restarts = 0
        RestartedPlane.last = self

    last: RestartedPlane | None = None

    def restart_apiserver(self) -> None:
        self.restarts += 1

    def dead_components(self) -> list[str]:
        self.checks += 1
        if self.checks == 1:
            handler = signal.getsignal(signal.SIGUSR1)
            assert callable(handler), f"SIGUSR1 is not handled ({handler!r}): it would end dev-cluster"
            handler(signal.SIGUSR1, None)  # `kill -USR1 <dev-cluster pid>`, as it lands
            return []
        return ["etcd"]


def test_sigusr1_restarts_the_apiserver_and_keeps_the_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    """SRE trial: dev-cluster tears the whole plane down when any component exits, so the
    runbook's apiserver restart (operations.md) could not be rehearsed on it. SIGUSR1 restarts
    kube-apiserver on the same port with etcd's data kept (`LocalControlPlane.restart_apiserver`,
    as the e2e tests do), the rest of the plane left running; the handler goes with the command."""
    before = signal.getsignal(signal.SIGUSR1)
    monkeypatch.setattr(cli, "LocalControlPlane", RestartedPlane)
    caplog.set_level(logging.INFO, logger="scheduler.kube")
    assert cli.run(_args(tmp_path / "dev")) == 1  # ended by the component reported dead after
    plane = RestartedPlane.last
    assert plane is not None and (plane.restarts, plane.checks) == (1, 2)
    assert "kube-apiserver restarted on the same address: https://127.0.0.1:6443" in caplog.messages
    assert signal.getsignal(signal.SIGUSR1) == before
