"""A ResourceClass request a node can never hold is UnschedulableAndUnresolvable there.

Upstream (kubernetes v1.36.3): pkg/scheduler/framework/plugins/noderesources/fit.go `fitsRequest`
sets `InsufficientResource.Unresolvable` when the request is above the node's allocatable, and
`Fit.Filter` then answers UnschedulableAndUnresolvable with the same "Insufficient <resource>"
reason; pkg/scheduler/framework/preemption/preemption.go `findCandidates` tries only the nodes
whose status is `Unschedulable` (`NodesForStatusCode(..., fwk.Unschedulable)`) and `Preempt` sets
every other node's status to "Preemption is not helpful for scheduling". TesseraDevices is the
Fit of class devices: with every pod gone, a node whose schedulable matching devices are fewer
than the pod holds at once (or none of which holds one of its slices) can never take it, and no
dry run of evictions is done there. A new user's trial found `class.tessera.dev/v100-32g: 9` on
8-GPU nodes read "No preemption victims found" while `nvidia.com/gpu: 9` read "not helpful".
"""

from __future__ import annotations

from typing import Any

from scheduler.sim import builders as b
from scheduler.core.framework.attempt import Attempt
from tests.helpers import BINPACK, Run, config

CLASS = "class.tessera.dev/v100-32g"
LOW, HIGH = 1, 1000


def _cluster(nodes: int = 4, gpus: int = 8, **device: Any) -> Run:
    run = Run(config(BINPACK))
    for index in range(nodes):
        name = f"n{index + 1}"
        run.add(b.node(name, gpus=gpus), *[b.device(name, i, **device) for i in range(gpus)])
    run.add(b.resource_class("v100-32g", match_labels={"model": "V100"}))
    return run


def _first(run: Run, name: str) -> Attempt:
    """The pod's first attempt (the replay evicts the victims and places the pod afterwards)."""
    return next(a for a in run.attempts if a.pod.key == f"default/{name}")


def _fill(run: Run, count: int, resource: str = CLASS, amount: int = 1) -> None:
    """`count` lower-priority pods placed by the scheduler, each holding `amount` of `resource`."""
    run.add(*[b.pod(f"low{i}", limits={resource: amount}, priority=LOW) for i in range(count)])
    assert all(run.node_of(f"low{i}") is not None for i in range(count))


def test_a_class_request_above_every_nodes_devices_is_not_helpful_to_preempt_as_a_plain_count_is() -> None:
    run = _cluster()
    _fill(run, 8)  # victims exist on the nodes: only the status can keep preemption away
    run.add(b.pod("by-class", limits={CLASS: 9}, priority=HIGH))
    run.add(b.pod("by-count", limits={"nvidia.com/gpu": 9}, priority=HIGH))
    not_helpful = "preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."
    assert run.last("by-class").message == f"0/4 nodes are available: 4 Insufficient {CLASS}. {not_helpful}"
    assert run.last("by-count").message == f"0/4 nodes are available: 4 Insufficient nvidia.com/gpu. {not_helpful}"
    assert not run.last("by-class").preempted


def test_class_devices_other_pods_hold_stay_resolvable() -> None:
    """Merely Unschedulable: evicting the holders frees the devices, the pod preempts."""
    run = _cluster(nodes=2)
    _fill(run, 16)
    run.add(b.pod("big", limits={CLASS: 8}, priority=HIGH))
    attempt = _first(run, "big")
    assert attempt.message.startswith(f"0/2 nodes are available: 2 Insufficient {CLASS}.")
    assert len(attempt.preempted) == 8 and attempt.nominated_node in {"n1", "n2"}


def test_unhealthy_and_unschedulable_devices_do_not_count_toward_what_a_node_could_hold() -> None:
    """n1 has 8 devices of the class but one is unhealthy and one cordoned: 6 could ever be
    free there; n2's 8 are healthy and held by lower-priority pods: only n2 is tried."""
    run = _cluster(nodes=2)
    run.add(b.device("n1", 0, healthy=False), b.device("n1", 1, unschedulable=True))
    run.add(*[b.pod(f"low{i}", limits={CLASS: 1}, priority=LOW) for i in range(14)])
    run.add(b.pod("big", limits={CLASS: 8}, priority=HIGH,
                  spec_extra={"preemptionPolicy": "PreemptLowerPriority"}))
    attempt = _first(run, "big")
    assert attempt.nominated_node == "n2", attempt.message
    assert len(attempt.preempted) == 8
    # with n2 gone, n1 is all that is left, and it can never hold 8: no dry run, not helpful
    run.add(b.pod("big2", limits={CLASS: 7}, priority=HIGH,
                  spec_extra={"nodeSelector": {"kubernetes.io/hostname": "n1"}}))
    assert run.last("big2").message.endswith(
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.")


def test_a_slice_larger_than_any_devices_capacity_is_not_helpful_but_a_held_slice_is() -> None:
    run = _cluster(nodes=1, gpus=2)
    run.add(b.resource_class("by-memory", match_labels={"model": "V100"},
                             sharing={"dimension": "memory", "unit": "1Gi"}))
    _fill(run, 2, "class.tessera.dev/by-memory", 20)  # 20Gi of each 32Gi device
    run.add(b.pod("too-big", limits={"class.tessera.dev/by-memory": 33}, priority=HIGH))
    assert run.last("too-big").message == (
        "0/1 nodes are available: 1 Insufficient class.tessera.dev/by-memory. "
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")
    run.add(b.pod("whole", limits={"class.tessera.dev/by-memory": 32}, priority=HIGH))
    attempt = _first(run, "whole")
    assert len(attempt.preempted) == 1 and attempt.nominated_node == "n1", attempt.message


def test_a_gang_member_preempting_alone_reads_its_own_per_node_status() -> None:
    """A gang whose minimum is placed: a further member preempts as one pod (upstream's
    DefaultPreemption per pod) from its own failed search — unresolvable everywhere here."""
    run = _cluster(nodes=2)
    _fill(run, 8)
    gang = b.gang_labels("train", 2)
    run.add(*[b.pod(f"g{i}", limits={CLASS: 1}, priority=HIGH, labels=gang) for i in range(2)])
    assert run.node_of("g0") and run.node_of("g1")
    run.add(b.pod("g2", limits={CLASS: 9}, priority=HIGH, labels=gang))
    attempt = run.last("g2")
    assert attempt.node is None and not attempt.preempted
    assert attempt.message.endswith("preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."), \
        attempt.message
