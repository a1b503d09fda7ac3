"""Hypothesis strategies for the scheduler core's property tests: random clusters and event streams.

A generated `Scenario` is a small universe (nodes, devices, resource classes, pod groups, pods —
each with one or two versions) plus a list of operations on it (`Op`). Operations are turned into
watch events *lazily* by `World`, which plays the apiserver: it keeps the current version of every
object, stamps each event with an increasing resourceVersion, and learns Tessera's Bindings as
they happen, so a later "pod finished" event carries the `spec.nodeName` and device annotations
the Binding wrote — exactly what a real watch stream would deliver (including the node agent's
`tessera.dev/phase: Allocated`, which `Replay` plays right after each Binding). Stale (older
resourceVersion) events go to the core only, never into the simulator's memory of the apiserver.

The universe is deliberately tiny (≤ 4 nodes, ≤ 8 devices, ≤ 4 classes, ≤ 10 pods) so that
random streams collide often: shared devices, name clashes between classes, full nodes, gangs
competing for the same GPUs.

`corruptions()` / `garbage_events()` damage otherwise valid events for the "nothing crashes"
property: random JSON in random places, deleted fields, wrong types, unknown kinds.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from hypothesis import strategies as st

from scheduler.core import annotations as ann
from scheduler.sim import builders as b
from tests.helpers import nested_paths

Obj = dict[str, Any]

NODE_NAMES = ("n0", "n1", "n2", "n3")
ZONES = ("a", "b")
MODELS = ("V100", "A100", "T4", "K80")
CLASS_NAMES = ("c0", "c1", "c2", "c3")
CREATED = ("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z")
DEFAULT_PREFIX = "class.tessera.dev/"
# custom resourceNames; the last one clashes with c1's default name on purpose
CUSTOM_RESOURCES = ("gpu.example.com/fast", "gpu.example.com/slice", "class.tessera.dev/c1")
MISSING_CLASS = "class.tessera.dev/missing"
GPU = "nvidia.com/gpu"
NPU = "example.com/npu"  # a second device resourceName
EXTRA = "example.com/foo"  # a plain extended resource some nodes advertise
TAINT_KEY = "dedicated"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
GANG_NAME_LABEL = "pod-group.scheduling.sigs.k8s.io/name"
GANG_MIN_LABEL = "pod-group.scheduling.sigs.k8s.io/min-available"
PODGROUP_LABEL = "scheduling.x-k8s.io/pod-group"
GATE = "example.com/gate"
CONFIGS = ("binpack", "spread", "default")
GI = 2**30

# sharing units: text -> bytes (all exact, so annotation amounts round-trip exactly)
SHARING_UNITS: dict[str, Fraction] = {
    "1Gi": Fraction(GI), "2Gi": Fraction(2 * GI), "512Mi": Fraction(GI // 2),
    "0.5Gi": Fraction(GI // 2), "1G": Fraction(10**9), "4Gi": Fraction(4 * GI),
}
DEVICE_MEMORY_GI = (8, 12, 16, 24, 32, 40, 80)
# a second sharing dimension: units of `cores` (a GPU publishes both; None: this GPU has no cores)
CORE_UNITS: dict[str, Fraction] = {"1": Fraction(1), "5": Fraction(5), "10": Fraction(10)}
DEVICE_CORES = (None, 20, 100)


def unit_amount(dimension: str, unit: str) -> Fraction:
    """One slice of a class sharing by `dimension` with `unit` (memory in bytes, cores in cores)."""
    return CORE_UNITS[unit] if dimension == "cores" else SHARING_UNITS[unit]


def quantity_bytes(text: str) -> Fraction:
    """Bytes of the quantity strings this module generates (independent of the core's parser)."""
    for suffix, mult in (("Gi", GI), ("Mi", 2**20), ("Ki", 2**10), ("G", 10**9)):
        if text.endswith(suffix):
            return Fraction(text[: -len(suffix)]) * mult
    return Fraction(text)


# --- specs -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeSpec:
    cpu_m: int
    mem_mi: int
    pods: int
    gpus: int | None  # nvidia.com/gpu allocatable; None: not advertised
    zone: str
    taint: str | None  # effect of a `dedicated=gpu` taint
    unschedulable: bool
    extra: int  # example.com/foo allocatable (0: not advertised)


@dataclass(frozen=True)
class DeviceSpec:
    node: str
    index: int
    model: str
    mem_gi: int
    resource: str
    nvlink: bool
    healthy: bool
    unschedulable: bool
    cores: int | None = None  # `cores` capacity beside the memory

    def raw(self) -> Obj:
        raw = b.device(self.node, self.index, model=self.model, memory=f"{self.mem_gi}Gi",
                       resource_name=self.resource, attributes={"nvlink": "true"} if self.nvlink else None,
                       healthy=self.healthy, unschedulable=self.unschedulable)
        if self.cores is not None:
            raw["spec"]["capacity"]["cores"] = str(self.cores)
        return raw

    def capacity(self, dimension: str) -> Fraction:
        if dimension == "memory":
            return Fraction(self.mem_gi * GI)
        return Fraction(self.cores or 0) if dimension == "cores" else Fraction(0)

    @functools.cached_property
    def name(self) -> str:
        return str(self.raw()["metadata"]["name"])

    @functools.cached_property
    def device_id(self) -> str:
        return str(self.raw()["spec"]["deviceID"])


@dataclass(frozen=True)
class ClassVariant:
    selector: tuple[tuple[str, Any], ...]  # ("model", M) ("in", Ms) ("notin", Ms) ("gt", q) ("lt", q) ("nvlink", bool)
    sharing: str | None  # unit text; None: exclusive
    resource: str | None  # custom resourceName; None: class.tessera.dev/<name>
    dimension: str = "memory"  # sharing.dimension (memory units: SHARING_UNITS, cores: CORE_UNITS)


@dataclass(frozen=True)
class ClassSpec:
    name: str
    created: str
    variants: tuple[ClassVariant, ...]


@dataclass(frozen=True)
class PodGroupSpec:
    name: str
    mins: tuple[int, ...]


@dataclass(frozen=True)
class ContainerSpec:
    cpu_m: int
    mem_mi: int
    cpu_in_limits: bool
    gpu: int
    extra: int
    klass: str | None  # class resource name requested in limits
    count: int


@dataclass(frozen=True)
class PodSpec:
    name: str
    namespace: str
    scheduler: str
    containers: tuple[ContainerSpec, ...]
    inits: tuple[tuple[ContainerSpec, bool], ...]  # (container, is sidecar)
    overhead_m: int
    zone: str | None  # nodeSelector zone
    affinity_zone: str | None  # required node affinity zone In [..]
    toleration: str
    gang: tuple[Any, ...] | None  # ("label", name, min) | ("pg", name)
    priority: int
    bound_node: str | None  # pre-bound by someone (phase Running)
    claims: tuple[tuple[int, int | None], ...]  # (device index, shared Gi or None) in its annotation
    gated: bool
    nominated: str | None = None  # status.nominatedNodeName (an earlier leader's preemption)
    deleting: bool = False  # arrives with a deletionTimestamp (a victim still terminating)
    host_port: int | None = None  # its main container's hostPort (NodePorts)


@dataclass(frozen=True)
class Op:
    kind: str
    a: int
    b: int
    flag: bool


@dataclass(frozen=True)
class Scenario:
    config: str
    nodes: tuple[tuple[NodeSpec, ...], ...]  # per node name n<i>: its versions
    devices: tuple[DeviceSpec, ...]
    classes: tuple[ClassSpec, ...]
    podgroups: tuple[PodGroupSpec, ...]
    pods: tuple[PodSpec, ...]
    ops: tuple[Op, ...]


@dataclass(frozen=True)
class Corruption:
    event: int  # index of the delivered event to damage
    path: int
    action: int
    key: str
    value: Any


@dataclass(frozen=True)
class GarbageEvent:
    position: int  # before which op
    type: str
    object: Obj


# --- raw objects ---------------------------------------------------------------------------------


def node_raw(name: str, spec: NodeSpec, uid: str) -> Obj:
    extra: dict[str, str] = {}
    if spec.gpus is not None:
        extra[GPU] = str(spec.gpus)
    if spec.extra:
        extra[EXTRA] = str(spec.extra)
    taints = [{"key": TAINT_KEY, "value": "gpu", "effect": spec.taint}] if spec.taint else None
    raw = b.node(name, cpu=f"{spec.cpu_m}m", memory=f"{spec.mem_mi}Mi", pods=spec.pods,
                 labels={"zone": spec.zone}, taints=taints, unschedulable=spec.unschedulable, extra=extra)
    raw["metadata"]["uid"] = uid
    return raw


def class_raw(spec: ClassSpec, variant: ClassVariant) -> Obj:
    labels: dict[str, str] = {}
    expressions: list[Obj] = []
    for op, arg in variant.selector:
        if op == "model":
            labels["model"] = arg
        elif op in ("in", "notin"):
            expressions.append({"key": "model", "operator": "In" if op == "in" else "NotIn", "values": list(arg)})
        elif op in ("gt", "lt"):
            expressions.append({"key": "memory", "operator": "Gt" if op == "gt" else "Lt", "values": [arg]})
        elif op == "nvlink":
            expressions.append({"key": "nvlink", "operator": "Exists" if arg else "DoesNotExist"})
    return b.resource_class(spec.name, match_labels=labels or None, expressions=expressions or None,
                            resource_name=variant.resource,
                            sharing={"dimension": variant.dimension, "unit": variant.sharing} if variant.sharing else None,
                            created=spec.created)


def class_resource(spec: ClassSpec, variant: ClassVariant) -> str:
    return variant.resource or f"{DEFAULT_PREFIX}{spec.name}"


def _container_raw(name: str, c: ContainerSpec, restart_policy: str | None = None) -> Obj:
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    if c.cpu_m:
        (limits if c.cpu_in_limits else requests)["cpu"] = f"{c.cpu_m}m"
    if c.mem_mi:
        requests["memory"] = f"{c.mem_mi}Mi"
    if c.gpu:
        limits[GPU] = str(c.gpu)
    if c.extra:
        limits[EXTRA] = str(c.extra)
    if c.klass and c.count:
        limits[c.klass] = str(c.count)
    return b.container(name, requests or None, limits or None, restart_policy)


TOLERATIONS: dict[str, list[Obj]] = {
    "none": [],
    "dedicated-noschedule": [{"key": TAINT_KEY, "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
    "dedicated-exists": [{"key": TAINT_KEY, "operator": "Exists"}],
    "all": [{"operator": "Exists"}],
    "unschedulable": [{"key": UNSCHEDULABLE_TAINT, "operator": "Exists", "effect": "NoSchedule"}],
}


def pod_raw(spec: PodSpec, uid: str, devices: tuple[DeviceSpec, ...]) -> Obj:
    labels: dict[str, str] = {}
    if spec.gang is not None:
        if spec.gang[0] == "label":
            labels.update({GANG_NAME_LABEL: spec.gang[1], GANG_MIN_LABEL: str(spec.gang[2])})
        else:
            labels[PODGROUP_LABEL] = spec.gang[1]
    extra: Obj = {}
    if spec.zone:
        extra["nodeSelector"] = {"zone": spec.zone}
    if spec.affinity_zone:
        extra["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "zone", "operator": "In", "values": [spec.affinity_zone]}]}]}}}
    if TOLERATIONS[spec.toleration]:
        extra["tolerations"] = copy.deepcopy(TOLERATIONS[spec.toleration])
    if spec.gated:
        extra["schedulingGates"] = [{"name": GATE}]
    if spec.overhead_m:
        extra["overhead"] = {"cpu": f"{spec.overhead_m}m"}
    annotations: dict[str, str] = {}
    if spec.claims:
        grants = tuple(ann.DeviceGrant(devices[i].device_id, devices[i].name,
                                       None if gi is None else Fraction(gi * GI)) for i, gi in spec.claims)
        annotations[ann.DEVICES] = ann.encode_devices({"c0": {f"{DEFAULT_PREFIX}c0": grants}})
        annotations[ann.PHASE] = ann.PHASE_ALLOCATED
    raw = b.pod(spec.name, namespace=spec.namespace, scheduler=spec.scheduler,
                containers=[_container_raw(f"c{i}", c) for i, c in enumerate(spec.containers)],
                init_containers=[_container_raw(f"init{i}", c, "Always" if side else None)
                                 for i, (c, side) in enumerate(spec.inits)] or None,
                labels=labels or None, annotations=annotations or None,
                node_name=spec.bound_node or "", phase="Running" if spec.bound_node else "Pending",
                priority=spec.priority or None, spec_extra=extra)
    raw["metadata"]["uid"] = uid
    if spec.host_port:
        raw["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": spec.host_port}]
    if spec.nominated:
        raw["status"]["nominatedNodeName"] = spec.nominated
    if spec.deleting:
        raw["metadata"]["deletionTimestamp"] = "2026-01-01T01:00:00Z"
    return raw


# --- strategies ----------------------------------------------------------------------------------


def host_port(index: int) -> int | None:
    """The hostPort of pod p<index>: p1, p4, p7 want 8080, so that they may collide on a node
    (NodePorts). Given by the index, not drawn: a new draw would move every generated example
    (CI runs them derandomised), and the suite's examples stay the ones they were."""
    return 8080 if index % 3 == 1 else None


_fancy_nodes = st.builds(
    NodeSpec,
    cpu_m=st.sampled_from([1000, 2000, 4000, 8000, 16000]),
    mem_mi=st.sampled_from([2048, 4096, 8192, 16384, 65536]),
    pods=st.integers(1, 8),
    gpus=st.one_of(st.none(), st.sampled_from([0, 1, 2, 4, 8])),
    zone=st.sampled_from(ZONES),
    taint=st.sampled_from([None, "NoSchedule", "NoExecute", "PreferNoSchedule"]),
    unschedulable=st.booleans(),
    extra=st.sampled_from([0, 1, 2]),
)
_plain_nodes = st.builds(
    NodeSpec,
    cpu_m=st.sampled_from([4000, 8000, 16000]),
    mem_mi=st.sampled_from([8192, 16384, 65536]),
    pods=st.integers(3, 10),
    gpus=st.sampled_from([2, 4, 8]),
    zone=st.sampled_from(ZONES),
    taint=st.none(),
    unschedulable=st.just(False),
    extra=st.sampled_from([0, 2]),
)
# Hypothesis does not draw uniformly, so "rare" features get their own branch instead of weights
node_specs = st.one_of(_plain_nodes, _fancy_nodes)


def _bound_text(gi: int, form: int) -> str:
    return (f"{gi}Gi", f"{gi * 1024}Mi", str(gi * GI), f"{gi}.5Gi")[form]


selector_reqs = st.one_of(
    st.tuples(st.just("model"), st.sampled_from(MODELS)),
    st.tuples(st.just("in"), st.lists(st.sampled_from(MODELS), min_size=1, max_size=2, unique=True).map(tuple)),
    st.tuples(st.just("notin"), st.lists(st.sampled_from(MODELS), min_size=1, max_size=2, unique=True).map(tuple)),
    st.tuples(st.just("gt"), st.builds(_bound_text, st.sampled_from(DEVICE_MEMORY_GI), st.integers(0, 3))),
    st.tuples(st.just("lt"), st.builds(_bound_text, st.sampled_from(DEVICE_MEMORY_GI), st.integers(0, 3))),
    st.tuples(st.just("nvlink"), st.booleans()),
)

# (sharing unit, dimension): exclusive, memory slices, or cores slices
_sharings = st.one_of(st.just((None, "memory")), st.tuples(st.sampled_from(list(SHARING_UNITS)), st.just("memory")),
                      st.tuples(st.sampled_from(list(CORE_UNITS)), st.just("cores")))
class_variants = st.builds(
    lambda selector, sharing, resource: ClassVariant(selector, sharing[0], resource, sharing[1]),
    # matchLabels is a map: at most one `model` label per selector
    selector=st.lists(selector_reqs, max_size=2, unique_by=lambda r: r[0] if r[0] == "model" else repr(r)).map(tuple),
    sharing=_sharings,
    resource=st.sampled_from([None, None, None, *CUSTOM_RESOURCES]),
)


@st.composite
def scenarios(draw: st.DrawFn, max_ops: int = 40, max_pods: int = 8, focus: bool = False) -> Scenario:
    """A random cluster and stream. `focus`: plain schedulable nodes that all carry devices, simple
    classes, pods that mostly ask for devices, more gangs — the device ledger, device choice, the
    allocation gate and gang transactions get exercised far more often than by the general mix."""
    config = draw(st.sampled_from(CONFIGS))
    n_nodes = draw(st.integers(1, 2 if focus else len(NODE_NAMES)))
    node_names = NODE_NAMES[:n_nodes]
    nodes = tuple(tuple(draw(st.lists(_plain_nodes if focus else node_specs, min_size=1, max_size=2)))
                  for _ in node_names)

    raw_devices = draw(st.lists(st.tuples(
        st.sampled_from(node_names), st.sampled_from(MODELS), st.sampled_from(DEVICE_MEMORY_GI),
        st.sampled_from([GPU, GPU, GPU, NPU]), st.booleans(),
        st.sampled_from([True, True, True, False]), st.sampled_from([False, False, False, True]),
        st.sampled_from(DEVICE_CORES)),
        min_size=n_nodes if focus else 0, max_size=8))
    if focus:  # every node gets devices; mostly healthy, schedulable nvidia.com/gpu ones
        raw_devices = [(node_names[i % n_nodes], model, mem, GPU if i % 4 else resource, nvlink, i % 5 != 4 or ok,
                        i % 7 == 6 and bad, cores)
                       for i, (_, model, mem, resource, nvlink, ok, bad, cores) in enumerate(raw_devices)]
    per_node: dict[str, int] = {}
    devices = []
    for node, model, mem, resource, nvlink, healthy, unsched, cores in raw_devices:
        index = per_node.get(node, 0)
        per_node[node] = index + 1
        devices.append(DeviceSpec(node, index, model, mem, resource, nvlink, healthy, unsched, cores))

    class_names = draw(st.lists(st.sampled_from(CLASS_NAMES), min_size=1 if focus else 0, max_size=4, unique=True))
    classes = tuple(ClassSpec(name, draw(st.sampled_from(CREATED)),
                              tuple(draw(st.lists(class_variants, min_size=1, max_size=2))))
                    for name in class_names)
    podgroups = tuple(PodGroupSpec(name, tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=2))))
                      for name in draw(st.lists(st.sampled_from(["pg0", "pg1"]), max_size=2, unique=True)))
    label_gangs = draw(st.lists(st.sampled_from(["g0", "g1"]), max_size=2, unique=True))
    # mostly resources some version of some class provides; rarely one nobody provides
    provided = sorted({class_resource(c, v) for c in classes for v in c.variants})
    unprovided = [f"{DEFAULT_PREFIX}{CLASS_NAMES[0]}", CUSTOM_RESOURCES[0], MISSING_CLASS]

    def klass_for(main: bool) -> str | None:
        if not provided:
            return draw(st.sampled_from([None, MISSING_CLASS])) if draw(st.booleans()) and main else None
        if not draw(st.booleans() if main and not focus else st.just(True) if main
                    else st.integers(0, 4).map(lambda x: x == 0)):
            return None
        return draw(st.sampled_from(provided)) if draw(st.integers(0, 9)) else draw(st.sampled_from(unprovided))

    def container(main: bool, fancy: bool, klass: str | None = None) -> ContainerSpec:
        klass = klass or klass_for(main)
        if not fancy:
            return ContainerSpec(
                cpu_m=draw(st.sampled_from([0, 100, 500, 1000])), mem_mi=draw(st.sampled_from([0, 128, 1024])),
                cpu_in_limits=False, gpu=draw(st.sampled_from([0, 1])) if main else 0, extra=0, klass=klass,
                count=draw(st.integers(1, 3) if focus else st.one_of(st.integers(1, 2), st.integers(1, 16)))
                if klass else 0)
        return ContainerSpec(
            cpu_m=draw(st.sampled_from([0, 100, 250, 500, 1000, 2000, 4000])),
            mem_mi=draw(st.sampled_from([0, 128, 512, 1024, 4096, 8192])),
            cpu_in_limits=draw(st.booleans()),
            gpu=draw(st.sampled_from([0, 0, 1, 2, 4])),
            extra=draw(st.sampled_from([0, 1])),
            klass=klass,
            count=draw(st.one_of(st.integers(1, 2), st.integers(1, 16))) if klass else 0,
        )

    gang_choices: list[tuple[Any, ...]] = [("label", name, 0) for name in label_gangs]
    gang_choices += [("pg", pg.name) for pg in podgroups]
    gang_choices += [("pg", "pg9")]  # a PodGroup that never exists
    claimed: set[int] = set()
    pods = []
    for i in range(draw(st.integers(1, max_pods))):
        bound = draw(st.sampled_from(node_names)) if draw(st.integers(0, 4)) == 0 else None
        claims: list[tuple[int, int | None]] = []
        if bound is not None:
            local = [j for j, d in enumerate(devices) if d.node == bound and j not in claimed]
            for j in draw(st.lists(st.sampled_from(local), max_size=2, unique=True)) if local else []:
                claimed.add(j)
                shared = draw(st.one_of(st.none(), st.integers(1, devices[j].mem_gi // 2)))
                claims.append((j, shared))
        fancy = False if focus else draw(st.booleans())
        gang: tuple[Any, ...] | None = None
        in_gang: bool = draw(st.booleans())
        if gang_choices and in_gang:
            gang = gang_choices[0] if focus else draw(st.sampled_from(gang_choices))
        # a new leader's view: pods another replica's preemption nominated, and its victims, bound
        # and still terminating (deletionTimestamp set)
        nominated = draw(st.sampled_from([None, None, None, *NODE_NAMES])) if bound is None else None
        deleting = bound is not None and draw(st.integers(0, 2)) == 0
        if not fancy:
            main = container(True, False)
            # init containers and sidecars asking for class devices: often the main container's
            # class, so that a finished init container's devices are handed on (or a sidecar's not)
            inits: tuple[tuple[ContainerSpec, bool], ...] = ()
            if focus and draw(st.integers(0, 2)) == 0:
                inits = tuple((container(False, False, main.klass if draw(st.booleans()) else klass_for(True)),
                               draw(st.booleans())) for _ in range(draw(st.integers(1, 2))))
            pods.append(PodSpec(
                name=f"p{i}", namespace="default", scheduler="tessera" if bound is None else "default-scheduler",
                containers=(main,), inits=inits, overhead_m=0, zone=None, affinity_zone=None,
                toleration="none", gang=gang, priority=10 if nominated else 0, bound_node=bound,
                claims=tuple(claims), gated=False, nominated=nominated, deleting=deleting,
                host_port=host_port(i)))
            continue
        inits = tuple((container(False, True), draw(st.booleans())) for _ in range(draw(st.integers(0, 2))))
        pods.append(PodSpec(
            name=f"p{i}",
            namespace=draw(st.sampled_from(["default", "team-b"])),
            scheduler="default-scheduler" if draw(st.integers(0, 3)) == 0 else "tessera",
            containers=(container(True, True),) + tuple(container(False, True) for _ in range(draw(st.integers(0, 1)))),
            inits=inits,
            overhead_m=draw(st.sampled_from([0, 100])),
            zone=draw(st.sampled_from([None, *ZONES])),
            affinity_zone=draw(st.sampled_from([None, *ZONES])),
            toleration=draw(st.sampled_from(list(TOLERATIONS))),
            gang=gang,
            priority=draw(st.sampled_from([0, 10, -5])),
            bound_node=bound,
            claims=tuple(claims),
            gated=draw(st.integers(0, 3)) == 0,
            nominated=nominated,
            deleting=deleting,
            host_port=host_port(i),
        ))

    # gang minimums mostly reachable: at most the number of members (sometimes one more, so it waits)
    members = {name: sum(1 for p in pods if p.gang is not None and p.gang[1] == name) for name in ("g0", "g1", "pg0", "pg1")}

    def minimum(name: str) -> int:
        return draw(st.integers(1, max(1, members[name]) + (1 if draw(st.integers(0, 4)) == 0 else 0)))

    mins = {name: minimum(name) for name in label_gangs}
    pods = [PodSpec(**{**p.__dict__, "gang": ("label", p.gang[1], mins[p.gang[1]])})
            if p.gang is not None and p.gang[0] == "label" else p for p in pods]
    podgroups = tuple(PodGroupSpec(pg.name, tuple(minimum(pg.name) for _ in pg.mins)) for pg in podgroups)

    setup: list[Op] = []
    if focus or draw(st.sampled_from([True, True, True, False])):  # most streams start with the cluster in place
        setup += [Op("node+", i, 0, False) for i in range(n_nodes)]
        setup += [Op("dev+", j, 0, False) for j in range(len(devices))]
        setup += [Op("class+", k, 0, False) for k in range(len(classes))]
        setup += [Op("pg+", g, 0, False) for g in range(len(podgroups))]
        if draw(st.booleans()):
            setup += [Op("pod+", p, 0, False) for p in range(len(pods))]
        setup = list(draw(st.permutations(setup)))
    ops = draw(st.lists(ops_strategy, min_size=min(5, max_ops), max_size=max_ops))
    return Scenario(config, nodes, tuple(devices), classes, podgroups, tuple(pods), tuple(setup + ops))


@st.composite
def sharing_scenarios(draw: st.DrawFn) -> Scenario:
    """Slices of one or two GPUs that publish memory and cores, under classes that are edited
    back and forth between sharing by memory and by cores while pods hold their slices (each
    class has a memory and a cores version), with pods finishing, deleted, their containers
    (sidecars among them) restarted, and restarts of the core between the edits: a slice stays of the dimension it was granted in, so neither
    dimension of a GPU is ever given out beyond its capacity."""
    devices = tuple(DeviceSpec("n0", i, "V100", draw(st.sampled_from((8, 16, 32))), GPU, False, True, False,
                               draw(st.sampled_from((20, 100))))
                    for i in range(draw(st.integers(1, 2))))
    node = NodeSpec(cpu_m=64000, mem_mi=65536, pods=32, gpus=len(devices), zone="a", taint=None,
                    unschedulable=False, extra=0)
    classes = []
    for name in CLASS_NAMES[:draw(st.integers(2, 3))]:
        by_memory = ClassVariant((("model", "V100"),), draw(st.sampled_from(["1Gi", "2Gi", "4Gi"])), None, "memory")
        by_cores = ClassVariant((("model", "V100"),), draw(st.sampled_from(list(CORE_UNITS))), None, "cores")
        first = draw(st.booleans())
        classes.append(ClassSpec(name, CREATED[0], (by_memory, by_cores) if first else (by_cores, by_memory)))
    resources = [class_resource(spec, spec.variants[0]) for spec in classes]

    def container() -> ContainerSpec:
        return ContainerSpec(cpu_m=100, mem_mi=0, cpu_in_limits=False, gpu=0, extra=0,
                             klass=draw(st.sampled_from(resources)), count=draw(st.integers(1, 8)))

    pods = []
    for i in range(draw(st.integers(3, 8))):
        inits = tuple((container(), draw(st.booleans())) for _ in range(draw(st.sampled_from((0, 0, 1)))))
        pods.append(PodSpec(name=f"p{i}", namespace="default", scheduler="tessera", containers=(container(),),
                            inits=inits, overhead_m=0, zone=None, affinity_zone=None, toleration="none", gang=None,
                            priority=0, bound_node=None, claims=(), gated=False))
    setup = [Op("node+", 0, 0, False), *(Op("dev+", j, 0, False) for j in range(len(devices))),
             *(Op("class+", k, 0, False) for k in range(len(classes)))]
    kinds = ["pod+"] * 4 + ["class+"] * 3 + ["pod_finish", "pod_delete", "pod_restart", "restart", "dup"]
    ops = draw(st.lists(st.builds(Op, st.sampled_from(kinds), st.integers(0, 7), st.integers(0, 1), st.booleans()),
                        min_size=6, max_size=30))
    return Scenario(draw(st.sampled_from(CONFIGS)), ((node,),), devices, tuple(classes), (), tuple(pods),
                    tuple(setup + ops))


OP_KINDS = (["pod+"] * 6 + ["pod_finish"] * 2
            + ["pod_delete", "pod_recreate", "pod_touch", "pod_ungate", "pod_deleting", "pod_resize", "pod_restart"]
            + ["node+"] * 2 + ["node-", "node_recreate"]
            + ["dev+"] * 2 + ["dev-", "dev_flip"]
            + ["class+"] * 2 + ["class-"]
            + ["pg+", "pg-", "dup", "stale", "restart"])
ops_strategy = st.builds(Op, st.sampled_from(OP_KINDS), st.integers(0, 15), st.integers(0, 7), st.booleans())


# --- corruption ------------------------------------------------------------------------------------

FIELD_NAMES = ("conditions", "annotations", "labels", "nodeName", "schedulingGates", "overhead",
               "deletionTimestamp", "sharing", "selector", "capacity", "allocatable", "taints", "tolerations",
               "initContainers", "containers", "resourceVersion", "uid", "name", "namespace", "phase", "priority",
               "minMember", "unschedulable", "restartPolicy", "nodeSelector", "affinity", "resources", "requests",
               "limits", "metadata", "spec", "status", "kind", "resourceName", "deviceID", "attributes", "type",
               "matchLabels", "matchExpressions", "operator", "values", "key", "effect", "schedulerName",
               "scheduleTimeoutSeconds", "unit", "dimension", "nvidia.com/gpu", "cpu", "memory", "pods",
               "tessera.dev/devices", GANG_MIN_LABEL, PODGROUP_LABEL)
WEIRD_STRINGS = ("", " ", "1.5.2", "-1", "1e999999", "1e-10", "NaN", "Infinity", "0x10", "1Gi ", "١",
                 "9" * 70, "abc", "Always", "Succeeded", "Failed", "True", "False", "Gt", "Exists", "In",
                 "NoSchedule", "default-scheduler", "tessera", "n0", "2", "-5", "0", "1m", "16Gi",
                 '{"version": 1, "containers": {}}', "{", "null", "\x00")

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**64), 2**64),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=6), st.sampled_from(WEIRD_STRINGS))
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4) | st.sampled_from(FIELD_NAMES),
                                                                inner, max_size=3),
    max_leaves=6)

# fields the parsers and the simulator read: random damage rarely hits them, so aim at them too
KNOWN_PATHS: tuple[tuple[Any, ...], ...] = (
    ("status", "conditions"), ("status", "conditions", 0), ("metadata", "annotations"), ("metadata", "labels"),
    ("metadata", "annotations", ann.DEVICES), ("metadata", "annotations", ann.PHASE),
    ("metadata", "labels", GANG_MIN_LABEL), ("metadata", "labels", PODGROUP_LABEL), ("spec", "nodeName"),
    ("status", "phase"), ("spec", "priority"), ("spec", "containers"), ("spec", "containers", 0),
    ("spec", "containers", 0, "resources"), ("spec", "containers", 0, "resources", "limits"),
    ("spec", "containers", 0, "resources", "requests", "cpu"), ("spec", "containers", 0, "resources", "limits", GPU),
    ("spec", "containers", 0, "name"), ("spec", "containers", 0, "restartPolicy"), ("spec", "schedulerName"),
    ("spec", "tolerations"), ("spec", "tolerations", 0), ("spec", "nodeSelector"), ("spec", "affinity"),
    ("spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"),
    ("spec", "affinity", "nodeAffinity", "preferredDuringSchedulingIgnoredDuringExecution"),
    ("spec", "overhead"), ("spec", "schedulingGates"), ("spec", "initContainers"), ("metadata", "deletionTimestamp"),
    ("metadata", "uid"), ("metadata", "name"), ("metadata", "namespace"), ("metadata", "resourceVersion"),
    ("metadata", "creationTimestamp"), ("metadata",), ("spec",), ("status",), ("kind",),
    ("spec", "capacity"), ("spec", "capacity", "memory"), ("spec", "attributes"), ("spec", "attributes", "model"),
    ("spec", "deviceID"), ("spec", "selector"), ("spec", "selector", "matchLabels"),
    ("spec", "selector", "matchExpressions"), ("spec", "selector", "matchExpressions", 0, "values"),
    ("spec", "sharing"), ("spec", "sharing", "unit"), ("spec", "sharing", "dimension"), ("spec", "resourceName"),
    ("spec", "minMember"), ("spec", "scheduleTimeoutSeconds"), ("status", "allocatable"),
    ("status", "allocatable", "cpu"), ("status", "allocatable", "pods"), ("status", "allocatable", GPU),
    ("spec", "taints"), ("spec", "taints", 0, "effect"), ("spec", "unschedulable"),
)

SMALL_GARBAGE: tuple[Any, ...] = (None, [], {}, "", "x", ["x"], [None], [{}], 0, -1, True, 1.5, {"x": None}, "1e999999", "-1")
corruptions = st.one_of(
    # anywhere: random JSON, a deleted field, a new field, a wrong type
    st.builds(Corruption, event=st.integers(0, 30), path=st.integers(0, 400), action=st.integers(0, 3),
              key=st.sampled_from(FIELD_NAMES), value=json_values),
    # aimed at the fields the parsers and the simulator read
    st.builds(Corruption, event=st.integers(0, 30), path=st.integers(0, len(KNOWN_PATHS) - 1), action=st.just(4),
              key=st.just(""), value=st.sampled_from(SMALL_GARBAGE) | json_values),
)

garbage_events = st.builds(
    GarbageEvent,
    position=st.integers(0, 60),
    type=st.sampled_from(["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR", "", "added"]),
    object=st.fixed_dictionaries(
        {"kind": st.sampled_from(["Pod", "Node", "ExtendedResource", "ResourceClass", "PodGroup", "Widget", None, 3])},
        optional={"apiVersion": json_values, "metadata": json_values, "spec": json_values, "status": json_values}),
)


def _wrong_type(value: Any) -> Any:
    if isinstance(value, bool):
        return "true"
    if isinstance(value, str):
        return 12345
    if isinstance(value, int):
        return str(value) + "x"
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list):
        return {"0": value}
    return {}


def corrupt(obj: Obj, c: Corruption) -> Obj:
    """A damaged deep copy of `obj` (the top level stays a JSON object, as read_events guarantees)."""
    obj = copy.deepcopy(obj)
    paths: list[tuple[Any, Any]] = []
    nested_paths(obj, paths)
    value = copy.deepcopy(c.value)
    if c.action == 4:
        target: Any = obj
        path = KNOWN_PATHS[c.path % len(KNOWN_PATHS)]
        for step, nxt in zip(path, path[1:]):
            child = target[step] if isinstance(target, dict) and step in target else (
                target[step] if isinstance(target, list) and isinstance(step, int) and step < len(target) else None)
            if not isinstance(child, (dict, list)) or (isinstance(nxt, int) != isinstance(child, list)):
                child = [{}] if isinstance(nxt, int) else {}
                if isinstance(target, list):
                    target.append(child) if not target else target.__setitem__(min(step, len(target) - 1), child)
                else:
                    target[step] = child
            target = child if not isinstance(child, list) or isinstance(nxt, int) else child
        last = path[-1]
        if isinstance(target, list):
            if target:
                target[min(last, len(target) - 1)] = value
            else:
                target.append(value)
        else:
            target[last] = value
        return obj
    if c.action == 2 or not paths:
        dicts = [obj] + [p[k] for p, k in paths if isinstance(p[k], dict)]
        dicts[c.path % len(dicts)][c.key] = value
        return obj
    parent, key = paths[c.path % len(paths)]
    if c.action == 0:
        parent[key] = value
    elif c.action == 1:
        if isinstance(parent, dict):
            del parent[key]
        else:
            parent.pop(key)
    else:
        parent[key] = _wrong_type(parent[key])
    return obj


# --- the apiserver -------------------------------------------------------------------------------


@dataclass
class Delivery:
    type: str
    object: Obj
    direct: bool  # stale: give it to the core only (the apiserver's memory keeps the newer version)


class World:
    """The apiserver: current objects, resourceVersions, and the event each Op turns into."""

    def __init__(self, scenario: Scenario) -> None:
        self.s = scenario
        self.rv = 100
        self.nodes: dict[str, Obj] = {}  # name -> raw
        self.node_spec: dict[str, NodeSpec] = {}
        self.node_gen: dict[str, int] = {}
        self.devices: dict[str, Obj] = {}  # device name -> raw
        self.device_spec: dict[str, DeviceSpec] = {}  # device name -> current spec (flips applied)
        self.classes: dict[str, Obj] = {}
        self.class_variant: dict[str, ClassVariant] = {}
        self.podgroups: dict[str, Obj] = {}
        self.pg_min: dict[str, int] = {}  # "default/<name>" -> minMember
        self.pods: dict[str, Obj] = {}  # uid -> raw, alive pods only
        self.pod_uid: dict[int, str] = {}  # pod index -> uid of its current incarnation
        self.pod_gen: dict[int, int] = {}
        self.spec_of: dict[str, PodSpec] = {}  # uid -> spec
        self.history: dict[str, list[tuple[int, Obj]]] = {}  # uid -> delivered (rv, raw)
        self.tessera_bound: set[str] = set()  # uids Tessera bound
        # (pod uid, class resource) -> the device capacity its slices use: the sharing dimension
        # of the class that owned the resource when they were granted (set by the test's harness)
        self.slice_dimension: dict[tuple[str, str], str] = {}
        self.log: list[str] = []

    # helpers

    def _stamp(self, raw: Obj) -> Obj:
        self.rv += 1
        raw = copy.deepcopy(raw)
        raw["metadata"]["resourceVersion"] = str(self.rv)
        self.history.setdefault(raw["metadata"]["uid"], []).append((self.rv, raw))
        return raw

    def _upsert(self, exists: bool, flag: bool) -> str:
        # ADDED for new objects; a MODIFIED for an unseen object is an upsert (reordered/relisted)
        if exists:
            return "ADDED" if flag else "MODIFIED"
        return "MODIFIED" if flag else "ADDED"

    def note(self, d: Delivery, extra: str = "") -> None:
        def mapping(value: Any) -> Obj:
            return value if isinstance(value, dict) else {}
        meta, spec, status = (mapping(d.object.get(k)) for k in ("metadata", "spec", "status"))
        namespace = meta.get("namespace")
        bits = [d.type + (" (stale, core only)" if d.direct else ""), str(d.object.get("kind")),
                f"{namespace}/{meta.get('name')}" if namespace else f"{meta.get('name')}",
                f"rv={meta.get('resourceVersion')}"]
        if d.object.get("kind") == "Pod":
            bits.append(f"uid=..{str(meta.get('uid'))[-4:]} node={spec.get('nodeName', '')!r} "
                        f"phase={status.get('phase')}")
        self.log.append(" ".join(bits) + extra)

    def current_objects(self) -> list[Obj]:
        out = [self.nodes[k] for k in sorted(self.nodes)] + [self.devices[k] for k in sorted(self.devices)]
        out += [self.classes[k] for k in sorted(self.classes)] + [self.podgroups[k] for k in sorted(self.podgroups)]
        out += [self.pods[k] for k in sorted(self.pods)]
        return out

    # the Binding, as the apiserver applies it

    def bind(self, uid: str, node: str, annotations: dict[str, str]) -> None:
        raw = self.pods.get(uid)
        if raw is None:
            return
        raw = copy.deepcopy(raw)
        meta = raw["metadata"]
        meta.pop("resourceVersion", None)
        if annotations:
            meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
        raw["spec"]["nodeName"] = node
        status = raw.setdefault("status", {})
        status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"] + [
            {"type": "PodScheduled", "status": "True"}]
        if meta.get("annotations", {}).get(ann.PHASE) == ann.PHASE_ALLOCATING:
            meta["annotations"][ann.PHASE] = ann.PHASE_ALLOCATED  # the node agent, as Replay plays it
        self.pods[uid] = raw
        self.tessera_bound.add(uid)
        self.log.append(f"  -> Binding {meta.get('namespace')}/{meta['name']} to {node}"
                        + (f" devices={annotations.get(ann.DEVICES)}" if annotations else ""))

    def evict(self, uid: str) -> None:
        """A preemption's victim, deleted as the apiserver does once its grace period is over
        (Replay delivers that DELETED to the core at once; the world forgets the pod the same way)."""
        raw = self.pods.pop(uid, None)
        if raw is not None:
            self.log.append(f"  -> evicted {raw['metadata'].get('namespace')}/{raw['metadata']['name']} (preemption)")

    # ops -> events

    def events_for(self, op: Op) -> list[Delivery]:
        handler = getattr(self, "_op_" + op.kind.replace("+", "_add").replace("-", "_del"))
        return list(handler(op))

    def _node_name(self, op: Op) -> str:
        return NODE_NAMES[op.a % len(self.s.nodes)]

    def _op_node_add(self, op: Op) -> list[Delivery]:
        name = self._node_name(op)
        versions = self.s.nodes[op.a % len(self.s.nodes)]
        spec = versions[op.b % len(versions)]
        uid = f"node-{name}-{self.node_gen.get(name, 0)}"
        exists = name in self.nodes
        raw = self._stamp(node_raw(name, spec, uid))
        self.nodes[name], self.node_spec[name] = raw, spec
        return [Delivery(self._upsert(exists, op.flag), raw, False)]

    def _op_node_del(self, op: Op) -> list[Delivery]:
        name = self._node_name(op)
        raw = self.nodes.pop(name, None)
        if raw is None:
            return []
        self.node_spec.pop(name)
        return [Delivery("DELETED", raw, False)]

    def _op_node_recreate(self, op: Op) -> list[Delivery]:
        name = self._node_name(op)
        out = [] if op.flag else self._op_node_del(op)  # flag: the DELETED was missed
        self.node_gen[name] = self.node_gen.get(name, 0) + 1
        self.nodes.pop(name, None)
        self.node_spec.pop(name, None)
        return out + self._op_node_add(Op("node+", op.a, op.b, False))

    def _device(self, op: Op) -> DeviceSpec | None:
        if not self.s.devices:
            return None
        spec = self.s.devices[op.a % len(self.s.devices)]
        return self.device_spec.get(spec.name, spec)

    def _op_dev_add(self, op: Op) -> list[Delivery]:
        spec = self._device(op)
        if spec is None:
            return []
        exists = spec.name in self.devices
        raw = self._stamp(spec.raw())
        self.devices[spec.name], self.device_spec[spec.name] = raw, spec
        return [Delivery(self._upsert(exists, op.flag), raw, False)]

    def _op_dev_del(self, op: Op) -> list[Delivery]:
        spec = self._device(op)
        if spec is None or spec.name not in self.devices:
            return []
        return [Delivery("DELETED", self.devices.pop(spec.name), False)]

    def _op_dev_flip(self, op: Op) -> list[Delivery]:
        spec = self._device(op)
        if spec is None or spec.name not in self.devices:
            return []
        if op.b % 2:
            spec = dataclasses.replace(spec, unschedulable=not spec.unschedulable)
        else:
            spec = dataclasses.replace(spec, healthy=not spec.healthy)
        raw = self._stamp(spec.raw())
        self.devices[spec.name], self.device_spec[spec.name] = raw, spec
        return [Delivery("MODIFIED", raw, False)]

    def _op_class_add(self, op: Op) -> list[Delivery]:
        if not self.s.classes:
            return []
        spec = self.s.classes[op.a % len(self.s.classes)]
        variant = spec.variants[op.b % len(spec.variants)]
        exists = spec.name in self.classes
        raw = self._stamp(class_raw(spec, variant))
        self.classes[spec.name], self.class_variant[spec.name] = raw, variant
        return [Delivery(self._upsert(exists, op.flag), raw, False)]

    def _op_class_del(self, op: Op) -> list[Delivery]:
        if not self.s.classes:
            return []
        name = self.s.classes[op.a % len(self.s.classes)].name
        raw = self.classes.pop(name, None)
        if raw is None:
            return []
        self.class_variant.pop(name)
        return [Delivery("DELETED", raw, False)]

    def _op_pg_add(self, op: Op) -> list[Delivery]:
        if not self.s.podgroups:
            return []
        spec = self.s.podgroups[op.a % len(self.s.podgroups)]
        minimum = spec.mins[op.b % len(spec.mins)]
        exists = spec.name in self.podgroups
        raw = self._stamp(b.podgroup(spec.name, minimum))
        self.podgroups[spec.name] = raw
        self.pg_min[f"default/{spec.name}"] = minimum
        return [Delivery(self._upsert(exists, op.flag), raw, False)]

    def _op_pg_del(self, op: Op) -> list[Delivery]:
        if not self.s.podgroups:
            return []
        name = self.s.podgroups[op.a % len(self.s.podgroups)].name
        raw = self.podgroups.pop(name, None)
        if raw is None:
            return []
        self.pg_min.pop(f"default/{name}")
        return [Delivery("DELETED", raw, False)]

    # pods

    def _pod_index(self, op: Op) -> int:
        return op.a % len(self.s.pods)

    def _alive(self, op: Op) -> tuple[str, Obj] | None:
        uid = self.pod_uid.get(self._pod_index(op))
        if uid is None or uid not in self.pods:
            return None
        return uid, self.pods[uid]

    def _op_pod_add(self, op: Op) -> list[Delivery]:
        alive = self._alive(op)
        if alive is not None:  # already there: a relist-style duplicate of the current version
            return [Delivery(self._upsert(True, op.flag), copy.deepcopy(alive[1]), False)]
        i = self._pod_index(op)
        spec = self.s.pods[i]
        gen = self.pod_gen.get(i, 0)
        self.pod_gen[i] = gen + 1
        uid = b.uid_for("Pod", spec.namespace, f"{spec.name}#{gen}")
        raw = self._stamp(pod_raw(spec, uid, self.s.devices))
        self.pods[uid] = raw
        if spec.claims:  # pod_raw writes claimed slices as memory of class.tessera.dev/c0
            self.slice_dimension[(uid, f"{DEFAULT_PREFIX}c0")] = "memory"
        self.pod_uid[i] = uid
        self.spec_of[uid] = spec
        return [Delivery(self._upsert(False, op.flag), raw, False)]

    def _modify(self, op: Op, change: Any) -> list[Delivery]:
        alive = self._alive(op)
        if alive is None:
            return []
        uid, raw = alive
        raw = copy.deepcopy(raw)
        if change(raw) is False:
            return []
        raw = self._stamp(raw)
        self.pods[uid] = raw
        return [Delivery("MODIFIED", raw, False)]

    def _op_pod_finish(self, op: Op) -> list[Delivery]:
        def change(raw: Obj) -> None:
            raw["status"]["phase"] = "Failed" if op.flag else "Succeeded"
        return self._modify(op, change)

    def _op_pod_delete(self, op: Op) -> list[Delivery]:
        alive = self._alive(op)
        if alive is None:
            return []
        del self.pods[alive[0]]
        return [Delivery("DELETED", copy.deepcopy(alive[1]), False)]

    def _op_pod_recreate(self, op: Op) -> list[Delivery]:
        alive = self._alive(op)
        out: list[Delivery] = []
        if alive is not None:
            del self.pods[alive[0]]
            if not op.flag:  # flag: the DELETED was missed; the new uid replaces the old one
                out.append(Delivery("DELETED", copy.deepcopy(alive[1]), False))
        return out + self._op_pod_add(Op("pod+", op.a, op.b, False))

    def _op_pod_touch(self, op: Op) -> list[Delivery]:
        def change(raw: Obj) -> None:
            key = "labels" if op.b % 2 == 0 else "annotations"
            raw["metadata"].setdefault(key, {})["touched"] = str(self.rv)
        return self._modify(op, change)

    def _op_pod_restart(self, op: Op) -> list[Delivery]:
        def change(raw: Obj) -> bool:  # the kubelet restarts a container of a running pod (a sidecar's too)
            if not raw["spec"].get("nodeName") or raw["status"].get("phase") in ("Succeeded", "Failed"):
                return False
            status = raw["status"]
            status["phase"], status["startTime"] = "Running", "2026-01-01T00:00:00Z"
            for field, key in (("initContainerStatuses", "initContainers"), ("containerStatuses", "containers")):
                statuses = status.setdefault(field, [{"name": c["name"], "restartCount": 0}
                                                     for c in raw["spec"].get(key) or []])
                for entry in statuses[op.b % max(1, len(statuses)):][:1]:
                    entry["restartCount"] += 1
            return True
        return self._modify(op, change)

    def _op_pod_ungate(self, op: Op) -> list[Delivery]:
        def change(raw: Obj) -> bool:
            return raw["spec"].pop("schedulingGates", None) is not None
        return self._modify(op, change)

    def _op_pod_deleting(self, op: Op) -> list[Delivery]:
        def change(raw: Obj) -> bool:
            if "deletionTimestamp" in raw["metadata"]:
                return False
            raw["metadata"]["deletionTimestamp"] = "2026-01-01T01:00:00Z"
            return True
        return self._modify(op, change)

    def _op_pod_resize(self, op: Op) -> list[Delivery]:
        def change(raw: Obj) -> bool:  # in-place resize of a running pod (the kubelet's decision)
            if not raw["spec"].get("nodeName"):
                return False
            c = raw["spec"]["containers"][0]
            c["resources"].setdefault("requests", {})["cpu"] = f"{op.b * 500}m"
            c["resources"].get("limits", {}).pop("cpu", None)
            return True
        return self._modify(op, change)

    def _op_dup(self, op: Op) -> list[Delivery]:
        objects = self.current_objects()
        if not objects:
            return []
        return [Delivery("MODIFIED" if op.flag else "ADDED", copy.deepcopy(objects[op.a % len(objects)]), False)]

    def _op_stale(self, op: Op) -> list[Delivery]:
        candidates = []
        for raw in self.current_objects():
            if raw["kind"] not in ("Pod", "Node", "ExtendedResource"):
                continue  # only these kinds are resourceVersion-checked by the core
            uid = raw["metadata"]["uid"]
            entries = self.history.get(uid, [])
            newest = max((rv for rv, _ in entries), default=0)
            older = [e for e in entries if e[0] < newest]
            if older:
                candidates.append(older)
        if not candidates:
            return []
        entries = candidates[op.a % len(candidates)]
        return [Delivery("MODIFIED", copy.deepcopy(entries[op.b % len(entries)][1]), True)]
