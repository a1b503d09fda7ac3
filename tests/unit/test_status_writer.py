"""The status writer against a fake HTTP layer: coalescing, no stale PodScheduled=False, class status.

Regression: bound gang members kept `PodScheduled=False` (2 of 24 in a new user's trial). The
delayed Unschedulable write landed after the Binding, which had set PodScheduled=True. The writer
now asks the cache at write time whether the pod still waits, and sends the pod's resourceVersion
as a precondition, so a Binding that lands first turns the late write into a 409.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from scheduler.kube.http import Response
from scheduler.kube.status import UNSCHEDULABLE, WAITING_FOR_ALLOCATION, StatusWriter
from scheduler.sim import builders as b
from tests.fakeapi import FakeApi
from tests.helpers import run_for_a_while

STATUS = "/api/v1/namespaces/default/pods/p/status"


def _api() -> FakeApi:
    api = FakeApi()
    pod = b.pod("p")
    pod["metadata"]["resourceVersion"] = "100"
    api.add_pod(pod)
    return api


async def _flush(writer: StatusWriter, until: Callable[[], bool] = lambda: False, rounds: int = 20) -> None:
    await run_for_a_while(writer.run, until, rounds)


def _condition(api: FakeApi) -> dict[str, str]:
    return next(c for c in api.pod("default", "p")["status"]["conditions"] if c["type"] == "PodScheduled")


async def test_a_waiting_pod_gets_its_condition_with_a_version_precondition() -> None:
    api = _api()
    writer = StatusWriter(api, lambda ns, name, reason: "100" if reason == UNSCHEDULABLE else None)  # type: ignore[arg-type]
    writer.pod_waiting("default", "p", UNSCHEDULABLE, "0/1 nodes are available: 1 Insufficient cpu.")
    writer.pod_waiting("default", "p", UNSCHEDULABLE, "0/1 nodes are available: 1 Insufficient cpu.")
    await _flush(writer, lambda: writer.writes > 0)
    [patch] = api.of("PATCH", "/status")
    assert patch.body["metadata"] == {"resourceVersion": "100"}
    condition = _condition(api)
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
    assert "lastTransitionTime" in condition


async def test_a_pod_bound_before_the_write_is_not_marked_unschedulable() -> None:
    api = _api()
    waiting = {"p": True}
    writer = StatusWriter(api, lambda ns, name, reason: "100" if waiting[name] else None)  # type: ignore[arg-type]
    writer.pod_waiting("default", "p", UNSCHEDULABLE, "0/1 nodes are available: 1 Insufficient cpu.")
    waiting["p"] = False  # the gang was retried and placed before the writer ran
    await _flush(writer)
    assert api.of("PATCH") == []


async def test_a_binding_that_lands_first_turns_the_late_write_into_a_conflict() -> None:
    """The cache has not seen the Binding yet (it still says the pod waits, at the old version)."""
    api = _api()
    answers = ["100"]  # what the cache says: the pre-Binding version once, then (watch caught up) bound
    writer = StatusWriter(api, lambda ns, name, reason: answers.pop() if answers else None,  # type: ignore[arg-type]
                          retry_seconds=0.01)
    writer.pod_waiting("default", "p", UNSCHEDULABLE, "0/2 nodes are available: 2 Insufficient cpu.")
    api.bind("default", "p", {"metadata": {"uid": api.pod("default", "p")["metadata"]["uid"]},
                               "target": {"name": "n"}})
    await _flush(writer, rounds=30)
    assert len(api.of("PATCH")) == 1  # the 409; the retry found the pod bound and wrote nothing
    condition = _condition(api)
    assert condition["status"] == "True"


async def test_waiting_for_the_allocation_gate_is_its_own_reason() -> None:
    api = _api()
    writer = StatusWriter(api, lambda ns, name, reason: "100" if reason == WAITING_FOR_ALLOCATION else None)  # type: ignore[arg-type]
    writer.pod_waiting("default", "p", WAITING_FOR_ALLOCATION, "assigned to n; the Binding waits ...")
    await _flush(writer, lambda: writer.writes > 0)
    assert _condition(api)["reason"] == WAITING_FOR_ALLOCATION


async def test_pod_group_status_is_merged_as_wished() -> None:
    api = FakeApi()
    writer = StatusWriter(api, lambda ns, name, reason: None)  # type: ignore[arg-type]
    status = {"phase": "Running", "running": 3, "succeeded": 0, "failed": 0}
    writer.pod_group("default", "g", status)
    writer.pod_group("default", "g", status)
    await _flush(writer, lambda: bool(api.calls))
    [patch] = api.of("PATCH", "/podgroups/g/status")
    assert patch.body == {"status": status} and patch.content_type == "application/merge-patch+json"


async def test_upstream_pod_group_gets_the_podgroupscheduled_condition() -> None:
    api = FakeApi()
    writer = StatusWriter(api, lambda ns, name, reason: None)  # type: ignore[arg-type]
    writer.workload_pod_group("default", "g", False, "Unschedulable", "0/4 nodes are available: no rack has room",
                              transition=True, uid="g-uid")
    await _flush(writer, lambda: bool(api.calls))
    [patch] = api.of("PATCH", "/apis/scheduling.k8s.io/v1alpha2/namespaces/default/podgroups/g/status")
    assert patch.content_type == "application/strategic-merge-patch+json"
    [condition] = patch.body["status"]["conditions"]
    assert {k: condition[k] for k in ("type", "status", "reason", "message")} == {
        "type": "PodGroupScheduled", "status": "False", "reason": "Unschedulable",
        "message": "0/4 nodes are available: no rack has room"}
    assert condition["lastTransitionTime"].endswith("Z")
    assert patch.body["metadata"] == {"uid": "g-uid"}  # only that object takes it (see the e2e test)


async def test_class_status_carries_the_effective_resource_name() -> None:
    """The RESOURCENAME column (`.status.resourceName`) is never blank for a class that leaves
    `spec.resourceName` to its default (issue 10, part 3.6)."""
    api = FakeApi(handlers=[lambda call: Response(200, b"{}") if "/resourceclasses/" in call.path else None])
    writer = StatusWriter(api, lambda ns, name, reason: None)  # type: ignore[arg-type]
    writer.resource_class("v100", True, "selector and resourceName are valid", 4, "class.tessera.dev/v100", generation=1)
    writer.resource_class("own", False, "spec.selector: broken", 0, "gpu.example.com/own", generation=1)
    await _flush(writer, lambda: len(api.of("PATCH")) == 2)
    patches = {call.path: call for call in api.of("PATCH")}
    v100 = patches["/apis/tessera.dev/v1alpha1/resourceclasses/v100/status"]
    assert v100.content_type == "application/merge-patch+json"
    assert v100.body["status"]["resourceName"] == "class.tessera.dev/v100"
    assert v100.body["status"]["matchingDevices"] == 4
    assert [c["status"] for c in v100.body["status"]["conditions"]] == ["True"]
    own = patches["/apis/tessera.dev/v1alpha1/resourceclasses/own/status"].body["status"]
    assert own["resourceName"] == "gpu.example.com/own" and own["conditions"][0]["status"] == "False"


async def test_a_preemptor_gets_its_nominated_node_with_the_condition_and_loses_it_when_cleared() -> None:
    api = _api()
    writer = StatusWriter(api, lambda ns, name, reason: api.pod(ns, name)["metadata"]["resourceVersion"])  # type: ignore[arg-type]
    writer.pod_waiting("default", "p", UNSCHEDULABLE, "0/1 nodes are available: 1 Insufficient cpu.", nominated_node="n1")
    await _flush(writer, lambda: writer.writes > 0)
    assert api.pod("default", "p")["status"]["nominatedNodeName"] == "n1"
    assert _condition(api)["reason"] == "Unschedulable"
    writer.pod_waiting("default", "p", UNSCHEDULABLE, "0/1 nodes are available: 1 Insufficient cpu. preemption: "
                       "0/1 nodes are available: 1 Insufficient cpu.", nominated_node="")
    await _flush(writer, lambda: writer.writes > 1)
    assert "nominatedNodeName" not in api.pod("default", "p")["status"]


async def test_a_later_wish_without_a_nomination_keeps_the_one_not_yet_written() -> None:
    """Regression (review): a retry's PodScheduled wish (nomination "leave it") replaced the
    unwritten wish that carried nominatedNodeName, and the nomination was never written."""
    api = _api()
    writer = StatusWriter(api, lambda ns, name, reason: api.pod(ns, name)["metadata"]["resourceVersion"])  # type: ignore[arg-type]
    writer.pod_waiting("default", "p", UNSCHEDULABLE, "0/1 nodes are available: 1 Insufficient cpu.", nominated_node="n1")
    writer.pod_waiting("default", "p", UNSCHEDULABLE, "0/1 nodes are available: 1 Insufficient cpu. preemption: "
                       "not eligible due to a terminating pod on the nominated node.")
    await _flush(writer, lambda: writer.writes > 0)
    assert api.pod("default", "p")["status"]["nominatedNodeName"] == "n1"


async def test_a_nomination_cleared_by_a_higher_preemptor_is_removed_and_stays_removed() -> None:
    """upstream's prepareCandidate clears the nominatedNodeName of lower-priority pods nominated to
    the node a preemption chose: written at once (without a condition of its own), and a later
    wish that leaves the nomination as it is must not bring the old node back."""
    api = _api()
    writer = StatusWriter(api, lambda ns, name, reason: api.pod(ns, name)["metadata"]["resourceVersion"])  # type: ignore[arg-type]
    writer.pod_waiting("default", "p", UNSCHEDULABLE, "0/1 nodes are available: 1 Insufficient cpu.", nominated_node="n1")
    await _flush(writer, lambda: writer.writes > 0)
    assert api.pod("default", "p")["status"]["nominatedNodeName"] == "n1"
    writer.pod_nomination_cleared("default", "p")
    await _flush(writer, lambda: writer.writes > 1)
    assert "nominatedNodeName" not in api.pod("default", "p")["status"]
    assert _condition(api)["reason"] == "Unschedulable"  # the condition written before is kept
    writer.pod_waiting("default", "p", UNSCHEDULABLE, "0/1 nodes are available: 1 Too many pods.")
    await _flush(writer, lambda: writer.writes > 2)
    assert "nominatedNodeName" not in api.pod("default", "p")["status"]


async def test_a_cleared_nomination_joins_a_condition_not_yet_written() -> None:
    api = _api()
    writer = StatusWriter(api, lambda ns, name, reason: api.pod(ns, name)["metadata"]["resourceVersion"])  # type: ignore[arg-type]
    writer.pod_waiting("default", "p", UNSCHEDULABLE, "0/1 nodes are available: 1 Too many pods.", nominated_node="n1")
    writer.pod_nomination_cleared("default", "p")
    await _flush(writer, lambda: writer.writes > 0)
    [patch] = api.of("PATCH", "/status")
    assert patch.body["status"]["nominatedNodeName"] is None
    assert _condition(api)["message"] == "0/1 nodes are available: 1 Too many pods."


# --- gaps found by mutation (round 3) ----------------------------------------------------------

CLASS_STATUS = "/apis/tessera.dev/v1alpha1/resourceclasses/v100/status"


@pytest.mark.parametrize("status", [500, 503, 429])
async def test_a_write_the_server_failed_is_retried(status: int) -> None:
    """A 5xx (500 included) or 429 is the server's trouble, not the wish's: written again later."""
    api = FakeApi(handlers=[lambda call: Response(200, b"{}") if "/resourceclasses/" in call.path else None])
    api.fail_next("PATCH", "/resourceclasses/", status=status)
    writer = StatusWriter(api, lambda ns, name, reason: None, retry_seconds=0.01)  # type: ignore[arg-type]
    writer.resource_class("v100", True, "selector and resourceName are valid", 1, "class.tessera.dev/v100", generation=1)
    await _flush(writer, lambda: writer.writes > 0, rounds=40)
    assert len(api.of("PATCH", CLASS_STATUS)) == 2 and writer.writes == 1


async def test_a_class_conditions_reason_defaults_to_valid_or_invalidspec() -> None:
    api = FakeApi(handlers=[lambda call: Response(200, b"{}") if "/resourceclasses/" in call.path else None])
    writer = StatusWriter(api, lambda ns, name, reason: None)  # type: ignore[arg-type]
    writer.resource_class("v100", True, "selector and resourceName are valid", 4, "class.tessera.dev/v100", generation=1)
    writer.resource_class("own", False, "spec.selector: broken", 0, "gpu.example.com/own", generation=1)
    await _flush(writer, lambda: len(api.of("PATCH")) == 2)
    reasons = {call.path.rsplit("/", 2)[-2]: call.body["status"]["conditions"][0]["reason"] for call in api.of("PATCH")}
    assert reasons == {"v100": "Valid", "own": "InvalidSpec"}


@pytest.mark.parametrize(("generation", "observed"), [(0, None), (1, 1), (7, 7)])
async def test_a_workload_podgroup_condition_carries_its_generation_from_the_first(generation: int,
                                                                                  observed: int | None) -> None:
    """observedGeneration is the group's metadata.generation, 1 for a group never edited (0: not known)."""
    api = FakeApi()
    writer = StatusWriter(api, lambda ns, name, reason: None)  # type: ignore[arg-type]
    writer.workload_pod_group("default", "g", True, "Scheduled", "", transition=True, uid="g-uid", generation=generation)
    await _flush(writer, lambda: bool(api.calls))
    [patch] = api.of("PATCH", "/podgroups/g/status")
    [condition] = patch.body["status"]["conditions"]
    assert condition.get("observedGeneration") == observed
