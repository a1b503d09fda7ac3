"""The kubelet device-plugin API, v1beta1: one gRPC endpoint per served resource name.

Protocol, as the kubelet implements it (k8s.io/kubernetes pkg/kubelet/cm/devicemanager):

1. the plugin serves `DevicePlugin` on a unix socket in the device-plugin directory;
2. it calls `Registration.Register` on `<dir>/kubelet.sock` with its socket's file name, resource
   name and options. The kubelet answers only after it has dialled the plugin back and fetched
   `GetDevicePluginOptions`, so the server must already be running;
3. the kubelet keeps one `ListAndWatch` stream open and reads the advertised devices from it
   (capacity = all, allocatable = Healthy ones); every change is a new full list;
4. at pod admission, per container and resource: `GetPreferredAllocation` (if the options say it
   is available), then `Allocate` with the chosen ids; the response's envs, annotations and CDI
   devices go into the container.

A kubelet restart deletes every socket in the directory and re-creates `kubelet.sock`; the plugin
must then start over from 1 (NVIDIA's plugin watches the directory for the same reason). Each
endpoint here supervises itself: it notices its socket vanished or `kubelet.sock` was replaced,
restarts its server and registers again, with backoff while the kubelet is not there. An endpoint
is a task of the `PluginManager`'s task group, so none outlives the agent: however the agent ends,
every endpoint's streams end, its server stops and its socket is removed.

Why gRPC's asyncio API: the agent is one asyncio process (informers, publishing, Allocate all in
one loop), and Allocate must read the pod cache the informers fill, without locks across threads.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import grpc  # type: ignore[import-untyped]
import structlog
from anyio.abc import TaskStatus

from scheduler.agent.allocate import AllocationError
from scheduler.agent.deviceplugin.v1beta1 import api_pb2
from scheduler.agent.deviceplugin.v1beta1 import api_pb2_grpc as _api_pb2_grpc
from scheduler.agent.slots import EndpointPlan
from scheduler.kube.concurrency import TaskHost
from scheduler.logs import describe_error

__all__ = ["API_VERSION", "HEALTHY", "KUBELET_SOCKET", "UNHEALTHY", "Endpoint", "PluginManager",
           "socket_name"]

log = structlog.get_logger("tessera.agent.plugin")

api_grpc: Any = _api_pb2_grpc  # generated, untyped: used through Any on purpose

API_VERSION = "v1beta1"
HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"
KUBELET_SOCKET = "kubelet.sock"
MAX_SOCKET_PATH = 107  # sun_path is 108 bytes including the terminating NUL
SUPERVISE_SECONDS = 1.0
REGISTER_TIMEOUT = 30.0  # the kubelet dials back (up to 10 s) before it answers
BACKOFF_MAX = 30.0
STOP_GRACE = 1.0

AllocateFn = Callable[[EndpointPlan, list[str]], Awaitable[api_pb2.ContainerAllocateResponse]]


def socket_name(resource_name: str) -> str:
    """`tessera-<resource>.sock`, short enough for a unix socket path."""
    base = re.sub(r"[^A-Za-z0-9._-]", "_", resource_name)
    name = f"tessera-{base}.sock"
    if len(name) > 64:
        name = f"tessera-{base[:40]}-{hashlib.sha256(resource_name.encode()).hexdigest()[:8]}.sock"
    return name


def _identity(path: Path) -> tuple[int, int] | None:
    """Which file is at `path` (inode, mtime): a re-created kubelet.sock is a different one."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


def preferred(available: list[str], must_include: list[str], size: int) -> list[str]:
    """Must-include ids first, then the lowest-numbered available slots: slots are interchangeable
    (the devices come from the pod's annotation), so only determinism matters."""
    def index(slot: str) -> tuple[int, str]:
        head, _, tail = slot.rpartition("-")
        return (int(tail), head) if tail.isdigit() else (1 << 30, slot)

    chosen = list(dict.fromkeys(must_include))
    for slot in sorted(set(available) - set(chosen), key=index):
        if len(chosen) >= size:
            break
        chosen.append(slot)
    return chosen[:max(size, len(must_include))]


class Endpoint:
    """One resource name's DevicePlugin server, its socket and its registration with the kubelet.

    The servicer methods are called by gRPC by name (`add_DevicePluginServicer_to_server` only
    looks them up), hence the CamelCase methods on this class.
    """

    def __init__(self, plugin_dir: Path, plan: EndpointPlan, allocate: AllocateFn) -> None:
        self.plugin_dir = plugin_dir
        self.plan = plan
        self.allocate_fn = allocate
        self.socket_name = socket_name(plan.resource_name)
        self.socket_path = plugin_dir / self.socket_name
        self.kubelet_socket = plugin_dir / KUBELET_SOCKET
        self.registrations = 0
        self._server: Any = None
        self._registered_with: tuple[int, int] | None = None
        self._version = 0
        self._changed = anyio.Event()  # set (and replaced) on a new plan or on stopping: ListAndWatch
        self._stopping = False
        self._scope: anyio.CancelScope | None = None  # run()'s, while it runs
        self._ended = anyio.Event()  # run() has cleaned up
        self._failures = 0
        self._waiting_logged = False

    @property
    def registered(self) -> bool:
        return self._registered_with is not None

    # --- lifecycle -----------------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve, register and stay registered until `stop()` or cancellation.

        Start it with `await group.start(endpoint.run)`: that returns once the socket is served, or
        raises why it cannot be. On every way out the ListAndWatch streams end, the server stops and
        the socket is removed (the kubelet then marks the resource's devices unhealthy and drops
        them after its grace period)."""
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                if len(str(self.socket_path)) > MAX_SOCKET_PATH:
                    raise OSError(f"socket path {self.socket_path} is longer than {MAX_SOCKET_PATH} bytes")
                await self._start_server()
                task_status.started()
                await self._supervise()
        finally:
            self._stopping = True
            self._notify()
            with anyio.CancelScope(shield=True):
                try:
                    await self._stop_server()
                except Exception as err:  # noqa: BLE001 - stopping must not take the agent down
                    log.warning("plugin.stop_failed", resource=self.plan.resource_name, reason=_describe(err))
            self._ended.set()
            log.info("plugin.stopped", resource=self.plan.resource_name)

    async def stop(self) -> None:
        """End `run()` and wait until it has cleaned up."""
        self._stopping = True
        self._notify()
        if self._scope is not None:
            self._scope.cancel()
            await self._ended.wait()

    async def _start_server(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        server = grpc.aio.server()
        api_grpc.add_DevicePluginServicer_to_server(self, server)
        server.add_insecure_port(f"unix://{self.socket_path}")
        await server.start()
        self._server = server
        log.info("plugin.serving", resource=self.plan.resource_name, socket=str(self.socket_path),
                 slots=self.plan.slots, healthy=self.plan.healthy)

    async def _stop_server(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            await server.stop(STOP_GRACE)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()

    def update(self, plan: EndpointPlan) -> None:
        """New slot counts or health: every ListAndWatch stream sends the new list."""
        if plan == self.plan:
            return
        self.plan = plan
        self._version += 1
        self._notify()
        log.info("plugin.devices_changed", resource=plan.resource_name, slots=plan.slots, healthy=plan.healthy)

    def _notify(self) -> None:
        """Wake every ListAndWatch stream (a new plan, or stopping)."""
        self._changed.set()
        self._changed = anyio.Event()

    # --- supervision: registration and kubelet restarts -----------------------------------------

    async def _supervise(self) -> None:
        delay = 0.0
        while not self._stopping:
            await anyio.sleep(delay)
            delay = SUPERVISE_SECONDS
            try:
                kubelet = _identity(self.kubelet_socket)
                if self._server is None or not self.socket_path.exists():
                    if self._server is not None:
                        log.warning("plugin.socket_removed", resource=self.plan.resource_name,
                                    message="socket deleted (kubelet restart?); serving again")
                    await self._stop_server()
                    await self._start_server()
                    self._registered_with = None
                if kubelet is None:
                    if self._registered_with is not None or not self._waiting_logged:
                        log.warning("plugin.waiting_for_kubelet", resource=self.plan.resource_name,
                                    socket=str(self.kubelet_socket))
                        self._waiting_logged = True
                    self._registered_with = None
                    continue
                self._waiting_logged = False
                if self._registered_with == kubelet:
                    continue
                await self.register()
                self._registered_with = kubelet
                self._failures = 0
            except Exception as err:  # registration refused, kubelet not answering, bind failure
                self._failures += 1
                delay = min(BACKOFF_MAX, 0.5 * 2 ** min(self._failures, 8)) * random.uniform(0.5, 1.0)
                log.warning("plugin.register_failed", resource=self.plan.resource_name,
                            reason=_describe(err), retry_in=round(delay, 2))

    async def register(self) -> None:
        options = api_pb2.DevicePluginOptions(pre_start_required=False, get_preferred_allocation_available=True)
        request = api_pb2.RegisterRequest(version=API_VERSION, endpoint=self.socket_name,
                                          resource_name=self.plan.resource_name, options=options)
        async with grpc.aio.insecure_channel(f"unix://{self.kubelet_socket}") as channel:
            await api_grpc.RegistrationStub(channel).Register(request, timeout=REGISTER_TIMEOUT)
        self.registrations += 1
        log.info("plugin.registered", resource=self.plan.resource_name, endpoint=self.socket_name,
                 slots=self.plan.slots, healthy=self.plan.healthy)

    # --- DevicePlugin service ------------------------------------------------------------------

    def _devices(self) -> api_pb2.ListAndWatchResponse:
        plan = self.plan
        unhealthy = plan.unhealthy_slots()
        return api_pb2.ListAndWatchResponse(devices=[
            api_pb2.Device(ID=slot, health=UNHEALTHY if slot in unhealthy else HEALTHY) for slot in plan.slot_ids()])

    async def GetDevicePluginOptions(self, request: api_pb2.Empty, context: Any) -> api_pb2.DevicePluginOptions:
        return api_pb2.DevicePluginOptions(pre_start_required=False, get_preferred_allocation_available=True)

    async def ListAndWatch(self, request: api_pb2.Empty, context: Any) -> AsyncIterator[api_pb2.ListAndWatchResponse]:
        sent = -1
        while not self._stopping:
            if self._version == sent:
                await self._changed.wait()
                continue
            sent = self._version
            yield self._devices()

    async def GetPreferredAllocation(self, request: api_pb2.PreferredAllocationRequest,
                                     context: Any) -> api_pb2.PreferredAllocationResponse:
        return api_pb2.PreferredAllocationResponse(container_responses=[
            api_pb2.ContainerPreferredAllocationResponse(deviceIDs=preferred(
                list(req.available_deviceIDs), list(req.must_include_deviceIDs), int(req.allocation_size)))
            for req in request.container_requests])

    async def Allocate(self, request: api_pb2.AllocateRequest, context: Any) -> api_pb2.AllocateResponse:
        responses = []
        for container_request in request.container_requests:
            ids = list(container_request.devices_ids)
            try:
                responses.append(await self.allocate_fn(self.plan, ids))
            except AllocationError as err:
                # the kubelet makes it the refused pod's Event, read by its tenant (`told`); the log names every pod
                log.error("plugin.allocate_refused", resource=self.plan.resource_name, slots=ids, reason=str(err))
                await context.abort(grpc.StatusCode.FAILED_PRECONDITION, err.told)
            except Exception as err:
                log.exception("plugin.allocate_failed", resource=self.plan.resource_name, slots=ids)
                await context.abort(grpc.StatusCode.INTERNAL, f"tessera agent: {_describe(err)}")
        return api_pb2.AllocateResponse(container_responses=responses)

    async def PreStartContainer(self, request: api_pb2.PreStartContainerRequest,
                                context: Any) -> api_pb2.PreStartContainerResponse:
        return api_pb2.PreStartContainerResponse()


class PluginManager:
    """The set of endpoints, made to match the planned resource names; `run()` hosts them."""

    def __init__(self, plugin_dir: Path, allocate: AllocateFn) -> None:
        self.plugin_dir = plugin_dir
        self.allocate = allocate
        self.endpoints: dict[str, Endpoint] = {}
        self._host = TaskHost("PluginManager")

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Host the endpoints until cancelled; cancelling it stops every one of them.

        Start it with `await group.start(manager.run)`: `apply` works once that returns."""
        await self._host.run(task_status=task_status)

    async def apply(self, plans: dict[str, EndpointPlan]) -> None:
        group = self._host.group
        for resource in [r for r in self.endpoints if r not in plans]:
            endpoint = self.endpoints.pop(resource)
            log.info("plugin.endpoint_removed", resource=resource, resource_class=endpoint.plan.class_name,
                     message="no ResourceClass with this resourceName matches a local device any more")
            await endpoint.stop()
        for resource, plan in plans.items():
            current = self.endpoints.get(resource)
            if current is not None:
                current.update(plan)
                continue
            endpoint = Endpoint(self.plugin_dir, plan, self.allocate)
            try:
                await group.start(endpoint.run, name=f"endpoint-{resource}")
            except Exception as err:  # it cleaned up after itself; the next plan change tries again
                log.error("plugin.start_failed", resource=resource, reason=_describe(err))
                continue
            self.endpoints[resource] = endpoint
            log.info("plugin.endpoint_added", resource=resource, resource_class=plan.class_name,
                     devices=list(plan.devices), slots=plan.slots, healthy=plan.healthy)

    async def stop(self) -> None:
        """Stop every endpoint (all at once) and wait until they are gone."""
        endpoints, self.endpoints = list(self.endpoints.values()), {}
        async with anyio.create_task_group() as group:
            for endpoint in endpoints:
                group.start_soon(endpoint.stop)


def _describe(err: BaseException) -> str:
    if isinstance(err, grpc.aio.AioRpcError):
        return f"{err.code().name}: {err.details()}"
    return describe_error(err)


def socket_dir_ok(path: Path) -> str | None:
    """Why the device-plugin directory cannot be used, or None."""
    if not path.is_dir():
        return f"{path} is not a directory (mount the kubelet's device-plugin directory there)"
    if not os.access(path, os.W_OK):
        return f"{path} is not writable (the agent must create its sockets there)"
    return None
