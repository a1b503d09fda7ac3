"""NodePorts on a real apiserver, side by side with the real kube-scheduler v1.36.3: two
hostNetwork pods wanting one port on the only node (the apiserver defaults each hostPort to its
containerPort, as for RDMA/NCCL training pods): the first is bound, the second stays Pending with
upstream's FailedScheduling note and PodScheduled condition from both schedulers (but for the one
word of a plugin Tessera does not have, see UPSTREAM_NOTE). Each scheduler's
pair uses its own port, so the two pairs do not meet. The rules are in tests/replay/test_node_ports.py."""

from __future__ import annotations

from typing import Any

from scheduler.sim import builders as b
from tests.e2e.live import Kube, eventually

NODES = "/api/v1/nodes"
NOTE = ("0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports. "
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")
# kube-scheduler v1.36.3's note has its DynamicResources PostFilter's word before preemption's
# (dynamicresources.go PostFilter: "no new claims to deallocate", for a pod without claims);
# Tessera has no DynamicResources plugin and leaves it out
UPSTREAM_NOTE = NOTE.replace(" preemption:", " no new claims to deallocate, preemption:")


def _pod(name: str, port: int, tessera: bool) -> dict[str, Any]:
    main = b.container("main", requests={"cpu": "100m"})
    main["ports"] = [{"containerPort": port}]  # hostPort: defaulted by the apiserver (hostNetwork)
    pod = b.pod(name, containers=[main], spec_extra={"hostNetwork": True})
    if not tessera:
        del pod["spec"]["schedulerName"]
    return pod


async def _failed_scheduling(kubectl: Kube, namespace: str, pod: str) -> dict[str, Any] | None:
    events = [e for e in await kubectl.events(namespace)
              if e["regarding"]["name"] == pod and e["reason"] == "FailedScheduling"]
    return events[0] if events else None


async def _pod_scheduled(kubectl: Kube, namespace: str, pod: str) -> dict[str, Any] | None:
    conditions = (await kubectl.pods(namespace))[pod].get("status", {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "PodScheduled"), None)


async def _bound(kubectl: Kube, namespace: str, pod: str) -> str | None:
    return (await kubectl.pods(namespace))[pod]["spec"].get("nodeName") or None


async def test_a_taken_host_port_keeps_the_second_pod_pending_as_kube_scheduler_does(
        tessera: Any, kubectl: Kube, namespace: str, clean_cluster: Any) -> None:
    clean_cluster.start_kube_scheduler()
    await tessera("config/binpack.yaml")
    node = b.node("ports-1")
    await kubectl.create(NODES, node)
    await kubectl.call("PATCH", f"{NODES}/ports-1/status", {"status": node["status"]},
                       content_type="application/merge-patch+json")
    await kubectl.create_pod(namespace, _pod("mine-1", 8080, tessera=True))
    await kubectl.create_pod(namespace, _pod("theirs-1", 9090, tessera=False))
    assert await eventually(lambda: _bound(kubectl, namespace, "mine-1")) == "ports-1"
    assert await eventually(lambda: _bound(kubectl, namespace, "theirs-1")) == "ports-1"
    created = (await kubectl.pods(namespace))["mine-1"]
    assert created["spec"]["containers"][0]["ports"][0]["hostPort"] == 8080  # the apiserver's default
    await kubectl.create_pod(namespace, _pod("mine-2", 8080, tessera=True))
    await kubectl.create_pod(namespace, _pod("theirs-2", 9090, tessera=False))

    upstream = await eventually(lambda: _failed_scheduling(kubectl, namespace, "theirs-2"))
    ours = await eventually(lambda: _failed_scheduling(kubectl, namespace, "mine-2"))
    assert upstream["reportingController"] == "default-scheduler" and ours["reportingController"] == "tessera"
    assert ours["type"] == upstream["type"] == "Warning"
    assert (ours["note"], upstream["note"]) == (NOTE, UPSTREAM_NOTE)
    upstream_condition = await eventually(lambda: _pod_scheduled(kubectl, namespace, "theirs-2"))
    our_condition = await eventually(lambda: _pod_scheduled(kubectl, namespace, "mine-2"))
    assert [(c["status"], c["reason"], c["message"]) for c in (our_condition, upstream_condition)] == [
        ("False", "Unschedulable", NOTE), ("False", "Unschedulable", UPSTREAM_NOTE)]
    pods = await kubectl.pods(namespace)
    assert not pods["mine-2"]["spec"].get("nodeName") and not pods["theirs-2"]["spec"].get("nodeName")
