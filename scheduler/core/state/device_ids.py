"""Which ExtendedResources name one deviceID from two nodes.

A deviceID is a GPU's UUID, and a GPU sits in one node: two objects naming it on two nodes mean one
of them describes no GPU of its node (made by hand, copied, or left by the agent of a node the GPU
moved from), and a pod given that one gets a deviceID its node agent does not have. Which object is
wrong the objects do not say, so placement is unchanged (on one node the ledger fences both:
`DeviceLedger.mark_duplicates`); this index tells a person, once per crossing, on each object. It
follows the ExtendedResource objects as the apiserver has them (not the ledger's held forms).
"""

from __future__ import annotations

from scheduler.core.objects import Device
from scheduler.core.state.events import Notice

REASON = "DeviceIDOnTwoNodes"


class DeviceIdIndex:
    """deviceID -> {object name: its node}, and the objects already warned about."""

    def __init__(self) -> None:
        self._by_id: dict[str, dict[str, str]] = {}
        self._of: dict[str, str] = {}  # object name -> its deviceID
        self._uids: dict[str, str] = {}
        self._warned: set[str] = set()

    def put(self, device: Device) -> list[Notice]:
        """The object as it is now: a Warning on it, and on each object naming its deviceID on
        another node, for those not warned about since they came to share it."""
        if self._of.get(device.name) == device.device_id and \
                self._by_id.get(device.device_id, {}).get(device.name) == device.node_name:
            self._uids[device.name] = device.meta.uid
            return []  # the same GPU on the same node: a resync or an unrelated edit
        self.remove(device.name)
        if not device.device_id:
            return []
        self._of[device.name] = device.device_id
        self._uids[device.name] = device.meta.uid
        named = self._by_id.setdefault(device.device_id, {})
        named[device.name] = device.node_name
        if len(set(named.values())) < 2:
            return []
        notices = []
        for name in [device.name, *sorted(n for n in named if n != device.name)]:
            others = sorted((other, node) for other, node in named.items() if node != named[name])
            if name in self._warned or not others:
                continue
            self._warned.add(name)
            elsewhere = ", ".join(f"{other} on node {node}" for other, node in others)
            notices.append(Notice(
                "ExtendedResource", name, REASON,
                f"ExtendedResource {name} on node {named[name]} names deviceID {device.device_id}, as {elsewhere} "
                f"{'does' if len(others) == 1 else 'do'}: a GPU is in one node, so one of them describes no GPU "
                "of its node (a pod given it gets a deviceID its node agent does not have); delete the one no "
                "node agent backs", "", self._uids.get(name, "")))
        return notices

    def remove(self, name: str) -> None:
        """The object is gone (or about to be put again): objects left alone on their deviceID's
        node may be warned again if it comes back."""
        device_id = self._of.pop(name, None)
        self._uids.pop(name, None)
        self._warned.discard(name)
        if device_id is None:
            return
        named = self._by_id.get(device_id, {})
        named.pop(name, None)
        if not named:
            del self._by_id[device_id]
        elif len(set(named.values())) < 2:
            self._warned.difference_update(named)

    def elsewhere(self, name: str) -> list[tuple[str, str]]:
        """(object, node) for each object naming the same deviceID as `name` on another node."""
        device_id = self._of.get(name)
        named = self._by_id.get(device_id, {}) if device_id is not None else {}
        return sorted((other, node) for other, node in named.items() if node != named.get(name))

    def node_of(self, name: str) -> str | None:
        """The node the object names, as the apiserver has it; None when it is not known."""
        device_id = self._of.get(name)
        return self._by_id.get(device_id, {}).get(name) if device_id is not None else None

    def stands(self, name: str) -> bool:
        """Whether the object still shares its deviceID with an object on another node."""
        device_id = self._of.get(name)
        named = self._by_id.get(device_id, {}) if device_id is not None else {}
        return len(set(named.values())) > 1
