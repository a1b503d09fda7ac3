"""What happens after a Binding: the apiserver's answer, relayed by the live loop.

The assumption made at placement is undone only when the pod certainly is not bound (the binder
settles ambiguous answers before reporting), and a node's allocation gate may let the next held
Binding through once a pod there stops holding it.
"""

from __future__ import annotations

from scheduler.core.engine import Engine
from scheduler.core.objects import Pod

# How many Bindings in a row of one pod that could not land because someone else changed the pod
# (a label, an annotation) are decided again at once; the next, and every one after it until the
# pod is found unschedulable or bound, backs off as an error does. A pod edited now and then
# (a controller labelling it once after creation) is refused once or twice at most; five in a row
# means the pod changes faster than a decision reaches the apiserver, and a controller editing it
# in a tight loop would otherwise cost a cycle, a POST and a GET for every edit. Five immediate
# tries cost less than the shortest backoff saves (1 s), and under the round-8 adversary's churn
# (every pending pod edited every ~0.2 s) most pods bind within them.
REDECIDED_AT_ONCE = 5


class BindingOutcomes:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def outdated(self, uid: str, now: float) -> bool:
        """The Binding could not land because someone else changed the pod since it was decided
        (it is unbound at a newer resourceVersion; no newer term fenced it): release it as a
        refused one, and decide it again at once from the version it has now — a whole new
        decision, never the old one sent again. False when that happened more than
        `REDECIDED_AT_ONCE` times in a row: then it backs off, as `failed`."""
        if self.engine.queue.placed_outdated(uid) > REDECIDED_AT_ONCE:
            self.failed(uid, now)
            return False
        self.failed(uid, now, at_once=True)
        return True

    def failed(self, uid: str, now: float, at_once: bool = False) -> None:
        """The Binding was refused (nothing bound): release and back off (`at_once`: requeue
        without a backoff, `outdated`)."""
        engine = self.engine
        state = engine.state
        node = state.node_of(uid)
        placement = state.placements.get(uid)
        if placement is not None and not placement.assumed:
            # bound after all (our Binding landed, or another leader's did: the watch shows it):
            # nothing of ours to undo, as upstream forgets only an assumed pod
            return
        pod = state.pods.get(uid)
        freed = state.forget(uid)
        if placement is not None and pod is not None and self._gang_placed_without(pod):
            # its gang has members on nodes: the room stays the member's (as a nominated
            # preemptor's), or a pod of its priority takes it and the gang stays below its minimum
            state.hold(uid, placement, state.competing_priority(pod))
            freed = []
        if at_once:
            engine.requeue_at_once(uid, now)
        else:
            engine.requeue_after_error(uid, now)
        if node is not None:
            engine.release(node, engine.now)
        engine.take(freed, now)  # the room wakes the pods waiting for it, as kube-scheduler's AssignedPodDelete

    def _gang_placed_without(self, pod: Pod) -> bool:
        """Another member of the pod's gang is on a node (bound, or its Binding on the way)."""
        state = self.engine.state
        if pod.gang is None:
            return False
        return any(uid != pod.uid and uid in state.placements for uid in state.gang_uids(pod))

    def dropped(self, uid: str) -> None:
        """409 bound elsewhere / 404 gone: the apiserver's view wins; wait for the watch event."""
        engine = self.engine
        node = engine.state.node_of(uid)
        freed = engine.state.forget(uid)
        if node is not None:
            engine.release(node, engine.now)
        engine.state.drop_pending(uid)
        engine.queue.remove(uid)
        engine.take(freed, engine.now)

    def abandon(self, now: float) -> None:
        """Lost the lease: Bindings not sent yet are not ours to send; their pods go back to the queue."""
        engine = self.engine
        waiting = [attempt for permit in engine.permits for attempt in permit.abandon()] + engine.released
        engine.released = []
        for attempt in waiting:
            self.failed(attempt.pod.uid, now)
