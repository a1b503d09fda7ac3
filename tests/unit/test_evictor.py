"""Preemption's evictions against a fake HTTP layer: condition first, then a uid-guarded DELETE."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from scheduler.kube.evictor import Eviction, Evictor
from scheduler.sim import builders as b
from tests.fakeapi import FakeApi


def _victim(api: FakeApi, name: str = "victim") -> Eviction:
    pod = b.pod(name, node_name="n1", phase="Running")
    api.add_pod(pod)
    return Eviction("default", name, pod["metadata"]["uid"], "preemptor-uid", "tessera", "n1")


async def _run(evictor: Evictor, until: Callable[[], bool], rounds: int = 200) -> None:
    task = asyncio.create_task(evictor.run())
    for _ in range(rounds):
        await asyncio.sleep(0.01)
        if until():
            break
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_the_victim_gets_disruption_target_then_is_deleted_with_its_uid() -> None:
    api = FakeApi()
    eviction = _victim(api)
    done: list[Eviction] = []
    evictor = Evictor(api, done.append)  # type: ignore[arg-type]
    evictor.submit(eviction)
    await _run(evictor, lambda: bool(done))
    assert done == [eviction]
    calls = [(c.method, c.path) for c in api.calls if c.method in ("PATCH", "DELETE")]
    assert calls == [("PATCH", "/api/v1/namespaces/default/pods/victim/status"),
                     ("DELETE", "/api/v1/namespaces/default/pods/victim")]
    [patch] = api.of("PATCH", "/status")
    [condition] = patch.body["status"]["conditions"]
    assert {k: condition[k] for k in ("type", "status", "reason", "message")} == {
        "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
        "message": "tessera: preempting to accommodate a higher priority pod"}
    [delete] = api.of("DELETE")
    assert delete.body["preconditions"] == {"uid": eviction.uid}
    assert ("default", "victim") not in api.pods


async def test_a_victim_already_gone_or_recreated_counts_as_done_and_is_not_deleted_again() -> None:
    api = FakeApi()
    gone = Eviction("default", "gone", "uid-gone", "p", "tessera", "n1")
    recreated = _victim(api, "again")
    api.pods[("default", "again")]["metadata"]["uid"] = "a-new-uid"
    done: list[Eviction] = []
    evictor = Evictor(api, done.append)  # type: ignore[arg-type]
    evictor.submit(gone)
    evictor.submit(recreated)
    await _run(evictor, lambda: len(done) == 2)
    assert sorted(e.name for e in done) == ["again", "gone"]
    assert ("default", "again") in api.pods  # the new pod under the old name stays


async def test_a_failed_delete_is_retried() -> None:
    api = FakeApi()
    eviction = _victim(api)
    api.fail_next("DELETE", "/pods/victim", status=500)
    done: list[Eviction] = []
    evictor = Evictor(api, done.append, retry_seconds=0.05)  # type: ignore[arg-type]
    evictor.submit(eviction)
    await _run(evictor, lambda: bool(done))
    assert done == [eviction]
    assert len(api.of("DELETE")) == 2
    assert ("default", "victim") not in api.pods
