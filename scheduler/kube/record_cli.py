"""``tessera record``: capture a live cluster's watch events as a ``simulate`` input file.

Why: real situations (a gang that never fits, a fragmented GPU pool) become replay tests only if
they can be captured exactly as the scheduler saw them. The recorder runs the same informers as
the scheduler and writes each event as one line ``{"type": ..., "object": ...}`` — the format
``tessera simulate`` reads — flushed at once, so a recording cut short is still valid.

One ordering choice: until every kind has finished its initial list, events are held back and
the snapshot is then written kind by kind — nodes, devices, classes, groups, PriorityClasses,
PodDisruptionBudgets, StorageClasses, PersistentVolumes and PersistentVolumeClaims, then the pods bound to a node, then the pending pods — so a replay starts
from the bound state and places (or preempts for) pending pods against the whole cluster as it
was. After that, events are written in the order they arrive.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import anyio
import orjson

from scheduler.closed_pipe import reader_gone
from scheduler.kube.concurrency import stop_on_signal
from scheduler.kube.http import ConnectError, KubeHttp, check_apiserver, connect, kubeconfig_path, rejected
from scheduler.kube.informers import SCHEDULER_KINDS, InformerSet, ResourceKind
from scheduler.logs import LogSettingsError, configure_logging
from scheduler.sim.snapshot import replay_rank
from scheduler.view.text import count

__all__ = ["add_parser", "run"]

PROGRESS_EVERY = 5.0
DENIAL_POLL = 0.5  # how soon a refused list stops the recording


def _kinds_by_name() -> dict[str, tuple[ResourceKind, ...]]:
    by_name: dict[str, tuple[ResourceKind, ...]] = {}
    for kind in SCHEDULER_KINDS:
        for name in kind.aliases:  # what --kinds accepts, as kubectl does
            by_name[name] = (*by_name.get(name, ()), kind)
    return by_name


_BY_NAME = _kinds_by_name()
# The same kind in two API groups (the two PodGroup APIs): told apart by apiVersion's group.
_LABELS = {(kind.api_version, kind.kind): kind.label for kind in SCHEDULER_KINDS}


def kind_label(obj: dict[str, Any]) -> str:
    """The recorded kind an object belongs to (`ResourceKind.label`): its kind, qualified by
    the API group where two APIs share it."""
    kind = str(obj.get("kind"))
    return _LABELS.get((str(obj.get("apiVersion")), kind), kind)


def add_parser(subparsers: Any) -> None:
    """Register ``record`` on an ``argparse`` subparsers object."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "record",
        help="capture a live cluster's watch events as JSONL (the simulate input format)",
        description="Watch what the scheduler watches (nodes, pods, ExtendedResources, ResourceClasses, "
                    "PodGroups of both APIs, PodDisruptionBudgets, PriorityClasses, PersistentVolumeClaims, "
                    "PersistentVolumes, StorageClasses; --kinds narrows it) and "
                    "write every event as one JSON line {\"type\", \"object\"} until interrupted "
                    "(SIGINT/SIGTERM) or --duration has passed. Progress goes to stderr.",
    )
    parser.add_argument("--kubeconfig",
                        help="kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, else the in-cluster service account)")
    parser.add_argument("-o", "--output", required=True, help="output JSONL file ('-' for stdout)")
    parser.add_argument("--duration", type=float, default=None, metavar="SECONDS",
                        help="stop after this many seconds (default: until interrupted)")
    parser.add_argument("--kinds", nargs="+", default=None, metavar="KIND",
                        help="what to record: any of nodes, pods, extendedresources, resourceclasses, "
                             "podgroups (both APIs; podgroups.scheduling.x-k8s.io or podgroups.scheduling.k8s.io "
                             "for one), poddisruptionbudgets, priorityclasses (space or comma separated; "
                             "default: all, as the scheduler watches them)")
    parser.set_defaults(func=run)


def _parse_kinds(values: list[str] | None) -> tuple[ResourceKind, ...]:
    if not values:
        return SCHEDULER_KINDS
    names = [name.strip().lower() for value in values for name in value.split(",") if name.strip()]
    if not names:
        raise ValueError("--kinds names no kind; leave it out to record every kind")
    unknown = [name for name in names if name not in _BY_NAME]
    if unknown:
        known = dict.fromkeys(kind.plural for kind in SCHEDULER_KINDS)
        raise ValueError(f"unknown kind(s) {', '.join(unknown)}; choose from {', '.join(known)} "
                         "(or one API's: podgroups.scheduling.k8s.io, podgroups.scheduling.x-k8s.io)")
    chosen = {kind for name in names for kind in _BY_NAME[name]}
    return tuple(kind for kind in SCHEDULER_KINDS if kind in chosen)


def _say(message: str) -> None:
    print(f"tessera record: {message}", file=sys.stderr, flush=True)


class _Writer:
    """The sink: one flushed JSON line per event; holds events back until the initial lists are in.

    Held events are kept apart by origin: each kind's initial list (its snapshot) and the watch
    events that arrived after that kind's list but before every kind was synced. ``listed(kind)``
    tells which is which: it is true once that kind's initial list has been delivered.
    """

    def __init__(self, out: IO[bytes], listed: Callable[[str], bool], failed: Callable[[], None]) -> None:
        self.out = out
        self.counts: Counter[str] = Counter()
        self._listed = listed
        self._failed = failed
        self._snapshot: dict[str, list[tuple[dict[str, Any], bytes]]] | None = {}
        self._held: list[bytes] = []
        self.error: OSError | None = None  # the output could not be written (full disk, closed pipe)

    def _write(self, lines: list[bytes]) -> None:
        if self.error is not None:
            return
        try:
            self.out.writelines(lines)
            self.out.flush()
        except OSError as err:
            self.error = err
            self._failed()

    def __call__(self, event_type: str, obj: dict[str, Any]) -> None:
        kind = kind_label(obj)
        self.counts[kind] += 1
        line = orjson.dumps({"type": event_type, "object": obj}) + b"\n"
        if self._snapshot is None:
            self._write([line])
        elif self._listed(kind):
            self._held.append(line)
        else:
            self._snapshot.setdefault(kind, []).append((obj, line))

    def release(self) -> None:
        """Write the snapshot in the order a replay needs it, then what was held, then stream.

        Kinds go nodes, devices, classes, groups, PriorityClasses, PodDisruptionBudgets, storage
        (StorageClasses, PersistentVolumes, claims), pods (a
        replay tries a pending pod at once: a budget listed after it would protect no one from its
        preemption); among the pods, those bound to a node come before pending ones, so a replay
        counts everything already placed before it places anything (in name order a pending pod
        could take GPUs a bound pod listed after it holds).
        Watch events that came in meanwhile follow in their arrival order.
        """
        if self._snapshot is None:
            return
        snapshot, self._snapshot = self._snapshot, None
        entries = sorted((entry for kind in snapshot.values() for entry in kind), key=lambda entry: replay_rank(entry[0]))
        held, self._held = self._held, []
        self._write([line for _, line in entries] + held)

    def summary(self) -> str:
        total = sum(self.counts.values())
        detail = ", ".join(f"{kind} {count}" for kind, count in sorted(self.counts.items()))
        return count(total, "event") + (f" ({detail})" if detail else "")


async def _record(args: argparse.Namespace, kinds: tuple[ResourceKind, ...]) -> int:
    kubeconfig = kubeconfig_path(args.kubeconfig)
    try:
        api = await connect(kubeconfig)
    except ConnectError as err:
        _say(str(err))
        return 2
    async with api:
        http = KubeHttp(api)
        try:
            response = await check_apiserver(http, kubeconfig)
        except ConnectError as err:
            _say(str(err))
            return 1
        if response.status in (401, 403):
            _say(rejected(http, response))
            return 1
        if args.output == "-":
            return await _record_into(http, kinds, sys.stdout.buffer, args)
        try:
            out = open(args.output, "wb")
        except OSError as err:
            _say(f"cannot write {args.output}: {err.strerror}")
            return 2
        with out:
            return await _record_into(http, kinds, out, args)


async def _record_into(http: KubeHttp, kinds: tuple[ResourceKind, ...], out: IO[bytes],
                       args: argparse.Namespace) -> int:
    listed: dict[str, anyio.Event] = {}
    stop = anyio.Event()
    writer = _Writer(out, lambda kind: kind in listed and listed[kind].is_set(), stop.set)
    informers = InformerSet(http, writer, kinds)
    listed.update((informer.kind.label, informer.synced) for informer in informers.informers)
    started = time.monotonic()
    denied: list[str] = []

    async def release_when_synced() -> None:
        await informers.wait_synced()
        writer.release()
        _say(f"synced: initial lists done, {writer.summary()}")

    async def stop_when_denied() -> None:
        """A refused list would be retried for ever and the recording lack that kind: stop."""
        while (reason := informers.denials.reason) is None:
            await anyio.sleep(DENIAL_POLL)
        denied.append(reason)
        stop.set()

    async def progress() -> None:
        while True:
            await anyio.sleep(PROGRESS_EVERY)
            waiting = [i.kind.label for i in informers.informers if not i.synced.is_set()]
            note = f"; waiting for the initial list of {', '.join(waiting)}" if waiting else ""
            _say(f"{time.monotonic() - started:.0f} s: {writer.summary()}{note}")

    try:
        async with anyio.create_task_group() as group:
            await group.start(stop_on_signal, stop.set, name="signals")
            _say(f"recording {', '.join(kind.label for kind in kinds)} from {http.api.configuration.host} "
                 f"to {'stdout' if args.output == '-' else args.output}" + (f" for {args.duration:g} s" if args.duration else " until interrupted"))
            group.start_soon(informers.run, name="informers")
            group.start_soon(release_when_synced, name="release")
            group.start_soon(progress, name="progress")
            group.start_soon(stop_when_denied, name="denials")
            with anyio.move_on_after(args.duration):
                await stop.wait()
            group.cancel_scope.cancel()
    finally:
        writer.release()  # a recording stopped before every kind synced keeps what it has
    where = "stdout" if args.output == "-" else args.output
    if isinstance(writer.error, BrokenPipeError):  # the reader went away (`| head`): stop quietly
        return reader_gone(out)
    if writer.error is not None:
        _say(f"cannot write {where}: {writer.error.strerror or writer.error}")
        return 1
    if denied:
        _say(f"{denied[0]}; stopped (wrote {writer.summary()} to {where}, without that kind)")
        return 1
    if not informers.synced:
        waiting = [i.kind.label for i in informers.informers if not i.synced.is_set()]
        _say(f"stopped before the initial list of {', '.join(waiting)} was complete: {where} is an "
             f"incomplete snapshot ({writer.summary()})")
        return 1
    _say(f"wrote {writer.summary()} to {where}")
    return 0


def run(args: argparse.Namespace) -> int:
    """Entry point for ``tessera record``; returns the exit status."""
    try:
        kinds = _parse_kinds(args.kinds)
    except ValueError as err:
        _say(str(err))
        return 2
    if args.duration is not None and not args.duration > 0:  # also NaN
        _say("--duration must be positive")
        return 2
    if args.output != "-" and not Path(args.output).parent.is_dir():
        _say(f"cannot write {args.output}: no such directory")
        return 2
    try:
        configure_logging()  # as `tessera run` and `agent`: JSON lines unless stderr is a terminal
    except LogSettingsError as err:
        _say(str(err))
        return 2
    return anyio.run(_record, args, kinds)
