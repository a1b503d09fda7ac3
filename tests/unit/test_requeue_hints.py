"""Requeueing: cluster events that may make a parked pod schedulable, and events that may not (cases a review found).

Each failed before its fix, for the reason its docstring gives. The core
is driven directly (Scheduler.apply + schedule_next) and the clock is never moved past the
5-minute UnschedulableTimeout flush: a pod that an event should bring back must be tried again
within its backoff (at most 10 s here), and one it should not must stay parked.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from scheduler.core.framework import runtime
from scheduler.core.framework.attempt import Attempt
from scheduler.core.framework.cycle_state import PodContext
from scheduler.core.framework.interface import FilterPlugin, Reasons, always
from scheduler.core.plugins.node_name import NodeName
from scheduler.core.plugins.registry import REGISTRY, PluginSpec
from scheduler.core.plugins.unhonoured_terms import TesseraUnhonouredTerms
from scheduler.core.queue import UNSCHEDULABLE
from scheduler.core.scheduler import Scheduler
from scheduler.core.state import EventKind, NodeInfo
from scheduler.sim import builders as b
from tests.helpers import BINPACK, config

LOW, HIGH = 0, 1000
BACKOFF_AT_MOST = 11.0  # > podMaxBackoffSeconds (10 s), far below the 300 s flush


class Core:
    """The scheduler core and a virtual clock; the shell's evictions never happen by themselves."""

    def __init__(self) -> None:
        self.scheduler = Scheduler(config(BINPACK))
        self.now = 0.0

    def apply(self, event_type: str, *objects: dict[str, Any]) -> None:
        for obj in objects:
            self.scheduler.apply(event_type, obj, self.now)

    def run(self) -> list[Attempt]:
        attempts: list[Attempt] = []
        while (made := self.scheduler.schedule_next(self.now)) is not None:
            attempts += made
        return attempts

    def later(self, seconds: float) -> list[Attempt]:
        self.now += seconds
        return self.run()

    def where(self, name: str) -> str | None:
        pod = self.scheduler.state.pod_by_key(f"default/{name}")
        assert pod is not None, name
        entry = self.scheduler.queue.entries.get(pod.uid)
        return entry.where if entry is not None else None


def _of(attempts: list[Attempt], name: str) -> list[Attempt]:
    return [a for a in attempts if a.pod.meta.name == name]


# --- 1. a node change that makes preemption possible is filtered by "fits now, as it is" ----------

def _node(case: str, *, before: bool) -> dict[str, Any]:
    """Node `n` before and after the change of `case`."""
    if case == "uncordoned":
        return b.node("n", cpu="4", memory="8Gi", unschedulable=before)
    if case == "untainted":
        return b.node("n", cpu="4", memory="8Gi",
                      taints=[{"key": "maintenance", "effect": "NoSchedule"}] if before else None)
    if case == "labelled":
        return b.node("n", cpu="4", memory="8Gi", labels=None if before else {"pool": "train"})
    assert case == "grown"
    return b.node("n", cpu="2" if before else "5", memory="8Gi")


@pytest.mark.parametrize("case", ["uncordoned", "untainted", "labelled", "grown"])
def test_node_change_that_lets_a_preemptor_preempt_there_requeues_it(case: str) -> None:
    """A high-priority pod is parked: node `n` is cordoned / tainted / lacks the selected label /
    has less CPU allocatable than the pod asks (each `UnschedulableAndUnresolvable`, so
    preemption was "not helpful"). Then `n` changes so that only a low-priority pod on it stands
    in the way: evicting it would make room, and a retry nominates `n` (the 5-minute flush shows
    it does).

    Upstream requeues the pod on that node event: each plugin's hint checks only its own rule —
    nodeunschedulable.isSchedulableAfterNodeChange (`originalNode.Spec.Unschedulable &&
    !modifiedNode.Spec.Unschedulable` -> Queue), tainttoleration.isSchedulableAfterNodeChange
    (`wasUntolerated && !isUntolerated`), nodeaffinity.isSchedulableAfterNodeChange (unmatched ->
    matched), noderesources fit.go isSchedulableAfterNodeChange (`isFit` against an *empty*
    NodeInfo of the new node, plus `haveAnyRequestedResourcesIncreased`). Before the fix Tessera's
    hints for these plugins were all `handle.fits_node` (now `Handle.node_hint`), which ran every
    filter against the node with its current pods: NodeResourcesFit still said "Insufficient cpu",
    so the pod stayed parked until the 5-minute flush, although the room could be made now."""
    core = Core()
    core.apply("ADDED", _node(case, before=True))
    core.apply("ADDED", b.pod("low", requests={"cpu": "2" if case == "grown" else "4"}, node_name="n",
                              phase="Running", priority=LOW))
    spec = {"nodeSelector": {"pool": "train"}} if case == "labelled" else None
    core.apply("ADDED", b.pod("p", requests={"cpu": "4" if case == "grown" else "2"}, priority=HIGH,
                              spec_extra=spec))
    first = _of(core.run(), "p")
    assert first and first[0].node is None and not first[0].preempted, first
    assert core.where("p") == UNSCHEDULABLE

    core.apply("MODIFIED", _node(case, before=False))

    retry = _of(core.later(BACKOFF_AT_MOST), "p")
    assert retry, f"node {case}: p stays parked ({core.where('p')}) until the 5-minute flush"
    assert retry[0].nominated_node == "n" and [v.meta.name for v in retry[0].preempted] == ["low"]


def test_a_node_change_that_would_let_a_never_preempting_pod_preempt_does_not_requeue_it() -> None:
    """As the `grown` case above, but `p` has preemptionPolicy Never: `n` grown to 5 CPU would
    fit it only once `low` is evicted, which p may not do (upstream's PodEligibleToPreemptOthers),
    so the NodeUpdate leaves it parked (Tessera's hint asks the PostFilter only for a pod that may
    preempt: a retry would only fail again)."""
    core = Core()
    core.apply("ADDED", _node("grown", before=True))
    core.apply("ADDED", b.pod("low", requests={"cpu": "2"}, node_name="n", phase="Running", priority=LOW))
    core.apply("ADDED", b.pod("p", requests={"cpu": "4"}, priority=HIGH, spec_extra={"preemptionPolicy": "Never"}))
    first = _of(core.run(), "p")
    assert first and first[0].node is None and not first[0].preempted, first

    core.apply("MODIFIED", _node("grown", before=False))

    assert core.where("p") == UNSCHEDULABLE


# --- 2. the preemptor's own hold counts against it in the hint --------------------------------

def _nominated_over_terminating_low(name: str, priority: int) -> Core:
    """`n` (4 CPU) is full of `low` (4 CPU, priority 0); `name` (2 CPU, `priority`) preempted it:
    it is nominated to `n` and holds 2 CPU there while `low` terminates (its eviction went out,
    the victim is still there)."""
    core = Core()
    core.apply("ADDED", b.node("n", cpu="4", memory="8Gi"))
    low = b.pod("low", requests={"cpu": "4"}, node_name="n", phase="Running", priority=LOW)
    core.apply("ADDED", low)
    core.apply("ADDED", b.pod(name, requests={"cpu": "2"}, priority=priority))
    first = _of(core.run(), name)
    assert first[0].nominated_node == "n" and [v.meta.name for v in first[0].preempted] == ["low"]
    core.apply("MODIFIED", _terminating(low))
    return core


def _terminating(obj: dict[str, Any]) -> dict[str, Any]:
    """The pod as the watch shows it once its eviction went out: still there, deleting."""
    terminating = copy.deepcopy(obj)
    terminating["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:01Z"
    return terminating


def test_node_growth_requeues_a_nominated_pod_its_own_hold_would_not_let_fit() -> None:
    """`p` preempted `low` on `n` (4 CPU) and holds 2 CPU there while `low` terminates slowly.
    Then `n` grows to 7 CPU: `low`'s 4 plus `p`'s 2 fit, and p's next attempt (which sets its
    own hold aside first, cycle.py `set_aside_hold(uid)` before `_attempt`) lands on `n`.

    Before the fix the NodeUpdate was not offered to p: `handle.fits_node` filtered `n` with p's
    own hold still charged on it (4 + 2 held + 2 asked > 7), so p stayed parked until its victim
    was gone or the 5-minute flush. Upstream's fit hint checks the pod against the node's
    allocatable alone (fit.go `isFit`: `framework.NewNodeInfo(); SetNode(node)`), and its filters
    never count a pod's own nomination against it (addGENominatedPods skips `pod.UID`). The same
    check also counted lower-priority holds that the attempt itself sets aside
    (`ClusterState.holds_below`): 2b."""
    core = _nominated_over_terminating_low("p", HIGH)
    assert core.where("p") == UNSCHEDULABLE

    core.apply("MODIFIED", b.node("n", cpu="7", memory="8Gi"))

    retry = _of(core.later(BACKOFF_AT_MOST), "p")
    assert retry and retry[0].node == "n", f"p stays parked ({core.where('p')}) although it fits n now"


# --- 2b. holds the attempt sets aside count against the pod in the hint ------------------------

def test_node_growth_requeues_a_pod_that_a_lower_priority_nomination_would_not_let_fit() -> None:
    """`mid` (priority 500) preempted `low` on `n` (4 CPU) and holds 2 CPU there while `low`
    terminates. `p` (priority 1000, preemptionPolicy Never, 2 CPU) is parked: `low`'s 4 CPU fill
    `n`. Then `n` grows to 7 CPU: `low`'s 4 plus p's 2 fit, and p's attempt sets `mid`'s
    lower-priority hold aside (cycle.py, as upstream's filters add only nominated pods of priority
    >= the pod's: RunFilterPluginsWithNominatedPods / addGENominatedPods), so p lands on `n`.

    Before the fix `handle.fits_node` filtered `n` with `mid`'s hold still charged (4 + 2 held +
    2 asked > 7), and p may not preempt, so the NodeUpdate was not offered to p: it stayed parked
    until `low` was gone or the 5-minute flush. Upstream's fit hint (fit.go
    isSchedulableAfterNodeChange: `isFit` against the new node's allocatable alone) queues it."""
    core = _nominated_over_terminating_low("mid", 500)
    core.apply("ADDED", b.pod("p", requests={"cpu": "2"}, priority=HIGH,
                              spec_extra={"preemptionPolicy": "Never"}))
    parked = _of(core.run(), "p")
    assert parked and parked[0].node is None and not parked[0].preempted, parked
    assert core.where("p") == UNSCHEDULABLE

    core.apply("MODIFIED", b.node("n", cpu="7", memory="8Gi"))
    # the hint set `mid`'s hold aside for its look only: it is back, charged as before
    assert set(core.scheduler.state.holds) == {b.uid_for("Pod", "default", "mid")}
    assert core.scheduler.state.nodes["n"].requested["cpu"] == 6000

    retry = _of(core.later(BACKOFF_AT_MOST), "p")
    assert retry and retry[0].node == "n", f"p stays parked ({core.where('p')}) although it fits n now"


def test_a_nomination_of_the_pods_own_priority_keeps_its_room_from_the_hint_and_the_attempt() -> None:
    """As the test above, but `peer` has `mid`'s own priority (500): upstream's filters add the
    nominated pods of priority >= the pod's (addGENominatedPods), so `mid`'s hold counts against
    `peer` (`ClusterState.holds_below` is strictly below). `n` grown to 7 CPU holds `low`'s 4,
    `mid`'s 2 and not `peer`'s 2: the NodeUpdate does not wake `peer`; `mid`, retried, lands on `n`."""
    core = _nominated_over_terminating_low("mid", 500)
    core.apply("ADDED", b.pod("peer", requests={"cpu": "2"}, priority=500, spec_extra={"preemptionPolicy": "Never"}))
    parked = _of(core.run(), "peer")
    assert parked and parked[0].node is None, parked

    core.apply("MODIFIED", b.node("n", cpu="7", memory="8Gi"))

    assert core.where("peer") == UNSCHEDULABLE
    later = core.later(BACKOFF_AT_MOST)
    assert [a.node for a in _of(later, "mid")] == ["n"] and all(a.node is None for a in _of(later, "peer")), later


def test_node_growth_requeues_a_nominated_pod_its_own_hold_would_not_let_fit_once_its_victims_are_lifted() -> None:
    """`p` (2 CPU) preempted `low` (1 CPU) on `n` (4 CPU, 2 taken by `peer`, of p's priority) and
    holds 2 CPU there while `low` terminates. Then `n` grows to 5 CPU: `peer`'s 2, `low`'s 1 and
    p's 2 fit, and p's attempt (which sets its own hold aside first) lands on `n`.

    Before the fix `handle.fits_node` kept p's own hold charged on `n` in both of its checks: as
    it is (2 + 1 + 2 held + 2 asked > 5) and with the lower-priority `low` lifted (2 + 2 held + 2
    asked > 5), so p stayed parked: lifting the victims only makes up for p's own hold when they
    free at least as much as p asks (test 2 above)."""
    core = Core()
    core.apply("ADDED", b.node("n", cpu="4", memory="8Gi"))
    core.apply("ADDED", b.pod("peer", requests={"cpu": "2"}, node_name="n", phase="Running", priority=HIGH))
    low = b.pod("low", requests={"cpu": "1"}, node_name="n", phase="Running", priority=LOW)
    core.apply("ADDED", low)
    core.apply("ADDED", b.pod("p", requests={"cpu": "2"}, priority=HIGH))
    first = _of(core.run(), "p")
    assert first[0].nominated_node == "n" and [v.meta.name for v in first[0].preempted] == ["low"]
    core.apply("MODIFIED", _terminating(low))
    assert core.where("p") == UNSCHEDULABLE

    core.apply("MODIFIED", b.node("n", cpu="5", memory="8Gi"))

    retry = _of(core.later(BACKOFF_AT_MOST), "p")
    assert retry and retry[0].node == "n", f"p stays parked ({core.where('p')}) although it fits n now"


def test_uncordon_requeues_a_pod_that_may_preempt_a_gang_below_its_members_own_priority() -> None:
    """`n` (cordoned) is full of PodGroup `train`'s two members: pods of priority 1000, but their
    PodGroup's class `batch` is worth 0, and as victims they count at it (ClusterState.
    gang_priority, preemption's units_for). `p` (priority 500) is parked on NodeUnschedulable.
    Once `n` is uncordoned, p's attempt preempts the gang there.

    Before the fix `handle.fits_node` lifted only the node's pods whose own priority is below
    p's, so it found nothing to lift and p stayed parked until the 5-minute flush."""
    core = Core()
    core.apply("ADDED", {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                         "metadata": {"name": "batch", "uid": "pc-batch"}, "value": LOW})
    group = b.podgroup("train", 2)
    group["spec"]["priorityClassName"] = "batch"
    core.apply("ADDED", b.node("n", cpu="4", memory="8Gi", unschedulable=True), group)
    core.apply("ADDED", *(b.pod(f"t-{i}", requests={"cpu": "2"}, priority=HIGH, node_name="n", phase="Running",
                                labels={"scheduling.x-k8s.io/pod-group": "train"}) for i in range(2)))
    core.apply("ADDED", b.pod("p", requests={"cpu": "2"}, priority=500))
    first = _of(core.run(), "p")
    assert first and first[0].node is None and not first[0].preempted, first
    assert core.where("p") == UNSCHEDULABLE

    core.apply("MODIFIED", b.node("n", cpu="4", memory="8Gi"))

    retry = _of(core.later(BACKOFF_AT_MOST), "p")
    assert retry, f"p stays parked ({core.where('p')}) although it may preempt the gang on n now"
    assert retry[0].nominated_node == "n" and sorted(v.meta.name for v in retry[0].preempted) == ["t-0", "t-1"]


# --- 2c. a node hint asks its own plugin's rule, not every filter ---------------------------------

def test_a_node_added_that_matches_the_selector_before_its_gpus_appear_wakes_the_pod() -> None:
    """A user trial: `p` (nodeSelector pool=train, one V100) is parked by NodeAffinity alone (4
    nodes of another pool). Node `t` of pool train joins before its node agent publishes its GPU
    (a node re-registering or scaling up). Upstream's NodeAffinity hint (isSchedulableAfterNodeChange)
    queues the pod on a NodeAdd that matches its affinity; the retry then fails on the device plugin,
    whose hint (DeviceChange: always) wakes it when the GPU appears, and it lands on `t`.

    Before the fix every node hint was `handle.fits_node`, which ran every filter on `t`: no GPU
    there yet, so the NodeAdd was dropped, and the device event is not one NodeAffinity registers:
    `p` stayed parked, its status and Event still "0/4 nodes ... didn't match", until the
    5-minute flush."""
    core = Core()
    core.apply("ADDED", b.resource_class("v100", {"model": "V100"}))
    for i in range(4):
        core.apply("ADDED", b.node(f"w{i}", gpus=1, labels={"pool": "other"}), b.device(f"w{i}", 0))
    core.apply("ADDED", b.pod("p", limits={"class.tessera.dev/v100": 1}, spec_extra={"nodeSelector": {"pool": "train"}}))
    first = _of(core.run(), "p")
    assert first and first[0].node is None and first[0].rejectors == {"NodeAffinity"}, first
    assert core.where("p") == UNSCHEDULABLE

    core.apply("ADDED", b.node("t", gpus=1, labels={"pool": "train"}))

    woken = _of(core.later(BACKOFF_AT_MOST), "p")
    assert woken, f"p stays parked ({core.where('p')}) although t matches its selector"
    assert woken[0].node is None and "TesseraDevices" in woken[0].rejectors, woken
    core.apply("ADDED", b.device("t", 0))

    placed = _of(core.later(BACKOFF_AT_MOST), "p")
    assert placed and placed[0].node == "t", f"p stays parked ({core.where('p')}) although t has its GPU"


def test_a_taint_lifted_from_a_full_node_wakes_the_pod_and_the_room_made_later_places_it() -> None:
    """`p` (preemptionPolicy Never) is parked by TaintToleration alone: `n`, the only node, is
    tainted and full (`other`, 4 CPU). The taint goes while `n` is still full: upstream's
    TaintToleration hint (`wasUntolerated && !isUntolerated`) queues `p`, whose retry fails on
    NodeResourcesFit; Fit's hint then wakes it when `other` leaves, and it lands on `n`.

    Before the fix the taint hint was `handle.fits_node`: Fit still rejected `n`, so the update
    was dropped, and `other` leaving is not an event TaintToleration registers: `p` stayed
    parked until the 5-minute flush."""
    core = Core()
    taint = [{"key": "maintenance", "effect": "NoSchedule"}]
    core.apply("ADDED", b.node("n", cpu="4", memory="8Gi", taints=taint))
    other = b.pod("other", requests={"cpu": "4"}, node_name="n", phase="Running", priority=LOW)
    core.apply("ADDED", other)
    core.apply("ADDED", b.pod("p", requests={"cpu": "2"}, priority=HIGH, spec_extra={"preemptionPolicy": "Never"}))
    first = _of(core.run(), "p")
    assert first and first[0].node is None and first[0].rejectors == {"TaintToleration"}, first
    assert core.where("p") == UNSCHEDULABLE

    core.apply("MODIFIED", b.node("n", cpu="4", memory="8Gi"))

    woken = _of(core.later(BACKOFF_AT_MOST), "p")
    assert woken, f"p stays parked ({core.where('p')}) although n no longer repels it"
    assert woken[0].node is None and woken[0].rejectors == {"NodeResourcesFit"}, woken
    core.apply("DELETED", other)

    placed = _of(core.later(BACKOFF_AT_MOST), "p")
    assert placed and placed[0].node == "n", f"p stays parked ({core.where('p')}) although n has room"


# --- 3. storms: events that free nothing wake every pod rejected for resources -----------------

@pytest.mark.parametrize("change", ["binding confirmed", "requests grown"])
def test_a_bound_pod_update_that_frees_nothing_does_not_requeue(change: str) -> None:
    """`big` asks for more CPU than any node has: parked, rejected by NodeResourcesFit. Another
    pod `q` is placed on `n`; then the watch brings `q` back bound (our own Binding confirmed),
    or a bound pod's requests grow (an in-place resize up). Neither frees anything.

    ClusterState._on_pod swaps the pod's charge for the bound one through `_unplace`, which emits
    `AssignedPodDelete` for `n`; NodeResourcesFit's hint for it is `always`, so `big` (and every
    pod parked by Fit, TesseraDevices, TopologyPlacement or a minResources gang) goes to backoff
    and is retried on every Binding the scheduler makes — a retry storm on a busy cluster.
    Upstream: a confirmed Binding is an AssignedPodAdd, which NodeResourcesFit does not register
    (fit.go EventsToRegister: Pod `Delete | UpdatePodScaleDown`), and a resize only requeues on
    a scale-down of a resource the pod asks for (`isSchedulableAfterPodScaleDown`)."""
    core = Core()
    core.apply("ADDED", b.node("n", cpu="4", memory="8Gi"))
    core.apply("ADDED", b.pod("big", requests={"cpu": "8"}))
    core.run()
    assert core.where("big") == UNSCHEDULABLE
    if change == "binding confirmed":
        core.apply("ADDED", b.pod("q", requests={"cpu": "1"}))
        placed = _of(core.run(), "q")
        assert placed and placed[0].node == "n"
        assert core.where("big") == UNSCHEDULABLE
        core.apply("MODIFIED", b.pod("q", requests={"cpu": "1"}, node_name="n"))
    else:
        core.apply("ADDED", b.pod("q", requests={"cpu": "1"}, node_name="n", phase="Running"))
        assert core.where("big") == UNSCHEDULABLE
        core.apply("MODIFIED", b.pod("q", requests={"cpu": "2"}, node_name="n", phase="Running"))

    assert core.where("big") == UNSCHEDULABLE, core.scheduler.take_queue_incoming()


# --- 4. assigned pods that an inter-pod term waits on: bound by another scheduler, relabelled ----

REQ = "requiredDuringSchedulingIgnoredDuringExecution"


def _with_terms(name: str, *, affinity: str = "", anti: str = "") -> dict[str, Any]:
    """A pod of Tessera's with a required podAffinity / podAntiAffinity term (by hostname) to the
    pods labelled app=`affinity` / app=`anti`."""
    terms: dict[str, Any] = {}
    for kind, app in (("podAffinity", affinity), ("podAntiAffinity", anti)):
        if app:
            terms[kind] = {REQ: [{"labelSelector": {"matchLabels": {"app": app}},
                                  "topologyKey": "kubernetes.io/hostname"}]}
    return b.pod(name, labels={"app": name}, requests={"cpu": "1"}, spec_extra={"affinity": terms})


def _foreign(name: str, app: str, node: str = "n") -> dict[str, Any]:
    """A pod default-scheduler bound to `node`."""
    return b.pod(name, labels={"app": app}, requests={"cpu": "1"}, node_name=node, phase="Running",
                 scheduler="default-scheduler")


@pytest.mark.parametrize("seen", ["created bound", "bound later"])
def test_a_pod_pending_on_affinity_is_retried_when_a_matching_pod_is_bound_by_another_scheduler(seen: str) -> None:
    """`web` needs a pod app=db on its node: none exists, it is parked by InterPodAffinity
    (UnschedulableAndUnresolvable). default-scheduler then binds `db` on `n` — the watch brings
    it created bound, or first pending and then bound. Tessera emitted no event for a pod newly
    assigned, so `web` waited for the 5-minute flush. Upstream: an AssignedPodAdd, which
    InterPodAffinity registers (isSchedulableAfterPodChange: the added pod matches all of the
    pending pod's affinity terms: Queue)."""
    core = Core()
    core.apply("ADDED", b.node("n", cpu="4", memory="8Gi"))
    core.apply("ADDED", _with_terms("web", affinity="db"))
    core.run()
    assert core.where("web") == UNSCHEDULABLE
    core.scheduler.take_queue_incoming()
    if seen == "bound later":
        core.apply("ADDED", b.pod("db", labels={"app": "db"}, requests={"cpu": "1"}, scheduler="default-scheduler"))
        assert core.where("web") == UNSCHEDULABLE
    core.apply("MODIFIED" if seen == "bound later" else "ADDED", _foreign("db", "db"))

    assert core.scheduler.take_queue_incoming() == {("backoff", "AssignedPodAdd"): 1}
    retry = _of(core.later(BACKOFF_AT_MOST), "web")
    assert retry and retry[0].node == "n", f"web stays parked ({core.where('web')}) although db is on n"


def test_a_pod_pending_on_affinity_is_retried_when_a_placed_pod_is_relabelled_to_match() -> None:
    """As above, with `db` already on `n` under another label: relabelled app=db, it now matches
    `web`'s term. Upstream: AssignedPodUpdatePodLabel, Queue when the pod newly matches."""
    core = Core()
    core.apply("ADDED", b.node("n", cpu="4", memory="8Gi"), _foreign("db", "other"))
    core.apply("ADDED", _with_terms("web", affinity="db"))
    core.run()
    assert core.where("web") == UNSCHEDULABLE
    core.scheduler.take_queue_incoming()
    core.apply("MODIFIED", _foreign("db", "db"))

    assert core.scheduler.take_queue_incoming() == {("backoff", "AssignedPodUpdatePodLabel"): 1}
    retry = _of(core.later(BACKOFF_AT_MOST), "web")
    assert retry and retry[0].node == "n"


def test_a_pod_kept_off_by_anti_affinity_is_retried_when_the_pod_it_avoids_is_relabelled_away() -> None:
    """`web` avoids app=db by hostname and `db` holds the only node; `db` relabelled app=other no
    longer repels it. Upstream: Queue when the pod matched an anti-affinity term and now does not."""
    core = Core()
    core.apply("ADDED", b.node("n", cpu="4", memory="8Gi"), _foreign("db", "db"))
    core.apply("ADDED", _with_terms("web", anti="db"))
    core.run()
    assert core.where("web") == UNSCHEDULABLE
    core.apply("MODIFIED", _foreign("db", "other"))

    retry = _of(core.later(BACKOFF_AT_MOST), "web")
    assert retry and retry[0].node == "n"


@pytest.mark.parametrize("change", ["unrelated pod bound", "relabelled to another app", "relabelled, still avoided",
                                    "unrelated pod relabelled"])
def test_an_assigned_pod_that_cannot_help_does_not_requeue(change: str) -> None:
    """The hints filter as upstream's isSchedulableAfterPodChange: a bound pod that does not
    match the pending pod's affinity (a pod with no affinity terms: no bound pod can help it,
    podMatchesAllAffinityTerms is false for none), or a relabel that neither makes a pod match
    the affinity nor takes it out of an anti-affinity term it matched, leaves the pod parked
    (QueueSkip)."""
    core = Core()
    core.apply("ADDED", b.node("n", cpu="4", memory="8Gi"), _foreign("db", "db"), _foreign("q", "q"))
    core.apply("ADDED", _with_terms("web", affinity="cache"), _with_terms("lone", anti="db"))
    core.run()
    assert core.where("web") == UNSCHEDULABLE and core.where("lone") == UNSCHEDULABLE
    core.scheduler.take_queue_incoming()
    if change == "unrelated pod bound":
        core.apply("ADDED", _foreign("r", "r"))
        assert core.where("lone") == UNSCHEDULABLE, "a bound pod cannot open an anti-affinity domain"
    elif change == "unrelated pod relabelled":
        core.apply("MODIFIED", _foreign("q", "r"))  # it never matched lone's term: nothing opens
        assert core.where("lone") == UNSCHEDULABLE
    elif change == "relabelled to another app":
        core.apply("MODIFIED", _foreign("db", "queue"))  # web wants app=cache; lone is freed
        assert core.where("lone") != UNSCHEDULABLE
    else:
        core.apply("MODIFIED", b.pod("db", labels={"app": "db", "tier": "x"}, requests={"cpu": "1"},
                                     node_name="n", phase="Running", scheduler="default-scheduler"))
        assert core.where("lone") == UNSCHEDULABLE

    assert core.where("web") == UNSCHEDULABLE, core.scheduler.take_queue_incoming()


def test_a_relabel_of_a_pod_that_matched_the_affinity_before_does_not_requeue() -> None:
    """upstream queues on a relabel only when the pod did not match all affinity terms before and
    does now: `web` (affinity to app=cache by host) is parked, `cache`'s node full
    (NodeResourcesFit) and the other without it (InterPodAffinity); `cache` gaining a label,
    still app=cache, changes nothing for it (QueueSkip)."""
    core = Core()
    core.apply("ADDED", b.node("n", cpu="1", memory="8Gi"), b.node("m", cpu="4", memory="8Gi"),
               _foreign("cache", "cache"))
    core.apply("ADDED", _with_terms("web", affinity="cache"))
    core.run()
    assert core.where("web") == UNSCHEDULABLE
    core.apply("MODIFIED", b.pod("cache", labels={"app": "cache", "tier": "x"}, requests={"cpu": "1"},
                                 node_name="n", phase="Running", scheduler="default-scheduler"))
    assert core.where("web") == UNSCHEDULABLE, core.scheduler.take_queue_incoming()


def test_a_pod_kept_off_a_zone_is_retried_when_the_pod_it_avoids_leaves_one_of_its_anti_terms() -> None:
    """`web` avoids app=db on its host and tier=cache in its zone; `db` (both labels) runs on
    `n1`, so both nodes of zone `a` are closed to `web` (n1 by both terms, n2 by the zone one).
    `db` loses tier=cache: it still matches the host term, so n1 stays closed, but n2 opens.
    A hint asking whether the pod matched *any* anti-affinity term before and *none* now skips
    that (it still matches one); upstream v1.36 (`podMatchesAllAffinityTerms(antiTerms, old) &&
    !podMatchesAllAffinityTerms(antiTerms, new)`) queues it. A term the pod no longer matches
    may open that term's domains: that is what the hint must ask."""
    core = Core()
    zone = "topology.kubernetes.io/zone"
    for name in ("n1", "n2"):
        core.apply("ADDED", b.node(name, cpu="4", memory="8Gi",
                                   labels={"kubernetes.io/hostname": name, zone: "a"}))
    db = b.pod("db", labels={"app": "db", "tier": "cache"}, requests={"cpu": "1"}, node_name="n1",
               phase="Running", scheduler="default-scheduler")
    core.apply("ADDED", db)
    terms = [{"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"},
             {"labelSelector": {"matchLabels": {"tier": "cache"}}, "topologyKey": zone}]
    core.apply("ADDED", b.pod("web", labels={"app": "web"}, requests={"cpu": "1"},
                              spec_extra={"affinity": {"podAntiAffinity": {REQ: terms}}}))
    core.run()
    assert core.where("web") == UNSCHEDULABLE
    core.apply("MODIFIED", b.pod("db", labels={"app": "db"}, requests={"cpu": "1"}, node_name="n1",
                                 phase="Running", scheduler="default-scheduler"))

    retry = _of(core.later(BACKOFF_AT_MOST), "web")
    assert retry and retry[0].node == "n2", f"web stays parked ({core.where('web')}) although n2 is open"


# --- 5. the cost of an event: pods whose rejectors do not register it are not asked ------------

def test_a_binding_confirmed_asks_no_hint_of_pods_parked_by_plugins_that_ignore_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every Binding confirmed is an AssignedPodAdd (InterPodAffinity registers it). A pod parked
    by NodeResourcesFit, which does not, cannot be moved by it: upstream's queue returns before
    asking any pod when no plugin registers an event (isEventOfInterest), and moves only pods
    with a matching required affinity term on an assigned pod's add
    (getUnschedulablePodsWithCrossTopologyTerm). Tessera asked each parked pod's rejectors'
    hints on every confirmation: with 2,000 pods parked for room, 5,000 confirmations took
    13.5 s in the core instead of 1 s (bench: /tmp/s56/review56/bench_bind.py)."""
    from scheduler.core.framework.runtime import ProfileRuntime

    core = Core()
    core.apply("ADDED", b.node("n", cpu="4", memory="8Gi"))
    for i in range(20):
        core.apply("ADDED", b.pod(f"big{i}", requests={"cpu": "8"}))
    core.apply("ADDED", b.pod("q", requests={"cpu": "1"}))
    core.run()
    assert all(core.where(f"big{i}") == UNSCHEDULABLE for i in range(20))
    asked: list[str] = []
    original = ProfileRuntime.worth_retrying

    def counting(self: ProfileRuntime, uid: str, rejectors: frozenset[str], event: Any) -> bool:
        asked.append(uid)
        return original(self, uid, rejectors, event)

    monkeypatch.setattr(ProfileRuntime, "worth_retrying", counting)
    core.apply("MODIFIED", b.pod("q", requests={"cpu": "1"}, node_name="n"))

    assert asked == [], f"{len(asked)} parked pods asked about a Binding confirmed"
    assert all(core.where(f"big{i}") == UNSCHEDULABLE for i in range(20))


# --- 5. a plugin that says nothing about events: upstream's default events may help (DEFAULT_EVENTS) -

class _NeedsLabel(FilterPlugin):
    """A filter written without `queueing_hints`, as a contributor adds one from the docs: nodes
    labelled ready=yes only."""

    name = "NeedsLabel"

    def filter(self, ctx: PodContext, info: NodeInfo) -> Reasons | None:
        assert info.node is not None
        return None if info.node.meta.labels.get("ready") == "yes" else ("node(s) not ready",)


def test_a_filter_without_queueing_hints_is_retried_on_every_event(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pod `p` is parked by NeedsLabel; its node is then labelled. A plugin that does not
    say which events may help got `{}`, read as "no event helps": `p` waited for the 5-minute
    flush. Upstream registers a plugin without EnqueueExtensions for every event with a hint that
    always queues (framework.go defaultEnqueueExtension, UnrollWildCardResource)."""
    monkeypatch.setattr(runtime, "REGISTRY", (*REGISTRY, PluginSpec(_NeedsLabel, lambda handle, args: _NeedsLabel())))
    core = Core()
    core.apply("ADDED", b.node("n", cpu="4", memory="8Gi"), b.pod("p", requests={"cpu": "1"}))
    assert [a.node for a in _of(core.run(), "p")] == [None]
    assert core.where("p") == UNSCHEDULABLE
    core.apply("MODIFIED", b.node("n", cpu="4", memory="8Gi", labels={"ready": "yes"}))

    retry = _of(core.later(BACKOFF_AT_MOST), "p")
    assert retry and retry[0].node == "n", f"p stays parked ({core.where('p')}) although n is labelled"
    assert EventKind.NODE_UPDATED in _NeedsLabel().queueing_hints()


def test_a_filter_without_queueing_hints_is_not_woken_by_tesseras_own_resources(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Upstream's default registers the in-tree resources only (UnrollWildCardResource: pods,
    nodes, storage, ResourceClaim, DeviceClass, and the Workload API's PodGroup): a custom
    resource is not among them. Tessera's ExtendedResource and ResourceClass are its own custom
    resources, so a plugin that does not say is not retried when one changes (the flush still
    tries it again); every other kind is a pod, node or PodGroup event upstream too."""
    monkeypatch.setattr(runtime, "REGISTRY", (*REGISTRY, PluginSpec(_NeedsLabel, lambda handle, args: _NeedsLabel())))
    core = Core()
    core.apply("ADDED", b.node("n", cpu="4", memory="8Gi"), b.pod("p", requests={"cpu": "1"}))
    assert [a.node for a in _of(core.run(), "p")] == [None]
    core.apply("ADDED", b.device("n", 0), b.resource_class("v100", {"model": "V100"}))

    assert _of(core.later(BACKOFF_AT_MOST), "p") == []
    assert core.where("p") == UNSCHEDULABLE
    assert _NeedsLabel().queueing_hints().keys() == set(EventKind) - {EventKind.DEVICE_CHANGED,
                                                                       EventKind.CLASS_CHANGED}


def test_plugins_that_register_no_event_say_so() -> None:
    """The plugins whose rejections no cluster event can undo register nothing explicitly (an
    empty mapping, as upstream's EventsToRegister returning none); NodeName registers NodeAdd as
    upstream (a pod naming a node absent until then)."""
    unhonoured = Scheduler(config(BINPACK)).profiles["tessera"].find(TesseraUnhonouredTerms)
    assert unhonoured is not None and unhonoured.queueing_hints() == {}
    assert NodeName().queueing_hints() == {EventKind.NODE_ADDED: always}


def test_coschedulings_hints_ask_about_the_members_own_group_and_a_podgroup_with_min_resources() -> None:
    """A pod or PodGroup added wakes only the members of that group; room made (a node, a pod
    leaving) wakes only members whose PodGroup has minResources: a member without its PodGroup
    waits for the PodGroup, not for room."""
    from scheduler.core.plugins.coscheduling import Coscheduling, CoschedulingArgs
    from scheduler.core.state import ClusterEvent
    from tests.helpers import Run

    label = "scheduling.x-k8s.io/pod-group"
    run = Run(config(BINPACK))
    sized = b.podgroup("sized", 2)
    sized["spec"]["minResources"] = {"cpu": "1"}
    run.add(b.node("n1"), sized, b.podgroup("plain", 2),
            *(b.pod(f"{group}-0", labels={label: group}) for group in ("sized", "plain", "missing")))
    hints = Coscheduling(type("H", (), {"state": run.state})(), CoschedulingArgs()).queueing_hints()
    pods = {group: run.state.pod_by_key(f"default/{group}-0") for group in ("sized", "plain", "missing")}
    sized_key = pods["sized"].gang.key
    for kind in (EventKind.POD_ADDED, EventKind.PODGROUP_CHANGED):
        assert hints[kind](pods["sized"].uid, ClusterEvent(kind, group=sized_key))
        assert not hints[kind](pods["plain"].uid, ClusterEvent(kind, group=sized_key))
    for kind in (EventKind.NODE_ADDED, EventKind.ASSIGNED_POD_REMOVED):
        assert [hints[kind](pod.uid, ClusterEvent(kind, node="n1")) for pod in pods.values()] == [True, False, False]
