"""Pod terms Tessera does not read, on the real apiserver: a pod with a required pod anti-affinity
term Tessera cannot honour (a namespaceSelector: Tessera watches no Namespaces) stays Pending with a
FailedScheduling Event naming the field and, for a GPU pod, advice that works (not
default-scheduler), and a pod with a preferred anti-affinity term Tessera does not score (a
namespaceSelector) is bound with one Warning saying the preference is not read. Required terms Tessera honours: test_interpod_affinity_live.py."""

from __future__ import annotations

import asyncio
from typing import Any

from scheduler.core.pod_terms import IGNORED_PREFERRED_TERMS
from scheduler.sim import builders as b
from tests.e2e.live import Kube, bound_nodes, eventually

NODES = "/api/v1/nodes"
ANTI = "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[].namespaceSelector"
TERM = {"labelSelector": {"matchLabels": {"app": "infer"}}, "topologyKey": "kubernetes.io/hostname"}
NS_TERM = {**TERM, "namespaceSelector": {"matchLabels": {"team": "inference"}}}


async def _events(kubectl: Kube, namespace: str, pod: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in await kubectl.events(namespace) if e["regarding"]["name"] == pod and e["reason"] == reason]


async def test_required_anti_affinity_pends_and_preferred_is_told_once(tessera: Any, kubectl: Kube,
                                                                        namespace: str) -> None:
    await tessera("config/binpack.yaml")
    node = b.node("pt-1", gpus=8)
    await kubectl.create(NODES, node)
    await kubectl.call("PATCH", f"{NODES}/pt-1/status", {"status": node["status"]},
                       content_type="application/merge-patch+json")
    for i in range(2):
        await kubectl.create_pod(namespace, b.pod(
            f"infer-{i}", namespace, labels={"app": "infer"}, limits={"nvidia.com/gpu": 1},
            spec_extra={"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [NS_TERM]}}}))
    await kubectl.create_pod(namespace, b.pod(
        "soft", namespace, labels={"app": "infer"}, limits={"nvidia.com/gpu": 1},
        spec_extra={"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": NS_TERM}]}}}))

    failed = await eventually(lambda: _events(kubectl, namespace, "infer-0", "FailedScheduling"))
    note = failed[-1]["note"]
    assert note.startswith(f"0/1 nodes are available: pod has {ANTI}, which Tessera does not honour")
    assert "a pod asking GPUs must stay with Tessera" in note and "default-scheduler" not in note
    assert note.endswith("preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")
    [told] = await eventually(lambda: _events(kubectl, namespace, "soft", IGNORED_PREFERRED_TERMS))
    assert told["type"] == "Warning"
    assert "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[].namespaceSelector" \
        in told["note"]

    async def soft_bound() -> dict[str, str] | None:
        nodes = await bound_nodes(kubectl, namespace)
        return nodes if nodes.get("soft") else None

    nodes = await eventually(soft_bound)
    await asyncio.sleep(1.0)  # further attempts bind neither required pod, and tell nothing more
    nodes = await bound_nodes(kubectl, namespace)
    assert nodes["soft"] == "pt-1" and not nodes.get("infer-0") and not nodes.get("infer-1")
    pod = (await kubectl.call("GET", f"/api/v1/namespaces/{namespace}/pods/infer-1")).json()
    assert pod["status"]["phase"] == "Pending" and not pod["spec"].get("nodeName")
    [condition] = [c for c in pod["status"].get("conditions", []) if c["type"] == "PodScheduled"]
    assert condition["status"] == "False" and condition["reason"] == "Unschedulable"
    [told] = await _events(kubectl, namespace, "soft", IGNORED_PREFERRED_TERMS)
    assert (told.get("series") or {}).get("count", 1) == 1
    assert await _events(kubectl, namespace, "infer-0", IGNORED_PREFERRED_TERMS) == []
