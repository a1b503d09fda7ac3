"""Publishing devices: one ExtendedResource per device of this node (docs/design.md §2).

The object is what the scheduler knows about a device, so its content is decided here, in pure
functions, and the `Publisher` only reconciles the apiserver towards it:

- name `<node>.<sanitised device id>`: a DNS-1123 subdomain (lowercase; other characters become
  `-`). When sanitising loses information (two ids could collide) or the name would pass 253
  characters, a hash of the original id makes it unique again;
- label `tessera.dev/node=<node>`, so the agent lists exactly its own objects;
- an ownerReference to the Node, so deleting the node garbage-collects its devices (no
  `blockOwnerDeletion`: that needs rights on Node finalizers, which the agent does not have);
- `spec.unschedulable` is set to false on creation and never touched again: it is the admin's
  cordon, and an agent restart must not lift it;
- status (Healthy condition, phase, `lastHeartbeatTime`) goes through the status subresource on
  every heartbeat; `lastTransitionTime` only moves when the health changes.

Objects of devices that vanished are deleted (with a uid precondition, so an object re-created in
between is not hit), before the objects of new devices are created. A restart finds its objects
by name and updates them in place. The agent never deletes on a failed or partial discovery: the caller passes
the last good device list instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import aiohttp
import structlog

from scheduler.agent.devices import DeviceInfo, digest, name_part
from scheduler.api.node_owner import node_owner_reference
from scheduler.api.quantity import format_quantity
from scheduler.core.objects import Device, parse_device
from scheduler.kube.http import MERGE_PATCH, KubeHttp, Response
from scheduler.logs import describe_error
from scheduler.shortened import shortened

__all__ = [
    "API_VERSION",
    "EXTENDED_RESOURCES",
    "NODE_LABEL",
    "Publisher",
    "build_object",
    "build_status",
    "device_view",
    "er_name",
    "memory_quantity",
    "model_attribute",
    "now_rfc3339",
]

log = structlog.get_logger("tessera.agent.publish")

API_VERSION = "tessera.dev/v1alpha1"
EXTENDED_RESOURCES = "/apis/tessera.dev/v1alpha1/extendedresources"
NODE_LABEL = "tessera.dev/node"
_MAX_LABEL = 63  # a label value's longest (apimachinery IsValidLabelValue)
_MAX_NAME = 253
_MIB = 1024 * 1024


def er_name(node_name: str, device_id: str) -> str:
    """`<node>.<sanitised device id>`, a valid object name for any node name and device id."""
    name = f"{node_name}.{name_part(device_id)}"
    if len(name) > _MAX_NAME:
        suffix = digest(f"{node_name}/{device_id}")
        keep = _MAX_NAME - len(suffix) - 1
        name = f"{name[:keep].rstrip('.-')}-{suffix}"
    return name


def node_label_value(node_name: str) -> str:
    """The `tessera.dev/node` label value: the node name, or for a name longer than a label value
    may be (63; node names go to 253) its start and a digest of the whole name. The label only
    narrows the agent's LIST; `spec.nodeName` says whose device it is."""
    return shortened(node_name, _MAX_LABEL, strip=".-_")


def model_attribute(model: str) -> str:
    """The NVML name with whitespace as `-` (GPU Feature Discovery's convention: `Tesla-V100-SXM2-32GB`)."""
    return "-".join(model.split())


def memory_quantity(memory_bytes: int) -> str:
    """Memory as a Kubernetes quantity in whole MiB (`32Gi`, `32510Mi`), never `MiB` strings."""
    return format_quantity(Fraction(max(0, memory_bytes) // _MIB * _MIB))


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def build_attributes(device: DeviceInfo) -> dict[str, str]:
    attributes = {"model": model_attribute(device.model), "vendor": device.vendor, "uuid": device.uuid}
    if device.compute_capability is not None:
        attributes["computeCapability"] = device.compute_capability
    if device.numa_node is not None:
        attributes["numaNode"] = str(device.numa_node)
    if device.nvlink_group is not None:
        attributes["nvlinkGroup"] = device.nvlink_group
    if device.pci_bus_id is not None:
        attributes["pciBusID"] = device.pci_bus_id
    return attributes


def build_spec(node_name: str, resource_name: str, device: DeviceInfo) -> dict[str, Any]:
    return {
        "nodeName": node_name,
        "resourceName": resource_name,
        "deviceID": device.uuid,
        "attributes": build_attributes(device),
        "capacity": {"memory": memory_quantity(device.memory_bytes)},
        "unschedulable": False,
    }


def build_object(node_name: str, node_uid: str, resource_name: str, device: DeviceInfo) -> dict[str, Any]:
    """The ExtendedResource as created (no status: that goes through the status subresource)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ExtendedResource",
        "metadata": {
            "name": er_name(node_name, device.uuid),
            "labels": {NODE_LABEL: node_label_value(node_name)},
            "ownerReferences": [node_owner_reference(node_name, node_uid)],
        },
        "spec": build_spec(node_name, resource_name, device),
    }


def build_status(device: DeviceInfo, now: str, previous: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Healthy condition + phase + heartbeat; keeps `lastTransitionTime` while the health is unchanged."""
    status = "True" if device.healthy else "False"
    transition = now
    for cond in (previous or {}).get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == "Healthy" and cond.get("status") == status \
                and isinstance(cond.get("lastTransitionTime"), str):
            transition = cond["lastTransitionTime"]
    message = device.health_message or ("device is healthy" if device.healthy else "device is unhealthy")
    return {
        "phase": "Available" if device.healthy else "Unhealthy",
        "conditions": [{"type": "Healthy", "status": status, "reason": device.health_reason or "Unknown",
                        "message": message, "lastTransitionTime": transition}],
        "lastHeartbeatTime": now,
    }


def device_view(node_name: str, resource_name: str, device: DeviceInfo) -> Device:
    """The device as the scheduler core will parse it from our object (for class matching)."""
    obj = build_object(node_name, "", resource_name, device)
    obj["status"] = build_status(device, "1970-01-01T00:00:00Z")
    return parse_device(obj)


class PublishError(Exception):
    pass


class Publisher:
    """Reconciles this node's ExtendedResources towards the discovered devices."""

    def __init__(self, http: KubeHttp, node_name: str, resource_name: str) -> None:
        self.http = http
        self.node_name = node_name
        self.resource_name = resource_name
        self.node_uid: str | None = None

    async def _call(self, method: str, path: str, *, body: Any = None, content_type: str = "application/json",
                    query: Sequence[tuple[str, str]] = ()) -> Response:
        try:
            return await self.http.request(method, path, body=body, content_type=content_type, query=query)
        except (aiohttp.ClientError, TimeoutError, OSError) as err:
            raise PublishError(f"{method} {path}: {describe_error(err)}") from None

    async def fetch_node_uid(self) -> str | None:
        """The Node's uid (refreshed every sync: a re-created Node has a new one), None if absent."""
        response = await self._call("GET", f"/api/v1/nodes/{self.node_name}")
        if response.status == 404:
            return None
        if not response.ok:
            raise PublishError(f"GET node {self.node_name}: HTTP {response.status}: {response.message()}")
        uid = (response.json().get("metadata") or {}).get("uid")
        return str(uid) if uid else None

    async def list_objects(self) -> dict[str, dict[str, Any]]:
        response = await self._call("GET", EXTENDED_RESOURCES,
                                    query=[("labelSelector", f"{NODE_LABEL}={node_label_value(self.node_name)}")])
        if not response.ok:
            raise PublishError(f"LIST extendedresources: HTTP {response.status}: {response.message()}")
        return {item["metadata"]["name"]: item for item in response.json().get("items") or ()
                if (item.get("spec") or {}).get("nodeName") == self.node_name}

    async def sync(self, devices: Sequence[DeviceInfo], now: str | None = None) -> bool:
        """One reconcile pass; True when every write succeeded. Never raises for API trouble."""
        now = now or now_rfc3339()
        try:
            uid = await self.fetch_node_uid()
            if uid is None:
                log.warning("publish.node_missing", node=self.node_name,
                            message="the Node object does not exist; devices are published once it does")
                return False
            if uid != self.node_uid:
                log.info("publish.node", node=self.node_name, uid=uid)
                self.node_uid = uid
            existing = await self.list_objects()
        except PublishError as err:
            log.warning("publish.failed", node=self.node_name, reason=str(err))
            return False
        ok = True
        desired = {er_name(self.node_name, d.uuid): d for d in devices}
        # stale objects go first: created first, the node would describe old + new GPUs for a
        # moment (a spurious `DevicesBeyondAllocatable` Warning, and more devices than it has).
        # This cannot free a held GPU: a device still discovered keeps its object (same name,
        # updated in place), and one no longer discovered is deleted in either order.
        for name, obj in existing.items():
            if name in desired:
                continue
            try:
                await self._delete(name, obj)
            except PublishError as err:
                ok = False
                log.warning("publish.delete_failed", device=name, reason=str(err))
        for name, device in desired.items():
            try:
                await self._publish_one(name, device, existing.get(name), uid, now)
            except PublishError as err:
                ok = False
                log.warning("publish.device_failed", device=name, reason=str(err))
        return ok

    async def _publish_one(self, name: str, device: DeviceInfo, current: dict[str, Any] | None, node_uid: str,
                           now: str) -> None:
        desired = build_object(self.node_name, node_uid, self.resource_name, device)
        if current is None:
            response = await self._call("POST", EXTENDED_RESOURCES, body=desired)
            if response.status == 409:  # exists without our label (e.g. made by hand): adopt it
                response = await self._call("GET", f"{EXTENDED_RESOURCES}/{name}")
                if not response.ok:
                    raise PublishError(f"GET {name}: HTTP {response.status}: {response.message()}")
                current = response.json()
            elif not response.ok:
                raise PublishError(f"create {name}: HTTP {response.status}: {response.message()}")
            else:
                current = response.json()
                log.info("publish.created", device=name, model=desired["spec"]["attributes"]["model"],
                         uuid=device.uuid)
        assert current is not None
        updated = _merged(current, desired)
        if updated is not None:
            response = await self._call("PUT", f"{EXTENDED_RESOURCES}/{name}", body=updated)
            if not response.ok:  # 409: someone else wrote in between; the next pass retries
                raise PublishError(f"update {name}: HTTP {response.status}: {response.message()}")
            current = response.json()
            log.info("publish.updated", device=name)
        status = build_status(device, now, current.get("status"))
        response = await self._call("PATCH", f"{EXTENDED_RESOURCES}/{name}/status",
                                    body={"status": status}, content_type=MERGE_PATCH)
        if not response.ok:
            raise PublishError(f"status of {name}: HTTP {response.status}: {response.message()}")
        previous = _healthy(current.get("status"))
        if previous is not None and previous != status["conditions"][0]["status"]:
            log.warning("publish.health_changed", device=name, healthy=device.healthy,
                        reason=device.health_reason, message=device.health_message)

    async def _delete(self, name: str, obj: Mapping[str, Any]) -> None:
        uid = (obj.get("metadata") or {}).get("uid")
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}} if uid else None
        response = await self._call("DELETE", f"{EXTENDED_RESOURCES}/{name}", body=body)
        if response.ok or response.status in (404, 409):  # gone, or already replaced by a new object
            log.info("publish.deleted", device=name, reason="device no longer discovered on this node")
            return
        raise PublishError(f"delete {name}: HTTP {response.status}: {response.message()}")


def _healthy(status: object) -> str | None:
    if not isinstance(status, Mapping):
        return None
    for cond in status.get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == "Healthy":
            return str(cond.get("status"))
    return None


def _merged(current: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any] | None:
    """`current` with our spec, label and Node ownerReference, or None when it already has them.

    Other labels, annotations and owner references are kept (someone put them there on purpose),
    and so is `spec.unschedulable` (the admin's cordon)."""
    meta = dict(current.get("metadata") or {})
    spec = dict(desired["spec"])
    spec["unschedulable"] = bool((current.get("spec") or {}).get("unschedulable", False))
    labels = dict(meta.get("labels") or {})
    labels.update(desired["metadata"]["labels"])
    ours = desired["metadata"]["ownerReferences"][0]
    refs = [r for r in meta.get("ownerReferences") or () if not (isinstance(r, Mapping) and r.get("kind") == "Node")]
    refs.append(ours)
    if spec == current.get("spec") and labels == meta.get("labels") and _same_refs(refs, meta.get("ownerReferences")):
        return None
    meta["labels"] = labels
    meta["ownerReferences"] = refs
    out = {k: v for k, v in current.items() if k != "status"}
    out["metadata"] = meta
    out["spec"] = spec
    return out


def _same_refs(a: Sequence[Any], b: object) -> bool:
    if not isinstance(b, list) or len(a) != len(b):
        return False

    def key(ref: Any) -> tuple[str, ...]:
        return tuple(str(ref.get(k, "")) for k in ("apiVersion", "kind", "name", "uid")) if isinstance(ref, Mapping) else ("",)

    return sorted(map(key, a)) == sorted(map(key, b))
