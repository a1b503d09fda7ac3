"""Pods another process holds at its allocation gate, assumed in a core built from a listing.

The leader assumes a pod on its node before the allocation gate lets its Binding go (its GPUs are
the pod's from then on) and writes on the pod why it waits: `PodScheduled=False`,
`WaitingForAllocation`, `assigned to NODE; ...`. A core built from a listing of the cluster
(`kubectl tessera nodes`) sees no Binding yet, only that pending pod: without this it would count
the pod's GPUs as free. Assuming it on that node as the leader did makes them the pod's again.
Which GPUs is this core's choice by the same plugins, on the listed state: the leader's choice is
on no object until the Binding lands, so the identity may differ, the count does not. A pod that
no longer fits there (the listing is later than the leader's word) is left pending: a view never
shows two pods on one GPU.
"""

from __future__ import annotations

from scheduler.core.engine import Engine
from scheduler.core.framework.attempt import Attempt


def assume_held(engine: Engine, uid: str, node: str, message: str, now: float) -> Attempt | None:
    """Assume the pending pod `uid` on `node` as the leader's gate holds it; its held attempt,
    or None when it is not pending or does not fit there now."""
    state = engine.state
    pod = state.pods.get(uid)
    info = state.nodes.get(node)
    if pod is None or uid not in state.pending or info is None or info.node is None:
        return None
    reservation = engine.reserve_on(pod, info, now)
    if reservation is None:
        return None
    state.assume(uid, node, reservation.devices, reservation.claims)
    return Attempt(pod, node, dict(reservation.annotations), claims=reservation.claims, message=message)
