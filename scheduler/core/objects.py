"""Typed, validated views of the Kubernetes objects the core reasons about.

Watch events carry raw JSON. Everything the scheduling cycle touches is parsed exactly once, here,
into small slotted records, so that per-node checks in the hot loop are attribute reads and integer
compares — and so that malformed input fails *here*, with a message, instead of deep in a cycle.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from scheduler.api.names import label_key_problem
from scheduler.api.quantity import Amount, QuantityError, exact, parse_quantity
from scheduler.core import annotations as ann
from scheduler.core.lifecycle import APP, INIT, SIDECAR, ContainerKind, Phases, container_phases
from scheduler.core.foreign import ignored_keys
from scheduler.core.pod_terms import (PodTerm, SpreadConstraint, WeightedPodTerm, pod_terms, preferred_pod_terms,
                                      required_pod_terms, spread_constraints)
from scheduler.core.selectors import Requirement, go_int64
from scheduler.core.resources import (
    CPU,
    ExactResources,
    Resources,
    aggregate_container_requests,
    is_integer_resource,
    max_into,
    node_scoring_defaults,
    pod_level_requests,
    pod_requests,
    with_scoring_defaults,
)
from scheduler.quoted import quoted

GANG_NAME_LABEL = "pod-group.scheduling.sigs.k8s.io/name"
GANG_MIN_LABEL = "pod-group.scheduling.sigs.k8s.io/min-available"
PODGROUP_LABEL = "scheduling.x-k8s.io/pod-group"
TOPOLOGY_REQUIRED = "tessera.dev/topology-required"  # on a PodGroup (or a label gang's members)
TOPOLOGY_PREFERRED = "tessera.dev/topology-preferred"
PLUGINS_API = "scheduling.x-k8s.io"  # scheduler-plugins' PodGroup CRD
WORKLOAD_API = "scheduling.k8s.io"  # upstream's Workload API (v1alpha2, Kubernetes 1.36)
# the apiVersion of the PodGroups Tessera reads, by API group (what an Event's `regarding` names)
PODGROUP_API_VERSIONS = {PLUGINS_API: f"{PLUGINS_API}/v1alpha1", WORKLOAD_API: f"{WORKLOAD_API}/v1alpha2"}

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
# why a GPU goes to no new pod (`Device.unschedulable_because`), as explain says it
UNHEALTHY_DEVICE, CORDONED_DEVICE, DUPLICATE_DEVICE = "unhealthy", "cordoned", "deviceID named twice"
DEFAULT_PREEMPTION_POLICY = "PreemptLowerPriority"  # the API's default for a pod's and a PriorityClass's


class ObjectError(ValueError):
    """An object from the cluster cannot be understood; the message says which field and why."""


JSON = Mapping[str, Any]


def in_terminal_phase(obj: JSON) -> bool:
    """`Pod.terminal` for a pod as the apiserver sends it (unparsed: the informers' relist order,
    the node agent): Succeeded or Failed, so the kubelet has freed what it held."""
    status = obj.get("status")
    return isinstance(status, Mapping) and status.get("phase") in TERMINAL_PHASES


def _mapping(value: object, where: str) -> JSON:
    if type(value) is dict:  # what decoded JSON always is; the ABC check costs 10x more
        return value
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ObjectError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def _list(value: object, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ObjectError(f"{where}: expected a list, got {type(value).__name__}")
    return value


def str_map(value: object, where: str) -> dict[str, str]:
    """A map of strings at `where` (labels, annotations, a nodeSelector; None is an empty one), or
    the ObjectError saying why it is not one."""
    raw = _mapping(value, where)
    out: dict[str, str] = {}
    for key, item in raw.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise ObjectError(f"{where}: keys and values must be strings")
        out[key] = item
    return out


def _str(value: object, where: str, default: str = "") -> str:
    if value is None:
        return default
    if not isinstance(value, str):
        raise ObjectError(f"{where}: expected a string, got {type(value).__name__}")
    return value


def parse_resource_list(value: object, where: str, integers: bool = True) -> Resources:
    """A ResourceList in scheduler units: CPU in millicores (`MilliValue()`), everything else
    `Value()`, each rounded up (`integers`: see `exact_resource_list`)."""
    return {name: math.ceil(amount) for name, amount in exact_resource_list(value, where, integers).items()}


def exact_resource_list(value: object, where: str, integers: bool = True) -> ExactResources:
    """A ResourceList in scheduler units, not rounded: what a pod's requests are totalled in
    before rounding up once (`pod_requests`).

    `integers`: refuse a fractional quantity of an extended resource (or of `pods`), as the
    apiserver's validateResourceQuantityValue does for a pod's and a node's resources ("must be
    an integer"; `nvidia.com/gpu: 500m` would otherwise be rounded up to a whole GPU here). The
    live scheduler never sees such an object (the apiserver refused it); `simulate` and replay
    read hand-written ones. Off for a CRD's ResourceList (PodGroup), which no such rule guards."""
    out: ExactResources = {}
    for name, raw in _mapping(value, where).items():
        try:
            amount = _scheduler_amount(raw, name == CPU) if isinstance(raw, str) else _amount(raw, name == CPU)
        except QuantityError as err:
            raise ObjectError(f"{where}[{name}]: {err}") from None
        if integers and is_integer_resource(str(name)) and math.ceil(amount * 1000) % 1000:
            raise ObjectError(f"{where}[{name}]: Invalid value: {quoted(str(raw))}: must be an integer")
        out[str(name)] = amount
    return out


def _amount(raw: Any, milli: bool) -> Amount:
    quantity = parse_quantity(raw)
    if quantity < 0:
        raise QuantityError("must be greater than or equal to 0")
    amount = exact(quantity * 1000 if milli else quantity)
    if amount > 2**62:
        most = f"2^62 millicores ({2**62 // 1000} cores)" if milli else f"2^62 ({2**62})"
        raise QuantityError(f"{quoted(raw)} is too large: at most {most} are counted")
    return amount


@functools.lru_cache(maxsize=4096)
def _scheduler_amount(raw: str, milli: bool) -> Amount:
    """`_amount` for the strings a cluster repeats thousands of times ("64", "256Gi", "100m"):
    exact Fraction parsing is a third of a node's intake, and start-up parses every node."""
    return _amount(raw, milli)


@dataclass(frozen=True, slots=True)
class ObjectMeta:
    name: str
    namespace: str
    uid: str
    resource_version: str
    labels: dict[str, str]
    annotations: dict[str, str]
    creation_timestamp: str
    deleting: bool
    generation: int = 0  # metadata.generation: which spec a status describes (observedGeneration)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


def object_uid(obj: JSON) -> str | None:
    """The uid the state files an object under (parse_meta's fallback for objects without one)."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return None
    uid = meta.get("uid")
    if isinstance(uid, str) and uid:
        return uid
    name, namespace = meta.get("name"), meta.get("namespace") or ""
    if not isinstance(name, str) or not name or not isinstance(namespace, str):
        return None
    return f"{obj.get('kind')}/{namespace}/{name}"


def parse_meta(obj: JSON, kind: str) -> ObjectMeta:
    meta = _mapping(obj.get("metadata"), f"{kind}.metadata")
    name = _str(meta.get("name"), f"{kind}.metadata.name")
    if not name:
        raise ObjectError(f"{kind}.metadata.name: Required value")
    namespace = _str(meta.get("namespace"), f"{kind}.metadata.namespace")
    uid = _str(meta.get("uid"), f"{kind}.metadata.uid") or f"{kind}/{namespace}/{name}"
    return ObjectMeta(
        name=name,
        namespace=namespace,
        uid=uid,
        resource_version=str(meta.get("resourceVersion") or ""),
        labels=str_map(meta.get("labels"), f"{kind}.metadata.labels"),
        annotations=str_map(meta.get("annotations"), f"{kind}.metadata.annotations"),
        creation_timestamp=_str(meta.get("creationTimestamp"), f"{kind}.metadata.creationTimestamp"),
        deleting=meta.get("deletionTimestamp") is not None,
        generation=generation if isinstance(generation := meta.get("generation"), int) and generation >= 0 else 0,
    )


# --- node selectors (nodeSelector, node affinity) --------------------------------------------

_SELECTOR_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def is_label_value(value: str) -> bool:
    """apimachinery's IsValidLabelValue: at most 63 bytes of letters, digits, '-', '_', '.',
    starting and ending with a letter or digit (or empty); why not: `label_value_errors`."""
    return not label_value_errors(value)


INT32_MAX = 2**31 - 1  # the API's int32 fields (replicas, priority, weights, ...) and Go's int32


_LABEL_VALUE_MESSAGE = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
                        "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value', "
                        " or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")


def label_value_errors(value: str) -> list[str]:
    """apimachinery's content.IsLabelValue messages (empty when the value is a label value).
    surrogatepass: a lone surrogate (PyYAML reads "\\ud800" from a what-if file) counts its 3
    bytes and fails the pattern, rather than raising UnicodeEncodeError out of the parser."""
    errors = []
    if len(value.encode("utf-8", "surrogatepass")) > 63:
        errors.append("must be no more than 63 bytes")
    if _LABEL_VALUE.fullmatch(value) is None:
        errors.append(_LABEL_VALUE_MESSAGE)
    return errors


def _requirement_errors(key: str, op: str, values: tuple[str, ...]) -> tuple[str, ...]:
    """labels.NewRequirement's field errors for what pod validation lets through (value counts and
    keys the apiserver already checked): Gt/Lt values strconv.ParseInt cannot read, then every
    value that is no label value (its path ends in the key: validateLabelValue's path.Key)."""
    errors = []
    if op in ("Gt", "Lt"):
        errors += [f"values[{i}]: Invalid value: {quoted(value)}: for 'Gt', 'Lt' operators, the value must be an "
                   "integer" for i, value in enumerate(values) if go_int64(value) is None]
    for i, value in enumerate(values):
        messages = label_value_errors(value)
        if messages:
            errors.append(f"values[{i}][{key}]: Invalid value: {quoted(value)}: {'; '.join(messages)}")
    return tuple(errors)


def aggregate_error(messages: Sequence[str]) -> str:
    """apimachinery's errors.NewAggregate(...).Error(): one message as it is, several (repeats
    dropped) as `[a, b]`."""
    unique = list(dict.fromkeys(messages))
    return unique[0] if len(unique) == 1 else f"[{', '.join(unique)}]"


@dataclass(frozen=True, slots=True)
class SelectorTerm:
    """One NodeSelectorTerm: all label expressions and field expressions must hold."""

    expressions: tuple[Requirement, ...]
    fields: tuple[Requirement, ...]

    def named_nodes(self) -> frozenset[str] | None:
        """The only nodes the term can match by its `metadata.name In` requirements (ANDed: their
        values intersected), or None when it has none (NodeAffinity's PreFilter)."""
        names: frozenset[str] | None = None
        for req in self.fields:
            if req.operator == "In":
                names = frozenset(req.values) if names is None else names & frozenset(req.values)
        return names

    def parse_errors(self, path: str) -> list[str]:
        """What component-helpers' newNodeSelectorTerm reports parsing the term at `path` (e.g.
        "[0]"): its requirements' errors under their paths (matchFields have none: the
        apiserver refuses every field requirement the parser would)."""
        return [f"{path}.matchExpressions[{j}].{error}" for j, req in enumerate(self.expressions) for error in req.errors]

    def matches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        if not self.expressions and not self.fields:
            return False  # an empty term matches nothing (upstream NodeSelectorTerm semantics)
        for req in self.expressions:
            if not req.matches(labels):
                return False
        for req in self.fields:
            if not req.matches({"metadata.name": node_name}):
                return False
        return True


def _requirements(value: object, where: str, fields: bool) -> tuple[Requirement, ...]:
    out = []
    for i, raw in enumerate(_list(value, where)):
        item = _mapping(raw, f"{where}[{i}]")
        key = _str(item.get("key"), f"{where}[{i}].key")
        op = _str(item.get("operator"), f"{where}[{i}].operator")
        values = tuple(str(v) for v in _list(item.get("values"), f"{where}[{i}].values"))
        if op not in _SELECTOR_OPERATORS or (fields and op not in ("In", "NotIn")):
            raise ObjectError(f"{where}[{i}].operator: Unsupported value: {quoted(op)}")
        if op in ("In", "NotIn") and not values:
            raise ObjectError(f"{where}[{i}].values: Required value: must be specified when `operator` is 'In' or 'NotIn'")
        if op in ("Exists", "DoesNotExist") and values:
            raise ObjectError(f"{where}[{i}].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
        if op in ("Gt", "Lt") and len(values) != 1:
            raise ObjectError(f"{where}[{i}].values: Required value: must be specified single value when `operator` is 'Lt' or 'Gt'")
        if fields and key != "metadata.name":
            raise ObjectError(f"{where}[{i}].key: Invalid value: {quoted(key)}: not a supported field selector key")
        # what the apiserver takes but the scheduler cannot parse is kept as the requirement's
        # errors (see Requirement); what the apiserver itself refuses above refuses the object
        out.append(Requirement(key, op, values, () if fields else _requirement_errors(key, op, values)))
    return tuple(out)


def parse_selector_term(value: object, where: str) -> SelectorTerm:
    term = _mapping(value, where)
    return SelectorTerm(
        _requirements(term.get("matchExpressions"), f"{where}.matchExpressions", fields=False),
        _requirements(term.get("matchFields"), f"{where}.matchFields", fields=True),
    )


def selects(node_selector: Iterable[tuple[str, str]], required_terms: tuple[SelectorTerm, ...] | None,
            node_name: str, labels: Mapping[str, str]) -> bool:
    """Whether a pod's nodeSelector (its items) and required node affinity let it go to the node:
    NodeAffinity's Filter, and the nodes `capacity` sums for a gang's can-never-fit verdict."""
    if any(labels.get(key) != value for key, value in node_selector):
        return False
    return required_terms is None or any(term.matches(node_name, labels) for term in required_terms)


@dataclass(frozen=True, slots=True)
class PreferredTerm:
    weight: int
    term: SelectorTerm


# --- taints and tolerations ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        """`key=value:Effect` (`key:Effect` without a value), as kubectl writes a taint."""
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, taint: Taint) -> bool:
        """`v1.Toleration.ToleratesTaint`: empty effect matches all, empty key+Exists matches all."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return False  # Lt/Gt need the alpha TaintTolerationComparisonOperators gate (off in 1.36); others match nothing


# --- nodes -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Node:
    meta: ObjectMeta
    unschedulable: bool
    taints: tuple[Taint, ...]
    allocatable: Resources

    @property
    def name(self) -> str:
        return self.meta.name


def parse_node(obj: JSON) -> Node:
    meta = parse_meta(obj, "Node")
    spec = _mapping(obj.get("spec"), "Node.spec")
    status = _mapping(obj.get("status"), "Node.status")
    taints = []
    for i, raw in enumerate(_list(spec.get("taints"), "Node.spec.taints")):
        item = _mapping(raw, f"Node.spec.taints[{i}]")
        effect = _str(item.get("effect"), f"Node.spec.taints[{i}].effect")
        if effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise ObjectError(f"Node.spec.taints[{i}].effect: Unsupported value: {quoted(effect)}")
        taints.append(Taint(_str(item.get("key"), f"Node.spec.taints[{i}].key"),
                            _str(item.get("value"), f"Node.spec.taints[{i}].value"), effect))
    return Node(
        meta=meta,
        unschedulable=bool(spec.get("unschedulable", False)),
        taints=tuple(taints),
        allocatable=parse_resource_list(status.get("allocatable"), "Node.status.allocatable"),
    )


# --- pods ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Container:
    name: str
    requests: Resources  # requests, defaulted from limits the way the apiserver does
    kind: ContainerKind = APP  # plain init container, sidecar or app container (see lifecycle)


@dataclass(frozen=True, slots=True)
class GangTopology:
    """Where a gang's members must (`required`) or should (`preferred`) be together: node label
    keys naming a topology level ("" = none)."""

    required: str = ""
    preferred: str = ""


def gang_topology(annotations: Mapping[str, str]) -> GangTopology | None:
    """The `tessera.dev/topology-*` annotations (on a PodGroup, or a label gang's members: see state/gang_topology.py)."""
    required = annotations.get(TOPOLOGY_REQUIRED, "").strip()
    preferred = annotations.get(TOPOLOGY_PREFERRED, "").strip()
    return GangTopology(required, preferred) if required or preferred else None


def topology_annotation_error(annotations: Mapping[str, str], kind: str) -> str | None:
    """A `tessera.dev/topology-*` value that is no label key, as the object's invalid field (`kind`
    names it): no node can carry it. A PodGroup with one is refused (its members wait, saying
    why); a label gang's member is only reported — a pod is never left out of the cache, where it
    would hold nothing — and a required level no node has keeps its gang waiting."""
    for annotation in (TOPOLOGY_REQUIRED, TOPOLOGY_PREFERRED):
        value = annotations.get(annotation, "").strip()
        if value and (problem := label_key_problem(value)) is not None:
            return f"{kind}.metadata.annotations[{annotation}]: Invalid value: {quoted(value)}: {problem}"
    return None


def gang_key(namespace: str, name: str, api: str) -> str:
    """The key of the gang a PodGroup `name` of `api` is, "ns/<api group>/name", or, `api` "", a
    label gang's, "ns/name". The three forms name their groups apart (kube-scheduler's
    GangScheduling and scheduler-plugins' Coscheduling each know only their own PodGroups, and the
    label form names no object), so one name in two forms is two gangs. Names hold no "/": no key
    is two groups'. Users read a gang by `gang_name`."""
    return f"{namespace}/{api}/{name}" if api else f"{namespace}/{name}"


def gang_key_parts(key: str) -> tuple[str, str]:
    """(namespace, name) of a `gang_key`."""
    return key.partition("/")[0], key.rpartition("/")[2]


def gang_name(key: str) -> str:
    """A gang as views, Events and messages name it: its key, but "ns/name" for a scheduler-plugins
    PodGroup, as scheduler-plugins writes it (util.GetPodGroupFullName) and as Tessera always
    showed it — the API in its key only keeps it apart from a label gang of the same name."""
    namespace, name = gang_key_parts(key)
    return f"{namespace}/{name}" if key == gang_key(namespace, name, PLUGINS_API) else key


@dataclass(frozen=True, slots=True)
class GangRef:
    key: str  # gang_key: "<namespace>/<name>" for the label form, "<namespace>/<api group>/<name>" for a PodGroup
    min_available: int | None  # from labels; None when a PodGroup object decides
    from_podgroup: bool
    api: str = ""  # the PodGroup's API group (PLUGINS_API or WORKLOAD_API); "" for the label form
    topology: GangTopology | None = None  # the label form's, from the member's annotations


@dataclass(frozen=True, slots=True)
class HostPort:
    """A port a container takes on its node (upstream's ContainerPort with a hostPort), sanitized
    as HostPortInfo.sanitize does: an empty hostIP is 0.0.0.0, an empty protocol TCP."""

    ip: str
    protocol: str
    port: int


PROTOCOLS = ("TCP", "UDP", "SCTP")
BIND_ALL = "0.0.0.0"  # upstream's DefaultBindAllHostIP


def _port_number(value: object, where: str, zero: bool) -> int:
    """A port number as the apiserver's validation takes it (1-65535; 0 too where `zero`: an
    unset hostPort)."""
    if not isinstance(value, int) or isinstance(value, bool) or not (0 if zero else 1) <= value <= 65535:
        raise ObjectError(f"{where}: Invalid value: {quoted(value)}: must be between 1 and 65535, inclusive"
                          + (" (or 0: no host port)" if zero else ""))
    return value


def _host_ports(containers: Sequence[tuple[str, object, bool]], host_network: bool) -> tuple[HostPort, ...]:
    """The host ports a pod takes while it runs (upstream's util.GetHostPorts, v1.36): those of its
    app containers and of its init containers with restartPolicy Always (sidecars), each given as
    `(where, raw container, counted)`. A hostNetwork pod's container port is its host port where
    none is set: the apiserver defaults it so (SetDefaults_Pod, defaultHostNetworkPorts), and a
    replayed object may come without. Every container's ports are checked: a bad one refuses the
    pod, as the apiserver's validation would have."""
    found: list[HostPort] = []
    for where, raw, counted in containers:
        item = _mapping(raw, where)
        for i, port_raw in enumerate(_list(item.get("ports"), f"{where}.ports")):
            at = f"{where}.ports[{i}]"
            port = _mapping(port_raw, at)
            container_port = _port_number(port.get("containerPort"), f"{at}.containerPort", zero=False)
            host_port = _port_number(port.get("hostPort", 0), f"{at}.hostPort", zero=True)
            protocol = _str(port.get("protocol"), f"{at}.protocol") or "TCP"
            if protocol not in PROTOCOLS:
                raise ObjectError(f"{at}.protocol: Unsupported value: {quoted(protocol)}: supported values: "
                                  + ", ".join(f'"{p}"' for p in PROTOCOLS))
            host_ip = _str(port.get("hostIP"), f"{at}.hostIP") or BIND_ALL
            if host_network and host_port == 0:
                host_port = container_port
            if counted and host_port > 0:
                found.append(HostPort(host_ip, protocol, host_port))
    return tuple(found)


@dataclass(frozen=True, slots=True)
class ClaimRef:
    """One claim a pod's volumes name: the claim's name, and whether it is an ephemeral volume's."""

    name: str
    ephemeral: bool


def pod_claims(spec: JSON, pod_name: str) -> tuple[ClaimRef, ...]:
    """The claims a pod's spec.volumes name, in order (upstream's podHasPVCs walk)."""
    claims: list[ClaimRef] = []
    for i, raw in enumerate(_list(spec.get("volumes"), "Pod.spec.volumes")):
        volume = _mapping(raw, f"Pod.spec.volumes[{i}]")
        source = volume.get("persistentVolumeClaim")
        if source is not None:
            name = _str(_mapping(source, f"Pod.spec.volumes[{i}].persistentVolumeClaim").get("claimName"),
                        f"Pod.spec.volumes[{i}].persistentVolumeClaim.claimName")
            claims.append(ClaimRef(name, False))
        elif volume.get("ephemeral") is not None:
            claims.append(ClaimRef(f"{pod_name}-{_str(volume.get('name'), f'Pod.spec.volumes[{i}].name')}", True))
    return tuple(claims)


@dataclass(slots=True)
class Pod:
    meta: ObjectMeta
    scheduler_name: str
    node_name: str
    phase: str
    priority: int
    node_selector: dict[str, str]
    required_terms: tuple[SelectorTerm, ...] | None
    preferred_terms: tuple[PreferredTerm, ...]
    tolerations: tuple[Toleration, ...]
    containers: tuple[Container, ...]  # init containers first (kubelet order), then app containers
    requests: Resources  # pod total (fit and accounting)
    scoring_requests: Resources  # with the non-zero CPU/memory defaults (scoring only)
    node_scoring_requests: Resources  # what it adds to its node's scoring totals (NonZeroRequested)
    gang: GangRef | None
    gated: bool
    devices: ann.DeviceAssignment | None = None
    device_error: str | None = None
    held_devices: ann.DeviceAssignment | None = None  # ann.HELD_DEVICES: held as well while bound
    held_error: str | None = None  # ann.HELD_DEVICES unreadable: fails closed like device_error
    allocating: bool = False
    # a label or annotation we could not use or do not read (reported, the pod still counts)
    label_error: str | None = None
    # other schedulers' keys it carries that Tessera does not read ("annotation gpu-fraction"):
    # told once (`foreign`), never read
    ignored: tuple[str, ...] = ()
    # pod (anti-)affinity terms Tessera does not read, by field (`pod_terms`): required
    # ones are refused (TesseraUnhonouredTerms), preferred ones told once
    unhonoured: tuple[str, ...] = ()
    unread: tuple[str, ...] = ()
    # required pod affinity and anti-affinity terms (InterPodAffinity's filter; its score reads
    # the required affinity of existing pods too)
    affinity: tuple[PodTerm, ...] = ()
    anti_affinity: tuple[PodTerm, ...] = ()
    # DoNotSchedule topology spread constraints (PodTopologySpread's filter)
    spread: tuple[SpreadConstraint, ...] = ()
    # ScheduleAnyway topology spread constraints (PodTopologySpread's score)
    soft_spread: tuple[SpreadConstraint, ...] = ()
    # preferred pod affinity and anti-affinity terms (InterPodAffinity's score)
    preferred_affinity: tuple[WeightedPodTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedPodTerm, ...] = ()
    preempt_never: bool = False  # spec.preemptionPolicy: Never
    start_time: str = ""  # status.startTime (RFC 3339; "" before the kubelet starts it)
    nominated_node: str = ""  # status.nominatedNodeName
    preempted: bool = False  # terminating with DisruptionTarget=True, reason PreemptionByScheduler
    preemption_mark: PreemptionMark | None = None  # that condition, terminating or not
    owners: tuple[str, ...] = ()  # metadata.ownerReferences' names (a PodGroup's occupiedBy)
    host_ports: tuple[HostPort, ...] = ()  # the ports it takes on its node (NodePorts)
    claims: tuple[ClaimRef, ...] = ()  # the PersistentVolumeClaims its volumes name (VolumeBinding)

    @property
    def key(self) -> str:
        return self.meta.key

    @property
    def uid(self) -> str:
        return self.meta.uid

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    def container_phases(self) -> dict[str, Phases]:
        """Which phases of the pod's life each container runs in (`lifecycle`)."""
        return container_phases((c.name, c.kind) for c in self.containers)


# What the kubelet reports of an in-place resize (InPlacePodVerticalScaling, GA since 1.35):
# the requests it runs with (`status...resources.requests`) and the ones it admitted
# (`allocatedResources`).
ResizeStatus = tuple[ExactResources, ExactResources]


def _container(raw: object, where: str, init: bool) -> tuple[Container, ExactResources]:
    """A container (its requests rounded up: device grants are made per container; its kind says
    whether it is a sidecar, a restartable init container) and its exact requests; `init`: it is
    listed in `spec.initContainers`."""
    item = _mapping(raw, where)
    name = _str(item.get("name"), f"{where}.name")
    resources = _mapping(item.get("resources"), f"{where}.resources")
    requests = exact_resource_list(resources.get("requests"), f"{where}.resources.requests")
    limits = exact_resource_list(resources.get("limits"), f"{where}.resources.limits")
    for res, amount in limits.items():
        requests.setdefault(res, amount)
    kind = (SIDECAR if item.get("restartPolicy") == "Always" else INIT) if init else APP
    return Container(name, {res: math.ceil(amount) for res, amount in requests.items()}, kind), requests


def _counted(container: Container, requests: ExactResources, statuses: Mapping[str, ResizeStatus],
             infeasible: bool) -> ExactResources:
    """What an app or sidecar container counts with: its effective requests when the kubelet
    reports a resize status for it (upstream AggregateContainerRequests, UseStatusResources;
    plain init containers are never resized and count their spec)."""
    status = statuses.get(container.name)
    return requests if status is None else _effective_requests(requests, status, infeasible)


def _effective_requests(spec: ExactResources, status: ResizeStatus, infeasible: bool) -> ExactResources:
    """Upstream determineEffectiveRequests: a resized container (or pod) holds the larger of its
    spec, actuated and allocated requests until the kubelet is done; with the resize Infeasible
    the spec is never run, so only actuated and allocated count."""
    actuated, allocated = status
    out: ExactResources = {} if infeasible else dict(spec)
    max_into(out, actuated)
    max_into(out, allocated)
    return out


def _resize_status(status: JSON, where: str) -> ResizeStatus | None:
    """A `resources`/`allocatedResources` pair of a pod or container status; None when it has
    no `resources` (upstream reads the spec then). The kubelet writes these and the apiserver
    checks their quantities; one that cannot be read counts as absent rather than making the
    whole (bound) pod unreadable, which would leave what it holds looking free."""
    if status.get("resources") is None:
        return None
    try:
        resources = _mapping(status.get("resources"), f"{where}.resources")
        return (exact_resource_list(resources.get("requests"), f"{where}.resources.requests"),
                exact_resource_list(status.get("allocatedResources"), f"{where}.allocatedResources"))
    except ObjectError:
        return None


def _container_resize_statuses(status: JSON) -> dict[str, ResizeStatus]:
    """Container name -> its resize status, from app and init container statuses."""
    out: dict[str, ResizeStatus] = {}
    for field_name in ("containerStatuses", "initContainerStatuses"):
        items = status.get(field_name)
        for item in items if isinstance(items, list) else ():
            name = item.get("name") if isinstance(item, Mapping) else None
            if isinstance(name, str) and (found := _resize_status(item, f"Pod.status.{field_name}")) is not None:
                out[name] = found
    return out


def _resize_infeasible(status: JSON) -> bool:
    """Upstream IsPodResizeInfeasible: the first PodResizePending condition has reason Infeasible."""
    conditions = status.get("conditions")
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, Mapping) and condition.get("type") == "PodResizePending":
            return condition.get("reason") == "Infeasible"
    return False


def _pod_level_requests(spec: JSON, status: JSON, infeasible: bool, apps: Sequence[ExactResources],
                        inits: Sequence[tuple[ExactResources, bool]]) -> ExactResources:
    """`spec.resources` requests of the resources that may be set at pod level, defaulted as the
    apiserver does (`pod_level_requests`: from the containers' spec requests `apps` and `inits`,
    then from the pod-level limits); others are ignored, as upstream. A pod-level resize in
    progress (`status.resources`, InPlacePodLevelResourcesVerticalScaling, on since 1.36) counts
    as upstream's PodRequests does: effective requests of those names."""
    resources = _mapping(spec.get("resources"), "Pod.spec.resources")
    requests = exact_resource_list(resources.get("requests"), "Pod.spec.resources.requests")
    limits = exact_resource_list(resources.get("limits"), "Pod.spec.resources.limits")
    containers = aggregate_container_requests(apps, inits) if limits else {}
    pod_level = pod_level_requests(requests, limits, containers)
    resize = _resize_status(status, "Pod.status") if pod_level else None
    if resize is None:
        return pod_level
    effective = _effective_requests(pod_level, resize, infeasible)
    return {name: effective.get(name, 0) for name in pod_level}


def _device_annotation(meta: ObjectMeta, key: str) -> tuple[ann.DeviceAssignment | None, str | None]:
    """A pod's device assignment under `key` (tessera.dev/devices or tessera.dev/held-devices,
    one format), or why it cannot be read (the caller fails closed on it)."""
    try:
        return ann.decode_devices(meta.annotations[key]), None
    except ann.AnnotationError as err:
        return None, f"annotation {key} of pod {meta.key}: {err}"


def _gang_label_error(meta: ObjectMeta) -> str | None:
    raw_min = meta.labels.get(GANG_MIN_LABEL)
    if not meta.labels.get(GANG_NAME_LABEL) or raw_min is None:
        return None
    if go_int64(raw_min) is None:  # Go's strconv.Atoi, as coscheduling reads it ("1_0" is no integer)
        return (f"Pod.metadata.labels[{GANG_MIN_LABEL}]: Invalid value: {quoted(raw_min)}: must be an integer; "
                "the pod is scheduled as a single pod, not as a gang member")
    return None


def _unread_topology(meta: ObjectMeta, gang: GangRef | None) -> str | None:
    """A `tessera.dev/topology-*` annotation on a pod where none is read: a pod in no gang, or a
    member of a PodGroup (its group's own annotations, or schedulingConstraints, place it). Only a
    label-form gang reads them from its members."""
    if gang is not None and not gang.api:
        return None
    present = next((key for key in (TOPOLOGY_REQUIRED, TOPOLOGY_PREFERRED) if meta.annotations.get(key, "").strip()),
                   None)
    if present is None:
        return None
    why = ("the pod is in no gang (a topology constraint places a gang's members together)" if gang is None else
           "a PodGroup's members are placed by the PodGroup's own tessera.dev/topology-* annotations "
           "(or its schedulingConstraints)")
    return f"Pod.metadata.annotations[{present}] is not read: {why}"


def _gang(meta: ObjectMeta, spec: JSON) -> GangRef | None:
    scheduling_group = _mapping(spec.get("schedulingGroup"), "Pod.spec.schedulingGroup")
    workload_group = _str(scheduling_group.get("podGroupName"), "Pod.spec.schedulingGroup.podGroupName")
    if workload_group:
        return GangRef(gang_key(meta.namespace, workload_group, WORKLOAD_API), None, True, WORKLOAD_API)
    group = meta.labels.get(PODGROUP_LABEL)
    if group:
        return GangRef(gang_key(meta.namespace, group, PLUGINS_API), None, True, PLUGINS_API)
    name = meta.labels.get(GANG_NAME_LABEL)
    raw_min = meta.labels.get(GANG_MIN_LABEL)
    if not name or raw_min is None:
        return None
    minimum = go_int64(raw_min)  # strconv.Atoi: Python's int() would also take "1_0" or " 1"
    if minimum is None or minimum < 1:
        return None  # as coscheduling v0.18: a min-available that is not an integer >= 1 means "no gang"
    return GangRef(gang_key(meta.namespace, name, ""), minimum, False, topology=gang_topology(meta.annotations))


def parse_pod(obj: JSON) -> Pod:
    meta = parse_meta(obj, "Pod")
    spec = _mapping(obj.get("spec"), "Pod.spec")
    status = _mapping(obj.get("status"), "Pod.status")
    # a bound pod resized in place counts what its containers hold (upstream UseStatusResources)
    infeasible = _resize_infeasible(status)
    statuses = _container_resize_statuses(status)
    init_list = _list(spec.get("initContainers"), "Pod.spec.initContainers")
    app_list = _list(spec.get("containers"), "Pod.spec.containers")
    inits = [_container(c, f"Pod.spec.initContainers[{i}]", True) for i, c in enumerate(init_list)]
    apps = [_container(c, f"Pod.spec.containers[{i}]", False) for i, c in enumerate(app_list)]
    app_requests = [_counted(c, r, statuses, infeasible) for c, r in apps]
    init_requests = [(_counted(c, r, statuses, infeasible) if c.kind == SIDECAR else r, c.kind == SIDECAR)
                     for c, r in inits]
    overhead = exact_resource_list(spec.get("overhead"), "Pod.spec.overhead")
    pod_level = _pod_level_requests(spec, status, infeasible, [r for _, r in apps],
                                    [(r, c.kind == SIDECAR) for c, r in inits])
    requests = pod_requests(app_requests, init_requests, overhead, pod_level)
    scoring = pod_requests(
        (with_scoring_defaults(r) for r in app_requests),
        ((with_scoring_defaults(r), s) for r, s in init_requests),
        overhead, pod_level,
    )
    # what the pod's requests name (overhead included: upstream's getNonMissingContainerRequests
    # looks at PodRequests, which adds it) — a resource named there gets no scoring default
    named = {*pod_level, *overhead, *(name for r in app_requests for name in r),
             *(name for r, _ in init_requests for name in r)}
    defaults = node_scoring_defaults(named, bool(pod_level))
    on_node = scoring if len(defaults) == 2 else pod_requests(
        (with_scoring_defaults(r, defaults) for r in app_requests),
        ((with_scoring_defaults(r, defaults), s) for r, s in init_requests),
        overhead, pod_level,
    )
    affinity = _mapping(_mapping(spec.get("affinity"), "Pod.spec.affinity").get("nodeAffinity"), "Pod.spec.affinity.nodeAffinity")
    required: tuple[SelectorTerm, ...] | None = None
    req_raw = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if req_raw is not None:
        where = "Pod.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        terms = _list(_mapping(req_raw, where).get("nodeSelectorTerms"), where)
        required = tuple(parse_selector_term(t, f"{where}[{i}]") for i, t in enumerate(terms))
    preferred = []
    pref_where = "Pod.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
    for i, raw in enumerate(_list(affinity.get("preferredDuringSchedulingIgnoredDuringExecution"), pref_where)):
        item = _mapping(raw, f"{pref_where}[{i}]")
        weight = item.get("weight", 0)
        if not isinstance(weight, int) or isinstance(weight, bool) or not 1 <= weight <= 100:
            raise ObjectError(f"{pref_where}[{i}].weight: Invalid value: {quoted(weight)}: must be in the range 1-100")
        preferred.append(PreferredTerm(weight, parse_selector_term(item.get("preference"), f"{pref_where}[{i}].preference")))
    tolerations = []
    for i, raw in enumerate(_list(spec.get("tolerations"), "Pod.spec.tolerations")):
        item = _mapping(raw, f"Pod.spec.tolerations[{i}]")
        tolerations.append(Toleration(
            _str(item.get("key"), f"Pod.spec.tolerations[{i}].key"),
            _str(item.get("operator"), f"Pod.spec.tolerations[{i}].operator", "Equal") or "Equal",
            _str(item.get("value"), f"Pod.spec.tolerations[{i}].value"),
            _str(item.get("effect"), f"Pod.spec.tolerations[{i}].effect"),
        ))
    priority = spec.get("priority", 0)
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise ObjectError(f"Pod.spec.priority: Invalid value: {quoted(priority)}: must be an integer")
    pod = Pod(
        meta=meta,
        scheduler_name=_str(spec.get("schedulerName"), "Pod.spec.schedulerName", "default-scheduler") or "default-scheduler",
        node_name=_str(spec.get("nodeName"), "Pod.spec.nodeName"),
        phase=_str(status.get("phase"), "Pod.status.phase", "Pending") or "Pending",
        priority=priority,
        node_selector=str_map(spec.get("nodeSelector"), "Pod.spec.nodeSelector"),
        required_terms=required,
        preferred_terms=tuple(preferred),
        tolerations=tuple(tolerations),
        containers=tuple(c for c, _ in (*inits, *apps)),
        requests=requests,
        scoring_requests=scoring,
        node_scoring_requests=on_node,
        gang=_gang(meta, spec),
        gated=bool(_list(spec.get("schedulingGates"), "Pod.spec.schedulingGates")),
    )
    if ann.DEVICES in meta.annotations:
        pod.devices, pod.device_error = _device_annotation(meta, ann.DEVICES)
    elif pod.node_name and ann.PHASE in meta.annotations:
        # Tessera's Binding writes the phase with the devices, and nothing removes them: a bound
        # pod with the one and not the other was given devices that are written nowhere now (a
        # hand edit, a tool rewriting annotations). It still has them, so they are unknown, not free.
        pod.device_error = (f"annotation {ann.DEVICES} of pod {meta.key} is missing, but its {ann.PHASE} says "
                            "Tessera gave it devices: which ones is unknown")
    if ann.HELD_DEVICES in meta.annotations:
        pod.held_devices, pod.held_error = _device_annotation(meta, ann.HELD_DEVICES)
    pod.allocating = meta.annotations.get(ann.PHASE) == ann.PHASE_ALLOCATING
    pod.ignored = ignored_keys(meta.annotations, meta.labels, pod.gang is not None)
    pod.unhonoured, pod.unread = pod_terms(spec)
    pod.affinity, pod.anti_affinity = required_pod_terms(spec, meta.namespace)
    pod.spread = spread_constraints(spec, meta.labels)
    pod.soft_spread = spread_constraints(spec, meta.labels, "ScheduleAnyway")
    pod.preferred_affinity, pod.preferred_anti_affinity = preferred_pod_terms(spec, meta.namespace)
    pod.label_error = _gang_label_error(meta) or _unread_topology(meta, pod.gang) or (
        topology_annotation_error(meta.annotations, "Pod") if pod.gang is not None else None)
    policy = _str(spec.get("preemptionPolicy"), "Pod.spec.preemptionPolicy", DEFAULT_PREEMPTION_POLICY)
    pod.preempt_never = policy == "Never"
    pod.start_time = _str(status.get("startTime"), "Pod.status.startTime")
    pod.nominated_node = _str(status.get("nominatedNodeName"), "Pod.status.nominatedNodeName")
    pod.preemption_mark = _preemption_mark(status)
    pod.preempted = meta.deleting and pod.preemption_mark is not None
    pod.owners = _owner_names(obj)
    pod.claims = pod_claims(spec, meta.name)
    host_network = spec.get("hostNetwork", False)
    if not isinstance(host_network, bool):
        raise ObjectError(f"Pod.spec.hostNetwork: expected a boolean, got {type(host_network).__name__}")
    pod.host_ports = _host_ports(
        [*((f"Pod.spec.initContainers[{i}]", raw, container.kind == SIDECAR)
           for i, (raw, (container, _)) in enumerate(zip(init_list, inits))),
         *((f"Pod.spec.containers[{i}]", raw, True) for i, raw in enumerate(app_list))], host_network)
    return pod


def _owner_names(obj: JSON) -> tuple[str, ...]:
    """The names in metadata.ownerReferences. Only a PodGroup's occupiedBy reads them, so an
    entry without a name is passed over rather than refusing the pod (the apiserver validates
    owner references anyway)."""
    meta = obj.get("metadata")
    refs = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
    if not isinstance(refs, list):
        return ()
    return tuple(name for ref in refs if isinstance(ref, Mapping) and isinstance(name := ref.get("name"), str) and name)


@dataclass(frozen=True, slots=True)
class PreemptionMark:
    """A scheduler chose this pod as a preemption victim and wrote it on the pod (before deleting it)."""

    scheduler: str  # the preemptor's schedulerName: the prefix of upstream's condition message
    since: float | None  # lastTransitionTime, seconds since the epoch (None: absent or unreadable)


def _preemption_mark(status: JSON) -> PreemptionMark | None:
    """The first DisruptionTarget condition, when True with reason PreemptionByScheduler
    (upstream's podTerminatingByPreemption reads the same, with the deletion checked apart).
    Conditions of an odd shape are not a reason to refuse the pod: they only mean no mark."""
    conditions = status.get("conditions")
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, Mapping) and condition.get("type") == "DisruptionTarget":
            if condition.get("status") != "True" or condition.get("reason") != "PreemptionByScheduler":
                return None
            message = condition.get("message")
            scheduler = message.partition(": ")[0] if isinstance(message, str) and ": " in message else ""
            return PreemptionMark(scheduler, _timestamp(condition.get("lastTransitionTime")))
    return None


# --- Tessera and scheduler-plugins custom resources ------------------------------------------


@dataclass(frozen=True, slots=True)
class Device:
    """One ExtendedResource: a physical device on a node."""

    meta: ObjectMeta
    node_name: str
    resource_name: str
    device_id: str
    attributes: dict[str, str]
    capacity: dict[str, Amount]
    unschedulable: bool
    healthy: bool
    # status.lastHeartbeatTime in seconds since the epoch: proof that a node agent serves the node
    heartbeat: float | None = field(default=None, compare=False)
    # another ExtendedResource of the node names the same deviceID (set by the ledger, not read from
    # the object): the node agent hands GPUs out by deviceID, so neither is given to a pod
    duplicate: bool = False

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def schedulable(self) -> bool:
        return not self.unschedulable_because

    @property
    def unschedulable_because(self) -> str:
        """Why no new pod may take it, the first that applies: unhealthy (Healthy=False),
        cordoned (`spec.unschedulable`), its deviceID named twice (`duplicate`); "" when one may.
        `kubectl tessera explain` says it of the GPUs a slice finds no room on."""
        if not self.healthy:
            return UNHEALTHY_DEVICE
        if self.unschedulable:
            return CORDONED_DEVICE
        return DUPLICATE_DEVICE if self.duplicate else ""

    def same_spec(self, other: Device) -> bool:
        """Equal in everything scheduling reads: heartbeats and resourceVersions change nothing."""
        return self == other or (self.meta.uid == other.meta.uid and self.meta.name == other.meta.name
                                 and self.meta.labels == other.meta.labels
                                 and (self.node_name, self.resource_name, self.device_id, self.attributes,
                                      self.capacity, self.unschedulable, self.healthy)
                                 == (other.node_name, other.resource_name, other.device_id, other.attributes,
                                     other.capacity, other.unschedulable, other.healthy))


def parse_device(obj: JSON) -> Device:
    meta = parse_meta(obj, "ExtendedResource")
    spec = _mapping(obj.get("spec"), "ExtendedResource.spec")
    status = _mapping(obj.get("status"), "ExtendedResource.status")
    node_name = _str(spec.get("nodeName"), "ExtendedResource.spec.nodeName")
    if not node_name:
        raise ObjectError("ExtendedResource.spec.nodeName: Required value")
    resource_name = _str(spec.get("resourceName"), "ExtendedResource.spec.resourceName")
    capacity: dict[str, Amount] = {}
    for key, raw in _mapping(spec.get("capacity"), "ExtendedResource.spec.capacity").items():
        try:
            amount = exact(parse_quantity(raw))
        except QuantityError as err:
            raise ObjectError(f"ExtendedResource.spec.capacity[{key}]: {err}") from None
        if amount < 0:  # the CRD's quantity pattern admits a sign; no device has less than nothing
            # as upstream's ValidateNonnegativeQuantity words it (pkg/apis/core/validation/validation.go)
            raise ObjectError(f"ExtendedResource.spec.capacity[{key}]: Invalid value: {quoted(str(raw))}: "
                              "must be greater than or equal to 0")
        capacity[str(key)] = amount
    healthy = True
    for i, raw in enumerate(_list(status.get("conditions"), "ExtendedResource.status.conditions")):
        cond = _mapping(raw, f"ExtendedResource.status.conditions[{i}]")
        if cond.get("type") == "Healthy" and cond.get("status") != "True":
            healthy = False
    if status.get("phase") in ("Unhealthy", "Unknown"):
        healthy = False
    return Device(
        meta=meta,
        node_name=node_name,
        resource_name=resource_name,
        device_id=_str(spec.get("deviceID"), "ExtendedResource.spec.deviceID") or meta.name,
        attributes=str_map(spec.get("attributes"), "ExtendedResource.spec.attributes"),
        capacity=capacity,
        unschedulable=bool(spec.get("unschedulable", False)),
        healthy=healthy,
        heartbeat=_timestamp(status.get("lastHeartbeatTime")),
    )


def _timestamp(raw: object) -> float | None:
    """An RFC 3339 time as seconds since the epoch; None when absent or unreadable (no agent proof).
    A time without a zone is UTC, as Kubernetes writes them (never the machine's local zone)."""
    if not isinstance(raw, str) or not raw:
        return None
    try:
        parsed = datetime.fromisoformat(raw)
    except ValueError:
        return None
    return (parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=timezone.utc)).timestamp()


@dataclass(frozen=True, slots=True)
class PodGroup:
    meta: ObjectMeta
    min_member: int
    schedule_timeout_seconds: int | None
    priority_class_name: str = ""  # spec.priorityClassName: the gang's priority when set
    api: str = PLUGINS_API
    topology: GangTopology | None = None
    scheduled_condition: str = ""  # upstream's PodGroupScheduled status on the object: "True", "False" or ""
    phase: str = ""  # a scheduler-plugins status.phase ("" before anything wrote one)
    counts: tuple[int, int, int] = (0, 0, 0)  # a scheduler-plugins status.running, .succeeded, .failed
    # scheduler-plugins' spec.minResources: what the cluster must have free before any member is tried
    min_resources: Resources = field(default_factory=dict)
    occupied_by: str = ""  # a scheduler-plugins status.occupiedBy (the controller sets it once)
    constraint_key: str = ""  # a Workload API schedulingConstraints.topology key (upstream's placements)

    @property
    def key(self) -> str:
        """The key of the gang this PodGroup is (`gang_key`)."""
        return gang_key(self.meta.namespace, self.meta.name, self.api)

    @property
    def final_phase(self) -> str:
        """The object's phase if it is one after which nothing changes it (Finished, Failed), else ""."""
        return self.phase if self.phase in FINAL_GROUP_PHASES else ""


# scheduler-plugins' PodGroup controller stops reconciling a group in these phases (its status stays as it is)
FINAL_GROUP_PHASES = ("Finished", "Failed")


def podgroup_api(obj: JSON) -> str:
    """Which API a PodGroup object is of: upstream's by its apiVersion, else scheduler-plugins'."""
    api_version = obj.get("apiVersion")
    return WORKLOAD_API if isinstance(api_version, str) and api_version.startswith(WORKLOAD_API + "/") else PLUGINS_API


def parse_podgroup(obj: JSON) -> PodGroup:
    """A PodGroup of either API: scheduler-plugins' (`spec.minMember`, topology from the
    `tessera.dev/topology-*` annotations) or upstream's Workload API `scheduling.k8s.io/v1alpha2`."""
    if podgroup_api(obj) == WORKLOAD_API:
        return _parse_workload_podgroup(obj)
    meta = parse_meta(obj, "PodGroup")
    spec = _mapping(obj.get("spec"), "PodGroup.spec")
    minimum = spec.get("minMember", 1)
    if not isinstance(minimum, int) or isinstance(minimum, bool):
        raise ObjectError(f"PodGroup.spec.minMember: Invalid value: {quoted(minimum)}: must be an integer")
    # scheduler-plugins' CRD sets no minimum and its Coscheduling lets every member of a group
    # with minMember <= 0 through (PreFilter `len(pods) < minMember` and Permit never hold it):
    # such a group asks for no gang, which is what a minimum of one means here
    minimum = max(minimum, 1)
    timeout = spec.get("scheduleTimeoutSeconds")
    if timeout is not None and (not isinstance(timeout, int) or isinstance(timeout, bool) or timeout < 0):
        raise ObjectError(f"PodGroup.spec.scheduleTimeoutSeconds: Invalid value: {quoted(timeout)}")
    priority_class = _str(spec.get("priorityClassName"), "PodGroup.spec.priorityClassName")
    min_resources = parse_resource_list(spec.get("minResources"), "PodGroup.spec.minResources", integers=False)
    if (error := topology_annotation_error(meta.annotations, "PodGroup")) is not None:
        raise ObjectError(error)
    raw_status = obj.get("status")
    status = raw_status if isinstance(raw_status, dict) else {}  # a status is the writer's, never refused
    phase = status.get("phase")
    occupied = status.get("occupiedBy")
    counts = (_count(status.get("running")), _count(status.get("succeeded")), _count(status.get("failed")))
    return PodGroup(meta, minimum, timeout, priority_class, PLUGINS_API, gang_topology(meta.annotations),
                    phase=phase if isinstance(phase, str) else "", counts=counts, min_resources=min_resources,
                    occupied_by=occupied if isinstance(occupied, str) else "")


def _count(value: object) -> int:
    """A status count as written (int32), 0 when absent or not one."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _parse_workload_podgroup(obj: JSON) -> PodGroup:
    """Upstream's PodGroup: `schedulingPolicy.gang.minCount` (the `basic` policy: no minimum, 1),
    `schedulingConstraints.topology[0].key` a required domain (the API allows one constraint);
    the Tessera annotations add a preferred level."""
    meta = parse_meta(obj, "PodGroup")
    spec = _mapping(obj.get("spec"), "PodGroup.spec")
    policy = _mapping(spec.get("schedulingPolicy"), "PodGroup.spec.schedulingPolicy")
    gang = _mapping(policy.get("gang"), "PodGroup.spec.schedulingPolicy.gang")
    minimum = gang.get("minCount", 1) if policy.get("gang") is not None else 1
    if not isinstance(minimum, int) or isinstance(minimum, bool) or minimum < 1:
        raise ObjectError(f"PodGroup.spec.schedulingPolicy.gang.minCount: Invalid value: {quoted(minimum)}: "
                          "must be greater than or equal to 1")
    constraints = _mapping(spec.get("schedulingConstraints"), "PodGroup.spec.schedulingConstraints")
    where = "PodGroup.spec.schedulingConstraints.topology"
    keys = [_str(_mapping(item, f"{where}[{i}]").get("key"), f"{where}[{i}].key")
            for i, item in enumerate(_list(constraints.get("topology"), where))]
    if (error := topology_annotation_error(meta.annotations, "PodGroup")) is not None:
        raise ObjectError(error)
    annotated = gang_topology(meta.annotations) or GangTopology()
    required = keys[0] if keys else annotated.required
    topology = GangTopology(required, annotated.preferred) if required or annotated.preferred else None
    priority_class = _str(spec.get("priorityClassName"), "PodGroup.spec.priorityClassName")
    status = _mapping(obj.get("status"), "PodGroup.status")
    scheduled = next((str(c.get("status", "")) for c in _list(status.get("conditions"), "PodGroup.status.conditions")
                      if isinstance(c, Mapping) and c.get("type") == "PodGroupScheduled"), "")
    return PodGroup(meta, minimum, None, priority_class, WORKLOAD_API, topology, scheduled,
                    constraint_key=keys[0] if keys else "")


@dataclass(frozen=True, slots=True)
class PriorityClass:
    """A PriorityClass as both its readers need it: the scheduler (a PodGroup's priority is its
    class's value) and `what-if -f`, which gives a file's pods what the apiserver's Priority
    admission plugin would (value, preemptionPolicy, and the globalDefault class for a pod naming none)."""
    name: str
    value: int
    preemption_policy: str = DEFAULT_PREEMPTION_POLICY
    global_default: bool = False


def parse_priority_class(obj: JSON) -> PriorityClass:
    meta = parse_meta(obj, "PriorityClass")
    value = obj.get("value", 0)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ObjectError(f"PriorityClass.value: Invalid value: {quoted(value)}: must be an integer")
    # the API defaults preemptionPolicy, so a class read from it always has one
    policy = _str(obj.get("preemptionPolicy"), "PriorityClass.preemptionPolicy", DEFAULT_PREEMPTION_POLICY)
    default = obj.get("globalDefault")
    if default is not None and not isinstance(default, bool):
        raise ObjectError(f"PriorityClass.globalDefault: expected a boolean, got {type(default).__name__}")
    return PriorityClass(meta.name, value, policy, default is True)
