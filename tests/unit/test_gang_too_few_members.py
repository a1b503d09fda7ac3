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

UPSTREAM = ("0/1 nodes are available: pre-filter pod job-0 cannot find enough sibling pods, current pods number: 4, "
            "minMember of group: 5. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling., "
            "PodGroup default/train gets rejected due to Pod job-0 is unschedulable even after PostFilter")
HINT = ("Only 4 pods of PodGroup default/train exist and its minMember is 5: no member is tried until 1 more is "
        "created (fewer than minMember were created or remain: a Job's parallelism below it, a ResourceQuota refusing the rest "
        "(the Job's FailedCreate Events say so; the members waiting keep the quota they hold, so it does not "
        "clear), members deleted (a node deleted, PodGC, a drain) and not re-created by their controller, "
        "or a controller still creating them; raise what limits them, re-create the deleted ones, or lower minMember).")


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
    assert first.message == f"{UPSTREAM}. {HINT}", first.message
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


def _job_twelve(failed: int = 0) -> list[dict[str, Any]]:
    """A Job of parallelism 8 and completions 12 under a PodGroup of minMember 8 (a trial's): 8
    members succeeded on n1 (and `failed` more failed), the last 4 wait; the scheduler counts
    only the 4 (upstream's informer drops finished pods), so they wait for ever."""
    gang = {"scheduling.x-k8s.io/pod-group": "ft8"}
    done = [b.pod(f"ft8-{i}", limits={"nvidia.com/gpu": 1}, labels=gang, node_name="n1", phase="Succeeded")
            for i in range(8)]
    lost = [b.pod(f"ft8-f{i}", limits={"nvidia.com/gpu": 1}, labels=gang, node_name="n1", phase="Failed")
            for i in range(failed)]
    waiting = [b.pod(f"ft8-{i}", limits={"nvidia.com/gpu": 1}, labels=gang) for i in range(8, 12)]
    return [b.node("n1", gpus=8), b.podgroup("ft8", 8), *done, *lost, *waiting]


FINISHED_HINT = ("Only 4 pods of PodGroup default/ft8 exist and its minMember is 8: no member is tried until 4 more "
                 "are created (8 of its members succeeded, and finished members are not counted: a Job's last "
                 "completions fewer than minMember never start; lower minMember, or make completions a multiple "
                 "of it).")


def test_a_jobs_last_completions_below_minmember_are_told_apart_from_a_low_parallelism() -> None:
    """The trial's ft8: parallelism 8 = minMember, so "a Job's parallelism below minMember never
    starts: raise it" was wrong advice; the 8 that succeeded are what the count leaves out."""
    result = explaining.explain(_job_twelve(), "default/ft8-8", config(BINPACK), [], 0.0)
    assert result is not None and result.dry_run is not None
    assert "current pods number: 4, minMember of group: 8" in result.dry_run.message  # upstream's count
    assert result.too_few_members == FINISHED_HINT
    assert "parallelism" not in explaining.render(result, 0.0)
    first = next(o for o in whatif.what_if(_job_twelve(), config(BINPACK), 0.0).outcomes if o.pod == "default/ft8-8")
    assert first.message.endswith(FINISHED_HINT), first.message


def test_failed_members_alone_keep_the_parallelism_hint_and_are_counted_when_some_succeeded() -> None:
    """Failed members are replaced by a Job's controller: only succeeded ones mean remaining
    completions; both are said when both finished."""
    result = explaining.explain(_job_twelve(failed=2), "default/ft8-8", config(BINPACK), [], 0.0)
    assert result is not None
    assert result.too_few_members == FINISHED_HINT.replace("8 of its members succeeded", "8 of its members succeeded "
                                                           "and 2 failed")
    only_failed = [o for o in _job_twelve(failed=2) if o.get("status", {}).get("phase") != "Succeeded"]
    result = explaining.explain(only_failed, "default/ft8-8", config(BINPACK), [], 0.0)
    assert result is not None
    assert result.too_few_members == (
        "Only 4 pods of PodGroup default/ft8 exist and its minMember is 8: no member is tried until 4 more are "
        "created (fewer than minMember were created or remain: a Job's parallelism below it, a ResourceQuota refusing the rest "
        "(the Job's FailedCreate Events say so; the members waiting keep the quota they hold, so it does not "
        "clear), members deleted (a node deleted, PodGC, a drain) and not re-created by their controller, "
        "or a controller still creating them; raise what limits them, re-create the deleted ones, or lower minMember).")


EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"


def _jobset_leaders() -> list[dict[str, Any]]:
    """A JobSet of 3 child Jobs x 2 pods with exclusive placement, under a PodGroup of minMember 6
    (a trial's): JobSet's pod webhook refuses a Job's follower until its leader is scheduled, so
    only the 3 leaders exist and the gang waits for ever."""
    leaders = [b.pod(f"js-w-{j}-0-abcde", limits={"nvidia.com/gpu": 1},
                     labels={"scheduling.x-k8s.io/pod-group": "js", "jobset.sigs.k8s.io/jobset-name": "js"},
                     annotations={EXCLUSIVE: "kubernetes.io/hostname", "jobset.sigs.k8s.io/jobset-name": "js"})
               for j in range(3)]
    return [b.node("n1", gpus=4), b.node("n2", gpus=4), b.node("n3", gpus=4), b.podgroup("js", 6), *leaders]


def test_a_jobset_gang_short_of_its_exclusive_placement_followers_is_told_why() -> None:
    """The sentence names JobSet's exclusive placement as the likely cause, and what to do."""
    result = explaining.explain(_jobset_leaders(), "default/js-w-0-0-abcde", config(BINPACK), [], 0.0)
    assert result is not None
    assert result.too_few_members == (
        "Only 3 pods of PodGroup default/js exist and its minMember is 6: no member is tried until 3 more are "
        f"created (its pods carry JobSet's {EXCLUSIVE}: JobSet creates a child Job's followers only once its "
        "leader is scheduled, and no member is tried before minMember exist; lower minMember to the pods that exist "
        "before any is placed, the leaders).")


def _mpi_workers(launcher: bool = False, workers: int = 2, min_member: int = 3) -> list[dict[str, Any]]:
    """An MPIJob of `workers` workers under the PodGroup the MPI Operator makes (minMember workers
    + 1, its launcher counted), its pods labelled as mpi-operator v2 labels them (defaultLabels and
    the pod-group label of decoratePodTemplateSpec, which the launcher's template gets too). With
    launcherCreationPolicy WaitForWorkersReady the launcher is created only once every worker is
    Ready (a trial's), so only the workers exist and the gang waits for ever."""
    def labels(role: str) -> dict[str, str]:
        return {"scheduling.x-k8s.io/pod-group": "mpi", "training.kubeflow.org/operator-name": "mpi-operator",
                "training.kubeflow.org/job-name": "mpi", "training.kubeflow.org/job-role": role}
    pods = [b.pod(f"mpi-worker-{i}", limits={"nvidia.com/gpu": 1},
                  labels={**labels("worker"), "training.kubeflow.org/replica-index": str(i)}) for i in range(workers)]
    if launcher:
        pods.append(b.pod("mpi-launcher-x7k2p", labels=labels("launcher")))
    return [b.node("n1", gpus=4), b.podgroup("mpi", min_member), *pods]


def test_an_mpijob_gang_whose_launcher_waits_for_ready_workers_is_told_why() -> None:
    """Only the workers exist and none is a launcher: the sentence names the MPI Operator's
    launcherCreationPolicy WaitForWorkersReady and the field that fixes it."""
    result = explaining.explain(_mpi_workers(), "default/mpi-worker-0", config(BINPACK), [], 0.0)
    assert result is not None
    assert result.too_few_members == (
        "Only 2 pods of PodGroup default/mpi exist and its minMember is 3: no member is tried until 1 more is "
        "created (its pods are MPI Operator workers and its launcher does not exist: with launcherCreationPolicy "
        "WaitForWorkersReady the MPI Operator creates the launcher only once every worker is Ready, and no member "
        "is tried before minMember exist; set the MPIJob's runPolicy.schedulingPolicy.minAvailable to its worker "
        "count).")


def test_an_mpijob_gang_with_its_launcher_short_of_workers_keeps_the_general_sentence() -> None:
    """The launcher exists: the workers are what is missing (a quota, a deletion), as for any gang."""
    result = explaining.explain(_mpi_workers(launcher=True, min_member=4), "default/mpi-worker-0", config(BINPACK),
                                [], 0.0)
    assert result is not None
    assert result.too_few_members.startswith("Only 3 pods of PodGroup default/mpi exist and its minMember is 4: no "
                                             "member is tried until 1 more is created (fewer than minMember were "
                                             "created or remain:"), result.too_few_members


def test_the_likely_controller_is_read_from_every_member_not_one() -> None:
    """JobSet's annotation on one member names JobSet (a member without it, e.g. one added by
    hand, does not hide it); pods labelled as workers by another operator than mpi-operator
    (the Training Operator's job-role label) are no MPIJob's: the general sentence."""
    objs = _jobset_leaders()
    del objs[-1]["metadata"]["annotations"][EXCLUSIVE]
    result = explaining.explain(objs, "default/js-w-0-0-abcde", config(BINPACK), [], 0.0)
    assert result is not None and f"its pods carry JobSet's {EXCLUSIVE}" in result.too_few_members
    objs = _mpi_workers()
    for obj in objs:
        if obj["kind"] == "Pod":
            obj["metadata"]["labels"]["training.kubeflow.org/operator-name"] = "pytorchjob-controller"
    result = explaining.explain(objs, "default/mpi-worker-0", config(BINPACK), [], 0.0)
    assert result is not None
    assert "(fewer than minMember were created or remain:" in result.too_few_members, result.too_few_members
