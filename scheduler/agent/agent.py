"""The node agent process: discovery → ExtendedResources, classes → endpoints, Allocate → pods.

Four loops share one event loop (so the pod cache Allocate reads is never half-updated), as tasks
of the task group `Agent.run()` opens, next to the informers and the device-plugin endpoints:

- devices: discover every few seconds (at most `heartbeat_seconds`, at least every 5 s) and
  publish on a change, and on every heartbeat anyway (`lastHeartbeatTime`); on API trouble retry
  with backoff. A failed discovery keeps the last good list: a flaky NVML call must not delete
  every device of the node;
- endpoints: whenever classes (watched cluster-wide) or local devices change, re-plan the
  device-plugin endpoints (`slots.plan_endpoints`) and start / update / stop them;
- pods: the pods on this node (watch with `fieldSelector=spec.nodeName=<node>`): which devices
  pods hold (endpoint health) and which pods are done allocating. Allocate itself reads the node's
  pods from the apiserver at every call: a watch can lag by a reconnect or a hung connection, and a
  lagging cache can name a pod that is gone (its GPUs given to the caller by the scheduler) as the
  one match;
- phase patches: pods whose device entries have all been served, or that have started, get
  `tessera.dev/phase: Allocated`, retried until it sticks or the pod is gone, so the scheduler's
  gate opens.

Nothing here ends the process except cancellation (SIGTERM): every loop logs and retries.
On shutdown the gRPC servers stop and their sockets are removed; ExtendedResources stay (the
devices are still there; a restarting agent picks them up, and the Node ownerReference cleans up
after a node that is gone).
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import structlog

from scheduler.agent.allocate import (
    Allocation,
    AllocationError,
    ServedLedger,
    check_local_devices,
    check_shared_capacity,
    container_env,
    find_allocation,
    held_grants,
    pending_entries,
)
from scheduler.agent.deviceplugin.v1beta1 import api_pb2
from scheduler.agent.devices import BackendError, DeviceBackend, DeviceInfo
from scheduler.agent.plugin import PluginManager
from scheduler.agent.publish import Publisher, device_view
from scheduler.agent.slots import EndpointPlan, plan_endpoints
from scheduler.api.quantity import Amount
from scheduler.core.annotations import PHASE, PHASE_ALLOCATED, PHASE_ALLOCATING
from scheduler.core.classes import ClassRegistry, ResourceClass, parse_resource_class
from scheduler.core.objects import Device, ObjectError, in_terminal_phase
from scheduler.kube.concurrency import Wakeup
from scheduler.kube.http import MERGE_PATCH, KubeHttp
from scheduler.kube.informers import PODS, RESOURCE_CLASSES, Informer
from scheduler.logs import describe_error

__all__ = ["Agent", "AgentOptions", "DEFAULT_RESOURCE_NAME", "STATE_FILE"]

log = structlog.get_logger("tessera.agent")

DEFAULT_RESOURCE_NAME = "nvidia.com/gpu"
STATE_FILE = "tessera-agent-state.json"
DISCOVERY_SECONDS_MAX = 5.0
BACKOFF_INITIAL = 0.5
PATCH_RETRY_SECONDS = 2.0
PATCH_BACKOFF_MAX = 60.0
LIST_RETRY_DELAYS = (0.0, 0.25, 1.0)  # Allocate's reads of the node's pods: tries, and the wait before each


@dataclass(frozen=True)
class AgentOptions:
    node_name: str
    device_plugin_dir: Path
    resource_name: str = DEFAULT_RESOURCE_NAME
    heartbeat_seconds: float = 30.0
    cdi: bool = False
    state_file: Path | None = None  # served-container ledger; None keeps it in memory only

    @property
    def discovery_seconds(self) -> float:
        return max(0.05, min(self.heartbeat_seconds, DISCOVERY_SECONDS_MAX))


class Agent:
    def __init__(self, options: AgentOptions, http: KubeHttp, watch_http: KubeHttp, backend: DeviceBackend) -> None:
        self.options = options
        self.node_name = options.node_name
        self.http = http
        self.backend = backend
        self.publisher = Publisher(http, options.node_name, options.resource_name)
        self.ledger = ServedLedger(options.state_file)
        self.plugins = PluginManager(options.device_plugin_dir, self._allocate)
        self.pod_informer = Informer(watch_http, PODS, self._on_pod, field_selector=f"spec.nodeName={options.node_name}")
        self.class_informer = Informer(watch_http, RESOURCE_CLASSES, self._on_class)
        self.devices: list[DeviceInfo] | None = None  # last good discovery
        self.views: list[Device] = []  # the devices as the scheduler parses them (for classes)
        self.classes: dict[str, ResourceClass] = {}
        self.pods: dict[str, dict[str, Any]] = {}  # uid -> pod
        self.plans: dict[str, EndpointPlan] = {}
        # devices assigned to non-terminal pods on this node, per resource name
        self.held: dict[str, dict[str, tuple[Amount | None, ...]]] = {}
        self._endpoints_dirty = Wakeup()
        self._patch_wake = Wakeup()
        self._to_patch: dict[str, tuple[str, str]] = {}  # uid -> (namespace, name)
        self._patch_backoff: dict[str, tuple[int, float]] = {}  # uid -> (failures, monotonic retry time)
        self._alloc_lock = anyio.Lock()
        self._last_discovery_error = ""
        self._stopped = False

    # --- lifecycle ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Run until cancelled; then stop the endpoints (sockets removed, ERs left in place)."""
        log.info("agent.starting", node=self.node_name, backend=self.backend.name,
                 device_plugin_dir=str(self.options.device_plugin_dir), resource_name=self.options.resource_name,
                 heartbeat_seconds=self.options.heartbeat_seconds)
        try:
            async with anyio.create_task_group() as group:
                await group.start(self.plugins.run, name="endpoints-host")
                group.start_soon(self.pod_informer.run, name="informer-pods")
                group.start_soon(self.class_informer.run, name="informer-classes")
                group.start_soon(self._forever, "devices", self._device_loop, name="devices")
                group.start_soon(self._forever, "endpoints", self._endpoint_loop, name="endpoints")
                group.start_soon(self._forever, "patches", self._patch_loop, name="patches")
        finally:
            with anyio.CancelScope(shield=True):  # cancelled is how it usually ends: clean up anyway
                await self.shutdown()

    async def shutdown(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        await self.plugins.stop()
        with contextlib.suppress(Exception):
            await anyio.to_thread.run_sync(self.backend.close)
        log.info("agent.stopped", node=self.node_name)

    async def _forever(self, name: str, loop: Callable[[], Awaitable[None]]) -> None:
        """A loop that raised is a bug, not a reason to stop serving the node's GPUs: log, restart."""
        failures = 0
        while True:
            try:
                await loop()
                return
            except Exception:
                failures += 1
                log.exception("agent.loop_failed", loop=name, restarts=failures)
                await anyio.sleep(min(30.0, BACKOFF_INITIAL * 2 ** min(failures, 6)))

    # --- devices -------------------------------------------------------------------------------

    async def discover(self) -> list[DeviceInfo] | None:
        try:
            devices = await anyio.to_thread.run_sync(self.backend.discover)
        except BackendError as err:
            message = str(err)
            if message != self._last_discovery_error:
                log.error("agent.discovery_failed", reason=message,
                          message="keeping the last discovered devices" if self.devices is not None else
                          "no devices known yet; nothing is published")
            self._last_discovery_error = message
            return None
        if self._last_discovery_error:
            log.info("agent.discovery_recovered")
            self._last_discovery_error = ""
        return devices

    def _set_devices(self, devices: list[DeviceInfo]) -> None:
        before = {d.uuid: d for d in self.devices or ()}
        after = {d.uuid: d for d in devices}
        for uuid in after.keys() - before.keys():
            log.info("agent.device_found", uuid=uuid, model=after[uuid].model, healthy=after[uuid].healthy)
        for uuid in before.keys() - after.keys():
            log.warning("agent.device_vanished", uuid=uuid, model=before[uuid].model)
        for uuid in before.keys() & after.keys():
            if before[uuid].healthy != after[uuid].healthy:
                log.warning("agent.device_health", uuid=uuid, healthy=after[uuid].healthy,
                            reason=after[uuid].health_reason, message=after[uuid].health_message)
        self.devices = devices
        self.views = [device_view(self.node_name, self.options.resource_name, d) for d in devices]
        self._endpoints_dirty.set()

    async def _device_loop(self) -> None:
        next_heartbeat = 0.0
        failures = 0
        while True:
            devices = await self.discover()
            dirty = False
            if devices is not None and devices != self.devices:
                self._set_devices(devices)
                dirty = True
            now = time.monotonic()
            if self.devices is not None and (dirty or now >= next_heartbeat):
                if await self.publisher.sync(self.devices):
                    failures = 0
                    next_heartbeat = now + self.options.heartbeat_seconds
                else:
                    failures += 1
                    next_heartbeat = now + min(self.options.heartbeat_seconds,
                                               BACKOFF_INITIAL * 2 ** min(failures, 8)) * random.uniform(0.5, 1.0)
            wait = max(0.0, min(self.options.discovery_seconds, next_heartbeat - time.monotonic()))
            await anyio.sleep(wait)

    # --- classes and endpoints -----------------------------------------------------------------

    def _on_class(self, event_type: str, obj: dict[str, Any]) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        if event_type == "DELETED":
            if self.classes.pop(name, None) is not None:
                self._endpoints_dirty.set()
            return
        try:
            cls = parse_resource_class(obj)
        except ObjectError as err:
            log.warning("agent.class_unreadable", resource_class=name, reason=str(err))
            if self.classes.pop(name, None) is not None:
                self._endpoints_dirty.set()
            return
        if self.classes.get(name) != cls:
            self.classes[name] = cls
            self._endpoints_dirty.set()

    async def _endpoint_loop(self) -> None:
        await self.class_informer.synced.wait()
        await self.pod_informer.synced.wait()  # which unhealthy devices pods still hold (`held`)
        while True:
            await self._endpoints_dirty.wait()
            if self.devices is None:
                continue
            planned = plan_endpoints(self.classes.values(), self.views, self.held)
            plans = {resource: dataclasses.replace(plan, in_use=self._slots_in_use(resource))
                     for resource, plan in planned.items()}
            if plans != self.plans:
                self.plans = plans
                log.info("agent.endpoints", node=self.node_name,
                         endpoints={r: f"{p.healthy}/{p.slots}" for r, p in sorted(plans.items())})
            await self.plugins.apply(plans)

    # --- pods and Allocate ---------------------------------------------------------------------

    def _on_pod(self, event_type: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        if not uid:
            return
        if event_type == "DELETED":
            seen = self.pods.pop(uid, None)
            self._to_patch.pop(uid, None)
            self.ledger.forget(uid)
            if not _terminating_gracefully(seen):
                _report_deleted_while_running(obj)
        else:
            self.pods[uid] = obj
            if in_terminal_phase(obj):
                self.ledger.forget(uid)
            self._check_complete(obj)
        held = held_grants(self.pods.values())
        if held != self.held:
            self.held = held
            self._endpoints_dirty.set()

    def _slots_in_use(self, resource: str) -> frozenset[str]:
        """The slot ids of `resource` that Allocate gave to pods still on the node, not terminal
        (from the ledger, so also after an agent restart)."""
        return self.ledger.slots_in_use(resource, {uid for uid, pod in self.pods.items() if not in_terminal_phase(pod)})

    def _check_complete(self, pod: Mapping[str, Any]) -> None:
        """Queue the `Allocated` patch for an Allocating pod all of whose entries were served
        (also after an agent restart, from the ledger), or that has started: the kubelet made every
        Allocate call for it before that, and a pod left `Allocating` (its patch lost with a ledger
        that did not survive a restart) would read as allocating for its whole life."""
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        if (meta.get("annotations") or {}).get(PHASE) != PHASE_ALLOCATING or uid in self._to_patch:
            return
        started = (pod.get("status") or {}).get("phase") in ("Running", "Succeeded")
        if started or (uid in self.ledger.pods() and not pending_entries(pod, self.ledger)):
            self._to_patch[uid] = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
            self._patch_wake.set()

    async def _node_pods(self) -> list[dict[str, Any]]:
        """This node's pods from the apiserver (a consistent read, newer than any watch event we
        have), tried `len(LIST_RETRY_DELAYS)` times; `AllocationError` when it cannot be read: the
        pod's admission fails, which the scheduler recovers from, where a guess could not be."""
        reason = ""
        for delay in LIST_RETRY_DELAYS:
            await anyio.sleep(delay)
            try:
                response = await self.http.request("GET", "/api/v1/pods", limited=False, timeout=10,
                                                   query=[("fieldSelector", f"spec.nodeName={self.node_name}")])
            except (aiohttp.ClientError, TimeoutError, OSError) as err:
                reason = describe_error(err)
                continue
            if response.ok:
                return list(response.json().get("items") or ())
            reason = f"HTTP {response.status}: {response.message()}"
        log.warning("agent.list_pods_failed", reason=reason, tries=len(LIST_RETRY_DELAYS))
        raise AllocationError(f"cannot read the pods of node {self.node_name} from the apiserver ({reason}); "
                              f"refusing to guess which pod this call is for")

    async def _allocate(self, plan: EndpointPlan, slot_ids: list[str]) -> api_pb2.ContainerAllocateResponse:
        async with self._alloc_lock:
            unit = plan.sharing.unit if plan.sharing is not None else None
            pods = await self._node_pods()
            # what the apiserver no longer has on the node, or has terminal, holds no slot any more
            self.ledger.retain({str((pod.get("metadata") or {}).get("uid") or "") for pod in pods if not in_terminal_phase(pod)})
            allocation = find_allocation(pods, self.node_name, plan.resource_name, len(slot_ids), unit, self.ledger)
            check_local_devices(allocation, self.node_name, self._local_devices())
            registry = ClassRegistry()
            for cls in self.classes.values():  # the core's rules: invalid classes and resourceName clashes drop out
                registry.upsert(cls, ())
            check_shared_capacity(pods, self.node_name, allocation, {view.device_id: view.capacity for view in self.views},
                                  registry.sharing_dimension)
            self.ledger.add(allocation.key, slot_ids)
            self._endpoints_dirty.set()  # which slots are in use changed
            pod = next((p for p in pods if (p.get("metadata") or {}).get("uid") == allocation.pod_uid), None)
            if pod is not None:
                self._check_complete(pod)
            return self._response(plan, allocation, slot_ids)

    def _local_devices(self) -> dict[str, tuple[str, str | None]]:
        """ExtendedResource name -> (device id, why it is unhealthy or None), from the last good
        discovery: what Allocate may hand out."""
        return {view.name: (view.device_id, None if info.healthy else (info.health_message or info.health_reason))
                for info, view in zip(self.devices or (), self.views, strict=True)}

    def _response(self, plan: EndpointPlan, allocation: Allocation, slot_ids: list[str]) -> api_pb2.ContainerAllocateResponse:
        dimensions = {other.resource_name: other.sharing.dimension
                      for other in (*self.plans.values(), plan) if other.sharing is not None}
        env, annotations, cdi = container_env(allocation, dimensions=dimensions, cdi=self.options.cdi)
        log.info("agent.allocated", pod=allocation.pod_key, container=allocation.container,
                 resource=allocation.resource_name, slots=slot_ids, devices=allocation.device_ids)
        return api_pb2.ContainerAllocateResponse(envs=env, annotations=annotations,
                                                 cdi_devices=[api_pb2.CDIDevice(name=n) for n in cdi])

    async def _patch_loop(self) -> None:
        while True:
            await self._patch_wake.wait(PATCH_RETRY_SECONDS)
            now = time.monotonic()
            for uid, (namespace, name) in list(self._to_patch.items()):
                failures, not_before = self._patch_backoff.get(uid, (0, 0.0))
                if now < not_before:
                    continue
                if await self._patch_allocated(uid, namespace, name):
                    self._to_patch.pop(uid, None)
                    self._patch_backoff.pop(uid, None)
                else:
                    delay = min(PATCH_BACKOFF_MAX, PATCH_RETRY_SECONDS * 2 ** min(failures, 8))
                    self._patch_backoff[uid] = (failures + 1, now + delay)
            for uid in [u for u in self._patch_backoff if u not in self._to_patch]:
                del self._patch_backoff[uid]

    async def _patch_allocated(self, uid: str, namespace: str, name: str) -> bool:
        """True when done (patched, or the pod is gone or replaced); False to retry later."""
        body = {"metadata": {"uid": uid, "annotations": {PHASE: PHASE_ALLOCATED}}}
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        try:
            response = await self.http.request("PATCH", path, body=body, content_type=MERGE_PATCH)
        except (aiohttp.ClientError, TimeoutError, OSError) as err:
            log.warning("agent.patch_failed", pod=f"{namespace}/{name}", reason=describe_error(err))
            return False
        if response.ok:
            log.info("agent.pod_allocated", pod=f"{namespace}/{name}", uid=uid)
            return True
        message = response.message()
        if response.status == 404 or (response.status == 422 and "metadata.uid" in message):
            # gone, or replaced by a new pod of the same name (its uid is immutable: 422)
            log.info("agent.patch_skipped", pod=f"{namespace}/{name}", status=response.status, reason=message)
            return True
        # e.g. 403/422 from an admission policy that does not exempt the agent: keep trying, loudly
        log.warning("agent.patch_failed", pod=f"{namespace}/{name}", status=response.status, reason=message)
        return False


def _terminating_gracefully(pod: Mapping[str, Any] | None) -> bool:
    """The pod, as last seen before its DELETED, was being deleted with a grace period: its object
    goes only once its containers stopped (the kubelet's status manager deletes it then), whatever
    the last container status said (kwok deletes without writing the containers' end). A force
    delete removes the object at once: no such version is seen."""
    meta = (pod or {}).get("metadata") or {}
    grace = meta.get("deletionGracePeriodSeconds")
    return bool(meta.get("deletionTimestamp")) and isinstance(grace, int) and grace > 0


def _report_deleted_while_running(pod: Mapping[str, Any]) -> None:
    """Warn when a pod holding devices was deleted while its last status showed a container
    running: a force delete (grace 0). The apiserver removed it at once, so the scheduler and the
    kubelet (its device manager frees the device ids of pods no longer active) count its GPUs free,
    while the kubelet still kills the containers (at least 2 s grace, longer if a process hangs):
    a new pod may get those GPUs meanwhile. The agent cannot see containers, only say so. A
    graceful delete ends with the containers stopped (the kubelet deletes the pod object only
    then): the caller does not ask about a pod it saw terminating gracefully."""
    status = pod.get("status") or {}
    running = any(isinstance(c, Mapping) and "running" in (c.get("state") or {})
                  for field in ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses")
                  for c in status.get(field) or ())
    if not running or in_terminal_phase(pod):
        return
    devices = sorted({device for by_device in held_grants([pod]).values() for device in by_device})
    if not devices:
        return
    meta = pod.get("metadata") or {}
    log.warning("agent.deleted_while_running", pod=f"{meta.get('namespace')}/{meta.get('name')}", devices=devices,
                message="the pod was deleted while a container of it ran (a force delete): its GPUs count as free "
                        "to the scheduler and the kubelet now, and may go to a new pod while its processes still run")
