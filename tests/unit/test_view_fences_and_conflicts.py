"""The GPU views tell the truth about fenced nodes and conflicting grants (a new user's trial).

1. A bound pod whose `tessera.dev/devices` annotation cannot be read (or was stripped while its
   `tessera.dev/phase` says Tessera gave it devices) fences its node: the core gives none of the
   node's devices out (`NodeInfo.hides_devices_of`). `kubectl tessera nodes` listed every GPU of
   such a node as `free` beside a summary of "8 unavailable", and the map drew green tiles.
2. Grants the core's ledger holds but that no single scheduler would make — one GPU given whole to
   two pods (`DeviceUse.exclusive` keeps every claimant; the core reports `DeviceConflict`), a grant
   naming an unhealthy GPU, plain count requests beyond the node's free GPUs — showed as a plain
   `whole` GPU, or not at all: `pods: 4, gpus_used: 3` with one pod on no GPU.

The cluster is built the way the scheduler builds it: watch events replayed through the core.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from scheduler.core import annotations as ann
from scheduler.kubectl.cli import NODES_LEGEND
from scheduler.sim import builders as b
from scheduler.sim.replay import Replay, WatchEvent
from scheduler.view import model as m
from scheduler.view.cluster import build_view, gpu_counts
from scheduler.view.page import render_page
from scheduler.view.text import render_nodes
from tests.helpers import config

CLASS = "class.tessera.dev/v100"


def _replay(objs: list[dict[str, Any]]) -> Replay:
    replay = Replay(config(), agent=False)
    list(replay.run(WatchEvent("ADDED", obj) for obj in objs))
    return replay


def _view(replay: Replay) -> m.ClusterView:
    return build_view(replay.scheduler, source="simulate", now=replay.now)


def _node(view: m.ClusterView, name: str) -> m.NodeView:
    return next(node for node in view.nodes if node.name == name)


def _grant(device: dict[str, Any]) -> str:
    spec = device["spec"]
    return ann.encode_devices({"main": {CLASS: (ann.DeviceGrant(spec["deviceID"], device["metadata"]["name"], None),)}})


def _bound(name: str, node: str, limits: dict[str, str | int], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return b.pod(name, node_name=node, phase="Running", limits=limits, annotations=annotations)


@pytest.mark.parametrize(("edit", "why"), [
    ("unreadable", "unreadable tessera.dev/devices annotation"),
    ("stripped", "tessera.dev/devices annotation missing"),
], ids=["unreadable", "stripped"])
def test_every_free_gpu_of_a_fenced_node_shows_fenced_with_the_pod_and_why(edit: str, why: str) -> None:
    """`keeper` holds GPU 0 of f through Tessera; `bad` got a GPU too, then its annotation was
    edited to `{not json` (or removed). The GPU it was given stays held by it (an edit of a bound
    pod's annotation moves no hold), but what else it may hold is unknown, so the core gives none
    out: each other GPU of f must read `fenced` naming `bad` and why — in the view, the table, the
    JSON and the summary alike — while the fully free node beside it stays free."""
    objs = [b.node("f", gpus=8), *(b.device("f", i) for i in range(8)), b.node("ok", gpus=1), b.device("ok", 0),
            b.resource_class("v100", match_labels={"model": "V100"}),
            b.pod("keeper", limits={CLASS: 1}, spec_extra={"nodeSelector": {"kubernetes.io/hostname": "f"}}),
            b.pod("bad", limits={CLASS: 1}, spec_extra={"nodeSelector": {"kubernetes.io/hostname": "f"}})]
    replay = _replay(objs)
    bad = copy.deepcopy(replay.pods[b.uid_for("Pod", "default", "bad")])
    assert bad["spec"]["nodeName"] == "f"
    if edit == "unreadable":
        bad["metadata"]["annotations"][ann.DEVICES] = "{not json"
    else:
        del bad["metadata"]["annotations"][ann.DEVICES]
    list(replay.run([WatchEvent("MODIFIED", bad)]))
    assert replay.scheduler.state.nodes["f"].broken  # the core fences the node

    view = _view(replay)
    node = _node(view, "f")
    states = [gpu.state for gpu in node.gpus]
    assert states.count(m.WHOLE) == 2 and states.count(m.FENCED) == 6, states  # keeper's and bad's own
    for gpu in node.gpus:
        if gpu.state == m.FENCED:
            assert gpu.reason == f"default/bad: {why}", gpu.reason
            assert gpu.holders == () and gpu.fill == 0.0
    assert node.gpus_free == 0 and node.gpus_unavailable == 6 and node.gpus_used == 2
    assert [gpu.state for gpu in _node(view, "ok").gpus] == [m.FREE]
    summary = view.summary
    assert (summary.used, summary.free, summary.unavailable) == (2, 1, 6)
    # a new user's trial: the note said "which GPUs it holds is unknown" beside rows showing the
    # two GPUs bad holds; what is unknown is what it may hold beyond them
    assert f"default/bad: {why}: it holds the GPUs shown for it, and what else it may hold is unknown, so " \
        "the node's other GPUs are fenced (none is given out) until the annotation is fixed or the pod is gone" \
        in node.notes

    doc = m.as_dict(view)
    json_node = next(n for n in doc["nodes"] if n["name"] == "f")
    assert sorted(g["state"] for g in json_node["gpus"]) == [m.FENCED] * 6 + [m.WHOLE] * 2
    assert json_node["gpus_unavailable"] == 6

    table = render_nodes(view).split("\n\n")[0].splitlines()
    assert table[0].split() == ["NODE", "GPU", "MODEL", "MEMORY", "STATE", "USE", "PODS", "REASON"]
    fenced_rows = [row for row in table if " fenced " in row]
    assert len(fenced_rows) == 6 and all(row.endswith(f"default/bad: {why}") for row in fenced_rows)
    assert not any(" free " in row for row in table[1:9])  # f's rows (ok's come after)


def test_free_gpus_of_a_node_without_a_node_object_show_fenced() -> None:
    """ExtendedResources whose Node is gone: the summary counted their GPUs unavailable (no pod is
    placed on a node the core has no Node object for) while each row read `free`."""
    view = _view(_replay([b.device("gone", 0), b.device("gone", 1), b.node("m", gpus=1), b.device("m", 0)]))
    gone = _node(view, "gone")
    assert [(gpu.state, gpu.reason) for gpu in gone.gpus] == \
        [(m.FENCED, "no Node object: no pod is placed on this node")] * 2
    assert (gone.gpus_free, gone.gpus_unavailable, view.summary.free, view.summary.unavailable) == (0, 2, 1, 2)


def _conflict_cluster() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    devices = [b.device("n", i, healthy=i != 3) for i in range(4)]
    return [b.node("n", gpus=4), *devices, b.resource_class("v100", match_labels={"model": "V100"})], devices


def test_a_gpu_claimed_by_two_pods_is_a_conflict_naming_every_claimant() -> None:
    """Two schedulers bound at once (a rogue one, a restored backup): `a` and `c` both hold GPU 0
    whole, `d`'s grant names GPU 3, which is unhealthy. The ledger keeps both claimants of GPU 0
    (and says DeviceConflict); the view showed a plain `whole` GPU and counted nothing."""
    objs, devices = _conflict_cluster()
    objs += [_bound(name, "n", {CLASS: 1}, {ann.DEVICES: _grant(devices[i]), ann.PHASE: ann.PHASE_ALLOCATED})
             for name, i in (("a", 0), ("b", 1), ("c", 0), ("d", 3))]
    replay = _replay(objs)
    assert any(notice.reason == "DeviceConflict" for notice in replay.stats.notices)
    view = _view(replay)
    gpus = _node(view, "n").gpus
    assert [gpu.state for gpu in gpus] == [m.CONFLICT, m.WHOLE, m.FREE, m.UNHEALTHY]
    conflict = gpus[0]
    assert [h.pod for h in conflict.holders] == ["default/a", "default/c"]
    assert conflict.reason == "claimed by 2 pods at once: default/a, default/c"
    unhealthy = gpus[3]
    assert [h.pod for h in unhealthy.holders] == ["default/d"] and unhealthy.reason == "unhealthy, still held by default/d"
    assert view.summary.conflicts == 1 and "1 GPU claimed by more than one pod" in view.summary.line()
    assert _node(view, "n").conflicts == 1
    table = render_nodes(view)
    assert "conflict" in table and "claimed by 2 pods at once: default/a, default/c" in table
    shown = {h.pod for gpu in gpus for h in gpu.holders}
    assert shown == {"default/a", "default/b", "default/c", "default/d"}


def test_plain_count_requests_beyond_the_free_gpus_are_shown_on_a_gpu_not_dropped() -> None:
    """The trial's `pods: 4, gpus_used: 3`: four bound `nvidia.com/gpu: 1` pods on a 4-GPU node
    whose GPU 3 is unhealthy. Counted holders go on free GPUs; the fourth had none left and
    appeared nowhere. It must show on the GPU that is left (the device plugin picks which), marked."""
    objs, _ = _conflict_cluster()
    objs += [_bound(name, "n", {"nvidia.com/gpu": 1}) for name in "abcd"]
    view = _view(_replay(objs))
    node = _node(view, "n")
    assert node.pods == 4
    shown = [h.pod for gpu in node.gpus for h in gpu.holders]
    assert sorted(shown) == ["default/a", "default/b", "default/c", "default/d"]
    last = node.gpus[3]
    assert last.state == m.UNHEALTHY and [h.pod for h in last.holders] == ["default/d"]
    assert last.reason == ("unhealthy; default/d's nvidia.com/gpu request is counted here: "
                           "no free GPU of the node is left for it")


def test_plain_count_requests_beyond_every_gpu_of_the_node_are_named_in_a_note() -> None:
    """More counted than the node has GPUs (another scheduler overcommitted it): the rest cannot
    be drawn on a GPU; a note names them rather than leaving them out."""
    objs = [b.node("n", gpus=2), b.device("n", 0), b.device("n", 1)]
    objs += [_bound(name, "n", {"nvidia.com/gpu": 1}) for name in "abc"]
    node = _node(_view(_replay(objs)), "n")
    assert sum(len(gpu.holders) for gpu in node.gpus) == 2
    assert "default/c: 1 nvidia.com/gpu counted beyond the node's GPUs (shown on none)" in node.notes


def test_a_grant_naming_a_gpu_that_does_not_exist_is_shown_on_that_gpu_marked() -> None:
    """`e`'s annotation names an ExtendedResource the cluster never had: the ledger counts it as a
    ghost of the node (it still holds a GPU); the view shows it there, with its holder and why."""
    objs, _ = _conflict_cluster()
    ghost = b.device("n", 9)
    objs.append(_bound("e", "n", {CLASS: 1}, {ann.DEVICES: _grant(ghost), ann.PHASE: ann.PHASE_ALLOCATED}))
    gpus = _node(_view(_replay(objs)), "n").gpus
    held = [gpu for gpu in gpus if gpu.device == ghost["metadata"]["name"]]
    assert len(held) == 1 and held[0].state == m.GHOST and [h.pod for h in held[0].holders] == ["default/e"]
    assert held[0].reason == "no ExtendedResource describes it any more, still held by default/e"


def test_the_legends_name_every_state() -> None:
    """The map's legend and `nodes --help` name each state the view can give a GPU."""
    html = render_page(m.ClusterView("simulate", 0.0, (), (), (), m.Summary(0, 0, 0, 0, 0, 0, 0, "")), title="t").html
    legend = html.split('class="legend"', 1)[1].split("</ul>", 1)[0]
    for state in m.STATES:
        assert f"state-{state}" in legend, state
        assert f"\n  {state} " in NODES_LEGEND, state


@pytest.mark.parametrize("device_first", [True, False])
def test_a_gpu_that_moved_while_held_shows_the_model_and_memory_its_object_has(device_first: bool) -> None:
    """Known, not fixed until now: an ExtendedResource listed on node m while a pod on node n holds
    it (it moved before this replica started, or the pod was listed first) is a ghost on n known
    from the holder's annotation only; its row there showed model and memory `-` although the
    object (on m) says them. The row and the summary's per-model count read the object's."""
    moved = b.device("m", 0, model="A100", memory="80Gi")
    holder = _bound("e", "n", {CLASS: 1}, {ann.DEVICES: _grant(moved), ann.PHASE: ann.PHASE_ALLOCATED})
    nodes = [b.node("n", gpus=2), b.device("n", 1), b.node("m", gpus=1), b.resource_class("v100", match_labels={})]
    view = _view(_replay([*nodes, moved, holder] if device_first else [*nodes, holder, moved]))
    [row] = [gpu for gpu in _node(view, "n").gpus if gpu.device == moved["metadata"]["name"]]
    assert (row.state, row.model, row.memory) == (m.GHOST, "A100", "80Gi")
    assert row.reason == "moved to node m while held by default/e: it counts here until released"
    # on m, the GPU m counts while the object waits for its holder on n: described by that object
    [counted] = _node(view, "m").gpus
    assert (counted.device, counted.state, counted.model, counted.memory) == ("", m.FREE, "A100", "80Gi")
    assert [line.split()[:4] for line in render_nodes(view).splitlines()[1:3]] == [
        ["m", "0", "A100", "80Gi"], ["n", "0", "A100", "80Gi"]]
    replay = _replay([*nodes, moved, holder] if device_first else [*nodes, holder, moved])
    counts = gpu_counts(replay.scheduler, now=replay.now).states  # the metric counts it by that model too
    assert counts == {("A100", m.GHOST): 1, ("A100", m.FREE): 1, ("V100", m.FREE): 1}


def test_surplus_gpus_beyond_the_nodes_count_are_listed_after_the_others() -> None:
    """Known, not fixed until now: a node whose ExtendedResources describe more GPUs than it
    allocates (DevicesBeyondAllocatable) fences its last free rows, but they stayed where the
    index put them, between GPUs pods can get or hold. They are listed after every other row."""
    devices = [b.device("n", i) for i in range(4)]
    objs = [b.node("n", gpus=3), *devices, b.resource_class("v100", match_labels={"model": "V100"}),
            _bound("e", "n", {CLASS: 1}, {ann.DEVICES: _grant(devices[3]), ann.PHASE: ann.PHASE_ALLOCATED})]
    node = _node(_view(_replay(objs)), "n")
    assert [(gpu.device, gpu.state) for gpu in node.gpus] == [
        (devices[0]["metadata"]["name"], m.FREE), (devices[1]["metadata"]["name"], m.FREE),
        (devices[3]["metadata"]["name"], m.WHOLE), (devices[2]["metadata"]["name"], m.FENCED)]
    assert [gpu.index for gpu in node.gpus] == [0, 1, 2, 3]
    assert node.gpus[3].reason.startswith("the node counts 3 nvidia.com/gpu but its ExtendedResources describe 4")


def test_a_gpu_kept_for_a_preemptor_beside_its_terminating_victim_is_no_conflict() -> None:
    """Found while closing the in-flight victim work: during every preemption the victim's GPU
    read `conflict` ("claimed by 2 pods at once: default/high, default/low") in `kubectl tessera
    nodes` and `tessera_devices{state="conflict"}` — the critical TesseraGPUConflict alert's input
    — because the preemptor's hold (its room kept while the victim terminates) counted as a second
    holder. A victim with a long terminationGracePeriod would page someone. The GPU is the
    victim's, whole, until it is gone."""
    objs = [b.node("n", gpus=1), b.device("n", 0), b.resource_class("v100", match_labels={"model": "V100"}),
            b.pod("low", limits={CLASS: 1}, priority=0)]
    replay = _replay(objs)
    replay.scheduler.apply("ADDED", b.pod("high", limits={CLASS: 1}, priority=1000), 1.0)
    attempts = replay.scheduler.schedule_next(1.0) or []
    assert [v.meta.name for a in attempts for v in a.preempted] == ["low"]
    [gpu] = _node(_view(replay), "n").gpus
    assert gpu.state == m.WHOLE, (gpu.state, gpu.reason)
