"""Tessera writes the status of its own PodGroups only, also of one seen before its pods.

scheduler-plugins' PodGroup names no scheduler (its spec is minMember, minResources,
scheduleTimeoutSeconds): only its pods' `spec.schedulerName` tells whose it is. Tessera wrote
`Pending` to every PodGroup it saw without pods, so another scheduler's group created before its
pods (as Kubeflow's training operator creates them) got Tessera's status once (found in review).
A group is Tessera's to report from the first pod of one of its scheduler names that names it,
and stays so while none of its pods is left (a finished job's group gets its last phase).
"""

from __future__ import annotations

from typing import Any

from scheduler.api.config import load_config
from scheduler.kube.http import KubeHttp
from scheduler.kube.loop import SchedulerLoop
from scheduler.sim import builders as b
from tests.fakeapi import FakeApi

PG_LABEL = "scheduling.x-k8s.io/pod-group"


def _leader() -> SchedulerLoop:
    """A leader (term 1) with a complete cache and the one 8-GPU node `n`."""
    api = FakeApi()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t",  # type: ignore[arg-type]
                         leader_term=lambda: 1)
    for informer in loop.informers.informers:
        informer.synced.set()
    loop._on_event("ADDED", b.node("n", gpus=8))
    return loop


def _wished(loop: SchedulerLoop, name: str) -> list[dict[str, Any]]:
    return [body["status"] for (path, _), body in loop.statuses._dirty.items() if f"/podgroups/{name}/status" in path]


def _member(name: str, group: str, scheduler: str = "tessera", **kw: Any) -> dict[str, Any]:
    return b.pod(name, labels={PG_LABEL: group}, limits={"nvidia.com/gpu": 1}, scheduler=scheduler, **kw)


def test_another_schedulers_podgroup_seen_before_its_pods_gets_no_status() -> None:
    loop = _leader()
    loop._on_event("ADDED", b.podgroup("theirs", 2))
    assert _wished(loop, "theirs") == []  # no pod yet: whose it is is not known
    for i in range(2):
        loop._on_event("ADDED", _member(f"theirs-{i}", "theirs", scheduler="scheduler-plugins-scheduler"))
    loop._on_event("MODIFIED", b.node("n", gpus=8))  # any later event
    assert _wished(loop, "theirs") == []


def test_a_podgroup_seen_before_its_pods_is_written_from_its_first_pod_of_ours() -> None:
    loop = _leader()
    loop._on_event("ADDED", b.podgroup("ours", 2))
    assert _wished(loop, "ours") == []
    loop._on_event("ADDED", _member("ours-0", "ours"))  # one of two: Pending, as the controller writes it
    assert _wished(loop, "ours") == [{"phase": "Pending", "running": 0, "succeeded": 0, "failed": 0}]


def test_a_podgroup_of_ours_whose_pods_are_all_gone_still_gets_its_status() -> None:
    loop = _leader()
    loop._on_event("ADDED", b.podgroup("job", 1))
    worker = _member("job-0", "job", node_name="n", phase="Running")
    loop._on_event("ADDED", worker)
    assert [status["phase"] for status in _wished(loop, "job")] == ["Running"]
    loop.statuses._dirty.clear()  # written
    loop._on_event("DELETED", worker)  # fewer than minMember left: Pending, the counts as the object kept them
    assert [status["phase"] for status in _wished(loop, "job")] == ["Pending"]


def test_another_schedulers_podgroup_whose_pods_are_all_gone_gets_no_status() -> None:
    """The guard of `GangIndex.ours`: only a pod of ours makes a group ours; another scheduler's
    pods, once all deleted, leave its group nobody's we know (not ours to write `Pending`)."""
    loop = _leader()
    loop._on_event("ADDED", b.podgroup("theirs", 2))
    members = [_member(f"theirs-{i}", "theirs", scheduler="scheduler-plugins-scheduler", node_name="n",
                       phase="Running") for i in range(2)]
    for member in members:
        loop._on_event("ADDED", member)
    for member in members:
        loop._on_event("DELETED", member)
    loop._on_event("MODIFIED", b.node("n", gpus=8))  # any later event
    assert "theirs" not in str(loop.core.state.gangs.ours)
    assert _wished(loop, "theirs") == []


def test_the_groups_remembered_as_ours_do_not_grow_without_bound() -> None:
    """A group stays ours while it has a pod or its object; once both are gone (in either order)
    it is forgotten: a long-lived scheduler sees thousands of jobs come and go."""
    loop = _leader()
    for i in range(20):
        group, pod = f"job{i}", _member(f"job{i}-0", f"job{i}", node_name="n", phase="Succeeded")
        loop._on_event("ADDED", b.podgroup(group, 1))
        loop._on_event("ADDED", pod)
        if i % 2:  # the pod first, then its group
            loop._on_event("DELETED", pod)
            loop._on_event("DELETED", b.podgroup(group, 1))
        else:  # the group first, then its pod
            loop._on_event("DELETED", b.podgroup(group, 1))
            loop._on_event("DELETED", pod)
    assert loop.core.state.gangs.ours == set()


def _with_status(group: dict[str, Any], **status: Any) -> dict[str, Any]:
    return {**group, "status": status}


def test_a_podgroup_left_running_by_pods_gone_while_tessera_was_down_goes_pending_on_start() -> None:
    """A user trial: `kubectl delete job train` with Tessera stopped left the group `Running,
    running: 4` over three restarts. A new process has seen none of the group's pods, so
    `GangIndex.ours` cannot name it; its status speaks of pods that are gone, and
    scheduler-plugins' controller (which reconciles every PodGroup) writes such a group `Pending`
    with every count 0, whoever's pods it had — so Tessera writes it too, once the cache synced."""
    loop = _leader()
    loop._on_event("ADDED", _with_status(b.podgroup("train", 4), phase="Running", running=4, succeeded=0, failed=0))
    assert _wished(loop, "train") == [{"phase": "Pending", "running": 0, "succeeded": 0, "failed": 0}]


def test_a_podgroup_without_pods_whose_status_says_nothing_of_pods_is_left_alone() -> None:
    """Pending (or no phase yet) and the final phases are what the controller leaves without
    pods: nothing to write for a group no pod of ours has named."""
    loop = _leader()
    for name, phase in (("new", ""), ("pending", "Pending"), ("done", "Finished"), ("failed", "Failed")):
        loop._on_event("ADDED", _with_status(b.podgroup(name, 2), phase=phase, running=1, succeeded=0, failed=0))
        assert _wished(loop, name) == []


def test_a_podgroup_whose_pods_are_all_another_schedulers_is_left_alone_whatever_its_phase() -> None:
    """The rule for a group with no pod left (`reports_status`) is for no pod at all: while pods
    of another scheduler's name are there (a migration beside scheduler-plugins), its status is
    that scheduler's controller's to write, even if it says `Scheduling` while they run."""
    loop = _leader()
    for i in range(2):
        loop._on_event("ADDED", _member(f"theirs-{i}", "theirs", scheduler="scheduler-plugins-scheduler",
                                        node_name="n", phase="Running"))
    loop._on_event("ADDED", _with_status(b.podgroup("theirs", 2), phase="Scheduling", running=0, succeeded=0,
                                         failed=0))
    loop._on_event("MODIFIED", b.node("n", gpus=8))  # any later event
    assert _wished(loop, "theirs") == []
