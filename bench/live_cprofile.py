"""`python -m bench.live_cprofile OUT.pstats -m scheduler run ...`: run a module under cProfile with
a *CPU-time* clock, for `bench.live --profile cprofile`.

Why next to py-spy: py-spy samples wall-clock time, and on a 2-core machine shared with an
apiserver, etcd and other work, a thread that is runnable but not on a CPU (for instance
preempted inside a loopback `send()` that woke the apiserver) still counts as busy, so its shares
say where the scheduler *waits for a CPU*, not where it *spends* one. cProfile with
`time.process_time` as its timer charges each function only the CPU the process used while it
ran. The price is cProfile's own overhead (the profiled scheduler is slower), so rounds run with
this profiler are for attribution, not for throughput figures.

The statistics are written when the module returns or raises SystemExit (Tessera exits after
SIGTERM), so stop the process with SIGTERM, not SIGKILL.
"""

from __future__ import annotations

import cProfile
import runpy
import sys
import time


def main() -> int:
    if len(sys.argv) < 4 or sys.argv[2] != "-m":
        print("usage: python -m bench.live_cprofile OUT.pstats -m MODULE [ARGS...]", file=sys.stderr)
        return 2
    output, module = sys.argv[1], sys.argv[3]
    sys.argv = [module, *sys.argv[4:]]
    profiler = cProfile.Profile(time.process_time)
    code = 0
    profiler.enable()
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 0
    finally:
        profiler.disable()
        profiler.dump_stats(output)
    return code


if __name__ == "__main__":
    sys.exit(main())
