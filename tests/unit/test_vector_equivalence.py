"""The batch (vectorised) forms of the plugins decide exactly like their per-node forms.

The runner uses a plugin's batch form whenever it has one, for decisions and for --explain alike;
`Scheduler(batch=False)` runs the per-node forms only. Both must agree on every placement, every
message, every per-plugin score and every filtered node's reason, on random clusters.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from scheduler.api.config import SchedulerConfig, load_config, parse_config
from scheduler.core.framework.cycle_state import prepare
from scheduler.core.plugins.interpod_affinity import InterPodAffinity, verdict as verdict_of
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b


def _with_ports(pod: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """Now and then a host port (NodePorts): few numbers, hostIPs and protocols, so they collide."""
    if rng.random() < 0.15:
        port: dict[str, Any] = {"containerPort": 80, "hostPort": rng.choice([8080, 8080, 9000])}
        if rng.random() < 0.3:
            port["hostIP"] = rng.choice(["10.0.0.1", "10.0.0.2", "0.0.0.0"])
        if rng.random() < 0.2:
            port["protocol"] = "UDP"
        pod["spec"]["containers"][0]["ports"] = [port]
    return pod


def _workload(seed: int) -> list[tuple[str, dict[str, Any]]]:
    rng = random.Random(seed)
    ports = random.Random(seed + 1000)  # its own stream: the rest of the workload stays as it was
    events: list[tuple[str, dict[str, Any]]] = []
    events.append(("ADDED", b.resource_class("a100", match_labels={"model": "A100"})))
    events.append(("ADDED", b.resource_class("slice", match_labels={"model": "A100"},
                                             sharing={"dimension": "memory", "unit": "1Gi"})))
    for n in range(rng.randint(3, 160)):
        name = f"n{n}"
        taints = []
        if rng.random() < 0.1:
            taints.append({"key": "dedicated", "value": rng.choice(["a", "b"]), "effect": rng.choice(["NoSchedule", "PreferNoSchedule", "NoExecute"])})
        gpus = rng.choice([0, 4, 8])
        events.append(("ADDED", b.node(name, cpu=str(rng.choice([8, 32, 96])), memory=f"{rng.choice([32, 256])}Gi", gpus=gpus,
                                       pods=rng.choice([4, 110]), taints=taints, unschedulable=rng.random() < 0.05)))
        for g in range(gpus if rng.random() < 0.5 else 0):
            events.append(("ADDED", b.device(name, g, model=rng.choice(["A100", "V100"]), memory="40Gi")))
        for k in range(rng.randint(0, 3)):
            events.append(("ADDED", _with_ports(b.pod(
                f"bound-{n}-{k}", node_name=name, phase="Running", scheduler="other",
                requests={"cpu": f"{rng.randint(1, 8)}", "memory": f"{rng.randint(1, 16)}Gi"},
                limits={"nvidia.com/gpu": rng.choice([0, 1])} if gpus else None), ports)))
    for p in range(rng.randint(10, 300)):
        roll = rng.random()
        req = {"cpu": f"{rng.choice([100, 500, 1000, 4000])}m", "memory": f"{rng.choice([1, 4, 16])}Gi"}
        tolerations = [{"key": "dedicated", "operator": "Exists"}] if rng.random() < 0.2 else []
        extra: dict[str, Any] = {"tolerations": tolerations} if tolerations else {}
        if roll < 0.05:
            extra["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 5, "preference": {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1", "n2"]}]}}]}}
        if roll < 0.3:
            limits = None
        elif roll < 0.7:
            limits = {"nvidia.com/gpu": rng.choice([1, 2, 4, 8])}
        elif roll < 0.85:
            limits = {"class.tessera.dev/a100": rng.choice([1, 2])}
        else:
            limits = {"class.tessera.dev/slice": rng.choice([4, 10, 20])}
        events.append(("ADDED", _with_ports(b.pod(f"p{p}", requests=req, limits=limits, spec_extra=extra), ports)))
    return events


FRAGMENTATION = "fragmentation"  # upstream's default plugins plus TesseraFragmentation
GPU_PACKING = "gpu-packing"  # LeastAllocated on cpu/memory plus TesseraGpuPacking
BALANCED = "balanced"  # upstream's defaults plus NodeResourcesBalancedAllocation on cpu, memory and GPUs


# profiles that turn filters off (the batch forms of the others still run), and the same profile
# with every filter on: plugins by name
ALL_FILTERS = "all-filters"
WITHOUT: dict[str, dict[str, Any]] = {
    ALL_FILTERS: {},
    "no-taints": {"filter": {"disabled": [{"name": "TaintToleration"}]}},
    "no-ports-unschedulable": {"multiPoint": {"disabled": [{"name": "NodePorts"}, {"name": "NodeUnschedulable"}]}},
    "no-default-filters": {"filter": {"disabled": [{"name": "*"}]}},
}


def _config(name: str | None) -> SchedulerConfig:
    extra = {FRAGMENTATION: "TesseraFragmentation", GPU_PACKING: "TesseraGpuPacking"}.get(name or "")
    plugins = {"score": {"enabled": [{"name": extra, "weight": 5}]}} if extra else WITHOUT.get(name or "")
    profile: dict[str, Any] = {"schedulerName": "tessera", "plugins": plugins}
    if name == BALANCED:
        profile["plugins"] = {"score": {"enabled": [{"name": "NodeResourcesBalancedAllocation", "weight": 5}]}}
        profile["pluginConfig"] = [{"name": "NodeResourcesBalancedAllocation", "args": {"resources": [
            {"name": "cpu"}, {"name": "memory"}, {"name": "nvidia.com/gpu"}]}}]
    elif plugins is None:
        return load_config(name)
    return parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                         "profiles": [profile]}, str(name))


def _run(events: list[tuple[str, dict[str, Any]]], config: str | None, vectorized: bool,
         explain: bool = False) -> list[tuple[Any, ...]]:
    scheduler = Scheduler(_config(config), seed=7, batch=vectorized, explain=explain)
    out = []
    for kind, obj in events:
        scheduler.apply(kind, obj, 0.0)
        while (attempts := scheduler.schedule_next(0.0)) is not None:
            out += [(a.pod.key, a.node, tuple(sorted(a.annotations.items())), a.message,
                     a.scores, a.filtered) for a in attempts]
    return out


@pytest.mark.parametrize("config", [None, "config/binpack.yaml", "config/spread.yaml", "config/gpu-cluster.yaml",
                                    "config/whole-nodes.yaml",
                                    FRAGMENTATION, GPU_PACKING, BALANCED])
@pytest.mark.parametrize("seed", range(8))
def test_vector_path_equals_per_node_path(config: str | None, seed: int) -> None:
    events = _workload(seed)
    fast = _run(events, config, vectorized=True)
    slow = _run(events, config, vectorized=False)
    assert fast == slow


@pytest.mark.parametrize("config", sorted(set(WITHOUT) - {ALL_FILTERS}))
@pytest.mark.parametrize("seed", range(4))
def test_with_filters_disabled_the_vector_path_equals_the_per_node_path(config: str, seed: int) -> None:
    """Both paths leave the same filters out: same placements, messages and reasons, which differ
    from the same profile's with every filter on (the workloads have taints, cordons and colliding
    ports)."""
    events = _workload(seed)
    fast = _run(events, config, vectorized=True, explain=True)
    assert fast == _run(events, config, vectorized=False, explain=True)
    assert fast != _run(events, ALL_FILTERS, vectorized=True, explain=True)


@pytest.mark.parametrize("config", [None, "config/gpu-cluster.yaml", GPU_PACKING, BALANCED])
@pytest.mark.parametrize("seed", range(3))
def test_explain_shows_the_same_scores_and_reasons_either_way(config: str | None, seed: int) -> None:
    events = _workload(seed)
    batch = _run(events, config, vectorized=True, explain=True)
    assert any(line[4] for line in batch) and any(line[5] for line in batch)  # scores and filtered nodes shown
    assert batch == _run(events, config, vectorized=False, explain=True)


def test_the_workloads_exercise_failures_and_successes() -> None:
    outcomes = [line[1] for seed in range(8) for line in _run(_workload(seed), "config/spread.yaml", True)]
    messages = {line[3] for seed in range(8) for line in _run(_workload(seed), None, True) if line[1] is None}
    assert any(outcomes) and None in outcomes
    assert any("Insufficient" in m for m in messages) and any("untolerated taint" in m for m in messages)
    assert any("didn't have free ports" in m for m in messages)


@pytest.mark.parametrize("vectorized", [True, False])
@pytest.mark.parametrize("seed", range(4))
def test_a_failed_search_names_each_nodes_first_rejecting_filter(vectorized: bool, seed: int) -> None:
    """PostFilter (preemption) reads the failed search's statuses instead of filtering again: for
    every node they must name the plugin the per-node chain stops at."""
    scheduler = Scheduler(_config(None), seed=7, batch=vectorized)
    runtime = scheduler.profiles["tessera"]
    compared = 0
    for kind, obj in _workload(seed):
        scheduler.apply(kind, obj, 0.0)
        while (attempts := scheduler.schedule_next(0.0)) is not None:
            for attempt in attempts:
                if attempt.node is not None or "nodes are available" not in attempt.message:
                    continue
                ctx = prepare(attempt.pod, scheduler.state.classes)
                if runtime.pre_filter(ctx) is not None:
                    continue
                found = runtime.find_feasible(ctx, 0, 1, explain=False)
                assert not found.rows and found.statuses is not None
                names = [info.name for info in found.statuses.nodes]
                assert names == scheduler.state.node_order
                for info, index in zip(found.statuses.nodes, found.statuses.rejector.tolist()):
                    rejected = runtime.filter_node(ctx, info)
                    assert rejected is not None and found.statuses.plugins[index] == rejected[0]
                compared += 1
    assert compared  # the workload has failures to compare


def _grouped_cluster(count: int) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [b.resource_class("gpu", match_labels={"model": "V100"}),
                                  b.node("split", gpus=4), b.node("whole", gpus=6)]
    objs += [b.device("split", i, attributes={"nvlinkGroup": "ab"[i // 2]}) for i in range(4)]  # groups of 2
    objs += [b.device("whole", i, attributes={"nvlinkGroup": "w"}) for i in range(6)]           # one of 6
    return objs + [b.pod("trio", limits={"class.tessera.dev/gpu": count})]


@pytest.mark.parametrize("config_path", [None, "config/gpu-cluster.yaml", "config/binpack.yaml"])
def test_a_request_spanning_two_nvlink_groups_scores_half_on_both_paths(config_path: str | None) -> None:
    """Regression (review): the columns' device score had no split halving, so the batch path put
    a 3-GPU request across two NVLink groups of `split` (75) while the per-node path chose
    `whole` (split 37 < whole 50)."""
    decided = []
    for batch in (True, False):
        core = Scheduler(load_config(config_path), seed=7, batch=batch, explain=True)
        for obj in _grouped_cluster(3):
            core.apply("ADDED", obj, 0.0)
        [attempt] = core.schedule_next(0.0) or []
        assert attempt.scores is not None
        decided.append((attempt.node, attempt.scores["split"]["TesseraDevices"]))
    assert decided[0] == decided[1] and decided[0][1] == 37


def _two_resource_names() -> list[tuple[str, dict[str, Any]]]:
    """Devices under two resourceNames: class `x` matches GPUs published as nvidia.com/gpu on `a`
    and as amd.com/gpu on `b`; class `mi` only amd.com/gpu ones on `c`. Every node runs a pod
    (another scheduler's) with one plain nvidia.com/gpu. `p1` asks for an `x` device and one
    plain nvidia.com/gpu; `p2` for an `mi` device only."""
    events: list[tuple[str, dict[str, Any]]] = [
        ("ADDED", b.resource_class("x", match_labels={"model": "X"})),
        ("ADDED", b.resource_class("mi", match_labels={"model": "MI"}))]
    for n in ("a", "b", "c"):
        events.append(("ADDED", b.node(n, gpus=4, extra={"amd.com/gpu": "2"})))
        events.append(("ADDED", b.pod(f"bound-{n}", node_name=n, phase="Running", scheduler="other",
                                      limits={"nvidia.com/gpu": 1})))
    events += [("ADDED", b.device("a", i, model="X")) for i in range(2)]
    events += [("ADDED", b.device("b", 10 + i, model="X", resource_name="amd.com/gpu")) for i in range(2)]
    events += [("ADDED", b.device("c", 20 + i, model="MI", resource_name="amd.com/gpu")) for i in range(2)]
    events.append(("ADDED", b.pod("p1", limits={"class.tessera.dev/x": 1, "nvidia.com/gpu": 1})))
    events.append(("ADDED", b.pod("p2", limits={"class.tessera.dev/mi": 1})))
    return events


@pytest.mark.parametrize("config", ["config/binpack.yaml", GPU_PACKING])
def test_a_scored_resource_the_pods_devices_do_not_belong_to_scores_alike_either_way(config: str) -> None:
    """Where the pod's devices do not belong to a scored resource on a node (b's `x` GPUs are
    amd.com/gpu) its plain request of that resource still counts there (NodeResourcesFit: p1 on b
    uses 2 of 4 nvidia.com/gpu, 50 with binpack's 0 -> 100 line and no CPU asked of note); and a pod
    asking for nvidia.com/gpu neither plainly nor through its devices' resource is not packed by
    it (TesseraGpuPacking 0 on c, where another pod's GPU is in use). Both paths agree."""
    events = _two_resource_names()
    fast = _run(events, config, vectorized=True, explain=True)
    slow = _run(events, config, vectorized=False, explain=True)
    assert fast == slow
    scores = {pod: attempt_scores for pod, _, _, _, attempt_scores, _ in fast}
    if config == GPU_PACKING:
        assert scores["default/p2"]["c"]["TesseraGpuPacking"] == 0
    else:
        assert scores["default/p1"]["b"]["NodeResourcesFit"] == 50


def _pod_terms_workload(seed: int) -> list[tuple[str, dict[str, Any]]]:
    """Pods with required pod anti-affinity (hostname and zone keys, some nodes without a zone),
    pods without terms that placed pods' anti-affinity repels, pods with required affinity (their
    filter stays per node) and high-priority pods that preempt (nominations judged on their own
    node): InterPodAffinity's batch form against its per-node form."""
    rng = random.Random(seed)
    events: list[tuple[str, dict[str, Any]]] = []
    for n in range(rng.randint(3, 40)):
        labels = {"topology.kubernetes.io/zone": f"z{n % 3}"} if rng.random() < 0.8 else {}
        events.append(("ADDED", b.node(f"n{n}", cpu="8", gpus=rng.choice([2, 4]), labels=labels)))
    for p in range(rng.randint(20, 120)):
        app = rng.choice(["a", "b", "c"])
        term = {"labelSelector": {"matchLabels": {"app": rng.choice(["a", "b", "c"])}},
                "topologyKey": rng.choice(["kubernetes.io/hostname", "topology.kubernetes.io/zone"])}
        roll = rng.random()
        affinity: dict[str, Any] = {}
        if roll < 0.5:
            affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        elif roll < 0.6:
            affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        extra: dict[str, Any] = {"affinity": affinity} if affinity else {}
        events.append(("ADDED", b.pod(f"p{p}", labels={"app": app}, requests={"cpu": f"{rng.choice([1, 2, 4])}"},
                                      limits={"nvidia.com/gpu": 1}, priority=rng.choice([0, 0, 0, 100]),
                                      spec_extra=extra)))
    return events


@pytest.mark.parametrize("seed", range(12))
def test_pod_affinity_batch_form_equals_its_per_node_form(seed: int) -> None:
    events = _pod_terms_workload(seed)
    batch = _run(events, None, vectorized=True, explain=True)
    assert batch == _run(events, None, vectorized=False, explain=True)


def test_the_pod_terms_workloads_reject_by_each_rule() -> None:
    messages = " ".join(line[3] for seed in range(12) for line in _run(_pod_terms_workload(seed), None, True))
    assert "didn't match pod anti-affinity rules" in messages
    assert "didn't satisfy existing pods anti-affinity rules" in messages
    assert "didn't match pod affinity rules" in messages


@pytest.mark.parametrize("seed", range(12))
def test_pod_affinity_batch_verdict_equals_filter_on_every_node(seed: int) -> None:
    """Row by row, nodes a nomination fills included (the runs above mostly see those rejected
    by NodeResourcesFit first): for every pod of the workload, on the cluster it leaves (the
    preemptors' victims never go, so their nominations stay)."""
    scheduler = Scheduler(_config(None), seed=7)
    for kind, obj in _pod_terms_workload(seed):
        scheduler.apply(kind, obj, 0.0)
        while scheduler.schedule_next(0.0) is not None:
            pass
    runtime = scheduler.profiles["tessera"]
    plugin = runtime.plugins["InterPodAffinity"]
    table = runtime.table
    table.sync()
    assert isinstance(plugin, InterPodAffinity)
    nominated = compared = 0
    for pod in list(scheduler.state.pods.values()):
        ctx = prepare(pod, scheduler.state.classes)
        if not plugin.filter_applies(ctx):
            continue
        verdict = plugin.filter_rows(table, ctx, np.ones(table.size, np.bool_))
        masks = verdict.reasons()
        for row in range(table.size):
            info = table.info(row)
            expected = plugin.filter(ctx, info)
            if verdict.exact:
                assert verdict.fails is not None
                assert bool(verdict.fails[row]) == (expected is not None)
                if expected is not None:
                    assert verdict.reasons_of(row, masks) == expected
                nominated += expected != verdict_of(pod, plugin.counts(ctx), info.labels)
                compared += 1
    assert compared
    if seed == 2:
        assert nominated  # nominations that change a node's verdict are judged
