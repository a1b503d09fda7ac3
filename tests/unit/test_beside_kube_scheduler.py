"""A configuration that takes kube-scheduler's own scheduler name or Lease.

kube-scheduler accepts both, of course: `default-scheduler` is its profile name
(k8s.io/api core/v1 DefaultSchedulerName, the name the apiserver gives every pod without
spec.schedulerName) and kube-system/kube-scheduler its Lease (kubernetes
pkg/scheduler/apis/config/v1/defaults.go: SchedulerDefaultLockObjectNamespace/Name). Tessera runs
beside kube-scheduler, where either is a fight: both would bind the same pods, or whichever holds
the Lease keeps the other from ever leading — with Tessera holding it, nothing in the cluster but
Tessera's own pods is scheduled. Second schedulers keep out of the way by default: the
scheduler-plugins chart (manifests/install/charts/as-a-second-scheduler) names its profile
`scheduler-plugins-scheduler` and turns leader election off, Volcano names its lock after its
own scheduler name (`volcano`). Tessera's parser accepts such a file (it is a valid
KubeSchedulerConfiguration, and `tessera simulate` may replay with it), `tessera simulate` says
what `tessera run` would refuse, and `tessera run` refuses it unless told
`--replace-default-scheduler` (Tessera is the cluster's only scheduler), then logs a warning.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
import yaml

from scheduler import cli
from scheduler.api.config import load_config, parse_config

V1 = "kubescheduler.config.k8s.io/v1"
DEMO = Path(__file__).resolve().parents[2] / "examples" / "tfjob-demo.jsonl"
NAME_CLASH = ('schedulerName "default-scheduler" is kube-scheduler\'s (every pod without spec.schedulerName has it): '
              "both schedulers would bind those pods; use a name of Tessera's own (default tessera)")
LEASE_CLASH = ("leaderElection's Lease kube-system/kube-scheduler is kube-scheduler's: whichever holds it keeps "
               "the other from leading, and that one schedules nothing; use a Lease of Tessera's own "
               "(default kube-system/tessera)")


def _raw(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": V1, "kind": "KubeSchedulerConfiguration", **fields}


def _file(tmp_path: Path, **fields: Any) -> str:
    """A file whose profiles (one, `tessera`, unless `profiles` is given) score GPUs: a profile
    that does not is said at start-up too (test_gpu_scoring_notice.py), which is not this file's
    matter."""
    packing = {"plugins": {"score": {"enabled": [{"name": "TesseraFragmentation"}]}}}
    fields["profiles"] = [{**packing, **profile} for profile in fields.get("profiles", [{}])]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(_raw(**fields)))
    return str(path)


@pytest.mark.parametrize(("fields", "clashes"), [
    pytest.param({}, [], id="defaults"),
    pytest.param({"profiles": [{"schedulerName": "default-scheduler"}]}, [NAME_CLASH], id="name"),
    pytest.param({"profiles": [{"schedulerName": "tessera"}, {"schedulerName": "default-scheduler"}]}, [NAME_CLASH],
                 id="second-profile"),
    pytest.param({"leaderElection": {"resourceName": "kube-scheduler"}}, [LEASE_CLASH], id="lease"),
    pytest.param({"leaderElection": {"resourceName": "kube-scheduler", "resourceNamespace": "gpu"}}, [],
                 id="lease-in-another-namespace"),
    pytest.param({"leaderElection": {"leaderElect": False, "resourceName": "kube-scheduler"}}, [],
                 id="no-election"),
    pytest.param({"profiles": [{"schedulerName": "default-scheduler"}],
                  "leaderElection": {"resourceName": "kube-scheduler"}}, [NAME_CLASH, LEASE_CLASH], id="both"),
])
def test_the_configuration_says_what_it_shares_with_kube_scheduler(fields: dict[str, Any],
                                                                   clashes: list[str]) -> None:
    assert list(parse_config(_raw(**fields), "t.yaml").kube_scheduler_clashes()) == clashes


def test_the_legacy_forms_name_counts_too_and_the_builtin_default_clashes_with_nothing() -> None:
    raw = {"apiVersion": "kubescheduler.config.k8s.io/v1alpha1", "kind": "KubeSchedulerConfiguration",
           "schedulerName": "default-scheduler"}
    assert list(parse_config(raw, "t.yaml").kube_scheduler_clashes()) == [NAME_CLASH]
    assert not load_config(None).kube_scheduler_clashes()


@pytest.fixture
def _started(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """`tessera run`'s start-up after the checks: records the configuration instead of connecting."""
    from scheduler.kube import run_cli

    started: list[str] = []

    async def main(args: Any, config: Any, tls: Any) -> int:
        started.append(config.source)
        return 0

    monkeypatch.setattr(run_cli, "_main", main)
    monkeypatch.setenv("TESSERA_LOG_FORMAT", "json")
    yield started
    structlog.reset_defaults()


def test_run_refuses_kube_schedulers_name_and_lease(tmp_path: Path, _started: list[str],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    path = _file(tmp_path, profiles=[{"schedulerName": "default-scheduler"}],
                 leaderElection={"resourceName": "kube-scheduler"})
    assert cli.main(["run", "--config", path]) == 2
    assert not _started
    remedy = ", or pass --replace-default-scheduler if no kube-scheduler runs"
    assert capsys.readouterr().err.splitlines() == [
        f"tessera: refusing to run beside kube-scheduler: {path}: {NAME_CLASH}{remedy}",
        f"tessera: refusing to run beside kube-scheduler: {path}: {LEASE_CLASH}{remedy}",
    ]


def test_run_replaces_kube_scheduler_when_told_and_logs_a_warning(tmp_path: Path, _started: list[str],
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = _file(tmp_path, profiles=[{"schedulerName": "default-scheduler"}])
    assert cli.main(["run", "--config", path, "--replace-default-scheduler"]) == 0
    assert _started == [path]
    (line,) = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert (line["event"], line["level"], line["clashes"]) == ("tessera.replacing_kube_scheduler", "warning",
                                                               [NAME_CLASH])


def test_run_starts_quietly_with_a_name_and_lease_of_its_own(tmp_path: Path, _started: list[str],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = _file(tmp_path)
    assert cli.main(["run", "--config", path]) == 0
    assert _started == [path] and capsys.readouterr().err == ""


def test_simulate_says_what_run_would_refuse(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`tessera simulate --config FILE` is how deploy/README.md tells operators to check a
    configuration: it replays (offline, nothing to fight) and says why `tessera run` would not start."""
    path = _file(tmp_path, leaderElection={"resourceName": "kube-scheduler"})
    assert cli.main(["simulate", str(DEMO), "--config", path, "-o", "table"]) == 0
    assert capsys.readouterr().err.splitlines() == [
        f"tessera: warning: {path}: {LEASE_CLASH}; `tessera run` refuses this unless --replace-default-scheduler"]


async def test_what_if_says_what_run_would_refuse_as_simulate_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A user's trial: `kubectl tessera what-if --config FILE` with a profile named
    `default-scheduler` said nothing, where `tessera simulate` warns. Both say the same line."""
    from scheduler.kubectl import cli as kubectl_cli
    from scheduler.kubectl.target import Target
    from scheduler.sim import builders as b
    from tests.helpers import NotFoundApi, fake_listing

    path = _file(tmp_path, profiles=[{"schedulerName": "default-scheduler"}])
    monkeypatch.setattr(kubectl_cli, "_listing", fake_listing(NotFoundApi(), [b.node("n1", gpus=8)]))
    args = kubectl_cli.build_parser().parse_args(["what-if", "--config", path, "-o", "json"])
    assert await kubectl_cli._what_if(args, Target(None, None, "default")) == 0
    assert capsys.readouterr().err.splitlines() == [
        f"warning: {path}: {NAME_CLASH}; `tessera run` refuses this unless --replace-default-scheduler"]
