"""The GPU oracle the Binding-in-flight worlds share (test_bindings_in_flight.py,
test_listing_orders.py): given who holds each GPU whole and who holds slices of it — every live
bound pod and every Binding still able to land, as each world counts them — no GPU is held whole
by two, whole beside a slice, or sliced beyond its memory; and a Binding about to go out fits
beside every holder but its own pod.

Why one home: both worlds judge the same promise (a GPU is never given twice, whatever lands
late); only how they count holders differs (annotations as they stand, or every version a pod
was bound with)."""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction

from scheduler.api.quantity import parse_quantity

Gpu = tuple[str, str]  # (node, deviceID): what the node agent hands out
Whole = dict[Gpu, set[str]]  # GPU -> who holds it whole
Sliced = dict[Gpu, dict[str, Fraction]]  # GPU -> who holds a slice -> how much memory

CAPACITY = Fraction(parse_quantity("32Gi"))  # every GPU's memory in these worlds


def check_holders(whole: Whole, sliced: Sliced, log: list[str]) -> None:
    """No GPU held whole by two or whole beside a slice; no GPU's slices over its memory."""
    for gpu, who in whole.items():
        assert len(who) == 1 and not sliced.get(gpu), \
            f"GPU {gpu} given whole to {sorted(who)}" + (f" and in slices to {sorted(sliced[gpu])}" if sliced.get(gpu)
                                                         else "") + "\n" + "\n".join(log)
    for gpu, slices in sliced.items():
        assert sum(slices.values()) <= CAPACITY, \
            f"GPU {gpu}: slices {dict(slices)} over its {CAPACITY}\n" + "\n".join(log)


def check_grants(pod_key: str, uid: str, grants: Iterable[tuple[Gpu, Fraction | None]], whole: Whole,
                 sliced: Sliced, log: list[str]) -> None:
    """A Binding about to go out for pod `uid`: each GPU it grants (whole: None, else a memory
    slice) fits beside every holder but the pod itself (its own Bindings in flight included)."""
    for gpu, amount in grants:
        others = {who for who in whole.get(gpu, ()) if not who.startswith(uid)}
        shared = {who: n for who, n in sliced.get(gpu, {}).items() if not who.startswith(uid)}
        assert not others, f"{pod_key} given GPU {gpu} held whole by {sorted(others)}\n" + "\n".join(log)
        if amount is None:
            assert not shared, f"{pod_key} given GPU {gpu} whole, sliced by {sorted(shared)}\n" + "\n".join(log)
        else:
            assert sum(shared.values()) + amount <= CAPACITY, \
                f"{pod_key} given {amount} of GPU {gpu} beside {shared}\n" + "\n".join(log)
