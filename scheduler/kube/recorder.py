"""Events (events.k8s.io/v1), aggregated so a stuck pod cannot flood the apiserver.

Mirrors what kube-scheduler's events library (client-go `tools/events`) does: the first occurrence
of (object, reason, note) is a new Event; a repeat observed within 6 minutes of the last one
(`SERIES_WINDOW`, upstream's finishTime) joins its series: the first repeat is patched at once,
later ones only counted and the count written every `series_interval` (upstream's refreshTime,
30 minutes), and once a series has not been observed for the window its final count is written and
it is forgotten. Each object also has a token bucket for new Events (client-go's spam filter
defaults: burst 25, one token per 5 minutes), so a pod retried every 10 s for a day stays about
fifty writes. Notes are cut to upstream's 1024-byte limit (bytes, as the apiserver counts them).
Recording never blocks the scheduling loop: `record()` hands the event over a bounded memory
stream (dropping, and counting, what does not fit) and `run()` writes them in order.
"""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone

import aiohttp
import anyio
import structlog

from scheduler.kube.http import MERGE_PATCH, KubeHttp

log = structlog.get_logger("tessera.events")

NOTE_LIMIT = 1024  # upstream NoteLengthLimit; longer notes end in " ..."
SERIES_WINDOW = 6 * 60.0  # upstream finishTime: a series not observed for this long has ended
SERIES_REFRESH = 30 * 60.0  # upstream refreshTime: a live series' count is written this often
_CACHE = 4096
QUEUE_SIZE = 10_000  # events waiting for the writer; record() drops (and counts) beyond it


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
    name: str
    namespace: str
    last_observed: float
    count: int
    written_count: int
    last_write: float
    failed: bool = False  # the last count write failed: the next observation tries again


_Recorded = tuple[ObjectRef, str, str, str, str, float, "ObjectRef | None"]  # regarding, type, reason, action, note, when, related


class _Bucket:
    __slots__ = ("tokens", "last")

    def __init__(self, burst: float, now: float) -> None:
        self.tokens = burst
        self.last = now


class EventRecorder:
    def __init__(self, http: KubeHttp, *, controller: str, instance: str, series_interval: float = SERIES_REFRESH,
                 burst: int = 25, refill_seconds: float = 300.0, clock: Callable[[], float] = time.time) -> None:
        self.http = http
        self._clock = clock  # wall clock: it stamps eventTime and series.lastObservedTime
        self.controller = controller
        self.instance = instance
        self.series_interval = series_interval
        self.burst = burst
        self.refill = 1.0 / refill_seconds
        # closed when run() ends: an event recorded after that is dropped
        self._send, self._receive = anyio.create_memory_object_stream[_Recorded](QUEUE_SIZE)
        self._series: OrderedDict[tuple[str, str, str], _Series] = OrderedDict()
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()
        self.written = 0
        self.dropped = 0
        self._next_sweep = 0.0  # when ended series are next looked for (on the recorder's clock)

    def record(self, regarding: ObjectRef, type_: str, reason: str, action: str, note: str,
               related: ObjectRef | None = None) -> None:
        note = truncate_note(note)
        try:
            self._send.send_nowait((regarding, type_, reason, action, note, self._clock(), related))
        except (anyio.WouldBlock, anyio.ClosedResourceError):
            self.dropped += 1

    async def run(self) -> None:
        """Write what is recorded, in order, until cancelled."""
        with self._send, self._receive:
            while True:
                item: _Recorded | None = None
                with anyio.move_on_after(SERIES_WINDOW):
                    try:
                        item = await self._receive.receive()
                    except anyio.EndOfStream:
                        return
                try:
                    if item is not None:
                        await self._write(*item)
                    now = self._clock() if item is None else item[5]
                    if now >= self._next_sweep:
                        self._next_sweep = now + SERIES_WINDOW
                        await self._finish_series(now)
                except (aiohttp.ClientError, TimeoutError, OSError) as err:
                    log.warning("events.write_failed", error=str(err))

    async def _finish_series(self, now: float) -> None:
        """Series not observed for the window have ended: their final counts are written, and
        they (and single Events as old) are forgotten."""
        for key, series in list(self._series.items()):
            if now - series.last_observed > SERIES_WINDOW:
                del self._series[key]
                if series.count > series.written_count:
                    await self._patch_series(series)

    async def _write(self, ref: ObjectRef, type_: str, reason: str, action: str, note: str, now: float,
                     related: ObjectRef | None = None) -> None:
        key = (ref.uid or f"{ref.kind}/{ref.namespace}/{ref.name}", reason, note)
        series = self._series.get(key)
        if series is not None and now - series.last_observed <= SERIES_WINDOW:
            series.count += 1
            series.last_observed = now
            self._series.move_to_end(key)
            if series.written_count == 1 or series.failed or now - series.last_write >= self.series_interval:
                await self._patch_series(series)
            return
        if series is not None:  # ended: its final count, then a new Event
            del self._series[key]
            if series.count > series.written_count:
                await self._patch_series(series)
        if not self._allow(key[0], now):
            self.dropped += 1
            return
        namespace = ref.namespace or "default"
        name = f"{ref.name}.{uuid.uuid4().hex[:16]}"
        body = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "eventTime": micro_time(now),
            "reportingController": self.controller,
            "reportingInstance": self.instance,
            "action": action,
            "reason": reason,
            "type": type_,
            "note": note,
            "regarding": _reference(ref),
        }
        if related is not None:
            body["related"] = _reference(related)
        response = await self.http.request("POST", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", body=body)
        if not response.ok:
            log.warning("events.rejected", status=response.status, message=response.message())
            return
        self.written += 1
        self._series[key] = _Series(name, namespace, now, 1, 1, now)
        if len(self._series) > _CACHE:
            self._series.popitem(last=False)

    async def _patch_series(self, series: _Series) -> None:
        """Write a series' count so far; a failed write is tried again at the next observation,
        and an Event that is gone (expired, deleted) ends its series: the next occurrence makes
        a new one."""
        patch = {"series": {"count": series.count, "lastObservedTime": micro_time(series.last_observed)}}
        path = f"/apis/events.k8s.io/v1/namespaces/{series.namespace}/events/{series.name}"
        series.failed = True
        response = await self.http.request("PATCH", path, body=patch, content_type=MERGE_PATCH)
        if response.ok:
            series.written_count = series.count
            series.last_write = series.last_observed
            series.failed = False
            self.written += 1
        elif response.status == 404:
            self._series = OrderedDict((key, kept) for key, kept in self._series.items() if kept is not series)

    def _allow(self, key: str, now: float) -> bool:
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(float(self.burst), now)
            if len(self._buckets) > _CACHE:
                self._buckets.popitem(last=False)
        bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.last) * self.refill)
        bucket.last = now
        if bucket.tokens < 1:
            return False
        bucket.tokens -= 1
        return True


def truncate_note(note: str) -> str:
    """At most NOTE_LIMIT bytes of UTF-8, ending in " ..." when cut (on a character boundary)."""
    encoded = note.encode()
    if len(encoded) <= NOTE_LIMIT:
        return note
    return encoded[: NOTE_LIMIT - 4].decode(errors="ignore") + " ..."


def _reference(ref: ObjectRef) -> dict[str, str | None]:
    return {"kind": ref.kind, "apiVersion": ref.api_version, "name": ref.name,
            "namespace": ref.namespace or None, "uid": ref.uid or None}
