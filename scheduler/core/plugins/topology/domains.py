"""Topology domains over the node table: which domain each node row is in, per level, and what
each domain has free.

A level is a chain of node label keys, widest first (block, rack): a node's domain at the level is
the tuple of its values for the chain (a node missing one of them is in no domain of that level).
The interned paths per row are the framework's label-path columns (`framework.label_columns`,
shared with InterPodAffinity's batch filter); summing a level's free capacity by domain is one
numpy pass over that column instead of label lookups on every node for every gang.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scheduler.core.framework.interface import Bools, Ints
from scheduler.core.framework.label_columns import Chain, level_column
from scheduler.core.framework.nodetable import NodeTable


@dataclass(frozen=True, slots=True)
class LevelView:
    """One level's domains right now: codes per row, and per domain code its free capacity."""

    codes: Ints  # per row (table size)
    paths: list[tuple[str, ...]]
    present: Ints  # codes that have at least one node, ascending
    free: np.ndarray  # (len(paths), resources): summed free capacity per domain code

    def mask(self, code: int) -> Bools:
        mask: Bools = self.codes == code
        return mask


def level_view(table: NodeTable, chain: Chain, free: list[Ints]) -> LevelView:
    """The level's domains with their summed free capacity (`free`: one column per resource)."""
    column = level_column(table, chain)
    codes = column.codes[: table.size]
    inside = codes >= 0
    domain_codes = codes[inside]
    count = len(column.paths)
    sums = np.zeros((count, len(free)), np.float64)
    for i, values in enumerate(free):
        sums[:, i] = np.bincount(domain_codes, weights=np.maximum(values[: table.size][inside], 0),
                                 minlength=count)
    present = np.flatnonzero(np.bincount(domain_codes, minlength=count))
    return LevelView(codes, column.paths, present, sums)
