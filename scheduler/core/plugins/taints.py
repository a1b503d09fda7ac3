"""TaintToleration: NoSchedule/NoExecute taints filter; untolerated PreferNoSchedule taints score.

Filter reports the first untolerated taint exactly as upstream prints it
(`node(s) had untolerated taint {key: value}`); the score counts intolerable PreferNoSchedule
taints, normalised and reversed so the node with fewest scores 100.
"""

from __future__ import annotations

from scheduler.core.framework import PodContext
from scheduler.core.state import NodeInfo

NAME = "TaintToleration"


def filter_node(ctx: PodContext, info: NodeInfo) -> tuple[str, ...] | None:
    node = info.node
    assert node is not None
    if not node.taints:
        return None
    for taint in node.taints:
        if taint.effect == "PreferNoSchedule":
            continue
        if not any(t.tolerates(taint) for t in ctx.pod.tolerations):
            return (f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}",)
    return None


def score(ctx: PodContext, info: NodeInfo) -> int:
    node = info.node
    assert node is not None
    if not node.taints:
        return 0
    tolerations = [t for t in ctx.pod.tolerations if t.effect in ("", "PreferNoSchedule")]
    return sum(1 for taint in node.taints if taint.effect == "PreferNoSchedule"
               and not any(t.tolerates(taint) for t in tolerations))
