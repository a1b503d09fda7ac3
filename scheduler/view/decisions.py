"""Recent decisions and the last word on each waiting pod, for the GPU map page.

The core keeps no history: an attempt's message goes into an Event and the pod's PodScheduled
condition, and the attempt is gone. The page wants both without reading the apiserver back, so the
live loop (and a replay) hands every attempt here: a bounded list of the newest decisions, and per
pod the reason it last waited for (dropped once it is placed).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from scheduler.core.framework.attempt import Attempt
from scheduler.core.scheduler import SCHEDULER_ERROR, UNSCHEDULABLE, WAITING_FOR_ALLOCATION
from scheduler.view.cluster import WaitReason
from scheduler.view.model import Decision

KEEP = 50  # decisions on the page


class DecisionLog:
    def __init__(self, keep: int = KEEP) -> None:
        self._recent: deque[Decision] = deque(maxlen=keep)
        self._waiting: dict[str, WaitReason] = {}  # pod key -> why it waits (until placed or pruned)

    def attempt(self, attempt: Attempt, at: float) -> None:
        """One scheduling attempt's outcome (placed, held by the gate, or why not)."""
        key = attempt.pod.key
        if attempt.node is not None and attempt.deferred:
            outcome = "held"
            self._waiting[key] = WaitReason(WAITING_FOR_ALLOCATION, attempt.message, attempt.node)
        elif attempt.node is not None:
            outcome = "placed"
            self._waiting.pop(key, None)
        elif attempt.error:  # the cycle failed with an error: the pod backs off, status SchedulerError
            outcome = "error"
            self._waiting[key] = WaitReason(SCHEDULER_ERROR, attempt.message)
        else:
            # a gang's victims ride on its first member's attempt; every member nominated to the
            # room they leave is preempting too
            outcome = "preempting" if attempt.preempted or attempt.nominated_node else "unschedulable"
            self._waiting[key] = WaitReason(UNSCHEDULABLE, attempt.message)
        self._recent.appendleft(Decision(at, key, outcome, attempt.node or attempt.nominated_node or "",
                                         attempt.message))

    def binding(self, pod: str, node: str, outcome: str, message: str, at: float,
                waiting: WaitReason | None = None) -> None:
        """A Binding that did not bind (refused, dropped): the page shows it beside the attempts.
        `waiting`: why the pod waits in the queue again (a refused Binding), until its next attempt."""
        self._recent.appendleft(Decision(at, pod, f"binding {outcome}", node, message))
        if waiting is not None:
            self._waiting[pod] = waiting

    def recent(self) -> tuple[Decision, ...]:
        """Newest first."""
        return tuple(self._recent)

    def reasons(self) -> dict[str, WaitReason]:
        return dict(self._waiting)

    def prune(self, waiting: Iterable[str]) -> None:
        """Forget pods that no longer wait (bound by the watch, deleted): the map stays bounded."""
        keep = set(waiting)
        self._waiting = {key: reason for key, reason in self._waiting.items() if key in keep}
