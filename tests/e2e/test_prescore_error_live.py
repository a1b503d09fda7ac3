"""A preferred node-affinity term kube-scheduler cannot parse, side by side with the real
kube-scheduler v1.36.3 on a real apiserver: the apiserver accepts the pod, both schedulers fail
its cycle with the same FailedScheduling note and PodScheduled=False reason SchedulerError, and
neither places it (two feasible nodes: NodeAffinity's PreScore runs). The core's rules are in
tests/unit/test_prescore_errors.py; this shows the exact words against the binary."""

from __future__ import annotations

from typing import Any

from scheduler.sim import builders as b
from tests.e2e.live import Kube, eventually

NODES = "/api/v1/nodes"
PREFERRED = {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 1, "preference": {"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["abc"]}]}}]}}}


async def _failed_scheduling(kubectl: Kube, namespace: str, pod: str) -> dict[str, Any] | None:
    events = [e for e in await kubectl.events(namespace)
              if e["regarding"]["name"] == pod and e["reason"] == "FailedScheduling"]
    return events[0] if events else None


async def _pod_scheduled(kubectl: Kube, namespace: str, pod: str) -> dict[str, Any] | None:
    conditions = (await kubectl.pods(namespace))[pod].get("status", {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "PodScheduled"), None)


async def test_tessera_fails_the_cycle_as_kube_scheduler_does(tessera: Any, kubectl: Kube, namespace: str,
                                                              clean_cluster: Any) -> None:
    clean_cluster.start_kube_scheduler()
    await tessera("config/binpack.yaml")
    for name in ("prescore-1", "prescore-2"):
        node = b.node(name)
        await kubectl.create(NODES, node)
        await kubectl.call("PATCH", f"{NODES}/{name}/status", {"status": node["status"]},
                           content_type="application/merge-patch+json")
    await kubectl.create_pod(namespace, b.pod("mine", requests={"cpu": "100m"}, spec_extra=PREFERRED))
    theirs = b.pod("theirs", requests={"cpu": "100m"}, spec_extra=PREFERRED)
    del theirs["spec"]["schedulerName"]
    await kubectl.create_pod(namespace, theirs)

    upstream = await eventually(lambda: _failed_scheduling(kubectl, namespace, "theirs"))
    ours = await eventually(lambda: _failed_scheduling(kubectl, namespace, "mine"))
    assert upstream["reportingController"] == "default-scheduler" and ours["reportingController"] == "tessera"
    assert ours["type"] == upstream["type"] == "Warning"
    assert ours["note"] == upstream["note"] == (
        'running PreScore plugin "NodeAffinity": [0].matchExpressions[0].values[0]: Invalid value: "abc": '
        "for 'Gt', 'Lt' operators, the value must be an integer")
    upstream_condition = await eventually(lambda: _pod_scheduled(kubectl, namespace, "theirs"))
    our_condition = await eventually(lambda: _pod_scheduled(kubectl, namespace, "mine"))
    assert [(c["status"], c["reason"], c["message"]) for c in (our_condition, upstream_condition)] == [
        ("False", "SchedulerError", upstream["note"])] * 2
    pods = await kubectl.pods(namespace)
    assert not pods["mine"]["spec"].get("nodeName") and not pods["theirs"]["spec"].get("nodeName")
