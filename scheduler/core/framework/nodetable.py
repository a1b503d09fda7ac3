"""The node table: one row per node, in `ClusterState.node_order`, for batch (numpy) plugins.

Why: kube-scheduler evaluates hundreds of nodes per pod in parallel goroutines; a Python loop over
5,000 nodes costs milliseconds per pod however small each check is. A plugin whose rule reads a
few numbers per node keeps those numbers as columns here and answers for every node at once.

The table owns the rows — their order, growth, and which rows are stale (nodes the state marked
dirty) — and nothing about what the columns mean. Each batch plugin brings a column group of its
own (`ColumnGroup`, in the plugin's module); the table creates it on first use, fills it for every
row, and refills a row whenever its node changed. A group whose meaning depends on more than the
node (the ResourceClass registry, say) reports an `epoch`; when that moves, that group alone is
brought in step over every row (`renew`: refilled whole, unless the group knows which of its
columns the move touched); the other groups keep their rows. A node leaving takes its row out of
every group (`remove_rows`): the rows after it move up one and keep what they hold. Which rows left
the table reads off its own rows and the state's order (`_rows_taken`).

A group names its per-row arrays in one place (`ColumnGroup.row_arrays`): growing them and taking
rows out of them both go through it, so an array cannot be grown and not shifted (or the reverse)
and fall out of line with the rows.
"""

from __future__ import annotations

from collections.abc import Callable
from abc import ABC, abstractmethod
from typing import Protocol, TypeVar, cast

import numpy as np
import numpy.typing as npt

from scheduler.core.framework.interface import Ints
from scheduler.core.state import ClusterState, NodeInfo

_INITIAL_ROWS = 64
SATURATE = 2**55  # absurd amounts saturate here, so that x*100 in scoring cannot overflow int64


def int64(value: int) -> int:
    """A Python int clamped into the range the columns hold."""
    return max(-SATURATE, min(SATURATE, value))


S = TypeVar("S", bound=np.generic)


class EachArray(Protocol):
    """What `ColumnGroup.row_arrays` applies to each per-row array: the array to keep in its place
    (the same array when it changed it in place), of the same dtype."""

    def __call__(self, column: npt.NDArray[S], /) -> npt.NDArray[S]: ...


class ColumnGroup(ABC):
    """A batch plugin's columns: one value (or a few) per node row. A group is made by its
    factory (`NodeTable.group`) from the table, its per-row arrays `capacity` rows long."""

    def __init__(self, table: NodeTable) -> None:
        # rows the per-row arrays hold (`grow`): the group's arrays, and a column it adds later,
        # are made this long
        self.capacity = table.capacity

    @abstractmethod
    def row_arrays(self, each: EachArray) -> None:
        """Put `each(array)` in place of every per-row array the group holds (first axis: the
        rows), whatever keeps it (an attribute, a dict of columns by name, a column object): the
        one place the group names them, which `grow` and `remove_rows` go through."""

    def grow(self, capacity: int) -> None:
        """Make room for `capacity` rows, keeping the rows already filled (new rows zero)."""
        self.capacity = capacity

        def wider(column: npt.NDArray[S]) -> npt.NDArray[S]:
            return grown(column, capacity)

        self.row_arrays(wider)

    @abstractmethod
    def fill(self, row: int, info: NodeInfo) -> None:
        """Write the node's values into `row`."""

    def epoch(self) -> int:
        """Moves when the rows must be brought in step (`renew`) although no node changed."""
        return 0

    def reset(self) -> None:
        """Drop whatever the old epoch shaped: every row is refilled next."""
        return None

    def renew(self, table: NodeTable) -> None:
        """The epoch moved: bring the rows filled so far (`table.size`) in step with it. By
        default `reset`, then `fill` each row; a group that knows which of its columns the move
        touched refreshes those alone."""
        table.refill(self)

    def remove_rows(self, table: NodeTable, rows: list[int], size: int) -> None:
        """The nodes of `rows` (ascending, below `size`: the rows filled before) left: take those
        rows out of every column (`shift_out`), each row after them moving up past the ones taken
        out before it, its values kept. The table's own rows are moved already (`table.size` is
        `size` less the rows taken). A group keeping more per row than its columns moves that
        too (overriding this)."""

        def shifted(column: npt.NDArray[S]) -> npt.NDArray[S]:
            shift_out(column, rows, size)
            return column

        self.row_arrays(shifted)


G = TypeVar("G", bound=ColumnGroup)


class NodeTable:
    def __init__(self, state: ClusterState) -> None:
        self.state = state
        # Rows filled so far. While rows are being filled (a new group, a refill, new nodes) it
        # counts only those done, so a column a group adds on the way (a resource first named by
        # this row's node) fills the rows before it and leaves the rest to the pass: each row once.
        self.size = 0
        self.capacity = _INITIAL_ROWS
        self.order_version = -1  # the state's node order this table's rows follow
        self.generation: Ints = np.full(self.capacity, -1, np.int64)  # NodeInfo.generation per row
        # Each row's NodeInfo (a state keeps one object per node name for the node's lifetime):
        # the per-node loops index this list instead of two dict lookups per node.
        self.infos: list[NodeInfo] = []
        self._groups: dict[Callable[..., ColumnGroup], ColumnGroup] = {}
        self._epochs: dict[Callable[..., ColumnGroup], int] = {}  # only groups that have epochs

    def group(self, factory: Callable[[NodeTable], G]) -> G:
        """The column group `factory` makes (one per factory), filled for every current row."""
        found = self._groups.get(factory)
        if found is None:

            made = self._filled(lambda: factory(self))  # its arrays `capacity` rows long (`ColumnGroup`)
            self._groups[factory] = made
            if type(made).epoch is not ColumnGroup.epoch:
                self._epochs[factory] = made.epoch()
            return made
        return cast(G, found)  # keyed by its own factory

    def refill(self, group: ColumnGroup) -> None:
        """`reset` the group and fill it for every row filled so far (`ColumnGroup.renew`)."""

        def reset() -> ColumnGroup:
            group.reset()
            return group

        self._filled(reset)

    def _filled(self, make: Callable[[], G]) -> G:
        """The group `make` returns (a new one, or one reset) filled for every row filled so far.
        From `make` on, `size` counts the rows it has filled (none as `make` runs: a column it adds
        fills no row yet, see `size`)."""
        rows, self.size = self.size, 0
        try:
            group = make()
            for row in range(rows):
                group.fill(row, self.infos[row])
                self.size = row + 1
        finally:
            self.size = rows
        return group

    def info(self, row: int) -> NodeInfo:
        return self.infos[row]

    def sync(self) -> None:
        """Bring every row in step with the state (new nodes, changed nodes, nodes gone)."""
        state = self.state
        order = state.node_order
        if self.order_version != state.order_version:
            self._remove_rows(self._rows_taken())
            self.order_version = state.order_version
        for factory, epoch in list(self._epochs.items()):  # over the rows as they stand (live NodeInfos)
            group = self._groups[factory]
            if group.epoch() != epoch:
                group.renew(self)
                self._epochs[factory] = group.epoch()
        kept = self.size  # rows past it are new: filled below from the node as it is now
        if len(order) > kept:
            self._ensure(len(order))
            for row in range(kept, len(order)):
                self._fill(row)
                self.size = row + 1
        for name in state.dirty:
            position = state.node_position(name)
            if position is not None and position < kept:  # a new node (dirty too) is filled once
                self._fill(position)
        state.dirty.clear()

    def _rows_taken(self) -> list[int]:
        """The rows (ascending) whose nodes left the order since the last sync: the rows that stay
        are the order's first ones in their order (a node leaving moves those after it up; a new
        node, or one come back, is appended), so a row stays when its node is at the position the
        rows taken before it leave it at. One walk over the rows, only when the order changed
        (`sync`), where taking rows out is O(rows) anyway."""
        position = self.state.node_position
        taken: list[int] = []
        for row, info in enumerate(self.infos):
            if position(info.name) != row - len(taken):
                taken.append(row)
        return taken

    def _remove_rows(self, rows: list[int]) -> None:
        if not rows:
            return
        size = self.size
        for row in reversed(rows):
            del self.infos[row]
        shift_out(self.generation, rows, size)
        self.size = size - len(rows)
        for group in self._groups.values():
            group.remove_rows(self, rows, size)

    def _fill(self, row: int) -> None:
        info = self.state.nodes[self.state.node_order[row]]
        if row < len(self.infos):
            self.infos[row] = info  # the row's own node (the rows that stay are the order's first)
        else:  # rows are filled in order: a new row is the next one
            self.infos.append(info)
        for group in self._groups.values():
            group.fill(row, info)
        self.generation[row] = info.generation

    def _ensure(self, rows: int) -> None:
        if rows <= self.capacity:
            return
        self.capacity = max(rows, self.capacity * 2)
        grown = np.full(self.capacity, -1, np.int64)
        grown[: len(self.generation)] = self.generation
        self.generation = grown
        for group in self._groups.values():
            group.grow(self.capacity)


def grown(old: npt.NDArray[S], capacity: int) -> npt.NDArray[S]:
    """`old` with room for `capacity` rows (first axis), zero-filled."""
    new = np.zeros((capacity, *old.shape[1:]), old.dtype)
    new[: old.shape[0]] = old
    return new


def shift_out(column: npt.NDArray[S], rows: list[int], size: int) -> None:
    """Take `rows` (ascending, below `size`) out of the first `size` rows of `column` in place:
    the rows after each move up, keeping their values (what is left past them is never read)."""
    kept = np.delete(column[:size], rows, axis=0)
    column[: len(kept)] = kept
