"""NodePorts: a host port is a filter, as kube-scheduler's (v1.36 nodeports/node_ports.go)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.api.config import parse_config
from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, config

REASON = "node(s) didn't have free ports for the requested pod ports"


def _ported(name: str, *ports: dict[str, Any], init: list[dict[str, Any]] | None = None,
            **kw: Any) -> dict[str, Any]:
    main = b.container("main", limits=kw.pop("limits", {"nvidia.com/gpu": 1}))
    main["ports"] = list(ports)
    return b.pod(name, containers=[main], init_containers=init, **kw)


def test_a_gang_of_host_port_pods_loaded_before_the_first_cycle_spreads_over_nodes() -> None:
    """The mutation round's repro: binpack would put all four on one node; the kubelet would
    reject three of them. Each member's port is taken by the member assumed before it."""
    run = Run(config(BINPACK))
    gang = b.gang_labels("train", 4)
    run.add(*(b.node(f"n{i}", gpus=8) for i in range(4)),
            *(_ported(f"w{i}", {"containerPort": 8080, "hostPort": 8080}, labels=gang) for i in range(4)))
    nodes = [run.node_of(f"w{i}") for i in range(4)]
    assert None not in nodes and len(set(nodes)) == 4, nodes


def test_a_gang_with_fewer_free_nodes_than_members_waits_with_upstreams_message() -> None:
    run = Run(config(BINPACK))
    gang = b.gang_labels("train", 3)
    run.add(b.node("a", gpus=8), b.node("b", gpus=8),
            *(_ported(f"w{i}", {"containerPort": 8080, "hostPort": 8080}, labels=gang) for i in range(3)))
    assert [run.node_of(f"w{i}") for i in range(3)] == [None] * 3
    assert REASON in run.last("w0").message


def test_second_pod_on_a_taken_port_stays_pending_with_upstreams_message() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("a", gpus=8))
    run.add(_ported("first", {"containerPort": 80, "hostPort": 8080}))
    run.add(_ported("second", {"containerPort": 81, "hostPort": 8080}))
    assert run.node_of("first") == "a" and run.node_of("second") is None
    # Unschedulable (not ...AndUnresolvable): preemption tries the node, but finds no lower-priority victim
    assert run.last("second").message == (
        f"0/1 nodes are available: 1 {REASON}. preemption: 0/1 nodes are available: "
        "1 No preemption victims found for incoming pod.")


def test_conflict_rule_protocol_and_host_ip() -> None:
    """HostPortInfo.CheckConflict: same protocol and port, and the same hostIP or either one
    0.0.0.0 (an empty hostIP is 0.0.0.0, an empty protocol TCP)."""
    cases: list[tuple[dict[str, Any], dict[str, Any], bool]] = [  # (holder's port, newcomer's port, conflict?)
        ({"hostPort": 8080}, {"hostPort": 8080, "protocol": "TCP", "hostIP": "0.0.0.0"}, True),
        ({"hostPort": 8080}, {"hostPort": 8080, "protocol": "UDP"}, False),
        ({"hostPort": 8080}, {"hostPort": 8081}, False),
        ({"hostPort": 8080, "hostIP": "10.0.0.1"}, {"hostPort": 8080, "hostIP": "10.0.0.2"}, False),
        ({"hostPort": 8080, "hostIP": "10.0.0.1"}, {"hostPort": 8080, "hostIP": "10.0.0.1"}, True),
        ({"hostPort": 8080, "hostIP": "10.0.0.1"}, {"hostPort": 8080}, True),
        ({"hostPort": 8080}, {"hostPort": 8080, "hostIP": "10.0.0.1"}, True),
        ({"hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"},
         {"hostPort": 53, "protocol": "UDP", "hostIP": "0.0.0.0"}, True),
        ({"hostPort": 9000, "protocol": "SCTP"}, {"hostPort": 9000, "protocol": "SCTP"}, True),
        ({"containerPort": 8080}, {"containerPort": 8080}, False),  # no hostPort: nothing on the host
    ]
    for holder, newcomer, conflict in cases:
        run = Run(config(BINPACK))
        run.add(b.node("a", gpus=8))
        run.add(_ported("first", {"containerPort": 1, **holder}))
        run.add(_ported("second", {"containerPort": 2, **newcomer}))
        assert run.node_of("first") == "a"
        assert (run.node_of("second") is None) == conflict, (holder, newcomer)


def test_restartable_sidecars_hold_ports_plain_init_containers_do_not() -> None:
    """util.GetHostPorts (v1.36): app containers and initContainers with restartPolicy Always."""
    def init(name: str, port: int, policy: str | None) -> dict[str, Any]:
        c = b.container(name, restart_policy=policy)
        c["ports"] = [{"containerPort": port, "hostPort": port}]
        return c
    run = Run(config(BINPACK))
    run.add(b.node("a", gpus=8))
    run.add(_ported("holder", {"containerPort": 1, "hostPort": 7000},
                    init=[init("setup", 7001, None), init("proxy", 7002, "Always")]))
    run.add(_ported("on-setup-port", {"containerPort": 7001, "hostPort": 7001}))
    run.add(_ported("on-proxy-port", {"containerPort": 7002, "hostPort": 7002}))
    run.add(b.pod("wants-proxy-port-in-its-sidecar", init_containers=[init("p", 7002, "Always")]))
    run.add(b.pod("plain-init-on-taken-port", init_containers=[init("p", 7000, None)]))
    assert run.node_of("holder") == "a" and run.node_of("on-setup-port") == "a"
    assert run.node_of("on-proxy-port") is None and run.node_of("wants-proxy-port-in-its-sidecar") is None
    assert run.node_of("plain-init-on-taken-port") == "a"


def test_host_network_pods_use_their_container_ports() -> None:
    """The apiserver defaults a hostNetwork pod's hostPort to its containerPort (SetDefaults_Pod);
    a replayed object may come without it."""
    run = Run(config(BINPACK))
    run.add(b.node("a", gpus=8))
    run.add(_ported("nccl-0", {"containerPort": 29500}, spec_extra={"hostNetwork": True}))
    run.add(_ported("nccl-1", {"containerPort": 29500}, spec_extra={"hostNetwork": True}))
    run.add(_ported("other-port", {"containerPort": 29501}, spec_extra={"hostNetwork": True}))
    assert run.node_of("nccl-0") == "a" and run.node_of("nccl-1") is None and run.node_of("other-port") == "a"


def test_deleting_the_holder_frees_the_port() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("a", gpus=8))
    first = _ported("first", {"containerPort": 80, "hostPort": 8080})
    run.add(first)
    run.add(_ported("second", {"containerPort": 80, "hostPort": 8080}))
    assert run.node_of("second") is None
    run.feed(b.event("DELETED", first))
    assert run.node_of("second") == "a"


def test_a_terminal_holder_frees_the_port() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("a", gpus=8))
    run.add(_ported("first", {"containerPort": 80, "hostPort": 8080}))
    run.add(_ported("second", {"containerPort": 80, "hostPort": 8080}))
    assert run.node_of("second") is None
    done = _ported("first", {"containerPort": 80, "hostPort": 8080}, node_name="a", phase="Succeeded")
    run.feed(b.event("MODIFIED", done))
    assert run.node_of("second") == "a"


def test_a_new_node_takes_the_waiting_pod() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("a", gpus=8))
    run.add(_ported("first", {"containerPort": 80, "hostPort": 8080}))
    run.add(_ported("second", {"containerPort": 80, "hostPort": 8080}))
    assert run.node_of("second") is None
    run.add(b.node("b", gpus=8))
    assert run.node_of("second") == "b"


def test_preemption_evicts_the_lower_priority_holder_of_the_port() -> None:
    """Unschedulable, not ...AndUnresolvable: the node is tried, the holder is the victim."""
    run = Run(config(BINPACK))
    run.add(b.node("a", gpus=8))
    run.add(_ported("low", {"containerPort": 80, "hostPort": 8080}, priority=1))
    run.add(_ported("high", {"containerPort": 80, "hostPort": 8080}, priority=100))
    preempting = [a for a in run.attempts if a.pod.meta.name == "high" and a.preempted]
    assert len(preempting) == 1 and preempting[0].nominated_node == "a"
    assert [p.meta.name for p in preempting[0].preempted] == ["low"]
    assert run.node_of("high") == "a"


@pytest.mark.parametrize("point", ["filter", "multiPoint"])
def test_a_profile_may_disable_it_as_upstreams(point: str) -> None:
    """The known-list item "NodePorts not disableable": a profile disabling it (by name under
    plugins.filter or plugins.multiPoint, as kube-scheduler allows) places pods whose host ports
    collide; its PreFilter alone is part of its filter here (test_filter_disable_config.py)."""
    run = Run(parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                            "profiles": [{"schedulerName": "tessera",
                                          "plugins": {point: {"disabled": [{"name": "NodePorts"}]}}}]}, "test"))
    run.add(b.node("a", gpus=8))
    run.add(_ported("first", {"containerPort": 80, "hostPort": 8080}))
    run.add(_ported("second", {"containerPort": 80, "hostPort": 8080}))
    assert run.node_of("first") == "a" and run.node_of("second") == "a"


def test_bad_ports_refuse_the_pod_with_the_field_and_the_rest_is_scheduled() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("a", gpus=8))
    bad: dict[str, dict[str, Any]] = {
        "big": {"containerPort": 80, "hostPort": 70000},
        "text": {"containerPort": 80, "hostPort": "8080"},
        "negative": {"containerPort": 80, "hostPort": -1},
        "no-container-port": {"hostPort": 8080},
        "protocol": {"containerPort": 80, "hostPort": 8080, "protocol": "ICMP"},
        "host-ip": {"containerPort": 80, "hostPort": 8080, "hostIP": 10},
    }
    run.add(*(_ported(name, port) for name, port in bad.items()))
    not_a_list = b.pod("not-a-list")
    not_a_list["spec"]["containers"][0]["ports"] = {"containerPort": 80}
    run.add(not_a_list, _ported("fine", {"containerPort": 80, "hostPort": 8080}))
    notes = "\n".join(run.notices())
    for name, field in [("big", "hostPort: Invalid value: 70000"), ("text", 'hostPort: Invalid value: "8080"'),
                        ("negative", "hostPort: Invalid value: -1"), ("no-container-port", "containerPort: Invalid value: None"),
                        ("protocol", 'protocol: Unsupported value: "ICMP"'), ("host-ip", "hostIP: expected a string")]:
        assert f"Pod default/{name}: Pod.spec.containers[0].ports[0].{field}" in notes, (name, notes)
    assert "Pod default/not-a-list: Pod.spec.containers[0].ports: expected a list" in notes
    assert run.node_of("fine") == "a"


def test_a_nominated_preemptors_host_port_is_held_on_its_node() -> None:
    """upstream's addGENominatedPods: the preemptor, nominated while its victim terminates, is on
    the node for the filters, so a lower-priority pod asking for its host port does not take it."""
    run = Run(config(BINPACK))
    run.replay._evict = lambda victims, preemptor: None  # type: ignore[method-assign]
    run.add(b.node("n0", gpus=8))
    run.add(b.pod("low", limits={"nvidia.com/gpu": 8}, priority=0))
    run.add(_ported("high", {"containerPort": 80, "hostPort": 8080}, priority=100, limits={"nvidia.com/gpu": 8}))
    assert run.last("high").nominated_node == "n0"
    run.add(_ported("other", {"containerPort": 80, "hostPort": 8080}, priority=0, limits={}))
    assert run.node_of("other") is None
    assert "1 node(s) didn't have free ports for the requested pod ports" in run.last("other").message
