"""The summary line says what its free-GPU figure is in plain words.

It read `fragmentation 100 %` for a cluster whose free GPUs all sit on one partly used node: the
share of free GPUs on partly used nodes, which a user reads as the cluster being badly fragmented
(and which is not TesseraFragmentation's measure). The figure keeps its definition (`-o json`'s
`summary.fragmentation`, the benchmarks' input); the line now says what it counts."""

from __future__ import annotations

from scheduler.view import model as m


def _summary(free: int, free_on_partial: int, largest: int, node: str) -> m.Summary:
    return m.Summary(gpus=8, used=8 - free, shared=0, free=free, unavailable=0, free_on_partial=free_on_partial,
                     largest_free=largest, largest_free_node=node)


def test_all_free_gpus_on_one_partly_used_node_read_as_what_they_are() -> None:
    summary = _summary(free=3, free_on_partial=3, largest=3, node="n1")
    assert summary.fragmentation == 1.0  # unchanged: the share of free GPUs on partly used nodes
    line = summary.line()
    assert "fragmentation" not in line, line
    assert line == ("GPUs: 8 total, 5 in use, 3 free, 0 unavailable; of the 3 free, 3 (100 %) sit on nodes with GPUs "
                    "in use, 0 on nodes with none in use; most free on one node: 3, n1"), line


def test_free_gpus_on_nodes_with_none_in_use_are_counted_too() -> None:
    line = _summary(free=6, free_on_partial=2, largest=4, node="n2").line()
    assert line.endswith("; of the 6 free, 2 (33 %) sit on nodes with GPUs in use, 4 on nodes with none in use; "
                         "most free on one node: 4, n2"), line


def test_nothing_free_says_no_share() -> None:
    assert _summary(free=0, free_on_partial=0, largest=0, node="").line() == "GPUs: 8 total, 8 in use, 0 free, 0 unavailable"
