"""Resource names and the arithmetic kube-scheduler uses to total a pod's requests.

Requests are kept as plain `dict[str, int]` in the units upstream compares in: CPU in millicores,
every other resource in whole units (`Quantity.Value()`, rounded up). The pod total follows
`resourcehelper.PodRequests`: the sum of app containers and restartable (sidecar) init containers,
raised to the largest init-container step, plus `spec.overhead`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

# kube-scheduler's scoring-only defaults for containers that request nothing
# (pkg/scheduler/util/pod_resources.go: DefaultMilliCPURequest, DefaultMemoryRequest).
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

Resources = dict[str, int]

_NATIVE = frozenset({CPU, MEMORY, EPHEMERAL_STORAGE, PODS})


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


def add_into(total: Resources, other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        total[name] = total.get(name, 0) + amount


def max_into(total: Resources, other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        if amount > total.get(name, 0):
            total[name] = amount


def pod_requests(
    containers: Iterable[Mapping[str, int]],
    init_containers: Iterable[tuple[Mapping[str, int], bool]],
    overhead: Mapping[str, int],
) -> Resources:
    """Total a pod's requests; `init_containers` pairs each request map with "is a sidecar"."""
    total: Resources = {}
    for requests in containers:
        add_into(total, requests)
    sidecars: Resources = {}
    init_peak: Resources = {}
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
    add_into(total, overhead)
    return {name: amount for name, amount in total.items() if amount != 0}


def with_scoring_defaults(requests: Mapping[str, int]) -> Resources:
    """A container's requests with the non-zero CPU/memory defaults used only for scoring."""
    filled = dict(requests)
    filled.setdefault(CPU, DEFAULT_MILLI_CPU_REQUEST)
    filled.setdefault(MEMORY, DEFAULT_MEMORY_REQUEST)
    return filled
