"""Fuzzing of single objects and of the two parsers everything else rests on.

- `parse_quantity` raises only QuantityError, never hangs, agrees with an independent computation
  on the upstream grammar, and accepts nothing outside it;
- `decode_devices` raises only AnnotationError and returns only well-formed assignments that
  survive an encode/decode round trip;
- odd Pods, Nodes, ExtendedResources, ResourceClasses, PodGroups and bound pods with corrupt
  `tessera.dev/*` annotations, fed through `Replay` (see harness.py for the checks);
- every object is either taken into the cache or reported by a Notice; a deliberately broken field
  is named in the Notice (or in the class's Valid message / the pod's attempt message).

Findings of this suite have their own tests at the end (`test_F*`), each with the minimal example.
"""

from __future__ import annotations

import copy
import re
import time
from fractions import Fraction
from typing import Any, Callable

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from scheduler.api.quantity import QuantityError, parse_quantity
from scheduler.core import annotations as ann
from scheduler.core.objects import GANG_MIN_LABEL, GANG_NAME_LABEL, gang_key, podgroup_api
from scheduler.core.state import ClusterState
from scheduler.sim import builders as b
from scheduler.sim.replay import WatchEvent
from tests.fuzz import strategies as S
from tests.fuzz.harness import CONFIGS, Harness, configs, foreign_pods
from tests.fuzz.tally import tried

# --- quantities ------------------------------------------------------------------------------

_UPSTREAM = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?")
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def _expected(sign: str, whole: str, frac: str, suffix: str) -> Fraction:
    """The value of a quantity computed digit by digit, without Fraction's own parser."""
    digits = int((whole or "0") + frac) if (whole or frac) else 0
    value = Fraction(digits, 10 ** len(frac))
    if suffix in _BINARY:
        value *= _BINARY[suffix]
    elif suffix[:1] in ("e", "E") and len(suffix) > 1:
        value *= Fraction(10) ** int(suffix[1:])
    else:
        value *= Fraction(10) ** _DECIMAL[suffix]
    return -value if sign == "-" else value


@S.fuzz_settings(300)
@example(value="1e309")
@example(value="9" * 64)
@example(value="1" + "0" * 60 + "Ei")
@given(value=S.quantity_values | S.json_values | st.text(max_size=80))
def test_parse_quantity_raises_only_quantity_error_and_never_hangs(value: Any) -> None:
    tried()
    started = time.perf_counter()
    try:
        result = parse_quantity(value)
    except QuantityError as err:
        assert str(err)
    else:
        assert isinstance(result, Fraction)
    assert time.perf_counter() - started < 0.5


@S.fuzz_settings(300)
@example(sign="", whole="1", dot=".", frac="5", suffix="Gi")  # 1.5Gi == 1.5 * 2**30
@example(sign="", whole="", dot=".", frac="5", suffix="m")
@example(sign="-", whole="2", dot="", frac="", suffix="e-3")
@given(sign=st.sampled_from(("", "+", "-")), whole=st.from_regex(r"\A[0-9]{0,12}\Z", fullmatch=True),
       dot=st.sampled_from(("", ".")), frac=st.from_regex(r"\A[0-9]{0,9}\Z", fullmatch=True),
       suffix=st.sampled_from(tuple(_BINARY) + tuple(_DECIMAL)) | st.integers(-60, 60).map(lambda e: f"e{e}"))
def test_parse_quantity_known_good_values(sign: str, whole: str, dot: str, frac: str, suffix: str) -> None:
    tried()
    if not whole and not (dot and frac):
        return
    frac = frac if dot else ""
    text = f"{sign}{whole}{dot}{frac}{suffix}"
    assert parse_quantity(text) == _expected(sign, whole, frac, suffix), text
    if text == "1.5Gi":
        assert parse_quantity(text) == Fraction(3, 2) * 2**30


@S.fuzz_settings(300)
@example(value="1_000")
@example(value="0x10")
@given(value=(S.quantity_text | st.text(alphabet="0123456789.+-eEKMGTPiunmk \t", max_size=8)).filter(str.isascii))
def test_parse_quantity_accepts_only_the_upstream_grammar(value: str) -> None:
    """What parses is in Kubernetes' quantity grammar (non-ASCII digits: see F8)."""
    tried()
    try:
        parse_quantity(value)
    except QuantityError:
        return
    assert _UPSTREAM.fullmatch(value.strip()), f"accepted {value!r}, which Kubernetes rejects"


# --- the device annotation decoder ---------------------------------------------------------------


@S.fuzz_settings(400)
@example(raw='{"version": 1, "containers": {"main": {"r": [{"id": "a", "device": "d", "amount": "1e999"}]}}}')
@example(raw='{"version": 1, "containers": {"main": {"r": [{"id": "a", "device": "d", "amount": [1]}]}}}')
@given(raw=S.device_annotations | st.text(max_size=60))
def test_decode_devices_raises_only_annotation_error(raw: str) -> None:
    tried()
    try:
        assignment = ann.decode_devices(raw)
    except ann.AnnotationError as err:
        assert str(err)
        return
    for container, by_resource in assignment.items():
        assert isinstance(container, str)
        for resource, grants in by_resource.items():
            assert isinstance(resource, str) and grants
            for grant in grants:
                assert isinstance(grant.device_id, str) and grant.device_id
                assert isinstance(grant.device, str) and grant.device
                amount = grant.amount
                assert amount is None or (isinstance(amount, (int, Fraction)) and not isinstance(amount, bool)
                                          and amount > 0)
    # What the scheduler writes for a decoded assignment decodes to the same devices, and amounts
    # are never rounded down (the ledger after a restart must hold at least what was assumed).
    again = ann.decode_devices(ann.encode_devices(assignment))
    assert again.keys() == assignment.keys()
    for container, by_resource in assignment.items():
        assert again[container].keys() == by_resource.keys()
        for resource, grants in by_resource.items():
            for old, new in zip(grants, again[container][resource], strict=True):
                assert (old.device_id, old.device, old.resource_name) == (new.device_id, new.device, new.resource_name)
                assert (old.amount is None) == (new.amount is None)
                assert old.amount is None or (new.amount is not None and new.amount >= old.amount)


# --- odd objects through the replay driver --------------------------------------------------------


def _stream(h: Harness, objects: list[Any], types: list[str]) -> None:
    for obj, event_type in zip(objects, types):
        h.send(event_type, obj)


_types = st.lists(st.sampled_from(("ADDED", "ADDED", "MODIFIED", "DELETED")), min_size=12, max_size=12)
_ADDED = ["ADDED"] * 12
_ADDED_MODIFIED = ["ADDED", "MODIFIED"] + ["ADDED"] * 10


def _invalid_later(obj: dict[str, Any], path: str, value: Any) -> list[dict[str, Any]]:
    """[obj, a later version of obj with `path` set to `value`] (F3: the later one does not parse)."""
    later = copy.deepcopy(obj)
    target: Any = later
    keys = path.split("/")
    for key in keys[:-1]:
        target = target.setdefault(key, {})
    target[keys[-1]] = value
    return [obj, later]


_F3_POD = _invalid_later(b.pod("p0", node_name="n0", phase="Running", requests={"cpu": "1"}),
                         "metadata/labels", {GANG_NAME_LABEL: "g0", GANG_MIN_LABEL: "x"})
_F3_NODE = _invalid_later(b.node("n0"), "status/allocatable/memory", "1e999")
_F3_GROUP = _invalid_later(b.podgroup("g0", 2), "spec/minMember", 0)
_F5_CLASS = b.resource_class("c0", resource_name="nvidia.com/gpu", match_labels={"model": "none"})


@S.fuzz_settings(60)
@S.known_example("F3", config="binpack", foreign=[], objects=_F3_POD, more_nodes=[], types=_ADDED_MODIFIED)
@given(config=configs, foreign=foreign_pods(), objects=st.lists(S.pods(), max_size=8), more_nodes=st.lists(S.nodes(), max_size=3),
       types=_types)
def test_odd_pods(config: str, foreign: list[Any], objects: list[Any], more_nodes: list[Any], types: list[str]) -> None:
    tried()
    h = Harness(CONFIGS[config])
    h.base_cluster()
    for f in foreign:
        h.add_foreign(f)
    h.add(*more_nodes)
    _stream(h, objects, types)
    h.finish()


@S.fuzz_settings(60)
@S.known_example("F3", config="binpack", objects=_F3_NODE, pods=[], types=_ADDED_MODIFIED)
@given(config=configs, objects=st.lists(S.nodes(), max_size=6), pods=st.lists(S.pods(), max_size=4), types=_types)
def test_odd_nodes(config: str, objects: list[Any], pods: list[Any], types: list[str]) -> None:
    tried()
    h = Harness(CONFIGS[config])
    h.base_cluster()
    _stream(h, objects, types)
    h.add(*pods)
    h.finish()


@S.fuzz_settings(50)
@S.known_example("F5", config="binpack", nodes=[], devices=[], classes=[_F5_CLASS], pods=[], types=_ADDED)
@given(config=configs, nodes=st.lists(S.nodes(), max_size=3), devices=st.lists(S.devices(), max_size=6),
       classes=st.lists(S.resource_classes(), max_size=3), pods=st.lists(S.pods(), max_size=5), types=_types)
def test_odd_devices_and_classes(config: str, nodes: list[Any], devices: list[Any], classes: list[Any],
                                 pods: list[Any], types: list[str]) -> None:
    tried()
    h = Harness(CONFIGS[config])
    h.base_cluster()
    h.add(*nodes)
    _stream(h, devices, types)
    _stream(h, classes, types[::-1])
    h.add(*pods)
    h.finish()


_gang_pod_labels = st.fixed_dictionaries({
    GANG_NAME_LABEL: st.sampled_from(S.GROUP_POOL),
    GANG_MIN_LABEL: st.sampled_from(("1", "2", "3", "0", "-1", "99999999999", "abc", "1.5", "")),
})


@st.composite
def _gang_members(draw: st.DrawFn) -> list[dict[str, Any]]:
    out = []
    for i in range(draw(st.integers(1, 5))):
        form = draw(st.sampled_from(("labels", "podgroup", "both", "workload")))
        labels: dict[str, str] = {}
        if form in ("labels", "both"):
            labels.update(draw(_gang_pod_labels))  # min-available may differ per member
        if form in ("podgroup", "both"):
            labels["scheduling.x-k8s.io/pod-group"] = draw(st.sampled_from(S.GROUP_POOL))
        extra = {"schedulingGroup": {"podGroupName": draw(st.sampled_from(S.GROUP_POOL))}} if form == "workload" else None
        pod = b.pod(f"m{i}", namespace=draw(st.sampled_from(S.NS_POOL)), labels=labels,
                    annotations=draw(S.topology_annotations),  # the label form's topology (members may differ)
                    requests={"cpu": draw(st.sampled_from(("1", "2", "3500m")))},
                    limits={"nvidia.com/gpu": draw(st.integers(0, 2))} if draw(st.booleans()) else None,
                    spec_extra=extra)
        out.append(pod)
    return out


@S.fuzz_settings(70)
@S.known_example("F3", config="binpack", groups=_F3_GROUP, members=[], others=[], types=_ADDED_MODIFIED)
@given(config=configs, groups=st.lists(S.podgroups(), max_size=4), members=_gang_members(),
       others=st.lists(S.pods(), max_size=3), types=_types)
def test_odd_podgroups_and_gangs(config: str, groups: list[Any], members: list[Any], others: list[Any],
                                 types: list[str]) -> None:
    """minMember 0/-1/huge/non-int, label, PodGroup and Workload API forms mixed (one name in both
    APIs, topology constraints on levels, absent keys and keys that are not levels, under a
    topology configuration too), min-available differing per member: no crash; every gang is placed all-or-nothing (checked per attempt by the harness) and every
    waiting member has a message (its last attempt's, or why it is gated)."""
    tried()
    h = Harness(CONFIGS[config])
    h.base_cluster()
    _stream(h, groups, types)
    h.add(*members, *others)
    state = h.state
    gated = h.replay.scheduler.gated()  # Workload API members still gathering: never attempted
    for member in members:
        uid = member["metadata"]["uid"]
        if uid in state.pending:
            key = state.pods[uid].key
            last = h.replay.stats.final.get(key)
            assert (last is not None and last.message) or gated.get(key), member["metadata"]["name"]
    h.finish()


@st.composite
def _bound_pods_with_annotations(draw: st.DrawFn) -> list[dict[str, Any]]:
    pods = []
    for i in range(draw(st.integers(1, 5))):
        annotations = {ann.DEVICES: draw(S.device_annotations)}
        if draw(st.booleans()):
            annotations[ann.PHASE] = draw(st.sampled_from((ann.PHASE_ALLOCATING, ann.PHASE_ALLOCATED, "x")))
        pods.append(b.pod(f"b{i}", node_name=draw(st.sampled_from(S.NODE_POOL)), phase="Running",
                          limits={"class.tessera.dev/c0": draw(st.integers(0, 2))}, annotations=annotations))
    return pods


@S.fuzz_settings(100)
@example(config="binpack", bound=[b.pod("b0", node_name="n0", phase="Running", annotations={
    ann.DEVICES: '{"version": 1, "containers": {"main": {"class.tessera.dev/c0": ['
                 '{"id": "GPU-0", "device": "n0.gpu-0"}, {"id": "GPU-0", "device": "n0.gpu-0", "amount": "8Gi"}]}}}'})])
@given(config=configs, bound=_bound_pods_with_annotations())
def test_corrupt_device_annotations_on_bound_pods(config: str, bound: list[dict[str, Any]]) -> None:
    """Random JSON, wrong versions and shapes, unknown devices, devices of other nodes, negative or
    huge amounts, exclusive and shared grants of one device: undecodable ones take their node out of
    device scheduling with a BrokenDeviceAnnotation notice; decodable ones are charged, conflicts
    are reported, and no new pod is ever given a device someone holds."""
    tried()
    h = Harness(CONFIGS[config])
    h.base_cluster()
    h.add(b.node("n0", gpus=2), b.node("n1", gpus=2),
          b.resource_class("c0", match_labels={"vendor": "nvidia"}, resource_name="class.tessera.dev/c0"),
          b.resource_class("c1", match_labels={"vendor": "nvidia"}, resource_name="example.com/shared",
                           sharing={"dimension": "memory", "unit": "8Gi"}))
    for node in ("n0", "n1"):
        for i in range(2):
            device = b.device(node, i)
            device["metadata"]["name"] = f"{node}.gpu-{i}"
            h.add(device)
    for pod in bound:
        notices = h.send("ADDED", pod)
        raw = pod["metadata"]["annotations"][ann.DEVICES]
        try:
            ann.decode_devices(raw)
        except ann.AnnotationError:
            assert any(n.reason == "BrokenDeviceAnnotation" and ann.DEVICES in n.message for n in notices), notices
            assert h.state.nodes[pod["spec"]["nodeName"]].broken
    h.add(b.pod("new-exclusive", limits={"class.tessera.dev/c0": 1}), b.pod("new-shared", limits={"example.com/shared": 1}))
    h.finish()


# --- accepted or reported ------------------------------------------------------------------------


def _reflected(state: ClusterState, obj: dict[str, Any]) -> bool:
    meta = obj["metadata"]
    name, namespace = meta.get("name"), meta.get("namespace") or ""
    kind = obj["kind"]
    if kind == "Pod":
        pod = state.pods.get(meta.get("uid") or f"Pod/{namespace}/{name}")
        return pod is not None and pod.meta.name == name
    if kind == "Node":
        info = state.nodes.get(name)
        return info is not None and info.node is not None
    if kind == "ExtendedResource":
        return name in state.devices
    if kind == "ResourceClass":
        return name in state.classes.classes
    if kind == "PodGroup":
        return gang_key(namespace, str(name), podgroup_api(obj)) in state.gangs.podgroups
    return False


@S.fuzz_settings(200)
@S.known_example("F10", config="binpack", obj={"kind": "Pod", "metadata": {"name": "p0", "namespace": "default"},
                                             "spec": {"schedulerName": "tessera", "containers": []}})
@given(config=configs, obj=S.cluster_objects)
def test_every_object_is_taken_or_reported(config: str, obj: dict[str, Any]) -> None:
    """No silent drops: an object is in the cache afterwards, or a Notice says why not; an invalid
    class is reported; a pending pod of ours has an attempt with a message."""
    tried()
    h = Harness(CONFIGS[config])
    h.base_cluster()
    notices = h.send("ADDED", obj)
    if not isinstance(obj.get("metadata"), dict) or obj.get("kind") not in (
            "Pod", "Node", "ExtendedResource", "ResourceClass", "PodGroup"):
        assert notices, obj
    elif not notices:
        assert _reflected(h.state, obj), f"{obj.get('kind')} neither cached nor reported"
    if obj.get("kind") == "ResourceClass" and isinstance(obj.get("metadata"), dict):
        name = obj["metadata"].get("name")
        if isinstance(name, str) and h.state.classes.error_of(name):
            assert any(n.reason == "InvalidResourceClass" and name in n.message for n in notices), notices
    for uid in h.state.pending:
        pod = h.state.pods[uid]
        last = h.replay.stats.final.get(pod.key)
        assert last is not None and last.message, pod.key
    h.finish()


# --- a deliberately broken field is named ---------------------------------------------------------

_BAD_QUANTITIES = st.one_of(
    st.sampled_from(("lots", "1.5.2", "", "1e309", "-1", "1KiMi", "0x10", "1GB", "--1", "9" * 40, "-0.5Gi",
                     "inf", "NaN", "1e61")),
    st.sampled_from(([1], {"a": 1}, True, None, float("nan"), float("inf"), -3, 2**70)),
    st.text(max_size=8).filter(lambda t: not _UPSTREAM.fullmatch(t.strip())),
)
_NOT_A_MAPPING = st.one_of(st.integers(), st.text(max_size=5), st.lists(st.integers(), max_size=2), st.booleans(),
                           st.floats())
_NOT_A_LIST = st.one_of(st.integers(), st.text(min_size=1, max_size=5), st.dictionaries(st.text(max_size=3), st.integers(),
                                                                                          min_size=1, max_size=2),
                        st.booleans())
_NOT_A_STRING = st.one_of(st.integers(), st.lists(st.integers(), max_size=2), st.booleans(), st.floats(),
                          st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
_NON_STRING_MAP = st.dictionaries(st.sampled_from(("a", "model")), _NOT_A_STRING, min_size=1, max_size=2)
_NOT_INT = st.one_of(st.text(max_size=4), st.floats(), st.lists(st.integers(), max_size=1))  # booleans: see F11
_TRUTHY_NOT_A_STRING = st.one_of(st.integers(min_value=1), st.lists(st.integers(), min_size=1, max_size=2), st.just(True),
                                 st.floats(min_value=0.5, max_value=1e9),
                                 st.dictionaries(st.text(max_size=3), st.integers(), min_size=1, max_size=2))
_TRUTHY_NOT_A_MAPPING = st.one_of(st.integers(min_value=1), st.text(min_size=1, max_size=5), st.just(True),
                                  st.lists(st.integers(), min_size=1, max_size=2), st.floats(min_value=0.5, max_value=1e9))

Mutation = tuple[str, Callable[[dict[str, Any], Any], None], st.SearchStrategy[Any], str]


def _set(path: str) -> Callable[[dict[str, Any], Any], None]:
    keys: list[Any] = [int(k) if k.isdigit() else k for k in path.split("/")]

    def apply(obj: dict[str, Any], value: Any) -> None:
        target: Any = obj
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value

    return apply


def _expr(op_values: Callable[[Any], dict[str, Any]]) -> Callable[[dict[str, Any], Any], None]:
    def apply(obj: dict[str, Any], value: Any) -> None:
        expression = {"key": "zone", **op_values(value)}
        obj["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [expression]}]}}}
    return apply


_TERMS = "nodeSelectorTerms[0].matchExpressions[0]"
POD_MUTATIONS: list[Mutation] = [
    ("metadata", _set("metadata"), _NOT_A_MAPPING, "Pod.metadata"),
    ("name", _set("metadata/name"), _NOT_A_STRING | st.just(""), "Pod.metadata.name"),
    ("namespace", _set("metadata/namespace"), _NOT_A_STRING, "Pod.metadata.namespace"),
    ("uid", _set("metadata/uid"), _NOT_A_STRING.filter(lambda v: v is not None), "Pod.metadata.uid"),
    ("labels", _set("metadata/labels"), _NOT_A_MAPPING | _NON_STRING_MAP, "Pod.metadata.labels"),
    ("annotations", _set("metadata/annotations"), _NOT_A_MAPPING | _NON_STRING_MAP, "Pod.metadata.annotations"),
    ("creationTimestamp", _set("metadata/creationTimestamp"), _NOT_A_STRING, "creationTimestamp"),
    ("spec", _set("spec"), _NOT_A_MAPPING, "Pod.spec"),
    ("containers", _set("spec/containers"), _NOT_A_LIST, "Pod.spec.containers"),
    ("container", _set("spec/containers/0"), _NOT_A_MAPPING, "Pod.spec.containers[0]"),
    ("container name", _set("spec/containers/0/name"), _NOT_A_STRING, "Pod.spec.containers[0].name"),
    ("cpu request", _set("spec/containers/0/resources/requests/cpu"), _BAD_QUANTITIES,
     "Pod.spec.containers[0].resources.requests[cpu]"),
    ("gpu limit", _set("spec/containers/0/resources/limits/nvidia.com~gpu"), _BAD_QUANTITIES,
     "Pod.spec.containers[0].resources.limits[nvidia.com/gpu]"),
    ("init container", _set("spec/initContainers"),
     _BAD_QUANTITIES.map(lambda q: [{"name": "init", "resources": {"requests": {"memory": q}}}]),
     "Pod.spec.initContainers[0].resources.requests[memory]"),
    ("overhead", _set("spec/overhead"), _BAD_QUANTITIES.map(lambda q: {"cpu": q}), "Pod.spec.overhead[cpu]"),
    ("affinity", _set("spec/affinity"), _NOT_A_MAPPING, "Pod.spec.affinity"),
    ("operator", _expr(lambda op: {"operator": op, "values": ["a"]}),
     st.sampled_from(("in", "Bogus", "", "EXISTS")) | _NOT_A_STRING, f"{_TERMS}.operator"),
    ("Gt values", _expr(lambda values: {"operator": "Gt", "values": values}),
     st.sampled_from(([], ["1", "2"], ["1", "2", "3"])), f"{_TERMS}.values"),
    ("weight", _set("spec/affinity"), (st.integers().filter(lambda w: not 1 <= w <= 100) | _NOT_INT).map(
        lambda w: {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": w, "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}}]}}),
     "preferredDuringSchedulingIgnoredDuringExecution[0].weight"),
    ("tolerations", _set("spec/tolerations"), _NOT_A_LIST, "Pod.spec.tolerations"),
    ("toleration key", _set("spec/tolerations"), _NOT_A_STRING.map(lambda k: [{"key": k, "operator": "Exists"}]),
     "Pod.spec.tolerations[0].key"),
    ("priority", _set("spec/priority"), _NOT_INT | st.none() | st.just(True), "Pod.spec.priority"),
    ("schedulerName", _set("spec/schedulerName"), _NOT_A_STRING, "Pod.spec.schedulerName"),
    ("nodeName", _set("spec/nodeName"), _NOT_A_STRING, "Pod.spec.nodeName"),
    ("status", _set("status"), _NOT_A_MAPPING, "Pod.status"),
    ("phase", _set("status/phase"), _NOT_A_STRING, "Pod.status.phase"),
    ("min-available", _set("metadata/labels"),
     st.sampled_from(("abc", "1.5", "", " x", "2e", "0x2")).map(lambda m: {GANG_NAME_LABEL: "g0", GANG_MIN_LABEL: m}),
     GANG_MIN_LABEL),
    ("nodeSelector", _set("spec/nodeSelector"), _NON_STRING_MAP, "Pod.spec.nodeSelector"),
    ("schedulingGates", _set("spec/schedulingGates"), _NOT_A_LIST, "Pod.spec.schedulingGates"),
]
NODE_MUTATIONS: list[Mutation] = [
    ("allocatable", _set("status/allocatable/cpu"), _BAD_QUANTITIES, "Node.status.allocatable[cpu]"),
    ("negative", _set("status/allocatable/nvidia.com~gpu"), st.sampled_from(("-1", "-1Gi", "-0.001", -2)),
     "Node.status.allocatable[nvidia.com/gpu]"),
    ("status", _set("status"), _NOT_A_MAPPING, "Node.status"),
    ("taints", _set("spec/taints"), _NOT_A_LIST, "Node.spec.taints"),
    ("effect", _set("spec/taints"), (st.sampled_from(("Bogus", "", "noschedule", "NoScheduleX")) | _NOT_A_STRING).map(
        lambda e: [{"key": "k", "effect": e}]), "Node.spec.taints[0].effect"),
    ("name", _set("metadata/name"), _NOT_A_STRING | st.just(""), "Node.metadata.name"),
    ("labels", _set("metadata/labels"), _NON_STRING_MAP, "Node.metadata.labels"),
]
DEVICE_MUTATIONS: list[Mutation] = [
    ("nodeName", _set("spec/nodeName"), _NOT_A_STRING | st.just(""), "ExtendedResource.spec.nodeName"),
    ("capacity", _set("spec/capacity/memory"),  # negative and huge capacities are valid quantities here
     _BAD_QUANTITIES.filter(lambda q: q not in ("-1", "-0.5Gi", -3, 2**70, "9" * 40)),
     "ExtendedResource.spec.capacity[memory]"),
    ("attributes", _set("spec/attributes"), _NON_STRING_MAP | _NOT_A_MAPPING, "ExtendedResource.spec.attributes"),
    ("conditions", _set("status/conditions"), _NOT_A_LIST, "ExtendedResource.status.conditions"),
    ("condition", _set("status/conditions/0"), _NOT_A_MAPPING, "ExtendedResource.status.conditions[0]"),
    ("resourceName", _set("spec/resourceName"), _NOT_A_STRING, "ExtendedResource.spec.resourceName"),
    ("metadata", _set("metadata"), _NOT_A_MAPPING, "ExtendedResource.metadata"),
]


def _class_expression(expression: Any) -> Callable[[dict[str, Any], Any], None]:
    def apply(obj: dict[str, Any], value: Any) -> None:
        obj["spec"]["selector"] = {"matchExpressions": [expression(value)]}
    return apply


_EXPR = "spec.selector.matchExpressions[0]"
CLASS_MUTATIONS: list[Mutation] = [
    ("operator", _class_expression(lambda op: {"key": "model", "operator": op, "values": ["V100"]}),
     st.sampled_from(("in", "Bogus", "", "EXISTS", "Equals")) | _NOT_A_STRING, f"{_EXPR}.operator"),
    ("Gt values", _class_expression(lambda values: {"key": "memory", "operator": "Gt", "values": values}),
     st.sampled_from(([], ["1Gi", "2Gi"], ["1", "2", "3"])), f"{_EXPR}.values"),
    ("Gt quantity", _class_expression(lambda value: {"key": "memory", "operator": "Lt", "values": [value]}),
     st.sampled_from(("16GB", "x", "1e309", "", "1.5.2", "16 Gi", "0x10")), f"{_EXPR}.values[0]"),
    ("values type", _class_expression(lambda values: {"key": "model", "operator": "In", "values": values}),
     st.lists(_NOT_A_STRING, min_size=1, max_size=2) | st.dictionaries(st.text(max_size=2), st.integers(), min_size=1)
     | st.integers(1), f"{_EXPR}.values"),
    ("key", _class_expression(lambda key: {"key": key, "operator": "Exists"}), _NOT_A_STRING | st.just(""),
     f"{_EXPR}.key"),
    ("In without values", _class_expression(lambda op: {"key": "model", "operator": op}), st.sampled_from(("In", "NotIn")),
     f"{_EXPR}.values"),
    ("Exists with values", _class_expression(lambda op: {"key": "model", "operator": op, "values": ["x"]}),
     st.sampled_from(("Exists", "DoesNotExist")), f"{_EXPR}.values"),
    ("matchLabels", _set("spec/selector"), _TRUTHY_NOT_A_MAPPING.map(lambda v: {"matchLabels": v}),
     "spec.selector.matchLabels"),
    ("matchExpressions", _set("spec/selector"), _TRUTHY_NOT_A_MAPPING.filter(lambda v: not isinstance(v, list)).map(
        lambda v: {"matchExpressions": v}),
     "spec.selector.matchExpressions"),
    ("selector", _set("spec/selector"), _NOT_A_MAPPING, "spec.selector"),
    ("resourceName", _set("spec/resourceName"),
     st.sampled_from(("nvidia.tesla.k80", "kubernetes.io/gpu", "a.kubernetes.io/gpu", "k8s.io/x", "foo.k8s.io/y",
                      "Example.com/gpu", "example.com/", "/gpu", "example.com/-x", "example.com/" + "x" * 64,
                      "exa mple.com/x")) | _TRUTHY_NOT_A_STRING, "spec.resourceName"),
    ("sharing unit", _set("spec/sharing"),  # huge units are valid quantities
     (_BAD_QUANTITIES.filter(lambda q: q not in (2**70, "9" * 40)) | st.sampled_from(
        ("0", "-1Gi", "0m"))).map(lambda u: {"dimension": "memory", "unit": u}), "spec.sharing.unit"),
    ("sharing", _set("spec/sharing"), _NOT_A_MAPPING, "spec.sharing"),
    ("sharing dimension", _set("spec/sharing"), (_NOT_A_STRING | st.just("")).map(
        lambda d: {"dimension": d, "unit": "1Gi"}), "spec.sharing.dimension"),
]
# matchLabels values that are not strings: see F7.
PODGROUP_MUTATIONS: list[Mutation] = [
    ("minMember", _set("spec/minMember"), st.sampled_from(("2", 2.5, True, None, [2])),
     "PodGroup.spec.minMember"),
    ("timeout", _set("spec/scheduleTimeoutSeconds"), st.sampled_from((-1, "10", 1.5, [1], -(2**40))),
     "PodGroup.spec.scheduleTimeoutSeconds"),
    ("name", _set("metadata/name"), _NOT_A_STRING | st.just(""), "PodGroup.metadata.name"),
    ("spec", _set("spec"), _NOT_A_MAPPING, "PodGroup.spec"),
]


def _base(kind: str) -> dict[str, Any]:
    if kind == "Pod":
        pod = b.pod("target", requests={"cpu": "1"}, limits={"nvidia.com/gpu": 1},
                    spec_extra={"tolerations": [{"key": "gpu", "operator": "Exists"}]})
        pod["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com~gpu": "1"}  # "~" stands for "/" in paths
        return pod
    if kind == "Node":
        node = b.node("n0", gpus=2)
        node["status"]["allocatable"]["nvidia.com~gpu"] = node["status"]["allocatable"].pop("nvidia.com/gpu")
        return node
    if kind == "ExtendedResource":
        return b.device("n0", 0)
    if kind == "ResourceClass":
        return b.resource_class("target", match_labels={"model": "V100"})
    return b.podgroup("g0", 2)


def _tilde(value: Any) -> Any:
    """Undo the "~" path escape in keys after mutating."""
    if isinstance(value, dict):
        return {(k.replace("~", "/") if isinstance(k, str) else k): _tilde(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_tilde(v) for v in value]
    return value


def _named(kind: str, mutations: list[Mutation], reason: str) -> Callable[..., None]:
    @S.fuzz_settings(150)
    @given(data=st.data(), config=configs)
    def check(data: st.DataObject, config: str) -> None:
        tried()
        label, mutate, values, fragment = data.draw(st.sampled_from(mutations), label="mutation")
        obj = _base(kind)
        mutate(obj, data.draw(values, label=label))
        obj = _tilde(obj)
        h = Harness(CONFIGS[config])
        h.base_cluster()
        notices = h.send("ADDED", copy.deepcopy(obj))
        assert any(n.reason == reason and fragment in n.message for n in notices), \
            f"{kind} with a bad {label}: no {reason} notice naming {fragment!r}; got {[n.message[:200] for n in notices]}"
        h.finish()
    return check


test_a_bad_pod_field_is_named = _named("Pod", POD_MUTATIONS, "InvalidObject")
test_a_bad_node_field_is_named = _named("Node", NODE_MUTATIONS, "InvalidObject")
test_a_bad_device_field_is_named = _named("ExtendedResource", DEVICE_MUTATIONS, "InvalidObject")
test_a_bad_class_field_is_named = _named("ResourceClass", CLASS_MUTATIONS, "InvalidResourceClass")
test_a_bad_podgroup_field_is_named = _named("PodGroup", PODGROUP_MUTATIONS, "InvalidObject")


@S.fuzz_settings(100)
@given(config=configs, resource_name=st.sampled_from(("example.com/gpu", "class.tessera.dev/x", "a.b/c")),
       created=st.lists(st.sampled_from(("2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z", "")), min_size=2, max_size=3))
def test_clashing_resource_names_are_reported(config: str, resource_name: str, created: list[str]) -> None:
    """Two or more classes with one resourceName: the oldest keeps it, each other gets a notice, and
    a pod asking for the name gets a device of the owner or a message (never a crash)."""
    tried()
    h = Harness(CONFIGS[config])
    h.base_cluster()
    h.add(b.node("n0", gpus=2), b.device("n0", 0), b.device("n0", 1))
    notices = []
    for i, stamp in enumerate(created):
        notices += h.send("ADDED", b.resource_class(f"k{i}", match_labels={"model": "V100"}, resource_name=resource_name,
                                                    created=stamp))
    losers = [name for name in h.state.classes.classes if h.state.classes.error_of(name)]
    assert len(losers) == len(created) - 1
    for name in losers:
        assert any(n.reason == "InvalidResourceClass" and name in n.message and "Duplicate value" in n.message
                   for n in notices), (name, [n.message for n in notices])
    h.add(b.pod("asks", limits={resource_name: 1}))
    assert h.state.node_of(h.state.by_key["default/asks"]) == "n0"
    h.finish()


# --- findings: one test per bug, with its minimal example ----------------------------------------


@S.fuzz_settings(50)
@example(obj=[1])
@example(obj=None)
@given(obj=S.json_values.filter(lambda v: not isinstance(v, dict)))
def test_F1_apply_with_a_non_object_reports_instead_of_raising(obj: Any) -> None:
    """F1: `Scheduler.apply` reads `obj.get("kind")` before `ClusterState.apply` checks the type."""
    tried()
    h = Harness()
    notices = h.replay.scheduler.apply("ADDED", obj, 0.0)
    assert [n.reason for n in notices] == ["InvalidEvent"]
    assert list(h.replay.run([WatchEvent("ADDED", obj)])) == []


@S.fuzz_settings(50)
@example(label="x", cpu=4000, gpus=1)
@given(label=st.text(max_size=4).filter(lambda t: not t.strip().lstrip("+-").isdigit()),
       cpu=st.integers(1, 4000), gpus=st.integers(1, 2))
def test_F2_a_bound_pod_tessera_cannot_parse_still_counts(label: str, cpu: int, gpus: int) -> None:
    """F2: an apiserver-valid pod bound by another scheduler whose gang label min-available is not an
    integer fails Tessera's parsing and is dropped, so its cpu and GPUs are handed out again."""
    tried()
    h = Harness()
    h.add(b.node("n", cpu="4", gpus=2))
    h.add(b.pod("other", scheduler="default-scheduler", node_name="n", phase="Running",
                requests={"cpu": f"{cpu}m"}, limits={"nvidia.com/gpu": gpus},
                labels={GANG_NAME_LABEL: "job", GANG_MIN_LABEL: label}))
    h.add(b.pod("mine", requests={"cpu": f"{4000 - cpu + 1}m"}, limits={"nvidia.com/gpu": 3 - gpus}))
    assert h.state.node_of(h.state.by_key["default/mine"]) is None, \
        "Tessera placed a pod on capacity a running pod already holds"


@S.fuzz_settings(50)
@example(kind="Pod")
@example(kind="ExtendedResource")
@given(kind=st.sampled_from(("Pod", "ExtendedResource", "Node", "PodGroup")))
def test_F3_deleting_an_object_whose_last_version_is_invalid_removes_it(kind: str) -> None:
    """F3: a DELETED event is parsed like an ADDED one, so when the object's last version does not
    parse (a label edited to min-available "x", a capacity edited to "1e999"), the deletion is
    dropped: the pod's resources stay held forever, a deleted device stays schedulable (and is
    handed out), a deleted node keeps receiving pods."""
    tried()
    h = Harness()
    h.add(b.node("n", cpu="4", gpus=1))
    if kind == "Pod":
        obj = b.pod("p", requests={"cpu": "4"}, node_name="n", phase="Running")
        broken = copy.deepcopy(obj)
        broken["metadata"]["labels"] = {GANG_NAME_LABEL: "g", GANG_MIN_LABEL: "x"}
    elif kind == "ExtendedResource":
        h.add(b.resource_class("v", match_labels={"model": "V100"}))
        obj = b.device("n", 0)
        broken = copy.deepcopy(obj)
        broken["spec"]["capacity"]["memory"] = "1e999"
    elif kind == "Node":
        obj = b.node("gone", gpus=1)
        broken = copy.deepcopy(obj)
        broken["status"]["allocatable"]["memory"] = "1e999"
    else:
        obj = b.podgroup("pg", 2)
        broken = copy.deepcopy(obj)
        broken["spec"]["minMember"] = "two"
    h.add(obj)
    h.send("MODIFIED", broken)
    h.send("DELETED", broken)
    state = h.state
    assert not state.placements and not state.pods, "pod still holds its node after deletion"
    assert not state.devices, "a deleted device is still in the cache"
    assert state.node_order == ["n"], "a deleted node is still schedulable"
    assert not state.gangs.podgroups, "a deleted PodGroup is still in the cache"


@S.fuzz_settings(30)
@example(resource="nvidia.com/gpu")
@given(resource=st.sampled_from(("nvidia.com/gpu", "example.com/fpga")))
def test_F5_a_class_cannot_silently_capture_a_plain_device_plugin_resource(resource: str) -> None:
    """F5: a ResourceClass whose resourceName is a node-advertised device-plugin resource (accepted by
    the CRD) turns every plain `nvidia.com/gpu: 1` request in the cluster into a class request; with
    no matching ExtendedResources such pods fail with "Insufficient nvidia.com/gpu" on idle nodes,
    and nothing reports the class."""
    tried()
    h = Harness()
    h.add(b.node("n", gpus=2, extra={"example.com/fpga": "2"}))
    notices = h.add(b.resource_class("capture", resource_name=resource, match_labels={"model": "none"}))
    h.add(b.pod("plain", limits={resource: 1}))
    placed = h.state.node_of(h.state.by_key["default/plain"]) == "n"
    assert placed or any(n.reason == "InvalidResourceClass" for n in notices), \
        f"plain {resource} pod refused ({h.replay.stats.final['default/plain'].message}) and the class is not reported"


_F6_SHAPES = {
    "conditions-string": ("status", {"conditions": "x"}),
    "conditions-ints": ("status", {"conditions": [5]}),
    "conditions-map": ("status", {"conditions": {"a": 1}}),
    "status-null": ("status", None),
    "annotations-null": ("metadata", {"name": "p", "namespace": "default", "uid": "u-p", "annotations": None}),
    "rejected-update": ("spec", "not a pod spec"),  # sent as a later MODIFIED the core rejects
}


@S.fuzz_settings(50)
@example(shape="conditions-string")
@example(shape="annotations-null")
@example(shape="status-null")
@example(shape="rejected-update")
@given(shape=st.sampled_from(sorted(_F6_SHAPES)))
def test_F6_replay_binding_write_back_survives_odd_pod_shapes(shape: str) -> None:
    """F6: Replay._bind writes the Binding back into the latest raw pod assuming apiserver shapes:
    `status.conditions` a list of objects, `status`/`metadata.annotations` objects when present — and it uses the latest raw object even when the core rejected it. The core accepts the
    null/odd shapes (null means absent; it never reads conditions) and keeps the previous version of
    a rejected update, so once such a pod is scheduled `Replay.run` — and `tessera simulate` — dies
    with AttributeError or TypeError."""
    tried()
    h = Harness()
    pod = b.pod("p", requests={"cpu": "1"})
    key, value = _F6_SHAPES[shape]
    if shape == "rejected-update":
        h.send("ADDED", pod)  # pending: no node yet
        h.send("MODIFIED", {**pod, key: value})  # InvalidObject; the cache keeps the first version
        h.add(b.node("n"))
    else:
        h.add(b.node("n"))
        pod[key] = value
        h.send("ADDED", pod)
    uid = h.state.by_key["default/p"]
    assert h.state.node_of(uid) == "n"


@S.fuzz_settings(50)
@example(labels={"model": 5})
@given(labels=_NON_STRING_MAP)
def test_F7_match_labels_with_non_string_values_make_the_class_invalid(labels: dict[str, Any]) -> None:
    """F7: `matchLabels: {model: 5}` is str()-ed into `model In ["5"]` (and None into "None") instead of
    making the class invalid like a non-string value in matchExpressions does."""
    tried()
    h = Harness()
    notices = h.add(b.resource_class("c", match_labels=labels))
    assert any(n.reason == "InvalidResourceClass" and "matchLabels" in n.message for n in notices), \
        [n.message for n in notices]


@S.fuzz_settings(50)
@example(plain=1, devices=2)
@given(plain=st.integers(1, 2), devices=st.integers(1, 2))
def test_F9_plain_and_class_requests_for_one_device_resource_do_not_overcommit(plain: int, devices: int) -> None:
    """F9: a pod asking for `nvidia.com/gpu: 1` plus 2 devices of a class whose devices are
    `nvidia.com/gpu` gets 3 GPUs on a 2-GPU node: Fit checks the plain request against the node's
    use before the devices, and the device plan checks its devices without the pod's own plain
    request."""
    tried()
    h = Harness()
    h.add(b.node("n", gpus=2), b.device("n", 0), b.device("n", 1), b.resource_class("v", match_labels={"model": "V100"}))
    h.add(b.pod("both", limits={"nvidia.com/gpu": plain, "class.tessera.dev/v": devices}))
    info = h.state.nodes["n"]
    assert info.used("nvidia.com/gpu") <= 2, f"{info.used('nvidia.com/gpu')} GPUs in use on a 2-GPU node"


@S.fuzz_settings(30)
@example(value="\u0663")  # ARABIC-INDIC DIGIT THREE
@example(value="\uff11\uff16Gi")  # FULLWIDTH "16"
@given(value=st.text(alphabet="\u0663\u0661\uff19\u0966", min_size=1, max_size=3))
def test_F8_quantities_with_non_ascii_digits_are_refused(value: str) -> None:
    """F8: the quantity regex uses `\\d` and `Fraction()`, both Unicode-aware, so "\u0663" parses as 3
    and "\uff11\uff16Gi" as 16Gi; Kubernetes' grammar is `[0-9]` only. Harmless for apiserver-validated
    fields, but free-form device attributes compared with Gt/Lt go through the same parser."""
    tried()
    with pytest.raises(QuantityError):
        parse_quantity(value)


@S.fuzz_settings(30)
@example(uid=None)
@example(uid="")
@given(uid=st.sampled_from((None, "")))
def test_F10_a_pod_without_uid_is_scheduled_or_reported(uid: Any) -> None:
    """F10: `ClusterState` caches a pod without metadata.uid under "Pod/<ns>/<name>" and adds it to
    `pending`, but `Scheduler._sync_queue` looks the pod up by the raw metadata.uid, finds nothing and
    never queues it: the pod stays pending forever with no attempt and no message. (The apiserver
    always sets uid; hand-written or trimmed `simulate` input does not.)"""
    tried()
    h = Harness()
    h.add(b.node("n"))
    pod = b.pod("p", requests={"cpu": "1"})
    if uid is None:
        del pod["metadata"]["uid"]
    else:
        pod["metadata"]["uid"] = uid
    notices = h.send("ADDED", pod)
    placed = any(a.pod.key == "default/p" and a.node for a in h.attempts)
    assert placed or notices, "pod without uid: neither scheduled nor reported"


@S.fuzz_settings(30)
@example(kind="weight")
@example(kind="timeout")
@given(kind=st.sampled_from(("weight", "timeout")))
def test_F11_booleans_are_not_integers(kind: str) -> None:
    """F11: `isinstance(True, int)` holds in Python, so a preferred node-affinity term with
    `weight: true` is taken as weight 1 and a PodGroup with `scheduleTimeoutSeconds: true` as 1 s;
    the apiserver (and Pod.spec.priority here) refuse booleans."""
    tried()
    h = Harness()
    if kind == "weight":
        obj = b.pod("p", spec_extra={"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": True, "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}}]}}})
    else:
        obj = b.podgroup("pg", 2)
        obj["spec"]["scheduleTimeoutSeconds"] = True
    notices = h.send("ADDED", obj)
    assert any(n.reason == "InvalidObject" for n in notices), "a boolean was accepted as an integer"


@S.fuzz_settings(30)
@example(memory="4Ei", count=2, config="binpack")
@given(memory=st.sampled_from(S.HUGE_VALID_QUANTITIES), count=st.integers(2, 3), config=configs)
def test_F12_huge_bound_requests_do_not_overflow_the_node_vectors(memory: str, count: int, config: str) -> None:
    """F12: each quantity is capped at 2**62, but a node's total is not; two pods bound (by someone
    else) with `memory: 4Ei` make the node's used memory 2**63, and `NodeVectors._fill_row` raises
    OverflowError when it writes that into its int64 array — out of `schedule_next`, for every pod
    tried while that node is in the cluster. The per-node path (Python ints) has no such limit."""
    tried()
    h = Harness(CONFIGS[config])
    h.add(b.node("n", memory="4Ei"), b.node("m"))
    for i in range(count):
        h.add(b.pod(f"f{i}", scheduler="default-scheduler", node_name="n", phase="Running", requests={"memory": memory}))
    h.add(b.pod("mine", requests={"memory": "1Gi"}))
    assert h.state.node_of(h.state.by_key["default/mine"]) == "m"
