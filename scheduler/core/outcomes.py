"""What happens after a Binding: the apiserver's answer, relayed by the live loop.

The assumption made at placement is undone only when the pod certainly is not bound (the binder
settles ambiguous answers before reporting), and a node's allocation gate may let the next held
Binding through once a pod there stops holding it.
"""

from __future__ import annotations

from scheduler.core.engine import Engine


class BindingOutcomes:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def failed(self, uid: str, now: float) -> None:
        """The Binding was refused (nothing bound): release and back off."""
        engine = self.engine
        node = engine.state.node_of(uid)
        freed = engine.state.forget(uid)
        engine.requeue_after_error(uid, now)
        if node is not None:
            engine.release(node, engine.now)
        engine.take(freed, now)  # the room wakes the pods waiting for it, as kube-scheduler's AssignedPodDelete

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
