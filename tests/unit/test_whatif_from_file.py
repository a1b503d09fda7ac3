"""Capacity questions without creating anything (a day-2 trial, finding C): `what-if` had no `-f
POD` ("would an 8-GPU job fit" meant creating it), and a pod parked behind a schedulingGate as a
probe was skipped — what-if said "No pending pods to place" and `explain` only that it was gated."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from scheduler.kube.http import Response
from scheduler.kubectl import cli, explain as explaining
from scheduler.kubectl.probe_pods import ProbeError, read_probes
from scheduler.kubectl.target import Target
from scheduler.sim import builders as b
from tests.helpers import BINPACK, config, fake_listing

POD = """
apiVersion: v1
kind: Pod
metadata: {name: probe8}
spec:
  schedulerName: tessera
  containers:
  - name: main
    image: x
    resources: {limits: {nvidia.com/gpu: 8}}
"""
JOB = """
apiVersion: batch/v1
kind: Job
metadata: {name: train, namespace: ml}
spec:
  parallelism: 3
  completions: 2
  template:
    spec:
      schedulerName: tessera
      restartPolicy: Never
      containers:
      - {name: main, image: x, resources: {limits: {nvidia.com/gpu: 2}}}
"""


class _Api:
    async def request(self, method: str, path: str, **_: Any) -> Response:
        return Response(404, orjson.dumps({"kind": "Status", "code": 404}))


def _cluster() -> list[dict[str, Any]]:
    """An 8-GPU node with 1 in use and a 4-GPU node; `waiting` (1 GPU) already pending."""
    return [b.node("big", gpus=8), b.node("small", gpus=4),
            b.pod("running", node_name="big", limits={"nvidia.com/gpu": 1}, phase="Running"),
            b.pod("waiting", limits={"nvidia.com/gpu": 1})]


async def _what_if(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], objs: list[dict[str, Any]],
                   *argv: str) -> tuple[int, str]:
    monkeypatch.setattr(cli, "_listing", fake_listing(_Api(), objs))
    args = cli.build_parser().parse_args(["what-if", "--config", BINPACK, *argv])
    status = await cli._what_if(args, Target(None, None, "default"))
    return status, capsys.readouterr().out


async def test_what_if_places_the_pods_of_a_file_without_creating_them(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "probe.yaml").write_text(POD)
    objs = _cluster()
    _, out = await _what_if(monkeypatch, capsys, objs, "-f", str(tmp_path / "probe.yaml"))
    lines = out.splitlines()
    assert lines[0].split() == ["POD", "NODE", "DEVICES", "RESULT"]
    # the pending pod goes first (binpack: onto big), so 7 GPUs are left there: 8 cannot fit anywhere
    assert lines[1].startswith("default/probe8") and "Insufficient nvidia.com/gpu" in lines[1]
    assert len([line for line in lines if line.startswith("default/")]) == 1  # only the file's pods are listed
    assert (f"1 pod from {tmp_path / 'probe.yaml'} (not created): 0 would be placed, 1 would stay pending "
            "(configuration config/binpack.yaml; a dry run, nothing was written; 1 pending pod already in the "
            "cluster replayed ahead of them, not listed)") in out
    assert [o for o in objs if o["kind"] == "Pod"] == [o for o in _cluster() if o["kind"] == "Pod"]  # nothing added

    # without the pending pod ahead of it, it fits the 8-GPU node... only if that node is empty
    _, out = await _what_if(monkeypatch, capsys, [b.node("big", gpus=8)], "-f", str(tmp_path / "probe.yaml"),
                            "-o", "json")
    doc = orjson.loads(out)
    assert [(o["pod"], o["node"]) for o in doc["outcomes"]] == [("default/probe8", "big")]
    assert doc["from_file"] == str(tmp_path / "probe.yaml")


async def test_a_job_in_the_file_becomes_the_pods_its_controller_would_start(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(JOB)
    _, out = await _what_if(monkeypatch, capsys, _cluster(), "-f", str(tmp_path / "job.yaml"), "-o", "json")
    doc = orjson.loads(out)
    # min(parallelism 3, completions 2) pods, in the Job's namespace, both placed
    assert [o["pod"] for o in doc["outcomes"]] == ["ml/train-0", "ml/train-1"]
    assert all(o["node"] in ("big", "small") for o in doc["outcomes"])


async def test_a_file_pod_that_already_exists_or_a_bad_file_is_an_error(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "dup.yaml").write_text(POD.replace("probe8", "waiting"))
    # a new user's trial: the bare refusal left them guessing what to do (the pod had finished)
    with pytest.raises(cli.CommandError, match="already in the cluster: Pod default/waiting; what-if -f asks what "
                       "creating them would do, and the apiserver would refuse a name in use: delete the existing "
                       "object, give the file's objects other names, or pass --rename to place copies of them named "
                       "NAME-what-if"):
        await _what_if(monkeypatch, capsys, _cluster(), "-f", str(tmp_path / "dup.yaml"))
    # a Service makes no pods: skipped, and a file of nothing else has no pods to place
    (tmp_path / "svc.yaml").write_text("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n")
    with pytest.raises(cli.CommandError, match="svc.yaml: no Pod or workload in it \\(only Service default/s, which "
                                               "makes no pods\\): what-if -f places pods \\(it takes Pods, "
                                               "Deployments, ReplicaSets, StatefulSets, Jobs"):
        await _what_if(monkeypatch, capsys, _cluster(), "-f", str(tmp_path / "svc.yaml"))
    # a kind that may make pods what-if cannot know of stays an error
    (tmp_path / "ds.yaml").write_text("apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d}\n")
    with pytest.raises(cli.CommandError, match="object 1 is a DaemonSet: what-if -f takes Pods, Deployments, "
                                               "ReplicaSets, StatefulSets, Jobs"):
        await _what_if(monkeypatch, capsys, _cluster(), "-f", str(tmp_path / "ds.yaml"))
    with pytest.raises(cli.CommandError, match="cannot read .*missing.yaml: No such file or directory"):
        await _what_if(monkeypatch, capsys, _cluster(), "-f", str(tmp_path / "missing.yaml"))


def test_file_pods_are_completed_as_the_apiserver_would() -> None:
    gated = POD.replace("spec:\n", "spec:\n  schedulingGates: [{name: probe}]\n", 1)
    [pod] = read_probes(gated, "probe.yaml", "team", None, 0.0)
    assert pod["metadata"]["namespace"] == "team" and pod["metadata"]["uid"]
    assert pod["metadata"]["creationTimestamp"] == "1970-01-01T00:00:00Z"
    assert "schedulingGates" not in pod["spec"] and pod["status"] == {"phase": "Pending"}
    [plain] = read_probes(POD.replace("  schedulerName: tessera\n", ""), "probe.yaml", "team", None, 0.0)
    assert plain["spec"]["schedulerName"] == "default-scheduler"
    listed = read_probes(f"kind: List\nitems:\n- {orjson.dumps(read_probes(POD, 'p', 'a', None, 0)[0]).decode()}\n",
                         "list.yaml", "a", None, 0.0)
    assert [p["metadata"]["name"] for p in listed] == ["probe8"]
    with pytest.raises(ProbeError, match='the namespace from the provided object "ml" does not match the namespace '
                                         '"dev"'):
        read_probes(JOB, "job.yaml", "dev", "dev", 0.0)


def test_explain_of_a_gated_pod_shows_the_dry_run_it_would_get_once_ungated() -> None:
    probe = b.pod("probe8", limits={"nvidia.com/gpu": 8}, spec_extra={"schedulingGates": [{"name": "probe"}]})
    objs = [b.node("big", gpus=8), b.node("small", gpus=4), probe]
    result = explaining.explain(objs, "default/probe8", config(BINPACK), [], 0.0)
    assert result is not None and result.ungated
    assert result.status == "has spec.schedulingGates (probe): no scheduler considers it until they are removed"
    assert result.dry_run is not None and result.dry_run.node == "big"
    text = explaining.render(result, 0.0)
    assert ("Dry run through the core with the configuration config/binpack.yaml, now, once its "
            "spec.schedulingGates are removed (they keep it out of every scheduler now) (nothing is written; "
            f"{explaining.FRESH}):\n"
            "  would go to big") in text
    # a pod that is not gated keeps its plain label
    free = explaining.explain([b.node("big", gpus=8), b.pod("p", limits={"nvidia.com/gpu": 1})], "default/p",
                              config(BINPACK), [], 0.0)
    assert free is not None and not free.ungated
    assert "now, as if it were next (nothing is written;" in explaining.render(free, 0.0)
