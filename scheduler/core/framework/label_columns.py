"""Label-path columns over the node table: per chain of node label keys, each row's interned path.

A chain is a list of node label keys, widest first (block, rack; or a single topology key): a
node's path is the tuple of its values for the chain (a node missing one of them has none). Paths
are interned to small integers per chain so that grouping rows into domains, or finding the rows
whose label value is one of a set, are numpy operations on one column instead of label lookups on
every node. Shared by the topology plugin's domains (`plugins.topology.domains`) and
InterPodAffinity's batch filter (one pair key per chain).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from scheduler.core.framework.interface import Ints
from scheduler.core.framework.nodetable import ColumnGroup, EachArray, NodeTable
from scheduler.core.state import NodeInfo

Chain = tuple[str, ...]  # label keys, widest first; the last one is the level's own


@dataclass(slots=True)
class LevelColumn:
    codes: Ints  # per row: the interned path of the node's domain, -1 when it has none
    ids: dict[tuple[str, ...], int]
    paths: list[tuple[str, ...]]

    def code(self, labels: Mapping[str, str], chain: Chain) -> int:
        """The interned domain of a node with these labels at the level, -1 when it is in none
        (a domain no row is in yet, such as a deleted node's, gets a code too)."""
        if not all(key in labels for key in chain):
            return -1
        path = tuple(labels[key] for key in chain)
        code = self.ids.get(path)
        if code is None:
            code = self.ids[path] = len(self.paths)
            self.paths.append(path)
        return code


class TopologyColumns(ColumnGroup):
    """Per level chain in use, each row's domain code (levels are added on first use)."""

    def __init__(self, table: NodeTable) -> None:
        super().__init__(table)
        self.table = table
        self.levels: dict[Chain, LevelColumn] = {}

    def row_arrays(self, each: EachArray) -> None:
        for column in self.levels.values():
            column.codes = each(column.codes)

    def fill(self, row: int, info: NodeInfo) -> None:
        for chain, column in self.levels.items():
            _fill(column, chain, row, info)

    def of(self, chain: Chain) -> LevelColumn:
        column = self.levels.get(chain)
        if column is None:
            column = self.levels[chain] = LevelColumn(np.full(self.capacity, -1, np.int64), {}, [])
            for row in range(self.table.size):
                _fill(column, chain, row, self.table.info(row))
        return column


def _fill(column: LevelColumn, chain: Chain, row: int, info: NodeInfo) -> None:
    assert info.node is not None
    column.codes[row] = column.code(info.node.meta.labels, chain)


def level_column(table: NodeTable, chain: Chain) -> LevelColumn:
    """The level's domain codes per row, the level added to the table on first use."""
    return table.group(TopologyColumns).of(chain)
