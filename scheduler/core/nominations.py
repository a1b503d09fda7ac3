"""Room for nominated pods that hold none here: what a new leader, or a restarted Tessera, knows of
the preemptions an earlier one made.

A hold (`ClusterState.hold`) is made by the preemption that nominates a pod, in the replica that
ran it. Another replica taking the Lease, or this one restarting, rebuilds its state from the
apiserver only, where all that is left of the preemption is the preemptor's
`status.nominatedNodeName` and its victims, deleted but still terminating. kube-scheduler v1.36
fills its nominator from that field as pods enter the queue (backend/queue/scheduling_queue.go
moveToActiveQ and Update -> nominator.addNominatedPod / UpdateNominatedPod), and Filter counts
every pod nominated to a node at the priority of the pod filtered or higher, the pod itself
excepted (framework/runtime/framework.go addGENominatedPods). Without the same, a lower-priority
pod took the room beside the victims (or theirs once gone), and the preemptor had to preempt again.

So before and after every cycle, each pending pod of ours nominated to a node that has a Node
object and holding nothing gets a hold there, at the priority it competes with (its gang's for a
member), the most urgent first: what placing it there charges once the pods being deleted on the
node are gone — the devices too, since nothing but the device ledger counts a class request — or,
where it would not fit even then, its requests alone (upstream counts a nominated pod whether it
fits or not). After a cycle, that also gives a nominated pod back the room a higher-priority
placement took from its hold: upstream's nominator keeps such a pod where it was, and counts it
against the pods of its priority or lower. The cycles then treat it as the hold its own
preemption would have left: set aside (`ClusterState.set_aside_hold`) for the attempts of pods of
a higher priority and for the pod's own, dropped (and its nomination cleared) by a higher-priority
preemption of the node. The victims keep what they hold until they are gone:
the hold is counted beside them, never in their stead, so no device goes to two running pods.
"""

from __future__ import annotations

from scheduler.core.engine import Engine
from scheduler.core.state.cluster import placement_of
from scheduler.core.state.nodes import Placement


def hold_nominated(engine: Engine, now: float) -> None:
    """Give every nominated pending pod without a hold its room on its nominated node."""
    state = engine.state
    if not state.nominated:
        return
    waiting = []
    for uid in list(state.nominated):
        pod = state.pods.get(uid)
        if pod is None or not pod.nominated_node or uid not in state.pending:
            state.nominated.discard(uid)  # bound, gone, or its nomination cleared: nothing to keep
        elif uid not in state.holds and (info := state.nodes.get(pod.nominated_node)) is not None \
                and info.node is not None:
            waiting.append((-state.competing_priority(pod), uid))
    for negated, uid in sorted(waiting):
        state.hold(uid, _room(engine, uid, now), -negated)


def _room(engine: Engine, uid: str, now: float) -> Placement:
    """What the pod charges on its nominated node once the pods being deleted there are gone."""
    state = engine.state
    pod = state.pods[uid]
    node = pod.nominated_node
    info = state.nodes[node]
    going = [other for other in sorted(info.pods)
             if (placed := state.pods.get(other)) is not None and state.leaving(placed)]
    lifted = [state.lift(other) for other in going]
    try:
        reservation = engine.reserve_on(pod, info, now)
        return placement_of(pod, node, reservation.devices if reservation is not None else None,
                            state.ledger.counted_as)
    finally:
        for placed_before in lifted:
            state.restore(placed_before)
