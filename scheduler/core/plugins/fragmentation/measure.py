"""The fragmentation measure: how much free GPU a node strands for the cluster's workload (FGD, ATC'23).

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
dimension (of the scarcest one, when classes of several dimensions share it: each dimension is
used against its own capacity), a device in exclusive use nothing. A slice is sized on each GPU
by that GPU's own capacity (each slot carries it): a sharing class may select GPUs of different
sizes, where a 40Gi slice is half of an 80Gi GPU and all of a 40Gi one. Memory is not part of the
measure (as in FGD); it is still checked by NodeResourcesFit.

Computation: a node's GPUs, as sorted (free milli, classes) pairs, decide for each GPU-demand group
how many pods of that size they could take; that part is memoised per distinct GPU state (nodes
share them: every empty 8-GPU node of one model is the same key), the CPU part is a short loop
over the group's CPU requests, and the whole value is memoised per (free CPU, GPU state). Both
memos last one workload epoch. Reusing scores across cycles and nodes: cache.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from scheduler.api.quantity import Amount
from scheduler.core.classes import ResourceClass
from scheduler.core.framework.cycle_state import MAX_NODE_SCORE, DevicePlan, PodContext
from scheduler.core.framework.nodecache import NodeCache
from scheduler.core.lifecycle import Phases, device_holds
from scheduler.core.objects import Device, Pod
from scheduler.core.resources import CPU, is_extended
from scheduler.core.state import ClusterState, NodeInfo
from scheduler.core.workload import MILLI, GpuGroup, TaskShape, WorkloadModel

GPU = "nvidia.com/gpu"
MEMO_LIMIT = 200_000
# A node's GPUs are measured one slot each, so a plain count (no device objects) is modelled as at
# most this many free GPUs: a node status advertising millions of the resource would otherwise
# stall every cycle building (and sorting) a slot per unit. Far above any real node (8-16 GPUs,
# a few hundred with time-slicing replicas); beyond it no single placement changes the measure.
MAX_PLAIN_SLOTS = 1024
NEUTRAL = MAX_NODE_SCORE // 2  # no change of fragmentation

Classes = tuple[str, ...]  # sorted class names (a total order, unlike frozensets)
Sizes = tuple[tuple[str, Amount], ...]  # the GPU's capacity in its sharing classes' dimensions, sorted
GpuSlot = tuple[int, Classes, Sizes]  # (free milli, classes the GPU belongs to, their dimensions' sizes)
Runs = tuple[tuple[int, int], ...]  # (pods, milli-GPU each uses), most milli first
Usable = tuple[int, int, int, Runs]  # (group, pods, milli-GPU each uses or 0 when they differ, runs)
GpuState = tuple[GpuSlot, ...]  # sorted
DeviceView = dict[str, GpuSlot]  # device name (or a placeholder) -> slot
Demand = tuple[int, tuple[tuple[str, int], ...]]  # (CPU, sorted extended resource requests)


class FragmentationScore:
    def __init__(self, state: ClusterState, resource: str = GPU, max_types: int = 256, prior_pods: float = 0.0,
                 scarcity_exponent: float = 0.0) -> None:
        self.state = state
        self.resource = resource
        self.scarcity_exponent = scarcity_exponent
        self._profiles: tuple[tuple[int, int], NodeProfiles] | None = None
        self.workload = WorkloadModel(max_types, prior_pods, self.scarcity if scarcity_exponent else None)
        self._nodes: NodeCache[NodeGpus] = NodeCache()
        self._memo: EpochMemo[tuple[object, ...], int] = EpochMemo()  # score by (GPUs, CPU, pod's changes)
        self._capacity: dict[str, tuple[int, Amount | None]] = {}  # class -> (generation, smallest capacity)
        self._usable: EpochMemo[GpuState, tuple[int, tuple[Usable, ...]]] = EpochMemo()
        self._fragmentation: EpochMemo[tuple[int, GpuState], float] = EpochMemo()  # by (free CPU, GPUs)
        self._classes: dict[tuple[str, ...], Classes] = {}
        self._sizes: dict[Sizes, Sizes] = {}
        self._shares: dict[tuple[str, Amount], dict[Sizes, int]] = {}  # a slice's milli-GPU share of a GPU
        self._demands: dict[Demand, tuple[int, TaskShape]] = {}  # demand -> (pods seen, its shape now)
        self._resolved = -1  # the class generation the demands' shapes were read with

    @property
    def epoch(self) -> int:
        """Moves when the learned workload does (read before scoring: the shapes follow the
        classes and devices first, see `sync`)."""
        self.sync()
        return self.workload.epoch

    # --- the workload ---------------------------------------------------------------------

    def observe(self, pod: Pod) -> None:
        """Count a newly seen pod in the workload mix."""
        self.sync()
        demand = _demand(pod)
        seen = self._demands.get(demand)
        shape = seen[1] if seen is not None else self.shape_of_demand(demand)
        self._demands[demand] = (seen[0] + 1 if seen is not None else 1, shape)
        self.workload.observe(shape)

    def sync(self) -> None:
        """Re-read the task type of every demand seen so far when a class or device changed.

        Why: what a request means depends on the classes and devices known when it is read — a
        class request is a CPU-only pod while its class is unknown, a slice has no size while its
        class has no devices. At start-up the informers list pods and classes concurrently, so
        reading each pod once, when first seen, made the learned mix (and the placements) depend
        on which list came back first, and kept it wrong for every pod seen before its class."""
        generation = self.state.classes.generation
        if generation == self._resolved:
            return
        self._resolved = generation
        moves: list[tuple[TaskShape, TaskShape, int]] = []
        for demand, (count, shape) in self._demands.items():
            now = self.shape_of_demand(demand)
            if now != shape:
                self._demands[demand] = (count, now)
                moves.append((shape, now, count))
        self.workload.recount(moves)

    def shape_of_demand(self, demand: Demand) -> TaskShape:
        """The task type of a demand (CPU, extended resource requests) with the classes known now."""
        cpu, requests = demand
        found = dict(requests)
        count = found.get(self.resource, 0)
        milli = MILLI if count else 0
        cls_name, dimension = "", ""
        size: Amount = 0
        for name, amount in requests:
            cls = self.state.classes.resource_class(name)
            if cls is None:
                continue
            cls_name = cls.name
            if cls.sharing is None:
                count += int(amount)
                milli = MILLI
                continue
            capacity = self._smallest_capacity(cls)
            if capacity:
                count = max(count, 1)
                dimension, size = cls.sharing.dimension, amount * cls.sharing.unit
                milli = min(MILLI, max(1, int(size * MILLI / capacity)))
        return TaskShape(count, milli, cls_name, cpu, dimension, size)

    def _smallest_capacity(self, cls: ResourceClass) -> Amount | None:
        """The smallest sharing-dimension capacity among the class's devices (None: none has one)."""
        assert cls.sharing is not None
        generation = self.state.classes.generation
        cached = self._capacity.get(cls.name)
        if cached is not None and cached[0] == generation:
            return cached[1]
        capacities = [capacity for d, names in self.state.classes.device_classes.items()
                      if cls.name in names and d in self.state.devices
                      and (capacity := self.state.devices[d].capacity.get(cls.sharing.dimension))]
        smallest = min(capacities) if capacities else None
        self._capacity[cls.name] = (generation, smallest)
        return smallest

    def scarcity(self, shapes: Sequence[TaskShape]) -> dict[TaskShape, float]:
        """Per GPU task type: (all GPUs / the GPUs that could ever serve it) ** exponent, read at
        each workload refresh. A GPU could serve a type when its node, empty, could take one pod
        of it: enough allocatable CPU, enough GPUs (of the type's class, if it has one).

        Why: the measure weighs a type by its pods, so a rare type that few nodes can serve weighs
        next to nothing, and pods that could go anywhere fill those nodes first — the type then
        fails for good and its GPUs stay unused. Two cases the trace variants show:
        - pods bound to a GPU model (a quarter of GPU pods bound to models, gpuspec20: 4.49 %
          unallocated against 4.96 % unweighted, seeds 3-4);
        - 8-GPU pods asking 120 cores, which only the 39 servers of 128 cores can take (1,213
          nodes, most of 96): with LeastAllocated preferring the node with the most CPU free,
          small pods went there first, and on seeds where the big pods came late they all failed
          (multigpu20, tuning seeds 3, 4, 5, 7: 4.69, 3.89, 3.75, 5.33 % unallocated with the
          class rule alone, 3.75, 3.75, 3.68, 4.20 with this one).
        The class rule is the special case of this one where every node has the CPU.
        """
        table = self._scarcity_table()
        factors: dict[TaskShape, float] = {}
        total = table.total
        for shape in shapes:
            if not shape.count or not total:
                continue
            serving = 0
            for cpu, gpus, per_class, nodes in table.profiles:
                usable = per_class.get(shape.cls, 0) if shape.cls else gpus
                if cpu >= shape.cpu and usable >= shape.count:
                    serving += usable * nodes
            if serving:
                factors[shape] = (total / serving) ** self.scarcity_exponent
        return factors

    def _scarcity_table(self) -> NodeProfiles:
        """The nodes' capacity grouped into profiles, kept until a node or a device class changes
        (the warm-up refreshes the workload on every pod: count the nodes once). A node's devices
        are read too: every change of them, a ghost's coming, going or renaming among them, moves
        the class registry's generation."""
        key = (self.state.capacity_version, self.state.classes.generation)
        if self._profiles is not None and self._profiles[0] == key:
            return self._profiles[1]
        counts: dict[tuple[int, int, tuple[tuple[str, int], ...]], int] = {}
        total = 0
        for info in self.state.nodes.values():
            node = info.node
            if node is None:
                continue
            per_class: dict[str, int] = {}
            devices = 0
            for device in info.devices.values():
                if device.resource_name != self.resource:
                    continue
                devices += 1
                for cls in self.state.classes.device_classes.get(device.name, ()):
                    per_class[cls] = per_class.get(cls, 0) + 1
            gpus = devices or node.allocatable.get(self.resource, 0)
            if not gpus:
                continue
            total += gpus
            profile = (node.allocatable.get(CPU, 0), gpus, tuple(sorted(per_class.items())))
            counts[profile] = counts.get(profile, 0) + 1
        table = NodeProfiles(total, tuple((cpu, gpus, dict(classes), n) for (cpu, gpus, classes), n in counts.items()))
        self._profiles = (key, table)
        return table

    # --- the measure ----------------------------------------------------------------------

    def fragmentation(self, free_cpu: int, gpus: GpuState) -> float:
        """The node's fragmentation, memoised per workload epoch: the "before" side of every
        score is the same node state cycle after cycle, and a slice's device choice measures the
        same states again (on the default trace this more than halves the computations, 835k to
        362k, and saves about a fifth of the run's CPU, every placement unchanged: bench/README)."""
        memo = self._fragmentation.table(self.workload.epoch)
        key = (free_cpu, gpus)
        value = memo.get(key)
        if value is None:
            value = memo[key] = self._measure(free_cpu, gpus)
        return value

    def _measure(self, free_cpu: int, gpus: GpuState) -> float:
        total, usable = self._usable_by_group(gpus)
        if not total:
            return 0.0
        groups = self.workload.groups
        frag = float(total)
        for index, pods, per_pod, runs in usable:
            group = groups[index]
            for cpu, popularity in zip(group.cpus, group.popularity):
                if cpu > free_cpu:
                    break
                fitting = pods if cpu <= 0 else min(pods, free_cpu // cpu)
                if per_pod:
                    frag -= popularity * fitting * per_pod
                else:
                    frag -= popularity * _most_used(runs, fitting)
        return frag

    def _usable_by_group(self, gpus: GpuState) -> tuple[int, tuple[Usable, ...]]:
        """(total free milli, [(group, pods of the group the GPUs could take, the milli-GPU each
        uses when all use the same (else 0), those pods by the milli-GPU each uses)] for groups
        that fit)."""
        memo = self._usable.table(self.workload.epoch)
        hit = memo.get(gpus)
        if hit is not None:
            return hit
        total = sum(slot[0] for slot in gpus)
        usable: list[Usable] = []
        for index, group in enumerate(self.workload.groups):
            if group.slice:
                runs = _slice_runs(group, gpus, self._shares)
                if len(runs) == 1:  # one share: the usual case
                    usable.append((index, runs[0][0], runs[0][1], runs))
                elif runs:
                    usable.append((index, sum(pods for pods, _ in runs), 0, runs))
                continue
            slots = 0  # pods of the group's size the GPUs could still take
            for free, classes, _ in gpus:
                if free >= group.milli and (not group.cls or group.cls in classes):
                    slots += free // group.milli
            pods = slots // group.count
            if pods:
                per_pod = group.count * group.milli
                usable.append((index, pods, per_pod, ((pods, per_pod),)))
        result = memo[gpus] = (total, tuple(usable))
        return result

    # --- node views -----------------------------------------------------------------------

    def _device_classes(self, name: str) -> Classes:
        names = tuple(sorted(self.state.classes.device_classes.get(name, ())))
        return self._classes.setdefault(names, names)

    def _device_sizes(self, device: Device, classes: Classes) -> Sizes:
        """The device's capacity in the sharing dimension of each of its classes that shares."""
        known = self.state.classes.classes
        dimensions = {cls.sharing.dimension for name in classes
                      if (cls := known.get(name)) is not None and cls.sharing is not None}
        sizes = tuple(sorted((dimension, capacity) for dimension in dimensions
                             if (capacity := device.capacity.get(dimension))))
        return self._sizes.setdefault(sizes, sizes)

    def gpus(self, info: NodeInfo) -> NodeGpus:
        """The node's free CPU and GPUs before the pod, cached until the node or the classes move."""
        epoch = self.state.classes.generation
        hit = self._nodes.entries.get(info.name)  # NodeCache's rule, inline: called for thousands of nodes
        if hit is not None and hit[0] == info.generation and hit[1] == epoch:
            return hit[2]
        node = info.node
        assert node is not None
        alloc = node.allocatable
        free_cpu = alloc.get(CPU, 0) - info.requested.get(CPU, 0)
        devices = sorted((d for d in info.devices.values() if d.resource_name == self.resource and d.schedulable),
                         key=lambda d: d.name)
        view: DeviceView = {}
        idle: list[str] = []
        if not devices:  # a plain count without device objects: anonymous, class-less GPUs
            for i in range(min(MAX_PLAIN_SLOTS, max(0, alloc.get(self.resource, 0) - info.used(self.resource)))):
                view[f"#{i}"] = (MILLI, (), ())
                idle.append(f"#{i}")
        for device in devices:
            use = self.state.ledger.use.get(device.name)
            classes = self._device_classes(device.name)
            if use is None or not use.busy:
                idle.append(device.name)
                view[device.name] = (MILLI, classes, self._device_sizes(device, classes))
            elif not use.exclusive:
                left = _slices_left(device, self.state.ledger.shared_dimensions(use))
                if left > 0:
                    view[device.name] = (left, classes, self._device_sizes(device, classes))
        # Plain count requests hold no particular GPU: they take idle GPUs in a fixed order of
        # their slots (widest class set first), so the result depends on the GPUs' slots only,
        # never on device names — which lets equal nodes share scores (score_rows).
        idle.sort(key=lambda name: (view[name], name), reverse=True)
        if devices:
            spare = len(idle) - info.requested.get(self.resource, 0)
            if self.resource in alloc:
                spare = min(spare, alloc[self.resource] - info.used(self.resource))
            held = max(0, len(idle) - max(0, spare))
            for name in idle[:held]:
                del view[name]
            idle = idle[held:]
        if len(self._nodes) > 2 * len(self.state.nodes) + 64:  # forget deleted nodes
            self._nodes.clear()
        return self._nodes.put(info, epoch, NodeGpus(free_cpu, view, _state(view), tuple(idle)))

    # --- score and device choice ----------------------------------------------------------

    def score(self, ctx: PodContext, info: NodeInfo) -> int:
        if not self.workload.types:
            return NEUTRAL
        gpus = self.gpus(info)
        pod = ctx.pod
        removed: list[GpuSlot] = []
        added: list[GpuSlot] = []
        idle = [gpus.devices[name] for name in gpus.idle_order]
        plan = ctx.plans.get(info.name)
        if plan is not None:
            self._slice_changes(plan, ctx.phases, info, gpus, removed, added, idle)
        # Whole GPUs of a class, like plain counts, are modelled by slot, not by the device the
        # plan names (plain holds are fungible, so the two can disagree): the narrowest idle
        # GPUs of the class go first, as the planner prefers them.
        for name, count in ctx.class_needs().items():
            matching = sorted((slot for slot in idle if name in slot[1]), key=lambda slot: (len(slot[1]), slot))
            for slot in matching[:count]:
                idle.remove(slot)
                removed.append(slot)
            for slot in idle[:max(0, count - len(matching))]:
                removed.append(slot)
            del idle[:max(0, count - len(matching))]
        plain = pod.requests.get(self.resource, 0)
        removed += idle[:plain]
        pod_cpu = pod.requests.get(CPU, 0)
        # equal nodes in equal situations score equally: most cycles end here
        key = (gpus.state, gpus.free_cpu, pod_cpu, tuple(sorted(removed)), tuple(sorted(added)))
        memo = self._memo.table(self.workload.epoch)
        hit = memo.get(key)
        if hit is not None:
            return hit
        after = list(gpus.state)
        for slot in removed:
            after.remove(slot)
        after += added
        delta = (self.fragmentation(gpus.free_cpu - pod_cpu, tuple(sorted(after)))
                 - self.fragmentation(gpus.free_cpu, gpus.state))
        value = memo[key] = sigmoid_score(delta)
        return value

    def choose_slice(self, info: NodeInfo, dimension: str, amount: Amount, options: list[Device]) -> Device:
        """Of the devices a slice fits on (best-fit order), the one leaving the least fragmentation,
        an idle GPU charged the share the slice takes of it.

        Why the charge: a slice on an idle GPU takes that share from whole-GPU pods, which never
        get a partly used GPU; on a used one it takes room only slices could have. The measure
        counts that only through whole-GPU types in the mix, and a cluster that has seen slices
        alone has none (the prior's 2-, 4- and 8-GPU pods often fit as many either way). Then
        the remainders under one slice each GPU strands for the mix's slice types decided: a
        user's 1Gi slices landed in pairs on three V100s of a node once 100Mi slices were in the
        mix (3-milli shares: 1000, 969, 938 milli free leave 1, 0, 2 — half a milli at 1/6 of
        the mix; tests/replay/test_slice_join_fine_units.py). Charged its share, an idle GPU wins
        when it saves more than the slice takes (the 0.7-GPU pod an 800-milli GPU would no
        longer fit: tests/unit/test_fragmentation.py), never for a remainder under a slice."""
        if len(options) < 2 or not self.workload.groups:
            return options[0]
        gpus = self.gpus(info)
        best, best_frag = options[0], None
        seen: set[GpuSlot] = set()
        for device in options:
            current = gpus.devices.get(device.name)
            if current is None or current in seen:
                continue  # equal GPUs leave equal fragmentation: the first in best-fit order wins
            seen.add(current)
            after = list(gpus.state)
            after.remove(current)
            left = _slices_left(device, self._used_after(device.name, {dimension: amount}))
            if left > 0:
                after.append((left, current[1], current[2]))
            frag = self.fragmentation(gpus.free_cpu, tuple(sorted(after)))
            if current[0] == MILLI:  # idle (a used GPU never reads fully free: `_slice_left`)
                frag += MILLI - left
            if best_frag is None or frag < best_frag:
                best, best_frag = device, frag
        return best

    def _slice_changes(self, plan: DevicePlan, phases: Mapping[str, Phases], info: NodeInfo, gpus: NodeGpus,
                       removed: list[GpuSlot], added: list[GpuSlot], idle: list[GpuSlot]) -> None:
        """What the plan's slices of shared GPUs do: each GPU they use gives up its slot for a
        smaller one. Taken per device as the pod holds it (`lifecycle.device_holds`): a pod whose
        containers each take a slice puts them on one GPU (what the GPU keeps is what all of them
        leave; an init container's slice and a later one's overlap) or on several GPUs whose slots
        may be equal (each GPU changes, not only the first of a value)."""
        taken: dict[str, tuple[Device, dict[str, Amount]]] = {}  # device -> (device, dimension -> the pod's amount)
        for name, amount, _resource, dimension in device_holds(plan.grants, phases):
            device = info.devices.get(name)
            if amount is None or name not in gpus.devices or device is None:
                continue
            added_by = taken.setdefault(name, (device, {}))[1]
            added_by[dimension] = added_by.get(dimension, 0) + amount
        for name, (device, amounts) in taken.items():
            slot = gpus.devices[name]
            if slot in idle:
                idle.remove(slot)
            removed.append(slot)
            left = _slices_left(device, self._used_after(name, amounts))
            if left > 0:
                added.append((left, slot[1], slot[2]))

    def _used_after(self, name: str, added: Mapping[str, Amount]) -> dict[str, Amount]:
        """What the device's slices use of each dimension once `added` (dimension -> amount) is
        on it too: every dimension counts against its own capacity (`DeviceLedger.shared_use`)."""
        ledger = self.state.ledger
        use = ledger.use.get(name)
        if use is None or not use.by_kind:
            return dict(added)
        used = ledger.shared_dimensions(use)
        dimensions = set(used) | set(added)
        if len(dimensions) > 1:
            dimensions.discard("")
        return {dimension: (used[dimension] if dimension in used else ledger.shared_use(use, dimension))
                + added.get(dimension, 0) for dimension in dimensions}


K = TypeVar("K")
V = TypeVar("V")


class EpochMemo(Generic[K, V]):
    """A memo valid for one workload epoch: dropped whole when the epoch moves (every entry
    depends on the task mix) or when it outgrows MEMO_LIMIT."""

    def __init__(self) -> None:
        self._data: dict[K, V] = {}
        self._epoch = -1

    def table(self, epoch: int) -> dict[K, V]:
        if epoch != self._epoch or len(self._data) > MEMO_LIMIT:
            self._data = {}
            self._epoch = epoch
        return self._data


@dataclass(frozen=True, slots=True)
class NodeProfiles:
    """The cluster's GPU nodes by capacity: all their GPUs, and per distinct (allocatable CPU,
    GPUs, GPUs per class) how many nodes have it."""

    total: int
    profiles: tuple[tuple[int, int, dict[str, int], int], ...]


@dataclass(frozen=True, slots=True)
class NodeGpus:
    free_cpu: int
    devices: DeviceView
    state: GpuState
    idle_order: tuple[str, ...]  # idle GPUs in the order plain count requests take them


def _demand(pod: Pod) -> Demand:
    """What a pod's task type is read from: its CPU and its extended resource requests (the GPU
    resource and class resources are among them; memory and the like are not part of a type)."""
    return (pod.requests.get(CPU, 0),
            tuple(sorted((name, amount) for name, amount in pod.requests.items() if is_extended(name))))


def sigmoid_score(delta: float) -> int:
    """FGD's `int64(sigmoid((before - after) / 1000) * MaxNodeScore)`."""
    x = delta / MILLI
    if x > 700:  # exp overflow: the score is 0 long before
        return 0
    return int(MAX_NODE_SCORE / (1.0 + math.exp(x)))


def _slice_runs(group: GpuGroup, gpus: GpuState, shares: dict[tuple[str, Amount], dict[Sizes, int]]) -> Runs:
    """The pods of a slice group the GPUs could take, by the milli-GPU each uses: a slice is
    `group.slice` of each GPU's own capacity in the group's dimension (none on a GPU smaller than
    the slice). A pod of several GPUs takes its GPUs from the largest shares down. `shares`
    caches a slice's share of a GPU by (dimension, slice), then the GPU's sizes.

    This runs per GPU-state and group on every miss of the usable-pods memo: the usual case, a
    class whose GPUs all have one size (one share), adds up without a dict."""
    one_share, one_slices = 0, 0  # while every GPU so far gives the same share
    units: dict[int, int] | None = None  # milli-GPU per slice -> slices the GPUs hold, once shares differ
    by_sizes = shares.get((group.dimension, group.slice))
    if by_sizes is None:
        by_sizes = shares[group.dimension, group.slice] = {}
    for free, classes, sizes in gpus:
        if group.cls not in classes:
            continue
        share = by_sizes.get(sizes)
        if share is None:
            capacity = next((size for dimension, size in sizes if dimension == group.dimension), 0)
            share = by_sizes[sizes] = max(1, int(group.slice * MILLI / capacity)) if group.slice <= capacity else 0
        if not share or free < share:
            continue
        if units is None and share == (one_share or share):
            one_share, one_slices = share, one_slices + free // share
            continue
        if units is None:
            units = {one_share: one_slices} if one_slices else {}
        units[share] = units.get(share, 0) + free // share
    if units is None:
        pods = one_slices // group.count
        return ((pods, group.count * one_share),) if pods else ()
    if group.count == 1:  # a pod is one slice
        return tuple((slices, share) for share, slices in sorted(units.items(), reverse=True))
    runs: list[tuple[int, int]] = []
    partial, partial_milli = 0, 0  # GPUs of a pod begun on larger shares
    for share, slices in sorted(units.items(), reverse=True):
        if partial:
            taken = min(group.count - partial, slices)
            partial, partial_milli, slices = partial + taken, partial_milli + taken * share, slices - taken
            if partial == group.count:
                runs.append((1, partial_milli))
                partial, partial_milli = 0, 0
        pods, partial_new = divmod(slices, group.count)
        if pods:
            runs.append((pods, group.count * share))
        if partial_new:
            partial, partial_milli = partial_new, partial_new * share
    return tuple(sorted(runs, key=lambda run: -run[1]))


def _most_used(runs: Runs, pods: int) -> int:
    """The milli-GPU that `pods` of the runs' pods use, those using the most first."""
    used = 0
    for run_pods, per_pod in runs:
        taken = min(run_pods, pods)
        used += taken * per_pod
        pods -= taken
        if not pods:
            break
    return used


def _slices_left(device: Device, used: Mapping[str, Amount]) -> int:
    """The milli-GPU a device in shared use has left: that of its scarcest dimension in use."""
    if len(used) == 1:  # one dimension in use (the usual case; this runs per GPU per node tried)
        for dimension, amount in used.items():
            return _slice_left(device, dimension, amount)
    return min((_slice_left(device, dimension, amount) for dimension, amount in used.items()), default=MILLI)


def _slice_left(device: Device, dimension: str, used: Amount) -> int:
    """The milli-GPU left of `capacity` with `used` taken: what the slices use is rounded down, so
    what is left is rounded up. Rounding what is left down lost a remainder on every partly used
    GPU, so two slices on two GPUs measured up to a milli less free (less fragmented) than both
    on one — with `unit: 1Mi` (4000Mi and 20000Mi of an 80Gi A100: 951 + 755 against 707 + 1000)
    the second slice opened the empty GPU. Rounded this way, slices on one GPU never measure more
    free than the same slices spread, and GPUs that strand alike are left to the planner's
    best-fit order (the fullest that fits: the second slice joins the first). A used GPU never
    reads fully free: a slice under a thousandth of it counts 1 milli, not 0 (an idle GPU's 1000)."""
    capacity = device.capacity.get(dimension)
    if not capacity:
        return 0
    return max(0, MILLI - max(int(used * MILLI // capacity), 1 if used > 0 else 0))


def _state(view: DeviceView) -> GpuState:
    return tuple(sorted(v for v in view.values() if v[0] > 0))
