"""Packing-quality metrics, computed exactly as the FGD paper's analysis scripts compute them.

Why copy their arithmetic (bench/README.md has the file references): "unallocated GPU % at 100 %
arrived" is only comparable with the published 4.77 % if it is the same statistic. FGD logs one
row after *every* pod (placed or failed): arrived GPU milli (every pod that arrived, placed or not)
and allocated GPU milli (GPU-sharing pods count their fraction). The analysis then
- turns both into percent of cluster GPUs, arrival rounded to a whole percent, allocation to two
  decimals;
- for each whole percent p, averages the allocation of all rows whose arrival rounds to p (or,
  when no row does, of rows within p ± 1), rounded to two decimals;
- reports unallocated = 100 − that average at p = 100.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bench.trace_workload import MILLI

MAX_ARRIVAL_PCT = 130


@dataclass(slots=True)
class Series:
    """Per-pod samples of one run, in arrival order."""

    total_gpus: int
    arrived_milli: list[int]
    used_milli: list[int]
    first_failure: int | None = None  # index of the first pod that could not be placed

    def record(self, demand: int, placed: bool) -> None:
        """One more pod of `demand` GPU milli arrived (placed or not): FGD's row after every pod."""
        arrived = (self.arrived_milli[-1] if self.arrived_milli else 0) + demand
        used = (self.used_milli[-1] if self.used_milli else 0) + (demand if placed else 0)
        if not placed and self.first_failure is None:
            self.first_failure = len(self.arrived_milli)
        self.arrived_milli.append(arrived)
        self.used_milli.append(used)


def fgd_curve(series: Series, max_pct: int = MAX_ARRIVAL_PCT) -> dict[int, float]:
    """Allocated GPU % per whole percent of arrived demand (FGD's merge_alloc_discrete)."""
    if series.total_gpus <= 0:
        return {}
    total = series.total_gpus
    sums: dict[int, float] = {}
    counts: dict[int, int] = {}
    for arrived, used in zip(series.arrived_milli, series.used_milli):
        # Same float expression and rounding as FGD's pandas code: x / total_gpus / 10.
        bucket = int(round(arrived / total / 10, 0))
        sums[bucket] = sums.get(bucket, 0.0) + round(used / total / 10, 2)
        counts[bucket] = counts.get(bucket, 0) + 1
    curve: dict[int, float] = {}
    for pct in range(max_pct + 1):
        if counts.get(pct):
            curve[pct] = round(sums[pct] / counts[pct], 2)
            continue
        near = [b for b in (pct - 1, pct, pct + 1) if counts.get(b)]
        if near:
            curve[pct] = round(sum(sums[b] for b in near) / sum(counts[b] for b in near), 2)
    return curve


def percent(milli: int, total_gpus: int) -> float:
    return 100.0 * milli / (total_gpus * MILLI) if total_gpus else 0.0


@dataclass(frozen=True, slots=True)
class RunMetrics:
    unallocated_gpu_pct_at_100: float | None  # None when arrival never got near 100 %
    allocation_pct_at_first_failure: float | None  # None when nothing failed
    final_allocation_pct: float
    curve: dict[int, float]


def run_metrics(series: Series) -> RunMetrics:
    curve = fgd_curve(series)
    at_100 = curve.get(100)
    first = None
    if series.first_failure is not None:
        first = percent(series.used_milli[series.first_failure], series.total_gpus)
    final = percent(series.used_milli[-1], series.total_gpus) if series.used_milli else 0.0
    return RunMetrics(round(100.0 - at_100, 2) if at_100 is not None else None, first, final, curve)


def summarize(values: Iterable[float | None]) -> dict[str, float | None]:
    """Median with min and max over seeds; runs without a value (None) are left out."""
    present = [v for v in values if v is not None]
    if not present:
        return {"median": None, "min": None, "max": None}
    return {"median": statistics.median(present), "min": min(present), "max": max(present)}


def median_curve(curves: Sequence[dict[int, float]]) -> dict[int, float]:
    """Per arrival percent, the median allocation over the runs that have that percent."""
    out: dict[int, float] = {}
    for pct in sorted({p for c in curves for p in c}):
        out[pct] = statistics.median(c[pct] for c in curves if pct in c)
    return out
