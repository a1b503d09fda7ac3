"""Property: after a ResourceClass change the node table refreshes only what the change can move
(the stale column group alone, and in the class columns only the classes whose columns may
differ), and after nodes leave it takes their rows out of every group (the rows after them move
up, keeping their values), yet every column group ends exactly as in a node table built from
scratch.

Random sequences of class creates, edits and deletes (resourceName clashes, a name devices carry
as their own, sharing classes of either dimension, invalid selectors), device adds, edits and
deletes (health, cordon, resourceName, attributes), pods of another install holding devices
(whole, or slices whose grant names their dimension or not: the latter counted in the dimension
their resource name's class shares by now), nodes of differing taints, cordon, zone and
allocatable added, edited and removed (several between two syncs, a removed name coming back as a
new node at the end of the order), with `NodeTable.sync` after random steps. After every sync,
each group's arrays (every class column, `broken`, totals, `largest_group`, `resources` with its
row counts; the resource, taint, cordon and victim-floor columns, and each row's zone domain, too)
equal those of a NodeTable built fresh from the same state.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.api.config import load_config
from scheduler.core import annotations as ann
from scheduler.core.engine import Engine
from scheduler.core.framework.nodetable import ColumnGroup, NodeTable
from scheduler.core.framework.resources import ResourceColumns
from scheduler.core.framework.timing import NO_STOPWATCH
from scheduler.core.intake import Intake
from scheduler.core.plugins.devices.columns import ClassColumns
from scheduler.core.plugins.node_unschedulable import CordonColumn
from scheduler.core.plugins.preemption.floor import VictimFloor
from scheduler.core.plugins.taints import TaintColumns
from scheduler.core.framework.label_columns import TopologyColumns
from scheduler.sim import builders as b

NODES = ("n0", "n1", "n2", "n3", "n4")
CLASSES = ("a", "b", "c", "d")
STAMPS = ("2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z")
RESOURCE_NAMES = (None, None, "x.dev/gpu", "x.dev/gpu", "nvidia.com/gpu", "bad name")
SELECTORS: tuple[tuple[dict[str, str] | None, list[dict[str, Any]] | None], ...] = (
    (None, None),
    ({"model": "V100"}, None),
    ({"model": "A100"}, None),
    (None, [{"key": "nvlinkGroup", "operator": "Exists"}]),
    (None, [{"key": "memory", "operator": "Gt", "values": ["20Gi"]}]),
    (None, [{"key": "memory", "operator": "Lt", "values": ["20GB"]}]),  # invalid: not a quantity
    (None, [{"key": "modle", "operator": "In", "values": ["V100"]}]),  # a key no device has
)
SHARINGS = (None, None, {"dimension": "memory", "unit": "8Gi"}, {"dimension": "memory", "unit": "4Gi"},
            {"dimension": "cores", "unit": "10"})
GROUPS: tuple[type[ColumnGroup], ...] = (ClassColumns, ResourceColumns, TaintColumns, CordonColumn, VictimFloor)
ZONE = ("zone",)  # a topology level: its codes are interned in the order met, so rows compare by path
TAINTS = (None, None, [{"key": "k", "effect": "NoSchedule"}], [{"key": "k", "effect": "PreferNoSchedule"}])


def node_obj(draw: st.DrawFn, name: str) -> dict[str, Any]:
    zone = draw(st.sampled_from((None, "z0", "z1")))
    return b.node(name, cpu=draw(st.sampled_from(("16", "32"))), gpus=draw(st.integers(2, 3)),
                  labels={"zone": zone} if zone else None, taints=draw(st.sampled_from(TAINTS)),
                  unschedulable=not draw(st.integers(0, 3)))


def class_obj(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(st.sampled_from(CLASSES))
    labels, expressions = draw(st.sampled_from(SELECTORS))
    return b.resource_class(name, labels, expressions, resource_name=draw(st.sampled_from(RESOURCE_NAMES)),
                            sharing=draw(st.sampled_from(SHARINGS)), created=draw(st.sampled_from(STAMPS)))


def device_obj(draw: st.DrawFn) -> dict[str, Any]:
    node, index = draw(st.sampled_from(NODES)), draw(st.integers(0, 2))
    attributes = {"nvlinkGroup": draw(st.sampled_from(("0", "1")))} if draw(st.booleans()) else {}
    if draw(st.booleans()):
        attributes["numaNode"] = draw(st.sampled_from(("0", "1")))
    obj = b.device(node, index, model=draw(st.sampled_from(("V100", "A100"))),
                   memory=draw(st.sampled_from(("16Gi", "32Gi"))),
                   resource_name=draw(st.sampled_from(("nvidia.com/gpu", "x.dev/gpu"))), attributes=attributes,
                   healthy=draw(st.booleans()) or draw(st.booleans()), unschedulable=not draw(st.integers(0, 4)))
    if draw(st.booleans()):
        obj["spec"]["capacity"]["cores"] = draw(st.sampled_from(("4", "20", "100")))
    return obj


def pod_obj(draw: st.DrawFn) -> dict[str, Any]:
    """A pod another install bound, holding a device of its node whole or a slice of it."""
    node, index = draw(st.sampled_from(NODES)), draw(st.integers(0, 2))
    device = b.device(node, index)
    resource = draw(st.sampled_from(("class.tessera.dev/a", "class.tessera.dev/b", "x.dev/gpu")))
    amount = draw(st.sampled_from((None, 4 * 2**30, 8 * 2**30)))
    dimension = draw(st.sampled_from(("", "memory"))) if amount is not None else ""
    grant = ann.DeviceGrant(device["spec"]["deviceID"], device["metadata"]["name"], amount, dimension)
    pod = b.pod(f"p{draw(st.integers(0, 5))}", scheduler="other", node_name=node, phase="Running",
                annotations={ann.DEVICES: ann.encode_devices({"main": {resource: (grant,)}}),
                             ann.PHASE: ann.PHASE_ALLOCATED})
    return pod


@st.composite
def step(draw: st.DrawFn) -> tuple[str, Any]:
    kind = draw(st.sampled_from(("class", "class", "class_delete", "device", "device", "device_delete",
                                 "pod", "pod_delete", "node", "node", "node_delete", "node_delete",
                                 "nodes_delete", "sync", "sync", "sync")))
    if kind == "class":
        return kind, class_obj(draw)
    if kind == "class_delete":
        return kind, draw(st.sampled_from(CLASSES))
    if kind in ("device", "device_delete"):
        return kind, device_obj(draw)
    if kind == "pod":
        return kind, pod_obj(draw)
    if kind == "pod_delete":
        return kind, f"p{draw(st.integers(0, 5))}"
    if kind == "node":
        return kind, node_obj(draw, draw(st.sampled_from(NODES)))
    if kind == "node_delete":
        return kind, draw(st.sampled_from(NODES))
    if kind == "nodes_delete":  # several nodes leave between two syncs
        return kind, draw(st.lists(st.sampled_from(NODES), min_size=2, max_size=4, unique=True))
    return kind, None


def arrays(group: ColumnGroup, n: int) -> Iterator[tuple[str, Any]]:
    """Every public column of the group over the first `n` rows, by attribute (and column) name."""
    for attribute, value in sorted(vars(group).items()):
        if attribute.startswith("_"):
            continue
        if isinstance(value, np.ndarray):
            yield attribute, value[:n].tolist()
        elif isinstance(value, dict) and all(isinstance(v, np.ndarray) for v in value.values()):
            for key, column in value.items():
                yield f"{attribute}[{key}]", column[:n].tolist()
        elif isinstance(value, dict) and all(isinstance(v, Counter) for v in value.values()):
            yield attribute, {key: sorted(counts.items()) for key, counts in value.items()}  # ClassColumns.resources
        elif isinstance(value, dict):  # ResourceColumns.columns: name -> ResourceColumn
            for key, column in value.items():
                for field in ("alloc", "score_alloc", "used", "free"):
                    yield f"{attribute}[{key}].{field}", getattr(column, field)[:n].tolist()


def zones(table: NodeTable) -> list[tuple[str, ...] | None]:
    column = table.group(TopologyColumns).of(ZONE)
    return [column.paths[code] if code >= 0 else None for code in column.codes[: table.size].tolist()]


def compare(table: NodeTable, log: list[str]) -> None:
    fresh = NodeTable(table.state)
    fresh.sync()
    assert table.size == fresh.size == len(table.state.node_order)
    assert table.infos == [table.state.nodes[name] for name in table.state.node_order], log
    assert table.generation[: table.size].tolist() == [info.generation for info in table.infos], log
    assert zones(table) == zones(fresh), (zones(table), zones(fresh), log)
    n = table.size
    for factory in GROUPS:
        have = dict(arrays(table.group(factory), n))
        want = dict(arrays(fresh.group(factory), n))
        if factory is ResourceColumns:  # a resource's columns stay once named: compare those fresh has
            assert want.keys() <= have.keys(), (sorted(want.keys() - have.keys()), log)
            have = {key: value for key, value in have.items() if key in want}
        assert have == want, (factory.__name__, {k: (have.get(k), want.get(k)) for k in have.keys() | want.keys()
                                                 if have.get(k) != want.get(k)}, log)


@st.composite
def start(draw: st.DrawFn) -> list[tuple[str, Any]]:
    """Every node, a few devices and classes, then the table's first sync: something to change."""
    first: list[tuple[str, Any]] = [("node", node_obj(draw, node)) for node in NODES]
    first += [("device", device_obj(draw)) for _ in range(draw(st.integers(2, 9)))]
    first += [("class", class_obj(draw)) for _ in range(draw(st.integers(1, 3)))]
    first += [("pod", pod_obj(draw)) for _ in range(draw(st.integers(0, 2)))]
    return [*first, ("sync", None)]


@settings(max_examples=int(os.environ.get("TESSERA_HYPOTHESIS_EXAMPLES", "0") or 0) or 300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(start(), st.lists(step(), min_size=4, max_size=40))
def test_a_synced_table_equals_one_built_fresh(first: list[tuple[str, Any]], steps: list[tuple[str, Any]]) -> None:
    engine = Engine(load_config(None), batch=True, stopwatch=NO_STOPWATCH)
    intake = Intake(engine)
    state = engine.state
    table = NodeTable(state)
    table.sync()
    for factory in GROUPS:
        table.group(factory)
    table.group(TopologyColumns).of(ZONE)
    devices: dict[str, dict[str, Any]] = {}
    pods: dict[str, dict[str, Any]] = {}
    log: list[str] = []
    for kind, arg in [*first, *steps]:
        if kind == "class":
            intake.apply("ADDED" if arg["metadata"]["name"] not in state.classes.classes else "MODIFIED", arg, 0.0)
            log.append(f"class {arg['metadata']['name']} {arg['spec']}")
        elif kind == "class_delete":
            intake.apply("DELETED", b.resource_class(arg), 0.0)
            log.append(f"class_delete {arg}")
        elif kind == "device":
            name = arg["metadata"]["name"]
            intake.apply("MODIFIED" if name in devices else "ADDED", arg, 0.0)
            devices[name] = arg
            log.append(f"device {name[:9]} {arg['spec']['resourceName']} {arg['spec']['attributes']} "
                       f"{arg['spec']['capacity']} {arg['status']} unschedulable={arg['spec']['unschedulable']}")
        elif kind == "device_delete":
            name = arg["metadata"]["name"]
            if name in devices:
                intake.apply("DELETED", devices.pop(name), 0.0)
                log.append(f"device_delete {name[:9]}")
        elif kind == "pod":
            name = arg["metadata"]["name"]
            if name in pods:  # a bound pod's node and grants do not change: delete, then add anew
                intake.apply("DELETED", pods.pop(name), 0.0)
            intake.apply("ADDED", arg, 0.0)
            pods[name] = arg
            log.append(f"pod {name} on {arg['spec']['nodeName']} {arg['metadata']['annotations'][ann.DEVICES]}")
        elif kind == "pod_delete":
            if arg in pods:
                intake.apply("DELETED", pods.pop(arg), 0.0)
                log.append(f"pod_delete {arg}")
        elif kind == "node":
            name = arg["metadata"]["name"]
            intake.apply("ADDED" if name not in state.nodes or state.nodes[name].node is None else "MODIFIED",
                         arg, 0.0)
            log.append(f"node {name} {arg['metadata']['labels']} {arg['spec']} {arg['status']['allocatable']}")
        elif kind in ("node_delete", "nodes_delete"):
            for name in [arg] if kind == "node_delete" else arg:
                if name in state.nodes and state.nodes[name].node is not None:
                    intake.apply("DELETED", b.node(name), 0.0)
                    log.append(f"node_delete {name} at {state.node_order}")
        else:
            table.sync()
            log.append("sync")
            compare(table, log)
    table.sync()
    compare(table, log)


def test_one_class_added_among_many_refills_only_its_own_columns() -> None:
    """The shape of the cost, not a timing: with 40 classes over 24 nodes of 4 GPUs, adding one
    class (matching the 8 GPUs of 2 nodes) fills that class's columns on those 2 rows only; no
    row is filled for every class, and no other group is filled again."""
    engine = Engine(load_config(None), batch=True, stopwatch=NO_STOPWATCH)
    intake = Intake(engine)
    for i in range(24):
        intake.apply("ADDED", b.node(f"n{i}", gpus=4), 0.0)
        for j in range(4):
            intake.apply("ADDED", b.device(f"n{i}", j, model="A100" if i < 2 else "V100"), 0.0)
    for k in range(40):
        intake.apply("ADDED", b.resource_class(f"k{k}", {"model": "V100"} if k % 2 else None), 0.0)
    table = NodeTable(engine.state)
    table.sync()
    for factory in GROUPS:
        table.group(factory)
    with _counting(engine, GROUPS, by_row=False) as (fills, per_class):
        intake.apply("ADDED", b.resource_class("a100", {"model": "A100"}), 0.0)
        table.sync()
    assert fills == {}  # no row refilled whole, in no group
    assert per_class == {"a100": 2}  # the class's columns, on the 2 rows with its devices
    columns = table.group(ClassColumns)
    assert columns.free["a100"][:24].tolist() == [4, 4] + [0] * 22
    assert columns.resources["a100"].keys() == {"nvidia.com/gpu"}


def test_a_class_whose_dimension_moves_changes_the_room_another_sharing_class_sees() -> None:
    """A slice whose grant names no dimension (written before grants did) counts in the dimension
    its resource name's class shares by now. Class `a` moving from memory to cores moves the
    slice into the cores that class `b` shares, although `b` itself did not change: `b`'s room
    on that GPU is refreshed too."""
    engine = Engine(load_config(None), batch=True, stopwatch=NO_STOPWATCH)
    intake = Intake(engine)
    intake.apply("ADDED", b.node("n0", gpus=1), 0.0)
    device = b.device("n0", 0)
    device["spec"]["capacity"]["cores"] = "100"
    intake.apply("ADDED", device, 0.0)
    intake.apply("ADDED", b.resource_class("a", sharing={"dimension": "memory", "unit": "1"}), 0.0)
    intake.apply("ADDED", b.resource_class("b", sharing={"dimension": "cores", "unit": "10"}), 0.0)
    grant = ann.DeviceGrant(device["spec"]["deviceID"], device["metadata"]["name"], 30, "")
    intake.apply("ADDED", b.pod("p", scheduler="other", node_name="n0", phase="Running", annotations={
        ann.DEVICES: ann.encode_devices({"main": {"class.tessera.dev/a": (grant,)}}),
        ann.PHASE: ann.PHASE_ALLOCATED}), 0.0)
    table = NodeTable(engine.state)
    table.sync()
    columns = table.group(ClassColumns)
    assert columns.free["b"][0] == 10  # the slice is of memory
    intake.apply("MODIFIED", b.resource_class("a", sharing={"dimension": "cores", "unit": "1"}), 0.0)
    table.sync()
    assert columns.free["b"][0] == 7  # 30 of its 100 cores are taken now
    compare(table, [])


def test_a_node_leaving_fills_no_row_that_stayed() -> None:
    """The shape of the cost, not a timing: with 40 classes over 24 nodes of 4 GPUs, one node
    leaving takes its row out of every group and fills no row again (its departure shifted every
    later row, and the whole table used to be refilled: every class on every device of every
    node); the node coming back under its name fills only its new row, at the end of the order."""
    engine = Engine(load_config(None), batch=True, stopwatch=NO_STOPWATCH)
    intake = Intake(engine)
    for i in range(24):
        intake.apply("ADDED", b.node(f"n{i}", gpus=4, labels={"zone": f"z{i % 3}"},
                                     taints=[{"key": "k", "effect": "NoSchedule"}] if i % 5 == 0 else None), 0.0)
        for j in range(4):
            intake.apply("ADDED", b.device(f"n{i}", j, model="A100" if i % 4 == 0 else "V100"), 0.0)
    for k in range(40):
        intake.apply("ADDED", b.resource_class(f"k{k}", {"model": "V100"} if k % 2 else None), 0.0)
    table = NodeTable(engine.state)
    table.sync()
    for factory in GROUPS:
        table.group(factory)
    table.group(TopologyColumns).of(ZONE)
    counted_groups: tuple[type[ColumnGroup], ...] = (*GROUPS, TopologyColumns)
    with _counting(engine, counted_groups, by_row=True) as (fills, per_class):
        intake.apply("DELETED", b.node("n5"), 0.0)
        table.sync()
        assert fills == {} and per_class == {}  # no row filled again, in no group
        compare(table, ["n5 left"])  # (a table built fresh fills every row)
        fills.clear()
        per_class.clear()
        intake.apply("DELETED", b.node("n11"), 0.0)
        intake.apply("DELETED", b.node("n0"), 0.0)
        intake.apply("ADDED", b.node("n5", gpus=4), 0.0)  # back, as a new node: the last row
        table.sync()
        # the one new row alone, once (it used to be filled again as a changed node)
        assert fills == {f"{factory.__name__} row 21": 1 for factory in counted_groups}
        assert per_class == {f"k{k}": 1 for k in range(40)}
    compare(table, ["n5 left", "n11, n0 left, n5 back"])
    assert [info.name for info in table.infos] == engine.state.node_order


@contextmanager
def _counting(engine: Engine, groups: tuple[type[ColumnGroup], ...],
              by_row: bool) -> Iterator[tuple[Counter[str], Counter[str]]]:
    """Count, while inside, each group's `fill` calls (by group, or by group and row) and the
    state's `class_devices` lookups per class; the real methods are put back on the way out."""
    fills: Counter[str] = Counter()
    per_class: Counter[str] = Counter()
    real_devices = engine.state.class_devices
    real_fill = {factory: factory.fill for factory in groups}

    def class_devices(info: Any, name: str) -> Any:
        per_class[name] += 1
        return real_devices(info, name)

    def counted(factory: type[ColumnGroup]) -> Any:
        def fill(self: ColumnGroup, row: int, info: Any) -> None:
            fills[f"{factory.__name__} row {row}" if by_row else factory.__name__] += 1
            real_fill[factory](self, row, info)
        return fill

    engine.state.class_devices = class_devices  # type: ignore[method-assign]
    for factory in groups:
        factory.fill = counted(factory)  # type: ignore[method-assign]
    try:
        yield fills, per_class
    finally:
        for factory, fill in real_fill.items():
            factory.fill = fill  # type: ignore[method-assign]
        del engine.state.class_devices
