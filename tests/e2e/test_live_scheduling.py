"""Tessera's live loop on the real kube-apiserver: the issue's "done when" scenarios."""

from __future__ import annotations

import asyncio
import collections
from typing import Any

import orjson

from examples.generate import fragmentation, tfjob_demo
from scheduler.core import annotations as ann
from scheduler.sim import builders as b
from tests.e2e.live import FakeAgent, Kube, bound_nodes, eventually

NODES = "/api/v1/nodes"
ERS = "/apis/tessera.dev/v1alpha1/extendedresources"
CLASSES = "/apis/tessera.dev/v1alpha1/resourceclasses"


async def _create_nodes(kubectl: Kube, control_plane: Any, nodes: list[dict[str, Any]]) -> None:
    for node in nodes:
        await kubectl.create(NODES, node)
        name = node["metadata"]["name"]
        await kubectl.call("PATCH", f"{NODES}/{name}/status", {"status": node["status"]},
                           content_type="application/merge-patch+json")


async def _replay_objects(kubectl: Kube, control_plane: Any, namespace: str, events: list[dict[str, Any]]) -> None:
    """Create the objects of an example event stream in order (nodes first, as the stream has them)."""
    for event in events:
        obj = event["object"]
        if obj["kind"] == "Node":
            await _create_nodes(kubectl, control_plane, [obj])
        elif obj["kind"] == "Pod":
            await kubectl.create_pod(namespace, obj)


async def test_tfjob_demo_binpacks_workers_and_binds_the_gang(tessera: Any, kubectl: Kube, namespace: str) -> None:
    await tessera("config/binpack.yaml")
    await _replay_objects(kubectl, None, namespace, tfjob_demo())
    placed = await eventually(lambda: _all_bound(kubectl, namespace, 5))
    workers = [placed[f"tf-smoke-gpu-worker-{i}"] for i in range(4)]
    assert len(set(workers)) == 1
    note = f"Successfully assigned {namespace}/tf-smoke-gpu-ps-0 to {placed['tf-smoke-gpu-ps-0']}"

    async def scheduled_events() -> list[dict[str, Any]] | None:  # Events are written asynchronously
        scheduled = [e for e in await kubectl.events(namespace) if e["reason"] == "Scheduled"]
        return scheduled if any(e["note"] == note for e in scheduled) else None

    scheduled = await eventually(scheduled_events)
    assert all(e["reportingController"] == "tessera" for e in scheduled)


async def test_fragmentation_binpack_binds_the_two_gpu_pod(tessera: Any, kubectl: Kube, namespace: str) -> None:
    await tessera("config/binpack.yaml")
    await _replay_objects(kubectl, None, namespace, fragmentation())
    await eventually(lambda: _all_bound(kubectl, namespace, 7))


async def test_fragmentation_spread_refuses_with_upstream_message(tessera: Any, kubectl: Kube, namespace: str) -> None:
    await tessera("config/spread.yaml")
    await _replay_objects(kubectl, None, namespace, fragmentation())
    message = ("0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
               " preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.")

    async def refused() -> bool:
        pod = (await kubectl.pods(namespace))["two-gpu"]
        conditions = {c["type"]: c for c in pod["status"].get("conditions", [])}
        cond = conditions.get("PodScheduled")
        return bool(cond and cond["status"] == "False" and cond["reason"] == "Unschedulable" and cond["message"] == message)

    await eventually(refused)
    events = await eventually(lambda: _events_for(kubectl, namespace, "two-gpu", "FailedScheduling"))
    assert events[0]["note"] == message and events[0]["type"] == "Warning"
    nodes = await bound_nodes(kubectl, namespace)
    assert collections.Counter(n for p, n in nodes.items() if p != "two-gpu").most_common() in ([("gpu-node-1", 3), ("gpu-node-2", 3)], [("gpu-node-2", 3), ("gpu-node-1", 3)])


async def test_gang_that_does_not_fit_binds_nothing_until_a_node_is_added(tessera: Any, kubectl: Kube, namespace: str) -> None:
    await tessera("config/binpack.yaml")
    await _create_nodes(kubectl, None, [b.node("g1", gpus=4), b.node("g2", gpus=4)])
    for i in range(3):
        await kubectl.create_pod(namespace, b.pod(f"big-{i}", labels=b.gang_labels("big", 3), limits={"nvidia.com/gpu": 4}))
    await eventually(lambda: _events_for(kubectl, namespace, "big-2", "FailedScheduling"))
    assert set((await bound_nodes(kubectl, namespace)).values()) == {""}
    await _create_nodes(kubectl, None, [b.node("g3", gpus=4)])
    placed = await eventually(lambda: _all_bound(kubectl, namespace, 3))
    assert sorted(placed.values()) == ["g1", "g2", "g3"]


async def test_device_classes_and_memory_sharing_live(tessera: Any, kubectl: Kube, namespace: str) -> None:
    await tessera("config/binpack.yaml")
    await _create_nodes(kubectl, None, [b.node("dev-a", gpus=2), b.node("dev-b", gpus=2)])
    for device in (b.device("dev-a", 0, model="K80", memory="12Gi"), b.device("dev-a", 1, model="P100", memory="16Gi"),
                   b.device("dev-b", 0, model="V100", memory="16Gi"), b.device("dev-b", 1, model="V100", memory="32Gi")):
        await kubectl.create(ERS, device)
    await kubectl.create(CLASSES, b.resource_class("k80", match_labels={"model": "K80"}))
    await kubectl.create(CLASSES, b.resource_class("big", expressions=[{"key": "memory", "operator": "Gt", "values": ["16Gi"]}]))
    await kubectl.create(CLASSES, b.resource_class("p100-slice", match_labels={"model": "P100"},
                                                   sharing={"dimension": "memory", "unit": "1Gi"}))
    async with FakeAgent(kubectl, namespace, allocate=False) as agent:
        await kubectl.create_pod(namespace, b.pod("k80", limits={"class.tessera.dev/k80": 1}))
        await kubectl.create_pod(namespace, b.pod("big", limits={"class.tessera.dev/big": 1}))
        await kubectl.create_pod(namespace, b.pod("s1", limits={"class.tessera.dev/p100-slice": 8}))
        await kubectl.create_pod(namespace, b.pod("s2", limits={"class.tessera.dev/p100-slice": 8}))
        await eventually(lambda: _bound_count(kubectl, namespace, 3))
        await asyncio.sleep(1.0)
        # s1 and s2 share a resource name on dev-a: the second waits for the node agent (allocation gate)
        nodes = await bound_nodes(kubectl, namespace)
        assert sorted(n for p, n in nodes.items() if p.startswith("s")) == ["", "dev-a"]
        agent.allocate = True
        placed = await eventually(lambda: _all_bound(kubectl, namespace, 4))
        assert {"k80", "big"} <= set(agent.allocated) or len(agent.allocated) >= 2
    assert placed == {"k80": "dev-a", "big": "dev-b", "s1": "dev-a", "s2": "dev-a"}
    pods = await kubectl.pods(namespace)
    devices = {name: orjson.loads(p["metadata"]["annotations"][ann.DEVICES]) for name, p in pods.items()}
    assert all(p["metadata"]["annotations"][ann.PHASE] in ("Allocating", "Allocated") for p in pods.values())
    big = devices["big"]["containers"]["main"]["class.tessera.dev/big"][0]
    er = (await kubectl.call("GET", f"{ERS}/{big['device']}")).json()
    assert er["spec"]["capacity"]["memory"] == "32Gi" and big["id"] == er["spec"]["deviceID"]
    s1 = devices["s1"]["containers"]["main"]["class.tessera.dev/p100-slice"][0]
    s2 = devices["s2"]["containers"]["main"]["class.tessera.dev/p100-slice"][0]
    assert s1["device"] == s2["device"] and s1["amount"] == s2["amount"] == "8Gi"
    await kubectl.create_pod(namespace, b.pod("s3", limits={"class.tessera.dev/p100-slice": 1}))
    events = await eventually(lambda: _events_for(kubectl, namespace, "s3", "FailedScheduling"))
    assert "Insufficient class.tessera.dev/p100-slice" in events[0]["note"]
    status = await eventually(lambda: _class_status(kubectl, "big"))
    assert status["matchingDevices"] == 1


async def test_default_scheduler_and_tessera_share_the_cluster(tessera: Any, kubectl: Kube, namespace: str,
                                                                 clean_cluster: Any) -> None:
    clean_cluster.start_kube_scheduler()
    await tessera("config/binpack.yaml")
    await _create_nodes(kubectl, None, [b.node("shared-1", gpus=2)])
    await kubectl.create_pod(namespace, b.pod("mine", limits={"nvidia.com/gpu": 1}))
    plain = b.pod("theirs", requests={"cpu": "100m"})
    del plain["spec"]["schedulerName"]
    await kubectl.create_pod(namespace, plain)
    await eventually(lambda: _all_bound(kubectl, namespace, 2))

    async def scheduled_by() -> dict[str, str | None] | None:  # Events are written asynchronously
        events = await kubectl.events(namespace)
        found = {e["regarding"]["name"]: e.get("reportingController") for e in events if e["reason"] == "Scheduled"}
        return found if len(found) == 2 else None

    assert await eventually(scheduled_by) == {"mine": "tessera", "theirs": "default-scheduler"}


async def test_gpus_overcommitted_by_kube_scheduler_get_a_warning(tessera: Any, kubectl: Kube, namespace: str,
                                                                  clean_cluster: Any) -> None:
    """kube-scheduler counts `nvidia.com/gpu` requests, not the GPUs Tessera's classes hand out
    (the same GPUs): it binds a 1-GPU pod to a 2-GPU node whose GPUs Tessera gave by class. Tessera
    cannot stop it, but the pod gets a Warning that names the node and the amounts (a new user's
    trial found nothing said so)."""
    clean_cluster.start_kube_scheduler()
    await tessera("config/binpack.yaml")
    await _create_nodes(kubectl, None, [b.node("over-1", gpus=2)])
    for i in range(2):
        await kubectl.create(ERS, b.device("over-1", i))
    await kubectl.create(CLASSES, b.resource_class("over-v100", match_labels={"model": "V100"}))
    await kubectl.create_pod(namespace, b.pod("mine", limits={"class.tessera.dev/over-v100": 2}))
    await eventually(lambda: _all_bound(kubectl, namespace, 1))
    theirs = b.pod("theirs", limits={"nvidia.com/gpu": 1})
    del theirs["spec"]["schedulerName"]
    await kubectl.create_pod(namespace, theirs)
    [event, *_] = await eventually(lambda: _events_for(kubectl, namespace, "theirs", "GPUsOvercommitted"))
    assert event["type"] == "Warning"
    assert event["note"].startswith("node over-1 has 3 nvidia.com/gpu in use but only 2 allocatable")


async def _all_bound(kubectl: Kube, namespace: str, count: int) -> dict[str, str] | None:
    nodes = await bound_nodes(kubectl, namespace)
    if len(nodes) == count and all(nodes.values()):
        return nodes
    return None


async def _bound_count(kubectl: Kube, namespace: str, count: int) -> bool:
    return sum(1 for n in (await bound_nodes(kubectl, namespace)).values() if n) == count


async def _events_for(kubectl: Kube, namespace: str, pod: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in await kubectl.events(namespace) if e["regarding"]["name"] == pod and e["reason"] == reason]


async def _class_status(kubectl: Kube, name: str) -> dict[str, Any] | None:
    status = (await kubectl.call("GET", f"{CLASSES}/{name}")).json().get("status")
    return status if status and "matchingDevices" in status else None
