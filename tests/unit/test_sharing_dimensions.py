"""Slices of classes that share one GPU by different dimensions are accounted per dimension.

A ResourceClass's `sharing.dimension` names the device capacity its slices use (`memory`,
`cores`, ...). One physical GPU publishing `memory: 16Gi` and `cores: 100` can hold a memory
slice and a cores slice at once, each against its own dimension's capacity (as HAMi accounts GPU
memory and GPU cores apart): 4Gi of memory takes nothing from the cores, and 10 cores nothing
from the memory. A device with any slice is still not free for exclusive use.
"""

from __future__ import annotations

import copy
from fractions import Fraction
from typing import Any

import orjson
import pytest

from scheduler.agent.allocate import container_env, find_allocation
from scheduler.api.config import load_config
from scheduler.api.quantity import Amount, format_alike, format_quantity
from scheduler.core import annotations as ann
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b
from scheduler.sim.replay import Replay, WatchEvent
from scheduler.view.cluster import build_view
from tessera_testing.invariants import ClusterView, check_capacity
from tests.helpers import Line, config, last_attempts

MEMORY = "class.tessera.dev/mem"  # unit 1Gi of memory
CORES = "class.tessera.dev/cores"  # unit 1 core
WHOLE = "class.tessera.dev/whole"
GI = 2**30


def _scheduler() -> Scheduler:
    return Scheduler(load_config(None), seed=7, batch=True, explain=True)


def _gpu(node: str, index: int) -> dict[str, Any]:
    device = b.device(node, index, memory="16Gi")
    device["spec"]["capacity"]["cores"] = "100"
    return device


def _classes() -> list[dict[str, Any]]:
    return [b.resource_class("mem", match_labels={"model": "V100"}, sharing={"dimension": "memory", "unit": "1Gi"}),
            b.resource_class("cores", match_labels={"model": "V100"}, sharing={"dimension": "cores", "unit": "1"}),
            b.resource_class("whole", match_labels={"model": "V100"})]


def _cluster(gpus: int = 1) -> list[dict[str, Any]]:
    return [b.node("n", gpus=gpus), *(_gpu("n", i) for i in range(gpus)), *_classes()]


def _pod(name: str, limits: dict[str, str | int]) -> dict[str, Any]:
    return b.pod(name, limits=limits)


def _bound(name: str, limits: dict[str, str | int], line: Line) -> dict[str, Any]:
    """The pod as the apiserver has it after our Binding (node and annotations)."""
    assert line[0] is not None, line
    pod = _pod(name, limits)
    pod["spec"]["nodeName"] = line[0]
    pod["metadata"]["annotations"] = dict(line[1])
    return pod


def test_cores_slice_fits_beside_a_memory_slice() -> None:
    """The reproduction: after a 4Gi memory slice, 10 cores were refused with "Insufficient
    class.tessera.dev/cores" (the bytes were taken from the cores)."""
    lines = last_attempts(_scheduler(), [*_cluster(), _pod("m", {MEMORY: 4}), _pod("c", {CORES: 10})])
    assert lines["m"][0] == "n", lines["m"]
    assert lines["c"][0] == "n", lines["c"]


def test_each_dimension_fills_to_its_own_capacity_and_no_further() -> None:
    """Both directions: a full 100-core slice leaves all 16Gi of memory (12Gi + 4Gi fit, 1Gi more
    does not), and 16Gi of memory leave all 100 cores (60 + 40 fit, 1 more does not)."""
    lines = last_attempts(_scheduler(), [*_cluster(), _pod("c1", {CORES: 100}), _pod("m1", {MEMORY: 12}),
                                _pod("m2", {MEMORY: 4}), _pod("m3", {MEMORY: 1})])
    assert [lines[p][0] for p in ("c1", "m1", "m2")] == ["n", "n", "n"], lines
    assert lines["m3"][0] is None and f"Insufficient {MEMORY}" in lines["m3"][2], lines["m3"]
    lines = last_attempts(_scheduler(), [*_cluster(), _pod("m1", {MEMORY: 16}), _pod("c1", {CORES: 60}),
                                _pod("c2", {CORES: 40}), _pod("c3", {CORES: 1})])
    assert [lines[p][0] for p in ("m1", "c1", "c2")] == ["n", "n", "n"], lines
    assert lines["c3"][0] is None and f"Insufficient {CORES}" in lines["c3"][2], lines["c3"]


def test_a_device_with_slices_of_any_dimension_is_not_free_for_exclusive_use() -> None:
    lines = last_attempts(_scheduler(), [*_cluster(), _pod("c", {CORES: 1}), _pod("w", {WHOLE: 1})])
    assert lines["c"][0] == "n" and lines["w"][0] is None, lines


def test_one_pod_with_a_memory_and_a_cores_slice_of_one_gpu() -> None:
    """A container asking both classes gets both slices on the one GPU, each of its dimension."""
    lines = last_attempts(_scheduler(), [*_cluster(), _pod("both", {MEMORY: 16, CORES: 100})])
    assert lines["both"][0] == "n", lines["both"]


def test_ledger_rebuilt_from_annotations_accounts_per_dimension() -> None:
    """After a restart the ledger comes from the bound pods' annotations, whatever arrives first
    (pods are listed before the ResourceClasses here): 12Gi of memory and 90 cores held, so 4Gi and
    10 cores still fit, 5Gi or 11 cores do not."""
    first = _scheduler()
    lines = last_attempts(first, [*_cluster(), _pod("m", {MEMORY: 12}), _pod("c", {CORES: 90})])
    bound = [_bound("m", {MEMORY: 12}, lines["m"]), _bound("c", {CORES: 90}, lines["c"])]
    for order in ([b.node("n", gpus=1), _gpu("n", 0), *bound, *_classes()],
                  [*_classes(), *bound, b.node("n", gpus=1), _gpu("n", 0)]):
        restarted = last_attempts(_scheduler(), [*order, _pod("m-fits", {MEMORY: 4}), _pod("m-over", {MEMORY: 5})])
        assert restarted["m-fits"][0] == "n", restarted["m-fits"]
        assert restarted["m-over"][0] is None, restarted["m-over"]
        restarted = last_attempts(_scheduler(), [*order, _pod("c-fits", {CORES: 10}), _pod("c-over", {CORES: 11})])
        assert restarted["c-fits"][0] == "n", restarted["c-fits"]
        assert restarted["c-over"][0] is None, restarted["c-over"]


def test_view_shows_the_use_of_each_dimension() -> None:
    """`kubectl tessera nodes` and the GPU map: a GPU with a memory and a cores slice shows both
    dimensions' use, each of its own capacity, and fills by the fuller one."""
    scheduler = _scheduler()
    last_attempts(scheduler, [*_cluster(), _pod("m", {MEMORY: 4}), _pod("c", {CORES: 75})])
    [node] = build_view(scheduler, source="simulate", now=0.0).nodes
    [gpu] = node.gpus
    assert gpu.used == "cores 75/100, memory 4Gi/16Gi", gpu.used
    assert gpu.fill == 0.75


def test_invariant_checks_each_dimension_against_its_own_capacity() -> None:
    """The harness's capacity check: 12Gi of memory and 100 cores on a 16Gi/100-core GPU are
    within capacity; 12Gi + 5Gi of memory is not, whatever cores are held beside it."""
    scheduler = _scheduler()
    lines = last_attempts(scheduler, [*_cluster(), _pod("m", {MEMORY: 12}), _pod("c", {CORES: 100})])
    device = _gpu("n", 0)
    pods = [_bound("m", {MEMORY: 12}, lines["m"]), _bound("c", {CORES: 100}, lines["c"])]
    classes = {c["metadata"]["name"]: c for c in _classes()}

    def violations(*extra: dict[str, Any]) -> list[str]:
        view = ClusterView(nodes={"n": b.node("n", gpus=1)}, devices={device["metadata"]["name"]: device},
                           classes=classes, pods={p["metadata"]["uid"]: p for p in (*pods, *extra)})
        return [v.detail for v in check_capacity(view)]

    assert violations() == []
    grant = orjson.loads(lines["m"][1][ann.DEVICES])["containers"]["main"][MEMORY][0]
    doc = {"version": 1, "containers": {"main": {MEMORY: [{**grant, "amount": "5Gi"}]}}}
    over = b.pod("over", limits={MEMORY: 5}, node_name="n", annotations={ann.DEVICES: orjson.dumps(doc).decode()})
    [detail] = violations(over)
    assert "shared 17Gi of memory > capacity 16Gi" in detail, detail


def test_agent_tells_each_container_its_slices_of_every_dimension_in_every_answer() -> None:
    """The node agent's TESSERA_SHARED_<DIMENSION>: a container with a 4Gi memory slice, 30 cores
    and 2Gi of a second memory class gets one Allocate call per class, and the kubelet keeps of
    each variable the value of whichever answer it reads first (its map order). Every answer says
    memory 6Gi and cores 30, each dimension summed over the classes that share by it."""
    mem2 = "class.tessera.dev/mem2"
    gpu1 = ann.DeviceGrant("GPU-1", "n.gpu-1", 4 * GI)
    assignment = {"main": {MEMORY: (gpu1,), CORES: (ann.DeviceGrant("GPU-1", "n.gpu-1", 30),),
                           mem2: (ann.DeviceGrant("GPU-2", "n.gpu-2", 2 * GI),)}}
    pod = b.pod("p", namespace="ns", node_name="n",
                annotations={ann.DEVICES: ann.encode_devices(assignment), ann.PHASE: "Allocating"})
    dimensions = {MEMORY: "memory", CORES: "cores", mem2: "memory"}
    for resource, count, unit in ((MEMORY, 4, GI), (CORES, 30, 1), (mem2, 2, GI)):
        allocation = find_allocation([pod], "n", resource, count, unit, set())
        env, _, _ = container_env(allocation, dimensions=dimensions)
        assert (env.get("TESSERA_SHARED_MEMORY"), env.get("TESSERA_SHARED_CORES")) == ("6Gi", "30"), (resource, env)
        assert env["NVIDIA_VISIBLE_DEVICES"].split(",") == list(dict.fromkeys(
            [g.device_id for g in allocation.grants] + ["GPU-1", "GPU-2"])), env


def test_a_binding_held_at_the_allocation_gate_stays_valid_beside_another_dimensions_slice() -> None:
    """The allocation gate's re-check (`_invalid_because`): `a` (10 cores) holds the gate of a node
    a node agent serves, `b` (50 cores) waits behind it; meanwhile a pod another leader bound
    shows up with an 8Gi memory slice of the GPU. When `a` is allocated, `b` is still within the
    100 cores — the 8Gi are memory — so its Binding goes out as planned, not dropped and b
    scheduled again."""
    device = _gpu("n", 0)
    device["status"] = {"conditions": [{"type": "Healthy", "status": "True"}], "lastHeartbeatTime": "2026-01-01T00:00:00Z"}
    replay = Replay(config(), agent=False)
    list(replay.run(WatchEvent("ADDED", obj) for obj in [b.node("n", gpus=1), device, *_classes(),
                                                         _pod("a", {CORES: 10}), _pod("b", {CORES: 50})]))
    uids = {raw["metadata"]["name"]: uid for uid, raw in replay.pods.items()}
    assert replay.pods[uids["a"]]["spec"].get("nodeName") == "n"
    assert not replay.pods[uids["b"]]["spec"].get("nodeName"), "b should wait at the gate"
    grant = {"id": device["spec"]["deviceID"], "device": device["metadata"]["name"], "amount": "8Gi"}
    other = b.pod("other", limits={MEMORY: 8}, node_name="n", phase="Running",
                  annotations={ann.DEVICES: orjson.dumps({"version": 1, "containers": {"main": {MEMORY: [grant]}}}).decode(),
                               ann.PHASE: ann.PHASE_ALLOCATED})
    allocated = copy.deepcopy(replay.pods[uids["a"]])
    allocated["metadata"]["annotations"][ann.PHASE] = ann.PHASE_ALLOCATED
    retried = [a.pod.key for a in replay.run([WatchEvent("ADDED", other), WatchEvent("MODIFIED", allocated)])]
    assert replay.pods[uids["b"]]["spec"].get("nodeName") == "n", replay.stats.final["default/b"].message
    assert retried == [], "the held Binding was dropped and b scheduled again"


def test_agent_tells_a_slice_in_the_dimension_its_grant_names() -> None:
    """A slice granted as memory stays memory in the container's TESSERA_SHARED_* after its class
    is edited to share by cores (the scheduler charged it as memory); a grant that names no
    dimension (written before grants named one) takes its class's."""
    legacy = "class.tessera.dev/legacy"
    assignment = {"main": {MEMORY: (ann.DeviceGrant("GPU-1", "n.gpu-1", 4 * GI, "memory"),),
                           legacy: (ann.DeviceGrant("GPU-1", "n.gpu-1", 20),)}}
    pod = b.pod("p", namespace="ns", node_name="n",
                annotations={ann.DEVICES: ann.encode_devices(assignment), ann.PHASE: "Allocating"})
    allocation = find_allocation([pod], "n", MEMORY, 4, GI, set())
    env, _, _ = container_env(allocation, dimensions={MEMORY: "cores", legacy: "cores"})
    assert (env.get("TESSERA_SHARED_MEMORY"), env.get("TESSERA_SHARED_CORES")) == ("4Gi", "20"), env


def test_a_slice_names_its_dimension_in_the_annotation() -> None:
    """The Binding's grant of a slice says which capacity it is of; a whole device's says none;
    a dimension beside no amount, or not a non-empty string, is refused (the decoder is strict)."""
    lines = last_attempts(_scheduler(), [*_cluster(), _pod("m", {MEMORY: 2}), _pod("c", {CORES: 10})])
    for name, resource, dimension in (("m", MEMORY, "memory"), ("c", CORES, "cores")):
        [grant] = ann.decode_devices(lines[name][1][ann.DEVICES])["main"][resource]
        assert grant.dimension == dimension
    for entry in ({"id": "a", "device": "d", "dimension": "memory"},
                  {"id": "a", "device": "d", "amount": "1Gi", "dimension": ""},
                  {"id": "a", "device": "d", "amount": "1Gi", "dimension": 3}):
        with pytest.raises(ann.AnnotationError, match="dimension"):
            ann.decode_devices(orjson.dumps({"version": 1, "containers": {"main": {MEMORY: [entry]}}}).decode())


def test_invariant_checks_a_slice_in_the_dimension_its_grant_names() -> None:
    """The harness's capacity check reads a slice's dimension from its grant: 12Gi of memory held
    under a class since edited to share by cores, and 5Gi more of memory beside it, are 17Gi of
    a 16Gi GPU's memory (read by the class as it is now, they were 12Gi of cores and 5Gi)."""
    scheduler = _scheduler()
    lines = last_attempts(scheduler, [*_cluster(), _pod("m", {MEMORY: 12})])
    device = _gpu("n", 0)
    held = _bound("m", {MEMORY: 12}, lines["m"])
    classes = {c["metadata"]["name"]: copy.deepcopy(c) for c in _classes()}
    classes["mem"]["spec"]["sharing"] = {"dimension": "cores", "unit": "1"}
    grant = orjson.loads(lines["m"][1][ann.DEVICES])["containers"]["main"][MEMORY][0]
    beside = "class.tessera.dev/beside"
    doc = {"version": 1, "containers": {"main": {beside: [{**grant, "amount": "5Gi", "dimension": "memory"}]}}}
    over = b.pod("over", limits={beside: 5}, node_name="n", annotations={ann.DEVICES: orjson.dumps(doc).decode()})
    view = ClusterView(nodes={"n": b.node("n", gpus=1)}, devices={device["metadata"]["name"]: device},
                       classes=classes, pods={p["metadata"]["uid"]: p for p in (held, over)})
    [violation] = check_capacity(view)
    assert "shared 17Gi of memory > capacity 16Gi" in violation.detail, violation.detail


def test_a_binding_held_at_the_allocation_gate_is_planned_again_when_its_class_changes_dimension() -> None:
    """`b` waits at the gate behind `a` with a slice of `flex` (unit 1, by memory); `flex` is then
    edited to share by cores (unit 1 still, so the amount alone looks right). When the gate opens,
    b's held grant names memory, which its class no longer gives: b is planned again, by cores."""
    flex = "class.tessera.dev/flex"
    device = _gpu("n", 0)
    device["status"] = {"conditions": [{"type": "Healthy", "status": "True"}], "lastHeartbeatTime": "2026-01-01T00:00:00Z"}

    def flex_class(dimension: str) -> dict[str, Any]:
        return b.resource_class("flex", match_labels={"model": "V100"}, sharing={"dimension": dimension, "unit": "1"})

    replay = Replay(config(), agent=False)
    list(replay.run(WatchEvent("ADDED", obj) for obj in [b.node("n", gpus=1), device, flex_class("memory"),
                                                         _pod("a", {flex: 10}), _pod("b", {flex: 10})]))
    uids = {raw["metadata"]["name"]: uid for uid, raw in replay.pods.items()}
    assert not replay.pods[uids["b"]]["spec"].get("nodeName"), "b should wait at the gate"
    allocated = copy.deepcopy(replay.pods[uids["a"]])
    allocated["metadata"]["annotations"][ann.PHASE] = ann.PHASE_ALLOCATED
    list(replay.run([WatchEvent("MODIFIED", flex_class("cores")), WatchEvent("MODIFIED", allocated)]))
    bound = replay.pods[uids["b"]]
    assert bound["spec"].get("nodeName") == "n", replay.stats.final["default/b"].message
    [grant] = ann.decode_devices(bound["metadata"]["annotations"][ann.DEVICES])["main"][flex]
    assert (grant.amount, grant.dimension) == (10, "cores")


def test_use_shows_used_and_capacity_in_one_unit() -> None:
    """A user's `nodes` read `19360Mi/32Gi` where a 1Gi and a 1Mi class shared a GPU: used and
    capacity in one unit, the largest both are whole multiples of (exact, as the API's quantities;
    `-o json` carries the same string)."""
    scheduler = _scheduler()
    mebi = b.resource_class("mem-mi", match_labels={"model": "V100"}, sharing={"dimension": "memory", "unit": "1Mi"})
    device = b.device("n", 0, memory="32Gi")
    last_attempts(scheduler, [b.node("n", gpus=1), device, _classes()[0], mebi,
                              _pod("g", {MEMORY: 18}), _pod("m", {"class.tessera.dev/mem-mi": 928})])
    [node] = build_view(scheduler, source="simulate", now=0.0).nodes
    [gpu] = node.gpus
    assert gpu.used == "19360Mi/32768Mi", gpu.used
    assert [holder.amount for holder in gpu.holders] == ["18Gi", "928Mi"]  # each pod's own, as it asked


@pytest.mark.parametrize(("amounts", "written"), [
    ((19360 * 2**20, 32 * GI), ("19360Mi", "32768Mi")),
    ((4 * GI, 16 * GI), ("4Gi", "16Gi")),
    ((10, 100), ("10", "100")),  # cores: no suffix
    ((0, 16 * GI), ("0", "16Gi")),  # a zero takes no unit and sets none
    ((15 * GI, 14 * GI), ("15Gi", "14Gi")),  # above capacity (cut under slices held)
    ((Fraction(1, 2), 2 * GI), ("500m", "2Gi")),  # not whole: written alone, exact
])
def test_format_alike_writes_one_unit(amounts: tuple[Amount, ...], written: tuple[str, ...]) -> None:
    assert format_alike(*amounts) == written
    assert all(format_alike(amount) == (format_quantity(amount),) for amount in amounts)
