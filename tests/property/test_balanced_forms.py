"""NodeResourcesBalancedAllocation's batch form (`score_rows`) scores every node as its per-node
form (`score`) does, and both as upstream's arithmetic on the per-node vectors: random nodes
(some without GPUs, some without memory: a zero allocatable is left out), pods already there
(some overcommitting a node: fractions above 1 count as 1), and a pending pod asking any mix of
cpu, memory, GPUs by count and GPUs by class (a class-only pod is scored, its devices counting
as their resource name's: GPUs of two names, a node's class devices of one or both), scored by
a profile with this plugin alone on cpu, memory and both GPU names. The vectors are
NodeResourcesFit's too (`ResourceAllocation`, `AllocationRows`): the batch form's skipping of a
GPU name the pod's devices do not use on a row was read by no test before this one."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from scheduler.core.framework import prepare
from scheduler.core.plugins.fit.balanced import NAME, NodeResourcesBalancedAllocation, balanced_resource_scorer
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b
from tests.property.test_invariants import _settings
from tests.unit.test_balanced_allocation import config

GPU = "nvidia.com/gpu"
OTHER = "example.com/gpu"
V100 = "class.tessera.dev/v100"
RESOURCES = (("cpu", 1), ("memory", 1), (GPU, 1), (OTHER, 1))


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    objects: list[dict[str, Any]] = [b.resource_class("v100", {"model": "V100"})]
    names = [f"n{i}" for i in range(draw(st.integers(1, 4)))]
    for name in names:
        gpus = draw(st.integers(0, 3))
        memory = draw(st.sampled_from(["0", "4Gi", "10Gi", "16Gi"]))
        kinds = [draw(st.sampled_from([GPU, OTHER])) for _ in range(gpus)]  # the class matches GPUs of either name
        others = kinds.count(OTHER)
        objects.append(b.node(name, cpu=str(draw(st.integers(1, 8))), memory=memory, gpus=gpus - others,
                              extra={OTHER: str(others)} if others else None))
        objects += [b.device(name, i, resource_name=kind) for i, kind in enumerate(kinds)]

    def limits(allow_zero: bool) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if draw(st.booleans()):
            out["cpu"] = f"{draw(st.integers(0 if allow_zero else 1, 6000))}m"
        if draw(st.booleans()):
            out["memory"] = f"{draw(st.integers(0, 12))}Gi"
        gpu = draw(st.sampled_from(["", GPU, V100]))
        if gpu:
            out[gpu] = draw(st.integers(1, 2))
        return out

    for i in range(draw(st.integers(0, 5))):  # bound by another scheduler: may overcommit a node
        asked = limits(False)
        objects.append(b.pod(f"r{i}", scheduler="other", node_name=draw(st.sampled_from(names)), phase="Running",
                             requests={k: v for k, v in asked.items() if k in ("cpu", "memory")},
                             limits=asked or None))
    asked = limits(True)
    pod = b.pod("p", requests={k: v for k, v in asked.items() if k in ("cpu", "memory")} or None, limits=asked or None)
    return objects, pod


def _scores(objects: list[dict[str, Any]], pod: dict[str, Any], batch: bool) -> dict[str, int] | None:
    scheduler = Scheduler(config(RESOURCES), explain=True, batch=batch)
    for obj in (*objects, pod):
        scheduler.apply("ADDED", obj, now=0.0)
    [attempt] = scheduler.schedule_next(0.0) or (None,)
    if attempt is None or attempt.scores is None:
        return None
    return {node: scores[NAME] for node, scores in attempt.scores.items()}


@_settings(200)
@given(clusters())
def test_the_batch_form_scores_as_the_per_node_form(cluster: tuple[list[dict[str, Any]], dict[str, Any]]) -> None:
    objects, pod = cluster
    batch, per_node = _scores(objects, pod, True), _scores(objects, pod, False)
    assert batch == per_node


@_settings(200)
@given(clusters())
def test_the_per_node_form_is_upstreams_arithmetic_on_its_vectors(cluster: tuple[list[dict[str, Any]], dict[str, Any]]) -> None:
    """Apart from the vectors (`ResourceAllocation.vectors`, NodeResourcesFit's too): the score is
    0 for a pod asking none of the resources (PreScore's Skip; a class-only pod asks GPUs) and
    otherwise upstream's formula."""
    objects, pending = cluster
    scheduler = Scheduler(config(RESOURCES), explain=True)
    for obj in (*objects, pending):
        scheduler.apply("ADDED", obj, now=0.0)
    plugin = scheduler.profiles["tessera"].plugins[NAME]
    assert isinstance(plugin, NodeResourcesBalancedAllocation)
    state = scheduler.state
    ctx = prepare(state.pods[pending["metadata"]["uid"]], state.classes)
    # a class's request counts once the class is served (its devices are the pod's GPUs)
    asks = bool(ctx.device_requests) or any(key in ("cpu", "memory", GPU) and float(str(value).rstrip("mGi") or 0) > 0
                                            for key, value in (pending["spec"]["containers"][0]["resources"].get("limits") or {}).items())
    for info in state.nodes.values():
        if info.node is None:
            continue
        if not asks:
            assert plugin.score(ctx, info) == 0
            continue
        requested, before, allocatable = plugin.per_node.vectors(ctx, info)
        assert plugin.score(ctx, info) == balanced_resource_scorer(requested, before, allocatable)
