"""NodeUnschedulable: cordoned nodes take only pods tolerating `node.kubernetes.io/unschedulable`."""

from __future__ import annotations

from scheduler.core.framework import PodContext
from scheduler.core.objects import Taint
from scheduler.core.state import NodeInfo

NAME = "NodeUnschedulable"
REASON = "node(s) were unschedulable"
_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")


def filter_node(ctx: PodContext, info: NodeInfo) -> tuple[str, ...] | None:
    node = info.node
    assert node is not None
    if node.unschedulable and not any(t.tolerates(_TAINT) for t in ctx.pod.tolerations):
        return (REASON,)
    return None
