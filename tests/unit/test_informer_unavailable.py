"""A kind the scheduler treats as empty because it cannot read it is visible, not only logged once.

An on-call trial: with the PodDisruptionBudget rule removed from the ClusterRole the replica stayed
Ready with `tessera_informer_synced{kind="PodDisruptionBudget"} 1`, and preemption evicted a pod
whose PDB allowed no disruption; a missing Tessera CRD never fired the alert whose text promised
it. `tessera_informer_unavailable{kind,reason}` says which kind is empty and why ("forbidden": the
role may not read it; "not_served": the apiserver does not serve it), from the first scrape after
it happened until the kind is read again. The scheduler's own informers run against the fake
apiserver (tests/fakeapi.py) behind a real KubeHttp, scraped through the live scrape hook.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from structlog.testing import capture_logs

from scheduler.api.config import load_config
from scheduler.kube import informers
from scheduler.kube.http import KubeHttp, Response
from scheduler.kube.informers import DISRUPTION_BUDGETS, EXTENDED_RESOURCES
from scheduler.kube.loop import SchedulerLoop
from scheduler.kube.metrics import Metrics
from scheduler.kube.run_cli import StateGauges
from tests.fakeapi import Call, FakeApi

FORBIDDEN = Response(403, b'{"kind":"Status","status":"Failure","message":"poddisruptionbudgets.policy is '
                          b'forbidden: User \\"system:serviceaccount:tessera-system:tessera-scheduler\\" cannot list '
                          b'resource \\"poddisruptionbudgets\\"","reason":"Forbidden","code":403}')


def _gauge(metrics: Metrics, name: str) -> dict[tuple[str, str], float]:
    text = generate_latest(metrics.registry).decode()
    return {(s.labels["kind"], s.labels.get("reason", "")): s.value
            for family in text_string_to_metric_families(text) for s in family.samples if s.name == name}


@asynccontextmanager
async def _listed_four_times(monkeypatch: pytest.MonkeyPatch, kind: informers.ResourceKind,
                             answers: list[Response]) -> AsyncIterator[tuple[informers.Informer, list[str | None]]]:
    """An informer of `kind`, running with short retries, whose LISTs get `answers` in turn (the
    last one from then on; the caller may change it), once it has listed four times: it and the
    reasons it gave meanwhile. It stops when the block ends."""
    monkeypatch.setattr(informers, "UNAVAILABLE_RETRY_SECONDS", 0.01)
    monkeypatch.setattr(informers, "BACKOFF_INITIAL", 0.001)
    monkeypatch.setattr(informers, "BACKOFF_MAX", 0.01)
    api = FakeApi()
    api.handlers.append(lambda call: (answers.pop(0) if len(answers) > 1 else answers[0])
                        if call.path == kind.path else None)
    informer = informers.Informer(KubeHttp(api), kind, lambda *_: None)  # type: ignore[arg-type]
    seen: list[str | None] = []
    async with anyio.create_task_group() as group:
        group.start_soon(informer.run)
        with anyio.fail_after(5):
            while len(api.of("GET", kind.path)) < 4:
                seen.append(informer.unavailable)
                await anyio.sleep(0.005)
        yield informer, seen
        group.cancel_scope.cancel()


async def test_a_kind_treated_as_empty_is_exported_with_why_until_it_is_read_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(informers, "UNAVAILABLE_RETRY_SECONDS", 0.05)
    api = FakeApi()
    denied = [True]

    def rbac(call: Call) -> Response | None:
        return FORBIDDEN if denied[0] and call.path == DISRUPTION_BUDGETS.path else None

    api.handlers.append(rbac)  # the tessera.dev CRDs are not installed: their LISTs are 404
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t")  # type: ignore[arg-type]
    metrics = Metrics(profiles=["tessera"])
    metrics.on_scrape(StateGauges(loop, metrics))
    async with anyio.create_task_group() as group:
        group.start_soon(loop.informers.run)
        with anyio.fail_after(10):
            await loop.informers.wait_synced()
        unavailable = _gauge(metrics, "tessera_informer_unavailable")
        # ready as before (a denied optional kind must not take the scheduler down), yet told
        assert loop.informers.synced
        assert _gauge(metrics, "tessera_informer_synced")[("PodDisruptionBudget", "")] == 1
        assert unavailable[("PodDisruptionBudget", "forbidden")] == 1
        assert unavailable[("PodDisruptionBudget", "not_served")] == 0
        assert unavailable[("ExtendedResource", "not_served")] == 1
        assert unavailable[("ResourceClass", "not_served")] == 1
        assert unavailable[("PodGroup", "not_served")] == 1  # scheduler-plugins' CRD: absent here too
        assert unavailable[("PodGroup.scheduling.k8s.io", "not_served")] == 1
        # every kind has both series, at 0 when read: an alert on it finds 0, not an absent series
        assert unavailable[("Pod", "forbidden")] == 0 and unavailable[("Pod", "not_served")] == 0
        assert unavailable[("Node", "forbidden")] == 0 and unavailable[("PriorityClass", "forbidden")] == 0
        assert {kind for kind, _ in unavailable} == {informer.kind.label for informer in loop.informers.informers}

        # the role is fixed and the CRD installed: the next retry reads them, the gauge clears
        denied[0] = False
        api.lists[EXTENDED_RESOURCES.path] = []
        with anyio.fail_after(10):
            while any(informer.kind in (DISRUPTION_BUDGETS, EXTENDED_RESOURCES) and not informer.available
                      for informer in loop.informers.informers):
                await anyio.sleep(0.01)
        unavailable = _gauge(metrics, "tessera_informer_unavailable")
        assert unavailable[("PodDisruptionBudget", "forbidden")] == 0
        assert unavailable[("ExtendedResource", "not_served")] == 0
        assert unavailable[("ResourceClass", "not_served")] == 1
        group.cancel_scope.cancel()


async def test_the_unavailable_warning_repeats_while_it_lasts_not_at_every_retry(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """One warning per episode was the only sign, scrolled away by the time anyone looked: it
    comes again every UNAVAILABLE_REPEAT_SECONDS while the kind stays unreadable (not at every
    30 s retry), and a kind read again says so once."""
    monkeypatch.setattr(informers, "UNAVAILABLE_RETRY_SECONDS", 0.01)
    monkeypatch.setattr(informers, "UNAVAILABLE_REPEAT_SECONDS", 0.2)
    api = FakeApi()
    api.handlers.append(lambda call: FORBIDDEN if call.path == DISRUPTION_BUDGETS.path else None)
    informer = informers.Informer(KubeHttp(api), DISRUPTION_BUDGETS, lambda *_: None)  # type: ignore[arg-type]
    with capture_logs() as logs:
        async with anyio.create_task_group() as group:
            group.start_soon(informer.run)
            await anyio.sleep(0.5)
            group.cancel_scope.cancel()
    lists = len(api.of("GET", DISRUPTION_BUDGETS.path))
    warnings = [entry for entry in logs if entry["event"] == "informer.unavailable"]
    assert lists > 10
    assert 2 <= len(warnings) <= 4, warnings  # at 0 s, then about every 0.2 s
    assert all(entry["reason"] == "forbidden" and entry["kind"] == "PodDisruptionBudget" for entry in warnings)
    assert "RBAC" in warnings[-1]["message"] and "for " in warnings[-1]["message"]
    assert informer.unavailable == "forbidden"


async def test_a_crd_installed_but_forbidden_is_told_as_forbidden_while_it_stays_empty(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """ExtendedResource not served (404: empty, synced), then installed with the role lacking it
    (403): it is still empty, now because of RBAC; the gauge must say so, not 'not_served'
    (the runbook's fix for that is installing a CRD that is there)."""
    answers = [Response(404, b'{"kind":"Status","message":"the server could not find the requested resource"}'),
               Response(403, b'{"kind":"Status","message":"extendedresources.tessera.dev is forbidden"}')]
    async with _listed_four_times(monkeypatch, EXTENDED_RESOURCES, answers) as (informer, seen):
        pass
    assert "not_served" in seen and informer.synced.is_set() and len(informer) == 0
    assert informer.unavailable == "forbidden"


@pytest.mark.parametrize(("kind", "first", "reason"), [
    (EXTENDED_RESOURCES, Response(404, b'{"kind":"Status","message":"the server could not find the requested resource"}'),
     "not_served"),
    (DISRUPTION_BUDGETS, Response(403, b'{"kind":"Status","message":"poddisruptionbudgets.policy is forbidden"}'),
     "forbidden"),
], ids=["not_served", "forbidden"])
async def test_a_401_on_a_kind_treated_as_empty_is_told_as_unauthorized(
        monkeypatch: pytest.MonkeyPatch, kind: informers.ResourceKind, first: Response, reason: str) -> None:
    """A kind treated as empty (404: not served, or 403 on an optional kind: forbidden) whose next
    LIST answers 401 (the token expired or was revoked) stays empty, now because the apiserver
    rejects our credentials: the gauge's reason follows that latest answer ("unauthorized"), not
    the old one (whose runbook fix, installing a CRD or the RBAC, would not help); and back."""
    unauthorized = Response(401, b'{"kind":"Status","message":"Unauthorized","reason":"Unauthorized","code":401}')
    answers = [first, unauthorized]
    metrics = Metrics(profiles=["tessera"])
    async with _listed_four_times(monkeypatch, kind, answers) as (informer, seen):
        metrics.set_informer_unavailable(informer.kind.label, informer.unavailable)
        assert informer.synced.is_set() and len(informer) == 0  # still empty, still counted synced
        assert informer.unavailable == "unauthorized", seen
        unavailable = _gauge(metrics, "tessera_informer_unavailable")
        assert unavailable == {(kind.label, "forbidden"): 0, (kind.label, "not_served"): 0,
                               (kind.label, "unauthorized"): 1}
        # the credentials work again and the kind is still not served / forbidden: that reason again
        answers[0] = first
        with anyio.fail_after(5):
            while informer.unavailable == "unauthorized":
                await anyio.sleep(0.005)
    assert informer.unavailable == reason
