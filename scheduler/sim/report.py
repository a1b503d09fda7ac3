"""`tessera simulate` output: JSON lines for tools on stdout, a readable summary for people, or the
GPU map page of the end state (`--output html`, the page `tessera run --gpu-map` serves)."""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import IO

import orjson

from scheduler.api.config import SchedulerConfig
from scheduler.core.plugins.preemption.victims import listed_all
from scheduler.core.resources import CPU
from scheduler.core.scheduler import Scheduler
from scheduler.sim.replay import Replay, ReplayStats, WatchEvent, attempt_line, read_events
from scheduler.view.cluster import build_view, removed_by_podgc
from scheduler.view.decisions import DecisionLog
from scheduler.view.model import NODE_DELETED, SLICES, UNREADABLE_LINE, ClusterView, InputWarning, summary_dict
from scheduler.view.page import render_page
from scheduler.view.text import count, ties_line


GPU = "nvidia.com/gpu"


MAX_LINE_ERRORS = 10  # unreadable lines listed one by one; the rest are counted
MAX_LISTED_UNSCHEDULABLE = 20  # beyond this many, unschedulable pods are grouped by message
PROGRESS_EVERY = 5.0  # seconds between progress lines of a long replay
PROGRESS_CHECK = 500  # events between looks at the clock


def run_simulation(path: str, config: SchedulerConfig, explain: bool, output: str, seed: int,
                   summary: bool = False) -> int:
    """Replay `path` and report; 2 (one line) when it holds no watch event at all. `summary`: end
    `-o json`'s lines with the end state's GPU figures (opt-in: a reader of the attempt lines that
    expects a `pod` key in each must not meet it unasked)."""
    errors: list[str] = []
    replay = Replay(config, explain=explain, seed=seed)
    decisions = DecisionLog()
    events = 0
    stream: IO[bytes] = sys.stdin.buffer if path == "-" else open(path, "rb")

    said = time.monotonic()

    def counted(lines: IO[bytes]) -> Iterator[WatchEvent]:
        nonlocal events, said
        for event in read_events(lines, errors):
            events += 1
            if events % PROGRESS_CHECK == 0 and time.monotonic() - said >= PROGRESS_EVERY:
                said = time.monotonic()  # a long replay says how far it got (stderr: stdout is the output)
                print(f"tessera: {path}: {count(events, 'event')} replayed, "
                      f"{count(replay.stats.attempts, 'scheduling attempt')} so far", file=sys.stderr, flush=True)
            yield event

    with stream:
        for attempt in replay.run(counted(stream)):
            decisions.attempt(attempt, replay.now)
            if output == "json":
                sys.stdout.buffer.write(orjson.dumps(attempt_line(attempt, explain)) + b"\n")
    if not events:  # not an events file at all (YAML, pretty-printed JSON, gzip, ...), or empty
        why = errors[0] if errors else "it is empty"
        print(f"tessera: {path} contains no watch events ({why}); expected one JSON watch event per line, "
              'as `tessera record` writes: {"type": "ADDED", "object": {...}}', file=sys.stderr)
        return 2
    told = input_warnings(errors, replay)
    # the GPU map's view of the end state (its nodes' GPUs, the summary line) for the table and JSON,
    # and, with the decisions and warnings, the page: built once
    end = (page_view(replay, decisions, told) if output == "html"
           else build_view(replay.scheduler, source="simulate", now=replay.now))
    if output == "json" and summary:  # the last line: the cluster's GPU figures, as the GPU map's JSON says them
        sys.stdout.buffer.write(orjson.dumps({"summary": summary_dict(end.summary)}) + b"\n")
    if output == "html":
        sys.stdout.write(render_page(end, title=f"Tessera GPU map: {path}").html)
    sys.stdout.flush()
    for warning in told:  # the page shows the same lines
        print(f"tessera: {path}: {warning.message}" if warning.reason == UNREADABLE_LINE
              else f"tessera: warning: {warning.reason}: {warning.message}", file=sys.stderr)
    for node, over in replay.stats.over_capacity.items():
        diverged = replay.stats.diverged.get(node)
        why = (f"the recording {diverged}: the live scheduler decided otherwise, and from here on the replay "
               "does not match the cluster" if diverged else
               "pods in the input are bound beyond what the node offers, so this replay does not match the "
               "cluster; record bound pods before pending ones")
        print(f"tessera: warning: node {node} is over its capacity: {over} ({why})", file=sys.stderr)
    for node, diverged in replay.stats.diverged.items():
        if node not in replay.stats.over_capacity:  # a device held twice, no count over
            print(f"tessera: warning: node {node}: the recording {diverged}: the live scheduler decided "
                  "otherwise, and from here on the replay does not match the cluster", file=sys.stderr)
    for key, overruled in list(replay.stats.overruled.items())[:MAX_LINE_ERRORS]:
        print(f"tessera: warning: pod {key}: {overruled} (the live scheduler decided otherwise: the table shows "
              "the recorded Binding, the JSON lines this replay's own decisions)", file=sys.stderr)
    if len(replay.stats.overruled) > MAX_LINE_ERRORS:
        print(f"tessera: warning: {len(replay.stats.overruled) - MAX_LINE_ERRORS} more pods bound by the recording "
              "where this replay had decided otherwise", file=sys.stderr)
    table = render_table(replay.scheduler, replay.stats, end)
    print(table, file=sys.stdout if output == "table" else sys.stderr)
    return 0


def input_warnings(errors: list[str], replay: Replay) -> list[InputWarning]:
    """What the replay says of its input, on stderr whatever the output and in the page's
    "Input warnings" section: the lines it could not read (the first `MAX_LINE_ERRORS`, then how
    many more), then the core's notices (but those the over-capacity lines say in a replay's
    words: `Replay.said_over_capacity`)."""
    said = [InputWarning(UNREADABLE_LINE, error) for error in errors[:MAX_LINE_ERRORS]]
    if len(errors) > MAX_LINE_ERRORS:
        said.append(InputWarning(UNREADABLE_LINE, f"{len(errors) - MAX_LINE_ERRORS} more unreadable lines"))
    return said + [InputWarning(notice.reason, notice.message) for notice in replay.stats.notices
                   if not replay.said_over_capacity(notice)]


def page_view(replay: Replay, decisions: DecisionLog, warnings: list[InputWarning]) -> ClusterView:
    """The GPU map's view of the replay's end state for its page, with its decisions (virtual
    time) and what it said of its input (`input_warnings`); the table reads the same view."""
    state = replay.scheduler.state
    decisions.prune(pod.key for uid in state.pending if (pod := state.pods.get(uid)) is not None)
    return build_view(replay.scheduler, source="simulate", now=replay.now, reasons=decisions.reasons(),
                      decisions=decisions.recent(), diverged=replay.stats.diverged, overruled=replay.stats.overruled,
                      input_warnings=warnings)


def render_table(scheduler: Scheduler, stats: ReplayStats, view: ClusterView | None = None) -> str:
    """Nodes with their GPU/CPU use and every pod on them — those the replay placed and those the
    input had bound already (a recording of a settled cluster showed nodes in use and no pods) —
    the very nodes the summary line counts (the view's): a Node deleted under its pods is listed as
    `NAME (Node deleted)` with the GPUs they still hold, and a line says the replay keeps them bound,
    then the cluster's GPU figures (the GPU map's summary line) and the pods that did not get a
    node. GPU is `in use/allocatable` as the scheduler counts nvidia.com/gpu (a GPU with slices on
    it is in use), then `(N shared)`: of those, the GPUs holding slices, as the GPU map shows them
    (`view`: the GPU map's view of `scheduler`, built when not given)."""
    if view is None:
        view = build_view(scheduler, source="simulate", now=0.0)
    shared = {node.name: sum(1 for gpu in node.gpus if gpu.state == SLICES) for node in view.nodes}
    by_node: dict[str, list[str]] = defaultdict(list)
    waiting = {key: attempt.message for key, attempt in stats.final.items() if attempt.node is None}
    waiting.update(scheduler.gated())  # never attempted: their gate says why they wait
    waiting = scheduler.never_fits_told(waiting)  # a gang that never fits, or too few pods: as what-if says
    unscheduled = [(key, message) for key, message in sorted(waiting.items())
                   if key not in stats.evicted and scheduler.is_pending(key)]
    placed = already_bound = moved = 0  # of the pods on a node now: placed by this replay, or bound by the input
    for pod in scheduler.placements():
        by_node[pod.node].append(pod.key.rpartition("/")[2])
        final = stats.final.get(pod.key)
        if final is not None and final.node == pod.node:
            placed += 1
        else:
            already_bound += 1
            moved += pod.key in stats.overruled  # a recorded Binding overruled the replay's decision
    usage = {node.name: node.resources for node in scheduler.node_usage((GPU, CPU))}
    rows = [("NODE", "GPU", "CPU", "PODS")]
    deleted: list[str] = []
    for view_node in view.nodes:  # the nodes the summary counts: a Node deleted under its pods too
        name = view_node.name
        if name in usage:
            gpu_used, gpus = usage[name][GPU]
            cpu_used, cpus = usage[name][CPU]
            gpu, cpu = f"{gpu_used}/{gpus}" if gpus else "-", f"{cpu_used / 1000:g}/{cpus / 1000:g}"
        else:  # no Node object: the GPUs its pods (or devices) hold, as the view counts them
            gpus, cpu = view_node.gpus_total, view_node.cpu
            gpu = f"{gpus - view_node.gpus_free}/{gpus}" if gpus else "-"
        if gpus and shared.get(name):
            gpu += f" ({shared[name]} shared)"
        if view_node.deleted:
            deleted.append(name)
        label = f"{name} ({NODE_DELETED})" if view_node.deleted else name
        rows.append((label, gpu, cpu, ", ".join(sorted(by_node.get(name, []))) or "-"))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = ["  ".join(cell.ljust(widths[i]) if i < 3 else cell for i, cell in enumerate(row)) for row in rows]
    lines.append("")
    evicted = f", {len(stats.evicted)} evicted by preemption" if stats.evicted else ""
    bound = f", {already_bound} bound in the input" if already_bound else ""
    if moved:
        bound += f" ({moved} of them against this replay's own decision: see the warnings)"
    lines.append(f"{count(stats.events, 'event')}, {count(stats.attempts, 'scheduling attempt')}: "
                 f"{count(placed, 'pod')} placed, {len(unscheduled)} unschedulable{evicted}{bound}")
    ties = ties_line(stats.ties, stats.placements, stats.seed)
    if ties:
        lines.append(ties)
    lines.append(view.summary.line())
    orphans = sum(len(by_node[name]) for name in deleted)
    if orphans:  # upstream they stay bound: the replay neither drops nor re-places them (their rows name them)
        one = orphans == 1
        lines.append(f"  {count(orphans, 'pod')} bound to a deleted Node ({', '.join(deleted)}): "
                     f"the replay leaves {'it' if one else 'them'} bound, holding what "
                     f"{'it holds' if one else 'they hold'}, as the apiserver does {removed_by_podgc(not one)}")
    if len(unscheduled) <= MAX_LISTED_UNSCHEDULABLE:
        lines += [f"  {key}: {message}" for key, message in unscheduled]
    else:  # thousands of lines would bury the table: one per distinct reason, most common first
        by_message: dict[str, list[str]] = defaultdict(list)
        for key, message in unscheduled:
            by_message[message].append(key)
        for message, keys in sorted(by_message.items(), key=lambda item: (-len(item[1]), item[0])):
            more = f", ... {len(keys) - 3} more" if len(keys) > 3 else ""
            lines.append(f"  {count(len(keys), 'pod')} ({', '.join(keys[:3])}{more}): {message}")
    by_preemptor: dict[str, list[str]] = defaultdict(list)
    for key, by in sorted(stats.evicted.items()):
        by_preemptor[by].append(key)
    for by, keys in sorted(by_preemptor.items()):  # why each went, in what-if's words
        lines.append(f"  evicted for {by}: {listed_all(keys, [stats.evicted_why.get(key, '') for key in keys])}")
    others = scheduler.waiting_for_others()
    if others:  # a configuration whose profiles the pods do not name schedules none of them
        names = ", ".join(f"{name} ({number})" for name, number in sorted(others.items()))
        lines.append(f"{count(sum(others.values()), 'pod')} without a node left to other schedulers: "
                     f"{names}; this configuration's profiles: {', '.join(sorted(scheduler.config.scheduler_names))}")
    return "\n".join(lines)
