"""What the cluster's GPU demand looks like: the task-type mix the fragmentation score weighs by.

Fragmentation is only meaningful relative to the work that will arrive (FGD, ATC'23): two free
half-GPUs are no loss if every job wants half a GPU, and a total loss if every job wants a whole
one. Tessera learns the mix from the pods it sees (every pod ever observed, counted once), grouped
by GPU demand — whole GPUs `k`, or a fraction of one GPU rounded to 5 % — with each type's mean CPU
and memory. The popularity snapshot used for scoring is refreshed when a new type appears or the
number of observed pods grew by 5 %, and each refresh bumps `epoch` so cached scores are redone.
"""

from __future__ import annotations

from dataclasses import dataclass

MILLI = 1000
_FRACTION_STEP = 50  # milli-GPU buckets
_REFRESH_GROWTH = 1.05


@dataclass(frozen=True, slots=True)
class TaskType:
    whole: int  # whole GPUs (0 for fractional or CPU-only tasks)
    fraction: int  # milli-GPU of one shared GPU (0 when whole or CPU-only)
    cpu: int  # mean millicores
    memory: int  # mean bytes
    popularity: float  # share of observed tasks


def demand_key(whole: int, fraction_milli: int) -> tuple[int, int]:
    if whole:
        return whole, 0
    if fraction_milli <= 0:
        return 0, 0
    bucket = min(MILLI, max(_FRACTION_STEP, round(fraction_milli / _FRACTION_STEP) * _FRACTION_STEP))
    return (1, 0) if bucket >= MILLI else (0, bucket)


class WorkloadModel:
    def __init__(self) -> None:
        self._counts: dict[tuple[int, int], list[int]] = {}  # key -> [count, cpu sum, memory sum]
        self.total = 0
        self._snapshot_total = 0
        self.types: tuple[TaskType, ...] = ()
        self.epoch = 0

    def observe(self, whole: int, fraction_milli: int, cpu: int, memory: int) -> None:
        key = demand_key(whole, fraction_milli)
        entry = self._counts.get(key)
        new_type = entry is None
        if entry is None:
            entry = self._counts[key] = [0, 0, 0]
        entry[0] += 1
        entry[1] += cpu
        entry[2] += memory
        self.total += 1
        if new_type or self.total >= self._snapshot_total * _REFRESH_GROWTH:
            self._refresh()

    def _refresh(self) -> None:
        self._snapshot_total = self.total
        self.types = tuple(
            TaskType(whole, fraction, cpu // count, memory // count, count / self.total)
            for (whole, fraction), (count, cpu, memory) in sorted(self._counts.items())
        )
        self.epoch += 1
