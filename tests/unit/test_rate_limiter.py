"""The client-side token bucket: burst first, then exactly qps, with time spent elsewhere kept."""

from __future__ import annotations

from scheduler.kube.http import RateLimiter


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


async def test_burst_then_steady_rate() -> None:
    t = FakeTime()
    limiter = RateLimiter(qps=10, burst=5, clock=t.clock, sleep=t.sleep)
    for _ in range(5):
        await limiter.acquire()
    assert t.sleeps == [] and t.now == 0.0
    for _ in range(10):
        await limiter.acquire()
    assert abs(t.now - 1.0) < 1e-9  # ten more tokens at 10/s take exactly one second


async def test_time_spent_elsewhere_counts_towards_the_next_token() -> None:
    t = FakeTime()
    limiter = RateLimiter(qps=10, burst=1, clock=t.clock, sleep=t.sleep)
    await limiter.acquire()
    t.now += 0.07  # the caller was busy for 70 ms
    await limiter.acquire()
    assert abs(t.sleeps[-1] - 0.03) < 1e-9  # only the remaining 30 ms are waited


async def test_concurrent_reservations_queue_up() -> None:
    t = FakeTime()
    limiter = RateLimiter(qps=100, burst=1, clock=t.clock, sleep=t.sleep)
    await limiter.acquire()
    # three callers reserve at the same instant: they wait 10, 20 and 30 ms
    import asyncio

    async def reserve() -> None:
        await limiter.acquire()

    start = t.now
    waits = []
    for _ in range(3):
        before = len(t.sleeps)
        task = asyncio.create_task(reserve())
        await asyncio.sleep(0)
        waits.append(t.sleeps[before] if len(t.sleeps) > before else 0.0)
        t.now = start  # the fake sleep advanced the clock; all three reserved at `start`
        await task
    assert [round(w, 6) for w in waits] == [0.01, 0.02, 0.03]
