"""The node table's rows hold what a table built from scratch would, however the nodes came in."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from scheduler.api.config import load_config
from scheduler.core.engine import Engine
from scheduler.core.framework.interface import Bools, Ints
from scheduler.core.framework.nodetable import S, ColumnGroup, EachArray, NodeTable
from scheduler.core.framework.timing import NO_STOPWATCH
from scheduler.core.framework.resources import ResourceColumns
from scheduler.core.intake import Intake
from scheduler.core.plugins.devices.columns import ClassColumns
from scheduler.core.plugins.node_unschedulable import CordonColumn
from scheduler.core.plugins.preemption.floor import VictimFloor
from scheduler.core.plugins.taints import TaintColumns
from scheduler.core.framework.label_columns import TopologyColumns
from scheduler.core.state import ClusterState, NodeInfo
from scheduler.sim import builders as b

FOO = "example.com/foo"


def _columns(table: NodeTable, factory: type[ResourceColumns] = ResourceColumns) -> dict[str, dict[str, list[int]]]:
    group = table.group(factory)
    n = table.size
    return {name: {"alloc": column.alloc[:n].tolist(), "score_alloc": column.score_alloc[:n].tolist(),
                   "used": column.used[:n].tolist(), "free": column.free[:n].tolist()}
            for name, column in sorted(group.columns.items())}


def _synced(gpus: list[int]) -> tuple[Intake, NodeTable]:
    """Nodes n0, n1 … with these GPU counts, and a node table synced over them."""
    engine = Engine(load_config(None), batch=True, stopwatch=NO_STOPWATCH)
    intake = Intake(engine)
    for i, count in enumerate(gpus):
        intake.apply("ADDED", b.node(f"n{i}", gpus=count), 0.0)
    table = NodeTable(engine.state)
    table.sync()
    return intake, table


def test_a_resource_first_named_half_way_through_a_refill_is_filled_for_the_rows_before() -> None:
    """n1 describes `FOO` only by its devices (its scoring allocatable is their count); n2, added
    when n0 goes, names it in its allocatable, so the column is created while n2's row is filled
    in the full refill the new node order causes. Before, a column created during a refill was
    filled for no row at all (the table counted none as filled until the pass ended): n1's row
    kept 0 where a table built from scratch has 2."""
    engine = Engine(load_config(None), batch=True, stopwatch=NO_STOPWATCH)
    intake = Intake(engine)
    for obj in (b.node("n0"), b.node("n1"), b.device("n1", 0, resource_name=FOO), b.device("n1", 1, resource_name=FOO)):
        intake.apply("ADDED", obj, 0.0)
    table = NodeTable(engine.state)
    table.sync()
    table.group(ResourceColumns)
    intake.apply("DELETED", b.node("n0"), 0.0)
    intake.apply("ADDED", b.node("n2", extra={FOO: "3"}), 0.0)
    table.sync()

    fresh = NodeTable(engine.state)
    fresh.sync()
    assert _columns(table)[FOO]["score_alloc"] == [2, 3]
    assert _columns(table) == _columns(fresh)


def _counting_rows(fills: list[int]) -> type[ResourceColumns]:
    """Resource columns that note in `fills` each row they fill."""
    class Counted(ResourceColumns):
        def fill(self, row: int, info: object) -> None:
            fills.append(row)
            super().fill(row, info)  # type: ignore[arg-type]
    return Counted


def test_a_group_made_after_the_nodes_fills_each_row_once() -> None:
    """The first cycle after start-up makes the resource columns over every node: a column the
    first row names (the GPUs) used to be filled for all rows and then again row by row."""
    intake, table = _synced([8] * 3)
    fills: list[int] = []

    class Counted(_counting_rows(fills)):  # type: ignore[misc]
        def _fill_one(self, row: int, info: object, name: str, column: object) -> None:
            fills.append(row)
            super()._fill_one(row, info, name, column)

    group = table.group(Counted)
    assert fills == [0, 1, 2]
    assert np.array_equal(group.columns["nvidia.com/gpu"].alloc[:3], [8, 8, 8])


def test_a_stale_group_alone_is_refilled_for_every_row() -> None:
    """A group whose epoch moved is refilled for every row; the other groups keep their rows (a
    ResourceClass change used to refill every row of every group: the resource, taint, cordon...
    columns of 10k nodes for nothing they read)."""
    intake, table = _synced([8] * 3)
    fills: list[tuple[str, int]] = []
    epoch = [0]

    class Counted(ResourceColumns):
        def fill(self, row: int, info: object) -> None:
            fills.append(("resources", row))
            super().fill(row, info)  # type: ignore[arg-type]

    class Versioned(ColumnGroup):
        def __init__(self, table: NodeTable) -> None:
            super().__init__(table)
            self.seen: Ints = np.zeros(self.capacity, np.int64)

        def epoch(self) -> int:
            return epoch[0]

        def row_arrays(self, each: EachArray) -> None:
            self.seen = each(self.seen)

        def fill(self, row: int, info: NodeInfo) -> None:
            fills.append(("versioned", row))
            self.seen[row] = epoch[0]

    table.group(Counted)
    versioned = table.group(Versioned)
    fills.clear()
    epoch[0] = 7
    intake.apply("MODIFIED", b.node("n1", gpus=4), 0.0)
    table.sync()
    assert [row for group, row in fills if group == "resources"] == [1]  # the changed node's row only
    assert {row for group, row in fills if group == "versioned"} == {0, 1, 2}
    assert versioned.seen[:3].tolist() == [7, 7, 7]
    assert table.group(Counted).columns["nvidia.com/gpu"].alloc[:3].tolist() == [8, 4, 8]


def test_a_group_takes_its_rows_out_through_the_arrays_it_names_once() -> None:
    """A group names its per-row arrays once (`ColumnGroup.row_arrays`): growing and taking rows
    out both go through it, so a node leaving fills no row that stayed, and rows added past the
    first capacity keep the earlier rows' values, in every array it names."""
    intake, table = _synced([1, 2, 3, 4])
    fills: list[tuple[str, int]] = []

    class Plain(ColumnGroup):
        def __init__(self, table: NodeTable) -> None:
            super().__init__(table)
            self.gpus: Ints = np.zeros(self.capacity, np.int64)
            self.named: Bools = np.zeros(self.capacity, np.bool_)

        def row_arrays(self, each: EachArray) -> None:
            self.gpus, self.named = each(self.gpus), each(self.named)

        def fill(self, row: int, info: NodeInfo) -> None:
            fills.append(("plain", row))
            assert info.node is not None
            self.gpus[row] = info.node.allocatable["nvidia.com/gpu"]
            self.named[row] = info.name.endswith("2")

    class Counted(ResourceColumns):
        def fill(self, row: int, info: object) -> None:
            fills.append(("resources", row))
            super().fill(row, info)  # type: ignore[arg-type]

    plain = table.group(Plain)
    table.group(Counted)
    fills.clear()
    intake.apply("DELETED", b.node("n1"), 0.0)
    table.sync()
    assert fills == []
    assert plain.gpus[:3].tolist() == [1, 3, 4]
    assert plain.named[:3].tolist() == [False, True, False]
    assert _columns(table)["nvidia.com/gpu"]["alloc"] == [1, 3, 4]
    capacity = table.capacity
    for i in range(4, 4 + capacity):  # past the capacity: every array grows
        intake.apply("ADDED", b.node(f"n{i}", gpus=1), 0.0)
    table.sync()
    assert table.capacity > capacity and len(plain.gpus) == len(plain.named) == table.capacity
    assert plain.gpus[:4].tolist() == [1, 3, 4, 1]
    assert plain.named[:3].tolist() == [False, True, False]


def test_a_new_node_is_filled_once() -> None:
    """A node added since the last sync is filled as a new row; it is also among the changed
    (dirty) nodes, and was filled a second time as one, in every group."""
    intake, table = _synced([8] * 3)
    fills: list[int] = []
    group = table.group(_counting_rows(fills))
    fills.clear()
    intake.apply("ADDED", b.node("n3", gpus=4), 0.0)
    intake.apply("MODIFIED", b.node("n1", gpus=2), 0.0)
    table.sync()
    assert sorted(fills) == [1, 3]
    assert group.columns["nvidia.com/gpu"].alloc[:4].tolist() == [8, 2, 8, 4]


def test_many_removals_and_a_node_come_back_between_syncs_end_as_a_table_built_fresh() -> None:
    """The rows that left are read off the table's own rows and the state's order, however many
    left since the last sync (the state keeps no log of removals that a table could fall behind):
    n3 leaves and comes back last, n7 leaves after being changed, n1, n6 and n5 leave; every row
    that stayed keeps its values (none is filled again) and the table ends as one built fresh."""
    intake, table = _synced([1, 2, 3, 4, 5, 6, 7, 8])
    fills: list[str] = []

    class Counted(ResourceColumns):
        def fill(self, row: int, info: NodeInfo) -> None:
            fills.append(info.name)
            super().fill(row, info)

    table.group(Counted)
    fills.clear()
    intake.apply("DELETED", b.node("n3"), 0.0)
    intake.apply("MODIFIED", b.node("n7", gpus=2), 0.0)
    for i in (6, 1, 7, 5):
        intake.apply("DELETED", b.node(f"n{i}"), 0.0)
    intake.apply("ADDED", b.node("n3", gpus=9), 0.0)
    table.sync()
    assert fills == ["n3"]
    fresh = NodeTable(table.state)
    fresh.sync()
    assert _columns(table, Counted) == _columns(fresh)
    assert _columns(table, Counted)["nvidia.com/gpu"]["alloc"] == [1, 3, 5, 9]
    assert [info.name for info in table.infos] == ["n0", "n2", "n4", "n3"]


def _arrays_held(value: object, seen: set[int]) -> list[int]:
    """The ids of the numpy arrays `value` holds: in attributes, dicts and column objects (not
    through the table or the state a group keeps)."""
    if isinstance(value, np.ndarray):
        return [id(value)]
    if isinstance(value, (NodeTable, ClusterState)) or id(value) in seen:
        return []
    seen.add(id(value))
    if isinstance(value, dict):
        return [found for item in value.values() for found in _arrays_held(item, seen)]
    if isinstance(value, (list, tuple, set, frozenset)):
        return [found for item in value for found in _arrays_held(item, seen)]
    if type(value).__module__.startswith("scheduler."):
        names = [*getattr(value, "__dict__", {})] + [name for cls in type(value).__mro__
                                                      for name in getattr(cls, "__slots__", ())]
        return [found for name in names if hasattr(value, name)
                for found in _arrays_held(getattr(value, name), seen)]
    return []


def test_every_column_group_names_each_of_its_arrays_once() -> None:
    """Each group's `row_arrays` visits every per-row array it holds, once: one it left out
    would neither grow nor move up when a node leaves (its rows out of line with the nodes'),
    one named twice would be grown or moved twice."""
    engine = Engine(load_config(None), batch=True, stopwatch=NO_STOPWATCH)
    intake = Intake(engine)
    for i in range(3):
        intake.apply("ADDED", b.node(f"n{i}", gpus=2, labels={"zone": f"z{i % 2}"}, extra={FOO: "1"}), 0.0)
        intake.apply("ADDED", b.device(f"n{i}", 0), 0.0)
    intake.apply("ADDED", b.resource_class("whole"), 0.0)
    intake.apply("ADDED", b.resource_class("shared", sharing={"dimension": "memory", "unit": "8Gi"}), 0.0)
    table = NodeTable(engine.state)
    table.sync()
    table.group(TopologyColumns).of(("zone",))
    groups: list[ColumnGroup] = [table.group(factory) for factory in (
        ResourceColumns, TaintColumns, CordonColumn, VictimFloor, TopologyColumns, ClassColumns)]
    assert len(table.group(ClassColumns).free) == 2
    for group in groups:
        visited: list[int] = []
        lengths: set[int] = set()

        def visit(column: npt.NDArray[S]) -> npt.NDArray[S]:
            visited.append(id(column))
            lengths.add(len(column))
            return column

        group.row_arrays(visit)
        held = _arrays_held(group, set())
        assert len(held) > 0, type(group).__name__
        assert sorted(visited) == sorted(held), type(group).__name__
        # made at the table's capacity (`ColumnGroup.__init__`): no group is grown to it after
        assert group.capacity == table.capacity and lengths == {table.capacity}, type(group).__name__


def test_a_level_column_keeps_up_with_the_nodes_added_after_it() -> None:
    """A level added on first use (`TopologyColumns.of`) is kept by the table after: a node added
    later gets its domain's code in its row, past the first capacity too (the column grows with
    the table), and a node with part of a chain's labels is in no domain of it (-1). The topology
    and InterPodAffinity tests make their levels after the nodes, so a level that stopped growing
    or filling passed them."""
    intake, table = _synced([1])
    chain = ("block", "rack")
    table.group(TopologyColumns).of(chain)  # n0 has neither label
    count = table.capacity + 2
    for i in range(1, count):
        labels = {"block": f"b{i % 2}", "rack": f"r{i % 3}"} if i != 5 else {"rack": "r0"}  # n5: no block
        intake.apply("ADDED", b.node(f"n{i}", gpus=1, labels=labels), 0.0)
    table.sync()
    column = table.group(TopologyColumns).of(chain)
    assert len(column.codes) == table.capacity >= table.size == count
    paths = [column.paths[code] if code >= 0 else None for code in column.codes[: table.size].tolist()]
    assert paths == [None] + [(f"b{i % 2}", f"r{i % 3}") if i != 5 else None for i in range(1, count)]
