"""A process the test harness starts dies with the process that started it.

`tessera_testing.faultrun.SchedulerProcess` starts `python -m scheduler run` in its own session (so
kill -9 takes its whole group). Nothing else tied it to pytest: a `make test` stopped with SIGTERM
(a CI timeout, timeout(1)) left a scheduler reparented to PID 1, retrying its lease against a gone
apiserver for minutes. The harness now starts it the way dev-cluster starts its components, with
Linux's parent-death signal.
"""

from __future__ import annotations

import signal
import sys
import textwrap
from pathlib import Path

import pytest

from tests.child_processes import alive, parent_and_child, poll_until

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's")


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
    with parent_and_child(harness) as (runner, child):
        # the child must outlive the thread that started it (the parent-death signal fires when the
        # forking thread exits, possibly after join() returned): alive throughout half a second
        assert not poll_until(lambda: not alive(child), 0.5), "the child died with the thread that started it"
        runner.send_signal(sig)
        runner.wait(30)
        assert poll_until(lambda: not alive(child), 5), f"the scheduler process outlived its {sig.name}ed harness"
