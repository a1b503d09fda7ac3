"""What a gang with a required topology level reads when it waits: the domain sentence, the
reasons of the nodes no member can use, the domain its bound members pin, and upstream's full
stop after the preemption part."""

from __future__ import annotations

from typing import Any

from scheduler.sim import builders as b
from tests.helpers import Run
from tests.replay.test_topology import RACK, gang, topology_config

TAINT = {"key": "dedicated", "value": "x", "effect": "NoSchedule"}


def cordoned_cluster() -> list[dict[str, Any]]:
    """A user trial's dev cluster: rack r1's two T4 nodes cordoned, one of rack r2's V100 nodes
    tainted; every node has its 8 GPUs free."""
    def node(name: str, rack: str, **extra: Any) -> dict[str, Any]:
        return b.node(name, gpus=8, labels={"example.com/block": "a", RACK: rack}, **extra)
    return [node("t4-node-000", "r1", unschedulable=True), node("t4-node-001", "r1", unschedulable=True),
            node("v100-node-000", "r2", taints=[TAINT]), node("v100-node-001", "r2")]


def test_a_required_gang_names_the_reasons_of_the_nodes_no_member_can_use() -> None:
    """A trial: a 2 x 8-GPU rack-required gang on a cluster with cordons and a taint read only
    "no rack has room for 2 pods ... (largest: 1)" while every node had 8 free GPUs, and explain
    showed no node. The same gang without a topology level names the cordons and the taint.
    The nodes no member can use now say why, counted as a failed search counts them (upstream's
    FitError histogram), after the domain sentence; explain lists them."""
    run = Run(topology_config(), explain=True)
    run.add(*cordoned_cluster())
    run.add(*gang("cord", 2, 8, required=RACK))
    assert run.node_of("cord-0") is None
    message = run.last("cord-0").message
    assert message.startswith(
        "0/4 nodes are available: no rack has room for 2 pods of gang default/cord (largest: 1). "
        "1 node(s) had untolerated taint(s), 2 node(s) were unschedulable. preemption: "), message
    filtered = run.last("cord-0").filtered or {}
    assert sorted(filtered) == ["t4-node-000", "t4-node-001", "v100-node-000"]
    assert filtered["t4-node-000"] == "node(s) were unschedulable"
    # the non-topology path's counts are the same reasons
    plain = Run(topology_config(), explain=True)
    plain.add(*cordoned_cluster())
    plain.add(*gang("cord", 2, 8))
    assert "1 node(s) had untolerated taint(s), 2 node(s) were unschedulable" in plain.last("cord-1").message


def test_a_gang_pinned_by_its_bound_members_names_their_domain() -> None:
    """A trial: train-d-0 runs in rack a/r1, which has no GPU left; train-d-1 read "no rack has room
    for 1 pods of gang default/train-d (largest: 0)" while rack a/r2 had 16 free GPUs. The bound
    member pins the rack: the message names it, and counts in the singular."""
    run = Run(topology_config())
    run.add(b.node("a-r1-0", gpus=8, labels={"example.com/block": "a", RACK: "r1"}),
            *(b.node(f"a-r2-{i}", gpus=8, labels={"example.com/block": "a", RACK: "r2"}) for i in range(2)))
    labels = b.gang_labels("train-d", 2)
    required = {"tessera.dev/topology-required": RACK}
    run.add(b.pod("train-d-0", labels=labels, annotations=required, limits={"nvidia.com/gpu": 8},
                  node_name="a-r1-0", phase="Running"))
    run.add(b.pod("train-d-1", labels=labels, annotations=required, limits={"nvidia.com/gpu": 8}))
    assert run.node_of("train-d-1") is None
    message = run.last("train-d-1").message
    assert message.startswith(
        "0/3 nodes are available: no room for 1 more pod of gang default/train-d: its bound members are in "
        "rack a/r1, which has room for 0 more. 1 Insufficient nvidia.com/gpu."), message


def test_one_pod_needed_reads_in_the_singular() -> None:
    run = Run(topology_config())
    run.add(b.node("a-r1-0", gpus=4, labels={"example.com/block": "a", RACK: "r1"}))
    run.add(*gang("one", 1, 8, required=RACK))
    assert run.last("one-0").message.startswith(
        "0/1 nodes are available: no rack has room for 1 pod of gang default/one (largest: 0)."), \
        run.last("one-0").message
