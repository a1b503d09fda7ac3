"""A high-priority pod preempts a low-priority pod whose Binding is in flight (real apiserver).

The live adversary's break: `low`'s Binding was out (assumed, not bound) when `high` came for the
same GPU; `high` read "No preemption victims found for incoming pod" until the unschedulable
queue's flush. kube-scheduler takes assumed pods as victims (they are in its snapshot's NodeInfo)
and evicts them through the API; so does Tessera now, and `low` keeps its GPU until it is gone.

What is real: etcd + kube-apiserver, a `SchedulerLoop` wired as `tessera run` wires it, its writes
through the TLS fault proxy, whose `hold_bindings` keeps `low`'s Binding POST until the test
releases it (the binder's own 30 s timeout is longer than the test waits for `high`). No kubelet is
needed: an unbound pod is deleted at once. Pods are pinned to this test's own one-GPU node.
"""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path

from scheduler.api.config import load_config
from scheduler.kube.controlplane import LocalControlPlane
from scheduler.kube.http import KubeHttp, connect
from scheduler.kube.loop import SchedulerLoop
from scheduler.sim import builders as b
from tessera_testing.faultproxy import proxied
from tests.e2e.live import Kube, eventually
from tests.e2e.test_binding_fence_live import _bound, _has, _node_and_priority, _stop_then_remove


async def _gone(kubectl: Kube, namespace: str, name: str) -> bool:
    return name not in await kubectl.pods(namespace)


async def test_a_pod_whose_binding_is_in_flight_is_preempted_at_once(
        control_plane: LocalControlPlane, kubectl: Kube, namespace: str, tmp_path: Path) -> None:
    suffix = secrets.token_hex(3)
    node, high = await _node_and_priority(kubectl, f"inflight-{suffix}", gpus=1)
    pinned = {"nodeSelector": {"kubernetes.io/hostname": node}}
    with proxied(control_plane.server, control_plane.ca_file) as proxy:
        kubeconfig = proxy.write_kubeconfig(tmp_path / "via-proxy", control_plane.admin_token)
        api, watch = await connect(str(kubeconfig)), await connect(str(control_plane.kubeconfig))
        loop = SchedulerLoop(load_config("config/binpack.yaml"), KubeHttp(api), KubeHttp(watch),
                             identity=f"inflight-{suffix}")
        task = asyncio.create_task(loop.run())
        try:
            await asyncio.wait_for(loop.informers.wait_synced(), 30)
            proxy.configure(hold_bindings=True)
            await kubectl.create_pod(namespace, b.pod("low", limits={"nvidia.com/gpu": 1}, spec_extra=pinned))
            await eventually(lambda: asyncio.sleep(0, proxy.proxy.bindings_held == 1), timeout=30)
            proxy.configure(hold_bindings=False)  # low's stays held; later Bindings go through
            await kubectl.create_pod(namespace, b.pod("high", limits={"nvidia.com/gpu": 1},
                                                      spec_extra={**pinned, "priorityClassName": high}))
            # before the fix: "No preemption victims found" until low's Binding timed out (30 s)
            # and landed, or the unschedulable flush
            await eventually(lambda: _gone(kubectl, namespace, "low"), timeout=15)
            await eventually(lambda: _has(kubectl, namespace, {"high": node}), timeout=15)
            events = await kubectl.events(namespace)
            [preempted] = [e for e in events if e["reason"] == "Preempted" and e["regarding"]["name"] == "low"]
            high_uid = (await kubectl.pods(namespace))["high"]["metadata"]["uid"]
            assert preempted["note"] == f"Preempted by pod {high_uid} on node {node}"
            assert not [e for e in events if e["reason"] == "FailedScheduling" and e["regarding"]["name"] == "high"
                        and "No preemption victims" in e["note"]]
            # the link heals: low's Binding reaches the apiserver, for a pod that is gone
            assert proxy.release_bindings() == 1
            await eventually(lambda: asyncio.sleep(0, loop.binder.in_flight == 0), timeout=30)
            assert await _bound(kubectl, namespace) == {"high": node}
        finally:
            proxy.configure(hold_bindings=False)
            proxy.release_bindings()
            await _stop_then_remove((loop,), (task,), (api, watch), kubectl, namespace, node, high)
