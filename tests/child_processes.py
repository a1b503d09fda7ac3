"""What the parent-death tests share (tests/unit/test_managed_process.py,
tests/unit/test_harness_children.py): whether a pid still runs, polling for a condition, and a
Python parent process that starts a child and reports its pid, cleaned up whatever the test did."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def alive(pid: int) -> bool:
    """The process runs (exists and is not a zombie awaiting its parent's wait)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def poll_until(check: Callable[[], bool], timeout: float) -> bool:
    """`check()` once it holds, or its value after `timeout` seconds (polled every 50 ms)."""
    deadline = time.monotonic() + timeout
    while not check() and time.monotonic() < deadline:
        time.sleep(0.05)
    return check()


@contextmanager
def parent_and_child(script: str) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """Run `script` (it starts a child and prints the child's pid on its first line) in a Python
    process with this repository on its path; yield that parent and the child's pid. Afterwards
    both are killed if they still run, so a failed assertion leaves nothing behind."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    runner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, env=env, cwd=REPO)
    assert runner.stdout is not None
    child = int(runner.stdout.readline())
    try:
        yield runner, child
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait(30)
        if alive(child):
            os.kill(child, signal.SIGKILL)
