"""What the cluster's GPU demand looks like: the task types the fragmentation score weighs by.

Fragmentation is only meaningful relative to the work that will arrive (FGD, ATC'23): two free
half-GPUs are no loss if every job wants half a GPU, and a total loss if every job wants a whole
one. Tessera learns the mix from the pods it sees (every pod ever observed, counted once; a pod's shape
is read again when the classes or devices it depends on change: `recount`). A task
type is an exact request shape, as FGD's "typical pods": CPU, number of GPUs, milli-GPU per GPU
and the device class the GPUs must come from ("" = any GPU); a slice of a sharing class also keeps
its size in the class's dimension, because it is a different share of GPUs of different capacity. All observed shapes count, up to the
`max_types` most popular (FGD's own runs cut at 95 % of pods; on the Alibaba trace keeping the
rare shapes too left fewer GPUs unallocated: 4.55–4.67 % against 4.72–4.81 %, seeds 42–44), their
popularity normalised to sum to 1.

The snapshot used for scoring is refreshed on the first pods and then whenever the number of
observed pods grew by `_REFRESH_GROWTH`; each refresh bumps `epoch` so cached scores and device
plans are redone. Refreshing on every new shape would throw the caches away on almost every pod.

`groups` is the form the score uses: types with equal GPU demand share one group (their GPU-side
capacity on a node is the same), holding their CPU requests in ascending order with popularity.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from scheduler.api.quantity import Amount

MILLI = 1000
_REFRESH_GROWTH = 1.25
_WARM_UP = 64  # refresh on every pod until this many were seen
PRIOR_GPUS = (2, 4, 8)  # the whole-GPU shapes of the prior (multi-GPU jobs on 8-GPU servers)


@dataclass(frozen=True, slots=True, order=True)
class TaskShape:
    count: int  # GPUs per pod (0: no GPU)
    # milli-GPU per GPU: 1000 for whole GPUs; for a slice, its share of the class's smallest GPU
    # (the most it takes of any: a label and a sort key; the measure sizes it on each GPU, `slice`)
    milli: int
    cls: str  # ResourceClass the GPUs must come from; "" = any GPU of the resource
    cpu: int  # millicores
    dimension: str = ""  # a slice: the sharing dimension of its class
    slice: Amount = 0  # a slice: its size in that dimension (0 for whole GPUs)


@dataclass(frozen=True, slots=True)
class TaskType:
    shape: TaskShape
    popularity: float  # share among the typical types (they sum to 1)


@dataclass(frozen=True, slots=True)
class GpuGroup:
    """The typical types that want `count` GPUs with at least `milli` free each, from `cls` (a
    slice: `slice` of each GPU's capacity in `dimension`, a share that differs per GPU)."""

    count: int
    milli: int
    cls: str
    dimension: str
    slice: Amount
    cpus: tuple[int, ...]  # ascending CPU requests of the group's types
    popularity: tuple[float, ...]  # popularity of the type(s) with cpus[i]


class WorkloadModel:
    """The observed task types and their weights, refreshed as pods arrive (see the module doc).

    `prior_pods`: pseudo-counts for whole-GPU shapes of 2, 4 and 8 GPUs (`PRIOR_GPUS`, CPU 0) added
    to what was observed. Before much work has been seen, the model then still values keeping GPUs
    of a node together for the multi-GPU jobs a GPU cluster exists for (six 1-GPU pods are packed
    4+2 on two 4-GPU nodes, not 3+3, so a 2-GPU pod still fits); a few thousand observed pods later
    the prior weighs nothing against them.
    `scarcity`: the weight factor of task types (a type's weight is its pods times its factor;
    types it gives none, 1): see `FragmentationScore.scarcity`.
    """

    def __init__(self, max_types: int = 256, prior_pods: float = 0.0,
                 scarcity: Callable[[Sequence[TaskShape]], Mapping[TaskShape, float]] | None = None) -> None:
        self.max_types = max_types
        self.prior_pods = prior_pods
        self.scarcity = scarcity
        self._counts: dict[TaskShape, int] = {}
        self.total = 0
        self._snapshot_total = 0
        self.types: tuple[TaskType, ...] = ()
        self.groups: tuple[GpuGroup, ...] = ()
        self.epoch = 0

    def observe(self, shape: TaskShape) -> None:
        self._counts[shape] = self._counts.get(shape, 0) + 1
        self.total += 1
        if self.total <= _WARM_UP or self.total >= self._snapshot_total * _REFRESH_GROWTH:
            self._refresh()

    def recount(self, moves: Sequence[tuple[TaskShape, TaskShape, int]]) -> None:
        """Pods counted under one shape that now read as another (old, new, pods): their
        classes or devices changed. Refreshes the snapshot if anything moved."""
        for old, new, pods in moves:
            left = self._counts.get(old, 0) - pods
            if left > 0:
                self._counts[old] = left
            else:
                self._counts.pop(old, None)
            self._counts[new] = self._counts.get(new, 0) + pods
        if moves:
            self._refresh()

    def _refresh(self) -> None:
        self._snapshot_total = self.total
        counts: dict[TaskShape, float] = dict(self._counts)
        if self.prior_pods:
            for gpus in PRIOR_GPUS:
                shape = TaskShape(gpus, MILLI, "", 0)
                counts[shape] = counts.get(shape, 0) + self.prior_pods
        # most popular first; equal counts in shape order so the result never depends on arrival
        ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:self.max_types]
        factors = self.scarcity([shape for shape, _ in ranked]) if self.scarcity is not None else {}
        weighted = [(shape, count * factors.get(shape, 1.0)) for shape, count in ranked]
        covered = sum(weight for _, weight in weighted)
        self.types = tuple(TaskType(shape, weight / covered) for shape, weight in weighted)
        self.groups = _groups(self.types)
        self.epoch += 1


def _groups(types: tuple[TaskType, ...]) -> tuple[GpuGroup, ...]:
    by_demand: dict[tuple[int, int, str, str, Amount], list[tuple[int, float]]] = {}
    for t in types:
        shape = t.shape
        if shape.count:
            key = (shape.count, shape.milli, shape.cls, shape.dimension, shape.slice)
            by_demand.setdefault(key, []).append((shape.cpu, t.popularity))
    groups = []
    for (count, milli, cls, dimension, size), members in sorted(by_demand.items()):
        members.sort()
        cpus: list[int] = []
        own: list[float] = []
        for cpu, popularity in members:
            if cpus and cpus[-1] == cpu:
                own[-1] += popularity
            else:
                cpus.append(cpu)
                own.append(popularity)
        groups.append(GpuGroup(count, milli, cls, dimension, size, tuple(cpus), tuple(own)))
    return tuple(groups)
