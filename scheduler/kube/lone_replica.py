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
(empty) or missing Lease. A replica with leader election started *after* this one takes the free
Lease and schedules beside it; this one cannot stop it, so it keeps watching the Lease for its whole
life and logs an error naming each new leader (`watch_for_a_leader`). Running one replica (or
turning election on) is still the operator's part, and the start-up warning says so.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import structlog

from scheduler.kube.http import KubeHttp
from scheduler.kube.leader import LEASES
from scheduler.logs import describe_error

log = structlog.get_logger()


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


async def watch_for_a_leader(http: KubeHttp, *, namespace: str, name: str, retry_period: float, every: float) -> None:
    """Every `every` seconds, for the replica's life: a replica that leads through the Lease is
    scheduling beside this one; say so once per holder, as an error (an operator must stop one).
    A failed look is retried at the next; it never ends the replica."""
    lease = f"{namespace}/{name}"
    said: str | None = None
    while True:
        await anyio.sleep(every)
        try:
            holder = await live_leader(http, namespace=namespace, name=name, retry_period=retry_period)
        except Exception as err:  # noqa: BLE001 - a transport error: look again next time
            log.warning("leader_election.lease_unreadable", lease=lease, error=describe_error(err))
            continue
        if holder is not None and holder != said:
            log.error("leader_election.rival", lease=lease, holder=holder,
                      message=f"leaderElect is false, and {holder} now leads through the Lease {lease}: both "
                              "schedule the same pods and could give one GPU to two pods. Stop one of them")
        said = holder
