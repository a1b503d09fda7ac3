"""Coscheduling: which pods form a gang, its minimum, and whether enough members exist yet.

Three forms are accepted: the scheduler-plugins v0.18 labels (`pod-group.scheduling.sigs.k8s.io/name`
+ `/min-available`, minimum frozen from the first member seen), the scheduler-plugins PodGroup CRD
(`scheduling.x-k8s.io/pod-group` label, `spec.minMember`) and upstream's Workload API PodGroup
(`spec.schedulingGroup.podGroupName`, `spec.schedulingPolicy.gang.minCount`; Kubernetes 1.36
alpha). The gang's topology constraint comes with its PodGroup (or, the label form, its members'
annotations: they must agree) and is placed by the TopologyPlacement plugin. Placement itself is
a transaction of the cycle (`scheduler/core/cycle.py`); this plugin answers "may the group be
tried now", orders the members, and reports the PodGroup status.

Where "not yet" is answered follows each form's upstream. kube-scheduler's GangScheduling answers
it for a Workload API PodGroup in PreEnqueue (v1.36 pkg/scheduler/framework/plugins/gangscheduling
GangScheduling.PreEnqueue: the PodGroup is missing, or fewer than minCount pods exist): such a pod
is gated, never attempted — no FailedScheduling Event, no PodScheduled condition, no attempt
counted, scheduler_pending_pods{queue="gated"} — until a sibling or its PodGroup arrives.
scheduler-plugins' Coscheduling answers it in PreFilter, in every release (v0.18.800's
lightweight labels, the PodGroup CRD through master: pkg/coscheduling/core/core.go
PodGroupManager.PreFilter, "cannot find enough sibling pods"): its members are attempted and
rejected, with the Event and condition such an attempt writes. The words are the PodGroup form's,
exactly ("pre-filter pod NAME cannot find enough sibling pods, current pods number: N, minMember of
group: M"), for the label form too (v0.18's own PreFilter said only "less than minAvailable").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from scheduler.api.config_reader import ArgsReader, Checks
from scheduler.core.capacity import (ClusterTotals, and_never_fits, class_free, cluster_wanted, min_resource_class,
                                     own_used)
from scheduler.core.framework.attempt import Attempt
from scheduler.core.framework.handle import Handle
from scheduler.core.framework.interface import GangView, GroupPlugin, PreEnqueuePlugin, QueueingHint
from scheduler.core.objects import (PLUGINS_API, PODGROUP_API_VERSIONS, WORKLOAD_API, Pod, PodGroup,
                                    gang_key_parts, gang_name)
from scheduler.core.state import ClusterEvent, ClusterState, EventKind, Notice
from scheduler.first_few import first_few

NAME = "Coscheduling"
ARGS_FIELDS = ("permitWaitingTimeSeconds", "podGroupBackoffSeconds")
ARGS_IGNORED = ("podGroupRejectPercentage",)
ARGS_UNUSED = ("permitWaitingTimeSeconds",)  # gangs never wait at Permit here
_GATED_SHOWN = 3  # gated members named in a reason, the rest counted


class CoschedulingArgs(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # accepted for scheduler-plugins compatibility: gangs never wait at Permit here
    permit_waiting_time_seconds: int = Field(default=60, ge=0)
    pod_group_backoff_seconds: int = Field(default=0, ge=0)


def parse_args(args: ArgsReader) -> CoschedulingArgs:
    found = Checks()
    waiting = found.read(lambda: args.non_negative("permitWaitingTimeSeconds", 60), 0)
    backoff = found.read(lambda: args.non_negative("podGroupBackoffSeconds", 0), 0)
    found.raise_errors()
    return CoschedulingArgs(permit_waiting_time_seconds=waiting, pod_group_backoff_seconds=backoff)


class Coscheduling(GroupPlugin, PreEnqueuePlugin):
    name = NAME
    # scheduler-plugins' Coscheduling (v1alpha1: Unreserve); Tessera's cycle places the gang itself
    also_extends: ClassVar[frozenset[str]] = frozenset(
        {"queueSort", "preFilter", "postFilter", "permit", "reserve", "unreserve"})
    stays_on: ClassVar[str] = ("it places a gang's members as one transaction, at least minMember of them or none: "
                               "without it a gang could be split, some members bound and the rest waiting forever")

    def __init__(self, handle: Handle, args: CoschedulingArgs) -> None:
        self.state = handle.state
        self.backoff_seconds = args.pod_group_backoff_seconds

    def queueing_hints(self) -> Mapping[EventKind, QueueingHint]:
        # a sibling arrived, or the PodGroup did (upstream GangScheduling's Pod/Add and PodGroup/Add):
        # a gated member is asked again, and a scheduler-plugins member is retried even while its
        # gang is still short, so that its reason shows the current member count; a PodGroup change
        # likewise replaces a stale "podgroup not found" (or an old minMember); room made anywhere
        # may close a PodGroup's minResources gap, and so may devices or classes changing (a
        # class's resource there counts the devices the class matches)
        hints: dict[EventKind, QueueingHint] = dict.fromkeys((EventKind.POD_ADDED, EventKind.PODGROUP_CHANGED),
                                                             self._same_group)
        hints.update(dict.fromkeys((EventKind.NODE_ADDED, EventKind.NODE_UPDATED, EventKind.ASSIGNED_POD_REMOVED,
                                    EventKind.DEVICE_CHANGED, EventKind.CLASS_CHANGED), self._needs_resources))
        return hints

    def _same_group(self, uid: str, event: ClusterEvent) -> bool:
        pod = self.state.pods.get(uid)
        return pod is not None and pod.gang is not None and pod.gang.key == event.group

    def _needs_resources(self, uid: str, event: ClusterEvent) -> bool:
        pod = self.state.pods.get(uid)
        if pod is None or pod.gang is None:
            return False
        group = self.state.gangs.podgroups.get(pod.gang.key)
        return group is not None and bool(group.min_resources)

    def pre_enqueue(self, pod: Pod) -> str | None:
        """A Workload API gang member waits outside the queue while its group cannot be tried
        (upstream's GangScheduling PreEnqueue); scheduler-plugins' forms are rejected in PreFilter
        instead (`waiting_message`, asked by the cycle), as scheduler-plugins does."""
        if pod.gang is None or pod.gang.api != WORKLOAD_API:
            return None
        return waiting_message(self.state, pod)

    def waiting_message(self, pod: Pod) -> str | None:
        return waiting_message(self.state, pod)

    def view(self, pod: Pod) -> GangView | None:
        return gang_view(self.state, pod)

    def post_filter_message(self, pod: Pod) -> str | None:
        return rejected_after_post_filter(self.state, pod)

    def placement_order(self, pod: Pod) -> tuple[int, int, int, str]:
        """Place device-hungry members first, then by CPU and memory, so the CPU-only PS goes last."""
        extended = sum(amount for name, amount in pod.requests.items() if "/" in name)
        return (-extended, -pod.requests.get("cpu", 0), -pod.requests.get("memory", 0), pod.key)


def waiting_message(state: ClusterState, pod: Pod) -> str | None:
    """Why this member's group cannot be tried yet (PreFilter), or None when it can."""
    return short_message(state, pod) or min_resources_gap(state, pod)


def short_message(state: ClusterState, pod: Pod) -> str | None:
    """`waiting_message` before the minResources check: why the group is not complete enough to
    be checked at all (its members disagree, its PodGroup is missing, too few members), or None."""
    assert pod.gang is not None
    key = pod.gang.key
    disagreement = state.gangs.topology_conflict(key)
    if disagreement is not None:
        return disagreement
    minimum = state.group_min(key, pod)
    upstream = pod.gang.api == WORKLOAD_API  # kube-scheduler's GangScheduling words, else scheduler-plugins'
    if minimum is None:
        unreadable = state.unreadable_podgroups.get(key)
        if unreadable is not None:  # there, but not readable: an InvalidObject Warning on it says the same
            return f'podgroup "{gang_name(key)}" is not valid: {unreadable}'
        if upstream:
            return f'waiting for pods\'s pod group "{gang_key_parts(key)[1]}" to appear in scheduling queue'
        return f'podgroup "{gang_name(key)}" not found'
    members = counted_count(state, key)
    if members < minimum:
        if upstream:
            return "waiting for minCount pods from a gang to appear in scheduling queue"
        # scheduler-plugins' words exactly (core.go PreFilter: the pod's name, not its namespace)
        return (f"pre-filter pod {pod.meta.name} cannot find enough sibling pods, "
                f"current pods number: {members}, minMember of group: {minimum}{gated_clause(state, key)}")
    return None


def gated_clause(state: ClusterState, key: str) -> str:
    """Tessera's clause naming the group's members held by spec.schedulingGates ("" for none).
    They exist but are never tried, so they do not count toward the minimum; upstream's PreFilter
    counts every labelled pod (gated ones too) and would then wait at Permit for a member that is
    never tried. Without the clause the count read as if a member were missing (Kueue ungates a
    gang in batches: "current pods number: 2" of 3 pods that exist)."""
    gated = sorted(state.pods[uid].meta.name for uid in state.gangs.members.get(key, set()) & state.gated
                   if uid in state.pods)
    if not gated:
        return ""
    return (f"; {len(gated)} more {'is' if len(gated) == 1 else 'are'} gated (spec.schedulingGates): "
            f"{first_few(gated, _GATED_SHOWN)}")


def min_resources_gap(state: ClusterState, pod: Pod) -> str | None:
    """The member's PodGroup's minResources check (`resource_gap`), or None without one."""
    assert pod.gang is not None
    group = state.gangs.podgroups.get(pod.gang.key)
    return resource_gap(state, pod, group.min_resources, group.min_member) if group is not None else None


def rejected_after_post_filter(state: ClusterState, pod: Pod) -> str | None:
    """scheduler-plugins' Coscheduling.PostFilter reason for a member that found no node (it runs
    after DefaultPreemption's, which found no candidate): "can not find pod group" without its
    PodGroup; none when the group's members on a node (assumed or bound, leaving ones too: its
    CalculateAssignedPods counts the snapshot's pods) reach minMember or fall short of it by 10 %
    or less (its float32 arithmetic); else the group is rejected, in its words (an unreadable
    PodGroup too: scheduler-plugins reads the object Tessera refuses). Upstream's
    Workload API gangs wait at PreEnqueue instead and never get here."""
    assert pod.gang is not None
    key = pod.gang.key
    minimum = state.group_min(key, pod)
    if minimum is None and key not in state.unreadable_podgroups:
        return "can not find pod group"
    # an unreadable PodGroup is there (Tessera refuses what it says, e.g. a topology annotation):
    # with no minimum to count against, rejected as a group far from it
    assigned = len(state.placements.keys() & state.gangs.members.get(key, set()))
    # float32(minimum - assigned) / float32(minimum) <= float32(0.1) upstream: the same as this
    # exact test for any minMember below 10^7 (a quotient above 0.1 is then more than float32's
    # rounding away from it)
    if minimum is not None and 10 * (minimum - assigned) <= minimum:
        return None
    return (f"PodGroup {gang_name(key)} gets rejected due to Pod {pod.meta.name} is unschedulable even after "
            "PostFilter")


def resource_gap(state: ClusterState, pod: Pod, min_resources: Mapping[str, int], min_member: int) -> str | None:
    """scheduler-plugins' minResources check (PodGroupManager.PreFilter, CheckClusterResource):
    the group waits until the nodes' free resources together cover `minResources` and `pods:
    minMember`, counting what the group's own members hold as free. Free is a node's allocatable
    less everything its bound and assumed pods use of it (negative on an overcommitted node, as
    upstream's sum) but what the group's members hold: their charged requests and the devices
    counted as it that only they hold, a class's devices too (`capacity.own_used`); of a
    ResourceClass's resource, which the nodes need not allocate, the devices the class matches
    that others do not hold (`capacity.class_free`). A nominated preemptor's hold is not counted
    (`NodeInfo.real_used`, `DeviceLedger.holders`), whatever its priority: upstream reads the
    cycle's snapshot (getNodeResource: the snapshot NodeInfo's Requested and Pods), which holds
    the bound and assumed pods only; nominated pods are added to a node in Filter alone
    (kube-scheduler's RunFilterPluginsWithNominatedPods / addGENominatedPods), where the
    members' own attempts here count those of their priority or higher too."""
    if not min_resources:
        return None
    wanted = cluster_wanted(min_resources, min_member)
    classes = {name: min_resource_class(state, name) for name in wanted}
    own = {uid for uid in state.gang_uids(pod) if uid in state.placements}
    for info in state.node_infos():
        if info.node is None:
            continue
        mine = len(info.pods & own)
        for name in list(wanted):
            served, cls = classes[name]
            if name == "pods":
                free = info.node.allocatable.get("pods", 0) - (len(info.pods) - mine)
            elif served:
                free = class_free(state, info, cls, own) if cls is not None else 0
            else:
                free = info.node.allocatable.get(name, 0) - info.real_used(name) + own_used(state, info, own, name)
            wanted[name] -= free
            if wanted[name] <= 0:
                del wanted[name]
        if not wanted:
            return None
    gap = " ".join(f"{name}:{_quantity(name, amount)}" for name, amount in sorted(wanted.items()))
    return f"resource gap: map[{gap}]"


def _quantity(name: str, amount: int) -> str:
    """An amount in scheduler units as a Kubernetes quantity (CPU is counted in millicores)."""
    if name == "cpu" and amount % 1000:
        return f"{amount}m"
    return str(amount // 1000 if name == "cpu" else amount)


def gang_view(state: ClusterState, pod: Pod) -> GangView | None:
    """The group's bound and pending members, or None when it cannot be tried yet."""
    assert pod.gang is not None
    key = pod.gang.key
    minimum = state.group_min(key, pod)
    if minimum is None or waiting_message(state, pod) is not None:
        return None
    bound: list[Pod] = []
    pending: list[Pod] = []
    for member in counted_members(state, pod):
        (bound if member.uid in state.placements else pending).append(member)
    return GangView(key, minimum, bound, pending, state.gangs.topology(key, pod))


def counted_members(state: ClusterState, pod: Pod) -> list[Pod]:
    """The members that count toward the group's minimum, in uid order: on a node and staying, or
    waiting for one (not gated, not being deleted, scheduled by us). A member that is leaving (deleted,
    or a preemption's victim) does not: counting it could complete a gang that is being evicted,
    leaving the new members alone below the minimum once it is gone; and a transaction could be
    tried that can never commit."""
    assert pod.gang is not None
    return counted_members_of(state, pod.gang.key)


def counted_members_of(state: ClusterState, key: str) -> list[Pod]:
    """`counted_members` of the group `key`."""
    return [state.pods[uid] for uid in sorted(_counted_uids(state, key))]


def counted_count(state: ClusterState, key: str) -> int:
    """How many members of the group `key` count toward its minimum: `len(counted_members)`
    without sorting or visiting each member in Python. Asked by every attempt of a member while
    its gang is short, and every earlier member is retried at each sibling's arrival (so that its
    reason shows the current count): a gang of n members arriving one by one made n² attempts,
    each sorting all n members (300 members took 40 s). The count is kept per gang until
    anything changes that could change it (`ClusterState.members_version`; a waiting member's
    attempt changes none), so a burst of retries counts once; counting itself intersects in C
    over the smaller side (set & set, dict view & set), visiting only placed members (`leaving`)."""
    if state.counted_at != state.members_version:  # kept only while nothing changed: no gang's stays behind
        state.counted.clear()
        state.counted_at = state.members_version
    count = state.counted.get(key)
    if count is None:
        count = state.counted[key] = len(_counted_uids(state, key))
    if VERIFY_COUNTS:
        assert count == len(counted_members_of(state, key)), (key, count, len(counted_members_of(state, key)))
    return count


# tests may set this: every count kept is checked against `counted_members` (a change to the state
# that does not bump `members_version` would show)
VERIFY_COUNTS = False


def _counted_uids(state: ClusterState, key: str) -> set[str]:
    """The rule of `counted_members` (its one home), as uids: live members waiting for a node,
    and live members on one that are not leaving. Sets are intersected in C over the smaller
    side (set & set, dict view & set); only placed members are visited in Python (`leaving`)."""
    members = state.gangs.members.get(key)
    if not members:
        return set()
    pending = state.pending
    counted = state.pods.keys() & (members & pending)  # live, waiting for a node
    placed = state.placements.keys() & members
    if placed:
        pods = state.pods
        counted.update(uid for uid in placed - pending
                       if (member := pods.get(uid)) is not None and not state.leaving(member))
    return counted


@dataclass(frozen=True, slots=True)
class GroupStatus:
    """A PodGroup's status as the scheduler-plugins PodGroup controller reports it.

    running/succeeded/failed count the phases of the group's pods that exist now. The phase
    follows the controller's rules (pkg/controllers/podgroup_controller.go Reconcile): Pending
    until minMember members exist, then Scheduling, Running once running + succeeded reach
    minMember, Failed once a member failed and failed + running + succeeded reach minMember,
    Finished once minMember succeeded; Pending again when fewer than minMember members exist —
    until the object's phase is Finished or Failed: the controller stops there, so do we
    (`final`: nothing is written any more). The controller recounts only outside Pending and
    before a final phase: a final group keeps the counts the object shows (a failed Job's group
    reads `Failed, running 3, failed 1` once its pods are gone), and so does one whose object is
    Pending while it has fewer than minMember members (it went back with the counts of the pods
    left then; `kubectl delete job` on a running gang leaves it `Pending` with the count its first
    short reconcile saw, as upstream's does: the `len(pods) == 0` rule of older copies of that
    file predates kubernetes-sigs/scheduler-plugins#574). Today's controller
    and CRD have no `Scheduled` phase and no `scheduled` count (older releases had both; the CRD we
    ship, like upstream's, would prune the count). `scheduled` (members on a node: bound, or
    assumed while their Binding is in flight) is kept for the upstream Workload API's
    PodGroupScheduled condition.
    """

    phase: str
    scheduled: int
    running: int
    succeeded: int
    failed: int
    minimum: int = 1
    api: str = PLUGINS_API  # which PodGroup API the group is (its status is written in that API's form)
    condition: str = ""  # upstream's PodGroupScheduled status on the object ("True", "False", "")
    final: bool = False  # the object's phase is final (Finished/Failed): write nothing
    generation: int = 0  # the PodGroup's metadata.generation (the condition's observedGeneration)
    uid: str = ""  # the PodGroup object's uid: its status is written to that object only
    occupied_by: str = ""  # status.occupiedBy to write ("": none; the object has one, or no owner to name)


def group_status(state: ClusterState, key: str) -> GroupStatus | None:
    """The status of the PodGroup `key`, or None when its PodGroup object is not known."""
    group = state.gangs.podgroups.get(key)
    if group is None:
        return None
    minimum = group.min_member
    # only the pods naming this PodGroup (scheduler-plugins' controller lists the group's pods by
    # its label): a label gang of the same name has a key of its own
    members = [pod for uid in state.gangs.history.get(key, ()) if (pod := state.pods.get(uid)) is not None]
    phases = [pod.phase for pod in members]
    running, succeeded, failed = phases.count("Running"), phases.count("Succeeded"), phases.count("Failed")
    scheduled = sum(1 for pod in members if pod.uid in state.placements or pod.terminal)
    final = bool(group.final_phase)
    short = len(members) < minimum
    if final or (short and group.api == PLUGINS_API and group.phase in ("", "Pending")):
        # the controller recounts only in its `default:` case, never once final nor while Pending
        running, succeeded, failed = group.counts
    if final:
        phase = group.final_phase
    elif short:
        phase = "Pending"
    elif succeeded >= minimum:
        phase = "Finished"
    elif failed and failed + running + succeeded >= minimum:
        phase = "Failed"
    elif running + succeeded >= minimum:
        phase = "Running"
    else:
        phase = "Scheduling"
    occupied = ""
    if group.api == PLUGINS_API and not group.occupied_by and members and len(members) >= minimum:  # left Pending
        occupied = occupied_by(min(members, key=lambda pod: pod.key))
    return GroupStatus(phase, scheduled, running, succeeded, failed, minimum, group.api, group.scheduled_condition,
                       final, group.meta.generation, group.meta.uid, occupied)


def reports_status(state: ClusterState, key: str) -> bool:
    """Whether Tessera writes the status of the PodGroup `key`: while one of its pods (any that
    exists, finished ones too) has one of this scheduler's names, and once no pod is left, when
    one of ours named it (`GangIndex.ours`: a finished job's group gets its last phase).
    scheduler-plugins' PodGroup controller writes every PodGroup, whichever scheduler its pods
    name; beside it (a migration) a group whose pods are all another scheduler's is that one's to
    report, and two writers reverted each other's status (a trial: 73 of 74 patches in 10 s).
    Its PodGroup names no scheduler (spec: minMember, minResources, scheduleTimeoutSeconds), so
    a group no pod has named yet is nobody's we know: it is not written until a pod of ours names
    it (Kubeflow's training operator creates the PodGroup before its pods; another scheduler's
    such group got Tessera's `Pending` once). Its first pod of ours writes it then (`Pending`
    while fewer than minMember exist, as that controller's `case "":` and short-group rules
    would have by then). Stops at the first pod of ours: asked at every change of a member.
    A group with no pod left whose object shows a phase the controller recounts in (Scheduling,
    Running: neither Pending, nor none yet, nor final) is written too, whoever's pods it had: a
    new process or a new leader has not seen the pods that made it ours (`kubectl delete job`
    while Tessera was down left one `Running, running: 4` over restarts), and the controller
    writes any such group `Pending` with every count 0 (`group_status`'s short rule), as we do."""
    pods = state.pods
    any_pod = False
    for uid in state.gangs.history.get(key, ()):
        pod = pods.get(uid)
        if pod is not None:
            if state.is_ours(pod):
                return True
            any_pod = True
    if any_pod:
        return False
    group = state.gangs.podgroups.get(key)
    stale = group is not None and group.phase not in ("", "Pending") and not group.final_phase
    return stale or key in state.gangs.ours


def occupied_by(pod: Pod) -> str:
    """scheduler-plugins' occupiedBy, as its PodGroup controller fills it once the group leaves
    Pending (pkg/controllers/podgroup_controller.go fillOccupiedObj, from the first of the group's
    pods): each owner as "<namespace>/<owner name>", sorted, joined by ","; "" for a pod without
    owners. Set once: a group whose object shows one is left as it is (the controller only sets it
    when leaving Pending). Of the members, the first by name stands for the controller's first
    listed pod (a cache's order, which it does not define)."""
    return ",".join(sorted(f"{pod.meta.namespace}/{owner}" for owner in pod.owners))


# schedule_one_podgroup.go's group statuses for a group that was tried and did not fit: errPodGroupUnschedulable's
# text, followed (framework Status.Message: the error first, then the reasons) by the reason a group that fits
# only once its victims are gone carries (waitingOnPreemption)
GROUP_UNSCHEDULABLE = "pod group is unschedulable"
GROUP_WAITING_ON_PREEMPTION = "pod group is waiting for preemption to complete"
NO_PLACEMENTS = "no feasible placements found"  # framework.go RunPlacementGeneratePlugins


def unschedulable_message(state: ClusterState, key: str, preempting: bool) -> str:
    """The PodGroupScheduled=False message of a cycle that tried the group `key` and placed
    nothing: the group's status, not a member's (their reasons stay on the pods), as
    kube-scheduler's submitPodGroupAlgorithmResult writes it; `preempting` when the cycle chose
    victims for it. A group with a `schedulingConstraints.topology` key goes through upstream's
    placement algorithm: one placement per value of the key among the nodes, only the value of
    members already on a node if any (topology_placement.go GeneratePlacements), and when none
    fits `0/N placements are available, first placement status: <its error>`."""
    if preempting:
        return f"{GROUP_UNSCHEDULABLE}, {GROUP_WAITING_ON_PREEMPTION}"
    group = state.gangs.podgroups.get(key)
    label = group.constraint_key if group is not None else ""
    if not label:
        return GROUP_UNSCHEDULABLE
    domains = {info.node.meta.labels[label] for info in state.node_infos()
               if info.node is not None and label in info.node.meta.labels}
    on_nodes = (state.nodes.get(name) for uid in state.gangs.history.get(key, ())
                if (name := state.node_of(uid)) is not None)
    held = {info.node.meta.labels.get(label) for info in on_nodes if info is not None and info.node is not None}
    if len(held) == 1:
        domains &= held
    if not domains:
        return NO_PLACEMENTS
    return f"0/{len(domains)} placements are available, first placement status: {GROUP_UNSCHEDULABLE}"


# the reason of the Warning a PodGroup gets when its gang was tried and did not fit: Volcano's for its
# PodGroups (pkg/scheduler/cache/cache.go RecordJobStatusEvent, scheduling.PodGroupUnschedulableType),
# and the reason of the Workload API's PodGroupScheduled=False
GROUP_UNSCHEDULABLE_REASON = "Unschedulable"


def unschedulable_notice(state: ClusterState, attempts: Sequence[Attempt], totals: ClusterTotals) -> Notice | None:
    """What the PodGroup of a gang whose cycle placed nothing is told (a Warning Event live), or
    None: the cycle was not such a gang's, it was placed, it could not be tried yet (too few
    members: its phase says Pending), it failed with an error, or its gang has no PodGroup object
    (the label form). scheduler-plugins records nothing on a PodGroup whose gang does not fit (its
    Coscheduling rejects pods; its controller's only Event is `Timeout`) and kube-scheduler only
    sets PodGroupScheduled=False with its terse "pod group is unschedulable": a platform engineer
    describing the PodGroup saw no reason at all. The message is the gang's, the very text of its
    members' FailedScheduling Events (every member of a failed gang reads it: cycle.py), so one
    retry after another joins one Event series. Those stay upstream's words, which read as "wait
    for room" even for a gang the cluster as it is can never hold (a new user's trial: 5 x 8 GPUs
    on 32); this Event is Tessera's own, so it adds `kubectl tessera explain`'s sentence then.
    A gang complete enough to be tried that its PodGroup's minResources hold back (PreFilter: a
    "waiting" cycle of one member) is told too (`_min_resources_notice`).
    `totals`: how the gang's profile names topology domains (`Scheduler.cluster_totals`)."""
    if len(attempts) == 1 and attempts[0].gang_outcome == "waiting" and not attempts[0].error:
        return _min_resources_notice(state, attempts[0].pod, totals)
    if not attempts or any(a.node is not None or a.error or a.gang_outcome != "failed" for a in attempts):
        return None
    pod = attempts[0].pod
    group = state.gangs.podgroup_of(pod)
    if group is None:
        return None
    return _group_notice(group, and_never_fits(attempts[0].message, state, pod, totals))


# the reason of the Normal Event a PodGroup gets once its gang's placement is bound: Volcano's for its
# PodGroups (pkg/scheduler/cache/cache.go RecordJobStatusEvent, scheduling.PodGroupScheduled), and
# the reason of the pod's own Event for its Binding
GROUP_SCHEDULED_REASON = "Scheduled"


def placed_group(state: ClusterState, attempts: Sequence[Attempt]) -> str | None:
    """The key of the PodGroup whose gang this cycle placed (at least its minimum: a member beyond
    it that fit nowhere is left out, a pod like any other), or None: the cycle was not such a
    gang's, it placed nothing, or the gang has no PodGroup object (the label form: nothing to
    write an Event about)."""
    if not attempts or any(a.gang_outcome != "placed" for a in attempts) or all(a.node is None for a in attempts):
        return None
    group = state.gangs.podgroup_of(attempts[0].pod)
    return group.key if group is not None else None


def scheduled_notice(state: ClusterState, key: str, nodes: Sequence[str]) -> Notice | None:
    """What the PodGroup `key` is told once every member one placement of its gang bound landed,
    on `nodes` (one per member), or None when the PodGroup is gone. Without it a gang placed after
    Warnings (its `Unschedulable`, a preemption's wait for its victims) showed only those Warnings
    on `kubectl describe pg`: nothing said it was placed. scheduler-plugins writes no such Event
    (its controller moves the phase only); Volcano writes `Scheduled` on every session ("pod group
    is ready"); this one is written once per placement and names how many members went where, in
    the words of the members' own `Scheduled` ("Successfully assigned ns/pod to node")."""
    group = state.gangs.podgroups.get(key)
    if group is None:
        return None
    where = ", ".join(f"{count} to {node}" for node, count in sorted(Counter(nodes).items()))
    members = f"{len(nodes)} member" + ("" if len(nodes) == 1 else "s")
    return Notice("PodGroup", gang_name(key), GROUP_SCHEDULED_REASON,
                  f"Successfully assigned {members} of pod group {gang_name(key)}: {where}",
                  group.meta.namespace, group.meta.uid, PODGROUP_API_VERSIONS[group.api])


def _min_resources_notice(state: ClusterState, pod: Pod, totals: ClusterTotals) -> Notice | None:
    """The notice of a member rejected in PreFilter by its PodGroup's minResources (scheduler-plugins'
    CheckClusterResource: the nodes' free resources together do not cover them; none for any other
    reason to wait): `pod group NS/NAME: ` and upstream's `resource gap: map[...]` (its words, the
    quantities as kubectl writes them: upstream prints Go's struct form of each) — the reason
    every member's FailedScheduling carries, without the member's own words after it (its name in
    the PostFilter's), so each member's retry joins the one series — then `and_never_fits`'
    sentence when the cluster could never free them (`capacity.beyond_min_resources`). A trial's
    PodGroup asking 40 GPUs of 8 showed `Events: <none>`."""
    group = state.gangs.podgroup_of(pod)
    if group is None or not group.min_resources or short_message(state, pod) is not None:
        return None
    gap = min_resources_gap(state, pod)
    if gap is None:
        return None
    return _group_notice(group, and_never_fits(f"pod group {gang_name(group.key)}: {gap}", state, pod, totals))


def _group_notice(group: PodGroup, message: str) -> Notice:
    return Notice("PodGroup", gang_name(group.key), GROUP_UNSCHEDULABLE_REASON, message, group.meta.namespace,
                  group.meta.uid, PODGROUP_API_VERSIONS[group.api])
