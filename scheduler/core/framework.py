"""What one scheduling attempt knows about its pod, shared by every plugin (upstream's CycleState).

PreFilter work — splitting requests into plain resources and device-class requests, resolving the
classes — happens once per attempt here, so the per-node Filter and Score calls stay cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from scheduler.api.quantity import Amount
from scheduler.core.classes import ClassRegistry, ResourceClass
from scheduler.core.objects import Pod
from scheduler.core.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS

if TYPE_CHECKING:
    from scheduler.core.state import NodeInfo

MAX_NODE_SCORE = 100


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    container: str
    resource_name: str
    count: int
    cls: ResourceClass


@dataclass(slots=True)
class DevicePlan:
    """Devices chosen for a pod on one node: container -> resource -> [(device, shared amount)]."""

    grants: dict[str, dict[str, list[tuple[str, Amount | None]]]]
    newly_busy: dict[str, int]  # device resourceName -> devices this pod turns from free to busy
    score: int  # TesseraDevices score for this node, 0..100
    # device resourceNames the plan's devices belong to: the pod *requests* these on this node for
    # NodeResourcesFit scoring even where it makes no device newly busy (a slice on a used GPU)
    resources: frozenset[str] = frozenset()


@dataclass(slots=True)
class PodContext:
    pod: Pod
    plain: tuple[tuple[str, int], ...]  # requests checked by NodeResourcesFit (no class resources)
    device_requests: tuple[DeviceRequest, ...]
    prefilter_error: str | None = None
    plans: dict[str, DevicePlan] = field(default_factory=dict)
    empty_request: bool = False
    shape: tuple[object, ...] = ()  # everything Filter and Score read from the pod (cache key)
    filters: list[tuple[str, Callable[[PodContext, NodeInfo], tuple[str, ...] | None]]] | None = None

    def plain_request(self, name: str) -> int:
        for resource, amount in self.plain:
            if resource == name:
                return amount
        return 0


def prepare(pod: Pod, classes: ClassRegistry) -> PodContext:
    plain: list[tuple[str, int]] = []
    class_names: set[str] = set()
    error: str | None = None
    for name, amount in pod.requests.items():
        if classes.is_class_resource(name):
            class_names.add(name)
        elif name != PODS:
            plain.append((name, amount))
    requests: list[DeviceRequest] = []
    for name in sorted(class_names):
        cls = classes.resource_class(name)
        if cls is None:
            owner = next((c for c in classes.classes.values() if c.resource_name == name), None)
            if owner is not None:
                error = f"ResourceClass {owner.name} is not valid: {classes.error_of(owner.name)}"
            else:
                error = f'no ResourceClass provides "{name}"'
            break
        for container in pod.containers:
            count = container.requests.get(name, 0)
            if count:
                requests.append(DeviceRequest(container.name, name, count, cls))
    # Fit's fast path: a pod that requests nothing only needs a pod slot.
    order = {CPU: 0, MEMORY: 1, EPHEMERAL_STORAGE: 2}
    plain.sort(key=lambda item: (order.get(item[0], 3), item[0]))
    return PodContext(pod, tuple(plain), tuple(requests), error, empty_request=not plain, shape=_shape(pod))


def _shape(pod: Pod) -> tuple[object, ...]:
    """Pods with equal shapes get equal Filter results and raw scores on an unchanged node.

    Batch jobs submit many identical pods, so per-node results are cached under this key and only
    recomputed for nodes whose generation moved (see ProfileRuntime).
    """
    return (
        tuple(sorted(pod.requests.items())),
        tuple(sorted(pod.scoring_requests.items())),
        tuple((c.name, tuple(sorted(c.requests.items()))) for c in pod.containers),
        tuple(sorted(pod.node_selector.items())),
        pod.required_terms,
        pod.preferred_terms,
        pod.tolerations,
    )
