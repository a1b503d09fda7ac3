"""`kubectl tessera nodes` counts the GPUs of a pod the leader holds at its allocation gate.

The leader assumes such a pod on its node (its GPUs are the pod's: the live page shows them
`gated`, held by it) and writes why it waits on the pod: `PodScheduled=False`, reason
`WaitingForAllocation`, `assigned to NODE; the Binding waits ...` (scheduler/core/plugins/devices/
gate.py). A listed cluster has no Binding to show for it yet, so `kubectl tessera nodes` read those
GPUs as free — a GPU the scheduler holds for an unsettled Binding, offered as free beside a note
that the pod waits for the node's gate.
"""

from __future__ import annotations

from typing import Any

from scheduler.sim import builders as b
from scheduler.view import model as m
from scheduler.view.listed import listed_view
from tests.helpers import BINPACK, config

V100 = "class.tessera.dev/v100"
HELD = "assigned to n; the Binding waits until the node agent has allocated n.gpu-x to default/q (allocation gate)"


def _held(pod: dict[str, Any], node_message: str = HELD) -> dict[str, Any]:
    pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "WaitingForAllocation",
                                    "message": node_message}]
    return pod


def _cluster(*pods: dict[str, Any]) -> list[dict[str, Any]]:
    return [b.node("n", gpus=2), b.device("n", 0), b.device("n", 1),
            b.resource_class("v100", match_labels={"model": "V100"}), *pods]


def _states(view: m.ClusterView) -> list[tuple[str, tuple[tuple[str, str], ...]]]:
    [node] = view.nodes
    return sorted((gpu.state, tuple((h.pod, h.status) for h in gpu.holders)) for gpu in node.gpus)


def test_a_gate_held_pods_gpu_is_gated_not_free() -> None:
    view = listed_view(config(BINPACK), _cluster(_held(b.pod("p", limits={V100: 1}))), 0.0)
    assert _states(view) == [(m.FREE, ()), (m.GATED, (("default/p", m.HELD),))]
    assert (view.summary.used, view.summary.free) == (1, 1)
    [pending] = view.pending
    assert (pending.pod, pending.reason, pending.node) == ("default/p", "WaitingForAllocation", "n")
    assert view.nodes[0].notes == ("default/p waits for the allocation gate",)


def test_a_pod_that_no_longer_fits_its_gate_node_stays_pending_and_takes_nothing() -> None:
    """The listing is later than the leader's word (its GPUs went to other pods meanwhile): the
    view shows what the listing says, not two pods on one GPU."""
    taken = [b.pod(f"t{i}", limits={"nvidia.com/gpu": 1}, node_name="n", phase="Running") for i in range(2)]
    listed = _cluster(*taken, _held(b.pod("p", limits={V100: 1})))
    view = listed_view(config(BINPACK), listed, 0.0)
    assert [state for state, _ in _states(view)] == [m.COUNTED, m.COUNTED]
    assert not any(gpu.state == m.CONFLICT for node in view.nodes for gpu in node.gpus)
    assert [p.pod for p in view.pending] == ["default/p"]


def test_an_unschedulable_pod_takes_nothing() -> None:
    pod = _held(b.pod("p", limits={V100: 1}), "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")
    pod["status"]["conditions"][0]["reason"] = "Unschedulable"
    view = listed_view(config(BINPACK), _cluster(pod), 0.0)
    assert _states(view) == [(m.FREE, ()), (m.FREE, ())]
