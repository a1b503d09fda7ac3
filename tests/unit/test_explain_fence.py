"""`kubectl tessera explain` of a pod waiting behind a term fence that cannot be written. An
on-call trial: an admission policy refused writes of tessera.dev/term, the leader was SIGTERMed,
and the new leader decided nothing; explain of a waiting pod said "pending: not tried yet" beside a
dry run that placed it and a healthy leader line. The leader's fence writes one Warning
FailedScheduling Event per pod it could not fence (scheduler/kube/loop.py, `_fence_refused`):
explain reads it and says what holds the pod."""

from __future__ import annotations

from typing import Any

from scheduler.kube.fence import FENCE_REFUSED
from scheduler.kubectl import explain as explaining
from scheduler.sim import builders as b
from tests.helpers import BINPACK, config


def _cluster() -> list[dict[str, Any]]:
    return [b.node("n1", gpus=4), b.pod("waits", limits={"nvidia.com/gpu": 1})]


def _event(note: str, when: str) -> dict[str, Any]:
    return {"type": "Warning", "reason": "FailedScheduling", "note": note, "reportingController": "tessera",
            "eventTime": when, "regarding": {"kind": "Pod"}}


REFUSED = (f"{FENCE_REFUSED}: writing tessera.dev/term through pods/status failed: HTTP 403: pods \"waits\" is "
           "forbidden: ValidatingAdmissionPolicy 'deny-term' denied request")


def test_a_pod_the_fence_could_not_mark_says_so_not_not_tried_yet() -> None:
    result = explaining.explain(_cluster(), "default/waits", config(BINPACK),
                                [_event(REFUSED, "2026-01-01T00:00:00.000000Z")], 0.0)
    assert result is not None and result.dry_run is not None and result.dry_run.node == "n1"
    assert result.status.startswith("pending, not tried: the leader's term fence could not be written onto it"), \
        result.status
    assert "the leader schedules nothing until" in result.status
    assert "Status:     pending, not tried: the leader's term fence" in explaining.render(result, 0.0)


def test_a_later_scheduling_event_is_what_the_pod_waits_for_not_the_old_fence() -> None:
    """The fence was written since (a later attempt's FailedScheduling followed): not said."""
    events = [_event(REFUSED, "2026-01-01T00:00:00.000000Z"),
              _event("0/1 nodes are available: 1 Insufficient nvidia.com/gpu.", "2026-01-01T00:05:00.000000Z")]
    result = explaining.explain(_cluster(), "default/waits", config(BINPACK), events, 0.0)
    assert result is not None and result.status == "pending: not tried yet"
    nothing = explaining.explain(_cluster(), "default/waits", config(BINPACK), [], 0.0)
    assert nothing is not None and nothing.status == "pending: not tried yet"
