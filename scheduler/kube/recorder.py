"""Events (events.k8s.io/v1), aggregated so a stuck pod cannot flood the apiserver.

Mirrors what kube-scheduler's events library (client-go `tools/events`, the EventBroadcaster)
does: the first occurrence of (object, reason, note) is a new Event; a repeat observed within 6
minutes of the last one (`SERIES_WINDOW`, upstream's finishTime) joins its series: the first repeat
is patched at once, later ones only counted and the count written every `series_interval`
(upstream's refreshTime, 30 minutes), and once a series has not been observed for the window its
final count is written and it is forgotten (upstream's finishSeries; the cache has no other bound,
so thousands of stuck pods still aggregate). As upstream there is no per-object spam filter: a
pod's `Scheduled` after many distinct FailedScheduling notes is always written. A series PATCH that
finds its Event gone (expired, deleted) creates it again with its count (`recordEvent`), and a
write lost in transport is tried again up to `MAX_TRIES` times about `RETRY_SECONDS` apart
(`attemptRecording`); a refusal by the apiserver is not retried. Event names are
`<object>.<random hex>`, or a UUID where that would not be a valid name (GenerateEventName).
Notes are cut to upstream's 1024-byte limit (bytes, as the apiserver counts them).

Only the leader's Events go out: each occurrence carries the leadership term it was recorded in and
is written only while that term lasts (asked after the write's rate-limiter token, as the status
writer does), so a replica that lost the Lease sends nothing its old term decided — kube-scheduler
exits on losing it. A clean shutdown while leading is another matter: before the Lease is handed
over, `flush()` writes what the term had queued (and the series counts not yet written), bounded in
time (`FLUSH_SECONDS`). Upstream drops them: kube-scheduler's recording to the sink stops with its
context (client-go tools/events `startRecordingEvents`) and its OnStoppedLeading exits at once;
`Broadcaster.Shutdown` only hands queued events to watchers. Tessera writes them, as an operator
reading `kubectl describe pod` after a rollout expects the last decisions to be there; they are
the term's own writes, sent while it still holds the Lease. Recording never blocks the scheduling loop: `record()` hands the event over a
bounded memory stream (dropping, and counting, what does not fit) and `run()` writes them in order.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import anyio
import structlog
from anyio.abc import TaskGroup

from scheduler.api.names import DNS_SUBDOMAIN
from scheduler.kube.http import TRANSPORT_ERRORS, MERGE_PATCH, KubeHttp
from scheduler.logs import describe_error
from scheduler.shortened import shortened

log = structlog.get_logger("tessera.events")

NOTE_LIMIT = 1024  # upstream NoteLengthLimit; longer notes end in " ..."
SERIES_WINDOW = 6 * 60.0  # upstream finishTime: a series not observed for this long has ended
SERIES_REFRESH = 30 * 60.0  # upstream refreshTime: a live series' count is written this often
QUEUE_SIZE = 10_000  # events waiting for the writer; record() drops (and counts) beyond it
MAX_TRIES = 12  # upstream maxTriesPerEvent: writes lost in transport are tried this often in all
RETRY_SECONDS = 10.0  # upstream defaultSleepDuration between tries (the first one jittered)
FLUSH_SECONDS = 5.0  # at a clean shutdown: the most the queued Events may add to it (a pod's grace is 30 s)
_NAME_LIMIT = 253
INSTANCE_LIMIT = 128  # events.k8s.io/v1 validation: reportingInstance at most 128 characters


def micro_time(now: float | None = None) -> str:
    moment = datetime.fromtimestamp(time.time() if now is None else now, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class ObjectRef:
    kind: str
    api_version: str
    name: str
    namespace: str = ""
    uid: str = ""


@dataclass(slots=True)
class _Series:
    body: dict[str, Any]  # the Event as created: what a PATCH that finds it gone creates again
    last_observed: float
    count: int
    written_count: int
    last_write: float
    failed: bool = False  # the last count write failed: the next observation tries again

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.body["metadata"]["namespace"])


@dataclass(slots=True)
class _Occurrence:
    regarding: ObjectRef
    type_: str
    reason: str
    action: str
    note: str
    when: float
    related: ObjectRef | None
    term: Hashable | None  # the leadership term it was recorded in: written only while it lasts
    controller: str  # its reportingController: the scheduler name of the profile it is recorded for
    tries: int = 0
    body: dict[str, Any] | None = field(default=None)  # set once made: a retry sends the same Event


class EventRecorder:
    def __init__(self, http: KubeHttp, *, controller: str, instance: str, series_interval: float = SERIES_REFRESH,
                 clock: Callable[[], float] = time.time, term: Callable[[], Hashable | None] = lambda: 0,
                 retry_seconds: float = RETRY_SECONDS) -> None:
        self.http = http
        self._clock = clock  # wall clock: it stamps eventTime and series.lastObservedTime
        self.controller = controller
        self.instance = shortened(instance, INSTANCE_LIMIT)  # a long --identity must not get every Event refused
        self.series_interval = series_interval
        self.term = term
        self.retry_seconds = retry_seconds
        # closed when run() ends: an event recorded after that is dropped
        # (an anyio.Event in it is a flush: set once everything before it was handled)
        self._send, self._receive = anyio.create_memory_object_stream[_Occurrence | anyio.Event](QUEUE_SIZE)
        self._series: dict[tuple[str, str, str, str], _Series] = {}
        self._series_term: Hashable | None = None  # the term the series cache belongs to
        self.written = 0
        self.dropped = 0
        self._next_sweep = 0.0  # when ended series are next looked for (on the recorder's clock)

    def record(self, regarding: ObjectRef, type_: str, reason: str, action: str, note: str,
               related: ObjectRef | None = None, controller: str = "") -> None:
        """Queue an Event; `controller`: the scheduler name of the profile that decided it (its
        reportingController, as kube-scheduler gives each profile a recorder of its own), "" for
        the recorder's own (the first profile's)."""
        occurrence = _Occurrence(regarding, type_, reason, action, truncate_note(note), self._clock(), related,
                                 self.term(), controller or self.controller)
        self._enqueue(occurrence)

    def _enqueue(self, occurrence: _Occurrence) -> None:
        try:
            self._send.send_nowait(occurrence)
        except (anyio.WouldBlock, anyio.ClosedResourceError):
            self.dropped += 1

    async def flush(self, timeout: float) -> bool:
        """For a clean shutdown, before the Lease is handed over: wait until everything recorded
        before this call and the series counts not yet written have had their write (each still
        only while its term leads), for at most `timeout` seconds. True if all had it; False when
        time ran out or the writer has ended. Writes waiting to be tried again are not waited for."""
        done = anyio.Event()
        with anyio.move_on_after(timeout):
            try:
                await self._send.send(done)
            except anyio.ClosedResourceError:
                return False
            await done.wait()
            return True
        log.warning("events.flush_timed_out", seconds=timeout, queued=self._receive.statistics().current_buffer_used,
                    message="the shutdown goes on without the Events still queued")
        return False

    async def run(self) -> None:
        """Write what is recorded, in order, until cancelled."""
        async with anyio.create_task_group() as retries:
            with self._send, self._receive:
                await self._write_forever(retries)

    async def _write_forever(self, retries: TaskGroup) -> None:
        while True:
            item: _Occurrence | anyio.Event | None = None
            with anyio.move_on_after(SERIES_WINDOW):
                try:
                    item = await self._receive.receive()
                except anyio.EndOfStream:
                    return
            try:
                if isinstance(item, anyio.Event):
                    try:
                        await self._write_counts()
                    finally:
                        item.set()
                elif item is not None:
                    await self._handle(item, retries)
                now = item.when if isinstance(item, _Occurrence) else self._clock()
                if now >= self._next_sweep:
                    self._next_sweep = now + SERIES_WINDOW
                    await self._finish_series(now)
            except TRANSPORT_ERRORS as err:
                log.warning("events.write_failed", error=describe_error(err))

    async def _handle(self, item: _Occurrence, retries: TaskGroup) -> None:
        """One occurrence; a new Event lost in transport is tried again later, off the queue's path."""
        try:
            await self._write(item)
        except TRANSPORT_ERRORS as err:
            if item.body is None:  # a series count: written again at the next observation or the sweep
                raise
            item.tries += 1
            if item.tries >= MAX_TRIES:
                self.dropped += 1
                log.error("events.retry_limit", name=item.body["metadata"]["name"], error=describe_error(err))
                return
            # upstream jitters only the first wait, so clients do not all come back at once
            delay = self.retry_seconds * (random.random() if item.tries == 1 else 1.0)
            log.warning("events.write_failed", name=item.body["metadata"]["name"], error=describe_error(err), retry_in=delay)
            retries.start_soon(self._retry, item, delay)

    async def _retry(self, item: _Occurrence, delay: float) -> None:
        await anyio.sleep(delay)
        self._enqueue(item)

    async def _leading(self, term: Hashable | None) -> bool:
        """Wait for a write token, then say whether `term` still leads (a replica deposed while it
        waited must not write what its old term decided); a new term starts with no series."""
        if term is None or self.term() != term:
            return False
        await self.http.acquire()
        if self.term() != term:
            return False
        if term != self._series_term:
            self._series, self._series_term = {}, term
        return True

    def _in_series_term(self) -> Callable[[], bool]:
        """For a write `_leading` let through: may the transport send it again after a Retry-After
        wait? Only while the term it was let through in still leads."""
        term = self._series_term
        return lambda: term is not None and self.term() == term

    async def _finish_series(self, now: float) -> None:
        """Series not observed for the window have ended: their final counts are written, and
        they (and single Events as old) are forgotten."""
        for key, series in list(self._series.items()):
            if now - series.last_observed > SERIES_WINDOW:
                del self._series[key]
                if series.count > series.written_count and await self._leading(self._series_term):
                    await self._patch_series(series)

    async def _write_counts(self) -> None:
        """The counts of live series observed since their last write (a flush: the term ends)."""
        for series in list(self._series.values()):
            if series.count > series.written_count and await self._leading(self._series_term):
                await self._patch_series(series)

    async def _write(self, item: _Occurrence) -> None:
        if not await self._leading(item.term):
            self.dropped += 1
            return
        if item.body is not None:  # a retry: the same Event again
            await self._create(item.body, _key(item), item.when)
            return
        now = item.when
        key = _key(item)
        series = self._series.get(key)
        if series is not None and now - series.last_observed <= SERIES_WINDOW:
            series.count += 1
            series.last_observed = now
            if series.written_count == 1 or series.failed or now - series.last_write >= self.series_interval:
                await self._patch_series(series)
            return
        if series is not None:  # ended: its final count, then a new Event
            del self._series[key]
            if series.count > series.written_count:
                await self._patch_series(series)
        item.body = self._event(item)
        await self._create(item.body, key, now)

    def _event(self, item: _Occurrence) -> dict[str, Any]:
        ref = item.regarding
        namespace = ref.namespace or "default"
        body: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": event_name(ref.name), "namespace": namespace},
            "eventTime": micro_time(item.when),
            "reportingController": item.controller,
            "reportingInstance": self.instance,
            "action": item.action,
            "reason": item.reason,
            "type": item.type_,
            "note": item.note,
            "regarding": _reference(ref),
        }
        if item.related is not None:
            body["related"] = _reference(item.related)
        return body

    async def _create(self, body: dict[str, Any], key: tuple[str, str, str, str], now: float) -> None:
        namespace = body["metadata"]["namespace"]
        response = await self.http.request("POST", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events",
                                           body=body, limited=False, resend=self._in_series_term())
        if not response.ok:
            if response.status != 409:  # AlreadyExists: an earlier try landed after all
                log.warning("events.rejected", status=response.status, message=response.message())
            return
        self.written += 1
        self._series[key] = _Series(body, now, 1, 1, now)

    async def _patch_series(self, series: _Series) -> None:
        """Write a series' count so far; a failed write is tried again at the next observation.
        An Event that is gone (expired, deleted) is created again with its series, as upstream's
        recordEvent falls back to Create."""
        patch = {"series": {"count": series.count, "lastObservedTime": micro_time(series.last_observed)}}
        path = f"/apis/events.k8s.io/v1/namespaces/{series.namespace}/events/{series.name}"
        series.failed = True
        response = await self.http.request("PATCH", path, body=patch, content_type=MERGE_PATCH, limited=False,
                                           resend=self._in_series_term())
        if response.status == 404:
            response = await self.http.request("POST", f"/apis/events.k8s.io/v1/namespaces/{series.namespace}/events",
                                               body={**series.body, **patch}, limited=False,
                                               resend=self._in_series_term())
        if response.ok:
            series.written_count = series.count
            series.last_write = series.last_observed
            series.failed = False
            self.written += 1


def _key(item: _Occurrence) -> tuple[str, str, str, str]:
    """What makes repeats one series: the object, reason and note (see the module's docstring),
    and the reportingController, which client-go's getKey (tools/events) includes too."""
    ref = item.regarding
    return (ref.uid or f"{ref.kind}/{ref.namespace}/{ref.name}", item.reason, item.note, item.controller)


def event_name(regarding: str) -> str:
    """`<object>.<random hex>`, or a UUID where that is not a valid object name (a long object
    name): upstream's GenerateEventName."""
    name = f"{regarding}.{uuid.uuid4().hex[:16]}"
    if len(name) > _NAME_LIMIT or not DNS_SUBDOMAIN.fullmatch(name):
        return str(uuid.uuid4())
    return name


def truncate_note(note: str) -> str:
    """At most NOTE_LIMIT bytes of UTF-8, ending in " ..." when cut (on a character boundary)."""
    encoded = note.encode()
    if len(encoded) <= NOTE_LIMIT:
        return note
    return encoded[: NOTE_LIMIT - 4].decode(errors="ignore") + " ..."


def _reference(ref: ObjectRef) -> dict[str, str | None]:
    return {"kind": ref.kind, "apiVersion": ref.api_version, "name": ref.name,
            "namespace": ref.namespace or None, "uid": ref.uid or None}
