"""`kubectl tessera nodes` / `explain` / `/metrics` as a user re-trial read them (session 58).

1. A Node advertising `nvidia.com/gpu: 8` with no ExtendedResource yet showed 8 `free` rows with
   MODEL `-` and no note, and made "most free on one node", while a class pod got `Insufficient
   class.tessera.dev/t4` there with no word why.
2. On a deleted Node, a class pod's ghost read "no ExtendedResource describes it any more" beside
   the plain pod's "Node deleted": one cause, one REASON.
3. That class ghost was `tessera_devices_by_model{model="T4"}` on the leader's /metrics while
   `kubectl tessera nodes` (a fresh listing: the object is gone) showed MODEL `-`.

Each test failed before its fix.
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.core import annotations as ann
from scheduler.core.scheduler import Scheduler
from scheduler.kubectl import cli
from scheduler.kubectl import explain as explaining
from scheduler.kubectl.target import Target
from scheduler.sim import builders as b
from scheduler.sim.snapshot import load
from scheduler.view import model as m
from scheduler.view.cluster import build_view, gpu_counts
from tests.helpers import NotFoundApi, config, fake_listing

UNDESCRIBED = "no ExtendedResource describes this node's GPUs yet: only plain nvidia.com/gpu pods can use them"
T4 = "class.tessera.dev/t4"


def _core(objs: list[dict[str, Any]]) -> Scheduler:
    core = Scheduler(config())
    load(core, objs, 0.0)
    return core


# --- 1. a node whose GPUs no ExtendedResource describes yet ----------------------------------------


def _fresh_node() -> list[dict[str, Any]]:
    """t4-node-009 advertises 8 GPUs, no agent has published them; t4-node-001's 2 are described."""
    return [b.node("t4-node-009", gpus=8), b.node("t4-node-001", gpus=2),
            b.device("t4-node-001", 0, model="T4", memory="16Gi"), b.device("t4-node-001", 1, model="T4", memory="16Gi"),
            b.resource_class("t4", match_labels={"model": "T4"})]


def test_a_node_whose_gpus_no_extended_resource_describes_says_so() -> None:
    view = build_view(_core(_fresh_node()), source="test", now=0.0)
    nodes = {node.name: node for node in view.nodes}
    assert UNDESCRIBED in nodes["t4-node-009"].notes, nodes["t4-node-009"].notes
    assert not any("ExtendedResource" in note for note in nodes["t4-node-001"].notes), nodes["t4-node-001"].notes
    # its GPUs fit plain pods: they stay free, and count for the biggest single-node job
    assert nodes["t4-node-009"].gpus_free == 8
    assert (view.summary.largest_free, view.summary.largest_free_node) == (8, "t4-node-009")


def test_no_note_on_a_node_without_gpus_nor_where_no_class_exists() -> None:
    """Without a ResourceClass no class pod can ask: a cluster of plain count requests alone (no
    node agent) would read the note on every node."""
    view = build_view(_core([b.node("cpu-only"), b.node("plain", gpus=8)]), source="test", now=0.0)
    assert [node.notes for node in view.nodes] == [(), ()]
    with_class = build_view(_core([b.node("cpu-only"), b.resource_class("t4", match_labels={"model": "T4"})]),
                            source="test", now=0.0)
    assert with_class.nodes[0].notes == ()


async def test_nodes_prints_the_note(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cli, "_listing", fake_listing(NotFoundApi(), _fresh_node()))
    assert await cli._nodes(cli.build_parser().parse_args(["nodes"]), Target(None, None, "default")) == 0
    assert f"t4-node-009: {UNDESCRIBED}" in capsys.readouterr().out


def test_explain_says_why_a_class_pod_is_insufficient_on_such_a_node() -> None:
    objs = [*_fresh_node(), b.pod("w", limits={T4: 4})]
    x = explaining.explain(objs, "default/w", config(), [], 0.0)
    assert x is not None and x.dry_run is not None
    details = {v.node: v.detail for v in x.dry_run.nodes}
    assert details["t4-node-009"] == f"Insufficient {T4}: {UNDESCRIBED}", details


def test_explain_of_a_plain_pod_rejected_there_adds_nothing() -> None:
    """A plain count request is not helped by an ExtendedResource: no note, though a class exists."""
    objs = [b.node("n", gpus=2), b.resource_class("t4", match_labels={"model": "T4"}),
            b.pod("w", limits={"nvidia.com/gpu": 4})]
    x = explaining.explain(objs, "default/w", config(), [], 0.0)
    assert x is not None and x.dry_run is not None
    assert [v.detail for v in x.dry_run.nodes] == ["Insufficient nvidia.com/gpu"]


# --- 2. and 3. a class pod's ghost on a deleted Node ------------------------------------------------


def _deleted_node() -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """t4-node-009 (its device and Node), class pod `c` holding the device, plain pod `p` 1 GPU."""
    device = b.device("t4-node-009", 0, model="T4", memory="16Gi")
    grant = ann.encode_devices({"main": {T4: (ann.DeviceGrant(device["spec"]["deviceID"], device["metadata"]["name"], None),)}})
    node = b.node("t4-node-009", gpus=2)
    pods = [b.resource_class("t4", match_labels={"model": "T4"}),
            b.pod("c", node_name="t4-node-009", phase="Running", limits={T4: 1},
                  annotations={ann.DEVICES: grant, ann.PHASE: ann.PHASE_ALLOCATED}),
            b.pod("p", node_name="t4-node-009", phase="Running", limits={"nvidia.com/gpu": 1})]
    return node, device, pods


def _leader() -> Scheduler:
    """The leader's core: it saw the device and the Node, then both deleted (the Node first, its
    ExtendedResource by the garbage collector after it)."""
    node, device, pods = _deleted_node()
    core = _core([node, device, *pods])
    core.apply("DELETED", node, 1.0)
    core.apply("DELETED", device, 1.0)
    return core


def _listed() -> Scheduler:
    """`kubectl tessera`'s core: a listing after both were deleted."""
    _, _, pods = _deleted_node()
    return _core(pods)


@pytest.mark.parametrize("core", [_leader, _listed], ids=["leader", "listing"])
def test_a_class_ghost_on_a_deleted_node_reads_node_deleted(core: Any) -> None:
    view = build_view(core(), source="test", now=1.0)
    [gone] = view.nodes
    assert gone.deleted
    assert sorted(gpu.reason for gpu in gone.gpus) == ["Node deleted, still held by default/c",
                                                        "Node deleted, still held by default/p"], gone.gpus


@pytest.mark.parametrize("core", [_leader, _listed], ids=["leader", "listing"])
def test_the_view_and_the_metric_name_a_class_ghosts_model_alike(core: Any) -> None:
    scheduler = core()
    [gone] = build_view(scheduler, source="test", now=1.0).nodes
    assert sorted((gpu.model, gpu.state) for gpu in gone.gpus) == [("", m.GHOST), ("T4", m.GHOST)], gone.gpus
    assert gpu_counts(scheduler, now=1.0).states == {("T4", m.GHOST): 1, ("", m.GHOST): 1}


def _model_term(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)} if values else {"key": key, "operator": operator}


@pytest.mark.parametrize(("labels", "expressions", "model"), [
    ({"model": "T4"}, [], "T4"),
    ({}, [_model_term("model", "In", "T4")], "T4"),
    ({"model": "T4"}, [_model_term("model", "In", "T4", "A100")], "T4"),  # the one both select
    ({}, [_model_term("model", "NotIn", "A100")], ""),
    ({}, [_model_term("model", "Exists")], ""),
    ({}, [_model_term("model", "In", "T4", "A100")], ""),
    ({"model": "T4"}, [_model_term("model", "In", "A100")], ""),  # they disagree: none is said
    ({"vendor": "nvidia"}, [], ""),
])
def test_a_listed_class_ghosts_model_is_the_one_its_class_selects(
        labels: dict[str, str], expressions: list[dict[str, Any]], model: str) -> None:
    """A ghost's MODEL from its class (`_model`) is said only when the class's selector names one
    model; NotIn, Exists, several values or another key say nothing of it ('-'), in the row and the
    metric's counts alike."""
    _, _, pods = _deleted_node()
    pods[0] = b.resource_class("t4", match_labels=labels, expressions=expressions)
    scheduler = _core(pods)
    [gone] = build_view(scheduler, source="test", now=1.0).nodes
    assert sorted(gpu.model for gpu in gone.gpus) == sorted(["", model]), gone.gpus
    assert gpu_counts(scheduler, now=1.0).states == ({("", m.GHOST): 2} if not model else
                                                      {(model, m.GHOST): 1, ("", m.GHOST): 1})


def test_a_ghost_whose_holders_classes_select_different_models_has_none() -> None:
    """Two holders granted the same ghost under classes that select T4 and A100: '-', not either."""
    _, _, pods = _deleted_node()
    grant = pods[1]["metadata"]["annotations"][ann.DEVICES].replace(T4, "class.tessera.dev/a100")
    other = b.pod("d", node_name="t4-node-009", phase="Running", limits={"class.tessera.dev/a100": 1},
                  annotations={ann.DEVICES: grant, ann.PHASE: ann.PHASE_ALLOCATED})
    scheduler = _core([*pods, b.resource_class("a100", match_labels={"model": "A100"}), other])
    [gone] = build_view(scheduler, source="test", now=1.0).nodes
    assert "T4" not in {gpu.model for gpu in gone.gpus} and "A100" not in {gpu.model for gpu in gone.gpus}, gone.gpus


# --- 1b. a node some of whose GPUs no ExtendedResource describes (session 58, Z2) ------------------

PARTIAL = "6 of its GPUs no ExtendedResource describes yet: only plain nvidia.com/gpu pods can use them"


def _partly_described() -> list[dict[str, Any]]:
    """t4-node-009 advertises 8 GPUs and its agent has published 2 of them so far."""
    return [b.node("t4-node-009", gpus=8), b.device("t4-node-009", 0, model="T4", memory="16Gi"),
            b.device("t4-node-009", 1, model="T4", memory="16Gi"), b.resource_class("t4", match_labels={"model": "T4"})]


def test_a_node_some_of_whose_gpus_no_extended_resource_describes_says_how_many() -> None:
    """Trial finding: the 6 undescribed rows read MODEL `-` and no note (the note wanted no device
    at all), so a class pod's `Insufficient` beside 6 free GPUs had no word why."""
    view = build_view(_core(_partly_described()), source="test", now=0.0)
    node = view.nodes[0]
    assert [gpu.model for gpu in node.gpus].count("") == 6 and PARTIAL in node.notes, node.notes
    assert UNDESCRIBED not in node.notes
    objs = [*_partly_described(), b.pod("w", limits={T4: 4})]
    x = explaining.explain(objs, "default/w", config(), [], 0.0)
    assert x is not None and x.dry_run is not None
    assert x.dry_run.nodes[0].detail == f"Insufficient {T4}: {PARTIAL}", x.dry_run.nodes


def test_a_node_every_gpu_of_which_is_described_has_no_note() -> None:
    objs = [b.node("n", gpus=2), b.device("n", 0, model="T4"), b.device("n", 1, model="T4"),
            b.resource_class("t4", match_labels={"model": "T4"})]
    assert build_view(_core(objs), source="test", now=0.0).nodes[0].notes == ()
