"""A process the test harness starts dies with the process that started it.

`tessera_testing.faultrun.SchedulerProcess` starts `python -m scheduler run` in its own session (so
kill -9 takes its whole group). Nothing else tied it to pytest: a `make test` stopped with SIGTERM
(a CI timeout, timeout(1)) left a scheduler reparented to PID 1, retrying its lease against a gone
apiserver for minutes. The harness now starts it the way dev-cluster starts its components, with
Linux's parent-death signal.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's")

_REPO = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _until(check: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not check() and time.monotonic() < deadline:
        time.sleep(0.05)
    return check()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
@pytest.mark.parametrize("from_thread", [False, True], ids=["main-thread", "short-lived-thread"])
def test_a_scheduler_process_dies_with_the_harness(tmp_path: Path, sig: signal.Signals, from_thread: bool) -> None:
    # The child's command is swapped for `sleep` (a real scheduler needs an apiserver); what is
    # under test is how SchedulerProcess.start starts it. A short-lived starting thread is how the
    # e2e tests start replicas (asyncio.to_thread), and must not end the child with it.
    harness = textwrap.dedent(f"""
        import threading, time
        from pathlib import Path
        from tessera_testing.faultrun import SchedulerProcess
        work = Path({str(tmp_path)!r})
        proc = SchedulerProcess(work / "kubeconfig", work / "config.yaml", work, "orphan-check")
        proc.args = ["sleep", "300"]
        if {from_thread}:
            starter = threading.Thread(target=proc.start)
            starter.start()
            starter.join()
        else:
            proc.start()
        print(proc.proc.pid, flush=True)
        time.sleep(300)
    """)
    env = {**os.environ, "PYTHONPATH": str(_REPO)}
    runner = subprocess.Popen([sys.executable, "-c", harness], stdout=subprocess.PIPE, env=env, cwd=_REPO)
    assert runner.stdout is not None
    child = int(runner.stdout.readline())
    try:
        assert _alive(child)
        time.sleep(0.5)  # the starting thread has ended: the child must still run
        assert _alive(child), "the child died with the thread that started it"
        runner.send_signal(sig)
        runner.wait(30)
        assert _until(lambda: not _alive(child), 5), f"the scheduler process outlived its {sig.name}ed harness"
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait(30)
        if _alive(child):
            os.kill(child, signal.SIGKILL)
