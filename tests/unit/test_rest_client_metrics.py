"""client-go's `rest_client_requests_total{code,method,host}`, which kube-scheduler exports (an
on-call trial's dashboards read it for the apiserver's answers to the scheduler): every HTTP
request Tessera's kube layer sends counts once per try, by its status code (`<error>` when no
answer came), its method and the apiserver's host[:port], as client-go's request.go
(`updateURLMetrics`, `sanitize`) counts them."""

from __future__ import annotations

import pytest

from scheduler.api.config import load_config
from scheduler.kube.http import KubeHttp
from scheduler.kube.loop import SchedulerLoop
from scheduler.kube.metrics import Metrics
from scheduler.sim import builders as b
from tests.fakeapi import FakeApi


def _count(metrics: Metrics, code: str, method: str) -> float:
    return metrics.registry.get_sample_value(
        "rest_client_requests_total", {"code": code, "method": method, "host": "fake-apiserver"}) or 0.0


async def test_each_request_counts_by_code_method_and_host() -> None:
    api = FakeApi()
    metrics = Metrics()
    api.add_pod(b.pod("p"))
    http = KubeHttp(api, on_result=metrics.count_request)  # type: ignore[arg-type]
    await http.request("GET", "/api/v1/namespaces/default/pods/p")
    await http.request("GET", "/api/v1/namespaces/default/pods/missing")
    api.fail_next("GET", "/pods/p", error=TimeoutError())
    with pytest.raises(TimeoutError):
        await http.request("GET", "/api/v1/namespaces/default/pods/p")
    api.fail_next("POST", "/binding", status=500)
    await http.request("POST", "/api/v1/namespaces/default/pods/p/binding", body={})
    assert _count(metrics, "200", "GET") == 1
    assert _count(metrics, "404", "GET") == 1
    assert _count(metrics, "<error>", "GET") == 1
    assert _count(metrics, "500", "POST") == 1


async def test_the_loops_own_event_client_counts_too() -> None:
    """The loop's Event writer has a client of its own (its own token bucket): it counts into
    the same metric as the client it was made from, whenever that client's `on_result` was set
    (`tessera run` sets it on the clients it made; the Event client used to copy it when the
    loop was made, and counted nothing when it was set after)."""
    api = FakeApi()
    metrics = Metrics()
    api.add_pod(b.pod("p"))
    early = KubeHttp(api, on_result=metrics.count_request)  # type: ignore[arg-type]
    loop = SchedulerLoop(load_config(None), early, KubeHttp(api), identity="a")  # type: ignore[arg-type]
    await loop.events.http.request("GET", "/api/v1/namespaces/default/pods/p")
    assert _count(metrics, "200", "GET") == 1
    late = KubeHttp(api)  # type: ignore[arg-type]
    loop = SchedulerLoop(load_config(None), late, KubeHttp(api), identity="a")  # type: ignore[arg-type]
    late.on_result = metrics.count_request
    await loop.events.http.request("GET", "/api/v1/namespaces/default/pods/missing")
    assert _count(metrics, "404", "GET") == 1
