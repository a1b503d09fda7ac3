"""`view.model.node_scores`, the one reading of an attempt's scores that explain's node table and
what-if's breakdown share: the tests that print them compare one with the other, so a mistake in
the shared reading (an order, a plugin's score read as its weight) passed them both."""

from __future__ import annotations

from scheduler.view.model import NodeScore, PluginScore, node_scores


def test_nodes_come_highest_total_first_then_by_name_each_with_every_plugins_score_and_weight() -> None:
    scores = {"n-b": {"NodeResourcesFit": 40, "GpuBinpack": 90, "total": 220},
              "n-c": {"NodeResourcesFit": 10, "total": 10},
              "n-a": {"NodeResourcesFit": 40, "GpuBinpack": 90, "total": 220}}
    weights = {"NodeResourcesFit": 1, "GpuBinpack": 2}
    assert node_scores(scores, weights) == (
        NodeScore("n-a", 220, (PluginScore("NodeResourcesFit", 40, 1), PluginScore("GpuBinpack", 90, 2))),
        NodeScore("n-b", 220, (PluginScore("NodeResourcesFit", 40, 1), PluginScore("GpuBinpack", 90, 2))),
        # a plugin that did not score the node reads 0, still shown with its weight
        NodeScore("n-c", 10, (PluginScore("NodeResourcesFit", 10, 1), PluginScore("GpuBinpack", 0, 2))))


def test_no_scores_are_no_nodes() -> None:
    assert node_scores(None, {"NodeResourcesFit": 1}) == ()
