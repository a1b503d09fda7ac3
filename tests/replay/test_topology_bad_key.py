"""A topology annotation whose value is not a label key is refused as the object's invalid field.

A new user's trial: a PodGroup annotated `tessera.dev/topology-required: "Not A/Valid Label!!"` was
taken as a level no node has, and its member said `no node has the label Not A/Valid Label!! of
the required Valid Label!! level` — the key's last part read as the level's name. Tessera already
refuses a PodGroup whose minMember is not an integer with an InvalidObject Warning naming the
field (`Invalid value: "two": must be an integer`); a key the apiserver would never accept on a
node is the same kind of mistake, found the same way."""

from __future__ import annotations

import copy

import pytest

from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, config
from tests.replay.test_topology import RACK, rack_nodes, topology_config

BAD = "Not A/Valid Label!!"
BAD_QUOTED = f"\"{BAD}\""  # as Go's %q quotes it in field errors
WHY = "prefix part must be a lowercase DNS subdomain"


@pytest.mark.parametrize("annotation", ["tessera.dev/topology-required", "tessera.dev/topology-preferred"])
def test_a_podgroup_with_a_topology_value_that_is_no_label_key_is_an_invalid_object(annotation: str) -> None:
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 2}))
    group = b.podgroup("g", 1, annotations={annotation: BAD})
    member = b.pod("m", limits={"nvidia.com/gpu": 1}, labels={"scheduling.x-k8s.io/pod-group": "g"})
    run.add(group, member)
    [notice] = [n for n in run.notices() if n.startswith("InvalidObject: PodGroup default/g")]
    assert notice.startswith(f"InvalidObject: PodGroup default/g: PodGroup.metadata.annotations[{annotation}]: "
                             f"Invalid value: {BAD_QUOTED}: {WHY}")
    assert run.node_of("m") is None and "required Valid Label!! level" not in run.last("m").message
    # the group is there, only unreadable: its members say so, not "not found" (the by-hand check)
    assert run.last("m").message == (f'0/2 nodes are available: podgroup "default/g" is not valid: '
                                     f"PodGroup.metadata.annotations[{annotation}]: Invalid value: {BAD_QUOTED}: {WHY} "
                                     "(a label key such as topology.kubernetes.io/zone). preemption: 0/2 nodes are "
                                     "available: 2 Preemption is not helpful for scheduling., PodGroup default/g gets "
                                     "rejected due to Pod m is unschedulable even after PostFilter")
    fixed = copy.deepcopy(group)
    fixed["metadata"]["annotations"][annotation] = RACK
    run.feed({"type": "MODIFIED", "object": fixed})
    run.add()
    assert run.node_of("m") is not None


def test_a_label_gang_member_with_a_topology_value_that_is_no_label_key_is_reported_and_waits() -> None:
    """A pod is never left out of the cache for it (a pod not taken in holds nothing): the value is
    reported as the member's invalid field, and a required level that is no label key keeps the
    gang waiting with that reason."""
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 2}))
    member = b.pod("g-0", labels=b.gang_labels("g", 1), annotations={"tessera.dev/topology-required": BAD},
                   limits={"nvidia.com/gpu": 1})
    run.add(member)
    assert any(n.startswith("InvalidObject: Pod default/g-0: Pod.metadata.annotations[tessera.dev/topology-required]: "
                            f"Invalid value: {BAD_QUOTED}: {WHY}") for n in run.notices()), run.notices()
    assert run.node_of("g-0") is None
    assert run.last("g-0").message.startswith(
        f"0/2 nodes are available: tessera.dev/topology-required: Invalid value: {BAD_QUOTED}: {WHY}")


def test_a_bound_member_with_a_topology_value_that_is_no_label_key_keeps_its_gpu() -> None:
    """The session's review: with the pod refused as an invalid object, a member an earlier Tessera
    had bound with such a value (a preferred level only scores) was not taken in after a restart,
    and its GPU went to the next pod."""
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=1))
    run.add(b.pod("g-0", labels=b.gang_labels("g", 1), limits={"nvidia.com/gpu": 1}, node_name="n", phase="Running",
                  annotations={"tessera.dev/topology-preferred": BAD}))
    run.add(b.pod("new", limits={"nvidia.com/gpu": 1}))
    assert run.node_of("g-0") == "n" and run.node_of("new") is None


def test_a_topology_annotation_where_it_is_not_read_is_reported_and_the_pod_still_scheduled() -> None:
    """A new user's trial: `tessera.dev/topology-required` on a pod in no gang — or on a member of
    a PodGroup, whose constraint is read from the PodGroup — was dropped without a word. It is
    reported once (the pod is scheduled as it would be without it, as a min-available that is not
    an integer is)."""
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 2}))
    run.add(b.podgroup("g", 1))
    run.add(b.pod("alone", annotations={"tessera.dev/topology-required": RACK}, limits={"nvidia.com/gpu": 1}),
            b.pod("member", annotations={"tessera.dev/topology-preferred": RACK}, limits={"nvidia.com/gpu": 1},
                  labels={"scheduling.x-k8s.io/pod-group": "g"}))
    ignored = [n for n in run.notices() if "is not read" in n]
    assert ignored == [
        "InvalidObject: Pod default/alone: Pod.metadata.annotations[tessera.dev/topology-required] is not read: "
        "the pod is in no gang (a topology constraint places a gang's members together)",
        "InvalidObject: Pod default/member: Pod.metadata.annotations[tessera.dev/topology-preferred] is not read: "
        "a PodGroup's members are placed by the PodGroup's own tessera.dev/topology-* annotations "
        "(or its schedulingConstraints)"]
    assert run.node_of("alone") is not None and run.node_of("member") is not None


def test_a_member_tried_before_its_unreadable_podgroup_came_is_told_once_it_comes() -> None:
    """The session's review: a member tried first said `not found`, and the unreadable group's
    arrival requeued nothing, so it kept saying so."""
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 2}))
    run.add(b.pod("m", limits={"nvidia.com/gpu": 1}, labels={"scheduling.x-k8s.io/pod-group": "g"}))
    assert run.last("m").message.endswith('podgroup "default/g" not found. preemption: 0/2 nodes are available: '
                                          "2 Preemption is not helpful for scheduling., can not find pod group")
    run.add(b.podgroup("g", 1, annotations={"tessera.dev/topology-required": BAD}))
    assert 'podgroup "default/g" is not valid: ' in run.last("m").message
