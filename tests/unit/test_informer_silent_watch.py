"""A watch that stalls is restarted after the apiserver's bookmark period, not the read timeout.

Regression (a live adversary): a proxy held the leader's watch responses while passing its other
requests. The leader kept its Lease and bound nothing: a stalled-but-open stream was noticed only by
the socket read timeout, `timeoutSeconds` (5-10 min) + 30 s. The watch cache sends every watch that
allows bookmarks a BOOKMARK about every minute (k8s.io/apiserver cacher.go defaultBookmarkFrequency),
so once a kind's watches have been seen to carry them, a longer silence is a stall: the watch is
restarted from its resourceVersion, as after a server-side timeout. A kind whose watches never
carried a bookmark (the watch cache off) keeps the read timeout: a quiet watch there is healthy.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson
import pytest
import structlog.testing

from scheduler.kube import informers
from tests.unit.test_informer_relist import GONE, FakeStream, event, make, page, pod, run_until

SILENCE = 0.3


@pytest.fixture(autouse=True)
def short_silence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(informers, "WATCH_SILENCE_SECONDS", SILENCE)


@pytest.fixture
def short_replay(monkeypatch: pytest.MonkeyPatch) -> float:
    monkeypatch.setattr(informers, "STALL_REPLAY_SECONDS", 0.1)
    return 0.1


def stamp(ago: float) -> str:
    """An RFC 3339 time `ago` seconds back, at the apiserver's resolution (seconds)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - ago))


def written(obj: dict[str, Any], ago: float) -> dict[str, Any]:
    """`obj` as the apiserver sends it, last written `ago` seconds back (its managedFields entry's time)."""
    meta = obj["metadata"]
    return {**obj, "metadata": {**meta, "creationTimestamp": stamp(ago),
                                "managedFields": [{**entry, "time": stamp(ago)} for entry in meta["managedFields"]]}}


def bookmark(rv: str) -> bytes:
    return event("BOOKMARK", {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": rv}})


class BookmarkingStream:
    """A quiet, healthy watch: a BOOKMARK every `period` seconds, forever."""

    def __init__(self, period: float) -> None:
        self.period = period
        self.status = 200
        self.content = self
        self.sent = 0

    async def readany(self) -> bytes:
        await asyncio.sleep(self.period)
        self.sent += 1
        return bookmark(str(10 + self.sent))

    async def read(self) -> bytes:
        return b""


class LateStream:
    """A watch that sends `data` only after `delay` seconds (a live change on a quiet kind), then hangs."""

    def __init__(self, delay: float, data: bytes) -> None:
        self.delay = delay
        self.due: float | None = None  # set by the first read: when the informer opened the watch
        self.data = data
        self.status = 200
        self.content = self

    async def readany(self) -> bytes:
        """As aiohttp's, a read cancelled (the informer's wake-up) loses nothing: the data still comes when due."""
        if self.due is None:
            self.due = time.monotonic() + self.delay
        await asyncio.sleep(self.due - time.monotonic())
        data, self.data, self.due = self.data, b"", float("inf") if self.data else self.due
        if not data:
            await asyncio.Event().wait()
        return data

    async def read(self) -> bytes:
        return b""


async def test_a_stalled_watch_is_restarted_from_its_resource_version_after_the_bound() -> None:
    """A bookmark, then nothing: restarted after the bound (logged, no relist, no backoff); the bound
    holds from the start of the next stream too (it stalls at once), and the third one brings the
    pod created meanwhile."""
    informer, http, sink = make([page([pod("a", "5")], "5")], [
        FakeStream(bookmark("6")),  # then hangs
        FakeStream(),  # hangs from the start
        FakeStream(event("ADDED", pod("b", "7"))),
    ])
    started = time.monotonic()
    with structlog.testing.capture_logs() as logs:
        await run_until(informer, lambda: any(obj["metadata"]["name"] == "b" for _, obj in sink.events))
    elapsed = time.monotonic() - started
    assert [q["resourceVersion"] for _, q, _ in http.watch_calls] == ["5", "6", "6"]
    assert 2 * SILENCE <= elapsed < 2 * SILENCE + 2.0
    assert (informer.stats.lists, informer.stats.relists, informer.stats.errors) == (1, 0, 0)
    # the first stream stalled after sending: a stall; the second sent nothing from its start, which a
    # quiet kind's healthy watch does too (restarted all the same, said at debug: `_quiet`)
    silent = [entry for entry in logs if entry["event"] in ("informer.watch_silent", "informer.watch_quiet")]
    assert [(e["event"], e["log_level"]) for e in silent] == [("informer.watch_silent", "warning"),
                                                              ("informer.watch_quiet", "debug")]
    assert all(entry["kind"] == "Pod" and SILENCE <= entry["silent_seconds"] < SILENCE + 1.0 for entry in silent)
    assert "sent nothing (no event, no bookmark) for" in silent[0]["message"]
    assert [(kind, obj["metadata"]["name"]) for kind, obj in sink.events] == [("ADDED", "a"), ("ADDED", "b")]


async def test_a_quiet_watch_that_gets_bookmarks_is_not_restarted() -> None:
    stream = BookmarkingStream(SILENCE / 3)
    informer, http, _ = make([page([], "5")], [stream])  # type: ignore[list-item]
    await run_until(informer, lambda: stream.sent >= 15)  # five bounds' worth of quiet
    assert len(http.watch_calls) == 1 and informer.bookmarks_seen


async def test_without_bookmarks_only_the_read_timeout_ends_a_quiet_watch() -> None:
    """The watch cache off: no bookmark ever, so silence proves nothing."""
    informer, http, _ = make([page([pod("a", "5")], "5")], [FakeStream(event("MODIFIED", pod("a", "6")))])
    deadline = time.monotonic() + 5 * SILENCE
    await run_until(informer, lambda: time.monotonic() > deadline)
    assert len(http.watch_calls) == 1 and not informer.bookmarks_seen
    assert http.watch_calls[0][2] >= informers.MIN_WATCH_TIMEOUT + informers.READ_TIMEOUT_MARGIN


def test_the_bound_is_the_apiservers_bookmark_period_plus_its_epsilon() -> None:
    """k8s.io/apiserver@v0.36.3 pkg/storage/cacher/cacher.go: defaultBookmarkFrequency = time.Minute,
    DefaultEventFreshDuration = defaultBookmarkFrequency + 15*time.Second."""
    assert informers.BOOKMARK_PERIOD_SECONDS == 60.0
    assert orjson.loads(bookmark("1"))["type"] == "BOOKMARK"


async def test_a_quiet_kinds_watch_silent_from_its_start_is_no_warning(short_replay: float) -> None:
    """A trial finding: on a quiet, healthy dev-cluster `informer.watch_silent` warned every 75 s for
    the ExtendedResource watch. The watch cache sends a watch only events newer than the
    resourceVersion it started from, bookmarks included (k8s.io/apiserver@v0.36.3
    pkg/storage/cacher/cache_watcher.go `process`: `event.ResourceVersion > resourceVersion`), and a
    bookmark carries the last resourceVersion of its own resource: once nothing of a kind changes, a
    watch resumed from the last bookmark's version gets no bookmark at all. Restarted all the same (a
    stream stalled at once looks the same), at debug under `informer.watch_quiet`."""
    informer, http, sink = make([page([pod("a", "5")], "5")], [
        FakeStream(bookmark("6"), end="eof"),  # a bookmark, then the server's timeoutSeconds
        FakeStream(),  # resumed from 6: nothing newer ever comes
        LateStream(2 * short_replay, event("ADDED", pod("b", "7"))),  # type: ignore[list-item]  # a change, later
    ])
    with structlog.testing.capture_logs() as logs:
        await run_until(informer, lambda: any(obj["metadata"]["name"] == "b" for _, obj in sink.events))
    assert [q["resourceVersion"] for _, q, _ in http.watch_calls] == ["5", "6", "6"]
    assert not [entry for entry in logs if entry["log_level"] == "warning"]
    [quiet] = [entry for entry in logs if entry["event"] == "informer.watch_quiet"]
    assert quiet["log_level"] == "debug" and "nothing newer than resourceVersion 6" in quiet["message"]


async def test_a_watch_stalled_from_its_start_is_told_by_what_its_restart_delivers_at_once(short_replay: float) -> None:
    """A review finding: since the quiet split, a stream held from its start (a proxy holding the
    response) was said only at debug, as a quiet kind's: a scheduler blind on the kind warned nobody.
    The restart tells them apart: resumed from the same resourceVersion, the watch cache sends at
    once every change newer than it, i.e. what the held stream should have sent. Those arriving in
    its first moments make the quiet spell(s) a stall: one warning, naming the kind, how long and
    how many changes came late; two quiet spells in a row (the stall outlasting a restart) add up."""
    informer, http, sink = make([page([pod("a", "5")], "5")], [
        FakeStream(bookmark("6"), end="eof"),
        FakeStream(),  # held from its start while b is created and a changed
        FakeStream(),  # the restart held as well
        # written while the streams were held (10 s back: the restarts here take under a second)
        FakeStream(event("ADDED", written(pod("b", "7"), 10)) + event("MODIFIED", written(pod("a", "8"), 10))),
    ])
    with structlog.testing.capture_logs() as logs:
        await run_until(informer, lambda: len(sink.events) == 3)
        await asyncio.sleep(2 * short_replay)
    assert [q["resourceVersion"] for _, q, _ in http.watch_calls] == ["5", "6", "6", "6"]
    assert [entry["event"] for entry in logs if entry["event"].startswith("informer.watch_")] == [
        "informer.watch_quiet", "informer.watch_quiet", "informer.watch_stalled"]
    [stalled] = [entry for entry in logs if entry["log_level"] == "warning"]
    assert stalled["event"] == "informer.watch_stalled" and stalled["kind"] == "Pod"
    assert (stalled["late_events"], stalled["restarts"]) == (2, 2)
    assert 2 * SILENCE <= stalled["silent_seconds"] < 2 * SILENCE + 1.0
    assert "2 changes" in stalled["message"] and "stalled" in stalled["message"]


async def test_a_quiet_kinds_restart_that_stays_quiet_until_a_later_change_is_no_warning(short_replay: float) -> None:
    """The other side: a kind nothing changed keeps being restarted at debug, and a change that comes
    later in a restarted stream (not in its first moments) is live news, not a backlog."""
    informer, http, sink = make([page([pod("a", "5")], "5")], [
        FakeStream(bookmark("6"), end="eof"),
        FakeStream(),
        LateStream(2 * short_replay, event("ADDED", pod("b", "7"))),  # type: ignore[list-item]
        FakeStream(event("ADDED", pod("c", "9"))),
    ])
    with structlog.testing.capture_logs() as logs:
        await run_until(informer, lambda: len(sink.events) == 2)
        await asyncio.sleep(2 * short_replay)
    assert not [entry for entry in logs if entry["log_level"] == "warning"]
    assert len(http.watch_calls) == 3


async def test_a_quiet_spell_whose_restart_must_relist_is_a_stall_only_if_the_relist_finds_changes() -> None:
    """The restart after a quiet spell may meet 410 Gone (the changes meanwhile outran the watch
    cache, or another apiserver's cache began after our resourceVersion): the relist then tells."""
    gone = FakeStream(orjson.dumps(GONE), status=410)
    for changed, warned in ((True, ["informer.watch_stalled"]), (False, [])):
        relisted = page([written(pod("a", "8"), 10) if changed else pod("a", "5")], "9")
        informer, _, sink = make([page([pod("a", "5")], "5"), relisted],
                                 [FakeStream(bookmark("6"), end="eof"), FakeStream(), gone])
        with structlog.testing.capture_logs() as logs:
            await run_until(informer, lambda: informer.stats.lists == 2)
        assert [entry["event"] for entry in logs if entry["log_level"] == "warning"] == warned
        if changed:
            assert [entry["late_events"] for entry in logs if entry["log_level"] == "warning"] == [1]
            assert sink.events[-1][0] == "MODIFIED"


async def test_a_quiet_kinds_first_change_made_as_its_watch_restarts_is_no_warning(short_replay: float) -> None:
    """A review finding: a quiet kind's watch is restarted every 75 s, so its first change lands in a
    restart's first second about once in 75 (more with the spell added up) and was told as a stall
    ("the scheduler did not see them until now") though nothing was held. A change proves a stall
    only if its object was last written before the restarted watch opened (`_held_back`): this one
    was written as the watch opened."""
    informer, http, sink = make([page([pod("a", "5")], "5")], [
        FakeStream(bookmark("6"), end="eof"),
        FakeStream(),  # quiet: nothing changed
        FakeStream(event("ADDED", written(pod("b", "7"), 0)) + event("MODIFIED", written(pod("a", "8"), 0))
                   + event("DELETED", pod("a", "9"))),  # made just now, arriving at once
    ])
    with structlog.testing.capture_logs() as logs:
        await run_until(informer, lambda: len(sink.events) == 4)
        await asyncio.sleep(2 * short_replay)
    assert len(http.watch_calls) == 3
    assert not [entry for entry in logs if entry["log_level"] == "warning"]
    assert informer._quiet is None  # the spell is over all the same: the kind changed, live


async def test_a_quiet_spells_410_relist_finding_only_changes_made_in_its_pause_is_no_warning() -> None:
    """The same for a relist: what changed during the 410's pause, after the restart, was not held back."""
    gone = FakeStream(orjson.dumps(GONE), status=410)
    informer, _, sink = make([page([pod("a", "5")], "5"), page([written(pod("a", "8"), 0)], "9")],
                             [FakeStream(bookmark("6"), end="eof"), FakeStream(), gone])
    with structlog.testing.capture_logs() as logs:
        await run_until(informer, lambda: informer.stats.lists == 2)
    assert not [entry for entry in logs if entry["log_level"] == "warning"]
    assert sink.events[-1][0] == "MODIFIED" and informer._quiet is None


def test_only_an_object_last_written_before_the_restart_by_the_margin_is_evidence() -> None:
    now = time.time()
    old, new = written(pod("a", "5"), 10), written(pod("a", "5"), 0)
    created_only = {"metadata": {"name": "a", "creationTimestamp": stamp(10)}}
    assert informers._held_back("MODIFIED", old, now)
    assert not informers._held_back("MODIFIED", new, now)
    assert not informers._held_back("DELETED", old, now)  # a deletion's object is as it was before
    assert informers._held_back("ADDED", created_only, now)  # no managedFields: created is written
    assert not informers._held_back("MODIFIED", created_only, now)  # modified when? no evidence
    assert not informers._held_back("MODIFIED", pod("a", "5"), now)  # managedFields without a time
    assert not informers._held_back("ADDED", {"metadata": {"creationTimestamp": "garbage"}}, now)
    # the newest managedFields entry counts, and seconds resolution needs the margin
    mixed = {"metadata": {"managedFields": [{"time": stamp(10)}, {"time": stamp(1)}]}}
    assert not informers._held_back("MODIFIED", mixed, now)
    assert informers._held_back("MODIFIED", mixed, now + informers.STALL_EVIDENCE_MARGIN_SECONDS + 1)


def _deleting(obj: dict[str, Any], grace: int) -> dict[str, Any]:
    """`obj` as a graceful DELETE just now leaves it: deletionTimestamp is the deadline (now +
    `grace`), and managedFields are untouched (the apiserver's delete path runs no field manager)."""
    return {**obj, "metadata": {**obj["metadata"], "deletionTimestamp": stamp(-grace),
                                "deletionGracePeriodSeconds": grace}}


def _bound(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` as a Binding just now leaves it: spec.nodeName and a PodScheduled condition moved to
    True now, managedFields untouched (BindingREST updates the pod in storage, no field manager)."""
    return {**obj, "spec": {"nodeName": "n1"}, "status": {"conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp(0)}]}}


def test_a_change_that_moves_no_managed_fields_time_is_dated_by_what_it_wrote() -> None:
    """A review finding: a graceful deletion and a Binding write no managedFields entry, so an old
    object deleted or bound just as a quiet kind's watch restarted looked written long before the
    restart and was told as a stall. The deletion is dated by when it was asked
    (deletionTimestamp - deletionGracePeriodSeconds), a condition's move by its lastTransitionTime."""
    now = time.time()
    old = written(pod("a", "5"), 60)
    assert informers._held_back("MODIFIED", old, now)
    assert not informers._held_back("MODIFIED", _deleting(old, 30), now)
    assert not informers._held_back("MODIFIED", _deleting(old, 0), now)
    assert not informers._held_back("MODIFIED", _bound(old), now)
    # asked (or bound) well before the restart: still evidence
    assert informers._held_back("MODIFIED", _deleting(old, 30), now + 10)
    assert informers._held_back("MODIFIED", _bound(old), now + 10)


def test_odd_metadata_times_are_no_evidence_and_no_error() -> None:
    """managedFields or conditions that are no list, a deletion grace that is no number: no evidence, no exception."""
    now = time.time()
    for meta in ({"managedFields": 5}, {"managedFields": [{"time": 5}]}, {"managedFields": None},
                 {"managedFields": [{"time": stamp(60)}], "deletionTimestamp": stamp(0),
                  "deletionGracePeriodSeconds": "x"},
                 {"managedFields": [{"time": stamp(60)}], "deletionTimestamp": 7},
                 # a time without a zone beside ones with (naive and aware times do not compare)
                 {"managedFields": [{"time": stamp(60)}, {"time": "2020-01-01T00:00:00"}]}):
        assert not informers._held_back("MODIFIED", {"metadata": meta}, now), meta
    for status in (5, {"conditions": 5}, {"conditions": [5, {"lastTransitionTime": 7}]}):
        obj = {"metadata": {"managedFields": [{"time": stamp(60)}]}, "status": status}
        assert informers._held_back("MODIFIED", obj, now), status  # what can be read still counts


async def test_an_old_pod_deleted_or_bound_as_a_quiet_kinds_watch_restarts_is_no_warning(short_replay: float) -> None:
    """The watch loop end to end: the restarted watch delivers at once an old pod's graceful
    deletion and another's Binding, both made as it opened: no informer.watch_stalled."""
    a, b = written(pod("a", "5"), 60), written(pod("b", "5"), 60)
    informer, http, sink = make([page([a, b], "5")], [
        FakeStream(bookmark("6"), end="eof"),
        FakeStream(),  # quiet: nothing changed
        FakeStream(event("MODIFIED", _deleting(written(pod("a", "7"), 60), 30))
                   + event("MODIFIED", _bound(written(pod("b", "8"), 60)))),
    ])
    with structlog.testing.capture_logs() as logs:
        await run_until(informer, lambda: len(sink.events) == 4)
        await asyncio.sleep(2 * short_replay)
    assert len(http.watch_calls) == 3
    assert not [entry for entry in logs if entry["log_level"] == "warning"]
    assert informer._quiet is None


async def test_a_quiet_spells_410_relist_finding_only_a_binding_made_in_its_pause_is_no_warning() -> None:
    """The relist reads the status too: an old pod bound during the 410's pause was not held back."""
    gone = FakeStream(orjson.dumps(GONE), status=410)
    informer, _, sink = make([page([written(pod("a", "5"), 60)], "5"), page([_bound(written(pod("a", "8"), 60))], "9")],
                             [FakeStream(bookmark("6"), end="eof"), FakeStream(), gone])
    with structlog.testing.capture_logs() as logs:
        await run_until(informer, lambda: informer.stats.lists == 2)
    assert not [entry for entry in logs if entry["log_level"] == "warning"]
    assert sink.events[-1][0] == "MODIFIED" and informer._quiet is None
