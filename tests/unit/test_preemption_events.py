"""The `Preempted` Event a victim gets names whom it made room for, in upstream's words.

kube-scheduler v1.36.3 (pkg/scheduler/framework/preemption/executor.go, `PreemptPod`): the note is
`Preempted by <preemptor.Type()> <preemptor.UID()> on node <candidate node>` and the Event is
`Eventf(victim, preemptor.Obj(), Normal, "Preempted", "Preempting", ...)`. For a pod group's
preemption (`podGroupExecutorPreemptor`) Type() is "podgroup", UID() and Obj() the PodGroup's:
`Preempted by podgroup <PodGroup uid> on node <node>`, related to the PodGroup. A label-form gang
has no object (and no uid): it keeps the pod form, naming the member that preempted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest

from scheduler.api.config import load_config
from scheduler.kube.http import KubeHttp
from scheduler.kube.informers import POD_GROUPS, WORKLOAD_POD_GROUPS
from scheduler.kube.loop import SchedulerLoop
from scheduler.sim import builders as b
from tests.fakeapi import FakeApi
from tests.helpers import plugins_gang_member, until, workload_gang_member

PLUGINS_LIST = POD_GROUPS.path
WORKLOAD_LIST = WORKLOAD_POD_GROUPS.path
HIGH = 1000


def _plugins_member(name: str) -> dict[str, Any]:
    return plugins_gang_member(name, HIGH)


def _workload_member(name: str) -> dict[str, Any]:
    return workload_gang_member(name, HIGH)


def _label_member(name: str) -> dict[str, Any]:
    return b.pod(name, labels=b.gang_labels("big", 2), limits={"nvidia.com/gpu": 4}, priority=HIGH)


def _preempted(api: FakeApi) -> list[dict[str, Any]]:
    return [event for event in api.events.values() if event["reason"] == "Preempted"]


async def _preempt_for_gang(group: dict[str, Any] | None, path: str,
                            member: Callable[[str], dict[str, Any]]) -> tuple[FakeApi, list[dict[str, Any]]]:
    """Two 4-GPU nodes full of low-priority pods; a gang of two 4-GPU members preempts both."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n1", gpus=4), b.node("n2", gpus=4)]
    if group is not None:
        api.lists[path] = [group]
    for node in ("n1", "n2"):
        api.add_pod(b.pod(f"low-{node}", limits={"nvidia.com/gpu": 4}, node_name=node, phase="Running", priority=0))
    for i in range(2):
        api.add_pod(member(f"big-{i}"))
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="test")  # type: ignore[arg-type]
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        await until(lambda: len(_preempted(api)) == 2)
        owner.cancel_scope.cancel()
    return api, _preempted(api)


@pytest.mark.parametrize(("group", "member", "path", "api_version"), [
    (b.podgroup("big", 2), _plugins_member, PLUGINS_LIST, "scheduling.x-k8s.io/v1alpha1"),
    (b.workload_podgroup("big", 2), _workload_member, WORKLOAD_LIST, "scheduling.k8s.io/v1alpha2"),
], ids=["scheduler-plugins", "workload-api"])
async def test_a_gang_with_a_podgroup_preempts_as_the_podgroup(
        group: dict[str, Any], member: Callable[[str], dict[str, Any]], path: str, api_version: str) -> None:
    _, events = await _preempt_for_gang(group, path, member)
    uid = group["metadata"]["uid"]
    assert sorted(e["note"] for e in events) == [f"Preempted by podgroup {uid} on node n1",
                                                  f"Preempted by podgroup {uid} on node n2"]
    for event in events:
        assert (event["type"], event["action"]) == ("Normal", "Preempting")
        assert event["related"] == {"kind": "PodGroup", "apiVersion": api_version, "name": "big",
                                    "namespace": "default", "uid": uid}


async def test_a_label_gang_has_no_object_and_preempts_as_its_member_pod() -> None:
    api, events = await _preempt_for_gang(None, "", _label_member)
    members = {pod["metadata"]["uid"]: name for (_, name), pod in api.pods.items() if name.startswith("big-")}
    for event in events:
        kind, _, rest = event["note"].removeprefix("Preempted by ").partition(" ")
        uid = rest.partition(" ")[0]
        assert kind == "pod" and uid in members, event["note"]
        assert event["related"]["kind"] == "Pod" and event["related"]["uid"] == uid


async def _preempt_a_gang_for_one_pod() -> tuple[FakeApi, str, list[dict[str, Any]]]:
    """Two 4-GPU nodes, each full with one member of a priority-100 gang of two (minMember 2); a
    priority-1000 pod asking for 1 GPU preempts: the gang cannot be left with one member, so both
    go, the one on the node the preemptor is not nominated to as well (a trial: 4 members on 3
    nodes). Returns the api, the preemptor's nominated node and the victims' Preempted Events."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n1", gpus=4), b.node("n2", gpus=4)]
    for i, node in enumerate(("n1", "n2")):
        api.add_pod(b.pod(f"lowg-{i}", labels=b.gang_labels("lowg", 2), limits={"nvidia.com/gpu": 4},
                          node_name=node, phase="Running", priority=100))
    api.add_pod(b.pod("hi1", limits={"nvidia.com/gpu": 1}, priority=HIGH))
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="test")  # type: ignore[arg-type]
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        await until(lambda: len(_preempted(api)) == 2
                    and bool((api.pods[("default", "hi1")].get("status") or {}).get("nominatedNodeName")))
        owner.cancel_scope.cancel()
    nominated = api.pods[("default", "hi1")]["status"]["nominatedNodeName"]
    return api, nominated, _preempted(api)


async def test_a_whole_gang_evicted_for_one_pod_names_the_preemptors_node_as_upstreams_candidate() -> None:
    """upstream's note ends `on node <c.Name()>`, the candidate node: where the preemptor is
    nominated. A victim gang's member on another node names that node too, not its own (a trial
    read `on node t4-node-001` where hi1 went to t4-node-000)."""
    api, nominated, events = await _preempt_a_gang_for_one_pod()
    uid = api.pods[("default", "hi1")]["metadata"]["uid"]
    assert [e["note"] for e in events] == [f"Preempted by pod {uid} on node {nominated}"] * 2


async def test_the_preemptor_gets_an_event_naming_its_victims_and_why_the_whole_gang_went() -> None:
    """Tessera's own Event on the preemptor (reason `Preempting`; upstream writes none there): the
    victims, where each ran, and why: a gang left below its minimum goes whole. `kubectl tessera
    explain hi1` shows it among its Events."""
    api, nominated, _ = await _preempt_a_gang_for_one_pod()
    (event,) = [e for e in api.events.values() if e["reason"] == "Preempting"]
    assert event["regarding"]["name"] == "hi1" and (event["type"], event["action"]) == ("Normal", "Preempting")
    assert event["note"] == (f"Preempting 2 lower-priority pods to make room on {nominated}: "
                             "default/lowg-0 on n1, default/lowg-1 on n2 "
                             "(gang default/lowg: would fall below minMember 2)")


async def test_the_preemptors_event_names_no_pod_of_another_namespace() -> None:
    """The preemptor's Event lands in its own namespace: it named another tenant's victims there
    ("team-b/sj5-mt6mp on v100-node-001"). Victims of the preemptor's namespace are named; the
    others are only counted (each still gets upstream's `Preempted` Event in its own namespace)."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n1", gpus=4)]
    for name, namespace in (("low-a", "team-a"), ("low-b", "team-b"), ("low-c", "team-c")):
        api.add_pod(b.pod(name, namespace, limits={"nvidia.com/gpu": 1 if name != "low-a" else 2}, node_name="n1",
                          phase="Running", priority=0))
    api.add_pod(b.pod("hi1", "team-a", limits={"nvidia.com/gpu": 4}, priority=HIGH))
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="test")  # type: ignore[arg-type]
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        await until(lambda: any(e["reason"] == "Preempting" for e in api.events.values()))
        owner.cancel_scope.cancel()
    (event,) = [e for e in api.events.values() if e["reason"] == "Preempting"]
    assert event["regarding"]["namespace"] == "team-a"
    assert event["note"] == ("Preempting 3 lower-priority pods to make room on n1: team-a/low-a on n1 and 2 pods in "
                             "other namespaces")
