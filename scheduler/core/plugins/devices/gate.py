"""The allocation gate: one pod per node and device resource waits for the node agent at a time.

Why: the kubelet's device-plugin Allocate call names devices, not pods. The node agent finds the
pod it is allocating for as the one pod on the node still `tessera.dev/phase: Allocating` for that
resource; two such pods at once would be ambiguous. So a second pod asking for a common resource on
that node is placed — its devices are held — but its Binding waits until the agent marks the first
one `Allocated` (or it runs, ends or goes away), in placement order per node and resource.

The gate holds only where a node agent is known to serve the node (a fresh heartbeat on its
devices): only an agent ever opens it, so elsewhere it would hold for ever. When a held Binding is
released, its placement is checked again (node, devices, classes, amounts, and that no pod there
has a devices annotation that cannot be read: the node's device use is unknown then); one that
would no longer be chosen is redone instead of bound. Which pods hold a node's gate is part of the device
ledger (`ClusterState`, rebuilt from annotations after a restart); the held Bindings live here.
"""

from __future__ import annotations

from collections.abc import Callable

from scheduler.core.plugins.devices.args import DeviceArgs
from scheduler.core import annotations as ann
from scheduler.core.framework.attempt import Attempt
from scheduler.core.framework.interface import Released
from scheduler.core.state import ClusterState
from scheduler.core.tenants import pods_named

CHECK_EVERY_SECONDS = 1.0  # how often held Bindings are checked against agents going quiet
NOTHING = Released()  # what a gate holding nothing lets go (never added to)


class AllocationGate:
    def __init__(self, state: ClusterState, args: DeviceArgs) -> None:
        self.state = state
        self.enabled = args.allocation_gate
        self.timeout = float(args.agent_heartbeat_timeout_seconds)
        self.deferred: dict[str, list[Attempt]] = {}  # node -> held attempts, in placement order
        self._next_check = 0.0

    def _serves(self, node: str, now: float) -> bool:
        return self.enabled and self.state.nodes[node].agent_serves(now, self.timeout)

    def permit(self, attempt: Attempt, now: float) -> bool:
        """Bind now and hold the node's gate, or defer the Binding until the gate opens."""
        resources = resources_of(attempt)
        if attempt.node is None or not resources or not self._serves(attempt.node, now):
            return True  # no device to hand out (an annotation saying none included): nothing to wait for
        info = self.state.nodes[attempt.node]
        holder = info.allocation_holder(resources)
        ahead = next((w for w in self.deferred.get(attempt.node, ()) if not resources_of(w).isdisjoint(resources)),
                     None)
        if holder is None and ahead is None:
            self.state.mark_allocating(attempt.pod.uid, attempt.node, resources)
            return True
        attempt.deferred = True
        key = self.state.pods[holder].key if holder is not None and holder in self.state.pods else \
            ahead.pod.key if ahead is not None else None
        _word(attempt, lambda namespace: (
            f"assigned to {attempt.node}; the Binding waits until the node agent has allocated "
            f"{', '.join(sorted(resources))} to {'another pod' if key is None else pods_named(namespace, [key])} "
            "(allocation gate)"))
        self.deferred.setdefault(attempt.node, []).append(attempt)
        return False

    def release(self, node: str | None, now: float) -> Released:
        """What the gates of `node` (or, at most once a second, of every node) let through now."""
        if not self.deferred:
            return NOTHING
        released = Released()
        if node is not None:
            self._release_node(node, now, released)
        elif now >= self._next_check:
            self._next_check = now + CHECK_EVERY_SECONDS  # agents going quiet open their gates
            for held_node in list(self.deferred):
                self._release_node(held_node, now, released)
        return released

    def _release_node(self, node: str, now: float, released: Released) -> None:
        waiting = self.deferred.get(node)
        if not waiting:
            return
        info = self.state.nodes[node]
        gated = self._serves(node, now)
        still: list[Attempt] = []
        held: set[str] = set()  # resources of pods still waiting: later pods must not overtake them
        for attempt in waiting:
            placement = self.state.placements.get(attempt.pod.uid)
            if placement is None or not placement.assumed or placement.node != node:
                continue  # deleted, bound by someone else, or forgotten meanwhile
            why = self._invalid_because(attempt)
            if why is not None:
                attempt.deferred = False
                _word(attempt, lambda namespace: (f"the allocation gate held its Binding to node {node}, and "
                                                  f"{why(namespace)}; it is scheduled again"))
                released.invalid.append(attempt)
                continue
            resources = resources_of(attempt)
            if gated and (not held.isdisjoint(resources) or info.allocation_blocks(resources)):
                still.append(attempt)
                held |= resources
                continue
            if gated:
                self.state.mark_allocating(attempt.pod.uid, node, resources)
            attempt.deferred = False
            attempt.message = attempt.logged = ""
            released.allowed.append(attempt)
        if still:
            self.deferred[node] = still
        else:
            del self.deferred[node]

    def _invalid_because(self, attempt: Attempt) -> Callable[[str], str] | None:
        """Why this held placement would no longer be chosen as it is (node, devices, classes,
        amounts, a node whose device use is unknown), or None while it would: worded for a message
        regarding an object of the namespace given, as `pods_named` names pods ("" names all)."""
        why = self._changed(attempt)
        if why is not None:
            return lambda namespace: why
        assert attempt.node is not None  # and its node is there: `_changed` says so otherwise
        broken = self.state.nodes[attempt.node].broken
        if not broken:
            return None
        # which GPUs that pod holds is unknown: the devices filter excludes the node (BROKEN)
        keys = sorted(pod.key for uid in broken if (pod := self.state.pods.get(uid)) is not None)[:1]

        def hiding(namespace: str) -> str:
            holder = pods_named(namespace, keys, lambda here: f"pod {here[0]}") if keys else "a pod"
            return f"{holder} on the node has an unreadable devices annotation"
        return hiding

    def _changed(self, attempt: Attempt) -> str | None:
        """What changed under this held placement's node, devices, classes or amounts since it was
        made, or None while nothing did."""
        state = self.state
        assert attempt.node is not None
        info = state.nodes.get(attempt.node)
        if info is None or info.node is None:
            return f"node {attempt.node} is gone"
        containers = {c.name: c for c in attempt.pod.containers}
        uid = attempt.pod.uid
        for container, by_resource in ann.decode_devices(attempt.annotations[ann.DEVICES]).items():
            for resource, grants in by_resource.items():
                cls = state.classes.resource_class(resource)
                if cls is None:
                    return f"no valid ResourceClass provides {resource} any more"
                for grant in grants:
                    device = state.devices.get(grant.device)
                    use = state.ledger.use.get(grant.device)
                    if device is None or grant.device in state.ledger.ghosts or use is None:
                        return f"device {grant.device} is gone"
                    if not device.schedulable:
                        return f"device {grant.device} is unschedulable or unhealthy"
                    if device.node_name != attempt.node:
                        return f"device {grant.device} is on node {device.node_name} now"
                    if cls.name not in state.classes.device_classes.get(device.name, ()):
                        return f"device {grant.device} is no longer of class {cls.name}"
                    if cls.sharing is None:
                        if grant.amount is not None or use.exclusive != {uid} or use.shared:
                            return f"device {grant.device} is no longer its alone"
                    else:
                        count = containers[container].requests.get(resource, 0) if container in containers else 0
                        capacity = device.capacity.get(cls.sharing.dimension)
                        if grant.amount != cls.sharing.unit * count or grant.dimension != cls.sharing.dimension \
                                or use.exclusive or capacity is None \
                                or state.ledger.shared_use(use, cls.sharing.dimension) > capacity:
                            return f"its slice of device {grant.device} no longer fits class {cls.name} or the device"
        return None

    def held(self) -> list[Attempt]:
        return [attempt for attempts in self.deferred.values() for attempt in attempts]

    def abandon(self) -> list[Attempt]:
        held = self.held()
        self.deferred = {}
        return held

    def reject(self, uid: str) -> bool:
        found = self._find(uid)
        if found is None:
            return False
        node, attempt = found
        waiting = self.deferred[node]
        waiting.remove(attempt)
        if not waiting:
            del self.deferred[node]
        return True

    def _find(self, uid: str) -> tuple[str, Attempt] | None:
        placement = self.state.placements.get(uid)
        if placement is None or not placement.assumed:
            return None
        for attempt in self.deferred.get(placement.node, ()):
            if attempt.pod.uid == uid:
                return placement.node, attempt
        return None


def _word(attempt: Attempt, worded: Callable[[str], str]) -> None:
    """Set the attempt's message, for the pod's Event and condition (read in its namespace: pods of
    other namespaces counted), by `worded(namespace)`, and its `logged` line, `worded("")`, which
    names every pod (an operator's), where the two differ."""
    told, logged = worded(attempt.pod.meta.namespace), worded("")
    attempt.message, attempt.logged = told, "" if logged == told else logged


def resources_of(attempt: Attempt) -> frozenset[str]:
    """The resource names an attempt's devices are granted under."""
    raw = attempt.annotations.get(ann.DEVICES)
    if raw is None:
        return frozenset()
    return frozenset(resource for by_resource in ann.decode_devices(raw).values() for resource in by_resource)
