"""`kubectl tessera what-if -f`: which of the file's pods the apiserver's ResourceQuota admission would refuse.

Why: a tenant asks what-if "would this run?", and in a shared cluster the most common no is a
quota's: a Job asking 4 GPUs in a namespace whose ResourceQuota allows 3 was "placed", while the
apiserver refused its pods ("exceeded quota"). A refused pod is never created, so it is not placed
(and the GPUs it would have taken stay free for the file's later pods).

`admit` replays what the admission plugin does for each created pod, in creation order
(k8s.io/apiserver pkg/admission/plugin/resourcequota/controller.go CheckRequest, with the pod
evaluator of k8s.io/kubernetes pkg/quota/v1/evaluator/core/pods.go):
- a quota applies to a pod when its status.hard names a resource pods use and every scope of it
  (spec.scopes, read as Exists, and spec.scopeSelector's matchExpressions) matches the pod;
- one whose status lacks the usage of such a resource refuses it ("status unknown for quota");
- otherwise the pod's usage of the resources status.hard names, added to status.used (and the
  file's earlier pods the quota admitted), must stay within status.hard, else it is refused with
  the apiserver's words: "exceeded quota: NAME, requested: R=N, used: R=N, limited: R=N" (the
  exceeded resources alone, sorted by name, each quantity in Go's canonical form). Upstream reads
  status.hard, which the resourcequota controller copies from spec.hard: a quota it has not
  synced yet applies to no pod.
A pod's usage: pods and count/pods 1; cpu, memory and ephemeral-storage requests as X and
requests.X, limits as limits.X; hugepages-* as X and requests.X; an extended resource (such as
nvidia.com/gpu or a class.tessera.dev/ class) only as requests.X — requests as upstream's
PodRequests totals them (init containers, sidecars, pod-level resources, overhead).

Scopes read: Terminating and NotTerminating (spec.activeDeadlineSeconds set, >= 0), BestEffort and
NotBestEffort (no cpu or memory request or limit above 0 in any container, or at pod level), and
PriorityClass (In, NotIn, Exists, DoesNotExist on spec.priorityClassName, as the Priority admission
plugin left it: `probe_pods.resolve_priorities` gives a pod the globalDefault class's name). A
quota with any other scope (CrossNamespacePodAffinity, VolumeAttributesClass, one added later) is
taken as not applying, with a warning. Not judged: the cpu and memory requests and limits a quota
of them makes every container state ("failed quota: NAME: must specify ..."), the apiserver's
--admission-control-config-file limitedResources ("insufficient quota to consume"), which cannot
be read from the API, and quotas of other kinds (a file's PersistentVolumeClaims are not created).
When several quotas refuse a pod, the first by name is said (the apiserver's own order is its
cache's).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from scheduler.api.quantity import QuantityError, go_quantity, parse_quantity
from scheduler.core.objects import ObjectError, gang_name, parse_pod
from scheduler.core.resources import (CPU, EPHEMERAL_STORAGE, MEMORY, PODS, add_into, aggregate_container_requests,
                                      exact_pod_requests, is_integer_resource, is_pod_level, pod_level_requests)
from scheduler.kube.informers import ResourceKind

RESOURCE_QUOTAS = ResourceKind("ResourceQuota", "v1", "/api/v1/resourcequotas", builtin=True, namespaced=True)
SCOPES = ("Terminating", "NotTerminating", "BestEffort", "NotBestEffort", "PriorityClass")
RESOURCE_QUOTA = "ResourceQuota"  # the admission plugin, as `Refusal.plugin` names it
COUNT_PODS = "count/pods"
REQUESTS = "requests."
# the resources the pod evaluator matches by name (podResources); hugepages and extended
# resources by form (`_pods_use`)
POD_RESOURCES = frozenset({COUNT_PODS, PODS, CPU, MEMORY, EPHEMERAL_STORAGE,
                           *(f"{kind}.{name}" for kind in ("requests", "limits") for name in (CPU, MEMORY,
                                                                                            EPHEMERAL_STORAGE))})
HUGEPAGES = "hugepages-"

Usage = dict[str, Fraction]
Scope = tuple[str, str, tuple[str, ...]]  # (scopeName, operator, values)


@dataclass(frozen=True, slots=True)
class Refusal:
    """A pod of the file the apiserver would refuse to create: `message` is its Forbidden error's
    (after `pods "NAME" is forbidden: `); `gang` the pod's gang (`gang_name`), "" when it is in none;
    `plugin` the admission plugin that refuses it (ResourceQuota, LimitRanger)."""
    pod: str
    message: str
    gang: str = ""
    plugin: str = RESOURCE_QUOTA


def refusal(pod: Mapping[str, Any], message: str, plugin: str) -> Refusal:
    """The Refusal of a file's `pod` by admission `plugin`, in its words."""
    meta = pod.get("metadata") or {}
    return Refusal(f"{meta.get('namespace')}/{meta.get('name')}", message, _gang(pod), plugin)


@dataclass(slots=True)
class _Quota:
    name: str
    hard: Usage
    used: Usage
    # per resource: its status.hard and status.used quantity is written in a binary suffix (Gi),
    # which Go's Quantity keeps writing it in
    hard_binary: dict[str, bool]
    used_binary: dict[str, bool]
    scopes: list[Scope]


def admit(pods: Sequence[Mapping[str, Any]], quotas: Iterable[Mapping[str, Any]]) -> tuple[list[Refusal], list[str]]:
    """The file's `pods` (in creation order) the `quotas` (their namespaces' ResourceQuotas, as
    listed) would refuse, and warnings (one per quota that cannot be read or has a scope not read).
    A pod admitted adds its usage to every quota that applies to it, as the apiserver writes it."""
    warnings: list[str] = []
    by_namespace: dict[str, list[_Quota]] = {}
    for obj in sorted(quotas, key=lambda q: str((q.get("metadata") or {}).get("name"))):
        namespace = str((obj.get("metadata") or {}).get("namespace"))
        read = _quota(obj, namespace, warnings)
        if read is not None:
            by_namespace.setdefault(namespace, []).append(read)
    refusals = []
    for pod in pods:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        found = by_namespace.get(str(meta.get("namespace")), [])
        if not found:
            continue
        usage, binary = pod_usage(spec)
        why = _check(found, spec, usage, binary)
        if why:
            refusals.append(refusal(pod, why, RESOURCE_QUOTA))
    return refusals, warnings


def _quota(obj: Mapping[str, Any], namespace: str, warnings: list[str]) -> _Quota | None:
    """A listed ResourceQuota as admission reads it; None (with a warning) when it has a scope not
    read or a quantity that is not one."""
    name = str((obj.get("metadata") or {}).get("name"))
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    scopes: list[Scope] = [(str(scope), "Exists", ()) for scope in spec.get("scopes") or ()]
    for expression in (spec.get("scopeSelector") or {}).get("matchExpressions") or ():
        scopes.append((str(expression.get("scopeName")), str(expression.get("operator")),
                       tuple(map(str, expression.get("values") or ()))))
    unread = sorted({scope for scope, _, _ in scopes if scope not in SCOPES})
    if unread:
        warnings.append(f"ResourceQuota {namespace}/{name}: scope {', '.join(unread)} is not read: taken as not "
                        "applying to the file's pods")
        return None
    try:
        hard = {str(key): parse_quantity(value) for key, value in (status.get("hard") or {}).items()}
        used = {str(key): parse_quantity(value) for key, value in (status.get("used") or {}).items()}
    except QuantityError as err:
        warnings.append(f"ResourceQuota {namespace}/{name}: {err}: taken as not applying to the file's pods")
        return None
    return _Quota(name, hard, used, _forms(status.get("hard")), _forms(status.get("used")), scopes)


def _forms(raw: Any) -> dict[str, bool]:
    """Per resource of a ResourceList, whether its quantity is written in a binary suffix."""
    return {str(key): is_binary(value) for key, value in (raw or {}).items()}


def _check(quotas: Sequence[_Quota], spec: Mapping[str, Any], usage: Usage, binary: Mapping[str, bool]) -> str:
    """Why the quotas refuse a pod of `usage` ("" when they admit it, their usage then counting it):
    CheckRequest's order, every applying quota checked before any is charged."""
    applying = []
    for quota in quotas:
        restricted = sorted(name for name in quota.hard if _pods_use(name))
        if not restricted or not all(_scope_matches(scope, spec) for scope in quota.scopes):
            continue
        if any(name not in quota.used for name in restricted):
            return f"status unknown for quota: {quota.name}, resources: {','.join(restricted)}"
        applying.append(quota)
    for quota in applying:
        requested = {name: amount for name, amount in usage.items() if name in quota.hard and amount != 0}
        exceeded = sorted(name for name, amount in requested.items()
                          if quota.used.get(name, 0) + amount > quota.hard[name])
        if exceeded:
            def said(values: Mapping[str, Fraction], forms: Mapping[str, bool]) -> str:
                return ",".join(f"{name}={go_quantity(values[name], forms.get(name, False))}" for name in exceeded)
            return (f"exceeded quota: {quota.name}, requested: {said(requested, binary)}, "
                    f"used: {said(quota.used, quota.used_binary)}, limited: {said(quota.hard, quota.hard_binary)}")
    for quota in applying:
        for name, amount in usage.items():
            if name in quota.hard and amount != 0:
                if not quota.used.get(name):  # Go's Add: a zero takes the form of what is added to it
                    quota.used_binary[name] = binary.get(name, False)
                quota.used[name] = quota.used.get(name, Fraction(0)) + amount
    return ""


def _pods_use(name: str) -> bool:
    """A quota resource the pod evaluator matches (MatchingResources): podResources, hugepages
    (plain or requests.), and requests.<extended resource>."""
    return name in POD_RESOURCES or name.startswith((HUGEPAGES, REQUESTS + HUGEPAGES)) \
        or (name.startswith(REQUESTS) and _extended(name.removeprefix(REQUESTS)))


def _extended(name: str) -> bool:
    """Upstream IsExtendedResourceName: qualified, not native, not requests.-prefixed (the
    integer resources but `pods`)."""
    return name != PODS and is_integer_resource(name)


def _scope_matches(scope: Scope, spec: Mapping[str, Any]) -> bool:
    """podMatchesScopeFunc: one scope (`SCOPES` alone: `_quota` sets the others aside)."""
    name, operator, values = scope
    if name in ("Terminating", "NotTerminating"):
        deadline = spec.get("activeDeadlineSeconds")
        terminating = isinstance(deadline, int) and deadline >= 0
        return terminating == (name == "Terminating")
    if name in ("BestEffort", "NotBestEffort"):
        return _best_effort(spec) == (name == "BestEffort")
    class_name = str(spec.get("priorityClassName") or "")  # PriorityClass: a label selector on it
    if operator == "Exists":
        return bool(class_name)
    if operator == "DoesNotExist":
        return not class_name
    if operator == "In":
        return bool(class_name) and class_name in values
    if operator == "NotIn":
        return not class_name or class_name not in values
    return False


def _best_effort(spec: Mapping[str, Any]) -> bool:
    """ComputePodQOS is BestEffort: no cpu or memory request or limit above 0, in any container or
    at pod level."""
    lists = [(container.get("resources") or {}) for field in ("initContainers", "containers")
             for container in spec.get(field) or () if isinstance(container, dict)]
    lists.append(spec.get("resources") or {})
    for resources in lists:
        for kind in ("requests", "limits"):
            for name in (CPU, MEMORY):
                raw = (resources.get(kind) or {}).get(name)
                if raw is not None and parse_quantity(raw) > 0:
                    return False
    return True


def pod_usage(spec: Mapping[str, Any]) -> tuple[Usage, dict[str, bool]]:
    """What a new pod of `spec` charges a quota (PodUsageFunc), and per resource whether its
    quantity is written in a binary suffix, as Go's Quantity keeps the form of the first amount added."""
    apps: list[dict[str, Fraction]] = []
    app_limits: list[dict[str, Fraction]] = []
    inits: list[tuple[dict[str, Fraction], bool]] = []
    init_limits: list[tuple[dict[str, Fraction], bool]] = []
    binary: dict[str, bool] = {}
    for field in ("containers", "initContainers"):  # upstream adds the app containers' first
        for container in spec.get(field) or ():
            resources = container.get("resources") or {}
            limited = _amounts(resources.get("limits"), binary)
            asked = {**limited, **_amounts(resources.get("requests"), binary)}  # requests default to limits
            if field == "containers":
                apps.append(asked)
                app_limits.append(limited)
            else:
                sidecar = container.get("restartPolicy") == "Always"
                inits.append((asked, sidecar))
                init_limits.append((limited, sidecar))
    pod_resources = spec.get("resources") or {}
    level_requests = _amounts(pod_resources.get("requests"), binary)
    level_limits = _amounts(pod_resources.get("limits"), binary)
    overhead = _amounts(spec.get("overhead"), binary)
    containers = aggregate_container_requests(apps, inits) if level_limits else {}
    requests = exact_pod_requests(apps, inits, overhead, pod_level_requests(level_requests, level_limits, containers))
    limits = aggregate_container_requests(app_limits, init_limits)  # AggregateContainerLimits: the same sums
    limits.update({name: amount for name, amount in level_limits.items() if is_pod_level(name)})
    add_into(limits, {name: amount for name, amount in overhead.items() if name in limits})
    usage: Usage = {COUNT_PODS: Fraction(1), PODS: Fraction(1)}
    for name in (CPU, MEMORY, EPHEMERAL_STORAGE):
        if name in requests:
            usage[name] = usage[REQUESTS + name] = Fraction(requests[name])
        if name in limits:
            usage[f"limits.{name}"] = Fraction(limits[name])
    for name, amount in requests.items():
        if name.startswith(HUGEPAGES):
            usage[name] = Fraction(amount)
        if name.startswith(HUGEPAGES) or _extended(name):
            usage[REQUESTS + name] = Fraction(amount)
    forms = {key: binary.get(key.removeprefix(REQUESTS).removeprefix("limits."), False) for key in usage}
    return usage, forms


def _amounts(raw: Any, binary: dict[str, bool]) -> dict[str, Fraction]:
    """A ResourceList in its own units (cpu in cores), noting each resource's first written form."""
    out = {}
    for name, value in (raw or {}).items():
        out[str(name)] = parse_quantity(value)
        if out[str(name)]:
            binary.setdefault(str(name), is_binary(value))
    return out


def is_binary(value: Any) -> bool:
    """A quantity written with a binary suffix (BinarySI): Go's Quantity keeps writing it so."""
    return isinstance(value, str) and value.strip().endswith("i")


def _gang(pod: Mapping[str, Any]) -> str:
    """The pod's gang as messages name it, "" when it is in none (or cannot be read: the replay says why)."""
    try:
        gang = parse_pod(dict(pod)).gang
    except ObjectError:
        return ""
    return gang_name(gang.key) if gang is not None else ""
