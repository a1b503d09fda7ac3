"""The benchmark measurements, on small hand-built inputs whose right answer is worked out in each
docstring (a review found both defects; each test failed before its fix)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import churn, preempt, replay_live, trace
from bench.live_report import percentile as live_percentile
from tests.unit.trace_rows import NODE_HEADER, POD_HEADER, write


@pytest.mark.parametrize(("values", "q", "nearest_rank"), [
    (list(range(1, 7)), 50, 3),      # ceil(0.50 * 6) = 3rd value
    (list(range(1, 21)), 95, 19),    # ceil(0.95 * 20) = 19th value
    (list(range(1, 101)), 99, 99),   # ceil(0.99 * 100) = 99th value
    ([0.0, 90.0], 50, 0.0),          # ceil(0.50 * 2) = 1st value
])
def test_churn_percentile_is_nearest_rank_when_q_times_n_is_an_odd_integer(
        values: list[float], q: float, nearest_rank: float) -> None:
    """`bench.churn.percentile` says "Nearest-rank percentile", and bench.churn, bench.replay_live
    and bench.preempt report their pending p50/p95/p99 with it (README tables). Nearest rank is the
    ceil(q/100 * n)-th smallest value — what `bench.live_report.percentile` computes. The churn
    version computes `int(round(q/100*n + 0.5)) - 1`, and Python's round() rounds halves to even:
    whenever q/100*n is an odd integer k, round(k + 0.5) = k + 1 and it returns the (k+1)-th value,
    one rank too high: p99 of 1..100 is 100 (the maximum) instead of 99, p95 of 20 values is the
    maximum, p50 of six values is the 4th. (live_report's own percentile gets all of these right.)"""
    assert live_percentile(values, q) == nearest_rank  # the definition, as bench.live implements it
    for module in (churn, preempt, replay_live):  # every bench reports percentiles with that one function
        assert module.percentile(values, q) == nearest_rank


def test_trace_results_json_pods_per_seed_is_not_taken_from_the_offline_reference(tmp_path: Path) -> None:
    """results.json's `workload.pods_per_seed` is the number of pods each seed's run offered (the
    README's "8,152 trace pods inflated to 10,771–10,954 per seed"). `bench.trace.main` fills it with
    `{r.seed: r.pods for r in results}` over *all* policies, so the last run to finish wins. The
    `offline` policy runs only the arrived prefix (pods until 100 % of the GPUs have arrived), so
    with `--policies tessera-default,offline` (jobs 1: offline finishes last) the workload reports
    the offline prefix's pod count, not the inflated sequence every online policy ran.
    Here: 2 nodes x 2 GPUs, 1-GPU pods, inflated to 1.3 x 4 GPUs = 5 pods; the offline prefix is
    4 pods (4 GPUs arrived)."""
    nodes = write(tmp_path / "nodes.csv", NODE_HEADER + "n1,32000,65536,2,T4\nn2,32000,65536,2,T4\n")
    pods = write(tmp_path / "pods.csv", POD_HEADER + "".join(
        f"p{i},1000,1024,1,1000,,LS,Running,0,1,0\n" for i in range(3)))
    out = tmp_path / "out"
    assert trace.main(["--nodes", str(nodes), "--pods", str(pods), "--policies", "tessera-default,offline",
                       "--seeds", "42", "--jobs", "1", "--out", str(out)]) == 0
    document = json.loads(out.joinpath("results.json").read_text())
    online_pods = document["policies"]["tessera-default"]["runs"][0]["pods"]
    assert online_pods == 5 and document["policies"]["offline"]["runs"][0]["pods"] == 4
    assert document["workload"]["pods_per_seed"]["42"] == online_pods
