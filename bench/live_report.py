"""Numbers, table and plot for `bench.live`: per-round metrics, medians over runs, ratios.

Definitions (also in bench/README.md):
- pods/s = pods / seconds from the scheduler's process start to the last Binding seen by the
  driver's watch (start-up, informer sync and every bind included);
- bind-phase pods/s = (pods - 1) / seconds from the first to the last bind seen (start-up excluded);
- create->bound = driver clock from the pod's POST answer to its nodeName in the watch; pods are all
  created before the scheduler starts, so this includes the wait for the scheduler;
- start->bound = from the scheduler's process start to the pod's bind (the queueing time of a
  pre-created pod);
- ratios use the medians: Tessera / kube-scheduler at equal settings, Tessera / raw binder.
"""

from __future__ import annotations

import pstats
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["BASELINE", "cprofile_summary", "percentile", "profile_summary", "markdown_table", "plot", "round_metrics", "summarize"]

BASELINE = "tessera-baseline"  # Tessera from another tree (--baseline-tree): a before/after side by side
SCHEDULERS = ("tessera", BASELINE, "kube-scheduler", "raw-binder", "raw-binder+events")
CEILING = "raw-binder"
UNLIMITED = ("raw-binder", "raw-binder+events")  # no client settings: the same rounds in every group
_METRICS = ("pods_per_second", "bind_phase_pods_per_second", "first_bind_seconds", "ready_seconds",
            "create_to_bound_p50", "create_to_bound_p99", "start_to_bound_p50", "start_to_bound_p99",
            "scheduler_cpu_seconds", "scheduler_cpu_user_seconds", "scheduler_cpu_sys_seconds",
            "scheduler_cpu_ms_per_pod", "apiserver_cpu_seconds", "etcd_cpu_seconds")


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))
    return ordered[rank - 1]


def round_metrics(pods: int, start: float, created: Mapping[str, float],
                  bound: Mapping[str, tuple[float, str]]) -> dict[str, Any]:
    times = sorted(t for t, _ in bound.values())
    out: dict[str, Any] = {"bound_seen": len(bound)}
    if not times:
        return out
    last, first = times[-1], times[0]
    create_lat = [t - created[name] for name, (t, _) in bound.items() if name in created]
    start_lat = [t - start for t in times]
    out.update({
        "seconds": last - start,
        "pods_per_second": len(bound) / (last - start) if last > start else None,
        "bind_phase_pods_per_second": (len(times) - 1) / (last - first) if last > first else None,
        "first_bind_seconds": first - start,
        "create_to_bound_p50": percentile(create_lat, 50),
        "create_to_bound_p99": percentile(create_lat, 99),
        "start_to_bound_p50": percentile(start_lat, 50),
        "start_to_bound_p99": percentile(start_lat, 99),
    })
    return out


def _stats(values: Iterable[float | None]) -> dict[str, float | None]:
    clean = [v for v in values if v is not None]
    if not clean:
        return {"median": None, "min": None, "max": None}
    return {"median": statistics.median(clean), "min": min(clean), "max": max(clean)}


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def summarize(rounds: Sequence[Mapping[str, Any]], settings: Sequence[str]) -> dict[str, Any]:
    """{settings: {scheduler: {metric: {median,min,max}, runs, all_bound}, ratios: {...}}}; the raw
    binder has no client settings, so its rounds are the ceiling of every settings group."""
    out: dict[str, Any] = {}
    for setting in settings:
        group: dict[str, Any] = {}
        for scheduler in SCHEDULERS:
            chosen = [r for r in rounds if r["scheduler"] == scheduler
                      and (scheduler in UNLIMITED or r["settings"] == setting)]
            if not chosen:
                continue
            entry: dict[str, Any] = {m: _stats(r.get(m) for r in chosen) for m in _METRICS}
            entry["runs"] = len(chosen)
            entry["all_bound"] = all(r.get("all_bound") for r in chosen)
            group[scheduler] = entry
        median = {s: group[s]["pods_per_second"]["median"] for s in group}
        group["ratios"] = {
            "tessera_vs_kube_scheduler": _ratio(median.get("tessera"), median.get("kube-scheduler")),
            "tessera_vs_ceiling": _ratio(median.get("tessera"), median.get(CEILING)),
            "kube_scheduler_vs_ceiling": _ratio(median.get("kube-scheduler"), median.get(CEILING)),
        }
        if BASELINE in median:
            group["ratios"]["tessera_vs_baseline"] = _ratio(median.get("tessera"), median.get(BASELINE))
            first_bind = {name: group[name]["first_bind_seconds"]["median"] for name in SCHEDULERS if name in group}
            group["first_bind_ratios"] = {name: _ratio(first_bind.get(name), first_bind.get("kube-scheduler"))
                                          for name in ("tessera", BASELINE)}
        if "raw-binder+events" in median:
            group["ratios"]["tessera_vs_ceiling_with_events"] = _ratio(median.get("tessera"),
                                                                       median.get("raw-binder+events"))
        tvk, tvc = group["ratios"]["tessera_vs_kube_scheduler"], group["ratios"]["tessera_vs_ceiling"]
        group["goals"] = {"tessera_ge_kube_scheduler": None if tvk is None else tvk >= 1.0,
                          "tessera_ge_80pct_ceiling": None if tvc is None else tvc >= 0.8}
        out[setting] = group
    return out


def _num(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _cell(stats: Mapping[str, float | None], digits: int = 1) -> str:
    if stats["median"] is None:
        return "–"
    if stats["min"] == stats["max"]:
        return _num(stats["median"], digits)
    return f"{_num(stats['median'], digits)} ({_num(stats['min'], digits)}–{_num(stats['max'], digits)})"


def markdown_table(summary: Mapping[str, Any], labels: Mapping[str, str]) -> str:
    lines = [
        "| settings | scheduler | pods/s | bind-phase pods/s | start→1st bind s | create→bound p50 / p99 s "
        "| start→bound p50 / p99 s | sched CPU ms/pod | CPU s sched / apiserver / etcd | runs | all bound |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for setting, group in summary.items():
        for scheduler in SCHEDULERS:
            entry = group.get(scheduler)
            if entry is None:
                continue
            label = "unlimited" if scheduler in UNLIMITED else labels.get(setting, setting)
            med = {m: entry[m]["median"] for m in _METRICS}
            lines.append(
                f"| {label} | {scheduler} | {_cell(entry['pods_per_second'])} "
                f"| {_cell(entry['bind_phase_pods_per_second'])} | {_num(med['first_bind_seconds'], 2)} "
                f"| {_num(med['create_to_bound_p50'])} / {_num(med['create_to_bound_p99'])} "
                f"| {_num(med['start_to_bound_p50'])} / {_num(med['start_to_bound_p99'])} "
                f"| {_num(med['scheduler_cpu_ms_per_pod'], 2)} "
                f"| {_num(med['scheduler_cpu_seconds'])} / {_num(med['apiserver_cpu_seconds'])} / "
                f"{_num(med['etcd_cpu_seconds'])} | {entry['runs']} | {'yes' if entry['all_bound'] else 'NO'} |")
    with_events = any("tessera_vs_ceiling_with_events" in g["ratios"] for g in summary.values())
    with_baseline = any("tessera_vs_baseline" in g["ratios"] for g in summary.values())
    lines.append("")
    lines.append("| settings | Tessera / kube-scheduler (goal ≥ 1.0) | Tessera / raw binder (goal ≥ 0.8) "
                 "| kube-scheduler / raw binder |" + (" Tessera / raw binder + events |" if with_events else "")
                 + (" Tessera / baseline (pods/s, higher is better) | start→1st bind / kube-scheduler's: "
                    "Tessera, baseline (lower is better) |" if with_baseline else ""))
    lines.append("|---|---|---|---|" + ("---|" if with_events else "") + ("---|---|" if with_baseline else ""))
    for setting, group in summary.items():
        r = group["ratios"]
        extra = f" {_num(r.get('tessera_vs_ceiling_with_events'), 2)} |" if with_events else ""
        if with_baseline:
            first = group.get("first_bind_ratios", {})
            extra += (f" {_num(r.get('tessera_vs_baseline'), 2)} | {_num(first.get('tessera'), 2)}, "
                      f"{_num(first.get(BASELINE), 2)} |")
        lines.append(f"| {labels.get(setting, setting)} | {_num(r['tessera_vs_kube_scheduler'], 2)} "
                     f"| {_num(r['tessera_vs_ceiling'], 2)} | {_num(r['kube_scheduler_vs_ceiling'], 2)} |{extra}")
    return "\n".join(lines)


def plot(summary: Mapping[str, Any], labels: Mapping[str, str], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = list(summary)
    contestants = [s for s in ("tessera", BASELINE, "kube-scheduler") if any(s in summary[k] for k in settings)]
    colors = {"tessera": "#1f77b4", BASELINE: "#9ecae1", "kube-scheduler": "#ff7f0e"}
    fig, ax = plt.subplots(figsize=(8, 4.8))
    width = 0.8 / max(1, len(contestants))
    for i, scheduler in enumerate(contestants):
        xs, heights, low, high = [], [], [], []
        for j, setting in enumerate(settings):
            entry = summary[setting].get(scheduler)
            if entry is None or entry["pods_per_second"]["median"] is None:
                continue
            stats = entry["pods_per_second"]
            xs.append(j + (i - (len(contestants) - 1) / 2) * width)
            heights.append(stats["median"])
            low.append(stats["median"] - stats["min"])
            high.append(stats["max"] - stats["median"])
        ax.bar(xs, heights, width * 0.95, yerr=[low, high], capsize=4, label=scheduler, color=colors[scheduler])
        for x, h in zip(xs, heights):  # inside the bar: the whiskers stay readable
            ax.text(x, h / 2, f"{h:.0f}", ha="center", va="center", color="white", fontsize=8, fontweight="bold")
    ceiling = next((summary[k][CEILING]["pods_per_second"] for k in settings if CEILING in summary[k]), None)
    if ceiling is not None and ceiling["median"] is not None:
        ax.axhspan(ceiling["min"], ceiling["max"], color="grey", alpha=0.15)
        ax.axhline(ceiling["median"], color="grey", linestyle="--",
                   label=f"raw binder (ceiling) {ceiling['median']:.0f} pods/s")
        ax.axhline(0.8 * ceiling["median"], color="grey", linestyle=":", label="80 % of ceiling")
    with_events = next((summary[k]["raw-binder+events"]["pods_per_second"] for k in settings
                        if "raw-binder+events" in summary[k]), None)
    if with_events is not None and with_events["median"] is not None:
        ax.axhline(with_events["median"], color="green", linestyle="-.",
                   label=f"raw binder + 1 Event/pod {with_events['median']:.0f} pods/s")
    ax.set_xticks(range(len(settings)), [labels.get(s, s) for s in settings])
    ax.set_ylabel("pods/s (scheduler start → last bind), median, min–max")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _function(frame: str) -> str:
    """`name (path/file.py:123)` -> `name (path/file.py)`."""
    head, sep, tail = frame.rpartition(":")
    return f"{head})" if sep and tail.rstrip(")").isdigit() else frame


def _file(function: str) -> str:
    """`name (path/file.py)` -> `path/file.py`."""
    return function.rpartition(" (")[2].rstrip(")") or function


def _idle(function: str) -> bool:
    """The event loop waiting for I/O: `EpollSelector.select (selectors.py)` and friends."""
    name, _, where = function.partition(" (")
    return where.startswith("selectors.py") and name.rsplit(".", 1)[-1] in ("select", "poll")


# Coarse buckets for a profile, by the first matching frame of a stack (most specific first).
CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("start-up (imports, config, first LIST)", ("_find_and_load", "load_config", "Informer._list")),
    ("scheduling cycle (core.schedule_next)", ("Scheduler.schedule_next",)),
    ("watch events into the core (core.apply)", ("Scheduler.apply",)),
    ("metrics hooks", ("MetricsHooks.", "StateGauges.")),
    ("binder: POST Binding (HTTP client)", ("Binder._bind",)),
    ("events: POST Event (HTTP client)", ("EventRecorder.",)),
    ("status writer", ("StatusWriter.",)),
    ("informer stream read + JSON decode", ("Informer.",)),
    ("TLS / socket I/O callbacks", ("sslproto.py", "selector_events.py")),
)
_PLUMBING = ("<frozen runpy>", "asyncio/runners.py", "asyncio/base_events.py", "asyncio/events.py",
             "scheduler/__main__.py", "scheduler/cli.py")


def profile_summary(collapsed: Path, top: int = 15) -> dict[str, Any]:
    """Where the main thread's time went, from py-spy's collapsed stacks (`record --format raw
    --idle`). `idle_pct`: share of main-thread samples waiting in the selector (nothing to do, or
    waiting for the apiserver). Everything else is a % of the *busy* main-thread samples:
    `categories` (see CATEGORIES), `self` / `inclusive` per function, `self_by_file`.
    On a machine with more runnable threads than cores, "busy" includes time spent runnable but
    not on a CPU, so compare shares, not absolute times. Other threads (aiohttp's thread-pool
    hops) are counted apart; stacks py-spy read only in part (`--nonblocking`) go to
    `partial_samples`."""
    self_time: Counter[str] = Counter()
    by_file: Counter[str] = Counter()
    total_time: Counter[str] = Counter()
    categories: Counter[str] = Counter()
    samples = idle = other_busy = other_idle = partial = 0
    for line in collapsed.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_function(f) for f in stack.split(";") if f]
        if not frames:
            continue
        if frames[0].startswith("Thread._bootstrap"):
            if frames[-1].startswith("_worker (concurrent/futures/thread.py)"):
                other_idle += count  # a pool thread waiting for work
            else:
                other_busy += count
            continue
        if not frames[0].startswith("_run_module_as_main"):
            partial += count
            continue
        samples += count
        if _idle(frames[-1]):
            idle += count
            continue
        self_time[frames[-1]] += count
        by_file[_file(frames[-1])] += count
        for name in set(frames):
            if not _file(name).startswith(_PLUMBING):
                total_time[name] += count
        joined = ";".join(frames)
        categories[next((label for label, keys in CATEGORIES if any(k in joined for k in keys)), "other")] += count
    busy = samples - idle
    if not busy:
        return {"samples": samples, "idle_pct": 100.0 if samples else None, "partial_samples": partial}

    def pct(counter: Counter[str], n: int = top) -> list[dict[str, Any]]:
        return [{"function": name, "pct": round(100 * c / busy, 1)} for name, c in counter.most_common(n)]

    return {"samples": samples, "busy_samples": busy, "idle_pct": round(100 * idle / samples, 1),
            "categories": [{"category": name, "pct": round(100 * c / busy, 1)} for name, c in categories.most_common()],
            "self": pct(self_time), "self_by_file": pct(by_file), "inclusive": pct(total_time, 25),
            "other_thread_busy_samples": other_busy, "other_thread_idle_samples": other_idle,
            "partial_samples": partial}


def _short(path: str) -> str:
    for marker in ("site-packages/", "/lib/python3.11/", "/work/main/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


# Functions whose cumulative CPU answers "how much went to X" (cProfile counts a coroutine's time
# only while it runs, so these add up to CPU, not to waiting).
CPROFILE_KEYS: tuple[tuple[str, str, str], ...] = (
    ("imports", "<frozen importlib._bootstrap>", "_find_and_load"),
    ("scheduling cycles", "scheduler/core/cycle.py", "schedule_next"),
    ("watch events into the core", "scheduler/core/cycle.py", "apply"),
    ("informer LIST (incl. apply)", "scheduler/kube/informers.py", "_list"),
    ("informer watch (incl. apply)", "scheduler/kube/informers.py", "_watch"),
    ("HTTP requests (KubeHttp.request)", "scheduler/kube/http.py", "request"),
    ("kubernetes_asyncio ApiClient.call_api", "kubernetes_asyncio/client/api_client.py", "__call_api"),
    ("aiohttp ClientSession._request", "aiohttp/client.py", "_request"),
    ("binder (_bind)", "scheduler/kube/binder.py", "_bind"),
    ("event recorder (_write)", "scheduler/kube/recorder.py", "_write"),
    ("metrics hooks on_attempt", "scheduler/kube/run_cli.py", "on_attempt"),
    ("queue counts", "scheduler/core/queue.py", "counts"),
    ("rate limiter acquire", "scheduler/kube/http.py", "acquire"),
)


def cprofile_summary(path: Path, top: int = 20) -> dict[str, Any]:
    """Top functions by own and by cumulative CPU time (% of the process's profiled CPU) from a
    `bench.live_cprofile` pstats file, plus the cumulative share of a few landmark functions."""
    stats = pstats.Stats(str(path))
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = float(stats.total_tt)  # type: ignore[attr-defined]
    if total <= 0:
        return {"cpu_seconds": 0.0}
    rows: list[tuple[str, int, float, float]] = [
        (f"{name} ({_short(file)}:{line})", int(nc), float(tt), float(ct))
        for (file, line, name), (cc, nc, tt, ct, _) in raw.items()]

    def table(index: int) -> list[dict[str, Any]]:
        ordered = sorted(rows, key=lambda r: float(r[index]), reverse=True)[:top]
        return [{"function": r[0], "calls": r[1], "pct": round(100 * float(r[index]) / total, 1)} for r in ordered]

    landmarks = []
    for label, file_part, name in CPROFILE_KEYS:
        cum = max((ct for (file, _, fname), (_, _, _, ct, _) in raw.items()
                   if fname == name and file_part in file), default=0.0)
        landmarks.append({"what": label, "pct": round(100 * cum / total, 1)})
    return {"cpu_seconds": round(total, 2), "self": table(2), "cumulative": table(3), "landmarks": landmarks}
