"""The kwok control plane and a Tessera loop on it, shared by the e2e files whose pods must run,
finish and be deleted for real (kwok plays the kubelet): one plane per session, its fake GPU nodes
removed after each test."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
import pytest_asyncio

from scheduler.api.config import load_config
from scheduler.kube.controlplane import ControlPlaneBinaries, LocalControlPlane
from scheduler.kube.http import KubeHttp, RateLimiter, connect
from scheduler.kube.loop import SchedulerLoop
from tests.e2e.live import Kube

COMPLETE_DELAY = "pod-complete.stage.kwok.x-k8s.io/delay"
CONTROLLERS = ("job-controller", "garbage-collector-controller", "namespace-controller", "disruption-controller")
Nodes = Callable[..., Awaitable[list[str]]]


@pytest.fixture(scope="session")
def kwok_plane(control_plane_binaries: ControlPlaneBinaries,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalControlPlane]:
    assert control_plane_binaries.kwok is not None, "kwok is built by hack/build-control-plane.sh"
    with LocalControlPlane(tmp_path_factory.mktemp("kwok-plane"), binaries=control_plane_binaries,
                           with_controller_manager=True, controllers=CONTROLLERS, with_kwok=True) as plane:
        yield plane


@pytest_asyncio.fixture
async def cluster(kwok_plane: LocalControlPlane) -> AsyncIterator[tuple[Kube, Nodes]]:
    """Tessera (built-in default configuration) running in this test's loop, a client, and a
    function that creates fake GPU nodes; every node is removed afterwards."""
    for node in kwok_plane.admin.get("/api/v1/nodes")["items"]:
        kwok_plane.admin.delete(f"/api/v1/nodes/{node['metadata']['name']}")
    cfg = load_config(None)
    api, watch_api = await connect(str(kwok_plane.kubeconfig)), await connect(str(kwok_plane.kubeconfig))
    loop = SchedulerLoop(cfg, KubeHttp(api, RateLimiter(100, 200)), KubeHttp(watch_api), identity="kwok-e2e")
    task = asyncio.create_task(loop.run())
    await asyncio.wait_for(loop.informers.wait_synced(), 30)
    kube = await Kube.connect(kwok_plane.kubeconfig)

    async def nodes(count: int, gpus: int, model: str = "A100", **options: Any) -> list[str]:
        return await asyncio.to_thread(kwok_plane.add_fake_gpu_nodes, count, gpus, model,
                                       prefix=f"kw{gpus}{model.lower()}", **options)

    try:
        yield kube, nodes
    finally:
        loop.stop()
        await loop.binder.drain(5)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await kube.close()
        await api.close()
        await watch_api.close()
        kwok_plane.remove_fake_gpu_nodes()


async def namespace_named(kube: Kube, name: str) -> str:
    await kube.call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                   "metadata": {"name": name}})
    return name


async def phase(kube: Kube, namespace: str, name: str) -> str:
    response = await kube.call("GET", f"/api/v1/namespaces/{namespace}/pods/{name}", ok=(200, 404))
    return "Gone" if response.status == 404 else str(response.json()["status"].get("phase"))


async def is_(value: Awaitable[str], wanted: str) -> bool:
    return await value == wanted
