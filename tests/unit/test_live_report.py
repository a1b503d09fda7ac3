"""bench.live's summary: the before/after contestant (`--baseline-tree`) gets its own ratios."""

from __future__ import annotations

from typing import Any

from bench.live_report import BASELINE, markdown_table, summarize


def _round(scheduler: str, pods_per_second: float, first_bind: float) -> dict[str, Any]:
    return {"scheduler": scheduler, "settings": "raised", "pods_per_second": pods_per_second,
            "first_bind_seconds": first_bind, "all_bound": True}


def test_the_baseline_tree_is_compared_with_tessera_and_kube_scheduler() -> None:
    rounds = [_round("tessera", 200.0, 1.2), _round("tessera", 220.0, 1.0),
              _round(BASELINE, 100.0, 2.0), _round(BASELINE, 100.0, 2.2),
              _round("kube-scheduler", 150.0, 0.8), _round("kube-scheduler", 150.0, 0.8)]
    group = summarize(rounds, ["raised"])["raised"]
    assert group["ratios"]["tessera_vs_baseline"] == 2.1
    assert group["first_bind_ratios"] == {"tessera": 1.1 / 0.8, BASELINE: 2.1 / 0.8}
    table = markdown_table({"raised": group}, {"raised": "raised"})
    assert "| raised | tessera-baseline | 100.0 |" in table
    assert table.splitlines()[-1].endswith("| 2.10 | 1.38, 2.62 |")


def test_a_baseline_without_tessera_or_kube_scheduler_reports_what_it_can() -> None:
    """`--schedulers kube-scheduler --baseline-tree X` ran every round and then lost them all to
    a KeyError in the summary, before results.json was written."""
    group = summarize([_round(BASELINE, 100.0, 2.0), _round("kube-scheduler", 150.0, 0.8)], ["raised"])["raised"]
    assert group["ratios"]["tessera_vs_baseline"] is None
    assert group["first_bind_ratios"] == {"tessera": None, BASELINE: 2.5}
    alone = summarize([_round(BASELINE, 100.0, 2.0)], ["raised"])["raised"]
    assert alone["first_bind_ratios"] == {"tessera": None, BASELINE: None}
    assert "| raised | tessera-baseline | 100.0 |" in markdown_table({"raised": alone}, {"raised": "raised"})


def test_without_a_baseline_the_tables_keep_their_columns() -> None:
    group = summarize([_round("tessera", 200.0, 1.0), _round("kube-scheduler", 100.0, 0.5)], ["raised"])["raised"]
    assert "tessera_vs_baseline" not in group["ratios"]
    assert "baseline" not in markdown_table({"raised": group}, {"raised": "raised"})
