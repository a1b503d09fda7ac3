"""A deploy whose scheduler role predates VolumeBinding may not read claims, volumes or
StorageClasses: their informers are optional, marked unavailable on 403, and the live loop tells
the core so before its cycles (`SchedulerLoop._mark_unread`). VolumeBinding then passes what it
cannot tell, and a pod with claims is placed as before instead of refused as "not found"."""

from __future__ import annotations

from scheduler.api.config import load_config
from scheduler.kube.http import KubeHttp
from scheduler.kube.informers import CLAIMS, STORAGE_KINDS
from scheduler.kube.loop import SchedulerLoop
from scheduler.sim import builders as b
from tests.fakeapi import FakeApi


def test_an_unreadable_claims_informer_lets_pods_with_claims_through() -> None:
    api = FakeApi()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t")  # type: ignore[arg-type]
    by_kind = {informer.kind: informer for informer in loop.informers.informers}
    assert all(kind.optional for kind in STORAGE_KINDS) and set(STORAGE_KINDS) <= set(by_kind)
    by_kind[CLAIMS].unavailable = "forbidden"
    loop._mark_unread()
    assert loop.core.state.unread == {"PersistentVolumeClaim": "forbidden"}
    pod = b.pod("train", requests={"cpu": "1"},
                spec_extra={"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]})
    loop.core.apply("ADDED", b.node("a"), 0.0)
    loop.core.apply("ADDED", pod, 0.0)
    attempts = loop.core.schedule_next(0.0)
    assert attempts is not None and [attempt.node for attempt in attempts] == ["a"]
    by_kind[CLAIMS].unavailable = None  # read again: the claims are checked again
    loop._mark_unread()
    assert loop.core.state.unread == {}
