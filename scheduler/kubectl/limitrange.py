"""`kubectl tessera what-if -f`: the requests and limits the apiserver's LimitRanger admission gives the file's pods.

Why: a namespace's LimitRange with a container default of `nvidia.com/gpu: "1"` makes every
container that states none ask one GPU; a re-trial's Job of 3 such pods under a quota of 2 GPUs
was "3 would be placed", no GPU taken, while really each pod got 1 GPU and the apiserver refused
the third for quota. LimitRanger runs before ResourceQuota (and before the scheduler sees the pod:
k8s.io/kubernetes pkg/kubeapiserver/options/plugins.go AllOrderedPlugins), so what-if defaults the
pods first, then admits them against quotas (`quota.admit`) and places them.

`default_pods` replays the plugin's mutation (plugin/pkg/admission/limitranger/admission.go
PodMutateLimitFunc): for each LimitRange of the pod's namespace, each container and init container
without a limit of R gets the LimitRange's `default[R]`, without a request of R its
`defaultRequest[R]` (the `type: Container` items', a later item's value over an earlier one's).
A LimitRange as stored went through SetDefaults_LimitRangeItem (a Container item's `max` is its
`default` where it names none, its `default` then its `min` its `defaultRequest`); a listed one is
read through the same rules, so a LimitRange that somehow lacks them defaults alike. A container's
request of R it does not state but limits is its limit (SetDefaults_Pod, at decoding, before any
admission), so the LimitRange's defaultRequest does not replace it. Pod-level `spec.resources` are
left as written, as upstream leaves them. Several LimitRanges apply in turn, by name (upstream's
order is its informer's): the first to give R sets it.

`admit` then replays the plugin's validation (PodValidateLimitFunc) of the defaulted pods, as the
apiserver validates a pod after every LimitRange has defaulted it: per LimitRange (by name, as
above; the first that refuses is said, as upstream returns at its first), per item in order, a
`type: Container` item judges each container then each init container, a `type: Pod` item the
pod's totals (podRequests/podLimits: app containers and sidecars summed, raised to the largest
init step; pod-level cpu and memory in their place, PodLevelResources) — each its `min`
(minConstraint), then `max` (maxConstraint), then `maxLimitRequestRatio`
(limitRequestRatioConstraint), a resource at a time (in name order: upstream's is Go's map
order). A refused pod's message is the errors as utilerrors.NewAggregate says them: one alone,
else `[a, b]`, an error said again dropped. Not judged: PersistentVolumeClaim items (a file's
claims are not created).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from scheduler.api.quantity import go_quantity, parse_quantity
from scheduler.core.resources import CPU, MEMORY, aggregate_container_requests, pod_level_requests
from scheduler.kube.informers import ResourceKind
from scheduler.kubectl.quota import Refusal, is_binary, refusal

LIMIT_RANGES = ResourceKind("LimitRange", "v1", "/api/v1/limitranges", builtin=True, namespaced=True)
LIMIT_RANGER = "LimitRanger"  # the admission plugin, as `Refusal.plugin` names it
CONTAINER = "Container"
POD = "Pod"
POD_LEVEL = (CPU, MEMORY)  # the limitranger's own isSupportedPodLevelResource
MAX_MILLI_VALUE = (2**63 - 1) // 1000  # resource.MaxMilliValue

ResourceList = dict[str, Any]  # a ResourceList's quantities as written (strings, or numbers in a file)
Quantity = tuple[Fraction, bool]  # an amount, and whether Go writes it in a binary suffix
Judged = dict[str, Quantity]  # a ResourceList read


def container_defaults(limit_range: Mapping[str, Any]) -> tuple[ResourceList, ResourceList]:
    """The limits and requests a LimitRange gives a container that lacks them
    (defaultContainerResourceRequirements, over SetDefaults_LimitRangeItem's defaulting)."""
    limits: ResourceList = {}
    requests: ResourceList = {}
    for item in (limit_range.get("spec") or {}).get("limits") or ():
        if not isinstance(item, dict) or item.get("type") != CONTAINER:
            continue
        default = {**(item.get("max") or {}), **(item.get("default") or {})}
        default_request = {**(item.get("min") or {}), **default, **(item.get("defaultRequest") or {})}
        limits.update(default)
        requests.update(default_request)
    return limits, requests


def _by_namespace(limit_ranges: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """The listed LimitRanges per namespace, each namespace's by name (the order they apply in)."""
    by_namespace: dict[str, list[Mapping[str, Any]]] = {}
    for limit_range in sorted(limit_ranges, key=lambda obj: str((obj.get("metadata") or {}).get("name"))):
        by_namespace.setdefault(str((limit_range.get("metadata") or {}).get("namespace")), []).append(limit_range)
    return by_namespace


def _namespace(pod: Mapping[str, Any]) -> str:
    """The namespace a file's pod (or a LimitRange) is in, as the LimitRanges are grouped by it."""
    return str((pod.get("metadata") or {}).get("namespace"))


def admit(pods: Sequence[dict[str, Any]], limit_ranges: Iterable[Mapping[str, Any]]
          ) -> tuple[list[dict[str, Any]], list[Refusal]]:
    """The file's `pods` as LimitRanger's mutation leaves them (`default_pods`), and those its
    validation by their namespaces' `limit_ranges` (as listed) refuses, in the apiserver's words."""
    by_namespace = _by_namespace(limit_ranges)
    defaulted = default_pods(pods, [limit_range for found in by_namespace.values() for limit_range in found])
    refusals = []
    for pod in defaulted:
        if pod.get("kind") != "Pod":
            continue
        for limit_range in by_namespace.get(_namespace(pod), ()):
            errors = _validate(pod.get("spec") or {}, limit_range)
            if errors:
                refusals.append(refusal(pod, _aggregate(errors), LIMIT_RANGER))
                break
    return defaulted, refusals


def default_pods(pods: Sequence[dict[str, Any]], limit_ranges: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The file's `pods` as the apiserver would store them after LimitRanger's mutation by their
    namespaces' `limit_ranges` (as listed): copies, the pods without a LimitRange as they are."""
    by_namespace = {namespace: [container_defaults(limit_range) for limit_range in found]
                    for namespace, found in _by_namespace(limit_ranges).items()}
    out = []
    for pod in pods:
        defaults = by_namespace.get(_namespace(pod))
        if not defaults or pod.get("kind") != "Pod":
            out.append(pod)
            continue
        pod = copy.deepcopy(pod)
        spec = pod.setdefault("spec", {})
        for field in ("containers", "initContainers"):
            for container in spec.get(field) or ():
                if isinstance(container, dict):
                    _merge(container, defaults)
        out.append(pod)
    return out


def _merge(container: dict[str, Any], defaults: Sequence[tuple[ResourceList, ResourceList]]) -> None:
    """mergeContainerResources of each LimitRange in turn, on a container whose unstated requests
    are its limits (SetDefaults_Pod)."""
    resources = container.get("resources")
    resources = container["resources"] = dict(resources) if isinstance(resources, dict) else {}
    limits = dict(resources.get("limits") or {})
    requests = {**limits, **(resources.get("requests") or {})}
    for default_limits, default_requests in defaults:
        limits = {**default_limits, **limits}
        requests = {**default_requests, **requests}
    if limits:
        resources["limits"] = limits
    if requests:
        resources["requests"] = requests


def _validate(spec: Mapping[str, Any], limit_range: Mapping[str, Any]) -> list[str]:
    """PodValidateLimitFunc: the errors one LimitRange finds in a defaulted pod's `spec`, in order."""
    errors: list[str] = []
    for item in (limit_range.get("spec") or {}).get("limits") or ():
        if not isinstance(item, dict):
            continue
        if item.get("type") == CONTAINER:
            for field in ("containers", "initContainers"):
                for container in spec.get(field) or ():
                    resources = (container.get("resources") or {}) if isinstance(container, dict) else {}
                    errors += _constraints(CONTAINER, item, _judged(resources.get("requests")),
                                           _judged(resources.get("limits")))
        elif item.get("type") == POD:
            errors += _constraints(POD, item, *_pod_totals(spec))
    return errors


def _constraints(kind: str, item: Mapping[str, Any], requests: Judged, limits: Judged) -> list[str]:
    """An item's min, max and maxLimitRequestRatio over one container's (or the pod's) requests and limits."""
    errors = []
    for field, check in (("min", _min), ("max", _max), ("maxLimitRequestRatio", _ratio)):
        for name, raw in sorted((item.get(field) or {}).items()):
            why = check(kind, name, (parse_quantity(raw), is_binary(raw)), requests, limits)
            if why:
                errors.append(why)
    return errors


def _min(kind: str, name: str, enforced: Quantity, requests: Judged, limits: Judged) -> str:
    """minConstraint."""
    request, limit, floor = _values(requests.get(name), limits.get(name), enforced)
    said = f"minimum {name} usage per {kind} is {_said(enforced)}"
    if name not in requests:
        return f"{said}.  No request is specified"
    if request < floor:
        return f"{said}, but request is {_said(requests[name])}"
    if name in limits and limit < floor:
        return f"{said}, but limit is {_said(limits[name])}"
    return ""


def _max(kind: str, name: str, enforced: Quantity, requests: Judged, limits: Judged) -> str:
    """maxConstraint."""
    request, limit, ceiling = _values(requests.get(name), limits.get(name), enforced)
    said = f"maximum {name} usage per {kind} is {_said(enforced)}"
    if name not in limits:
        return f"{said}.  No limit is specified"
    if limit > ceiling:
        return f"{said}, but limit is {_said(limits[name])}"
    if name in requests and request > ceiling:
        return f"{said}, but request is {_said(requests[name])}"
    return ""


def _ratio(kind: str, name: str, enforced: Quantity, requests: Judged, limits: Judged) -> str:
    """limitRequestRatioConstraint: the ratio in float64, as upstream computes and prints it (%f)."""
    request, limit, _ = _values(requests.get(name), limits.get(name), enforced)
    said = f"{name} max limit to request ratio per {kind} is {_said(enforced)}"
    if request == 0:
        return f"{said}, but no request is specified or request is 0"
    if limit == 0:
        return f"{said}, but no limit is specified or limit is 0"
    observed = shown = float(limit) / float(request)
    ceiling = float(math.ceil(enforced[0]))
    if ceiling <= MAX_MILLI_VALUE:
        observed, ceiling = observed * 1000, float(math.ceil(enforced[0] * 1000))
    return f"{said}, but provided ratio is {shown:f}" if observed > ceiling else ""


def _values(request: Quantity | None, limit: Quantity | None, enforced: Quantity) -> tuple[int, int, int]:
    """requestLimitEnforcedValues: Value() of each (rounded up; an absent one 0), or MilliValue()
    when none of them passes MaxMilliValue."""
    amounts = [pair[0] if pair is not None else Fraction(0) for pair in (request, limit, enforced)]
    scale = 1000 if all(math.ceil(amount) <= MAX_MILLI_VALUE for amount in amounts) else 1
    found = [math.ceil(amount * scale) for amount in amounts]
    return found[0], found[1], found[2]


def _said(quantity: Quantity) -> str:
    """A quantity as Go's Quantity.String() writes it."""
    return go_quantity(*quantity)


def _judged(raw: Any) -> Judged:
    """A ResourceList as written, each quantity read with its form."""
    return {str(name): (parse_quantity(value), is_binary(value)) for name, value in (raw or {}).items()}


def _pod_totals(spec: Mapping[str, Any]) -> tuple[Judged, Judged]:
    """The limitranger's podRequests and podLimits of a defaulted pod: the containers' totals
    (`aggregate_container_requests`: app containers and sidecars summed, raised to the largest init
    step, as upstream's), then the pod-level cpu and memory (requests as the apiserver defaults
    them: `pod_level_requests`) in their place. A total keeps the form of the first quantity of it
    written (Go's Quantity.Add)."""
    totals: list[Judged] = []
    for kind in ("requests", "limits"):
        apps: list[dict[str, Fraction]] = []
        inits: list[tuple[dict[str, Fraction], bool]] = []
        forms: dict[str, bool] = {}
        for field in ("containers", "initContainers"):
            for container in spec.get(field) or ():
                judged = _judged((container.get("resources") or {}).get(kind))
                for name, (amount, binary) in judged.items():
                    if amount:
                        forms.setdefault(name, binary)
                amounts = {name: amount for name, (amount, _) in judged.items()}
                if field == "containers":
                    apps.append(amounts)
                else:
                    inits.append((amounts, container.get("restartPolicy") == "Always"))
        totals.append({name: (Fraction(amount), forms.get(name, False))
                       for name, amount in aggregate_container_requests(apps, inits).items()})
    requests, limits = totals
    level = spec.get("resources") or {}
    level_requests, level_limits = _judged(level.get("requests")), _judged(level.get("limits"))
    defaulted = pod_level_requests({name: amount for name, (amount, _) in level_requests.items()},
                                   {name: amount for name, (amount, _) in level_limits.items()},
                                   {name: amount for name, (amount, _) in requests.items()})
    for name in POD_LEVEL:
        if name in defaulted:
            form = {**requests, **level_limits, **level_requests}[name][1]
            requests[name] = (Fraction(defaulted[name]), form)
        if name in level_limits:
            limits[name] = level_limits[name]
    return requests, limits


def _aggregate(errors: Sequence[str]) -> str:
    """utilerrors.NewAggregate(errs).Error(): one error as itself, more as `[a, b]`, each said once."""
    said = list(dict.fromkeys(errors))
    return said[0] if len(said) == 1 else f"[{', '.join(said)}]"
