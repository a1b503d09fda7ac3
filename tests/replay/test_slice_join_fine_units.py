"""A second slice joins the partly used GPU also when the class's unit is fine (`unit: 1Mi`).

docs/semantics.md (Fragmentation): for a slice the fragmentation plugin picks the GPU inside the
node that strands least; among GPUs that strand alike the planner's best-fit order (the fullest
that still fits) decides, so a second slice joins the first one's GPU (deploy/examples/
shared-pod.yaml). deploy/examples/gpu-memory-class.yaml's KAI-style class (`unit: 1Mi`, A100
80GB, 4000Mi then 20000Mi) stranded alike either way, but the measure's milli-GPU rounding did
not: each partly used GPU's free milli was rounded down, so two slices on two GPUs lost two
rounding remainders where one GPU with both lost one, and the spread looked 1 milli less
fragmented — the second pod sliced the node's other, empty A100. With `unit: 1Gi` (4Gi, 20Gi:
exact milli-GPU) the same pods shared a GPU.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scheduler.api.config import load_config
from scheduler.core import annotations as ann
from scheduler.core.plugins.fragmentation import TesseraFragmentation
from scheduler.sim import builders as b
from tests.helpers import Run

CLASS = "a100-80g-mib"
RESOURCE = f"class.tessera.dev/{CLASS}"
REPO = Path(__file__).resolve().parents[2]
CONFIGS = [None, str(REPO / "config" / "gpu-cluster.yaml")]  # the built-in profile, the production one


def _cluster(unit: str) -> list[dict[str, Any]]:
    """Two nodes of two A100 80GB as the dev cluster / node agent publish them, a node of V100s,
    and gpu-memory-class.yaml's class (with `unit` for its own)."""
    objects: list[dict[str, Any]] = []
    for node, model, memory in (("a100-0", "NVIDIA-A100-SXM4-80GB", "80Gi"), ("a100-1", "NVIDIA-A100-SXM4-80GB", "80Gi"),
                                ("v100-0", "Tesla-V100-SXM2-32GB", "32Gi")):
        objects.append(b.node(node, cpu="64", memory="256Gi", gpus=2))
        objects += [b.device(node, i, model=model, memory=memory) for i in range(2)]
    objects.append(b.resource_class(CLASS, expressions=[
        {"key": "model", "operator": "In", "values": ["A100", "NVIDIA-A100-SXM4-80GB"]},
        {"key": "memory", "operator": "Gt", "values": ["64Gi"]}], sharing={"dimension": "memory", "unit": unit}))
    return objects


def _device(run: Run, name: str) -> str:
    attempt = run.last(name)
    [grant] = json.loads((attempt.annotations or {})[ann.DEVICES])["containers"]["main"][RESOURCE]
    return str(grant["device"])


def _place(config: str | None, unit: str, amounts: tuple[int, int]) -> Run:
    run = Run(load_config(config))
    run.add(*_cluster(unit))
    for name, amount in zip(("first", "second"), amounts):  # one after the other
        run.add(b.pod(name, limits={RESOURCE: amount, "cpu": "500m", "memory": "1Gi"}))
        assert run.node_of(name) is not None, name
    return run


@pytest.mark.parametrize("config", CONFIGS, ids=["default", "gpu-cluster"])
@pytest.mark.parametrize(("unit", "amounts"), [("1Mi", (4000, 20000)), ("1Gi", (4, 20))], ids=["1Mi", "1Gi"])
def test_a_second_slice_joins_the_first_ones_gpu(config: str | None, unit: str, amounts: tuple[int, int]) -> None:
    run = _place(config, unit, amounts)
    assert run.node_of("second") == run.node_of("first")
    assert _device(run, "second") == _device(run, "first")


@pytest.mark.parametrize("config", CONFIGS, ids=["default", "gpu-cluster"])
def test_slices_keep_joining_until_the_gpu_is_full(config: str | None) -> None:
    """Four 20000Mi slices fill one A100 (80000 of its 81920Mi) before a second one is sliced."""
    run = Run(load_config(config))
    run.add(*_cluster("1Mi"))
    names = [f"s{i}" for i in range(5)]
    for name in names:
        run.add(b.pod(name, limits={RESOURCE: 20000, "cpu": "500m", "memory": "1Gi"}))
    devices = [_device(run, name) for name in names]
    assert len(set(devices[:4])) == 1
    assert devices[4] != devices[0]
    assert run.node_of("s4") == run.node_of("s0")


@pytest.mark.parametrize(("unit", "amounts"), [("1Mi", (4000, 20000)), ("1Gi", (4, 20))], ids=["1Mi", "1Gi"])
def test_binpack_yaml_does_not_pack_slices_whatever_the_unit(unit: str, amounts: tuple[int, int]) -> None:
    """config/binpack.yaml (its comment): RequestedToCapacityRatio on cpu and GPUs sees no GPU
    difference for a slice (on the used GPU it makes none newly busy, on the empty node one of
    two: 50 % either way) and drops a resource scoring 0 from the mean, so the empty node scores
    its GPUs alone (50) and the used one averages in its 1 % CPU (26): the slices go to two
    nodes, with either unit."""
    run = Run(load_config(str(REPO / "config" / "binpack.yaml")), explain=True)
    run.add(*_cluster(unit))
    for name, amount in zip(("first", "second"), amounts):
        run.add(b.pod(name, limits={RESOURCE: amount, "cpu": "500m", "memory": "1Gi"}))
    used, other = run.node_of("first"), run.node_of("second")
    assert used is not None and other is not None and used != other
    scores = run.last("second").scores
    assert scores is not None
    assert (scores[used]["NodeResourcesFit"], scores[other]["NodeResourcesFit"]) == (26, 50)


@pytest.mark.parametrize("config", CONFIGS, ids=["default", "gpu-cluster"])
def test_a_tiny_slice_joins_the_used_gpu_and_leaves_it_less_than_whole(config: str | None) -> None:
    """Review: a slice under a thousandth of the GPU (50Mi of 80Gi) rounded down to 0 milli used,
    so its GPU measured 1000 milli free, exactly as an idle one: a used GPU never reads fully free
    (the tiny slice joins the 20000Mi one's node, as any other second slice, when each node has
    one A100: the idle node measured as free as the used one, less fragmented by a milli)."""
    run = Run(load_config(config))
    for node in ("a", "b"):
        run.add(b.node(node, cpu="64", memory="256Gi", gpus=1), b.device(node, 0, model="NVIDIA-A100-SXM4-80GB", memory="80Gi"))
    run.add(b.resource_class(CLASS, expressions=[{"key": "model", "operator": "In", "values": ["NVIDIA-A100-SXM4-80GB"]}],
                             sharing={"dimension": "memory", "unit": "1Mi"}))
    run.add(b.pod("big", limits={RESOURCE: 20000, "cpu": "500m", "memory": "1Gi"}))
    run.add(b.pod("tiny", limits={RESOURCE: 50, "cpu": "500m", "memory": "1Gi"}))
    assert run.node_of("tiny") == run.node_of("big")
    assert _device(run, "tiny") == _device(run, "big")


def test_a_gpu_with_only_a_tiny_slice_does_not_measure_idle() -> None:
    run = Run(load_config(None))
    run.add(*_cluster("1Mi"))
    run.add(b.pod("tiny", limits={RESOURCE: 50, "cpu": "500m", "memory": "1Gi"}))
    node = run.node_of("tiny")
    assert node is not None
    plugin = run.scheduler.profiles["tessera"].find(TesseraFragmentation)
    assert plugin is not None
    free = sorted(left for left, _, _ in plugin.measure.gpus(run.state.nodes[node]).state)
    assert free == [999, 1000], free  # the sliced GPU, the idle one


def test_slices_fill_one_gpu_beside_a_finer_slice_type_in_the_mix() -> None:
    """A user's trial on dev-cluster (no node agent, no kubelet: pods stay `Allocating`, kwok runs
    them): 1Gi slices of a V100 class arriving one by one spread over several GPUs of their node
    once the cluster had seen 100Mi slices (a `unit: 1Mi` class over the same GPUs). The measure
    counted, per GPU, the milli-GPU under the last whole 100Mi slice as stranded (`free mod
    share`, with the share rounded to 3 milli): a remainder every partly used GPU has, whose size
    only follows the rounding of what is used (1000 mod 3 = 1, 969 mod 3 = 0, 938 mod 3 = 2), so
    an idle GPU sometimes measured less fragmented than the used one and the slice opened it. The
    slice chooser now charges an idle GPU the share the slice takes of it (`choose_slice`)."""
    cfg = load_config(None)
    run = Run(cfg)
    run.replay.agent = False  # dev-cluster: no node agent marks the pods Allocated
    fine, coarse = "class.tessera.dev/gpu-memory", "class.tessera.dev/v100-shared"
    for node in ("v100-0", "v100-1"):
        run.add(b.node(node, cpu="64", memory="256Gi", gpus=8), *(b.device(node, i, memory="32Gi") for i in range(8)))
    run.add(b.resource_class("v100-shared", match_labels={"model": "V100"}, sharing={"dimension": "memory", "unit": "1Gi"}),
            b.resource_class("gpu-memory", match_labels={"model": "V100"}, sharing={"dimension": "memory", "unit": "1Mi"}))
    fine_pod = b.pod("fine", limits={fine: 100})
    fine_pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "v100-1"}
    run.add(fine_pod)
    devices = []
    for i in range(6):  # one by one, each bound and then running (kwok) before the next comes
        pod = b.pod(f"h{i}", limits={coarse: 1})
        pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "v100-0"}
        run.add(pod)
        assert run.node_of(f"h{i}") == "v100-0"
        bound = run.replay.pods[run.state.pod_by_key(f"default/h{i}").uid]
        run.feed(b.event("MODIFIED", {**bound, "status": {**bound.get("status", {}), "phase": "Running"}}))
        [grant] = json.loads((run.last(f"h{i}").annotations or {})[ann.DEVICES])["containers"]["main"][coarse]
        devices.append(grant["device"])
    assert len(set(devices)) == 1, devices


def test_slices_of_one_fine_class_fill_one_gpu() -> None:
    """The same trial's `unit: 1Mi` pods alone: 30 slices of 1000Mi (30 of a V100's 32Gi) went to
    two GPUs — a 1000Mi share rounds to 30 milli, and what each GPU had left under one share was
    rounding again."""
    run = Run(load_config(None))
    run.replay.agent = False
    resource = "class.tessera.dev/gpu-memory"
    run.add(b.node("v100-0", cpu="64", memory="256Gi", gpus=8), *(b.device("v100-0", i, memory="32Gi") for i in range(8)),
            b.resource_class("gpu-memory", match_labels={"model": "V100"}, sharing={"dimension": "memory", "unit": "1Mi"}))
    devices = set()
    for i in range(30):
        run.add(b.pod(f"m{i}", limits={resource: 1000}))
        [grant] = json.loads((run.last(f"m{i}").annotations or {})[ann.DEVICES])["containers"]["main"][resource]
        devices.add(grant["device"])
    assert len(devices) == 1, devices
