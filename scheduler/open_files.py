"""The open-file limit, raised to its hard maximum when a long-running command starts.

kube-scheduler is a Go binary, and Go's runtime raises RLIMIT_NOFILE's soft limit to the hard one
at start (os package, Go >= 1.19). Containers often inherit a soft limit of 1024 (containerd 2.x:
1024 soft, 524288 hard); a Python process keeps it, so anyone who reaches the probe port and holds
a thousand idle connections would leave the scheduler no descriptor for its own apiserver
connections (watches, Bindings, the Lease renewal). Raising it gives Tessera the same headroom.
"""

from __future__ import annotations

import resource


def raise_open_files_limit() -> int:
    """Soft RLIMIT_NOFILE up to the hard limit (kept where the kernel refuses); the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft == resource.RLIM_INFINITY or soft >= hard:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):  # above the kernel's nr_open, or not allowed: keep what we have
        return soft
    return hard
