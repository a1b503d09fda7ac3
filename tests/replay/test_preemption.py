"""Preemption (DefaultPreemption): upstream's victim and node choice, gangs, devices, holds.

The tables marked "upstream" are kube-scheduler's own unit tests (default_preemption_test.go at
008b365; docs/research/preemption-upstream.md section 5) replayed through Tessera: nodes of cpu
500m / memory 500 / 32 pods, requests S/M/L/VL = 100/200/300/500 (milli-CPU and bytes),
priorities neg/low/mid/high/vhigh = -100/0/100/1000/10000, start times tN.
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.api.config import parse_config
from scheduler.api.config_model import SchedulerConfig
from scheduler.core.objects import parse_pod
from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, config

NEG, LOW, MID, HIGH, VHIGH = -100, 0, 100, 1000, 10000
S, M, L, VL = ("100m", "100"), ("200m", "200"), ("300m", "300"), ("500m", "500")


def _t(n: int) -> str:
    return f"2026-01-01T00:00:{n:02d}Z"


def _running(name: str, node: str, priority: int, size: tuple[str, str], start: int | None = 0,
             labels: dict[str, str] | None = None, scheduler: str = "tessera") -> dict[str, Any]:
    pod = b.pod(name, requests={"cpu": size[0], "memory": size[1]}, priority=priority, node_name=node,
                phase="Running", labels=labels, scheduler=scheduler)
    if start is not None:
        pod["status"]["startTime"] = _t(start)
    return pod


def _cluster(nodes: dict[str, list[tuple[str, int, tuple[str, str], int | None]]], *, labels: dict[str, dict[str, str]] | None = None,
             cfg: Any = None) -> Run:
    run = Run(cfg or config(BINPACK))
    run.add(*(b.node(name, cpu="500m", memory="500", pods=32) for name in nodes))
    for node, pods in nodes.items():
        run.add(*(_running(name, node, prio, size, start, (labels or {}).get(name)) for name, prio, size, start in pods))
    return run


def _preemptor(run: Run, name: str, priority: int, size: tuple[str, str], **extra: Any) -> Any:
    run.add(b.pod(name, requests={"cpu": size[0], "memory": size[1]}, priority=priority, **extra))
    return next(a for a in run.attempts if a.pod.key == f"default/{name}")


def _victims(attempt: Any) -> list[str]:
    return sorted(v.meta.name for v in attempt.preempted)


# --- upstream TestSelectBestCandidate -----------------------------------------------------------

@pytest.mark.parametrize(("nodes", "preemptor", "expected"), [
    ({"node1": [("p1.1", MID, M, 0), ("p1.2", MID, L, 0)], "node2": [("p2.1", MID, M, 0), ("p2.2", LOW, M, 0)],
      "node3": [("p3.1", LOW, M, 0), ("p3.2", LOW, M, 0)]}, (HIGH, VL), "node3"),
    ({"node1": [("p1.1", MID, M, 0), ("p1.2", MID, L, 0)], "node2": [("p2.1", MID, L, 0), ("p2.2", LOW, M, 0)],
      "node3": [("p3.1", MID, M, 0), ("p3.2", MID, M, 0)]}, (HIGH, VL), "node2"),
    ({"node1": [("p1.1", MID, S, 0), ("p1.2", NEG, S, 0), ("p1.3", MID, S, 0), ("p1.4", NEG, S, 0)],
      "node2": [("p2.1", MID, L, 0), ("p2.2", NEG, M, 0)],
      "node3": [("p3.1", MID, M, 0), ("p3.2", NEG, S, 0), ("p3.3", LOW, S, 0)]}, (HIGH, VL), "node2"),
    ({"node1": [("p1.1", MID, S, 0), ("p1.2", NEG, S, 0), ("p1.3", NEG, S, 0)],
      "node2": [("p2.1", MID, L, 0), ("p2.2", NEG, M, 0)],
      "node3": [("p3.1", MID, M, 0), ("p3.2", NEG, S, 0), ("p3.3", LOW, S, 0)]}, (HIGH, VL), "node2"),
    ({"node1": [("p1.1", MID, S, 0), ("p1.2", LOW, S, 0), ("p1.3", LOW, S, 0)], "node2": [("p2.1", HIGH, L, 0)],
      "node3": [("p3.1", MID, M, 0), ("p3.2", LOW, S, 0), ("p3.3", LOW, S, 0), ("p3.4", LOW, M, 0)],
      "node4": [("p4.1", MID, M, 0), ("p4.2", MID, S, 0), ("p4.3", MID, S, 0), ("p4.4", NEG, S, 0)]},
     (VHIGH, VL), "node1"),
    ({"node1": [("p1.1", MID, M, 2), ("p1.2", MID, M, 2)], "node2": [("p2.1", MID, M, 3), ("p2.2", MID, M, 3)],
      "node3": [("p3.1", MID, M, 1), ("p3.2", MID, M, 1)]}, (HIGH, VL), "node2"),
    ({"node1": [("p1.1", MID, M, 4), ("p1.2", MID, M, 2)], "node2": [("p2.1", MID, M, 5), ("p2.2", MID, M, 1)],
      "node3": [("p3.1", MID, M, 3), ("p3.2", MID, M, 6)]}, (HIGH, VL), "node3"),
    ({"node1": [("p1.1", LOW, M, 4), ("p1.2", MID, M, 2)], "node2": [("p2.1", MID, M, 6), ("p2.2", LOW, M, 1)],
      "node3": [("p3.1", LOW, M, 3), ("p3.2", MID, M, 5)]}, (HIGH, VL), "node2"),
], ids=["min-highest-priority", "min-sum", "min-pods", "adjusted-sum", "non-overlapping", "start-per-node",
        "start-all-pods", "priority-and-start"])
def test_upstream_select_best_candidate(nodes: Any, preemptor: tuple[int, tuple[str, str]], expected: str) -> None:
    run = _cluster(nodes)
    attempt = _preemptor(run, "preemptor", *preemptor)
    assert attempt.nominated_node == expected
    assert _victims(attempt) == sorted(name for name, *_ in nodes[expected])
    assert run.node_of("preemptor") == expected  # the replay evicts the victims; the next cycle binds it


# --- upstream TestDryRunPreemption: victims per node ------------------------------------------

def _dry_run(run: Run, name: str, priority: int, size: tuple[str, str], node: str) -> Any:
    pod = parse_pod(b.pod(name, requests={"cpu": size[0], "memory": size[1]}, priority=priority))
    runtime = run.scheduler.profiles["tessera"]
    assert runtime.post_filter is not None
    return runtime.post_filter.victims_on(pod, run.state.nodes[node], 0.0)


def test_upstream_dry_run_medium_preempted_small_low_stays() -> None:
    run = _cluster({"node1": [("p1.1", LOW, S, None), ("p1.2", MID, L, None)], "node2": [("p2", MID, L, None)]})
    assert [p.meta.name for u in _dry_run(run, "x", HIGH, L, "node1").victims for p in u.pods] == ["p1.2"]
    assert [p.meta.name for u in _dry_run(run, "x", HIGH, L, "node2").victims for p in u.pods] == ["p2"]


def test_upstream_dry_run_mixed_priorities_and_later_start_first() -> None:
    run = _cluster({"node1": [("p1.1", MID, S, None), ("p1.2", LOW, S, None), ("p1.3", MID, M, None), ("p1.4", HIGH, S, None)],
                    "node2": [("p2", HIGH, L, None)]})
    assert sorted(p.meta.name for u in _dry_run(run, "x", HIGH, L, "node1").victims for p in u.pods) == ["p1.2", "p1.3"]
    assert _dry_run(run, "x", HIGH, L, "node2") == ("No preemption victims found for incoming pod",)
    run = _cluster({"node1": [("p1.1", LOW, S, 5), ("p1.2", LOW, S, 4), ("p1.3", MID, M, 3), ("p1.4", HIGH, S, 2)],
                    "node2": [("p2", HIGH, L, 1)]})
    assert sorted(p.meta.name for u in _dry_run(run, "x", HIGH, L, "node1").victims for p in u.pods) == ["p1.1", "p1.3"]


@pytest.mark.parametrize(("disrupted", "violations"), [((), 1), (("p2",), 1), (("p1.2",), 0)])
def test_upstream_dry_run_pdb_violations(disrupted: tuple[str, ...], violations: int) -> None:
    foo = {"app": "foo"}
    run = _cluster({"node1": [("p1.1", MID, M, None), ("p1.2", MID, M, None)]}, labels={"p1.1": foo, "p1.2": foo})
    run.add(_pdb("pdb", foo, allowed=1, disrupted=disrupted))
    found = _dry_run(run, "x", HIGH, VL, "node1")
    assert sorted(p.meta.name for u in found.victims for p in u.pods) == ["p1.1", "p1.2"]
    assert found.pdb_violations == violations


def _pdb(name: str, match: dict[str, str], allowed: int, disrupted: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": "default", "uid": b.uid_for("PodDisruptionBudget", "default", name)},
            "spec": {"selector": {"matchLabels": match}},
            "status": {"disruptionsAllowed": allowed, "disruptedPods": {p: _t(0) for p in disrupted}}}


# --- upstream TestPostFilter: the status strings ----------------------------------------------

def test_upstream_post_filter_messages() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("node1", cpu="500m", memory="500", pods=1))
    run.add(b.pod("p1", node_name="node1", phase="Running"))
    tied = _preemptor(run, "tied", 0, ("0", "0"))
    assert tied.message == ("0/1 nodes are available: 1 Too many pods. preemption: 0/1 nodes are available: "
                            "1 No preemption victims found for incoming pod.")
    high = _preemptor(run, "high", HIGH, ("0", "0"))
    assert high.nominated_node == "node1" and _victims(high) == ["p1"]

    run = Run(config(BINPACK))
    run.add(b.node("node1", cpu="200m", memory="400"), b.node("node2", cpu="200m", memory="400"))
    run.add(b.pod("a", node_name="node1", phase="Running"), b.pod("b", node_name="node2", phase="Running"))
    attempt = _preemptor(run, "big", HIGH, L)
    # upstream's unit test injects Unschedulable statuses ("2 Insufficient cpu" from the dry run);
    # its real Fit filter answers UnschedulableAndUnresolvable for a request above the node's
    # allocatable (fit.go InsufficientResource.Unresolvable), as Tessera's does: no node is tried
    assert attempt.message == ("0/2 nodes are available: 2 Insufficient cpu. preemption: "
                               "0/2 nodes are available: 2 Preemption is not helpful for scheduling.")
    assert attempt.preempted == [] and attempt.nominated_node is None


def test_preemption_policy_never_evicts_nothing() -> None:
    run = _cluster({"node1": [("low", LOW, VL, 0)]})
    attempt = _preemptor(run, "polite", HIGH, VL, spec_extra={"preemptionPolicy": "Never"})
    assert attempt.preempted == []
    assert attempt.message.endswith(" preemption: not eligible due to preemptionPolicy=Never.")
    assert run.node_of("low") == "node1"


def test_equal_priority_is_never_a_victim_and_other_schedulers_pods_are() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("n", cpu="500m", memory="500"))
    run.add(_running("same", "n", HIGH, M), _running("theirs", "n", LOW, L, scheduler="default-scheduler"))
    attempt = _preemptor(run, "p", HIGH, L)
    assert _victims(attempt) == ["theirs"]


def test_profile_without_default_preemption_never_preempts() -> None:
    raw = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
           "profiles": [{"schedulerName": "tessera", "plugins": {"postFilter": {"disabled": [{"name": "DefaultPreemption"}]}}}]}
    cfg = parse_config(raw, "test")
    assert not cfg.profiles[0].preemption
    run = _cluster({"node1": [("low", LOW, VL, 0)]}, cfg=cfg)
    attempt = _preemptor(run, "p", HIGH, VL)
    assert attempt.preempted == [] and not attempt.preemption_tried
    assert attempt.message == "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory."


# --- nominations and holds ---------------------------------------------------------------------

def _full_node_slow_evictions() -> Run:
    """One node (1 CPU) full with a priority-0 pod `low`; victims terminate slowly: the replay
    deletes nothing until a test says so (`_gone`)."""
    run = Run(config(BINPACK))
    run.add(b.node("n", cpu="1", memory="1Gi"))
    run.add(_running("low", "n", LOW, ("1", "1Gi")))
    run.replay._evict = lambda victims, preemptor: None  # type: ignore[method-assign]
    return run


def _gone(run: Run, name: str) -> None:
    """The pod's deletion completes: the apiserver's DELETED event."""
    run.feed(b.event("DELETED", run.replay.pods[run.state.pod_by_key(f"default/{name}").uid]))


def test_a_nominated_pod_waits_for_its_victims_and_its_room_is_held() -> None:
    """Victims that are terminating but not gone: no second wave, and a lower-priority pod cannot
    take the room; a higher-priority one can (upstream: lower-priority nominations are ignored)."""
    run = _full_node_slow_evictions()
    first = _preemptor(run, "p", MID, ("1", "1Gi"))
    assert first.nominated_node == "n" and _victims(first) == ["low"]
    run.scheduler.queue.flush_unschedulable(1e9)
    retry = list(run.replay.drain())
    assert retry and all(a.preempted == [] for a in retry)
    assert retry[-1].message.endswith("preemption: not eligible due to a terminating pod on the nominated node.")
    _gone(run, "low")
    run.add(b.pod("sneaky", requests={"cpu": "1", "memory": "1Gi"}, priority=LOW))
    assert run.node_of("p") == "n"
    assert run.node_of("sneaky") is None


def test_a_higher_priority_pod_may_take_a_lower_nominated_pods_room() -> None:
    run = _full_node_slow_evictions()
    _preemptor(run, "mid", MID, ("1", "1Gi"))
    assert "default/mid" in {run.state.pods[uid].key for uid in run.state.holds}
    # a high-priority pod arrives while low terminates: mid's hold does not stop it, and its
    # preemption of the same node clears mid's nomination (upstream)
    high = _preemptor(run, "high", HIGH, ("1", "1Gi"))
    assert high.nominated_node == "n"
    assert {run.state.pods[uid].key for uid in run.state.holds} == {"default/high"}
    _gone(run, "low")
    assert run.node_of("high") == "n"
    assert run.node_of("mid") is None


# --- gangs ----------------------------------------------------------------------------------------

def _gang_member(name: str, group: str, minimum: int, node: str, priority: int, gpus: int, start: int) -> dict[str, Any]:
    pod = b.pod(name, requests={"nvidia.com/gpu": gpus}, priority=priority, node_name=node, phase="Running",
                labels=b.gang_labels(group, minimum))
    pod["status"]["startTime"] = _t(start)
    return pod


def test_a_gang_victim_is_never_left_below_its_minimum() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("a", gpus=4), b.node("b", gpus=4))
    run.add(*(_gang_member(f"g{i}", "train", 4, "a" if i < 2 else "b", LOW, 2, i) for i in range(4)))
    attempt = _preemptor(run, "serve", HIGH, ("0", "0"), limits={"nvidia.com/gpu": 2})
    assert _victims(attempt) == ["g0", "g1", "g2", "g3"]  # the whole gang, also on the other node
    assert run.node_of("serve") in ("a", "b")


def test_a_gang_whose_running_members_are_victims_is_not_completed_meanwhile() -> None:
    """A gang below its minimum (two of three running, the third pending: a leader died between
    its Bindings) is evicted as its running core; its pending member must not then be bound next
    to the leaving members, which would leave it alone below the minimum once they are gone
    (CI, test_preemption_after_a_leader_kill: `gang-partial`, 1 of 1 members bound)."""
    run = Run(config(BINPACK))
    run.add(b.node("a", gpus=4), b.node("b", gpus=4))
    run.add(b.pod("busy", requests={"nvidia.com/gpu": 3}, priority=HIGH, node_name="b", phase="Running"))
    run.add(*(_gang_member(f"g{i}", "train", 3, "a", LOW, 1, i) for i in range(2)))
    run.replay._evict = lambda victims, preemptor: None  # type: ignore[method-assign]  # victims terminate slowly
    attempt = _preemptor(run, "urgent", HIGH, ("0", "0"), limits={"nvidia.com/gpu": 4})
    assert _victims(attempt) == ["g0", "g1"] and attempt.nominated_node == "a"
    run.add(b.pod("g2", requests={"nvidia.com/gpu": 1}, priority=LOW, labels=b.gang_labels("train", 3)))
    assert run.node_of("g2") is None  # b has room for it, but its gang's other members are leaving
    assert "cannot find enough sibling pods, current pods number: 1, minMember of group: 3" in run.last("g2").message
    _gone(run, "g0")
    _gone(run, "g1")
    run.scheduler.queue.flush_unschedulable(1e9)
    list(run.replay.drain())
    assert run.node_of("g2") is None
    assert run.node_of("urgent") == "a"


def test_a_gang_member_parked_while_its_gang_is_evicted_gives_its_held_room_back() -> None:
    """g2 preempted for itself and holds room on b; then its gang's running members become an
    urgent pod's victims, so g2 waits for siblings: it must not keep b's room (found in review:
    the room stayed held for good, and `y` never got it)."""
    run = Run(config(BINPACK))
    run.add(b.node("a", gpus=4), b.node("b", gpus=4))
    run.add(b.pod("busy", requests={"nvidia.com/gpu": 2}, priority=HIGH, node_name="b", phase="Running"))
    run.add(b.pod("x", requests={"nvidia.com/gpu": 2}, priority=NEG, node_name="b", phase="Running"))
    run.add(*(_gang_member(f"g{i}", "train", 3, "a", LOW, 2, i) for i in range(2)))
    run.replay._evict = lambda victims, preemptor: None  # type: ignore[method-assign]
    run.add(b.pod("g2", requests={"nvidia.com/gpu": 2}, priority=LOW, labels=b.gang_labels("train", 3)))
    assert _victims(run.last("g2")) == ["x"]
    assert _victims(_preemptor(run, "urgent", HIGH, ("0", "0"), limits={"nvidia.com/gpu": 4})) == ["g0", "g1"]
    _gone(run, "x")
    assert run.last("g2").nominated_node == ""  # its nomination goes with the hold
    run.add(b.pod("y", requests={"nvidia.com/gpu": 2}, priority=LOW))
    _gone(run, "g0")
    _gone(run, "g1")
    run.scheduler.queue.flush_unschedulable(1e9)
    list(run.replay.drain())
    assert run.node_of("y") == "b" and run.node_of("g2") is None and not run.state.holds


@pytest.mark.parametrize("how", ["failed", "abandoned"])
def test_an_eviction_that_does_not_happen_lets_the_gangs_pending_member_complete_it(how: str) -> None:
    """The same gang, its eviction refused for good (or dropped with the lease) after the
    preemptor went away: its members stay, so its pending member is tried again at once (not
    after the 5-minute flush)."""
    run = Run(config(BINPACK))
    run.add(b.node("a", gpus=4), b.node("b", gpus=4))
    run.add(b.pod("busy", requests={"nvidia.com/gpu": 3}, priority=HIGH, node_name="b", phase="Running"))
    run.add(*(_gang_member(f"g{i}", "train", 3, "a", LOW, 1, i) for i in range(2)))
    run.replay._evict = lambda victims, preemptor: None  # type: ignore[method-assign]
    attempt = _preemptor(run, "urgent", HIGH, ("0", "0"), limits={"nvidia.com/gpu": 4})
    run.add(b.pod("g2", requests={"nvidia.com/gpu": 1}, priority=LOW, labels=b.gang_labels("train", 3)))
    assert run.node_of("g2") is None
    _gone(run, "urgent")
    if how == "failed":  # e.g. a 422 on a victim's mark fails the whole preemption
        for victim in attempt.preempted:
            run.scheduler.eviction_failed(victim.uid, 1.0)
    else:  # the lease is lost before the evictions are written: a later term decides afresh
        run.scheduler.abandon_evictions(1.0)
    list(run.replay.drain())
    assert run.node_of("g2") == "b" and run.node_of("g0") == run.node_of("g1") == "a"


def test_a_gangs_surplus_goes_before_its_core() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("a", gpus=4), b.node("b", gpus=4))
    run.add(*(_gang_member(f"g{i}", "train", 3, "a" if i < 2 else "b", LOW, 2, i) for i in range(4)))
    attempt = _preemptor(run, "serve", HIGH, ("0", "0"), limits={"nvidia.com/gpu": 2})
    assert len(attempt.preempted) == 1  # 4 running, minimum 3: one surplus member is enough
    gang_left = [n for n in ("g0", "g1", "g2", "g3") if run.state.pod_by_key(f"default/{n}") is not None]
    assert len(gang_left) == 3


def test_a_single_pod_goes_before_a_gang_at_equal_priority() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("a", gpus=4))
    run.add(*(_gang_member(f"g{i}", "train", 2, "a", LOW, 1, i) for i in range(2)))
    single = b.pod("single", requests={"nvidia.com/gpu": 2}, priority=LOW, node_name="a", phase="Running")
    single["status"]["startTime"] = _t(0)  # older than the gang: start time does not outrank the kind
    run.add(single)
    attempt = _preemptor(run, "serve", HIGH, ("0", "0"), limits={"nvidia.com/gpu": 2})
    assert _victims(attempt) == ["single"]


def test_a_gang_preempts_only_when_the_whole_gang_then_fits() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("a", gpus=8), b.node("b", gpus=8))
    run.add(_running("low-a", "a", LOW, ("0", "0")), _running("low-b", "b", LOW, ("0", "0")))
    for pod, node in (("low-a", "a"), ("low-b", "b")):
        raw = b.pod(pod, limits={"nvidia.com/gpu": 8}, priority=LOW, node_name=node, phase="Running")
        run.add(raw)
    big = [b.pod(f"big{i}", limits={"nvidia.com/gpu": 8}, priority=HIGH, labels=b.gang_labels("big", 3)) for i in range(3)]
    attempts = run.add(*big)
    assert all(a.preempted == [] for a in attempts)  # 3 x 8 GPUs cannot fit on 2 nodes: evict nothing
    assert any(a.preemption_tried for a in attempts)
    assert run.node_of("low-a") == "a" and run.node_of("low-b") == "b"

    run = Run(config(BINPACK))
    run.add(b.node("a", gpus=8), b.node("b", gpus=8), b.node("c", gpus=8))
    run.add(*(b.pod(f"low-{n}", limits={"nvidia.com/gpu": 8}, priority=LOW, node_name=n, phase="Running") for n in "ab"))
    run.add(b.pod("mid-c", limits={"nvidia.com/gpu": 8}, priority=MID, node_name="c", phase="Running"))
    two = [b.pod(f"job{i}", limits={"nvidia.com/gpu": 8}, priority=MID + 1, labels=b.gang_labels("job", 2)) for i in range(2)]
    attempts = run.add(*two)
    victims = sorted(v.meta.name for a in attempts for v in a.preempted)
    assert victims == ["low-a", "low-b"]  # the lowest priority, and only as many as the gang needs
    assert {run.node_of("job0"), run.node_of("job1")} == {"a", "b"}


# --- devices ---------------------------------------------------------------------------------------

def test_victims_are_chosen_for_the_devices_the_preemptor_needs() -> None:
    """Two pods hold one GPU each on a node with a K80 and a P100: a P100 preemptor evicts the
    pod on the P100, even though the K80 pod has the lower priority."""
    run = Run(config(BINPACK))
    run.add(b.node("a", gpus=2))
    run.add(b.device("a", 0, model="K80", memory="12Gi"), b.device("a", 1, model="P100", memory="16Gi"))
    run.add(b.resource_class("k80", match_labels={"model": "K80"}), b.resource_class("p100", match_labels={"model": "P100"}))
    run.add(b.pod("on-k80", limits={"class.tessera.dev/k80": 1}, priority=NEG))
    run.add(b.pod("on-p100", limits={"class.tessera.dev/p100": 1}, priority=LOW))
    assert run.node_of("on-k80") == "a" and run.node_of("on-p100") == "a"
    attempt = _preemptor(run, "needs-p100", HIGH, ("0", "0"), limits={"class.tessera.dev/p100": 1})
    assert _victims(attempt) == ["on-p100"]
    assert run.node_of("needs-p100") == "a"
    assert run.node_of("on-k80") == "a"


def test_the_shipped_preemption_example_evicts_only_the_training_gang() -> None:
    """examples/preemption.jsonl: an 8-GPU inference gang on two full 8-GPU nodes. Evicting four
    1-GPU batch pods on one node and the gang's pods there would also make room; the minimal
    choice is the 4 x 2-GPU training gang alone (whole: minimum 4), both inference pods on its node."""
    from examples.generate import preemption

    run = Run(config(None))  # the built-in default configuration, as `tessera simulate` without --config
    run.feed(*preemption())
    assert sorted(run.replay.stats.evicted) == [f"default/train-{i}" for i in range(4)]
    assert run.node_of("serve-0") == run.node_of("serve-1") is not None
    assert all(run.node_of(f"batch-{i}") is not None for i in range(8))


def _urgent_podgroup_on_a_full_node(with_class: bool = True, cfg: SchedulerConfig | None = None) -> Run:
    """A 4-GPU node full of two priority-10 pods, and a PodGroup `serve` (minimum 2) whose class
    `urgent` is worth 1000 (`with_class`: the PriorityClass exists), under `cfg` (binpack)."""
    run = Run(cfg or config(BINPACK))
    if with_class:
        run.add({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                 "metadata": {"name": "urgent", "uid": "pc-urgent"}, "value": HIGH})
    run.add(b.node("a", gpus=4))
    run.add(*(b.pod(f"low-{i}", limits={"nvidia.com/gpu": 2}, priority=10, node_name="a", phase="Running")
              for i in range(2)))
    group = b.podgroup("serve", 2)
    group["spec"]["priorityClassName"] = "urgent"
    run.add(group)
    return run


def _serve_members() -> list[dict[str, Any]]:
    return [b.pod(f"serve-{i}", limits={"nvidia.com/gpu": 2}, labels={"scheduling.x-k8s.io/pod-group": "serve"})
            for i in range(2)]


def test_a_podgroup_priority_class_gives_its_gang_the_priority_to_preempt() -> None:
    """Members without a priority of their own (0): the PodGroup's priorityClassName decides."""
    run = _urgent_podgroup_on_a_full_node()
    attempts = run.add(*_serve_members())
    assert sorted(v.meta.name for a in attempts for v in a.preempted) == ["low-0", "low-1"]
    assert run.node_of("serve-0") == run.node_of("serve-1") == "a"
    # without the class, the same gang at its members' priority (0) evicts nothing
    run = _urgent_podgroup_on_a_full_node(with_class=False)
    attempts = run.add(*_serve_members())
    assert not [v for a in attempts for v in a.preempted]


def test_a_second_preemption_does_not_take_the_same_gang_surplus_again() -> None:
    """Regression (review): while a gang's first victim still terminated, it counted as running,
    so a second preemptor took the 'surplus' again and left 1 of a minimum of 2 running."""
    run = Run(config(BINPACK))
    run.add(*(b.node(f"n{i}", gpus=8) for i in range(3)))
    for i in range(3):
        run.add(_gang_member(f"g{i}", "g", 2, f"n{i}", LOW, 8, i))
    run.replay._evict = lambda victims, preemptor: None  # type: ignore[method-assign]  # victims terminate slowly
    evicted = []
    for name in ("p1", "p2"):
        evicted += [v.meta.name for a in run.add(b.pod(name, requests={"nvidia.com/gpu": 8}, priority=10))
                    for v in a.preempted]
    left = 3 - len(set(evicted))
    assert left == 0 or left >= 2, evicted


def test_a_podgroup_gangs_hold_and_guard_use_the_gangs_priority() -> None:
    """Regression (review): a PodGroup gang (members at priority 0, class 1000) was held at its
    pods' priority: a priority-5 pod took its room while its victims terminated, and the gang then
    preempted a second time."""
    run = _urgent_podgroup_on_a_full_node()
    run.replay._evict = lambda victims, preemptor: None  # type: ignore[method-assign]
    first = run.add(*_serve_members())
    assert sorted(v.meta.name for a in first for v in a.preempted) == ["low-0", "low-1"]
    run.add(b.pod("mid", limits={"nvidia.com/gpu": 4}, priority=5))
    for name in ("low-0", "low-1"):
        _gone(run, name)
    run.scheduler.queue.flush_unschedulable(1e9)
    later = list(run.replay.drain())
    assert not [v for a in later for v in a.preempted]
    assert run.node_of("serve-0") == run.node_of("serve-1") == "a"
    assert run.node_of("mid") is None


def test_a_failed_eviction_releases_the_preemptors_hold_and_lets_it_try_again() -> None:
    run = _full_node_slow_evictions()
    first = _preemptor(run, "p", MID, ("1", "1Gi"))
    victim = first.preempted[0]
    assert run.state.holds and run.state.preempting == {victim.uid: {first.pod.uid}}
    run.scheduler.eviction_failed(victim.uid, 1.0)  # e.g. the apiserver refused the DELETE (403)
    assert not run.state.holds and not run.state.preempting
    again = list(run.replay.drain())
    assert [a.pod.meta.name for a in again] == ["p"] and again[0].preempted  # it decides afresh


def test_a_failed_eviction_of_a_victim_two_preemptors_share_releases_both_holds() -> None:
    """Two equal-priority pods each preempt the same terminating victim (the second takes it as
    a victim for free, beside the first's hold). Its eviction is refused for good: the room
    neither waits for is coming, so both holds go and both are tried again, as upstream's
    prepareCandidateAsync activates every preemptor whose PreemptPod failed (executor.go: each
    preemptor's goroutine calls PreemptPod for the shared victim and Activate on its error).
    Before, `preempting` kept one preemptor per victim (the last): the first kept holding room
    on the node for a victim that was not going, and waited for the 5-minute flush."""
    run = _full_node_slow_evictions()
    first = _preemptor(run, "p", MID, ("400m", "400Mi"))
    second = _preemptor(run, "q", MID, ("400m", "400Mi"))
    victim = first.preempted[0]
    assert [v.uid for v in second.preempted] == [victim.uid]
    assert set(run.state.holds) == {first.pod.uid, second.pod.uid}
    run.scheduler.eviction_failed(victim.uid, 1.0)  # e.g. the apiserver refused the DELETE (403)
    assert not run.state.holds and not run.state.preempting
    again = list(run.replay.drain())
    assert sorted(a.pod.meta.name for a in again) == ["p", "q"]  # both decide afresh at once


def test_an_unreadable_deleted_budget_or_priority_class_is_still_forgotten() -> None:
    run = Run(config(BINPACK))
    pdb = _pdb("db", {"app": "db"}, allowed=0)
    run.add(pdb, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                  "metadata": {"name": "urgent", "uid": "pc-urgent"}, "value": HIGH})
    assert run.state.pdbs and run.state.priority_classes
    broken_pdb = {**pdb, "status": {"disruptionsAllowed": "many"}}
    broken_class = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                    "metadata": {"name": "urgent", "uid": "pc-urgent"}, "value": "high"}
    run.feed(b.event("DELETED", broken_pdb), b.event("DELETED", broken_class))
    assert not run.state.pdbs and not run.state.priority_classes


def test_a_rolled_back_gang_transaction_gives_lower_holds_back() -> None:
    """Review: a gang member placed on a lower-priority nominee's node dropped its hold, and the
    transaction that was then undone (the gang did not fit) did not give it back."""
    from scheduler.core.scheduler import Scheduler

    core = Scheduler(config(BINPACK))
    core.apply("ADDED", b.node("a", cpu="1", memory="1Gi"), 0.0)
    core.apply("ADDED", b.node("b", cpu="1", memory="1Gi"), 0.0)
    low = _running("low", "a", LOW, ("1", "1Gi"))
    core.apply("ADDED", low, 0.0)
    core.apply("ADDED", _running("big", "b", VHIGH, ("1", "1Gi")), 0.0)
    core.apply("ADDED", b.pod("mid", requests={"cpu": "1", "memory": "1Gi"}, priority=MID), 0.0)
    [first] = core.schedule_next(0.0) or []
    assert first.nominated_node == "a"
    mid = first.pod.uid
    core.apply("DELETED", low, 0.0)  # the victim is gone; mid waits out its backoff
    for i in range(2):
        core.apply("ADDED", b.pod(f"g{i}", requests={"cpu": "1", "memory": "1Gi"}, priority=HIGH,
                                 labels=b.gang_labels("g", 2), spec_extra={"preemptionPolicy": "Never"}), 0.0)
    attempts = core.schedule_next(0.0) or []
    assert {a.pod.meta.name for a in attempts} == {"g0", "g1"} and all(a.node is None for a in attempts)
    assert mid in core.state.holds and core.state.holds[mid].node == "a"


def _batch_gang_above_its_class(run: Run, labelled: bool) -> list[dict[str, Any]]:
    """Node `a` (4 GPUs) full of two priority-HIGH pods; with `labelled`, members of PodGroup
    `train` whose class `batch` is worth LOW: as victims they count at LOW, not HIGH."""
    run.add({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
             "metadata": {"name": "batch", "uid": "pc-batch"}, "value": LOW})
    group = b.podgroup("train", 2)
    group["spec"]["priorityClassName"] = "batch"
    run.add(b.node("a", gpus=4), group)
    pods = [b.pod(f"t-{i}", limits={"nvidia.com/gpu": 2}, priority=HIGH, node_name="a", phase="Running",
                  labels={"scheduling.x-k8s.io/pod-group": "train"} if labelled else None) for i in range(2)]
    run.add(*pods)
    return pods


def test_a_gang_whose_class_is_below_its_members_own_priority_is_preempted_at_its_class() -> None:
    """The members' own priority (HIGH) is above the preemptor's (MID); their gang's is not."""
    run = Run(config(BINPACK))
    _batch_gang_above_its_class(run, labelled=True)
    attempt = _preemptor(run, "serve", MID, ("0", "0"), limits={"nvidia.com/gpu": 2})
    assert _victims(attempt) == ["t-0", "t-1"]


def test_a_running_pod_that_joins_a_gang_becomes_a_victim_at_the_gangs_priority() -> None:
    run = Run(config(BINPACK))
    pods = _batch_gang_above_its_class(run, labelled=False)
    first = _preemptor(run, "early", MID, ("0", "0"), limits={"nvidia.com/gpu": 2})
    assert not first.preempted and "1 No preemption victims found for incoming pod" in first.message
    for pod in pods:  # the same running pods, now labelled into the gang
        pod["metadata"]["labels"] = {"scheduling.x-k8s.io/pod-group": "train"}
        pod["metadata"]["resourceVersion"] = "2"
    attempts = run.feed(*(b.event("MODIFIED", pod) for pod in pods))
    attempts += [_preemptor(run, "late", MID, ("0", "0"), limits={"nvidia.com/gpu": 2})]
    assert sorted(v.meta.name for a in attempts for v in a.preempted) == ["t-0", "t-1"]


def test_a_running_pods_new_priority_is_what_preemption_weighs() -> None:
    """The apiserver keeps spec.priority fixed, but a replayed stream may change it: the node's
    victims follow the pod object as it is now (the victim floor is refreshed)."""
    run = _cluster({"node1": [("p1", HIGH, L, 0), ("p2", HIGH, M, 0)]})
    early = _preemptor(run, "early", MID, VL)
    assert not early.preempted and "1 No preemption victims found for incoming pod" in early.message
    lowered = _running("p1", "node1", LOW, L)
    lowered["metadata"]["resourceVersion"] = "2"
    attempts = run.feed(b.event("MODIFIED", lowered))
    attempts += [_preemptor(run, "late", MID, L)]
    assert sorted(v.meta.name for a in attempts for v in a.preempted) == ["p1"]


def test_an_absurd_priority_on_a_running_pod_does_not_break_the_cycle() -> None:
    run = _cluster({"node1": [("p1", HIGH, L, 0)]})
    _preemptor(run, "early", MID, VL)  # the victim floor exists from here on
    run.add(_running("odd", "node1", -2**70, S))
    attempt = _preemptor(run, "late", MID, M)
    assert _victims(attempt) == ["odd"]


@pytest.mark.parametrize("change", ["podgroup-names-a-class", "class-value-drops"])
def test_a_gangs_priority_lowered_by_its_podgroup_or_class_makes_it_a_victim(change: str) -> None:
    """The gang (members at HIGH) is out of a MID pod's reach until its PodGroup's class, or that
    class's value, puts it below MID: preemption then sees it (the victim floor follows)."""
    run = Run(config(BINPACK))
    value = VHIGH if change == "class-value-drops" else LOW
    priority_class: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                      "metadata": {"name": "batch", "uid": "pc-batch", "resourceVersion": "1"}, "value": value}
    group = b.podgroup("train", 2)
    if change == "class-value-drops":
        group["spec"]["priorityClassName"] = "batch"
    run.add(priority_class, b.node("a", gpus=4), group)
    run.add(*(b.pod(f"t-{i}", limits={"nvidia.com/gpu": 2}, priority=HIGH, node_name="a", phase="Running",
                    labels={"scheduling.x-k8s.io/pod-group": "train"}) for i in range(2)))
    early = _preemptor(run, "early", MID, ("0", "0"), limits={"nvidia.com/gpu": 2})
    assert not early.preempted and "1 No preemption victims found for incoming pod" in early.message
    if change == "class-value-drops":
        priority_class["value"] = LOW
        priority_class["metadata"]["resourceVersion"] = "2"
        attempts = run.feed(b.event("MODIFIED", priority_class))
    else:
        group["spec"]["priorityClassName"] = "batch"
        group["metadata"]["resourceVersion"] = "2"
        attempts = run.feed(b.event("MODIFIED", group))
    attempts += [_preemptor(run, "late", MID, ("0", "0"), limits={"nvidia.com/gpu": 2})]
    assert sorted(v.meta.name for a in attempts for v in a.preempted) == ["t-0", "t-1"]


def _half_bound_mixed_priority_gang() -> tuple[Run, list[Any]]:
    """g-0 (priority 10) runs on n1; g-1 (priority 1000) arrives for a full n2 where `mid` (500) runs."""
    run = Run(config(BINPACK))
    run.add(b.node("n1", gpus=4), b.node("n2", gpus=4))
    run.add(_gang_member("g-0", "g", 2, "n1", 10, 4, 0))
    run.add(b.pod("mid", requests={"nvidia.com/gpu": 4}, priority=500, node_name="n2", phase="Running"))
    run.replay._evict = lambda victims, preemptor: None  # type: ignore[method-assign]  # victims terminate slowly
    attempts = run.add(b.pod("g-1", requests={"nvidia.com/gpu": 4}, priority=1000, labels=b.gang_labels("g", 2)))
    return run, attempts


def test_a_half_bound_gang_preempts_at_its_least_urgent_members_priority() -> None:
    """The cycle took the gang's priority over every member (10, g-0 bound included), the
    preemption over the pending ones only (1000): it evicted `mid` (500) and held the room at 10,
    so a priority-20 pod could take it (found in review). One rule now (competing_priority)."""
    run, attempts = _half_bound_mixed_priority_gang()
    assert [v.meta.name for a in attempts for v in a.preempted] == []
    assert run.node_of("mid") == "n2"


def test_a_gang_preemptor_takes_one_surplus_member_where_the_room_is_needed() -> None:
    """Victim gang v (minimum 2) runs one member on each of big (8 GPUs), s1 and s2. A preemptor
    needing big evicted v-0 alone as a plain pod but the whole gang as a gang: its surplus was the
    latest-started member anywhere (v-2), so v-0 was in the core, and the core took the surplus
    with it (found in review). The surplus is chosen among the members where the room is needed."""
    def victims(gang: bool) -> list[str]:
        run = Run(config(BINPACK))
        run.add(b.node("big", gpus=8), b.node("s1", gpus=4), b.node("s2", gpus=4))
        run.add(_gang_member("v-0", "v", 2, "big", 0, 8, 0), _gang_member("v-1", "v", 2, "s1", 0, 4, 1),
                _gang_member("v-2", "v", 2, "s2", 0, 4, 2))
        labels = b.gang_labels("p", 1) if gang else None
        attempts = run.add(b.pod("p-0", requests={"nvidia.com/gpu": 8}, priority=1000, labels=labels))
        return sorted(v.meta.name for a in attempts for v in a.preempted)
    assert victims(gang=True) == victims(gang=False) == ["v-0"]


def test_a_preemptor_whose_eviction_failed_is_activated_past_its_backoff() -> None:
    """executor.go prepareCandidateAsync `Activate`s a preemptor whose victim's PreemptPod failed,
    and PriorityQueue.activate moves it from unschedulablePods or backoffQ straight to activeQ
    (moveToActiveQ with framework.ForceActivate), whatever is left of its backoff. Tessera moved
    it as a cluster event does (to backoffQ while it backs off), so a lower-priority pod that came
    meanwhile went first."""
    run = _full_node_slow_evictions()
    first = _preemptor(run, "p", MID, ("1", "1Gi"))
    victim = first.preempted[0]
    now = run.replay.now + 0.5  # within p's backoff (it failed at `now - 0.5`)
    run.scheduler.eviction_failed(victim.uid, now)
    run.scheduler.apply("ADDED", b.pod("z", requests={"cpu": "1", "memory": "1Gi"}, priority=LOW), now)
    attempts = run.scheduler.schedule_next(now)
    assert attempts is not None and [a.pod.meta.name for a in attempts] == ["p"]


# --- gangs and PodDisruptionBudgets --------------------------------------------------------------

def _gpu_cluster(pods: list[tuple[str, str, str, int, dict[str, str]]], seed: int) -> Run:
    """The trial's dev-cluster: 2 V100 nodes and 2 T4 nodes of 8 devices each, a class per model,
    and the given low-priority pods (name, node, resource, count, labels) scheduled there first."""
    run = Run(config(BINPACK), seed=seed)
    for model, memory in (("V100", "32Gi"), ("T4", "16Gi")):
        for n in range(2):
            name = f"{model.lower()}-node-{n:03d}"
            run.add(b.node(name, gpus=8))
            run.add(*(b.device(name, i, model=model, memory=memory) for i in range(8)))
    run.add(b.resource_class("v100-32g", match_labels={"model": "V100"}),
            b.resource_class("t4-16g", match_labels={"model": "T4"}))
    for name, node, resource, count, labels in pods:
        run.add(b.pod(name, limits={resource: count}, priority=LOW, labels=labels,
                      spec_extra={"nodeSelector": {"kubernetes.io/hostname": node}}))
        assert run.node_of(name) == node
    return run


# The preemptors prefer v100-node-000, so that with every lower-priority pod removed it ranks first
# (what the trial's tie-breaks drew; other seeds draw it too): the budgeted pod is where they first land.
_PREFER_V100_000 = {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 100, "preference": {"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["v100-node-000"]}]}}]}}}


def _budget(name: str, match: dict[str, str]) -> dict[str, Any]:
    return _pdb(name, match, allowed=0)  # minAvailable 1 of 1, or maxUnavailable 0: none allowed


@pytest.mark.parametrize("seed", range(4))
def test_a_gang_preemptor_avoids_a_pod_disruption_budget_where_other_nodes_would_do(seed: int) -> None:
    """The trial's first run: `precious` (PDB, no disruption allowed) and a filler on
    v100-node-000, two fillers on each other node; a gang of 2 x 8 GPUs evicted 3 fillers and
    `precious` on the V100 nodes, while two nodes of unprotected fillers would have done
    (upstream podgrouppreemption.go selectVictimsOnDomain: PDB-violating victims are reprieved
    first, the group's placement re-run each time)."""
    gpu = "nvidia.com/gpu"
    layout = [("precious", "v100-node-000", gpu, 4, {"app": "precious"}), ("filler-0", "v100-node-000", gpu, 4, {})]
    layout += [(f"filler-{i}", node, gpu, 4, {}) for i, node in
               enumerate(["v100-node-001", "v100-node-001", "t4-node-000", "t4-node-000", "t4-node-001", "t4-node-001"], 1)]
    run = _gpu_cluster(layout, seed)
    run.add(_budget("precious", {"app": "precious"}), b.podgroup("urgent", 2))
    attempts = run.add(*(b.pod(f"urgent-{i}", limits={gpu: 8}, priority=HIGH,
                               labels={"scheduling.x-k8s.io/pod-group": "urgent"}, spec_extra=_PREFER_V100_000)
                         for i in range(2)))
    victims = sorted(v.meta.name for a in attempts for v in a.preempted)
    assert "precious" not in victims and len(victims) == 4 and all(v.startswith("filler-") for v in victims)
    assert run.node_of("precious") == "v100-node-000"
    placed = {run.node_of("urgent-0"), run.node_of("urgent-1")}
    assert None not in placed and "v100-node-000" not in placed and len(placed) == 2


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("gang", [True, False], ids=["gang", "single-pod"])
def test_a_preemptor_for_a_class_evicts_the_unprotected_pod_not_the_budgeted_one(gang: bool, seed: int) -> None:
    """The trial's second run: `pa` (PDB maxUnavailable 0) on v100-node-000, `pb2` (none) on
    v100-node-001, each holding every V100 there; a gang of one member asking 8 V100s evicted
    `pa`, while a single pod in the same place evicted `pb2` (pickOneNodeForPreemption: fewest
    PDB violations first)."""
    v100 = "class.tessera.dev/v100-32g"
    run = _gpu_cluster([("pa", "v100-node-000", v100, 8, {"app": "pa"}), ("pb2", "v100-node-001", v100, 8, {})], seed)
    run.add(_budget("pa", {"app": "pa"}))
    labels = None
    if gang:
        run.add(b.podgroup("urgent", 1))
        labels = {"scheduling.x-k8s.io/pod-group": "urgent"}
    attempts = run.add(b.pod("urgent-0", limits={v100: 8}, priority=HIGH, labels=labels, spec_extra=_PREFER_V100_000))
    assert sorted(v.meta.name for a in attempts for v in a.preempted) == ["pb2"]
    assert run.node_of("urgent-0") == "v100-node-001" and run.node_of("pa") == "v100-node-000"



def test_a_gang_preemptor_still_breaks_a_budget_when_no_placement_avoids_one() -> None:
    """Budgets are best effort, as upstream: with both V100 holders protected, the gang evicts one."""
    v100 = "class.tessera.dev/v100-32g"
    run = _gpu_cluster([("pa", "v100-node-000", v100, 8, {"app": "pa"}), ("pb", "v100-node-001", v100, 8, {"app": "pb"})], 0)
    run.add(_budget("pa", {"app": "pa"}), _budget("pb", {"app": "pb"}), b.podgroup("urgent", 1))
    attempts = run.add(b.pod("urgent-0", limits={v100: 8}, priority=HIGH, spec_extra=_PREFER_V100_000,
                             labels={"scheduling.x-k8s.io/pod-group": "urgent"}))
    assert sorted(v.meta.name for a in attempts for v in a.preempted) == ["pa"]
    assert run.node_of("urgent-0") == "v100-node-000" and run.node_of("pb") == "v100-node-001"


def test_a_gang_that_preempted_binds_once_its_victims_are_gone_not_after_its_group_backoff() -> None:
    """Found by a new-user trial: a PodGroup gang that preempted bound exactly
    podGroupBackoffSeconds (the chart's 10 s) after its victims were evicted, its GPUs idle and
    held meanwhile. scheduler-plugins' Coscheduling backs a group off in its PostFilter, which
    runs only when DefaultPreemption's (before it in the profile) found no candidate: a group that
    preempted is not backed off; it waits for its victims, nominated."""
    cfg = parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                        "profiles": [{"schedulerName": "tessera", "pluginConfig": [
                            {"name": "Coscheduling", "args": {"podGroupBackoffSeconds": 10}}]}]}, "test")
    run = Run(cfg)
    run.add(b.node("a", gpus=8), b.node("b", gpus=8))
    run.add(*(b.pod(f"low-{n}", limits={"nvidia.com/gpu": 8}, priority=LOW, node_name=n, phase="Running") for n in "ab"))
    assert run.replay.now == 0.0
    run.add(*(b.pod(f"job{i}", limits={"nvidia.com/gpu": 8}, priority=HIGH, labels=b.gang_labels("job", 2))
              for i in range(2)))
    assert sorted(v.meta.name for a in run.attempts for v in a.preempted) == ["low-a", "low-b"]
    assert {run.node_of("job0"), run.node_of("job1")} == {"a", "b"}
    assert run.replay.now < 10.0, f"the gang waited out its group backoff: bound at {run.replay.now} s"

    # a gang that could not preempt is still backed off (nothing to wait for)
    run = Run(cfg)
    run.add(b.node("a", gpus=8))
    run.add(b.pod("high-a", limits={"nvidia.com/gpu": 8}, priority=VHIGH, node_name="a", phase="Running"))
    run.add(*(b.pod(f"job{i}", limits={"nvidia.com/gpu": 4}, priority=HIGH, labels=b.gang_labels("job", 2))
              for i in range(2)))
    group = next(iter(run.scheduler.queue.group_backoff_until))
    assert run.scheduler.queue.group_backoff_until[group] == 10.0


def test_a_gang_whose_victims_deletion_failed_preempts_again_at_once_not_after_its_group_backoff() -> None:
    """scheduler-plugins' Coscheduling backs a group off (podGroupBackoffSeconds) only in its
    PostFilter, which runs after DefaultPreemption's and only when that one rejected the pod
    (framework.go RunPostFilterPlugins returns at the first Success or Error). A failed victim
    deletion never gets there: with async preemption (the default since 1.33) the cycle that chose
    the victims returned Success, and the failure `Activate`s the preemptor's pods
    (executor.go prepareCandidateAsync); their next try finds the same victims, not terminating,
    eligible again, and DefaultPreemption succeeds again. So a gang whose victims cannot be
    deleted is retried at once and preempts afresh each time — not held 10 s. Pinned here with
    podGroupBackoffSeconds 10 (config/gpu-cluster.yaml): the gang is never backed off."""
    run = _urgent_podgroup_on_a_full_node(cfg=config("config/gpu-cluster.yaml"))
    run.replay._evict = lambda victims, preemptor: None  # type: ignore[method-assign]
    first = run.add(*_serve_members())
    assert sorted(v.meta.name for a in first for v in a.preempted) == ["low-0", "low-1"]
    queue = run.scheduler.queue
    now = run.replay.now
    for _ in range(3):
        now += 0.1
        for victim in list(run.state.preempting):
            run.scheduler.eviction_failed(victim, now)  # e.g. a webhook refuses every DELETE
        again = run.scheduler.schedule_next(now)
        assert again is not None and sorted(a.pod.meta.name for a in again) == ["serve-0", "serve-1"]
        assert sorted(v.meta.name for a in again for v in a.preempted) == ["low-0", "low-1"]
        assert {a.nominated_node for a in again} == {"a"}
        assert not queue.group_backoff_until


def test_the_larger_gang_is_reprieved_first_at_equal_priority() -> None:
    """upstream's MoreImportantVictim (victims.py): at equal priority and kind, the larger unit is the
    more important, so it is put back first and the smaller gang goes. Gang `big` (3 members, minimum
    3) and gang `small` (2, minimum 2) fill node a's 5 GPUs at one priority and start time; a pod
    wanting 2 GPUs evicts `small` only (putting `small` back first would evict all of `big`)."""
    run = Run(config(BINPACK))
    run.add(b.node("a", gpus=5))
    run.add(*(_gang_member(f"big{i}", "big", 3, "a", LOW, 1, 0) for i in range(3)))
    run.add(*(_gang_member(f"small{i}", "small", 2, "a", LOW, 1, 0) for i in range(2)))
    attempt = _preemptor(run, "serve", HIGH, ("0", "0"), limits={"nvidia.com/gpu": 2})
    assert _victims(attempt) == ["small0", "small1"]


def test_a_terminating_pod_of_equal_priority_is_no_victim() -> None:
    """upstream SelectVictimsOnNode removes only pods of lower priority: one of the preemptor's own
    priority that is already terminating still occupies the node in the dry run, so there is no
    candidate (victims.py `units_for`: a leaving pod is a victim for free only below the preemptor).
    Removing the lower-priority p2 alone leaves too little room, so node1 is no candidate."""
    run = _cluster({"node1": [("p1", MID, L, 0), ("p2", LOW, M, 0)]})
    leaving = _running("p1", "node1", MID, L, 0)
    leaving["metadata"]["deletionTimestamp"] = _t(5)
    run.feed(b.event("MODIFIED", leaving))
    attempt = _preemptor(run, "p", MID, VL)
    assert attempt.preempted == [] and attempt.nominated_node is None
    assert run.node_of("p2") == "node1"


def test_a_gangs_surplus_member_is_its_latest_started() -> None:
    """victims.py: a gang above its minimum gives up its surplus latest-started first, among the
    members where the room is needed. 4 members (minimum 3) started at t0..t3, g0/g1 on a and g2/g3
    on b: node a would give up g1, node b g3, and the later start picks b; the earliest-started
    member of a node is never the surplus one."""
    run = Run(config(BINPACK))
    run.add(b.node("a", gpus=4), b.node("b", gpus=4))
    run.add(*(_gang_member(f"g{i}", "train", 3, "a" if i < 2 else "b", LOW, 2, i) for i in range(4)))
    attempt = _preemptor(run, "serve", HIGH, ("0", "0"), limits={"nvidia.com/gpu": 2})
    assert _victims(attempt) == ["g3"] and attempt.nominated_node == "b"


def test_a_gang_with_one_never_member_does_not_preempt() -> None:
    """DefaultPreemption.ineligible: a gang preempts as one, so one member with preemptionPolicy
    Never makes the whole gang ineligible (`any` member: `DefaultPreemption.ineligible`),
    whatever its siblings say: the gang's preemption evicts for every member at once."""
    run = Run(config(BINPACK))
    run.add(b.node("a", gpus=4))
    run.add(b.pod("low", limits={"nvidia.com/gpu": 4}, priority=LOW, node_name="a", phase="Running"))
    members = [b.pod(f"g{i}", limits={"nvidia.com/gpu": 2}, priority=HIGH, labels=b.gang_labels("g", 2),
                     spec_extra={"preemptionPolicy": "Never"} if i == 0 else None) for i in range(2)]
    attempts = run.add(*members)
    assert attempts and all(a.preempted == [] and a.nominated_node is None for a in attempts)
    assert run.node_of("low") == "a"


def test_fewest_victims_decides_when_the_priority_sums_tie() -> None:
    """pickOneNodeForPreemption's fewest-victims rule, reached: each victim's priority counts
    plus MaxInt32+1 in the sum, so the sums of 2 and 3 victims tie only near the lowest int32
    priority. Both nodes' highest victim is LOW and their sums are equal (x+K = (y+K) + (z+K)
    with K = 2^31); node1 gives up 2 pods, node2 3: node1 wins (upstream's own "min-pods" case
    is decided by the sum already)."""
    k = 2**31
    x, y = 2 - k, 1 - k  # x + k == 2 == (y + k) * 2
    run = _cluster({"node1": [("p1.1", LOW, L, 0), ("p1.2", x, M, 0)],
                    "node2": [("p2.1", LOW, L, 0), ("p2.2", y, S, 0), ("p2.3", y, S, 0)]})
    attempt = _preemptor(run, "preemptor", HIGH, VL)
    assert attempt.nominated_node == "node1"
    assert _victims(attempt) == ["p1.1", "p1.2"]


def test_latest_start_compares_each_nodes_earliest_started_top_victim() -> None:
    """pickOneNodeForPreemption: the node whose highest-priority victims' *earliest* start time
    is the latest (util.GetEarliestPodStartTime). node1's top victims started at t1 and t5, node2's
    at t3 and t4: node2 (t3 > t1), although node1 holds the latest-started pod of all."""
    run = _cluster({"node1": [("p1.1", MID, M, 1), ("p1.2", MID, M, 5)],
                    "node2": [("p2.1", MID, M, 3), ("p2.2", MID, M, 4)]})
    attempt = _preemptor(run, "preemptor", HIGH, VL)
    assert attempt.nominated_node == "node2"
    assert _victims(attempt) == ["p2.1", "p2.2"]


def test_an_equal_priority_victim_terminating_on_the_nominated_node_does_not_hold_a_pod_back() -> None:
    """upstream PodEligibleToPreemptOthers: only a terminating pod of *lower* priority than the
    preemptor on its nominated node makes it wait (`PodPriority(p) < podPriority`). Pod p (MID) is
    nominated to n, where `peer` (MID too) is terminating as some other preemption's victim: p is
    still eligible, and preempts `low` on m."""
    run = Run(config(BINPACK))
    run.add(b.node("n", cpu="1", memory="1Gi"), b.node("m", cpu="1", memory="1Gi"))
    peer = _running("peer", "n", MID, ("1", "1Gi"))
    peer["metadata"]["deletionTimestamp"] = _t(5)
    peer["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                                     "message": "default-scheduler: preempting to accommodate a higher priority pod",
                                     "lastTransitionTime": _t(5)}]
    run.add(peer, _running("low", "m", LOW, ("1", "1Gi")))
    pod = b.pod("p", requests={"cpu": "1", "memory": "1Gi"}, priority=MID)
    pod["status"]["nominatedNodeName"] = "n"
    run.add(pod)
    attempt = next(a for a in run.attempts if a.pod.meta.name == "p")
    assert "terminating pod on the nominated node" not in attempt.message
    assert _victims(attempt) == ["low"] and attempt.nominated_node == "m"
    assert run.node_of("p") == "m"  # the replay evicts low; the next cycle binds p


def test_a_reprieved_surplus_member_goes_with_its_evicted_core() -> None:
    """victims.py / `_with_surplus_of_lost_cores`: gang train (3 running, minimum 2) has g0 (3 GPUs)
    and its latest-started member g1 (1 GPU, the surplus) on node a (4 GPUs), g2 on b. A pod wanting
    2 GPUs (b is kept full by a higher-priority pod) evicts the core (g0 with g2); g1 alone would still leave room, but a gang is never
    left running below its minimum: g1 goes too."""
    run = Run(config(BINPACK))
    run.add(b.node("a", gpus=4), b.node("b", gpus=4))
    run.add(_gang_member("g0", "train", 2, "a", LOW, 3, 0), _gang_member("g1", "train", 2, "a", LOW, 1, 5),
            _gang_member("g2", "train", 2, "b", LOW, 1, 0))
    run.add(b.pod("keep", requests={"nvidia.com/gpu": 3}, priority=VHIGH, node_name="b", phase="Running"))
    attempt = _preemptor(run, "serve", HIGH, ("0", "0"), limits={"nvidia.com/gpu": 2})
    assert _victims(attempt) == ["g0", "g1", "g2"]


def test_the_candidate_search_goes_on_until_one_candidate_violates_no_budget() -> None:
    """upstream DryRunPreemption stops once `nvcount > 0 && nvcount+vcount >= numCandidates`: with
    minCandidateNodesAbsolute 1 (and 0 %) the search does not stop at a node whose victim a
    PodDisruptionBudget protects (the seeded offset starts at node4); it goes on to node1, whose
    victim none protects, and that one wins (fewest violations)."""
    cfg = parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                        "profiles": [{"schedulerName": "tessera", "pluginConfig": [
                            {"name": "DefaultPreemption",
                             "args": {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 1}}]}]}, "test")
    run = Run(cfg)
    run.add(*(b.node(f"node{i}", cpu="500m", memory="500", pods=32) for i in range(1, 5)))
    run.add(_pdb("guard", {"app": "guarded"}, 0))
    run.add(*(_running(f"p{i}", f"node{i}", LOW, VL, 0, labels={"app": "guarded"} if i > 1 else None)
              for i in range(1, 5)))
    attempt = _preemptor(run, "preemptor", HIGH, VL)
    assert attempt.nominated_node == "node1" and _victims(attempt) == ["p1"]
