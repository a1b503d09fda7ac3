"""An edit of a bound pod's `tessera.dev/devices` annotation moves no hold (review finding).

A user's trial on dev-cluster gave one GPU to two pods: `kubectl annotate --overwrite` on a bound
pod swapped the device its annotation named, the ledger swapped its charge with it, and the next
pod was given the GPU the first pod's container still used — silently. The container keeps what
it was given until it ends, and the node agent may hand out what the annotation names now on a
restart: a bound, live pod holds both versions' devices (the union) until it is gone, and the edit
is told (a `DevicesAnnotationChanged` Warning; a newly named device someone else holds is the
ledger's `DeviceConflict`).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import orjson

from scheduler.core import annotations as ann
from scheduler.sim import builders as b
from scheduler.view import model as m
from scheduler.view.cluster import build_view
from tests.helpers import BINPACK, Run, config

CLASS = "class.tessera.dev/v100"
SHARED = "class.tessera.dev/v100-shared"


def _run(gpus: int = 3) -> tuple[Run, list[str]]:
    """Node n with `gpus` V100 devices and their class: the run and the devices' names."""
    run = Run(config(BINPACK))
    devices = [b.device("n", i) for i in range(gpus)]
    run.add(b.node("n", gpus=gpus), *devices, b.resource_class("v100", match_labels={"model": "V100"}),
            b.resource_class("v100-shared", match_labels={"model": "V100"},
                             sharing={"dimension": "memory", "unit": "1Gi"}))
    return run, [d["metadata"]["name"] for d in devices]


def _object(run: Run, name: str) -> dict[str, Any]:
    return copy.deepcopy(run.replay.pods[run.state.pod_by_key(f"default/{name}").uid])


def _annotation(run: Run, name: str) -> dict[str, Any]:
    raw = _object(run, name)["metadata"]["annotations"][ann.DEVICES]
    doc: dict[str, Any] = orjson.loads(raw)
    return doc


def _edit(run: Run, name: str, value: str | None) -> None:
    """`kubectl annotate --overwrite` of the pod's devices annotation (None: `tessera.dev/devices-`)."""
    pod = _object(run, name)
    annotations = pod["metadata"].setdefault("annotations", {})
    if value is None:
        del annotations[ann.DEVICES]
    else:
        annotations[ann.DEVICES] = value
    pod["metadata"]["resourceVersion"] = str(int(pod["metadata"].get("resourceVersion") or "100") + 1)
    run.feed(b.event("MODIFIED", pod))


def _renamed(run: Run, doc: dict[str, Any], device: str) -> str:
    """The annotation with its one grant naming `device` (and that device's id) instead."""
    out = copy.deepcopy(doc)
    [entries] = [entries for by_resource in out["containers"].values() for entries in by_resource.values()]
    entries[0]["device"] = device
    entries[0]["id"] = run.state.devices[device].device_id
    return orjson.dumps(out).decode()


def _holders(run: Run, device: str) -> set[str]:
    use = run.state.ledger.use.get(device)
    if use is None:
        return set()
    return {run.state.pods[uid].meta.name for uid in (*use.exclusive, *use.shared)}


def _held_by(run: Run, name: str) -> list[str]:
    return [device for device in run.state.ledger.use if name in _holders(run, device)]


def _states(run: Run) -> dict[str, str]:
    """What `kubectl tessera nodes` shows per GPU of node n (device name -> state)."""
    [node] = build_view(run.scheduler, source="simulate", now=0.0).nodes
    return {gpu.device: gpu.state for gpu in node.gpus}


def _reasons(run: Run, reason: str) -> list[str]:
    return [n for n in run.notices() if n.startswith(f"{reason}: ")]


def test_a_swapped_device_annotation_keeps_the_old_gpu_held_and_says_so() -> None:
    run, names = _run(gpus=2)
    run.add(b.pod("longv", limits={CLASS: 1}))
    [given] = _held_by(run, "longv")
    assert _reasons(run, "DevicesAnnotationChanged") == []  # our Binding and the agent's Allocated are no edit
    other = next(name for name in names if name != given)
    _edit(run, "longv", _renamed(run, _annotation(run, "longv"), other))
    assert sorted(_held_by(run, "longv")) == sorted(names)  # the old GPU stays held, the new one too
    assert _states(run) == {name: m.WHOLE for name in names}  # the user's trial read the old one `free`
    [warning] = _reasons(run, "DevicesAnnotationChanged")
    assert given in warning and other in warning and "until the pod ends" in warning
    run.add(b.pod("thief", limits={CLASS: 1}))
    assert run.node_of("thief") is None  # neither GPU is free
    run.add(b.pod("plain", limits={"nvidia.com/gpu": 1}))
    assert run.node_of("plain") is None  # plain requests count both as busy too


def test_the_union_lasts_until_the_pod_ends_then_both_are_released() -> None:
    run, names = _run(gpus=3)
    run.add(b.pod("longv", limits={CLASS: 1}))
    [given] = _held_by(run, "longv")
    second, third = [name for name in names if name != given]
    doc = _annotation(run, "longv")
    _edit(run, "longv", _renamed(run, doc, second))
    _edit(run, "longv", _renamed(run, doc, third))  # a second edit: the first two still held
    assert sorted(_held_by(run, "longv")) == sorted(names)
    assert len(_reasons(run, "DevicesAnnotationChanged")) == 2
    _edit(run, "longv", _renamed(run, doc, third))  # the same content again: no edit, no warning
    assert len(_reasons(run, "DevicesAnnotationChanged")) == 2
    resized = _object(run, "longv")  # an in-place resize re-charges the pod: the union stays
    resized["spec"]["containers"][0]["resources"].setdefault("requests", {})["cpu"] = "2"
    resized["metadata"]["resourceVersion"] = "998"
    run.feed(b.event("MODIFIED", resized))
    assert run.state.placements[run.state.pod_by_key("default/longv").uid].requests.get("cpu") == 2000
    assert sorted(_held_by(run, "longv")) == sorted(names)
    done = _object(run, "longv")
    done["status"]["phase"] = "Succeeded"
    done["metadata"]["resourceVersion"] = "999"
    run.feed(b.event("MODIFIED", done))
    assert _held_by(run, "longv") == [] and run.state.ledger.use == {}


def test_a_newly_named_device_another_pod_holds_is_a_device_conflict() -> None:
    run, names = _run(gpus=2)
    run.add(b.pod("longv", limits={CLASS: 1}), b.pod("other", limits={CLASS: 1}))
    [mine], [theirs] = _held_by(run, "longv"), _held_by(run, "other")
    assert _reasons(run, "DeviceConflict") == []
    _edit(run, "longv", _renamed(run, _annotation(run, "longv"), theirs))
    assert _holders(run, theirs) == {"longv", "other"} and _holders(run, mine) == {"longv"}
    [conflict] = _reasons(run, "DeviceConflict")
    assert theirs in conflict
    assert _states(run) == {mine: m.WHOLE, theirs: m.CONFLICT}
    run.add(b.pod("thief", limits={CLASS: 1}))
    assert run.node_of("thief") is None


def test_an_unreadable_or_removed_annotation_keeps_the_old_devices_held() -> None:
    run, names = _run(gpus=2)
    run.add(b.pod("longv", limits={CLASS: 1}))
    [given] = _held_by(run, "longv")
    _edit(run, "longv", "{not json")
    assert _held_by(run, "longv") == [given]
    assert _reasons(run, "BrokenDeviceAnnotation")  # the node is fenced, as before
    [warning] = _reasons(run, "DevicesAnnotationChanged")
    assert given in warning and "it now names nothing readable" in warning
    assert "n" in {node for node, info in run.state.nodes.items() if info.broken}
    _edit(run, "longv", None)  # the annotation removed (the phase says devices were given)
    assert _held_by(run, "longv") == [given]


def test_a_slice_amount_changed_holds_the_larger_one() -> None:
    run, names = _run(gpus=1)
    run.add(b.pod("s", limits={SHARED: 8}))
    [device] = _held_by(run, "s")
    doc = _annotation(run, "s")
    [entries] = [entries for by_resource in doc["containers"].values() for entries in by_resource.values()]
    before = copy.deepcopy(run.state.ledger.use[device].shared)
    entries[0]["amount"] = "4Gi"  # a smaller claim: the container may still use the 8Gi it was given
    _edit(run, "s", orjson.dumps(doc).decode())
    assert run.state.ledger.use[device].shared == before
    [warning] = _reasons(run, "DevicesAnnotationChanged")
    assert device in warning
    entries[0]["amount"] = "16Gi"  # a larger one counts as larger
    _edit(run, "s", orjson.dumps(doc).decode())
    [held] = run.state.ledger.use[device].shared.values()
    assert list(held.values()) == [16 * 1024**3]


def test_devices_written_onto_a_pod_bound_without_any_are_an_edit_too() -> None:
    """A pod another scheduler bound, given a devices annotation by hand: what it names is held
    (the node agent may hand it out), and it is told like any other edit."""
    run, names = _run(gpus=2)
    run.add(b.pod("foreign", scheduler="default-scheduler", node_name="n", phase="Running",
                  requests={"cpu": "1"}))
    doc = {"version": ann.VERSION, "containers": {"main": {CLASS: [{"id": "x", "device": names[0]}]}}}
    _edit(run, "foreign", orjson.dumps(doc).decode())
    assert _held_by(run, "foreign") == [names[0]]
    [warning] = _reasons(run, "DevicesAnnotationChanged")
    assert "it named no device; it now names " + names[0] in warning


def test_an_annotation_naming_no_device_on_a_pod_bound_without_any_is_no_edit() -> None:
    """A pod bound without named devices (plain nvidia.com/gpu) given an annotation that names none,
    and then losing it again: nothing named before or after, so nothing to hold and nothing to tell
    (a by-hand trial got "it named no device; it now names no device")."""
    run, _ = _run(gpus=2)
    run.add(b.pod("plain", limits={"nvidia.com/gpu": 1}))
    assert run.node_of("plain") == "n"
    _edit(run, "plain", orjson.dumps({"version": ann.VERSION, "containers": {}}).decode())
    _edit(run, "plain", None)
    assert _reasons(run, "DevicesAnnotationChanged") == [] and _held_by(run, "plain") == []


def _restarted(run: Run, gpus: int, *names: str) -> Run:
    """A scheduler started after the edits: it lists the node, its devices, the classes and the
    named pods as the apiserver has them now (nothing carried over in memory)."""
    fresh, _ = _run(gpus=gpus)
    fresh.add(*(_object(run, name) for name in names))
    return fresh


def _written_held(run: Run, name: str) -> None:
    """The live shell's answer to the DevicesAnnotationChanged notice: `tessera.dev/held-devices`
    set to the union the notice carries (the replay has no writer, so the test writes it)."""
    [notice] = [n for n in run.replay.stats.notices if n.reason == "DevicesAnnotationChanged"][-1:]
    pod = _object(run, name)
    pod["metadata"]["annotations"][ann.HELD_DEVICES] = notice.held_devices
    pod["metadata"]["resourceVersion"] = str(int(pod["metadata"]["resourceVersion"]) + 1)
    run.feed(b.event("MODIFIED", pod))


def test_a_restart_after_an_edit_keeps_the_original_gpu_held() -> None:
    """The trial's second half: after the edit, a restarted scheduler read only the current
    annotation, listed the original GPU free and bound `steal` to it. The held-devices annotation
    the shell writes on the edit carries the union across the restart."""
    run, names = _run(gpus=2)
    run.add(b.pod("cls1", limits={CLASS: 1}))
    [given] = _held_by(run, "cls1")
    other = next(name for name in names if name != given)
    _edit(run, "cls1", _renamed(run, _annotation(run, "cls1"), other))
    _written_held(run, "cls1")
    held = ann.decode_devices(_object(run, "cls1")["metadata"]["annotations"][ann.HELD_DEVICES])
    assert sorted(g.device for by in held.values() for gs in by.values() for g in gs) == sorted(names)
    fresh = _restarted(run, 2, "cls1")
    assert sorted(_held_by(fresh, "cls1")) == sorted(names)
    assert _states(fresh) == {name: m.WHOLE for name in names}  # `kubectl tessera nodes`: both held
    fresh.add(b.pod("steal", limits={CLASS: 1}))
    assert fresh.node_of("steal") is None


def test_an_unreadable_held_devices_annotation_fences_the_node() -> None:
    run, names = _run(gpus=2)
    run.add(b.pod("cls1", limits={CLASS: 1}))
    pod = _object(run, "cls1")
    pod["metadata"]["annotations"][ann.HELD_DEVICES] = "{not json"
    fresh, _ = _run(gpus=2)
    fresh.add(pod)
    [broken] = _reasons(fresh, "BrokenDeviceAnnotation")
    assert ann.HELD_DEVICES in broken
    assert "n" in {node for node, info in fresh.state.nodes.items() if info.broken}
    fresh.add(b.pod("steal", limits={CLASS: 1}))
    assert fresh.node_of("steal") is None


def test_two_edits_before_the_write_lands_keep_all_three_gpus_held_across_a_restart() -> None:
    run, names = _run(gpus=3)
    run.add(b.pod("cls1", limits={CLASS: 1}))
    [given] = _held_by(run, "cls1")
    second, third = [name for name in names if name != given]
    doc = _annotation(run, "cls1")
    _edit(run, "cls1", _renamed(run, doc, second))
    _edit(run, "cls1", _renamed(run, doc, third))  # the first held-devices write has not landed yet
    _written_held(run, "cls1")  # the last notice's value
    fresh = _restarted(run, 3, "cls1")
    assert sorted(_held_by(fresh, "cls1")) == sorted(names)


def _edited_while_nothing_ran(run: Run, name: str, device: str) -> dict[str, Any]:
    """The pod as the apiserver has it after `kubectl annotate --overwrite` renamed its one grant
    to `device` while no scheduler ran (nobody saw the edit; nothing was written after it)."""
    pod = _object(run, name)
    pod["metadata"]["annotations"][ann.DEVICES] = _renamed(run, _annotation(run, name), device)
    pod["metadata"]["resourceVersion"] = str(int(pod["metadata"].get("resourceVersion") or "100") + 1)
    return pod


def test_an_edit_while_no_scheduler_runs_keeps_the_original_gpu_held_after_a_restart() -> None:
    """The edit happened while no Tessera ran: the restarted scheduler read only the edited
    annotation and gave the GPU the container really uses to `steal`. The Binding records what
    it gave in `tessera.dev/held-devices` too (a Binding's annotations are copied onto the pod),
    so the pod carries from birth the devices it was given."""
    run, names = _run(gpus=2)
    run.add(b.pod("cls1", limits={CLASS: 1}))
    [given] = _held_by(run, "cls1")
    other = next(name for name in names if name != given)
    fresh, _ = _run(gpus=2)
    fresh.add(_edited_while_nothing_ran(run, "cls1", other))
    assert sorted(_held_by(fresh, "cls1")) == sorted(names)
    fresh.add(b.pod("steal", limits={CLASS: 1}))
    assert fresh.node_of("steal") is None


def test_a_restarted_scheduler_records_an_unwatched_edit_so_a_second_one_loses_nothing() -> None:
    """The restarted scheduler holds the union of both annotations, says so and records it in
    `tessera.dev/held-devices`: a second edit while no scheduler runs, then another restart,
    still holds the GPU the first edit named (the node agent may have handed it out meanwhile)."""
    run, names = _run(gpus=3)
    run.add(b.pod("cls1", limits={CLASS: 1}))
    [given] = _held_by(run, "cls1")
    second, third = [name for name in names if name != given]
    fresh, _ = _run(gpus=3)
    fresh.add(_edited_while_nothing_ran(run, "cls1", second))
    [warning] = _reasons(fresh, "DevicesAnnotationChanged")
    assert given in warning and second in warning and "while no scheduler watched" in warning
    _written_held(fresh, "cls1")
    again, _ = _run(gpus=3)
    again.add(_edited_while_nothing_ran(fresh, "cls1", third))
    assert sorted(_held_by(again, "cls1")) == sorted(names)


def test_a_pod_bound_with_its_own_held_devices_raises_no_warning() -> None:
    """Every Binding writes both annotations alike: a restart that reads them unchanged says nothing."""
    run, names = _run(gpus=2)
    run.add(b.pod("cls1", limits={CLASS: 1}))
    annotations = _object(run, "cls1")["metadata"]["annotations"]
    assert annotations[ann.HELD_DEVICES] == annotations[ann.DEVICES]
    fresh = _restarted(run, 2, "cls1")
    assert _reasons(fresh, "DevicesAnnotationChanged") == [] and _held_by(fresh, "cls1") == _held_by(run, "cls1")


def test_an_edit_of_the_recorded_resource_name_moves_no_count() -> None:
    """Each grant records the resourceName its device was granted under, which the ledger counts
    it under after a restart. An edit of that field in `tessera.dev/devices` (the device named
    under another name) must not take the GPU out of the node's `nvidia.com/gpu` count: the
    Binding's own record in `tessera.dev/held-devices` names it, live and after a restart."""
    run, _ = _run(gpus=2)
    run.add(b.pod("p", limits={CLASS: 1}))
    doc = _annotation(run, "p")
    [entries] = [entries for by_resource in doc["containers"].values() for entries in by_resource.values()]
    assert entries[0]["resourceName"] == "nvidia.com/gpu"
    entries[0]["resourceName"] = "example.com/forged"
    _edit(run, "p", orjson.dumps(doc).decode())
    assert run.state.nodes["n"].used("nvidia.com/gpu") == 1
    restarted = _restarted(run, 2, "p")
    assert restarted.state.nodes["n"].used("nvidia.com/gpu") == 1
    restarted.add(b.pod("q", limits={"nvidia.com/gpu": 2}))
    assert restarted.node_of("q") is None


def test_a_held_devices_annotation_edited_to_name_less_is_written_back_and_survives_a_restart() -> None:
    """Adversary round 5 (2 of 2 live, with two replicas watching): after a devices edit and its
    union written, `kubectl annotate --overwrite tessera.dev/held-devices=<the new GPU only>` was
    taken silently; the replicas kept the union in memory, but after both restarted the record
    named one GPU and the next two pods were bound to the other two, still the victim's. A
    held-devices value that names less than the pod holds is now told (`HeldDevicesChanged`) and
    the union written back, so a restart holds it all."""
    run, names = _run(gpus=3)
    run.add(b.pod("cls1", limits={CLASS: 1}))
    [given] = _held_by(run, "cls1")
    second, third = [name for name in names if name != given]
    doc = _annotation(run, "cls1")
    _edit(run, "cls1", _renamed(run, doc, second))  # the devices edit, its union written
    _written_held(run, "cls1")
    pod = _object(run, "cls1")  # then the record itself, cut down to the current devices only
    pod["metadata"]["annotations"][ann.HELD_DEVICES] = pod["metadata"]["annotations"][ann.DEVICES]
    pod["metadata"]["resourceVersion"] = str(int(pod["metadata"]["resourceVersion"]) + 1)
    run.feed(b.event("MODIFIED", pod))
    [told] = [n for n in run.replay.stats.notices if n.reason == "HeldDevicesChanged"]
    assert told.message.startswith(f"annotation {ann.HELD_DEVICES} of pod default/cls1 on node n was changed while "
                                   "the pod is bound")
    restored = ann.decode_devices(told.held_devices)
    assert sorted(g.device for by in restored.values() for gs in by.values() for g in gs) == sorted([given, second])
    pod = _object(run, "cls1")  # the live shell writes it back
    pod["metadata"]["annotations"][ann.HELD_DEVICES] = told.held_devices
    pod["metadata"]["resourceVersion"] = str(int(pod["metadata"]["resourceVersion"]) + 1)
    run.feed(b.event("MODIFIED", pod))
    assert len([n for n in run.replay.stats.notices if n.reason == "HeldDevicesChanged"]) == 1  # our write: no news
    fresh = _restarted(run, 3, "cls1")
    assert sorted(_held_by(fresh, "cls1")) == sorted([given, second])
    fresh.add(b.pod("a", limits={CLASS: 1}), b.pod("b", limits={CLASS: 1}))
    assert [fresh.node_of("a"), fresh.node_of("b")].count("n") == 1  # only the third GPU is free


def test_a_restart_after_a_slice_grown_then_shrunk_keeps_the_largest_held() -> None:
    """A bound pod's slice edited 8Gi -> 16Gi -> 4Gi holds 16Gi (any version named may have
    been handed out), and so does a scheduler started after the edits: the held-devices record
    keeps a slice at the largest amount any version named, not at the first. (Found by mutation:
    `merge_devices` keeping the first amount left every replay and property test green.)"""
    run, names = _run(gpus=1)
    run.add(b.pod("s", limits={SHARED: 8}))
    [device] = _held_by(run, "s")
    doc = _annotation(run, "s")
    [entries] = [entries for by_resource in doc["containers"].values() for entries in by_resource.values()]
    for amount in ("16Gi", "4Gi"):
        entries[0]["amount"] = amount
        _edit(run, "s", json.dumps(doc))
        _written_held(run, "s")
    held = ann.decode_devices(_object(run, "s")["metadata"]["annotations"][ann.HELD_DEVICES])
    assert [g.amount for by in held.values() for gs in by.values() for g in gs] == [16 * 1024**3]
    fresh = _restarted(run, 1, "s")
    [held_now] = fresh.state.ledger.use[device].shared.values()
    assert list(held_now.values()) == [16 * 1024**3]
    fresh.add(b.pod("fill", limits={SHARED: 24}))  # 24Gi of the 32Gi GPU fits only beside 8Gi
    assert fresh.node_of("fill") is None


def test_an_empty_container_beside_the_same_grants_is_no_edit_and_an_empty_list_is_unreadable() -> None:
    """What `_named` compares never holds an empty resource list: the annotation's reader refuses
    one (`decode_devices`: "must be a non-empty list"), so an edit writing `[]` beside the same
    grants is an unreadable annotation (the node fenced, the devices kept held), not an edit
    naming the same devices; a container object naming nothing (`{}`) reads as no container."""
    run, _ = _run(gpus=2)
    run.add(b.pod("longv", limits={CLASS: 1}))
    [given] = _held_by(run, "longv")
    doc = _annotation(run, "longv")
    _edit(run, "longv", orjson.dumps({**doc, "containers": {**doc["containers"], "sidecar": {}}}).decode())
    assert _reasons(run, "DevicesAnnotationChanged") == [] and _held_by(run, "longv") == [given]
    [container] = doc["containers"]
    listed = {**doc, "containers": {container: {**doc["containers"][container], "example.com/gpu": []}}}
    _edit(run, "longv", orjson.dumps(listed).decode())
    [broken] = _reasons(run, "BrokenDeviceAnnotation")
    assert "example.com/gpu: must be a non-empty list" in broken
    [warning] = _reasons(run, "DevicesAnnotationChanged")
    assert "it now names nothing readable" in warning and _held_by(run, "longv") == [given]
