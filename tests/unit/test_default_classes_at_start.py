"""The default ResourceClasses are made once the caches sync, not a reconcile interval later.

Regression (a trial with config/gpu-cluster.yaml): `tessera.ready` at 02:54:36.9, the classes at
02:55:06.96. The controller's first pass ran before the informers had synced (and returned: it
writes only from a complete cache), so did the passes the ExtendedResource events woke during the
first LIST; nothing woke it once the caches were complete, so the first real pass waited for the
30 s interval. Here the Pod LIST fails once, so the caches complete only after a backoff, well
after the ExtendedResources arrived.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import orjson
import structlog.testing

from scheduler.api.config import load_config
from scheduler.kube.http import KubeHttp, Response
from scheduler.kube.informers import EXTENDED_RESOURCES, RESOURCE_CLASSES
from scheduler.kube.loop import SchedulerLoop
from scheduler.sim import builders as b
from tests.fakeapi import Call, FakeApi
from tests.helpers import until


def _cluster(created: dict[str, float]) -> FakeApi:
    """One node with one Tesla-T4, no ResourceClass; `created`: class name -> when it was POSTed."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=1)]
    api.lists[EXTENDED_RESOURCES.path] = [b.device("n", 0, model="Tesla-T4")]
    api.lists[RESOURCE_CLASSES.path] = []

    def create_class(call: Call) -> Response | None:
        if call.method == "POST" and call.path == RESOURCE_CLASSES.path:
            created[call.body["metadata"]["name"]] = time.monotonic()
            return Response(201, orjson.dumps(call.body))
        return None

    api.handlers.append(create_class)
    return api


async def test_default_classes_are_created_within_seconds_of_ready() -> None:
    created: dict[str, float] = {}
    api = _cluster(created)
    api.fail_next("GET", "/api/v1/pods", status=500)  # the caches complete only after a backoff
    loop = SchedulerLoop(load_config("config/gpu-cluster.yaml"), KubeHttp(api), KubeHttp(api),  # type: ignore[arg-type]
                         identity="test")
    assert loop.class_controller is not None and loop.class_controller.interval == 30.0
    ready_at: list[float] = []
    with structlog.testing.capture_logs() as logs:
        async with anyio.create_task_group() as owner:
            owner.start_soon(loop.run)
            await until(lambda: any(entry["event"] == "tessera.ready" for entry in logs), seconds=10)
            ready_at.append(time.monotonic())
            await until(lambda: "tesla-t4" in created, seconds=5)
            owner.cancel_scope.cancel()
    assert created["tesla-t4"] - ready_at[0] < 5.0
    events: list[Any] = [entry["event"] for entry in logs]
    assert events.index("class_controller.created") > events.index("tessera.ready")


async def test_a_standby_that_starts_leading_creates_the_classes_at_once() -> None:
    """The same wait, for a standby: its passes wrote nothing (not the leader), and nothing woke
    the controller when the Lease came to it."""
    created: dict[str, float] = {}
    api = _cluster(created)
    term: list[int | None] = [None]
    loop = SchedulerLoop(load_config("config/gpu-cluster.yaml"), KubeHttp(api), KubeHttp(api),  # type: ignore[arg-type]
                         identity="test", leader_term=lambda: term[0])
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        await until(lambda: loop.informers.synced, seconds=10)
        await anyio.sleep(0.5)  # the standby's passes after sync: nothing written
        assert created == {}
        term[0] = 1
        started = time.monotonic()
        loop.leadership_started()
        await until(lambda: "tesla-t4" in created, seconds=5)
        owner.cancel_scope.cancel()
    assert created["tesla-t4"] - started < 5.0
