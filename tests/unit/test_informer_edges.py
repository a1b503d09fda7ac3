"""Informer edge cases a review found, each a failing test first: relist order, a relist into an
empty store after sync, unreadable list items and watch events."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, cast

import aiohttp
import anyio
import orjson
import pytest

from scheduler.api.config import load_config
from scheduler.core import annotations as ann
from scheduler.core.scheduler import Scheduler
from scheduler.kube import informers
from scheduler.kube.http import KubeHttp, Response
from scheduler.kube.informers import NODES, PODS, PRIORITY_CLASSES, Informer
from scheduler.kube.loop import SchedulerLoop
from scheduler.kube.snapshot import ListError, list_cluster, list_kind
from scheduler.sim import builders as b
from tests.fakeapi import FakeApi
from tests.unit.test_informer_relist import (GONE, FakeHttp, FakeStream, event, fast_backoff, make, page,  # noqa: F401
                                             pod, run_until, watched)


GPU = ann.encode_devices({"main": {"nvidia.com/gpu": (ann.DeviceGrant("GPU-0", "n.gpu-0", None),)}})


def item(name: str, rv: str, uid: str, holds_gpu: bool) -> dict[str, Any]:
    obj = b.pod(name, requests={"nvidia.com/gpu": 1}, node_name="n" if holds_gpu else "",
                annotations={ann.DEVICES: GPU} if holds_gpu else None,
                phase="Running" if holds_gpu else "Pending")
    obj["metadata"].update(resourceVersion=rv, uid=uid)
    del obj["kind"], obj["apiVersion"]  # as a LIST item
    return obj


async def test_a_relist_frees_a_replaced_objects_devices_before_handing_them_to_another() -> None:
    """Regression (review): The relist diff emits a recreated object's DELETED (old uid) in list order, after the events of
    the keys listed before it (`_replace`, informers.py:389-397). A StatefulSet pod `x` deleted and
    recreated during a watch gap, whose GPU went meanwhile to pod `a` (listed first): `a`'s MODIFIED
    charges the GPU while old `x` still holds it. The core raises a DeviceConflict ("assigned to more
    than one pod exclusively"), which the leader publishes as a Warning Event on `a` - a false alarm of
    exactly the failure Tessera promises never happens. Vanished keys are already deleted first;
    replaced incarnations should be too."""
    core = Scheduler(load_config(None))
    core.apply("ADDED", b.node("n", gpus=1) | {"metadata": {**b.node("n")["metadata"], "resourceVersion": "1"}}, 0.0)
    notices: list[Any] = []
    first = [page([item("a", "2", "uid-a", False), item("x", "3", "uid-x1", True)], "5")]
    # after the gap: x was deleted and recreated (pending); a got the GPU x had
    second = [page([item("a", "9", "uid-a", True), item("x", "8", "uid-x2", False)], "10")]
    http = FakeHttp(first + second, [FakeStream(event("ERROR", GONE))])
    informer = Informer(cast(KubeHttp, http), PODS,
                        lambda t, o: notices.extend(core.apply(t, copy.deepcopy(o), 0.0)))
    await run_until(informer, lambda: informer.stats.lists == 2)
    assert core.state.pod_by_key("default/a").node_name == "n"  # type: ignore[union-attr]
    assert [(n.reason, n.key) for n in notices] == [], notices


def with_rv(obj: dict[str, Any], rv: str) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["metadata"]["resourceVersion"] = rv
    return obj


def listing(items: list[dict[str, Any]], rv: str, cont: str = "") -> Response:
    meta = {"resourceVersion": rv, **({"continue": cont} if cont else {})}
    return Response(200, orjson.dumps({"kind": "List", "metadata": meta, "items": items}))


NOT_FOUND = Response(404, b'{"kind":"Status","code":404,"message":"the server could not find the requested resource"}')


class WatchHttp:
    """LIST/WATCH for every kind. Pods: first LIST empty; first watch 410 -> relist in two pages,
    page 2 (with the foreign bound pod) comes only once page 1's pending pod was bound, or after 2 s."""

    def __init__(self, api: FakeApi, pending: dict[str, Any], foreign: dict[str, Any]) -> None:
        self.api, self.pending, self.foreign = api, pending, foreign
        self.pod_lists = 0
        self.pod_watches = 0

    async def request(self, method: str, path: str, *, query: Sequence[tuple[str, str]] = (), **_: Any) -> Response:
        await asyncio.sleep(0)
        q = dict(query)
        if path == NODES.path:
            return listing([with_rv(b.node("n", gpus=1), "2")], "5")
        if path == PODS.path:
            if "continue" in q:  # page 2: held until the cycle had its chance on page 1
                with anyio.move_on_after(2.0):
                    while not self.api.pod("default", "p")["spec"].get("nodeName"):
                        await asyncio.sleep(0.01)
                return listing([self.foreign], "20")
            self.pod_lists += 1
            if self.pod_lists == 1:
                return listing([], "5")  # a fresh cluster: no pods yet
            return listing([self.pending], "20", cont="tok")
        if any(path == k.path for k in informers.SCHEDULER_KINDS if k.builtin):
            return listing([], "5")
        return NOT_FOUND  # CRDs not installed

    @asynccontextmanager
    async def stream(self, path: str, query: Sequence[tuple[str, str]], read_timeout: float) -> AsyncIterator[FakeStream]:
        if path == PODS.path:
            self.pod_watches += 1
            if self.pod_watches == 1:  # a gap: history compacted
                await asyncio.sleep(0.2)
                yield FakeStream(event("ERROR", GONE))
                return
        yield FakeStream()  # silent


async def test_a_relist_into_an_empty_store_is_applied_at_once_not_page_by_page(monkeypatch: Any) -> None:
    """Regression (review): After sync, a relist whose store is empty hands its pages to the live core one by one
    (`as_they_come = not self._store`, informers.py:321): the scheduler's cycles run between two
    pages, on half a list. A pod bound by someone else on page 2 is not counted yet, and its GPU is
    given to a pending pod of page 1: two pods on the node's one GPU.
    
    When: the Pod store is empty at relist time (a fresh cluster - e.g. `tessera dev-cluster`, kwok, no
    pods yet - or a standby taking over); a watch gap ends in 410 while pods were created and bound
    elsewhere (kube-scheduler beside Tessera; the previous leader)."""
    monkeypatch.setattr(informers, "BACKOFF_INITIAL", 0.01)
    api = FakeApi()
    pending = with_rv(b.pod("p", requests={"nvidia.com/gpu": 1}), "10")
    foreign = with_rv(b.pod("q", scheduler="default-scheduler", requests={"nvidia.com/gpu": 1},
                            node_name="n", phase="Running"), "11")
    api.add_pod(pending)
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=1)]
    watch = WatchHttp(api, pending, foreign)
    loop = SchedulerLoop(load_config(None), KubeHttp(api), cast(KubeHttp, watch), identity="test")  # type: ignore[arg-type]
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        with anyio.fail_after(10):
            while not (watch.pod_lists >= 2 and "default/q" in loop.core.state.by_key):
                await anyio.sleep(0.01)
        await anyio.sleep(0.3)
        owner.cancel_scope.cancel()
    bound_to = api.pod("default", "p")["spec"].get("nodeName")
    assert bound_to is None, (
        "p was bound to n while q (bound by another scheduler, on page 2 of the same relist) holds n's only GPU")


async def test_a_list_with_one_non_object_item_still_syncs_the_rest() -> None:
    """Regression (review): A LIST page with one item that is not a JSON object (null) wedges the informer: it never syncs.
    
    A watch event whose object is not a dict is skipped-by-reconnect; a LIST item of the same kind
    raises AttributeError inside `_list` (`_prepare` calls `obj.get`), which `run()` treats as a bug:
    relist with backoff, forever; the kind never syncs, so the scheduler never becomes ready. client-go
    skips objects it cannot understand (meta.Accessor error -> HandleError, continue)."""
    bad = page([pod("a", "1"), None, pod("b", "2")], "5")  # type: ignore[list-item]
    informer, http, sink = make([bad] * 20, [])
    with contextlib.suppress(TimeoutError):  # ran for a while; did it get there?
        await run_until(informer, lambda: informer.synced.is_set(), timeout=1.0)
    # what it should be: synced with a and b
    assert informer.synced.is_set(), f"never synced after {len(http.list_calls)} LISTs; errors={informer.stats.errors}"


async def test_an_unusable_event_is_skipped_not_replayed_forever() -> None:
    """Regression (review): A watch event the server keeps sending that is JSON but not a usable event ({"type": "ADDED",
    "object": null}) wedges the watch: `_on_watch_event` raises ValueError, `run()` reconnects from the
    same resourceVersion, the server replays the same event, forever. Every later event of the kind is
    never seen (for Pods: bindings by others, deletions). client-go logs "unable to understand watch
    event" and continues with the next event."""
    bad = orjson.dumps({"type": "ADDED", "object": None}) + b"\n"
    # the apiserver replays everything after our RV ("5") on every reconnect
    replay = [FakeStream(bad + event("MODIFIED", watched(pod("a", "7")))) for _ in range(30)]
    informer, http, sink = make([page([pod("a", "1")], "5")], replay)
    with contextlib.suppress(TimeoutError):  # ran for a while; did it get there?
        await run_until(informer, lambda: len(sink.events) >= 2, timeout=1.0)
    assert sink.summary() == [("ADDED", "a", "1"), ("MODIFIED", "a", "7")], (
        f"stuck: {len(http.watch_calls)} watches all from rv "
        f"{sorted({q['resourceVersion'] for _, q, _ in http.watch_calls})}")


class _ExpiringHttp:
    """Pods in two pages whose first continue token has expired (410) by the time it is used."""

    def __init__(self) -> None:
        self.continues = 0

    async def request(self, method: str, path: str, *, query: Any = (), **_: Any) -> Response:
        q = dict(query)
        if path != PODS.path:
            return page([], "9")
        if "continue" in q:
            self.continues += 1
            if self.continues == 1:
                return Response(410, orjson.dumps({**GONE, "message": "The provided continue parameter is too old"}))
            return page([pod("c", "3")], "9")
        return page([pod("a", "1"), pod("b", "2")], "9", cont="tok")


async def test_a_one_shot_list_starts_again_when_its_continue_token_expires() -> None:
    """Regression (review): `kubectl tessera` gave up on a 410 for an expired continue token;
    the documented answer (and client-go's pager) is to list again from the start."""
    result = await list_kind(cast(KubeHttp, _ExpiringHttp()), PODS)
    assert isinstance(result, list)
    assert sorted(o["metadata"]["name"] for o in result) == ["a", "b", "c"]


class _DisconnectingHttp:
    def __init__(self, broken: str) -> None:
        self.broken = broken

    async def request(self, method: str, path: str, **_: Any) -> Response:
        if path == self.broken:
            raise aiohttp.ServerDisconnectedError()
        return page([], "9")


async def test_a_transport_error_in_a_one_shot_listing_is_one_line() -> None:
    """Regression (review): a dropped connection on any kind escaped `list_cluster` as an
    ExceptionGroup, a traceback for `kubectl tessera`."""
    listing = await list_cluster(cast(KubeHttp, _DisconnectingHttp(PRIORITY_CLASSES.path)))
    assert [w for w in listing.warnings if w.startswith("priorityclasses.scheduling.k8s.io: cannot be read: ")]
    with pytest.raises(ListError, match="^cannot list pods: "):
        await list_cluster(cast(KubeHttp, _DisconnectingHttp(PODS.path)))
