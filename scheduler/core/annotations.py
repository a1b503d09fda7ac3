"""The `tessera.dev/*` pod annotations: the device ledger's single source of truth.

Assignments travel in `Binding.metadata.annotations`, which the apiserver applies atomically with
`spec.nodeName`. On restart the ledger is rebuilt by decoding them from every bound pod, so the
decoder is strict: anything it cannot read exactly is an error, and the caller fails closed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import orjson

from scheduler.api.quantity import Amount, QuantityError, exact, format_quantity, parse_quantity

DEVICES = "tessera.dev/devices"
# every device the pod was given while bound, in DEVICES's format: written by the Binding (the
# same value as DEVICES) and again by the scheduler when DEVICES is edited on a bound pod (the
# union), so a restarted scheduler, a standby and the kubectl plugin hold them all until the pod
# ends (the containers keep what they were given)
HELD_DEVICES = "tessera.dev/held-devices"
PHASE = "tessera.dev/phase"
ASSUME_TIME = "tessera.dev/assume-time"
# `<leaseNamespace>/<leaseName>/<holderIdentity>/<leaseTransitions>/<acquireTime>` of the leadership
# term that last wrote the pod (scheduler/kube/term_token.py): written by a new leader onto each
# unbound pod so that no Binding an earlier leader sent can land, and by each Binding; read back
# by the live shell only (a newer term of its Lease; another install's Lease)
TERM = "tessera.dev/term"
PHASE_ALLOCATING = "Allocating"
PHASE_ALLOCATED = "Allocated"
VERSION = 1
_MAX_LENGTH = 256 * 1024


class AnnotationError(ValueError):
    """A `tessera.dev/devices` value that is not a valid assignment."""


@dataclass(frozen=True, slots=True)
class DeviceGrant:
    device_id: str  # ExtendedResource spec.deviceID: what the node agent hands to the runtime
    device: str  # ExtendedResource name: what the ledger charges
    amount: Amount | None  # shared slice of the class's sharing dimension; None = exclusive
    # the capacity of the device a slice is of (the class's `sharing.dimension` when it was
    # granted): what the ledger charges it against, also once the class is edited to another
    # dimension. "" for a whole device, or a slice written before the field existed (its class's
    # dimension as it is now counts then)
    dimension: str = ""
    # the device's ExtendedResource spec.resourceName when it was granted: the node count it is
    # charged under while held, also once its object names another one and across restarts (the
    # pod is the only record that outlives the scheduler). "" in entries written before the field
    # existed: the object's resourceName as it is when first read counts then
    resource_name: str = ""


# container name -> resource name -> grants
DeviceAssignment = Mapping[str, Mapping[str, tuple[DeviceGrant, ...]]]


def encode_devices(assignment: DeviceAssignment) -> str:
    containers: dict[str, dict[str, list[dict[str, str]]]] = {}
    for container, by_resource in assignment.items():
        containers[container] = {}
        for resource, grants in by_resource.items():
            entries = []
            for grant in grants:
                entry = {"id": grant.device_id, "device": grant.device}
                if grant.resource_name:
                    entry["resourceName"] = grant.resource_name
                if grant.amount is not None:
                    entry["amount"] = format_quantity(grant.amount)
                    if grant.dimension:
                        entry["dimension"] = grant.dimension
                entries.append(entry)
            containers[container][resource] = entries
    return orjson.dumps({"version": VERSION, "containers": containers}, option=orjson.OPT_SORT_KEYS).decode()


def decode_devices(raw: str) -> dict[str, dict[str, tuple[DeviceGrant, ...]]]:
    if len(raw) > _MAX_LENGTH:
        raise AnnotationError("value is too long")
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as err:
        raise AnnotationError(f"not valid JSON: {err}") from None
    if not isinstance(doc, dict):
        raise AnnotationError("must be a JSON object")
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version != VERSION:
        raise AnnotationError(f"unsupported version {doc.get('version')!r} (want {VERSION})")
    containers = doc.get("containers")
    if not isinstance(containers, dict):
        raise AnnotationError("containers: must be an object")
    out: dict[str, dict[str, tuple[DeviceGrant, ...]]] = {}
    for container, by_resource in containers.items():
        if not isinstance(by_resource, dict):
            raise AnnotationError(f"containers.{container}: must be an object")
        out[container] = {}
        for resource, entries in by_resource.items():
            if not isinstance(entries, list) or not entries:
                raise AnnotationError(f"containers.{container}.{resource}: must be a non-empty list")
            grants = []
            for i, entry in enumerate(entries):
                where = f"containers.{container}.{resource}[{i}]"
                if not isinstance(entry, dict):
                    raise AnnotationError(f"{where}: must be an object")
                device_id, device = entry.get("id"), entry.get("device")
                if not isinstance(device_id, str) or not device_id or not isinstance(device, str) or not device:
                    raise AnnotationError(f"{where}: id and device must be non-empty strings")
                amount: Amount | None = None
                if "amount" in entry:
                    try:
                        amount = exact(parse_quantity(entry["amount"]))
                    except QuantityError as err:
                        raise AnnotationError(f"{where}.amount: {err}") from None
                    if amount <= 0:
                        raise AnnotationError(f"{where}.amount: must be positive")
                dimension = entry.get("dimension", "")
                if "dimension" in entry and (not isinstance(dimension, str) or not dimension or amount is None):
                    raise AnnotationError(f"{where}.dimension: must be a non-empty string, beside an amount")
                resource_name = entry.get("resourceName", "")
                if "resourceName" in entry and (not isinstance(resource_name, str) or not resource_name):
                    raise AnnotationError(f"{where}.resourceName: must be a non-empty string")
                grants.append(DeviceGrant(device_id, device, amount, dimension, resource_name))
            out[container][resource] = tuple(grants)
    return out


def merge_devices(*assignments: DeviceAssignment | None) -> dict[str, dict[str, tuple[DeviceGrant, ...]]]:
    """Every grant any of the assignments names, per container and resource name: a device named
    whole anywhere is whole, a slice at the largest amount named for it. What HELD_DEVICES says
    after an edit: the union of what the pod held and what it names now (a grant keeps the
    resourceName of the earliest version that records one: what it was granted under)."""
    merged: dict[str, dict[str, dict[tuple[str, str, str], DeviceGrant]]] = {}
    for assignment in assignments:
        for container, by_resource in (assignment or {}).items():
            for resource, grants in by_resource.items():
                entries = merged.setdefault(container, {}).setdefault(resource, {})
                for grant in grants:
                    key = (grant.device_id, grant.device, grant.dimension if grant.amount is not None else "")
                    known = entries.get(key)
                    if known is None:
                        entries[key] = grant
                        continue
                    wins = known.amount is not None and (grant.amount is None or grant.amount > known.amount)
                    chosen = grant if wins else known
                    # the name it was granted under: the earliest version's that records one
                    named = known.resource_name or grant.resource_name
                    entries[key] = replace(chosen, resource_name=named)
    return {container: {resource: tuple(entries.values()) for resource, entries in by_resource.items()}
            for container, by_resource in merged.items()}
