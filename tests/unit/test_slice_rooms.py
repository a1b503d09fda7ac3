"""`slice_rooms`: the room each GPU a sharing class matches on a node has for a new slice, and why
the others take none — the planner's rule (`slice_room`), which `kubectl tessera explain` says
(tests/unit/test_explain_slice_room.py). A nominated preemptor's hold keeps its slice's room as a
pod's slice does, and a GPU held whole takes no slice; on random small nodes the planner grants a
one-GPU slice exactly when the largest room, in whole units, holds it."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest

from scheduler.core import annotations as ann
from scheduler.core.framework.cycle_state import prepare
from scheduler.core.objects import CORDONED_DEVICE, DUPLICATE_DEVICE, UNHEALTHY_DEVICE, parse_device, parse_pod
from scheduler.core.plugins.devices.planner import HELD_WHOLE, DevicePlanner, count_short, slice_rooms
from scheduler.core.scheduler import Scheduler
from scheduler.kubectl import explain as explaining
from scheduler.sim import builders as b
from tests.helpers import BINPACK, config

SHARED = "class.tessera.dev/v100-shared"
WHOLE = "class.tessera.dev/v100"
GI = 1 << 30


def _classes() -> list[dict[str, Any]]:
    return [b.resource_class("v100", match_labels={"model": "V100"}),
            b.resource_class("v100-shared", match_labels={"model": "V100"},
                             sharing={"dimension": "memory", "unit": "1Gi"})]


def _holder(name: str, device: dict[str, Any], amount: int | None) -> dict[str, Any]:
    """A running pod on the device's node holding it whole (`amount` None) or `amount` GiB of it."""
    spec = device["spec"]
    resource = WHOLE if amount is None else SHARED
    grant = ann.DeviceGrant(spec["deviceID"], device["metadata"]["name"], None if amount is None else amount * GI,
                            "" if amount is None else "memory", spec["resourceName"])
    encoded = ann.encode_devices({"main": {resource: (grant,)}})
    return b.pod(name, limits={resource: 1 if amount is None else amount}, node_name=spec["nodeName"],
                 phase="Running", annotations={ann.DEVICES: encoded, ann.HELD_DEVICES: encoded})


def _core(objects: list[dict[str, Any]]) -> Scheduler:
    core = Scheduler(config(BINPACK), seed=0)
    for obj in objects:
        core.apply("ADDED", obj, 0.0)
    return core


def _rooms(core: Scheduler, node: str = "n") -> dict[str, Any]:
    cls = core.state.classes.resource_class(SHARED)
    assert cls is not None
    return slice_rooms(core.state, core.state.nodes[node], cls)


def test_a_holds_slice_keeps_its_room_and_a_gpu_held_whole_takes_none() -> None:
    """Node n (4 CPU): GPU 0 has 4Gi held by a running pod, GPU 1 is held whole, GPU 2 cordoned,
    GPU 3 unhealthy, GPU 4 free. `low` (priority 0) has the 4 CPU; `mid` (priority 500, 2 CPU and
    a 10Gi slice) preempts it and is nominated: its hold keeps 10Gi on a GPU while `low` goes."""
    devices = [b.device("n", i, memory="16Gi", unschedulable=i == 2, healthy=i != 3) for i in range(5)]
    low = b.pod("low", requests={"cpu": "4"}, node_name="n", phase="Running", priority=0)
    core = _core([*_classes(), b.node("n", cpu="4", gpus=5), *devices, _holder("a", devices[0], 4),
                  _holder("w", devices[1], None), low,
                  b.pod("mid", requests={"cpu": "2"}, limits={SHARED: 10}, priority=500)])
    attempts = core.schedule_next(0.0)
    assert attempts and attempts[0].nominated_node == "n"
    [held] = core.state.holds[b.uid_for("Pod", "default", "mid")].placement.devices
    names = [device["metadata"]["name"] for device in devices]
    expected: dict[str, Any] = {names[0]: 12 * GI, names[1]: HELD_WHOLE, names[2]: CORDONED_DEVICE,
                                names[3]: UNHEALTHY_DEVICE, names[4]: 16 * GI}
    expected[held] -= 10 * GI  # the hold's slice: on the fullest GPU it fits on
    assert _rooms(core) == expected


def test_a_duplicate_id_a_gpu_without_the_dimension_and_none_matching() -> None:
    devices = [b.device("n", i, memory="16Gi") for i in range(3)]
    devices[1]["spec"]["deviceID"] = devices[0]["spec"]["deviceID"]
    del devices[2]["spec"]["capacity"]["memory"]
    other = b.device("m", 0, model="A100")
    core = _core([*_classes(), b.node("n", gpus=3), b.node("m", gpus=1), *devices, other])
    names = [device["metadata"]["name"] for device in devices]
    assert _rooms(core) == {names[0]: DUPLICATE_DEVICE, names[1]: DUPLICATE_DEVICE, names[2]: "no memory capacity"}
    assert _rooms(core, "m") == {}


def _random_node(rng: random.Random) -> list[dict[str, Any]]:
    """Node n with one to three GPUs of 4, 8 or 16Gi, each free, partly sliced, held whole,
    cordoned or unhealthy, at random."""
    objects: list[dict[str, Any]] = []
    for i in range(rng.randint(1, 3)):
        size = rng.choice((4, 8, 16))
        kind = rng.choice(("free", "sliced", "sliced", "whole", "cordoned", "unhealthy"))
        device = b.device("n", i, memory=f"{size}Gi", unschedulable=kind == "cordoned", healthy=kind != "unhealthy")
        objects.append(device)
        if kind == "sliced":
            objects.append(_holder(f"s{i}", device, rng.randint(1, size)))
        elif kind == "whole":
            objects.append(_holder(f"w{i}", device, None))
    return [*_classes(), b.node("n", gpus=sum(1 for obj in objects if obj["kind"] == "ExtendedResource")), *objects]


@pytest.mark.parametrize("seed", range(40))
def test_the_planner_grants_a_slice_exactly_when_the_largest_room_holds_it(seed: int) -> None:
    """Differential: for every slice size up to the largest GPU, `plan` finds a GPU for a
    one-container slice exactly when the largest room `slice_rooms` gives (in whole units) holds it."""
    core = _core(_random_node(random.Random(seed)))
    state = core.state
    info = state.nodes["n"]
    rooms = [room for room in _rooms(core).values() if not isinstance(room, str)]
    largest = max((max(room, 0) // GI for room in rooms), default=0)
    planner = DevicePlanner(state)
    for units in range(1, 18):
        pod = parse_pod(b.pod(f"p{units}", limits={SHARED: units}))
        plan = planner.plan(prepare(pod, state.classes).device_requests, info)
        assert (not isinstance(plan, str)) == (units <= largest), (seed, units, rooms, plan)


def test_explain_names_a_matching_gpu_without_the_classs_dimension() -> None:
    """A GPU the class matches that publishes no memory capacity takes no slice: explain's node
    line left it out, so a node of two GPUs read as if it had one."""
    devices = [b.device("n", i, memory="16Gi") for i in range(2)]
    del devices[1]["spec"]["capacity"]["memory"]
    result = explaining.explain([*_classes(), b.node("n", gpus=2), *devices, b.pod("big", limits={SHARED: 17})],
                                "default/big", config(BINPACK), [], 0.0)
    assert result is not None and result.dry_run is not None
    assert result.dry_run.nodes[0].detail == (f"Insufficient {SHARED}: largest free slice on one GPU: 16Gi (17Gi "
                                              "asked); matching GPUs that take no slice: 1 no memory capacity")


def test_a_gpu_is_told_the_first_reason_that_applies() -> None:
    """`Device.unschedulable_because` names the first of unhealthy, cordoned, deviceID named
    twice: a GPU both unhealthy and cordoned is explained as unhealthy (what an operator must fix
    before an uncordon helps), and "" leaves it schedulable."""
    gpu = parse_device(b.device("n", 0, healthy=False, unschedulable=True))
    gpu = replace(gpu, duplicate=True)
    assert gpu.unschedulable_because == UNHEALTHY_DEVICE
    assert replace(gpu, healthy=True).unschedulable_because == CORDONED_DEVICE
    assert replace(gpu, healthy=True, unschedulable=False).unschedulable_because == DUPLICATE_DEVICE
    free = replace(gpu, healthy=True, unschedulable=False, duplicate=False)
    assert free.unschedulable_because == "" and free.schedulable


def test_a_slice_goes_on_a_used_gpu_when_the_count_has_no_gpu_left_to_make_busy() -> None:
    """Node n counts 2 GPUs: GPU 0 (16Gi) has a 10Gi slice, GPU 1 (4Gi) is idle, and a plain
    `nvidia.com/gpu: 1` pod takes the count's other GPU. A 2Gi slice fits on GPU 0 beside the
    slice it has, which costs the count nothing; best fit (2Gi left on GPU 1, 4Gi on GPU 0) chose
    GPU 1, one GPU more in use than the count has, and the pod read 'Insufficient' on the only
    node it fits on."""
    devices = [b.device("n", 0, memory="16Gi"), b.device("n", 1, memory="4Gi")]
    plain = b.pod("plain", limits={"nvidia.com/gpu": 1}, node_name="n", phase="Running")
    core = _core([*_classes(), b.node("n", gpus=2), *devices, _holder("a", devices[0], 10), plain,
                  b.pod("z", limits={SHARED: 2})])
    attempts = core.schedule_next(0.0)
    assert attempts is not None
    [attempt] = attempts
    assert attempt.node == "n", attempt.message
    [(device, amount, _, _)] = core.state.placements[attempt.pod.uid].grants
    assert (device, amount) == (devices[0]["metadata"]["name"], 2 * GI)


def test_a_second_slice_of_one_pod_goes_on_the_gpu_its_first_made_busy() -> None:
    """Node n counts 2 GPUs, a plain `nvidia.com/gpu: 1` pod takes one: a pod of two containers
    each asking 2Gi has one GPU left to make busy. Its first slice makes GPU 0 busy; its second
    costs the count nothing more there (the GPU is the pod's own already) and goes beside it."""
    devices = [b.device("n", 0, memory="16Gi"), b.device("n", 1, memory="16Gi")]
    plain = b.pod("plain", limits={"nvidia.com/gpu": 1}, node_name="n", phase="Running")
    pod = b.pod("z", containers=[b.container("a", None, {SHARED: 2}), b.container("b", None, {SHARED: 2})])
    core = _core([*_classes(), b.node("n", gpus=2), *devices, plain, pod])
    attempts = core.schedule_next(0.0)
    assert attempts is not None
    [attempt] = attempts
    assert attempt.node == "n", attempt.message
    assert {device for device, *_ in core.state.placements[attempt.pod.uid].grants} == {devices[0]["metadata"]["name"]}


def test_the_planner_grants_a_slice_exactly_when_a_gpu_with_room_is_one_the_count_allows() -> None:
    """Differential under count pressure: random nodes as above whose `nvidia.com/gpu` count is
    cut to 1..their GPUs and carries up to two plain `nvidia.com/gpu: 1` pods. A one-container slice
    is planned exactly when some GPU has room for it (`slice_rooms`) and either is in use already
    or the count can make it busy (`count_short`); best fit alone took idle GPUs the count could not
    (2 of these 400 nodes: few have GPUs of two sizes under a count with none to spare)."""
    for seed in range(400):
        _check_under_count(seed)


def _check_under_count(seed: int) -> None:
    rng = random.Random(seed)
    objects = _random_node(rng)
    node = next(obj for obj in objects if obj["kind"] == "Node")
    gpus = int(node["status"]["allocatable"]["nvidia.com/gpu"])
    node["status"]["allocatable"]["nvidia.com/gpu"] = str(rng.randint(1, gpus))
    plain = [b.pod(f"plain{i}", limits={"nvidia.com/gpu": 1}, node_name="n", phase="Running")
             for i in range(rng.randint(0, 2))]
    core = _core([*objects, *plain])
    state = core.state
    info = state.nodes["n"]
    counts = state.count_room(info)
    rooms = _rooms(core)
    largest = max((max(room, 0) // GI for room in rooms.values() if not isinstance(room, str)), default=0)
    planner = DevicePlanner(state)
    for units in range(1, 18):
        allowed = any(not isinstance(room, str) and room >= units * GI and not count_short(
            info, state.devices[name].resource_name, 0 if name in state.ledger.use and state.ledger.use[name].busy else 1,
            0, counts.get(state.devices[name].resource_name)) for name, room in rooms.items())
        plan = planner.plan(prepare(parse_pod(b.pod(f"p{units}", limits={SHARED: units})), state.classes).device_requests,
                            info)
        assert (not isinstance(plan, str)) == allowed, (seed, units, plan)
        # explain's story is the planner's: the largest room `slice_rooms` gives holds the slice
        assert allowed == (units <= largest), (seed, units, rooms)


def test_an_idle_gpu_the_nodes_count_cannot_make_busy_takes_no_slice() -> None:
    """Node n counts 2 GPUs: GPU 0 has a 10Gi slice, GPUs 1 and 2 are idle, and a plain
    `nvidia.com/gpu: 1` pod takes the count's other GPU. The planner gives no slice on an idle GPU
    then (`count_short`); `slice_rooms` gave their whole 16Gi, which explain printed beside
    'Insufficient'. Freeing the count (the plain pod gone) gives them their room back."""
    devices = [b.device("n", i, memory="16Gi") for i in range(3)]
    plain = b.pod("plain", limits={"nvidia.com/gpu": 1}, node_name="n", phase="Running")
    objects = [*_classes(), b.node("n", gpus=2), *devices, _holder("a", devices[0], 10)]
    names = [device["metadata"]["name"] for device in devices]
    beyond = "idle beyond the node's nvidia.com/gpu count"
    assert _rooms(_core([*objects, plain])) == {names[0]: 6 * GI, names[1]: beyond, names[2]: beyond}
    assert _rooms(_core(objects)) == {names[0]: 6 * GI, names[1]: 16 * GI, names[2]: 16 * GI}


def test_no_gpu_takes_a_slice_where_the_nodes_pods_use_more_gpus_than_it_counts() -> None:
    """Node n's count cut to 1 under two GPUs with a slice each (an edited allocatable): the
    planner gives no slice even beside theirs (`count_short` with nothing added), and
    `slice_rooms` gave their free room, which explain printed beside 'Insufficient' (seed 9 of the
    differential above)."""
    devices = [b.device("n", i, memory="16Gi") for i in range(2)]
    core = _core([*_classes(), b.node("n", gpus=1), *devices, _holder("a", devices[0], 10),
                  _holder("c", devices[1], 12)])
    reason = "in use on a node whose nvidia.com/gpu count is below its pods' GPUs"
    assert _rooms(core) == {device["metadata"]["name"]: reason for device in devices}
