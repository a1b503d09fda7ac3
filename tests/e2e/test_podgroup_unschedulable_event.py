"""`kubectl describe pg big` says why the gang waits, live.

A new user's trial: a scheduler-plugins PodGroup of 3 members x 4 GPUs on a cluster with 8 GPUs
showed `Phase: Scheduling` and `Events: <none>`. The live loop now writes a Warning Event,
reason `Unschedulable`, regarding the PodGroup; here a real kube-apiserver accepts it, and it is
found the way `kubectl describe` finds an object's Events (core/v1 Events by involvedObject
kind, name, namespace and uid), its note the members' FailedScheduling note (followed, when the
gang can never fit the cluster's nodes as they are, by the sentence that says so).
"""

from __future__ import annotations

from typing import Any

from scheduler.sim import builders as b
from tests.e2e.live import Kube, eventually

NODES = "/api/v1/nodes"


async def _node(kubectl: Kube, name: str) -> None:
    node = b.node(name, gpus=4)
    await kubectl.create(NODES, node)
    await kubectl.call("PATCH", f"{NODES}/{name}/status", {"status": node["status"]},
                       content_type="application/merge-patch+json")


async def test_a_podgroup_whose_gang_cannot_fit_shows_why_in_describe(tessera: Any, kubectl: Kube,
                                                                      namespace: str) -> None:
    await tessera("config/binpack.yaml")
    for name in ("pg-event-1", "pg-event-2"):
        await _node(kubectl, name)
    group = await kubectl.create(f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups",
                                 b.podgroup("big", 3, namespace))
    for i in range(3):
        await kubectl.create_pod(namespace, b.pod(f"big-{i}", labels={"scheduling.x-k8s.io/pod-group": "big"},
                                                  limits={"nvidia.com/gpu": 4}))
    selector = ",".join(f"involvedObject.{field}={value}" for field, value in (
        ("kind", "PodGroup"), ("name", "big"), ("namespace", namespace), ("uid", group["metadata"]["uid"])))

    async def described() -> list[dict[str, Any]] | None:  # kubectl describe's query for the object's Events
        response = await kubectl.http.request("GET", f"/api/v1/namespaces/{namespace}/events",
                                              query=[("fieldSelector", selector)], limited=False)
        assert response.ok, response.message()
        return response.json()["items"] or None

    [event] = await eventually(described)
    assert (event["type"], event["reason"]) == ("Warning", "Unschedulable")
    assert event["involvedObject"]["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    assert event["reportingComponent"] == "tessera"
    assert "only 2 of the 3 members it needs fit" in event["message"]

    async def members_say() -> set[str] | None:  # (each also has its notes from before the third arrived)
        notes = {e["note"] for e in await kubectl.events(namespace) if e["reason"] == "FailedScheduling"}
        return notes if any(event["message"].startswith(note) for note in notes) else None

    assert await eventually(members_say)
