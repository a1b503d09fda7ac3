"""`kubectl tessera nodes`, `explain` and `what-if` as an SRE on call read them (a user trial).

1. A Node deleted under a bound pod asking `nvidia.com/gpu: 2`: `nodes` dropped the node and its
   pod's GPUs from the view, the summary and /metrics ("32 total" -> "24 total", no note), though
   docs/operations.md says they show as `ghost`; beside a class pod's ghosts the plain pod read as
   "counted beyond the node's GPUs" (overcommit); `explain` said only "bound to X".
2. A NoSchedule/NoExecute-tainted node's free GPUs made "most free on one node" (the biggest
   single-node job that fits now), where a cordoned node's do not.
3. `explain`'s node table said "node(s) had untolerated taint(s)" and "node(s) didn't satisfy
   existing pods anti-affinity rules" without naming the taint or the pod.
4. `what-if -f` of an existing Deployment refused without saying how to ask what scaling it would do.

The listings are what `kubectl tessera` reads (`fake_listing`, as the other kubectl tests); each
test failed before its fix.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from scheduler.core import annotations as ann
from scheduler.core.scheduler import Scheduler
from scheduler.kube.http import Response
from scheduler.kubectl import cli
from scheduler.kubectl import explain as explaining
from scheduler.kubectl.target import Target
from scheduler.sim import builders as b
from scheduler.sim.snapshot import load
from scheduler.view import model as m
from scheduler.view.cluster import build_view, gpu_counts
from scheduler.view.text import render_nodes
from tests.helpers import NotFoundApi, config, fake_listing

GPU = "nvidia.com/gpu"
ORPHAN_NOTE = ("Node deleted: default/p stays bound and holds what it holds until the PodGC "
               "(kube-controller-manager) marks it Failed and deletes it, 40 s after the Node is gone at the "
               "earliest (DisruptionTarget DeletionByPodGC: PodGC: node no longer exists)")


def _listed() -> list[dict[str, Any]]:
    """n1 (4 GPUs) listed; `gone` deleted while default/p held 2 of its GPUs by count."""
    return [b.node("n1", gpus=4), b.pod("p", node_name="gone", phase="Running", limits={GPU: 2})]


def _core(objs: list[dict[str, Any]]) -> Scheduler:
    core = Scheduler(config())
    load(core, objs, 0.0)
    return core


def test_a_deleted_nodes_bound_pods_keep_their_gpus_shown_as_ghosts() -> None:
    core = _core(_listed())
    view = build_view(core, source="test", now=0.0)
    gone = next((node for node in view.nodes if node.name == "gone"), None)
    assert gone is not None, [node.name for node in view.nodes]
    assert gone.deleted and not next(node for node in view.nodes if node.name == "n1").deleted
    assert [(gpu.state, [h.pod for h in gpu.holders]) for gpu in gone.gpus] == [(m.GHOST, ["default/p"])] * 2
    assert all(gpu.reason == "Node deleted, still held by default/p" for gpu in gone.gpus), gone.gpus
    assert ORPHAN_NOTE in gone.notes, gone.notes
    assert not any("beyond" in note for note in gone.notes)
    summary = view.summary
    assert (summary.gpus, summary.used, summary.free, summary.unavailable, summary.held_unavailable) == (6, 0, 4, 2, 2)
    # /metrics counts what the summary counts
    assert gpu_counts(core, now=0.0).states == {("", m.FREE): 4, ("", m.GHOST): 2}


def test_a_node_known_by_its_devices_alone_is_not_read_as_deleted() -> None:
    """A node no Node object names yet, with ExtendedResources and no pod bound (its agent ran
    first): "Node deleted" is for pods left bound under a deleted Node, not for this one."""
    core = _core([b.node("n1", gpus=4), b.device("early", 0)])
    view = build_view(core, source="test", now=0.0)
    early = next(node for node in view.nodes if node.name == "early")
    assert not early.deleted and early.notes == ("no Node object: only its devices are known",), early.notes
    assert "(Node deleted)" not in render_nodes(view)


def test_a_class_pods_ghosts_and_a_plain_pod_on_a_deleted_node_read_as_node_deleted() -> None:
    """With a class pod's devices (ghosts) on the deleted node, the plain pod read as overcommit."""
    device = b.device("gone", 0)
    spec = device["spec"]
    grant = ann.encode_devices({"main": {"class.tessera.dev/v100": (
        ann.DeviceGrant(spec["deviceID"], device["metadata"]["name"], None),)}})
    objs = [*_listed(), b.resource_class("v100", match_labels={"model": "V100"}),
            b.pod("c", node_name="gone", phase="Running", limits={"class.tessera.dev/v100": 1},
                  annotations={ann.DEVICES: grant, ann.PHASE: ann.PHASE_ALLOCATED})]
    view = build_view(_core(objs), source="test", now=0.0)
    gone = next(node for node in view.nodes if node.name == "gone")
    assert sorted((gpu.state, gpu.holders[0].pod) for gpu in gone.gpus) == \
        [(m.GHOST, "default/c"), (m.GHOST, "default/p"), (m.GHOST, "default/p")]
    assert not any("beyond" in note for note in gone.notes), gone.notes
    assert any(note.startswith("Node deleted: default/c, default/p stay bound") for note in gone.notes), gone.notes


async def test_nodes_lists_the_deleted_node_with_its_pods_gpus(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cli, "_listing", fake_listing(NotFoundApi(), _listed()))
    assert await cli._nodes(cli.build_parser().parse_args(["nodes"]), Target(None, None, "default")) == 0
    out = capsys.readouterr().out
    assert "gone (Node deleted)" in out
    assert "GPUs: 6 total, 0 in use, 4 free, 2 unavailable (2 of them still held by pods)" in out
    assert f"gone: {ORPHAN_NOTE}" in out


def test_explain_of_a_pod_on_a_deleted_node_says_the_podgc_removes_it() -> None:
    x = explaining.explain(_listed(), "default/p", config(), [], 0.0)
    assert x is not None
    assert x.status == ("bound to gone, whose Node object is gone: it keeps what it holds until the PodGC "
                        "(kube-controller-manager) marks it Failed and deletes it, 40 s after the Node is gone at "
                        "the earliest (DisruptionTarget DeletionByPodGC: PodGC: node no longer exists)"), x.status


# --- 2. most free on one node -------------------------------------------------------------------------


@pytest.mark.parametrize("effect", ["NoSchedule", "NoExecute"])
def test_most_free_on_one_node_leaves_out_a_tainted_node(effect: str) -> None:
    objs = [b.node("a", gpus=4), b.node("b", gpus=8, taints=[{"key": "gpu-fault", "value": "xid79", "effect": effect}])]
    summary = build_view(_core(objs), source="test", now=0.0).summary
    assert (summary.largest_free, summary.largest_free_node) == (4, "a")
    assert summary.free == 12  # the free count is as before: a pod tolerating the taint may go there


def test_a_prefer_no_schedule_taint_still_counts_for_most_free() -> None:
    objs = [b.node("a", gpus=4), b.node("b", gpus=8, taints=[{"key": "k", "effect": "PreferNoSchedule"}])]
    summary = build_view(_core(objs), source="test", now=0.0).summary
    assert (summary.largest_free, summary.largest_free_node) == (8, "b")


# --- 3. explain names the taint and the pod ---------------------------------------------------------


def test_explain_names_the_untolerated_taint() -> None:
    objs = [b.node("t", gpus=4, taints=[{"key": "gpu-fault", "value": "xid79", "effect": "NoSchedule"}]),
            b.node("u", gpus=4, taints=[{"key": "maint", "effect": "NoExecute"}]),
            b.pod("w", limits={GPU: 1})]
    x = explaining.explain(objs, "default/w", config(), [], 0.0)
    assert x is not None and x.dry_run is not None
    details = {v.node: v.detail for v in x.dry_run.nodes}
    assert details == {"t": "node(s) had untolerated taint(s): gpu-fault=xid79:NoSchedule",
                       "u": "node(s) had untolerated taint(s): maint:NoExecute"}, details
    assert x.message == ""  # the pod's own status keeps upstream's wording (none written here)


def test_explain_names_the_pod_whose_anti_affinity_blocks_the_node() -> None:
    anti = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}}}
    objs = [b.node("n1", gpus=4, labels={"kubernetes.io/hostname": "n1"}),
            b.pod("db", node_name="n1", phase="Running", spec_extra=anti),
            b.pod("w", labels={"app": "web"}, limits={GPU: 1})]
    x = explaining.explain(objs, "default/w", config(), [], 0.0)
    assert x is not None and x.dry_run is not None
    assert [v.detail for v in x.dry_run.nodes] == [
        "node(s) didn't satisfy existing pods anti-affinity rules: default/db (on n1)"]


def test_explain_names_the_pods_repelling_from_the_nodes_own_zone_only_in_name_order() -> None:
    """A zone-wide anti-affinity term repels from every node of its pod's zone, judged by the
    labels of the node that pod is on: `cache` (zone b) does not block zone a's nodes, and the
    two blocking zone a are named by pod, not by node."""
    anti = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"}]}}}
    objs = [b.node("a1", gpus=4, labels={"zone": "a"}), b.node("a2", gpus=4, labels={"zone": "a"}),
            b.node("b1", gpus=4, labels={"zone": "b"}),
            b.pod("db", node_name="a1", phase="Running", spec_extra=anti),
            b.pod("api", node_name="a2", phase="Running", spec_extra=anti),
            b.pod("cache", node_name="b1", phase="Running", spec_extra=anti),
            b.pod("w", labels={"app": "web"}, limits={GPU: 1})]
    x = explaining.explain(objs, "default/w", config(), [], 0.0)
    assert x is not None and x.dry_run is not None
    zone_a = "node(s) didn't satisfy existing pods anti-affinity rules: default/api (on a2), default/db (on a1)"
    assert {v.node: v.detail for v in x.dry_run.nodes} == {
        "a1": zone_a, "a2": zone_a, "b1": "node(s) didn't satisfy existing pods anti-affinity rules: default/cache (on b1)"}


# --- 4. what-if -f of an existing Deployment says how to ask about scaling ------------------------------


class _Exists:
    async def request(self, method: str, path: str, **_: Any) -> Response:
        if path == "/apis/apps/v1/namespaces/ml/deployments/web":
            return Response(200, orjson.dumps({"kind": "Deployment"}))
        return Response(404, orjson.dumps({"kind": "Status", "code": 404}))


async def test_what_if_of_an_existing_deployment_says_how_to_ask_about_scaling(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "w.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 2\n"
        "  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n    spec:\n"
        "      schedulerName: tessera\n      containers:\n"
        "      - {name: main, image: x, resources: {limits: {nvidia.com/gpu: 1}}}\n")
    monkeypatch.setattr(cli, "_listing", fake_listing(_Exists(), [b.node("n", gpus=8)]))
    args = cli.build_parser().parse_args(["what-if", "-n", "ml", "-f", str(tmp_path / "w.yaml")])
    with pytest.raises(cli.CommandError) as raised:
        await cli._what_if(args, Target(None, None, "ml"))
    assert ("to ask what scaling Deployment ml/web up would do, copy it under another name (say web-more) with "
            "replicas: the replicas to add, and give what-if that file") in str(raised.value), str(raised.value)
