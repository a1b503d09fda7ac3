"""Concurrency pieces the live processes share (`tessera run`, `record`, `agent`), on anyio.

Every long-lived task of those processes runs in an anyio task group owned by the object that
starts it, so no task outlives its owner: cancelling an owner (shutdown, a lost leadership, a test)
ends everything it started. Four small helpers recur across the owners:

- `TaskHost`: the task group of an owner whose tasks are handed to it one by one from outside
  (Bindings to the Binder, device-plugin endpoints to the PluginManager): it lives while the
  host's `run()` runs, and cancelling `run()` cancels every task it holds;
- `InFlight`: writes of a leadership term still out (Bindings, preemptions), for the graceful
  shutdown's drain: the Lease is handed over only once each has ended with its outcome known —
  one cut short mid-request may still land, so it is never counted as drained;
- `Wakeup`: "something changed, look again", set from synchronous callbacks (watch events, binding
  results) and awaited by one worker task with an optional timeout. anyio Events cannot be cleared,
  so the fired one is replaced by a fresh one when the worker wakes;
- `stop_on_signal`: SIGTERM/SIGINT turned into a call (set a stop Event, cancel a scope), installed
  before the process starts working, so an early signal is never lost to the default handler.
"""

from __future__ import annotations

import math
import signal
from collections.abc import Callable

import anyio
from anyio.abc import TaskGroup, TaskStatus

__all__ = ["MAX_IN_FLIGHT", "InFlight", "TaskHost", "Wakeup", "stop_on_signal"]

# requests one writer (the Binder, the term fence) has out at once, outside the rate limiter
MAX_IN_FLIGHT = 64


class TaskHost:
    """A task group that lives while `run()` runs, for tasks started from outside it."""

    def __init__(self, owner: str) -> None:
        self._owner = owner
        self._group: TaskGroup | None = None

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Host tasks until cancelled; cancelling it cancels every task it holds.

        Start it with `await group.start(host.run)`: `group` works once that returns."""
        async with anyio.create_task_group() as group:
            self._group = group
            try:
                task_status.started()
                await anyio.sleep_forever()
            finally:
                self._group = None

    @property
    def group(self) -> TaskGroup:
        if self._group is None:
            raise RuntimeError(f"the {self._owner} is not running: start {self._owner}.run() in its owner's task group first")
        return self._group


class InFlight:
    """A count of pieces of work under way, and of those cut short (cancelled before their
    outcome was known), with a drain that waits for the count to reach 0.

    client-go's `ReleaseOnCancel` asks that "all code guarded by this lease has successfully
    completed" before the Lease is released: `drain` answers whether it has."""

    def __init__(self) -> None:
        self.count = 0
        self.cut = 0
        self._idle = anyio.Event()  # set while nothing is under way
        self._idle.set()

    def started(self) -> None:
        if self.count == 0:
            self._idle = anyio.Event()
        self.count += 1

    def ended(self, *, settled: bool) -> None:
        """One piece ended; `settled`: with its outcome known (False: cut short, may still land)."""
        if not settled:
            self.cut += 1
        self.count -= 1
        if self.count == 0:
            self._idle.set()

    async def drain(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds until nothing is under way (pieces started meanwhile
        included); True if every piece ever started ended settled. Nothing is cancelled here."""
        with anyio.move_on_after(timeout):
            while self.count:
                await self._idle.wait()
        return self.count == 0 and self.cut == 0


class Wakeup:
    """A level-triggered wake-up for one waiting task."""

    def __init__(self) -> None:
        self._event = anyio.Event()

    def set(self) -> None:
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    async def wait(self, timeout: float = math.inf) -> bool:
        """Until `set()` or `timeout` seconds; True (and cleared) if it was set."""
        with anyio.move_on_after(timeout):
            await self._event.wait()
        if not self._event.is_set():
            return False
        self._event = anyio.Event()
        return True


async def stop_on_signal(stop: Callable[[], None], *,
                         task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    """Call `stop` on every SIGTERM and SIGINT until cancelled. Start it with
    `await group.start(stop_on_signal, ...)`: it reports started once the handlers are installed.
    The handlers stay while it runs, so a second signal during a graceful shutdown calls `stop`
    again instead of killing the process (`tessera run` then exits at once with 1, as
    kube-scheduler; `record` and `agent` absorb it)."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        task_status.started()
        async for _ in signals:
            stop()
