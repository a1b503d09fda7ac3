"""The fragmentation measure, the workload model, and what TesseraFragmentation decides."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.api.config import SchedulerConfig, parse_config
from scheduler.core import annotations as ann
from scheduler.core.framework.cycle_state import prepare
from scheduler.core.objects import parse_pod
from scheduler.core.plugins.fragmentation import FragmentationScore, TesseraFragmentation, sigmoid_score
from scheduler.core.state import ClusterState
from scheduler.core.workload import TaskShape, WorkloadModel
from scheduler.sim import builders as b
from tests.helpers import Run

SHARE = "class.tessera.dev/share"


def _measure(*shapes: TaskShape) -> FragmentationScore:
    score = FragmentationScore(ClusterState(frozenset(("tessera",))))
    for shape in shapes:
        score.workload.observe(shape)
    return score


def test_fragmentation_counts_what_the_task_types_could_not_use() -> None:
    half = TaskShape(count=1, milli=500, cls="", cpu=1000)
    one = TaskShape(count=1, milli=1000, cls="", cpu=1000)
    gpus = ((300, (), ()), (600, (), ()), (1000, (), ()))  # two partly used GPUs and a free one
    # half-GPU pods: one on the 600 slice, two on the free GPU; 100 + 300 left over
    assert _measure(half).fragmentation(8000, gpus) == 400
    # whole-GPU pods: one, on the free GPU; both slices stranded
    assert _measure(one).fragmentation(8000, gpus) == 900
    assert _measure(half, one).fragmentation(8000, gpus) == pytest.approx(0.5 * 400 + 0.5 * 900)
    # no CPU left: nothing can be used by anyone
    assert _measure(half, one).fragmentation(0, gpus) == 1900
    # a CPU-only type can never use a GPU, as in FGD
    assert _measure(TaskShape(0, 0, "", 1000)).fragmentation(8000, gpus) == 1900


def test_fragmentation_counts_gpus_the_cpu_cannot_feed() -> None:
    one = TaskShape(count=1, milli=1000, cls="", cpu=12000)
    eight_free = tuple((1000, (), ()) for _ in range(8))
    measure = _measure(one)
    assert measure.fragmentation(96000, eight_free) == 0  # CPU for all eight
    assert measure.fragmentation(24000, eight_free) == 6000  # CPU for two: six GPUs stranded
    assert measure.fragmentation(11999, eight_free) == 8000


def test_fragmentation_respects_device_classes() -> None:
    a100 = TaskShape(count=2, milli=1000, cls="a100", cpu=0)
    gpus = ((1000, ("a100",), ()), (1000, (), ()), (1000, ("a100",), ()), (1000, ("a100",), ()))
    # one pod of two a100 GPUs fits; the other a100 and the plain GPU are left over
    assert _measure(a100).fragmentation(0, gpus) == 2000
    # a plain request can use any GPU: two pods of two
    assert _measure(TaskShape(2, 1000, "", 0)).fragmentation(0, gpus) == 0


def test_workload_keeps_exact_shapes_by_popularity_and_bumps_epochs() -> None:
    model = WorkloadModel(max_types=2)
    small, big, rare = TaskShape(1, 500, "", 4000), TaskShape(8, 1000, "", 64000), TaskShape(2, 1000, "", 8000)
    for shape in (small, small, small, big, big, rare):
        model.observe(shape)
    # the rarest shape is cut (max_types); popularity is renormalised over the kept ones
    assert [(t.shape, t.popularity) for t in model.types] == [(small, 0.6), (big, 0.4)]
    epoch = model.epoch
    model.observe(small)
    assert model.epoch == epoch + 1  # still warming up: every pod refreshes
    groups = {(g.count, g.milli): g for g in model.groups}
    assert groups[(1, 500)].cpus == (4000,) and groups[(8, 1000)].cpus == (64000,)


def test_workload_refreshes_on_growth_only_after_warm_up() -> None:
    model = WorkloadModel()
    for _ in range(100):
        model.observe(TaskShape(1, 1000, "", 1000))
    epoch = model.epoch
    model.observe(TaskShape(1, 500, "", 1000))  # a new shape alone does not refresh...
    assert model.epoch == epoch
    for _ in range(30):  # ...25 % more pods does
        model.observe(TaskShape(1, 500, "", 1000))
    assert model.epoch > epoch and any(t.shape.milli == 500 for t in model.types)


def test_sigmoid_score_is_fgds() -> None:
    assert sigmoid_score(0) == 50
    assert sigmoid_score(-1000) == 73 and sigmoid_score(1000) == 26  # int(100·σ(±1))
    assert sigmoid_score(10**9) == 0


def _fragmentation_only() -> SchedulerConfig:
    return parse_config({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "tessera", "plugins": {"score": {
            "disabled": [{"name": "*"}], "enabled": [{"name": "TesseraFragmentation", "weight": 1}]}}}],
    }, "test")


def _gpu_nodes(run: Run, *names: str, gpus: int = 1, cpu: str = "32") -> None:
    for name in names:
        run.add(b.node(name, gpus=gpus, cpu=cpu))
        for index in range(gpus):
            dev = b.device(name, index)
            dev["spec"]["capacity"]["gpu-milli"] = "1000"
            run.add(dev)
    run.add(b.resource_class("share", match_labels={"model": "V100"}, sharing={"dimension": "gpu-milli", "unit": "1"}))


def _others(run: Run, requests: dict[str, Any], count: int) -> None:
    """Pods another scheduler owns: they only teach the workload model what the cluster runs."""
    for i in range(count):
        run.add(b.pod(f"mix-{len(run.scheduler.state.pods)}-{i}", scheduler="someone-else", limits=requests))


@pytest.mark.parametrize("seed", range(8))
def test_a_slice_goes_to_the_partly_used_gpu_not_a_fresh_one(seed: int) -> None:
    run = Run(_fragmentation_only(), seed=seed)
    _gpu_nodes(run, "a", "b")
    _others(run, {"nvidia.com/gpu": 1}, 3)  # whole-GPU demand is common: breaking a GPU is costly
    run.add(b.pod("s1", limits={SHARE: 500}))
    first = run.node_of("s1")
    run.add(b.pod("s2", limits={SHARE: 400}))
    # without the score (or with its column left out of the totals) this is a coin toss per seed
    assert run.node_of("s2") == first


def test_the_slice_takes_the_gpu_that_leaves_the_least_fragmentation_not_the_fullest() -> None:
    run = Run(_fragmentation_only(), explain=True)
    _gpu_nodes(run, "n", gpus=2)
    _others(run, {SHARE: 700}, 4)  # the cluster runs 0.7-GPU slices
    run.add(b.pod("first", limits={SHARE: 200}))  # one GPU now has 800 free
    devices = run.scheduler.state.ledger.use
    assert len([d for d in devices.values() if d.busy]) == 1
    run.add(b.pod("second", limits={SHARE: 300}))
    # best fit would put it on the 800 GPU (500 left: no 0.7 slice fits anywhere but the free
    # GPU); on the free GPU it leaves 800 + 700, room for two more 0.7 slices
    busy = sorted(run.scheduler.state.ledger.shared_use(d, "gpu-milli") for d in devices.values() if d.busy)
    assert busy == [200, 300]


def test_a_slice_between_used_gpus_that_strand_alike_takes_the_fullest() -> None:
    """GPU 0 has 900 milli free, GPU 1 800 (running pods' 100-milli slices), GPU 2 is idle; the
    cluster runs 100-milli slices alone, which use any remainder: a 100 slice strands nothing on
    either used GPU, so the tie goes to the planner's best-fit order, the fullest that fits
    (GPU 1), not a later option (docs/semantics.md, Fragmentation)."""
    run = Run(_fragmentation_only())
    _gpu_nodes(run, "n", gpus=3)
    _others(run, {SHARE: 100}, 4)
    devices = sorted(run.scheduler.state.nodes["n"].devices.values(), key=lambda d: d.attributes["index"])
    for i, index in enumerate((0, 1, 1)):
        gpu = devices[index]
        grant = ann.DeviceGrant(gpu.device_id, gpu.name, 100, "gpu-milli", gpu.resource_name)
        encoded = ann.encode_devices({"main": {SHARE: (grant,)}})
        run.add(b.pod(f"holder-{i}", limits={SHARE: 100}, node_name="n", phase="Running",
                      annotations={ann.DEVICES: encoded, ann.HELD_DEVICES: encoded}))
    run.add(b.pod("slice", limits={SHARE: 100}))
    ledger = run.scheduler.state.ledger
    assert [ledger.shared_use(ledger.use.get(d.name), "gpu-milli") for d in devices] == [100, 300, 0]

def test_cpu_only_pods_go_where_they_strand_no_gpus() -> None:
    run = Run(_fragmentation_only())
    _gpu_nodes(run, "tight", gpus=4, cpu="48")
    _gpu_nodes(run, "roomy", gpus=4, cpu="64")
    _others(run, {"nvidia.com/gpu": 1, "cpu": "12"}, 5)
    for i in range(4):
        run.add(b.pod(f"cpu-{i}", requests={"cpu": "4"}))
        # roomy has 16 cores to spare beyond what its four GPUs' pods need; tight has none
        assert run.node_of(f"cpu-{i}") == "roomy"


def test_resource_name_selects_which_devices_are_measured() -> None:
    cfg = parse_config({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "tessera",
                      "plugins": {"score": {"enabled": [{"name": "TesseraFragmentation", "weight": 10}]}},
                      "pluginConfig": [{"name": "TesseraFragmentation", "args": {"resourceName": "amd.com/gpu",
                                                                                 "multiGpuPrior": 0}}]}],
    }, "test")
    run = Run(cfg)
    node = b.node("mi300", cpu="8")
    node["status"]["allocatable"]["amd.com/gpu"] = "2"
    node["status"]["capacity"]["amd.com/gpu"] = "2"
    run.add(node, *(b.device("mi300", i, model="MI300", resource_name="amd.com/gpu") for i in range(2)))
    _others(run, {"amd.com/gpu": 1, "cpu": "8"}, 2)
    plugin = run.scheduler.profiles["tessera"].find(TesseraFragmentation)
    assert plugin is not None and plugin.measure.resource == "amd.com/gpu"
    # CPU for one 8-core pod, two AMD GPUs: one of them is stranded
    gpus = plugin.measure.gpus(run.state.nodes["mi300"])
    assert plugin.measure.fragmentation(gpus.free_cpu, gpus.state) == 1000


def test_the_multi_gpu_prior_counts_like_pods_seen_and_fades_as_real_pods_arrive() -> None:
    model = WorkloadModel(prior_pods=1)
    one = TaskShape(1, 1000, "", 4000)
    for _ in range(6):
        model.observe(one)
    weights = {t.shape: t.popularity for t in model.types}
    assert weights[one] == pytest.approx(6 / 9)
    assert {s.count for s in weights if s != one} == {2, 4, 8}  # whole GPUs, any class, CPU 0
    assert all(w == pytest.approx(1 / 9) for s, w in weights.items() if s != one)
    for _ in range(3000):
        model.observe(one)
    assert sum(t.popularity for t in model.types if t.shape != one) < 0.002
    unprimed = WorkloadModel(prior_pods=0)
    unprimed.observe(one)
    assert [t.shape for t in unprimed.types] == [one]


def test_scarcity_weighs_class_bound_types_by_how_rare_their_gpus_are() -> None:
    run = Run(_fragmentation_only())
    for name, gpu_model, gpus in (("g2-a", "G2", 4), ("g2-b", "G2", 4), ("g2-c", "G2", 4), ("t4", "T4", 4)):
        run.add(b.node(name, gpus=gpus), *(b.device(name, i, model=gpu_model) for i in range(gpus)))
    run.add(b.resource_class("t4", match_labels={"model": "T4"}), b.resource_class("any-gpu"))
    measure = FragmentationScore(run.scheduler.state, scarcity_exponent=1)
    bound, free = TaskShape(1, 1000, "t4", 1000), TaskShape(1, 1000, "", 1000)
    anywhere = TaskShape(1, 1000, "any-gpu", 1000)
    # 16 GPUs, 4 of them T4
    assert measure.scarcity([bound, free, anywhere]) == {bound: 4.0, free: 1.0, anywhere: 1.0}
    assert FragmentationScore(run.scheduler.state, scarcity_exponent=2).scarcity([bound])[bound] == 16.0
    model = WorkloadModel(prior_pods=0, scarcity=measure.scarcity)
    model.observe(bound)
    model.observe(free)
    assert {t.shape: t.popularity for t in model.types} == {bound: pytest.approx(0.8), free: pytest.approx(0.2)}


def test_scarcity_weighs_a_type_by_the_gpus_of_the_nodes_that_could_take_one_pod() -> None:
    """20 servers of 96 cores and one of 128, 8 GPUs each: an 8-GPU pod asking 120 cores fits
    only the big one (168 GPUs, 8 of them serve it); 64 cores fit every server; a 3-GPU pod of 100
    cores fits the big one only; a type nothing can take (9 GPUs) keeps its pod count (factor 1)."""
    run = Run(_fragmentation_only())
    run.add(*(b.node(f"small-{i}", gpus=8, cpu="96") for i in range(20)), b.node("big", gpus=8, cpu="128"))
    measure = FragmentationScore(run.scheduler.state, scarcity_exponent=1)
    wide, narrow = TaskShape(8, 1000, "", 120_000), TaskShape(8, 1000, "", 64_000)
    three, never, cpu_only = TaskShape(3, 1000, "", 100_000), TaskShape(9, 1000, "", 0), TaskShape(0, 0, "", 1000)
    assert measure.scarcity([wide, narrow, three, never, cpu_only]) == {wide: 21.0, narrow: 1.0, three: 21.0}
    run.add(b.node("big-2", gpus=8, cpu="128"))  # a new node is counted at the next refresh
    assert measure.scarcity([wide])[wide] == pytest.approx(176 / 16)


def test_scarcity_counts_a_device_known_only_from_its_holder_once_the_holder_is_seen() -> None:
    """A pod bound with a GPU whose ExtendedResource the cache does not have (a restart listing
    the pod, the object deleted while held: a ghost, `DeviceLedger.hold_unseen`) adds that GPU to
    its node's count: the kept table counts it as one built afresh does. Found in review: the
    table's key did not move, 7 GPUs counted where a fresh one counted 8."""
    first = Run(_fragmentation_only())
    g2 = [b.device("a", i, model="G2") for i in range(4)]
    t4 = [b.device("c", i, model="T4") for i in range(4)]
    classes = (b.resource_class("g2", match_labels={"model": "G2"}), b.resource_class("t4", match_labels={"model": "T4"}))
    first.add(b.node("a", gpus=4), *g2, b.node("c", gpus=4), *t4, *classes,
              b.pod("p", limits={"class.tessera.dev/g2": 1}))
    assert first.node_of("p") == "a"
    bound = first.replay.pods[first.state.pod_by_key("default/p").uid]
    [held] = first.state.placements[bound["metadata"]["uid"]].devices
    run = Run(_fragmentation_only())
    run.add(b.node("a", gpus=4), b.node("c", gpus=4), *classes,
            *(device for device in (*g2, *t4) if device["metadata"]["name"] != held))
    measure = FragmentationScore(run.scheduler.state, scarcity_exponent=1)
    rare = TaskShape(1, 1000, "t4", 1000)
    assert measure.scarcity([rare]) == {rare: 7 / 4}
    run.add(bound)
    assert run.state.ledger.ghosts == {held}
    assert FragmentationScore(run.scheduler.state, scarcity_exponent=1).scarcity([rare]) == {rare: 8 / 4}
    assert measure.scarcity([rare]) == {rare: 8 / 4}


def test_small_pods_keep_off_the_only_node_a_big_cpu_gang_member_fits() -> None:
    """Seen: 2,000 one-GPU pods of 4 cores, 2 eight-GPU pods of 120 cores. By pod count alone the
    big type is 0.1 % of the mix, and a one-GPU pod on the one server it fits costs it next to
    nothing (a score point at most); weighed by how few GPUs can serve it (21×), the same
    placement scores 4 points lower than on a 96-core server (40 at the default weight, more than
    LeastAllocated's difference between the two) (multigpu20 trace variant: LeastAllocated
    sent small pods to the 128-core servers first, and on seeds where the big pods came late they
    all failed)."""
    run = Run(_fragmentation_only())
    run.add(*(b.node(f"small-{i}", gpus=8, cpu="96") for i in range(20)), b.node("big", gpus=8, cpu="128"))
    state = run.scheduler.state
    scores = {}
    for exponent in (0, 1):
        measure = FragmentationScore(state, prior_pods=0, scarcity_exponent=exponent)
        for _ in range(2):
            measure.workload.observe(TaskShape(8, 1000, "", 120_000))
        for _ in range(2000):
            measure.workload.observe(TaskShape(1, 1000, "", 4000))
        ctx = prepare(parse_pod(b.pod("one", requests={"cpu": "4", "nvidia.com/gpu": 1})), state.classes)
        scores[exponent] = {name: measure.score(ctx, state.nodes[name]) for name in ("small-0", "big")}
    assert scores[0]["small-0"] - scores[0]["big"] <= 1
    assert scores[1]["small-0"] - scores[1]["big"] >= 3  # x10 in the default profile


@pytest.mark.parametrize("exponent, expected", [(1, "g2"), (0, "t4")])
def test_an_any_gpu_pod_leaves_the_scarce_model_to_the_pods_bound_to_it(exponent: float, expected: str) -> None:
    cfg = parse_config({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "tessera",
                      "plugins": {"score": {"enabled": [{"name": "TesseraFragmentation", "weight": 10}]}},
                      "pluginConfig": [{"name": "TesseraFragmentation", "args": {"scarcityExponent": exponent}}]}],
    }, "test")
    run = Run(cfg)
    # one T4 node among many G2 GPUs; the T4 node has more CPU free, so CPU spreading
    # (LeastAllocated, the tie-breaker) alone sends the pod there
    run.add(b.node("g2", gpus=8, cpu="32"), *(b.device("g2", i, model="G2") for i in range(8)))
    for extra in range(7):
        run.add(b.node(f"g2-full-{extra}", gpus=8, cpu="32"),
                *(b.device(f"g2-full-{extra}", i, model="G2") for i in range(8)))
    run.add(b.node("t4", gpus=8, cpu="96"), *(b.device("t4", i, model="T4") for i in range(8)))
    run.add(b.resource_class("t4", match_labels={"model": "T4"}))
    for extra in range(7):  # the other G2 nodes are taken by another scheduler's pods
        run.add(b.pod(f"fill-{extra}", scheduler="someone-else", node_name=f"g2-full-{extra}",
                      limits={"nvidia.com/gpu": 8, "cpu": "30"}))
    _others(run, {"class.tessera.dev/t4": 1, "cpu": "4"}, 2)  # a few pods need T4s
    _others(run, {"nvidia.com/gpu": 1, "cpu": "4"}, 6)  # most can use any GPU
    run.add(b.pod("any", limits={"nvidia.com/gpu": 1, "cpu": "4"}))
    assert run.node_of("any") == expected


def test_a_remembered_fragmentation_follows_the_workload_as_it_changes() -> None:
    """The measure is memoised per (free CPU, GPUs); a new task mix must not be answered from
    the old mix's values."""
    one, two = TaskShape(1, 1000, "", 0), TaskShape(2, 1000, "", 0)
    gpus = ((1000, (), ()), (1000, (), ()), (1000, (), ()))  # three free GPUs
    measure = _measure(one)
    assert measure.fragmentation(8000, gpus) == 0  # 1-GPU pods use all three
    measure.workload.observe(two)  # half the pods now want two GPUs: one of the three is stranded for them
    assert measure.fragmentation(8000, gpus) == pytest.approx(0.5 * 1000)
    assert measure.fragmentation(8000, gpus) == _measure(one, two).fragmentation(8000, gpus)


def test_a_slice_is_measured_on_each_gpu_by_its_own_capacity() -> None:
    """A 40-unit slice of a class over GPUs of 80 and 40 units: half of the one, all of the other."""
    gpu80, gpu40 = ("mem",), ("mem",)
    big, small = (("memory", 80),), (("memory", 40),)
    one = TaskShape(1, 1000, "mem", 1000, "memory", 40)
    assert _measure(one).fragmentation(0, ((1000, gpu80, big), (1000, gpu40, small))) == 2000  # no CPU, no pod
    assert _measure(one).fragmentation(8000, ((1000, gpu80, big), (1000, gpu40, small))) == 0  # 2 + 1 pods
    assert _measure(one).fragmentation(8000, ((500, gpu80, big), (500, gpu40, small))) == 500  # 1 + 0 pods
    # CPU for one pod: the one using the most GPU (all of the 40-unit GPU) counts
    assert _measure(one).fragmentation(1000, ((1000, gpu80, big), (1000, gpu40, small))) == 1000
    assert _measure(TaskShape(1, 1000, "mem", 1000, "memory", 60)).fragmentation(
        8000, ((1000, gpu40, small),)) == 1000  # a slice larger than the GPU never fits it
    # a pod of two such slices takes its GPUs from the largest shares down: the 40-unit GPU's
    # whole (1000) and half of the 80-unit one (500); the other half is left
    two = TaskShape(2, 1000, "mem", 1000, "memory", 40)
    assert _measure(two).fragmentation(8000, ((1000, gpu80, big), (1000, gpu40, small))) == 500


def test_what_a_shared_gpu_has_left_is_counted_with_what_its_slices_use_rounded_down() -> None:
    """Two GPUs of 3 units with a 2-unit slice on each (the second does not fit beside the
    first) have 1/3 left each: the slices use 666 milli-GPU (rounded down, as a slice's share
    is), so 334 is left — never 333: rounding what is left down lost a remainder per partly used GPU,
    and slices spread over two GPUs measured less free than the same slices on one
    (tests/replay/test_slice_join_fine_units.py). Fails with int() or round() of what is left."""
    run = Run(_fragmentation_only())
    run.add(b.node("n", gpus=2))
    for index in range(2):
        device = b.device("n", index)
        device["spec"]["capacity"]["gpu-milli"] = "3"
        run.add(device)
    run.add(b.resource_class("share", match_labels={"model": "V100"}, sharing={"dimension": "gpu-milli", "unit": "1"}))
    run.add(b.pod("one", limits={SHARE: 2}))
    run.add(b.pod("two", limits={SHARE: 2}))
    assert run.node_of("one") == run.node_of("two") == "n"
    plugin = run.scheduler.profiles["tessera"].find(TesseraFragmentation)
    assert plugin is not None
    assert sorted(free for free, _, _ in plugin.measure.gpus(run.state.nodes["n"]).state) == [334, 334]
