"""Events (events.k8s.io/v1), aggregated so a stuck pod cannot flood the apiserver.

Mirrors what kube-scheduler's events library does: the first occurrence of (object, reason, note)
is a new Event; repeats within the series window only bump `series.count`, written at most every
`series_interval` seconds; and each object has a token bucket (client-go's spam filter defaults:
burst 25, one token per 5 minutes) so a pod retried every 10 s for a day stays a handful of writes.
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
SERIES_WINDOW = 6 * 60.0
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
    first: float
    count: int
    written_count: int
    last_write: float


_Recorded = tuple[ObjectRef, str, str, str, str, float, "ObjectRef | None"]  # regarding, type, reason, action, note, when, related


class _Bucket:
    __slots__ = ("tokens", "last")

    def __init__(self, burst: float, now: float) -> None:
        self.tokens = burst
        self.last = now


class EventRecorder:
    def __init__(self, http: KubeHttp, *, controller: str, instance: str, series_interval: float = 30.0,
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

    def record(self, regarding: ObjectRef, type_: str, reason: str, action: str, note: str,
               related: ObjectRef | None = None) -> None:
        if len(note) > NOTE_LIMIT:
            note = note[: NOTE_LIMIT - 4] + " ..."
        try:
            self._send.send_nowait((regarding, type_, reason, action, note, self._clock(), related))
        except (anyio.WouldBlock, anyio.ClosedResourceError):
            self.dropped += 1

    async def run(self) -> None:
        """Write what is recorded, in order, until cancelled."""
        with self._send, self._receive:
            async for item in self._receive:
                try:
                    await self._write(*item)
                except (aiohttp.ClientError, TimeoutError, OSError) as err:
                    log.warning("events.write_failed", error=str(err))

    async def _write(self, ref: ObjectRef, type_: str, reason: str, action: str, note: str, now: float,
                     related: ObjectRef | None = None) -> None:
        key = (ref.uid or f"{ref.kind}/{ref.namespace}/{ref.name}", reason, note)
        series = self._series.get(key)
        if series is not None and now - series.first <= SERIES_WINDOW:
            series.count += 1
            self._series.move_to_end(key)
            if now - series.last_write >= self.series_interval:
                await self._patch_series(series, now)
            return
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

    async def _patch_series(self, series: _Series, now: float) -> None:
        patch = {"series": {"count": series.count, "lastObservedTime": micro_time(now)}}
        path = f"/apis/events.k8s.io/v1/namespaces/{series.namespace}/events/{series.name}"
        response = await self.http.request("PATCH", path, body=patch, content_type=MERGE_PATCH)
        if response.ok:
            series.written_count = series.count
            series.last_write = now
            self.written += 1

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


def _reference(ref: ObjectRef) -> dict[str, str | None]:
    return {"kind": ref.kind, "apiVersion": ref.api_version, "name": ref.name,
            "namespace": ref.namespace or None, "uid": ref.uid or None}
