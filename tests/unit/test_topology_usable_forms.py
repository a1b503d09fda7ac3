"""A gang's usable nodes (`TopologyPlacement._usable`: the rows some member's filters leave) are
asked once per member form; members whose filters differ must not share a form, or the nodes only
the later ones may use hold none of them and a domain that fits the gang is refused."""

from __future__ import annotations

from typing import Any

import numpy as np

from scheduler.core.framework.cycle_state import prepare
from scheduler.core.framework.placement import Domain
from scheduler.sim import builders as b
from tests.helpers import Run
from tests.replay.test_topology import RACK, rack_nodes, racks_of, topology_config

REQUIRED = "tessera.dev/topology-required"
HOSTNAME = "kubernetes.io/hostname"


def _member(name: str, labels: dict[str, str], **extra: Any) -> dict[str, Any]:
    return b.pod(name, labels={**b.gang_labels("g", 3), **labels}, annotations={REQUIRED: RACK},
                 limits={"nvidia.com/gpu": 2}, **extra)


def test_a_member_repelled_from_a_node_leaves_it_usable_for_members_the_repelling_pod_does_not_match() -> None:
    """a-r1-0 has 2 GPUs left beside x, whose anti-affinity repels role=lead there alone: the
    lead goes to a-r1-1, one worker beside it, the other worker to a-r1-0 (the rack holds 3). With
    the lead's nodes standing for the workers' too, the rack held 2 and the gang waited for good."""
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 2}))
    anti = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"role": "lead"}}, "topologyKey": HOSTNAME}]}}}
    run.add(b.pod("x", scheduler="other", node_name="a-r1-0", phase="Running", limits={"nvidia.com/gpu": 2},
                  spec_extra=anti))
    run.add(_member("g-0", {"role": "lead"}), _member("g-1", {"role": "worker"}), _member("g-2", {"role": "worker"}))
    assert racks_of(run, ["g-0", "g-1", "g-2"]) == {("a", "r1")}
    assert run.node_of("g-0") == "a-r1-1"


def test_a_member_whose_own_anti_affinity_rules_a_node_out_leaves_it_usable_for_the_others() -> None:
    """The lead's own anti-affinity to x (app=db) rules a-r1-0 out for it alone."""
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 2}))
    run.add(b.pod("x", scheduler="other", node_name="a-r1-0", phase="Running", labels={"app": "db"},
                  limits={"nvidia.com/gpu": 2}))
    anti = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": HOSTNAME}]}}}
    run.add(_member("g-0", {"role": "lead"}, spec_extra=anti), _member("g-1", {"role": "worker"}),
            _member("g-2", {"role": "worker"}))
    assert racks_of(run, ["g-0", "g-1", "g-2"]) == {("a", "r1")}
    assert run.node_of("g-0") == "a-r1-1"


def test_a_member_whose_host_port_is_taken_on_a_node_leaves_it_usable_for_members_without_it() -> None:
    """x holds hostPort 8080 on a-r1-0: the lead, which asks for it, cannot go there; the workers can."""
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 2}))
    port = {"name": "main", "resources": {"limits": {"nvidia.com/gpu": 2}},
            "ports": [{"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"}]}
    run.add(b.pod("x", scheduler="other", node_name="a-r1-0", phase="Running", containers=[port]))
    run.add(_member("g-0", {"role": "lead"}, containers=[port]), _member("g-1", {"role": "worker"}),
            _member("g-2", {"role": "worker"}))
    assert racks_of(run, ["g-0", "g-1", "g-2"]) == {("a", "r1")}
    assert run.node_of("g-0") == "a-r1-1"


def test_a_placed_pod_sets_its_own_terms_aside_so_it_shares_no_form_with_its_twin() -> None:
    """The filters set a pod's own placement and hold aside (InterPodAffinity's and
    PodTopologySpread's own part, `nominated_on`'s skip), so a placed pod and a pending twin of
    equal forms read the nodes differently: `a`, anti-affine to app=g by host, may stay on its own
    node, its twin may not. Keyed alike, the twin's rows stood for both and a's node was lost."""
    from dataclasses import replace

    from scheduler.core.framework.cycle_state import prepare
    from scheduler.core.objects import parse_pod

    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 2}))
    anti = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "g"}}, "topologyKey": HOSTNAME}]}}}
    run.add(b.pod("a", labels={"app": "g"}, limits={"nvidia.com/gpu": 2}, spec_extra=anti))
    placed = run.node_of("a")
    assert placed is not None
    state = run.state
    runtime = run.scheduler._engine.profiles["tessera"]
    # as while assumed, before its Binding (the pod then names no node: NodeName's form is alike)
    own = replace(next(pod for pod in state.pods.values() if pod.meta.name == "a"), node_name="")
    twin = parse_pod(b.pod("twin", labels={"app": "g"}, limits={"nvidia.com/gpu": 2}, spec_extra=anti))
    row = state.node_position(placed)
    assert row is not None
    assert runtime.usable_rows([prepare(own, state.classes)])[row]
    assert not runtime.usable_rows([prepare(twin, state.classes)])[row]
    assert runtime.usable_rows([prepare(twin, state.classes), prepare(own, state.classes)])[row]


def test_the_placed_pods_anti_affinity_terms_a_form_reads_keep_up_with_a_pod_placed_since() -> None:
    """InterPodAffinity's form keeps the placed pods' distinct anti-affinity terms while no node
    changes (`touches`): after x, anti-affine to role=lead by host, lands on a-r1-0, the lead and a
    worker no longer share a form. Kept from before x (the mutant that never refreshes them), the
    lead's rows stood for the worker's and a-r1-0 was lost to both."""
    from scheduler.core.framework.cycle_state import prepare
    from scheduler.core.objects import parse_pod

    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 2}))
    state = run.state
    runtime = run.scheduler._engine.profiles["tessera"]
    shuns_db = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": HOSTNAME}]}}}
    lead, worker = (parse_pod(_member(f"g-{i}", {"role": role}, spec_extra=shuns_db))
                    for i, role in enumerate(("lead", "worker")))
    rows = [state.node_position(name) for name in ("a-r1-0", "a-r1-1")]
    assert None not in rows
    assert all(runtime.usable_rows([prepare(lead, state.classes), prepare(worker, state.classes)])[rows])
    anti = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"role": "lead"}}, "topologyKey": HOSTNAME}]}}}
    run.add(b.pod("x", scheduler="other", node_name="a-r1-0", phase="Running", limits={"nvidia.com/gpu": 2},
                  spec_extra=anti))
    assert not runtime.usable_rows([prepare(lead, state.classes)])[rows[0]]
    assert all(runtime.usable_rows([prepare(lead, state.classes), prepare(worker, state.classes)])[rows])


def test_a_held_pod_sets_its_own_hold_aside_so_it_shares_no_form_with_its_twin() -> None:
    """As a placed pod, a nominated pod with a hold: `a`, spread by host over app=g (maxSkew 1)
    and holding a-r1-0, may go there (PodTopologySpread adds the nominated pods but its own:
    `nominated_on`'s skip), its pending twin may not (a's hold counts there: skew 2). Their forms
    are equal (PodTopologySpread's reads no holds); keyed by placements alone (the mutant of
    `ProfileRuntime.applicable_form` no test saw: "latent", e1a2b0c), the twin's rows stood for
    both and a-r1-0 was lost."""
    from scheduler.core.framework.cycle_state import prepare
    from scheduler.core.objects import parse_pod
    from scheduler.core.state.cluster import placement_of

    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 2}))
    state = run.state
    runtime = run.scheduler._engine.profiles["tessera"]
    spread = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": HOSTNAME, "whenUnsatisfiable": "DoNotSchedule",
                                             "labelSelector": {"matchLabels": {"app": "g"}}}]}
    own, twin = (parse_pod(b.pod(name, labels={"app": "g"}, requests={"cpu": "100m"}, spec_extra=spread))
                 for name in ("a", "twin"))
    state.pods[own.uid] = own
    state.hold(own.uid, placement_of(own, "a-r1-0", None, state.ledger.counted_as), 0)
    row = state.node_position("a-r1-0")
    assert row is not None
    assert runtime.usable_rows([prepare(own, state.classes)])[row]
    assert not runtime.usable_rows([prepare(twin, state.classes)])[row]
    assert runtime.usable_rows([prepare(twin, state.classes), prepare(own, state.classes)])[row]


def test_the_topology_filters_form_is_its_domain_alone() -> None:
    """TopologyPlacement's filter reads the domain the attempt is held to, nothing of the pod: two
    members held to one rack share its form (the default form, the pod's uid, shared nothing), and
    another rack's differs."""
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 1, ("a", "r2"): 1}))
    run.add(_member("g-0", {"role": "lead"}), _member("g-1", {"role": "worker"}))
    plugin = run.scheduler.profiles["tessera"].plugins["TopologyPlacement"]
    state = run.state
    pods = [pod for pod in state.pods.values() if pod.meta.name in ("g-0", "g-1")]
    r1 = Domain("rack", ("a", "r1"), frozenset({"a-r1-0"}), np.ones(1, np.bool_))
    r2 = Domain("rack", ("a", "r2"), frozenset({"a-r2-0"}), np.ones(1, np.bool_))
    forms = []
    for pod, domain in zip(pods, (r1, r1), strict=True):
        ctx = prepare(pod, state.classes)
        ctx.domain = domain
        forms.append(plugin.pod_form(ctx))
    assert forms[0] == forms[1] and hash(forms[0]) is not None
    other = prepare(pods[0], state.classes)
    other.domain = r2
    assert plugin.pod_form(other) != forms[0]


def test_the_usable_rows_are_every_forms_rows_whatever_the_members_order() -> None:
    """`usable_rows` is the union over the members' forms: a member pinned to a-r1-0 and one
    pinned to a-r1-1 leave both nodes usable in either order (the last form alone would drop the
    first one's node, and a domain holding the gang would be refused)."""
    from scheduler.core.objects import parse_pod

    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 2}))
    state = run.state
    runtime = run.scheduler._engine.profiles["tessera"]
    names = ("a-r1-0", "a-r1-1")
    members = [prepare(parse_pod(_member(f"g-{i}", {}, spec_extra={"nodeSelector": {HOSTNAME: node}})), state.classes)
               for i, node in enumerate(names)]
    rows = [state.node_position(name) for name in names]
    assert None not in rows
    for order in (members, members[::-1]):
        usable = runtime.usable_rows(order)
        assert all(usable[rows]) and usable.sum() == 2
