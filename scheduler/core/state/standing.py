"""Whether the problem a notice told of is still there: asked of the state now, not remembered.

The core raises a notice once, when it first sees the problem. A replica that saw it while it
could not record Events (its informers listing after a start, or standing by) keeps it and tells
it when it leads (the live shell's `UntoldNotices`); by then the problem may be gone (the other
holder of a copied GPU ended, a device whose object changed while held was released). This asks
the same state the notice came from, through the parts that decide it (the ledger's uses and
`moved`, the pod's placement), so a Warning is written only for a problem that still exists.
"""

from __future__ import annotations

from scheduler.core.state.cluster import (
    UNKNOWN_ATTRIBUTE,
    ClusterState,
    whole_beside_running_slice,
    whole_in_two_running_containers,
)
from scheduler.core.state.device_ids import REASON as DEVICE_ID_ON_TWO_NODES
from scheduler.core.state.events import Notice
from scheduler.core.state.ledger import CAPACITY_LOWERED

# an ExtendedResource's object changed while a pod held it: the ledger keeps the held form (a
# ghost) and parks the new one in `moved` until the last holder is gone (`DeviceLedger.upsert`)
CHANGED_WHILE_HELD = frozenset({"DeviceMovedWhileHeld", "DeviceIDChangedWhileHeld", "ResourceNameChangedWhileHeld"})


def still_stands(state: ClusterState, notice: Notice) -> bool:
    """True while the problem `notice` told of is still in `state`: a device changed while held
    is still held (parked in the ledger's `moved`), a device's capacity lowered beneath its
    slices is still below them (and they the same pods' since), a pod's DeviceConflict still has a device it
    holds whole with another pod, or in slices beyond its capacity with others (or whole in two of
    its containers at once); any other notice about a
    pod while that pod (the same uid) is known, about another object until it is deleted (the
    live shell drops it then)."""
    if notice.kind == "ExtendedResource" and notice.reason in CHANGED_WHILE_HELD:
        return notice.key in state.ledger.moved
    if notice.kind == "ExtendedResource" and notice.reason == CAPACITY_LOWERED:
        return bool(state.ledger.capacity_cut(notice.key))
    if notice.kind == "ExtendedResource" and notice.reason == "DeviceConflict":  # over-full as found at a start
        return (use := state.ledger.use.get(notice.key)) is not None and state.ledger.conflicting(use, notice.key)
    if notice.kind == "ExtendedResource" and notice.reason == DEVICE_ID_ON_TWO_NODES:
        return state.device_ids.stands(notice.key)
    if notice.kind == "ResourceClass" and notice.reason == UNKNOWN_ATTRIBUTE:
        return state.unknown_attribute_stands(notice.key, notice.uid)
    if notice.kind != "Pod":
        return True
    pod = state.pods.get(notice.uid)
    if pod is None or pod.key != notice.key:
        return False
    if notice.reason != "DeviceConflict":
        return True
    placement = state.placements.get(pod.uid)
    if placement is None:
        return False
    uses = ((device, state.ledger.use.get(device)) for device in placement.devices)
    return any(use is not None and state.ledger.conflicting(use, device) for device, use in uses) or \
        bool(whole_in_two_running_containers(pod, pod.devices)) or bool(whole_beside_running_slice(pod, pod.devices))
