"""Fault injection on the real control plane: Tessera (a subprocess, through the fault proxy)
keeps every invariant while things break under it.

Each scenario builds its own GPU cluster (V100 nodes for exclusive classes and plain GPUs, T4
nodes for a memory-shared class), submits a mixed workload (plain, class, shared and CPU-heavy
pods, label and PodGroup gangs; in two scenarios urgent pods that preempt them, one with the leader
killed between two evictions of a gang), breaks something
while it is being scheduled, then stops the faults and checks with ``tessera_testing.invariants``:
no device or node over capacity, gangs all-or-nothing, every pod that fits bound, no pod bound
twice or on a stale view, and no scheduler process that exited on its own. Short versions for
CI: about 10-35 s each, two to three minutes for the file; the long randomized version is
``python -m bench.soak``.

The last three tests are focused reproductions of scheduler bugs the scenarios found (a deposed
leader still binding, gated Bindings sent after their node was deleted, a deleted
ExtendedResource no longer counted against its node); each docstring says what must hold.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from scheduler.kube.controlplane import LocalControlPlane
from tessera_testing.faultrun import FaultRun, RunReport
from tessera_testing.faultproxy import Faults

pytestmark = pytest.mark.timeout(150)

RunFactory = Callable[..., FaultRun]


@pytest_asyncio.fixture
async def fault_run(clean_cluster: LocalControlPlane, tmp_path: Path,
                    request: pytest.FixtureRequest) -> AsyncIterator[RunFactory]:
    """``async with fault_run(seed=..., replicas=...) as run`` on the session's control plane."""
    runs: list[FaultRun] = []

    def make(**kwargs: Any) -> FaultRun:
        run = FaultRun(clean_cluster, tmp_path, name=request.node.name.removeprefix("test_")[:30], **kwargs)
        runs.append(run)
        return run

    yield make
    for run in runs:  # normally closed by its `async with`; this covers a failed start
        await run.close()


def assert_clean(report: RunReport) -> None:
    print(report.summary())
    assert report.violations == [], report.summary()


async def test_baseline_without_faults(fault_run: RunFactory) -> None:
    async with fault_run(seed=1) as run:
        await run.submit(run.wave("a", impossible_gang=True))
        await run.submit(run.wave("b"))
        report = await run.finish(bind_timeout=40)
    assert_clean(report)
    assert report.bound == report.must_bind


def _gang_members(run: FaultRun, prefix: str) -> set[str]:
    return {key for key in run.bound_keys() if key.startswith(f"{run.namespace}/{prefix}")}


async def test_kill9_mid_gang_then_restart_completes_gangs(fault_run: RunFactory) -> None:
    async with fault_run(seed=11) as run:
        # Slow, uneven requests spread a gang's Bindings over time, so the kill lands inside one.
        run.proxy.configure(Faults(delay_request=0.6, delay_seconds=(0.1, 0.8)))
        await run.submit(run.wave("a", label_gangs=2, podgroup_gangs=1))
        gangs = ("a-lg0-", "a-lg1-", "a-pg0-")
        assert await run.wait_for(lambda: any(_gang_members(run, g) for g in gangs), 30)
        await run.kill(run.replicas[0])
        at_kill = {g: len(_gang_members(run, g)) for g in gangs}
        run.proxy.configure(Faults())
        # Bindings the dead replica sent are still held by the proxy for up to 0.8 s and land
        # after that: bind_by_hand waits until they have landed and the watcher has seen them
        # before it picks a device that looks free (a fixed 1.5 s pause here let the *test*
        # double-assign a device whenever forwarding and the watch took longer than 0.7 s).
        # While it is down, a new gang gets one member bound by hand: the state a crash right
        # after that member's Binding leaves behind.
        await run.submit(run.wave("b", plain=0, exclusive=0, big=0, shared=0, cpu_heavy=0, podgroup_gangs=0))
        await run.bind_by_hand("b-lg0-0", run.cluster.resource(run.cluster.exclusive_class))
        await run.add_replica().wait_ready()
        report = await run.finish()
    print("gang members bound at the kill:", at_kill)
    assert_clean(report)
    assert report.bound == report.must_bind


async def test_apiserver_restart_mid_run(fault_run: RunFactory) -> None:
    async with fault_run(seed=12) as run:
        await run.submit(run.wave("a", impossible_gang=True))
        await run.wait_bound(6)
        later = asyncio.create_task(run.submit(run.wave("b"), pause=0.05))
        await asyncio.sleep(0.3)  # restart while pods arrive and Bindings are in flight
        await run.restart_apiserver()
        await later
        report = await run.finish()
    assert_clean(report)
    assert report.faults["apiserver_restart"] == 1


async def test_watch_cuts_every_few_seconds(fault_run: RunFactory) -> None:
    async with fault_run(seed=13) as run:
        run.proxy.configure(Faults(cut_every=1.5, cut_watches_only=True))
        await run.submit(run.wave("a", impossible_gang=True), pause=0.1)
        await asyncio.sleep(3)
        run.proxy.configure(Faults(cut_every=2.0, cut_watches_only=False))  # every connection, Bindings too
        await run.submit(run.wave("b"), pause=0.1)
        await asyncio.sleep(4)
        report = await run.finish()
    assert_clean(report)
    assert report.faults["cut_watch"] >= 4


async def test_410_storm(fault_run: RunFactory) -> None:
    async with fault_run(seed=14) as run:
        # Cuts force re-watches; most re-watches are answered 410 Gone: relist after relist.
        run.proxy.configure(Faults(watch_gone=0.7, cut_every=1.0, cut_watches_only=True))
        await run.submit(run.wave("a", impossible_gang=True), pause=0.1)
        await run.submit(run.wave("b"), pause=0.1)
        await asyncio.sleep(3)
        report = await run.finish(bind_timeout=90)
    assert_clean(report)
    assert report.faults["watch_410_status"] + report.faults["watch_410_event"] >= 5


async def test_binding_failures_before_and_after_forwarding(fault_run: RunFactory) -> None:
    async with fault_run(seed=15) as run:
        run.proxy.configure(Faults(bind_fail_before=0.1, bind_fail_after=0.1, bind_hang_after=0.05, hang_seconds=2.0))
        await run.submit(run.wave("a", impossible_gang=True))
        await run.submit(run.wave("b"))
        await run.wait_bound(25, timeout=25)
        report = await run.finish()
    assert_clean(report)
    faults = report.faults
    assert faults["bind_500_before"] and faults["bind_500_after"], faults


async def test_two_replicas_with_leader_kills(fault_run: RunFactory) -> None:
    async with fault_run(seed=16, replicas=2) as run:
        run.proxy.configure(Faults(bind_fail_after=0.1, delay_request=0.2))
        leader = await run.leader()
        await run.submit(run.wave("a"), pause=0.05)
        await run.wait_bound(6)
        await run.kill(leader)
        run.add_replica()  # the replacement comes up as a standby
        await run.submit(run.wave("b"), pause=0.05)
        second = await run.leader()
        assert second is not leader
        await run.wait_bound(len(run.bound_keys()) + 3)
        await run.kill(second)
        report = await run.finish()
    assert_clean(report)
    assert report.faults["kill9"] == 2


async def test_node_and_device_deletion_while_pods_are_pending(fault_run: RunFactory) -> None:
    """Nodes and devices disappear while pods wait: queued, backing off, or placed with their
    Binding held behind the allocation gate (a slow node agent keeps gates closed for seconds).
    Nothing may be bound to a node or device deleted more than the grace period before."""
    async with fault_run(seed=17, agent_delay=(2.0, 3.0), v100_nodes=6) as run:
        run.proxy.configure(Faults(delay_request=0.3, delay_seconds=(0.05, 0.3)))
        await run.submit(run.wave("a", exclusive=6, impossible_gang=True))
        assert await run.wait_bound(3)
        # The nodes where pods are being bound have Bindings queued behind their gates.
        busy = sorted({first.node for first in run.watcher.first_bound.values()
                       if first.node in run.cluster.v100_nodes})
        await run.delete_node(busy[0])
        survivor = busy[1] if len(busy) > 1 else next(n for n in run.cluster.v100_nodes if n != busy[0])
        for device in run.cluster.devices_of(survivor):
            await run.delete_device(device)
        await run.add_nodes("v100", 3)
        await run.submit(run.wave("b"))
        report = await run.finish(bind_timeout=60, grace=3.0)
    assert_clean(report)


async def test_resource_class_edited_while_pods_use_it(fault_run: RunFactory) -> None:
    """Two classes are edited while their pods run and while more of their pods wait (some behind
    the allocation gate): bound pods keep their devices and stay charged; every binding made after
    the edit follows the new selector and the new sharing unit."""
    async with fault_run(seed=18, agent_delay=(1.0, 2.0)) as run:
        run.proxy.configure(Faults(bind_fail_after=0.2))
        await run.submit(run.wave("a", big=3, shared=4))
        assert await run.wait_bound(8)
        cluster = run.cluster
        # `big` moves from V100 (memory > 20Gi) to the T4s the shared class is slicing, and the
        # shared class doubles its unit.
        await run.edit_class(cluster.big_class, {"selector": {"matchLabels": {"model": "T4"}, "matchExpressions": None}})
        await run.edit_class(cluster.shared_class, {"sharing": {"dimension": "memory", "unit": "2Gi"}})
        await run.submit(run.wave("b", plain=1, exclusive=1, big=2, shared=3, label_gangs=1, podgroup_gangs=0))
        report = await run.finish(grace=3.0)
    assert_clean(report)


async def test_preemption_after_a_leader_kill(fault_run: RunFactory) -> None:
    """Two urgent whole-node pods (priority 1000) arrive on four V100 nodes a wave has spread
    over, right after the leader is killed, while requests are slow and Bindings fail after
    forwarding: the standby takes over and preempts from the state it has read. Two of four nodes
    are cleared, so a gang can straddle a cleared node and a kept one: it must go whole (never
    below its minimum; a per-pod victim rule fails here). No GPU is given to a preemptor while a
    victim still holds it, and both urgent pods are bound at the end (everything else is priority
    0). The leader is killed before the preemptions, not during them (a leader killed between two
    evictions of one gang is the next test). The kill can also fall between a gang's Bindings: the
    standby then finds the gang below its minimum, evicts its running members, and must not bind
    the pending one next to them (a CI run once did: `gang-partial`, 1 of 1 members bound)."""
    async with fault_run(seed=19, replicas=2, v100_nodes=4) as run:
        run.proxy.configure(Faults(bind_fail_after=0.1, delay_request=0.2))
        leader = await run.leader()
        await run.submit(run.wave("a"), pause=0.05)
        assert await run.wait_bound(10, timeout=40)
        await run.kill(leader)
        run.add_replica()
        await run.submit_urgent("u", 2)
        urgent = f"{run.namespace}/u-urgent-"
        assert await run.wait_for(lambda: sum(1 for k in run.bound_keys() if k.startswith(urgent)) == 2, 60)
        report = await run.finish()
    assert_clean(report)
    assert report.evicted >= 1, report.summary()


async def test_a_leader_killed_between_two_evictions_of_a_gang(fault_run: RunFactory) -> None:
    """Five 3-member gangs (minimum 3) fill four 4-GPU V100 nodes; an urgent whole-node pod arrives. The
    leader's proxy lets one pod DELETE through and fails the rest, so its evictions stop after the
    first victim, and it is killed there; then the urgent pod is deleted (its job cancelled), so
    the successor has no preemption of its own to run. The gang that lost a member must not keep
    running below its minimum: the successor finishes its eviction from the marks the leader
    wrote on every victim before its first DELETE. Without that, the remnant runs on (gang-partial;
    before, this was a known gap: the successor re-decided only for a preemptor still waiting)."""
    async with fault_run(seed=23, replicas=2, proxy_per_replica=True, v100_nodes=4) as run:
        leader = await run.leader()
        assert leader.proxy is not None
        await run.submit(run.wave("a", plain=0, exclusive=0, big=0, shared=0, cpu_heavy=0, label_gangs=5,
                                  podgroup_gangs=0))
        assert await run.wait_bound(15, timeout=40)
        members = run.bound_keys()
        leader.proxy.configure(Faults(pod_deletes_before_failing=1))
        await run.submit_urgent("u", 1)
        assert await run.wait_for(lambda: bool(members - set(run.watcher.view.pod_by_key())), 30)
        await run.kill(leader)
        await run.delete_pod("u-urgent-0")
        [first] = members - set(run.watcher.view.pod_by_key())
        gang = {key for key in members if key.rsplit("-", 1)[0] == first.rsplit("-", 1)[0]}
        await run.leader(timeout=30, other_than=leader)
        assert await run.wait_for(lambda: not gang & set(run.watcher.view.pod_by_key()), 30), \
            f"{sorted(gang & set(run.watcher.view.pod_by_key()))} still running without {first}"
        report = await run.finish()
        events = (await run.api.request("GET", f"/apis/events.k8s.io/v1/namespaces/{run.namespace}/events"))[1]
    assert_clean(report)
    finished = {e["regarding"]["name"] for e in events["items"]
                if e["reason"] == "Preempted" and "to finish the eviction" in e["note"]}
    assert {key.partition("/")[2] for key in gang} - {first.partition("/")[2]} <= finished, finished


# --- focused reproductions of what the scenarios above found ------------------------------------


async def test_deposed_leader_stops_binding(fault_run: RunFactory) -> None:
    """A leader cut off from the apiserver (not killed) loses the lease. Once it can write again it
    must not bind what it decided while it led: the new leader has been handing out the same
    devices meanwhile.

    High-priority pods arriving during the failover make the new leader's choices differ from the
    old one's: it gives them the devices the old leader had planned for its gated pods.
    """
    async with fault_run(seed=19, replicas=2, proxy_per_replica=True, agent_delay=(1.5, 2.5), v100_nodes=3) as run:
        urgent = f"urgent-{run.rid}"
        await run.api.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", {
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": urgent},
            "value": 100000})
        try:
            leader = await run.leader()
            assert leader.proxy is not None
            # Single-device class pods: binpack stacks them, and the slow node agent keeps each
            # node's allocation gate closed, so the leader holds a queue of deferred Bindings.
            await run.submit(run.wave("a", plain=0, exclusive=8, big=0, shared=0, cpu_heavy=0, label_gangs=0,
                                      podgroup_gangs=0))
            await run.wait_bound(2)
            leader.proxy.configure(Faults(reset=1.0))  # every new request resets; open watches keep streaming
            run.count("partition")
            # Between the old leader stepping down (renew deadline) and the standby taking over
            # (lease duration), urgent pods arrive: the new leader places them first.
            assert await run.wait_for(lambda: '"leader.stopped"' in leader.log_tail(5000), 20)
            groups, plans = run.wave("u", plain=0, exclusive=4, big=0, shared=0, cpu_heavy=0, label_gangs=0,
                                     podgroup_gangs=0)
            for plan in plans:
                plan.obj["spec"]["priorityClassName"] = urgent
            await run.submit((groups, plans))
            successor = await run.leader(timeout=20, other_than=leader)
            await asyncio.sleep(1.0)
            leader.proxy.configure(Faults())  # it can write again, and its gates keep opening
            await asyncio.sleep(8)
            report = await run.finish()
            late = [e for e in report_events(await run.api.list(f"/apis/events.k8s.io/v1/namespaces/{run.namespace}/events"))
                    if e["reportingInstance"] == leader.identity and e["eventTime"] > _lease_acquired(successor)]
        finally:
            await run.api.request("DELETE", f"/apis/scheduling.k8s.io/v1/priorityclasses/{urgent}")
    print(f"deposed leader {leader.identity} bound {len(late)} pod(s) after {successor.identity} took over:",
          *[e["note"] for e in late], sep="\n  ")
    assert_clean(report)
    assert late == []


def report_events(listed: tuple[list[dict[str, Any]], str]) -> list[dict[str, Any]]:
    return [e for e in listed[0] if e.get("reason") == "Scheduled"]


def _lease_acquired(replica: Any) -> str:
    """When ``replica`` became leader, from its own log (RFC 3339, comparable with eventTime)."""
    for line in replica.log_tail(500_000).splitlines():
        if '"leader.started"' in line:
            return str(json.loads(line)["timestamp"])
    return "9999"


async def test_deleted_extended_resource_still_counts_against_the_node_gpu_count(fault_run: RunFactory) -> None:
    """Pods keep the devices they hold when an ExtendedResource object is deleted (devices are
    released when the pod is terminal or gone), so those GPUs must stay counted against the
    node's `nvidia.com/gpu`: with 2 of 4 GPUs held through a class, only 2 plain 1-GPU pods fit."""
    async with fault_run(seed=21, v100_nodes=1, t4_nodes=0) as run:
        node = run.cluster.v100_nodes[0]
        await run.submit(run.wave("a", plain=0, exclusive=2, big=0, shared=0, cpu_heavy=0, label_gangs=0,
                                  podgroup_gangs=0))
        assert await run.wait_bound(2)
        for device in run.cluster.devices_of(node):
            await run.delete_device(device)
        await asyncio.sleep(1.0)
        groups, plans = run.wave("b", plain=4, exclusive=0, big=0, shared=0, cpu_heavy=0, label_gangs=0,
                                 podgroup_gangs=0)
        for plan in plans:
            plan.obj["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}
            # two of the four fit; which two is the scheduler's choice: each must be bound while
            # the node has room by the apiserver's state (finish waits for that, no fixed pause)
            plan.must_bind, plan.if_room = False, True
        await run.submit((groups, plans))
        report = await run.finish()
    assert_clean(report)
    assert report.bound == 4


async def test_gated_binding_is_not_sent_after_its_node_is_deleted(fault_run: RunFactory) -> None:
    """Bindings held behind the allocation gate were decided on an older view; when the gate opens
    the node (or device) may be gone. They must be re-placed, not sent."""
    async with fault_run(seed=22, agent_delay=(3.0, 3.5), v100_nodes=1, t4_nodes=0) as run:
        node = run.cluster.v100_nodes[0]
        await run.submit(run.wave("a", plain=0, exclusive=3, big=0, shared=0, cpu_heavy=0, label_gangs=0,
                                  podgroup_gangs=0))
        assert await run.wait_bound(1)  # one binds; two wait behind the gate for the slow agent
        await run.delete_node(node)
        await run.add_nodes("v100", 2)  # room for the two to be placed again
        report = await run.finish(grace=2.0)
    assert_clean(report)
