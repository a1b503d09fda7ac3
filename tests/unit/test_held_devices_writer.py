"""The live shell writes `tessera.dev/held-devices` when the core reports an edited devices
annotation (a new user's trial: after `kubectl annotate --overwrite tessera.dev/devices=<another
GPU>` and a restart, the restarted scheduler read only the current annotation and gave the
original GPU to a second pod — the union lived only in memory)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import anyio
import orjson

from scheduler.api.config import load_config
from scheduler.core import annotations as ann
from scheduler.kube.http import STRATEGIC_PATCH, KubeHttp
from scheduler.kube.loop import SchedulerLoop
from scheduler.sim import builders as b
from tests.fakeapi import FakeApi

CLASS = "class.tessera.dev/v100"


def _assignment(device: str) -> str:
    return orjson.dumps({"version": ann.VERSION, "containers": {"main": {CLASS: [{"id": f"id-{device}",
                                                                                  "device": device}]}}}).decode()


def _bound() -> dict[str, Any]:
    return b.pod("cls1", limits={CLASS: 1}, node_name="n", phase="Running",
                 annotations={ann.DEVICES: _assignment("gpu-a"), ann.PHASE: ann.PHASE_ALLOCATED})


def _edited(pod: dict[str, Any], device: str) -> dict[str, Any]:
    out = copy.deepcopy(pod)
    out["metadata"]["annotations"][ann.DEVICES] = _assignment(device)
    out["metadata"]["resourceVersion"] = str(int(out["metadata"].get("resourceVersion") or "100") + 1)
    return out


async def _until(condition: Callable[[], bool], seconds: float = 5.0) -> None:
    with anyio.fail_after(seconds):
        while not condition():
            await anyio.sleep(0.005)


def _held(pod: dict[str, Any]) -> list[str]:
    held = ann.decode_devices(pod["metadata"]["annotations"][ann.HELD_DEVICES])
    return sorted(grant.device for by in held.values() for grants in by.values() for grant in grants)


async def test_an_edit_is_written_into_held_devices_with_the_uid_as_precondition() -> None:
    api = FakeApi()
    pod = _bound()
    api.add_pod(pod)
    api.fail_next("PATCH", "/pods/cls1/status", status=500)  # a failed write is tried again
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="test")  # type: ignore[arg-type]
    loop.held._retry_seconds = 0.01
    loop._apply("ADDED", b.node("n", gpus=2))
    loop._apply("ADDED", pod)
    async with anyio.create_task_group() as group:
        group.start_soon(loop.held.run)
        await anyio.sleep(0.02)
        assert api.of("PATCH", "/pods/cls1/status") == []  # no edit, no write
        loop._apply("MODIFIED", _edited(pod, "gpu-b"))
        await _until(lambda: ann.HELD_DEVICES in api.pod("default", "cls1")["metadata"]["annotations"])
        group.cancel_scope.cancel()
    *_, call = api.of("PATCH", "/pods/cls1/status")
    assert call.content_type == STRATEGIC_PATCH
    assert call.body["metadata"]["uid"] == pod["metadata"]["uid"]
    assert set(call.body["metadata"]["annotations"]) == {ann.HELD_DEVICES}
    assert _held(api.pod("default", "cls1")) == ["gpu-a", "gpu-b"]
    assert len(api.of("PATCH", "/pods/cls1/status")) == 2 and loop.held.writes == 1


async def test_a_standby_writes_nothing_until_it_leads() -> None:
    api = FakeApi()
    pod = _bound()
    api.add_pod(pod)
    leading = False
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="test")  # type: ignore[arg-type]
    loop.held.allowed = lambda: leading
    loop.held._retry_seconds = 0.01
    loop._apply("ADDED", b.node("n", gpus=2))
    loop._apply("ADDED", pod)
    async with anyio.create_task_group() as group:
        group.start_soon(loop.held.run)
        loop._apply("MODIFIED", _edited(pod, "gpu-b"))
        await anyio.sleep(0.05)
        assert api.of("PATCH", "/status") == []
        leading = True  # it takes over: the edit it saw as a standby is written now
        await _until(lambda: ann.HELD_DEVICES in api.pod("default", "cls1")["metadata"]["annotations"])
        group.cancel_scope.cancel()
    assert _held(api.pod("default", "cls1")) == ["gpu-a", "gpu-b"]


def _standby(api: FakeApi, pod: dict[str, Any]) -> tuple[SchedulerLoop, list[int | None]]:
    """A standby replica that holds `pod` (bound, on a 2-GPU node) in its cache; it leads once the
    test sets the returned term's one element."""
    api.add_pod(pod)
    term: list[int | None] = [None]
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="standby",  # type: ignore[arg-type]
                         leader_term=lambda: term[0])
    loop.held._retry_seconds = 0.01
    loop._apply("ADDED", b.node("n", gpus=2))
    loop._apply("ADDED", pod)
    return loop, term


def _changed_events(api: FakeApi) -> list[dict[str, Any]]:
    return [event for event in api.events.values() if event["reason"] == "DevicesAnnotationChanged"]


async def test_the_warning_a_standby_saw_is_written_when_it_leads() -> None:
    """The edit happened while this replica stood by (the leader had died): it keeps the union
    held and, once it leads, writes it into held-devices. The Warning that tells the operator of
    the edit was dropped (only a leader records Events, and the notice came while it stood by):
    `kubectl describe pod` never showed it. Now the replica that writes the union tells too."""
    api = FakeApi()
    pod = _bound()
    loop, term = _standby(api, pod)
    async with anyio.create_task_group() as group:
        group.start_soon(loop.held.run)
        group.start_soon(loop.events.run)
        loop._apply("MODIFIED", _edited(pod, "gpu-b"))
        await anyio.sleep(0.05)
        assert api.of("PATCH", "/status") == [] and _changed_events(api) == []
        term[0] = 1  # the old leader's Lease ran out: this replica leads
        loop.leadership_started()
        await _until(lambda: bool(_changed_events(api)))
        await anyio.sleep(0.05)
        group.cancel_scope.cancel()
    assert _held(api.pod("default", "cls1")) == ["gpu-a", "gpu-b"]
    [event] = _changed_events(api)
    assert event["type"] == "Warning" and event["regarding"]["uid"] == pod["metadata"]["uid"]
    assert "it named gpu-a; it now names gpu-b" in event["note"]


async def test_an_edit_the_old_leader_already_wrote_is_not_told_again_by_the_next_leader() -> None:
    """The standby saw the edit and then, on its watch, the old leader's held-devices write (the
    old leader recorded the Warning when it saw the edit): on taking over it writes neither again."""
    api = FakeApi()
    pod = _bound()
    loop, term = _standby(api, pod)
    edited = _edited(pod, "gpu-b")
    async with anyio.create_task_group() as group:
        group.start_soon(loop.held.run)
        group.start_soon(loop.events.run)
        loop._apply("MODIFIED", edited)
        [wish] = loop.held._wishes.values()
        written = _edited(edited, "gpu-b")  # the old leader's write, as the watch delivers it
        written["metadata"]["annotations"][ann.HELD_DEVICES] = wish.value
        loop._apply("MODIFIED", written)
        term[0] = 1
        loop.leadership_started()
        await anyio.sleep(0.1)
        group.cancel_scope.cancel()
    assert api.of("PATCH", "/status") == [] and _changed_events(api) == []
