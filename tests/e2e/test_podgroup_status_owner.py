"""Tessera writes the status of its own PodGroups only, live.

A trial beside scheduler-plugins: its PodGroup controller still running, Tessera wrote the status
of every scheduler-plugins PodGroup, also those whose pods were all the other scheduler's, and the
two writers reverted each other (73 of 74 status patches in 10 s). Tessera now writes a
PodGroup's status only once a pod of one of Tessera's scheduler names names it (the PodGroup
itself names no scheduler). A group created before its pods, as Kubeflow's training operator
creates them, is nobody's Tessera knows until then: another scheduler's such group got Tessera's
`Pending` once (found in review); Tessera's own gets `Pending` from its first pod.

Here a real kube-apiserver: the other scheduler's group, created before its pods, is never
written by Tessera (no status, no `tessera` field manager on its status), nor is a group no pod
names yet, while Tessera's own group is, and the fresh one from its first pod of Tessera's; a
status the other writer puts on its group stands. Each step waits on a write of Tessera's own
group made after it, so "not written" is read after Tessera has seen everything before it.
"""

from __future__ import annotations

from typing import Any

from scheduler.sim import builders as b
from tests.e2e.live import Kube, eventually

NODES = "/api/v1/nodes"
PODGROUPS = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups"
PG_LABEL = "scheduling.x-k8s.io/pod-group"
MERGE = "application/merge-patch+json"


async def _group(kubectl: Kube, namespace: str, name: str) -> dict[str, Any]:
    group: dict[str, Any] = (await kubectl.call("GET", f"{PODGROUPS.format(ns=namespace)}/{name}")).json()
    return group


def _tessera_wrote_status(group: dict[str, Any]) -> bool:
    return any(entry.get("manager") == "tessera" and entry.get("subresource") == "status"
               for entry in group["metadata"].get("managedFields") or [])


async def _phase_is(kubectl: Kube, namespace: str, name: str, phase: str) -> bool:
    return ((await _group(kubectl, namespace, name)).get("status") or {}).get("phase") == phase


async def test_a_podgroup_whose_pods_are_another_schedulers_is_left_to_it(tessera: Any, kubectl: Kube,
                                                                          namespace: str) -> None:
    await tessera("config/binpack.yaml")
    node = b.node("pg-owner-1", gpus=4)
    await kubectl.create(NODES, node)
    await kubectl.call("PATCH", f"{NODES}/pg-owner-1/status", {"status": node["status"]}, content_type=MERGE)
    groups = PODGROUPS.format(ns=namespace)
    # every group before its pods, as a training operator creates them
    await kubectl.create(groups, b.podgroup("theirs", 2, namespace))
    await kubectl.create(groups, b.podgroup("fresh", 2, namespace))
    await kubectl.create(groups, b.podgroup("ours", 1, namespace))
    for i in range(2):
        await kubectl.create_pod(namespace, b.pod(f"theirs-{i}", labels={PG_LABEL: "theirs"},
                                                  scheduler="scheduler-plugins-scheduler"))
    await kubectl.create_pod(namespace, b.pod("ours-0", labels={PG_LABEL: "ours"}, limits={"nvidia.com/gpu": 1}))
    # Tessera's own group is written (bound, its pod not running yet); the other two are not
    assert await eventually(lambda: _phase_is(kubectl, namespace, "ours", "Scheduling"))
    for name in ("theirs", "fresh"):
        group = await _group(kubectl, namespace, name)
        assert not group.get("status") and not _tessera_wrote_status(group), group
    # the fresh group's first pod is Tessera's: one of two members, Pending
    await kubectl.create_pod(namespace, b.pod("fresh-0", labels={PG_LABEL: "fresh"}, limits={"nvidia.com/gpu": 1}))
    assert await eventually(lambda: _phase_is(kubectl, namespace, "fresh", "Pending"))
    assert _tessera_wrote_status(await _group(kubectl, namespace, "fresh"))
    theirs = await _group(kubectl, namespace, "theirs")
    assert not theirs.get("status") and not _tessera_wrote_status(theirs), theirs

    # the other writer (scheduler-plugins' controller) reports its group; its pods change meanwhile
    await kubectl.call("PATCH", f"{groups}/theirs/status", {"status": {"phase": "Scheduling", "running": 1}},
                       content_type=MERGE)
    await kubectl.call("PATCH", f"/api/v1/namespaces/{namespace}/pods/theirs-0",
                       {"metadata": {"labels": {"restarted": "1"}}}, content_type=MERGE)
    await kubectl.call("PATCH", f"/api/v1/namespaces/{namespace}/pods/ours-0/status",  # after it, a change
                       {"status": {"phase": "Running"}}, content_type=MERGE)  # Tessera writes to its own group
    assert await eventually(lambda: _phase_is(kubectl, namespace, "ours", "Running"))
    theirs = await _group(kubectl, namespace, "theirs")
    assert theirs["status"] == {"phase": "Scheduling", "running": 1}, theirs["status"]
    assert not _tessera_wrote_status(theirs)

