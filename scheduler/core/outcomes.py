"""What happens after a Binding: the apiserver's answer, relayed by the live loop.

The assumption made at placement is undone only when the pod certainly is not bound (the binder
settles ambiguous answers before reporting), and a node's allocation gate may let the next held
Binding through once a pod there stops holding it.
"""

from __future__ import annotations

from scheduler.core.engine import Engine
from scheduler.core.objects import Pod


class BindingOutcomes:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def failed(self, uid: str, now: float) -> None:
        """The Binding was refused (nothing bound): release and back off."""
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
        engine.state.pending.discard(uid)
        engine.queue.remove(uid)
        engine.take(freed, engine.now)

    def abandon(self, now: float) -> None:
        """Lost the lease: Bindings not sent yet are not ours to send; their pods go back to the queue."""
        engine = self.engine
        waiting = [attempt for permit in engine.permits for attempt in permit.abandon()] + engine.released
        engine.released = []
        for attempt in waiting:
            self.failed(attempt.pod.uid, now)
