"""A component of the local control plane lives exactly as long as the process that started it.

ManagedProcess starts each component in its own session, so nothing else ties it to its parent: a
SIGKILLed dev-cluster (a crash, an OOM kill) left etcd, kube-apiserver and kwok running for good.
Linux's parent-death signal (prctl PR_SET_PDEATHSIG) ends them; it fires when the *thread* that
forked exits, so these tests also start a component from a thread that ends at once, as
``asyncio.to_thread(plane.restart_apiserver)`` does in the e2e tests.
"""

from __future__ import annotations

import datetime
import re
import signal
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from scheduler.kube.controlplane.processes import ManagedProcess
from tests.child_processes import alive, parent_and_child, poll_until

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's")


@pytest.mark.parametrize("from_thread", [False, True], ids=["main-thread", "short-lived-thread"])
def test_a_component_dies_with_the_process_that_started_it(tmp_path: Path, from_thread: bool) -> None:
    parent = textwrap.dedent(f"""
        import sys, threading, time
        from pathlib import Path
        from scheduler.kube.controlplane.processes import ManagedProcess
        proc = ManagedProcess("sleeper", ["sleep", "300"], Path({str(tmp_path / 'sleep.log')!r}))
        if {from_thread}:
            starter = threading.Thread(target=proc.start)
            starter.start()
            starter.join()
        else:
            proc.start()
        print(proc.pid, flush=True)
        time.sleep(300)
    """)
    with parent_and_child(parent) as (runner, child):
        assert alive(child)
        runner.send_signal(signal.SIGKILL)
        runner.wait(30)
        assert poll_until(lambda: not alive(child), 10), "the component outlived its SIGKILLed parent"


def test_a_component_started_from_a_thread_outlives_the_thread(tmp_path: Path) -> None:
    """The parent-death signal fires when the forking thread exits: a component must not die with
    the worker thread of ``asyncio.to_thread`` that started it."""
    proc = ManagedProcess("sleeper", ["sleep", "300"], tmp_path / "sleep.log")
    starter = threading.Thread(target=proc.start)
    starter.start()
    starter.join()
    try:
        assert not poll_until(lambda: not proc.running(), 1.0), f"exited with {proc.returncode()}"
    finally:
        proc.stop(grace=1.0)


def test_each_start_is_marked_in_the_log_with_its_date_and_time(tmp_path: Path) -> None:
    """The component logs in dev-cluster's --dir are appended to across runs, each start after a
    `===` line; a new user's trial found only `=== 06:31:22` there, which cannot tell yesterday's
    run from today's (and was local time, unmarked). The mark is ISO 8601 in UTC."""
    log = tmp_path / "echo.log"
    for _ in range(2):
        proc = ManagedProcess("echo", ["echo", "hello"], log)
        before = time.time()
        proc.start()
        assert poll_until(lambda: not proc.running(), 5.0)
    marks = [line for line in log.read_text().splitlines() if line.startswith("===")]
    assert len(marks) == 2
    for mark in marks:
        assert re.fullmatch(r"=== \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ starting echo hello", mark), mark
        stamp = datetime.datetime.strptime(mark.split()[1], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
        assert before - 2 <= stamp.timestamp() <= time.time() + 1
