"""The live loop tells a PodGroup that its gang cannot be placed: a Warning Event regarding the
PodGroup object, on the fake apiserver.

A new user's trial: `kubectl describe pg big` (scheduler-plugins, 3 members x 4 GPUs, 8 GPUs in
the cluster) showed `Phase: Scheduling` and `Events: <none>`. The Event follows Volcano's for its
PodGroups (pkg/scheduler/cache/cache.go RecordJobStatusEvent: Warning, reason `Unschedulable`);
its note is the gang's message, the one its members' FailedScheduling Events carry. A gang
retried again and again joins one Event's series (the recorder's EventSeries), not a flood.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from scheduler.api.config import load_config
from scheduler.kube.binder import Binding, BindResult, Outcome
from scheduler.kube.http import KubeHttp
from scheduler.kube.informers import POD_GROUPS, WORKLOAD_POD_GROUPS
from scheduler.kube.loop import SchedulerLoop
from scheduler.sim import builders as b
from tests.fakeapi import FakeApi
from tests.helpers import plugins_gang_member, run_for_a_while, until, workload_gang_member

PLUGINS_LIST = POD_GROUPS.path
WORKLOAD_LIST = WORKLOAD_POD_GROUPS.path


def _regarding_podgroups(api: FakeApi) -> list[dict[str, Any]]:
    return [event for event in api.events.values() if event["regarding"]["kind"] == "PodGroup"]


def _gang_api(nodes: list[dict[str, Any]], path: str, group: dict[str, Any],
              member: Callable[[str], dict[str, Any]]) -> FakeApi:
    """A fake apiserver listing `nodes`, the PodGroup `group` (at its API's `path`) and its three
    members big-0..2."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = nodes
    api.lists[path] = [group]
    for i in range(3):
        api.add_pod(member(f"big-{i}"))
    return api


async def _run_until(api: FakeApi, done: Callable[[], bool], *, settle: float = 0.0, seconds: float = 10.0) -> None:
    """Run a scheduler loop on `api` until `done`, then `settle` seconds more (that nothing follows)."""
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="test")  # type: ignore[arg-type]
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        await until(done, seconds)
        await anyio.sleep(settle)
        owner.cancel_scope.cancel()


@pytest.mark.parametrize(("group", "member", "path", "api_version"), [
    (b.podgroup("big", 3), plugins_gang_member, PLUGINS_LIST, "scheduling.x-k8s.io/v1alpha1"),
    (b.workload_podgroup("big", 3), workload_gang_member, WORKLOAD_LIST, "scheduling.k8s.io/v1alpha2"),
], ids=["scheduler-plugins", "workload-api"])
async def test_a_gang_that_does_not_fit_gets_a_warning_on_its_podgroup(
        group: dict[str, Any], member: Callable[[str], dict[str, Any]], path: str, api_version: str) -> None:
    api = _gang_api([b.node("n1", gpus=4), b.node("n2", gpus=4)], path, group, member)
    await _run_until(api, lambda: bool(_regarding_podgroups(api)))
    [event] = _regarding_podgroups(api)
    assert event["regarding"] == {"kind": "PodGroup", "apiVersion": api_version, "name": "big",
                                  "namespace": "default", "uid": group["metadata"]["uid"]}
    assert (event["type"], event["reason"], event["action"]) == ("Warning", "Unschedulable", "Scheduling")
    assert event["metadata"]["namespace"] == "default"
    members = [e for e in api.events.values() if e["reason"] == "FailedScheduling"]
    assert len(members) == 3
    (note,) = {e["note"] for e in members}
    # the members' note, word for word, then (12 GPUs asked of 8 in all) that the gang can never fit
    assert event["note"] == (f"{note} Its gang can never fit as the cluster is: its 3 members ask for "
                             "12 nvidia.com/gpu together, and the schedulable nodes have 8 in all.")
    assert event["note"].startswith("pod group default/")
    assert "only 2 of the 3 members it needs fit" in event["note"]


async def test_a_gang_tried_again_joins_one_series_on_its_podgroup() -> None:
    """Two failed cycles of the same gang, the cluster unchanged: one Event, its series counting 2."""
    api = FakeApi()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="test")  # type: ignore[arg-type]
    core = loop.core
    for obj in (b.node("n1", gpus=4), b.node("n2", gpus=4), b.podgroup("big", 3),
                *(plugins_gang_member(f"big-{i}") for i in range(3))):
        core.apply("ADDED", obj, 0.0)
    first = core.schedule_next(0.0)
    assert first and all(a.node is None for a in first)
    loop._handle_cycle(first, 0.01)
    core.flush_unschedulable(400.0)  # the 5-minute flush brings the gang back
    second = core.schedule_next(400.0)
    assert second and {a.message for a in second} == {a.message for a in first}
    loop._handle_cycle(second, 0.01)
    await run_for_a_while(loop.events.run, until=lambda: any(
        (e.get("series") or {}).get("count") == 2 for e in _regarding_podgroups(api)))
    [event] = _regarding_podgroups(api)
    assert event["series"]["count"] == 2
    assert len(api.of("POST", "/events")) == 4  # the PodGroup's and the three members' first Events



def _scheduled_on_podgroups(api: FakeApi) -> list[dict[str, Any]]:
    return [e for e in _regarding_podgroups(api) if e["reason"] == "Scheduled"]


@pytest.mark.parametrize(("group", "member", "path", "api_version"), [
    (b.podgroup("big", 3), plugins_gang_member, PLUGINS_LIST, "scheduling.x-k8s.io/v1alpha1"),
    (b.workload_podgroup("big", 3), workload_gang_member, WORKLOAD_LIST, "scheduling.k8s.io/v1alpha2"),
], ids=["scheduler-plugins", "workload-api"])
async def test_a_placed_gang_gets_one_normal_scheduled_event_on_its_podgroup(
        group: dict[str, Any], member: Callable[[str], dict[str, Any]], path: str, api_version: str) -> None:
    """A user trial: a gang placed after Warnings (its preemption's `Unschedulable` while victims
    terminated) showed only those Warnings on `kubectl describe pg`. Once every member's Binding
    landed the PodGroup gets one Normal `Scheduled` (Volcano's reason for its PodGroups): how many
    members went where, once per placement, not once per pod."""
    api = _gang_api([b.node("n1", gpus=8), b.node("n2", gpus=4)], path, group, member)
    await _run_until(api, lambda: bool(_scheduled_on_podgroups(api)), settle=0.2)  # no second one follows
    [event] = _scheduled_on_podgroups(api)
    assert event["regarding"] == {"kind": "PodGroup", "apiVersion": api_version, "name": "big",
                                  "namespace": "default", "uid": group["metadata"]["uid"]}
    assert (event["type"], event["action"]) == ("Normal", "Binding")
    name = "default/big" if api_version.startswith("scheduling.x-k8s.io") else "default/scheduling.k8s.io/big"
    assert event["note"] == f"Successfully assigned 3 members of pod group {name}: 2 to n1, 1 to n2"
    assert len([e for e in api.events.values() if e["reason"] == "Scheduled"]) == 4  # and each member's own


def test_a_gang_that_does_not_fit_is_one_debug_line_per_attempt() -> None:
    """A user trial found nothing in the log while a gang stayed unschedulable. kube-scheduler logs
    each failed attempt, "Unable to schedule pod; no fit; waiting" at V(2) (schedule_one.go
    handleSchedulingFailure), which its default verbosity hides; Tessera's match is at debug: per
    member `cycle.unschedulable`, and per gang attempt one `cycle.group_unschedulable` naming the
    PodGroup with its Event's note (the gang's backoff paces them, as it paces the attempts)."""
    loop = SchedulerLoop(load_config(None), KubeHttp(FakeApi()), KubeHttp(FakeApi()),  # type: ignore[arg-type]
                         identity="test")
    core = loop.core
    for obj in (b.node("n1", gpus=4), b.node("n2", gpus=4), b.podgroup("big", 3),
                *(plugins_gang_member(f"big-{i}") for i in range(3))):
        core.apply("ADDED", obj, 0.0)
    attempts = core.schedule_next(0.0)
    assert attempts and all(a.node is None for a in attempts)
    notice = core.group_notice(attempts)
    assert notice is not None
    with capture_logs() as logs:
        loop._handle_cycle(attempts, 0.01)
    [line] = [entry for entry in logs if entry["event"] == "cycle.group_unschedulable"]
    assert line == {"event": "cycle.group_unschedulable", "log_level": "debug", "group": "default/big",
                    "message": notice.message}
    assert len([entry for entry in logs if entry["event"] == "cycle.unschedulable"]) == 3


async def test_a_placement_with_a_binding_refused_is_not_told_scheduled() -> None:
    """A member's Binding refused (a webhook's 422): that placement is no `Scheduled`; the member,
    tried again alone and bound, is its own placement of one."""
    api = _gang_api([b.node("n1", gpus=8), b.node("n2", gpus=4)], PLUGINS_LIST, b.podgroup("big", 3),
                    plugins_gang_member)
    api.fail_next("POST", "/binding", status=422)
    await _run_until(api, lambda: bool(_scheduled_on_podgroups(api)), settle=0.2)
    [event] = _scheduled_on_podgroups(api)
    assert re.fullmatch(r"Successfully assigned 1 member of pod group default/big: 1 to n[12]", event["note"])
    assert len([e for e in api.events.values() if e["reason"] == "Scheduled"]) == 4


async def test_a_gang_placed_at_its_minimum_with_a_member_left_over_is_told_scheduled() -> None:
    """minMember 2 of 3 members, room for 2: the gang is placed (the third member is a pod like any
    other, unschedulable on its own) and the PodGroup is told so, for the 2 members placed."""
    api = _gang_api([b.node("n1", gpus=4), b.node("n2", gpus=4)], PLUGINS_LIST, b.podgroup("big", 2),
                    plugins_gang_member)
    await _run_until(api, lambda: bool(_scheduled_on_podgroups(api)), seconds=3.0)
    [event] = _scheduled_on_podgroups(api)
    assert event["note"] == "Successfully assigned 2 members of pod group default/big: 1 to n1, 1 to n2"


def _driven_loop(objects: list[dict[str, Any]]) -> tuple[SchedulerLoop, list[Binding], list[str]]:
    """A leading loop fed `objects`, its Bindings kept (not sent) and its PodGroup notes recorded."""
    loop = SchedulerLoop(load_config(None), KubeHttp(FakeApi()), KubeHttp(FakeApi()),  # type: ignore[arg-type]
                         identity="test")
    bindings: list[Binding] = []
    notes: list[str] = []
    loop.binder.submit = bindings.append  # type: ignore[method-assign, assignment]
    loop.events.record = lambda ref, _type, reason, _action, note, **_: (  # type: ignore[method-assign]
        notes.append(note) if ref.kind == "PodGroup" and reason == "Scheduled" else None)
    for obj in objects:
        loop._on_event("ADDED", obj)
    return loop, bindings, notes


def _cycle(loop: SchedulerLoop) -> None:
    attempts = loop.core.schedule_next(0.0)
    assert attempts
    loop._handle_cycle(attempts, 0.01)


def test_a_second_placement_of_a_gang_does_not_swallow_the_first() -> None:
    """Two members placed (the minimum), then a third arriving while their Bindings are out, placed
    alone: each placement is told once all its Bindings land, neither replaces the other."""
    loop, bindings, notes = _driven_loop([b.node("n1", gpus=8), b.node("n2", gpus=4), b.podgroup("big", 2),
                                          plugins_gang_member("big-0"), plugins_gang_member("big-1")])
    _cycle(loop)
    assert len(bindings) == 2
    loop._on_event("ADDED", plugins_gang_member("big-2"))
    _cycle(loop)
    assert len(bindings) == 3
    for binding in bindings:
        loop._on_bound(BindResult(binding, Outcome.BOUND, "", 0.01))
    assert len(notes) == 2
    assert notes[0].startswith("Successfully assigned 2 members of pod group default/big: ")
    assert notes[1].startswith("Successfully assigned 1 member of pod group default/big: 1 to ")
    assert loop._placing == {}


def test_a_member_the_allocation_gate_rejects_ends_its_placement() -> None:
    """A held Binding the gate rejects is a member this placement will not bind: the placement is
    over (none is told, nothing is kept), as for a Binding refused."""
    loop, bindings, notes = _driven_loop([b.node("n1", gpus=8), b.node("n2", gpus=4), b.podgroup("big", 3),
                                          *(plugins_gang_member(f"big-{i}") for i in range(3))])
    attempts = loop.core.schedule_next(0.0)
    assert attempts and all(a.node is not None for a in attempts)
    loop._handle_cycle(attempts, 0.01)
    *sent, last = bindings
    loop._gate_rejected(next(a for a in attempts if a.pod.uid == last.uid))
    for binding in sent:
        loop._on_bound(BindResult(binding, Outcome.BOUND, "", 0.01))
    assert notes == []
    assert loop._placing == {}


def test_a_member_decided_again_while_its_binding_waits_is_only_in_its_new_placement() -> None:
    """A member decided again before its first Binding was answered (a held Binding redone): the
    earlier placement is over, and its other members' answers leave the new one alone."""
    loop, bindings, notes = _driven_loop([b.node("n1", gpus=8), b.node("n2", gpus=4), b.podgroup("big", 3),
                                          *(plugins_gang_member(f"big-{i}") for i in range(3))])
    attempts = loop.core.schedule_next(0.0)
    assert attempts and all(a.node is not None for a in attempts)
    loop._handle_cycle(attempts, 0.01)
    first, second, third = bindings
    loop._handle_cycle([a for a in attempts if a.pod.uid == third.uid], 0.01)  # decided again, alone
    loop._on_bound(BindResult(first, Outcome.RETRY, "Binding rejected: HTTP 422", 0.01))
    loop._on_bound(BindResult(second, Outcome.BOUND, "", 0.01))
    loop._on_bound(BindResult(bindings[3], Outcome.BOUND, "", 0.01))
    assert [note.split(":")[0] for note in notes] == ["Successfully assigned 1 member of pod group default/big"]
    assert loop._placing == {}


def test_a_member_deleted_while_its_binding_is_out_ends_its_placement() -> None:
    """A member deleted before its Binding was answered (a held Binding, never sent): this
    placement will not bind it, so it is over — none is told when the others land, and nothing of
    it is kept (the deleted member's entry would otherwise stay until the term ends)."""
    members = [plugins_gang_member(f"big-{i}") for i in range(3)]
    loop, bindings, notes = _driven_loop([b.node("n1", gpus=8), b.node("n2", gpus=4), b.podgroup("big", 3), *members])
    _cycle(loop)
    *sent, last = bindings
    loop._on_event("DELETED", next(m for m in members if m["metadata"]["uid"] == last.uid))
    for binding in sent:
        loop._on_bound(BindResult(binding, Outcome.BOUND, "", 0.01))
    assert notes == []
    assert loop._placing == {}
