"""Informers against the real apiserver: every kind, initial list vs. later events, pagination,
a forced 410 with a synthetic DELETED, and recovery from an apiserver restart.

How the 410 is forced deterministically: with kube-apiserver stopped, the test deletes a pod's
key straight from etcd and compacts etcd. The restarted apiserver's watch cache starts after our
resourceVersion, so the informer's resumed watch is answered with ``410 Expired``; and the delete
happened while no apiserver was running, so no watch can ever report it — only the relist diff
can, as a synthetic DELETED carrying the last object the informer delivered.
"""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import urllib.request
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest

from scheduler.kube.controlplane import LocalControlPlane
from scheduler.kube.http import MERGE_PATCH, KubeHttp, Response, connect
from scheduler.kube.informers import (
    ALL_KINDS,
    CLAIMS,
    EXTENDED_RESOURCES,
    NODES,
    POD_GROUPS,
    DISRUPTION_BUDGETS,
    PRIORITY_CLASSES,
    PODS,
    RESOURCE_CLASSES,
    STORAGE_CLASSES,
    VOLUMES,
    Informer,
    InformerSet,
    ResourceKind,
)
from scheduler.kube.snapshot import namespaced_path

LABEL = "tessera.dev/e2e-informers"


@dataclass
class Seen:
    type: str
    obj: dict[str, Any]
    synced: bool  # was the informer of that kind synced when the event was delivered?

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])


class Collector:
    def __init__(self) -> None:
        self.events: list[Seen] = []
        self.informers: dict[str, Informer] = {}

    def __call__(self, event_type: str, obj: dict[str, Any]) -> None:
        informer = self.informers.get(obj.get("kind", ""))
        self.events.append(Seen(event_type, obj, informer is not None and informer.synced.is_set()))

    def find(self, event_type: str, kind: str, name: str) -> list[Seen]:
        return [e for e in self.events if e.type == event_type and e.obj["kind"] == kind and e.name == name]

    async def wait(self, event_type: str, kind: str, name: str, timeout: float = 30.0) -> Seen:
        async with asyncio.timeout(timeout):
            while not (found := self.find(event_type, kind, name)):
                await asyncio.sleep(0.05)
        return found[-1]


@asynccontextmanager
async def admin_http(plane: LocalControlPlane) -> AsyncIterator[KubeHttp]:
    api = await connect(str(plane.kubeconfig))
    async with api:
        yield KubeHttp(api)


@asynccontextmanager
async def running(informers: InformerSet | Informer) -> AsyncIterator[None]:
    task = asyncio.create_task(informers.run())
    try:
        yield
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert task.cancelled()


async def call(http: KubeHttp, method: str, path: str, body: Any = None, *,
               content_type: str = "application/json", ok: Sequence[int] = (200, 201, 202)) -> Response:
    """One request, retried while a just-restarted apiserver's old keep-alive connections fail."""
    async with asyncio.timeout(30):
        while True:
            try:
                response = await http.request(method, path, body=body, content_type=content_type)
            except (aiohttp.ClientError, OSError):
                await asyncio.sleep(0.2)
                continue
            assert response.status in ok, f"{method} {path}: HTTP {response.status} {response.message()}"
            return response


def collection(kind: ResourceKind, namespace: str) -> str:
    """Where to create an object of `kind` (namespaced kinds under `namespace`)."""
    return namespaced_path(kind, namespace) if kind.namespaced else kind.path


def manifest(kind: ResourceKind, name: str, tag: str) -> dict[str, Any]:
    specs: dict[ResourceKind, dict[str, Any]] = {
        NODES: {},
        PODS: {"schedulerName": "tessera", "containers": [{"name": "c", "image": "busybox"}]},
        EXTENDED_RESOURCES: {"nodeName": name, "resourceName": "nvidia.com/gpu", "deviceID": f"GPU-{name}"},
        RESOURCE_CLASSES: {"selector": {"matchLabels": {"model": "V100"}}},
        POD_GROUPS: {"minMember": 2},
        DISRUPTION_BUDGETS: {"minAvailable": 1, "selector": {"matchLabels": {"app": name}}},
        CLAIMS: {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        VOLUMES: {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": f"/tmp/{name}"}},
    }
    top_level: dict[ResourceKind, dict[str, Any]] = {PRIORITY_CLASSES: {"value": 1000},
                                                     STORAGE_CLASSES: {"provisioner": "example.com/e2e-informers"}}
    if kind in top_level:  # no spec: their fields are at the top level
        return {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": {"name": name, "labels": {LABEL: tag}},
                **top_level[kind]}
    return {"apiVersion": kind.api_version, "kind": kind.kind,
            "metadata": {"name": name, "labels": {LABEL: tag}}, "spec": specs[kind]}


async def create_one_of_each(http: KubeHttp, namespace: str, name: str, tag: str) -> None:
    for kind in ALL_KINDS:
        await call(http, "POST", collection(kind, namespace), manifest(kind, name, tag))


async def delete(http: KubeHttp, path: str, kind: ResourceKind, ok: tuple[int, ...] = (200, 202)) -> None:
    """DELETE the object; a claim or volume also loses the protection finalizer the apiserver's
    StorageObjectInUseProtection admission gave it, which only kube-controller-manager (not run
    here) would remove, so that it goes rather than waiting as Terminating."""
    await call(http, "DELETE", path, ok=ok)
    if kind in (CLAIMS, VOLUMES):
        await call(http, "PATCH", path.split("?")[0], {"metadata": {"finalizers": None}}, content_type=MERGE_PATCH,
                   ok=(200, 404))


async def delete_cluster_scoped(http: KubeHttp, names: Sequence[str]) -> None:
    for kind in (NODES, EXTENDED_RESOURCES, RESOURCE_CLASSES, PRIORITY_CLASSES, VOLUMES, STORAGE_CLASSES):
        for name in names:
            await delete(http, f"{kind.path}/{name}", kind, ok=(200, 202, 404))


async def test_every_kind_initial_list_then_watch(control_plane: LocalControlPlane, namespace: str) -> None:
    tag = secrets.token_hex(4)
    before, after = f"inf-{tag}-before", f"inf-{tag}-after"
    async with admin_http(control_plane) as http:
        try:
            await create_one_of_each(http, namespace, before, tag)
            sink = Collector()
            informers = InformerSet(http, sink, page_size=3)
            sink.informers = {i.kind.kind: i for i in informers.informers}
            assert not informers.synced
            async with running(informers):
                async with asyncio.timeout(30):
                    await informers.wait_synced()
                assert informers.synced
                for kind in ALL_KINDS:
                    # in the initial list: delivered before that informer was synced
                    [seen] = sink.find("ADDED", kind.kind, before)
                    assert not seen.synced
                    assert seen.obj["apiVersion"] == kind.api_version

                await create_one_of_each(http, namespace, after, tag)
                for kind in ALL_KINDS:
                    seen = await sink.wait("ADDED", kind.kind, after)
                    assert seen.synced and seen.obj["apiVersion"] == kind.api_version
                    assert seen.obj["metadata"]["labels"][LABEL] == tag

                patch = {"metadata": {"labels": {"changed": "yes"}}}
                for kind in ALL_KINDS:
                    await call(http, "PATCH", f"{collection(kind, namespace)}/{after}", patch, content_type=MERGE_PATCH)
                for kind in ALL_KINDS:
                    seen = await sink.wait("MODIFIED", kind.kind, after)
                    assert seen.obj["metadata"]["labels"]["changed"] == "yes"
                    assert seen.obj["kind"] == kind.kind and seen.obj["apiVersion"] == kind.api_version

                for kind in ALL_KINDS:
                    query = "?gracePeriodSeconds=0" if kind is PODS else ""
                    await delete(http, f"{collection(kind, namespace)}/{before}{query}", kind)
                for kind in ALL_KINDS:
                    seen = await sink.wait("DELETED", kind.kind, before)
                    assert seen.obj["metadata"]["uid"] == sink.find("ADDED", kind.kind, before)[0].obj["metadata"]["uid"]
                    assert seen.obj["kind"] == kind.kind and seen.obj["apiVersion"] == kind.api_version

                assert all(e.obj.get("kind") and e.obj.get("apiVersion") for e in sink.events)
                for informer in informers.informers:
                    assert informer.stats.lists == 1 and informer.stats.watches >= 1
        finally:
            await delete_cluster_scoped(http, [before, after])


class CountingHttp(KubeHttp):
    """Records the query of every plain request (the informer's LIST pages)."""

    def __init__(self, http: KubeHttp) -> None:
        super().__init__(http.api, http.limiter)
        self.queries: list[dict[str, str]] = []

    async def request(self, method: str, path: str, **kwargs: Any) -> Response:
        self.queries.append(dict(kwargs.get("query", ())))
        return await super().request(method, path, **kwargs)


async def test_initial_list_is_paginated(control_plane: LocalControlPlane, namespace: str) -> None:
    tag = secrets.token_hex(4)
    async with admin_http(control_plane) as http:
        path = collection(PODS, namespace)
        names = [f"page-{i:02d}" for i in range(23)]
        await asyncio.gather(*(call(http, "POST", path, manifest(PODS, name, tag)) for name in names))

        counting = CountingHttp(http)
        sink = Collector()
        informer = Informer(counting, PODS, sink, page_size=5, label_selector=f"{LABEL}={tag}")
        sink.informers = {"Pod": informer}
        async with running(informer):
            async with asyncio.timeout(30):
                await informer.synced.wait()
            assert sorted(e.name for e in sink.events if e.type == "ADDED") == names
            assert not any(e.synced for e in sink.events)
            assert len(counting.queries) >= 5
            assert all(q["limit"] == "5" and q["labelSelector"] == f"{LABEL}={tag}" for q in counting.queries)
            assert all("continue" in q for q in counting.queries[1:])
            assert len(informer) == 23


def _etcd(plane: LocalControlPlane, method: str, body: dict[str, Any]) -> dict[str, Any]:
    """etcd's JSON gateway (``/v3/kv/<method>``), bypassing any proxy."""
    request = urllib.request.Request(f"{plane.etcd_url}/v3/kv/{method}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=10) as response:
        result: dict[str, Any] = json.loads(response.read())
        return result


def _delete_behind_the_apiservers_back(plane: LocalControlPlane, key: str) -> None:
    """Stop kube-apiserver, delete `key` in etcd and compact; then start kube-apiserver again."""
    plane.stop_apiserver(grace=0)
    try:
        deleted = _etcd(plane, "deleterange", {"key": base64.b64encode(key.encode()).decode()})
        assert deleted.get("deleted") == "1", deleted
        _etcd(plane, "compaction", {"revision": deleted["header"]["revision"]})
    finally:
        plane.start_apiserver()


async def test_410_relists_and_synthesises_delete(control_plane: LocalControlPlane, namespace: str) -> None:
    tag = secrets.token_hex(4)
    async with admin_http(control_plane) as http:
        path = collection(PODS, namespace)
        for name in ("keep", "vanish"):
            await call(http, "POST", path, manifest(PODS, name, tag))
        sink = Collector()
        informer = Informer(http, PODS, sink, label_selector=f"{LABEL}={tag}")
        sink.informers = {"Pod": informer}
        async with running(informer):
            async with asyncio.timeout(30):
                await informer.synced.wait()
            [vanish] = sink.find("ADDED", "Pod", "vanish")

            await asyncio.to_thread(_delete_behind_the_apiservers_back, control_plane,
                                    f"/registry/pods/{namespace}/vanish")
            await call(http, "POST", path, manifest(PODS, "later", tag))

            deleted = await sink.wait("DELETED", "Pod", "vanish", timeout=60)
            # synthetic: exactly the last object delivered, not a fresh tombstone from a watch
            assert deleted.obj is vanish.obj
            assert deleted.obj["metadata"]["uid"] == vanish.obj["metadata"]["uid"]
            assert informer.stats.relists >= 1
            await sink.wait("ADDED", "Pod", "later", timeout=60)
            assert not sink.find("DELETED", "Pod", "keep")
            assert len(informer) == 2


async def test_recovers_from_apiserver_restart(control_plane: LocalControlPlane, namespace: str) -> None:
    tag = secrets.token_hex(4)
    async with admin_http(control_plane) as http:
        sink = Collector()
        informers = InformerSet(http, sink, kinds=(NODES, PODS), label_selector=f"{LABEL}={tag}")
        sink.informers = {i.kind.kind: i for i in informers.informers}
        node = f"restart-{tag}"
        try:
            async with running(informers):
                async with asyncio.timeout(30):
                    await informers.wait_synced()
                path = collection(PODS, namespace)
                await call(http, "POST", path, manifest(PODS, "before", tag))
                await sink.wait("ADDED", "Pod", "before")

                await asyncio.to_thread(control_plane.restart_apiserver)

                await call(http, "POST", path, manifest(PODS, "after", tag))
                await call(http, "POST", NODES.path, manifest(NODES, node, tag))
                await call(http, "PATCH", f"{path}/before", {"metadata": {"labels": {"changed": "yes"}}},
                           content_type=MERGE_PATCH)
                await sink.wait("ADDED", "Pod", "after", timeout=60)
                await sink.wait("ADDED", "Node", node, timeout=60)
                modified = await sink.wait("MODIFIED", "Pod", "before", timeout=60)
                assert modified.obj["metadata"]["labels"]["changed"] == "yes"
                for informer in informers.informers:
                    assert informer.stats.watches >= 2
                assert len(sink.find("ADDED", "Pod", "after")) == 1
        finally:
            await delete_cluster_scoped(http, [node])

