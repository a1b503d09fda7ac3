"""NodeName: a pod that names its node (`spec.nodeName`) fits only that node.

Tessera never schedules such a pod — whoever set the name binds it — so the filter only matters
where a pod's request is checked against a node by name (upstream's NodeName filter, kept for
configuration compatibility: profiles that enable or disable it load unchanged).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

from scheduler.core.framework.cycle_state import PodContext
from scheduler.core.framework.interface import FilterPlugin, QueueingHint, Reasons, always
from scheduler.core.state import EventKind, NodeInfo

NAME = "NodeName"
REASON = "node(s) didn't match the requested node name"


class NodeName(FilterPlugin):
    name = NAME

    def queueing_hints(self) -> Mapping[EventKind, QueueingHint]:
        """Upstream's: a node added may be the one named (no hint: always queue). A node's
        update never changes its name."""
        return {EventKind.NODE_ADDED: always}

    def filter_applies(self, ctx: PodContext) -> bool:
        return bool(ctx.pod.node_name)

    def pod_form(self, ctx: PodContext) -> Hashable:
        """Its spec.nodeName."""
        return ctx.pod.node_name

    def filter(self, ctx: PodContext, info: NodeInfo) -> Reasons | None:
        return None if ctx.pod.node_name == info.name else (REASON,)
