"""A PodGroupScheduled condition wished for one PodGroup never lands on another created under its name.

A Workload API PodGroup deleted and created again (a Job re-submitted) while a status PATCH for the old one is
on the wire: the writer forgets the old group's wish on its DELETED event, but cannot recall a
request already sent, and a PATCH names the object only by its path. Without a precondition the
old group's PodGroupScheduled condition lands on the new group (which reads True before it was
ever tried, and Tessera never writes True -> False; until a cycle tries it Tessera has nothing of
its own to write over it). The writer now carries the group's uid in its status patches, as
upstream's status writers do for pods
(k8s v1.36.3 pkg/util/pod/pod.go preparePatchBytesForPodStatus: "only put the uid in the new
object to ensure it appears in the patch as a precondition"); the apiserver refuses a patch whose
uid is not the object's.
(A scheduler-plugins PodGroup is a CRD, whose status subresource copies the stored metadata over
the patch's, so a uid there is no precondition: its late status is written over instead, see
StatusWriter.pod_group.)
Here the late PATCH is played by a wish made for the old object and written after the new one
exists.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio

from scheduler.kube.controlplane import LocalControlPlane
from scheduler.kube.http import KubeHttp, Response
from scheduler.kube.status import StatusWriter
from tests.e2e.live import Kube, eventually

WORKLOAD = "/apis/scheduling.k8s.io/v1alpha2/namespaces/{ns}/podgroups"


async def _recreate(kube: Kube, groups: str, obj: dict[str, Any]) -> tuple[str, str]:
    """Create the group, delete it, create it again: (old uid, new uid)."""
    old = (await kube.call("POST", groups, obj)).json()["metadata"]["uid"]
    await kube.call("DELETE", f"{groups}/{obj['metadata']['name']}")

    async def gone() -> bool:
        return (await kube.call("GET", f"{groups}/{obj['metadata']['name']}", ok=(200, 404))).status == 404

    assert await eventually(gone, timeout=30)
    new = (await kube.call("POST", groups, obj)).json()["metadata"]["uid"]
    assert new != old
    return old, new


class _Answered(KubeHttp):
    """The writer's client, keeping the status of every answer the apiserver gave it."""

    def __init__(self, http: KubeHttp) -> None:
        super().__init__(http.api)
        self.statuses: list[int] = []

    async def request(self, method: str, path: str, **kwargs: Any) -> Response:
        response = await super().request(method, path, **kwargs)
        self.statuses.append(response.status)
        return response


async def _write(writer: StatusWriter, http: _Answered) -> int:
    """Let the writer send what is wished and return the apiserver's answer to it (a refused
    write is not retried). Waits for the answer itself, not a fixed time: a write still on its
    way when a pause ended read as refused, and the next write's check failed."""
    answered = len(http.statuses)
    async with anyio.create_task_group() as group:
        group.start_soon(writer.run)
        await eventually(lambda: asyncio.sleep(0, len(http.statuses) > answered), timeout=30)
        group.cancel_scope.cancel()
    [status] = http.statuses[answered:]
    return status


async def test_a_podgroupscheduled_wished_for_a_deleted_group_does_not_land_on_its_successor(
        control_plane: LocalControlPlane, namespace: str) -> None:
    kube = await Kube.connect(control_plane.kubeconfig)
    try:
        groups = WORKLOAD.format(ns=namespace)
        obj = {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup", "metadata": {"name": "train"},
               "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}
        old, new = await _recreate(kube, groups, obj)
        http = _Answered(kube.http)
        writer = StatusWriter(http, lambda *_: None)
        writer.workload_pod_group(namespace, "train", True, "Scheduled", "", transition=True, uid=old)
        assert await _write(writer, http) == 422  # refused: "metadata.uid: ... field is immutable"
        status = (await kube.call("GET", f"{groups}/train")).json().get("status") or {}
        assert not status.get("conditions"), f"the old group's condition landed on the new one: {status}"
        writer.workload_pod_group(namespace, "train", False, "Unschedulable", "pod group is unschedulable",
                                  transition=True, uid=new)
        assert await _write(writer, http) == 200
        [condition] = (await kube.call("GET", f"{groups}/train")).json()["status"]["conditions"]
        assert (condition["type"], condition["status"]) == ("PodGroupScheduled", "False")
    finally:
        await kube.close()
