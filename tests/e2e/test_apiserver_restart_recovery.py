"""The scheduler after an apiserver crash: kill -9 kube-apiserver, restart it on the same etcd, and
a pod created then is bound within seconds.

On-call trial (2fdb0cb): the informers' connection-refused retries piled their backoff up during
the outage (up to 60 s with jitter), the restarted apiserver answered the resumed watch with 410
Gone, and the relist waited that backoff out: 45-80 s with the scheduler seeing no new pod and
nothing saying so. Here the 410 is made certain as in test_informers.py (etcd compacted while the
apiserver is down: its watch cache starts after every informer's resourceVersion)."""

from __future__ import annotations

import asyncio
import base64
import time
from typing import Any

from scheduler.kube.controlplane import ApiError, LocalControlPlane
from scheduler.sim import builders as b
from tests.e2e.live import Kube, bound_nodes, eventually
from tests.e2e.test_informers import _etcd

OUTAGE_SECONDS = 8.0  # enough retries for a pause of 3.2-12.8 s; less than the lease's renewDeadline (10 s)


def _crash(plane: LocalControlPlane) -> None:
    plane.stop_apiserver(grace=0)  # kill -9


def _compact_and_start(plane: LocalControlPlane) -> None:
    try:
        revision = _etcd(plane, "range", {"key": base64.b64encode(b"/registry/none").decode()})["header"]["revision"]
        _etcd(plane, "compaction", {"revision": revision})
    finally:
        plane.start_apiserver()


async def test_a_pod_created_after_an_apiserver_crash_is_bound_within_seconds(
        tessera: Any, kubectl: Kube, namespace: str, clean_cluster: LocalControlPlane) -> None:
    plane = clean_cluster
    [node] = await asyncio.to_thread(plane.add_fake_gpu_nodes, 1, 2, "T4", prefix="apiserver-crash")
    try:
        loop = await tessera("config/binpack.yaml")
        await kubectl.create_pod(namespace, b.pod("before", limits={"nvidia.com/gpu": 1}))
        assert (await eventually(lambda: _bound(kubectl, namespace, "before"), timeout=30)) == node
        relists = {kind: stats.relists for kind, stats in loop.informers.stats().items()}

        await asyncio.to_thread(_crash, plane)
        await asyncio.sleep(OUTAGE_SECONDS)  # the informers retry a closed port meanwhile
        await asyncio.to_thread(_compact_and_start, plane)

        created = time.monotonic()
        await kubectl.create_pod(namespace, b.pod("after", limits={"nvidia.com/gpu": 1}))
        assert (await eventually(lambda: _bound(kubectl, namespace, "after"), timeout=60, interval=0.1)) == node
        took = time.monotonic() - created
        pods = next(i for i in loop.informers.informers if i.kind.label == "Pod")
        assert pods.stats.relists > relists["Pod"]  # the 410 came, and was relisted
        assert took < 6.0, f"bound {took:.1f} s after it was created"
        assert not pods.relist_pending
    finally:
        await asyncio.to_thread(_remove_node, plane, node)


def _remove_node(plane: LocalControlPlane, node: str) -> None:
    """After the restart the CRDs' storage answers 429 "(re)initializing" for a while."""
    deadline = time.monotonic() + 60
    while True:
        try:
            plane.remove_fake_gpu_nodes([node])
            return
        except ApiError as err:
            if err.status not in (429, 500, 503) or time.monotonic() > deadline:
                raise
            time.sleep(1)


async def _bound(kubectl: Kube, namespace: str, name: str) -> str:
    return (await bound_nodes(kubectl, namespace)).get(name, "")
