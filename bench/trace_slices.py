"""The slice-packing reference: how much GPU the trace's GPU-sharing pods leave unfilled on their
devices by themselves, whatever the scheduler does with nodes, models and CPU.

Why it is reported: on the Alibaba traces the headline metric (unallocated GPU % at 100 % arrived)
is, at that point, almost entirely the unfilled remainder of devices that hold slices — no whole
GPU is left free. A slice of 810 milli-GPU (a third of the default trace's sharing pods) leaves
190 that only the rare slices of 190 or less can use. So the slices alone, packed into 1,000-milli
devices, show what a placement policy is up against:

- `online best fit`: each slice, in arrival order, onto the fullest device it fits, else a new
  device — the classic online heuristic with no node, model or CPU constraint;
- `offline best fit decreasing`: the same slices known in advance, largest first — a strong
  offline packing of them (not a proven optimum).

Both are per cent of the cluster's GPU capacity, over the pods that have arrived at 100 %. They are
references, not bounds: a scheduler may also drop a slice that fits nowhere, and devices hold more
than slices.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from bench.trace_workload import MILLI, TracePod, arrived_prefix


def best_fit_waste(slices: Iterable[int], capacity: int = MILLI) -> int:
    """Milli-GPU left unfilled on the devices opened by packing `slices` in the given order, each
    onto the device with the least room that still holds it (a new device when none does)."""
    open_by_room: dict[int, int] = {}  # room left -> devices with that room
    for amount in slices:
        if not 0 < amount <= capacity:
            raise ValueError(f"a slice of {amount} does not fit a device of {capacity}")
        fitting = [room for room, count in open_by_room.items() if count and room >= amount]
        room = min(fitting) if fitting else capacity
        if fitting:
            open_by_room[room] -= 1
        if room - amount:
            open_by_room[room - amount] = open_by_room.get(room - amount, 0) + 1
    return sum(room * count for room, count in open_by_room.items())


def slice_reference(sequence: Sequence[TracePod], total_gpus: int) -> dict[str, float]:
    """Both references for one arrival order, as % of the cluster's GPU milli."""
    slices = [pod.gpu_milli for pod in arrived_prefix(sequence, total_gpus) if pod.shared]
    whole = total_gpus * MILLI
    return {"online_best_fit": 100 * best_fit_waste(slices) / whole,
            "offline_best_fit_decreasing": 100 * best_fit_waste(sorted(slices, reverse=True)) / whole}
