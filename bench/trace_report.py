"""`bench.trace` output: results.json for machines, a Markdown table and a PNG plot for people.

Why medians with min–max: ten seeds is few, and one unlucky shuffle should not move the headline;
the range shows how much the order alone matters. The published FGD reference rows are printed
beside ours so the comparison is on one screen.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.trace_fgd import POLICY_NAME as FGD_POLICY
from bench.trace_metrics import median_curve, summarize
from bench.trace_run import RunResult

# "Beware of Fragmentation" (USENIX ATC'23), openb_pod_list_default, unallocated GPU % when the
# arrived GPU demand reaches 100 % of cluster GPU capacity.
REFERENCE: dict[str, Any] = {
    "source": "Weng et al., Beware of Fragmentation, USENIX ATC 2023 (openb_pod_list_default, "
              "inflated to 1.3x, seeds 42-51)",
    "workload": "openb_pod_list_default.csv",
    "unallocated_gpu_pct_at_100": {"FGD": 4.77, "BestFit": 7.09, "DotProd": 9.44, "Random": 13.75},
}

FOOTER_POINTS = 6.5  # the attribution line's font size

METRICS = ("unallocated_gpu_pct_at_100", "allocation_pct_at_first_failure", "final_allocation_pct",
           "pods_per_second")


def _run_row(result: RunResult) -> dict[str, Any]:
    m = result.metrics
    return {
        "seed": result.seed,
        "pods": result.pods,
        "failed_pods": result.failed,
        "elapsed_seconds": round(result.elapsed_seconds, 3),
        "cpu_seconds": round(result.cpu_seconds, 3),
        "unallocated_gpu_pct_at_100": m.unallocated_gpu_pct_at_100,
        "allocation_pct_at_first_failure": m.allocation_pct_at_first_failure,
        "final_allocation_pct": m.final_allocation_pct,
        "pods_per_second": result.pods_per_second,
        "pods_per_cpu_second": result.pods_per_cpu_second,
    }


def policy_results(results: Sequence[RunResult], order: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per policy (in `order`): each metric's median/min/max over seeds, the runs, the median curve."""
    out: dict[str, dict[str, Any]] = {}
    for name in order:
        runs = sorted((r for r in results if r.policy == name), key=lambda r: r.seed)
        if not runs:
            continue
        rows = [_run_row(r) for r in runs]
        entry: dict[str, Any] = {metric: summarize(row[metric] for row in rows) for metric in METRICS}
        entry["pods_per_cpu_second"] = summarize(row["pods_per_cpu_second"] for row in rows)
        entry["failed_pods"] = summarize(float(row["failed_pods"]) for row in rows)
        curve = median_curve([r.metrics.curve for r in runs])
        entry["allocation_curve"] = {"arrived_gpu_pct": list(curve), "allocated_gpu_pct_median": list(curve.values())}
        entry["runs"] = rows
        out[name] = entry
    return out


def _cell(summary: Mapping[str, float | None], digits: int) -> str:
    median, low, high = summary["median"], summary["min"], summary["max"]
    if median is None or low is None or high is None:
        return "–"
    if low == high:
        return f"{median:.{digits}f}"
    return f"{median:.{digits}f} ({low:.{digits}f}–{high:.{digits}f})"


def markdown_table(policies: Mapping[str, Mapping[str, Any]], with_reference: bool = True) -> str:
    lines = [
        "| policy | unallocated GPU % at 100 % arrived | allocated GPU % at first failure | final allocated GPU % "
        "| pods/s | pods per CPU-s |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, entry in policies.items():
        lines.append(f"| {name} | {_cell(entry['unallocated_gpu_pct_at_100'], 2)} | "
                     f"{_cell(entry['allocation_pct_at_first_failure'], 2)} | "
                     f"{_cell(entry['final_allocation_pct'], 2)} | {_cell(entry['pods_per_second'], 0)} | "
                     f"{_cell(entry['pods_per_cpu_second'], 0)} |")
    if with_reference:
        for name, value in REFERENCE["unallocated_gpu_pct_at_100"].items():
            lines.append(f"| *{name} (FGD paper)* | {value:.2f} | – | – | – | – |")
    return "\n".join(lines)


def _finish(fig: Any, note: str) -> None:
    """Lay the figure out with `note` (the data's attribution, when it is the Alibaba trace) as a
    line at its foot."""
    if note:
        # wrapped to the figure's width: one line of it was wider and lost both ends
        text = textwrap.fill(note, int(fig.get_figwidth() * 72 / (FOOTER_POINTS * 0.6)))
        fig.text(0.5, 0.004, text, ha="center", va="bottom", fontsize=FOOTER_POINTS, color="dimgrey")
        height = (text.count("\n") + 1) * FOOTER_POINTS * 1.3 / (fig.get_figheight() * 72)
        fig.tight_layout(rect=(0, height + 0.01, 1, 1))
    else:
        fig.tight_layout()


def _save(fig: Any, path: Path, note: str) -> None:
    """Write the figure, with `note` (see `_finish`) as the PNG's Description, and close it."""
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Description": note} if note else None)
    plt.close(fig)


def _figure(width: float) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(width, 5.5), dpi=120)


def plot(policies: Mapping[str, Mapping[str, Any]], path: Path, title: str, note: str = "") -> None:
    """allocation.png: see `allocation_figure`."""
    _save(allocation_figure(policies, title, note), path, note)


def identical_curves(policies: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Policy -> the earlier policy whose allocation curve is the same, point for point (on a
    small trace different scorings often coincide; drawn alike, the earlier line was hidden)."""
    first: dict[tuple[tuple[float, ...], tuple[float, ...]], str] = {}
    same = {}
    for name, entry in policies.items():
        curve = entry["allocation_curve"]
        key = (tuple(curve["arrived_gpu_pct"]), tuple(curve["allocated_gpu_pct_median"]))
        if key in first:
            same[name] = first[key]
        else:
            first[key] = name
    return same


def allocation_figure(policies: Mapping[str, Mapping[str, Any]], title: str, note: str = "") -> Any:
    """Allocated GPU % vs arrived GPU demand % (median over seeds), one line per policy; `note`:
    see `_finish`."""
    fig, ax = _figure(9)
    ax.plot([0, 100, 130], [0, 100, 100], linestyle=":", color="grey", label="ideal")
    same = identical_curves(policies)
    styles = ("-", "--", "-.", (0, (1, 1)), (0, (5, 1, 1, 1, 1, 1)))  # near-identical curves stay visible

    def style(i: int, name: str) -> dict[str, Any]:
        """A curve identical to an earlier one is drawn as markers over it, so both show."""
        if name in same:
            return {"linestyle": "None", "marker": "os^vD"[i % 5], "markersize": 4, "markevery": 0.05,
                    "color": f"C{i}"}
        return {"linestyle": styles[i % len(styles)], "color": f"C{i}"}

    for i, (name, entry) in enumerate(policies.items()):
        curve = entry["allocation_curve"]
        label = f"{name} (= {same[name]})" if name in same else name
        ax.plot(curve["arrived_gpu_pct"], curve["allocated_gpu_pct_median"], label=label, linewidth=1.6,
                **style(i, name))
    ax.axvline(100, linestyle="--", color="grey", alpha=0.6)
    ax.set_xlabel("arrived GPU demand (% of cluster GPU capacity)")
    ax.set_ylabel("allocated GPUs (% of capacity, median over seeds)")
    ax.set_title(title)
    ax.set_xlim(0, 130)
    ax.set_ylim(0, 100)
    ax.grid(linestyle="-.", alpha=0.5)
    ax.legend(loc="lower right")
    # the region the headline metric lives in, zoomed; placed above the diagonal, where no curve
    # goes (allocated never exceeds arrived)
    inset = ax.inset_axes((0.07, 0.57, 0.3, 0.37))
    inset.plot([80, 100, 130], [80, 100, 100], linestyle=":", color="grey")
    for i, (name, entry) in enumerate(policies.items()):
        curve = entry["allocation_curve"]
        inset.plot(curve["arrived_gpu_pct"], curve["allocated_gpu_pct_median"], linewidth=1.2, **style(i, name))
    inset.axvline(100, linestyle="--", color="grey", alpha=0.6)
    inset.set_xlim(80, 130)
    inset.set_ylim(75, 100)
    inset.tick_params(labelsize=7)
    inset.grid(linestyle="-.", alpha=0.4)
    _finish(fig, note)
    return fig


# The FGD paper artifact's published figures for the suite's traces (median of seeds 42-51,
# unallocated GPU % at 100 % arrived): the default trace from the paper, the variants from
# ../shared/data/alibaba-gpu-v2023/variants/README.md. Variants the paper did not run have none.
SUITE_REFERENCE: dict[str, dict[str, float]] = {
    "default": {"FGD": 4.77, "BestFit": 7.09},
    "gpuspec10": {"FGD": 5.30, "BestFit": 6.885},
    "gpuspec20": {"FGD": 5.31, "BestFit": 11.535},
    "gpushare40": {"FGD": 6.045, "BestFit": 8.53},
    "gpushare80": {"FGD": 10.91, "BestFit": 13.265},
    "multigpu20": {"FGD": 4.47, "BestFit": 6.27},
    "multigpu30": {"FGD": 3.61, "BestFit": 5.47},
    "cpu050": {"FGD": 5.005, "BestFit": 6.42},
    "cpu100": {"FGD": 4.79, "BestFit": 6.72},
}


SLICE_COLUMNS = {"online_best_fit": "slices alone: online best fit",
                 "offline_best_fit_decreasing": "slices alone: offline BFD"}


def suite_table(by_trace: Mapping[str, Mapping[str, Mapping[str, Any]]],
                slices: Mapping[str, Mapping[str, Mapping[str, float | None]]],
                published: Mapping[str, Mapping[str, float]]) -> str:
    """One row per trace and policy: our median (min–max) beside the published FGD and BestFit,
    and the trace's slice-packing reference (`bench/trace_slices.py`). When FGD itself was replayed
    (policy `fgd`), each row also gets its difference to that replay on the same pod list."""
    replayed = any(FGD_POLICY in policies for policies in by_trace.values())
    extra = " vs FGD replayed |" if replayed else ""
    lines = ["| trace | policy | unallocated GPU % at 100 % arrived | FGD (paper) | BestFit (paper) | vs FGD |"
             + extra + " " + " | ".join(SLICE_COLUMNS.values()) + " |",
             "| --- | --- | ---: | ---: | ---: | ---: |" + " ---: |" * (len(SLICE_COLUMNS) + replayed)]
    for trace, policies in by_trace.items():
        reference = published.get(trace, {})
        fgd, best_fit = reference.get("FGD"), reference.get("BestFit")
        fgd_here = policies.get(FGD_POLICY, {}).get("unallocated_gpu_pct_at_100", {}).get("median")
        packing = slices.get(trace, {})
        slice_cells = " | ".join(_cell(packing[key], 2) if key in packing else "–" for key in SLICE_COLUMNS)
        for name, entry in policies.items():
            summary = entry["unallocated_gpu_pct_at_100"]
            median = summary["median"]
            cells = [_cell(summary, 2), "–" if fgd is None else f"{fgd:.2f}",
                     "–" if best_fit is None else f"{best_fit:.2f}", _difference(median, fgd)]
            if replayed:
                cells.append(_difference(median, fgd_here))
            lines.append(f"| {trace} | {name} | {' | '.join(cells)} | {slice_cells} |")
    return "\n".join(lines)


def _difference(median: float | None, reference: float | None) -> str:
    return f"{median - reference:+.2f}" if median is not None and reference is not None else "–"


def suite_plot(by_trace: Mapping[str, Mapping[str, Mapping[str, Any]]],
               slices: Mapping[str, Mapping[str, Mapping[str, float | None]]],
               published: Mapping[str, Mapping[str, float]], path: Path, title: str, note: str = "") -> None:
    """suite.png: see `suite_figure`."""
    _save(suite_figure(by_trace, slices, published, title, note), path, note)


def suite_figure(by_trace: Mapping[str, Mapping[str, Mapping[str, Any]]],
                 slices: Mapping[str, Mapping[str, Mapping[str, float | None]]],
                 published: Mapping[str, Mapping[str, float]], title: str, note: str = "") -> Any:
    """Unallocated GPU % per trace: one bar per policy (median, min–max whiskers), the paper's
    FGD and BestFit and the slice-packing references as markers; `note`: see `_finish`."""
    traces = list(by_trace)
    names = list(dict.fromkeys(name for policies in by_trace.values() for name in policies))
    fig, ax = _figure(max(9.0, 0.7 * len(traces) * max(1, len(names))))
    width = 0.8 / max(1, len(names))
    for i, name in enumerate(names):
        xs, medians, low, high = [], [], [], []
        for t, trace in enumerate(traces):
            summary = by_trace[trace].get(name, {}).get("unallocated_gpu_pct_at_100")
            if not summary or summary["median"] is None:
                continue
            xs.append(t - 0.4 + width * (i + 0.5))
            medians.append(summary["median"])
            low.append(summary["median"] - summary["min"])
            high.append(summary["max"] - summary["median"])
        ax.bar(xs, medians, width, yerr=[low, high], capsize=2, label=name, color=f"C{i}")
    for marker, key, color in (("_", "FGD", "black"), ("x", "BestFit", "grey")):
        points = [(t, published[trace][key]) for t, trace in enumerate(traces)
                  if key in published.get(trace, {})]
        if points:
            ax.scatter([p[0] for p in points], [p[1] for p in points], marker=marker, s=300 if marker == "_" else 40,
                       color=color, zorder=3, label=f"{key} (paper)")
    for marker, key, color in (("v", "online_best_fit", "C3"), ("^", "offline_best_fit_decreasing", "C2")):
        marks = {t: slices.get(trace, {}).get(key, {}).get("median") for t, trace in enumerate(traces)}
        shown = {t: median for t, median in marks.items() if median is not None}
        if shown:
            ax.scatter(list(shown), list(shown.values()), marker=marker, s=40, color=color, zorder=3,
                       label=SLICE_COLUMNS[key])
    ax.set_xticks(range(len(traces)))
    ax.set_xticklabels(traces, rotation=45, ha="right")
    ax.set_ylabel("unallocated GPU % at 100 % arrived")
    ax.set_title(title)
    ax.grid(axis="y", linestyle="-.", alpha=0.5)
    # beside the axes: inside, it covered the default trace's bars
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, fontsize=8)
    _finish(fig, note)
    return fig
