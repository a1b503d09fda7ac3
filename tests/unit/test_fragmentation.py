"""The FGD fragmentation measure and the TesseraFragmentation score."""

from __future__ import annotations

from scheduler.api.config import parse_config
from scheduler.core.plugins.fragmentation import fragmentation
from scheduler.core.workload import TaskType, WorkloadModel, demand_key
from scheduler.sim import builders as b
from tests.helpers import Run

HALF = TaskType(whole=0, fraction=500, cpu=1000, memory=0, popularity=0.5)
ONE = TaskType(whole=1, fraction=0, cpu=1000, memory=0, popularity=0.5)


def test_fragmentation_by_task_type() -> None:
    # 1 fully free GPU and two partly used GPUs with 300 and 600 milli free, plenty of CPU
    view = (8000, 2**30, 1, (300, 600))
    # half-GPU tasks cannot use the 300 slice; whole-GPU tasks cannot use either slice
    assert fragmentation(view, (HALF,)) == 0.5 * 300
    assert fragmentation(view, (ONE,)) == 0.5 * 900
    assert fragmentation(view, (HALF, ONE)) == 0.5 * 300 + 0.5 * 900
    # no CPU left: everything free is a fragment for both
    assert fragmentation((0, 2**30, 1, (300, 600)), (HALF, ONE)) == 1900
    # whole-GPU task with no fully free GPU: all free GPU is stranded
    assert fragmentation((8000, 2**30, 0, (300, 600)), (ONE,)) == 0.5 * 900


def test_workload_buckets_and_epochs() -> None:
    assert demand_key(0, 470) == (0, 450) and demand_key(0, 990) == (1, 0) and demand_key(2, 0) == (2, 0)
    model = WorkloadModel()
    model.observe(0, 500, 1000, 0)
    first = model.epoch
    model.observe(0, 500, 3000, 0)  # same type, 100% growth: refresh
    assert model.epoch > first
    assert model.types == (TaskType(0, 500, 2000, 0, 1.0),)


def _frag_config() -> object:
    return parse_config({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "tessera", "plugins": {"score": {
            "disabled": [{"name": "*"}], "enabled": [{"name": "TesseraFragmentation", "weight": 1}]}}}],
    }, "test")


def test_fragmentation_score_fills_a_partly_used_gpu_instead_of_breaking_a_new_one() -> None:
    run = Run(_frag_config(), explain=True)  # type: ignore[arg-type]
    for name in ("a", "b"):
        run.add(b.node(name, gpus=1))
        dev = b.device(name, 0)
        dev["spec"]["capacity"]["gpu-milli"] = "1000"
        run.add(dev)
    run.add(b.resource_class("share", match_labels={"model": "V100"}, sharing={"dimension": "gpu-milli", "unit": "1"}))
    # whole-GPU demand is common in this workload, so breaking the second GPU is costly
    for i in range(3):
        run.add(b.pod(f"whole-{i}", scheduler="someone-else", limits={"nvidia.com/gpu": 1}))
    run.add(b.pod("s1", limits={"class.tessera.dev/share": 500}))
    first = run.node_of("s1")
    run.add(b.pod("s2", limits={"class.tessera.dev/share": 400}))
    assert run.node_of("s2") == first
    scores = run.last("s2").scores
    assert scores is not None
    other = "b" if first == "a" else "a"
    assert scores[first]["TesseraFragmentation"] == 100 and scores[other]["TesseraFragmentation"] == 0
