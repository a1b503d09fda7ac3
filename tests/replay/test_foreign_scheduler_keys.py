"""A pod of Tessera's that keeps another scheduler's keys is told they are not read.

A trial of a team moving from Volcano and KAI-Scheduler: pods switched to `schedulerName:
tessera` kept Volcano's `scheduling.k8s.io/group-name` (a gang of 4 x 8 GPUs: 3 bound, the 4th
pended with a plain Insufficient) and KAI's `gpu-fraction` (bound as a CPU pod with no GPU), and
nothing said the keys were ignored. Now one `IgnoredSchedulerKey` Warning per pod names them and
what to use instead; placement is unchanged (they are still not read).
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.core.foreign import IGNORED_SCHEDULER_KEY, ignored_keys, ignored_note
from scheduler.kubectl import explain as explaining
from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, config


def _volcano(name: str) -> dict[str, Any]:
    return b.pod(name, limits={"nvidia.com/gpu": 8},
                 annotations={"scheduling.k8s.io/group-name": "vtrain", "volcano.sh/job-name": "vtrain",
                              "scheduling.volcano.sh/queue-name": "research"})


def _ignored(run: Run) -> list[str]:
    return [n for n in run.notices() if n.startswith(f"{IGNORED_SCHEDULER_KEY}: ")]


def test_a_volcano_gang_member_is_told_it_is_scheduled_alone() -> None:
    run = Run()
    run.add(*(b.node(f"v{i}", gpus=8) for i in range(3)), *(_volcano(f"vtrain-{i}") for i in range(4)))
    assert sorted(n for n in (run.node_of(f"vtrain-{i}") for i in range(4)) if n) == ["v0", "v1", "v2"]
    told = _ignored(run)
    assert len(told) == 4  # one per pod
    first = told[0]
    assert first.startswith(f"{IGNORED_SCHEDULER_KEY}: Pod default/vtrain-")
    assert "annotation scheduling.k8s.io/group-name" in first and "Volcano" in first
    assert "scheduled alone, not as a gang" in first
    assert "scheduling.x-k8s.io/pod-group" in first  # what to use instead
    assert "annotation scheduling.volcano.sh/queue-name" in first
    assert "volcano.sh/job-name" not in first  # a Volcano Job's bookkeeping changes nothing
    assert "docs/not-supported.md" in first


def test_once_per_pod_not_per_attempt_or_update() -> None:
    run = Run()
    pod = _volcano("lone")
    run.add(b.node("n0", gpus=4), pod)  # does not fit: tried, and tried again on every update
    updated = b.pod("lone", limits={"nvidia.com/gpu": 8}, labels={"touched": "yes"},
                    annotations=pod["metadata"]["annotations"])
    run.feed(b.event("MODIFIED", updated), b.event("ADDED", b.node("n1", gpus=4)))
    assert len(_ignored(run)) == 1
    # a key added later is told then (the set changed), once
    more = b.pod("lone", limits={"nvidia.com/gpu": 8}, labels={"touched": "yes", "kai.scheduler/queue": "a"},
                 annotations=pod["metadata"]["annotations"])
    run.feed(b.event("MODIFIED", more), b.event("MODIFIED", more))
    told = _ignored(run)
    assert len(told) == 2 and "label kai.scheduler/queue" in told[1]


def test_kai_fraction_pod_is_told_it_gets_no_gpu() -> None:
    run = Run()
    run.add(b.node("n0", gpus=8),
            b.pod("frac", requests={"cpu": "1"}, labels={"kai.scheduler/queue": "team-a", "runai/queue": "team-a"},
                  annotations={"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"}),
            b.pod("mem", annotations={"gpu-memory": "4000", "pod-group-name": "kai-pg"}))
    assert run.node_of("frac") == "n0" and run.node_of("mem") == "n0"  # placement unchanged: CPU pods
    frac, mem = _ignored(run)
    assert "annotation gpu-fraction" in frac and "annotation gpu-fraction-num-devices" in frac
    assert "KAI-Scheduler" in frac and "no GPU" in frac and "sharing" in frac
    assert "label kai.scheduler/queue" in frac and "label runai/queue" in frac
    assert "annotation gpu-memory" in mem and "annotation pod-group-name" in mem
    assert "scheduled alone, not as a gang" in mem


def test_other_schedulers_pods_and_plain_pods_are_not_told() -> None:
    run = Run()
    run.add(b.node("n0", gpus=8),
            b.pod("theirs", scheduler="volcano", annotations={"scheduling.k8s.io/group-name": "g"}),
            b.pod("plain", limits={"nvidia.com/gpu": 1}, annotations={"volcano.sh/job-name": "x"}))
    assert _ignored(run) == []


def test_a_tessera_gang_member_keeping_the_old_group_name_is_not_told_it_is_alone() -> None:
    """Moved properly (a scheduler-plugins PodGroup) but the old annotation left on: the gang
    part of the warning would be wrong; a queue key left on is still told."""
    run = Run()
    run.add(b.node("n0", gpus=8), b.podgroup("pg", 1),
            b.pod("moved", limits={"nvidia.com/gpu": 1}, labels={"scheduling.x-k8s.io/pod-group": "pg"},
                  annotations={"scheduling.k8s.io/group-name": "pg"}),
            b.pod("queued", limits={"nvidia.com/gpu": 1}, labels={"scheduling.x-k8s.io/pod-group": "pg"},
                  annotations={"scheduling.k8s.io/group-name": "pg", "volcano.sh/queue-name": "q"}))
    told = _ignored(run)
    assert len(told) == 1 and "default/queued" in told[0]
    assert "group-name" not in told[0] and "annotation volcano.sh/queue-name" in told[0]


def test_explain_says_the_keys_are_not_read() -> None:
    objs = [b.node("v0", gpus=8), _volcano("vtrain-0")]
    result = explaining.explain(objs, "default/vtrain-0", config(BINPACK), [], 0.0)
    assert result is not None
    text = explaining.render(result, 0.0)
    line = next(line for line in text.splitlines() if line.startswith("Not read:"))
    assert "annotation scheduling.k8s.io/group-name" in line and "scheduled alone, not as a gang" in line
    theirs = explaining.explain([b.node("v0", gpus=8), b.pod("t", scheduler="volcano",
                                 annotations={"scheduling.k8s.io/group-name": "g"})],
                                "default/t", config(BINPACK), [], 0.0)
    assert theirs is not None and "Not read:" not in explaining.render(theirs, 0.0)


def test_a_bound_or_finished_pod_is_not_told() -> None:
    """The Warning is for a pod still to be scheduled: one already bound (an earlier scheduler's,
    seen at a restart) or finished is past scheduling, and a relist must not tell it again.
    The pending pod beside them is told, once."""
    run = Run()
    keys = {"scheduling.k8s.io/group-name": "vtrain", "scheduling.volcano.sh/queue-name": "research"}
    run.add(b.node("v0", gpus=8),
            b.pod("bound", limits={"nvidia.com/gpu": 1}, annotations=keys, node_name="v0", phase="Running"),
            b.pod("done", limits={"nvidia.com/gpu": 1}, annotations=keys, phase="Succeeded"),
            b.pod("failed", limits={"nvidia.com/gpu": 1}, annotations=keys, phase="Failed"),
            b.pod("pending", limits={"nvidia.com/gpu": 1}, annotations=keys))
    told = _ignored(run)
    assert len(told) == 1 and "default/pending" in told[0], told


@pytest.mark.parametrize(("where", "key"), [
    ("annotation", "scheduling.k8s.io/group-name"), ("annotation", "scheduling.volcano.sh/group-name"),
    ("annotation", "pod-group-name"), ("annotation", "scheduling.volcano.sh/queue-name"),
    ("annotation", "volcano.sh/queue-name"), ("label", "volcano.sh/queue-name"), ("label", "kai.scheduler/queue"),
    ("label", "runai/queue"), ("annotation", "gpu-fraction"), ("annotation", "gpu-memory"),
    ("annotation", "gpu-fraction-num-devices"),
])
def test_each_key_the_other_schedulers_define_is_told(where: str, key: str) -> None:
    """Every key of the module's list, by the name Volcano and KAI-Scheduler give it, where they read it."""
    on = {key: "x"}
    assert ignored_keys(on if where == "annotation" else {}, on if where == "label" else {}, False) == (
        f"{where} {key}",)


def test_the_note_names_gang_then_sharing_then_queue_keys_and_nothing_for_none() -> None:
    keys = ignored_keys({"scheduling.volcano.sh/queue-name": "q", "gpu-fraction": "0.5",
                         "scheduling.k8s.io/group-name": "g"}, {}, False)
    note = ignored_note(keys)
    assert note.index("group-name") < note.index("gpu-fraction") < note.index("queue-name")
    assert ignored_note(()) == ""
