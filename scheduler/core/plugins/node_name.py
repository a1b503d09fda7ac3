"""NodeName: a pod that names its node (`spec.nodeName`) fits only that node.

Tessera never schedules such a pod — whoever set the name binds it — so the filter only matters
where a pod's request is checked against a node by name (upstream's NodeName filter, kept for
configuration compatibility: profiles that enable or disable it load unchanged).
"""

from __future__ import annotations

from scheduler.core.framework.cycle_state import PodContext
from scheduler.core.framework.interface import FilterPlugin, Reasons
from scheduler.core.state import NodeInfo

NAME = "NodeName"
REASON = "node(s) didn't match the requested node name"


class NodeName(FilterPlugin):
    name = NAME

    def filter_applies(self, ctx: PodContext) -> bool:
        return bool(ctx.pod.node_name)

    def filter(self, ctx: PodContext, info: NodeInfo) -> Reasons | None:
        return None if ctx.pod.node_name == info.name else (REASON,)
