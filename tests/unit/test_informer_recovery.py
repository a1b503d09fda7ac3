"""The informer after an apiserver restart: the backoff the outage piled up (connection refused,
retried with a doubling pause) must not delay the relist once the server answers again.

On-call trial (kill -9 kube-apiserver for 30 s under load, restarted on the same etcd): the watch's
reconnect got 410 Gone (the new watch cache starts at etcd's current revision), and the relist
waited the backoff still high from the outage (`retry_in` up to 49.8 s): the scheduler saw none of
the pods created meanwhile for 45-80 s, with nothing saying so (synced 1, ready, 0 pods pending).
Same scripted transport as test_informer_relist.py."""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

import aiohttp
import anyio
import orjson
import pytest
from structlog.testing import capture_logs

from scheduler.api.config import load_config
from scheduler.core.scheduler import Scheduler
from scheduler.kube import informers
from scheduler.kube.http import KubeHttp, Response
from scheduler.kube.informers import DISRUPTION_BUDGETS, NODES, POD_GROUPS, PODS, Informer, InformerSet
from scheduler.sim import builders as b
from tests.unit.test_informer_edges import item
from tests.unit.test_informer_relist import GONE, FakeHttp, FakeStream, event, make, page, pod, run_until, watched

OUTAGE_ERRORS = 9  # connection refused this many times: the next pause would be 512 x BACKOFF_INITIAL
# the ninth pause is at least 256 x BACKOFF_INITIAL = 0.512 s; the log line rounds it to 2 places, so
# a pause jittered by under 1 % reads 0.51: compare with the rounded bound, not 0.512
PILED_UP = round(0.002 * 256, 2)


@pytest.fixture(autouse=True)
def measurable_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small enough that the outage's retries take about a second, large enough that the pause it
    piles up (>= 1 s) stands out from a prompt relist."""
    monkeypatch.setattr(informers, "BACKOFF_INITIAL", 0.002)
    monkeypatch.setattr(informers, "BACKOFF_MAX", 30.0)


class Clocked:
    """Wraps a FakeHttp's calls with the monotonic time each was made."""

    def __init__(self, http: Any) -> None:
        self.times: list[tuple[str, float]] = []
        request, stream = http.request, http.stream

        async def timed_request(*args: Any, **kwargs: Any) -> Response:
            self.times.append(("list", time.monotonic()))
            result: Response = await request(*args, **kwargs)
            return result

        def timed_stream(*args: Any, **kwargs: Any) -> Any:
            self.times.append(("watch", time.monotonic()))
            return stream(*args, **kwargs)

        http.request, http.stream = timed_request, timed_stream


async def test_a_410_after_an_outage_relists_without_the_backoff_the_outage_piled_up() -> None:
    refused = [aiohttp.ClientConnectionError("Cannot connect to host: Connect call failed (refused)")
               for _ in range(OUTAGE_ERRORS)]
    informer, http, sink = make(
        [page([pod("a", "1")], "5"), page([pod("a", "1"), pod("b", "30")], "31")],
        [*refused, FakeStream(orjson.dumps(GONE), status=410),
         aiohttp.ClientConnectionError("reset")])  # after the relist: one more transport error
    clock = Clocked(http)
    with capture_logs() as logs:
        await run_until(informer, lambda: len(http.watch_calls) >= OUTAGE_ERRORS + 3, timeout=10.0)
    assert informer.stats.lists == 2 and informer.stats.relists == 1
    assert sink.summary() == [("ADDED", "a", "1"), ("ADDED", "b", "30")]
    # the relist's LIST came promptly after the 410 (the watch call before it), not after >= 1 s
    gone_at = [t for what, t in clock.times if what == "watch"][OUTAGE_ERRORS]
    relisted_at = [t for what, t in clock.times if what == "list"][1]
    assert relisted_at - gone_at < 0.3, relisted_at - gone_at
    errors = [entry for entry in logs if entry["event"] == "informer.error"]
    assert max(entry["retry_in"] for entry in errors[:OUTAGE_ERRORS]) >= PILED_UP  # it did pile up
    relist = [entry for entry in logs if entry["event"] == "informer.relist"]
    assert len(relist) == 1 and relist[0]["retry_in"] <= 2 * 0.002, relist  # the line says when
    # and the answer reset it: the next transport error starts again from the initial pause
    assert errors[-1]["retry_in"] <= 2 * 0.002, errors[-1]


async def test_a_watch_that_keeps_expiring_still_backs_off() -> None:
    """The reset is for an answer after an outage, not for a loop: a relist whose watch at once
    gets 410 again (nothing delivered in between) waits longer each time, as before."""
    lists = [page([pod("a", "1")], "5")] + [page([pod("a", "1")], str(10 + i)) for i in range(5)]
    informer, http, sink = make(lists, [FakeStream(orjson.dumps(GONE), status=410) for _ in range(5)])
    with capture_logs() as logs:
        await run_until(informer, lambda: informer.stats.lists == 6, timeout=10.0)
    pauses = [entry["retry_in"] for entry in logs if entry["event"] == "informer.relist"]
    assert len(pauses) == 5
    # doubling from BACKOFF_INITIAL (jitter up to 100 %): the fifth is at least 16 x the initial
    assert pauses[4] >= 0.025 and pauses[0] <= 2 * 0.002, pauses  # 0.032-0.064, logged rounded


async def test_a_watch_that_delivered_events_relists_promptly_on_its_410() -> None:
    stream = FakeStream(event("MODIFIED", watched(pod("a", "6"))) + event("ERROR", GONE))
    informer, http, sink = make([page([pod("a", "1")], "5"), page([pod("a", "7")], "12")], [stream])
    with capture_logs() as logs:
        await run_until(informer, lambda: informer.stats.lists == 2)
    relist = [entry for entry in logs if entry["event"] == "informer.relist"]
    assert relist[0]["retry_in"] <= 2 * 0.002


async def test_a_relist_in_wait_is_visible() -> None:
    """While the relist waits (its pause, or its LIST failing), `relist_pending` says the kind's
    view is stale; the delivered LIST clears it."""
    informer, http, sink = make(
        [page([pod("a", "1")], "5"), aiohttp.ClientConnectionError("refused"), page([pod("a", "1")], "9")],
        [FakeStream(orjson.dumps(GONE), status=410)])
    seen: list[bool] = []
    original = informer._list

    async def watched_list() -> None:
        seen.append(informer.relist_pending)
        await original()

    informer._list = watched_list  # type: ignore[method-assign]
    assert not informer.relist_pending
    await run_until(informer, lambda: informer.stats.lists == 2)
    assert seen == [False, True, True]  # the first list; the relist's failed LIST; the relist
    assert not informer.relist_pending


# --- the relist's order: what frees GPUs before what takes them --------------------------------

def _relisted_core(first: list[dict[str, Any]], second: list[dict[str, Any]]) -> tuple[Scheduler, list[Any]]:
    """A core fed by an informer whose watch expires after `first` and relists `second`; the
    notices every event raised."""
    core = Scheduler(load_config(None))
    core.apply("ADDED", b.node("n", gpus=1) | {"metadata": {**b.node("n")["metadata"], "resourceVersion": "1"}}, 0.0)
    return core, []


async def _relist(first: list[dict[str, Any]], second: list[dict[str, Any]]) -> tuple[Scheduler, list[Any]]:
    core, notices = _relisted_core(first, second)
    http = FakeHttp([page(first, "5"), page(second, "10")], [FakeStream(event("ERROR", GONE))])
    informer = Informer(cast(KubeHttp, http), PODS,
                        lambda t, o: notices.extend(core.apply(t, copy.deepcopy(o), 0.0)))
    await run_until(informer, lambda: informer.stats.lists == 2)
    return core, notices


def _finished(obj: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["status"]["phase"] = "Succeeded"
    return obj


def _plain(name: str, rv: str, uid: str, holds_gpu: bool) -> dict[str, Any]:
    """`item` without the devices annotation: a plain nvidia.com/gpu count (GPUsOvercommitted's case)."""
    obj = item(name, rv, uid, holds_gpu)
    obj["metadata"]["annotations"] = {}
    return obj


@pytest.mark.parametrize("make_pod", [item, _plain], ids=["devices", "plain-count"])
async def test_a_relist_frees_a_finished_pods_gpu_before_the_pod_bound_to_it_since(make_pod: Any) -> None:
    """The standby after the apiserver trial: 10 input.invalid lines (DeviceConflict "assigned to more
    than one pod exclusively", GPUsOvercommitted "in use but only ... allocatable") with nothing given
    twice. In the gap `x` finished (Succeeded) and the leader bound `a` onto its GPU; the relist
    listed `a` first, and `_replace` sent changes in list order: `a` took GPU-0 while `x` still held it."""
    first = [make_pod("a", "2", "uid-a", False), make_pod("x", "3", "uid-x", True)]
    second = [make_pod("a", "9", "uid-a", True), _finished(make_pod("x", "8", "uid-x", True))]
    core, notices = await _relist(first, second)
    assert core.state.pod_by_key("default/a").node_name == "n"  # type: ignore[union-attr]
    assert [(n.reason, n.key) for n in notices] == [], notices


async def test_a_relist_frees_a_finished_pods_gpu_before_a_deleted_pod_bound_to_it_since() -> None:
    """As above, `a` being deleted by now too: finished pods go first, then pods being deleted."""
    first = [item("a", "2", "uid-a", False), item("x", "3", "uid-x", True)]
    taker = item("a", "9", "uid-a", True)
    taker["metadata"]["deletionTimestamp"] = "2026-12-07T03:30:00Z"
    core, notices = await _relist(first, [taker, _finished(item("x", "8", "uid-x", True))])
    assert [(n.reason, n.key) for n in notices] == [], notices


@pytest.mark.parametrize(("make_pod", "reason", "words"), [
    (item, "DeviceConflict", "more than one pod exclusively"),
    (_plain, "GPUsOvercommitted", "2 nvidia.com/gpu in use but only 1"),
], ids=["devices", "plain-count"])
async def test_a_real_double_assignment_in_a_relist_is_still_reported(make_pod: Any, reason: str, words: str) -> None:
    """`x` still runs on GPU-0 when the relist shows `a` bound to it too: that is a GPU given twice."""
    first = [make_pod("a", "2", "uid-a", False), make_pod("x", "3", "uid-x", True)]
    second = [make_pod("a", "9", "uid-a", True), make_pod("x", "8", "uid-x", True)]
    core, notices = await _relist(first, second)
    assert [n.reason for n in notices] == [reason], notices
    assert words in notices[0].message, notices[0].message


# --- an answer to one informer wakes the set's others from a connection error's pause ------------

class _GoneWhenOpened(FakeStream):
    """A watch that hangs until `gate` is set, then says 410 Gone (the restarted apiserver)."""

    def __init__(self, gate: asyncio.Event) -> None:
        super().__init__()
        self.gate = gate
        self.sent = False

    async def readany(self) -> bytes:
        if self.sent:
            await asyncio.Event().wait()
        await self.gate.wait()
        self.sent = True
        return event("ERROR", GONE)


class _ByPath:
    """A FakeHttp per path (one per kind), with the time of every call."""

    def __init__(self, by_path: dict[str, FakeHttp]) -> None:
        self.by_path = by_path
        self.times: list[tuple[str, str, float]] = []

    async def request(self, method: str, path: str, **kwargs: Any) -> Response:
        self.times.append(("list", path, time.monotonic()))
        return await self.by_path[path].request(method, path, **kwargs)

    def stream(self, path: str, query: Any, read_timeout: float) -> Any:
        self.times.append(("watch", path, time.monotonic()))
        return self.by_path[path].stream(path, query, read_timeout)


async def test_an_answer_to_one_informer_wakes_the_others_from_a_connection_errors_pause() -> None:
    """The apiserver is back, but each informer finds out only when its own pause ends (up to a
    minute after the outage's retries): the first to get an answer wakes the rest of its set."""
    gate = asyncio.Event()
    nodes = FakeHttp([page([], "5")], [aiohttp.ClientConnectionError("refused") for _ in range(OUTAGE_ERRORS)])
    pods = FakeHttp([page([pod("a", "1")], "5"), page([pod("a", "1")], "40")], [_GoneWhenOpened(gate)])
    http = _ByPath({NODES.path: nodes, PODS.path: pods})
    informers_ = InformerSet(cast(KubeHttp, http), lambda t, o: None, kinds=(NODES, PODS))
    node_informer, pod_informer = informers_.informers
    with capture_logs() as logs:
        async with anyio.create_task_group() as group:
            group.start_soon(informers_.run)
            with anyio.fail_after(10):
                while len(nodes.watch_calls) < OUTAGE_ERRORS:
                    await asyncio.sleep(0.001)
                await asyncio.sleep(0.01)  # the Node informer sleeps its pause (>= 0.5 s) now
                gate.set()  # the Pod watch gets 410: the server is back
                while pod_informer.stats.lists < 2 or len(nodes.watch_calls) < OUTAGE_ERRORS + 1:
                    await asyncio.sleep(0.001)
            group.cancel_scope.cancel()
    relisted_at = [t for what, path, t in http.times if what == "list" and path == PODS.path][1]
    woke_at = [t for what, path, t in http.times if what == "watch" and path == NODES.path][OUTAGE_ERRORS]
    errors = [entry for entry in logs if entry["event"] == "informer.error" and entry["kind"] == "Node"]
    assert errors[-1]["retry_in"] >= PILED_UP, errors[-1]  # it was to wait this long
    assert woke_at - relisted_at < 0.3, woke_at - relisted_at
    assert node_informer.stats.watches == 1  # and its watch is open again


async def test_only_an_outages_pauses_are_forgotten_a_bugs_still_grow() -> None:
    """A delivered LIST forgets the pauses of connection errors, not those of a bug: an unforeseen
    error on every watched event makes the informer relist each time, and those relists must keep
    backing off (a LIST every second for ever otherwise)."""
    lists = [page([pod("a", "1")], str(5 + i)) for i in range(6)]
    informer, http, _ = make(lists, [FakeStream(event("MODIFIED", watched(pod("a", str(20 + i)))))
                                     for i in range(6)])

    def broken(event: Any) -> None:
        raise RuntimeError("a bug in the informer")

    informer._on_watch_event = broken  # type: ignore[method-assign]
    with capture_logs() as logs:
        await run_until(informer, lambda: informer.stats.lists == 6, timeout=10.0)
    pauses = [entry["retry_in"] for entry in logs if entry["event"] == "informer.error"]
    assert len(pauses) >= 5 and pauses[4] >= 0.025, pauses  # 0.032-0.064: doubling on


# --- a 410 that follows no outage: the pauses keep growing ------------------------------------

async def test_a_watch_closed_after_one_event_then_expiring_still_backs_off() -> None:
    """Review: a watch that delivers one event and is closed (an apiserver dropping a slow
    watcher), whose re-watch then gets 410, over and over: each relist came at BACKOFF_INITIAL
    for ever (a delivered event counted as a watch that worked). As the reflector, whose backoff
    manager resets only after two minutes without a pause, these relists back off."""
    lists = [page([pod("a", "1")], "5")] + [page([pod("a", str(100 * i))], str(100 * i + 1)) for i in range(1, 9)]
    streams: list[FakeStream | BaseException] = []
    for i in range(8):
        streams += [FakeStream(event("MODIFIED", watched(pod("a", str(100 * i + 50)))), end="eof"),
                    FakeStream(orjson.dumps(GONE), status=410)]
    informer, http, sink = make(lists, streams)
    with capture_logs() as logs:
        await run_until(informer, lambda: informer.stats.lists == 9, timeout=10.0)
    pauses = [entry["retry_in"] for entry in logs if entry["event"] == "informer.relist"]
    assert len(pauses) == 8 and pauses[7] >= 0.025, pauses  # doubling: 128-256 x BACKOFF_INITIAL


async def test_a_410_keeps_the_pauses_http_errors_piled_up() -> None:
    """Only an outage's pauses are forgotten by a 410: those of 429s or 5xx (a struggling
    apiserver, which answers) stay, so the relist after them waits its turn."""
    busy = [FakeStream(b'{"kind":"Status","code":503}', status=503) for _ in range(OUTAGE_ERRORS)]
    informer, http, sink = make([page([pod("a", "1")], "5"), page([pod("a", "1")], "9")],
                                [*busy, FakeStream(orjson.dumps(GONE), status=410)])
    with capture_logs() as logs:
        await run_until(informer, lambda: informer.stats.lists == 2, timeout=10.0)
    relist = [entry for entry in logs if entry["event"] == "informer.relist"]
    assert len(relist) == 1 and relist[0]["retry_in"] >= 0.002 * 512, relist


class SlowStream(FakeStream):
    """A watch that stays open `lived` seconds before its data comes."""

    def __init__(self, data: bytes, lived: float) -> None:
        super().__init__(data)
        self.lived = lived

    async def readany(self) -> bytes:
        if self.lived:
            await asyncio.sleep(self.lived)
            self.lived = 0.0
        return await super().readany()


async def test_a_watch_that_lived_past_the_reset_relists_promptly_on_its_410(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a watch must do to count as having worked: stay open BACKOFF_RESET without a pause
    (client-go's 2 minutes); then the pauses before it are forgotten and its 410 relists at once."""
    monkeypatch.setattr(informers, "BACKOFF_RESET", 0.3)
    busy = [FakeStream(b'{"kind":"Status","code":500}', status=500) for _ in range(4)]
    informer, http, sink = make(
        [page([pod("a", "1")], "5"), page([pod("a", "7")], "12")],
        [*busy, SlowStream(event("MODIFIED", watched(pod("a", "6"))) + event("ERROR", GONE), lived=0.4)])
    with capture_logs() as logs:
        await run_until(informer, lambda: informer.stats.lists == 2, timeout=10.0)
    errors = [entry["retry_in"] for entry in logs if entry["event"] == "informer.error"]
    assert len(errors) == 4 and errors[3] >= 0.002 * 8, errors  # they piled up
    relist = [entry for entry in logs if entry["event"] == "informer.relist"]
    assert relist[0]["retry_in"] <= 2 * 0.002, relist


# --- review: what each answer and each relist tier is for, pinned one by one ---------------------

class _OpensWhenGated(FakeHttp):
    """Watches that open (200, then silence) only once `gate` is set: the apiserver back."""

    def __init__(self, gate: asyncio.Event, lists: list[Response]) -> None:
        super().__init__(lists, [])
        self.gate = gate

    @asynccontextmanager
    async def stream(self, path: str, query: Any, read_timeout: float) -> AsyncIterator[FakeStream]:
        self.watch_calls.append((path, dict(query), read_timeout))
        await self.gate.wait()
        yield FakeStream()


async def _woken_by(pods: FakeHttp, gate: asyncio.Event) -> float:
    """How long after `gate` the Node informer, paused by connection errors, watched again."""
    nodes = FakeHttp([page([], "5")], [aiohttp.ClientConnectionError("refused") for _ in range(OUTAGE_ERRORS)])
    http = _ByPath({NODES.path: nodes, PODS.path: pods})
    informers_ = InformerSet(cast(KubeHttp, http), lambda t, o: None, kinds=(NODES, PODS))
    async with anyio.create_task_group() as group:
        group.start_soon(informers_.run)
        with anyio.fail_after(10):
            while len(nodes.watch_calls) < OUTAGE_ERRORS:
                await asyncio.sleep(0.001)
            await asyncio.sleep(0.01)  # the Node informer sleeps its pause (>= 0.5 s) now
            opened = time.monotonic()
            gate.set()
            while len(nodes.watch_calls) < OUTAGE_ERRORS + 1:
                await asyncio.sleep(0.001)
        group.cancel_scope.cancel()
    return [t for what, path, t in http.times if what == "watch" and path == NODES.path][OUTAGE_ERRORS] - opened


async def test_a_watch_that_opens_wakes_the_others() -> None:
    gate = asyncio.Event()
    assert await _woken_by(_OpensWhenGated(gate, [page([pod("a", "1")], "5")]), gate) < 0.3


async def test_a_410_wakes_the_others_before_its_relist_is_delivered() -> None:
    """The relist's LIST never comes back here: the 410 itself is the answer that wakes them."""
    gate = asyncio.Event()
    assert await _woken_by(FakeHttp([page([pod("a", "1")], "5")], [_GoneWhenOpened(gate)]), gate) < 0.3


async def test_a_relist_applies_finished_then_deleting_then_other_pods() -> None:
    """`_freeing`'s three tiers, in that order whatever the list's: what frees devices (a pod
    finished, a pod being deleted: its hold ends) before what may take them."""
    deleting = pod("d", "7")
    deleting["metadata"]["deletionTimestamp"] = "2026-12-07T03:30:00Z"
    finished = pod("f", "8")
    finished["status"] = {"phase": "Succeeded"}
    informer, http, sink = make([page([pod("p", "1"), pod("d", "2"), pod("f", "3")], "5"),
                                 page([pod("p", "6"), deleting, finished], "9")],
                                [FakeStream(orjson.dumps(GONE), status=410)])
    await run_until(informer, lambda: informer.stats.lists == 2)
    assert [name for kind, name, _ in sink.summary()[3:]] == ["f", "d", "p"], sink.summary()


async def test_a_relist_after_an_unforeseen_error_is_visible_an_unavailable_kind_is_not_pending(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An unforeseen error trusts nothing: the store is stale until the relist's LIST is
    delivered, and `relist_pending` says so. A kind found unavailable (404 on LIST: a CRD not
    installed; 403 on an optional kind) is not stale: its store is emptied at once on purpose and
    `unavailable` says why, so its 30 s retries are no relist in wait (the gauge would stay 1 on
    every cluster without the PodGroup CRD)."""
    informer, http, sink = make([page([pod("a", "1")], "5"), aiohttp.ClientConnectionError("refused"),
                                 page([pod("a", "1")], "9")],
                                [FakeStream(event("MODIFIED", watched(pod("a", "6"))))])
    seen: list[bool] = []
    original = informer._list

    async def watched_list() -> None:
        seen.append(informer.relist_pending)
        await original()

    def broken(event: Any) -> None:
        raise RuntimeError("a bug in the informer")

    informer._list = watched_list  # type: ignore[method-assign]
    informer._on_watch_event = broken  # type: ignore[method-assign]
    await run_until(informer, lambda: informer.stats.lists == 2)
    assert seen == [False, True, True] and not informer.relist_pending
    monkeypatch.setattr(informers, "UNAVAILABLE_RETRY_SECONDS", 0.01)
    for status, kind in ((404, POD_GROUPS), (403, DISRUPTION_BUDGETS)):
        missing = Response(status, orjson.dumps({"kind": "Status", "code": status}))
        informer, http, sink = make([missing, missing], [], kind=kind)
        await run_until(informer, lambda: len(http.list_calls) >= 2)
        assert informer.unavailable is not None and not informer.relist_pending


async def test_one_answer_wakes_every_pause_under_way_and_no_later_one() -> None:
    """`Answers`: an answer ends every connection-error pause waiting then (True: woken), and only
    those: a pause begun after it waits its time out (False), or an outage's retries would come
    back to back."""
    answers = informers.Answers()
    woken: list[bool] = []

    async def pause() -> None:
        woken.append(await answers.pause(10.0))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(pause)
            group.start_soon(pause)
            await asyncio.sleep(0.01)  # both wait now
            answers.answered()
    assert woken == [True, True]
    started = time.monotonic()
    assert not await answers.pause(0.05)
    assert time.monotonic() - started >= 0.04


async def test_a_410_keeps_the_pauses_unreadable_watches_piled_up() -> None:
    """An answer the informer cannot read (a watch line that is no JSON) is still an answer, not an
    outage: a 410 after a run of them keeps their pauses, as after 5xx."""
    garbled = [FakeStream(b"not json\n") for _ in range(OUTAGE_ERRORS)]
    informer, _, _ = make([page([pod("a", "1")], "5"), page([pod("a", "1")], "9")],
                                [*garbled, FakeStream(orjson.dumps(GONE), status=410)])
    with capture_logs() as logs:
        await run_until(informer, lambda: informer.stats.lists == 2, timeout=10.0)
    relist = [entry for entry in logs if entry["event"] == "informer.relist"]
    assert len(relist) == 1 and relist[0]["retry_in"] >= 0.002 * 512, relist


async def test_an_outage_is_remembered_until_a_list_is_delivered() -> None:
    """An answer the informer cannot read in the middle of an outage's retries does not end the
    outage: the 410 after it still forgets the outage's pauses."""
    refused = [aiohttp.ClientConnectionError("refused") for _ in range(OUTAGE_ERRORS)]
    informer, _, _ = make([page([pod("a", "1")], "5"), page([pod("a", "1")], "9")],
                                [*refused, FakeStream(b"not json\n"), FakeStream(orjson.dumps(GONE), status=410)])
    with capture_logs() as logs:
        await run_until(informer, lambda: informer.stats.lists == 2, timeout=10.0)
    relist = [entry for entry in logs if entry["event"] == "informer.relist"]
    assert len(relist) == 1 and relist[0]["retry_in"] <= 2 * 0.002, relist


async def test_a_delivered_list_ends_the_outage() -> None:
    """After the relist that ended an outage, 5xx then a 410 are a struggling server's: the
    relist after them waits the pauses they piled up, the earlier outage forgotten for good."""
    refused = [aiohttp.ClientConnectionError("refused") for _ in range(3)]
    busy = [FakeStream(b'{"kind":"Status","code":503}', status=503) for _ in range(OUTAGE_ERRORS)]
    informer, _, _ = make([page([pod("a", "1")], str(5 + i)) for i in range(3)],
                                [*refused, FakeStream(orjson.dumps(GONE), status=410), *busy,
                                 FakeStream(orjson.dumps(GONE), status=410)])
    with capture_logs() as logs:
        await run_until(informer, lambda: informer.stats.lists == 3, timeout=10.0)
    relist = [entry for entry in logs if entry["event"] == "informer.relist"]
    assert len(relist) == 2 and relist[1]["retry_in"] >= 0.002 * 512, relist


class _ListsWhenGated(FakeHttp):
    """A LIST answered only once `gate` is set; its watch never opens (no other answer)."""

    def __init__(self, gate: asyncio.Event, lists: list[Response]) -> None:
        super().__init__(lists, [])
        self.gate = gate

    async def request(self, method: str, path: str, **kwargs: Any) -> Response:
        await self.gate.wait()
        return await super().request(method, path, **kwargs)

    @asynccontextmanager
    async def stream(self, path: str, query: Any, read_timeout: float) -> AsyncIterator[FakeStream]:
        self.watch_calls.append((path, dict(query), read_timeout))
        await asyncio.Event().wait()
        yield FakeStream()


async def test_a_delivered_list_wakes_the_others() -> None:
    gate = asyncio.Event()
    assert await _woken_by(_ListsWhenGated(gate, [page([pod("a", "1")], "5")]), gate) < 0.3
