"""How often a preemptor is tried while its victims terminate, and in which words (a trial saw
four FailedScheduling Warnings on a preemptor within a second after a gang preemption).

Upstream does the same: NodeResourcesFit's queueing hint requeues an unschedulable pod on every
scheduled pod's deletion (`isSchedulableAfterPodEvent`: "any deletion event to a scheduled pod
could make the unscheduled pod schedulable"), an idle scheduler pops it from the backoff queue at
once (`SchedulerPopFromBackoffQ`, beta and on since 1.33), and each failed attempt records one
FailedScheduling; DefaultPreemption then declines a second preemption ("not eligible due to a
terminating pod on the nominated node."). So N victims leaving one by one give the preemptor its
preempting attempt and N - 1 retries before it binds, as here. Identical notes join one Event
series (the recorder, as client-go tools/events), so a lone pod's retries read as one Event."""

from __future__ import annotations

import pytest

from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, config

WAITS = ("0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: not eligible due to a terminating "
         "pod on the nominated node.")


def test_a_preemptor_is_tried_once_per_victim_gone_in_one_note(monkeypatch: pytest.MonkeyPatch) -> None:
    run = Run(config(BINPACK))
    run.add(b.node("n1", gpus=8))
    for i in range(4):
        run.add(b.pod(f"low-{i}", node_name="n1", phase="Running", limits={"nvidia.com/gpu": 2}, priority=0))
    # victims terminate until the test says they are gone
    monkeypatch.setattr(run.replay, "_evict", lambda victims, preemptor: None)
    run.add(b.pod("hi", limits={"nvidia.com/gpu": 8}, priority=1000))
    (first,) = [a for a in run.attempts if a.pod.key == "default/hi"]
    assert len(first.preempted) == 4 and first.nominated_node == "n1"
    notes = []
    for i in range(4):
        gone = run.state.pod_by_key(f"default/low-{i}")
        attempts = run.feed(b.event("DELETED", run.replay.pods[gone.uid]))
        assert [a.pod.key for a in attempts] == ["default/hi"]  # one attempt per victim gone, no more
        notes.append(attempts[0].message if attempts[0].node is None else f"bound to {attempts[0].node}")
    assert notes == [WAITS, WAITS, WAITS, "bound to n1"]
