"""A replica without leader election looks for a live leader before it schedules.

kube-scheduler with `leaderElect: false` never reads the Lease: the operator promises one replica.
Tessera's promise is the GPU: two replicas scheduling the same pods choose devices from two ledgers,
each before it sees the other's Binding, and can give one GPU to two pods. A replica that leads
through the same Lease (another `tessera run` with leader election on, or the Deployment's leader)
is exactly that second scheduler, so a replica without election refuses to start beside it.

"Live" is judged as a standby judges it (`scheduler/kube/leader.py`): never by comparing the Lease's
`renewTime` with this host's wall clock, but by watching the record change on this process's
monotonic clock. A holder whose record changes renews: it leads. A holder whose record stays the
same for its `leaseDurationSeconds` is gone (a crash leaves its record behind), as is a released
(empty) or missing Lease. What this cannot see: a replica with leader election on started *after*
this one takes the free Lease and schedules beside it; running one replica (or turning election
on) is still the operator's part, and the start-up warning says so.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from scheduler.kube.http import KubeHttp
from scheduler.kube.leader import LEASES


async def live_leader(http: KubeHttp, *, namespace: str, name: str, retry_period: float,
                      clock: Callable[[], float] = time.monotonic,
                      sleep: Callable[[float], Awaitable[None]] = anyio.sleep) -> str | None:
    """The identity of a replica that leads through the Lease now, or None (no Lease, no holder, a
    holder that stopped renewing, or a Lease this replica may not read: then it cannot tell, and
    starts as kube-scheduler would). Reads the Lease every `retry_period` while a holder's record
    stands, for at most that record's lease duration."""
    path = f"{LEASES.format(namespace=namespace)}/{name}"
    seen = await _spec(http, path)
    since = clock()
    while seen is not None and seen.get("holderIdentity"):
        duration = seen.get("leaseDurationSeconds")
        if not isinstance(duration, int) or clock() - since >= duration:
            return None
        await sleep(retry_period)
        now = await _spec(http, path)
        if now != seen:
            holder = now.get("holderIdentity") if now is not None else None
            return holder if isinstance(holder, str) and holder else None
    return None


async def _spec(http: KubeHttp, path: str) -> dict[str, Any] | None:
    response = await http.request("GET", path, timeout=10.0, limited=False)
    body = response.json() if response.ok else None
    spec = body.get("spec") if isinstance(body, dict) else None
    return spec if isinstance(spec, dict) else None
