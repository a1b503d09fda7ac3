"""The collector pause around the initial sync (scheduler.kube.startup_gc)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import anyio
import pytest

from scheduler.kube.startup_gc import collect_after_sync



@pytest.fixture(autouse=True)
def _collector_restored() -> Iterator[None]:
    yield
    gc.unfreeze()
    gc.enable()


async def test_collector_off_until_synced_then_frozen_and_on() -> None:
    synced = anyio.Event()
    seen: list[bool] = []
    async with anyio.create_task_group() as group:
        group.start_soon(collect_after_sync, synced.wait)
        await anyio.sleep(0.01)
        seen.append(gc.isenabled())
        kept = [{"node": i} for i in range(1000)]  # what the caches hold at sync
        synced.set()
    assert seen == [False]
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(kept)


async def test_collector_back_on_after_the_limit_when_sync_never_finishes() -> None:
    never = anyio.Event()
    with anyio.fail_after(5):
        await collect_after_sync(never.wait, limit=0.05)
    assert gc.isenabled()


async def test_collector_back_on_when_cancelled() -> None:
    never = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(collect_after_sync, never.wait)
        await anyio.sleep(0.01)
        assert not gc.isenabled()
        group.cancel_scope.cancel()
    assert gc.isenabled()
