"""Gang semantics: one transaction, all (>= min) or nothing, nothing held between cycles."""

from __future__ import annotations

import copy
from typing import Any

from scheduler.core.plugins import coscheduling
from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, config


def _gang(name: str, size: int, gpus: int, minimum: int | None = None) -> list[dict]:  # type: ignore[type-arg]
    labels = b.gang_labels(name, minimum or size)
    return [b.pod(f"{name}-{i}", labels=labels, limits={"nvidia.com/gpu": gpus}) for i in range(size)]


def test_gang_that_does_not_fit_binds_nobody_and_holds_nothing() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("n1", gpus=4), b.node("n2", gpus=4))
    attempts = run.add(*_gang("big", 3, 4))  # 12 GPUs wanted, 8 exist
    assert all(run.node_of(f"big-{i}") is None for i in range(3))
    final = [a for a in attempts if a.pod.meta.name.startswith("big")][-3:]
    assert all(a.node is None and a.annotations == {} for a in final)
    assert any("pod group default/big: only 2 of the 3 members it needs fit" in a.message for a in final)
    # nothing is held: a plain 4-GPU pod still gets a whole node
    run.add(b.pod("solo", limits={"nvidia.com/gpu": 4}))
    assert run.node_of("solo") is not None
    for info in run.state.nodes.values():
        assert info.used("nvidia.com/gpu") <= 4


def test_gang_is_bound_once_a_node_is_added() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("n1", gpus=4), b.node("n2", gpus=4))
    run.add(*_gang("big", 3, 4))
    assert run.node_of("big-0") is None
    run.add(b.node("n3", gpus=4))
    placed = {run.node_of(f"big-{i}") for i in range(3)}
    assert placed == {"n1", "n2", "n3"}


def test_gang_with_min_below_size_commits_the_members_that_fit() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("n1", gpus=4))
    run.add(*_gang("elastic", 3, 2, minimum=2))
    placed = [run.node_of(f"elastic-{i}") for i in range(3)]
    assert placed.count("n1") == 2 and placed.count(None) == 1


def test_two_gangs_do_not_deadlock() -> None:
    """Each gang alone fits; together they do not. One is placed whole, the other waits whole."""
    run = Run(config(BINPACK))
    run.add(b.node("n1", gpus=4), b.node("n2", gpus=4))
    events = []
    for i in range(3):  # interleaved arrival, like scheduler-plugins #114
        events += [b.pod(f"a-{i}", labels=b.gang_labels("a", 3), limits={"nvidia.com/gpu": 2}),
                   b.pod(f"b-{i}", labels=b.gang_labels("b", 3), limits={"nvidia.com/gpu": 2})]
    run.add(*events)
    a = [run.node_of(f"a-{i}") for i in range(3)]
    bb = [run.node_of(f"b-{i}") for i in range(3)]
    assert (None not in a and bb == [None] * 3) or (None not in bb and a == [None] * 3)
    # when the winner finishes, the other gang is placed whole
    winner = "a" if None not in a else "b"
    for i in range(3):
        pod = run.state.pod_by_key(f"default/{winner}-{i}")
        done = b.pod(f"{winner}-{i}", labels=b.gang_labels(winner, 3), limits={"nvidia.com/gpu": 2},
                     node_name=run.node_of(f"{winner}-{i}") or "", phase="Succeeded")
        assert pod is not None
        run.feed(b.event("MODIFIED", done))
    loser = "b" if winner == "a" else "a"
    assert None not in [run.node_of(f"{loser}-{i}") for i in range(3)]


def test_heterogeneous_gang_cpu_ps_with_gpu_workers() -> None:
    """1 CPU-only PS + 4 one-GPU workers on two 2-GPU nodes with little CPU: workers first."""
    run = Run(config(BINPACK))
    run.add(b.node("n1", cpu="4", gpus=2), b.node("n2", cpu="4", gpus=2), b.node("cpu-only", cpu="8"))
    labels = b.gang_labels("job", 5)
    run.add(b.pod("ps", labels=labels, requests={"cpu": "3"}))
    run.add(*[b.pod(f"w{i}", labels=labels, requests={"cpu": "1"}, limits={"nvidia.com/gpu": 1}) for i in range(4)])
    nodes = {n: run.node_of(n) for n in ["ps", "w0", "w1", "w2", "w3"]}
    assert None not in nodes.values(), nodes
    assert sorted(str(nodes[f"w{i}"]) for i in range(4)) == ["n1", "n1", "n2", "n2"]


def test_podgroup_crd_form_waits_for_the_podgroup_object() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("n1", gpus=4))
    members = [b.pod(f"pt-{i}", labels={"scheduling.x-k8s.io/pod-group": "pt"}, limits={"nvidia.com/gpu": 1})
               for i in range(2)]
    run.add(*members)
    assert run.node_of("pt-0") is None
    assert 'podgroup "default/pt" not found' in run.last("pt-0").message
    run.add(b.podgroup("pt", 2))
    assert run.node_of("pt-0") == "n1" and run.node_of("pt-1") == "n1"


def test_a_podgroup_that_arrives_late_replaces_the_not_found_message() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("n1", gpus=4))
    run.add(*[b.pod(f"late-{i}", labels={"scheduling.x-k8s.io/pod-group": "late"}, limits={"nvidia.com/gpu": 1})
              for i in range(2)])
    assert 'podgroup "default/late" not found' in run.last("late-0").message
    run.add(b.podgroup("late", 3))  # still one member short: no placement, but the current reason
    assert run.node_of("late-0") is None
    assert "current pods number: 2, minMember of group: 3" in run.last("late-0").message


def test_half_bound_gang_is_completed() -> None:
    """After a crash some members are bound: the rest are placed even though the gang is partly there."""
    run = Run(config(BINPACK))
    run.add(b.node("n1", gpus=4))
    labels = b.gang_labels("g", 3)
    run.add(b.pod("g-0", labels=labels, limits={"nvidia.com/gpu": 1}, node_name="n1", phase="Running"))
    run.add(b.pod("g-1", labels=labels, limits={"nvidia.com/gpu": 1}),
            b.pod("g-2", labels=labels, limits={"nvidia.com/gpu": 1}))
    assert run.node_of("g-1") == "n1" and run.node_of("g-2") == "n1"


def test_a_waiting_member_reason_follows_its_siblings_arrival() -> None:
    """The first member's message said "current pods number: 1" while two existed."""
    run = Run(config(BINPACK))
    run.add(b.node("n1", gpus=4), b.podgroup("grow", 3))
    members = [b.pod(f"grow-{i}", labels={"scheduling.x-k8s.io/pod-group": "grow"}, limits={"nvidia.com/gpu": 1})
               for i in range(3)]
    run.add(members[0])
    assert "current pods number: 1, minMember of group: 3" in run.last("grow-0").message
    run.add(members[1])
    assert "current pods number: 2, minMember of group: 3" in run.last("grow-0").message
    assert "current pods number: 2, minMember of group: 3" in run.last("grow-1").message
    run.add(members[2])
    assert [run.node_of(f"grow-{i}") for i in range(3)] == ["n1", "n1", "n1"]


def _status(run: Run, key: str = "default/scheduling.x-k8s.io/life") -> tuple[str, int, int, int, int]:
    status = coscheduling.group_status(run.state, key)
    assert status is not None
    return status.phase, status.scheduled, status.running, status.succeeded, status.failed


def test_podgroup_status_follows_its_members_from_pending_to_finished_and_back() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("n1", gpus=4), b.podgroup("life", 2))
    assert _status(run) == ("Pending", 0, 0, 0, 0)
    labels = {"scheduling.x-k8s.io/pod-group": "life"}
    members = [b.pod(f"life-{i}", labels=labels, limits={"nvidia.com/gpu": 1}) for i in range(2)]
    run.add(members[0])
    assert _status(run) == ("Pending", 0, 0, 0, 0)  # fewer than minMember exist
    run.add(members[1])
    assert _status(run) == ("Scheduling", 2, 0, 0, 0)  # placed, not running: upstream has no "Scheduled"
    bound = {name: run.replay.pods[run.state.pod_by_key(f"default/{name}").uid] for name in ("life-0", "life-1")}

    def phase(name: str, value: str) -> None:
        obj = copy.deepcopy(bound[name])
        obj["status"] = {**obj.get("status", {}), "phase": value}
        bound[name] = obj
        run.feed(b.event("MODIFIED", obj))

    phase("life-0", "Running")
    assert _status(run) == ("Scheduling", 2, 1, 0, 0)
    phase("life-1", "Running")
    assert _status(run) == ("Running", 2, 2, 0, 0)
    phase("life-0", "Succeeded")
    assert _status(run) == ("Running", 2, 1, 1, 0)  # running + succeeded still reach minMember
    phase("life-1", "Failed")
    assert _status(run) == ("Failed", 2, 0, 1, 1)
    phase("life-1", "Succeeded")  # (not a real transition; shows the Finished rule)
    assert _status(run) == ("Finished", 2, 0, 2, 0)
    for name in ("life-0", "life-1"):
        run.feed(b.event("DELETED", bound[name]))
    assert _status(run) == ("Pending", 0, 0, 0, 0)  # every member gone, and the object never said Finished
    assert coscheduling.group_status(run.state, "default/scheduling.x-k8s.io/none") is None


def test_a_finished_or_failed_podgroup_keeps_its_phase_as_upstreams_controller_does() -> None:
    """scheduler-plugins' controller returns early for a group whose phase is Finished or Failed.
    Tessera rewrote the phase from the live members: once a finished Job's pods were deleted, its
    group went back to Pending."""
    for final in ("Finished", "Failed"):
        run = Run(config(BINPACK))
        group = b.podgroup("done", 1)
        run.add(b.node("n1", gpus=4), group, b.pod("done-0", labels={"scheduling.x-k8s.io/pod-group": "done"},
                                                   limits={"nvidia.com/gpu": 1}))
        run.feed(b.event("MODIFIED", {**group, "status": {"phase": final, "succeeded": 1}}))
        run.feed(b.event("DELETED", run.replay.pods[run.state.pod_by_key("default/done-0").uid]))
        status = coscheduling.group_status(run.state, "default/scheduling.x-k8s.io/done")
        assert status is not None and (status.phase, status.final) == (final, True)
    run.feed(b.event("MODIFIED", {**group, "status": {"phase": "Running"}}))  # a status that is not final
    status = coscheduling.group_status(run.state, "default/scheduling.x-k8s.io/done")
    assert status is not None and (status.phase, status.final) == ("Pending", False)


class _WrittenGroup:
    """A scheduler-plugins PodGroup whose status the live shell writes and the watch echoes back:
    after each change, what `group_status` gives is written to the object (nothing once final,
    as `SchedulerLoop._write_group_status`) and fed in as the PodGroup's MODIFIED event."""

    def __init__(self, run: Run, name: str, minimum: int) -> None:
        self.run, self.obj, self.key = run, b.podgroup(name, minimum), f"default/scheduling.x-k8s.io/{name}"
        run.add(self.obj)
        self.echo()

    def echo(self) -> tuple[str, int, int, int]:
        status = coscheduling.group_status(self.run.state, self.key)
        assert status is not None
        if not status.final:
            self.obj = {**self.obj, "status": {"phase": status.phase, "running": status.running,
                                               "succeeded": status.succeeded, "failed": status.failed}}
            self.run.feed(b.event("MODIFIED", self.obj))
        return status.phase, status.running, status.succeeded, status.failed


def _members_placed(run: Run, group: str, count: int) -> dict[str, dict[str, Any]]:
    """`count` one-GPU members of the PodGroup `group`, placed; their objects as bound, by name."""
    run.add(*(b.pod(f"{group}-{i}", labels={"scheduling.x-k8s.io/pod-group": group}, limits={"nvidia.com/gpu": 1})
              for i in range(count)))
    return {f"{group}-{i}": run.replay.pods[run.state.pod_by_key(f"default/{group}-{i}").uid] for i in range(count)}


def _set_phase(run: Run, bound: dict[str, dict[str, Any]], name: str, value: str) -> None:
    obj = copy.deepcopy(bound[name])
    obj["status"] = {**obj.get("status", {}), "phase": value}
    bound[name] = obj
    run.feed(b.event("MODIFIED", obj))


def _running_gang_of_four() -> tuple[Run, _WrittenGroup, dict[str, dict[str, Any]]]:
    """The PodGroup `train` (minMember 4) with its four members placed and Running, its status
    as written so far checked on the way."""
    run = Run(config(BINPACK))
    run.add(b.node("n1", gpus=8))
    group = _WrittenGroup(run, "train", 4)
    bound = _members_placed(run, "train", 4)
    for name in bound:
        _set_phase(run, bound, name, "Running")
    assert group.echo() == ("Running", 4, 0, 0)
    return run, group, bound


def test_a_failed_podgroup_keeps_the_counts_it_failed_with_once_its_members_are_gone() -> None:
    """A new user's trial: the gang Job `train` (backoffLimit 0) had its 4 workers preempted; one
    went Failed while three still ran, the Job failed and deleted them all. `kubectl get pg train`
    kept `Failed, running 3, failed 1`. That is what scheduler-plugins' controller shows:
    Reconcile returns at once for a Failed (or Finished) group, its counts included (they are
    only recounted, by getCurrentPodStats over the pods listed now, in the same patch as a phase
    that is not final). Tessera wrote exactly that, but its core reported the counts of the
    pods left (0, 0, 0) under the final phase: not the status the object has."""
    run, group, bound = _running_gang_of_four()
    _set_phase(run, bound, "train-0", "Failed")  # the first victim's kubelet is done; three are still terminating
    assert group.echo() == ("Failed", 3, 0, 1)
    for obj in bound.values():
        run.feed(b.event("DELETED", obj))
    assert group.echo() == ("Failed", 3, 0, 1)
    assert group.obj["status"] == {"phase": "Failed", "running": 3, "succeeded": 0, "failed": 1}


def test_a_podgroup_back_in_pending_keeps_its_counts_until_it_has_its_minimum_again() -> None:
    """scheduler-plugins' Reconcile recounts running/succeeded/failed only outside Pending (its
    `default:` case): a group whose members drop below minMember goes back to Pending with the
    counts of the pods left then, and its `case PodGroupPending` leaves them as they are until
    minMember pods exist again (then Scheduling, and recounted). Tessera recounted in Pending too:
    running 3 became 0 once the other members were gone, where upstream keeps 3."""
    run, group, bound = _running_gang_of_four()
    run.feed(b.event("DELETED", bound.pop("train-0")))
    assert group.echo() == ("Pending", 3, 0, 0)  # below minMember: Pending, counted as it leaves Running
    for name in ("train-1", "train-2"):
        run.feed(b.event("DELETED", bound.pop(name)))
    assert group.echo() == ("Pending", 3, 0, 0)
    run.add(*(b.pod(f"train-{i}", labels={"scheduling.x-k8s.io/pod-group": "train"}, limits={"nvidia.com/gpu": 1})
              for i in (4, 5, 6)))  # minMember pods again: Scheduling, recounted
    assert group.echo() == ("Scheduling", 1, 0, 0)


def test_every_member_without_a_node_says_its_gangs_state() -> None:
    """A new user's trial: the member that failed first said only "4 Insufficient nvidia.com/gpu"
    while its siblings named the gang; now each member that found no node says it."""
    run = Run(config(BINPACK))
    run.add(b.node("n1", gpus=4), b.node("n2", gpus=4))
    run.add(*_gang("big", 3, 4))
    messages = {i: run.last(f"big-{i}").message for i in range(3)}
    # "2 of 3 placed" read as if two pods were placed; none is while the gang is short (trial).
    # The gang's one format (see the test below): the member without a node names itself.
    unplaced = [i for i in range(3) if f"; default/big-{i}: 0/2 nodes are available: " in messages[i]]
    assert unplaced and all(m.startswith("pod group default/big: only 2 of the 3 members it needs fit; ")
                            for m in messages.values()), messages


def test_a_gang_on_a_cluster_without_nodes_says_both_sentences() -> None:
    """A review: upstream's "no nodes available to schedule pods" has no full stop, and the gang's
    note was glued onto it. In the gang's one format (gang first, then the member's own message)
    upstream's sentence stays as it is, last."""
    run = Run(config(BINPACK))
    run.add(*_gang("g", 2, 1))
    assert run.last("g-0").message == (
        "pod group default/g: only 0 of the 2 members it needs fit; default/g-0: no nodes available to schedule pods")


def test_a_refused_binding_of_one_member_keeps_the_gangs_room_for_it() -> None:
    """g-0's Binding landed, g-1's was refused (a webhook blip): g-1's room was freed and woken
    for `other` (same priority, waiting), which took it; g stayed at 1 bound of minimum 2 for good,
    as g-1 cannot preempt an equal priority (found in review). The room is held for the member
    while its gang has others placed, as a nominated preemptor's is."""
    run = Run(config(BINPACK))
    run.add(b.node("n1", gpus=4))
    labels = b.gang_labels("g", 2)
    real_bind = run.replay._bind
    in_flight: list[str] = []

    def bind(attempt: Any) -> None:
        if attempt.pod.meta.name == "g-1" and not in_flight:
            in_flight.append(attempt.pod.uid)  # its Binding is still out
            return
        real_bind(attempt)

    run.replay._bind = bind  # type: ignore[method-assign]
    run.add(b.pod("g-0", limits={"nvidia.com/gpu": 2}, labels=labels),
            b.pod("g-1", limits={"nvidia.com/gpu": 2}, labels=labels))
    assert run.node_of("g-0") == "n1" and run.node_of("g-1") == "n1"
    run.add(b.pod("other", limits={"nvidia.com/gpu": 2}))
    assert run.node_of("other") is None
    run.scheduler.binding_failed(in_flight[0], run.replay.now)
    list(run.replay.drain())
    run.scheduler.queue.flush_unschedulable(1e9)
    list(run.replay.drain())
    assert (run.node_of("g-1"), run.node_of("other")) == ("n1", None)


def test_every_member_of_a_gang_that_does_not_fit_reads_one_format() -> None:
    """A new user's trial: a PodGroup of five 8-GPU pods on 32 GPUs. The four members that fit
    read `pod group default/huge: only 4 of the 5 members it needs fit; default/huge-4: 0/4 nodes
    are available: ...`, the fifth `0/4 nodes are available: 4 Insufficient nvidia.com/gpu. pod
    group default/huge: only 4 of the 5 members it needs fit. preemption: ...` — one failure in two
    formats, and the PodGroup's status message depended on which member was written last.
    Upstream gives a pod group one status (pkg/scheduler/schedule_one_podgroup.go
    submitPodGroupAlgorithmResult: one `podGroupResult.status` and PodGroupScheduled message for
    the group) and words a member's failure for the group as the group's context, then the
    member's own error (`failed to schedule other pod from a pod group: <err>`). Every member now
    reads the gang's sentence, then the member that found no node and its FitError (its own, for
    such a member), then the preemption part."""
    run = Run(config(BINPACK))
    run.add(*[b.node(f"n{i}", gpus=8) for i in range(1, 5)], b.podgroup("huge", 5))
    labels = {"scheduling.x-k8s.io/pod-group": "huge"}
    run.add(*[b.pod(f"huge-{i}", labels=labels, limits={"nvidia.com/gpu": 8}) for i in range(5)])
    expected = ("pod group default/huge: only 4 of the 5 members it needs fit; default/huge-4: "
                "0/4 nodes are available: 4 Insufficient nvidia.com/gpu. "
                "preemption: No preemption victims found for incoming preemptor.")
    assert [run.last(f"huge-{i}").message for i in range(5)] == [expected] * 5


def test_each_member_that_found_no_node_names_itself_with_its_own_reasons() -> None:
    """A heterogeneous gang where two members fit nowhere, for different reasons: each says why
    it did not fit in the gang's one format; the members that fit name the first of them."""
    run = Run(config(BINPACK))
    run.add(b.node("n1", cpu="4", gpus=4))
    labels = b.gang_labels("mix", 3)
    run.add(b.pod("mix-gpu", labels=labels, limits={"nvidia.com/gpu": 8}),
            b.pod("mix-cpu", labels=labels, requests={"cpu": "8"}),
            b.pod("mix-ok", labels=labels, requests={"cpu": "1"}))
    short = "pod group default/mix: only 1 of the 3 members it needs fit; "
    gpu = "default/mix-gpu: 0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    cpu = "default/mix-cpu: 0/1 nodes are available: 1 Insufficient cpu."
    messages = {name: run.last(name).message.split(" preemption: ")[0] for name in ("mix-gpu", "mix-cpu", "mix-ok")}
    assert messages == {"mix-gpu": short + gpu, "mix-cpu": short + cpu, "mix-ok": short + gpu}


def test_a_label_gangs_minimum_is_the_first_members() -> None:
    """scheduler-plugins v0.18's label form freezes min-available from the first member seen
    (GangIndex.join): a later member naming a higher minimum does not raise it. g-0 says 2, g-1
    says 3: the two are a whole gang and are placed."""
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=4))
    run.add(b.pod("g-0", limits={"nvidia.com/gpu": 1}, labels=b.gang_labels("g", 2)))
    run.add(b.pod("g-1", limits={"nvidia.com/gpu": 1}, labels=b.gang_labels("g", 3)))
    assert run.node_of("g-0") == "n" and run.node_of("g-1") == "n"


def test_a_label_gang_recreated_under_its_name_takes_its_new_minimum() -> None:
    """GangIndex.leave: once every member is gone the frozen min-available goes with them; a Job
    recreated under the same group name with a lower min-available is not held to the old one.
    g-0 (min 3) is deleted before any sibling came; g-a and g-b (min 2) then form a whole gang."""
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=4))
    first = b.pod("g-0", limits={"nvidia.com/gpu": 1}, labels=b.gang_labels("g", 3))
    run.add(first)
    run.feed(b.event("DELETED", first))
    run.add(*(b.pod(f"g-{x}", limits={"nvidia.com/gpu": 1}, labels=b.gang_labels("g", 2)) for x in "ab"))
    assert run.node_of("g-a") == "n" and run.node_of("g-b") == "n"
