"""A preferred node-affinity term the scheduler cannot parse fails the cycle with an error, as
kube-scheduler v1.36.3 does.

The apiserver accepts such pods: ValidatePreferredSchedulingTerms (pkg/apis/core/validation/
validation.go) always allows invalid label values in preferred terms, and
ValidateNodeSelectorRequirement only counts a Gt/Lt requirement's values. kube-scheduler's
NodeAffinity.PreScore (pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go) parses the
terms with component-helpers' NewPreferredSchedulingTerms, whose labels.NewRequirement errors
carry field paths from the term index (`[0].matchExpressions[0].values[0]`), flattened into one
aggregate (`[a, b]` when there are several). RunPreScorePlugins (runtime/framework.go) wraps it as
`running PreScore plugin "NodeAffinity": <err>`; prioritizeNodes runs PreScore only with at least
two feasible nodes (schedulePod places a lone feasible node at once). schedulingCycle returns
AsStatus(err) (code Error, clearNominatedNode, no PostFilter), and handleSchedulingFailure records
FailedScheduling with that message, PodScheduled=False reason SchedulerError; the queue sends a pod
without rejector plugins to (error) backoff. In a pod group cycle (schedule_one_podgroup.go) the
first member's error stops the group: that member keeps its own error, every other member gets
`failed to schedule other pod from a pod group: <err>`, and the PodGroup's PodGroupScheduled
condition is False with reason SchedulerError. Tessera used to drop such a term silently (it
matched no node) and place the pod.
"""

from __future__ import annotations

from typing import Any

import anyio

from scheduler.api.config import load_config
from scheduler.quoted import go_quote
from scheduler.core.scheduler import Scheduler
from scheduler.kube.http import KubeHttp
from scheduler.kube.loop import LoopHooks, SchedulerLoop
from scheduler.sim import builders as b
from scheduler.sim.replay import attempt_line
from tests.fakeapi import FakeApi
from tests.helpers import Run, config

GT_ABC = ('running PreScore plugin "NodeAffinity": [0].matchExpressions[0].values[0]: Invalid value: "abc": '
          "for 'Gt', 'Lt' operators, the value must be an integer")
LABEL_VALUE = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
               "must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', "
               "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")


def _preferred(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    """spec.affinity with one preferred term (weight 1) per list of matchExpressions."""
    return {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": expressions}} for expressions in terms]}}}


def _expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


def _core(*objects: dict[str, Any]) -> Scheduler:
    core = Scheduler(config())
    for obj in objects:
        core.apply("ADDED", obj, 0.0)
    return core


def test_two_feasible_nodes_fail_the_cycle_with_upstreams_prescore_error() -> None:
    core = _core(b.node("n1"), b.node("n2"), b.pod("p", spec_extra=_preferred([_expr("gen", "Gt", "abc")])))
    (attempt,) = core.schedule_next(0.0) or []
    assert attempt.node is None and attempt.error
    assert attempt.message == GT_ABC
    assert core.state.node_of(attempt.pod.uid) is None and not core.state.placements
    assert not attempt.preemption_tried


def test_one_feasible_node_is_taken_without_prescore_as_upstream() -> None:
    core = _core(b.node("n1"), b.node("n2", unschedulable=True),
                 b.pod("p", spec_extra=_preferred([_expr("gen", "Gt", "abc")])))
    (attempt,) = core.schedule_next(0.0) or []
    assert attempt.node == "n1" and not attempt.error


def test_every_parse_error_of_every_term_in_one_aggregate() -> None:
    """NewPreferredSchedulingTerms collects the errors of all terms (a valid term adds none);
    errors.Flatten(NewAggregate(...)).Error() joins several as `[a, b]`. An invalid label value's
    path ends in the key (validateLabelValue: `path.Key(k)`), the message is IsValidLabelValue's."""
    pod = b.pod("p", spec_extra=_preferred([_expr("zone", "In", "a")],
                                           [_expr("zone", "In", "not a label!"), _expr("gen", "Lt", "1.5")]))
    core = _core(b.node("n1"), b.node("n2"), pod)
    (attempt,) = core.schedule_next(0.0) or []
    assert attempt.message == (
        'running PreScore plugin "NodeAffinity": ['
        f'[1].matchExpressions[0].values[0][zone]: Invalid value: "not a label!": {LABEL_VALUE}, '
        "[1].matchExpressions[1].values[0]: Invalid value: \"1.5\": for 'Gt', 'Lt' operators, the value must be an integer]")


def test_an_errored_pod_waits_out_its_error_backoff_and_no_node_event_moves_it() -> None:
    """No rejector plugin: upstream's queue backs it off (podErrorBackoffQ) and never parks it as
    unschedulable for a cluster event to move; the backoff counts its consecutive errors."""
    core = _core(b.node("n1"), b.node("n2"), b.pod("p", spec_extra=_preferred([_expr("gen", "Gt", "abc")])))
    (attempt,) = core.schedule_next(0.0) or []
    entry = core.queue.entries[attempt.pod.uid]
    assert entry.where == "backoff" and entry.errors == 1 and not entry.rejectors
    core.apply("ADDED", b.node("n3"), 0.1)
    assert core.schedule_next(0.2) is None  # not popped before its backoff ends
    assert core.schedule_next(1.5) is None  # 1 s from 0.0 ends in window 1: ready at 2.0
    (again,) = core.schedule_next(2.0) or []
    assert again.error and again.message == GT_ABC
    assert core.queue.backoff_duration(core.queue.entries[attempt.pod.uid]) == 2.0


def test_no_preemption_for_an_error() -> None:
    """schedulingCycle runs PostFilter only for a FitError; an error clears the nomination."""
    low = b.pod("low", node_name="n1", phase="Running", requests={"cpu": "3"}, priority=1)
    low2 = b.pod("low2", node_name="n2", phase="Running", requests={"cpu": "3"}, priority=1)
    high = b.pod("high", requests={"cpu": "1"}, priority=100,
                 spec_extra=_preferred([_expr("gen", "Gt", "abc")]))
    core = _core(b.node("n1", cpu="4"), b.node("n2", cpu="4"), low, low2, high)
    (attempt,) = core.schedule_next(0.0) or []
    assert attempt.error and not attempt.preemption_tried and not attempt.preempted


def test_a_gang_members_error_fails_the_gangs_cycle_as_upstreams_pod_group_cycle() -> None:
    labels = b.gang_labels("g", 2)
    good = b.pod("a", labels=labels)
    bad = b.pod("b", labels=labels, spec_extra=_preferred([_expr("gen", "Gt", "abc")]))
    core = _core(b.node("n1"), b.node("n2"), good, bad)
    attempts = core.schedule_next(0.0) or []
    assert sorted(a.pod.key for a in attempts) == ["default/a", "default/b"]
    assert all(a.node is None and a.error for a in attempts)
    assert not core.state.placements
    by_pod = {a.pod.key: a.message for a in attempts}
    assert by_pod["default/b"] == GT_ABC
    assert by_pod["default/a"] == f"failed to schedule other pod from a pod group: {GT_ABC}"
    assert all(core.queue.entries[a.pod.uid].where == "backoff" for a in attempts)


def test_the_replay_shows_the_error_and_ends() -> None:
    """`tessera simulate` prints the attempt's message; a pod whose every retry errors the same
    way must not keep the replay's virtual clock running for ever."""
    run = Run(config())
    run.add(b.node("n1"), b.node("n2"), b.pod("p", spec_extra=_preferred([_expr("gen", "Gt", "abc")])))
    last = run.last("p")
    assert attempt_line(last, False)["message"] == GT_ABC and last.node is None


class _Results(LoopHooks):
    def __init__(self) -> None:
        self.results: list[str] = []

    def on_attempt(self, result: str, profile: str, seconds: float, attempt: Any) -> None:
        self.results.append(result)


async def test_live_loop_records_failed_scheduling_with_the_error_and_podscheduled_scheduler_error() -> None:
    api = FakeApi()
    hooks = _Results()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="A", hooks=hooks)  # type: ignore[arg-type]
    pod = b.pod("p", spec_extra=_preferred([_expr("gen", "Gt", "abc")]))
    pod["metadata"]["resourceVersion"] = "100"
    api.add_pod(pod)
    for obj in (b.node("n1"), b.node("n2"), pod):
        loop._apply("ADDED", obj)
    (attempt,) = loop.core.schedule_next(0.0) or []
    async with anyio.create_task_group() as group:
        group.start_soon(loop.events.run)
        loop._handle(attempt, 0.0)
        with anyio.fail_after(5):
            while not api.of("POST", "/events"):
                await anyio.sleep(0.001)
        group.cancel_scope.cancel()
    (event,) = [c.body for c in api.of("POST", "/events")]
    assert (event["type"], event["reason"], event["note"]) == ("Warning", "FailedScheduling", GT_ABC)
    conditions = [c for (path, _), body in loop.statuses._dirty.items() if path.endswith("/pods/p/status")
                  for c in body["status"].get("conditions", [])]
    assert [(c["status"], c["reason"], c["message"]) for c in conditions] == [("False", "SchedulerError", GT_ABC)]
    assert hooks.results == ["error"]


async def test_a_workload_podgroup_whose_cycle_failed_with_an_error_reads_scheduler_error() -> None:
    """submitPodGroupAlgorithmResult: an Error status sets PodGroupScheduled False, reason
    SchedulerError, message the group's error (`failed to schedule other pod from a pod group: ...`)."""
    api = FakeApi()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="A")  # type: ignore[arg-type]
    group = {"schedulingGroup": {"podGroupName": "g"}}
    pods = [b.pod("a", spec_extra=group), b.pod("b", spec_extra={**group, **_preferred([_expr("gen", "Gt", "abc")])})]
    for obj in (b.node("n1"), b.node("n2"), b.workload_podgroup("g", 2), *pods):
        loop._apply("ADDED", obj)
    attempts = loop.core.schedule_next(0.0) or []
    assert [a.error for a in attempts] == [True, True]
    async with anyio.create_task_group() as tasks:
        await tasks.start(loop.binder.run)
        loop._handle_cycle(attempts, 0.0)
        tasks.cancel_scope.cancel()
    conditions = [c for (path, _), body in loop.statuses._dirty.items() if path.endswith("/podgroups/g/status")
                  for c in body["status"]["conditions"]]
    assert [(c["status"], c["reason"], c["message"]) for c in conditions] == [
        ("False", "SchedulerError", f"failed to schedule other pod from a pod group: {GT_ABC}")]


def test_values_are_quoted_as_gos_percent_q() -> None:
    """field.Error quotes a string BadValue with %q (strconv.Quote): printable runes as they are,
    `\\t` and friends escaped, other control characters as \\xNN, invisible runes as \\uNNNN."""
    assert [go_quote(v) for v in ("a\tb", "\x00", "é", "\u200b", 'q"\\')] == [
        '"a\\tb"', '"\\x00"', '"é"', '"\\u200b"', '"q\\"\\\\"']
