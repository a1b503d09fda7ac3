"""The view of a listed cluster, as `kubectl tessera nodes` shows it.

The listed objects are fed to a fresh core exactly as the live scheduler's informers feed its own
(`scheduler.sim.snapshot.load`), and the view is built from that core, with why each pending pod
waits as the scheduler wrote it on the pod (`scheduler.view.reasons`). A pod the leader holds at
its allocation gate (`WaitingForAllocation`, naming its node) is assumed there as the leader
assumed it (`Scheduler.assume_held_elsewhere`): its GPUs are `gated`, held by it, not free. A
pending pod nominated to a node (`status.nominatedNodeName`: a preemption made room there) gets the
room the leader keeps for it (`Scheduler.hold_nominated`, as explain's dry run does through every
cycle): those GPUs are `nominated`, not free.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from scheduler.api.config import SchedulerConfig
from scheduler.core.framework.attempt import Attempt
from scheduler.core.scheduler import Scheduler
from scheduler.sim.snapshot import load
from scheduler.view import model as m
from scheduler.view.cluster import WaitReason, build_view
from scheduler.view.reasons import wait_reasons


@dataclass(frozen=True, slots=True)
class Listed:
    """A core fed a listing as the leader holds it, and what the view needs beside it."""
    core: Scheduler
    reasons: dict[str, WaitReason]  # why each pending pod waits, as the scheduler wrote it on the pod
    held: list[Attempt]  # the pods assumed at their allocation gate
    devices_unread: bool = False  # listed without ExtendedResources (`build_view`'s)

    def view(self, now: float, source: str = "cluster") -> m.ClusterView:
        return build_view(self.core, source=source, now=now, reasons=self.reasons, held=self.held,
                          devices_unread=self.devices_unread)


def listed_core(config: SchedulerConfig, objects: Iterable[dict[str, Any]], now: float,
                devices_unread: bool = False) -> Listed:
    """`devices_unread`: the listing could not read ExtendedResources (the devices pods'
    annotations name are in use as they say, not ghosts: `build_view`)."""
    listed = list(objects)
    core = Scheduler(config)
    load(core, listed, now)
    reasons = wait_reasons(listed)
    held = core.assume_held_elsewhere({key: (wait.node, wait.message) for key, wait in reasons.items() if wait.node},
                                      now)
    core.hold_nominated(now)  # after the assumed pods, as the leader's next cycle keeps it beside them
    return Listed(core, reasons, held, devices_unread)


def listed_view(config: SchedulerConfig, objects: Iterable[dict[str, Any]], now: float,
                source: str = "cluster", devices_unread: bool = False) -> m.ClusterView:
    return listed_core(config, objects, now, devices_unread).view(now, source)
