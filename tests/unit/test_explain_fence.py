"""`kubectl tessera explain` of a pod waiting behind a term fence that cannot be written. An
on-call trial: an admission policy refused writes of tessera.dev/term, the leader was SIGTERMed,
and the new leader decided nothing; explain of a waiting pod said "pending: not tried yet" beside a
dry run that placed it and a healthy leader line. The leader's fence writes one Warning
FailedScheduling Event per pod it could not fence (scheduler/kube/loop.py, `_fence_refused`):
explain reads it and says what holds the pod."""

from __future__ import annotations

from typing import Any

from scheduler.kube.fence import FENCE_REFUSED
from scheduler.kube.term_token import term_token
from scheduler.kubectl import explain as explaining
from scheduler.kubectl.leadership import LEADING, RELEASED, Leadership
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


def _fenced(token: str) -> list[dict[str, Any]]:
    return [b.node("n1", gpus=4),
            b.pod("waits", limits={"nvidia.com/gpu": 1}, annotations={"tessera.dev/term": token})]


def test_event_times_in_mixed_formats_are_compared_as_times_not_as_text() -> None:
    """An Event's time comes as eventTime (microseconds), a series' lastObservedTime, or an older
    Event's deprecatedLastTimestamp (seconds; any RFC 3339 offset). As text, `...:05Z` sorts after
    `...:05.100000Z` ('Z' > '.') and `01:00:07+01:00` (00:00:07 UTC) after `00:00:06Z`."""
    attempt = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    fence_last = [{**_event(attempt, ""), "eventTime": None, "deprecatedLastTimestamp": "2026-01-01T00:00:05Z"},
                  _event(REFUSED, "2026-01-01T00:00:05.100000Z")]
    result = explaining.explain(_cluster(), "default/waits", config(BINPACK), fence_last, 0.0)
    assert result is not None
    assert result.status.startswith("pending, not tried: the leader's term fence"), result.status
    attempt_last = [_event(REFUSED, "2026-01-01T00:00:06.000000Z"),
                    {**_event(attempt, "2026-01-01T00:00:01.000000Z"),
                     "series": {"count": 3, "lastObservedTime": "2026-01-01T01:00:07.000000+01:00"}}]
    # 01:00:07+01:00 is 00:00:07Z: the attempt came after the fence's refusal
    result = explaining.explain(_cluster(), "default/waits", config(BINPACK), attempt_last, 0.0)
    assert result is not None
    assert result.status == "pending: not tried yet", result.status
    seconds = [_event(REFUSED, "2026-01-01T00:00:06.000000Z"),
               {**_event(attempt, ""), "eventTime": None, "deprecatedLastTimestamp": "2026-01-01T01:00:07+01:00"}]
    result = explaining.explain(_cluster(), "default/waits", config(BINPACK), seconds, 0.0)
    assert result is not None
    assert result.status == "pending: not tried yet", result.status


LEASE = "tessera-system/tessera"


def _leading(holder: str, transitions: int, acquired: str) -> Leadership:
    """The Lease as explain reads it: who holds it now, in which term (its token, as the leader
    forms it: scheduler/kube/leader.py, term_token)."""
    return Leadership(LEASE, LEADING, f"{holder} (...)", holder, 1.0, 30,
                      term_token("tessera-system", "tessera", holder, transitions, acquired))


def _explain(objects: list[dict[str, Any]], events: list[dict[str, Any]],
             leader: Leadership | None) -> explaining.Explanation:
    result = explaining.explain(objects, "default/waits", config(BINPACK), events, 0.0)
    assert result is not None and result.dry_run is not None
    return explaining.with_leader(result, leader)


def test_a_refusal_of_an_older_term_than_the_one_that_fenced_the_pod_is_not_current() -> None:
    """The term that refused is over, and the term that leads now (its token on the pod) has
    fenced the pod since; no attempt followed yet. The old refusal is not why the pod waits."""
    token = "tessera-system/tessera/replica-b_2/4/2026-01-01T00:10:00.000000Z"
    events = [{**_event(REFUSED, "2026-01-01T00:00:00.000000Z"), "reportingInstance": "replica-a_1"}]
    result = _explain(_fenced(token), events, _leading("replica-b_2", 4, "2026-01-01T00:10:00.000000Z"))
    assert result.status == "pending: not tried yet", result.status
    assert result.leader is not None and result.leader.holder == "replica-b_2"


def test_a_refusal_by_the_term_whose_token_the_pod_carries_is_not_current() -> None:
    """The replica that refused wrote its token onto the pod later in the same term (a retry):
    the pod is fenced."""
    token = "tessera-system/tessera/replica-a_1/3/2026-01-01T00:00:00.000000Z"
    events = [{**_event(REFUSED, "2026-01-01T00:00:30.000000Z"), "reportingInstance": "replica-a_1"}]
    result = _explain(_fenced(token), events, _leading("replica-a_1", 3, "2026-01-01T00:00:00.000000Z"))
    assert result.status == "pending: not tried yet", result.status


def test_a_refusal_by_a_newer_term_than_the_pods_token_is_current() -> None:
    """The pod carries an older term's token; a replica that took over since refused to write its
    own: that refusal is why the pod waits."""
    token = "tessera-system/tessera/replica-a_1/3/2026-01-01T00:00:00.000000Z"
    events = [{**_event(REFUSED, "2026-01-01T00:05:00.000000Z"), "reportingInstance": "replica-b_2"}]
    result = _explain(_fenced(token), events, _leading("replica-b_2", 4, "2026-01-01T00:04:50.000000Z"))
    assert result.status.startswith("pending, not tried: the leader's term fence"), result.status


def test_a_token_of_the_refusing_replicas_own_older_term_leaves_the_refusal_current() -> None:
    """replica-a fenced the pod in its term 3, lost the Lease, and took it back in term 5, whose
    fence the pod refused: the token names the refusing replica, but not its current term. (Before:
    explain matched the Event's reportingInstance to the token's identity and said "not tried yet".)"""
    token = "tessera-system/tessera/replica-a_1/3/2026-01-01T00:00:00.000000Z"
    events = [{**_event(REFUSED, "2026-01-01T00:20:00.000000Z"), "reportingInstance": "replica-a_1"}]
    result = _explain(_fenced(token), events, _leading("replica-a_1", 5, "2026-01-01T00:19:50.000000Z"))
    assert result.status.startswith("pending, not tried: the leader's term fence"), result.status


def test_clocks_that_differ_do_not_decide_whether_the_refusal_is_current() -> None:
    """The leader that took over fenced the pod; its Lease acquireTime (its clock) reads later
    than the refusal Event another replica's clock stamped, or earlier: the term decides, not
    the times."""
    for acquired in ("2026-01-01T00:09:00.000000Z", "2026-01-01T00:11:00.000000Z"):
        token = f"tessera-system/tessera/replica-b_2/4/{acquired}"
        events = [{**_event(REFUSED, "2026-01-01T00:10:00.000000Z"), "reportingInstance": "replica-a_1"}]
        result = _explain(_fenced(token), events, _leading("replica-b_2", 4, acquired))
        assert result.status == "pending: not tried yet", (acquired, result.status)
        # not yet fenced by the term that leads now (replica-c took over since): the pod waits for it
        result = _explain(_fenced(token), events, _leading("replica-c_3", 5, "2026-01-01T00:12:00.000000Z"))
        assert result.status.startswith("pending, not tried: the leader's term fence"), (acquired, result.status)


def test_an_older_format_token_naming_no_lease_is_read_as_the_leases() -> None:
    """A token written before tokens named their Lease (a rolling upgrade) of the current term
    fenced the pod."""
    token = "replica-b_2/4/2026-01-01T00:10:00.000000Z"
    events = [_event(REFUSED, "2026-01-01T00:00:00.000000Z")]
    result = _explain(_fenced(token), events, _leading("replica-b_2", 4, "2026-01-01T00:10:00.000000Z"))
    assert result.status == "pending: not tried yet", result.status


def test_without_a_current_term_the_refusal_is_not_judged_current() -> None:
    """No term can be read (leader election off in the configuration, the Lease missing,
    released or unreadable): nothing tells whether the pod was fenced since, so the refusal is
    not shown as what holds the pod now; the status says the term is unknown and why. (Before:
    the latest refusal Event stood as current.)"""
    from scheduler.kubectl.leadership import MISSING, UNKNOWN
    token = "tessera-system/tessera/replica-b_2/4/2026-01-01T00:10:00.000000Z"
    events = [_event(REFUSED, "2026-01-01T00:00:00.000000Z")]
    cases = [(None, "leader election is off in the configuration"),
             (Leadership(LEASE, RELEASED, "none: ...", "", 3.0), "no replica holds the Lease"),
             (Leadership(LEASE, MISSING, "none: ..."), "no replica holds the Lease"),
             (Leadership(LEASE, UNKNOWN, "unknown: ..."), "the Lease cannot be read")]
    for leader, why in cases:
        result = _explain(_fenced(token), events, leader)
        assert not result.status.startswith("pending, not tried: the leader's term fence"), result.status
        assert result.status.startswith("pending: a leader's term fence could not be written onto it earlier"), \
            result.status
        assert f"whether it still holds the pod is unknown: {why}" in result.status, result.status
        assert not result.fence_refused
