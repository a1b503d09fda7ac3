"""Trial finding: `kubectl tessera explain POD` printed the same long scheduling message three
times (Message, the dry run's "would stay pending", Events), so a changed reason was easy to miss.
The dry run's line says "same as Message above" when it is, and marks itself the current one when
it is not; Events keep their text (they are the cluster's record)."""

from __future__ import annotations

import argparse
from typing import Any

import orjson
import pytest

from scheduler.kube.http import Response
from scheduler.kubectl import cli
from scheduler.kubectl.target import Target
from scheduler.sim import builders as b
from tests.helpers import BINPACK, fake_listing

SAID = ("0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: 0/2 nodes are available: "
        "2 Preemption is not helpful for scheduling.")


class _EventsApi:
    """The follow-up reads: the pod's one FailedScheduling Event (`note`); 404 for the rest."""
    def __init__(self, note: str) -> None:
        self.note = note

    async def request(self, method: str, path: str, **_: Any) -> Response:
        if path == "/apis/events.k8s.io/v1/namespaces/default/events":
            event = {"type": "Warning", "reason": "FailedScheduling", "note": self.note,
                     "reportingController": "tessera", "eventTime": "2026-01-01T00:00:00.000000Z",
                     "series": {"count": 3}, "regarding": {"kind": "Pod", "name": "huge"}}
            return Response(200, orjson.dumps({"items": [event]}))
        return Response(404, orjson.dumps({"kind": "Status", "code": 404}))


async def _explain(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], message: str) -> str:
    """`kubectl tessera explain huge --config BINPACK` of an 8-GPU pod on two 4-GPU nodes whose
    PodScheduled condition (and Event) says `message`."""
    huge = b.pod("huge", limits={"nvidia.com/gpu": 8})
    huge["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                     "message": message}]
    monkeypatch.setattr(cli, "_listing", fake_listing(_EventsApi(message), [b.node("n1", gpus=4),
                                                                           b.node("n2", gpus=4), huge]))
    args = argparse.Namespace(pod="huge", namespace=None, config=BINPACK, scheduler_namespace="tessera-system",
                              output="table")
    assert await cli._explain(args, Target(None, None, "default")) == 0
    return capsys.readouterr().out


async def test_the_dry_run_says_same_as_message_instead_of_repeating_it(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    out = await _explain(monkeypatch, capsys, SAID)
    assert "  would stay pending: (same as Message above)\n" in out, out
    assert out.count(SAID) == 2, out  # Message and the Event: the cluster's record keeps its text


async def test_a_changed_reason_is_shown_and_marked_the_current_one(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    old = "0/2 nodes are available: 2 node(s) had untolerated taint {gpu: true}."
    out = await _explain(monkeypatch, capsys, old)
    assert f"  would stay pending (now; Message above is the scheduler's last attempt): {SAID}\n" in out, out
    assert out.count(old) == 2, out
