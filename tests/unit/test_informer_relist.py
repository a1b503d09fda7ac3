"""Informer protocol with a scripted fake transport: the relist diff (synthetic DELETED), 410 in a
stream and on connect, bookmarks, resume-from-RV after errors, CRDs that are not installed.

Why a fake and not the real apiserver: these paths depend on timing the real server does not let
a test choose (when a 410 happens, what vanished in the gap); the e2e tests show the same paths
happen for real."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import aiohttp
import orjson
import pytest
from structlog.testing import capture_logs

from scheduler.kube import informers
from scheduler.kube.http import KubeHttp, Response
from scheduler.kube.informers import DISRUPTION_BUDGETS, NODES, PODS, POD_GROUPS, Informer, InformerSet, ResourceKind


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(informers, "BACKOFF_INITIAL", 0.001)
    monkeypatch.setattr(informers, "BACKOFF_MAX", 0.01)
    monkeypatch.setattr(informers, "UNAVAILABLE_RETRY_SECONDS", 0.01)


def pod(name: str, rv: str, uid: str | None = None, **labels: str) -> dict[str, Any]:
    """A pod as a LIST item: no kind/apiVersion."""
    return {"metadata": {"name": name, "namespace": "ns", "uid": uid or f"uid-{name}",
                         "resourceVersion": rv, "labels": labels,
                         "managedFields": [{"manager": "kubectl", "fieldsV1": {}}]}}


def page(items: list[dict[str, Any]], rv: str, cont: str = "") -> Response:
    meta = {"resourceVersion": rv, **({"continue": cont} if cont else {})}
    return Response(200, orjson.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": meta, "items": items}))


def event(kind: str, obj: dict[str, Any]) -> bytes:
    return orjson.dumps({"type": kind, "object": obj}) + b"\n"


def watched(obj: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "Pod", "apiVersion": "v1", **obj}


GONE = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "too old resource version: 5 (9)", "reason": "Expired", "code": 410}


@dataclass
class FakeStream:
    """One watch response: its bytes arrive in small chunks (lines split across chunks), then
    `end`: "eof" (server closed), "hang" (no more data ever) or an exception to raise."""
    data: bytes = b""
    status: int = 200
    end: str | BaseException = "hang"
    chunks: deque[bytes] = field(default_factory=deque)

    def __post_init__(self) -> None:
        self.chunks.extend(self.data[i:i + 7] for i in range(0, len(self.data), 7))
        self.content = self

    async def readany(self) -> bytes:
        await asyncio.sleep(0)
        if self.chunks:
            return self.chunks.popleft()
        if isinstance(self.end, BaseException):
            raise self.end
        if self.end == "hang":
            await asyncio.Event().wait()
        return b""

    async def read(self) -> bytes:
        return self.data


class FakeHttp:
    """Scripted LIST pages and watch streams; records every call."""

    def __init__(self, lists: Sequence[Response | BaseException], watches: Sequence[FakeStream | BaseException]) -> None:
        self.lists = deque(lists)
        self.watches = deque(watches)
        self.list_calls: list[tuple[str, dict[str, str], bool]] = []
        self.watch_calls: list[tuple[str, dict[str, str], float]] = []

    async def request(self, method: str, path: str, *, query: Sequence[tuple[str, str]] = (),
                      timeout: float = 30.0, limited: bool = True, **_: Any) -> Response:
        assert method == "GET"
        self.list_calls.append((path, dict(query), limited))
        await asyncio.sleep(0)
        if not self.lists:
            await asyncio.Event().wait()
        item = self.lists.popleft()
        if isinstance(item, BaseException):
            raise item
        return item

    @asynccontextmanager
    async def stream(self, path: str, query: Sequence[tuple[str, str]], read_timeout: float) -> AsyncIterator[FakeStream]:
        self.watch_calls.append((path, dict(query), read_timeout))
        item = self.watches.popleft() if self.watches else FakeStream()
        if isinstance(item, BaseException):
            raise item
        yield item


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.informer: Informer | None = None
        self.synced_at_delivery: list[bool] = []

    def __call__(self, event_type: str, obj: dict[str, Any]) -> None:
        self.events.append((event_type, obj))
        if self.informer is not None:
            self.synced_at_delivery.append(self.informer.synced.is_set())

    def summary(self) -> list[tuple[str, str, str]]:
        return [(t, o["metadata"]["name"], o["metadata"]["resourceVersion"]) for t, o in self.events]


async def run_until(informer: Informer, condition: Callable[[], bool], timeout: float = 5.0) -> None:
    task = asyncio.create_task(informer.run())
    try:
        async with asyncio.timeout(timeout):
            while not condition():
                await asyncio.sleep(0.001)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def make(lists: Sequence[Response | BaseException], watches: Sequence[FakeStream | BaseException],
         kind: ResourceKind = PODS, **kwargs: Any) -> tuple[Informer, FakeHttp, Recorder]:
    http = FakeHttp(lists, watches)
    sink = Recorder()
    informer = Informer(cast(KubeHttp, http), kind, sink, **kwargs)
    sink.informer = informer
    return informer, http, sink


async def test_relist_after_410_in_stream_delivers_synthetic_deletes() -> None:
    first = [page([pod("a", "1"), pod("b", "2")], "5", cont="tok"), page([pod("c", "3")], "5")]
    # After the 410: a unchanged, b gone (last seen at rv 6), c changed, d new, e recreated with a new uid.
    second = [page([pod("a", "1"), pod("c", "8"), pod("d", "9"), pod("e", "10", uid="uid-e2")], "10")]
    stream = FakeStream(event("MODIFIED", watched(pod("b", "6")))
                        + event("ADDED", watched(pod("e", "7")))
                        + event("ERROR", GONE))
    informer, http, sink = make(first + second, [stream], page_size=2)

    await run_until(informer, lambda: informer.stats.lists == 2 and len(http.watch_calls) == 2)

    assert sink.summary() == [
        ("ADDED", "a", "1"), ("ADDED", "b", "2"), ("ADDED", "c", "3"),   # first list, 2 pages
        ("MODIFIED", "b", "6"), ("ADDED", "e", "7"),                     # watch
        ("DELETED", "b", "6"),                                           # synthetic, last known object
        ("DELETED", "e", "7"),                                           # same name, new uid: deletions first
        ("MODIFIED", "c", "8"), ("ADDED", "d", "9"),                     # a unchanged: nothing
        ("ADDED", "e", "10"),
    ]
    assert all(o["kind"] == "Pod" and o["apiVersion"] == "v1" for _, o in sink.events)
    assert not any("managedFields" in o["metadata"] for _, o in sink.events)
    deleted_b = sink.events[5][1]
    assert deleted_b["metadata"]["uid"] == "uid-b"
    # synced only after the whole first list (both pages) was delivered
    assert sink.synced_at_delivery[:3] == [False, False, False]
    assert all(sink.synced_at_delivery[3:])
    # pagination and unthrottled reads
    assert [q.get("continue") for _, q, _ in http.list_calls] == [None, "tok", None]
    assert all(q["limit"] == "2" and limited is False for _, q, limited in http.list_calls)
    # watch from each list's RV, with bookmarks and a server timeout; read timeout = timeout + 30
    (path, q1, read_timeout), (_, q2, _) = http.watch_calls
    assert path == "/api/v1/pods"
    timeout = int(q1.pop("timeoutSeconds"))
    assert q1 == {"watch": "true", "resourceVersion": "5", "allowWatchBookmarks": "true"}
    assert 300 <= timeout < 600 and read_timeout == timeout + 30  # the reflector's random 5-10 minutes
    assert q2["resourceVersion"] == "10"
    assert informer.stats.relists == 1 and informer.stats.errors == 0
    assert len(informer) == 4


async def test_410_on_connect_relists() -> None:
    informer, http, sink = make(
        [page([pod("a", "1"), pod("b", "2")], "5"), page([pod("a", "1")], "12")],
        [FakeStream(b'{"kind":"Status","code":410}', status=410)])
    with capture_logs() as logs:
        await run_until(informer, lambda: informer.stats.lists == 2 and len(http.watch_calls) == 2)
    assert sink.summary()[-1] == ("DELETED", "b", "2")
    assert http.watch_calls[1][1]["resourceVersion"] == "12"
    assert informer.stats.relists == 1
    relist = [entry for entry in logs if entry["event"] == "informer.relist"]
    assert relist and relist[0]["kind"] == "Pod" and "reason" in relist[0]


async def test_bookmarks_and_stream_end_resume_from_last_rv() -> None:
    bookmark = {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "40"}}
    informer, http, sink = make(
        [page([], "5")],
        [FakeStream(event("ADDED", pod("a", "7")) + event("BOOKMARK", bookmark), end="eof"),
         FakeStream(event("DELETED", watched(pod("a", "41"))), end="eof")])
    await run_until(informer, lambda: len(http.watch_calls) >= 3)
    assert [q["resourceVersion"] for _, q, _ in http.watch_calls[:3]] == ["5", "40", "41"]
    assert sink.summary() == [("ADDED", "a", "7"), ("DELETED", "a", "41")]
    # kind/apiVersion set even when a watch event lacks them
    assert sink.events[0][1]["kind"] == "Pod" and sink.events[0][1]["apiVersion"] == "v1"
    assert informer.stats.lists == 1 and informer.stats.relists == 0 and len(informer) == 0


async def test_transient_errors_resume_the_watch_without_relisting() -> None:
    informer, http, sink = make(
        [aiohttp.ClientConnectionError("refused"), Response(503, b'{"message":"busy"}'), page([pod("a", "1")], "5")],
        [aiohttp.ClientConnectionError("reset"),
         FakeStream(b'{"message":"boom"}', status=500),
         FakeStream(b'{"message":"slow down"}', status=429),
         FakeStream(event("MODIFIED", watched(pod("a", "6"))) + b"{not json\n"),
         FakeStream(end=asyncio.TimeoutError()),     # a hung stream cut by the read timeout
         FakeStream(end=ConnectionResetError()),
         FakeStream(end=aiohttp.ClientPayloadError("truncated")),
         FakeStream(event("ERROR", {"kind": "Status", "code": 500, "message": "internal"}))])
    with capture_logs() as logs:
        await run_until(informer, lambda: len(http.watch_calls) >= 9)
    assert informer.stats.lists == 1 and informer.stats.relists == 0
    assert informer.stats.errors == 2 + 8
    assert [q["resourceVersion"] for _, q, _ in http.watch_calls] == ["5", "5", "5", "5", "6", "6", "6", "6", "6"]
    assert sink.summary() == [("ADDED", "a", "1"), ("MODIFIED", "a", "6")]
    errors = [entry for entry in logs if entry["event"] == "informer.error"]
    assert len(errors) == 10 and all(entry["kind"] == "Pod" for entry in errors)


async def test_missing_crd_counts_as_synced_and_is_retried() -> None:
    not_found = Response(404, b'{"kind":"Status","message":"the server could not find the requested resource","code":404}')
    group = {"metadata": {"name": "g", "namespace": "ns", "uid": "u", "resourceVersion": "3"}}
    informer, http, sink = make([not_found, not_found, page([group], "3")], [], kind=POD_GROUPS)
    with capture_logs() as logs:
        await run_until(informer, lambda: informer.stats.lists == 1)
    warnings = [entry for entry in logs if entry["event"] == "informer.unavailable"]
    assert len(warnings) == 1 and warnings[0]["log_level"] == "warning" and warnings[0]["kind"] == "PodGroup"
    assert sink.synced_at_delivery == [True]  # synced (empty) before the CRD appeared
    assert sink.events[0][1]["kind"] == "PodGroup"
    assert sink.events[0][1]["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    assert informer.available


async def test_a_failing_sink_does_not_stop_the_informer() -> None:
    informer, http, _ = make([page([pod("a", "1"), pod("b", "2")], "5")], [])
    seen: list[str] = []

    def sink(event_type: str, obj: dict[str, Any]) -> None:
        seen.append(obj["metadata"]["name"])
        if obj["metadata"]["name"] == "a":
            raise RuntimeError("bug in the sink")

    informer.sink = sink
    await run_until(informer, lambda: len(http.watch_calls) == 1)
    assert seen == ["a", "b"] and informer.stats.errors == 1 and informer.synced.is_set()


async def test_informer_set_waits_for_every_kind() -> None:
    lists = {"/api/v1/pods": page([pod("a", "1")], "5"), "/api/v1/nodes": page([], "5")}
    gate = asyncio.Event()

    class Http(FakeHttp):
        async def request(self, method: str, path: str, **kwargs: Any) -> Response:
            if path == "/api/v1/nodes":
                await gate.wait()
            return lists[path]

    events: list[str] = []
    informer_set = InformerSet(cast(KubeHttp, Http([], [])), lambda t, o: events.append(o["kind"]),
                               kinds=(informers.NODES, PODS), page_size=10)
    task = asyncio.create_task(informer_set.run())
    try:
        await asyncio.sleep(0.05)
        assert events == ["Pod"] and not informer_set.synced
        gate.set()
        async with asyncio.timeout(5):
            await informer_set.wait_synced()
        assert informer_set.synced
        assert set(informer_set.stats()) == {"Node", "Pod"}
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_refused_credentials_are_said_once_for_the_whole_set_and_retried_silently() -> None:
    """A bad token (401) is retried like any error, but is one error line for all kinds, not a
    warning per kind and retry; `denied` is the reason /readyz gives; one info line when it ends."""
    unauthorized = Response(401, b'{"kind":"Status","message":"Unauthorized","reason":"Unauthorized","code":401}')
    answers = {"/api/v1/pods": deque([unauthorized] * 6 + [page([pod("a", "1")], "5")]),
               "/api/v1/nodes": deque([unauthorized] * 6 + [page([], "5")])}

    class Http(FakeHttp):
        async def request(self, method: str, path: str, **kwargs: Any) -> Response:
            await asyncio.sleep(0)
            if not answers[path]:
                await asyncio.Event().wait()
            return answers[path].popleft()

    informer_set = InformerSet(cast(KubeHttp, Http([], [])), lambda t, o: None, kinds=(informers.NODES, PODS))
    reasons: list[str | None] = []
    with capture_logs() as logs:
        task = asyncio.create_task(informer_set.run())
        try:
            async with asyncio.timeout(5):
                while not informer_set.synced:
                    reasons.append(informer_set.denied)
                    await asyncio.sleep(0.001)
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
    assert informer_set.denied is None
    assert ("the apiserver rejected our credentials (HTTP 401 Unauthorized): check the token or client certificate "
            "in the kubeconfig") in reasons
    assert [(e["event"], e["log_level"]) for e in logs if e["log_level"] in ("warning", "error")] == [
        ("informers.denied", "error")]
    denied = next(e for e in logs if e["event"] == "informers.denied")
    assert denied["status"] == 401 and "check the token or client certificate" in denied["message"]
    assert [e["event"] for e in logs if e["event"] == "informers.allowed"] == ["informers.allowed"]


async def test_forbidden_kind_names_what_the_apiserver_said() -> None:
    forbidden = Response(403, b'{"kind":"Status","message":"pods is forbidden: User \\"x\\" cannot list resource '
                              b'\\"pods\\"","reason":"Forbidden","code":403}')
    informer, http, _ = make([forbidden, forbidden, page([], "5")], [])
    with capture_logs() as logs:
        await run_until(informer, lambda: informer.synced.is_set())
    assert [(e["event"], e["log_level"]) for e in logs if e["log_level"] in ("warning", "error")] == [
        ("informers.denied", "error")]
    assert next(e for e in logs if e["event"] == "informers.denied")["message"] == (
        'the apiserver denied access to Pod (HTTP 403): pods is forbidden: User "x" cannot list resource "pods"; '
        "retrying with backoff")
    assert informer.denials.reason is None  # it got through in the end


class GatedHttp(FakeHttp):
    """FakeHttp whose second LIST request waits until `gate` is set."""

    def __init__(self, lists: Sequence[Response | BaseException], watches: Sequence[FakeStream | BaseException]) -> None:
        super().__init__(lists, watches)
        self.gate = asyncio.Event()
        self.waiting = False

    async def request(self, method: str, path: str, **kwargs: Any) -> Response:
        if len(self.list_calls) == 1:
            self.waiting = True
            await self.gate.wait()
        return await super().request(method, path, **kwargs)


async def test_the_first_lists_pages_reach_the_sink_while_the_next_page_is_fetched() -> None:
    """Start-up overlaps the apiserver's encoding of page n+1 with the intake of page n."""
    pages = [page([pod("a", "1"), pod("b", "2")], "5", cont="tok"), page([pod("c", "3")], "5")]
    http = GatedHttp(pages, [])
    sink = Recorder()
    informer = Informer(cast(KubeHttp, http), PODS, sink, page_size=2)
    sink.informer = informer
    task = asyncio.create_task(informer.run())
    try:
        async with asyncio.timeout(5):
            while not http.waiting or len(sink.events) < 2:
                await asyncio.sleep(0.001)
        assert sink.summary() == [("ADDED", "a", "1"), ("ADDED", "b", "2")]  # page 2 still on its way
        assert not informer.synced.is_set()
        http.gate.set()
        async with asyncio.timeout(5):
            while not informer.synced.is_set():
                await asyncio.sleep(0.001)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert sink.summary() == [("ADDED", "a", "1"), ("ADDED", "b", "2"), ("ADDED", "c", "3")]


async def test_a_list_failing_on_a_later_page_is_redone_as_a_diff() -> None:
    first: list[Response | BaseException] = [page([pod("a", "1"), pod("b", "2")], "5", cont="tok"),
                                             OSError("connection reset")]
    second: list[Response | BaseException] = [page([pod("b", "4"), pod("c", "3")], "6")]
    informer, http, sink = make(first + second, [])
    informer.page_size = 2
    await run_until(informer, lambda: informer.synced.is_set())
    # page 1 went to the sink; the retried list is a diff against it: a gone, b changed, c new
    assert sink.summary() == [("ADDED", "a", "1"), ("ADDED", "b", "2"),
                              ("DELETED", "a", "1"), ("MODIFIED", "b", "4"), ("ADDED", "c", "3")]
    assert informer.stats.errors == 1 and informer.resource_version == "6"


async def test_an_optional_kind_the_role_may_not_read_counts_as_empty_and_synced() -> None:
    """PodDisruptionBudgets and PriorityClasses only refine preemption: a scheduler upgraded
    before its RBAC must go on scheduling (warned), not wait unready for them."""
    forbidden = Response(403, b'{"kind":"Status","message":"poddisruptionbudgets.policy is forbidden","code":403}')
    budget = {"metadata": {"name": "db", "namespace": "ns", "uid": "u", "resourceVersion": "3"}}
    informer, http, sink = make([forbidden, forbidden, page([budget], "3")], [], kind=DISRUPTION_BUDGETS)
    with capture_logs() as logs:
        await run_until(informer, lambda: informer.stats.lists == 1)
    warnings = [entry for entry in logs if entry["event"] == "informer.unavailable"]
    assert len(warnings) == 1 and "RBAC" in warnings[0]["message"]
    assert sink.synced_at_delivery == [True]  # synced (empty) while forbidden
    assert not informer.denials.reason
    assert informer.available and sink.events[0][1]["kind"] == "PodDisruptionBudget"


async def test_a_required_kind_the_role_may_not_read_keeps_the_scheduler_unsynced() -> None:
    forbidden = Response(403, b'{"kind":"Status","message":"nodes is forbidden","code":403}')
    informer, http, sink = make([forbidden, forbidden, forbidden], [], kind=NODES)
    await run_until(informer, lambda: len(http.list_calls) >= 3)
    assert not informer.synced.is_set() and informer.denials.reason


@pytest.mark.parametrize("kind", [PODS, NODES, DISRUPTION_BUDGETS])
async def test_a_404_on_a_built_in_kinds_relist_is_a_transient_error_not_a_deletion(kind: ResourceKind) -> None:
    """A built-in kind is always served, so a 404 on its LIST (a proxy or load balancer in a bad
    moment) says nothing about the objects. It used to mark the kind unavailable and send DELETED
    for everything: for Pods that released every running pod's GPUs, and the core's tombstones kept
    the pods out when the next LIST brought them back (found in review: double allocation)."""
    not_found = Response(404, b'{"kind":"Status","message":"the server could not find the requested resource","code":404}')
    a = pod("a", "1")
    informer, http, sink = make([page([a], "5"), not_found, page([a], "5")],
                                [FakeStream(event("ERROR", GONE))], kind=kind)
    with capture_logs() as logs:
        await run_until(informer, lambda: informer.stats.lists == 2)
    assert [t for t, _, _ in sink.summary()] == ["ADDED"], sink.summary()  # no DELETED, no second ADDED
    assert informer.available
    assert not [entry for entry in logs if entry["event"] == "informer.unavailable"]
    errors = [entry for entry in logs if entry["event"] == "informer.error"]
    assert errors and "404" in errors[0]["reason"]


async def test_a_list_answered_410_is_retried_after_a_pause_even_after_a_watch_delivered_data() -> None:
    """A relist that itself got 410 (an expired continue token, a proxy) was redone at once, over
    and over, when the watch before it had delivered data (found in review)."""
    gone = Response(410, orjson.dumps(GONE))
    stream = FakeStream(event("MODIFIED", watched(pod("a", "6"))) + event("ERROR", GONE))
    informer, http, sink = make([page([pod("a", "1")], "5"), gone, gone, gone, page([pod("a", "6")], "12")],
                                [stream])
    pauses: list[float] = []
    backoff = informer._backoff

    def recorded() -> float:
        pauses.append(backoff())
        return pauses[-1]

    informer._backoff = recorded  # type: ignore[method-assign]
    await run_until(informer, lambda: informer.stats.lists == 2)
    assert len(http.list_calls) == 5 and len(pauses) == 4  # the watch's 410 and each refused LIST: each after a pause
