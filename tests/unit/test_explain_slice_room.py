"""A slice that fits on no GPU of a node (a HAMi team's trial): the pod's condition keeps
upstream's aggregated `N Insufficient <resource>` (one reason per node, counted alike), and
explain's node line says what that count does not: the largest free room one GPU of the node
has for the slice, and the matching GPUs that take none (held whole, cordoned, unhealthy)."""

from __future__ import annotations

from typing import Any

from scheduler.core import annotations as ann
from scheduler.kubectl import explain as explaining
from scheduler.sim import builders as b

from tests.helpers import BINPACK, config

SHARED = "class.tessera.dev/v100-shared"
WHOLE = "class.tessera.dev/v100"


def _holder(name: str, device: dict[str, Any], resource: str, amount: int | None) -> dict[str, Any]:
    """A running pod bound to the device's node holding it whole (`amount` None) or `amount` GiB of it."""
    spec = device["spec"]
    grant = ann.DeviceGrant(spec["deviceID"], device["metadata"]["name"], None if amount is None else amount << 30,
                            "" if amount is None else "memory", spec["resourceName"])
    encoded = ann.encode_devices({"main": {resource: (grant,)}})
    return b.pod(name, limits={resource: 1 if amount is None else amount}, node_name=spec["nodeName"],
                 phase="Running", annotations={ann.DEVICES: encoded, ann.HELD_DEVICES: encoded})


def _cluster() -> list[dict[str, Any]]:
    """Node n: five 16Gi V100s; GPU 0 has 3Gi held (13Gi free), GPU 1 14Gi (2Gi free), GPU 2 is
    held whole, GPU 3 cordoned, GPU 4 unhealthy. 14Gi is asked."""
    devices = [b.device("n", i, memory="16Gi", unschedulable=i == 3, healthy=i != 4) for i in range(5)]
    return [b.resource_class("v100", match_labels={"model": "V100"}),
            b.resource_class("v100-shared", match_labels={"model": "V100"},
                             sharing={"dimension": "memory", "unit": "1Gi"}),
            b.node("n", gpus=5), *devices,
            _holder("a", devices[0], SHARED, 3), _holder("b", devices[1], SHARED, 14),
            _holder("w", devices[2], WHOLE, None),
            b.pod("big", limits={SHARED: 14})]


def test_explain_names_the_largest_free_slice_of_a_node_and_the_gpus_that_take_none() -> None:
    result = explaining.explain(_cluster(), "default/big", config(BINPACK), [], 0.0)
    assert result is not None and result.dry_run is not None and result.dry_run.node == ""
    assert result.dry_run.nodes == (explaining.NodeVerdict(
        "n", False, f"Insufficient {SHARED}: largest free slice on one GPU: 13Gi (14Gi asked); "
                    "matching GPUs that take no slice: 1 held whole, 1 cordoned, 1 unhealthy"),)
    # the pod's condition stays upstream's aggregated count
    assert result.dry_run.message.startswith(f"0/1 nodes are available: 1 Insufficient {SHARED}. preemption: ")


def test_explain_says_no_free_room_when_every_matching_gpu_is_full() -> None:
    objs = _cluster()
    objs[-1] = b.pod("big", limits={SHARED: 3})
    objs.insert(-1, _holder("c", objs[3], SHARED, 13))  # GPU 0 full too
    result = explaining.explain(objs, "default/big", config(BINPACK), [], 0.0)
    assert result is not None and result.dry_run is not None
    assert result.dry_run.nodes[0].detail == (
        f"Insufficient {SHARED}: largest free slice on one GPU: 2Gi (3Gi asked); "
        "matching GPUs that take no slice: 1 held whole, 1 cordoned, 1 unhealthy")


def test_explain_names_each_containers_slice_when_several_ask() -> None:
    """Two containers running together each ask 8Gi: their slices add up on a GPU they share,
    so GPU 0's 13Gi does not take both; '13Gi (8Gi asked)' read as if the pod fitted."""
    objs = _cluster()
    objs[-1] = b.pod("big", containers=[b.container("a", None, {SHARED: 8}), b.container("c", None, {SHARED: 8})])
    result = explaining.explain(objs, "default/big", config(BINPACK), [], 0.0)
    assert result is not None and result.dry_run is not None
    assert result.dry_run.nodes[0].detail == (
        f"Insufficient {SHARED}: largest free slice on one GPU: 13Gi (asked: 8Gi by a, 8Gi by c); "
        "matching GPUs that take no slice: 1 held whole, 1 cordoned, 1 unhealthy")


def test_explain_gives_the_largest_slice_in_whole_units_of_the_class() -> None:
    """A GPU of 16160Mi (as device plugins report MiB) takes at most 15 slices of 1Gi: '16160Mi
    (17Gi asked)' gave the room in another unit than the slice, and more than a slice can take."""
    objs = [b.resource_class("v100-shared", match_labels={"model": "V100"},
                             sharing={"dimension": "memory", "unit": "1Gi"}),
            b.node("n", gpus=1), b.device("n", 0, memory="16160Mi"), b.pod("big", limits={SHARED: 17})]
    result = explaining.explain(objs, "default/big", config(BINPACK), [], 0.0)
    assert result is not None and result.dry_run is not None
    assert result.dry_run.nodes[0].detail == f"Insufficient {SHARED}: largest free slice on one GPU: 15Gi (17Gi asked)"


def test_explain_says_when_no_gpu_of_the_node_matches_the_class() -> None:
    """A node whose GPUs the class does not select gave the bare 'Insufficient <resource>', as a full one."""
    objs = _cluster()
    objs[-1:-1] = [b.node("m", gpus=2), *[b.device("m", i, model="A100", memory="16Gi") for i in range(2)]]
    result = explaining.explain(objs, "default/big", config(BINPACK), [], 0.0)
    assert result is not None and result.dry_run is not None
    details = {verdict.node: verdict.detail for verdict in result.dry_run.nodes}
    assert details["m"] == f"Insufficient {SHARED}: no GPU of the node matches class v100-shared"


def test_explain_tells_a_duplicate_device_id_from_a_cordoned_gpu() -> None:
    """Device.schedulable is False for a deviceID two ExtendedResources name too: not cordoned."""
    objs = _cluster()
    twin = b.device("n", 5)
    twin["spec"]["deviceID"] = objs[4]["spec"]["deviceID"]  # GPU 1's deviceID named twice
    objs.insert(-1, twin)
    result = explaining.explain(objs, "default/big", config(BINPACK), [], 0.0)
    assert result is not None and result.dry_run is not None
    assert result.dry_run.nodes[0].detail == (
        f"Insufficient {SHARED}: largest free slice on one GPU: 13Gi (14Gi asked); matching GPUs that take no "
        "slice: 1 held whole, 1 cordoned, 2 deviceID named twice, 1 unhealthy")


def _count_used_up(big: int) -> list[dict[str, Any]]:
    """Node n counts 2 GPUs: GPU 0 (16Gi) has 14Gi held (2Gi free), GPU 1 (16Gi) is idle, and a
    plain `nvidia.com/gpu: 1` pod takes the count's other GPU, so a slice may go on GPU 0 alone
    (the planner's `count_short`). `big` GiB are asked."""
    devices = [b.device("n", i, memory="16Gi") for i in range(2)]
    return [b.resource_class("v100-shared", match_labels={"model": "V100"},
                             sharing={"dimension": "memory", "unit": "1Gi"}),
            b.node("n", gpus=2), *devices, _holder("a", devices[0], SHARED, 14),
            b.pod("plain", limits={"nvidia.com/gpu": 1}, node_name="n", phase="Running"),
            b.pod("big", limits={SHARED: big})]


def test_explain_counts_no_room_of_an_idle_gpu_the_nodes_count_cannot_make_busy() -> None:
    """The count used up, the idle GPU's 16Gi is no room the pod could get: 'largest free slice
    on one GPU: 16Gi (4Gi asked)' beside 'Insufficient' read as a planner fault. The room of the
    GPU in use is named, and the idle one is told apart as beyond the node's count."""
    result = explaining.explain(_count_used_up(4), "default/big", config(BINPACK), [], 0.0)
    assert result is not None and result.dry_run is not None and result.dry_run.node == ""
    assert result.dry_run.nodes[0].detail == (
        f"Insufficient {SHARED}: largest free slice on one GPU: 2Gi (4Gi asked); "
        "matching GPUs that take no slice: 1 idle beyond the node's nvidia.com/gpu count")


def test_explain_names_no_room_when_only_idle_gpus_beyond_the_count_have_it() -> None:
    """GPU 0 held whole instead: no GPU in use takes a slice, so no room is named at all."""
    objs = _count_used_up(4)
    objs[-3] = _holder("a", objs[2], WHOLE, None)
    objs.insert(0, b.resource_class("v100", match_labels={"model": "V100"}))
    result = explaining.explain(objs, "default/big", config(BINPACK), [], 0.0)
    assert result is not None and result.dry_run is not None and result.dry_run.node == ""
    assert result.dry_run.nodes[0].detail == (
        f"Insufficient {SHARED}: matching GPUs that take no slice: 1 held whole, "
        "1 idle beyond the node's nvidia.com/gpu count")


def _unhealthy_node(running: int) -> list[dict[str, Any]]:
    """A node-maintenance trial: t4-node-000 counts 8 GPUs, 6 of them marked Healthy=False;
    `running` plain `nvidia.com/gpu: 1` pods run there."""
    node = "t4-node-000"
    return [b.resource_class("t4", match_labels={"model": "T4"}), b.node(node, gpus=8),
            *[b.device(node, i, model="T4", memory="16Gi", healthy=i >= 6) for i in range(8)],
            *[b.pod(f"r{i}", limits={"nvidia.com/gpu": 1}, node_name=node, phase="Running") for i in range(running)],
            b.pod("plain", limits={"nvidia.com/gpu": 1})]


def test_explain_says_why_a_nodes_gpu_count_is_short_of_a_plain_request() -> None:
    """'t4-node-000  Insufficient nvidia.com/gpu' beside 8 allocatable GPUs did not say that 6
    were unhealthy: the node line names the free GPUs of the count and why the others take no pod
    (`Device.unschedulable_because`, the rule the slice lines use); the condition stays upstream's."""
    result = explaining.explain(_unhealthy_node(2), "default/plain", config(BINPACK), [], 0.0)
    assert result is not None and result.dry_run is not None and result.dry_run.node == ""
    assert result.dry_run.nodes[0].detail == "Insufficient nvidia.com/gpu: 0 free of 8 (1 asked); 6 unhealthy, 2 in use"
    assert result.dry_run.message.startswith("0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: ")


def test_explain_says_why_a_nodes_gpus_are_short_of_a_whole_gpu_class_request() -> None:
    """A whole-GPU class pod on the same node: its line said only 'Insufficient <class>'."""
    objs = _unhealthy_node(2)
    objs[-1] = b.pod("whole", limits={"class.tessera.dev/t4": 1})
    result = explaining.explain(objs, "default/whole", config(BINPACK), [], 0.0)
    assert result is not None and result.dry_run is not None and result.dry_run.node == ""
    assert result.dry_run.nodes[0].detail == (
        "Insufficient class.tessera.dev/t4: 0 free of 8 matching GPUs (1 asked); "
        "matching GPUs that take no pod: 6 unhealthy, 2 idle beyond the node's nvidia.com/gpu count")
