"""A gang required in one rack preempts inside one rack, live: the new-user trial's set-up on the
kwok plane (4 x 8-GPU nodes, 2 per rack, full of lower-priority pods; kwok finishes the victims'
deletion as a kubelet would). Before, the gang stayed Pending for ever ("preemption: not attempted
for a gang with a required topology")."""

from __future__ import annotations

from typing import Any

from scheduler.sim import builders as b
from tests.e2e.kwok_cluster import cluster, kwok_plane, namespace_named, phase  # noqa: F401
from tests.e2e.live import eventually
from tests.e2e.test_preemption_live import HIGH, LOW, _bound, _gone, _pod, _preempted_events, _priority_classes

RACK = "cloud.example.com/rack"
MID = "tessera-e2e-mid"


async def test_a_gang_required_in_one_rack_evicts_in_one_rack_and_binds_there(cluster: Any) -> None:
    kube, nodes = cluster
    await _priority_classes(kube)
    await kube.call("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
                    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                     "metadata": {"name": MID}, "value": 1000}, ok=(201, 409))
    r1 = await nodes(2, 8, labels={RACK: "r1"})
    r2 = await nodes(2, 8, labels={RACK: "r2"})
    ns = await namespace_named(kube, "topo-preempt")
    # r1's pods are the more important ones (still below the gang): the gang must take r2
    fillers = {f"fill-{node}": node for node in r1 + r2}
    for name, node in fillers.items():
        await kube.create_pod(ns, _pod(name, MID if node in r1 else LOW, {"nvidia.com/gpu": 8}, node_name=node))
    assert await eventually(lambda: _bound(kube, ns, list(fillers)), timeout=30)
    group = await kube.create(f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups",
                              b.podgroup("hig", 2, ns, annotations={"tessera.dev/topology-required": RACK}))
    members = ["hig-0", "hig-1"]
    for name in members:
        await kube.create_pod(ns, _pod(name, HIGH, {"nvidia.com/gpu": 8},
                                       labels={"scheduling.x-k8s.io/pod-group": "hig"}))
    placed = await eventually(lambda: _bound(kube, ns, members), timeout=60)
    assert sorted(placed.values()) == sorted(r2)
    victims = [name for name, node in fillers.items() if node in r2]
    assert await eventually(lambda: _gone(kube, ns, victims), timeout=30)
    events = await eventually(lambda: _preempted_events(kube, ns, victims), timeout=10)
    uid = group["metadata"]["uid"]
    assert events == {name: f"Preempted by podgroup {uid} on node {fillers[name]}" for name in victims}
    for name, node in fillers.items():  # nothing in the other rack was touched
        if node in r1:
            assert await phase(kube, ns, name) == "Running"
