"""A Job of parallelism 4 under a PodGroup of minMember 5 waits for ever: scheduler-plugins'
PreFilter message ("cannot find enough sibling pods, current pods number: 4, minMember of group:
5") reads like a wait that ends. Its members' FailedScheduling messages stay upstream's; Tessera's
own outputs (explain, what-if, the GPU map's gangs) add that only 4 of its minMember 5 pods
exist, so no member is tried until more are created or minMember is lowered."""

from __future__ import annotations

from typing import Any

from scheduler.core.scheduler import Scheduler
from scheduler.kubectl import explain as explaining
from scheduler.kubectl import whatif
from scheduler.sim import builders as b
from scheduler.sim.snapshot import load
from scheduler.view.listed import listed_view
from tests.helpers import BINPACK, config

UPSTREAM = ("0/1 nodes are available: pod default/job-0 cannot find enough sibling pods, current pods number: 4, "
            "minMember of group: 5.")
HINT = ("Only 4 pods of PodGroup default/train exist and its minMember is 5: no member is tried until 1 more is "
        "created (a Job's parallelism below minMember never starts: raise it, or lower minMember).")


def _cluster(members: int = 4, leaving: int = 0) -> list[dict[str, Any]]:
    pods = [b.pod(f"job-{i}", limits={"nvidia.com/gpu": 1}, labels={"scheduling.x-k8s.io/pod-group": "train"})
            for i in range(members)]
    for pod in pods[:leaving]:  # being deleted: a controller makes it again, so it still counts as existing
        pod["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z", finalizers=["example.com/keep"])
    return [b.node("n1", gpus=8), b.podgroup("train", 5), *pods]


def test_explain_says_only_four_of_minmember_five_pods_exist() -> None:
    result = explaining.explain(_cluster(), "default/job-0", config(BINPACK), [], 0.0)
    assert result is not None and result.dry_run is not None
    assert result.dry_run.message == UPSTREAM  # the scheduler's words stay upstream's
    assert result.too_few_members == HINT
    assert f"\n  {HINT}\n" in explaining.render(result, 0.0)


def test_what_if_and_the_gpu_maps_gang_say_it_after_upstreams_message() -> None:
    result = whatif.what_if(_cluster(), config(BINPACK), 0.0)
    first = next(outcome for outcome in result.outcomes if outcome.pod == "default/job-0")
    assert first.message == f"{UPSTREAM} {HINT}", first.message
    view = listed_view(config(BINPACK), _cluster(), 0.0)
    (gang,) = view.gangs
    assert gang.message.endswith(HINT), gang.message


def test_the_podgroup_gets_no_warning_while_its_pods_may_still_be_coming() -> None:
    """A controller still creating the gang's pods reads the same (Tessera does not read Jobs): no
    Warning on the PodGroup (tests/replay/test_podgroup_unschedulable_notice.py), only the words."""
    core = Scheduler(config(BINPACK))
    load(core, _cluster(), 0.0)
    attempts = core.schedule_next(0.0)
    assert attempts is not None and [a.message for a in attempts] == [UPSTREAM]
    assert core.group_notice(attempts) is None


def test_no_hint_while_enough_pods_exist_or_a_member_is_only_leaving() -> None:
    """Five exist, one of them being deleted: the plugin counts 4, but the pods are there (a
    controller replaces the leaving one); "until 1 more is created" would be wrong."""
    result = explaining.explain(_cluster(members=5, leaving=1), "default/job-1", config(BINPACK), [], 0.0)
    assert result is not None and result.too_few_members == ""
    assert "no member is tried until" not in explaining.render(result, 0.0)
