"""The event recorder against a fake HTTP layer: series, the per-object spam filter, throttling,
failed writes.

A pod retried every few seconds for a day must stay a handful of writes: repeats of the same
(object, reason, note) become one Event whose `series` is patched at most every `series_interval`;
each object has a token bucket (client-go's spam filter); the writes go through the events
client's own token bucket, and `record()` never waits for any of it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from itertools import count
from typing import Any

import aiohttp
import anyio
from structlog.testing import capture_logs

from scheduler.kube.http import KubeHttp, RateLimiter
from scheduler.kube.recorder import NOTE_LIMIT, QUEUE_SIZE, SERIES_WINDOW, EventRecorder, ObjectRef, micro_time
from tests.fakeapi import FakeApi

POD = ObjectRef("Pod", "v1", "p", "default", "uid-p")
OTHER = ObjectRef("Pod", "v1", "q", "default", "uid-q")
NOTE = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"
T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def _recorder(api: Any, clock: Clock, **kwargs: Any) -> EventRecorder:
    return EventRecorder(api, controller="tessera", instance="tessera-0", clock=clock, **kwargs)


@asynccontextmanager
async def running(recorder: EventRecorder, api: FakeApi) -> AsyncIterator[Callable[[], Awaitable[None]]]:
    """The recorder's writer running; yields `settle()`, which returns once everything recorded so
    far has been handled: it records a marker Event (in a namespace of its own, on an object of its
    own) and waits for its POST, and the writer handles events in order. The wall-clock bound only
    stops a hung writer from hanging the suite: it is generous, because a test recording thousands
    of Events on a loaded 2-core machine took over 5 s (a flaky failure, not a slow recorder), and
    the wait reads each call once rather than rescanning them all every millisecond."""
    markers = count()
    seen = 0

    async def settle() -> None:
        nonlocal seen
        name = f"marker-{next(markers)}"
        recorder.record(ObjectRef("Pod", "v1", name, "markers", name), "Normal", "Marker", "Test", name)
        with anyio.fail_after(120):
            while True:
                calls = api.calls[seen:]
                seen += len(calls)
                if any(c.method == "POST" and c.body["regarding"]["name"] == name for c in calls):
                    return
                await anyio.sleep(0.001)

    async with anyio.create_task_group() as group:
        group.start_soon(recorder.run)
        yield settle
        group.cancel_scope.cancel()


def _writes(api: FakeApi) -> list[tuple[str, Any]]:
    """(method, body) of the writes about objects in the default namespace, in order."""
    return [(c.method, c.body) for c in api.calls if c.path.startswith(EVENTS)]


async def test_the_first_occurrence_is_an_event_naming_the_object_and_who_reported_it() -> None:
    api, clock = FakeApi(), Clock()
    recorder = _recorder(api, clock)
    long_note = "x" * (NOTE_LIMIT + 500)
    async with running(recorder, api) as settle:
        recorder.record(POD, "Warning", "FailedScheduling", "Scheduling", NOTE)
        recorder.record(ObjectRef("ResourceClass", "tessera.dev/v1alpha1", "v100", uid="uid-c"), "Warning",
                        "InvalidResourceClass", "Validating", long_note)
        await settle()
    (_, pod_event), (_, class_event) = _writes(api)
    assert pod_event["metadata"]["name"].startswith("p.") and pod_event["metadata"]["namespace"] == "default"
    assert {k: v for k, v in pod_event.items() if k != "metadata"} == {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "eventTime": micro_time(T0),
        "reportingController": "tessera", "reportingInstance": "tessera-0", "action": "Scheduling",
        "reason": "FailedScheduling", "type": "Warning", "note": NOTE,
        "regarding": {"kind": "Pod", "apiVersion": "v1", "name": "p", "namespace": "default", "uid": "uid-p"}}
    # a cluster-scoped object's Event lives in `default` and names no namespace for the object
    assert class_event["metadata"]["namespace"] == "default" and class_event["regarding"]["namespace"] is None
    assert len(class_event["note"]) == NOTE_LIMIT and class_event["note"].endswith("x ...")
    assert recorder.written == 3 and recorder.dropped == 0  # the marker included


async def test_repeats_become_one_series_patched_at_once_then_at_most_every_interval() -> None:
    """client-go tools/events: the first repeat is patched at once, later ones counted and the
    count written every refresh interval."""
    api, clock = FakeApi(), Clock()
    recorder = _recorder(api, clock, series_interval=30.0)
    async with running(recorder, api) as settle:
        for offset in (0, 10, 20):  # created; the first repeat patched; the second only counted
            clock.now = T0 + offset
            recorder.record(POD, "Warning", "FailedScheduling", "Scheduling", NOTE)
        await settle()
        assert [method for method, _ in _writes(api)] == ["POST", "PATCH"]
        for offset in (35, 45, 75):  # 35: 25 s after the last write, counted; 45 and 75 written
            clock.now = T0 + offset
            recorder.record(POD, "Warning", "FailedScheduling", "Scheduling", NOTE)
        await settle()
    writes = _writes(api)
    assert [method for method, _ in writes] == ["POST", "PATCH", "PATCH", "PATCH"]
    assert [body for _, body in writes[1:]] == [
        {"series": {"count": 2, "lastObservedTime": micro_time(T0 + 10)}},
        {"series": {"count": 5, "lastObservedTime": micro_time(T0 + 45)}},
        {"series": {"count": 6, "lastObservedTime": micro_time(T0 + 75)}}]
    name = writes[0][1]["metadata"]["name"]
    assert all(c.path == f"{EVENTS}/{name}" and c.content_type == "application/merge-patch+json"
               for c in api.of("PATCH"))
    assert api.events[("default", name)]["series"] == {"count": 6, "lastObservedTime": micro_time(T0 + 75)}


async def test_a_pod_failing_every_10_s_for_a_day_is_about_fifty_writes() -> None:
    """Regression (review): the window ran from the series' first Event, so a pod failing for a
    day made a new Event every 6 minutes and a series PATCH every 30 s (234 Events and 2,802
    PATCHes). The window runs from the last observation and a live series is written every
    30 minutes (upstream finishTime and refreshTime)."""
    api, clock = FakeApi(), Clock()
    recorder = _recorder(api, clock)
    async with running(recorder, api) as settle:
        for i in range(8640):
            clock.now = T0 + 10 * i
            recorder.record(POD, "Warning", "FailedScheduling", "Scheduling", NOTE)
            if i % 1000 == 999:
                await settle()
        await settle()
    writes = _writes(api)
    assert [method for method, _ in writes].count("POST") == 1
    assert len(writes) <= 1 + 1 + 48  # the Event, its first repeat, a count every 30 minutes


async def test_an_ended_series_gets_its_final_count_and_a_later_occurrence_a_new_event() -> None:
    api, clock = FakeApi(), Clock()
    recorder = _recorder(api, clock)
    async with running(recorder, api) as settle:
        for offset in (0, 10, 20, 30):
            clock.now = T0 + offset
            recorder.record(POD, "Warning", "FailedScheduling", "Scheduling", NOTE)
        await settle()
        clock.now = T0 + 30 + SERIES_WINDOW + 1  # not observed for the window: the series has ended
        recorder.record(OTHER, "Warning", "FailedScheduling", "Scheduling", NOTE)
        await settle()
        recorder.record(POD, "Warning", "FailedScheduling", "Scheduling", NOTE)
        await settle()
    writes = _writes(api)
    assert [method for method, _ in writes] == ["POST", "PATCH", "POST", "PATCH", "POST"]
    assert writes[3][1] == {"series": {"count": 4, "lastObservedTime": micro_time(T0 + 30)}}
    assert writes[4][1]["regarding"]["name"] == "p"


async def test_a_note_is_cut_to_1024_bytes_not_characters() -> None:
    """Regression (review): upstream's NoteLengthLimit counts bytes; a non-ASCII note cut at 1024
    characters was 2,045 bytes and the apiserver refused the Event."""
    api, clock = FakeApi(), Clock()
    recorder = _recorder(api, clock)
    async with running(recorder, api) as settle:
        recorder.record(POD, "Warning", "InvalidObject", "Validating", "model " + "\u00c4" * 1500)
        await settle()
    [(_, body)] = _writes(api)
    assert len(body["note"].encode()) <= NOTE_LIMIT and body["note"].endswith("\u00c4 ...")


async def test_a_repeat_after_the_series_window_and_another_reason_or_note_are_new_events() -> None:
    api, clock = FakeApi(), Clock()
    recorder = _recorder(api, clock)
    async with running(recorder, api) as settle:
        recorder.record(POD, "Warning", "FailedScheduling", "Scheduling", NOTE)
        recorder.record(POD, "Warning", "FailedScheduling", "Scheduling", "another message")
        recorder.record(POD, "Normal", "WaitingForAllocation", "Binding", NOTE)
        clock.now = T0 + SERIES_WINDOW + 1
        recorder.record(POD, "Warning", "FailedScheduling", "Scheduling", NOTE)
        await settle()
    writes = _writes(api)
    assert [(method, body["reason"], body["note"]) for method, body in writes] == [
        ("POST", "FailedScheduling", NOTE), ("POST", "FailedScheduling", "another message"),
        ("POST", "WaitingForAllocation", NOTE), ("POST", "FailedScheduling", NOTE)]
    assert len({body["metadata"]["name"] for _, body in writes}) == 4


async def test_a_refused_create_is_dropped_and_the_next_occurrence_creates_it() -> None:
    api, clock = FakeApi(), Clock()
    recorder = _recorder(api, clock)
    api.fail_next("POST", EVENTS, status=500)
    async with running(recorder, api) as settle:
        recorder.record(POD, "Warning", "FailedScheduling", "Scheduling", NOTE)
        await settle()
        assert [e for key, e in api.events.items() if key[0] == "default"] == []
        clock.now = T0 + 1  # no Event exists, so the repeat is not a series: it is created
        recorder.record(POD, "Warning", "FailedScheduling", "Scheduling", NOTE)
        await settle()
    assert [method for method, _ in _writes(api)] == ["POST", "POST"]
    assert [e["eventTime"] for key, e in api.events.items() if key[0] == "default"] == [micro_time(T0 + 1)]


async def test_a_broken_connection_is_tried_again_later_while_the_writer_goes_on() -> None:
    """A write lost in transport (not refused by the apiserver) is tried again about
    `retry_seconds` later, off the queue's path: the next Event does not wait for it."""
    api, clock = FakeApi(), Clock()
    recorder = _recorder(api, clock, retry_seconds=0.05)
    api.fail_next("POST", EVENTS, error=aiohttp.ServerDisconnectedError())
    async with running(recorder, api) as settle:
        recorder.record(POD, "Warning", "FailedScheduling", "Scheduling", NOTE)
        recorder.record(OTHER, "Warning", "FailedScheduling", "Scheduling", NOTE)
        await settle()
        assert [e["regarding"]["name"] for key, e in api.events.items() if key[0] == "default"] == ["q"]
        with anyio.fail_after(5):
            while len([key for key in api.events if key[0] == "default"]) < 2:
                await anyio.sleep(0.01)
    names = [c.body["metadata"]["name"] for c in api.of("POST", EVENTS) if c.body["regarding"]["name"] == "p"]
    assert len(names) == 2 and names[0] == names[1]  # the same Event again, not a new one


async def test_a_failed_series_patch_is_sent_again_at_the_next_repeat_with_the_count_so_far() -> None:
    api, clock = FakeApi(), Clock()
    recorder = _recorder(api, clock, series_interval=30.0)
    async with running(recorder, api) as settle:
        recorder.record(POD, "Warning", "FailedScheduling", "Scheduling", NOTE)
        await settle()
        api.fail_next("PATCH", EVENTS, status=503)
        api.fail_next("PATCH", EVENTS, error=aiohttp.ClientConnectionError())
        for offset in (31, 32, 33):  # due at 31: fails (503), at 32: fails (connection), at 33: lands
            clock.now = T0 + offset
            recorder.record(POD, "Warning", "FailedScheduling", "Scheduling", NOTE)
        await settle()
        clock.now = T0 + 40  # written at 33: the next PATCH waits for the interval again
        recorder.record(POD, "Warning", "FailedScheduling", "Scheduling", NOTE)
        await settle()
    assert [body["series"]["count"] for _, body in _writes(api)[1:]] == [2, 3, 4]
    [event] = [e for key, e in api.events.items() if key[0] == "default"]
    assert event["series"] == {"count": 4, "lastObservedTime": micro_time(T0 + 33)}


async def test_writes_wait_for_the_events_token_bucket_while_record_never_waits() -> None:
    """The recorder writes through its client's token bucket (the live loop gives Events a bucket of
    their own, so they never take a Binding's turn); the scheduling loop only hands events over: a
    full hand-over queue drops (and counts) what does not fit instead of blocking the loop."""
    api, clock = FakeApi(), Clock()
    waited: list[float] = []
    monotonic = [0.0]

    async def sleep(seconds: float) -> None:
        waited.append(seconds)
        monotonic[0] += seconds

    http = KubeHttp(api, RateLimiter(qps=2.0, burst=2, clock=lambda: monotonic[0], sleep=sleep))  # type: ignore[arg-type]
    recorder = _recorder(http, clock)
    async with running(recorder, api) as settle:
        for name in "abcd":
            recorder.record(ObjectRef("Pod", "v1", name, "default", f"uid-{name}"), "Normal", "Scheduled", "Binding", name)
        await settle()
        assert waited[:2] == [0.5, 0.5]  # burst 2, then one token every half second
        assert len(_writes(api)) == 4
        api.fail_next("POST", EVENTS, stall=True)  # the writer is stuck on one request
        recorder.record(POD, "Warning", "FailedScheduling", "Scheduling", NOTE)
        with anyio.fail_after(5):
            while not api.stalled:
                await anyio.sleep(0.001)
        for i in range(QUEUE_SIZE + 1):
            recorder.record(OTHER, "Warning", "FailedScheduling", "Scheduling", f"note {i}")
        assert recorder.dropped == 1


async def test_a_flush_writes_what_the_term_queued_and_the_unwritten_series_counts() -> None:
    """Known, not fixed until now: on SIGTERM the Events a term had queued were dropped with the
    writer. `flush()` (called by the shutdown before the Lease is handed over) returns once
    everything recorded before it has been written, series counts observed since their last write
    included."""
    api, clock = FakeApi(), Clock()
    monotonic = [0.0]

    async def sleep(seconds: float) -> None:  # the events bucket: tokens come only as time passes
        monotonic[0] += seconds
        await anyio.sleep(0.01)

    http = KubeHttp(api, RateLimiter(qps=1.0, burst=1, clock=lambda: monotonic[0], sleep=sleep))  # type: ignore[arg-type]
    recorder = _recorder(http, clock, series_interval=60.0)
    async with running(recorder, api):
        recorder.record(POD, "Warning", "FailedScheduling", "Scheduling", NOTE)
        for name in "abc":
            recorder.record(ObjectRef("Pod", "v1", name, "default", f"uid-{name}"), "Normal", "Scheduled", "Binding", name)
        for offset in (1, 2, 3):  # the first repeat is patched at once, the next two only counted
            clock.now = T0 + offset
            recorder.record(POD, "Warning", "FailedScheduling", "Scheduling", NOTE)
        assert await recorder.flush(5.0) is True
        assert [method for method, _ in _writes(api)] == ["POST"] * 4 + ["PATCH", "PATCH"]
        assert _writes(api)[-1][1]["series"] == {"count": 4, "lastObservedTime": micro_time(T0 + 3)}
        assert await recorder.flush(5.0) is True  # nothing left: no write
        assert len(_writes(api)) == 6


async def test_a_flush_is_bounded_in_time_and_sends_nothing_for_a_term_that_ended() -> None:
    api, clock = FakeApi(), Clock()
    term: list[int | None] = [1]
    ended = _recorder(api, clock, term=lambda: term[0])
    async with running(ended, api):
        pass
    assert await ended.flush(5.0) is False  # the writer ended (with the loop): nothing to wait for
    recorder = _recorder(api, clock, term=lambda: term[0])
    async with running(recorder, api):
        api.fail_next("POST", EVENTS, stall=True)
        recorder.record(POD, "Warning", "FailedScheduling", "Scheduling", NOTE)
        recorder.record(OTHER, "Warning", "FailedScheduling", "Scheduling", NOTE)
        started = anyio.current_time()
        with capture_logs() as logs:
            assert await recorder.flush(0.2) is False
        assert anyio.current_time() - started < 2.0
        assert [entry["event"] for entry in logs] == ["events.flush_timed_out"]
    # a replica whose term ended (the Lease lost) writes none of what the term queued, flushed or not
    api, term[0] = FakeApi(), 1
    recorder = _recorder(api, clock, term=lambda: term[0])
    recorder.record(POD, "Warning", "FailedScheduling", "Scheduling", NOTE)
    term[0] = 2
    async with running(recorder, api):
        assert await recorder.flush(5.0) is True
    assert _writes(api) == []
