"""Device-plugin endpoints against the fake kubelet, over real gRPC and unix sockets (no apiserver)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from fractions import Fraction
from pathlib import Path
from typing import Any

import anyio
import pytest
import pytest_asyncio
import structlog

from scheduler.agent import plugin
from scheduler.agent.allocate import AllocationError
from scheduler.agent.deviceplugin.v1beta1 import api_pb2
from tessera_testing.fakekubelet import AdmissionError, FakeKubelet
from scheduler.agent.plugin import Endpoint, PluginManager, preferred, socket_name
from scheduler.agent.slots import EndpointPlan
from scheduler.core.classes import Sharing


@pytest.fixture(autouse=True)
def _fast_supervision(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plugin, "SUPERVISE_SECONDS", 0.05)
    monkeypatch.setattr(plugin, "STOP_GRACE", 0.1)


@pytest.fixture
def plugin_dir() -> Iterator[Path]:
    # Short path: unix socket paths are limited to 107 bytes, pytest's tmp_path can be longer.
    path = Path(tempfile.mkdtemp(prefix="dp-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest_asyncio.fixture
async def kubelet(plugin_dir: Path) -> AsyncIterator[FakeKubelet]:
    fake = FakeKubelet(plugin_dir)
    await fake.start()
    yield fake
    await fake.stop()


@asynccontextmanager
async def served(endpoint: Endpoint) -> AsyncIterator[Endpoint]:
    """The endpoint running in a task group of the test's; stopped (and awaited) on the way out."""
    async with anyio.create_task_group() as group:
        await group.start(endpoint.run)
        try:
            yield endpoint
        finally:
            await endpoint.stop()


def _plan(name: str = "v100", slots: int = 2, healthy: int = 2, sharing: Sharing | None = None) -> EndpointPlan:
    return EndpointPlan(class_name=name, resource_name=f"class.tessera.dev/{name}", sharing=sharing,
                        devices=("n.gpu-a",), slots=slots, healthy=healthy)


class Calls:
    def __init__(self, refuse: bool = False) -> None:
        self.calls: list[tuple[str, list[str]]] = []
        self.refuse = refuse

    async def __call__(self, plan: EndpointPlan, ids: list[str]) -> api_pb2.ContainerAllocateResponse:
        self.calls.append((plan.resource_name, ids))
        if self.refuse:
            raise AllocationError("no pod on node n is waiting for 1 class.tessera.dev/v100")
        return api_pb2.ContainerAllocateResponse(envs={"NVIDIA_VISIBLE_DEVICES": "GPU-a"})


def _pod(uid: str, containers: list[tuple[str, dict[str, int]]],
         init: list[tuple[str, dict[str, int]]] | None = None) -> dict[str, Any]:
    def spec(name: str, limits: dict[str, int]) -> dict[str, Any]:
        return {"name": name, "resources": {"limits": {k: str(v) for k, v in limits.items()}}}
    return {"metadata": {"uid": uid, "name": uid, "namespace": "ns"},
            "spec": {"initContainers": [spec(*c) for c in init or []], "containers": [spec(*c) for c in containers]}}


def test_socket_names_are_short_and_safe() -> None:
    assert socket_name("class.tessera.dev/v100") == "tessera-class.tessera.dev_v100.sock"
    long = socket_name("class.tessera.dev/" + "x" * 60)
    assert len(long) <= 64 and long.endswith(".sock") and "/" not in long


def test_preferred_allocation_is_deterministic() -> None:
    available = ["c-10", "c-2", "c-1", "c-0"]
    assert preferred(available, [], 2) == ["c-0", "c-1"]
    assert preferred(available, ["c-10"], 2) == ["c-10", "c-0"]


async def test_registers_serves_options_and_list_and_watch(kubelet: FakeKubelet, plugin_dir: Path) -> None:
    calls = Calls()
    endpoint = Endpoint(plugin_dir, _plan(slots=3, healthy=2), calls)
    async with served(endpoint):
        await kubelet.wait_for(lambda: kubelet.status().get("class.tessera.dev/v100") == (3, 2))
        [registration] = kubelet.registrations
        assert registration.version == "v1beta1" and registration.preferred_allocation
        assert registration.endpoint == "tessera-class.tessera.dev_v100.sock"
        conn = kubelet.plugins["class.tessera.dev/v100"]
        assert conn.devices == {"v100-0": "Healthy", "v100-1": "Healthy", "v100-2": "Unhealthy"}
        assert conn.options.get_preferred_allocation_available and not conn.options.pre_start_required

        # a change is streamed (no re-registration needed)
        endpoint.update(_plan(slots=3, healthy=3))
        await kubelet.wait_for(lambda: kubelet.status()["class.tessera.dev/v100"] == (3, 3))
        assert len(kubelet.registrations) == 1

        responses = await kubelet.admit(_pod("p1", [("main", {"class.tessera.dev/v100": 2})]))
        assert responses["main"]["class.tessera.dev/v100"].envs["NVIDIA_VISIBLE_DEVICES"] == "GPU-a"
        assert calls.calls == [("class.tessera.dev/v100", ["v100-0", "v100-1"])]  # preferred: lowest slots
        with pytest.raises(AdmissionError, match="Requested: 2, Available: 1"):
            await kubelet.admit(_pod("p2", [("main", {"class.tessera.dev/v100": 2})]))
    assert not endpoint.socket_path.exists()
    await kubelet.wait_for(lambda: "class.tessera.dev/v100" not in kubelet.status())


async def test_allocation_error_is_failed_precondition(kubelet: FakeKubelet, plugin_dir: Path) -> None:
    endpoint = Endpoint(plugin_dir, _plan(), Calls(refuse=True))
    async with served(endpoint):
        await kubelet.wait_for(lambda: kubelet.status().get("class.tessera.dev/v100") == (2, 2))
        with pytest.raises(AdmissionError, match="FAILED_PRECONDITION: no pod on node n is waiting"):
            await kubelet.admit(_pod("p1", [("main", {"class.tessera.dev/v100": 1})]))


async def test_the_kubelet_is_told_what_the_refused_pod_may_read_and_the_log_names_every_pod(
        kubelet: FakeKubelet, plugin_dir: Path) -> None:
    """The kubelet makes a refusal the pod's UnexpectedAdmissionError Event and status message, read
    by its tenant: it gets `told`, which names no pod of another namespace; the agent's log line,
    read by operators, keeps every name."""
    async def refuse(plan: EndpointPlan, ids: list[str]) -> api_pb2.ContainerAllocateResponse:
        raise AllocationError("device GPU-2 is also assigned to team-b/holder",
                              told="device GPU-2 is also assigned to 1 pod in another namespace")

    endpoint = Endpoint(plugin_dir, _plan(), refuse)
    async with served(endpoint):
        await kubelet.wait_for(lambda: kubelet.status().get("class.tessera.dev/v100") == (2, 2))
        with structlog.testing.capture_logs() as logs, \
                pytest.raises(AdmissionError, match="FAILED_PRECONDITION: device GPU-2 is also assigned to 1 pod in "
                                                    "another namespace$"):
            await kubelet.admit(_pod("p1", [("main", {"class.tessera.dev/v100": 1})]))
    [refused] = [line for line in logs if line["event"] == "plugin.allocate_refused"]
    assert refused["reason"] == "device GPU-2 is also assigned to team-b/holder"


async def test_init_container_devices_are_reused_like_the_kubelet(kubelet: FakeKubelet, plugin_dir: Path) -> None:
    calls = Calls()
    endpoint = Endpoint(plugin_dir, _plan(slots=2, healthy=2), calls)
    async with served(endpoint):
        await kubelet.wait_for(lambda: kubelet.status().get("class.tessera.dev/v100") == (2, 2))
        pod = _pod("p1", [("main", {"class.tessera.dev/v100": 2})], init=[("setup", {"class.tessera.dev/v100": 1})])
        await kubelet.admit(pod)
        assert [len(ids) for _, ids in calls.calls] == [1, 2]
        assert calls.calls[0][1][0] in calls.calls[1][1]  # the init container's slot is reused


async def test_kubelet_restart_and_socket_removal_re_register(kubelet: FakeKubelet, plugin_dir: Path) -> None:
    endpoint = Endpoint(plugin_dir, _plan(), Calls())
    async with served(endpoint):
        await kubelet.wait_for(lambda: len(kubelet.registrations) == 1)
        await kubelet.restart()  # deletes our socket and re-creates kubelet.sock
        await kubelet.wait_for(lambda: len(kubelet.registrations) == 2 and "class.tessera.dev/v100" in kubelet.status())
        assert endpoint.socket_path.exists()
        endpoint.socket_path.unlink()  # someone removes the socket: serve again and re-register
        await kubelet.wait_for(lambda: len(kubelet.registrations) == 3 and "class.tessera.dev/v100" in kubelet.status())


async def test_waits_for_the_kubelet_and_registers_when_it_appears(plugin_dir: Path) -> None:
    endpoint = Endpoint(plugin_dir, _plan(), Calls())
    kubelet = FakeKubelet(plugin_dir)
    async with served(endpoint):
        assert not endpoint.registered
        try:
            # the kubelet's start-up cleanup would delete our socket: the endpoint must recover
            await kubelet.start()
            await kubelet.wait_for(lambda: "class.tessera.dev/v100" in kubelet.status())
        finally:
            await kubelet.stop()


async def test_manager_adds_updates_and_removes_endpoints(kubelet: FakeKubelet, plugin_dir: Path) -> None:
    manager = PluginManager(plugin_dir, Calls())
    async with anyio.create_task_group() as group:
        await group.start(manager.run)
        await manager.apply({"class.tessera.dev/a": _plan("a"), "class.tessera.dev/b": _plan("b", 8, 8, Sharing("memory", Fraction(2**30)))})
        await kubelet.wait_for(lambda: kubelet.status() == {"class.tessera.dev/a": (2, 2), "class.tessera.dev/b": (8, 8)})
        await manager.apply({"class.tessera.dev/b": _plan("b", 16, 8, Sharing("memory", Fraction(2**30)))})
        await kubelet.wait_for(lambda: kubelet.status() == {"class.tessera.dev/b": (16, 8)})
        assert sorted(p.name for p in plugin_dir.iterdir()) == ["kubelet.sock", "tessera-class.tessera.dev_b.sock"]
        await manager.stop()
        group.cancel_scope.cancel()
    assert sorted(p.name for p in plugin_dir.iterdir()) == ["kubelet.sock"]


async def test_cancelling_the_manager_stops_its_endpoints(kubelet: FakeKubelet, plugin_dir: Path) -> None:
    """However the agent ends (cancelled, or crashed), no endpoint is left serving."""
    manager = PluginManager(plugin_dir, Calls())
    async with anyio.create_task_group() as group:
        await group.start(manager.run)
        await manager.apply({"class.tessera.dev/a": _plan("a")})
        await kubelet.wait_for(lambda: kubelet.status() == {"class.tessera.dev/a": (2, 2)})
        group.cancel_scope.cancel()
    assert sorted(p.name for p in plugin_dir.iterdir()) == ["kubelet.sock"]
    await kubelet.wait_for(lambda: kubelet.status() == {})
