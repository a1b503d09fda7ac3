"""Coscheduling: which pods form a gang, its minimum, and whether enough members exist yet.

Two forms are accepted (DESIGN.md §2): the scheduler-plugins v0.18 labels
(`pod-group.scheduling.sigs.k8s.io/name` + `/min-available`, minimum frozen from the first member
seen) and the PodGroup CRD (`scheduling.x-k8s.io/pod-group` label, `spec.minMember`). Placement
itself is a transaction in the cycle; this module only answers "may the group be tried now".
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.core.objects import Pod
from scheduler.core.state import ClusterState

NAME = "Coscheduling"


@dataclass(frozen=True, slots=True)
class GangView:
    key: str
    minimum: int
    bound: list[Pod]  # members already on a node (bound or assumed)
    pending: list[Pod]  # members waiting for a node


def waiting_message(state: ClusterState, pod: Pod) -> str | None:
    """Why this member's group cannot be tried yet (PreFilter), or None when it can."""
    assert pod.gang is not None
    key = pod.gang.key
    minimum = state.group_min(key, pod)
    if minimum is None:
        return f'podgroup "{key}" not found'
    # members that can count: on a node already, or waiting for one (not gated, not being
    # deleted, scheduled by us) — otherwise a transaction could be tried that can never commit
    members = sum(1 for uid in state.groups.get(key, ()) if uid in state.placements or uid in state.pending)
    if members < minimum:
        return (f"pod {pod.key} cannot find enough sibling pods, "
                f"current pods number: {members}, minMember of group: {minimum}")
    return None


def gang_view(state: ClusterState, pod: Pod) -> GangView | None:
    """The group's bound and pending members, or None when it cannot be tried yet."""
    assert pod.gang is not None
    key = pod.gang.key
    minimum = state.group_min(key, pod)
    if minimum is None or waiting_message(state, pod) is not None:
        return None
    bound: list[Pod] = []
    pending: list[Pod] = []
    for uid in sorted(state.groups.get(key, ())):
        member = state.pods[uid]
        if uid in state.placements:
            bound.append(member)
        elif uid in state.pending:
            pending.append(member)
    return GangView(key, minimum, bound, pending)


def placement_order(pod: Pod) -> tuple[int, int, int, str]:
    """Place device-hungry members first, then by CPU and memory, so the CPU-only PS goes last."""
    extended = sum(amount for name, amount in pod.requests.items() if "/" in name)
    return (-extended, -pod.requests.get("cpu", 0), -pod.requests.get("memory", 0), pod.key)


@dataclass(frozen=True, slots=True)
class GroupStatus:
    """A PodGroup's status as the scheduler-plugins PodGroup controller reports it.

    `scheduled` counts members on a node (bound, or assumed while their Binding is in flight);
    running/succeeded/failed count pod phases. The phase follows the controller's rules
    (pkg/controllers/podgroup_controller.go): Pending until minMember members exist, Scheduling
    until minMember are scheduled, then Scheduled, Running once running + succeeded reach
    minMember, Failed once a member failed and failed + running + succeeded reach minMember,
    Finished once minMember succeeded; Pending again when every member is gone.
    """

    phase: str
    scheduled: int
    running: int
    succeeded: int
    failed: int


def group_status(state: ClusterState, key: str) -> GroupStatus | None:
    """The status of the PodGroup `key`, or None when its PodGroup object is not known."""
    group = state.podgroups.get(key)
    if group is None:
        return None
    minimum = group.min_member
    members = [state.pods[uid] for uid in state.group_history.get(key, ()) if uid in state.pods]
    phases = [pod.phase for pod in members]
    running, succeeded, failed = phases.count("Running"), phases.count("Succeeded"), phases.count("Failed")
    scheduled = sum(1 for pod in members if pod.uid in state.placements or pod.terminal)
    if not members or len(members) < minimum:
        phase = "Pending"
    elif succeeded >= minimum:
        phase = "Finished"
    elif failed and failed + running + succeeded >= minimum:
        phase = "Failed"
    elif running + succeeded >= minimum:
        phase = "Running"
    elif scheduled >= minimum:
        phase = "Scheduled"
    else:
        phase = "Scheduling"
    return GroupStatus(phase, scheduled, running, succeeded, failed)
