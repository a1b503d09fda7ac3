"""what-if for a capacity planner (a trial on a 38-node dev-cluster): "what if I add 8 nodes of
another GPU model" and "what if I remove a rack". `what-if -f node.yaml` answered `object 1 is a
Node: what-if -f takes Pods, ...` while its --help said objects of other kinds are "skipped with a
note". A file's Nodes (and the ExtendedResources `tessera dev-cluster` publishes for their GPUs)
are now capacity added for the replay, and --without-node / --without-nodes take nodes away: their
pods are replayed as pending and listed, each with the node it was on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from scheduler.kube.http import Response
from scheduler.kubectl import cli
from scheduler.kubectl.capacity import Capacity
from scheduler.kubectl.probe_pods import ProbeError, read_probes
from scheduler.kubectl.target import Target
from scheduler.kubectl.whatif import render, what_if
from scheduler.sim import builders as b
from tests.helpers import BINPACK, NotFoundApi, config, fake_listing, what_if_cli

OWNER = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": True}]


def _full_cluster() -> list[dict[str, Any]]:
    """n1 and n2 of 4 GPUs each, full; a pending pod wants 8."""
    return [b.node("n1", gpus=4, labels={"rack": "r1"}), b.node("n2", gpus=4, labels={"rack": "r2"}),
            b.pod("on-n1", limits={"nvidia.com/gpu": 4}, node_name="n1", phase="Running"),
            b.pod("on-n2", limits={"nvidia.com/gpu": 4}, node_name="n2", phase="Running"),
            b.pod("wants-8", limits={"nvidia.com/gpu": 8})]


def _h100(tmp_path: Path, devices: bool = False) -> Path:
    """A Node as `kubectl get node -o yaml` prints one, and with `devices` its ExtendedResources."""
    node = b.node("h100-0", gpus=8, labels={"nvidia.com/gpu.product": "H100"})
    for key in ("uid", "resourceVersion"):
        node["metadata"].pop(key, None)
    docs = [node, *(b.device("h100-0", i, model="H100", memory="80Gi") for i in range(8) if devices)]
    path = tmp_path / "h100.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


async def test_a_file_of_a_node_places_the_pending_pods_with_it(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status, out, err = await what_if_cli(monkeypatch, capsys, _full_cluster(), "-f", str(_h100(tmp_path)))
    assert status == 0, err
    assert out.splitlines()[1].split()[:4] == ["default/wants-8", "h100-0", "-", "placed"]
    assert "1 pending pod: 1 would be placed, 0 would stay pending" in out
    assert "Added:   1 node (not created): h100-0" in out.splitlines()
    assert "Now:    GPUs: 8 total, 8 in use" in out and "After:  GPUs: 16 total, 16 in use" in out


async def test_a_files_extended_resources_are_the_added_nodes_gpus(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A pod of the H100 class waits (no such GPU in the cluster): the file's devices are what it gets."""
    cluster = [*_full_cluster()[:4], b.resource_class("h100", match_labels={"model": "H100"}),
               b.pod("wants-h100", limits={"class.tessera.dev/h100": 2})]
    status, out, err = await what_if_cli(monkeypatch, capsys, cluster, "-f", str(_h100(tmp_path, True)), "-o", "json")
    assert status == 0, err
    doc = orjson.loads(out)
    [outcome] = doc["outcomes"]
    assert outcome["node"] == "h100-0" and len(outcome["devices"]) == 2
    assert all(device.startswith("h100-0.gpu-") for device in outcome["devices"])
    assert doc["added_nodes"] == ["h100-0"]


async def test_a_node_of_the_file_that_exists_is_refused_as_the_apiserver_would(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "n1.yaml"
    path.write_text(yaml.safe_dump(b.node("n1", gpus=4)))
    with pytest.raises(cli.CommandError, match="already in the cluster: Node n1;"):
        await what_if_cli(monkeypatch, capsys, _full_cluster(), "-f", str(path))


def test_a_node_the_core_cannot_read_is_an_error() -> None:
    bad = yaml.safe_dump({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "x"},
                          "spec": {"taints": [{"key": "k", "effect": "Sometimes"}]}})
    with pytest.raises(ProbeError, match=r"f.yaml: object 1: Node x is not a valid Node: Node.spec.taints\[0\]"):
        read_probes(bad, "f.yaml", "default", None, 0.0)


async def test_without_a_node_its_pods_are_replayed_as_pending_and_listed(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """n1 taken away (and an H100 node added): wants-8 and on-n1 compete for the added node; a
    DaemonSet's pod and a finished one go with n1, said, not replayed."""
    cluster = _full_cluster()
    cluster[2]["metadata"]["ownerReferences"] = OWNER
    cluster += [b.pod("agent", node_name="n1", phase="Running"), b.pod("done", node_name="n1", phase="Succeeded")]
    cluster[-2]["metadata"]["ownerReferences"] = [{**OWNER[0], "kind": "DaemonSet"}]
    status, out, err = await what_if_cli(monkeypatch, capsys, cluster, "-f", str(_h100(tmp_path)),
                                         "--without-node", "n1")
    assert status == 0, err
    rows = {line.split()[0]: line for line in out.splitlines()[1:3]}
    assert rows["default/on-n1"].endswith("(was on n1)")
    assert "default/wants-8" in rows
    assert "2 pending pods (1 of them from the nodes taken away): 1 would be placed, 1 would stay pending" in out
    assert ("Removed: 1 node (not deleted): n1; their 1 pod replayed as pending (RESULT says which node each was "
            "on): ") in out
    assert ("; 2 pods go with them, not re-created elsewhere (a DaemonSet's, or finished): default/agent, "
            "default/done") in out
    assert "After:  GPUs: 12 total, " in out  # n2's 4 and h100-0's 8


def test_without_a_node_the_replay_places_its_pods_elsewhere() -> None:
    """Room on n2 for on-n1: placed there, its row naming n1; the displaced pod is listed even
    outside -n's namespace (the planner asked for it)."""
    cluster = [b.node("n1", gpus=4), b.node("n2", gpus=8),
               b.pod("on-n1", namespace="team", limits={"nvidia.com/gpu": 4}, node_name="n1", phase="Running",
                     annotations={"tessera.dev/devices": "garbage", "tessera.dev/phase": "Allocated"})]
    result = what_if(cluster, config(), 0.0, namespace="default", capacity=Capacity(without=("n1",)))
    [outcome] = result.outcomes
    assert (outcome.pod, outcome.node, outcome.was_on) == ("team/on-n1", "n2", "n1")
    text = render(result)
    assert text.splitlines()[1].split() == ["team/on-n1", "n2", "-", "placed", "(was", "on", "n1)"]
    assert "Now:    GPUs: 12 total, 4 in use" in text and "After:  GPUs: 8 total, 4 in use" in text


async def test_without_a_node_that_does_not_exist_says_so_in_kubectls_words(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(cli.CommandError, match='--without-node: nodes "n9" not found'):
        await what_if_cli(monkeypatch, capsys, _full_cluster(), "--without-node", "n9")


class _NodesApi(NotFoundApi):
    """Answers the node list by label selector as the apiserver would for `rack=r1` (a fake: one
    selector known), and a parse error for anything else."""

    def __init__(self, nodes: list[dict[str, Any]]) -> None:
        self.nodes = nodes

    async def request(self, method: str, path: str, **kwargs: Any) -> Response:
        selector = dict(kwargs.get("query") or ()).get("labelSelector")
        if path != "/api/v1/nodes" or selector is None:
            return await super().request(method, path)
        if selector != "rack=r1":
            return Response(400, orjson.dumps({"kind": "Status", "code": 400, "message": "unable to parse requirement"}))
        return Response(200, orjson.dumps({"items": [node for node in self.nodes
                                                     if node["metadata"]["labels"].get("rack") == "r1"]}))


async def test_without_nodes_takes_away_those_the_selector_matches(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = _full_cluster()
    monkeypatch.setattr(cli, "_listing", fake_listing(_NodesApi(cluster[:2]), cluster))
    args = cli.build_parser().parse_args(["what-if", "--config", BINPACK, "--without-nodes", "rack=r1"])
    assert await cli._what_if(args, Target(None, None, "default")) == 0
    out = capsys.readouterr().out
    assert "Removed: 1 node (not deleted; --without-nodes rack=r1): n1;" in out
    args = cli.build_parser().parse_args(["what-if", "--config", BINPACK, "--without-nodes", "rack in (r1"])
    with pytest.raises(cli.CommandError, match=r"--without-nodes rack in \(r1: HTTP 400: unable to parse requirement"):
        await cli._what_if(args, Target(None, None, "default"))


def test_the_help_says_what_f_takes_and_what_it_refuses(capsys: pytest.CaptureFixture[str]) -> None:
    """The trial: --help said other kinds are "skipped with a note", while a Node was an error."""
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["what-if", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "Nodes and tessera.dev ExtendedResources are capacity added" in text
    assert "any other kind (a DaemonSet, a CronJob, a custom resource) is an error" in text
