"""Live-shell edges a one-line slip got past (mutation round 4), against the fake apiserver:
the evictor's "recreated?" look when the look itself fails, its number of tries, and the
held-devices writer's handling of a pod gone under its uid and of an older value seen."""

from __future__ import annotations

import anyio
import pytest

from scheduler.core.state import Notice
from scheduler.kube.evictor import TRIES, Eviction, Evictor
from scheduler.kube.held import HeldDevicesWriter
from scheduler.kube.http import KubeHttp
from scheduler.sim import builders as b
from tests.fakeapi import FakeApi
from tests.helpers import run_for_a_while


def _victim(api: FakeApi) -> Eviction:
    pod = b.pod("victim", node_name="n1", phase="Running")
    api.add_pod(pod)
    return Eviction("default", "victim", pod["metadata"]["uid"], "preemptor-uid", "tessera", "n1")


async def test_a_conflict_whose_recreated_look_fails_is_not_taken_for_a_gone_victim() -> None:
    """The uid-guarded DELETE answers 409 and the GET that would tell a new pod under the name
    fails (500): nothing says the victim is gone, so it is not reported evicted (the preemptor
    would wait for room a running victim keeps) but failed, and it still runs."""
    api = FakeApi()
    eviction = _victim(api)
    api.fail_next("DELETE", "/pods/victim", status=409)
    api.fail_next("GET", "/pods/victim", status=500)
    done: list[tuple[Eviction, bool]] = []
    failed: list[Eviction] = []
    evictor = Evictor(api, lambda e, deleted: done.append((e, deleted)),  # type: ignore[arg-type]
                      lambda e, reason: failed.append(e), retry_seconds=0.001)
    evictor.submit([eviction])
    await run_for_a_while(evictor.run, lambda: bool(done or failed), rounds=100)
    assert done == [] and failed == [eviction]
    assert ("default", "victim") in api.pods


async def test_a_write_failing_for_now_gets_upstreams_four_tries() -> None:
    """retry.DefaultBackoff has Steps 4: a mark answered 500 three times lands on the fourth."""
    api = FakeApi()
    eviction = _victim(api)
    for _ in range(TRIES - 1):
        api.fail_next("PATCH", "/pods/victim/status", status=500)
    done: list[tuple[Eviction, bool]] = []
    failed: list[Eviction] = []
    evictor = Evictor(api, lambda e, deleted: done.append((e, deleted)),  # type: ignore[arg-type]
                      lambda e, reason: failed.append(e), retry_seconds=0.001)
    evictor.submit([eviction])
    await run_for_a_while(evictor.run, lambda: bool(done or failed), rounds=200)
    assert TRIES == 4
    assert failed == [] and done == [(eviction, True)]
    assert len(api.of("PATCH", "/pods/victim/status")) == TRIES


def _notice() -> Notice:
    return Notice("Pod", "default/cls1", "DevicesAnnotationChanged", "edited", "default", "uid-cls1")


@pytest.mark.parametrize("status", [404, 409, 422])
async def test_a_held_write_to_a_pod_gone_under_its_uid_is_dropped_untold(status: int) -> None:
    """404, or the uid precondition's 409/422 (a new pod under the name): the wish is dropped,
    and the notices it carried are not told (there is no such pod to tell them on)."""
    api = FakeApi()
    api.fail_next("PATCH", "/pods/cls1/status", status=status)
    told: list[tuple[Notice, ...]] = []
    writer = HeldDevicesWriter(KubeHttp(api), lambda: True, retry_seconds=0.01,  # type: ignore[arg-type]
                               on_written=told.append)
    writer.want("default", "cls1", "uid-cls1", "value", untold=_notice())
    await run_for_a_while(writer.run, lambda: bool(api.of("PATCH")), rounds=50)
    await anyio.sleep(0)
    assert len(api.of("PATCH", "/pods/cls1/status")) == 1
    assert told == [] and writer.writes == 0


async def test_an_older_held_value_seen_on_the_watch_keeps_the_newer_wish() -> None:
    """The watch shows the pod with an earlier union (written before the latest edit): the wish
    for the newer union is not the one written, and stays to be written."""
    api = FakeApi()
    api.add_pod(b.pod("cls1", node_name="n", phase="Running"))
    uid = api.pod("default", "cls1")["metadata"]["uid"]
    writer = HeldDevicesWriter(KubeHttp(api), lambda: False, retry_seconds=0.01)  # type: ignore[arg-type]
    writer.want("default", "cls1", uid, "newer")
    writer.observed(uid, "older")
    writer.allowed = lambda: True
    await run_for_a_while(writer.run, lambda: writer.writes > 0, rounds=100)
    [call] = api.of("PATCH", "/pods/cls1/status")
    assert call.body["metadata"]["annotations"] == {"tessera.dev/held-devices": "newer"}
