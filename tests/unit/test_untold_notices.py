"""Notices a replica saw while it did not lead reach Warning Events once it leads.

A live trial (two replicas, both restarted several times) logged `input.invalid` for a copied
devices annotation (DeviceConflict) and a held device's changed resourceName
(ResourceNameChangedWhileHeld), and `kubectl get events -A` had none of them: the core raises a
notice once, when it first sees the problem — while the informers list after a start (nobody
leads yet) or on a standby — and only a leader records Events, so the next leader never told.
"""

from __future__ import annotations

import copy
from typing import Any

import anyio
import anyio.abc
import orjson

from scheduler.api.config import load_config
from scheduler.core import annotations as ann
from scheduler.core.state import Notice
from scheduler.kube.http import KubeHttp
from scheduler.kube.loop import SchedulerLoop
from scheduler.kube.untold import UntoldNotices
from scheduler.sim import builders as b
from tests.fakeapi import FakeApi
from tests.helpers import until

CLASS = "class.tessera.dev/v100"
DEVICE = b.device("n", 0)
REASONS = ("DeviceConflict", "ResourceNameChangedWhileHeld")


def _bound(name: str) -> dict[str, Any]:
    """A pod bound on node n holding DEVICE whole (a second one is a copied annotation)."""
    grant = {"id": DEVICE["spec"]["deviceID"], "device": DEVICE["metadata"]["name"]}
    value = orjson.dumps({"version": ann.VERSION, "containers": {"main": {CLASS: [grant]}}}).decode()
    return b.pod(name, limits={CLASS: 1}, node_name="n", phase="Running",
                 annotations={ann.DEVICES: value, ann.PHASE: ann.PHASE_ALLOCATED})


def _renamed() -> dict[str, Any]:
    """DEVICE's object now naming another resourceName (a node agent restarted with another one)."""
    out = copy.deepcopy(DEVICE)
    out["spec"]["resourceName"] = "example.com/gpu"
    out["metadata"]["resourceVersion"] = "200"
    return out


def _warnings(api: FakeApi) -> list[dict[str, Any]]:
    return sorted((event for event in api.events.values() if event["reason"] in REASONS),
                  key=lambda event: str(event["reason"]))


def _standby(api: FakeApi, term: list[int | None]) -> SchedulerLoop:
    """A replica that starts while nobody leads: its informers list p and q, which name the same
    GPU in their devices annotations (q's a copy), so the core raises DeviceConflict during the list."""
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=2)]
    api.lists["/apis/tessera.dev/v1alpha1/extendedresources"] = [DEVICE, b.device("n", 1)]
    api.lists["/apis/tessera.dev/v1alpha1/resourceclasses"] = [b.resource_class("v100", match_labels={"model": "V100"})]
    api.add_pod(_bound("p"))
    api.add_pod(_bound("q"))
    return SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="standby",  # type: ignore[arg-type]
                         leader_term=lambda: term[0])


async def _synced_and_renamed(owner: anyio.abc.TaskGroup, loop: SchedulerLoop) -> None:
    """The standby runs and lists; then its watch shows the held device's resourceName changed
    (ResourceNameChangedWhileHeld: p holds it)."""
    owner.start_soon(loop.run)
    await until(lambda: loop.informers.synced)
    loop._on_event("MODIFIED", _renamed())


async def test_notices_a_standby_saw_are_written_once_when_it_leads() -> None:
    api = FakeApi()
    term: list[int | None] = [None]
    loop = _standby(api, term)
    async with anyio.create_task_group() as owner:
        await _synced_and_renamed(owner, loop)
        await anyio.sleep(0.05)
        assert _warnings(api) == []  # a standby records no Event
        term[0] = 1  # the old leader's Lease ran out: this replica leads
        loop.leadership_started()
        await until(lambda: len(_warnings(api)) == 2)
        for _ in range(3):  # later wakes of the same term tell nothing again
            loop.wake()
            await anyio.sleep(0.05)
        owner.cancel_scope.cancel()
    conflict, renamed = _warnings(api)
    assert conflict["type"] == renamed["type"] == "Warning"
    assert conflict["regarding"]["kind"] == "Pod" and conflict["regarding"]["name"] in ("p", "q")
    assert "is assigned to more than one pod exclusively" in conflict["note"]
    assert renamed["regarding"]["kind"] == "ExtendedResource"
    assert renamed["regarding"]["name"] == DEVICE["metadata"]["name"]
    assert "now names resourceName example.com/gpu" in renamed["note"]
    assert conflict.get("series") is None and renamed.get("series") is None  # each recorded once


async def test_a_notice_whose_problem_ended_before_it_leads_is_not_told() -> None:
    """p, whose annotation q copied, was deleted while this replica stood by: q alone holds the GPU
    now, so there is no conflict left to warn about; the renamed device is still held (by q), so
    its Warning is recorded."""
    api = FakeApi()
    term: list[int | None] = [None]
    loop = _standby(api, term)
    async with anyio.create_task_group() as owner:
        await _synced_and_renamed(owner, loop)
        loop._on_event("DELETED", api.pods.pop(("default", "p")))
        term[0] = 1
        loop.leadership_started()
        await until(lambda: len(_warnings(api)) == 1)
        await anyio.sleep(0.1)
        owner.cancel_scope.cancel()
    [renamed] = _warnings(api)
    assert renamed["reason"] == "ResourceNameChangedWhileHeld"
    assert not list(loop.untold)


def test_untold_notices_are_bounded_and_deduplicated() -> None:
    """A standby that stands by for long keeps one notice per object and reason, and at most
    `UNTOLD_LIMIT` of them (the oldest go first)."""
    untold = UntoldNotices(limit=3)
    for index in range(5):
        untold.add(Notice("Pod", f"default/p{index}", "DeviceConflict", f"first {index}", "default", f"uid-{index}"))
    untold.add(Notice("Pod", "default/p4", "DeviceConflict", "again", "default", "uid-4"))
    assert [notice.key for notice in untold] == ["default/p2", "default/p3", "default/p4"]
    assert [notice.message for notice in untold][-1] == "again"
    untold.object_gone("Pod", "default/p3", "uid-3")
    assert [notice.key for notice in untold] == ["default/p2", "default/p4"]


async def test_a_leader_tells_what_it_saw_while_its_caches_listed_only_if_it_still_stands() -> None:
    """A review: a replica leading while its informers list (one replica, or an election won at
    start) told each notice at once, judged on a half-listed cache: a class selecting `nvlink`
    was warned `UnknownDeviceAttribute` as soon as a device without the attribute was in and before
    the one with it. What it sees before its caches are complete waits for them, as a standby's
    notices do, and is told only if it still stands."""
    api = FakeApi()
    nvlink = b.device("h", 0, attributes={"nvlink": "true"})
    api.lists["/api/v1/nodes"] = [b.node("a", gpus=1), b.node("h", gpus=1)]
    api.lists["/apis/tessera.dev/v1alpha1/extendedresources"] = [b.device("a", 0), nvlink]
    linked = b.resource_class("linked", match_labels={"nvlink": "true"})
    typo = b.resource_class("typo", match_labels={"modle": "V100"})  # still so once listed: told
    api.lists["/apis/tessera.dev/v1alpha1/resourceclasses"] = [linked, typo]
    term: list[int | None] = [1]
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="leader",  # type: ignore[arg-type]
                         leader_term=lambda: term[0])
    loop.leadership_started()
    for obj in (linked, typo, b.device("a", 0)):  # as the class informer's page arrives before the devices' last one
        loop._on_event("ADDED", obj)

    def warned() -> list[str]:
        return [event["regarding"]["name"] for event in api.events.values() if event["reason"] == "UnknownDeviceAttribute"]

    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        await until(lambda: loop.informers.synced)
        await until(lambda: warned() == ["typo"])
        await anyio.sleep(0.2)
        owner.cancel_scope.cancel()
    assert warned() == ["typo"]
