"""bench.core --case topology runs and its gangs land inside one block (the figures are by hand)."""

from __future__ import annotations

from bench.core import run_topology


def test_topology_case_places_every_gang_inside_one_block() -> None:
    result = run_topology(nodes=256, gangs=2, bound_per_node=3, seed=1)
    assert result["gangs_inside_one_block"] == 2
    assert result["gang_ms_p50"] > 0
