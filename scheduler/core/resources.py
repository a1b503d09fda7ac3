"""Resource names and the arithmetic kube-scheduler uses to total a pod's requests.

Requests are kept as plain `dict[str, int]` in the units upstream compares in: CPU in millicores,
every other resource in whole units (`Quantity.Value()`, rounded up). The pod total follows
`resourcehelper.PodRequests`: the sum of app containers and restartable (sidecar) init containers,
raised to the largest init-container step, then pod-level requests (`spec.resources`, the
PodLevelResources feature, on by default since 1.34) in place of the containers' total for the
resources they name (cpu, memory, hugepages-*), plus `spec.overhead`. As upstream, a pod's
amounts are added exactly (`Amount`; CPU in exact millicores) and each total is rounded up once.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from scheduler.api.quantity import Amount

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

# kube-scheduler's scoring-only defaults for containers that request nothing
# (pkg/scheduler/util/pod_resources.go: DefaultMilliCPURequest, DefaultMemoryRequest).
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

Resources = dict[str, int]
# a ResourceList in the same units before rounding up (upstream adds a pod's Quantities exactly)
ExactResources = dict[str, Amount]

_NATIVE = frozenset({CPU, MEMORY, EPHEMERAL_STORAGE, PODS})

# The whole-GPU resources the vendors' device plugins publish (Kubernetes "Schedule GPUs":
# amd.com/gpu, nvidia.com/gpu; Intel's GPU plugin: gpu.intel.com/i915, and gpu.intel.com/xe for
# its xe driver). What a profile's score must count to say where GPU pods go (`gpu_scoring_notices`):
# known by name, as a configuration is read before any node or ResourceClass is.
GPU_RESOURCES = frozenset({"amd.com/gpu", "gpu.intel.com/i915", "gpu.intel.com/xe", "nvidia.com/gpu"})


def is_extended(name: str) -> bool:
    """Extended (scalar) resources: anything fully qualified outside `kubernetes.io`, plus hugepages."""
    if name in _NATIVE:
        return False
    if name.startswith("hugepages-") or name.startswith("requests.hugepages-"):
        return True
    if "/" not in name:
        return False
    domain = name.split("/", 1)[0]
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


def is_integer_resource(name: str) -> bool:
    """Upstream helper.IsIntegerResourceName for the resources a pod or node names: `pods` and
    extended resources (IsExtendedResourceName: qualified, not native — no `/` or a
    `kubernetes.io/` name — and not `requests.`-prefixed). Hugepages are native: not these.
    Upstream's test is `MilliValue() % 1000 != 0`, milli-units rounded up; so is the caller's
    (objects.exact_resource_list)."""
    if name == PODS:
        return True
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def is_scalar(name: str) -> bool:
    """Upstream IsScalarResourceName: extended, hugepages, prefixed native (`*kubernetes.io/*`)
    and attachable-volumes resources; NodeResourcesFit skips one the pod does not request."""
    return is_extended(name) or "kubernetes.io/" in name or name.startswith("attachable-volumes-")


def is_pod_level(name: str) -> bool:
    """A resource `spec.resources` may set (upstream IsSupportedPodLevelResource)."""
    return name in (CPU, MEMORY) or name.startswith("hugepages-")


def add_into(total: ExactResources, other: Mapping[str, Amount]) -> None:
    for name, amount in other.items():
        total[name] = total.get(name, 0) + amount


def max_into(total: ExactResources, other: Mapping[str, Amount]) -> None:
    for name, amount in other.items():
        if amount > total.get(name, 0):
            total[name] = amount


def aggregate_container_requests(
    containers: Iterable[Mapping[str, Amount]],
    init_containers: Iterable[tuple[Mapping[str, Amount], bool]],
) -> ExactResources:
    """Upstream AggregateContainerRequests, exact: the app containers and sidecars summed, raised
    to the largest init step (a plain init container and the sidecars started before it). A
    resource any container names is in the result, at 0 if that is what they ask: the
    apiserver's pod-level defaulting tells "asked for 0" from "not asked for" (`pod_level_requests`)."""
    total: ExactResources = {}
    for requests in containers:
        add_into(total, requests)
    sidecars: ExactResources = {}
    init_peak: ExactResources = {}
    for requests, is_sidecar in init_containers:
        if is_sidecar:
            add_into(total, requests)
            add_into(sidecars, requests)
            step = dict(sidecars)
        else:
            step = dict(requests)
            add_into(step, sidecars)
        max_into(init_peak, step)
    max_into(total, init_peak)
    return total


def pod_level_requests(requests: Mapping[str, Amount], limits: Mapping[str, Amount],
                       containers: Mapping[str, Amount]) -> ExactResources:
    """The pod-level requests (`spec.resources.requests`) of the resources that may be set at pod
    level, as the apiserver defaults them (pkg/apis/core/v1/defaults.go `defaultPodRequests`):
    when pod-level limits are set, an unset cpu or memory request becomes the containers'
    aggregated request (`containers`: `aggregate_container_requests` of their specs) if any
    container names it, and any other unset request becomes its pod-level limit. The simulator
    and replays see pods the apiserver has not defaulted; a cluster's pods already say this."""
    defaulted = dict(requests)
    if limits:
        for name, amount in containers.items():
            if name in (CPU, MEMORY):  # is_pod_level and overcommittable (IsOvercommitAllowed)
                defaulted.setdefault(name, amount)
        for name, amount in limits.items():
            if is_pod_level(name):
                defaulted.setdefault(name, amount)
    return {name: amount for name, amount in defaulted.items() if is_pod_level(name)}


def pod_requests(
    containers: Iterable[Mapping[str, Amount]],
    init_containers: Iterable[tuple[Mapping[str, Amount], bool]],
    overhead: Mapping[str, Amount],
    pod_level: Mapping[str, Amount] | None = None,
) -> Resources:
    """Total a pod's exact requests, then round each total up: upstream takes MilliValue() or
    Value() of the PodRequests sum (framework Resource.Add), so two containers of half a byte are
    one byte, not two. `init_containers` pairs each request map with "is a sidecar"; `pod_level`:
    the pod-level requests (only resources `is_pod_level` accepts), which replace the
    containers' total for what they name."""
    total = exact_pod_requests(containers, init_containers, overhead, pod_level)
    return {name: math.ceil(amount) for name, amount in total.items() if amount != 0}


def exact_pod_requests(
    containers: Iterable[Mapping[str, Amount]],
    init_containers: Iterable[tuple[Mapping[str, Amount], bool]],
    overhead: Mapping[str, Amount],
    pod_level: Mapping[str, Amount] | None = None,
) -> ExactResources:
    """`pod_requests` before rounding: upstream PodRequests itself, which ResourceQuota admission
    charges exactly (`kubectl.quota`)."""
    total = aggregate_container_requests(containers, init_containers)
    total.update(pod_level or {})
    add_into(total, overhead)
    return total


def with_scoring_defaults(requests: Mapping[str, Amount], defaults: Iterable[str] = (CPU, MEMORY)) -> ExactResources:
    """A container's requests with the non-zero CPU/memory defaults used only for scoring (only
    for the resources in `defaults`: see `node_scoring_defaults`)."""
    filled = dict(requests)
    if CPU in defaults:
        filled.setdefault(CPU, DEFAULT_MILLI_CPU_REQUEST)
    if MEMORY in defaults:
        filled.setdefault(MEMORY, DEFAULT_MEMORY_REQUEST)
    return filled


def node_scoring_defaults(named: Iterable[str], pod_level_set: bool) -> tuple[str, ...]:
    """Which scoring defaults a pod on a node gets per container (upstream framework
    getNonMissingContainerRequests): both without pod-level requests; with them, only for a
    resource that neither the pod level nor any container names (`named`)."""
    if not pod_level_set:
        return (CPU, MEMORY)
    present = set(named)
    return tuple(name for name in (CPU, MEMORY) if name not in present)
