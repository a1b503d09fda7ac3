"""An old leader's Binding that arrives after a new leader took over is refused (real apiserver).

The live break this reproduces: a proxy between the leader (rep-b) and the apiserver stopped
passing rep-b's requests; rep-b had decided a pod onto a GPU and its Binding POST sat in the
proxy; rep-b's Lease ran out, rep-a took over, saw the pod unbound and gave the GPU to a
higher-priority pod; the link healed, the old Binding landed (201), and two pods ran on one GPU.

What is real: etcd + kube-apiserver, both replicas' Leases (`LeaderElector`s on one Lease), both
`SchedulerLoop`s wired as `tessera run` wires them (rep-b's requests through the TLS fault proxy,
whose `hold_bindings` keeps its Binding POST until the test releases it), a PriorityClass. rep-b
is cut off by stopping its elector (no release: its Lease expires, as a partitioned leader's
does). Pods are pinned to this test's one-GPU node: the shared control plane keeps other tests'.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from scheduler.api.config import load_config
from scheduler.core import annotations as ann
from scheduler.kube.controlplane import LocalControlPlane
from scheduler.kube.http import KubeHttp, connect
from scheduler.kube.leader import LeaderElector
from scheduler.kube.loop import SchedulerLoop
from scheduler.kube.metrics import Metrics
from scheduler.kube.run_cli import MetricsHooks
from scheduler.sim import builders as b
from tessera_testing.faultproxy import FaultProxyThread, proxied
from tests.e2e.live import Kube, LaggingPodWatch, eventually
from tests.fakelease import Clock

NODES = "/api/v1/nodes"
PRIORITY_CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"
LEASE_NAMESPACE = "kube-system"
# renewDeadline well inside the lease: rep-b stops acting 2 s after its last renewal; rep-a's
# election starts only once its cache holds `pq`, so that its first decision sees both pods
TIMINGS: dict[str, Any] = {"lease_duration": 6.0, "renew_deadline": 2.0, "retry_period": 0.5}


def _replica(name: str, lease: str, lease_http: KubeHttp, http: KubeHttp,
             watch_http: KubeHttp) -> tuple[LeaderElector, SchedulerLoop]:
    """A replica as `tessera run` wires it: its elector's term and fence token drive its loop."""
    loop_ref: list[SchedulerLoop] = []
    elector = LeaderElector(lease_http, namespace=LEASE_NAMESPACE, name=lease, identity=name,
                            on_started_leading=lambda: loop_ref[0].leadership_started(),
                            on_stopped_leading=lambda: loop_ref[0].lost_leadership(), **TIMINGS)
    loop = SchedulerLoop(load_config("config/binpack.yaml"), http, watch_http, identity=name,
                         leader_term=lambda: elector.term, term_fence=lambda: elector.fence_token)
    loop_ref.append(loop)
    return elector, loop


async def _node_and_priority(kubectl: Kube, name: str, gpus: int, cordoned: bool = False) -> tuple[str, str]:
    """This test's own GPU node `name` (its pods are pinned to it: the shared control plane keeps
    other tests' nodes) and a PriorityClass `<name>-high` of value 1000; returns both names."""
    obj = b.node(name, gpus=gpus)
    obj["spec"]["unschedulable"] = cordoned
    await kubectl.create(NODES, obj)
    await kubectl.call("PATCH", f"{NODES}/{name}/status", {"status": obj["status"]},
                       content_type="application/merge-patch+json")
    high = f"{name}-high"
    await kubectl.create(PRIORITY_CLASSES, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                            "metadata": {"name": high}, "value": 1000})
    return name, high


async def _remove(kubectl: Kube, namespace: str, node: str, high: str) -> None:
    """Undo `_node_and_priority` and the test's pods (the control plane is shared)."""
    await kubectl.call("DELETE", f"/api/v1/namespaces/{namespace}/pods?gracePeriodSeconds=0", ok=(200, 404))
    await kubectl.call("DELETE", f"{NODES}/{node}", ok=(200, 404))
    await kubectl.call("DELETE", f"{PRIORITY_CLASSES}/{high}", ok=(200, 404))


async def _stop_then_remove(loops: Sequence[SchedulerLoop], tasks: Sequence[asyncio.Task[None]],
                            clients: Sequence[Any], kubectl: Kube, namespace: str, node: str, high: str,
                            release: LeaderElector | None = None) -> None:
    """Stop the `SchedulerLoop`s and cancel the tasks, hand `release`'s Lease back, close the
    clients, then `_remove`."""
    for loop in loops:
        loop.stop()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    if release is not None:
        await release.release()
    for client in clients:
        await client.close()
    await _remove(kubectl, namespace, node, high)


@dataclass
class _Deposed:
    """Two replicas on one Lease after rep-b, the leader, decided `pp` onto the node's one GPU and
    was cut off from the Lease with that Binding held in the proxy (`_deposed`)."""
    node: str
    high: str
    pinned: dict[str, Any]
    proxy: FaultProxyThread
    rep_a: LeaderElector
    loop_a: SchedulerLoop
    rep_b: LeaderElector
    loop_b: SchedulerLoop
    tasks: list[asyncio.Task[Any]]


@asynccontextmanager
async def _deposed(control_plane: LocalControlPlane, kubectl: Kube, namespace: str, tmp_path: Path, prefix: str,
                   metrics_b: Metrics | None = None) -> AsyncIterator[_Deposed]:
    """rep-b (its writes and reads through the proxy; its Lease and watches not: the test cuts it
    off from the Lease itself) leads, decides `pp` onto this test's one-GPU node, its Binding sits
    in the proxy, and its elector is stopped (no release): it stops acting. rep-a's loop runs and
    is synced; its elector is the test's to start. Everything is undone on the way out."""
    suffix = secrets.token_hex(3)
    node, high = await _node_and_priority(kubectl, f"{prefix}-{suffix}", gpus=1)
    lease = f"tessera-{prefix}-{suffix}"
    pinned = {"nodeSelector": {"kubernetes.io/hostname": node}}
    with proxied(control_plane.server, control_plane.ca_file) as proxy:
        kubeconfig = proxy.write_kubeconfig(tmp_path / "via-proxy", control_plane.admin_token)
        b_api, b_watch = await connect(str(kubeconfig)), await connect(str(control_plane.kubeconfig))
        b_lease_api = await connect(str(control_plane.kubeconfig))
        a_api, a_watch = await connect(str(control_plane.kubeconfig)), await connect(str(control_plane.kubeconfig))
        clients = [b_api, b_watch, b_lease_api, a_api, a_watch]
        rep_b, loop_b = _replica("rep-b", lease, KubeHttp(b_lease_api), KubeHttp(b_api), KubeHttp(b_watch))
        rep_a, loop_a = _replica("rep-a", lease, KubeHttp(a_api), KubeHttp(a_api), KubeHttp(a_watch))
        if metrics_b is not None:
            loop_b.hooks = MetricsHooks(metrics_b, loop_b)
        tasks = [asyncio.create_task(loop_b.run()), asyncio.create_task(rep_b.run())]
        try:
            await eventually(lambda: asyncio.sleep(0, rep_b.is_leader))
            tasks.append(asyncio.create_task(loop_a.run()))
            await asyncio.wait_for(loop_a.informers.wait_synced(), 30)
            proxy.configure(hold_bindings=True)
            # rep-b decides `pp` onto the node's one GPU; its Binding sits in the proxy
            await kubectl.create_pod(namespace, b.pod("pp", limits={"nvidia.com/gpu": 1}, spec_extra=pinned))
            await eventually(lambda: asyncio.sleep(0, proxy.proxy.bindings_held == 1), timeout=30)
            # rep-b is cut off from the Lease (no release): it stops acting, then its Lease expires
            tasks[1].cancel()
            await eventually(lambda: asyncio.sleep(0, rep_b.term is None), timeout=30)
            yield _Deposed(node, high, pinned, proxy, rep_a, loop_a, rep_b, loop_b, tasks)
        finally:
            proxy.configure(hold_bindings=False)
            proxy.release_bindings()
            await _stop_then_remove((loop_a, loop_b), tasks, clients, kubectl, namespace, node, high, release=rep_a)


async def _bound(kubectl: Kube, namespace: str) -> dict[str, str]:
    return {name: pod["spec"]["nodeName"] for name, pod in (await kubectl.pods(namespace)).items()
            if pod["spec"].get("nodeName")}


async def test_an_old_leaders_binding_delivered_after_a_takeover_is_refused(
        control_plane: LocalControlPlane, kubectl: Kube, namespace: str, tmp_path: Path) -> None:
    async with _deposed(control_plane, kubectl, namespace, tmp_path, "fence") as d:
        # a higher-priority pod for the same GPU, while nobody leads; rep-a's election starts only
        # once its cache holds `pq`, so that its first decision sees both pods
        await kubectl.create_pod(namespace, b.pod("pq", limits={"nvidia.com/gpu": 1},
                                                  spec_extra={**d.pinned, "priorityClassName": d.high}))
        await eventually(lambda: asyncio.sleep(0, any(p.key == f"{namespace}/pq"
                                                      for p in d.loop_a.core.state.pods.values())))
        # rep-a takes over, sees `pp` unbound and places `pq` first
        d.tasks.append(asyncio.create_task(d.rep_a.run()))
        await eventually(lambda: asyncio.sleep(0, d.rep_a.term is not None), timeout=30)
        assert d.rep_a.fence_token is not None
        await eventually(lambda: _has(kubectl, namespace, {"pq": d.node}), timeout=30)
        # the link heals: rep-b's Binding reaches the apiserver
        d.proxy.configure(hold_bindings=False)
        assert d.proxy.release_bindings() == 1
        await eventually(lambda: asyncio.sleep(0, d.loop_b.binder.in_flight == 0), timeout=30)
        assert await _bound(kubectl, namespace) == {"pq": d.node}, "the old leader's late Binding doubled the GPU"
        assert d.proxy.proxy.bindings_forwarded == 1
        pp = (await kubectl.pods(namespace))["pp"]
        assert pp["metadata"]["annotations"][ann.TERM] == d.rep_a.fence_token  # fenced before any decision


async def test_a_deposed_leaders_late_binding_claims_nothing_the_new_leader_bound_the_same_way(
        control_plane: LocalControlPlane, kubectl: Kube, namespace: str, tmp_path: Path) -> None:
    """Day-2 trial T item 5, live: the deposed leader rep-b's Binding of `pp` sits in the proxy;
    rep-a takes over, fences `pp` and binds it the same way (the node's one GPU). The held
    Binding then lands: 409, and rep-b's read-back shows `pp` on its node. rep-b used to call that
    its own success (`binder.bound_despite_error`, `tessera_bindings_total{result="success"}`, a
    second "Successfully assigned" Event); the pod carries rep-a's term token, so it is rep-a's
    Binding: rep-b counts a conflict and writes no Scheduled Event."""
    metrics_b = Metrics()
    async with _deposed(control_plane, kubectl, namespace, tmp_path, "claim", metrics_b) as d:
        d.tasks.append(asyncio.create_task(d.rep_a.run()))
        await eventually(lambda: _has(kubectl, namespace, {"pp": d.node}), timeout=30)  # rep-a's Binding
        d.proxy.configure(hold_bindings=False)
        assert d.proxy.release_bindings() == 1
        await eventually(lambda: asyncio.sleep(0, d.loop_b.binder.in_flight == 0), timeout=30)
        pp = (await kubectl.pods(namespace))["pp"]
        assert d.rep_a.fence_token is not None and pp["metadata"]["annotations"][ann.TERM] == d.rep_a.fence_token
        assert metrics_b.registry.get_sample_value("tessera_bindings_total", {"result": "conflict"}) == 1.0
        assert not metrics_b.registry.get_sample_value("tessera_bindings_total", {"result": "success"})
        await asyncio.sleep(1.0)  # rep-b's Events, had it recorded any, are written by now
        scheduled = [e for e in await kubectl.events(namespace)
                     if e["reason"] == "Scheduled" and e["regarding"]["name"] == "pp"]
        assert [e["reportingInstance"] for e in scheduled] == ["rep-a"], scheduled


async def _has(kubectl: Kube, namespace: str, wanted: dict[str, str]) -> bool:
    bound = await _bound(kubectl, namespace)
    return all(bound.get(name) == node for name, node in wanted.items())


async def test_a_leader_whose_clock_stood_still_stops_at_the_newer_terms_fence(
        control_plane: LocalControlPlane, kubectl: Kube, namespace: str) -> None:
    """Adversary round 4's break, in-process: rep-b leads on a clock that does not move (a clock
    running slow, or CLOCK_MONOTONIC stopped across a suspended VM) and its Lease writes no
    longer go out, so by its own clock it leads for ever. rep-a takes over when the record
    expires and fences the two pending low-priority pods on the cordoned node; rep-b's watch
    brings it the fenced versions, then lags. Two high-priority pods are bound to the node's two
    GPUs (by hand, as rep-a would) and the node is uncordoned. Before the fix rep-b, still
    "leading", bound the low pods at their fresh versions (the precondition holds): four pods on
    two GPUs. Now the newer term's token on the fenced pods ends rep-b's acting."""
    suffix = secrets.token_hex(3)
    node, high = await _node_and_priority(kubectl, f"stood-{suffix}", gpus=2, cordoned=True)
    lease = f"tessera-stood-{suffix}"
    pinned = {"nodeSelector": {"kubernetes.io/hostname": node}}
    clients = [await connect(str(control_plane.kubeconfig)) for _ in range(4)]
    stood_still = Clock()
    b_watch = LaggingPodWatch(KubeHttp(clients[1]))
    loop_ref: list[SchedulerLoop] = []
    rep_b = LeaderElector(KubeHttp(clients[0]), namespace=LEASE_NAMESPACE, name=lease, identity="rep-b",
                          clock=stood_still, on_started_leading=lambda: loop_ref[0].leadership_started(),
                          on_stopped_leading=lambda: loop_ref[0].lost_leadership(), **TIMINGS)
    loop_b = SchedulerLoop(load_config("config/binpack.yaml"), KubeHttp(clients[0]), cast(KubeHttp, b_watch),
                           identity="rep-b", leader_term=lambda: rep_b.term, term_fence=lambda: rep_b.fence_token,
                           on_term_seen=rep_b.saw_term)
    loop_ref.append(loop_b)
    rep_a, loop_a = _replica("rep-a", lease, KubeHttp(clients[2]), KubeHttp(clients[2]), KubeHttp(clients[3]))
    tasks = [asyncio.create_task(loop_b.run()), asyncio.create_task(loop_a.run())]
    try:
        await asyncio.wait_for(loop_b.informers.wait_synced(), 30)
        await asyncio.wait_for(loop_a.informers.wait_synced(), 30)
        await rep_b._acquire()  # rep-b takes the Lease once and never renews it (its writes are lost)
        rep_b._start_leading()
        assert rep_b.term is not None
        for i in range(2):
            await kubectl.create_pod(namespace, b.pod(f"low-{i}", limits={"nvidia.com/gpu": 1}, spec_extra=pinned))
        # rep-a takes over once rep-b's record has expired on its clock, and fences the low pods
        tasks.append(asyncio.create_task(rep_a.run()))
        await eventually(lambda: asyncio.sleep(0, rep_a.term is not None), timeout=30)
        token = rep_a.fence_token
        # rep-b's cache has the fenced versions; then its Pod watch lags
        await eventually(lambda: asyncio.sleep(0, sorted(
            p.meta.name for p in loop_b.core.state.pods.values()
            if p.meta.namespace == namespace and p.meta.annotations.get(ann.TERM) == token) == ["low-0", "low-1"]),
            timeout=30)
        b_watch.flowing.clear()
        # rep-a's own decisions are replaced by the test's (its loop stops; its elector keeps the
        # Lease): two high-priority pods bound to the node's two GPUs, as rep-a would bind them,
        # so that which pods rep-a picks first (a low pod whose backoff ends sooner) cannot vary
        loop_a.stop()
        tasks[1].cancel()
        for i in range(2):
            await kubectl.create_pod(namespace, b.pod(f"high-{i}", limits={"nvidia.com/gpu": 1},
                                                      spec_extra={**pinned, "priorityClassName": high}))
            assert (await kubectl.call("POST", f"/api/v1/namespaces/{namespace}/pods/high-{i}/binding",
                                       {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": f"high-{i}"},
                                        "target": {"apiVersion": "v1", "kind": "Node", "name": node}})).status == 201
        await kubectl.call("PATCH", f"{NODES}/{node}", {"spec": {"unschedulable": False}},
                           content_type="application/merge-patch+json")
        await asyncio.sleep(3.0)  # time for rep-b to bind, if it still acted (it sees two free GPUs)
        bound = await _bound(kubectl, namespace)
        assert loop_b.stats.scheduled == 0, f"a leader deposed while its clock stood still bound pods: {bound}"
        assert rep_b.term is None and bound == {"high-0": node, "high-1": node}
    finally:
        b_watch.flowing.set()
        await _stop_then_remove((loop_a, loop_b), tasks, clients, kubectl, namespace, node, high, release=rep_a)



async def test_a_binding_given_up_on_in_the_same_term_is_withdrawn_before_it_can_land(
        control_plane: LocalControlPlane, kubectl: Kube, namespace: str, tmp_path: Path) -> None:
    """Adversary round 4's other break, no clock tricks: one replica; pod X's Binding is held in a
    proxy; the replica loses the Lease, stops leading, and after the late-landing window gives X
    up; it takes its own record back (the same term: no fence) and binds a higher-priority pod Y
    onto the freed GPU; X's pending condition is written again unchanged, so X keeps its
    resourceVersion; then the proxy delivers X's Binding. Before the fix it landed (two pods on one
    GPU); now the binder withdrew it first (a pods/status write that changes X's version), and it
    gets 409."""
    suffix = secrets.token_hex(3)
    node, high = await _node_and_priority(kubectl, f"withdraw-{suffix}", gpus=1)
    lease = f"tessera-withdraw-{suffix}"
    pinned = {"nodeSelector": {"kubernetes.io/hostname": node}}
    with proxied(control_plane.server, control_plane.ca_file) as proxy:
        kubeconfig = proxy.write_kubeconfig(tmp_path / "via-proxy", control_plane.admin_token)
        api, watch, lease_api = (await connect(str(kubeconfig)), await connect(str(control_plane.kubeconfig)),
                                 await connect(str(control_plane.kubeconfig)))
        rep, loop = _replica("rep", lease, KubeHttp(lease_api), KubeHttp(api), KubeHttp(watch))
        loop.binder.timeout, loop.binder.late_landing = 2.0, 3.0  # the 30 s and 90 s of a real run, shortened
        tasks = [asyncio.create_task(loop.run()), asyncio.create_task(rep.run())]
        try:
            await eventually(lambda: asyncio.sleep(0, rep.is_leader))
            # X waits behind a filler (so its PodScheduled=False condition is written once)
            await kubectl.create_pod(namespace, b.pod("filler", limits={"nvidia.com/gpu": 1}, spec_extra=pinned))
            await eventually(lambda: _has(kubectl, namespace, {"filler": node}), timeout=30)
            await kubectl.create_pod(namespace, b.pod("x", limits={"nvidia.com/gpu": 1}, spec_extra=pinned))
            await eventually(lambda: _condition(kubectl, namespace, "x"), timeout=30)
            proxy.configure(hold_bindings=True)
            await kubectl.call("DELETE", f"/api/v1/namespaces/{namespace}/pods/filler?gracePeriodSeconds=0")
            await eventually(lambda: asyncio.sleep(0, proxy.proxy.bindings_held == 1), timeout=30)
            proxy.configure(hold_bindings=False)  # X's stays held; later Bindings go through
            # the replica loses the Lease (its elector stops, no release), gives X up after the window
            tasks[1].cancel()
            await eventually(lambda: asyncio.sleep(0, rep.term is None), timeout=30)
            await eventually(lambda: asyncio.sleep(0, loop.binder.in_flight == 0), timeout=30)
            # it takes its own record back: the same term, no fence
            tasks[1] = asyncio.create_task(rep.run())
            await eventually(lambda: asyncio.sleep(0, rep.term is not None), timeout=30)
            await kubectl.create_pod(namespace, b.pod("y", limits={"nvidia.com/gpu": 1},
                                                      spec_extra={**pinned, "priorityClassName": high}))
            await eventually(lambda: _has(kubectl, namespace, {"y": node}), timeout=30)
            await asyncio.sleep(1.0)  # X decided again: unschedulable, its condition written unchanged
            assert proxy.release_bindings() == 1  # the link heals: X's first Binding reaches the apiserver
            await asyncio.sleep(1.0)
            assert await _bound(kubectl, namespace) == {"y": node}, "a Binding given up on landed: a GPU twice"
        finally:
            proxy.configure(hold_bindings=False)
            proxy.release_bindings()
            await _stop_then_remove((loop,), tasks, (api, watch, lease_api), kubectl, namespace, node, high,
                                    release=rep)


async def _condition(kubectl: Kube, namespace: str, name: str) -> bool:
    """The pod has Tessera's PodScheduled=False condition."""
    pod = (await kubectl.pods(namespace)).get(name) or {}
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False"
               for c in (pod.get("status") or {}).get("conditions") or [])
