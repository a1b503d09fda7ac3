"""The scheduler's Node LISTs in protobuf, against the real apiserver: `parse_node` must read the
same Node from the lean protobuf objects as from the apiserver's JSON, for every field it reads
(labels, annotations, taints of each effect, unschedulable, allocatable quantities in their
written forms, creation and deletion timestamps), across pages, and through the informer.

If `parse_node` starts reading a field `nodes.proto` does not declare, the comparison here fails:
declare the field and regenerate (scheduler/kube/kubeproto/generate.sh).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from scheduler.core.objects import parse_node
from scheduler.kube.controlplane import LocalControlPlane
from scheduler.kube.http import MERGE_PATCH, KubeHttp, connect
from scheduler.kube.informers import NODES, Informer
from scheduler.kube.kubeproto.node_list import ACCEPT, PROTOBUF, decode_node_list

pytestmark = pytest.mark.timeout(60)

FINALIZER = "tessera.dev/test-keep"
NODES_SPEC: dict[str, dict[str, Any]] = {
    "plain": {"labels": {"model": "V100", "topology.kubernetes.io/zone": "a"},
              "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8"}},
    "tainted": {"annotations": {"note": "drained for repair"}, "unschedulable": True,
                "taints": [{"key": "gpu", "value": "broken", "effect": "NoSchedule"},
                           {"key": "spot", "effect": "PreferNoSchedule"},
                           {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}],
                "allocatable": {"cpu": "500m", "memory": "1536Mi", "hugepages-2Mi": "0",
                                "ephemeral-storage": "100Gi", "class.tessera.dev/t4": "4"}},
    "bare": {"allocatable": {}},
    "deleting": {"labels": {"tessera.dev/fake": "true"}, "allocatable": {"cpu": "8", "memory": "32Gi"}},
}


@pytest_asyncio.fixture
async def http(clean_cluster: LocalControlPlane) -> AsyncIterator[KubeHttp]:
    api = await connect(str(clean_cluster.kubeconfig))
    async with api:
        client = KubeHttp(api)
        try:
            await _create_nodes(client)
            yield client
        finally:
            await client.request("PATCH", "/api/v1/nodes/deleting", body={"metadata": {"finalizers": None}},
                                 content_type=MERGE_PATCH)


async def _ok(http: KubeHttp, method: str, path: str, body: Any = None, content_type: str = "application/json") -> None:
    response = await http.request(method, path, body=body, content_type=content_type)
    assert response.ok, f"{method} {path}: HTTP {response.status} {response.message()}"


async def _create_nodes(http: KubeHttp) -> None:
    for name, spec in NODES_SPEC.items():
        meta: dict[str, Any] = {"name": name, "labels": spec.get("labels", {}), "annotations": spec.get("annotations", {})}
        if name == "deleting":
            meta["finalizers"] = [FINALIZER]
        await _ok(http, "POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": meta,
                                                  "spec": {"unschedulable": spec.get("unschedulable", False),
                                                           "taints": spec.get("taints", [])}})
        status = {"capacity": spec["allocatable"], "allocatable": spec["allocatable"]}
        await _ok(http, "PATCH", f"/api/v1/nodes/{name}/status", {"status": status}, MERGE_PATCH)
    await _ok(http, "DELETE", "/api/v1/nodes/deleting")  # held by the finalizer: deletionTimestamp set


async def _list(http: KubeHttp, accept: str, limit: int) -> tuple[dict[str, dict[str, Any]], int]:
    """Every node by name, through `limit`-sized pages; and how many pages it took."""
    items: dict[str, dict[str, Any]] = {}
    token, pages = "", 0
    while True:
        query = [("limit", str(limit)), *([("continue", token)] if token else [])]
        response = await http.request("GET", "/api/v1/nodes", query=query, accept=accept, limited=False)
        assert response.ok, response.message()
        if accept == ACCEPT:
            assert response.content_type == PROTOBUF
            doc = decode_node_list(response.body)
        else:
            assert response.content_type == "application/json"
            doc = response.json()
        pages += 1
        items |= {item["metadata"]["name"]: item for item in doc["items"]}
        token = doc["metadata"].get("continue", "")
        if not token:
            assert doc["metadata"]["resourceVersion"]
            return items, pages


async def test_parse_node_reads_the_same_node_from_protobuf_as_from_json(http: KubeHttp) -> None:
    full, _ = await _list(http, "application/json", 500)
    lean, pages = await _list(http, ACCEPT, 2)
    assert pages == 2 and set(lean) == set(full) == set(NODES_SPEC)
    for name in NODES_SPEC:
        assert parse_node(lean[name]) == parse_node(full[name]), name
    assert parse_node(lean["deleting"]).meta.deleting
    assert {t.effect for t in parse_node(lean["tainted"]).taints} == {"NoSchedule", "PreferNoSchedule", "NoExecute"}
    # lean: only what nodes.proto declares (the JSON has capacity, conditions, managed fields...)
    assert set(lean["plain"]["status"]) == {"allocatable"} and "managedFields" not in lean["plain"]["metadata"]
    assert "capacity" in full["plain"]["status"]


async def test_a_lean_informer_lists_nodes_as_protobuf_and_watches_json(http: KubeHttp) -> None:
    seen: dict[str, dict[str, Any]] = {}
    informer = Informer(http, NODES, lambda _type, obj: seen.__setitem__(obj["metadata"]["name"], obj),
                        page_size=3, lean_lists=True)
    task = asyncio.create_task(informer.run())
    try:
        async with asyncio.timeout(20):
            await informer.synced.wait()
            assert set(seen) == set(NODES_SPEC)
            assert all(set(obj["status"]) == {"allocatable"} for obj in seen.values())  # listed as protobuf
            await _ok(http, "PATCH", "/api/v1/nodes/plain", {"metadata": {"labels": {"later": "yes"}}}, MERGE_PATCH)
            while "later" not in seen["plain"]["metadata"].get("labels", {}):
                await asyncio.sleep(0.05)
    finally:
        task.cancel()
    assert "capacity" in seen["plain"]["status"]  # the watch's object: JSON, whole
    full, _ = await _list(http, "application/json", 500)
    assert parse_node(seen["plain"]) == parse_node(full["plain"])
    assert informer.stats.lists == 1 and informer.stats.errors == 0
