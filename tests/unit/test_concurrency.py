"""The live processes' shared concurrency pieces: the level-triggered wake-up and signal handling."""

from __future__ import annotations

import os
import signal

import anyio

from scheduler.kube.concurrency import Wakeup, stop_on_signal


async def test_a_wakeup_set_before_the_wait_is_not_lost_and_is_cleared_by_it() -> None:
    wake = Wakeup()
    wake.set()
    wake.set()  # level-triggered: two sets before a wait are one wake-up
    with anyio.fail_after(1):
        assert await wake.wait()
    assert not wake.is_set()
    assert not await wake.wait(0.01)  # timed out: nothing was set meanwhile


async def test_a_wakeup_set_while_waiting_wakes_the_waiter() -> None:
    wake = Wakeup()
    woken: list[bool] = []

    async def waiter() -> None:
        woken.append(await wake.wait())

    async with anyio.create_task_group() as group:
        group.start_soon(waiter)
        await anyio.sleep(0.01)
        assert woken == []
        wake.set()
    assert woken == [True] and not wake.is_set()


async def test_signals_call_stop_each_time_once_started() -> None:
    calls: list[str] = []
    async with anyio.create_task_group() as group:
        await group.start(stop_on_signal, lambda: calls.append("stop"))
        for expected in (1, 2):  # a second signal during a graceful shutdown is absorbed too
            os.kill(os.getpid(), signal.SIGINT)
            with anyio.fail_after(5):
                while len(calls) < expected:
                    await anyio.sleep(0.005)
        group.cancel_scope.cancel()
    assert calls == ["stop", "stop"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers removed with the task
