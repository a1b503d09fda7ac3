"""NodeAffinity's PreFilter narrows the nodes to those a required term names by `metadata.name`,
as kube-scheduler v1.36 does; each test failed before its fix.

Upstream (pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go `PreFilter`): when every
required node selector term has a `matchFields` requirement `metadata.name In [...]`, PreFilter
returns `PreFilterResult{NodeNames: ∪ over terms of (∩ within a term)}`; when that union is empty
it rejects the pod `UnschedulableAndUnresolvable` with "pod affinity terms conflict". The
framework (pkg/scheduler/schedule_one.go `findNodesThatFitPod`) filters only the named nodes that
exist and gives every other node the status "node(s) didn't satisfy plugin(s) [NodeAffinity]"
(`SetAbsentNodesStatus`), which FitError.Error counts like any reason; PostFilter skips those
nodes (UnschedulableAndUnresolvable). Before, Tessera ran every filter on every node: the other
nodes read "node(s) didn't match Pod's node affinity/selector", or an earlier filter's reason
(a cordoned node's "node(s) were unschedulable"), and a conflict read like a plain mismatch.
"""

from __future__ import annotations

from typing import Any

from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, config


def _names(*names: str) -> dict[str, Any]:
    return {"matchFields": [{"key": "metadata.name", "operator": "In", "values": list(names)}]}


def _affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": list(terms)}}}}


def _first_part(message: str) -> str:
    return message.split(" preemption: ")[0]


def test_nodes_a_pinned_pod_does_not_name_are_not_filtered() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("n1", cpu="1", memory="4Gi"), b.node("n2", cpu="8", memory="8Gi"),
            b.node("n3", cpu="8", memory="8Gi", unschedulable=True))
    run.add(b.pod("p", requests={"cpu": "2"}, spec_extra=_affinity(_names("n1"))))
    assert _first_part(run.last("p").message) == (
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't satisfy plugin(s) [NodeAffinity].")


def test_a_named_node_that_does_not_exist_is_counted_with_the_others() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("n1", cpu="8", memory="8Gi"), b.node("n2", cpu="8", memory="8Gi"))
    run.add(b.pod("p", requests={"cpu": "1"}, spec_extra=_affinity(_names("gone"))))
    assert _first_part(run.last("p").message) == (
        "0/2 nodes are available: 2 node(s) didn't satisfy plugin(s) [NodeAffinity].")


def test_terms_whose_names_do_not_meet_conflict() -> None:
    """Within a term the name requirements are ANDed: In [n1] and In [n2] leave no node, and with
    every term like that PreFilter rejects the pod outright."""
    run = Run(config(BINPACK))
    run.add(b.node("n1", cpu="8", memory="8Gi"), b.node("n2", cpu="8", memory="8Gi"))
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]},
                            {"key": "metadata.name", "operator": "In", "values": ["n2"]}]}
    run.add(b.pod("p", requests={"cpu": "1"}, spec_extra=_affinity(term)))
    assert _first_part(run.last("p").message) == "0/2 nodes are available: pod affinity terms conflict."


def test_a_named_node_is_still_filtered_by_the_rest_of_its_term() -> None:
    """The named node goes through NodeAffinity's Filter too: a label requirement of the same term
    that it fails gives upstream's usual affinity reason for it."""
    run = Run(config(BINPACK))
    run.add(b.node("n1", cpu="8", memory="8Gi", labels={"zone": "a"}), b.node("n2", cpu="8", memory="8Gi"))
    term = {**_names("n1"), "matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}
    run.add(b.pod("p", requests={"cpu": "1"}, spec_extra=_affinity(term)))
    assert _first_part(run.last("p").message) == (
        "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) didn't satisfy plugin(s) [NodeAffinity].")


def test_a_term_without_names_leaves_every_node_to_the_filters() -> None:
    """Terms are ORed: one term without a `metadata.name` requirement means no narrowing."""
    run = Run(config(BINPACK))
    run.add(b.node("n1", cpu="8", memory="8Gi", labels={"zone": "a"}), b.node("n2", cpu="1", memory="8Gi"))
    run.add(b.pod("p", requests={"cpu": "2"},
                  spec_extra=_affinity(_names("n2"), {"matchExpressions": [
                      {"key": "zone", "operator": "In", "values": ["a"]}]})))
    assert run.node_of("p") == "n1"


def test_a_pinned_pod_is_placed_on_its_node() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("n1", cpu="8", memory="8Gi"), b.node("n2", cpu="8", memory="8Gi"))
    run.add(b.pod("p", requests={"cpu": "1"}, spec_extra=_affinity(_names("n2", "missing"))))
    assert run.node_of("p") == "n2"


def test_preemption_is_not_tried_on_nodes_left_out() -> None:
    """PostFilter's nodesWherePreemptionMightHelp skips UnschedulableAndUnresolvable nodes: only
    the named node can be helped by evictions."""
    run = Run(config(BINPACK))
    run.add(b.node("n1", cpu="2", memory="8Gi"), b.node("n2", cpu="2", memory="8Gi"))
    low = b.pod("low", requests={"cpu": "2"}, node_name="n2", phase="Running", priority=1)
    low["status"]["startTime"] = "2026-01-01T00:00:00Z"
    run.add(low)
    full = b.pod("full", requests={"cpu": "2"}, node_name="n1", phase="Running", priority=1000)
    full["status"]["startTime"] = "2026-01-01T00:00:00Z"
    run.add(full)
    run.add(b.pod("p", requests={"cpu": "2"}, priority=100, spec_extra=_affinity(_names("n1"))))
    assert run.last("p").message == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't satisfy plugin(s) [NodeAffinity]. "
        "preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, "
        "1 Preemption is not helpful for scheduling.")
