"""DefaultPreemption against kube-scheduler v1.36.3, second review: each test failed before its fix.

Upstream references (kubernetes/kubernetes v1.36.3, pkg/scheduler/framework/preemption):
preemption.go Evaluator.Preempt / SelectCandidate / pickOneNodeForPreemption; executor.go
prepareCandidate(Async) / getLowerPriorityNominatedPods.
"""

from __future__ import annotations

from typing import Any

from scheduler.core.framework.attempt import Attempt
from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, config

ONE = {"cpu": "1", "memory": "1Gi"}


def _running(name: str, node: str, priority: int, gpus: int = 0, cpu: str = "1",
             labels: dict[str, str] | None = None) -> dict[str, Any]:
    pod = b.pod(name, requests={"cpu": cpu, "memory": "1Gi"}, limits={"nvidia.com/gpu": gpus} if gpus else None,
                priority=priority, node_name=node, phase="Running", labels=labels)
    pod["status"]["startTime"] = "2026-01-01T00:00:00Z"
    return pod


def _first(run: Run, name: str) -> Attempt:
    return next(a for a in run.attempts if a.pod.meta.name == name)


def _victims(attempt: Attempt) -> list[str]:
    return sorted(v.meta.name for v in attempt.preempted)


def test_a_lower_nomination_without_a_hold_is_cleared_on_the_chosen_node() -> None:
    """upstream prepareCandidate(Async) -> getLowerPriorityNominatedPods(fh, priority, node): every
    pod the nominator has on the node (built from `status.nominatedNodeName`, so also pods a previous
    leader nominated) with a lower priority loses its nomination. Tessera cleared only pods whose
    in-memory hold sat on the node: `a`, nominated to `n` by a leader before this one (no hold here),
    kept its nomination when `p` preempted there (taking the room `a`'s victim frees), and stayed
    refused ("a terminating pod on the nominated node") instead of preempting again at once."""
    run = Run(config(BINPACK))
    run.add(b.node("n", cpu="2", memory="2Gi"))
    low1 = _running("low1", "n", 0)  # a's victim, evicted by the previous leader: terminating
    low1["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:10Z"
    low1["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                                     "message": "tessera: preempting", "lastTransitionTime": "2026-01-01T00:00:10Z"}]
    run.add(low1, _running("low2", "n", 0))
    run.replay._evict = lambda victims, preemptor: None  # type: ignore[method-assign]
    a = b.pod("a", requests=ONE, priority=100)
    a["status"]["nominatedNodeName"] = "n"
    run.add(a)
    assert run.last("a").message.endswith("preemption: not eligible due to a terminating pod on the nominated node.")
    run.add(b.pod("p", requests=ONE, priority=500))
    p = _first(run, "p")
    assert p.nominated_node == "n" and p.preempted
    assert [pod.meta.name for pod in p.nominations_cleared] == ["a"]
    assert run.state.pod_by_key("default/a").nominated_node == ""
    run.scheduler.queue.flush_unschedulable(1e9)
    retry = [x for x in run.replay.drain() if x.pod.meta.name == "a"]
    assert retry, "a was not retried"
    assert "not eligible" not in retry[0].message  # nominated nowhere: it may preempt again
    assert _victims(retry[0]) == ["low1", "low2"] and retry[0].nominated_node == "n"


def test_a_gang_member_preempting_alone_picks_its_node_as_one_pod() -> None:
    """A gang already at its minimum whose extra member fits nowhere: the member "preempts as one
    pod" (Cycle._schedule_gang; upstream runs DefaultPreemption per pod: Evaluator.Preempt ->
    SelectCandidate -> pickOneNodeForPreemption, where the smaller sum of victim priorities wins,
    here 1 victim on `a` against 2 on `b`). Tessera sent it through the gang dry run instead (every
    lowest-tier pod of the cluster lifted, the node chosen by scoring): binpack preferred the fuller
    `b` and evicted two pods where one would do."""
    run = Run(config(BINPACK))
    run.add(b.node("a", cpu="8", gpus=2), b.node("b", cpu="8", gpus=2), b.node("c", cpu="8", gpus=1))
    run.add(_running("big", "a", 0, gpus=2), _running("s1", "b", 0, gpus=1), _running("s2", "b", 0, gpus=1))
    run.add(_running("hog", "b", 5000, cpu="6"))  # binpack scores b higher
    run.add(_running("g0", "c", 100, gpus=1, labels=b.gang_labels("g", 1)))
    run.add(b.pod("g1", requests=ONE, limits={"nvidia.com/gpu": 2}, priority=100, labels=b.gang_labels("g", 1)))
    g1 = _first(run, "g1")
    assert g1.nominated_node == "a" and _victims(g1) == ["big"]
    assert g1.message.startswith("0/3 nodes are available: ")
