"""A pod whose Binding is in flight (assumed in the core, not yet bound) is a preemption victim.

kube-scheduler's cache adds an assumed pod to its node's NodeInfo (backend/cache/cache.go AssumePod
-> addPod -> n.info.AddPod), the snapshot preemption reads; SelectVictimsOnNode
(defaultpreemption/default_preemption.go) takes every pod of lower priority in it, with no
exception for an assumed one, and PreemptPod (framework/preemption/executor.go) evicts such a
victim through the API (it is neither a waiting pod nor one in PreBind). A live adversary saw a
high-priority pod read "No preemption victims found for incoming pod" while the low-priority
pods' Bindings were out, and preempt them only at the unschedulable queue's flush.

The promise comes first: the victim keeps what it holds (its requests, its device) until it is
really gone — its Binding settles as not bound, or the pod is deleted — and the preemptor only
holds its room beside it meanwhile.
"""

from __future__ import annotations

import copy
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from scheduler.api.config import load_config
from scheduler.core.framework.attempt import Attempt
from scheduler.core.scheduler import Scheduler
from scheduler.kube.binder import Binding, BindResult, Outcome
from scheduler.kube.http import KubeHttp
from scheduler.kube.loop import SchedulerLoop
from scheduler.sim import builders as b
from tests.fakeapi import FakeApi
from tests.helpers import BINPACK, config, until

LOW, HIGH = 0, 1000


def _core() -> tuple[Scheduler, dict[str, Any]]:
    """One 1-GPU node; `low` placed there, its Binding sent and not yet answered."""
    core = Scheduler(config(BINPACK))
    low = b.pod("low", limits={"nvidia.com/gpu": 1}, priority=LOW)
    core.apply("ADDED", b.node("n", gpus=1), 0.0)
    core.apply("ADDED", copy.deepcopy(low), 0.0)
    [placed] = core.schedule_next(0.0) or []
    assert placed.node == "n" and core.state.placements[placed.pod.uid].assumed
    return core, low


def _schedule(core: Scheduler, name: str, now: float) -> Attempt:
    attempts = core.schedule_next(now)
    assert attempts is not None
    [attempt] = [a for a in attempts if a.pod.meta.name == name]
    return attempt


def _gpus_in_use(core: Scheduler, node: str) -> int:
    """nvidia.com/gpu of real holders (bound or assumed pods; a nominated preemptor's hold is not one)."""
    state = core.state
    return sum(state.placements[uid].requests.get("nvidia.com/gpu", 0) for uid in state.nodes[node].pods)


def test_a_pod_whose_binding_is_in_flight_is_a_victim_at_once() -> None:
    core, low = _core()
    core.apply("ADDED", b.pod("high", limits={"nvidia.com/gpu": 1}, priority=HIGH), 1.0)
    high = _schedule(core, "high", 1.0)
    assert high.node is None
    assert [victim.meta.name for victim in high.preempted] == ["low"], high.message
    assert high.nominated_node == "n"
    assert "No preemption victims" not in high.message


@pytest.mark.parametrize("gone", ["deleted", "binding_refused", "binding_not_found"])
def test_the_in_flight_victim_keeps_its_gpu_until_it_is_gone_then_the_preemptor_takes_it(gone: str) -> None:
    core, low = _core()
    low_uid = low["metadata"]["uid"]
    core.apply("ADDED", b.pod("high", limits={"nvidia.com/gpu": 1}, priority=HIGH), 1.0)
    high = _schedule(core, "high", 1.0)
    assert [victim.uid for victim in high.preempted] == [low_uid]
    # the victim is not gone yet: it still holds its GPU, and the preemptor is not placed beside it
    assert core.state.node_of(low_uid) == "n" and _gpus_in_use(core, "n") == 1
    again = core.schedule_next(2.0) or []
    assert all(a.node is None for a in again)
    assert _gpus_in_use(core, "n") == 1
    if gone == "deleted":  # the victim's DELETE landed first: the watch says so, the Binding cannot land
        core.apply("DELETED", copy.deepcopy(low), 3.0)
        core.binding_dropped(low_uid)  # then its Binding's 404
    elif gone == "binding_refused":  # its DisruptionTarget write moved its resourceVersion: 409, read back unbound
        core.binding_failed(low_uid, 3.0)
    else:
        core.binding_dropped(low_uid)
    placed = _schedule(core, "high", 3.0)
    assert placed.node == "n", placed.message
    assert _gpus_in_use(core, "n") == 1


# --- the live shell: the in-flight victim is evicted through the API --------------------------------

async def test_the_live_loop_evicts_an_in_flight_victim_and_names_the_node_it_was_placed_on() -> None:
    """The victim is not bound yet (no spec.nodeName): its DisruptionTarget mark and DELETE go out
    as for a bound victim (upstream's PreemptPod: neither a waiting pod nor one in PreBind), and
    its `Preempted` Event names the node its Binding targets, upstream's candidate node."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=1)]
    api.add_pod(b.pod("low", limits={"nvidia.com/gpu": 1}, priority=LOW))
    api.fail_next("POST", "/binding", stall=True)  # low's Binding never answers
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="test")  # type: ignore[arg-type]
    high = b.pod("high", limits={"nvidia.com/gpu": 1}, priority=HIGH)
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        await until(lambda: api.stalled == 1)
        api.add_pod(high)
        loop._apply("ADDED", copy.deepcopy(high))  # the watch's ADDED (the fake's watch is silent)
        loop._wake.set()
        await until(lambda: any(e["reason"] == "Preempted" for e in api.events.values()))
        owner.cancel_scope.cancel()
    [preempted] = [e for e in api.events.values() if e["reason"] == "Preempted"]
    assert preempted["regarding"]["name"] == "low"
    assert preempted["note"] == f"Preempted by pod {high['metadata']['uid']} on node n"
    [mark] = [c for c in api.of("PATCH", "/low/status") if (c.body.get("status") or {}).get("conditions")]
    assert mark.body["status"]["conditions"][0]["reason"] == "PreemptionByScheduler"
    assert len(api.of("DELETE", "/pods/low")) == 1 and ("default", "low") not in api.pods


def test_the_victims_own_binding_refused_by_its_eviction_is_logged_as_the_preemption() -> None:
    """The victim's DisruptionTarget write moves its resourceVersion, so its Binding (conditional
    on the old one) is refused and read back unbound: that is the preemption working, not a
    failure to page on. One info line, `binder.preempted`; a Binding refused for a pod that is no
    victim stays `binder.failed` at error level — and so does a victim's Binding the apiserver
    itself refused (a webhook's 422: nothing read back), which the session's review found logged
    as the preemption."""
    loop = SchedulerLoop(load_config(None), KubeHttp(FakeApi()), KubeHttp(FakeApi()),  # type: ignore[arg-type]
                         identity="test")
    low = b.pod("low", limits={"nvidia.com/gpu": 1}, priority=LOW)
    for obj in (b.node("n", gpus=1), low):
        loop._apply("ADDED", copy.deepcopy(obj))
    placed = loop.core.schedule_next(0.0) or []
    loop._apply("ADDED", b.pod("high", limits={"nvidia.com/gpu": 1}, priority=HIGH))
    preempting = loop.core.schedule_next(0.0) or []
    assert [a.pod.meta.name for a in placed if a.node] == ["low"]
    assert [v.meta.name for a in preempting for v in a.preempted] == ["low"]
    binding = Binding(low["metadata"]["uid"], "default", "low", "n", resource_version="1")
    changed = "the pod changed since it was decided; no Binding for the version it was decided at can land"
    read_back = {**copy.deepcopy(low), "metadata": {**low["metadata"], "resourceVersion": "2"}}
    with capture_logs() as logs:
        loop._on_bound(BindResult(binding, Outcome.RETRY, "HTTP 422: denied by a webhook", 0.0))
        loop._on_bound(BindResult(binding, Outcome.RETRY, changed, 0.0, observed=read_back))
        loop._on_bound(BindResult(Binding("other", "default", "other", "n"), Outcome.RETRY, "HTTP 403: no", 0.0))
    assert [(e["event"], e["log_level"]) for e in logs if str(e["event"]).startswith("binder.")] == [
        ("binder.failed", "error"), ("binder.preempted", "info"), ("binder.failed", "error")]
    # what changed it is the preemption's first write, sent or not the deletion after it (the
    # round-6 adversary saw a preemptor deleted in between: no eviction, yet the line said one)
    [preempted] = [e for e in logs if e["event"] == "binder.preempted"]
    assert preempted["reason"] == ("the pod is a preemption victim: the preemption's DisruptionTarget write "
                                   "changed it while its Binding was in flight")


def test_a_gang_whose_members_bindings_are_in_flight_is_a_victim_whole() -> None:
    """A gang's core is a victim only when every member can go: members whose Bindings are out
    count as placed members, as kube-scheduler's assumed pods do, so the whole gang goes at once."""
    core = Scheduler(config(BINPACK))
    core.apply("ADDED", b.node("n", gpus=2), 0.0)
    for i in range(2):
        core.apply("ADDED", b.pod(f"g{i}", limits={"nvidia.com/gpu": 1}, priority=LOW,
                                  labels=b.gang_labels("train", 2)), 0.0)
    placed = core.schedule_next(0.0) or []
    assert sorted(a.pod.meta.name for a in placed if a.node == "n") == ["g0", "g1"]
    assert all(core.state.placements[a.pod.uid].assumed for a in placed)
    core.apply("ADDED", b.pod("high", limits={"nvidia.com/gpu": 2}, priority=HIGH), 1.0)
    high = _schedule(core, "high", 1.0)
    assert sorted(victim.meta.name for victim in high.preempted) == ["g0", "g1"], high.message
    assert high.nominated_node == "n" and _gpus_in_use(core, "n") == 2


def test_a_victims_binding_confirmed_after_the_preemptor_held_its_gpu_is_no_device_conflict() -> None:
    """The live re-check of this change: 79 `DeviceConflict` Warnings on a leader in 20 minutes,
    each naming an in-flight victim and the preemptor nominated for its GPUs — the victim's Binding
    landed after the preemptor's hold was charged, and charging the now-bound victim found the
    hold beside it. A hold is the preemptor's reservation beside a victim on its way out, not a
    second pod holding the GPU (as when the victim was bound first): nothing to warn about. The
    GPU stays held by the victim until it is gone."""
    core = Scheduler(config(BINPACK))
    device = b.device("n", 0)
    for obj in (b.node("n", gpus=1), device, b.resource_class("v100", match_labels={"model": "V100"})):
        core.apply("ADDED", obj, 0.0)
    low = b.pod("low", limits={"class.tessera.dev/v100": 1}, priority=LOW)
    core.apply("ADDED", copy.deepcopy(low), 0.0)
    [placed] = core.schedule_next(0.0) or []
    assert placed.node == "n"
    core.apply("ADDED", b.pod("high", limits={"class.tessera.dev/v100": 1}, priority=HIGH), 1.0)
    high = _schedule(core, "high", 1.0)
    assert [victim.meta.name for victim in high.preempted] == ["low"] and high.nominated_node == "n"
    bound = copy.deepcopy(low)  # its Binding lands (the watch shows it bound with its devices)
    bound["spec"]["nodeName"] = "n"
    bound["metadata"]["annotations"] = dict(placed.annotations)
    bound["metadata"]["resourceVersion"] = "7"
    notices = core.apply("MODIFIED", bound, 2.0)
    assert not [n for n in notices if n.reason == "DeviceConflict"], notices
    use = core.state.ledger.use[device["metadata"]["name"]]
    assert low["metadata"]["uid"] in use.exclusive and core.state.node_of(low["metadata"]["uid"]) == "n"


def test_a_shared_victim_confirmed_beside_another_slice_after_a_whole_gpu_hold_is_no_device_conflict() -> None:
    """The second live re-check: one false `DeviceConflict` left, naming two legitimate
    co-sharers — a victim holding a slice, its Binding confirmed after the preemptor's hold of the
    whole GPU, with another pod's slice on it. The conflict itself must be judged without holds,
    not only the names."""
    core = Scheduler(config(BINPACK))
    for obj in (b.node("n", gpus=1), b.device("n", 0), b.resource_class("v100", match_labels={"model": "V100"}),
                b.resource_class("v100-shared", match_labels={"model": "V100"},
                                 sharing={"dimension": "memory", "unit": "1Gi"})):
        core.apply("ADDED", obj, 0.0)
    shared = "class.tessera.dev/v100-shared"
    other = b.pod("other", limits={shared: 8}, priority=LOW)
    low = b.pod("low", limits={shared: 8}, priority=LOW)
    core.apply("ADDED", copy.deepcopy(other), 0.0)
    [first] = core.schedule_next(0.0) or []
    bound = copy.deepcopy(other)  # `other` is bound (its Binding confirmed)
    bound["spec"]["nodeName"], bound["metadata"]["annotations"] = "n", dict(first.annotations)
    core.apply("MODIFIED", bound, 0.5)
    core.apply("ADDED", copy.deepcopy(low), 0.5)
    [placed] = core.schedule_next(0.5) or []
    assert placed.node == "n"  # low's slice beside other's, its Binding in flight
    core.apply("ADDED", b.pod("high", limits={"class.tessera.dev/v100": 1}, priority=HIGH), 1.0)
    high = _schedule(core, "high", 1.0)
    assert sorted(victim.meta.name for victim in high.preempted) == ["low", "other"], high.message
    confirmed = copy.deepcopy(low)
    confirmed["spec"]["nodeName"], confirmed["metadata"]["annotations"] = "n", dict(placed.annotations)
    notices = core.apply("MODIFIED", confirmed, 2.0)
    assert not [n for n in notices if n.reason == "DeviceConflict"], notices
