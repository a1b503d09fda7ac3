"""The test models' one recount of a node's busy GPUs (what `DeviceLedger.refresh` keeps in
`NodeInfo.busy`), shared by the property test's state check and the fuzz harness's ledger check.

Why one home: the two models once differed from the ledger's rule in the same way — both counted
the node's own devices only, and missed a GPU held by the name of a device the ledger keeps
elsewhere (`DeviceLedger.elsewhere`: the property test's NODE_NAME_AND_BACK example, then the
fuzz harness) — so a correct ledger was judged wrong until each was fixed on its own."""

from __future__ import annotations

from collections import Counter
from collections.abc import Container, Iterable

from scheduler.core.objects import Device
from scheduler.core.state import ClusterState

GPU = "nvidia.com/gpu"  # what a held device no ExtendedResource has named yet counts as


def busy_of(state: ClusterState, node: str, devices: Iterable[Device], in_use: Container[str]) -> dict[str, int]:
    """Busy GPUs per resourceName on `node`, counted afresh: each of its `devices` whose name is
    `in_use` (held by a placement or a hold), under its own resourceName; and each GPU a pod
    placed here holds by the name of a device kept elsewhere (a ghost or an object on another
    node, or one naming another GPU), once per deviceID, under that name's resource — unless a
    busy device of the node already names that deviceID."""
    busy: Counter[str] = Counter()
    busy_ids: set[str] = set()
    for device in devices:
        if device.name in in_use:
            busy[device.resource_name or GPU] += 1
            busy_ids.add(device.device_id)
    for device_id, by_holder in sorted(state.ledger.elsewhere.get(node, {}).items()):
        if device_id not in busy_ids:
            known = state.devices.get(min(by_holder.values()))
            busy[(known.resource_name if known is not None else "") or GPU] += 1
    return dict(busy)
