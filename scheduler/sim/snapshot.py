"""A listed cluster as the watch events a replay (or a fresh core) takes in.

One rule for every consumer of a cluster listed at one moment — `tessera record`'s snapshot,
`kubectl tessera`'s read-once core, its what-if replay: nodes, devices, classes, groups,
PriorityClasses, PodDisruptionBudgets, StorageClasses, PersistentVolumes and PersistentVolumeClaims
first, then pods bound to a node, then pending ones. The
core then counts everything already placed before it places anything: in name order a pending pod
could take GPUs a bound pod listed after it holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # `tessera record` sorts with this module and never loads the core
    from scheduler.core.scheduler import Scheduler
    from scheduler.core.state import Notice

# Everything a placement or a preemption reads comes before the pods: a pending pod is tried as
# soon as it is replayed, so a PodDisruptionBudget or PriorityClass listed after it (listings come
# kind by kind, these last) would not protect or rank anyone in its preemption.
KIND_ORDER = ("Node", "ExtendedResource", "ResourceClass", "PodGroup", "PriorityClass", "PodDisruptionBudget",
              "StorageClass", "PersistentVolume", "PersistentVolumeClaim", "Pod")


def is_bound(obj: Mapping[str, Any]) -> bool:
    spec = obj.get("spec")
    return isinstance(spec, dict) and bool(spec.get("nodeName"))


def replay_rank(obj: Mapping[str, Any]) -> tuple[int, bool]:
    """Sort key: the kind's place in `KIND_ORDER` (other kinds after), pending pods after bound ones."""
    kind = obj.get("kind")
    position = KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)
    return position, kind == "Pod" and not is_bound(obj)


def replay_order(objects: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The objects in replay order (stable within a rank)."""
    return sorted(objects, key=replay_rank)


def load(scheduler: Scheduler, objects: Iterable[dict[str, Any]], now: float) -> list[Notice]:
    """Feed a listed cluster into a core without running a cycle: its state is then exactly the
    one the live scheduler builds from the same lists (devices, slices, holders, gates). Returns
    what the core said of the objects (an unreadable pod's reason, ...)."""
    notices: list[Notice] = []
    for obj in replay_order(objects):
        notices += scheduler.apply("ADDED", obj, now)
    return notices
