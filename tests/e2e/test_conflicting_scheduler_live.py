"""Two Tesseras on two Leases on the same nodes: the leaders see each other (real apiserver).

Two installs naming the same `schedulerName` on different Leases (two Helm releases, the README's
`tessera run` beside the chart) both lead and both bind: one GPU can go to two pods. Nothing
stops that in the API; what Tessera can do is make it loud the first time one leader watches the
other write a pod of its scheduler names. What is real: etcd + kube-apiserver, two
`LeaderElector`s on two Leases, two `SchedulerLoop`s wired as `tessera run` wires them (term fence
token, `saw_term`, `other_lease`). The pod first waits (its node selector matches no node), so
both caches hold it pending and both write PodScheduled=False with their term's token; then its
node appears, and one of them binds it. Either way each watches a write of the other's.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import TYPE_CHECKING, Any

from scheduler.api.config import load_config, parse_config_text
from scheduler.api.config_model import SchedulerConfig
from scheduler.core import annotations as ann
from scheduler.kube.conflicting import REASON
from scheduler.kube.controlplane import LocalControlPlane
from scheduler.kube.http import KubeHttp, connect
from scheduler.kube.leader import LeaderElector
from scheduler.kube.loop import SchedulerLoop
from scheduler.sim import builders as b
from tests.e2e.live import Kube, eventually
from tests.helpers import LeaseTimings

if TYPE_CHECKING:  # the generated client's package stays unimported (scheduler/kube/lean_client.py)
    from kubernetes_asyncio.client import ApiClient

NODES = "/api/v1/nodes"
LEASE_NAMESPACE = "kube-system"
TIMINGS: LeaseTimings = {"lease_duration": 6.0, "renew_deadline": 2.0, "retry_period": 0.5}


def _install(identity: str, lease: str, http: KubeHttp, watch_http: KubeHttp,
             config: SchedulerConfig | None = None) -> tuple[LeaderElector, SchedulerLoop]:
    loop_ref: list[SchedulerLoop] = []
    elector = LeaderElector(http, namespace=LEASE_NAMESPACE, name=lease, identity=identity,
                            on_started_leading=lambda: loop_ref[0].leadership_started(),
                            on_stopped_leading=lambda: loop_ref[0].lost_leadership(), **TIMINGS)
    loop = SchedulerLoop(config or load_config(None), http, watch_http, identity=identity,
                         leader_term=lambda: elector.term, term_fence=lambda: elector.fence_token,
                         on_term_seen=elector.saw_term, other_lease=elector.other_lease)
    loop_ref.append(loop)
    return elector, loop



async def _tear_down(kubectl: Kube, namespace: str, node: str, installs: dict[str, tuple[LeaderElector, SchedulerLoop]],
                     tasks: list[asyncio.Task[Any]], clients: list[ApiClient]) -> None:
    """Stop both installs (their Leases released), close their clients, and remove the test's
    pods and node (the control plane is shared)."""
    for _, loop in installs.values():
        loop.stop()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for elector, _ in installs.values():
        await elector.release()
    for client in clients:
        await client.close()
    await kubectl.call("DELETE", f"/api/v1/namespaces/{namespace}/pods?gracePeriodSeconds=0", ok=(200, 404))
    await kubectl.call("DELETE", f"{NODES}/{node}", ok=(200, 404))

async def test_each_leader_reports_the_other_install_writing_its_pods(
        control_plane: LocalControlPlane, kubectl: Kube, namespace: str) -> None:
    suffix = secrets.token_hex(3)
    node, label = f"conflict-{suffix}", f"conflict-{suffix}"
    leases = {"install-a": f"tessera-a-{suffix}", "install-b": f"tessera-b-{suffix}"}
    clients = [await connect(str(control_plane.kubeconfig)) for _ in range(4)]
    installs = {identity: _install(identity, lease, KubeHttp(clients[2 * i]), KubeHttp(clients[2 * i + 1]))
                for i, (identity, lease) in enumerate(leases.items())}
    tasks = [asyncio.create_task(task()) for elector, loop in installs.values() for task in (loop.run, elector.run)]
    try:
        await eventually(lambda: asyncio.sleep(0, all(e.is_leader for e, _ in installs.values())), timeout=30)
        for _, loop in installs.values():
            await asyncio.wait_for(loop.informers.wait_synced(), 30)
        await kubectl.create_pod(namespace, b.pod("p", limits={"nvidia.com/gpu": 1},
                                                  spec_extra={"nodeSelector": {"conflict": label}}))

        async def both_wrote() -> bool:  # each install has decided the pod once (its FailedScheduling)
            return {e.get("reportingInstance") for e in await kubectl.events(namespace)} >= set(leases)

        await eventually(both_wrote, timeout=30)
        obj = b.node(node, gpus=1)
        obj["metadata"]["labels"]["conflict"] = label
        await kubectl.create(NODES, obj)
        await kubectl.call("PATCH", f"{NODES}/{node}/status", {"status": obj["status"]},
                           content_type="application/merge-patch+json")

        async def reported() -> list[dict[str, Any]]:
            return [e for e in await kubectl.events(namespace) if e.get("reason") == REASON]

        events = await eventually(reported, timeout=30)

        async def bound() -> dict[str, Any] | None:
            pod = (await kubectl.pods(namespace))["p"]
            return pod if pod["spec"].get("nodeName") == node else None

        pod = await eventually(bound, timeout=30)
        for event in events:
            reporter = event["reportingInstance"]
            other = next(lease for identity, lease in leases.items() if identity != reporter)
            assert event["type"] == "Warning" and event["regarding"]["name"] == "p"
            assert f"Lease {LEASE_NAMESPACE}/{other}" in event["note"], event["note"]
            assert f"leads on Lease {LEASE_NAMESPACE}/{leases[reporter]}" in event["note"], event["note"]
            assert installs[reporter][1].conflicting.writes[f"{LEASE_NAMESPACE}/{other}"] >= 1
        # the Binding carried the binding install's token; its own Lease is never counted as another's
        winner = next(identity for identity, (elector, _) in installs.items()
                      if pod["metadata"]["annotations"][ann.TERM] == elector.fence_token)
        assert f"{LEASE_NAMESPACE}/{leases[winner]}" not in installs[winner][1].conflicting.writes
    finally:
        await _tear_down(kubectl, namespace, node, installs, tasks, clients)


async def test_another_install_on_other_scheduler_names_is_reported_and_a_forged_token_is_not(
        control_plane: LocalControlPlane, kubectl: Kube, namespace: str) -> None:
    """Adversary round 10: a second install on its own scheduler name (`tessera-b`) on the same
    nodes gives GPUs twice just the same (F1): install A sees B's Binding of a `tessera-b` pod and
    reports it. A token written onto a pod of yet another scheduler (F2/F3: a user's PATCH, no
    admission policy here) — naming B's Lease, or no Lease and a newer term — neither counts nor
    makes A doubt its term."""
    suffix = secrets.token_hex(3)
    node = f"names-{suffix}"
    leases = {"install-a": f"tessera-a-{suffix}", "install-b": f"tessera-b-{suffix}"}
    config_b = parse_config_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                                 "profiles:\n- schedulerName: tessera-b\n", "install-b")
    clients = [await connect(str(control_plane.kubeconfig)) for _ in range(4)]
    installs = {identity: _install(identity, lease, KubeHttp(clients[2 * i]), KubeHttp(clients[2 * i + 1]),
                                   config_b if identity == "install-b" else None)
                for i, (identity, lease) in enumerate(leases.items())}
    a, loop_a = installs["install-a"]
    tasks = [asyncio.create_task(task()) for elector, loop in installs.values() for task in (loop.run, elector.run)]
    try:
        await eventually(lambda: asyncio.sleep(0, all(e.is_leader for e, _ in installs.values())), timeout=30)
        for _, loop in installs.values():
            await asyncio.wait_for(loop.informers.wait_synced(), 30)
        term = a.term
        bystander = await kubectl.create_pod(namespace, b.pod("bystander", scheduler="someone-else",
                                                              requests={"cpu": "10m"}))
        forged = [f"{LEASE_NAMESPACE}/{leases['install-b']}/mallory/7/t", "x/1000001/t", "x/1000002/t"]
        for token in forged:
            await kubectl.call("PATCH", f"/api/v1/namespaces/{namespace}/pods/bystander",
                               {"metadata": {"annotations": {ann.TERM: token}}},
                               content_type="application/merge-patch+json")

        async def a_saw_the_last() -> bool:
            pod = loop_a.core.state.pods.get(bystander["metadata"]["uid"])
            return pod is not None and pod.meta.annotations.get(ann.TERM) == forged[-1]

        await eventually(a_saw_the_last, timeout=30)
        assert a.is_leader and a.term == term and not loop_a.conflicting.writes
        obj = b.node(node, gpus=1)
        await kubectl.create(NODES, obj)
        await kubectl.call("PATCH", f"{NODES}/{node}/status", {"status": obj["status"]},
                           content_type="application/merge-patch+json")
        await kubectl.create_pod(namespace, b.pod("theirs", scheduler="tessera-b", limits={"nvidia.com/gpu": 1}))

        async def reported() -> list[dict[str, Any]]:
            return [e for e in await kubectl.events(namespace) if e.get("reason") == REASON]

        [event] = await eventually(reported, timeout=30)
        assert event["reportingInstance"] == "install-a" and event["regarding"]["name"] == "theirs"
        assert "bound this pod of schedulerName tessera-b" in event["note"], event["note"]
        assert event["note"].endswith("run one install per set of GPU nodes, with every scheduler name it serves "
                                      "in its profiles"), event["note"]
        assert dict(loop_a.conflicting.writes) == {f"{LEASE_NAMESPACE}/{leases['install-b']}": 1}
        assert a.is_leader and a.term == term
    finally:
        await _tear_down(kubectl, namespace, node, installs, tasks, clients)
