"""Taking in watch events: the cluster state, the queue in step with it, and requeue hints.

Every event goes to the cluster state, which says what changed (`ClusterEvent`s); a pending pod
that was added or changed is (re)queued; for every change, pods that failed earlier are asked
whether it may help them — through the queueing hints of the plugins that rejected them — and a
node whose agent finished an allocation lets the allocation gate release held Bindings.
"""

from __future__ import annotations

from scheduler.core.engine import Engine
from scheduler.core.objects import JSON, Pod, object_uid
from scheduler.core.queue import GATES_ELIMINATED, POD_ADDED
from scheduler.core.state import Notice


class Intake:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def apply(self, event_type: str, obj: JSON, now: float) -> list[Notice]:
        """Feed one watch event; keeps the queue in step and requeues pods the event may help."""
        engine = self.engine
        engine.now = now
        if not isinstance(obj, dict):
            return engine.state.apply(event_type, obj)[1]
        before = self._known_pod(obj)
        named = self._named_pod(obj)  # the uid the pod's name had: a new uid replaces it
        events, notices = engine.state.apply(event_type, obj)
        if named is not None and named not in engine.state.pods:
            engine.queue.remove(named)
        self._sync_queue(obj, before, now)
        if before is None and obj.get("kind") == "Pod" and event_type != "DELETED":
            self._observe(obj)
        engine.take(events, now)  # may forget a pod (a held Binding redone): what that found is told now too
        return [*notices, *engine.state.take_deferred_notices()] if engine.state.deferred else notices

    def _named_pod(self, obj: JSON) -> str | None:
        """The uid the state files the pod's namespace/name under, if any."""
        if obj.get("kind") != "Pod":
            return None
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            return None
        return self.engine.state.by_key.get(f"{meta.get('namespace', '')}/{meta.get('name', '')}")

    def _known_pod(self, obj: JSON) -> Pod | None:
        if obj.get("kind") != "Pod":
            return None
        uid = object_uid(obj)
        return self.engine.state.pods.get(uid) if uid is not None else None

    def _observe(self, obj: JSON) -> None:
        uid = object_uid(obj)
        pod = self.engine.state.pods.get(uid) if uid is not None else None
        if pod is not None:
            for runtime in self.engine.profiles.values():
                runtime.observe(pod)

    def _sync_queue(self, obj: JSON, before: Pod | None, now: float) -> None:
        if obj.get("kind") != "Pod":
            return
        uid = object_uid(obj)
        if uid is None:
            return
        state, queue = self.engine.state, self.engine.queue
        pod = state.pods.get(uid)
        if pod is None or uid not in state.pending:
            if pod is None or uid not in state.placements or pod.node_name:
                queue.remove(uid)  # gone or bound: also what the queue kept while its Binding was out
            if uid in state.gated and (before is None or not before.gated):
                queue.gated_arrived()
            return
        if uid not in queue or before is None or _scheduling_inputs(before) != _scheduling_inputs(pod):
            # upstream's event for a pod whose spec.schedulingGates were all removed (the API
            # refuses adding gates after creation, so a gated `before` means just that)
            event = GATES_ELIMINATED if before is not None and before.gated else POD_ADDED
            queue.add(uid, pod.priority, pod.gang.key if pod.gang else "", now, event)


def _scheduling_inputs(pod: Pod) -> tuple[object, ...]:
    """What a pod update must change to be worth another try (status and metadata noise is not)."""
    return (pod.requests, pod.node_selector, pod.required_terms, pod.preferred_terms, pod.tolerations,
            pod.priority, pod.gang, pod.meta.labels, pod.scheduler_name)
