"""A pending pod's own update that may make it schedulable brings it back at once (mutation round
4: leaving tolerations out of the scheduling inputs an update must change passed every test)."""

from __future__ import annotations

import copy

from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, config


def test_a_toleration_added_to_a_parked_pod_schedules_it() -> None:
    """Upstream: a toleration added to an unschedulable pod (the API allows adding them) is an
    UnschedulablePodUpdate worth another try (TaintToleration's UpdatePodToleration hint)."""
    run = Run(config(BINPACK))
    run.add(b.node("tainted", taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]))
    pod = b.pod("p")
    run.add(pod)
    assert run.node_of("p") is None
    tolerating = copy.deepcopy(pod)
    tolerating["spec"]["tolerations"] = [{"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}]
    tolerating["metadata"]["resourceVersion"] = "2"
    run.feed(b.event("MODIFIED", tolerating))
    assert run.node_of("p") == "tainted"
