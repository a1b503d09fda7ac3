"""The GPU map (scheduler/kube/gpu_map.py, scheduler/view/) and the text view: cases a review found;
each test failed before its fix."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from types import SimpleNamespace
from typing import Any, overload

import orjson
import pytest

from scheduler.core import annotations as ann
from scheduler.core.framework.attempt import Attempt
from scheduler.core.scheduler import Scheduler
from scheduler.kube.binder import Binding, BindResult, Outcome
from scheduler.kube.gpu_map import GpuMap
from scheduler.kube.loop import LoopHooks
from scheduler.kubectl import cli as kubectl_cli
from scheduler.sim import builders as b
from scheduler.sim.snapshot import load
from scheduler.view import cluster, model as m, text
from scheduler.view.cluster import build_view
from tests.helpers import config

CLASS = "class.tessera.dev/v100"


def _core(objs: list[dict[str, Any]]) -> Scheduler:
    core = Scheduler(config())
    load(core, objs, 0.0)
    return core


def test_free_gpus_of_a_node_without_a_node_object_are_not_counted_free() -> None:
    """ExtendedResources whose Node is gone (deleted, or not listed yet) are shown, with a note;
    but the summary counted their GPUs free and named that node as the one with the most free
    GPUs ("most free on one node: 4, gone"), while the scheduler cannot place a pod on a node it
    has no Node object for (`0/1 nodes are available`). The summary is what people size jobs by."""
    core = _core([*(b.device("gone", i) for i in range(4)), b.node("m", gpus=1), b.device("m", 0),
                  b.resource_class("v100", match_labels={"model": "V100"}),
                  b.pod("p", limits={CLASS: 2})])
    attempt = core.schedule_next(0.0)
    assert attempt is not None and attempt[0].node is None  # the scheduler: nowhere for 2 GPUs
    summary = build_view(core, source="cluster", now=0.0).summary
    assert (summary.free, summary.unavailable, summary.largest_free, summary.largest_free_node) == (1, 4, 1, "m")


def test_free_gpus_an_unreadable_annotation_hides_are_not_counted_free() -> None:
    """A pod whose `tessera.dev/devices` annotation cannot be read holds some of its node's
    devices, nobody knows which: the scheduler gives none of them out (`hides_devices_of`, for
    class and plain count requests alike). The view's note says so, but its summary counted them
    free and named the node as the one with the most free GPUs while a 2-GPU pod read
    "Insufficient nvidia.com/gpu"."""
    core = _core([b.node("n", gpus=2), b.device("n", 0), b.device("n", 1), b.node("m", gpus=1), b.device("m", 0),
                  b.resource_class("v100", match_labels={"model": "V100"}),
                  b.pod("bad", node_name="n", phase="Running", limits={CLASS: 1}, annotations={ann.DEVICES: "{"}),
                  b.pod("p", limits={"nvidia.com/gpu": 2})])
    attempt = core.schedule_next(0.0)
    assert attempt is not None and attempt[0].node is None
    summary = build_view(core, source="cluster", now=0.0).summary
    assert (summary.free, summary.unavailable, summary.largest_free, summary.largest_free_node) == (1, 2, 1, "m")


class _Walks(Sequence[m.PendingPod]):
    """The pending list, counting how often it is walked."""

    def __init__(self, pods: Sequence[m.PendingPod]) -> None:
        self.pods = tuple(pods)
        self.walks = 0

    def __iter__(self) -> Iterator[m.PendingPod]:
        self.walks += 1
        return iter(self.pods)

    def __len__(self) -> int:
        return len(self.pods)

    @overload
    def __getitem__(self, index: int) -> m.PendingPod: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[m.PendingPod]: ...
    def __getitem__(self, index: int | slice) -> m.PendingPod | Sequence[m.PendingPod]:
        return self.pods[index]


def test_the_gangs_are_found_in_one_walk_of_the_pending_pods_not_one_per_gang() -> None:
    """`_gangs` looked up each gang's first message with a scan of every pending pod: gangs x
    pending. 4000 waiting gangs of 4 (16000 pending pods) on 1000 nodes took 0.85 s per build of
    /gpu-map.json, 0.7 s of it in that scan — run on the scheduler's event loop, so with the page
    open (it refreshes every 3 s) the scheduler stood still a quarter of the time."""
    gangs = 50
    objs: list[dict[str, Any]] = [b.node("n", gpus=1)]
    objs += [b.pod(f"g{g}-{k}", limits={"nvidia.com/gpu": 8}, labels=b.gang_labels(f"g{g}", 2))
             for g in range(gangs) for k in range(2)]
    core = _core(objs)
    pending = _Walks(build_view(core, source="cluster", now=0.0).pending)
    assert len(cluster._gangs(core.state, pending, frozenset(), core.cluster_totals())) == gangs
    assert pending.walks <= 2, pending.walks


class _Inner(LoopHooks):
    pass


def _live(core: Scheduler, leading: list[bool], now: list[float]) -> GpuMap:
    loop = SimpleNamespace(core=core, is_leader=lambda: leading[0], informers=SimpleNamespace(listed=lambda kind: []))
    return GpuMap(loop, clock=lambda: now[0])  # type: ignore[arg-type]


def test_a_replica_that_lost_the_lease_shows_no_decisions_or_reasons_of_its_term() -> None:
    """A leader that loses its Lease goes on as a standby (`lost_leadership`), and its page says
    "standby replica: a warm cache, no decisions (the leader's page has them)" and "the leader
    decides" for pending pods. But the decision log of its leading term stayed: the standby's
    page listed up to 50 decisions and showed pending pods with the reason this replica gave them
    minutes or hours ago, while another replica decides them now."""
    core = _core([b.node("n", gpus=1), b.pod("waiting", limits={"nvidia.com/gpu": 4})])
    leading, now = [True], [0.0]
    gpu_map = _live(core, leading, now)
    hooks = gpu_map.hooks(_Inner())
    waiting = core.state.pod_by_key("default/waiting")
    assert waiting is not None
    hooks.on_attempt("unschedulable", "tessera", 0.1, Attempt(waiting, None, message="0/1 nodes are available"))
    assert gpu_map.view().decisions and gpu_map.view().pending[0].reason == "Unschedulable"
    leading[0] = False
    view = gpu_map.view()
    assert view.source == "standby"
    assert view.decisions == ()
    assert [(p.pod, p.reason, p.message) for p in view.pending] == [("default/waiting", "", "")]


async def test_the_data_is_rebuilt_after_the_wall_clock_steps_back() -> None:
    """/gpu-map.json is kept FRESH_FOR (1 s) by `now - built_at >= FRESH_FOR` on the wall clock:
    after the clock steps back (an NTP correction, a VM resumed), `now - built_at` is negative
    until the clock catches up, so every viewer got the same stale picture for as long as the
    step (an hour back: an hour frozen), and pending pods' old reasons were no longer pruned."""
    core = _core([b.node("n", gpus=1)])
    now = [3600.0]
    gpu_map = _live(core, [True], now)
    request: Any = SimpleNamespace(headers={})
    first = await gpu_map._serve_data(request)
    now[0] = 10.0  # the wall clock is corrected by an hour
    second = await gpu_map._serve_data(request)
    assert first.body is not None and second.body is not None
    assert orjson.loads(second.body)["generated"] == 10.0  # type: ignore[arg-type]


def test_a_pending_pods_reason_after_its_binding_was_refused_is_the_refusal() -> None:
    """A placed pod drops its wait reason; when the apiserver then refuses its Binding it waits in
    the queue again, with PodScheduled=False reason SchedulerError "Binding rejected: ..." on the
    pod. The page read "not tried yet" for it (no reason at all), hiding why it still waits."""
    core = _core([b.node("n", gpus=1), b.pod("p", limits={"nvidia.com/gpu": 1})])
    gpu_map = _live(core, [True], [0.0])
    hooks = gpu_map.hooks(_Inner())
    [attempt] = core.schedule_next(0.0) or []
    assert attempt.node == "n"
    hooks.on_attempt("scheduled", "tessera", 0.1, attempt)
    hooks.on_bind(BindResult(Binding(attempt.pod.uid, "default", "p", "n", {}), Outcome.RETRY,
                             "admission webhook denied the request", 0.1))
    core.binding_failed(attempt.pod.uid, 0.2)
    [pending] = gpu_map.view().pending
    assert (pending.reason, pending.message) == \
        ("SchedulerError", "Binding rejected: admission webhook denied the request")


def test_a_binding_refused_as_outdated_shows_the_refusal_only_once_it_backs_off() -> None:
    """A Binding refused because someone else changed the pod (`pod_changed`) is decided again at
    once, no condition written: the page shows no reason for it. After `REDECIDED_AT_ONCE` such
    refusals in a row the loop backs it off as an error and does write SchedulerError: the page
    hid that one too, as it looked at `pod_changed` alone, not at what the core did."""
    core = _core([b.node("n", gpus=1), b.pod("p", limits={"nvidia.com/gpu": 1})])
    gpu_map = _live(core, [True], [0.0])
    hooks = gpu_map.hooks(_Inner())
    [attempt] = core.schedule_next(0.0) or []
    hooks.on_attempt("scheduled", "tessera", 0.1, attempt)
    refused = BindResult(Binding(attempt.pod.uid, "default", "p", "n", {}), Outcome.RETRY,
                         "the pod changed since it was decided", 0.1, pod_changed=True)
    hooks.on_bind(refused, redecided=False)  # the fallback: backed off, the condition written
    core.binding_failed(attempt.pod.uid, 0.2)
    [pending] = gpu_map.view().pending
    assert (pending.reason, pending.message) == ("SchedulerError", "Binding rejected: the pod changed since it was decided")

    core = _core([b.node("n", gpus=1), b.pod("p", limits={"nvidia.com/gpu": 1})])
    gpu_map = _live(core, [True], [0.0])
    hooks = gpu_map.hooks(_Inner())
    [attempt] = core.schedule_next(0.0) or []
    hooks.on_attempt("scheduled", "tessera", 0.1, attempt)
    hooks.on_bind(refused, redecided=True)
    assert core.binding_outdated(attempt.pod.uid, 0.2)
    [pending] = gpu_map.view().pending
    assert pending.reason != "SchedulerError"


def test_terminal_control_sequences_from_the_cluster_are_shown_not_sent(capsys: pytest.CaptureFixture[str]) -> None:
    """`kubectl tessera nodes` / `explain` print values anyone with write access to an object can
    set (a device's `model` attribute, an Event's message, a condition's message) straight to the
    terminal: an ESC in one moves the cursor, rewrites lines, sets the window title or worse
    (kubernetes#101695). kubectl's table and describe printers write ESC as `^[` and CR as `\\r`
    (cli-runtime printers.EscapeTerminal); `kubectl tessera` did not."""
    core = _core([b.node("n", gpus=1), b.device("n", 0, model="V100\x1b]0;owned\x07\x1b[2J\rX")])
    rendered = text.render_nodes(build_view(core, source="cluster", now=0.0))
    assert "\x1b" not in rendered and "\r" not in rendered and "V100^[]0;owned\x07^[[2J\\rX" in rendered
    table = text.columns([["MESSAGE", "X"], ["a\x1b[1Ab", "y"], ["c", "z"]])
    assert table.splitlines()[1:] == ["a^[[1Ab   y", "c         z"]  # aligned on what is printed
    kubectl_cli._print({}, lambda: "Message:  \x1b[31mred\r", "table")
    assert capsys.readouterr().out == "Message:  ^[[31mred\\r\n"


def test_wait_reasons_are_still_pruned_after_the_wall_clock_steps_back() -> None:
    """The periodic drop of deleted pods' wait reasons compared `now - pruned_at >= 30 s` on the
    wall clock: after a step back it stopped until the clock caught up, and the reasons of every
    pod deleted meanwhile stayed (the leak the pruning exists to stop)."""
    core = _core([b.node("n", gpus=1), b.pod("waiting", limits={"nvidia.com/gpu": 4})])
    now = [3600.0]
    gpu_map = _live(core, [True], now)
    hooks = gpu_map.hooks(_Inner())
    waiting = core.state.pod_by_key("default/waiting")
    assert waiting is not None
    hooks.on_attempt("unschedulable", "tessera", 0.1, Attempt(waiting, None, message="0/1 nodes are available"))
    core.apply("DELETED", b.pod("waiting", limits={"nvidia.com/gpu": 4}), 1.0)
    now[0] = 10.0  # the wall clock is corrected by an hour
    hooks.on_queue({}, {})
    assert gpu_map.log.reasons() == {}
