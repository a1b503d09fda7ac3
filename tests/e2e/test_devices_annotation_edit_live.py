"""An edit of a bound pod's `tessera.dev/devices` on the real apiserver moves no hold (a new
user's dev-cluster trial: `kubectl annotate --overwrite` swapped the GPU a pod's annotation named,
and the next pod was given the GPU the first one's container still used, silently)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from scheduler.api.config import load_config
from scheduler.core import annotations as ann
from scheduler.core.scheduler import Scheduler
from scheduler.kube.http import KubeHttp, connect
from scheduler.kube.loop import SchedulerLoop
from scheduler.kube.snapshot import list_cluster
from scheduler.sim.snapshot import load
from scheduler.view import model as m
from scheduler.view.cluster import build_view
from scheduler.sim import builders as b
from tests.e2e.live import FakeAgent, Kube, eventually

NODES = "/api/v1/nodes"
ERS = "/apis/tessera.dev/v1alpha1/extendedresources"
CLASSES = "/apis/tessera.dev/v1alpha1/resourceclasses"
CLASS = "class.tessera.dev/edit-v100"


async def _pod(kubectl: Kube, namespace: str, name: str) -> dict[str, Any]:
    return (await kubectl.call("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")).json()  # type: ignore[no-any-return]


async def _allocated(kubectl: Kube, namespace: str, name: str) -> dict[str, Any]:
    """The pod once it is bound and the agent's `Allocated` phase write is in."""
    async def allocated() -> dict[str, Any] | None:
        pod = await _pod(kubectl, namespace, name)
        annotations = pod["metadata"].get("annotations") or {}
        return pod if annotations.get(ann.PHASE) == ann.PHASE_ALLOCATED else None

    return await eventually(allocated)  # type: ignore[no-any-return]


async def _two_gpu_node(kubectl: Kube, name: str) -> list[dict[str, Any]]:
    """A Ready node with two V100 ExtendedResources and the class `edit-v100` selecting them; its devices."""
    node = b.node(name, gpus=2)
    await kubectl.create(NODES, node)
    await kubectl.call("PATCH", f"{NODES}/{name}/status", {"status": node["status"]},
                       content_type="application/merge-patch+json")
    devices = [b.device(name, i) for i in range(2)]
    for device in devices:
        await kubectl.create(ERS, device)
    await kubectl.create(CLASSES, b.resource_class("edit-v100", match_labels={"model": "V100"}))
    return devices


async def _name_the_other_gpu(kubectl: Kube, namespace: str, pod: dict[str, Any],
                              devices: list[dict[str, Any]]) -> dict[str, Any]:
    """Rewrite the bound pod's devices annotation to name the GPU it was not given, as `kubectl
    annotate --overwrite` by system:masters does (the policy exempts it; dev-cluster has none).
    Returns that GPU's ExtendedResource."""
    doc = orjson.loads(pod["metadata"]["annotations"][ann.DEVICES])
    [grant] = doc["containers"]["main"][CLASS]
    other = next(d for d in devices if d["metadata"]["name"] != grant["device"])
    grant.update(device=other["metadata"]["name"], id=other["spec"]["deviceID"])
    await kubectl.call("PATCH", f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}",
                       {"metadata": {"annotations": {ann.DEVICES: orjson.dumps(doc).decode()}}},
                       content_type="application/merge-patch+json")
    return other


async def _events(kubectl: Kube, namespace: str, pod: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in await kubectl.events(namespace) if e["regarding"]["name"] == pod and e["reason"] == reason]


async def test_an_edited_devices_annotation_keeps_both_gpus_held_and_warns(
        tessera: Any, kubectl: Kube, namespace: str) -> None:
    await tessera("config/binpack.yaml")
    devices = await _two_gpu_node(kubectl, "edit-1")
    async with FakeAgent(kubectl, namespace) as agent:
        await kubectl.create_pod(namespace, b.pod("longv", limits={CLASS: 1}))

        pod = await _allocated(kubectl, namespace, "longv")

        async def agent_allocated() -> bool:  # its PATCH shows before the agent has read its reply
            return "longv" in agent.allocated

        await eventually(agent_allocated, timeout=5.0)
        other = await _name_the_other_gpu(kubectl, namespace, pod, devices)
        [warning] = await eventually(lambda: _events(kubectl, namespace, "longv", "DevicesAnnotationChanged"))
        assert warning["type"] == "Warning"
        given = next(d["metadata"]["name"] for d in devices if d is not other)
        assert f"it named {given}; it now names {other['metadata']['name']}" in warning["note"]

        await kubectl.create_pod(namespace, b.pod("thief", limits={CLASS: 1}))
        await eventually(lambda: _events(kubectl, namespace, "thief", "FailedScheduling"))
        assert not (await _pod(kubectl, namespace, "thief"))["spec"].get("nodeName")  # neither GPU is free

        await kubectl.call("DELETE", f"/api/v1/namespaces/{namespace}/pods/longv?gracePeriodSeconds=0")

        async def thief_bound() -> str:
            return str((await _pod(kubectl, namespace, "thief"))["spec"].get("nodeName", ""))

        assert await eventually(thief_bound) == "edit-1"  # both released with their holder
        # the Binding and the agent's Allocated were no edit: one warning, for the one edit
        assert len(await _events(kubectl, namespace, "longv", "DevicesAnnotationChanged")) == 1


async def test_the_union_is_recorded_on_the_pod_and_survives_a_restart(
        tessera: Any, kubectl: Kube, namespace: str) -> None:
    """The trial's second half: after the edit, a restarted scheduler listed the original GPU free
    and bound `steal` to it, and `kubectl tessera nodes` showed it free. The scheduler now writes
    the union into `tessera.dev/held-devices` (through pods/status: the apiserver keeps the
    annotation), and a fresh core built from a listing — what `kubectl tessera nodes` and a
    restarted scheduler build — holds both GPUs."""
    first = await tessera("config/binpack.yaml")
    devices = await _two_gpu_node(kubectl, "held-1")
    names = sorted(d["metadata"]["name"] for d in devices)
    async with FakeAgent(kubectl, namespace):
        await kubectl.create_pod(namespace, b.pod("cls1", limits={CLASS: 1}))

        pod = await _allocated(kubectl, namespace, "cls1")
        await _name_the_other_gpu(kubectl, namespace, pod, devices)

        async def recorded() -> list[str] | None:
            annotations = (await _pod(kubectl, namespace, "cls1"))["metadata"].get("annotations") or {}
            raw = annotations.get(ann.HELD_DEVICES)
            if raw is None:
                return None
            held = sorted(g.device for by in ann.decode_devices(raw).values() for gs in by.values() for g in gs)
            return held if held == names else None  # the Binding wrote the first GPU alone; then the union

        assert await eventually(recorded) == names

        # `kubectl tessera nodes`' model: a fresh core from a listing of the real cluster
        listing = await list_cluster(kubectl.http)
        core = Scheduler(load_config("config/binpack.yaml"))
        load(core, listing.objects, time.time())
        [view] = [n for n in build_view(core, source="cluster", now=time.time()).nodes if n.name == "held-1"]
        assert {gpu.device: gpu.state for gpu in view.gpus} == dict.fromkeys(names, m.WHOLE)

        first.stop()  # the restart: the first scheduler starts no more cycles, a second one lists
        await tessera("config/binpack.yaml")
        await kubectl.create_pod(namespace, b.pod("steal", limits={CLASS: 1}))
        await eventually(lambda: _events(kubectl, namespace, "steal", "FailedScheduling"))
        assert not (await _pod(kubectl, namespace, "steal"))["spec"].get("nodeName")  # neither GPU is free


async def _scheduler(control_plane: Any) -> tuple[SchedulerLoop, Callable[[], Awaitable[None]]]:
    """Tessera's live loop in this event loop, and a way to end it for good (informers and
    writers too: `stop()` ends only its cycles, and a loop still watching would see the edit)."""
    api, watch_api = await connect(str(control_plane.kubeconfig)), await connect(str(control_plane.kubeconfig))
    loop = SchedulerLoop(load_config("config/binpack.yaml"), KubeHttp(api), KubeHttp(watch_api), identity="e2e")
    task = asyncio.create_task(loop.run())
    await asyncio.wait_for(loop.informers.wait_synced(), 30)

    async def end() -> None:
        loop.stop()
        await loop.binder.drain(5)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await api.close()
        await watch_api.close()

    return loop, end


async def test_an_edit_while_no_scheduler_runs_is_held_by_the_next_one(
        clean_cluster: Any, kubectl: Kube, namespace: str) -> None:
    """The edit happens while no Tessera runs: the next scheduler used to read only the edited
    annotation and give the GPU the container really uses to `steal`. The Binding records what it
    gave in `tessera.dev/held-devices` (the apiserver copies a Binding's annotations onto the
    pod), so the next scheduler holds both, warns, and records the union."""
    _, end = await _scheduler(clean_cluster)
    devices = await _two_gpu_node(kubectl, "unwatched-1")
    names = sorted(d["metadata"]["name"] for d in devices)
    try:
        async with FakeAgent(kubectl, namespace):
            await kubectl.create_pod(namespace, b.pod("cls1", limits={CLASS: 1}))

            pod = await _allocated(kubectl, namespace, "cls1")
            annotations = pod["metadata"]["annotations"]
            assert annotations.get(ann.HELD_DEVICES) == annotations[ann.DEVICES]  # from the Binding itself
            await end()  # no scheduler runs from here
            await _name_the_other_gpu(kubectl, namespace, pod, devices)
            _, end = await _scheduler(clean_cluster)
            [warning] = await eventually(lambda: _events(kubectl, namespace, "cls1", "DevicesAnnotationChanged"))
            assert "while no scheduler watched" in warning["note"]

            async def recorded() -> list[str] | None:
                raw = ((await _pod(kubectl, namespace, "cls1"))["metadata"].get("annotations") or {})[ann.HELD_DEVICES]
                held = sorted(g.device for by in ann.decode_devices(raw).values() for gs in by.values() for g in gs)
                return held if held == names else None

            assert await eventually(recorded) == names
            await kubectl.create_pod(namespace, b.pod("steal", limits={CLASS: 1}))
            await eventually(lambda: _events(kubectl, namespace, "steal", "FailedScheduling"))
            assert not (await _pod(kubectl, namespace, "steal"))["spec"].get("nodeName")  # neither GPU is free
    finally:
        await end()


async def test_a_held_gpus_resource_name_edited_while_no_scheduler_runs_keeps_its_count(
        clean_cluster: Any, kubectl: Kube, namespace: str) -> None:
    """The adversarial trial's V2 on the real apiserver: a held GPU's ExtendedResource edited to
    another resourceName, then the scheduler restarted, and the new one counted the GPU under the
    new name: a plain `nvidia.com/gpu` pod got the GPU the holder still has (5 on a 4-GPU node).
    The Binding records the name each device was granted under, so the next scheduler counts it
    there, and warns on the object."""
    _, end = await _scheduler(clean_cluster)
    await _two_gpu_node(kubectl, "renamed-1")
    try:
        async with FakeAgent(kubectl, namespace):
            await kubectl.create_pod(namespace, b.pod("holder", limits={CLASS: 1}))

            async def allocated() -> dict[str, Any] | None:
                pod = await _pod(kubectl, namespace, "holder")
                annotations = pod["metadata"].get("annotations") or {}
                return pod if annotations.get(ann.PHASE) == ann.PHASE_ALLOCATED else None

            pod = await eventually(allocated)
            [[[grant]]] = [list(by.values()) for by in ann.decode_devices(pod["metadata"]["annotations"][ann.DEVICES]).values()]
            assert grant.resource_name == "nvidia.com/gpu"
            await end()  # no scheduler runs from here
            await kubectl.call("PATCH", f"{ERS}/{grant.device}", {"spec": {"resourceName": "example.com/other"}},
                               content_type="application/merge-patch+json")
            _, end = await _scheduler(clean_cluster)
            on_node = {"nodeSelector": {"kubernetes.io/hostname": "renamed-1"}}
            await kubectl.create_pod(namespace, b.pod("two", limits={"nvidia.com/gpu": 2}, spec_extra=on_node))
            await eventually(lambda: _events(kubectl, namespace, "two", "FailedScheduling"))  # bound before the fix
            [warning] = await eventually(lambda: _events(kubectl, "default", grant.device, "ResourceNameChangedWhileHeld"))
            assert "it counts as nvidia.com/gpu on node renamed-1, given to no other pod, until released" in warning["note"]
            await kubectl.create_pod(namespace, b.pod("one", limits={"nvidia.com/gpu": 1}, spec_extra=on_node))

            async def one_bound() -> str:
                return str((await _pod(kubectl, namespace, "one"))["spec"].get("nodeName", ""))

            assert await eventually(one_bound) == "renamed-1"  # the other GPU is free
            assert not (await _pod(kubectl, namespace, "two"))["spec"].get("nodeName")
    finally:
        await end()
