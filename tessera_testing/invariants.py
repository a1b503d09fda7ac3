"""Invariant checks over the apiserver's state: what must hold however badly things went.

Why read the apiserver and not the scheduler: the scheduler's cache is exactly what faults corrupt.
The apiserver is the ground truth a node agent and kubelet act on, so every check here is computed
from Pods, Nodes, ExtendedResources, ResourceClasses and PodGroups as the apiserver returns them,
with the core's own parsers (``parse_pod``/``parse_node``/``parse_device``/
``parse_resource_class``) doing the quantity and request arithmetic, so "over allocatable" means
the same thing here as in the scheduler (init containers, sidecars, overhead).

Two sources, because some violations leave no trace in the final state:

- :func:`read_view` + :func:`check` — a final LIST: device and node capacity, gangs, pods that
  should have been bound, and ``Scheduled`` Events that contradict where a pod really is.
- :class:`ClusterWatcher` — a list+watch of the same kinds for the whole run, straight to the
  apiserver (never through the fault proxy). It remembers the first node each pod uid was bound
  to (a later different node is a pod bound twice), when nodes and devices were deleted and every
  version of every ResourceClass, so :func:`check_history` can tell a binding made on a stale view
  (to a node or device deleted, or against a class edited, more than ``grace`` seconds before the
  bind was observed) from an unlucky race. It also runs the capacity checks on its live view after
  every change, which catches an over-allocation that a later deletion would have hidden. What
  happened to devices and holds it orders by resourceVersion (pods and devices arrive on separate
  streams, in no common order): a hold of a device moved since is its holder's if it began before
  the move, and slices over a capacity count only when a holder began beyond the capacity of its
  moment (`ClusterWatcher.overfills`; a capacity lowered under held slices is allowed), and slices
  held since before the watch by the capacity the device had when it began (`at_start`). A
  Binding is judged by what the pod held when first seen bound (`FirstBinding.held`), not by an
  edit of its annotations since.

A pod holds union(``tessera.dev/devices``, ``tessera.dev/held-devices``), a device its containers
have in phases that do not meet once, whole if any has it whole — as Tessera counts it.

Every check returns :class:`Violation` records (never raises on bad data): a fault run wants the
complete list, not the first assertion.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import ssl
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from scheduler.api.quantity import format_quantity
from scheduler.core import annotations as ann
from scheduler.core.classes import DEFAULT_RESOURCE_PREFIX, ResourceClass, parse_resource_class
from scheduler.core.lifecycle import Phases, always, slice_peak
from scheduler.core.objects import (
    TERMINAL_PHASES,
    Device,
    ObjectError,
    Pod,
    gang_name,
    parse_device,
    parse_node,
    parse_pod,
)
from scheduler.core.resources import PODS

__all__ = [
    "BAD_ANNOTATION",
    "BOUND_TWICE",
    "DEVICE_CAPACITY",
    "GANG_PARTIAL",
    "INVARIANTS",
    "NODE_ALLOCATABLE",
    "node_usage",
    "SCHEDULER_EXITED",
    "STALE_BINDING",
    "UNBOUND",
    "ApiReader",
    "ClusterView",
    "ClusterWatcher",
    "Violation",
    "check",
    "check_capacity",
    "check_events",
    "broken_by_node_loss",
    "check_gangs",
    "check_history",
    "check_unbound",
    "fits_somewhere",
    "pending_with_room",
    "read_view",
    "wait_until_bound",
]

JSON = dict[str, Any]

DEVICE_CAPACITY = "device-capacity"
NODE_ALLOCATABLE = "node-allocatable"
GANG_PARTIAL = "gang-partial"
UNBOUND = "unbound"
BOUND_TWICE = "bound-twice"
STALE_BINDING = "stale-binding"
BAD_ANNOTATION = "bad-annotation"
SCHEDULER_EXITED = "scheduler-exited"
INVARIANTS = (DEVICE_CAPACITY, NODE_ALLOCATABLE, GANG_PARTIAL, UNBOUND, BOUND_TWICE, STALE_BINDING,
              BAD_ANNOTATION, SCHEDULER_EXITED)

PODS_PATH = "/api/v1/pods"
NODES_PATH = "/api/v1/nodes"
DEVICES_PATH = "/apis/tessera.dev/v1alpha1/extendedresources"
CLASSES_PATH = "/apis/tessera.dev/v1alpha1/resourceclasses"
PODGROUPS_PATH = "/apis/scheduling.x-k8s.io/v1alpha1/podgroups"
EVENTS_PATH = "/apis/events.k8s.io/v1/events"
_GANG_NAME = "pod-group.scheduling.sigs.k8s.io/name"
_SCHEDULED_PREFIX = "Successfully assigned "


@dataclass(frozen=True, order=True)
class Violation:
    invariant: str  # one of INVARIANTS
    subject: str  # the device, node, gang or pod concerned
    detail: str

    def __str__(self) -> str:
        return f"{self.invariant}: {self.subject}: {self.detail}"

    def as_dict(self) -> dict[str, str]:
        return {"invariant": self.invariant, "subject": self.subject, "detail": self.detail}


# --- reading the apiserver ---------------------------------------------------------------------


class ApiReader:
    """Plain JSON GETs and watches against the apiserver, with a bearer token.

    Deliberately not the scheduler's client stack (kubernetes-asyncio + ``KubeHttp``): a bug
    there must not be able to hide itself from the checker.
    """

    def __init__(self, server: str, ca: bytes | str | Path, token: str) -> None:
        self.server = server.rstrip("/")
        pem = ca if isinstance(ca, bytes) else Path(ca).read_bytes()
        self._ssl = ssl.create_default_context(cadata=pem.decode())
        self._headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                headers=self._headers, connector=aiohttp.TCPConnector(ssl=self._ssl), trust_env=False)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def request(self, method: str, path: str, body: Any = None, *, params: Mapping[str, str] | None = None,
                      content_type: str = "application/json", timeout: float = 15.0) -> tuple[int, Any]:
        data = orjson.dumps(body) if body is not None else None
        headers = {"Content-Type": content_type} if data is not None else None
        async with self._client().request(method, self.server + path, data=data, params=params, headers=headers,
                                          timeout=aiohttp.ClientTimeout(total=timeout)) as response:
            raw = await response.read()
            return response.status, (orjson.loads(raw) if raw else None)

    async def get(self, path: str, params: Mapping[str, str] | None = None, timeout: float = 30.0) -> JSON:
        status, doc = await self.request("GET", path, params=params, timeout=timeout)
        if status != 200 or not isinstance(doc, dict):
            raise RuntimeError(f"GET {path}: HTTP {status}: {doc!r:.300}")
        return doc

    async def list(self, path: str) -> tuple[list[JSON], str]:
        """All items (paginated) and the list's resourceVersion; a missing CRD lists as empty."""
        items: list[JSON] = []
        token = ""
        while True:
            params = {"limit": "500", **({"continue": token} if token else {})}
            status, doc = await self.request("GET", path, params=params, timeout=30)
            if status == 404:
                return [], ""
            if status != 200 or not isinstance(doc, dict):
                raise RuntimeError(f"LIST {path}: HTTP {status}: {doc!r:.300}")
            items += doc.get("items") or []
            meta = doc.get("metadata") or {}
            token = meta.get("continue") or ""
            if not token:
                return items, str(meta.get("resourceVersion") or "")

    async def watch(self, path: str, resource_version: str, timeout_seconds: int = 60) -> AsyncIterator[JSON]:
        params = {"watch": "true", "resourceVersion": resource_version, "allowWatchBookmarks": "true",
                  "timeoutSeconds": str(timeout_seconds)}
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=5, sock_read=timeout_seconds + 15)
        async with self._client().get(self.server + path, params=params, timeout=timeout) as response:
            if response.status != 200:
                raise _WatchError(response.status, (await response.read())[:300].decode(errors="replace"))
            buffer = bytearray()
            while chunk := await response.content.readany():
                buffer += chunk
                while (end := buffer.find(b"\n")) >= 0:
                    line = bytes(buffer[:end])
                    del buffer[:end + 1]
                    if line.strip():
                        yield orjson.loads(line)


class _WatchError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"watch: HTTP {status}: {message}")
        self.status = status


@dataclass
class ClusterView:
    """The objects the invariants are about, keyed as the scheduler keys them."""

    pods: dict[str, JSON] = field(default_factory=dict)  # uid -> Pod
    nodes: dict[str, JSON] = field(default_factory=dict)  # name -> Node
    devices: dict[str, JSON] = field(default_factory=dict)  # name -> ExtendedResource
    classes: dict[str, JSON] = field(default_factory=dict)  # name -> ResourceClass
    podgroups: dict[str, JSON] = field(default_factory=dict)  # "ns/name" (its `gang_name`) -> PodGroup
    events: list[JSON] = field(default_factory=list)  # events.k8s.io/v1 Scheduled events

    def pod_by_key(self) -> dict[str, JSON]:
        return {_key(p): p for p in self.pods.values()}


async def read_view(api: ApiReader, namespaces: Collection[str] | None = None) -> ClusterView:
    """A LIST of everything the checks need. With ``namespaces``, pods (and Events) outside them
    are kept only when they are bound to a node of the view: they still use its capacity."""
    view = ClusterView()
    nodes, _ = await api.list(NODES_PATH)
    view.nodes = {n["metadata"]["name"]: n for n in nodes}
    pods, _ = await api.list(PODS_PATH)
    for pod in pods:
        if namespaces is None or pod["metadata"].get("namespace") in namespaces \
                or (pod.get("spec") or {}).get("nodeName") in view.nodes:
            view.pods[pod["metadata"]["uid"]] = pod
    devices, _ = await api.list(DEVICES_PATH)
    view.devices = {d["metadata"]["name"]: d for d in devices}
    classes, _ = await api.list(CLASSES_PATH)
    view.classes = {c["metadata"]["name"]: c for c in classes}
    groups, _ = await api.list(PODGROUPS_PATH)
    view.podgroups = {_key(g): g for g in groups}
    events, _ = await api.list(EVENTS_PATH)
    view.events = [e for e in events if e.get("reason") == "Scheduled"
                   and (namespaces is None or e["metadata"].get("namespace") in namespaces)]
    return view


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


def _active(pod: Mapping[str, Any]) -> bool:
    """Bound and not terminal: what holds node capacity and devices (deleting pods still do)."""
    return bool((pod.get("spec") or {}).get("nodeName")) and \
        (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES


# --- capacity ----------------------------------------------------------------------------------


@dataclass
class _Grant:
    pod: str  # pod key
    uid: str
    node: str
    resource: str
    container: str
    device: str
    device_id: str
    amount: Fraction | int | None  # an exact quantity (the core keeps whole numbers as int)
    phases: Phases = frozenset((0,))  # of the pod's life, the container runs in (`lifecycle`)
    dimension: str = ""  # of a slice, as its grant names it ("" when it names none)
    # the device's resourceName when it was granted (the grant's `resourceName`; "" in entries
    # written before the field existed): the node count it is charged under while held
    granted_as: str = ""


def _grants(pods: Iterable[JSON], out: list[Violation]) -> list[_Grant]:
    grants: list[_Grant] = []
    for pod in pods:
        if not _active(pod):
            continue
        key = _key(pod)
        assignment = _held_assignment(pod, key, out)
        if assignment is None:
            continue
        node = pod["spec"]["nodeName"]
        try:
            phases = parse_pod(pod).container_phases()
        except ObjectError:
            phases = {}
        for container, by_resource in assignment.items():
            for resource, entries in by_resource.items():
                for grant in entries:
                    grants.append(_Grant(key, pod["metadata"]["uid"], node, resource, container, grant.device,
                                         grant.device_id, grant.amount, phases.get(container, always(phases)),
                                         grant.dimension, grant.resource_name))
    return grants


def _held_assignment(pod: JSON, key: str, out: list[Violation]) -> ann.DeviceAssignment | None:
    """What a bound pod holds: union(`tessera.dev/devices`, `tessera.dev/held-devices`), as every
    Tessera reader counts it (docs/api.md; `merge_devices`: whole where either says whole, a slice
    at the larger amount), so an annotation edited down still holds what it named. None when the
    pod carries neither (or neither is readable: each unreadable one is reported)."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    parts: list[ann.DeviceAssignment] = []
    for name in (ann.HELD_DEVICES, ann.DEVICES):  # held first: it keeps the granted resourceName
        raw = annotations.get(name)
        if raw is None:
            continue
        try:
            parts.append(ann.decode_devices(raw))
        except ann.AnnotationError as err:
            out.append(Violation(BAD_ANNOTATION, key, f"{name} cannot be decoded: {err}"))
    return ann.merge_devices(*parts) if parts else None


def _split(held: Iterable[_Grant]) -> tuple[list[_Grant], list[_Grant], list[_Grant]]:
    """A device's grants as its holders hold it (`lifecycle.device_holds`): the whole ones; the
    slices of pods that do not have it whole; and the slices of pods that have it whole too in a
    container running beside the slice's (a pod whose init container had it whole and whose app
    container has a slice of it holds it once, whole: no clash)."""
    grants = list(held)
    whole = [g for g in grants if g.amount is None]
    whole_uids = {g.uid for g in whole}
    shared = [g for g in grants if g.amount is not None and g.uid not in whole_uids]
    clash = [g for g in grants if g.amount is not None and g.uid in whole_uids
             and any(w.uid == g.uid and not w.phases.isdisjoint(g.phases) for w in whole)]
    return whole, shared, clash


def _over_capacity(shared: list[_Grant], device: Device,
                   view: ClusterView) -> list[tuple[str, Fraction, Fraction | int | None]]:
    """Each sharing dimension the slices overfill, with what they hold of it and its capacity:
    the dimension a slice's grant names, else its class's; slices of neither count against every
    dimension beside them (they may be of any), or alone as memory."""
    dimensions = [g.dimension or _dimension(g.resource, view) for g in shared]
    out: list[tuple[str, Fraction, Fraction | int | None]] = []
    for dimension in sorted(set(dimensions) - {""} or {"memory"}):
        total = _shared_total(g for g, of in zip(shared, dimensions, strict=True) if of in (dimension, ""))
        capacity = device.capacity.get(dimension)
        if capacity is None or total > capacity:
            out.append((dimension, total, capacity))
    return out


def _over_text(dimension: str, total: Fraction, capacity: Fraction | int | None) -> str:
    return (f"shared {format_quantity(total)} of {dimension} > capacity "
            f"{format_quantity(capacity) if capacity is not None else 'none'}")


def _shared_total(shared: Iterable[_Grant]) -> Fraction:
    """What the pods hold of one device through slices: per pod, its slices of one resource name
    that run at once (a finished init container's room is a later container's), `slice_peak`."""
    by_pod: dict[str, dict[str, dict[int, Fraction | int]]] = defaultdict(dict)
    for g in shared:
        by_phase = by_pod[g.uid].setdefault(g.resource, {})
        for phase in g.phases:
            by_phase[phase] = by_phase.get(phase, 0) + (g.amount or 0)
    return sum((Fraction(slice_peak(held)) for held in by_pod.values()), Fraction(0))


def _class_for(resource: str, classes: Mapping[str, JSON]) -> ResourceClass | None:
    for obj in classes.values():
        try:
            cls = parse_resource_class(obj)
        except ObjectError:
            continue
        if cls.resource_name == resource:
            return cls
    return None


def _device(obj: JSON | None) -> Device | None:
    if obj is None:
        return None
    try:
        return parse_device(obj)
    except ObjectError:
        return None


@dataclass
class _Ledger:
    """Who holds what, computed from the pods' annotations and requests (not from the scheduler)."""

    devices: dict[str, JSON]  # name -> ExtendedResource (deleted ones included, when known)
    by_device: dict[str, list[_Grant]]
    class_resources: set[str]
    node_pods: dict[str, list[JSON]]
    node_used: dict[str, Counter[str]]  # node -> resource -> requested (+ devices held through classes)

    def is_class_resource(self, resource: str) -> bool:
        return resource in self.class_resources or resource.startswith(DEFAULT_RESOURCE_PREFIX)


def node_usage(view: ClusterView) -> dict[str, Counter[str]]:
    """Per node, what its active pods use of each resource, counted as the node-allocatable check
    counts it (class devices under their resourceName)."""
    return dict(_ledger(view, None, []).node_used)


def _ledger(view: ClusterView, known_devices: Mapping[str, JSON] | None, out: list[Violation]) -> _Ledger:
    devices = {**(known_devices or {}), **view.devices}
    by_device: dict[str, list[_Grant]] = defaultdict(list)
    for grant in _grants(view.pods.values(), out):
        by_device[grant.device].append(grant)
    class_resources = {g.resource for held in by_device.values() for g in held}
    for obj in view.classes.values():
        with contextlib.suppress(ObjectError):
            class_resources.add(parse_resource_class(obj).resource_name)
    ledger = _Ledger(devices, by_device, class_resources, defaultdict(list), defaultdict(Counter))
    for pod in view.pods.values():
        if not _active(pod):
            continue
        node = pod["spec"]["nodeName"]
        ledger.node_pods[node].append(pod)
        try:
            parsed = parse_pod(pod)
        except ObjectError:
            continue
        for resource, amount in parsed.requests.items():
            if not ledger.is_class_resource(resource):
                ledger.node_used[node][resource] += amount
    for name, held in by_device.items():
        device = _device(devices.get(name))
        # where Tessera counts a held device (docs/api.md: an edit of its object's identity does
        # not move the hold): on its holders' node, under the resourceName it was granted under —
        # not on the node or under the name its object says now, if that changed while held
        for node in sorted({g.node for g in held}):
            granted = next((g.granted_as for g in held if g.node == node and g.granted_as), "")
            resource = granted or (device.resource_name if device is not None else "")
            if resource:
                ledger.node_used[node][resource] += 1
    for node, pods in ledger.node_pods.items():
        ledger.node_used[node][PODS] = len(pods)
    return ledger


def check_capacity(view: ClusterView, known_devices: Mapping[str, JSON] | None = None,
                   held_on: Mapping[tuple[str, str], str] | None = None,
                   began: Mapping[tuple[str, str], int] | None = None,
                   at_start: Mapping[str, JSON] | None = None) -> list[Violation]:
    """No device beyond its capacity, no node beyond its allocatable.

    Devices: at most one exclusive holder; shared amounts within the capacity of the class's
    sharing dimension; never exclusive and shared at once; a device only on its own node. A pod
    holds union(`tessera.dev/devices`, `tessera.dev/held-devices`), a device its containers have
    in phases that do not meet once (whole if any has it whole).
    Nodes: per resource, the sum of the requests of the active pods bound to it (class resources
    excluded) plus, for a device resourceName, the number of that node's devices held through
    classes, within allocatable; the pod count within ``pods``. ``known_devices`` supplies the
    last known object of deleted ExtendedResources (their pods still hold them); ``held_on`` (the
    watcher's `ClusterWatcher.held_on`) the node a device's object named when each hold began: a
    device moved while held stays its holder's (docs/api.md), so a holder on that node is none
    "on other nodes" — a final LIST alone cannot tell it from a GPU of another node handed out.
    ``began`` (`ClusterWatcher.began`): holds whose start the watcher saw; those are not judged
    by the device's capacity now (lowered under held slices is allowed, docs/api.md) but by
    `ClusterWatcher.overfills`, which judges each holder as it began. The other slices (held
    before the watch began: when is unknown) are judged together by the capacity the device had
    then, ``at_start`` (`ClusterWatcher.at_start`; its capacity now where the watcher knew no
    earlier version). A final LIST alone judges by the capacity now, so it also flags a capacity
    lowered under slices.
    """
    out: list[Violation] = []
    ledger = _ledger(view, known_devices, out)
    for name, held in sorted(ledger.by_device.items()):
        device = _device(ledger.devices.get(name))
        exclusive, shared, clash = _split(held)
        holders = sorted({g.pod for g in held})
        overlapping = [(a, b) for i, a in enumerate(exclusive) for b in exclusive[i + 1:]
                       if a.uid != b.uid or not a.phases.isdisjoint(b.phases)]
        if overlapping:  # two pods, or two containers of one pod that run at once
            out.append(Violation(DEVICE_CAPACITY, name, f"exclusively assigned {len(exclusive)} times: "
                                 f"{', '.join(sorted(f'{g.pod} ({g.container})' for g in exclusive))}"))
        if (exclusive and shared) or clash:
            out.append(Violation(DEVICE_CAPACITY, name, f"assigned exclusively and shared at once: {', '.join(holders)}"))
        if device is not None:
            wrong = sorted({g.pod for g in held if g.node != device.node_name
                            and (held_on or {}).get((name, g.uid)) != g.node})
            if wrong:
                out.append(Violation(DEVICE_CAPACITY, name, f"device is on node {device.node_name} but pods on "
                                     f"other nodes hold it: {', '.join(wrong)}"))
            early = shared if began is None else [g for g in shared if (name, g.uid) not in began]
            then = _device((at_start or {}).get(name)) if began is not None else None
            if early:
                sharers = ', '.join(sorted({g.pod for g in early}))
                for dimension, total, capacity in _over_capacity(early, then or device, view):
                    out.append(Violation(DEVICE_CAPACITY, name, f"{_over_text(dimension, total, capacity)}: {sharers}"))
    for node_name, obj in sorted(view.nodes.items()):
        try:
            node = parse_node(obj)
        except ObjectError:
            continue
        pods = ledger.node_pods.get(node_name, [])
        for resource, amount in sorted(ledger.node_used.get(node_name, Counter()).items()):
            allocatable = node.allocatable.get(resource, 0)
            if amount > allocatable:
                out.append(Violation(NODE_ALLOCATABLE, node_name, f"{resource}: {amount} used > {allocatable} allocatable "
                                     f"({len(pods)} pods: {', '.join(sorted(_key(p) for p in pods)[:8])}"
                                     f"{'…' if len(pods) > 8 else ''})"))
    return out


def _dimension(resource: str, view: ClusterView) -> str:
    """The sharing dimension of a class's slices; "" when no sharing class owns the name."""
    cls = _class_for(resource, view.classes)
    return cls.sharing.dimension if cls is not None and cls.sharing is not None else ""


def fits_somewhere(raw: JSON, view: ClusterView, ledger: _Ledger | None = None,
                   known_devices: Mapping[str, JSON] | None = None) -> str | None:
    """A node where the pod fits by the apiserver's state (resources, pod count, node selector,
    free matching devices, shared room), or None. Tells a scheduler that leaked capacity from a
    cluster that is really full when a pod stays pending; gangs are judged member by member.
    ``known_devices``: deleted ExtendedResources (the watcher's), whose holders still count."""
    ledger = ledger or _ledger(view, known_devices, [])
    found = _fit(raw, view, ledger)
    return found[0] if found is not None else None


# (device, its resourceName, the class's resourceName, shared amount or None)
_Taken = list[tuple[str, str, str, "Fraction | None"]]


def _fit(raw: JSON, view: ClusterView, ledger: _Ledger) -> tuple[str, _Taken] | None:
    """`fits_somewhere`'s search: the node, and the devices the pod would take there."""
    try:
        pod = parse_pod(raw)
    except ObjectError:
        return None
    wanted: dict[str, int] = defaultdict(int)  # class resource -> devices (exclusive) or units (shared)
    per_container: list[tuple[str, int]] = []
    for container in pod.containers:
        for resource, amount in container.requests.items():
            if ledger.is_class_resource(resource) and amount:
                per_container.append((resource, amount))
                wanted[resource] += amount
    plain = {r: a for r, a in pod.requests.items() if not ledger.is_class_resource(r)}
    holders: dict[str, list[_Grant]] = ledger.by_device
    for node_name, obj in sorted(view.nodes.items()):
        try:
            node = parse_node(obj)
        except ObjectError:
            continue
        if node.unschedulable or any(node.meta.labels.get(k) != v for k, v in pod.node_selector.items()):
            continue
        used = ledger.node_used.get(node_name, Counter())
        if used[PODS] + 1 > node.allocatable.get(PODS, 0):
            continue
        if any(used[r] + a > node.allocatable.get(r, 0) for r, a in plain.items() if r != PODS):
            continue
        local = [d for d in (_device(o) for o in view.devices.values()) if d is not None and d.node_name == node_name]
        free = {d.name for d in local if d.schedulable and d.name not in holders}
        newly: Counter[str] = Counter()
        taken: _Taken = []
        ok = True
        for resource, amount in per_container:
            cls = _class_for(resource, view.classes)
            if cls is None:
                ok = False
                break
            matching = [d for d in local if d.schedulable and cls.matches(d)]
            if cls.sharing is None:
                chosen = [d for d in matching if d.name in free][:amount]
                if len(chosen) < amount:
                    ok = False
                    break
                for d in chosen:
                    free.discard(d.name)
                    newly[d.resource_name] += 1
                    taken.append((d.name, d.resource_name, resource, None))
            else:
                need = amount * cls.sharing.unit
                dimension = cls.sharing.dimension
                room = [d for d in matching if all(g.amount is not None for g in holders.get(d.name, []))
                        and d.capacity.get(dimension, 0)
                        - sum((g.amount or 0 for g in holders.get(d.name, [])
                               if _dimension(g.resource, view) in (dimension, "")), Fraction(0)) >= need]
                if not room:
                    ok = False
                    break
                if room[0].name in free:
                    free.discard(room[0].name)
                    newly[room[0].resource_name] += 1
                taken.append((room[0].name, room[0].resource_name, resource, Fraction(need)))
        if ok and all(used[r] + n <= node.allocatable.get(r, n) for r, n in newly.items()):
            return node_name, taken
    return None


def _take(ledger: _Ledger, pod: Pod, node: str, taken: _Taken) -> None:
    """What a pod placed on `node` takes, in `ledger`: its plain requests, a pod slot, its devices."""
    used = ledger.node_used.setdefault(node, Counter())
    used[PODS] += 1
    for resource, requested in pod.requests.items():
        if not ledger.is_class_resource(resource) and resource != PODS:
            used[resource] += requested
    for device, device_resource, resource, share in taken:
        holders = ledger.by_device.setdefault(device, [])
        if not holders:
            used[device_resource] += 1
        holders.append(_Grant(pod.key, pod.uid, node, resource, "", device, "", share))


# --- gangs, pending pods, events ---------------------------------------------------------------


def _gang_members(view: ClusterView) -> dict[str, list[Pod]]:
    """The live (non-terminal) members of each gang, by gang key."""
    members: dict[str, list[Pod]] = defaultdict(list)
    for raw in view.pods.values():
        try:
            pod = parse_pod(raw)
        except ObjectError:
            continue
        if pod.gang is not None and not pod.terminal:
            members[pod.gang.key].append(pod)
    return members


def _gang_minimum(key: str, pods: list[Pod], view: ClusterView) -> int | None:
    """The gang's minimum: its PodGroup's minMember, or the members' label; None when the gang
    names a PodGroup that does not exist."""
    first = pods[0].gang
    assert first is not None
    if first.from_podgroup:
        group = view.podgroups.get(gang_name(key))
        return None if group is None else int((group.get("spec") or {}).get("minMember") or 1)
    return Counter(p.gang.min_available for p in pods if p.gang is not None).most_common(1)[0][0] or 1


def _out_of_reach(view: ClusterView, ledger: _Ledger) -> set[str]:
    """Pending gang members (``namespace/name``) whose gang cannot reach its minimum even with its
    pending members placed together, one after another, each taking what it fits in (first fit by
    the apiserver's state): only a whole gang is placed, so their staying pending is a correct
    refusal, not leaked capacity. (Judged one by one, three members that each fit alone in the
    one free device would read as room for all three.) First fit can miss a placement a smarter
    search would find, so this errs towards calling a gang out of reach."""
    out: set[str] = set()
    raw = view.pod_by_key()
    for key, pods in _gang_members(view).items():
        pending = [p for p in pods if not p.node_name]
        if not pending:
            continue
        minimum = _gang_minimum(key, pods, view)
        trial = _Ledger(ledger.devices, {name: list(held) for name, held in ledger.by_device.items()},
                        set(ledger.class_resources), ledger.node_pods,
                        {node: Counter(used) for node, used in ledger.node_used.items()})
        placeable = sum(1 for p in pods if p.node_name)
        for p in sorted(pending, key=lambda p: p.key):
            found = _fit(raw[p.key], view, trial)
            if found is not None:
                placeable += 1
                _take(trial, p, *found)
        if minimum is None or placeable < minimum:
            out.update(p.key for p in pending)
    return out


def stranded_gang_members(view: ClusterView) -> set[str]:
    """Pending gang members (``namespace/name``) whose gang has fewer live members than its
    minimum (or names no PodGroup): only a whole gang is placed and nothing here re-creates a
    deleted member, so they stay pending for good, a correct refusal. (A preemption that takes a
    gang's running members as one victim leaves a member still pending behind.)"""
    out: set[str] = set()
    for key, pods in _gang_members(view).items():
        minimum = _gang_minimum(key, pods, view)
        if minimum is None or len(pods) < minimum:
            out.update(p.key for p in pods if not p.node_name)
    return out


# How long after a gang's last Binding seen a node deletion can still be what kept its missing
# member from binding: the allocation gate holds a Binding while the node's agent heartbeats
# (agentHeartbeatTimeoutSeconds, default 90) and the watcher sees writes late (its grace)
GANG_BREAK_WINDOW = 120.0


def broken_by_node_loss(view: ClusterView, deleted_nodes: Mapping[str, float],
                        known_devices: Mapping[str, JSON] | None = None,
                        bound_at: Mapping[str, float] | None = None,
                        window: float = GANG_BREAK_WINDOW) -> set[str]:
    """Gangs (keys) that a deleted node broke mid-binding: a member is bound to one of
    ``deleted_nodes`` (name -> when seen deleted during the run, and not back in the view), the
    deletion came while the gang was binding — after that member was first seen bound
    (``bound_at``: pod uid -> when) and no later than ``window`` after the gang's last Binding
    seen, so before or around its missing member's failed Binding or gate rejection — and the
    pending members cannot bring the gang to its minimum (:func:`_out_of_reach`). A gang is placed
    in one decision but bound pod by pod (upstream coscheduling too: Permit releases the members,
    each Binding is its own, and a member bound stays bound when a sibling's Binding fails); a
    node deleted between the Bindings takes the devices of a member not yet bound, and once no
    room is left elsewhere no scheduler can complete the gang: a fault's outcome, like
    :func:`stranded_gang_members`. With room left the gang is not excused: the scheduler should
    have placed the member; nor is a gang already partial when the node went (a deletion long
    after its last Binding), nor one whose Bindings' times are unknown."""
    gone = {name: when for name, when in deleted_nodes.items() if name not in view.nodes}
    if not gone or bound_at is None:
        return set()
    members = _gang_members(view)
    lost = set()
    for key, pods in members.items():
        bound = [p for p in pods if p.node_name]
        if not bound or len(bound) == len(pods) or any(p.uid not in bound_at for p in bound):
            continue
        last = max(bound_at[p.uid] for p in bound)
        if any(p.node_name in gone and bound_at[p.uid] <= gone[p.node_name] <= last + window for p in bound):
            lost.add(key)
    if not lost:
        return set()
    blocked = _out_of_reach(view, _ledger(view, known_devices, []))
    return {key for key in lost if all(p.key in blocked for p in members[key] if not p.node_name)}


def check_gangs(view: ClusterView, known_devices: Mapping[str, JSON] | None = None,
                deleted_nodes: Mapping[str, float] | None = None,
                bound_at: Mapping[str, float] | None = None) -> list[Violation]:
    """Every gang has at least its minimum bound, or none at all — unless one of ``deleted_nodes``
    (name -> when seen deleted during the run) broke it while it was binding
    (:func:`broken_by_node_loss`, ``bound_at`` as there; ``known_devices`` as for
    :func:`fits_somewhere`)."""
    members = _gang_members(view)
    broken = broken_by_node_loss(view, deleted_nodes or {}, known_devices, bound_at)
    out = []
    for key, pods in sorted(members.items()):
        minimum = _gang_minimum(key, pods, view)
        if minimum is None:
            continue  # no PodGroup object: the scheduler must not place any (checked as bound==0 below)
        bound = sorted(p.key for p in pods if p.node_name)
        if 0 < len(bound) < minimum and key not in broken:
            out.append(Violation(GANG_PARTIAL, key, f"{len(bound)} of {len(pods)} members bound, minimum {minimum}: "
                                 f"{', '.join(bound)}"))
    for key, pods in sorted(members.items()):
        first = pods[0].gang
        if first is not None and first.from_podgroup and gang_name(key) not in view.podgroups:
            bound = sorted(p.key for p in pods if p.node_name)
            if bound:
                out.append(Violation(GANG_PARTIAL, key, f"bound without a PodGroup object: {', '.join(bound)}"))
    return out


def pending_with_room(view: ClusterView, keys: Iterable[str],
                      known_devices: Mapping[str, JSON] | None = None) -> list[str]:
    """The pods of ``keys`` (``namespace/name``) that exist, are not bound, and fit somewhere by
    the apiserver's state (one ledger for all of them; ``known_devices`` as for fits_somewhere)."""
    pods = view.pod_by_key()
    ledger = _ledger(view, known_devices, [])
    blocked = _out_of_reach(view, ledger)
    return [key for key in sorted(keys) if (pod := pods.get(key)) is not None and key not in blocked
            and not (pod.get("spec") or {}).get("nodeName") and fits_somewhere(pod, view, ledger) is not None]


def check_unbound(view: ClusterView, must_bind: Collection[str], only_if_room: bool = False,
                  known_devices: Mapping[str, JSON] | None = None) -> list[Violation]:
    """Every pod the caller knows fits (``namespace/name``) exists and is bound.

    With ``only_if_room`` a pending pod counts only when it fits on some node by the apiserver's
    state (:func:`fits_somewhere`): for workloads whose size the caller cannot promise (random
    churn, class edits that move capacity), that still catches a scheduler that leaked capacity.
    """
    pods = view.pod_by_key()
    ledger = _ledger(view, known_devices, [])
    blocked = _out_of_reach(view, ledger) if only_if_room else set()
    out = []
    for key in sorted(must_bind):
        pod = pods.get(key)
        if pod is None:
            out.append(Violation(UNBOUND, key, "pod is gone"))
        elif not (pod.get("spec") or {}).get("nodeName"):
            conditions = (pod.get("status") or {}).get("conditions") or []
            why = next((c.get("message", "") for c in conditions if c.get("type") == "PodScheduled"), "")
            node = fits_somewhere(pod, view, ledger)
            if only_if_room and (node is None or key in blocked):
                continue
            room = f"fits on {node} by the apiserver's state" if node else "no node has room by the apiserver's state"
            out.append(Violation(UNBOUND, key, f"still pending ({room}){': ' + why if why else ''}"))
    return out


def check_events(view: ClusterView) -> list[Violation]:
    """A pod's ``Scheduled`` Events must agree with each other and with where the pod is (a
    PodGroup's, naming where its members went, is no pod's Binding)."""
    nodes_by_uid: dict[str, set[str]] = defaultdict(set)
    names: dict[str, str] = {}
    for event in view.events:
        regarding = event.get("regarding") or {}
        if event.get("reportingController") != "tessera" or regarding.get("kind") != "Pod":
            continue
        uid = regarding.get("uid") or ""
        note = str(event.get("note") or "")
        if not uid or not note.startswith(_SCHEDULED_PREFIX) or " to " not in note:
            continue
        nodes_by_uid[uid].add(note.rpartition(" to ")[2])
        names[uid] = f"{regarding.get('namespace')}/{regarding.get('name')}"
    out = []
    for uid, nodes in sorted(nodes_by_uid.items()):
        pod = view.pods.get(uid)
        actual = (pod.get("spec") or {}).get("nodeName") if pod is not None else None
        if len(nodes) > 1:
            out.append(Violation(BOUND_TWICE, names[uid], f"Scheduled events name {len(nodes)} nodes: {sorted(nodes)}"))
        elif actual and actual not in nodes:
            out.append(Violation(BOUND_TWICE, names[uid], f"Scheduled event says {sorted(nodes)[0]} but the pod is "
                                 f"bound to {actual}"))
    return out


def check(view: ClusterView, *, must_bind: Collection[str] = (), watcher: ClusterWatcher | None = None,
          grace: float = 5.0, blind: Iterable[tuple[float, float]] = (), only_if_room: bool = False) -> list[Violation]:
    """All final-state checks (and the watcher's, when given), deduplicated and sorted; ``blind``
    as for :func:`check_history`, ``only_if_room`` as for :func:`check_unbound`."""
    removed = watcher.removed_devices() if watcher is not None else None
    found = check_capacity(view, removed, watcher.held_on if watcher is not None else None,
                           watcher.began if watcher is not None else None,
                           watcher.at_start if watcher is not None else None)
    if watcher is not None:
        found += watcher.overfills(grace=grace, blind=blind)
    found += check_gangs(view, removed, watcher.removed_node_times() if watcher is not None else None,
                         {uid: first.at for uid, first in watcher.first_bound.items()} if watcher is not None else None) \
        + check_unbound(view, must_bind, only_if_room, removed) + check_events(view)
    if watcher is not None:
        found += check_history(watcher, view, grace, blind)
        # A transient violation the final state no longer shows (or shows with other numbers):
        # report it once per subject, the final state's version first.
        seen = {(v.invariant, v.subject) for v in found}
        for violation in watcher.violations():
            if (violation.invariant, violation.subject) not in seen:
                seen.add((violation.invariant, violation.subject))
                found.append(violation)
    return sorted(set(found))


async def wait_until_bound(api: ApiReader, must_bind: Collection[str], timeout: float,
                           interval: float = 0.5) -> set[str]:
    """Poll until every ``namespace/name`` in ``must_bind`` is bound; returns those that are not."""
    namespaces = {key.partition("/")[0] for key in must_bind}
    deadline = time.monotonic() + timeout
    left = set(must_bind)
    while True:
        with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError, RuntimeError, OSError):
            bound = set()
            for namespace in namespaces:
                items, _ = await api.list(f"/api/v1/namespaces/{namespace}/pods")
                bound |= {_key(p) for p in items if (p.get("spec") or {}).get("nodeName")}
            left = set(must_bind) - bound
        if not left or time.monotonic() >= deadline:
            return left
        await asyncio.sleep(interval)


# --- the watcher: what happened during the run -------------------------------------------------


@dataclass(frozen=True)
class FirstBinding:
    node: str
    at: float  # time.monotonic() when the watcher first saw the pod bound
    key: str
    # what the pod held then (`_held_assignment`: the Binding's own grants, before any edit of
    # its annotations); None when it held nothing or neither annotation was readable
    held: ann.DeviceAssignment | None = None


_KINDS: tuple[tuple[str, str], ...] = (
    ("Pod", PODS_PATH), ("Node", NODES_PATH), ("ExtendedResource", DEVICES_PATH),
    ("ResourceClass", CLASSES_PATH), ("PodGroup", PODGROUPS_PATH),
)
PodCallback = Callable[[str, JSON], None]


class ClusterWatcher:
    """List+watch of pods, nodes, devices, classes and pod groups for the length of a run.

    Resilient on purpose (reconnects with backoff, relists on 410): the scenarios restart the
    apiserver under it. Times are ``time.monotonic()`` of observation; the lag between an
    apiserver write and its observation is why :func:`check_history` takes a grace period.
    """

    def __init__(self, api: ApiReader, namespaces: Collection[str] | None = None,
                 check_interval: float = 0.25, grace: float = 5.0) -> None:
        self.api = api
        self.grace = grace  # `overfills`' default
        self.namespaces = set(namespaces) if namespaces is not None else None
        self.check_interval = check_interval
        self.view = ClusterView()
        self.first_bound: dict[str, FirstBinding] = {}
        self.removed: dict[tuple[str, str], tuple[float, JSON]] = {}  # (kind, name) -> (when, last object)
        self.class_versions: dict[str, list[tuple[float, JSON | None]]] = defaultdict(list)
        # History in etcd's order. Pods and devices come on separate watch streams, so the order
        # events arrive in says nothing about the order they were written in; their
        # resourceVersions do (one revision sequence; objects without one, as in unit tests: the
        # order seen). (device name, pod uid) -> the resourceVersion of the first version of the
        # pod seen holding the device (`held_on`); `began` only for holds that began while watched
        # (not in the initial LIST: when those began is unknown), for `check_capacity`:
        self._first_held: dict[tuple[str, str], int] = {}
        self.began: dict[tuple[str, str], int] = {}
        # device name -> (resourceVersion, arrival, when seen, the object or None once deleted),
        # one per version whose spec changed
        self._device_versions: dict[str, list[tuple[int, int, float, JSON | None]]] = defaultdict(list)
        # device name -> (resourceVersion, arrival, when seen, pod uid, the pod's grants on it from
        # then on — () once it holds it no more —, whether the hold predates the watch: the
        # initial LIST)
        self._hold_log: dict[str, list[tuple[int, int, float, str, tuple[_Grant, ...], bool]]] = defaultdict(list)
        self._pod_grants: dict[str, dict[str, tuple[_Grant, ...]]] = {}  # uid -> device -> its grants now
        self._arrival = 0
        self.started = time.monotonic()
        self.synced = asyncio.Event()
        self.errors = 0
        self._violations: dict[Violation, float] = {}
        self._callbacks: list[PodCallback] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._dirty = asyncio.Event()
        self._synced_kinds: set[str] = set()

    def on_pod(self, callback: PodCallback) -> None:
        """Call ``callback(event_type, pod)`` for every pod event (the fake node agent uses it)."""
        self._callbacks.append(callback)

    async def start(self, timeout: float = 30.0) -> None:
        self.started = time.monotonic()
        self._tasks = [asyncio.create_task(self._run(kind, path), name=f"watch-{kind}") for kind, path in _KINDS]
        self._tasks.append(asyncio.create_task(self._check_loop(), name="watch-checks"))
        await asyncio.wait_for(self.synced.wait(), timeout)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        self._run_checks()

    def violations(self) -> list[Violation]:
        """Pods bound twice and transient capacity violations seen during the run (slices
        beyond capacity are judged by `overfills`, from the history)."""
        return sorted(self._violations)

    def removed_nodes(self) -> set[str]:
        """The Nodes seen deleted (and not re-created since) during the run."""
        return {name for (kind, name) in self.removed if kind == "Node"}

    def removed_node_times(self) -> dict[str, float]:
        """The Nodes seen deleted (and not re-created since) during the run, and when."""
        return {name: when for (kind, name), (when, _) in self.removed.items() if kind == "Node"}

    def removed_devices(self) -> dict[str, JSON]:
        return {name: obj for (kind, name), (_, obj) in self.removed.items() if kind == "ExtendedResource"}

    @property
    def held_on(self) -> dict[tuple[str, str], str]:
        """(device name, pod uid) -> the node the device's object named when the pod began holding
        it, by resourceVersion: a device moved while held stays its holder's (`check_capacity`),
        a pod given it after the move (a later resourceVersion than the move's) is not exempt,
        whatever order the two watch streams delivered the events in. A hold that began before
        the first version of the device the watcher knows is judged by that version; one that
        began while the device did not exist, by none (not exempt)."""
        out: dict[tuple[str, str], str] = {}
        for (name, uid), order in self._first_held.items():
            versions = sorted(self._device_versions.get(name, []), key=lambda v: (v[0], v[1]))
            if not versions:
                continue
            obj = versions[0][3]
            for at, _, _, version in versions:
                if at > order:
                    break
                obj = version
            device = _device(obj)
            if device is not None:
                out[(name, uid)] = device.node_name
        return out

    @property
    def at_start(self) -> dict[str, JSON]:
        """Each device as the watcher first knew it (its earliest version by resourceVersion: the
        initial LIST's, for one that existed when the watch began): the capacity `check_capacity`
        judges slices held since before the watch by — the nearest to when they began it knows."""
        out: dict[str, JSON] = {}
        for name, versions in self._device_versions.items():
            known = [(at, arrival, obj) for at, arrival, _, obj in versions if obj is not None]
            if known:
                out[name] = min(known, key=lambda v: (v[0], v[1]))[2]
        return out

    def overfills(self, names: Iterable[str] | None = None, grace: float | None = None,
                  blind: Iterable[tuple[float, float]] = ()) -> list[Violation]:
        """Slices beyond capacity, judged by history: a pod that began holding slices of a device
        (resourceVersion order) while those already present and its own exceeded the capacity of
        a dimension its slices are of, as the device stood then. A capacity lowered under held
        slices is no violation (docs/api.md), and a pod the watcher saw begin holding within
        ``grace`` seconds (default `grace`; 0: none) of seeing the capacity lowered, or across a
        ``blind`` window (as for `check_history`) after it, is judged by the capacity before (a
        Binding decided on the view before the edit may land after it: Tessera cannot fence a
        device edit; the race `check_history`'s grace allows). Not judged here: a hold of the initial LIST (its
        start is unknown; `check_capacity` judges a device with one by its capacity now), one
        that began before the first version of the device the watcher knows (its capacity then
        is unknown)."""
        grace = self.grace if grace is None else grace
        windows = list(blind)
        out: list[Violation] = []
        for name in sorted(self._hold_log if names is None else names):
            steps: list[tuple[int, int, float, JSON | None, tuple[str, tuple[_Grant, ...], bool] | None]] = [
                (at, arrival, seen, obj, None) for at, arrival, seen, obj in self._device_versions.get(name, [])]
            steps += [(at, arrival, seen, None, (uid, grants, initial))
                      for at, arrival, seen, uid, grants, initial in self._hold_log.get(name, [])]
            steps.sort(key=lambda step: (step[0], step[1]))
            device: Device | None = None
            replaced: list[tuple[float, Device]] = []  # (when seen replaced, an earlier version)
            holders: dict[str, tuple[_Grant, ...]] = {}
            for _, _, seen, obj, hold in steps:
                if hold is None:  # a device version; once deleted its holders keep the last one
                    parsed = _device(obj)
                    if parsed is not None:
                        if device is not None:
                            replaced.append((seen, device))
                        device = parsed
                    continue
                uid, grants, initial = hold
                joined = uid not in holders and bool(grants)
                if grants:
                    holders[uid] = grants
                else:
                    holders.pop(uid, None)
                mine = [g for g in grants if g.amount is not None]
                if not joined or initial or device is None or not mine or len(mine) < len(grants):
                    continue  # whole holders clash or not by `check_capacity`, at every change
                _, shared, _ = _split(g for held in holders.values() for g in held)
                dimensions = {g.dimension or _dimension(g.resource, self.view) for g in mine}
                recent = [old for when, old in replaced
                          if (grace > 0 and abs(when - seen) <= grace) or _blind(windows, when, seen)]
                for dimension, total, capacity in _over_capacity(shared, device, self.view):
                    if any(not any(d == dimension for d, _, _ in _over_capacity(shared, old, self.view))
                           for old in recent):
                        continue  # within the capacity of a version replaced just before
                    if dimension in dimensions or "" in dimensions:
                        sharers = ', '.join(sorted({g.pod for g in shared}))
                        out.append(Violation(DEVICE_CAPACITY, name, f"{_over_text(dimension, total, capacity)} "
                                             f"when {mine[0].pod} began holding slices of it: {sharers}"))
        return out

    # --- internals ---------------------------------------------------------------------------

    def _store(self, kind: str) -> dict[str, JSON]:
        return {"Pod": self.view.pods, "Node": self.view.nodes, "ExtendedResource": self.view.devices,
                "ResourceClass": self.view.classes, "PodGroup": self.view.podgroups}[kind]

    @staticmethod
    def _id(kind: str, obj: JSON) -> str:
        return str(obj["metadata"]["uid"]) if kind == "Pod" else _key(obj)

    async def _run(self, kind: str, path: str) -> None:
        delay = 0.2
        resource_version = ""
        while True:
            try:
                if not resource_version:
                    items, resource_version = await self.api.list(path)
                    self._replace(kind, items, initial=kind not in self._synced_kinds, listed_at=resource_version)
                    if kind not in self._synced_kinds:
                        self._synced_kinds.add(kind)
                        if len(self._synced_kinds) == len(_KINDS):
                            self.synced.set()
                    if not resource_version:  # CRD not installed
                        await asyncio.sleep(5)
                        continue
                async for event in self.api.watch(path, resource_version):
                    delay = 0.2
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        resource_version = "" if obj.get("code") == 410 else resource_version
                        break
                    rv = (obj.get("metadata") or {}).get("resourceVersion")
                    if event.get("type") != "BOOKMARK":
                        self._apply(kind, str(event.get("type")), obj)
                    if rv:
                        resource_version = str(rv)
            except asyncio.CancelledError:
                raise
            except _WatchError as err:
                self.errors += 1
                if err.status == 410:
                    resource_version = ""
                    continue
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
            except Exception:  # transport trouble, apiserver restarts: retry
                self.errors += 1
                await asyncio.sleep(delay * random.uniform(0.8, 1.2))
                delay = min(delay * 2, 2.0)

    def _replace(self, kind: str, items: list[JSON], initial: bool = False, listed_at: str = "") -> None:
        """Make the store equal a LIST. Objects of the initial LIST date from before the run:
        classes count as existing forever, pods as bound when the watch started. An object the
        LIST no longer has was deleted by the LIST's resourceVersion ``listed_at``."""
        store = self._store(kind)
        listed = {self._id(kind, obj): obj for obj in items}
        at = self.started if initial else None
        for ident in [i for i in store if i not in listed]:
            gone = store[ident]
            if listed_at:
                gone = {**gone, "metadata": {**gone["metadata"], "resourceVersion": listed_at}}
            self._apply(kind, "DELETED", gone)
        for ident, obj in listed.items():
            old = store.get(ident)
            if old is None or old["metadata"].get("resourceVersion") != obj["metadata"].get("resourceVersion"):
                self._apply(kind, "MODIFIED" if old is not None else "ADDED", obj, at)

    def _apply(self, kind: str, event_type: str, obj: JSON, at: float | None = None) -> None:
        now = time.monotonic() if at is None else at
        store = self._store(kind)
        ident = self._id(kind, obj)
        name = _key(obj)
        if kind in ("Pod", "ExtendedResource"):
            self._history(kind, event_type, obj, store.get(ident), now, initial=at is not None)
        if event_type == "DELETED":
            store.pop(ident, None)
            if kind in ("Node", "ExtendedResource"):
                self.removed[(kind, name)] = (now, obj)
            if kind == "ResourceClass":
                self.class_versions[name].append((now, None))
        else:
            if kind == "Pod" and self.namespaces is not None and obj["metadata"].get("namespace") not in self.namespaces:
                return
            old = store.get(ident)
            store[ident] = obj
            if kind in ("Node", "ExtendedResource"):
                self.removed.pop((kind, name), None)
            if kind == "ResourceClass" and (old is None or old.get("spec") != obj.get("spec")):
                self.class_versions[name].append((float("-inf") if at is not None else now, obj))
            if kind == "Pod":
                self._pod_bound(obj, now)
        if kind == "Pod":
            for callback in self._callbacks:
                callback(event_type, obj)
        self._dirty.set()

    def _history(self, kind: str, event_type: str, obj: JSON, old: JSON | None, seen: float, initial: bool) -> None:
        """Record a device version whose spec changed (or its deletion), or a change in what a pod
        holds, at its resourceVersion (`began`, `held_on`, `overfills`)."""
        self._arrival += 1
        raw = (obj.get("metadata") or {}).get("resourceVersion")
        order = int(raw) if isinstance(raw, str) and raw.isdigit() else self._arrival
        if kind == "ExtendedResource":
            name = _key(obj)
            if event_type == "DELETED":
                self._device_versions[name].append((order, self._arrival, seen, None))
            elif old is None or old.get("spec") != obj.get("spec") or not self._device_versions.get(name):
                self._device_versions[name].append((order, self._arrival, seen, obj))
            else:
                return
            return
        uid = str(obj["metadata"]["uid"])
        if event_type != "DELETED" and self.namespaces is not None \
                and obj["metadata"].get("namespace") not in self.namespaces:
            return
        now: dict[str, tuple[_Grant, ...]] = defaultdict(tuple)
        if event_type != "DELETED":
            for grant in _grants([obj], []):
                now[grant.device] += (grant,)
        before = self._pod_grants.get(uid, {})
        for name in sorted(before.keys() | now.keys()):
            if before.get(name) != now.get(name):
                self._hold_log[name].append((order, self._arrival, seen, uid, now.get(name, ()), initial))
                if name in now:
                    self._first_held.setdefault((name, uid), order)
                    if not initial:
                        self.began.setdefault((name, uid), order)
        if now:
            self._pod_grants[uid] = dict(now)
        else:
            self._pod_grants.pop(uid, None)

    def _pod_bound(self, pod: JSON, now: float) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            return
        uid = pod["metadata"]["uid"]
        first = self.first_bound.get(uid)
        if first is None:
            self.first_bound[uid] = FirstBinding(node, now, _key(pod), _held_assignment(pod, _key(pod), []))
        elif first.node != node:
            self._flag([Violation(BOUND_TWICE, first.key, f"bound to {first.node}, later to {node}")])

    def _flag(self, violations: Iterable[Violation]) -> None:
        now = time.monotonic()
        for violation in violations:
            self._violations.setdefault(violation, now)

    def _run_checks(self) -> None:
        # slices over capacity of devices whose holders all began while watched are left to
        # `overfills` (`check` runs it, with the blind windows of the run)
        self._flag(check_capacity(self.view, self.removed_devices(), self.held_on, self.began, self.at_start))

    async def _check_loop(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            self._run_checks()
            await asyncio.sleep(self.check_interval)


def _class_at(watcher: ClusterWatcher, resource: str, at: float,
              grace: float) -> tuple[ResourceClass | None, float]:
    """The class serving ``resource`` as it had stood for ``grace`` seconds at ``at``, and when
    that version appeared (``-inf`` for classes older than the run).

    None when the check cannot apply: no class, one created or deleted too recently, or a version
    change within the grace window (the scheduler may legitimately have used either version).
    """
    for name, versions in watcher.class_versions.items():
        current: JSON | None = None
        since = float("-inf")
        changed_recently = False
        for when, obj in versions:
            if when <= at - grace:
                current, since = obj, when
            elif when <= at:
                changed_recently = True
        candidates = [obj for _, obj in versions if obj is not None]
        try:
            serves = any(parse_resource_class(obj).resource_name == resource for obj in candidates)
        except ObjectError:
            continue
        if not serves:
            continue
        if changed_recently or current is None:
            return None, since
        try:
            return parse_resource_class(current), since
        except ObjectError:
            return None, since
    return None, float("-inf")


def _blind(windows: Iterable[tuple[float, float]], since: float, until: float) -> bool:
    """Whether the scheduler's watches were disrupted at some point between a change and a binding
    (then its view may lag by more than any grace period, by design: informers back off)."""
    return any(start <= until and end >= since for start, end in windows)


def check_history(watcher: ClusterWatcher, view: ClusterView, grace: float = 5.0,
                  blind: Iterable[tuple[float, float]] = ()) -> list[Violation]:
    """Bindings made on a view stale by more than ``grace`` seconds.

    For each pod still bound at the end: its node and devices — what it held when the watcher
    first saw it bound (union of ``tessera.dev/devices`` and ``tessera.dev/held-devices``, as
    Tessera reads it: the Binding's grants, not an edit of them since) — must not have been deleted more
    than ``grace`` before the watcher first saw the pod bound, and each device must match the
    class it was granted under — selector, and for shared classes ``count × unit`` — as the class
    stood when the binding was made. ``blind`` are (start, end) monotonic windows in which the
    scheduler's watches were being disrupted (cuts, 410s, resets, apiserver restarts, plus the
    informers' backoff after them); a change followed by a binding across such a window is not
    judged: the scheduler could not have known.
    """
    windows = list(blind)
    out: list[Violation] = []
    devices = {**watcher.removed_devices(), **watcher.view.devices, **view.devices}
    for uid, raw in sorted(view.pods.items()):
        if not _active(raw):
            continue
        first = watcher.first_bound.get(uid)
        if first is None or first.at <= watcher.started:
            continue  # bound before the run was watched
        key = _key(raw)
        node = raw["spec"]["nodeName"]
        removed = watcher.removed.get(("Node", node))
        if removed is not None and removed[0] < first.at - grace and not _blind(windows, removed[0], first.at):
            out.append(Violation(STALE_BINDING, key, f"bound to node {node} {first.at - removed[0]:.1f}s after it "
                                 "was deleted"))
        # what the Binding granted: the pod's holds as first seen bound (an edit of its devices
        # annotation since is no Binding of the scheduler's; Tessera keeps what it named held)
        assignment = first.held
        if assignment is None:
            continue
        try:
            pod = parse_pod(raw)
        except ObjectError:
            continue  # reported by check_capacity
        counts = {c.name: c.requests for c in pod.containers}
        for container, by_resource in assignment.items():
            for resource, grants in by_resource.items():
                cls, since = _class_at(watcher, resource, first.at, grace)
                if cls is not None and _blind(windows, since, first.at):
                    cls = None
                for grant in grants:
                    gone = watcher.removed.get(("ExtendedResource", grant.device))
                    if gone is not None and gone[0] < first.at - grace:
                        if not _blind(windows, gone[0], first.at):
                            out.append(Violation(STALE_BINDING, key, f"granted device {grant.device} "
                                                 f"{first.at - gone[0]:.1f}s after it was deleted"))
                        continue
                    device = _device(devices.get(grant.device))
                    if device is None:
                        out.append(Violation(STALE_BINDING, key, f"granted device {grant.device}, which never existed"))
                        continue
                    if device.device_id != grant.device_id:
                        out.append(Violation(STALE_BINDING, key, f"grant of {grant.device} names id {grant.device_id}, "
                                             f"the device's is {device.device_id}"))
                    if cls is None:
                        continue
                    if not cls.matches(device):
                        out.append(Violation(STALE_BINDING, key, f"device {grant.device} does not match ResourceClass "
                                             f"{cls.name} as it stood when the pod was bound"))
                    count = counts.get(container, {}).get(resource, 0)
                    if cls.sharing is None and grant.amount is not None:
                        out.append(Violation(STALE_BINDING, key, f"shared grant on {grant.device} under exclusive "
                                             f"ResourceClass {cls.name}"))
                    elif cls.sharing is not None and grant.amount != count * cls.sharing.unit:
                        want = format_quantity(count * cls.sharing.unit)
                        got = format_quantity(grant.amount) if grant.amount is not None else "exclusive"
                        out.append(Violation(STALE_BINDING, key, f"grant on {grant.device} is {got}, ResourceClass "
                                             f"{cls.name} makes {count} units {want}"))
    return out
