"""A Node deleted is a cluster event (kube-scheduler v1.36 eventhandlers.go deleteNodeFromCache moves
the unschedulable pods under `ClusterEvent{Node, Delete}`, label "NodeDelete"), and
PodTopologySpread registers it (isSchedulableAfterNodeChange: the deleted node had every
constraint's key): deleting the last node of a domain takes that domain out of the global minimum,
which may rise. Tessera raised no event for it, so such a pod waited for the 5-minute flush.
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.sim import builders as b
from tests.helpers import Run

ZONE = "topology.kubernetes.io/zone"
SKEW = "node(s) didn't match pod topology spread constraints"


def _replica(name: str) -> dict[str, Any]:
    spread = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
              "labelSelector": {"matchLabels": {"app": "web"}}}
    return b.pod(name, labels={"app": "web"}, limits={"nvidia.com/gpu": 1},
                 spec_extra={"topologySpreadConstraints": [spread]})


def _three_zones(run: Run) -> None:
    """Zones a and b of two nodes each; zone c of one node, whose one GPU a pod of another app holds."""
    run.add(*(b.node(f"{z}{i}", gpus=8, labels={ZONE: z}) for z in "ab" for i in range(2)),
            b.node("c0", gpus=1, labels={ZONE: "c"}))
    run.add(b.pod("other", labels={"app": "other"}, limits={"nvidia.com/gpu": 1}, node_name="c0", phase="Running"))


@pytest.mark.parametrize("last_state", ["readable", "unreadable"])
def test_deleting_the_node_of_the_emptiest_zone_requeues_a_pod_the_skew_refused(last_state: str) -> None:
    """A DELETED event whose last state does not parse deletes the node all the same
    (`_delete_unreadable`), and so is the same NodeDelete: the node's last labels known stand."""
    run = Run()
    _three_zones(run)
    run.add(_replica("web-0"), _replica("web-1"))
    assert sorted(str(run.node_of(n))[0] for n in ("web-0", "web-1")) == ["a", "b"]
    run.add(_replica("web-2"))  # zone c counts 0: a and b give 1 + 1 - 0 = 2 > 1; c0 has no GPU left
    assert run.node_of("web-2") is None
    assert run.last("web-2").message.startswith(f"0/5 nodes are available: 1 Insufficient nvidia.com/gpu, 4 {SKEW}.")

    gone = b.node("c0", gpus=1)
    if last_state == "unreadable":
        gone["status"]["allocatable"]["cpu"] = "lots"
    run.feed(b.event("DELETED", gone))  # `other` still runs there

    assert run.state.pod_by_key("default/other") is not None
    assert str(run.node_of("web-2"))[0] in "ab"  # zone c is gone: the minimum is 1, and 1 + 1 - 1 = 1
    assert any(event == "NodeDelete" for _, event in run.scheduler.take_queue_incoming())


def test_deleting_a_node_without_the_constraints_key_does_not_requeue_it() -> None:
    run = Run()
    _three_zones(run)
    run.add(b.node("bare", gpus=8))
    run.add(_replica("web-0"), _replica("web-1"), _replica("web-2"))
    assert run.node_of("web-2") is None
    attempts = len([a for a in run.attempts if a.pod.key == "default/web-2"])

    run.feed(b.event("DELETED", b.node("bare", gpus=8)))  # no zone: no domain gone, nothing to retry

    assert len([a for a in run.attempts if a.pod.key == "default/web-2"]) == attempts
