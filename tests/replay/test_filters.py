"""Filters and their upstream messages, resource totals, and who counts against a node."""

from __future__ import annotations

from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, config


def test_messages_count_reasons_per_node_sorted_as_strings() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("tainted", taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]),
            b.node("cordoned", unschedulable=True),
            b.node("small", cpu="1", memory="1Gi"),
            b.node("labelled", labels={"zone": "b"}, cpu="1", memory="1Gi"))
    run.add(b.pod("p", requests={"cpu": "2", "memory": "2Gi"}))
    # upstream v1.36 no longer names the taint; a request above a node's allocatable is
    # UnschedulableAndUnresolvable there (fit.go InsufficientResource.Unresolvable), so no node helps
    assert run.last("p").message == ("0/4 nodes are available: 1 node(s) had untolerated taint(s), "
                                     "1 node(s) were unschedulable, 2 Insufficient cpu, 2 Insufficient memory."
                                     " preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling.")


def test_tolerations_node_selector_and_required_affinity() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("t", labels={"zone": "a"}, taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]),
            b.node("u", labels={"zone": "b"}))
    tolerate = [{"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}]
    run.add(b.pod("sel", spec_extra={"nodeSelector": {"zone": "a"}, "tolerations": tolerate}))
    assert run.node_of("sel") == "t"
    run.add(b.pod("nosel", spec_extra={"nodeSelector": {"zone": "a"}}))
    assert run.last("nosel").message == ("0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
                                         "1 node(s) had untolerated taint(s)."
                                         " preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.")
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b", "c"]}]}]}}}
    run.add(b.pod("aff", spec_extra={"affinity": affinity, "tolerations": [{"operator": "Exists"}]}))
    assert run.node_of("aff") == "u"
    cordon_ok = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]
    run.add(b.node("c", unschedulable=True, labels={"zone": "c"}))
    run.add(b.pod("tolerates-cordon", spec_extra={"nodeSelector": {"zone": "c"}, "tolerations": cordon_ok}))
    assert run.node_of("tolerates-cordon") == "c"


def test_preferred_affinity_and_prefer_no_schedule_steer_placement() -> None:
    run = Run(config(BINPACK), explain=True)
    run.add(b.node("plain"), b.node("preferred", labels={"disk": "ssd"}),
            b.node("soft-tainted", labels={"disk": "ssd"}, taints=[{"key": "k", "value": "v", "effect": "PreferNoSchedule"}]))
    affinity = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}}
    run.add(b.pod("p", spec_extra={"affinity": affinity}))
    attempt = run.last("p")
    assert attempt.node == "preferred"
    assert attempt.scores is not None
    assert attempt.scores["preferred"]["NodeAffinity"] == 100 and attempt.scores["plain"]["NodeAffinity"] == 0
    assert attempt.scores["soft-tainted"]["TaintToleration"] == 0 and attempt.scores["plain"]["TaintToleration"] == 100
    assert attempt.scores["preferred"]["total"] == 3 * 100 + 2 * 100 + attempt.scores["preferred"]["NodeResourcesFit"] \
        + attempt.scores["preferred"]["TesseraDevices"]


def test_init_containers_sidecars_and_overhead_in_fit() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("n", cpu="4", memory="8Gi"))
    # init step of 3 CPUs is the peak: 3 > 1 (app) so the pod needs 3 CPUs
    init = [b.container("init", requests={"cpu": "3"})]
    run.add(b.pod("init-peak", init_containers=init, containers=[b.container("app", requests={"cpu": "1"})]))
    assert run.node_of("init-peak") == "n"
    assert run.state.nodes["n"].requested["cpu"] == 3000
    # a sidecar (restartPolicy Always) adds to the app containers, plus overhead
    side = [b.container("proxy", requests={"cpu": "500m"}, restart_policy="Always")]
    run.add(b.pod("sidecar", init_containers=side, containers=[b.container("app", requests={"cpu": "250m"})],
                  spec_extra={"overhead": {"cpu": "250m"}}))
    assert run.node_of("sidecar") == "n"
    assert run.state.nodes["n"].requested["cpu"] == 4000
    run.add(b.pod("one-more", requests={"cpu": "1m"}))
    assert run.last("one-more").message == ("0/1 nodes are available: 1 Insufficient cpu."
                                               " preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")


def test_too_many_pods() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("n", pods=2))
    run.add(*[b.pod(f"p{i}") for i in range(3)])
    assert run.last("p2").message == ("0/1 nodes are available: 1 Too many pods."
                                         " preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")


def test_pods_of_other_schedulers_count_and_terminal_pods_free_resources() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=4))
    run.add(b.pod("other", scheduler="default-scheduler", limits={"nvidia.com/gpu": 3}, node_name="n", phase="Running"))
    run.add(b.pod("pending-other", scheduler="default-scheduler", limits={"nvidia.com/gpu": 1}))
    assert run.state.pod_by_key("default/pending-other") is not None
    assert all(a.pod.meta.name != "pending-other" for a in run.attempts)  # not ours: never scheduled
    run.add(b.pod("mine", limits={"nvidia.com/gpu": 2}))
    assert run.node_of("mine") is None
    finished = b.pod("other", scheduler="default-scheduler", limits={"nvidia.com/gpu": 3}, node_name="n", phase="Succeeded")
    run.feed(b.event("MODIFIED", finished))
    assert run.node_of("mine") == "n"


def test_pods_with_deletion_timestamp_keep_resources_until_gone() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=1))
    dying = b.pod("dying", limits={"nvidia.com/gpu": 1}, node_name="n", phase="Running")
    run.add(dying)
    dying["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    run.feed(b.event("MODIFIED", dying))
    run.add(b.pod("next", limits={"nvidia.com/gpu": 1}))
    assert run.node_of("next") is None
    run.feed(b.event("DELETED", dying))
    assert run.node_of("next") == "n"


def test_an_event_that_cannot_help_does_not_retry_the_pod() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=1))
    run.add(b.pod("gpu", limits={"nvidia.com/gpu": 2}))
    before = len(run.attempts)
    run.add(b.node("cpu-only"))  # cannot help: no GPUs
    run.add(b.resource_class("irrelevant"))  # not a device-class pod
    assert len(run.attempts) == before
    run.add(b.node("big", gpus=2))
    assert run.node_of("gpu") == "big"


def test_percentage_of_nodes_to_score_samples_nodes() -> None:
    from scheduler.core.cycle import num_feasible_nodes_to_find as n
    assert [n(0, x) for x in (50, 99, 100, 500, 1000, 5000, 6000, 15000)] == [50, 99, 100, 230, 420, 500, 300, 750]
    assert n(100, 5000) == 5000 and n(1, 5000) == 100 and n(10, 5000) == 500
    run = Run(config(BINPACK), explain=True)
    run.add(*[b.node(f"n{i:03}") for i in range(200)])
    run.add(b.pod("p"))
    scores = run.last("p").scores
    assert scores is not None
    assert len(scores) == 100  # 50 - 200/125 = 49% of 200 = 98 -> at least 100
