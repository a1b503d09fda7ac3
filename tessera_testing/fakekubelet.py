"""A stand-in for the kubelet's device manager, speaking the real device-plugin gRPC protocol.

Tests (and demos without a node) need the other side of the device-plugin API. This plays it the
way k8s.io/kubernetes pkg/kubelet/cm/devicemanager does, as far as a plugin can observe:

- `Registration.Register` on `<dir>/kubelet.sock` checks the version and the resource name, dials
  the plugin's socket back, fetches `GetDevicePluginOptions` and only then answers; a second
  registration of a resource replaces the first connection;
- one `ListAndWatch` stream per resource; capacity = advertised devices, allocatable = Healthy;
- `admit(pod)` is pod admission: for init containers then app containers, for each resource of
  the container's limits that a plugin serves: pick free healthy device ids (devices of finished
  non-restartable init containers of the same pod are reused first, as the kubelet does), ask
  `GetPreferredAllocation` when the plugin offers it, then call `Allocate` with those ids;
- start-up deletes every socket in the directory (`CleanupPluginDirectory`), so `restart()`
  behaves like a kubelet restart.

What it does not do: containers, cgroups, the checkpoint file, topology hints, PreStartContainer.
"""

from __future__ import annotations

import asyncio
import contextlib
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]

from scheduler.agent.deviceplugin.v1beta1 import api_pb2
from scheduler.agent.deviceplugin.v1beta1 import api_pb2_grpc as _api_pb2_grpc
from scheduler.agent.plugin import API_VERSION, HEALTHY, KUBELET_SOCKET
from scheduler.core.classes import validate_resource_name

__all__ = ["AdmissionError", "FakeKubelet", "PluginConnection", "Registration"]

api_grpc: Any = _api_pb2_grpc


class AdmissionError(Exception):
    """The pod would be rejected at admission (the kubelet's UnexpectedAdmissionError)."""


@dataclass(frozen=True)
class Registration:
    resource_name: str
    endpoint: str
    version: str
    preferred_allocation: bool


@dataclass
class PluginConnection:
    resource_name: str
    endpoint: str
    channel: Any
    stub: Any
    options: api_pb2.DevicePluginOptions
    devices: dict[str, str] = field(default_factory=dict)  # id -> health
    updates: int = 0  # ListAndWatch responses received
    stream: asyncio.Task[None] | None = None
    ended: bool = False

    @property
    def capacity(self) -> int:
        return len(self.devices)

    @property
    def allocatable(self) -> int:
        return sum(1 for health in self.devices.values() if health == HEALTHY)


class FakeKubelet:
    def __init__(self, plugin_dir: Path) -> None:
        self.plugin_dir = plugin_dir
        self.socket = plugin_dir / KUBELET_SOCKET
        self.registrations: list[Registration] = []
        self.plugins: dict[str, PluginConnection] = {}
        self.allocations: dict[str, dict[str, dict[str, list[str]]]] = {}  # pod uid -> container -> resource -> ids
        self.responses: dict[str, dict[str, dict[str, api_pb2.ContainerAllocateResponse]]] = {}
        self._server: Any = None
        self._changed = asyncio.Condition()

    # --- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        self.plugin_dir.mkdir(parents=True, exist_ok=True)
        for path in self.plugin_dir.iterdir():  # CleanupPluginDirectory: sockets only
            with contextlib.suppress(OSError):
                if stat.S_ISSOCK(path.lstat().st_mode):
                    path.unlink()
        server = grpc.aio.server()
        api_grpc.add_RegistrationServicer_to_server(self, server)
        server.add_insecure_port(f"unix://{self.socket}")
        await server.start()
        self._server = server

    async def stop(self) -> None:
        for conn in list(self.plugins.values()):
            await self._disconnect(conn)
        self.plugins.clear()
        if self._server is not None:
            await self._server.stop(0)
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()

    async def restart(self) -> None:
        """Like a kubelet restart: connections dropped, sockets deleted, kubelet.sock re-created."""
        await self.stop()
        await self.start()

    async def _disconnect(self, conn: PluginConnection) -> None:
        if conn.stream is not None:
            conn.stream.cancel()
            await asyncio.gather(conn.stream, return_exceptions=True)
        await conn.channel.close()

    # --- Registration service ------------------------------------------------------------------

    async def Register(self, request: api_pb2.RegisterRequest, context: Any) -> api_pb2.Empty:
        if request.version != API_VERSION:
            await context.abort(grpc.StatusCode.UNKNOWN,
                                f"requested device plugin version {request.version} is not supported")
        if validate_resource_name(request.resource_name) is not None:
            await context.abort(grpc.StatusCode.UNKNOWN, f"invalid resource name {request.resource_name}")
        channel = grpc.aio.insecure_channel(f"unix://{self.plugin_dir / request.endpoint}")
        try:
            await asyncio.wait_for(channel.channel_ready(), 10)
            stub = api_grpc.DevicePluginStub(channel)
            options = await stub.GetDevicePluginOptions(api_pb2.Empty(), timeout=10)
        except Exception as err:
            await channel.close()
            await context.abort(grpc.StatusCode.UNKNOWN, f"failed to dial device plugin: {err}")
        old = self.plugins.pop(request.resource_name, None)
        if old is not None:
            await self._disconnect(old)
        conn = PluginConnection(request.resource_name, request.endpoint, channel, stub, options)
        conn.stream = asyncio.create_task(self._list_and_watch(conn))
        self.plugins[request.resource_name] = conn
        self.registrations.append(Registration(request.resource_name, request.endpoint, request.version,
                                              request.options.get_preferred_allocation_available))
        await self._notify()
        return api_pb2.Empty()

    async def _list_and_watch(self, conn: PluginConnection) -> None:
        try:
            async for response in conn.stub.ListAndWatch(api_pb2.Empty()):
                conn.devices = {d.ID: d.health for d in response.devices}
                conn.updates += 1
                await self._notify()
        except grpc.aio.AioRpcError:
            pass
        finally:
            conn.ended = True
            await self._notify()

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def wait_for(self, predicate: Callable[[], Any], timeout: float = 20.0) -> Any:
        """Wait until `predicate()` is truthy (re-checked on every registration and device update)."""
        async def wait() -> Any:
            async with self._changed:
                while not (result := predicate()):
                    await self._changed.wait()
                return result
        try:
            return await asyncio.wait_for(wait(), timeout)
        except TimeoutError:
            raise AssertionError(f"fake kubelet: condition not met within {timeout}s; "
                                 f"plugins={self.status()}, registrations={len(self.registrations)}") from None

    def status(self) -> dict[str, tuple[int, int]]:
        """resource -> (capacity, allocatable), as the kubelet would put it in the Node status."""
        return {name: (conn.capacity, conn.allocatable) for name, conn in self.plugins.items() if not conn.ended}

    # --- pod admission -------------------------------------------------------------------------

    def _in_use(self, resource: str) -> set[str]:
        return {device for by_container in self.allocations.values() for by_resource in by_container.values()
                for device in by_resource.get(resource, ())}

    async def admit(self, pod: Mapping[str, Any]) -> dict[str, dict[str, api_pb2.ContainerAllocateResponse]]:
        """Allocate devices for every container of `pod`; `AdmissionError` when the kubelet would refuse."""
        uid = str(pod["metadata"]["uid"])
        spec = pod.get("spec") or {}
        reusable: dict[str, list[str]] = {}
        for is_init, container in [(True, c) for c in spec.get("initContainers") or ()] + \
                                  [(False, c) for c in spec.get("containers") or ()]:
            limits = ((container.get("resources") or {}).get("limits") or {})
            for resource in sorted(limits):
                conn = self.plugins.get(resource)
                if conn is None or conn.ended:
                    continue
                needed = int(limits[resource])
                ids = await self._choose(conn, uid, needed, reusable.get(resource, []))
                try:
                    response = await conn.stub.Allocate(api_pb2.AllocateRequest(
                        container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=ids)]), timeout=30)
                except grpc.aio.AioRpcError as err:
                    self.allocations.pop(uid, None)
                    raise AdmissionError(f"Allocate failed for {container['name']}/{resource}: "
                                         f"{err.code().name}: {err.details()}") from None
                if len(response.container_responses) != 1:
                    raise AdmissionError(f"no containers return in allocation response {response}")
                self.allocations.setdefault(uid, {}).setdefault(container["name"], {})[resource] = ids
                self.responses.setdefault(uid, {}).setdefault(container["name"], {})[resource] = \
                    response.container_responses[0]
                if is_init and container.get("restartPolicy") != "Always":  # upstream: Union (pod_devices.go)
                    reusable[resource] = list(dict.fromkeys([*reusable.get(resource, []), *ids]))
                else:
                    reusable[resource] = [i for i in reusable.get(resource, []) if i not in ids]
        return self.responses.get(uid, {})

    async def _choose(self, conn: PluginConnection, uid: str, needed: int, reuse: list[str]) -> list[str]:
        taken = self._in_use(conn.resource_name) - set(reuse)
        chosen = reuse[:needed]
        free = [d for d, health in conn.devices.items() if health == HEALTHY and d not in taken and d not in chosen]
        if len(chosen) + len(free) < needed:
            self.allocations.pop(uid, None)
            raise AdmissionError(f"requested number of devices unavailable for {conn.resource_name}. "
                                 f"Requested: {needed}, Available: {len(chosen) + len(free)}")
        if len(chosen) == needed:
            return chosen
        if conn.options.get_preferred_allocation_available:
            response = await conn.stub.GetPreferredAllocation(api_pb2.PreferredAllocationRequest(container_requests=[
                api_pb2.ContainerPreferredAllocationRequest(available_deviceIDs=free + chosen,
                                                            must_include_deviceIDs=chosen,
                                                            allocation_size=needed)]), timeout=10)
            preferred = list(response.container_responses[0].deviceIDs)
            if len(preferred) == needed and set(preferred) <= set(free) | set(chosen):
                return preferred
        return chosen + free[:needed - len(chosen)]

    def release(self, uid: str) -> None:
        """The pod ended: its devices are free again."""
        self.allocations.pop(uid, None)
        self.responses.pop(uid, None)
