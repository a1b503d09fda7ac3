"""Property: what a filter says it reads of a pod (`FilterPlugin.pod_form`) is all its verdicts read.

A gang's room check asks the filters once per distinct form of its members
(`Handle.usable_rows`, `ProfileRuntime.applicable_form`), so a plugin whose form leaves out something its filter reads lets
one member's rows stand for another's (a rack the gang fits in refused, c760db3). On random
nodes (zones, racks, taints, cordons, GPUs) carrying random running or nominated pods (labels,
namespaces, required anti-affinity, host ports), random pending pods drawn from small pools (anti-affinity
terms of other or all namespaces, affinity to themselves, spread constraints with inclusion
policies, minDomains or matchLabelKeys), so that their
forms often coincide while their labels, annotations and names differ: two pods of equal
forms have equal `usable_rows`, and two pods a plugin gives equal forms (both applying)
get that plugin's verdict alike on every node."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any
from unittest import mock

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from scheduler.core.framework.cycle_state import PodContext, prepare
from scheduler.core.framework.interface import FilterPlugin
from scheduler.core.objects import parse_pod
from scheduler.core.plugins.devices import TesseraDevices
from scheduler.core.plugins.fit import NodeResourcesFit
from scheduler.core.plugins.interpod_affinity import InterPodAffinity
from scheduler.core.plugins.node_affinity import NodeAffinity
from scheduler.core.plugins.node_ports import NodePorts
from scheduler.core.plugins.node_unschedulable import NodeUnschedulable
from scheduler.core.plugins.pod_topology_spread import PodTopologySpread, signature
from scheduler.core.plugins.taints import TaintToleration
from scheduler.core.plugins.volume_binding import VolumeBinding
from scheduler.core.pod_terms import PodTerm
from scheduler.core.state.nodes import Placement
from scheduler.sim import builders as b
from tests.helpers import Run, config

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
RACK = "example.com/rack"
INDEX = "batch.kubernetes.io/job-completion-index"
CONFIG = config()  # parsed once: a profile per example would be most of the time
GPU_CLASS = "class.tessera.dev/gpu"
DEDICATED = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


def _term(app: str, key: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}


nodes = st.lists(st.fixed_dictionaries({
    "zone": st.sampled_from(["z1", "z2", "z2", None]), "rack": st.sampled_from(["r1", "r2"]),
    "tainted": st.booleans(), "cordoned": st.booleans(), "gpus": st.sampled_from([0, 2, 4]),
    "devices": st.integers(0, 2)}), min_size=1, max_size=4)
running = st.lists(st.fixed_dictionaries({
    "node": st.integers(0, 3), "app": st.sampled_from(["x", "y"]), "namespace": st.sampled_from(["default", "default", "other"]),
    "anti": st.sampled_from([None, "x", "y"]), "port": st.booleans(), "gpus": st.sampled_from([0, 1, 2]),
    "nominated": st.sampled_from([False, False, True])}), min_size=1, max_size=4)
FIELDS = {"namespace": st.sampled_from(["default", "other"]), "app": st.sampled_from(["x", "y", None]),
          "selector": st.booleans(), "rack": st.booleans(), "tolerate": st.sampled_from([None, "dedicated", "cordon"]),
          "gpus": st.sampled_from([0, 1, 2]), "port": st.sampled_from([None, 8080, 8081]),
          "anti": st.sampled_from([None, "x"]), "affinity": st.sampled_from([None, "y"]),
          "spread": st.sampled_from([None, "x"]), "klass": st.integers(0, 2),
          "policy": st.sampled_from([None, "Honor-taints", "Ignore-affinity", "minDomains", "app", INDEX]),
          "anti_namespaces": st.sampled_from([None, "other", "all"]), "self_affinity": st.booleans()}
# VolumeBinding's claims, bound in each namespace to a volume of its own (`_storage`): the same
# claim name reads another volume in the other namespace. A pod's claim follows its host port
# (`CLAIMS`) rather than a field of its own: a new field would change every search's examples
VOLUMES = {("default", "local"): (ZONE, "z1"), ("other", "local"): (ZONE, "z2"),
           ("default", "racked"): (RACK, "r1"), ("other", "racked"): (RACK, "r2")}


@st.composite
def pending(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Pods of one template, each with its own app label (as an indexed Job's members have their
    own index) and up to two more fields drawn anew: near twins, whose forms coincide often, and
    differ where a form may leave something out."""
    template = draw(st.fixed_dictionaries(FIELDS))
    pods = []
    for _ in range(draw(st.integers(2, 8))):
        pod = dict(template)
        for key in ["app", *draw(st.lists(st.sampled_from(sorted(FIELDS)), max_size=2))]:
            pod[key] = draw(FIELDS[key])
        pods.append(pod)
    return pods


def _pending(i: int, p: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    affinity: dict[str, Any] = {}
    if p["selector"]:
        spec["nodeSelector"] = {ZONE: "z1"}
    if p["rack"]:
        affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": RACK, "operator": "In", "values": ["r1"]}]}]}}
    if p["anti"]:
        anti = _term(p["anti"], HOST)
        if p["anti_namespaces"] == "other":
            anti["namespaces"] = ["other"]
        elif p["anti_namespaces"] == "all":
            anti["namespaceSelector"] = {}
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [anti]}
    affine = ([_term(p["affinity"], ZONE)] if p["affinity"] else []) + ([_term("x", RACK)] if p["self_affinity"] else [])
    if affine:
        affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": affine}
    if affinity:
        spec["affinity"] = affinity
    if p["tolerate"] == "dedicated":
        spec["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    elif p["tolerate"] == "cordon":
        spec["tolerations"] = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]
    if p["spread"]:
        spread: dict[str, Any] = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                                  "labelSelector": {"matchLabels": {"app": p["spread"]}}}
        policy = p["policy"]
        if policy in ("Honor-taints", "Ignore-affinity"):
            field, value = ("nodeTaintsPolicy", "Honor") if policy == "Honor-taints" else ("nodeAffinityPolicy", "Ignore")
            spread[field] = value
        elif policy == "minDomains":
            spread["minDomains"] = 3
        elif policy:
            spread["matchLabelKeys"] = [policy]
        spec["topologySpreadConstraints"] = [spread]
    requests = {"cpu": "1", **({"nvidia.com/gpu": p["gpus"]} if p["gpus"] else {}), **({GPU_CLASS: p["klass"]} if p["klass"] else {})}
    containers = [{"name": "c", "resources": {"requests": requests, "limits": {k: v for k, v in requests.items() if k != "cpu"}},
                   **({"ports": [{"containerPort": 80, "hostPort": p["port"]}]} if p["port"] else {})}]
    if claim := CLAIMS.get(p["port"]):
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    labels = {INDEX: str(i), **({"app": p["app"]} if p["app"] else {})}
    return b.pod(f"p{i}", namespace=p["namespace"], labels=labels, annotations={INDEX: str(i)},
                 containers=containers, spec_extra=spec)


CLAIMS = {8080: "local", 8081: "racked"}


def _storage() -> list[dict[str, Any]]:
    """The claims `VOLUMES` names, bound, with their volumes."""
    objects: list[dict[str, Any]] = []
    for (namespace, claim), (key, value) in VOLUMES.items():
        volume = f"pv-{namespace}-{claim}"
        objects.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                        "metadata": {"name": claim, "namespace": namespace, "uid": f"pvc-{namespace}-{claim}",
                                     "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
                        "spec": {"volumeName": volume}})
        objects.append({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": volume, "uid": volume},
                        "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [
                            {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}]}}}})
    return objects


def _cluster(node_specs: list[dict[str, Any]], running_specs: list[dict[str, Any]]) -> Run:
    run = Run(CONFIG)
    objects = []
    for i, n in enumerate(node_specs):
        labels = {RACK: n["rack"], **({ZONE: n["zone"]} if n["zone"] else {})}
        objects.append(b.node(f"n{i}", gpus=n["gpus"], labels=labels, taints=[DEDICATED] if n["tainted"] else None,
                              unschedulable=n["cordoned"]))
        objects += [b.device(f"n{i}", k) for k in range(n["devices"])]
    objects.append(b.resource_class("gpu", match_labels={"model": "V100"}))
    objects += _storage()
    nominated = []
    for i, r in enumerate(running_specs):
        spec: dict[str, Any] = {}
        if r["anti"]:
            spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term(r["anti"], HOST)]}}
        containers = [{"name": "c", "resources": {"requests": {"cpu": "1", **({"nvidia.com/gpu": r["gpus"]} if r["gpus"] else {})}},
                       **({"ports": [{"containerPort": 80, "hostPort": 8080}]} if r["port"] else {})}]
        node = f"n{r['node'] % len(node_specs)}"
        if r["nominated"]:  # a preemptor of another scheduler's, holding room on its node
            nominated.append((f"{r['namespace']}/e{i}", node))
        objects.append(b.pod(f"e{i}", namespace=r["namespace"], labels={"app": r["app"]}, containers=containers,
                             node_name="" if r["nominated"] else node, phase="Pending" if r["nominated"] else "Running",
                             scheduler="default-scheduler", spec_extra=spec))
    run.add(*objects)
    uids = {pod.key: uid for uid, pod in run.state.pods.items()}
    for key, node in nominated:
        run.state.hold(uids[key], Placement(node, {}, 0, 0, (), False, False), 0)
    return run


def _check(node_specs: list[dict[str, Any]], running_specs: list[dict[str, Any]], pending_specs: list[dict[str, Any]]) -> None:
    run = _cluster(node_specs, running_specs)
    state = run.state
    runtime = run.scheduler._engine.profiles["tessera"]
    infos = [info for info in state.nodes.values() if info.node is not None]
    seen: dict[Any, tuple[str, list[bool]]] = {}
    own: dict[tuple[str, Any], tuple[str, list[Any]]] = {}
    for i, spec in enumerate(pending_specs):
        pod = parse_pod(_pending(i, spec))
        ctx = prepare(pod, state.classes)
        rows = runtime.usable_rows([ctx])[: runtime.table.size].tolist()
        first = seen.setdefault(runtime.applicable_form(ctx)[1], (pod.key, rows))
        assert first[1] == rows, f"{pod.key} and {first[0]}: equal filter forms, rows {rows} and {first[1]}"
        for plugin in runtime.filters:
            if plugin.filter_applies(prepare(pod, state.classes)):
                verdicts = [plugin.filter(prepare(pod, state.classes), info) for info in infos]
                first_plugin = own.setdefault((plugin.name, plugin.pod_form(prepare(pod, state.classes))), (pod.key, verdicts))
                assert first_plugin[1] == verdicts, \
                    f"{plugin.name}: {pod.key} and {first_plugin[0]} of equal forms, verdicts {verdicts} and {first_plugin[1]}"


@settings(max_examples=150, deadline=None, database=None, derandomize=True)
@given(node_specs=nodes, running_specs=running, pending_specs=pending())
def test_pods_of_equal_forms_get_equal_usable_rows(node_specs: list[dict[str, Any]],
                                                   running_specs: list[dict[str, Any]],
                                                   pending_specs: list[dict[str, Any]]) -> None:
    _check(node_specs, running_specs, pending_specs)


def _matching(terms: Iterable[PodTerm], ctx: PodContext) -> frozenset[PodTerm]:
    return frozenset(t for t in terms if t.matches(ctx.pod.meta.namespace, ctx.pod.meta.labels))


BROKEN: dict[str, tuple[type[FilterPlugin], Callable[[Any, PodContext], Hashable]]] = {
    # each plugin's form less one thing its filter reads
    "InterPodAffinity-labels": (InterPodAffinity, lambda self, ctx: (ctx.pod.meta.namespace, ctx.pod.affinity,
                                                                      ctx.pod.anti_affinity)),
    "InterPodAffinity-nominated": (InterPodAffinity, lambda self, ctx: (
        ctx.pod.meta.namespace, ctx.pod.affinity, ctx.pod.anti_affinity,
        all(t.matches(ctx.pod.meta.namespace, ctx.pod.meta.labels) for t in ctx.pod.affinity),
        _matching(self._placed_anti_terms(), ctx))),
    "InterPodAffinity-own-match": (InterPodAffinity, lambda self, ctx: (
        ctx.pod.meta.namespace, ctx.pod.affinity, ctx.pod.anti_affinity,
        _matching((*self._placed_anti_terms(), *(t for uid in self.handle.state.holds
                                                 for t in self.handle.state.pods[uid].anti_affinity)), ctx))),
    "InterPodAffinity-namespaces": (InterPodAffinity, lambda self, ctx: (
        ctx.pod.meta.namespace, tuple((t.selector, t.topology_key) for t in ctx.pod.affinity),
        tuple((t.selector, t.topology_key) for t in ctx.pod.anti_affinity),
        all(t.matches(ctx.pod.meta.namespace, ctx.pod.meta.labels) for t in ctx.pod.affinity),
        _matching((*self._placed_anti_terms(), *(t for uid in self.handle.state.holds
                                                 for t in self.handle.state.pods[uid].anti_affinity)), ctx))),
    "PodTopologySpread": (PodTopologySpread, lambda self, ctx: signature(ctx.pod, ctx.pod.spread)),
    "NodeAffinity": (NodeAffinity, lambda self, ctx: ctx.pod.required_terms),
    "TaintToleration": (TaintToleration, lambda self, ctx: None),
    "NodeUnschedulable": (NodeUnschedulable, lambda self, ctx: None),
    "NodePorts": (NodePorts, lambda self, ctx: None),
    "NodeResourcesFit": (NodeResourcesFit, lambda self, ctx: ctx.empty_request),
    "TesseraDevices": (TesseraDevices, lambda self, ctx: ctx.plain),
    "VolumeBinding-claims": (VolumeBinding, lambda self, ctx: ctx.pod.meta.namespace),
    "VolumeBinding-namespace": (VolumeBinding, lambda self, ctx: tuple(ref.name for ref in ctx.pod.claims)),
}


@pytest.mark.parametrize("broken", BROKEN)
def test_a_form_leaving_out_what_its_filter_reads_is_caught(broken: str) -> None:
    """The property above is what makes the key exact: with a plugin's form leaving out one
    thing its filter reads (InterPodAffinity: which anti-affinity terms of the running or the
    nominated pods select the pod, whether it matches its own affinity terms, or the namespaces its
    terms look in), random cases
    find two pods of equal forms whose verdicts differ (searched without shrinking: the first
    found is proof enough)."""
    plugin, form = BROKEN[broken]

    @settings(max_examples=600, deadline=None, phases=[Phase.generate], database=None, derandomize=True)
    @given(node_specs=nodes, running_specs=running, pending_specs=pending())
    def search(node_specs: list[dict[str, Any]], running_specs: list[dict[str, Any]],
               pending_specs: list[dict[str, Any]]) -> None:
        _check(node_specs, running_specs, pending_specs)

    with mock.patch.object(plugin, "pod_form", form), \
            pytest.raises(AssertionError, match=f"{plugin.name}|equal filter forms"):
        search()
