"""Why listed pods wait, as the scheduler wrote it: their `PodScheduled=False` condition.

A live scheduler keeps its last word on each pod in memory and writes it to the pod's condition
(and an Event). A command that lists the cluster, and a standby's GPU map (which decides
nothing itself), read it back from there: `reason`
(`Unschedulable`, `WaitingForAllocation`), the message, and — for a pod the allocation gate holds —
the node it is assigned to, which only that message names (`assigned to NODE; the Binding
waits ...`, `scheduler/core/plugins/devices/gate.py`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from scheduler.core.scheduler import WAITING_FOR_ALLOCATION
from scheduler.view.cluster import WaitReason

_ASSIGNED = re.compile(r"^assigned to (?P<node>[^;\s]+);")


def scheduled_condition(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    status = pod.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, dict) and condition.get("type") == "PodScheduled":
            return condition
    return None


def wait_reason(pod: Mapping[str, Any]) -> WaitReason | None:
    """The pod's PodScheduled=False reason (None when it has none, or is scheduled)."""
    condition = scheduled_condition(pod)
    if condition is None or condition.get("status") != "False":
        return None
    message = str(condition.get("message") or "")
    reason = str(condition.get("reason") or "")
    match = _ASSIGNED.match(message) if reason == WAITING_FOR_ALLOCATION else None
    return WaitReason(reason, message, match.group("node") if match else "")


def wait_reasons(objects: Iterable[Mapping[str, Any]]) -> dict[str, WaitReason]:
    """By pod key, for every listed pod without a node that has a reason."""
    out: dict[str, WaitReason] = {}
    for obj in objects:
        spec = obj.get("spec")
        if obj.get("kind") != "Pod" or (isinstance(spec, dict) and spec.get("nodeName")):
            continue
        reason = wait_reason(obj)
        meta = obj.get("metadata")
        if reason is not None and isinstance(meta, dict):
            out[f"{meta.get('namespace', '')}/{meta.get('name', '')}"] = reason
    return out
