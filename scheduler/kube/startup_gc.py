"""The cyclic garbage collector held off while the caches fill, then the filled caches frozen.

At start-up the informers decode and keep every object in the cluster: at 5,000 nodes and 2,000
pods about a million new dicts and strings in a second. CPython's collector runs a pass every 700
allocations more than deallocations and, as the heap grows, full passes over everything kept so
far, none of which is garbage: measured on that cluster, 0.3 s of a 0.85 s initial sync (JSON
decoding 0.35 -> 0.12 s, pod intake 0.14 -> 0.08 s with the collector off). The objects alive once
the caches are synced are long-lived (modules, the informer stores, the core's state), so
`gc.freeze()` moves them out of the collector's passes for good; objects made later are collected
as usual. The pause is bounded: a sync that cannot finish (apiserver down, RBAC refusing a list)
must not run the process with the collector off for long.
"""

from __future__ import annotations

import gc
from collections.abc import Awaitable, Callable

import anyio

__all__ = ["SYNC_PAUSE_LIMIT_SECONDS", "collect_after_sync"]

SYNC_PAUSE_LIMIT_SECONDS = 30.0


async def collect_after_sync(synced: Callable[[], Awaitable[None]], limit: float = SYNC_PAUSE_LIMIT_SECONDS) -> None:
    """Collector off until `synced()` returns or `limit` seconds pass; then freeze and switch it on
    (also when cancelled). Returns once the collector is back on."""
    gc.disable()
    try:
        with anyio.move_on_after(limit):
            await synced()
    finally:
        gc.freeze()
        gc.enable()
