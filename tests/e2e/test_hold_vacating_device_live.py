"""A plain-count preemptor's hold keeps the victims' replacement slices off the GPUs victims still
share while they terminate (real apiserver).

The trial's storm: a priority-1000 pod asking `nvidia.com/gpu` preempted slice pods of a sharing
class; the recreated slices joined GPUs a victim still terminated on, the preemptor found every
GPU in use again and preempted again (109 evictions for one pod). Here: a two-GPU node with two
slice victims on each GPU. No kubelet runs, so an evicted pod stays terminating (its
deletionTimestamp set) until the test deletes it for good; one victim per GPU is removed first,
the replacements arrive while the other one still terminates there. They must wait, the
preemptor must get both GPUs once the victims are gone, and nobody is evicted twice.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

from scheduler.api.config import load_config
from scheduler.core import annotations as ann
from scheduler.kube.controlplane import LocalControlPlane
from scheduler.kube.http import KubeHttp, connect
from scheduler.kube.loop import SchedulerLoop
from scheduler.sim import builders as b
from tests.e2e.live import Kube, eventually
from tests.e2e.test_binding_fence_live import _bound, _node_and_priority, _stop_then_remove

ERS = "/apis/tessera.dev/v1alpha1/extendedresources"
CLASSES = "/apis/tessera.dev/v1alpha1/resourceclasses"


async def _force_delete(kubectl: Kube, namespace: str, name: str) -> None:
    await kubectl.call("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}?gracePeriodSeconds=0", ok=(200, 404))


def _device_of(pod: dict[str, Any]) -> str:
    """The one device the pod's `tessera.dev/devices` grants, read by the product's decoder."""
    containers = ann.decode_devices(pod["metadata"]["annotations"][ann.DEVICES])
    [grant] = [grant for by_resource in containers.values() for grants in by_resource.values() for grant in grants]
    return grant.device


async def test_replacement_slices_wait_for_the_preemptor_and_nobody_is_evicted_twice(
        control_plane: LocalControlPlane, kubectl: Kube, namespace: str) -> None:
    suffix = secrets.token_hex(3)
    node, high = await _node_and_priority(kubectl, f"storm-{suffix}", gpus=2)
    devices = [b.device(node, i, model="T4", memory="16Gi") for i in range(2)]
    cls = f"storm-{suffix}"
    shared = f"class.tessera.dev/{cls}"
    pinned = {"nodeSelector": {"kubernetes.io/hostname": node}}
    api, watch = await connect(str(control_plane.kubeconfig)), await connect(str(control_plane.kubeconfig))
    loop = SchedulerLoop(load_config("config/binpack.yaml"), KubeHttp(api), KubeHttp(watch),
                         identity=f"storm-{suffix}")
    task = asyncio.create_task(loop.run())
    try:
        for device in devices:
            await kubectl.create(ERS, device)
        await kubectl.create(CLASSES, b.resource_class(cls, match_labels={"model": "T4"},
                                                       sharing={"dimension": "memory", "unit": "1Gi"}))
        await asyncio.wait_for(loop.informers.wait_synced(), 30)
        old = [f"old-{n}" for n in range(4)]
        for name in old:
            await kubectl.create_pod(namespace, b.pod(name, limits={shared: 8}, spec_extra=pinned))
        await eventually(lambda: _all_bound(kubectl, namespace, old), timeout=30)
        await kubectl.create_pod(namespace, b.pod("hi", limits={"nvidia.com/gpu": 2},
                                                  spec_extra={**pinned, "priorityClassName": high}))

        async def terminating() -> dict[str, dict[str, Any]] | None:
            pods = await kubectl.pods(namespace)
            if all(pods[name]["metadata"].get("deletionTimestamp") for name in old) \
                    and pods["hi"]["status"].get("nominatedNodeName") == node:
                return pods
            return None

        pods = await eventually(terminating, timeout=30)
        by_device: dict[str, list[str]] = {}
        for name in old:
            by_device.setdefault(_device_of(pods[name]), []).append(name)
        assert sorted(len(names) for names in by_device.values()) == [2, 2], by_device
        for names in by_device.values():
            await _force_delete(kubectl, namespace, names[0])  # one victim per GPU is gone
        new = [f"new-{n}" for n in range(4)]
        for name in new:  # the Deployment's replacements, priority 0
            await kubectl.create_pod(namespace, b.pod(name, limits={shared: 8}, spec_extra=pinned))

        async def all_decided() -> bool:  # refused (FailedScheduling) or bound, each of them
            decided = {e["regarding"]["name"] for e in await kubectl.events(namespace)
                       if e["reason"] == "FailedScheduling"} | set(await _bound(kubectl, namespace))
            return all(name in decided for name in new)

        await eventually(all_decided, timeout=30)
        await asyncio.sleep(2)  # a wrong placement would be bound by now
        # before the fix: each joined a GPU a victim still terminated on, which the hold waited for
        bound = await _bound(kubectl, namespace)
        assert not set(bound) & set(new), f"replacements took the GPUs held for hi: {bound}"
        for names in by_device.values():
            await _force_delete(kubectl, namespace, names[1])
        await eventually(lambda: _all_bound(kubectl, namespace, ["hi"]), timeout=30)
        bound = await _bound(kubectl, namespace)
        assert bound == {"hi": node}, bound
        preempted = [e["regarding"]["name"] for e in await kubectl.events(namespace) if e["reason"] == "Preempted"]
        assert sorted(preempted) == old, preempted
    finally:
        await _stop_then_remove((loop,), (task,), (api, watch), kubectl, namespace, node, high)
        for device in devices:
            await kubectl.call("DELETE", f"{ERS}/{device['metadata']['name']}", ok=(200, 404))
        await kubectl.call("DELETE", f"{CLASSES}/{cls}", ok=(200, 404))


async def _all_bound(kubectl: Kube, namespace: str, names: list[str]) -> bool:
    bound = await _bound(kubectl, namespace)
    return all(name in bound for name in names)
