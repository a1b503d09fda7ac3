"""The node table's rows hold what a table built from scratch would, however the nodes came in."""

from __future__ import annotations

import numpy as np

from scheduler.api.config import load_config
from scheduler.core.engine import Engine
from scheduler.core.framework.interface import Ints
from scheduler.core.framework.nodetable import ColumnGroup, NodeTable, grown
from scheduler.core.framework.timing import NO_STOPWATCH
from scheduler.core.framework.resources import ResourceColumns
from scheduler.core.intake import Intake
from scheduler.core.state import NodeInfo
from scheduler.sim import builders as b

FOO = "example.com/foo"


def _columns(table: NodeTable) -> dict[str, dict[str, list[int]]]:
    group = table.group(ResourceColumns)
    n = table.size
    return {name: {"alloc": column.alloc[:n].tolist(), "score_alloc": column.score_alloc[:n].tolist(),
                   "used": column.used[:n].tolist(), "free": column.free[:n].tolist()}
            for name, column in sorted(group.columns.items())}


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


def test_a_group_made_after_the_nodes_fills_each_row_once() -> None:
    """The first cycle after start-up makes the resource columns over every node: a column the
    first row names (the GPUs) used to be filled for all rows and then again row by row."""
    engine = Engine(load_config(None), batch=True, stopwatch=NO_STOPWATCH)
    intake = Intake(engine)
    for i in range(3):
        intake.apply("ADDED", b.node(f"n{i}", gpus=8), 0.0)
    table = NodeTable(engine.state)
    table.sync()
    fills: list[int] = []

    class Counted(ResourceColumns):
        def fill(self, row: int, info: object) -> None:
            fills.append(row)
            super().fill(row, info)  # type: ignore[arg-type]

        def _fill_one(self, row: int, info: object, name: str, column: object) -> None:
            fills.append(row)
            super()._fill_one(row, info, name, column)  # type: ignore[arg-type]

    group = table.group(Counted)
    assert fills == [0, 1, 2]
    assert np.array_equal(group.columns["nvidia.com/gpu"].alloc[:3], [8, 8, 8])


def test_a_stale_group_alone_is_refilled_for_every_row() -> None:
    """A group whose epoch moved is refilled for every row; the other groups keep their rows (a
    ResourceClass change used to refill every row of every group: the resource, taint, cordon...
    columns of 10k nodes for nothing they read)."""
    engine = Engine(load_config(None), batch=True, stopwatch=NO_STOPWATCH)
    intake = Intake(engine)
    for i in range(3):
        intake.apply("ADDED", b.node(f"n{i}", gpus=8), 0.0)
    table = NodeTable(engine.state)
    table.sync()
    fills: list[tuple[str, int]] = []
    epoch = [0]

    class Counted(ResourceColumns):
        def fill(self, row: int, info: object) -> None:
            fills.append(("resources", row))
            super().fill(row, info)  # type: ignore[arg-type]

    class Versioned(ColumnGroup):
        def __init__(self, table: NodeTable) -> None:
            self.seen: Ints = np.zeros(table.capacity, np.int64)

        def epoch(self) -> int:
            return epoch[0]

        def grow(self, capacity: int) -> None:
            self.seen = grown(self.seen, capacity)

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
