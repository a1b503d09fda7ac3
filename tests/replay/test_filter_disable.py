"""A filter a profile disables does not run in that profile (placements, preemption's dry runs)
and still runs in another: for each of upstream's default filters Tessera lets a profile turn off,
a pod that filter refuses is placed under the profile that disabled it and refused under the
default one (its twin, by spec.schedulerName)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.api.config import SchedulerConfig, parse_config
from scheduler.sim import builders as b
from tests.helpers import Run

HOST = "kubernetes.io/hostname"


def _config(point: str, name: str) -> SchedulerConfig:
    return parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                         "profiles": [{"schedulerName": "loose", "plugins": {point: {"disabled": [{"name": name}]}}},
                                      {"schedulerName": "tessera"}]}, "t.yaml")


def _ported(name: str, scheduler: str, **kw: Any) -> dict[str, Any]:
    main = b.container("main", limits={"nvidia.com/gpu": 1})
    main["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    return b.pod(name, scheduler=scheduler, containers=[main], **kw)


def _anti(name: str, scheduler: str) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": HOST}
    return b.pod(name, scheduler=scheduler, labels={"app": "web"}, limits={"nvidia.com/gpu": 1},
                 spec_extra={"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}})


def _spread(name: str, scheduler: str) -> dict[str, Any]:
    constraint = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
                  "labelSelector": {"matchLabels": {"app": "web"}}}
    return b.pod(name, scheduler=scheduler, labels={"app": "web"}, limits={"nvidia.com/gpu": 1},
                 spec_extra={"topologySpreadConstraints": [constraint]})


def _selecting(name: str, scheduler: str) -> dict[str, Any]:
    return b.pod(name, scheduler=scheduler, limits={"nvidia.com/gpu": 1}, spec_extra={"nodeSelector": {"pool": "x"}})


def _plain(name: str, scheduler: str) -> dict[str, Any]:
    return b.pod(name, scheduler=scheduler, limits={"nvidia.com/gpu": 1})


TAINT = [{"key": "dedicated", "value": "a", "effect": "NoSchedule"}]
# plugin -> (the cluster, a pod maker: the filter refuses that pod everywhere in the cluster)
CASES: dict[str, tuple[list[dict[str, Any]], Any]] = {
    "NodeUnschedulable": ([b.node("a", gpus=8, unschedulable=True)], _plain),
    "TaintToleration": ([b.node("a", gpus=8, taints=TAINT)], _plain),
    "NodeAffinity": ([b.node("a", gpus=8)], _selecting),
    "NodePorts": ([b.node("a", gpus=8), _ported("holder", "tessera")], _ported),
    "InterPodAffinity": ([b.node("a", gpus=8), _anti("holder", "tessera")], _anti),
    "PodTopologySpread": ([b.node("a", gpus=8)], _spread),  # a node without the zone label
}


@pytest.mark.parametrize("point", ["filter", "multiPoint"])
@pytest.mark.parametrize("plugin", sorted(CASES))
def test_a_pod_the_disabled_filter_refuses_is_placed_only_under_that_profile(plugin: str, point: str) -> None:
    cluster, make = CASES[plugin]
    run = Run(_config(point, plugin))
    run.add(*cluster)
    run.add(make("strict", "tessera"))
    assert run.node_of("strict") is None and plugin in run.last("strict").rejectors
    run.add(make("loose", "loose"))
    assert run.node_of("loose") == "a"


def test_star_places_what_every_default_filter_refuses_but_not_two_pods_on_one_device() -> None:
    run = Run(_config("filter", "*"))
    run.add(b.node("a", gpus=1, unschedulable=True, taints=TAINT))
    run.add(b.pod("strict", scheduler="tessera", limits={"nvidia.com/gpu": 1}, spec_extra={"nodeSelector": {"pool": "x"}}))
    run.add(b.pod("first", scheduler="loose", limits={"nvidia.com/gpu": 1}, spec_extra={"nodeSelector": {"pool": "x"}}))
    run.add(b.pod("second", scheduler="loose", limits={"nvidia.com/gpu": 1}))
    assert run.node_of("strict") is None and run.node_of("first") == "a"
    assert run.node_of("second") is None and "NodeResourcesFit" in run.last("second").rejectors


@pytest.mark.parametrize(("scheduler", "victim"), [("loose", "plain"), ("tessera", "porter")])
def test_preemptions_dry_run_filters_as_the_profile_does(scheduler: str, victim: str) -> None:
    """The victims are chosen by the preemptor's profile's filters (upstream's SelectVictimsOnNode
    reprieves the highest-priority pods first, each kept if the preemptor still fits): without
    NodePorts the port holder is reprieved and the other pod goes; with it, the holder goes."""
    run = Run(_config("filter", "NodePorts"))
    run.add(b.node("a", gpus=2))
    run.add(_ported("porter", "tessera", priority=2))
    run.add(b.pod("plain", scheduler="tessera", limits={"nvidia.com/gpu": 1}, priority=1))
    assert run.node_of("porter") == "a" and run.node_of("plain") == "a"
    run.add(_ported("high", scheduler, priority=100))
    preempting = [a for a in run.attempts if a.pod.meta.name == "high" and a.preempted]
    assert [[p.meta.name for p in a.preempted] for a in preempting] == [[victim]]
