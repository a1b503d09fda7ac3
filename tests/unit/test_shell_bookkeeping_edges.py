"""Live-shell bookkeeping edges a one-line slip got past (mutation round 4): how long a lone replica
watches a stale Lease, which untold notices an object's deletion drops and which the limit drops
first, and the bound on the collector pause at start-up."""

from __future__ import annotations

import inspect

from scheduler.core.state import Notice
from scheduler.kube import startup_gc
from scheduler.kube.untold import UntoldNotices
from tests.fakelease import Clock, LeaseServer
from tests.unit.test_lone_replica import _check, _lease


async def test_a_stale_lease_is_given_up_once_its_duration_has_passed_not_a_retry_later() -> None:
    """client-go: a record observed at t is expired from t + leaseDurationSeconds on (valid only
    while that is After now). 4 s lease, 2 s retries: the holder is gone after 4 s of watching."""
    server, clock = LeaseServer(), Clock()
    _lease(server, "crashed", duration=4)
    holder, watched = await _check(server, clock, renewing=False)
    assert holder is None and watched == 4.0


def _notice(name: str, uid: str, reason: str = "DeviceConflict") -> Notice:
    return Notice("Pod", f"default/{name}", reason, f"{name} {uid}", "default", uid)


def test_deleting_an_old_pod_keeps_the_notices_of_the_new_pod_under_its_name() -> None:
    untold = UntoldNotices()
    untold.add(_notice("p", "uid-new"))
    untold.object_gone("Pod", "default/p", "uid-old")  # the old pod's DELETED arrives late
    assert [n.uid for n in untold] == ["uid-new"]
    untold.object_gone("Pod", "default/p", "uid-new")
    assert list(untold) == []


def test_a_renewed_notice_counts_as_the_newest_when_the_limit_drops_the_oldest() -> None:
    untold = UntoldNotices(limit=2)
    untold.add(_notice("a", "uid-a"))
    untold.add(_notice("b", "uid-b"))
    untold.add(_notice("a", "uid-a"))  # seen again: now the newest
    untold.add(_notice("c", "uid-c"))
    assert [n.key for n in untold] == ["default/a", "default/c"]


def test_the_collector_pause_at_start_up_is_bounded_to_30_seconds_by_default() -> None:
    """A sync that cannot finish must not run the process with the collector off for long."""
    assert inspect.signature(startup_gc.collect_after_sync).parameters["limit"].default == 30.0


def test_the_loop_flushes_long_unschedulable_pods_every_30_seconds() -> None:
    """Upstream's PriorityQueue.Run: wait.Until(flushUnschedulablePodsLeftover, 30 s): a pod
    parked for more than 5 minutes is retried within 5.5 minutes, not up to 10."""
    from scheduler.kube import loop

    assert loop.FLUSH_UNSCHEDULABLE_EVERY == 30.0
