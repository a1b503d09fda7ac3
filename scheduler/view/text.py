"""The view model for a terminal: kubectl-style aligned columns.

Upper-case headers, columns separated by three spaces, no trailing blanks, `-` for an empty cell:
what `kubectl get` prints, so the output reads the same and `awk`/`column` work on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from scheduler.first_few import first_few
from scheduler.view import model as m

GAP = "   "
# under `nodes`' table when a row is `counted`: the pod's name on a GPU row reads as that device's
# assignment, though a plain count request names no device (the view fills the first free rows)
COUNTED_FOOTNOTE = "counted: plain nvidia.com/gpu requests; the device plugin on the node picks which GPUs"
# a GPU's holders named in the table's PODS column, at most: eight slices' names (~230 characters)
# wrapped over the next rows; `-o json` keeps them all
HOLDERS_SHOWN = 3
_TERMINAL = str.maketrans({"\x1b": "^[", "\r": "\\r"})


def escape_terminal(text: str) -> str:
    """ESC as `^[` and CR as `\\r`, as kubectl's printers write them (cli-runtime's
    `printers.EscapeTerminal`, kubernetes#101695): a value anyone may set on an object (a device's
    model, an Event's message) is shown, never sent to the terminal as a control sequence that moves
    the cursor, rewrites the lines above or sets the window title."""
    return text.translate(_TERMINAL)


def count(n: int, noun: str) -> str:
    """`1 event`, `2 events`: a count with its noun, for summary lines."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def tie_note(tied_with: Sequence[str], tied_count: int, score: int | None) -> str:
    """What a dry run's node means when others scored the same: the scheduler's pick among equal
    totals is random (kube-scheduler's selectHost; Tessera's live loop seeds its own), so the
    dry run's node is one of these, not a prediction. `tied_with` names some of the
    `tied_count` (`Attempt.tied`). "" when nothing tied."""
    if not tied_count:
        return ""
    named = ", ".join([*tied_with, *(["…"] if tied_count > len(tied_with) else [])])
    return f"tied with {count(tied_count, 'other node')} on score {score} ({named}): the scheduler picks one of them at random"


def ties_line(ties: int, decisions: int, seed: int) -> str:
    """The summary line of a replay (`tessera simulate`, `kubectl tessera what-if`) whose placements
    were picks among equally scored nodes: `ties` of its `decisions` (placing attempts) had such a
    pick, made by the replay's seeded tie-break. "" when none did.

    Why: the summaries read as a verdict, though a tie-break decided them — a planner's trial
    refused 2, 2, 9 and 6 pods of one recording under seeds 0-3, the refused count shown as the
    answer each time (the live scheduler's pick among equals is random too)."""
    if not ties:
        return ""
    return (f"Ties: {ties} of {count(decisions, 'placing decision')} picked among equally scored nodes (the "
            f"seeded tie-break, --seed {seed}); another --seed may place pods differently")


def score_sum(total: int, parts: Sequence[m.PluginScore]) -> str:
    """A node's total score and how it adds up: `score 699 = TesseraFragmentation 60x10 +
    InterPodAffinity 100x2 ...`, each plugin's normalised score (0..100) times its weight, the
    largest part first; plugins scoring 0 left out (`-o json` lists them all)."""
    shown = sorted((p for p in parts if p.score and p.weight), key=lambda p: (-p.score * p.weight, p.plugin))
    return f"score {total}" + (" = " + " + ".join(f"{p.plugin} {p.score}x{p.weight}" for p in shown) if shown else "")


def columns(rows: Sequence[Sequence[str | None]]) -> str:
    """Rows (the first one the header) as left-aligned columns; the last column is not padded.
    An empty cell prints `-`; None leaves it blank (a node's name only on its first GPU row).
    Cells are terminal-escaped first, so the columns align on what is printed."""
    if not rows:
        return ""
    cells = [["" if cell is None else escape_terminal(cell) or "-" for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in cells if i < len(row)) for i in range(max(len(row) for row in cells))]
    lines = []
    for row in cells:
        padded = [cell.ljust(widths[i]) if i < len(row) - 1 else cell for i, cell in enumerate(row)]
        lines.append(GAP.join(padded).rstrip())
    return "\n".join(lines)


def holders(gpu: m.GpuView) -> str:
    """`ns/a (8Gi), ns/b (held)`: who holds the GPU, with slice amounts and non-bound states, the
    first `HOLDERS_SHOWN` named (in the view's order) and the rest counted (`first_few`)."""
    out = []
    for holder in gpu.holders:
        notes = [note for note in (holder.amount, "" if holder.status == m.BOUND else holder.status) if note]
        out.append(f"{holder.pod} ({', '.join(notes)})" if notes else holder.pod)
    return first_few(out, HOLDERS_SHOWN)


def gpu_use(gpu: m.GpuView) -> str:
    if gpu.used:
        return gpu.used
    return "all" if gpu.fill >= 1.0 else ""


def render_nodes(view: m.ClusterView, wide: bool = False) -> str:
    """`kubectl tessera nodes`: one row per GPU (the node named on its first; REASON last, as
    kubectl's MESSAGE: a conflict's claimants, the pod that fences the node), node notes, the
    pods waiting for the allocation gate, and the summary line. `wide` (`-o wide`, as kubectl's):
    also each GPU's NUMA node and NVLink group, which the device planner packs by."""
    where = ["NUMA", "NVLINK"] if wide else []
    rows: list[list[str | None]] = [["NODE", "GPU", "MODEL", "MEMORY", *where, "STATE", "USE", "PODS", "REASON"]]
    notes: list[str] = []
    any_counted = False
    for node in view.nodes:
        label = node.name + (" (cordoned)" if node.cordoned else f" ({m.NODE_DELETED})" if node.deleted else "")
        if not node.gpus:
            rows.append([label, *[""] * (len(rows[0]) - 1)])
        for i, gpu in enumerate(node.gpus):
            placed = [gpu.numa_node or "-", gpu.nvlink_group or "-"] if wide else []
            # the state the summary and tessera_devices count it in: a free GPU of a cordoned node is cordoned
            state = m.counted_as(gpu.state, node.cordoned)
            reason = gpu.reason or ("node cordoned" if state != gpu.state else "")
            any_counted |= state == m.COUNTED
            if node.agent_silent_for is not None:  # every GPU of it: their health is the agent's last word
                silent = f"node agent silent {duration(node.agent_silent_for)}"
                reason = f"{reason}; {silent}" if reason else silent
            rows.append([label if i == 0 else None, str(gpu.index), gpu.model, gpu.memory, *placed, state,
                         gpu_use(gpu), holders(gpu), reason])
        notes += [f"{node.name}: {note}" for note in node.notes]
        if node.taints:  # as the page: its free GPUs are free only to pods that tolerate these
            notes.append(f"{node.name}: taints: {', '.join(node.taints)}")
    parts = [columns(rows) if view.nodes else "No nodes."]
    if any_counted:
        parts.append(COUNTED_FOOTNOTE)
    if notes:
        parts.append("\n".join(notes))
    parts.append(view.summary.line())
    return "\n\n".join(parts)


def age(timestamp: str, now: float) -> str:
    """An RFC 3339 time as kubectl's age (`45s`, `3m12s`, `2h`, `5d`); the text itself if unreadable."""
    try:
        seconds = int(now - datetime.fromisoformat(timestamp).timestamp())
    except ValueError:
        return timestamp
    return duration(seconds)


def duration(seconds: float) -> str:
    """A number of seconds as kubectl's age (`45s`, `3m12s`, `2h`, `5d`)."""
    seconds = max(0, int(seconds))
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if seconds < 120:
        return f"{seconds}s"
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if hours < 3:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if days < 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    return f"{days}d" if days < 730 else f"{days // 365}y"
