"""`python -m bench.scrape` measures the live scrape hook (`StateGauges`) on a stand-in for the
loop: the stand-in must have every part of the loop the hook reads (it lacked the term fence's
and the conflicting-scheduler counts the hook reads since, and every measurement ended in an
AttributeError)."""

from __future__ import annotations

from bench.scrape import measure


def test_a_scrape_is_measured_on_a_small_cluster() -> None:
    result = measure(nodes=20, pending=10, placed=5, scrapes=2, seed=1)
    assert result["gpus"] == 160 and result["decided"] >= 5
    assert len(result["scrape_seconds"]) == 2 and result["median_seconds"] > 0
