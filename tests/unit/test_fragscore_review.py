"""Review of TesseraFragmentation (scheduler/core/plugins/fragmentation/) and how it learns the
workload (observe): each test failed before its fix."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scheduler.api.config import SchedulerConfig, parse_config
from scheduler.core.framework.cycle_state import MAX_NODE_SCORE, prepare
from scheduler.core.objects import parse_pod
from scheduler.core.plugins.devices import TesseraDevices
from scheduler.core.plugins.fragmentation import TesseraFragmentation, sigmoid_score
from scheduler.core.plugins.fragmentation.cache import _CACHED_DEMANDS
from scheduler.core.workload import TaskShape
from scheduler.sim import builders as b
from tests.helpers import Run

SHARE = "class.tessera.dev/share"


def _config(**args: Any) -> SchedulerConfig:
    return parse_config({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "tessera", "plugins": {"score": {
            "disabled": [{"name": "*"}], "enabled": [{"name": "TesseraFragmentation", "weight": 1}]}},
            "pluginConfig": [{"name": "TesseraFragmentation", "args": args}]}],
    }, "test")


def _plugin(run: Run) -> TesseraFragmentation:
    plugin = run.scheduler.profiles["tessera"].find(TesseraFragmentation)
    assert plugin is not None
    return plugin  # type: ignore[no-any-return]


def _shared_gpus(run: Run, node: str, gpus: int) -> None:
    run.add(b.node(node, gpus=gpus, cpu="32"))
    for index in range(gpus):
        device = b.device(node, index)
        device["spec"]["capacity"]["gpu-milli"] = "1000"
        run.add(device)
    run.add(b.resource_class("share", match_labels={"model": "V100"}, sharing={"dimension": "gpu-milli", "unit": "1"}))


@pytest.mark.parametrize("slices", [(600, 600), (300, 300)])
def test_a_pod_with_a_slice_per_container_is_scored_with_every_slice(slices: tuple[int, int]) -> None:
    """Two containers, each a slice of a shared GPU: the planner puts 600 + 600 on two GPUs and
    300 + 300 on one. The score must measure the node as the plan leaves it (measure.py: "the plan
    that is scored is the plan that is bound"); `_slice_changes` skipped a grant whose GPU slot
    *value* was already removed, so the second GPU (equal slot) was scored as untouched, and a
    second slice on the same GPU was not counted at all."""
    run = Run(_config())
    _shared_gpus(run, "n", 2)
    run.add(*(b.pod(f"o{i}", scheduler="other", limits={"nvidia.com/gpu": 1}) for i in range(3)))
    pod = parse_pod(b.pod("two", containers=[b.container("a", limits={SHARE: slices[0]}),
                                             b.container("b", limits={SHARE: slices[1]})]))
    state = run.state
    ctx = prepare(pod, state.classes)
    info = state.nodes["n"]
    devices = run.scheduler.profiles["tessera"].find(TesseraDevices)
    assert devices is not None and devices.filter(ctx, info) is None
    per_device: dict[str, int] = {}
    for by_resource in ctx.plans["n"].grants.values():
        for grants in by_resource.values():
            for name, amount, _dimension in grants:
                per_device[name] = per_device.get(name, 0) + int(amount or 0)
    measure = _plugin(run).measure
    gpus = measure.gpus(info)
    _, classes, sizes = gpus.state[0]
    after = tuple(sorted([(1000 - per_device[name], classes, sizes) for name in per_device]
                         + [(1000, classes, sizes)] * (2 - len(per_device))))
    expected = sigmoid_score(measure.fragmentation(gpus.free_cpu, after) - measure.fragmentation(gpus.free_cpu, gpus.state))
    assert _plugin(run).score(ctx, info) == expected


@pytest.mark.parametrize("late", ["class", "devices"])
def test_pods_seen_before_their_class_or_devices_are_learned_as_what_they_ask_for(late: str) -> None:
    """Informers list pods, devices and classes concurrently, so at start-up a pod may be seen
    before the class it asks for, or before that class has devices. Each pod's task type was read
    once, when first seen: a class request then read as a CPU-only pod, for good — the learned
    mix (module doc of workload.py: "exact request shapes") and so the placements depended on
    which list came back first. Same objects in either order must give the same mix."""
    def learned(pods_first: bool) -> list[tuple[TaskShape, float]]:
        run = Run(_config())
        cls = b.resource_class("share", match_labels={"model": "T4"}, sharing={"dimension": "gpu-milli", "unit": "1"})
        node = [b.node("n", gpus=4)]
        devices = []
        for index in range(4):
            device = b.device("n", index, model="T4")
            device["spec"]["capacity"]["gpu-milli"] = "1000"
            devices.append(device)
        pods = [b.pod(f"p{i}", scheduler="other", limits={SHARE: 500, "cpu": "2"}) for i in range(3)]
        early: list[dict[str, Any]] = node + (devices if late == "class" else [cls])
        rest: list[dict[str, Any]] = [cls] if late == "class" else devices
        run.add(*(early + pods + rest if pods_first else early + rest + pods))
        run.add(b.pod("probe", requests={"cpu": "1"}))  # a cycle: the scheduler reads the plugin's epoch
        return [(t.shape, round(t.popularity, 6)) for t in _plugin(run).measure.workload.types]

    in_order = learned(pods_first=False)
    assert TaskShape(1, 500, "share", 2000, "gpu-milli", 500) in [shape for shape, _ in in_order]
    assert learned(pods_first=True) == in_order


def test_score_tables_per_pod_demand_are_bounded() -> None:
    """FragmentationCache keeps a score table per pod demand (CPU, GPUs, classes), each as long as
    twice the (GPU slots, free CPU) ids seen (up to MEMO_LIMIT = 200k: 3.2 MB a table). They were
    dropped only when the workload epoch, the classes or the node order moved: a few thousand
    pods with distinct CPU requests between two refreshes (the epoch moves at +25 % pods seen)
    kept a table each. The per-node layer next to it keeps at most _CACHED_DEMANDS."""
    run = Run(_config())
    run.add(*(b.node(f"n{i}", gpus=8, cpu="96") for i in range(4)))
    run.add(b.pod("seen", scheduler="other", limits={"nvidia.com/gpu": 1, "cpu": "4"}))
    plugin = _plugin(run)
    table = run.scheduler.profiles["tessera"].table
    rows = np.arange(table.size, dtype=np.int64)
    for cpu in range(1, 3 * _CACHED_DEMANDS):
        ctx = prepare(parse_pod(b.pod(f"p{cpu}", requests={"cpu": f"{cpu}m", "nvidia.com/gpu": 1})), run.state.classes)
        scores = plugin.score_rows(table, ctx, rows)
        assert all(0 <= s <= MAX_NODE_SCORE for s in scores.tolist())
    assert len(plugin.cache._tables) <= _CACHED_DEMANDS


def test_a_node_advertising_a_huge_plain_gpu_count_is_measured_with_bounded_slots() -> None:
    """A node without device objects is measured as one slot per unit of its plain
    `nvidia.com/gpu` allocatable: a node status advertising 200,000 (or 10^9: quantities go up to
    2^62) built and sorted a slot per unit for every node change — seconds, or a scheduler that
    never finishes its cycle. Bad input must cost bounded time; the score stays 0..100."""
    run = Run(_config())
    run.add(b.node("huge", gpus=200_000, cpu="64"), b.node("small", gpus=8, cpu="64"))
    run.add(b.pod("seen", scheduler="other", limits={"nvidia.com/gpu": 1, "cpu": "4"}))
    measure = _plugin(run).measure
    info = run.state.nodes["huge"]
    assert len(measure.gpus(info).state) <= 4096
    ctx = prepare(parse_pod(b.pod("one", requests={"cpu": "4", "nvidia.com/gpu": 1})), run.state.classes)
    assert 0 <= measure.score(ctx, info) <= MAX_NODE_SCORE


MEM = "class.tessera.dev/mem"


def _mixed_memory_class(run: Run, *, first: str) -> None:
    """A sharing class over GPU memory (unit 1Gi) selecting an 80Gi GPU (node `big`) and a 40Gi
    one (node `small`); `first` is the node whose GPU is added first."""
    nodes = {"big": "80Gi", "small": "40Gi"}
    for node in sorted(nodes, key=lambda name: name != first):
        run.add(b.node(node, gpus=1, cpu="32"), b.device(node, 0, model="A100", memory=nodes[node]))
    run.add(b.resource_class("mem", match_labels={"model": "A100"}, sharing={"dimension": "memory", "unit": "1Gi"}))


@pytest.mark.parametrize("first", ["big", "small"])
def test_a_slice_is_a_share_of_each_gpu_by_that_gpus_own_capacity(first: str) -> None:
    """A sharing class over GPUs of different capacity: a 40Gi slice is half of an 80Gi GPU and
    all of a 40Gi one. The task type's size in milli-GPU was read from the first device of the
    class found and used for every GPU: with the 80Gi one first, a 40Gi GPU holding 20Gi looked
    like room for one more 40Gi pod (500 milli free, a 500 milli type), so a 20Gi pod went there
    and stranded it. Measured per GPU, a 20Gi pod on the 80Gi GPU leaves room for one 40Gi pod
    (250 milli stranded), on the 40Gi one room for none (500 stranded): it goes to `big`,
    whichever device was seen first."""
    run = Run(_config(multiGpuPrior=0))  # only the observed types
    _mixed_memory_class(run, first=first)
    run.add(*(b.pod(f"o{i}", scheduler="other", limits={MEM: 40}) for i in range(20)))
    run.add(b.pod("p", limits={MEM: 20}))
    assert run.node_of("p") == "big"
    # The 40Gi type weighs 20/21, the 20Gi one 1/21. Now `big` (80Gi, 20 used, 750 milli free)
    # takes one 40Gi pod (500 milli there), 250 stranded for that type, or three 20Gi pods (250
    # each); `small` (40Gi, empty) takes one 40Gi pod or two 20Gi ones (500 each there).
    measure, nodes = _plugin(run).measure, run.state.nodes
    assert measure.fragmentation(32_000, measure.gpus(nodes["big"]).state) == pytest.approx(20 / 21 * 250)
    assert measure.fragmentation(32_000, measure.gpus(nodes["small"]).state) == pytest.approx(0, abs=1e-9)
