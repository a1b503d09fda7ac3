"""A node that counts GPUs (`nvidia.com/gpu` allocatable) but has no ExtendedResources says so when
its pods hold more than it counts, as a node with devices does: a GPUsOvercommitted Warning, the
view's note and `tessera_gpus_overcommitted` (so TesseraGPUOvercommitted fires). A day-2 trial: a
6-GPU Tessera pod and a 4-GPU pod bound with spec.nodeName on an 8-GPU node, or the node's count
cut from 8 to 4 under 6 in use, were silent; only a node with devices raised them."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from scheduler.kube.metrics import Metrics
from scheduler.sim import builders as b
from scheduler.view import model as m
from scheduler.view.cluster import build_view, gpu_counts
from tests.helpers import Run, config

GPU = "nvidia.com/gpu"


def _overcommitted(run: Run) -> int:
    metrics = Metrics()
    metrics.set_gpus(gpu_counts(run.scheduler, now=run.replay.now))
    for family in text_string_to_metric_families(generate_latest(metrics.registry).decode()):
        if family.name == "tessera_gpus_overcommitted":
            return int(family.samples[0].value)
    raise AssertionError("no tessera_gpus_overcommitted")


def _six_placed() -> Run:
    run = Run(config())
    run.add(b.node("n", gpus=8), b.pod("six", limits={GPU: 6}))
    assert run.node_of("six") == "n"
    return run


def test_a_pod_bound_by_another_scheduler_beyond_the_count_is_warned_and_counted() -> None:
    run = _six_placed()
    run.add(b.pod("four", scheduler="default-scheduler", limits={GPU: 4}, node_name="n", phase="Running"))
    [notice] = [n for n in run.notices() if n.startswith("GPUsOvercommitted")]
    assert notice.startswith("GPUsOvercommitted: node n has 10 nvidia.com/gpu in use but only 8 allocatable")
    # no class hands out GPUs here: the note on other schedulers' blindness to class GPUs would mislead
    assert "classes" not in notice and "no ExtendedResources describe its GPUs" in notice, notice
    assert "spec.nodeName" in notice
    assert _overcommitted(run) == 2
    [node] = [node for node in build_view(run.scheduler, source="simulate", now=0.0).nodes if node.name == "n"]
    assert node.over_capacity == (m.OverCapacity(GPU, 10, 8),)
    run.add(b.pod("late", limits={GPU: 1}))
    assert run.node_of("late") is None  # placement stays refused there


def test_a_pod_of_tessera_bound_by_hand_beyond_the_count_is_warned() -> None:
    run = _six_placed()
    run.add(b.pod("four", limits={GPU: 4}, node_name="n", phase="Running"))
    [notice] = [n for n in run.notices() if n.startswith("GPUsOvercommitted")]
    assert notice.startswith("GPUsOvercommitted: node n has 10 nvidia.com/gpu in use but only 8 allocatable, "
                             "every pod on it Tessera's"), notice
    assert _overcommitted(run) == 2


def test_allocatable_cut_under_the_gpus_in_use_is_warned_as_a_cut_and_counted() -> None:
    run = _six_placed()
    run.feed(b.event("MODIFIED", b.node("n", gpus=4)))
    [notice] = [n for n in run.notices() if n.startswith("GPUsOvercommitted")]
    assert notice.startswith("GPUsOvercommitted: node n has 6 nvidia.com/gpu in use but only 4 allocatable since "
                             "its count went down from 8"), notice
    assert _overcommitted(run) == 2
    run.feed(b.event("MODIFIED", b.node("n", gpus=8)))  # back over the use: no more excess, no new Warning
    assert _overcommitted(run) == 0
    assert len([n for n in run.notices() if n.startswith("GPUsOvercommitted")]) == 1


def test_a_node_without_gpus_or_within_its_count_says_nothing() -> None:
    run = _six_placed()
    run.add(b.node("cpu", cpu="4"), b.pod("c", requests={"cpu": "1"}, node_name="cpu", phase="Running"),
            b.pod("two", limits={GPU: 2}, node_name="n", phase="Running"))
    assert not [n for n in run.notices() if n.startswith("GPUsOvercommitted")]
    assert _overcommitted(run) == 0
