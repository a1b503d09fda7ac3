"""A gang's eviction that stopped half-way, finished by whichever replica leads next.

Why: the apiserver deletes one pod per request, so evicting a gang is several writes, and the
leader can die between two of them, leaving the rest of the gang running below its minimum —
the state "gangs are never broken" rules out. The evictor marks every victim of a preemption
(the `DisruptionTarget` condition, reason `PreemptionByScheduler`) before it deletes any, so the
marks on the pods are the dead leader's whole decision. A gang whose running members are fewer
than its minimum (0 < running < minimum) and all carry such a mark lost members to that decision
(beyond its surplus, a gang goes whole, so every member was marked): they are evicted too.

Left alone: a gang still at its minimum (nothing acted on the decision yet; the next leader decides
again), a gang with an unmarked member running (marks left by a preemption that failed before its
DELETEs, on a gang below its minimum for another reason, e.g. a member completed), marks of another
scheduler, marks older than upstream's `stalePodDisruptionTimeout` (the disruption controller
turns them False after 2 min: the pod was not deleted, the decision is void) or without a readable
time, and gangs whose minimum is unknown.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.core.objects import Pod
from scheduler.core.plugins.preemption.victims import running_members
from scheduler.core.state import ClusterState

STALE_SECONDS = 120.0  # upstream pkg/controller/disruption stalePodDisruptionTimeout


@dataclass(frozen=True, slots=True)
class UnfinishedEviction:
    pod: Pod
    node: str
    gang: str  # the gang's key
    scheduler: str  # the profile that began the eviction (the mark's)


def unfinished_gang_evictions(state: ClusterState, now: float) -> list[UnfinishedEviction]:
    """The marked members to evict now, gang by gang in key order (none already being evicted)."""
    by_gang: dict[str, list[Pod]] = {}
    for uid in sorted(state.marked):
        pod = state.pods.get(uid)
        if pod is None or pod.gang is None or pod.meta.deleting or uid in state.preempting or uid not in state.placements:
            continue
        mark = pod.preemption_mark
        if mark is None or mark.since is None or now - mark.since > STALE_SECONDS:
            continue
        by_gang.setdefault(pod.gang.key, []).append(pod)
    unfinished: list[UnfinishedEviction] = []
    for key, marked in sorted(by_gang.items()):
        minimum = state.group_min(key, marked[0])
        running = running_members(state, key)
        if minimum is None or not 0 < len(running) < minimum or len(running) != len(marked):
            continue  # at its minimum, or an unmarked member runs: not a half-done eviction
        for pod in marked:
            assert pod.preemption_mark is not None
            unfinished.append(UnfinishedEviction(pod, state.placements[pod.uid].node, key, pod.preemption_mark.scheduler))
    return unfinished
