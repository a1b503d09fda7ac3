"""Pods that run and finish: kwok plays the kubelet for Tessera's fake GPU nodes.

A control plane of its own (module scope): kube-controller-manager with the Job controller and
kwok with Tessera's Stages (scheduler/data/kwok-stages.yaml). The shared plane runs no workload
controllers (see TEST_CONTROLLERS) and no kwok, so its bound pods stay Pending for ever.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Awaitable, Iterator
from typing import Any

import pytest
import pytest_asyncio

from scheduler.api.config import load_config
from scheduler.kube.controlplane import ControlPlaneBinaries, LocalControlPlane
from scheduler.kube.http import KubeHttp, RateLimiter, connect
from scheduler.kube.loop import SchedulerLoop
from scheduler.sim import builders as b
from tests.e2e.live import Kube, eventually

COMPLETE_DELAY = "pod-complete.stage.kwok.x-k8s.io/delay"
CONTROLLERS = ("job-controller", "garbage-collector-controller", "namespace-controller")


@pytest.fixture(scope="module")
def kwok_plane(control_plane_binaries: ControlPlaneBinaries,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalControlPlane]:
    assert control_plane_binaries.kwok is not None, "kwok is built by hack/build-control-plane.sh"
    with LocalControlPlane(tmp_path_factory.mktemp("kwok-plane"), binaries=control_plane_binaries,
                           with_controller_manager=True, controllers=CONTROLLERS, with_kwok=True) as plane:
        yield plane


@pytest_asyncio.fixture
async def cluster(kwok_plane: LocalControlPlane) -> AsyncIterator[tuple[Kube, Callable[[int, int], Awaitable[list[str]]]]]:
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

    async def nodes(count: int, gpus: int) -> list[str]:
        return await asyncio.to_thread(kwok_plane.add_fake_gpu_nodes, count, gpus, "A100", prefix=f"kw{gpus}")

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


async def _namespace(kube: Kube, name: str) -> str:
    await kube.call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                   "metadata": {"name": name}})
    return name


async def _phase(kube: Kube, namespace: str, name: str) -> str:
    response = await kube.call("GET", f"/api/v1/namespaces/{namespace}/pods/{name}", ok=(200, 404))
    return "Gone" if response.status == 404 else str(response.json()["status"].get("phase"))


async def test_a_pod_runs_then_succeeds_after_the_delay_in_its_annotation(cluster: Any) -> None:
    kube, nodes = cluster
    (node,) = await nodes(1, 2)
    ns = await _namespace(kube, "kwok-complete")
    pod = b.pod("short", limits={"nvidia.com/gpu": 1}, annotations={COMPLETE_DELAY: "3s"})
    await kube.create_pod(ns, pod)
    running = await eventually(lambda: _if(_phase(kube, ns, "short"), "Running"), timeout=30)
    assert running
    seen = (await kube.pods(ns))["short"]
    assert seen["spec"]["nodeName"] == node and seen["status"]["podIP"]
    assert {c["type"]: c["status"] for c in seen["status"]["conditions"]}["Ready"] == "True"
    assert await eventually(lambda: _if(_phase(kube, ns, "short"), "Succeeded"), timeout=30)
    # a pod without the annotation and without a Job owner keeps running
    await kube.create_pod(ns, b.pod("server", limits={"nvidia.com/gpu": 1}))
    assert await eventually(lambda: _if(_phase(kube, ns, "server"), "Running"), timeout=30)
    await asyncio.sleep(3)
    assert await _phase(kube, ns, "server") == "Running"


async def test_a_job_runs_in_waves_on_tessera_nodes_and_completes(cluster: Any) -> None:
    """4 one-GPU pods, all created at once, on a node with 2 GPUs: the second wave can only be
    placed on the devices the first wave frees when its pods succeed."""
    kube, nodes = cluster
    (node,) = await nodes(1, 2)
    ns = await _namespace(kube, "kwok-job")
    template = b.pod("worker", limits={"nvidia.com/gpu": 1}, annotations={COMPLETE_DELAY: "2s"})
    spec = {key: value for key, value in template["spec"].items()}
    spec["restartPolicy"] = "Never"
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "waves"},
           "spec": {"completions": 4, "parallelism": 4, "backoffLimit": 0,
                    "template": {"metadata": {"annotations": {COMPLETE_DELAY: "2s"}}, "spec": spec}}}
    await kube.call("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", job)

    async def complete() -> Any:
        status = (await kube.call("GET", f"/apis/batch/v1/namespaces/{ns}/jobs/waves")).json()["status"]
        done = any(c["type"] == "Complete" and c["status"] == "True" for c in status.get("conditions", []))
        return status if done else None

    status = await eventually(complete, timeout=90, interval=0.5)
    assert status["succeeded"] == 4
    pods = await kube.pods(ns)
    assert len(pods) == 4 and {p["spec"]["nodeName"] for p in pods.values()} == {node}
    assert all(p["status"]["phase"] == "Succeeded" for p in pods.values())


async def test_a_bound_pod_that_is_deleted_goes_away_and_its_gpus_are_reused(cluster: Any) -> None:
    kube, nodes = cluster
    (node,) = await nodes(1, 1)
    ns = await _namespace(kube, "kwok-delete")
    await kube.create_pod(ns, b.pod("first", limits={"nvidia.com/gpu": 1}))
    assert await eventually(lambda: _if(_phase(kube, ns, "first"), "Running"), timeout=30)
    await kube.create_pod(ns, b.pod("second", limits={"nvidia.com/gpu": 1}))
    await asyncio.sleep(2)
    assert not (await kube.pods(ns))["second"]["spec"].get("nodeName")  # the node's only GPU is taken
    # an ordinary delete (30 s grace): kwok confirms it as a kubelet would, the pod disappears
    await kube.call("DELETE", f"/api/v1/namespaces/{ns}/pods/first")
    assert await eventually(lambda: _if(_phase(kube, ns, "first"), "Gone"), timeout=30)
    assert await eventually(lambda: _if(_phase(kube, ns, "second"), "Running"), timeout=30)
    assert (await kube.pods(ns))["second"]["spec"]["nodeName"] == node


async def _if(value: Awaitable[str], wanted: str) -> bool:
    return await value == wanted
