"""A nominated preemptor's count hold keeps lower-priority slices off the GPUs its victims leave.

The trial's preemption storm: a priority-100 pod asking plain `nvidia.com/gpu: 8` preempted 16
slice pods (`class.tessera.dev/t4-shared: 8`, two per GPU); their Deployment recreated them, and
while a victim was still terminating on each GPU the new priority-0 slices joined it there: a
slice on a GPU already in use adds no GPU now, so the count passed — but the hold (a count, not
devices) was waiting for exactly those GPUs to be given back. Every GPU stayed in use, the
preemptor preempted again, and again: 109 evictions to place one pod that needed 16.

Upstream runs a pod's filters with the nominated pods of equal or higher priority added
(RunFilterPluginsWithNominatedPods); the device form of that pass: a slice joining a GPU whose
every holder is leaving keeps that GPU in use after they are gone, so it takes one of the GPUs
the holds count on; a slice joining a GPU a staying pod uses takes none.
"""

from __future__ import annotations

from typing import Any

from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, assert_real_gpu_counts_within, config

GPU = "nvidia.com/gpu"
SHARED = "class.tessera.dev/t4-shared"
NODE = "t4-node-000"


def _cluster(gpus: int) -> Run:
    run = Run(config(BINPACK))
    run.add(b.node(NODE, gpus=gpus))
    run.add(*(b.device(NODE, i, model="T4", memory="16Gi") for i in range(gpus)))
    run.add(b.resource_class("t4-shared", match_labels={"model": "T4"},
                             sharing={"dimension": "memory", "unit": "1Gi"}))
    # victims terminate slowly: gone only when fed
    run.replay._evict = lambda victims, preemptor: None  # type: ignore[method-assign]
    return run


def _slice(name: str, gi: int, priority: int = 0) -> dict[str, Any]:
    return b.pod(name, limits={SHARED: gi}, priority=priority)


def _raw(run: Run, name: str) -> dict[str, Any]:
    pod = run.state.pod_by_key(f"default/{name}")
    assert pod is not None, name
    return dict(run.replay.pods[pod.uid])


def _terminating(run: Run, name: str, preempted: bool = True) -> None:
    """The eviction lands: the victim is marked (DisruptionTarget, PreemptionByScheduler, as
    upstream's preemption writes it), gets its deletionTimestamp and terminates (grace period);
    `preempted=False`: a plain deletion."""
    raw = _raw(run, name)
    raw["metadata"] = {**raw["metadata"], "deletionTimestamp": "2026-01-01T00:00:02Z"}
    if preempted:
        mark = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                "message": "tessera: preempting to accommodate a higher priority pod",
                "lastTransitionTime": "2026-01-01T00:00:01Z"}
        raw["status"] = {**raw.get("status", {}), "conditions": [mark]}
    run.feed(b.event("MODIFIED", raw))


def _gone(run: Run, name: str) -> None:
    run.feed(b.event("DELETED", _raw(run, name)))


def _retry(run: Run) -> None:
    run.scheduler.queue.flush_unschedulable(1e9)
    list(run.replay.drain())


def _device_of(run: Run, name: str) -> list[str]:
    pod = run.state.pod_by_key(f"default/{name}")
    devices: list[str] = run.state.placements[pod.uid].devices
    return devices


def _one_victim_per_gpu_gone(run: Run, victims: list[str]) -> dict[str, list[str]]:
    """The victims by the GPU they terminate on, after the first of them on each GPU is gone for good."""
    by_device: dict[str, list[str]] = {}
    for name in victims:
        by_device.setdefault(_device_of(run, name)[0], []).append(name)
    for names in by_device.values():
        _gone(run, names[0])
    return by_device


def _evictions(run: Run) -> int:
    return sum(len(attempt.preempted) for attempt in run.attempts)


def test_replacement_slices_do_not_keep_the_victims_gpus_in_use() -> None:
    """The storm, on 2 GPUs: 4 slice victims, a plain 2-GPU preemptor, the victims' replacements
    arriving while one victim per GPU is still terminating. 4 evictions, not an endless loop."""
    run = _cluster(2)
    for n in range(4):
        run.add(_slice(f"old-{n}", 8))
    assert all(run.node_of(f"old-{n}") == NODE for n in range(4))
    run.add(b.pod("hi", limits={GPU: 2}, priority=100))
    hi = next(a for a in run.attempts if a.pod.key == "default/hi")
    assert hi.nominated_node == NODE and sorted(v.meta.name for v in hi.preempted) == [f"old-{n}" for n in range(4)]
    for n in range(4):
        _terminating(run, f"old-{n}")
    # one victim of each GPU is gone; the other one still terminates on it
    by_device: dict[str, list[str]] = {}
    for n in range(4):
        by_device.setdefault(_device_of(run, f"old-{n}")[0], []).append(f"old-{n}")
    assert sorted(len(names) for names in by_device.values()) == [2, 2]
    for names in by_device.values():
        _gone(run, names[0])
    for n in range(4):  # the Deployment's replacements
        run.add(_slice(f"new-{n}", 8))
        assert run.node_of(f"new-{n}") is None, f"new-{n} took a GPU the hold of hi waits for"
    assert run.last("new-0").message.startswith(f"0/1 nodes are available: 1 Insufficient {SHARED}")
    assert_real_gpu_counts_within(run)
    for names in by_device.values():
        _gone(run, names[1])
    _retry(run)
    assert run.node_of("hi") == NODE
    assert all(run.node_of(f"new-{n}") is None for n in range(4))
    assert _evictions(run) == 4
    assert_real_gpu_counts_within(run)


def test_a_slice_joins_a_gpu_a_staying_pod_uses_not_one_the_hold_waits_for() -> None:
    """The hold can be served by the GPUs its victims leave; a GPU a staying pod (priority 100: no
    victim) uses is no part of it, and a low slice fits there even though the victims' GPUs are
    fuller (the planner would otherwise pack it onto the fullest)."""
    run = _cluster(3)
    run.add(_slice("old-0", 10), _slice("old-1", 10))
    run.add(_slice("stay", 8, priority=100))
    stay_device = _device_of(run, "stay")
    assert stay_device not in (_device_of(run, "old-0"), _device_of(run, "old-1"))
    run.add(b.pod("hi", limits={GPU: 2}, priority=100))
    hi = next(a for a in run.attempts if a.pod.key == "default/hi")
    assert hi.nominated_node == NODE and sorted(v.meta.name for v in hi.preempted) == ["old-0", "old-1"]
    for name in ("old-0", "old-1"):
        _terminating(run, name)
    run.add(_slice("new-0", 4))
    assert run.node_of("new-0") == NODE and _device_of(run, "new-0") == stay_device
    run.add(_slice("new-1", 6))  # no room for it beside the staying pod now: the victims' GPUs are the hold's
    assert run.node_of("new-1") is None
    assert_real_gpu_counts_within(run)
    for name in ("old-0", "old-1"):
        _gone(run, name)
    _retry(run)
    assert run.node_of("hi") == NODE and run.node_of("new-1") is None
    assert _evictions(run) == 2
    assert_real_gpu_counts_within(run)


def test_without_a_hold_a_slice_still_joins_a_terminating_pods_gpu() -> None:
    """No preemptor waits on the node: a GPU whose only holder terminates is a GPU in use like any
    other, and a slice joining it takes no count (nothing kept for anybody)."""
    run = _cluster(1)
    run.add(_slice("old-0", 8))
    _terminating(run, "old-0", preempted=False)
    run.add(_slice("new-0", 8))
    assert run.node_of("new-0") == NODE
    assert_real_gpu_counts_within(run)


def test_a_slice_preemptors_hold_keeps_its_room_beside_its_victim() -> None:
    """The mirror: the preemptor asks for a slice (its hold is a slice of the victims' GPU, beside
    the one still terminating there); a lower slice, a whole-device class pod and a plain count pod
    all keep off it until the victims are gone, and then the preemptor gets it."""
    run = _cluster(1)
    run.add(b.resource_class("t4", match_labels={"model": "T4"}))
    run.add(_slice("old-0", 8), _slice("old-1", 8))
    run.add(_slice("hi", 16, priority=100))
    hi = next(a for a in run.attempts if a.pod.key == "default/hi")
    assert hi.nominated_node == NODE and sorted(v.meta.name for v in hi.preempted) == ["old-0", "old-1"]
    _terminating(run, "old-0")
    _terminating(run, "old-1")
    _gone(run, "old-0")
    run.add(_slice("new-0", 8), b.pod("whole", limits={"class.tessera.dev/t4": 1}),
            b.pod("plain", limits={GPU: 1}))
    assert [run.node_of(name) for name in ("new-0", "whole", "plain")] == [None, None, None]
    assert_real_gpu_counts_within(run)
    _gone(run, "old-1")
    _retry(run)
    assert run.node_of("hi") == NODE
    assert [run.node_of(name) for name in ("new-0", "whole", "plain")] == [None, None, None]
    assert _evictions(run) == 2


def test_a_restarted_scheduler_keeps_the_replacements_off_the_terminating_victims_gpus() -> None:
    """After a restart (or a new leader) all that is left of the preemption is the preemptor's
    nominatedNodeName and its victims, terminating: the rebuilt hold (`nominations`) is a count
    too, and keeps the replacement slices off the GPUs those victims still share."""
    before = _cluster(2)
    for n in range(4):
        before.add(_slice(f"old-{n}", 8))
    before.add(b.pod("hi", limits={GPU: 2}, priority=100))
    for n in range(4):
        _terminating(before, f"old-{n}")
    by_device = _one_victim_per_gpu_gone(before, [f"old-{n}" for n in range(4)])
    still = [names[1] for names in by_device.values()]

    run = _cluster(2)  # the restarted one lists what is there
    hi = _raw(before, "hi")
    hi["status"] = {**hi.get("status", {}), "nominatedNodeName": NODE}
    run.add(*(_raw(before, name) for name in still), hi)
    assert run.node_of("hi") is None and all(run.node_of(name) == NODE for name in still)
    for n in range(4):
        run.add(_slice(f"new-{n}", 8))
        assert run.node_of(f"new-{n}") is None, f"new-{n} took a GPU the hold of hi waits for"
    assert_real_gpu_counts_within(run)
    for name in still:
        _gone(run, name)
    _retry(run)
    assert run.node_of("hi") == NODE
    assert all(run.node_of(f"new-{n}") is None for n in range(4))
    assert _evictions(run) == 0


def test_a_gang_preemptors_holds_keep_the_replacements_off_too() -> None:
    """The same for a gang of two `nvidia.com/gpu: 1` members: each member's hold is a count, and
    together they wait for both GPUs the victims still share."""
    run = _cluster(2)
    for n in range(4):
        run.add(_slice(f"old-{n}", 8))
    run.add(b.podgroup("big", 2))
    run.add(*(b.pod(f"hi-{n}", labels={"scheduling.x-k8s.io/pod-group": "big"}, limits={GPU: 1}, priority=100)
              for n in range(2)))
    evicted = sorted(v.meta.name for a in run.attempts for v in a.preempted)
    assert evicted == [f"old-{n}" for n in range(4)], evicted
    assert run.state.holds and all(run.node_of(f"hi-{n}") is None for n in range(2))
    for n in range(4):
        _terminating(run, f"old-{n}")
    by_device = _one_victim_per_gpu_gone(run, [f"old-{n}" for n in range(4)])
    for n in range(4):
        run.add(_slice(f"new-{n}", 8))
        assert run.node_of(f"new-{n}") is None, f"new-{n} took a GPU the gang's holds wait for"
    assert_real_gpu_counts_within(run)
    for names in by_device.values():
        _gone(run, names[1])
    _retry(run)
    assert run.node_of("hi-0") == NODE and run.node_of("hi-1") == NODE
    assert all(run.node_of(f"new-{n}") is None for n in range(4))
    assert _evictions(run) == 4


def test_a_slices_device_score_is_how_full_its_gpu_is_after_it() -> None:
    """The planner's sort key grew an element (`_count_cost`); the score still reads the room left
    (a first draft read the new element and scored every slice 100: 11 of the trace's placements
    moved, and no test noticed). One 16Gi GPU with 4Gi in use, a 4Gi slice: 8 of 16 used -> 50."""
    scheduler = Scheduler(config(BINPACK), seed=7, explain=True)
    for obj in (b.node(NODE, gpus=1), b.device(NODE, 0, model="T4", memory="16Gi"),
                b.resource_class("t4-shared", match_labels={"model": "T4"},
                                 sharing={"dimension": "memory", "unit": "1Gi"}),
                _slice("first", 4), _slice("second", 4)):
        scheduler.apply("ADDED", obj, 0.0)
    scores: dict[str, int] = {}
    while (attempts := scheduler.schedule_next(0.0)) is not None:
        for attempt in attempts:
            assert attempt.node == NODE and attempt.scores is not None, attempt.message
            scores[attempt.pod.meta.name] = attempt.scores[NODE]["TesseraDevices"]
    assert scores == {"first": 25, "second": 50}, scores


def test_victims_no_longer_going_free_their_gpus_for_slices_at_once() -> None:
    """Evictions dropped when the lease is lost (`abandon_evictions`): the victims stay, so their
    GPUs are no longer the room a hold waits for, and a slice may join them again. Which pods are
    leaving is part of every cached plan of their node (a review found the plan kept refusing
    until something else touched the node)."""
    run = _cluster(2)
    for n in range(2):
        run.add(_slice(f"old-{n}", 4))
    run.add(b.pod("hi", limits={GPU: 2}, priority=100))
    hi = next(a for a in run.attempts if a.pod.key == "default/hi")
    assert sorted(v.meta.name for v in hi.preempted) == ["old-0", "old-1"]
    run.add(_slice("new-0", 4))
    assert run.node_of("new-0") is None, "while they go, a slice beside them takes the held room"
    run.scheduler.abandon_evictions(0.0)
    run.add(_slice("new-1", 4))
    assert run.node_of("new-1") == NODE, run.last("new-1").message
