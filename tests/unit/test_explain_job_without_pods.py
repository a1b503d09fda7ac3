"""`kubectl tessera explain job/NAME` of a Job short of pods (a multi-tenant trial with Kueue and
ResourceQuotas): it stopped at "has no pods ... (none matches its selector)". A suspended Job
(Kueue's normal state before admission) says so; a Job its controller could not create pods for
names the latest FailedCreate Event (a ResourceQuota's "exceeded quota"). The Events are read,
never written; when they cannot be read (403) explain goes on without them."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.kube.http import Response
from scheduler.kubectl import cli
from scheduler.kubectl.cli import CommandError
from scheduler.kubectl.reference import reference
from scheduler.sim import builders as b
from tests.fakeapi import Call, FakeApi, _status

import orjson

NS = "team-a"
JOB_PATH = f"/apis/batch/v1/namespaces/{NS}/jobs/x"
QUOTA = ('Error creating: pods "x-abcde" is forbidden: exceeded quota: gpu-quota, requested: '
         'requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=4, limited: requests.nvidia.com/gpu=4')


def _job(suspend: bool = False, parallelism: int = 2) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x", "namespace": NS, "uid": "job-uid"},
            "spec": {"suspend": suspend, "parallelism": parallelism, "completions": parallelism,
                     "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "job-uid"}}},
            "status": {}}


def _failed_create(message: str, at: str) -> dict[str, Any]:
    return {"metadata": {"name": f"x.{at}", "namespace": NS}, "regarding": {"kind": "Job", "name": "x", "uid": "job-uid"},
            "reason": "FailedCreate", "note": message, "type": "Warning", "eventTime": at}


def _api(job: dict[str, Any], events: list[dict[str, Any]] | None) -> FakeApi:
    """The Job at its path; its Events (None: listing them is denied, 403, in both Event APIs)."""
    api = FakeApi()

    def answer(call: Call) -> Response | None:
        if call.path == JOB_PATH:
            return Response(200, orjson.dumps(job))
        if "events" in call.path:
            return _status(403, "events is forbidden", "Forbidden") if events is None else api._list(events)
        return None
    api.handlers.append(answer)
    return api


async def _explained(api: FakeApi, pods: list[dict[str, Any]]) -> str:
    return await cli._workload_pod(api, reference("job/x", NS, "default"), pods)  # type: ignore[arg-type]


async def test_a_suspended_job_without_pods_says_it_is_suspended() -> None:
    with pytest.raises(CommandError) as raised:
        await _explained(_api(_job(suspend=True), []), [])
    assert str(raised.value) == (f"job/x has no pods in namespace '{NS}' (none matches its selector); Job {NS}/x is "
                                 "suspended (spec.suspend: true): its controller creates no pods until it is resumed")


async def test_a_job_without_pods_names_its_latest_failed_create_event() -> None:
    events = [_failed_create("an older one", "2026-01-01T00:00:01.000000Z"),
              _failed_create(QUOTA, "2026-01-01T00:00:09.000000Z")]
    api = _api(_job(), events)
    with pytest.raises(CommandError) as raised:
        await _explained(api, [])
    assert str(raised.value) == (f"job/x has no pods in namespace '{NS}' (none matches its selector); its "
                                 f"controller could not create them, latest FailedCreate Event: {QUOTA}")
    assert {call.method for call in api.calls} == {"GET"}  # read-only


async def test_a_job_with_pods_missing_names_the_event_beside_the_pod_explained(
        capsys: pytest.CaptureFixture[str]) -> None:
    pod = b.pod("x-0", NS, labels={"batch.kubernetes.io/controller-uid": "job-uid"})
    chosen = await _explained(_api(_job(), [_failed_create(QUOTA, "2026-01-01T00:00:09.000000Z")]), [pod])
    assert chosen == "x-0"
    assert capsys.readouterr().err == (f"job/x: 1 of its 1 pod pending; explaining x-0; its controller could not "
                                       f"create the rest, latest FailedCreate Event: {QUOTA}\n")


async def test_events_denied_do_not_fail_explain() -> None:
    with pytest.raises(CommandError) as raised:
        await _explained(_api(_job(), None), [])
    assert str(raised.value) == f"job/x has no pods in namespace '{NS}' (none matches its selector)"
