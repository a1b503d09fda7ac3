"""A filter's `pod_form` says all it reads of the pod: two pods of equal form (and equal
`filter_applies`) pass it on the same nodes, so `Handle.usable_rows` may judge one for both.

Random small clusters (zones, taints, a cordon, GPUs, placed pods of two namespaces with labels,
host ports and anti-affinity) and pending pods in pairs, a pod and its twin differing in one of
its features (namespace, labels, tolerations, nodeSelector, host port, pod (anti-)affinity, spread,
requests, priority), so that pods agreeing in what one filter reads and not in the rest are common. For every filter and
every pair of pending pods of equal form, the per-node verdicts must match on every node, and
pods whose whole form (every applicable filter's) is equal must get the same usable rows.
tests/property/test_filter_form.py holds the same property over independent pods with holds, and
shows it catching each filter's form broken; this file's twins reach the one-feature differences.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from scheduler.core.framework import prepare
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b
from tests.helpers import BINPACK, config
from tests.property.test_filter_form import _term
from tests.property.test_invariants import _settings

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
NAMESPACES = ("default", "team")
APPS = ("web", "db")
PORTS = (8080, 9090)


FEATURES: dict[str, st.SearchStrategy[Any]] = {
    "namespace": st.sampled_from(NAMESPACES),
    "app": st.sampled_from(("", *APPS)),
    "tolerates": st.booleans(),
    "zone": st.sampled_from(("", "a", "b")),
    "anti": st.sampled_from(("", *APPS)),
    "affine": st.sampled_from(("", "", *APPS)),
    "spread": st.sampled_from(("", ZONE, HOSTNAME)),
    "spread_app": st.sampled_from(APPS),
    "gpu": st.sampled_from(("", "nvidia.com/gpu", "class.tessera.dev/v100", "class.tessera.dev/a100")),
    "cpu": st.integers(1, 2),
    "port": st.sampled_from((0, *PORTS)),
    "priority": st.sampled_from((0, 100)),
}


def _pending(name: str, f: dict[str, Any]) -> dict[str, Any]:
    """A pending pod of these features."""
    spec: dict[str, Any] = {}
    if f["tolerates"]:
        spec["tolerations"] = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    if f["zone"]:
        spec["nodeSelector"] = {ZONE: f["zone"]}
    affinity: dict[str, Any] = {}
    if f["anti"]:
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [_term(f["anti"], HOSTNAME)]}
    if f["affine"]:
        affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [_term(f["affine"], ZONE)]}
    if affinity:
        spec["affinity"] = affinity
    if f["spread"]:
        spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": f["spread"], "whenUnsatisfiable": "DoNotSchedule",
                                              "labelSelector": {"matchLabels": {"app": f["spread_app"]}}}]
    limits = {"cpu": str(f["cpu"]), **({f["gpu"]: 1} if f["gpu"] else {})}
    main: dict[str, Any] = {"name": "main", "resources": {"requests": {"cpu": limits["cpu"]}, "limits": limits}}
    if f["port"]:
        main["ports"] = [{"containerPort": 80, "hostPort": f["port"], "protocol": "TCP"}]
    return b.pod(name, namespace=f["namespace"], labels={"app": f["app"]} if f["app"] else {},
                 priority=f["priority"], containers=[main], spec_extra=spec)


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The cluster's objects (nodes, devices, placed pods) and the pending pods, apart."""
    objects: list[dict[str, Any]] = [b.resource_class("v100", {"model": "V100"}), b.resource_class("a100", {"model": "A100"})]
    names = [f"n{i}" for i in range(draw(st.integers(2, 4)))]
    for name in names:
        gpus = draw(st.integers(0, 2))
        taints = [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}] if draw(st.booleans()) else []
        objects.append(b.node(name, cpu=str(draw(st.integers(2, 4))), memory="8Gi", gpus=gpus, pods=draw(st.integers(2, 5)),
                              labels={ZONE: draw(st.sampled_from(["a", "b"]))}, taints=taints,
                              unschedulable=draw(st.integers(0, 5)) == 0))
        objects += [b.device(name, i, model=draw(st.sampled_from(["V100", "A100"]))) for i in range(gpus)]
    def port(host: int) -> dict[str, Any]:
        return {"name": "main", "resources": {"requests": {"cpu": "1"}},
                "ports": [{"containerPort": 80, "hostPort": host, "protocol": "TCP"}]}

    for i in range(draw(st.integers(0, 6))):
        spec: dict[str, Any] = {}
        if draw(st.booleans()):  # of its own namespace, or of all (namespaceSelector {})
            term = _term(draw(st.sampled_from(APPS)), draw(st.sampled_from([HOSTNAME, ZONE])))
            if draw(st.booleans()):
                term["namespaceSelector"] = {}
            spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        objects.append(b.pod(f"r{i}", namespace=draw(st.sampled_from(NAMESPACES)), scheduler="other",
                             node_name=draw(st.sampled_from(names)), phase="Running",
                             labels={"app": draw(st.sampled_from(APPS))}, spec_extra=spec,
                             containers=[port(draw(st.sampled_from(PORTS)))] if draw(st.booleans()) else None,
                             requests={"cpu": "1"}))
    pending: list[dict[str, Any]] = []
    for i in range(draw(st.integers(1, 4))):  # pods and their twins, each differing in one thing
        features = {key: draw(values) for key, values in FEATURES.items()}
        pending.append(_pending(f"p{i}", features))
        changed = draw(st.sampled_from(sorted(FEATURES)))
        pending.append(_pending(f"t{i}", {**features, changed: draw(FEATURES[changed])}))
    return objects, pending


def _anti_affine(name: str, namespace: str, node: str, every_namespace: bool) -> dict[str, Any]:
    term = _term("web", HOSTNAME)
    if every_namespace:
        term["namespaceSelector"] = {}
    return b.pod(name, namespace=namespace, scheduler="other", node_name=node, phase="Running", labels={"app": "db"},
                 spec_extra={"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}})


# twins without terms of two namespaces, both repelled by a placed pod's anti-affinity of every
# namespace (on n1), one of them by one of its own namespace's too (on n0): InterPodAffinity reads the namespace
NAMESPACE_TWINS = ([b.node("n0"), b.node("n1"), _anti_affine("r0", "default", "n0", False),
                    _anti_affine("r1", "team", "n1", True)],
                   [b.pod("p0", labels={"app": "web"}), b.pod("t0", namespace="team", labels={"app": "web"})])


@_settings(200)
@given(clusters())
@example(NAMESPACE_TWINS)
def test_pods_of_equal_form_pass_each_filter_on_the_same_nodes(cluster: tuple[list[dict[str, Any]], list[dict[str, Any]]]) -> None:
    objects, pending = cluster
    sched = Scheduler(config(BINPACK))
    for obj in (*objects, *pending):
        sched.apply("ADDED", obj, 0.0)  # no cycle runs: the pending pods stay pending
    state = sched.state
    runtime = sched.profiles["tessera"]
    pods = [state.pod_by_key(f"{p['metadata']['namespace']}/{p['metadata']['name']}") for p in pending]
    contexts = [prepare(pod, state.classes) for pod in pods if pod is not None]
    infos = [info for info in state.nodes.values() if info.node is not None]
    for plugin in runtime.filters:
        for one, other in combinations(contexts, 2):
            if plugin.filter_applies(one) != plugin.filter_applies(other) or not plugin.filter_applies(one):
                continue
            if plugin.pod_form(one) != plugin.pod_form(other):
                continue
            for info in infos:
                assert (plugin.filter(one, info) is None) == (plugin.filter(other, info) is None), (
                    f"{plugin.name}: {one.pod.key} and {other.pod.key} are of one form "
                    f"({plugin.pod_form(one)!r}) but not alike on {info.name}")

    def form(ctx: Any) -> tuple[Any, ...]:
        return tuple((p.name, p.pod_form(ctx)) for p in runtime.filters if p.filter_applies(ctx))

    for one, other in combinations(contexts, 2):
        if form(one) == form(other):
            assert runtime.usable_rows([one]).tolist() == runtime.usable_rows([other]).tolist()
