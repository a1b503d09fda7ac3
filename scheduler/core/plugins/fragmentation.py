"""TesseraFragmentation: place each pod where it fragments the cluster's GPUs least (FGD, ATC'23).

A node's fragmentation with respect to a task type is the GPU capacity on it that the type could
not use: all of its free GPU if the type does not fit there at all (CPU, memory or GPU), otherwise
the free slices of partly used GPUs too small for it (for whole-GPU types: every partly used GPU).
The node's fragmentation is the popularity-weighted sum over the workload's task types
(`WorkloadModel`); the raw score is its *increase* if the pod is placed there, and the plugin
normalises over the feasible nodes so that the smallest increase scores 100 ("gradient descent").

GPU capacity is counted in milli-GPUs per device of the configured resource (default
`nvidia.com/gpu`): whole devices from plain count requests or exclusive class grants, slices from
shared class grants (their share of the device's sharing dimension).
"""

from __future__ import annotations


from scheduler.api.quantity import Amount
from scheduler.core.classes import ResourceClass
from scheduler.core.framework import DevicePlan, PodContext
from scheduler.core.objects import Pod
from scheduler.core.resources import CPU, MEMORY
from scheduler.core.state import ClusterState, NodeInfo
from scheduler.core.workload import MILLI, TaskType, WorkloadModel

NAME = "TesseraFragmentation"
GPU = "nvidia.com/gpu"

# (free CPU, free memory, fully free GPUs, free milli-GPU of each partly used GPU)
GpuView = tuple[int, int, int, tuple[int, ...]]


def fragmentation(view: GpuView, types: tuple[TaskType, ...]) -> float:
    free_cpu, free_memory, full, partials = view
    total = full * MILLI + sum(partials)
    if total == 0:
        return 0.0
    stranded = total - full * MILLI  # free slices on partly used GPUs
    largest = max(partials, default=0)
    frag = 0.0
    for t in types:
        if t.cpu > free_cpu or t.memory > free_memory:
            frag += t.popularity * total
        elif t.whole:
            frag += t.popularity * (stranded if full >= t.whole else total)
        elif t.fraction:
            if full or largest >= t.fraction:
                frag += t.popularity * sum(p for p in partials if p < t.fraction)
            else:
                frag += t.popularity * total
        else:
            frag += t.popularity * total  # a CPU-only task can use none of it
    return frag


class FragmentationScore:
    def __init__(self, state: ClusterState, resource: str = GPU) -> None:
        self.state = state
        self.resource = resource
        self.workload = WorkloadModel()
        self._before: dict[str, tuple[int, int, float]] = {}  # node -> (generation, epoch, F)
        self._capacity: dict[str, tuple[int, Amount | None]] = {}  # class -> (generation, device capacity)

    def observe(self, pod: Pod) -> None:
        """Count a newly seen pod in the workload mix."""
        whole = pod.requests.get(self.resource, 0)
        fraction = 0
        for name, amount in pod.requests.items():
            cls = self.state.classes.resource_class(name)
            if cls is None:
                continue
            if cls.sharing is None:
                whole += amount
                continue
            capacity = self._typical_capacity(cls)
            if capacity:
                fraction += int(amount * cls.sharing.unit * MILLI / capacity)
        self.workload.observe(whole, fraction, pod.requests.get(CPU, 0), pod.requests.get(MEMORY, 0))

    def _typical_capacity(self, cls: ResourceClass) -> Amount | None:
        """The sharing-dimension capacity of a device of the class (the first one found)."""
        assert cls.sharing is not None
        generation = self.state.classes.generation
        cached = self._capacity.get(cls.name)
        if cached is not None and cached[0] == generation:
            return cached[1]
        capacity = next((self.state.devices[d].capacity.get(cls.sharing.dimension)
                         for d, names in self.state.classes.device_classes.items()
                         if cls.name in names and d in self.state.devices), None)
        self._capacity[cls.name] = (generation, capacity)
        return capacity

    def view(self, info: NodeInfo) -> GpuView:
        node = info.node
        assert node is not None
        alloc = node.allocatable
        free_cpu = alloc.get(CPU, 0) - info.requested.get(CPU, 0)
        free_memory = alloc.get(MEMORY, 0) - info.requested.get(MEMORY, 0)
        devices = [d for d in info.devices.values() if d.resource_name == self.resource and d.schedulable]
        if not devices:
            return free_cpu, free_memory, max(0, alloc.get(self.resource, 0) - info.used(self.resource)), ()
        idle = 0
        partials: list[int] = []
        for device in devices:
            use = self.state.device_use.get(device.name)
            if use is None or not use.busy:
                idle += 1
            elif not use.exclusive:
                capacity = device.capacity.get(use.dimension)
                if capacity:
                    left = int((capacity - use.shared_total) * MILLI / capacity)
                    if left > 0:
                        partials.append(left)
        full = max(0, idle - info.requested.get(self.resource, 0))
        if self.resource in alloc:
            full = min(full, max(0, alloc[self.resource] - info.used(self.resource)))
        return free_cpu, free_memory, full, tuple(sorted(partials))

    def before(self, info: NodeInfo) -> float:
        epoch = self.workload.epoch
        cached = self._before.get(info.name)
        if cached is not None and cached[0] == info.generation and cached[1] == epoch:
            return cached[2]
        value = fragmentation(self.view(info), self.workload.types)
        self._before[info.name] = (info.generation, epoch, value)
        return value

    def score(self, ctx: PodContext, info: NodeInfo) -> int:
        """Raw score: the increase of fragmentation (milli-GPU); lower is better (see normalise)."""
        types = self.workload.types
        if not types:
            return 0
        free_cpu, free_memory, full, partials = self.view(info)
        pod = ctx.pod
        full -= pod.requests.get(self.resource, 0)
        plan = ctx.plans.get(info.name)
        parts = list(partials)
        if plan is not None:
            full, parts = self._apply_plan(plan, info, full, parts)
        after = (free_cpu - pod.requests.get(CPU, 0), free_memory - pod.requests.get(MEMORY, 0),
                 max(0, full), tuple(sorted(p for p in parts if p > 0)))
        return round(fragmentation(after, types) - self.before(info))

    def _apply_plan(self, plan: DevicePlan, info: NodeInfo, full: int, parts: list[int]) -> tuple[int, list[int]]:
        for by_resource in plan.grants.values():
            for resource, grants in by_resource.items():
                cls = self.state.classes.resource_class(resource)
                for name, amount in grants:
                    device = info.devices.get(name)
                    if device is None or device.resource_name != self.resource:
                        continue
                    if amount is None:
                        full -= 1
                        continue
                    use = self.state.device_use.get(name)
                    dimension = cls.sharing.dimension if cls is not None and cls.sharing is not None else ""
                    capacity = device.capacity.get(dimension)
                    if not capacity:
                        continue
                    used = use.shared_total if use is not None else 0
                    before = int((capacity - used) * MILLI / capacity)
                    after = int((capacity - used - amount) * MILLI / capacity)
                    if use is None or not use.busy:
                        full -= 1
                    elif before in parts:
                        parts.remove(before)
                    parts.append(after)
        return full, parts
