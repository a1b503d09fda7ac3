"""A leader whose watch responses stall restarts its watches and binds (real apiserver).

The live break this reproduces: a proxy between the leader and the apiserver held the watch
responses while passing its other requests. The leader kept renewing its Lease and bound nothing;
new pods sat Pending, for as long as a stalled-but-open stream takes to be noticed — before, the
socket read timeout: the watch's `timeoutSeconds` (5-10 min) + 30 s.

What is real: etcd + kube-apiserver (its watch cache sends each watch a BOOKMARK about every
minute), the leader's `LeaderElector` and `SchedulerLoop` wired as `tessera run` wires them, every
request of theirs through the TLS fault proxy, whose `stall_watches` holds the watch responses
open at that moment (its other requests, the Lease renewals and later watches pass). The pod created
during the stall must be bound within the informers' silence bound (75 s) and a few seconds.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from pathlib import Path

import structlog.testing

from scheduler.api.config import load_config
from scheduler.kube import informers
from scheduler.kube.controlplane import LocalControlPlane
from scheduler.kube.http import KubeHttp, connect
from scheduler.kube.informers import PODS
from scheduler.kube.leader import LeaderElector
from scheduler.kube.loop import SchedulerLoop
from scheduler.sim import builders as b
from tessera_testing.faultproxy import STALL_WATCH, proxied
from tests.e2e.live import Kube, eventually

NODES = "/api/v1/nodes"


async def _node_name(kubectl: Kube, namespace: str, pod: str) -> str:
    return str((await kubectl.pods(namespace)).get(pod, {}).get("spec", {}).get("nodeName") or "")


async def test_a_leader_whose_watches_stall_restarts_them_and_binds_within_the_silence_bound(
        control_plane: LocalControlPlane, kubectl: Kube, namespace: str, tmp_path: Path) -> None:
    suffix = secrets.token_hex(3)
    node = f"stall-{suffix}"
    obj = b.node(node, gpus=2)
    await kubectl.create(NODES, obj)
    await kubectl.call("PATCH", f"{NODES}/{node}/status", {"status": obj["status"]},
                       content_type="application/merge-patch+json")
    pinned = {"nodeSelector": {"kubernetes.io/hostname": node}}
    with proxied(control_plane.server, control_plane.ca_file) as proxy, \
            structlog.testing.capture_logs() as logs:
        kubeconfig = proxy.write_kubeconfig(tmp_path / "via-proxy", control_plane.admin_token)
        clients = [await connect(str(kubeconfig)) for _ in range(3)]
        loop_ref: list[SchedulerLoop] = []
        elector = LeaderElector(KubeHttp(clients[0]), namespace="kube-system", name=f"tessera-stall-{suffix}",
                                identity="leader", on_started_leading=lambda: loop_ref[0].leadership_started(),
                                on_stopped_leading=lambda: loop_ref[0].lost_leadership(),
                                lease_duration=6.0, renew_deadline=4.0, retry_period=0.5)
        loop = SchedulerLoop(load_config("config/binpack.yaml"), KubeHttp(clients[1]), KubeHttp(clients[2]),
                             identity="leader", leader_term=lambda: elector.term,
                             term_fence=lambda: elector.fence_token)
        loop_ref.append(loop)
        tasks = [asyncio.create_task(loop.run()), asyncio.create_task(elector.run())]
        try:
            await eventually(lambda: asyncio.sleep(0, elector.term is not None), timeout=30)
            term = elector.term
            await kubectl.create_pod(namespace, b.pod("before", limits={"nvidia.com/gpu": 1}, spec_extra=pinned))
            await eventually(lambda: _node_name(kubectl, namespace, "before"), timeout=30)
            # the Pod watch has carried a bookmark (the watch cache's first comes about a minute in):
            # from now on its silence bound holds
            [pods] = [informer for informer in loop.informers.informers if informer.kind == PODS]
            await eventually(lambda: asyncio.sleep(0, pods.bookmarks_seen), timeout=informers.WATCH_SILENCE_SECONDS)
            stalled_at = time.monotonic()
            assert proxy.stall_watches() >= 1
            await asyncio.sleep(2.0)
            await kubectl.create_pod(namespace, b.pod("during", limits={"nvidia.com/gpu": 1}, spec_extra=pinned))
            await eventually(lambda: _node_name(kubectl, namespace, "during"),
                             timeout=informers.WATCH_SILENCE_SECONDS + 15.0)
            took = time.monotonic() - stalled_at
            assert took < informers.WATCH_SILENCE_SECONDS + 15.0
            assert elector.term == term  # the same leader all along: it never lost the Lease
            silent = [entry for entry in logs if entry["event"] == "informer.watch_silent" and entry["kind"] == "Pod"]
            assert silent and silent[0]["silent_seconds"] >= informers.WATCH_SILENCE_SECONDS
            assert proxy.counts[STALL_WATCH] >= 1
        finally:
            loop.stop()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await elector.release()
            for client in clients:
                await client.close()
            await kubectl.call("DELETE", f"/api/v1/namespaces/{namespace}/pods?gracePeriodSeconds=0", ok=(200, 404))
            await kubectl.call("DELETE", f"{NODES}/{node}", ok=(200, 404))
