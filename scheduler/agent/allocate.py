"""Which pod a kubelet `Allocate` call is for (reference/devices.md §7.4).

The kubelet's `Allocate(resource R, k slot ids)` names neither pod nor container. The agent finds
the pod from what the scheduler wrote atomically with the binding:

    the unique pod on this node, still Pending, with `tessera.dev/phase: Allocating` whose
    `tessera.dev/devices` has a container entry for R, not served yet, worth exactly k slots

(k = number of exclusive grants; a shared grant of N×unit is worth N). Within one pod, the kubelet
calls Allocate for init containers first, then app containers, in spec order; the first unserved
matching container in that order is the one. A container whose entry names a GPU of a plain init
container of its pod gets it again: the init container has finished (the kubelet hands its
devices on, and the scheduler charged them once; see scheduler/core/lifecycle.py). Zero or
several candidate pods is an error, never a guess: returning someone else's GPUs is worse than failing the pod's admission, and the scheduler's
allocation gate (no second pod with a common resource name bound to a node while one is
Allocating) makes several candidates impossible unless annotations were forged. So is a pending pod
asking for k of R that Tessera set up no devices for (a rival: placed without Tessera, or carrying
annotations copied from another pod, which were never served under its uid): the call may be its own.

Every GPU the answer names must be one the agent discovered on this node, healthy, under the
UUID the annotation gives (`check_local_devices`): the scheduler charges the grant's `device`, the
container gets its `id`. No other live pod on the node may hold it where either side is whole, and
a slice of it must fit beside the slices other live pods hold (`check_shared_capacity`).

Served entries are remembered per (pod uid, container, resource), with the slot ids the kubelet
gave, for as long as the pod is on the node and not terminal, and persisted in a small file in the
device-plugin directory (the kubelet deletes only sockets there): an agent restart in the middle of
a multi-container pod does not hand container B the devices of container A, and the slots live pods
hold stay known (`ServedLedger`).

A refusal is told to the kubelet, which makes it the refused pod's `UnexpectedAdmissionError` Event
and status message, read by that pod's tenant: what it says of other pods follows
`scheduler.core.tenants.pods_named` — pods of the refused pod's namespace named, the others counted,
and none named where the agent could not tell which pod the call is for. The agent's log line,
read by operators, names every pod (`AllocationError`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import structlog

from scheduler.api.quantity import Amount, format_quantity
from scheduler.core.annotations import (
    DEVICES,
    HELD_DEVICES,
    PHASE,
    PHASE_ALLOCATING,
    AnnotationError,
    DeviceGrant,
    decode_devices,
    merge_devices,
)
from scheduler.core.objects import in_terminal_phase
from scheduler.core.lifecycle import APP, INIT, SIDECAR, ContainerKind, Phases, container_phases, device_holds
from scheduler.core.state.ledger import over_text
from scheduler.core.tenants import named_to, pods_named

__all__ = [
    "Allocation",
    "AllocationError",
    "allocating",
    "ServedKey",
    "ServedLedger",
    "check_local_devices",
    "check_shared_capacity",
    "container_env",
    "container_order",
    "find_allocation",
    "grant_units",
    "HeldGrants",
    "held_names",
    "held_grants",
    "pending_entries",
]

log = structlog.get_logger("tessera.agent.allocate")

ServedKey = tuple[str, str, str]  # (pod uid, container name, resource name)


class AllocationError(Exception):
    """An Allocate call refused: no unique pod matches it, or its devices cannot be handed out.

    The message, for the agent's log, names every pod; `told` is what the kubelet reports, on the
    refused pod, where it must say less (`_refusal`)."""

    def __init__(self, message: str, told: str = "") -> None:
        super().__init__(message)
        self.told = told or message


def _refusal(namespace: str | None, worded: Callable[[str | None], str]) -> AllocationError:
    """An `AllocationError` naming other pods by `worded(namespace)`, which words its message for a
    pod of `namespace` (None: not known which pod the call is for) by `pods_named`: the log line,
    `worded("")`, names them all."""
    return AllocationError(worded(""), worded(namespace))


@dataclass(frozen=True, slots=True)
class Allocation:
    pod_uid: str
    namespace: str
    pod_name: str
    container: str
    resource_name: str
    grants: tuple[DeviceGrant, ...]
    # every grant of the container by resource name, all its resources: a container asking for two
    # classes gets one Allocate call per class, and of an env key the kubelet keeps the value of
    # whichever answer it reads first (its own map order)
    container_resources: tuple[tuple[str, tuple[DeviceGrant, ...]], ...] = ()

    @property
    def container_grants(self) -> tuple[DeviceGrant, ...]:
        return tuple(grant for _, grants in self.container_resources for grant in grants)

    @property
    def key(self) -> ServedKey:
        return (self.pod_uid, self.container, self.resource_name)

    @property
    def pod_key(self) -> str:
        return f"{self.namespace}/{self.pod_name}"

    @property
    def device_ids(self) -> list[str]:
        """The devices' ids (UUIDs) in grant order, each once."""
        return list(dict.fromkeys(g.device_id for g in self.grants))

    @property
    def device_names(self) -> list[str]:
        return list(dict.fromkeys(g.device for g in self.grants))

    @property
    def container_device_ids(self) -> list[str]:
        """The ids of every device the container holds, this call's first (its own if unknown)."""
        return list(dict.fromkeys(g.device_id for g in (*self.grants, *self.container_grants)))

    @property
    def container_device_names(self) -> list[str]:
        return list(dict.fromkeys(g.device for g in (*self.grants, *self.container_grants)))


def grant_units(grants: Iterable[DeviceGrant], unit: Fraction | int | None) -> int | None:
    """How many kubelet slots these grants are worth; None if they cannot be a whole number."""
    total = Fraction(0)
    for grant in grants:
        if grant.amount is None:
            total += 1
        elif unit is None:
            return None  # a shared slice, but the class is not shared (any more)
        else:
            total += Fraction(grant.amount) / Fraction(unit)
    return int(total) if total.denominator == 1 else None


def container_order(pod: Mapping[str, Any]) -> list[str]:
    """The kubelet's Allocate order: init containers, then app containers, each in spec order."""
    spec = pod.get("spec") or {}
    names: list[str] = []
    for field in ("initContainers", "containers"):
        for container in spec.get(field) or ():
            if isinstance(container, Mapping) and isinstance(container.get("name"), str):
                names.append(container["name"])
    return names


def _meta(pod: Mapping[str, Any]) -> tuple[str, str, str, Mapping[str, Any]]:
    meta = pod.get("metadata") or {}
    return (str(meta.get("uid") or ""), str(meta.get("namespace") or ""), str(meta.get("name") or ""),
            meta.get("annotations") or {})


def _admitting(pod: Mapping[str, Any], node_name: str) -> bool:
    """On this node and still Pending: the kubelet makes every Allocate call for a pod before any
    of its containers starts, so a pod that has left Pending (running, or finished) is never the
    caller — whatever its phase annotation says (its `Allocated` patch may have been lost). The
    scheduler's allocation gate opens on the same rule."""
    return ((pod.get("spec") or {}).get("nodeName") == node_name
            and (pod.get("status") or {}).get("phase") in (None, "", "Pending"))


def allocating(pod: Mapping[str, Any], node_name: str) -> bool:
    """Waiting for Allocate calls: Allocating, on this node and still Pending."""
    _, _, _, annotations = _meta(pod)
    return _admitting(pod, node_name) and annotations.get(PHASE) == PHASE_ALLOCATING


def _rival(pod: Mapping[str, Any], node_name: str, resource_name: str, count: int,
           served: Container[ServedKey]) -> str | None:
    """The container of a pod on this node, still Pending, that asks for exactly `count` of
    `resource_name` and may be the one this call is for although Tessera set up no devices for it,
    or None: neither waiting for them (an entry for the container and resource in a readable devices
    annotation of an Allocating pod) nor served them already (in `served`, under this pod's uid).

    Such a pod got on the node without Tessera (`spec.nodeName` set at creation, another scheduler);
    annotations copied from a bound Tessera pod (its YAML reused, a template carrying them) do not
    make it Tessera's: they were served for the original's uid, if ever. Serving it a waiting pod's
    devices would fail that pod's admission and leave its devices, which the scheduler then frees,
    in the stray pod's hands."""
    if not _admitting(pod, node_name):
        return None
    uid, _, _, annotations = _meta(pod)
    waiting: set[str] = set()
    raw = annotations.get(DEVICES)
    if raw is not None and annotations.get(PHASE) == PHASE_ALLOCATING:
        with contextlib.suppress(AnnotationError):
            waiting = {container for container, by_resource in decode_devices(raw).items() if resource_name in by_resource}
    spec = pod.get("spec") or {}
    for field in ("initContainers", "containers"):
        for container in spec.get(field) or ():
            if not isinstance(container, Mapping):
                continue
            name = str(container.get("name") or "")
            resources = container.get("resources") or {}
            asked = (resources.get("limits") or {}).get(resource_name, (resources.get("requests") or {}).get(resource_name))
            if str(asked) == str(count) and name not in waiting and (uid, name, resource_name) not in served:
                return name
    return None


def find_allocation(pods: Iterable[Mapping[str, Any]], node_name: str, resource_name: str, count: int,
                    unit: Fraction | int | None, served: Container[ServedKey]) -> Allocation:
    """The one container this Allocate call is for; `AllocationError` (with the reasons) otherwise."""
    candidates: list[Allocation] = []
    others: list[str] = []
    rivals: list[str] = []
    answered: list[str] = []  # containers of this size an earlier call was answered for
    for pod in pods:
        if (rival := _rival(pod, node_name, resource_name, count, served)) is not None:
            _, namespace, name, _ = _meta(pod)
            rivals.append(f"{namespace}/{name} (container {rival})")
        if not allocating(pod, node_name):
            continue
        uid, namespace, name, annotations = _meta(pod)
        key = f"{namespace}/{name}"
        raw = annotations.get(DEVICES)
        if raw is None:
            others.append(f"{key} has no {DEVICES} annotation")
            continue
        try:
            devices = decode_devices(raw)
        except AnnotationError as err:
            others.append(f"{key} has an unreadable {DEVICES} annotation ({err})")
            continue
        found: Allocation | None = None
        unmatched: list[str] = []
        for container in container_order(pod):
            grants = devices.get(container, {}).get(resource_name)
            if not grants:
                continue
            units = grant_units(grants, unit)
            if (uid, container, resource_name) in served:
                if units == count:
                    answered.append(f"{key} container {container}")
                continue
            if units == count:
                everything = tuple(devices.get(container, {}).items())
                found = Allocation(uid, namespace, name, container, resource_name, grants, everything)
                break
            unmatched.append(f"{container} wants {units if units is not None else 'a non-whole number of'}")
        if found is not None:
            candidates.append(found)
        elif unmatched:
            others.append(f"{key} ({'; '.join(unmatched)})")
    request = f"{count} {resource_name}"
    # the refusals below are of a call the agent could not tie to a pod: it may be any namespace's (a
    # static pod's; a pod's whose init containers' devices the kubelet reuses, so that it asks for
    # fewer than its request), so they name no pod to it (None)
    matching = [f"{c.pod_key} container {c.container}" for c in candidates]
    if rivals:
        raise _refusal(None, lambda here: (
            f"{pods_named(here, rivals)} also asks for {request} but Tessera did not set up its devices here (no "
            f"{DEVICES} entry of its own waiting for this call: placed without Tessera, or annotations copied from "
            f"another pod){f'; the call may be for {pods_named(here, matching)}' if matching else ''}. Refusing to "
            f"guess which pod this call is for: pods asking for {resource_name} must be scheduled by Tessera"))
    if len(candidates) == 1:
        _refuse_held_devices(pods, node_name, candidates[0])
        return candidates[0]
    if not candidates:
        def no_match(here: str | None) -> str:
            detail = f"; other pods here waiting for {resource_name}: {pods_named(here, others)}" if others else ""
            again = (f". An earlier call of this size was answered for {pods_named(here, answered)}, which is still "
                     f"waiting: either the kubelet restarted while admitting it, or that call was for a pod the "
                     f"apiserver does not show on this node — a static pod asking for {resource_name} (the kubelet "
                     f"admits it before it creates the mirror pod), which got those devices; static pods must not ask "
                     f"for {resource_name}") if answered else ""
            return (f"no pod on node {node_name} is waiting for {request}: none has {PHASE}={PHASE_ALLOCATING} "
                    f"with an unserved {DEVICES} entry of exactly that size{detail}{again}. Refusing to guess which "
                    f"devices to hand out (was the pod scheduled by Tessera?)")
        raise _refusal(None, no_match)
    raise _refusal(None, lambda here: (
        f"{len(candidates)} pods on node {node_name} match a request for {request}: {pods_named(here, matching)}. "
        f"Refusing to guess; the scheduler never binds two such pods at once, so their "
        f"{DEVICES} annotations were probably written by hand"))


def _refuse_held_devices(pods: Iterable[Mapping[str, Any]], node_name: str, allocation: Allocation) -> None:
    """`AllocationError` when another live pod on the node holds one of the allocation's GPUs
    (by UUID, what is handed out) in a way that excludes it: either side whole. The scheduler
    never assigns that; this catches what it cannot see — a deposed leader's Binding that landed
    after its successor gave the same GPU away, one GPU published under two names. A pod holds
    what either of its device annotations names: `tessera.dev/devices`, and `tessera.dev/held-devices`
    (what its Binding gave it, and what edits of the former named since; its containers keep what
    they were given). A live pod whose annotation cannot be read may hold any of them: refused too
    (fail closed). Slices of one GPU for two pods beyond its capacity: `check_shared_capacity`.
    The allocating pod's side is whole where it holds the GPU whole: where any of its containers
    has it whole (a slice of a finished init container's GPU, as the planner gives it, is held
    whole, `lifecycle.device_holds`), not only where this call's container does."""
    wanted = {grant.device_id: grant.amount is None for grant in allocation.grants}
    wanted.update(dict.fromkeys(_whole_elsewhere(pods, allocation, wanted), True))
    for pod in pods:
        uid, namespace, name, annotations = _meta(pod)
        if uid == allocation.pod_uid or (pod.get("spec") or {}).get("nodeName") != node_name \
                or in_terminal_phase(pod):
            continue
        for key in (DEVICES, HELD_DEVICES):
            if key in annotations:
                _refuse_held_by(allocation, wanted, node_name, f"{namespace}/{name}", key, annotations[key])


def _whole_elsewhere(pods: Iterable[Mapping[str, Any]], allocation: Allocation,
                     sliced: Mapping[str, bool]) -> list[str]:
    """The device ids of the allocation's slices (`sliced`: id -> whole) that another container
    of its own pod has whole, by the pod's devices annotation (read already: it named the
    allocation)."""
    ids = [device_id for device_id, whole in sliced.items() if not whole]
    if not ids:
        return []
    for pod in pods:
        uid, _, _, annotations = _meta(pod)
        if uid != allocation.pod_uid or DEVICES not in annotations:
            continue
        try:
            devices = decode_devices(annotations[DEVICES])
        except AnnotationError:
            return []
        whole = {grant.device_id for by_resource in devices.values() for grants in by_resource.values()
                 for grant in grants if grant.amount is None}
        return [device_id for device_id in ids if device_id in whole]
    return []


def _refuse_held_by(allocation: Allocation, wanted: Mapping[str, bool], node_name: str, holder: str, key: str,
                    raw: str) -> None:
    """`_refuse_held_devices` for one annotation `key` of the pod `holder`."""
    devices = _decode_held(allocation, node_name, holder, key, raw)
    for by_resource in devices.values():
        for grants in by_resource.values():
            for grant in grants:
                whole = wanted.get(grant.device_id)
                if whole is not None and (whole or grant.amount is None):
                    raise _refusal(allocation.namespace, lambda here: (
                        f"device {grant.device_id} is also assigned to {pods_named(here, [holder])}, which is still "
                        f"on node {node_name}: refusing to hand it to {allocation.pod_key} as well (one GPU for two "
                        f"pods; see the scheduler's DeviceConflict Events)"))


def _decode_held(allocation: Allocation, node_name: str, holder: str, key: str,
                 raw: str) -> dict[str, dict[str, tuple[DeviceGrant, ...]]]:
    """The grants of the annotation `key` of the live pod `holder`; `AllocationError` when it
    cannot be read (fail closed: it may hold any GPU of the node). The parse error quotes the
    holder's container names: told to the refused pod only when the holder may be named to it."""
    try:
        return decode_devices(raw)
    except AnnotationError as err:
        why = str(err)
        raise _refusal(allocation.namespace, lambda here: (
            f"{pods_named(here, [holder])}, still on node {node_name}, has an unreadable {key} annotation"
            f"{f' ({why})' if named_to(here, holder) else ''}: "
            f"which GPUs it holds is unknown, so none is handed to {allocation.pod_key} until that "
            "annotation is fixed or the pod is gone")) from None


def _pod_phases(pod: Mapping[str, Any]) -> dict[str, Phases]:
    """Which phases of its life each container of the pod runs in, from its spec (`lifecycle`; a
    restartable init container is a sidecar), as the scheduler reads it."""
    spec = pod.get("spec") or {}
    kinds: list[tuple[str, ContainerKind]] = []
    for field, init in (("initContainers", True), ("containers", False)):
        for container in spec.get(field) or ():
            if isinstance(container, Mapping) and isinstance(container.get("name"), str):
                kind = (SIDECAR if container.get("restartPolicy") == "Always" else INIT) if init else APP
                kinds.append((container["name"], kind))
    return container_phases(kinds)


def _slice_holds(assignment: Mapping[str, Mapping[str, tuple[DeviceGrant, ...]]], pod: Mapping[str, Any],
                 device_ids: Container[str]) -> list[tuple[str, Amount, str, str]]:
    """(device id, amount, resource name, dimension) of what the pod holds in slices of the GPUs
    `device_ids`, as the scheduler charges it (`lifecycle.device_holds`: a finished init
    container's slice handed on is held once), keyed by the GPU's UUID, what is handed out."""
    grants = {container: {resource: [(g.device_id, g.amount, g.dimension) for g in entries]
                          for resource, entries in by_resource.items()}
              for container, by_resource in assignment.items()}
    return [(device_id, amount, resource, dimension)
            for device_id, amount, resource, dimension in device_holds(grants, _pod_phases(pod))
            if amount is not None and device_id in device_ids]


def check_shared_capacity(pods: Iterable[Mapping[str, Any]], node_name: str, allocation: Allocation,
                          capacity: Mapping[str, Mapping[str, Amount]], dimension_of: Callable[[str], str]) -> None:
    """`AllocationError` when the allocation's slices of a GPU, beside the slices the other live
    pods on the node hold of it, would use more of a capacity of it than it has: the one that
    would push it over is refused (its admission fails, as for a whole GPU given twice), the
    holders admitted before keep running. The scheduler never places that; two Tessera installs
    on different Leases, or a deposed leader's Binding landing late, can.

    `capacity`: device id -> the capacities the agent publishes for it (its memory).
    `dimension_of`: resource name -> the `sharing.dimension` of its class now ("" when no class
    shares by it). What counts, as the scheduler charges it: each live pod's slices (both device
    annotations, merged; a finished init container's slice handed on once) and the allocating
    pod's own in every container; a slice is of the dimension its grant names, else of its class's
    now; one of neither (an old grant whose class is gone or no longer shares) may be of any and
    counts against each capacity, as the scheduler counts it placing — so nothing one scheduler
    places is refused. Dimensions the device publishes no capacity of are not checked. Only the
    capacities the allocation's own slices use are checked (a device already over in another
    dimension is not this pod's doing). A live pod whose annotation cannot be read fails it closed."""
    own_ids = {grant.device_id for grant in allocation.grants if grant.amount is not None}
    if not own_ids:
        return
    # device id -> dimension ("" unknown) -> (amount, holders other than the allocating pod)
    used: dict[str, dict[str, Amount]] = {}
    holders: dict[str, dict[str, list[str]]] = {}
    own_dimensions: dict[str, set[str]] = {}
    for pod in pods:
        uid, namespace, name, annotations = _meta(pod)
        if (pod.get("spec") or {}).get("nodeName") != node_name or in_terminal_phase(pod):
            continue
        own = uid == allocation.pod_uid
        keys = (DEVICES,) if own else (HELD_DEVICES, DEVICES)
        assignments = [_decode_held(allocation, node_name, f"{namespace}/{name}", key, annotations[key])
                       for key in keys if key in annotations]
        for device_id, amount, resource, granted in _slice_holds(merge_devices(*assignments), pod, own_ids):
            dimension = granted or dimension_of(resource)
            by_dimension = used.setdefault(device_id, {})
            by_dimension[dimension] = by_dimension.get(dimension, 0) + amount
            if own:
                own_dimensions.setdefault(device_id, set()).add(dimension)
            else:
                holders.setdefault(device_id, {}).setdefault(dimension, []).append(f"{namespace}/{name}")
    for device_id in sorted(own_ids):
        by_dimension = used.get(device_id, {})
        unknown = by_dimension.get("", 0)
        checked = own_dimensions.get(device_id, set())
        over = [(dimension, in_use, cap) for dimension, cap in sorted(capacity.get(device_id, {}).items())
                if (dimension in checked or "" in checked)
                and (in_use := by_dimension.get(dimension, 0) + (unknown if dimension else 0)) > cap]
        if not over:
            continue
        others = sorted({holder for dimension, _, _ in over
                         for holder in (*holders.get(device_id, {}).get(dimension, ()),
                                        *holders.get(device_id, {}).get("", ()))})
        holds = "holds a slice" if len(others) == 1 else "hold slices"
        raise _refusal(allocation.namespace, lambda here: (
            f"device {device_id} is shared beyond its capacity: {allocation.pod_key}"
            f"{f', and {pods_named(here, others)} that {holds} of it' if others else ''}, still on node "
            f"{node_name}, would use {over_text(over)}: refusing to hand it to {allocation.pod_key} as well "
            "(slices given out beyond the GPU; see the scheduler's DeviceConflict Events)"))


def check_local_devices(allocation: Allocation, node_name: str,
                        local: Mapping[str, tuple[str, str | None]]) -> None:
    """`AllocationError` unless every device the answer hands out is one this agent discovered on
    the node, healthy, under the id the annotation gives for it.

    `local`: ExtendedResource name -> (device id, why it is unhealthy or None). The scheduler
    charges a grant's `device`, the container gets its `id`: an id that is not that device's
    (another GPU, `all`, a comma list) hands out a GPU the ledger thinks free. A device of another
    node, one that vanished or one that turned unhealthy since the pod was placed cannot be used;
    as NVIDIA's device plugin refuses unknown ids and the kubelet never allocates an Unhealthy
    device, the call fails and with it the pod's admission, which the scheduler recovers from. All
    of the container's grants are checked: the answer's NVIDIA_VISIBLE_DEVICES names all of them."""
    for grant in dict.fromkeys((*allocation.grants, *allocation.container_grants)):
        known = local.get(grant.device)
        if known is None:
            raise AllocationError(
                f"{allocation.pod_key} container {allocation.container} was assigned device {grant.device}, which is "
                f"not a device of node {node_name} (another node's, or no longer discovered here): refusing to "
                f"hand out {grant.device_id}")
        device_id, unhealthy = known
        if grant.device_id != device_id:
            raise AllocationError(
                f"the {DEVICES} annotation of {allocation.pod_key} gives id {grant.device_id} for device {grant.device}, "
                f"but {grant.device} has device id {device_id}, not {grant.device_id}: refusing to hand out a GPU "
                "other than the one the scheduler assigned")
        if unhealthy is not None:
            raise AllocationError(
                f"device {grant.device} is unhealthy ({unhealthy}): refusing to hand {device_id} to "
                f"{allocation.pod_key}; the pod fails admission and its controller can replace it")


def pending_entries(pod: Mapping[str, Any], served: Container[ServedKey]) -> list[ServedKey]:
    """The pod's (container, resource) entries the kubelet still has to call Allocate for.

    Entries of containers that are not in the pod spec are ignored: the kubelet will never ask for
    them, and waiting for them would keep the pod `Allocating` (and the node's gate closed) forever.
    """
    uid, _, _, annotations = _meta(pod)
    raw = annotations.get(DEVICES)
    if raw is None:
        return []
    try:
        devices = decode_devices(raw)
    except AnnotationError:
        return []
    containers = set(container_order(pod))
    return [(uid, container, resource) for container, by_resource in devices.items() if container in containers
            for resource in by_resource if (uid, container, resource) not in served]


HeldGrants = Mapping[str, Mapping[str, tuple[Amount | None, ...]]]
"""resource name -> device name -> the amounts of the grants non-terminal pods hold of that device
under that resource (None for an exclusive grant)."""


def held_grants(pods: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, tuple[Amount | None, ...]]]:
    """What non-terminal pods were assigned, per resource name and device (see `HeldGrants`)."""
    held: dict[str, dict[str, tuple[Amount | None, ...]]] = {}
    for pod in pods:
        if in_terminal_phase(pod):
            continue
        raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(DEVICES)
        if raw is None:
            continue
        try:
            devices = decode_devices(raw)
        except AnnotationError:
            continue
        for by_resource in devices.values():
            for resource, grants in by_resource.items():
                by_device = held.setdefault(resource, {})
                for grant in grants:
                    by_device[grant.device] = (*by_device.get(grant.device, ()), grant.amount)
    return held


def held_names(held: HeldGrants) -> frozenset[str]:
    """Names of the devices (ExtendedResources) in `held`, under any resource name."""
    return frozenset(device for by_device in held.values() for device in by_device)


_ENV_UNSAFE = re.compile(r"[^A-Z0-9_]")


def container_env(allocation: Allocation, *, dimensions: Mapping[str, str] | None = None,
                  cdi: bool = False) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """(environment, container annotations, CDI device names) for one served container.

    `NVIDIA_VISIBLE_DEVICES` with UUIDs is what the NVIDIA container toolkit reads in its legacy
    and CSV modes; CDI names (`nvidia.com/gpu=<uuid>`) need `nvidia-ctk cdi generate
    --device-name-strategy=uuid` on the node, hence behind a flag. The TESSERA_* variables tell the
    workload (and a person debugging it) which ExtendedResources it got and, for shared classes,
    how big its slice is — the agent does not enforce that size; the application must honour it:
    `TESSERA_SHARED_<DIMENSION>` per sharing dimension, the container's slices of that dimension
    (the one each grant names: what the scheduler gave it, also if the class was edited since;
    for a grant that names none, its class's, `dimensions`: resource name -> `sharing.dimension`),
    all resources of the container in every answer, so the kubelet's pick among them changes nothing.
    """
    # the container's devices of every resource, so that whichever of its Allocate answers the
    # kubelet keeps (the first value of a key wins) names all of them; CDI names, which the kubelet
    # merges, stay this call's own
    ids = allocation.container_device_ids
    env = {
        "NVIDIA_VISIBLE_DEVICES": ",".join(ids),
        "TESSERA_DEVICES": ",".join(allocation.container_device_names),
        "TESSERA_POD": allocation.pod_key,
        "TESSERA_CONTAINER": allocation.container,
    }
    shared: dict[str, Fraction] = {}
    for resource, grants in allocation.container_resources or ((allocation.resource_name, allocation.grants),):
        of_class = (dimensions or {}).get(resource)
        for grant in grants:
            if grant.amount is not None and (dimension := grant.dimension or of_class):
                shared[dimension] = shared.get(dimension, Fraction(0)) + Fraction(grant.amount)
    for dimension, amount in sorted(shared.items()):
        env[f"TESSERA_SHARED_{_ENV_UNSAFE.sub('_', dimension.upper())}"] = format_quantity(amount)
    annotations = {"tessera.dev/devices": ",".join(ids)}
    cdi_names = [f"nvidia.com/gpu={device_id}" for device_id in allocation.device_ids] if cdi else []
    return env, annotations, cdi_names


class ServedLedger:
    """Answered Allocate calls, kept in memory and in a small JSON file: (pod uid, container,
    resource) -> the slot ids the kubelet gave that container.

    An entry lives as long as its pod is on the node and not terminal, which is as long as the
    kubelet keeps those slot ids allocated (devicemanager `UpdateAllocatedDevices` frees the
    devices of pods that are no longer active) and checkpoints them across its own restarts. It
    tells the agent, also after the agent restarts, which containers were served (a second call
    for one of them is someone else's) and which slots live pods hold (the last to advertise
    Unhealthy: the kubelet ties health to the slot id).
    """

    VERSION = 2  # 1: served keys without slot ids, still read

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._served: dict[ServedKey, tuple[str, ...]] = {}
        self._warned = False
        if path is not None:
            self._load(path)

    def __contains__(self, key: object) -> bool:
        return key in self._served

    def __len__(self) -> int:
        return len(self._served)

    def add(self, key: ServedKey, slots: Iterable[str] = ()) -> None:
        self._served[key] = tuple(slots)
        self._save()

    def pods(self) -> set[str]:
        return {uid for uid, _, _ in self._served}

    def slots_in_use(self, resource: str, live: Container[str]) -> frozenset[str]:
        """The slot ids of `resource` the kubelet gave to containers of the `live` pods."""
        return frozenset(slot for (uid, _, name), slots in self._served.items()
                         if name == resource and uid in live for slot in slots)

    def retain(self, uids: Container[str]) -> None:
        """Keep only the entries of these pods (those on the node and not terminal)."""
        self._drop([key for key in self._served if key[0] not in uids])

    def forget(self, uid: str) -> None:
        """The pod is gone or terminal: the kubelet has freed its slots."""
        self._drop([key for key in self._served if key[0] == uid])

    def _drop(self, keys: list[ServedKey]) -> None:
        if keys:
            for key in keys:
                del self._served[key]
            self._save()

    def _load(self, path: Path) -> None:
        try:
            doc = json.loads(path.read_text())
        except FileNotFoundError:
            return
        except (OSError, ValueError) as err:
            log.warning("ledger.unreadable", path=str(path), reason=str(err),
                        message="starting with no served containers")
            return
        if not isinstance(doc, dict) or doc.get("version") not in (1, self.VERSION) \
                or not isinstance(doc.get("served"), list):
            log.warning("ledger.unreadable", path=str(path), reason="unexpected content")
            return
        for entry in doc["served"]:
            if not isinstance(entry, list) or len(entry) not in (3, 4) or not all(isinstance(x, str) for x in entry[:3]):
                continue
            slots = entry[3] if len(entry) == 4 else []
            if isinstance(slots, list) and all(isinstance(x, str) for x in slots):
                self._served[(entry[0], entry[1], entry[2])] = tuple(slots)
        log.info("ledger.loaded", path=str(path), served=len(self._served))

    def _save(self) -> None:
        if self.path is None:
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        served = sorted([*key, list(slots)] for key, slots in self._served.items())
        try:
            tmp.write_text(json.dumps({"version": self.VERSION, "served": served}))
            os.replace(tmp, self.path)
        except OSError as err:
            if not self._warned:
                self._warned = True
                log.warning("ledger.not_saved", path=str(self.path), reason=str(err),
                            message="served containers are kept in memory only; if the agent restarts, "
                                    "two containers of one pod with equal requests can no longer be told "
                                    "apart, and which slots live pods hold falls back to slot order")
