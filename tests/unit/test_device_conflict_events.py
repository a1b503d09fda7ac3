"""A DeviceConflict Warning lands on a tenant's pod: it names no pod of another namespace.

A review after the Preempting Event stopped naming other namespaces' victims (e0da1a5) found the
same leak in the DeviceConflict Events: the pod's Warning named every other holder of its GPU
(`team-b/b that holds it`), whatever its namespace. Pods of the Event's namespace are named, the
others counted (`scheduler.core.tenants.pods_named`); the log line (operators') still names every
holder, which an audit needs once the pods are gone.
"""

from __future__ import annotations

import copy
from collections.abc import MutableMapping
from typing import Any

import anyio
import structlog.testing

from scheduler.api.config import load_config
from scheduler.core import annotations as ann
from scheduler.core.tenants import pods_named
from scheduler.kube.http import KubeHttp
from scheduler.kube.loop import SchedulerLoop
from scheduler.sim import builders as b
from tests.fakeapi import FakeApi
from tests.helpers import until

GI = 2**30
SHARED = "class.tessera.dev/t4-shared"
WHOLE = "class.tessera.dev/t4"


def _cluster(api: FakeApi) -> dict[str, Any]:
    """Node `n` with one 16Gi T4 a class hands out whole and one in slices of its memory: the device."""
    device = b.device("n", 0, model="T4", memory="16Gi")
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=1)]
    api.lists["/apis/tessera.dev/v1alpha1/extendedresources"] = [device]
    api.lists["/apis/tessera.dev/v1alpha1/resourceclasses"] = [
        b.resource_class("t4-shared", match_labels={"model": "T4"}, sharing={"dimension": "memory", "unit": "1Gi"}),
        b.resource_class("t4", match_labels={"model": "T4"})]
    return device


def _holds(device: dict[str, Any], gib: int = 0) -> dict[str, str]:
    """The devices annotation of a pod holding `device` whole (`gib` 0) or a slice of `gib` Gi of its memory."""
    grant = ann.DeviceGrant(device["spec"]["deviceID"], device["metadata"]["name"], gib * GI if gib else None,
                            "memory" if gib else "")
    return {ann.DEVICES: ann.encode_devices({"main": {SHARED if gib else WHOLE: (grant,)}})}


def _bound_now(loop: SchedulerLoop, name: str, namespace: str, device: dict[str, Any], gib: int) -> None:
    """A pod seen pending, then bound to `n` holding `device` (another writer's Binding, seen live)."""
    pending = b.pod(name, namespace, limits={SHARED if gib else WHOLE: gib or 1}, priority=0)
    pending["metadata"]["resourceVersion"] = "40"
    loop._apply("ADDED", pending)
    bound = copy.deepcopy(pending)
    bound["metadata"]["resourceVersion"] = "41"
    bound["metadata"]["annotations"] = {**_holds(device, gib), ann.PHASE: ann.PHASE_ALLOCATED}
    bound["spec"]["nodeName"] = "n"
    loop._apply("MODIFIED", bound)


def _conflicts(api: FakeApi) -> list[dict[str, Any]]:
    return [event for event in api.events.values() if event["reason"] == "DeviceConflict"]


async def _conflict(api: FakeApi, device: dict[str, Any],
                    live: tuple[str, str, int] | None = None,
                    count: int = 1) -> tuple[list[dict[str, Any]], list[MutableMapping[str, Any]]]:
    """Run a loop on `api` (then bind `live`, (name, namespace, Gi), once its caches are complete)
    until it records `count` DeviceConflicts: those Events and the log lines."""
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t")  # type: ignore[arg-type]
    with structlog.testing.capture_logs() as logs:
        async with anyio.create_task_group() as owner:
            owner.start_soon(loop.run)
            if live is not None:
                await until(lambda: loop.informers.synced)
                _bound_now(loop, live[0], live[1], device, live[2])
            await until(lambda: len(_conflicts(api)) >= count)
            owner.cancel_scope.cancel()
    return _conflicts(api), [line for line in logs if line.get("reason") == "DeviceConflict"]


async def test_a_gpu_held_whole_twice_names_no_holder_of_another_namespace() -> None:
    api = FakeApi()
    device = _cluster(api)
    for name, namespace in (("a", "team-a"), ("b", "team-b"), ("c", "team-a")):
        api.add_pod(b.pod(name, namespace, node_name="n", phase="Running", annotations=_holds(device)))
    events, logs = await _conflict(api, device, count=2)  # on the pods charged after the first (a)
    name = device["metadata"]["name"]
    notes = {f"{event['regarding']['namespace']}/{event['regarding']['name']}": event["note"] for event in events}
    exclusively = f"device {name} is assigned to more than one pod exclusively"
    assert notes == {"team-b/b": f"{exclusively}: team-b/b, and 1 pod in another namespace that holds it",
                     "team-a/c": f"{exclusively}: team-a/c, and team-a/a and 1 pod in another namespace that hold it"}
    assert sorted(line["message"] for line in logs) == [  # the operators' lines name every holder
        f"{exclusively}: team-a/c, and team-a/a, team-b/b that hold it",
        f"{exclusively}: team-b/b, and team-a/a that holds it"]


async def test_a_slice_beside_a_whole_hold_names_no_holder_of_another_namespace() -> None:
    api = FakeApi()
    device = _cluster(api)
    api.add_pod(b.pod("w", "team-a", node_name="n", phase="Running", annotations=_holds(device)))
    [event], logs = await _conflict(api, device, live=("s", "team-b", 4))
    assert event["regarding"]["name"] == "s"
    assert event["note"] == (f"device {device['metadata']['name']} is held whole and by another pod besides: "
                             "team-b/s (a slice), and 1 pod in another namespace that holds it whole")
    assert [line["message"] for line in logs] == [
        f"device {device['metadata']['name']} is held whole and by another pod besides: team-b/s (a slice), and "
        "team-a/w that holds it whole"]


async def test_slices_beyond_capacity_name_no_holder_of_another_namespace() -> None:
    api = FakeApi()
    device = _cluster(api)
    api.add_pod(b.pod("q1", "team-a", node_name="n", phase="Running", annotations=_holds(device, 10)))
    [event], logs = await _conflict(api, device, live=("q2", "team-b", 10))
    assert event["regarding"]["name"] == "q2"
    assert event["note"] == (f"device {device['metadata']['name']} is shared beyond its capacity: team-b/q2, and "
                             "1 pod in another namespace that holds a slice of it, use 20Gi of its 16Gi memory")
    assert "team-a/q1" in logs[0]["message"]


def test_a_namespace_whose_name_begins_another_s_names_none_of_its_pods() -> None:
    # namespaces are compared whole: team-a's Event must not name team-ab's pods (a prefix is not a match)
    assert pods_named("team-a", ["team-a/x", "team-ab/y", "team-a-b/z", "y"]) == "team-a/x and 3 pods in other namespaces"
    assert pods_named("", ["team-a/x", "team-ab/y"]) == "team-a/x, team-ab/y"  # cluster-scoped, or the log: all
