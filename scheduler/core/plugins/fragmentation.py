"""TesseraFragmentation: place each pod where it fragments the cluster's GPUs least (after FGD, ATC'23).

A node's fragmentation with respect to a task type is the free GPU capacity on it that pods of that
type could not use. FGD asks whether *one* more pod of the type fits (if not, all free GPU counts,
otherwise the GPUs too small or of the wrong class); Tessera asks how many more pods of the type
the node could take — GPU-wise (whole GPUs, or slices per GPU, of the type's class) and CPU-wise —
and counts what those pods would leave: `free − n · GPUs per pod`, `n = min(GPU slots, free CPU /
CPU per pod)`. That sees a node whose CPU will run out long before its GPUs (8 free GPUs, CPU
for two more pods) as six GPUs stranded, where FGD sees nothing wrong until the last core is gone;
on the Alibaba trace this is what separates the two (10.4 % unallocated GPUs with FGD's one-pod
test, 4.7 % with the capacity test, same seed). The node's fragmentation is the popularity-weighted
sum over the task types (`WorkloadModel`); a CPU-only type can use no GPU, so all free GPU counts
for it, as in FGD.

Score: FGD's, from the change of fragmentation Δ (milli-GPU) if the pod is placed on the node:
`int(100 · sigmoid(-Δ / 1000))` — 50 for no change, above 50 when the placement removes
fragmentation, towards 0 for placements that strand whole GPUs ("fragmentation gradient descent").
It is not normalised over the feasible nodes: a fixed scale keeps small differences apart (a
min-max scale over a wide range of Δ would round them into ties) and lets other plugins' weights
mean the same on every cycle.
Device level: for a slice of a shared GPU the plugin also chooses *which* GPU in the node — the one
whose use leaves the least fragmentation (FGD's `allocateGpuIdBasedOnFGDScore`) — through the
device planner's `slice_chooser` hook, so the plan that is scored is the plan that is bound.

GPU capacity is counted in milli-GPUs per device of the configured resource (default
`nvidia.com/gpu`): a free device is 1000, a device in shared use the unused part of its sharing
dimension, a device in exclusive use nothing. Memory is not part of the measure (as in FGD); it is
still checked by NodeResourcesFit.

Computation: a node's GPUs, as sorted (free milli, classes) pairs, decide for each GPU-demand group
how many pods of that size they could take; that part is memoised per distinct GPU state (nodes
share them: every empty 8-GPU node of one model is the same key), the CPU part is a short loop
over the group's CPU requests.
"""

from __future__ import annotations

import math

from scheduler.api.quantity import Amount
from scheduler.core.classes import ResourceClass
from scheduler.core.framework import MAX_NODE_SCORE, DevicePlan, PodContext
from scheduler.core.objects import Device, Pod
from scheduler.core.resources import CPU
from scheduler.core.state import ClusterState, NodeInfo
from scheduler.core.workload import MILLI, TaskShape, WorkloadModel

NAME = "TesseraFragmentation"
GPU = "nvidia.com/gpu"
_MEMO_LIMIT = 200_000
NEUTRAL = MAX_NODE_SCORE // 2  # no change of fragmentation

Classes = tuple[str, ...]  # sorted class names (a total order, unlike frozensets)
GpuState = tuple[tuple[int, Classes], ...]  # sorted (free milli, classes the GPU belongs to)
DeviceView = dict[str, tuple[int, Classes]]  # device name (or a placeholder) -> (free milli, classes)


class FragmentationScore:
    def __init__(self, state: ClusterState, resource: str = GPU) -> None:
        self.state = state
        self.resource = resource
        self.workload = WorkloadModel()
        self._before: dict[str, tuple[int, int, float]] = {}  # node -> (generation, epoch, F)
        self._capacity: dict[str, tuple[int, Amount | None]] = {}  # class -> (generation, device capacity)
        self._usable: dict[GpuState, tuple[int, tuple[tuple[int, int], ...]]] = {}
        self._usable_epoch = -1
        self._classes: dict[tuple[str, ...], Classes] = {}

    @property
    def epoch(self) -> int:
        return self.workload.epoch

    # --- the workload ---------------------------------------------------------------------

    def observe(self, pod: Pod) -> None:
        """Count a newly seen pod in the workload mix."""
        self.workload.observe(self.shape_of(pod))

    def shape_of(self, pod: Pod) -> TaskShape:
        count = pod.requests.get(self.resource, 0)
        milli = MILLI if count else 0
        cls_name = ""
        for name, amount in sorted(pod.requests.items()):
            cls = self.state.classes.resource_class(name)
            if cls is None:
                continue
            cls_name = cls.name
            if cls.sharing is None:
                count += int(amount)
                milli = MILLI
                continue
            capacity = self._typical_capacity(cls)
            if capacity:
                count = max(count, 1)
                milli = min(MILLI, max(1, int(amount * cls.sharing.unit * MILLI / capacity)))
        return TaskShape(count, milli, cls_name, pod.requests.get(CPU, 0))

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

    # --- the measure ----------------------------------------------------------------------

    def fragmentation(self, free_cpu: int, gpus: GpuState) -> float:
        total, usable = self._usable_by_group(gpus)
        if not total:
            return 0.0
        groups = self.workload.groups
        frag = float(total)
        for index, pods in usable:
            group = groups[index]
            per_pod = group.count * group.milli
            for cpu, popularity in zip(group.cpus, group.popularity):
                if cpu > free_cpu:
                    break
                fitting = pods if cpu <= 0 else min(pods, free_cpu // cpu)
                frag -= popularity * fitting * per_pod
        return frag

    def _usable_by_group(self, gpus: GpuState) -> tuple[int, tuple[tuple[int, int], ...]]:
        """(total free milli, [(group, pods of the group the GPUs could take)] for groups that fit)."""
        if self._usable_epoch != self.workload.epoch or len(self._usable) > _MEMO_LIMIT:
            self._usable.clear()
            self._usable_epoch = self.workload.epoch
        hit = self._usable.get(gpus)
        if hit is not None:
            return hit
        total = sum(free for free, _ in gpus)
        usable: list[tuple[int, int]] = []
        for index, group in enumerate(self.workload.groups):
            slots = 0  # pods of the group's size the GPUs could still take
            for free, classes in gpus:
                if free >= group.milli and (not group.cls or group.cls in classes):
                    slots += free // group.milli
            pods = slots // group.count
            if pods:
                usable.append((index, pods))
        result = self._usable[gpus] = (total, tuple(usable))
        return result

    # --- node views -----------------------------------------------------------------------

    def _device_classes(self, name: str) -> Classes:
        names = tuple(sorted(self.state.classes.device_classes.get(name, ())))
        return self._classes.setdefault(names, names)

    def view(self, info: NodeInfo) -> tuple[int, DeviceView]:
        """(free CPU, the node's GPUs) before the pod; plain count use takes idle GPUs last-first."""
        node = info.node
        assert node is not None
        alloc = node.allocatable
        free_cpu = alloc.get(CPU, 0) - info.requested.get(CPU, 0)
        devices = sorted((d for d in info.devices.values() if d.resource_name == self.resource and d.schedulable),
                         key=lambda d: d.name)
        view: DeviceView = {}
        if not devices:
            for i in range(max(0, alloc.get(self.resource, 0) - info.used(self.resource))):
                view[f"#{i}"] = (MILLI, ())
            return free_cpu, view
        idle: list[str] = []
        for device in devices:
            use = self.state.device_use.get(device.name)
            if use is None or not use.busy:
                idle.append(device.name)
                view[device.name] = (MILLI, self._device_classes(device.name))
            elif not use.exclusive:
                left = _slice_left(device, use.dimension, use.shared_total)
                if left > 0:
                    view[device.name] = (left, self._device_classes(device.name))
        spare = len(idle) - info.requested.get(self.resource, 0)
        if self.resource in alloc:
            spare = min(spare, alloc[self.resource] - info.used(self.resource))
        for name in idle[max(0, spare):]:
            del view[name]
        return free_cpu, view

    def before(self, info: NodeInfo) -> float:
        epoch = self.workload.epoch
        cached = self._before.get(info.name)
        if cached is not None and cached[0] == info.generation and cached[1] == epoch:
            return cached[2]
        free_cpu, view = self.view(info)
        value = self.fragmentation(free_cpu, _state(view))
        self._before[info.name] = (info.generation, epoch, value)
        return value

    # --- score and device choice ----------------------------------------------------------

    def score(self, ctx: PodContext, info: NodeInfo) -> int:
        if not self.workload.types:
            return NEUTRAL
        free_cpu, view = self.view(info)
        pod = ctx.pod
        _take_idle(view, pod.requests.get(self.resource, 0))
        plan = ctx.plans.get(info.name)
        if plan is not None:
            self._apply_plan(plan, info, view)
        after = self.fragmentation(free_cpu - pod.requests.get(CPU, 0), _state(view))
        return sigmoid_score(after - self.before(info))

    def choose_slice(self, info: NodeInfo, dimension: str, amount: Amount, options: list[Device]) -> Device:
        """Of the devices a slice fits on (best-fit order), the one leaving the least fragmentation."""
        if len(options) < 2 or not self.workload.groups:
            return options[0]
        free_cpu, view = self.view(info)
        best, best_frag = options[0], None
        seen: set[tuple[int, Classes]] = set()
        for device in options:
            current = view.get(device.name)
            if current is None or current in seen:
                continue  # equal GPUs leave equal fragmentation: the first in best-fit order wins
            seen.add(current)
            use = self.state.device_use.get(device.name)
            used = use.shared_total if use is not None else 0
            view[device.name] = (_slice_left(device, dimension, used + amount), current[1])
            frag = self.fragmentation(free_cpu, _state(view))
            view[device.name] = current
            if best_frag is None or frag < best_frag:
                best, best_frag = device, frag
        return best

    def _apply_plan(self, plan: DevicePlan, info: NodeInfo, view: DeviceView) -> None:
        for by_resource in plan.grants.values():
            for resource, grants in by_resource.items():
                cls = self.state.classes.resource_class(resource)
                dimension = cls.sharing.dimension if cls is not None and cls.sharing is not None else ""
                for name, amount in grants:
                    device = info.devices.get(name)
                    if device is None or device.resource_name != self.resource or name not in view:
                        continue
                    if amount is None:
                        del view[name]
                        continue
                    use = self.state.device_use.get(name)
                    used = use.shared_total if use is not None else 0
                    view[name] = (_slice_left(device, dimension, used + amount), view[name][1])


def sigmoid_score(delta: float) -> int:
    """FGD's `int64(sigmoid((before - after) / 1000) * MaxNodeScore)`."""
    x = delta / MILLI
    if x > 700:  # exp overflow: the score is 0 long before
        return 0
    return int(MAX_NODE_SCORE / (1.0 + math.exp(x)))


def _slice_left(device: Device, dimension: str, used: Amount) -> int:
    capacity = device.capacity.get(dimension)
    if not capacity:
        return 0
    return max(0, int((capacity - used) * MILLI / capacity))


def _take_idle(view: DeviceView, count: int) -> None:
    """A plain count request takes idle GPUs; which ones does not matter to the measure."""
    if count <= 0:
        return
    idle = [name for name, (free, _) in view.items() if free == MILLI]
    for name in idle[len(idle) - count:] if count < len(idle) else idle:
        del view[name]


def _state(view: DeviceView) -> GpuState:
    return tuple(sorted(v for v in view.values() if v[0] > 0))
