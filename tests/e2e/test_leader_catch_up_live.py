"""A new leader whose Pod watch lags still counts the old leader's last Binding (real apiserver).

What is real: etcd + kube-apiserver, the Lease (an old leader's `LeaderElector` holds it, then
releases it), the old leader's Binding (POSTed to pods/binding while it holds the Lease), the new
replica (a `SchedulerLoop` with its own `LeaderElector`, wired as `tessera run` wires them). What
is simulated, in-process: the lag. The new replica's Pod watch stream is held back (its chunks
are read from the socket and kept until the test lets them through), as a busy apiserver or a
slow connection would; nothing in the scheduler knows.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast

from scheduler.api.config import load_config
from scheduler.kube.controlplane import LocalControlPlane
from scheduler.kube.http import KubeHttp, connect
from scheduler.kube.leader import LeaderElector
from scheduler.kube.loop import SchedulerLoop
from scheduler.sim import builders as b
from tests.e2e.live import Kube, LaggingPodWatch, eventually
from tests.helpers import LeaseTimings

NODES = "/api/v1/nodes"
LEASE_NAMESPACE = "kube-system"
TIMINGS: LeaseTimings = {"lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.5}


async def _bound(kubectl: Kube, namespace: str) -> dict[str, str]:
    return {name: pod["spec"]["nodeName"] for name, pod in (await kubectl.pods(namespace)).items()
            if pod["spec"].get("nodeName")}


@dataclass
class Takeover:
    """An old leader holding the Lease and a standby (`new_leader`, `loop`) whose Pod watch can
    lag (`watch.flowing`), both synced; `node` is this test's one-GPU node."""
    node: str
    old_leader: LeaderElector
    new_leader: LeaderElector
    loop: SchedulerLoop
    watch: LaggingPodWatch


@asynccontextmanager
async def _takeover(control_plane: LocalControlPlane, kubectl: Kube, namespace: str) -> AsyncIterator[Takeover]:
    """The set-up both tests share, and its clean-up (the control plane is shared)."""
    node = f"catch-up-{secrets.token_hex(3)}"
    obj = b.node(node, gpus=1)
    await kubectl.create(NODES, obj)
    await kubectl.call("PATCH", f"{NODES}/{node}/status", {"status": obj["status"]},
                       content_type="application/merge-patch+json")
    lease = f"tessera-catch-up-{secrets.token_hex(3)}"
    clients = [await connect(str(control_plane.kubeconfig)) for _ in range(3)]
    old_leader = LeaderElector(KubeHttp(clients[0]), namespace=LEASE_NAMESPACE, name=lease, identity="old", **TIMINGS)
    old_task = asyncio.create_task(old_leader.run())
    watch = LaggingPodWatch(KubeHttp(clients[2]))
    loop_ref: list[SchedulerLoop] = []
    new_leader = LeaderElector(KubeHttp(clients[1]), namespace=LEASE_NAMESPACE, name=lease, identity="new",
                               on_started_leading=lambda: loop_ref[0].wake(),
                               on_stopped_leading=lambda: loop_ref[0].lost_leadership(), **TIMINGS)
    loop = SchedulerLoop(load_config("config/binpack.yaml"), KubeHttp(clients[1]), cast(KubeHttp, watch),
                         identity="new", leader_term=lambda: new_leader.term)
    loop_ref.append(loop)
    tasks: list[asyncio.Task[None]] = []
    try:
        await eventually(lambda: asyncio.sleep(0, old_leader.is_leader))
        tasks = [asyncio.create_task(loop.run()), asyncio.create_task(new_leader.run())]
        await asyncio.wait_for(loop.informers.wait_synced(), 30)
        yield Takeover(node, old_leader, new_leader, loop, watch)
    finally:
        watch.flowing.set()
        loop.stop()
        for task in (*tasks, old_task):
            task.cancel()
        await asyncio.gather(*tasks, old_task, return_exceptions=True)
        await new_leader.release()
        for client in clients:
            await client.close()
        await kubectl.call("DELETE", f"/api/v1/namespaces/{namespace}/pods?gracePeriodSeconds=0", ok=(200, 404))
        await kubectl.call("DELETE", f"{NODES}/{node}", ok=(200, 404))


async def _bind(kubectl: Kube, namespace: str, name: str, node: str) -> None:
    """The old leader's Binding of `name` to `node`, while it holds the Lease."""
    assert (await kubectl.call("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding",
                               {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                                "target": {"apiVersion": "v1", "kind": "Node", "name": node}})).status == 201


async def test_a_new_leader_counts_the_old_leaders_last_binding_its_watch_has_not_shown(
        control_plane: LocalControlPlane, kubectl: Kube, namespace: str) -> None:
    async with _takeover(control_plane, kubectl, namespace) as t:
        loop, node = t.loop, t.node
        # `first` enters the new replica's queue before `old`: it would be tried first. Both are
        # pinned to this test's one-GPU node: the shared control plane may hold other tests' GPU
        # nodes (gpu_scenario's map-n0 took `first` in a CI run), where `first` would simply fit
        for name in ("first", "old"):
            await kubectl.create_pod(namespace, b.pod(name, limits={"nvidia.com/gpu": 1},
                                                      spec_extra={"nodeSelector": {"kubernetes.io/hostname": node}}))
            await eventually(lambda: asyncio.sleep(0, f"{namespace}/{name}" in
                                                   {p.key for p in loop.core.state.pods.values()}))
        assert t.new_leader.term is None  # a standby: it has decided nothing
        t.watch.flowing.clear()  # from here the new replica's Pod watch lags
        await _bind(kubectl, namespace, "old", node)
        assert await t.old_leader.release()  # the old leader steps down; the new one takes over at once
        await eventually(lambda: asyncio.sleep(0, t.new_leader.term is not None))
        await eventually(lambda: asyncio.sleep(0, loop.stats.unschedulable >= 1), timeout=20)
        assert await _bound(kubectl, namespace) == {"old": node} and loop.stats.scheduled == 0
        t.watch.flowing.set()  # the lagging watch catches up: its older news must not undo the catch-up
        await asyncio.sleep(1.0)
        assert loop.stats.scheduled == 0 and await _bound(kubectl, namespace) == {"old": node}


async def test_a_new_leader_does_not_report_a_pod_deleted_while_its_watch_lagged_as_a_second_holder(
        control_plane: LocalControlPlane, kubectl: Kube, namespace: str) -> None:
    """Found live (adversary round 6): `x` held the node's GPU; while the standby's Pod watch
    lagged, `x` was deleted and the old leader bound `y` there. The new leader's catch-up added `y`
    and kept `x`, and published a Warning naming `x` (gone for 21 s) as a second holder. The
    catch-up's consistent LIST shows `x` gone: it leaves before `y` comes in."""
    async with _takeover(control_plane, kubectl, namespace) as t:
        loop, node = t.loop, t.node
        pinned = {"nodeSelector": {"kubernetes.io/hostname": node}}
        await kubectl.create_pod(namespace, b.pod("x", limits={"nvidia.com/gpu": 1}, spec_extra=pinned))
        await _bind(kubectl, namespace, "x", node)
        await eventually(lambda: asyncio.sleep(0, any(p.key == f"{namespace}/x" and loop.core.state.node_of(p.uid)
                                                      for p in loop.core.state.pods.values())))
        t.watch.flowing.clear()  # from here the new replica's Pod watch lags
        # a write before the delete (as a graceful delete's deletionTimestamp is): the lagging
        # watch's backlog holds x alive and bound, older than the catch-up's LIST
        await kubectl.call("PATCH", f"/api/v1/namespaces/{namespace}/pods/x", {"metadata": {"labels": {"going": "1"}}},
                           content_type="application/merge-patch+json")
        await kubectl.call("DELETE", f"/api/v1/namespaces/{namespace}/pods/x?gracePeriodSeconds=0")
        await kubectl.create_pod(namespace, b.pod("y", limits={"nvidia.com/gpu": 1}, spec_extra=pinned))
        await _bind(kubectl, namespace, "y", node)
        assert await t.old_leader.release()  # the new replica takes over, its watch still lagging
        await eventually(lambda: asyncio.sleep(0, t.new_leader.term is not None and loop._caught_up_term is not None))
        assert {p.key for p in loop.core.state.pods.values() if loop.core.state.node_of(p.uid) == node} == \
            {f"{namespace}/y"}
        # what the lagging watch's backlog brings to the core about x from here: nothing (before
        # the fix: x's MODIFIED came back in, bound, beside y, until its DELETED followed)
        after: list[str] = []
        apply = loop._on_event

        def watched(event_type: str, obj: dict[str, Any]) -> None:
            if obj.get("kind") == "Pod" and obj["metadata"]["name"] == "x":
                after.append(f"{event_type} {obj['metadata']['resourceVersion']}")
            apply(event_type, obj)
        for informer in loop.informers.informers:
            informer.sink = watched
        t.watch.flowing.set()  # the backlog arrives: x's older news must not bring it back
        await asyncio.sleep(1.5)  # the backlog delivered; any Event the takeover published written
        assert after == [], f"the lagging watch brought the deleted pod back: {after}"
        assert {p.key for p in loop.core.state.pods.values() if loop.core.state.node_of(p.uid) == node} == \
            {f"{namespace}/y"}
        reasons = [e.get("reason") for e in await kubectl.events(namespace)]
        assert "GPUsOvercommitted" not in reasons and "DeviceConflict" not in reasons, reasons
