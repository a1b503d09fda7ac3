"""A scheduler-plugins gang whose members arrive one by one below minMember: every earlier member
is retried at each sibling's arrival (Coscheduling.queueing_hints), each attempt's reason showing
the count of members that exist then, and the dry runs' reports add `too_few_members`' sentence.
Pinned message by message, attempt by attempt, so that making a large gang's arrival cheaper
(a member count kept instead of sorting every member per attempt, `never_fits_told` asking once
per gang) changes no attempt and no word: also with members bound (they count) and one being
deleted (it does not)."""

from __future__ import annotations

import copy
from typing import Any

from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b
from scheduler.sim.replay import Replay, WatchEvent
from tests.helpers import BINPACK, TOO_FEW_WHY, config

LABELS = {"scheduling.x-k8s.io/pod-group": "big"}


def _member(k: int) -> dict[str, Any]:
    return b.pod(f"big-{k:03d}", labels=LABELS, limits={"nvidia.com/gpu": 1})


def _short(key: str, count: int, minimum: int, nodes: int) -> str:
    name = key.split("/", 1)[1]  # scheduler-plugins' PreFilter names the pod by its name alone
    return (f"0/{nodes} nodes are available: pre-filter pod {name} cannot find enough sibling pods, "
            f"current pods number: {count}, minMember of group: {minimum}. preemption: 0/{nodes} nodes are "
            f"available: {nodes} Preemption is not helpful for scheduling., PodGroup default/big gets rejected due "
            f"to Pod {name} is unschedulable even after PostFilter")


def test_each_arrival_retries_every_earlier_member_with_the_count_of_then() -> None:
    members, minimum = 60, 90
    core = Scheduler(config(BINPACK))
    for obj in (b.node("n1", gpus=8), b.node("n2", gpus=8), b.podgroup("big", minimum)):
        core.apply("ADDED", obj, 0.0)
    waiting: dict[str, str] = {}
    for k in range(members):
        core.apply("ADDED", _member(k), 0.0)
        seen = []
        while (attempts := core.schedule_next(0.0)) is not None:
            seen += [(a.pod.key, a.node, a.message, a.attempts) for a in attempts]
        # the new member and every earlier one, each once, in the queue's order (arrival here)
        assert sorted(seen) == sorted((f"default/big-{i:03d}", None, _short(f"default/big-{i:03d}", k + 1, minimum, 2),
                                       k + 1 - i) for i in range(k + 1)), (k, seen[:3])
        waiting.update((key, message) for key, _, message, _ in seen)
    told = core.never_fits_told(waiting)
    hint = ("Only 60 pods of PodGroup default/big exist and its minMember is 90: no member is tried until 30 more "
            "are created (" + TOO_FEW_WHY.format(field="minMember") + ").")
    assert told == {key: f"{message}. {hint}" for key, message in waiting.items()}


def test_bound_members_count_and_a_leaving_one_does_not() -> None:
    """Four members complete minMember 4 and are bound; minMember is raised to 6; a fifth arrives
    (4 bound + 1 = 5), then a bound one is being deleted and a sixth arrives (3 bound + 2 = 5)."""
    replay = Replay(config(BINPACK))
    lines: list[tuple[str, str | None, str]] = []

    def feed(kind: str, obj: dict[str, Any]) -> None:
        lines.extend((a.pod.key, a.node, a.message) for a in replay.run([WatchEvent(kind, obj)]))

    feed("ADDED", b.node("n1", gpus=8))
    feed("ADDED", b.podgroup("big", 4))
    for k in range(4):
        feed("ADDED", _member(k))
    assert [(key, node) for key, node, _ in lines[-4:]] == [(f"default/big-{k:03d}", "n1") for k in range(4)]
    group = b.podgroup("big", 6)
    feed("MODIFIED", group)
    del lines[:]
    feed("ADDED", _member(4))
    assert lines == [("default/big-004", None, _short("default/big-004", 5, 6, 1))]
    leaving = copy.deepcopy(replay.pods[b.uid_for("Pod", "default", "big-000")])
    leaving["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z", finalizers=["example.com/keep"])
    feed("MODIFIED", leaving)
    del lines[:]
    feed("ADDED", _member(5))
    assert sorted(lines) == [("default/big-004", None, _short("default/big-004", 5, 6, 1)),
                             ("default/big-005", None, _short("default/big-005", 5, 6, 1))]
    told = replay.scheduler.never_fits_told({"default/big-005": lines[-1][2]})
    assert told == {"default/big-005": lines[-1][2]}  # 6 exist (a leaving one too): no sentence


def test_the_gang_completes_at_its_last_arrival() -> None:
    members = 40
    core = Scheduler(config(BINPACK))
    for obj in (*(b.node(f"n{i}", gpus=8) for i in range(5)), b.podgroup("big", members)):
        core.apply("ADDED", obj, 0.0)
    for k in range(members):
        core.apply("ADDED", _member(k), 0.0)
        seen = []
        while (attempts := core.schedule_next(0.0)) is not None:
            seen += attempts
        if k < members - 1:
            assert len(seen) == k + 1 and all(a.node is None for a in seen)
    assert len(seen) == members and all(a.node is not None and a.gang_outcome == "placed" for a in seen)
    assert sorted(a.attempts for a in seen) == list(range(1, members + 1))
