"""The view model shows the core's own state: every GPU state, its holders, pending pods and gangs.

One replayed cluster holds each state at once: whole and sliced GPUs, a GPU used by a plain count
request, a cordoned and an unhealthy device, a deleted device still held (a ghost), a node whose
agent holds the allocation gate (one pod allocating, one Binding held), an unschedulable pod and a
gang short of members. A fresh core fed the same objects as a listing (what `kubectl tessera`
does) must show the same picture, the ghost included.
"""

from __future__ import annotations

from typing import Any

import pytest

from examples.generate import preemption

from scheduler.core import annotations as ann
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b
from scheduler.sim.replay import Replay, WatchEvent
from scheduler.sim.snapshot import load, replay_order
from scheduler.view import model as m
from scheduler.view.cluster import WaitReason, build_view
from scheduler.view.decisions import DecisionLog
from scheduler.view.reasons import wait_reasons
from tests.helpers import TOO_FEW_WHY, config

WHOLE = "class.tessera.dev/v100"
SHARED = "class.tessera.dev/v100-shared"
HEARTBEAT = "2026-01-01T00:00:00Z"


def _pinned(name: str, node: str, limits: dict[str, str | int], **extra: Any) -> dict[str, Any]:
    return b.pod(name, limits=limits, spec_extra={"nodeSelector": {"kubernetes.io/hostname": node}}, **extra)


def _cluster() -> list[dict[str, Any]]:
    objs = [b.node(name, gpus=4) for name in ("a", "b", "c")]
    objs += [b.device("a", i) for i in range(4)]
    objs += [b.device("b", i, unschedulable=i == 2, healthy=i != 3) for i in range(4)]
    objs += [b.device("c", i, heartbeat=HEARTBEAT) for i in range(4)]  # a node agent serves c
    objs += [b.resource_class("v100", match_labels={"model": "V100"}),
             b.resource_class("v100-shared", match_labels={"model": "V100"}, sharing={"dimension": "memory", "unit": "1Gi"})]
    objs += [_pinned("train", "a", {WHOLE: 2}), _pinned("s1", "a", {SHARED: 8}), _pinned("s2", "a", {SHARED: 12}),
             _pinned("plain", "b", {"nvidia.com/gpu": 1}), _pinned("doomed", "b", {WHOLE: 1}),
             _pinned("g1", "c", {WHOLE: 1}), _pinned("g2", "c", {WHOLE: 1}),
             b.pod("big", limits={"nvidia.com/gpu": 5})]
    objs += [b.pod(f"w-{i}", limits={WHOLE: 1}, labels=b.gang_labels("w", 3)) for i in range(2)]
    return objs


class _Run:
    """The cluster replayed without a node agent (c's gate stays shut), then doomed's device deleted."""

    def __init__(self) -> None:
        self.replay = Replay(config(), agent=False)
        self.log = DecisionLog()
        for attempt in self.replay.run(WatchEvent("ADDED", obj) for obj in _cluster()):
            self.log.attempt(attempt, self.replay.now)
        self.ghost = next(g for g in self.gpus("b") if g.holders and g.holders[0].pod == "default/doomed").device
        device = next(obj for obj in _cluster() if obj["kind"] == "ExtendedResource"
                      and obj["metadata"]["name"] == self.ghost)
        list(self.replay.run([WatchEvent("DELETED", device)]))

    def view(self) -> m.ClusterView:
        core = self.replay.scheduler
        return build_view(core, source="simulate", now=self.replay.now, reasons=self.log.reasons(),
                          held=core.held(), decisions=self.log.recent())

    def gpus(self, node: str) -> tuple[m.GpuView, ...]:
        return next(n for n in self.view().nodes if n.name == node).gpus

    def listed(self) -> list[dict[str, Any]]:
        """The cluster as a listing would give it now: current pod objects, no deleted device."""
        pods = list(self.replay.pods.values())
        return [obj for obj in _cluster() if obj["kind"] != "Pod" and obj["metadata"]["name"] != self.ghost] + pods


@pytest.fixture(scope="module")
def run() -> _Run:
    return _Run()


def _states(gpus: tuple[m.GpuView, ...]) -> list[str]:
    return [gpu.state for gpu in gpus]


def test_whole_and_sliced_gpus_with_their_holders_and_fill(run: _Run) -> None:
    gpus = run.gpus("a")
    assert sorted(_states(gpus)) == ["free", "slices", "whole", "whole"]
    whole = [g for g in gpus if g.state == m.WHOLE]
    assert {h.pod for g in whole for h in g.holders} == {"default/train"} and all(g.fill == 1.0 for g in whole)
    sliced = next(g for g in gpus if g.state == m.SLICES)
    assert sliced.holders == (m.Holder("default/s1", "8Gi"), m.Holder("default/s2", "12Gi"))
    assert (sliced.used, sliced.fill, sliced.model, sliced.memory) == ("20Gi/32Gi", 0.625, "V100", "32Gi")
    assert [g.index for g in gpus] == [0, 1, 2, 3]


def test_counted_cordoned_unhealthy_and_a_deleted_device_still_held(run: _Run) -> None:
    gpus = run.gpus("b")
    ghost = next(g for g in gpus if g.device == run.ghost)
    assert ghost.state == m.GHOST and ghost.holders == (m.Holder("default/doomed"),)
    assert _states(gpus)[2:] == ["cordoned", "unhealthy"]  # by the devices' index attribute
    counted = next(g for g in gpus if g.state == m.COUNTED)
    assert counted.holders == (m.Holder("default/plain"),) and counted.device  # a free device takes the count


def test_the_allocation_gate_where_an_agent_serves_the_node(run: _Run) -> None:
    node = next(n for n in run.view().nodes if n.name == "c")
    holders = {h.pod: (g.state, h.status) for g in node.gpus for h in g.holders}
    assert holders == {"default/g1": (m.WHOLE, m.ALLOCATING), "default/g2": (m.GATED, m.HELD)}
    assert node.notes == ("allocation gate held by default/g1: the node agent has not handed out its "
                          f"{WHOLE} yet", "default/g2 waits for the allocation gate")
    # no agent on a: its pods are simply bound, whatever their phase annotation says
    assert {h.status for g in run.gpus("a") for h in g.holders} == {m.BOUND}


def test_pending_pods_gangs_and_the_summary(run: _Run) -> None:
    view = run.view()
    pending = {p.pod: p for p in view.pending}
    assert set(pending) == {"default/big", "default/g2", "default/w-0", "default/w-1"}
    assert pending["default/big"].reason == "Unschedulable" and "Insufficient nvidia.com/gpu" in pending["default/big"].message
    assert pending["default/big"].wants == "5 nvidia.com/gpu"
    assert (pending["default/g2"].reason, pending["default/g2"].node) == ("WaitingForAllocation", "c")
    assert view.gangs == (m.GangView("default/w", 3, 2, 0, 0, 2, "Pending",
                                     "pre-filter pod w-0 cannot find enough sibling pods, current pods number: 2, "
                                     "minMember of group: 3. Only 2 pods of gang default/w exist and its "
                                     "min-available is 3: no member is tried until 1 more is created ("
                                     + TOO_FEW_WHY.format(field="min-available") + ")."),)
    assert view.summary == m.Summary(gpus=12, used=6, shared=1, free=3, unavailable=3, free_on_partial=3,
                                      largest_free=2, largest_free_node="c", held_unavailable=1)  # the ghost
    assert view.summary.fragmentation == 1.0
    assert view.decisions[0].pod in pending  # newest first
    assert len(view.decisions) == run.replay.stats.attempts


def test_a_listed_cluster_in_a_fresh_core_shows_the_same_gpus(run: _Run) -> None:
    """What `kubectl tessera nodes` builds: the listing in replay order, no cycle run. The deleted
    device is no ExtendedResource any more, yet its holder's annotation names it: a ghost still."""
    core = Scheduler(config())
    load(core, run.listed(), run.replay.now)
    fresh = build_view(core, source="cluster", now=run.replay.now)
    assert [(n.name, _states(n.gpus)) for n in fresh.nodes if n.name != "c"] == \
        [(n.name, _states(n.gpus)) for n in run.view().nodes if n.name != "c"]
    ghost = next(g for g in next(n for n in fresh.nodes if n.name == "b").gpus if g.state == m.GHOST)
    assert (ghost.device, ghost.holders) == (run.ghost, (m.Holder("default/doomed"),))
    # c: g2's Binding was only ever held in the replay's memory; listed, g2 is simply pending
    assert _states(next(n for n in fresh.nodes if n.name == "c").gpus).count(m.FREE) == 3


def test_nodes_without_extended_resources_count_their_gpus() -> None:
    core = Scheduler(config())
    load(core, [b.node("n", gpus=2), b.pod("p", node_name="n", limits={"nvidia.com/gpu": 1}),
                b.node("cpu-only")], 0.0)
    view = build_view(core, source="cluster", now=0.0, reasons={"default/x": WaitReason("Unschedulable", "no")})
    gpus = next(n for n in view.nodes if n.name == "n").gpus
    assert [(g.device, g.state, g.holders) for g in gpus] == [("", m.COUNTED, (m.Holder("default/p"),)),
                                                             ("", m.FREE, ())]
    assert next(n for n in view.nodes if n.name == "cpu-only").gpus == ()
    assert view.pending == ()  # a reason for a pod the core does not have is not shown


def test_gpus_without_a_device_object_have_no_model() -> None:
    """A node labelled V100 whose agent published 2 A100 of its 4 GPUs: the other 2 are known only
    by count, so their model is unknown (not the published devices' A100)."""
    core = Scheduler(config())
    node = b.node("n", gpus=4)
    node["metadata"].setdefault("labels", {})["nvidia.com/gpu.product"] = "V100"
    load(core, [node, b.device("n", 0, model="A100"), b.device("n", 1, model="A100")], 0.0)
    view = build_view(core, source="cluster", now=0.0)
    gpus = next(n for n in view.nodes if n.name == "n").gpus
    assert sorted((g.device != "", g.model) for g in gpus) == [(False, ""), (False, ""), (True, "A100"), (True, "A100")]


def test_a_cordoned_nodes_free_gpus_are_unavailable() -> None:
    core = Scheduler(config())
    load(core, [b.node("n", gpus=2, unschedulable=True), b.node("m", gpus=2)], 0.0)
    summary = build_view(core, source="cluster", now=0.0).summary
    assert (summary.free, summary.unavailable, summary.largest_free_node) == (2, 2, "m")


def test_replay_order_puts_bound_pods_before_pending_ones() -> None:
    objs = [b.pod("pending"), b.pod("bound", node_name="n"), b.node("n"), b.device("n", 0),
            b.resource_class("c"), b.podgroup("g", 1)]
    assert [o["metadata"]["name"] for o in replay_order(objs)] == \
        ["n", "n." + b.device("n", 0)["spec"]["deviceID"].lower(), "c", "g", "bound", "pending"]


def test_a_node_overcommitted_by_another_scheduler_says_so() -> None:
    """A new user's trial: 5 GPUs claimed on a 4-GPU node (kube-scheduler's `nvidia.com/gpu: 2`
    pod next to Tessera's class pod holding 3) and `kubectl tessera nodes` showed no note."""
    replay = Replay(config(), agent=False)
    objs = [b.node("n", gpus=4), *[b.device("n", i) for i in range(4)],
            b.resource_class("v100", match_labels={"model": "V100"}), _pinned("cls", "n", {WHOLE: 3}),
            b.pod("plain", node_name="n", phase="Running", limits={"nvidia.com/gpu": 2},
                  spec_extra={"schedulerName": "default-scheduler"})]
    list(replay.run(WatchEvent("ADDED", obj) for obj in objs))
    [node] = build_view(replay.scheduler, source="simulate", now=replay.now).nodes
    assert "nvidia.com/gpu overcommitted: 5 in use, 4 allocatable (pods of other schedulers hold GPUs that " \
           "Tessera's classes gave out)" in node.notes


def test_a_node_overcommitted_by_plain_counts_does_not_blame_tessera_classes() -> None:
    """A day-2 trial (item 8): Tessera's pod on the node asks `nvidia.com/gpu: 3` by plain count,
    which every scheduler counts; a pod bound with spec.nodeName (no scheduler checks it) took 2
    more. The note said other schedulers hold GPUs "that Tessera's classes gave out": none did."""
    replay = Replay(config(), agent=False)
    objs = [b.node("n", gpus=4), *[b.device("n", i) for i in range(4)],
            b.pod("mine", node_name="n", phase="Running", limits={"nvidia.com/gpu": 3}),
            b.pod("plain", node_name="n", phase="Running", limits={"nvidia.com/gpu": 2},
                  spec_extra={"schedulerName": "default-scheduler"})]
    list(replay.run(WatchEvent("ADDED", obj) for obj in objs))
    [node] = build_view(replay.scheduler, source="simulate", now=replay.now).nodes
    [note] = [note for note in node.notes if "overcommitted" in note]
    assert note == ("nvidia.com/gpu overcommitted: 5 in use, 4 allocatable (all of it by plain count, which every "
                    "scheduler sees: a pod bound with spec.nodeName, which no scheduler checks, or another "
                    "scheduler deciding on an older view took GPUs already in use)")


def test_a_node_overcommitted_by_tessera_pods_alone_does_not_blame_another_scheduler() -> None:
    """Adversary round 4: every pod on the over-full node was Tessera's; the note blamed other
    schedulers all the same (the Warning did too)."""
    replay = Replay(config(), agent=False)
    objs = [b.node("n", gpus=2), *[b.device("n", i) for i in range(2)],
            *[b.pod(name, node_name="n", phase="Running", limits={"nvidia.com/gpu": 1}) for name in ("a", "b", "c")]]
    list(replay.run(WatchEvent("ADDED", obj) for obj in objs))
    [node] = build_view(replay.scheduler, source="simulate", now=replay.now).nodes
    assert "nvidia.com/gpu overcommitted: 3 in use, 2 allocatable (every pod on it Tessera's: its count was cut " \
           "below what its pods use, or a Binding Tessera did not decide took GPUs already given out)" in node.notes


def test_a_gang_member_nominated_by_its_gangs_preemption_is_shown_preempting_not_unschedulable() -> None:
    """A new user's trial (`examples/preemption.jsonl -o html`): serve-1 read "unschedulable" with a
    node beside it — the node its gang's preemption made room on."""
    replay, log = Replay(config()), DecisionLog()
    for attempt in replay.run(WatchEvent(e["type"], e["object"]) for e in preemption()):
        log.attempt(attempt, replay.now)
    with_node = [(d.pod, d.outcome) for d in log.recent() if d.node and d.outcome != "placed"]
    assert with_node and all(outcome == "preempting" for _, outcome in with_node), with_node
    assert {pod for pod, _ in with_node} == {"default/serve-0", "default/serve-1"}


def test_a_bound_pod_being_deleted_holds_its_gpus_as_terminating() -> None:
    """A new user's trial: a pod kept by a finalizer looked like any holder in `kubectl tessera
    nodes`, while the pod waiting for its GPUs read only "Insufficient nvidia.com/gpu"."""
    devices = [b.device("n", i) for i in range(2)]

    def holding(name: str, device: dict[str, Any]) -> dict[str, Any]:
        grant = ann.DeviceGrant(device["spec"]["deviceID"], device["metadata"]["name"], None)
        return b.pod(name, node_name="n", phase="Running", limits={WHOLE: 1},
                     annotations={ann.DEVICES: ann.encode_devices({"main": {WHOLE: (grant,)}})})

    leaving = holding("leaving", devices[0])
    leaving["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z", finalizers=["example.com/keep"])
    counted = b.pod("counted", node_name="n", phase="Running", limits={"nvidia.com/gpu": 1})
    counted["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    core = Scheduler(config())
    load(core, [b.node("n", gpus=3), *devices, b.resource_class("v100", match_labels={"model": "V100"}),
                leaving, counted, holding("staying", devices[1])], 0.0)
    [node] = build_view(core, source="cluster", now=0.0).nodes
    holders = sorted((h for g in node.gpus for h in g.holders), key=lambda h: h.pod)
    assert holders == [m.Holder("default/counted", status=m.TERMINATING),
                       m.Holder("default/leaving", status=m.TERMINATING), m.Holder("default/staying")]


def test_a_gang_member_being_deleted_is_shown_leaving_not_placed() -> None:
    """The GPU map and `kubectl tessera explain` counted a gang's terminating member as placed: a
    gang of three with one member deleted read "3 placed" while the scheduler (which does not count
    a leaving member toward the minimum) kept its new member waiting for a sibling."""
    gang = [b.pod(f"w-{i}", node_name="n", phase="Running", limits={"nvidia.com/gpu": 1},
                  labels=b.gang_labels("w", 3)) for i in range(3)]
    gang[0]["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z", finalizers=["example.com/keep"])
    late = b.pod("w-3", limits={"nvidia.com/gpu": 1}, labels=b.gang_labels("w", 3))
    core = Scheduler(config())
    load(core, [b.node("n", gpus=4), *gang, late], 0.0)
    [view] = build_view(core, source="cluster", now=0.0).gangs
    assert (view.members, view.placed, view.leaving, view.pending) == (4, 2, 1, 1)


def _member(name: str, group: str, gpus: int = 1) -> dict[str, Any]:
    return b.pod(name, limits={"nvidia.com/gpu": gpus}, spec_extra={"schedulingGroup": {"podGroupName": group}})


def test_a_pod_gated_at_preenqueue_shows_its_gate_not_a_blank_or_its_last_attempt() -> None:
    """A new user's trial: a Workload API gang member still gathering (never attempted: its gate
    at PreEnqueue keeps it out, as upstream) read `'reason': '', 'message': ''` in /gpu-map.json —
    "not tried yet" on the page, as if a cycle would get to it. And a member gated again after its
    gang lost a sibling kept its last attempt's stale Unschedulable. Each reads its gate now, as
    `kubectl tessera explain` says it; so does `kubectl tessera nodes` from a listing."""
    replay, log = Replay(config(), agent=False), DecisionLog()
    objs = [b.node("n", gpus=2), b.workload_podgroup("short", 3), _member("short-0", "short"),
            _member("short-1", "short"), b.workload_podgroup("big", 2),
            _member("big-0", "big", gpus=4), _member("big-1", "big", gpus=4), _member("lost-0", "lost")]
    for attempt in replay.run(WatchEvent("ADDED", obj) for obj in objs):
        log.attempt(attempt, replay.now)
    assert log.reasons()["default/big-0"].reason == "Unschedulable"  # tried once complete: too big
    # a sibling gone, then a node it would fit on: the move runs PreEnqueue, which gates it again
    for attempt in replay.run([WatchEvent("DELETED", objs[6]), WatchEvent("ADDED", b.node("m", gpus=4))]):
        log.attempt(attempt, replay.now)
    gated = replay.scheduler.gated()
    assert set(gated) == {"default/short-0", "default/short-1", "default/big-0", "default/lost-0"}
    core = Scheduler(config())
    listed = [obj for obj in objs if obj["kind"] != "Pod"] + [b.node("m", gpus=4)] + list(replay.pods.values())
    for obj in listed:  # as the live scheduler wrote it after big-0's attempt
        if obj["metadata"]["name"] == "big-0":
            obj["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                            "message": log.reasons()["default/big-0"].message}]
    load(core, replay_order(listed), replay.now)
    assert wait_reasons(listed)["default/big-0"].reason == "Unschedulable"
    for view in (build_view(replay.scheduler, source="simulate", now=replay.now, reasons=log.reasons()),
                 build_view(core, source="cluster", now=replay.now, reasons=wait_reasons(listed))):
        pending = {p.pod: (p.reason, p.message) for p in view.pending}
        assert pending == {key: ("SchedulingGated", why) for key, why in gated.items()}, view.source
    assert gated["default/short-0"] == ("gated by Coscheduling: waiting for minCount pods from a gang to "
                                        "appear in scheduling queue")
    assert gated["default/lost-0"] == ('gated by Coscheduling: waiting for pods\'s pod group "lost" to appear '
                                       "in scheduling queue")


def test_a_pod_held_by_scheduling_gates_is_pending_with_the_apiservers_reason() -> None:
    """A pod with spec.schedulingGates is pending to kube-scheduler (scheduler_pending_pods
    {queue="gated"}), and the apiserver writes it PodScheduled=False, reason SchedulingGated,
    "Scheduling is blocked due to non-empty scheduling gates" (pkg/registry/core/pod/strategy.go:
    940-946, applySchedulingGatedCondition). The views listed it nowhere: not among the pending
    pods, and a gang whose members are all gated (Kueue's admission gate, say) not among the
    gangs. Both the replayed core and `kubectl tessera`'s listing show it now."""
    hold = {"schedulingGates": [{"name": "example.com/hold"}]}
    objs = [b.node("n", gpus=2), b.pod("held", limits={"nvidia.com/gpu": 1}, spec_extra=hold)]
    objs += [b.pod(f"kept-{i}", limits={"nvidia.com/gpu": 1}, labels=b.gang_labels("kept", 2), spec_extra=hold)
             for i in range(2)]
    replay = Replay(config(), agent=False)
    list(replay.run(WatchEvent("ADDED", obj) for obj in objs))
    message = "Scheduling is blocked due to non-empty scheduling gates"
    listed = [obj for obj in objs if obj["kind"] != "Pod"] + list(replay.pods.values())
    for obj in listed:  # as the apiserver created them
        if obj["kind"] == "Pod":
            obj["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
                                            "message": message}]
    core = Scheduler(config())
    load(core, replay_order(listed), replay.now)
    for view in (build_view(replay.scheduler, source="simulate", now=replay.now),
                 build_view(core, source="cluster", now=replay.now, reasons=wait_reasons(listed))):
        pending = {p.pod: (p.reason, p.message, p.gang) for p in view.pending}
        assert pending == {"default/held": ("SchedulingGated", message, ""),
                           "default/kept-0": ("SchedulingGated", message, "default/kept"),
                           "default/kept-1": ("SchedulingGated", message, "default/kept")}, view.source
        [gang] = view.gangs
        assert (gang.gang, gang.members, gang.placed, gang.pending, gang.message) == \
            ("default/kept", 2, 0, 2, message), view.source
