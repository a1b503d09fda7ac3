"""`kubectl describe pg big` says why the gang waits, live.

A new user's trial: a scheduler-plugins PodGroup of 3 members x 4 GPUs on a cluster with 8 GPUs
showed `Phase: Scheduling` and `Events: <none>`. The live loop now writes a Warning Event,
reason `Unschedulable`, regarding the PodGroup; here a real kube-apiserver accepts it, and it is
found the way `kubectl describe` finds an object's Events (core/v1 Events by involvedObject
kind, name, namespace and uid), its note the members' FailedScheduling note (followed, when the
gang can never fit the cluster's nodes as they are, by the sentence that says so).

A later trial: a PodGroup whose `spec.minResources` (40 GPUs) the cluster (8) can never free still
showed `Events: <none>`: its members wait in Coscheduling's PreFilter (upstream's `resource gap:
map[...]`), a cycle the gang's Event did not count as tried. It gets the Event too, one series
however often its members are tried.
"""

from __future__ import annotations

from typing import Any

from scheduler.sim import builders as b
from tests.e2e.live import Kube, eventually

NODES = "/api/v1/nodes"
PODGROUPS = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups"
PG_LABEL = "scheduling.x-k8s.io/pod-group"


async def _node(kubectl: Kube, name: str) -> None:
    node = b.node(name, gpus=4)
    await kubectl.create(NODES, node)
    await kubectl.call("PATCH", f"{NODES}/{name}/status", {"status": node["status"]},
                       content_type="application/merge-patch+json")


async def _gang(kubectl: Kube, namespace: str, group: dict[str, Any], members: int) -> dict[str, Any]:
    """Two 4-GPU nodes, the PodGroup, then its `members` pods of 4 GPUs each: the PodGroup as created."""
    for name in ("pg-event-1", "pg-event-2"):
        await _node(kubectl, name)
    name = group["metadata"]["name"]
    created = await kubectl.create(PODGROUPS.format(ns=namespace), group)
    for i in range(members):
        await kubectl.create_pod(namespace, b.pod(f"{name}-{i}", labels={PG_LABEL: name},
                                                  limits={"nvidia.com/gpu": 4}))
    return created


async def _described(kubectl: Kube, namespace: str, group: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The PodGroup's Events as `kubectl describe` finds them (core/v1, by involvedObject); None: none yet."""
    meta = group["metadata"]
    selector = ",".join(f"involvedObject.{field}={value}" for field, value in (
        ("kind", "PodGroup"), ("name", meta["name"]), ("namespace", namespace), ("uid", meta["uid"])))
    response = await kubectl.http.request("GET", f"/api/v1/namespaces/{namespace}/events",
                                          query=[("fieldSelector", selector)], limited=False)
    assert response.ok, response.message()
    items: list[dict[str, Any]] = response.json()["items"]
    return items or None


def _is_tesseras_warning(event: dict[str, Any]) -> None:
    assert (event["type"], event["reason"]) == ("Warning", "Unschedulable")
    assert event["involvedObject"]["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    assert event["reportingComponent"] == "tessera"


async def test_a_podgroup_whose_gang_cannot_fit_shows_why_in_describe(tessera: Any, kubectl: Kube,
                                                                      namespace: str) -> None:
    await tessera("config/binpack.yaml")
    group = await _gang(kubectl, namespace, b.podgroup("big", 3, namespace), 3)
    [event] = await eventually(lambda: _described(kubectl, namespace, group))
    _is_tesseras_warning(event)
    assert "only 2 of the 3 members it needs fit" in event["message"]

    async def members_say() -> set[str] | None:  # (each also has its notes from before the third arrived)
        notes = {e["note"] for e in await kubectl.events(namespace) if e["reason"] == "FailedScheduling"}
        return notes if any(event["message"].startswith(note) for note in notes) else None

    assert await eventually(members_say)


async def test_a_podgroup_whose_min_resources_the_cluster_never_frees_shows_it_in_describe(
        tessera: Any, kubectl: Kube, namespace: str) -> None:
    """40 GPUs of minResources, 8 in the cluster: one Warning whose series counts the members' retries
    (each sibling's arrival retries the others), upstream's gap and that it can never be met."""
    await tessera("config/binpack.yaml")
    spec = b.podgroup("huge", 2, namespace)
    spec["spec"]["minResources"] = {"nvidia.com/gpu": "40"}
    group = await _gang(kubectl, namespace, spec, 3)

    async def repeated() -> list[dict[str, Any]] | None:
        events = await _described(kubectl, namespace, group)
        return events if events and all((e.get("series") or {}).get("count", 1) >= 2 for e in events) else None

    [event] = await eventually(repeated)
    _is_tesseras_warning(event)
    assert event["message"] == (
        f"pod group {namespace}/huge: resource gap: map[nvidia.com/gpu:32]. The PodGroup's minResources can "
        "never be met as the cluster is: they ask for 40 nvidia.com/gpu free, and the nodes have 8 in all.")
    gaps = {e["note"] for e in await kubectl.events(namespace) if e["reason"] == "FailedScheduling"
            and "resource gap: map[nvidia.com/gpu:32]" in e["note"]}
    assert gaps, "the members say the gap in upstream's words too"
