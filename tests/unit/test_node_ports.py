"""NodePorts' rule, the pod parser's host ports and the queueing hint (kube-scheduler v1.36:
framework HostPortInfo.CheckConflict, util.GetHostPorts, nodeports isSchedulableAfterPodDeleted)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.core.objects import HostPort, ObjectError, parse_pod
from scheduler.core.plugins.node_ports import conflicts, fits
from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, config


def _port(port: int, ip: str = "0.0.0.0", protocol: str = "TCP") -> HostPort:
    return HostPort(ip, protocol, port)


@pytest.mark.parametrize(("want", "used", "conflict"), [
    (_port(80), [_port(80)], True),
    (_port(80), [_port(81)], False),
    (_port(80), [_port(80, protocol="UDP")], False),
    (_port(80, "10.0.0.1"), [_port(80)], True),  # 0.0.0.0 in use takes every address
    (_port(80), [_port(80, "10.0.0.1")], True),  # 0.0.0.0 wanted needs every address free
    (_port(80, "10.0.0.1"), [_port(80, "10.0.0.2")], False),
    (_port(80, "10.0.0.1"), [_port(80, "10.0.0.1")], True),
    (_port(80, "::1"), [_port(80, "::")], False),  # only 0.0.0.0 is special (DefaultBindAllHostIP)
])
def test_check_conflict(want: HostPort, used: list[HostPort], conflict: bool) -> None:
    assert conflicts(want, used) is conflict
    assert fits([want], used) is not conflict


def _parsed(containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None,
            **spec: Any) -> tuple[HostPort, ...]:
    return parse_pod(b.pod("p", containers=containers, init_containers=init, spec_extra=spec)).host_ports


def _with_ports(name: str, *ports: dict[str, Any], policy: str | None = None) -> dict[str, Any]:
    container = b.container(name, restart_policy=policy)
    container["ports"] = list(ports)
    return container


def test_the_parser_reads_host_ports_sanitized() -> None:
    assert _parsed([_with_ports("a", {"containerPort": 80}, {"containerPort": 81, "hostPort": 8081},
                                {"containerPort": 82, "hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"})]) == (
        HostPort("0.0.0.0", "TCP", 8081), HostPort("10.0.0.1", "UDP", 53))
    assert parse_pod(b.pod("none")).host_ports == ()


def test_sidecars_count_plain_init_containers_do_not() -> None:
    assert _parsed([_with_ports("app", {"containerPort": 1, "hostPort": 1})],
                   init=[_with_ports("setup", {"containerPort": 2, "hostPort": 2}),
                         _with_ports("proxy", {"containerPort": 3, "hostPort": 3}, policy="Always")]) == (
        HostPort("0.0.0.0", "TCP", 3), HostPort("0.0.0.0", "TCP", 1))  # GetHostPorts: sidecars first


def test_host_network_defaults_host_port_to_container_port() -> None:
    ports = _parsed([_with_ports("a", {"containerPort": 29500}, {"containerPort": 80, "hostPort": 80})],
                    init=[_with_ports("s", {"containerPort": 7000}, policy="Always")], hostNetwork=True)
    assert ports == (HostPort("0.0.0.0", "TCP", 7000), HostPort("0.0.0.0", "TCP", 29500),
                     HostPort("0.0.0.0", "TCP", 80))
    with pytest.raises(ObjectError, match=r"Pod\.spec\.hostNetwork: expected a boolean"):
        _parsed([b.container()], hostNetwork="yes")


@pytest.mark.parametrize(("port", "message"), [
    ({"containerPort": 80, "hostPort": 65536}, r"\.hostPort: Invalid value: 65536: must be between 1 and 65535"),
    ({"containerPort": 80, "hostPort": True}, r"\.hostPort: Invalid value: True"),
    ({"containerPort": 0}, r"\.containerPort: Invalid value: 0"),
    ({"containerPort": 80.5}, r"\.containerPort: Invalid value: 80\.5"),
    ({"containerPort": 80, "protocol": "tcp"}, r'\.protocol: Unsupported value: "tcp": supported values: "TCP", "UDP", "SCTP"'),
    ({"containerPort": 80, "hostIP": ["a"]}, r"\.hostIP: expected a string, got list"),
    ("80", r": expected an object, got str"),
])
def test_bad_ports_are_refused_with_the_field(port: Any, message: str) -> None:
    with pytest.raises(ObjectError, match=r"Pod\.spec\.containers\[0\]\.ports\[0\]" + message):
        _parsed([_with_ports("a", port)])


def test_a_bad_port_of_a_plain_init_container_refuses_the_pod_too() -> None:
    """Its ports take nothing on the node, but the apiserver validates them all the same."""
    with pytest.raises(ObjectError, match=r"Pod\.spec\.initContainers\[0\]\.ports\[0\]\.hostPort"):
        _parsed([b.container()], init=[_with_ports("setup", {"containerPort": 80, "hostPort": -5})])


def _tries(run: Run, name: str) -> int:
    return sum(1 for a in run.attempts if a.pod.meta.name == name)


def test_a_removed_pod_requeues_only_when_it_frees_the_ports() -> None:
    """isSchedulableAfterPodDeleted: a pod gone without a port in common is no reason to retry."""
    run = Run(config(BINPACK))
    run.add(b.node("a", gpus=8), b.node("b", gpus=8, cpu="1"))
    holder = b.pod("holder", containers=[_with_ports("m", {"containerPort": 80, "hostPort": 8080})],
                   spec_extra={"nodeSelector": {"kubernetes.io/hostname": "a"}})
    other_port = b.pod("other-port", containers=[_with_ports("m", {"containerPort": 80, "hostPort": 9000})],
                       spec_extra={"nodeSelector": {"kubernetes.io/hostname": "a"}})
    plain = b.pod("plain", spec_extra={"nodeSelector": {"kubernetes.io/hostname": "a"}})
    run.add(holder, other_port, plain)
    waiting = b.pod("waiting", containers=[_with_ports("m", {"containerPort": 80, "hostPort": 8080})],
                    spec_extra={"nodeSelector": {"kubernetes.io/hostname": "a"}})
    run.add(waiting)
    assert run.node_of("waiting") is None and _tries(run, "waiting") == 1
    run.feed(b.event("DELETED", plain), b.event("DELETED", other_port))
    assert _tries(run, "waiting") == 1  # QueueSkip: neither held 8080
    run.feed(b.event("DELETED", holder))
    assert _tries(run, "waiting") == 2 and run.node_of("waiting") == "a"


def test_configz_lists_it_in_upstreams_filter_order() -> None:
    from scheduler.api.config_effective import configz
    shown = configz(config(BINPACK))["componentconfig"]["configuration"]["profiles"][0]
    plugins = shown["plugins"]
    assert plugins.index("NodeAffinity") + 1 == plugins.index("NodePorts") < plugins.index("NodeResourcesFit")
    assert "NodePorts" not in shown["disabledFilters"] and "NodePorts" not in shown["scoreWeights"]


def test_a_removal_the_hint_cannot_place_always_requeues() -> None:
    """The event names no node (a nominated pod's hold dropped) or one gone since: the hint cannot
    tell which ports were freed, so it requeues (upstream's hint errs on the side of a retry)."""
    from scheduler.core.plugins.node_ports import NodePorts
    from scheduler.core.state import ClusterEvent, EventKind

    run = Run(config(BINPACK))
    run.add(b.node("a", gpus=8))
    run.add(b.pod("holder", containers=[_with_ports("m", {"containerPort": 80, "hostPort": 8080})]))
    run.add(b.pod("waiting", containers=[_with_ports("m", {"containerPort": 80, "hostPort": 8080})]))
    assert run.node_of("holder") == "a" and run.node_of("waiting") is None
    hint = NodePorts(type("H", (), {"state": run.state})()).queueing_hints()[
        EventKind.ASSIGNED_POD_REMOVED]
    uid = b.uid_for("Pod", "default", "waiting")
    assert not hint(uid, ClusterEvent(EventKind.ASSIGNED_POD_REMOVED, node="a"))  # 8080 still taken there
    assert hint(uid, ClusterEvent(EventKind.ASSIGNED_POD_REMOVED, node=""))
    assert hint(uid, ClusterEvent(EventKind.ASSIGNED_POD_REMOVED, node="gone"))


def test_each_wanted_port_is_checked_against_every_port_in_use() -> None:
    """fitsPorts: a pod wanting several ports is refused when any one is taken, not only its first
    (the ports in use are read once, for every wanted port)."""
    run = Run(config(BINPACK))
    run.add(b.node("a", gpus=8))
    run.add(b.pod("holder", containers=[_with_ports("m", {"containerPort": 90, "hostPort": 9090})]))
    run.add(b.pod("both", containers=[_with_ports("m", {"containerPort": 80, "hostPort": 8080},
                                                  {"containerPort": 90, "hostPort": 9090})]))
    assert run.node_of("holder") == "a" and run.node_of("both") is None
    assert "didn't have free ports" in run.last("both").message
