"""ResourceClass handling (review findings): each test failed before its fix.

An edit that keeps a class's meaning still moves its observedGeneration (and moves nothing else);
a condition whose status a new leader (or a restarted one) does not change keeps the
lastTransitionTime the object shows; a model whose default class exists, under whatever name, never
gets a second one when a model that differs only in case arrives later.
"""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

from scheduler.api.config import load_config
from scheduler.core.classes import ResourceClass, parse_resource_class
from scheduler.core.objects import Device, parse_device
from scheduler.core.scheduler import Scheduler
from scheduler.kube import status as status_module
from scheduler.kube.class_controller import DefaultClassController
from scheduler.kube.http import KubeHttp, Response
from scheduler.kube.loop import SchedulerLoop
from scheduler.kube.status import UNSCHEDULABLE, StatusWriter
from scheduler.sim import builders as b
from tests.fakeapi import Call, FakeApi
from tests.helpers import run_for_a_while

CLASS_PATH = "/apis/tessera.dev/v1alpha1/resourceclasses/v100/status"
POD_PATH = "/api/v1/namespaces/default/pods/p/status"
NOW = ["2026-01-01T00:00:00.000000Z"]
YESTERDAY = "2025-12-31T00:00:00Z"


@pytest.fixture(autouse=True)
def _clock(monkeypatch: pytest.MonkeyPatch) -> None:
    NOW[0] = "2026-01-01T00:00:00.000000Z"
    monkeypatch.setattr(status_module, "micro_time", lambda now=None: NOW[0])


def _loop(api: FakeApi | None = None) -> SchedulerLoop:
    api = api or FakeApi()
    return SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t",  # type: ignore[arg-type]
                         leader_term=lambda: 1)


def _wished(loop: SchedulerLoop, path: str = CLASS_PATH) -> dict[str, Any]:
    if path == CLASS_PATH:
        loop._write_class_statuses()
    [body] = [body for (wished, _), body in loop.statuses._dirty.items() if wished == path]
    return body


# --- observedGeneration after an edit that keeps the meaning -------------------------------------

EQUIVALENT_EDITS = [
    ({"sharing": {"dimension": "memory", "unit": "1Gi"}}, {"sharing": {"dimension": "memory", "unit": "1024Mi"}}),
    ({"match_labels": {"model": "V100"}},
     {"match_labels": None, "expressions": [{"key": "model", "operator": "In", "values": ["V100"]}]}),
]


@pytest.mark.parametrize("old_spec,new_spec", EQUIVALENT_EDITS)
def test_an_equivalent_spec_edit_moves_observed_generation(old_spec: dict[str, Any],
                                                           new_spec: dict[str, Any]) -> None:
    loop = _loop()
    old = b.resource_class("v100", **({"match_labels": {"model": "V100"}} | old_spec))
    old["metadata"]["generation"] = 1
    loop._apply("ADDED", old)
    assert _wished(loop)["status"]["observedGeneration"] == 1
    new = b.resource_class("v100", **({"match_labels": {"model": "V100"}} | new_spec))
    new["metadata"]["generation"] = 2
    loop._apply("MODIFIED", new)
    assert _wished(loop)["status"]["observedGeneration"] == 2


@pytest.mark.parametrize("old_spec,new_spec", EQUIVALENT_EDITS)
def test_an_equivalent_spec_edit_moves_nothing_but_the_object(old_spec: dict[str, Any],
                                                             new_spec: dict[str, Any]) -> None:
    """No reindex, no requeue, no placement moves; every index points at the new object."""
    core = Scheduler(load_config(None))
    core.apply("ADDED", b.node("n", gpus=1), 0.0)
    core.apply("ADDED", b.device("n", 0, model="V100"), 0.0)
    old = b.resource_class("v100", **({"match_labels": {"model": "V100"}} | old_spec))
    core.apply("ADDED", old, 0.0)
    classes = core._engine.state.classes
    epoch, matching = classes.epoch, dict(classes.matching)
    new = b.resource_class("v100", **({"match_labels": {"model": "V100"}} | new_spec))
    new["metadata"]["generation"] = 2
    events, notices = core._engine.state.apply("MODIFIED", new)
    assert (events, notices) == ([], [])
    cls = classes.classes["v100"]
    assert cls.meta.generation == 2 and classes.by_resource[cls.resource_name] is cls
    assert (classes.epoch, dict(classes.matching)) == (epoch, matching)


def test_a_class_invalid_for_another_reason_gives_up_a_name_a_device_plugin_advertises_in_any_order() -> None:
    """Found on the way: the sameness check ignored `name_taken`, so a class already invalid for
    its selector kept claiming a plugin's resource name when the node came after the class, and
    pods asking for that plain count were taken for the class's."""
    name = "example.com/gpu"
    cls = b.resource_class("gpu", expressions=[{"key": "model", "operator": "Bogus"}], resource_name=name)
    foreign = b.node("plain", extra={name: "4"})
    for order in ((foreign, cls), (cls, foreign)):
        core = Scheduler(load_config(None))
        for obj in order:
            core.apply("ADDED", obj, 0.0)
        assert not core._engine.state.classes.is_class_resource(name), [obj["kind"] for obj in order]


# --- lastTransitionTime across a restart or a change of leader -----------------------------------

def _class_api(bodies: list[dict[str, Any]]) -> FakeApi:
    def handler(call: Call) -> Response | None:
        if "/resourceclasses/" in call.path and call.method == "PATCH":
            bodies.append(call.body)
            return Response(200, b"{}")
        return None
    return FakeApi(handlers=[handler])


def _with_status(obj: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    return {**obj, "status": status}


async def test_a_new_leader_keeps_the_transition_time_of_an_unchanged_condition() -> None:
    bodies: list[dict[str, Any]] = []
    api = _class_api(bodies)
    first = StatusWriter(api, lambda ns, n, r: None)  # type: ignore[arg-type]
    first.resource_class("v100", True, "valid", 4, "class.tessera.dev/v100", generation=1)
    await run_for_a_while(first.run, lambda: len(bodies) == 1)
    NOW[0] = "2026-01-02T00:00:00.000000Z"  # a day on: failover (or a restart); still Valid
    second = StatusWriter(api, lambda ns, n, r: None)  # type: ignore[arg-type]
    second.observed(_with_status(b.resource_class("v100", {"model": "V100"}), bodies[0]["status"]))  # its watch
    second.resource_class("v100", True, "valid", 5, "class.tessera.dev/v100", generation=1)
    await run_for_a_while(second.run, lambda: len(bodies) == 2)
    times = [body["status"]["conditions"][0]["lastTransitionTime"] for body in bodies]
    assert times == ["2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z"]


def test_the_loop_keeps_a_class_conditions_time_from_the_watched_object_and_moves_it_on_a_change() -> None:
    loop = _loop()
    valid = {"conditions": [{"type": "Valid", "status": "True", "reason": "Valid", "message": "m",
                             "lastTransitionTime": YESTERDAY}]}
    loop._apply("ADDED", _with_status(b.resource_class("v100", {"model": "V100"}), valid))
    assert _wished(loop)["status"]["conditions"][0]["lastTransitionTime"] == YESTERDAY
    loop.statuses.reset()  # another term; the object now says it was invalid
    invalid = {"conditions": [{**valid["conditions"][0], "status": "False"}]}
    loop._apply("MODIFIED", _with_status(b.resource_class("v100", {"model": "V100"}), invalid))
    assert _wished(loop)["status"]["conditions"][0]["lastTransitionTime"] == "2026-01-01T00:00:00Z"


def _waiting_pod(transition: str) -> dict[str, Any]:
    pod = b.pod("p")
    pod["metadata"]["resourceVersion"] = "100"
    pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": UNSCHEDULABLE,
                                    "message": "0/3 nodes are available.", "lastTransitionTime": transition}]
    return pod


async def test_a_new_leader_keeps_the_transition_time_of_a_pod_still_unschedulable() -> None:
    """Upstream podutil.UpdatePodCondition keeps lastTransitionTime while the status stays; the
    strategic merge replaces the condition, time included."""
    api = FakeApi()
    pod = _waiting_pod(YESTERDAY)
    api.add_pod(pod)
    writer = StatusWriter(api, lambda ns, n, r: api.pod(ns, n)["metadata"]["resourceVersion"])  # type: ignore[arg-type]
    writer.observed(pod)
    writer.pod_waiting("default", "p", UNSCHEDULABLE, "0/4 nodes are available.")
    await run_for_a_while(writer.run, lambda: writer.writes == 1)
    [condition] = [c for c in api.pod("default", "p")["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert (condition["message"], condition["lastTransitionTime"]) == ("0/4 nodes are available.", YESTERDAY)


def test_the_loop_feeds_a_waiting_pods_condition_to_the_writer_and_forgets_it_with_the_pod() -> None:
    loop = _loop()
    loop._apply("ADDED", _waiting_pod(YESTERDAY))
    loop.statuses.pod_waiting("default", "p", UNSCHEDULABLE, "0/4 nodes are available.")
    assert _wished(loop, POD_PATH)["status"]["conditions"][0]["lastTransitionTime"] == YESTERDAY
    loop._apply("DELETED", _waiting_pod(YESTERDAY))
    assert not loop.statuses._observed


# --- default classes -----------------------------------------------------------------------------

class _Http:
    def __init__(self) -> None:
        self.posts: list[dict[str, Any]] = []

    async def acquire(self) -> None:
        return None

    async def request(self, method: str, path: str, **kw: Any) -> Response:
        self.posts.append(kw["body"])
        return Response(201, b"{}")


def _parsed(obj: dict[str, Any]) -> ResourceClass:
    return parse_resource_class({**obj, "metadata": {**obj["metadata"], "uid": obj["metadata"]["name"]}})


def _device(node: str, model: str) -> Device:
    return parse_device(b.device(node, 0, model=model))


async def test_a_case_twin_model_arriving_later_gives_no_model_a_second_default_class() -> None:
    http = _Http()
    existing: dict[str, ResourceClass] = {}
    devices = [_device("n0", "Tesla V100")]
    controller = DefaultClassController(http, lambda: devices, existing.values)  # type: ignore[arg-type]

    async def reconcile() -> None:
        await controller.reconcile()
        existing.update((p["metadata"]["name"], _parsed(p)) for p in http.posts)

    await reconcile()
    devices.append(_device("n1", "TESLA-V100"))
    await reconcile()
    await reconcile()  # and again: nothing new
    per_model: dict[str, list[str]] = {}
    for post in http.posts:
        per_model.setdefault(post["spec"]["selector"]["matchLabels"]["model"], []).append(post["metadata"]["name"])
    assert per_model == {"Tesla V100": ["tesla-v100"], "TESLA-V100": ["tesla-v100-77f9b518"]}
    del devices[1]  # the twin leaves; the first model keeps its one class
    await reconcile()
    assert len(http.posts) == 2


async def test_an_admin_class_holding_the_name_leaves_the_model_without_a_default_class_and_says_so() -> None:
    http = _Http()
    admin = parse_resource_class(b.resource_class("tesla-v100", {"model": "A100"}))  # selects other devices
    devices = [_device("n0", "Tesla V100")]
    controller = DefaultClassController(http, lambda: devices, lambda: [admin])  # type: ignore[arg-type]
    with capture_logs() as logs:
        await controller.reconcile()
        await controller.reconcile()
    assert http.posts == []
    assert [(e["event"], e["model"]) for e in logs] == [("class_controller.name_taken", "Tesla V100")]


async def test_a_deposed_leader_posts_nothing_after_its_token() -> None:
    leading = [True]

    class DeposedWhileWaiting(_Http):
        async def acquire(self) -> None:
            leading[0] = False  # the Lease went while this replica waited for a write token

    http = DeposedWhileWaiting()
    devices = [_device("n0", "Tesla V100")]
    controller = DefaultClassController(http, lambda: devices, lambda: [],  # type: ignore[arg-type]
                                        is_leader=lambda: leading[0])
    await controller.reconcile()
    assert http.posts == []


def test_an_unsupported_selector_operator_lists_each_supported_value_quoted_once() -> None:
    """Found by a final read: the message doubled the quotes around the whole list
    (`supported values: ""In, NotIn, ...""`); field errors quote each value (`"In", "NotIn"`)."""
    cls = parse_resource_class(b.resource_class("gpu", expressions=[{"key": "model", "operator": "Bogus"}]))
    assert cls.error is not None
    assert ('spec.selector.matchExpressions[0].operator: Unsupported value: "Bogus": supported values: '
            '"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"') in cls.error, cls.error
