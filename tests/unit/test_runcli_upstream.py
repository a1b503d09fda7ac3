"""Review of `tessera run`'s process life (scheduler/kube/run_cli.py, the binder's drain,
scheduler/logs.py): shutdown on signals, the Lease hand-over and the Bindings in flight (run on
the fake apiserver with the real `_run`), and the log settings. Each test failed before its fix."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator

import anyio
import pytest
import structlog
from anyio.abc import TaskStatus

from scheduler.api.config import load_config
from scheduler.kube import run_cli
from scheduler.kube.binder import Binder, Binding
from scheduler.kube.http import KubeHttp, Response
from scheduler.kube.loop import SchedulerLoop
from scheduler.sim import builders as b
from tests.fakeapi import Call, FakeApi
from tests.fakelease import LeaseServer
from tests.helpers import until


def _cluster() -> tuple[FakeApi, LeaseServer]:
    """One 4-GPU node, one pending pod asking for a GPU whose Binding the apiserver never answers
    (a request still out at shutdown), and a Lease endpoint."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=4)]
    api.add_pod(b.pod("p", requests={"nvidia.com/gpu": 1}))
    api.fail_next("POST", "/binding", stall=True)
    return api, _serve_lease(api)


def _serve_lease(api: FakeApi) -> LeaseServer:
    """A Lease endpoint on `api` (coordination.k8s.io requests go to it)."""
    lease = LeaseServer()

    def leases(call: Call) -> Response | None:
        if not call.path.startswith("/apis/coordination.k8s.io/"):
            return None
        return lease._apply(call.method, call.body)

    api.handlers.append(leases)
    return lease


class Signals:
    """Stands in for `stop_on_signal`: `send()` is one SIGTERM/SIGINT as the handler delivers it."""

    def __init__(self) -> None:
        self.handlers: list[Callable[[], None]] = []

    async def __call__(self, stop: Callable[[], None], *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        self.handlers.append(stop)
        task_status.started()
        await anyio.sleep_forever()

    def send(self) -> None:
        self.handlers[0]()


def _args() -> argparse.Namespace:
    return argparse.Namespace(identity="me", gpu_map=False, bind_address="127.0.0.1", port=0)


async def _run_into(result: list[int], api: FakeApi) -> None:
    """`tessera run`'s body on the fake apiserver (one client for writes, one for watches); its exit
    code goes into `result`."""
    result.append(await run_cli._run(_args(), load_config(None), KubeHttp(api), KubeHttp(api), None))  # type: ignore[arg-type]


async def test_a_loop_crash_during_the_drain_still_leaves_the_lease_to_expire(monkeypatch: pytest.MonkeyPatch) -> None:
    """`step_down` read "did a part crash?" before the drain. A loop that crashes while the drain
    waits cancels its Bindings mid-request; they counted themselves out, so the drain found nothing
    in flight and the Lease was handed over at once although the cut POST may still land: the
    successor can give the pod's GPU to another pod meanwhile. client-go's `ReleaseOnCancel`
    (tools/leaderelection/leaderelection.go): "you must ensure all code guarded by this lease has
    successfully completed prior to cancelling the context, or you may have two processes
    simultaneously acting on the critical path". A Binding cut short has not completed."""
    api, lease = _cluster()
    signals = Signals()
    monkeypatch.setattr(run_cli, "stop_on_signal", signals)

    class CrashesWhileDraining(SchedulerLoop):
        async def run(self) -> None:
            async with anyio.create_task_group() as group:
                group.start_soon(SchedulerLoop.run, self)
                while not self.stopping:
                    await anyio.sleep(0.005)
                await anyio.sleep(0.05)  # step_down is waiting in the drain now
                raise RuntimeError("a bug in one of the loop's tasks")

    monkeypatch.setattr(run_cli, "SchedulerLoop", CrashesWhileDraining)
    result: list[int] = []

    async with anyio.create_task_group() as group:
        group.start_soon(_run_into, result, api)
        await until(lambda: api.stalled == 1 and lease.holder == "me")
        signals.send()
    assert result == [1]
    assert lease.holder == "me", "the Lease was handed over while the crashed loop's Binding may still land"


async def test_a_second_signal_exits_at_once_with_1_and_leaves_the_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    """kube-scheduler (k8s.io/apiserver pkg/server/signal.go `SetupSignalHandler`): the first
    SIGTERM/SIGINT starts the graceful shutdown, "If a second signal is caught, the program is
    terminated with exit code 1". Tessera absorbed every later signal, so a second Ctrl-C during
    the drain (up to 10 s), the Lease release and the server stop did nothing. Exiting early must
    not hand the Lease over (the Binding still out is cut and may land): it is left to expire."""
    api, lease = _cluster()
    signals = Signals()
    monkeypatch.setattr(run_cli, "stop_on_signal", signals)
    result: list[int] = []

    async with anyio.create_task_group() as group:
        group.start_soon(_run_into, result, api)
        await until(lambda: api.stalled == 1 and lease.holder == "me")
        signals.send()
        await anyio.sleep(0.1)  # draining: the Binding is still out
        assert not result
        signals.send()
        with anyio.fail_after(3):
            await until(lambda: bool(result))
    assert result == [1]
    assert lease.holder == "me"
    assert api.stalled == 0  # the Binding's request was cut, not left running


async def test_a_binding_cut_short_is_not_drained() -> None:
    """`Binder.drain` answered True once the flight count reached 0, and a Binding cancelled
    mid-request (its owner, the loop, crashed) leaves the count as a settled one does: the
    shutdown then handed the Lease over while that POST could still bind the pod. Only Bindings
    whose outcome is known are drained."""
    api = FakeApi()
    api.add_pod(b.pod("p", requests={"nvidia.com/gpu": 1}))
    api.fail_next("POST", "/binding", stall=True)
    binder = Binder(api, lambda result: None)  # type: ignore[arg-type]
    async with anyio.create_task_group() as owner:
        await owner.start(binder.run)
        binder.submit(Binding("uid-p", "default", "p", "n"))
        await until(lambda: api.stalled == 1)
        owner.cancel_scope.cancel()  # the loop crashed: its task group cancels the binder
    assert binder.in_flight == 0
    assert await binder.drain(1.0) is False


@pytest.fixture
def _restore_logging() -> Iterator[None]:
    yield
    structlog.reset_defaults()


@pytest.mark.usefixtures("_restore_logging")
@pytest.mark.parametrize(("name", "value"), [("TESSERA_LOG_LEVEL", "trace"), ("TESSERA_LOG_LEVEL", "verbose"),
                                             ("TESSERA_LOG_FORMAT", "text")])
def test_an_unknown_log_level_or_format_is_one_line_and_exit_2(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str],
                                                              name: str, value: str) -> None:
    """TESSERA_LOG_LEVEL=trace (or any typo) silently logged at info, and TESSERA_LOG_FORMAT=text
    silently wrote JSON: the operator who asked for the decision lines got none and no word why.
    kube-scheduler refuses a logging setting it does not know before it starts (component-base
    `logsapi.ValidateAndApply`: "Unsupported log format", printed on stderr, exit 1; `-v=abc` is
    a flag error); Tessera says so in one line and exits 2, as for a bad --config."""
    monkeypatch.setenv(name, value)

    def no_config(path: str | None) -> None:
        raise AssertionError("started although the log setting is unknown")

    monkeypatch.setattr(run_cli, "load_config_or_report", no_config)
    assert run_cli.run(argparse.Namespace(config=None)) == 2
    choices = "debug, info, warning or error" if name == "TESSERA_LOG_LEVEL" else "json or console"
    assert capsys.readouterr().err.splitlines() == [f"tessera: {name}={value!r} is not one of {choices}"]


async def test_an_eviction_still_out_at_shutdown_leaves_the_lease_to_expire(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shutdown drained the Bindings only: a preemption's DELETE still out (or a victim's
    mark) did not hold the Lease back, so it was handed over at once and the eviction cut with the
    task group — a request that may still land after the standby took over and decided afresh
    (over-evicting: it may pick other victims for the same preemptor, and the old term's write
    meets the new term's preemption, which the evictor promises never happens). client-go's
    `ReleaseOnCancel` (tools/leaderelection/leaderelection.go): "you must ensure all code guarded
    by this lease has successfully completed prior to cancelling the context". An eviction is
    such code: the drain now waits for it as for a Binding, and one still out leaves the Lease."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=1)]
    api.add_pod(b.pod("low", requests={"nvidia.com/gpu": 1}, node_name="n", phase="Running", priority=0))
    api.add_pod(b.pod("urgent", requests={"nvidia.com/gpu": 1}, priority=1000))
    api.fail_next("DELETE", "/pods/low", stall=True)  # the victim's DELETE never answers
    lease = _serve_lease(api)
    signals = Signals()
    monkeypatch.setattr(run_cli, "stop_on_signal", signals)
    result: list[int] = []

    async with anyio.create_task_group() as group:
        group.start_soon(_run_into, result, api)
        await until(lambda: api.stalled == 1 and lease.holder == "me")
        signals.send()
        await anyio.sleep(0.2)  # draining: the eviction is still out
        assert lease.holder == "me", "the Lease was handed over while the victim's DELETE may still land"
        signals.send()  # exit at once: the Lease stays ours, to expire
        with anyio.fail_after(3):
            await until(lambda: bool(result))
    assert result == [1] and lease.holder == "me"
