"""The benchmarks' worker pool: every run in a process of its own when there are several jobs.

Spawned, not forked: forking a process that runs other threads (gRPC, a test runner, an event
loop's executor) can copy a lock one of them holds, and the child hangs for ever.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def run_pool(tasks: Sequence[T], run: Callable[[T], R], init: Callable[..., None], initargs: tuple[Any, ...],
             jobs: int, on_result: Callable[[R], None], *, fresh_workers: bool = False) -> None:
    """`run(task)` for every task, `on_result` for each result as it comes: in this process when
    `jobs` <= 1 or there is one task, else in `jobs` spawned workers prepared by `init(*initargs)`
    (`fresh_workers`: a new worker for every task, for runs that change module state)."""
    if jobs <= 1 or len(tasks) <= 1:
        init(*initargs)
        for task in tasks:
            on_result(run(task))
        return
    context = multiprocessing.get_context("spawn")
    with context.Pool(min(jobs, len(tasks)), initializer=init, initargs=initargs,
                      maxtasksperchild=1 if fresh_workers else None) as pool:
        for result in pool.imap_unordered(run, tasks, chunksize=1):
            on_result(result)
