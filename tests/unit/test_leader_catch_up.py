"""A new leader decides from what the apiserver holds, not from what its watch has shown so far.

A standby's Pod watch may lag (a busy apiserver, a slow stream): the old leader's last Bindings,
sent while its Lease was valid, are then not in the standby's cache when it takes over. Deciding
from that cache at once gives the GPU of a pod the old leader bound to another pod. The fake
apiserver's watch streams are silent, so every write made after the informers listed is exactly
such a write the watch has not delivered yet.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio

from scheduler.api.config import load_config
from scheduler.kube.http import KubeHttp, Response
from scheduler.kube.informers import PODS, Informer
from scheduler.kube.loop import SchedulerLoop
from scheduler.sim import builders as b
from tests.fakeapi import FakeApi
from tests.helpers import until


EARLIER, LATER = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"


def _gpu_pod(name: str, created: str, resource_version: str) -> dict[str, Any]:
    """A pending pod that asks for a GPU; the queue takes the one `created` first first (equal
    priority: a new leader may not preempt the old leader's pod instead)."""
    pod = b.pod(name, requests={"nvidia.com/gpu": 1}, priority=0, created=created)
    pod["metadata"]["resourceVersion"] = resource_version
    return pod


def _bound_to(api: FakeApi, node: str) -> list[str]:
    return sorted(name for (_, name), pod in api.pods.items() if pod["spec"].get("nodeName") == node)


def _two_pods_for_one_gpu() -> FakeApi:
    """One node with one GPU; `first` (older, so listed and queued first) and `old` wait for it."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=1)]
    api.add_pod(_gpu_pod("first", EARLIER, "11"))  # listed first: the queue's first too
    api.add_pod(_gpu_pod("old", LATER, "10"))
    return api


async def _lead_after_the_old_leaders_last_binding(api: FakeApi, lead: Callable[[SchedulerLoop], None]) -> None:
    """A standby lists the cluster; the old leader binds `old` (its watch has not shown it); the
    old leader's Lease runs out and `lead` tells this replica it leads; it decides until `first`
    was tried and nothing is in flight."""
    term: list[int | None] = [None]
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="standby",  # type: ignore[arg-type]
                         leader_term=lambda: term[0])
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        await until(lambda: loop.informers.synced)
        # the old leader's last Binding, while its Lease was valid; this replica's watch lags
        assert api.bind("default", "old", {"metadata": {"annotations": {}}, "target": {"name": "n"}}).ok
        term[0] = 1  # the old leader's Lease ran out: this replica leads
        lead(loop)
        await until(lambda: loop.stats.unschedulable >= 1 and loop.binder.in_flight == 0)
        owner.cancel_scope.cancel()


async def test_a_new_leader_does_not_give_away_the_gpu_of_a_binding_its_watch_has_not_shown() -> None:
    """One node with one GPU; `old` and `first` (older, so first in the queue) wait for it. The
    old leader binds `old` while this replica stands by; the replica's watch has not delivered
    that Binding when it becomes leader. Deciding from its cache, it gave the same GPU to `first`:
    two pods bound to a one-GPU node."""
    api = _two_pods_for_one_gpu()
    await _lead_after_the_old_leaders_last_binding(api, SchedulerLoop.wake)
    assert _bound_to(api, "n") == ["old"], "the new leader gave the GPU of the old leader's last Binding away"
    assert not api.of("POST", "/binding"), "a Binding went out for a pod that could not fit"


def _informer(api: FakeApi, seen: list[tuple[str, str, str]]) -> Informer:
    def sink(event_type: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        seen.append((event_type, meta["name"], meta.get("resourceVersion", "")))
    return Informer(api, PODS, sink)  # type: ignore[arg-type]


async def test_the_watchs_older_news_of_a_caught_up_pod_is_skipped() -> None:
    """After the catch-up read `old` bound (resourceVersion 101), the lagging watch still delivers
    the versions before it: `old` pending at 50 would put it back in the queue with its GPU free
    (the same double allocation, a moment later). Only newer versions get through."""
    api = FakeApi()
    api.add_pod(_gpu_pod("old", LATER, "10"))
    seen: list[tuple[str, str, str]] = []
    informer = _informer(api, seen)
    await informer._list()
    api.bind("default", "old", {"metadata": {"annotations": {}}, "target": {"name": "n"}})
    assert await informer.catch_up("spec.schedulerName=tessera") == 1
    pending = _gpu_pod("old", LATER, "50")
    informer._on_watch_event({"type": "MODIFIED", "object": pending})
    informer._on_watch_event({"type": "MODIFIED", "object": {**api.pod("default", "old")}})  # 101 again
    newer = {**api.pod("default", "old"), "metadata": {**api.pod("default", "old")["metadata"], "resourceVersion": "102"}}
    informer._on_watch_event({"type": "MODIFIED", "object": newer})
    assert seen == [("ADDED", "old", "10"), ("MODIFIED", "old", "101"), ("MODIFIED", "old", "102")]
    assert informer.resource_version == "102"


async def test_a_pod_created_and_bound_while_the_watch_lagged_is_added_and_an_older_relist_keeps_it() -> None:
    """A pod the watch never showed (created and bound by the old leader in the lag) comes in as
    ADDED; a relist whose snapshot is older than the catch-up (it started first) neither deletes
    it nor takes `old` back to pending."""
    api = FakeApi()
    api.add_pod(_gpu_pod("old", LATER, "10"))
    seen: list[tuple[str, str, str]] = []
    informer = _informer(api, seen)
    await informer._list()
    snapshot = {key: dict(obj) for key, obj in informer._store.items()}
    api.add_pod(_gpu_pod("late", LATER, "90"))
    api.bind("default", "late", {"metadata": {"annotations": {}}, "target": {"name": "n"}})
    api.bind("default", "old", {"metadata": {"annotations": {}}, "target": {"name": "n"}})
    assert await informer.catch_up("spec.schedulerName=tessera") == 2
    informer._replace(snapshot, "60")  # a relist read at 60, delivered after the catch-up
    assert seen == [("ADDED", "old", "10"), ("MODIFIED", "old", "102"), ("ADDED", "late", "101")]
    assert {obj["metadata"]["name"]: obj["spec"].get("nodeName") for obj in informer.objects()} == \
        {"old": "n", "late": "n"}


async def _listed_with_another_schedulers_pod(name: str) -> tuple[FakeApi, list[tuple[str, str, str]], Informer]:
    """An informer that listed `name` (a pending GPU pod of Tessera's, resourceVersion 10) and
    `web` (another scheduler's, 11); what it told its sink goes into the list returned."""
    api = FakeApi()
    api.add_pod(_gpu_pod(name, LATER, "10"))
    other = b.pod("web", scheduler="default-scheduler")
    other["metadata"]["resourceVersion"] = "11"
    api.add_pod(other)
    seen: list[tuple[str, str, str]] = []
    informer = _informer(api, seen)
    await informer._list()
    return api, seen, informer


async def test_the_catch_up_lists_only_the_pods_of_the_schedulers_profiles() -> None:
    api, seen, informer = await _listed_with_another_schedulers_pod("old")
    api.bind("default", "old", {"metadata": {"annotations": {}}, "target": {"name": "n"}})
    api.bind("default", "web", {"metadata": {"annotations": {}}, "target": {"name": "n"}})
    assert await informer.catch_up("spec.schedulerName=tessera") == 1
    [call] = [c for c in api.of("GET", "/api/v1/pods") if ("fieldSelector", "spec.schedulerName=tessera") in c.query]
    assert not any(name == "resourceVersion" for name, _ in call.query), "not a consistent read"
    assert seen[-1] == ("MODIFIED", "old", "101")


async def test_a_new_leader_decides_nothing_until_its_catch_up_read_succeeds() -> None:
    """The catch-up LIST fails (500), then the term changes while the next one is read: no
    Binding goes out until a LIST read within the current term answered, and then the decision
    counts the old leader's Binding."""
    api = _two_pods_for_one_gpu()
    term: list[int | None] = [None]
    reads = [0]
    bindings_before_read: list[int] = []  # (an assert in the hook would fail the LIST, not the test)

    def on_call(method: str, path: str) -> None:
        if method == "GET" and path == "/api/v1/pods" and term[0] is not None:
            reads[0] += 1
            bindings_before_read.append(len(api.of("POST", "/binding")))
            if reads[0] == 2:
                term[0] = 2  # deposed and re-elected (a new term) while the LIST was read

    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="standby",  # type: ignore[arg-type]
                         leader_term=lambda: term[0])
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        await until(lambda: loop.informers.synced)
        api.before = on_call
        api.bind("default", "old", {"metadata": {"annotations": {}}, "target": {"name": "n"}})
        api.fail_next("GET", "/api/v1/pods", status=500)
        term[0] = 1
        loop.wake()
        await until(lambda: loop.stats.unschedulable >= 1 and loop.binder.in_flight == 0)
        owner.cancel_scope.cancel()
    assert reads[0] == 3 and bindings_before_read == [0, 0, 0]
    assert _bound_to(api, "n") == ["old"]


async def test_the_watchs_older_news_of_a_pod_read_back_after_an_ambiguous_binding_is_skipped() -> None:
    """The Binding of `p` lands but its answer is a 503; the binder reads `p` back bound and the
    core counts it. The watch lags: it then delivers `p` as it was before the Binding (a status
    write at resourceVersion 50). Taken as news, it unbinds `p` in the core, its GPU looks free,
    and `q` is given it: two pods bound to a one-GPU node."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=1)]
    api.add_pod(_gpu_pod("p", EARLIER, "10"))

    def lands_then_503(call: Any) -> Any:
        if call.method == "POST" and call.path.endswith("/pods/p/binding") and not api.pods[("default", "p")]["spec"].get("nodeName"):
            api.bind("default", "p", call.body)
            return Response(503, b'{"kind":"Status","code":503,"message":"etcdserver: request timed out"}')
        return None

    api.handlers.append(lands_then_503)
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="leader")  # type: ignore[arg-type]
    [pods] = [informer for informer in loop.informers.informers if informer.kind == PODS]
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        await until(lambda: bool(api.pod("default", "p")["spec"].get("nodeName")) and loop.binder.in_flight == 0
                     and loop.stats.scheduled == 1)
        pods._on_watch_event({"type": "MODIFIED", "object": _gpu_pod("p", EARLIER, "50")})  # the lagging watch
        q = _gpu_pod("q", LATER, "102")
        q["spec"]["priority"] = 100  # first in the queue, beside p put back in it
        q["spec"]["preemptionPolicy"] = "Never"  # and never evicting p for its place (a race with the asserts)
        api.add_pod(q)
        pods._on_watch_event({"type": "ADDED", "object": q})
        await until(lambda: loop.stats.scheduled + loop.stats.unschedulable >= 2 and loop.binder.in_flight == 0)
        owner.cancel_scope.cancel()
    assert _bound_to(api, "n") == ["p"], "the GPU of a pod read back bound was given again"


def _catch_up_reads(api: FakeApi) -> int:
    return sum(1 for call in api.of("GET", "/api/v1/pods")
               if any(name == "fieldSelector" and value.startswith("spec.schedulerName=") for name, value in call.query))


async def test_a_term_that_began_before_the_pod_list_was_sent_is_not_read_again() -> None:
    """The start of a process (no election: one term from the start; or a Lease taken before the
    informers listed): the Pod informer's first LIST, a consistent read sent after the term began,
    already holds every Binding an old leader made. A second read of every pod Tessera schedules
    put ~0.4 s (5,000 pods, bench/README.md) between start-up and the first Binding for nothing."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=1)]
    api.add_pod(_gpu_pod("first", EARLIER, "11"))
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="only")  # type: ignore[arg-type]
    loop.leadership_started()  # before the informers list
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        await until(lambda: loop.stats.scheduled == 1 and loop.binder.in_flight == 0)
        owner.cancel_scope.cancel()
    assert _catch_up_reads(api) == 0


async def test_a_term_that_began_after_the_pod_list_was_sent_reads_the_pods_again() -> None:
    """The other order (a standby whose informers listed long before it took the Lease): the
    catch-up read is what keeps the old leader's last Binding from being given away."""
    api = _two_pods_for_one_gpu()
    await _lead_after_the_old_leaders_last_binding(api, SchedulerLoop.leadership_started)
    assert _catch_up_reads(api) == 1
    assert _bound_to(api, "n") == ["old"]


async def test_a_pod_deleted_while_the_watch_lagged_leaves_before_its_gpu_is_judged_taken_twice() -> None:
    """Found live (adversary round 6): a standby's Pod watch lagged; `x` (8 GPUs) was deleted and
    `y` bound on the same GPUs by the old leader; the standby took over, its catch-up added `y` and
    removed nothing, so its cache held both and the new leader published 8 `DeviceConflict` Warnings
    on `y` naming `x`, gone 21 s before (and `GPUsOvercommitted` on the node). The consistent LIST
    proves more than what is new: a pod of these scheduler names the store holds at a version older
    than the LIST, and the LIST lacks, was deleted. It leaves first, as DELETED, then the new ones
    come in. Kept: a pod of another scheduler name (not listed), and one the watch showed at a
    version newer than the LIST (created after it)."""
    api, seen, informer = await _listed_with_another_schedulers_pod("x")
    del api.pods[("default", "x")]  # deleted; the watch has not shown it
    del api.pods[("default", "web")]  # another scheduler's: not this catch-up's to judge
    api.add_pod(_gpu_pod("y", LATER, "90"))
    api.bind("default", "y", {"metadata": {"annotations": {}}, "target": {"name": "n"}})
    newer = _gpu_pod("z", LATER, str(api.resource_version + 50))  # the watch is ahead of the LIST for z
    informer._on_watch_event({"type": "ADDED", "object": newer})
    seen.clear()
    assert await informer.catch_up("spec.schedulerName=tessera") == 2
    assert seen == [("DELETED", "x", "10"), ("ADDED", "y", "101")]
    assert sorted(obj["metadata"]["name"] for obj in informer.objects()) == ["web", "y", "z"]


async def test_a_pod_the_catch_up_found_deleted_does_not_come_back_from_the_lagging_watch_or_an_older_relist() -> None:
    """The review of the fix above: `x` left the store, so the lagging watch's older news of it (a
    graceful delete writes a MODIFIED with its deletionTimestamp before the DELETED) went back in as
    a live, bound pod beside `y` — the same false conflict a moment later. The catch-up's LIST is a
    whole picture of the pods its selector picks at its resourceVersion: any older event of such a
    pod is old news, present in the store or not, and so is an older relist's copy of it. Another
    scheduler's pod is not its to judge; once the watch has passed the LIST's version, nothing older
    can come."""
    api, seen, informer = await _listed_with_another_schedulers_pod("x")
    other = api.pod("default", "web")
    snapshot = {key: dict(obj) for key, obj in informer._store.items()}
    terminating = {**api.pod("default", "x"), "metadata": {**api.pod("default", "x")["metadata"],
                                                            "resourceVersion": "20",
                                                            "deletionTimestamp": "2026-01-01T00:02:00Z"}}
    del api.pods[("default", "x")]
    api.add_pod(_gpu_pod("y", LATER, "90"))
    api.bind("default", "y", {"metadata": {"annotations": {}}, "target": {"name": "n"}})
    assert await informer.catch_up("spec.schedulerName=tessera") == 2
    seen.clear()
    informer._on_watch_event({"type": "MODIFIED", "object": terminating})  # the lagging watch's backlog
    informer._on_watch_event({"type": "DELETED", "object": {**terminating, "metadata": {
        **terminating["metadata"], "resourceVersion": "21"}}})
    web = {**other, "metadata": {**other["metadata"], "resourceVersion": "22"}}
    informer._on_watch_event({"type": "MODIFIED", "object": web})  # another scheduler's: news
    informer._replace(snapshot, "15")  # a relist read at 15, delivered after the catch-up
    assert seen == [("MODIFIED", "web", "22")]
    assert sorted(obj["metadata"]["name"] for obj in informer.objects()) == ["web", "y"]
    # past the LIST's version the watch is news again: a pod x created anew comes in
    fresh = _gpu_pod("x", LATER, str(api.resource_version + 1))
    informer._on_watch_event({"type": "ADDED", "object": fresh})
    assert seen[-1] == ("ADDED", "x", fresh["metadata"]["resourceVersion"])


async def test_a_pod_recreated_under_its_name_while_the_watch_lagged_is_deleted_then_added() -> None:
    """`catch_up`: `x` was deleted and created again under its name (a new uid) while the watch
    lagged; the consistent LIST finds the new one. The sink hears the old incarnation leave
    (DELETED, its uid) before the new one comes in (ADDED), as a relist (`_replace`) tells it. Today
    the core also drops a pod recreated under a known name on its own (ClusterState._on_pod), so
    without the DELETED nothing is double-held there; the informer's promise is pinned here."""
    api, seen, informer = await _listed_with_another_schedulers_pod("x")
    old_uid = api.pod("default", "x")["metadata"]["uid"]
    del api.pods[("default", "x")]
    again = _gpu_pod("x", LATER, "90")
    again["metadata"]["uid"] = "x-second-incarnation"
    api.add_pod(again)
    seen.clear()
    uids: list[str] = []
    sink = informer.sink

    def recording(event_type: str, obj: dict[str, Any]) -> None:
        uids.append(obj["metadata"]["uid"])
        sink(event_type, obj)

    informer.sink = recording
    assert await informer.catch_up("spec.schedulerName=tessera") == 1
    assert [event for event, *_ in seen] == ["DELETED", "ADDED"]
    assert uids == [old_uid, "x-second-incarnation"]
