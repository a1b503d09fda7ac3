"""What one scheduling attempt knows about its pod, shared by every plugin (upstream's CycleState).

PreFilter work — splitting requests into plain resources and device-class requests, resolving the
classes — happens once per attempt here, so the per-node Filter and Score calls stay cheap.
Plugins leave what others read in it: the device plans per node, and per feasible row what the
pod's devices add to each device resource (`device_demand`), which resource scoring reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from difflib import get_close_matches

import numpy as np
import numpy.typing as npt

from scheduler.core.classes import ClassRegistry, ResourceClass
from scheduler.core.framework.placement import Domain
from scheduler.core.lifecycle import Grant, Phases, peak
from scheduler.first_few import first_few
from scheduler.core.objects import Pod
from scheduler.core.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS

MAX_NODE_SCORE = 100


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    container: str
    resource_name: str
    count: int
    cls: ResourceClass
    # the phases of the pod's life the container runs in (`lifecycle`): a request may take
    # a device its pod's other containers of the same resource name hold in other phases only
    phases: Phases = frozenset((0,))


@dataclass(slots=True)
class DevicePlan:
    """Devices chosen for a pod on one node: container -> resource -> [(device, shared amount,
    its dimension)]."""

    grants: dict[str, dict[str, list[Grant]]]
    newly_busy: dict[str, int]  # device resourceName -> devices this pod turns from free to busy
    score: int  # the device plugin's score for this node, 0..100
    # device resourceNames the plan's devices belong to: the pod *requests* these on this node for
    # resource scoring even where it makes no device newly busy (a slice on a used GPU)
    resources: frozenset[str] = frozenset()
    # device resourceName -> devices the pod shares with nominated preemptors' holds only: busy
    # with the holds, but in use by no pod yet (`planner.count_short` counts them without holds)
    held_busy: dict[str, int] = field(default_factory=dict)
    # device resourceName -> devices the pod shares with leaving pods only, on a node where
    # nominated preemptors keep room: in use now, but given back to the holds once they are gone
    # (`planner.count_short` counts them with holds)
    kept_on: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DeviceDemand:
    """Per feasible row, what a pod's devices add to one device resourceName for scoring."""

    amount: npt.NDArray[np.int64]  # devices the pod turns from free to busy
    uses: npt.NDArray[np.bool_]  # the pod's devices belong to the resource (requested even at 0)


# feasible rows -> device resourceName -> what the pod's devices add there
DemandOf = Callable[[npt.NDArray[np.int64]], dict[str, DeviceDemand]]


@dataclass(slots=True)
class PodContext:
    pod: Pod
    plain: tuple[tuple[str, int], ...]  # plain resource requests (class resources excluded)
    device_requests: tuple[DeviceRequest, ...]
    prefilter_error: str | None = None
    plans: dict[str, DevicePlan] = field(default_factory=dict)
    empty_request: bool = False
    device_demand: DemandOf | None = None  # set by the device plugin's batch filter
    domain: Domain | None = None  # a gang's topology domain being tried: the attempt stays inside
    phases: Mapping[str, Phases] = field(default_factory=dict)  # container -> its phases (`lifecycle`)
    # class_needs per `shared`, worked out once: scoring asks for every node tried
    _needs: dict[bool, dict[str, int]] = field(default_factory=dict, repr=False)

    def class_needs(self, shared: bool = False) -> dict[str, int]:
        """Per exclusive ResourceClass (`shared`: per sharing class), how many of its devices (of
        its slices) the pod holds: its containers' requests of it in the phase of the pod's life
        that asks for the most (`lifecycle.peak`: a finished plain init container's devices are
        the later containers', as the kubelet reuses them), not their sum. Not to be changed by
        the caller (it is kept for the next one)."""
        known = self._needs.get(shared)
        if known is not None:
            return known
        needs: dict[str, list[tuple[Phases, int]]] = {}
        for req in self.device_requests:
            if (req.cls.sharing is not None) == shared:
                needs.setdefault(req.cls.name, []).append((req.phases, req.count))
        known = self._needs[shared] = {name: peak(counts) for name, counts in needs.items()}
        return known

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
    phases = pod.container_phases()
    for name in sorted(class_names):
        cls = classes.resource_class(name)
        if cls is None:
            owner = next((c for c in classes.classes.values() if c.resource_name == name), None)
            if owner is not None:
                error = f"ResourceClass {owner.name} is not valid: {classes.error_of(owner.name)}"
            else:
                error = f'no ResourceClass provides "{name}"{_did_you_mean(name, classes.by_resource)}'
            break
        if classes.matching[cls.name] <= 0:  # not "Insufficient": no node could ever have one
            error = f"ResourceClass {cls.name} matches no device in the cluster{classes.unknown_keys_note(cls)}"
            break
        for container in pod.containers:
            count = container.requests.get(name, 0)
            if count:
                requests.append(DeviceRequest(container.name, name, count, cls, phases[container.name]))
    # Fit's fast path: a pod that requests nothing only needs a pod slot.
    order = {CPU: 0, MEMORY: 1, EPHEMERAL_STORAGE: 2}
    plain.sort(key=lambda item: (order.get(item[0], 3), item[0]))
    return PodContext(pod, tuple(plain), tuple(requests), error, empty_request=not plain, phases=phases)


_NAMES_SHOWN = 8  # the names the classes provide, at most, after a name none provides


def _did_you_mean(name: str, provided: Iterable[str]) -> str:
    """` (did you mean "class.tessera.dev/v100-32g"?)` for a resource name one typo away from one a
    class provides. Names are compared after their shared prefix (`class.tessera.dev/`), which
    would otherwise make every class name look close. Nothing close: the names the valid
    classes provide (a trial's pod read no more than "no ResourceClass provides"), or that
    there is no valid class."""
    names = sorted(provided)
    prefix, _, base = name.rpartition("/")
    by_base = {other.rpartition("/")[2]: other for other in names if other.rpartition("/")[0] == prefix}
    close = get_close_matches(base, by_base, n=1, cutoff=0.7)
    if close:
        return f' (did you mean "{by_base[close[0]]}"?)'
    if not names:
        return " (no valid ResourceClass exists)"
    return f" (the ResourceClasses provide {first_few(names, _NAMES_SHOWN)})"
