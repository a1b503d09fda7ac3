"""Required pod anti-affinity by hostname on the real apiserver (InterPodAffinity's filter): two
GPU replicas of one app with `podAntiAffinity` by `kubernetes.io/hostname` on two nodes are bound
to different nodes, and a third stays Pending with upstream's FailedScheduling message. Before,
TesseraUnhonouredTerms refused all three and told them to use default-scheduler, which a GPU pod
cannot. The pods are created as a Deployment's ReplicaSet creates them (the shared control plane
runs no workload controllers). Preferred terms are scored (InterPodAffinity's score): the last test."""

from __future__ import annotations

import asyncio
from typing import Any

from scheduler.sim import builders as b
from tests.e2e.live import Kube, bound_nodes, eventually

NODES = "/api/v1/nodes"
TERM = {"labelSelector": {"matchLabels": {"app": "infer"}}, "topologyKey": "kubernetes.io/hostname"}


async def _events(kubectl: Kube, namespace: str, pod: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in await kubectl.events(namespace) if e["regarding"]["name"] == pod and e["reason"] == reason]


def _replica(name: str, namespace: str) -> dict[str, Any]:
    return b.pod(name, namespace, labels={"app": "infer", "pod-template-hash": "5d8f"}, limits={"nvidia.com/gpu": 1},
                 spec_extra={"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [TERM]}}})


async def test_replicas_with_required_anti_affinity_spread_and_a_third_pends(tessera: Any, kubectl: Kube,
                                                                             namespace: str) -> None:
    await tessera("config/binpack.yaml")
    for name in ("ipa-1", "ipa-2"):
        node = b.node(name, gpus=8)
        await kubectl.create(NODES, node)
        await kubectl.call("PATCH", f"{NODES}/{name}/status", {"status": node["status"]},
                           content_type="application/merge-patch+json")
    for i in range(2):
        await kubectl.create_pod(namespace, _replica(f"infer-{i}", namespace))

    async def both_bound() -> dict[str, str] | None:
        nodes = await bound_nodes(kubectl, namespace)
        return nodes if nodes.get("infer-0") and nodes.get("infer-1") else None

    nodes = await eventually(both_bound)
    assert {nodes["infer-0"], nodes["infer-1"]} == {"ipa-1", "ipa-2"}

    await kubectl.create_pod(namespace, _replica("infer-2", namespace))
    failed = await eventually(lambda: _events(kubectl, namespace, "infer-2", "FailedScheduling"))
    assert failed[-1]["note"] == (
        "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules. "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.")
    await asyncio.sleep(1.0)
    assert not (await bound_nodes(kubectl, namespace)).get("infer-2")
    pod = (await kubectl.call("GET", f"/api/v1/namespaces/{namespace}/pods/infer-2")).json()
    [condition] = [c for c in pod["status"].get("conditions", []) if c["type"] == "PodScheduled"]
    assert condition["status"] == "False" and condition["reason"] == "Unschedulable"

    # one replica goes: the pending one takes its node (an assigned pod's deletion requeues it)
    gone = nodes["infer-0"]
    await kubectl.call("DELETE", f"/api/v1/namespaces/{namespace}/pods/infer-0?gracePeriodSeconds=0")

    async def third_bound() -> str | None:
        return (await bound_nodes(kubectl, namespace)).get("infer-2") or None

    assert await eventually(third_bound) == gone


async def test_a_pod_pending_on_affinity_is_bound_soon_after_default_scheduler_binds_its_peer(
        tessera: Any, kubectl: Kube, namespace: str) -> None:
    """`web` (Tessera's) needs an app=db pod on its node: none is there, it pends with upstream's
    affinity message. Then a default-scheduler pod app=db is bound to the node (a Binding, as
    kube-scheduler posts it). The watch brings it assigned: an AssignedPodAdd, which the
    InterPodAffinity hint lets through, so `web` is retried after its backoff (seconds), not the
    5-minute flush. Before, Tessera had no event for it and `web` stayed Pending."""
    await tessera("config/binpack.yaml")
    node = b.node("ipa-req-1", gpus=8)
    await kubectl.create(NODES, node)
    await kubectl.call("PATCH", f"{NODES}/ipa-req-1/status", {"status": node["status"]},
                       content_type="application/merge-patch+json")
    db_term = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}
    await kubectl.create_pod(namespace, b.pod(
        "web", namespace, labels={"app": "web"}, limits={"nvidia.com/gpu": 1},
        spec_extra={"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [db_term]}}}))
    failed = await eventually(lambda: _events(kubectl, namespace, "web", "FailedScheduling"))
    assert failed[-1]["note"].startswith("0/1 nodes are available: 1 node(s) didn't match pod affinity rules.")

    await kubectl.create_pod(namespace, b.pod("db", namespace, labels={"app": "db"}, scheduler="default-scheduler"))
    await kubectl.call("POST", f"/api/v1/namespaces/{namespace}/pods/db/binding",
                       {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "db"},
                        "target": {"apiVersion": "v1", "kind": "Node", "name": "ipa-req-1"}})

    async def web_bound() -> str | None:
        return (await bound_nodes(kubectl, namespace)).get("web") or None

    assert await eventually(web_bound, timeout=12.0) == "ipa-req-1"


async def test_preferred_affinity_lands_in_the_zone_of_its_peer_and_anti_affinity_away(
        tessera: Any, kubectl: Kube, namespace: str) -> None:
    """Preferred pod terms are scored (InterPodAffinity's score, upstream's scoring.go): `near`
    prefers the zone of a default-scheduler pod app=db bound in zone b, `far` prefers any other.
    Three equal empty nodes; binpack alone would put `far` beside `near`. Before, both preferences
    were only told (IgnoredPreferredTerms) and changed nothing."""
    await tessera("config/binpack.yaml")
    zone = "topology.kubernetes.io/zone"
    for name, value in (("ipa-pref-a0", "a"), ("ipa-pref-b0", "b"), ("ipa-pref-b9", "b")):
        node = b.node(name, gpus=8, labels={zone: value})
        await kubectl.create(NODES, node)
        await kubectl.call("PATCH", f"{NODES}/{name}/status", {"status": node["status"]},
                           content_type="application/merge-patch+json")
    await kubectl.create_pod(namespace, b.pod("db", namespace, labels={"app": "db"}, scheduler="default-scheduler"))
    await kubectl.call("POST", f"/api/v1/namespaces/{namespace}/pods/db/binding",
                       {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "db"},
                        "target": {"apiVersion": "v1", "kind": "Node", "name": "ipa-pref-b9"}})
    await eventually(lambda: _bound(kubectl, namespace, "db"))
    preferred = [{"weight": 100, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "db"}},
                                                     "topologyKey": zone}}]
    await kubectl.create_pod(namespace, b.pod(
        "near", namespace, labels={"app": "web"}, limits={"nvidia.com/gpu": 1},
        spec_extra={"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}}))
    assert await eventually(lambda: _bound(kubectl, namespace, "near")) in {"ipa-pref-b0", "ipa-pref-b9"}
    await kubectl.create_pod(namespace, b.pod(
        "far", namespace, labels={"app": "web"}, limits={"nvidia.com/gpu": 1},
        spec_extra={"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}}))
    assert await eventually(lambda: _bound(kubectl, namespace, "far")) == "ipa-pref-a0"
    assert await _events(kubectl, namespace, "near", "IgnoredPreferredTerms") == []


async def _bound(kubectl: Kube, namespace: str, pod: str) -> str | None:
    return (await bound_nodes(kubectl, namespace)).get(pod) or None
