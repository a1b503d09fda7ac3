"""Device matching (ResourceClass → concrete devices): cases a review found.

Each failed before its fix, for the reason its docstring gives.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from scheduler.api.config import load_config
from scheduler.core import annotations as ann
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b

Line = tuple[str, str | None, dict[str, str], str, dict[str, dict[str, int]] | None]


def _run(objects: list[dict[str, Any]], batch: bool = True, config: str | None = None) -> dict[str, Line]:
    """Apply the objects in order, scheduling after each; the last attempt of each pod."""
    scheduler = Scheduler(load_config(config), seed=7, batch=batch, explain=True)
    last: dict[str, Line] = {}
    for obj in objects:
        scheduler.apply("ADDED", obj, 0.0)
        while (attempts := scheduler.schedule_next(0.0)) is not None:
            for a in attempts:
                last[a.pod.meta.name] = (a.pod.key, a.node, dict(a.annotations), a.message, a.scores)
    return last


def _grants(line: Line) -> dict[str, dict[str, list[dict[str, str]]]]:
    return orjson.loads(line[2][ann.DEVICES])["containers"]  # type: ignore[no-any-return]


# --- 1. batch (columns) and per-node planner disagree on the NVLink "split" halving ------------


def test_nvlink_split_score_is_the_same_in_batch_and_per_node_form() -> None:
    """Two free GPUs in two different NVLink groups but on one NUMA node, and a pod asking for 2.

    The planner (`within_one_group`) reports the request as split (the node describes NVLink
    groups and no group holds 2) and halves the node's device score: 50. The batch form
    (`columns.largest_group`) takes the largest group "of either" attribute — the NUMA node holds
    both — and does not halve: 100. The vectorised and per-node forms must score alike
    (tests/unit/test_vector_equivalence.py); here `Scheduler(batch=True)` and `batch=False`
    give different TesseraDevices scores (and so may pick different nodes)."""
    objects = [b.node("a", gpus=2)]
    for i, group in enumerate(["g0", "g1"]):
        objects.append(b.device("a", i, model="A100", attributes={"nvlinkGroup": group, "numaNode": "0"}))
    objects += [b.resource_class("a100", match_labels={"model": "A100"}),
                b.pod("two", limits={"class.tessera.dev/a100": 2})]
    fast = _run(objects, batch=True)["two"]
    slow = _run(objects, batch=False)["two"]
    assert fast[1] == slow[1] == "a" and fast[4] is not None and slow[4] is not None
    assert fast[4]["a"]["TesseraDevices"] == slow[4]["a"]["TesseraDevices"], (fast[4]["a"], slow[4]["a"])


# --- 2. shared slices of different sharing dimensions are summed together ----------------------


def test_overlapping_classes_in_one_container_find_the_plan_that_exists() -> None:
    """One container asks for `broad: 1` (both GPUs match) and `small: 1` (only the 16Gi GPU
    matches). Assigning broad→32Gi, small→16Gi works. The planner handles requests one by one
    in resource-name order with no backtracking: `broad` comes first and takes the GPU matching
    the fewest other classes — the 16Gi one (2 classes) rather than the 32Gi one (3 classes) —
    and then `small` has nothing: "Insufficient class.tessera.dev/small" on a node that can
    hold the pod. The planner's own contract: "a node is feasible exactly when a plan exists"."""
    objects = [b.node("n", gpus=2),
               b.device("n", 0, model="A100", memory="16Gi"), b.device("n", 1, model="A100", memory="32Gi"),
               b.resource_class("broad", match_labels={"model": "A100"}),
               b.resource_class("small", expressions=[{"key": "memory", "operator": "Lt", "values": ["20Gi"]}]),
               b.resource_class("big1", expressions=[{"key": "memory", "operator": "Gt", "values": ["20Gi"]}]),
               b.resource_class("big2", expressions=[{"key": "memory", "operator": "Gt", "values": ["30Gi"]}]),
               b.pod("p", limits={"class.tessera.dev/broad": 1, "class.tessera.dev/small": 1})]
    line = _run(objects)["p"]
    assert line[1] == "n", line[3]
    grants = _grants(line)["main"]
    assert grants["class.tessera.dev/broad"][0]["device"] != grants["class.tessera.dev/small"][0]["device"]


def test_a_slice_does_not_take_the_only_gpu_a_whole_gpu_request_of_the_pod_can_use() -> None:
    """Container `main` asks for one whole GPU of `small` (only the 16Gi GPU matches), container
    `side` for a 1Gi slice of `aslice` (both GPUs match). Slice on the 32Gi GPU + whole 16Gi GPU
    is a valid plan. The planner handles `aslice` first (name order), packs the slice onto the
    fullest fitting GPU — the 16Gi one — and the whole-GPU request then finds it in shared use:
    the pod is refused on a node that can hold it."""
    objects = [b.node("n", gpus=2),
               b.device("n", 0, model="A100", memory="16Gi"), b.device("n", 1, model="A100", memory="32Gi"),
               b.resource_class("aslice", match_labels={"model": "A100"}, sharing={"dimension": "memory", "unit": "1Gi"}),
               b.resource_class("small", expressions=[{"key": "memory", "operator": "Lt", "values": ["20Gi"]}]),
               b.pod("p", containers=[b.container("main", limits={"class.tessera.dev/small": 1}),
                                      b.container("side", limits={"class.tessera.dev/aslice": 1})])]
    line = _run(objects)["p"]
    assert line[1] == "n", line[3]


# --- 4. an invalid class with its own resourceName stops being a class -------------------------


def test_a_pod_asking_for_an_invalid_class_with_a_custom_resource_name_gets_the_class_problem() -> None:
    """docs/api.md: "A class with an invalid selector ... is not used; pods asking for it get the
    reason in their FailedScheduling message". With the default name (class.tessera.dev/...) that
    holds; with `spec.resourceName: gpu.example.com/v100`, `ClassRegistry.is_class_resource` no
    longer knows the name (invalid classes are left out of `by_resource`), so the request is
    treated as a plain extended resource: "Insufficient gpu.example.com/v100"."""
    objects = [b.node("n", gpus=2), b.device("n", 0, model="V100", memory="32Gi"),
               b.resource_class("v100", resource_name="gpu.example.com/v100",
                                expressions=[{"key": "memory", "operator": "Gt", "values": ["16GiB"]}]),
               b.pod("p", limits={"gpu.example.com/v100": 1})]
    line = _run(objects)["p"]
    assert line[1] is None
    assert "ResourceClass v100 is not valid" in line[3], line[3]


def test_a_pod_asking_for_an_invalid_class_is_never_bound_without_devices() -> None:
    """Same invalid class, on a node Tessera's agent serves (it has ExtendedResources, so its
    allocatable names are the classes' own — DESIGN/README) and that lists
    `gpu.example.com/v100` (the agent registered the class while it was valid). The request is
    taken as a plain count and the pod is bound with no `tessera.dev/devices` annotation: the
    agent's Allocate then finds no assignment for it. It should wait with the class's problem."""
    objects = [b.node("n", gpus=2, extra={"gpu.example.com/v100": "1"}), b.device("n", 0, model="V100", memory="32Gi"),
               b.resource_class("v100", resource_name="gpu.example.com/v100",
                                expressions=[{"key": "memory", "operator": "Gt", "values": ["16GiB"]}]),
               b.pod("p", limits={"gpu.example.com/v100": 1})]
    line = _run(objects)["p"]
    assert line[1] is None, f"bound to {line[1]} with annotations {line[2]}"


# --- 5. init containers: devices are not reused as the kubelet reuses them ---------------------


@pytest.mark.parametrize("version", ["true", "1.0"])
def test_decode_refuses_a_version_that_is_not_the_integer_1(version: str) -> None:
    """The decoder is documented strict ("anything it cannot read exactly is an error"), but
    `doc.get("version") != 1` lets `true` and `1.0` through (Python's True == 1 == 1.0)."""
    raw = '{"version": %s, "containers": {"main": {"class.tessera.dev/a": [{"id": "GPU-1", "device": "n.gpu-1"}]}}}' % version
    with pytest.raises(ann.AnnotationError):
        ann.decode_devices(raw)


def test_an_invalid_class_named_after_the_devices_own_resource_does_not_capture_plain_requests() -> None:
    """The fuzzer's case (test_every_object_is_taken_or_reported): an invalid class whose
    resourceName is the devices' own (`nvidia.com/gpu`) must not turn every plain GPU request in
    the cluster into a request for that broken class."""
    objects = [b.node("n", gpus=2), b.device("n", 0, model="V100", memory="32Gi"),
               b.resource_class("broken", resource_name="nvidia.com/gpu",
                                expressions=[{"key": "memory", "operator": "Gt", "values": ["16GiB"]}]),
               b.pod("p", limits={"nvidia.com/gpu": 1})]
    line = _run(objects)["p"]
    assert line[1] == "n", line[3]


def test_an_invalid_class_named_after_a_resource_other_device_plugins_advertise_does_not_capture_it() -> None:
    """The fuzzer's case (test_event_streams, seed-found): a class whose selector is broken and
    whose resourceName (`nvidia.com/gpu`) nodes not served by Tessera's agent advertise through
    another device plugin. A *valid* such class is refused for its name and leaves the plain
    requests alone (`ClusterState._admitted`); the check skipped classes that were already invalid,
    so the broken class captured every plain `nvidia.com/gpu` request in the cluster."""
    objects = [b.node("plain", gpus=2),
               b.resource_class("broken", resource_name="nvidia.com/gpu",
                                expressions=[{"key": "model", "operator": "In", "values": []}]),
               b.pod("p", limits={"nvidia.com/gpu": 1})]
    line = _run(objects)["p"]
    assert line[1] == "plain", line[3]
