"""Which device-plugin endpoints this node serves, and how many slots each advertises.

The kubelet only calls a device plugin's `Allocate` for resource names that a registered plugin
serves, so every ResourceClass that matches at least one local device needs its own endpoint,
named after the class's `resourceName` (reference/devices.md §7.1, §7.4). What the endpoint
advertises are *virtual slots* `<class>-0 … <class>-(n-1)`, not devices: the kubelet picks slot
ids, the agent ignores them and hands out the devices the scheduler chose. Slots only make the
kubelet's count right:

- exclusive class: n = matching devices, of which as many are Healthy as matching devices are
  healthy (the rest are advertised Unhealthy, so node capacity still shows them). A device that
  went unhealthy while a pod holds it still counts as Healthy: the kubelet keeps that pod's slot
  allocated, and since slots are not tied to devices, marking one more slot Unhealthy would take
  a free slot from the next pod the scheduler rightly placed on a healthy device;
- sharing class (`spec.sharing`): n = Σ ⌊capacity[dimension] / unit⌋ over matching devices (a pod
  asking for 8 units of a 1Gi-memory class gets 8 slots), capped at `MAX_SLOTS` because the kubelet
  keeps and checkpoints every slot id;
- either way, a device that pods still hold under the class but that is no longer one of its
  matching devices here (vanished from discovery, or its class selector changed) keeps the
  (Healthy) slots those pods were given: the kubelet keeps them allocated, and the scheduler does
  not count the device free until its pods are gone.

Class parsing, validity, resourceName clashes and selector matching are the scheduler core's
(`ClassRegistry`, `ResourceClass.matches`): the agent must agree with the scheduler exactly about
which devices a class has, so it runs the same code on the same ExtendedResource JSON.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

import structlog

from scheduler.agent.allocate import HeldGrants, held_names
from scheduler.api.quantity import Amount
from scheduler.core.classes import ClassRegistry, ResourceClass, Sharing
from scheduler.core.objects import Device

__all__ = ["MAX_SLOTS", "MAX_SLOT_ID", "EndpointPlan", "plan_endpoints", "slot_ids"]

log = structlog.get_logger("tessera.agent.slots")

MAX_SLOTS = 1024
MAX_SLOT_ID = 63  # the device-plugin API's limit on Device.ID


@dataclass(frozen=True, slots=True)
class EndpointPlan:
    class_name: str
    resource_name: str
    sharing: Sharing | None
    devices: tuple[str, ...]  # names of the matching ExtendedResources (for logs)
    slots: int  # advertised slots
    healthy: int  # of which Healthy
    capped: bool = False
    # slot ids the kubelet gave to pods still on the node (Allocate told us; the ledger keeps them
    # across agent restarts): when some slots
    # must be advertised Unhealthy, these are the last to be, since the kubelet ties health to
    # the slot id and would refuse to re-admit such a pod ("previously allocated devices are no
    # longer healthy") for a GPU failure that is not its own
    in_use: frozenset[str] = frozenset()

    def slot_ids(self) -> list[str]:
        return slot_ids(self.class_name, self.slots)

    def unhealthy_slots(self) -> set[str]:
        """Which slots to advertise Unhealthy (`slots - healthy` of them): free ones first, from
        the highest index down, then in-use ones the same way."""
        ids = self.slot_ids()
        count = max(0, self.slots - self.healthy)
        ordered = [i for i in reversed(ids) if i not in self.in_use] + [i for i in reversed(ids) if i in self.in_use]
        return set(ordered[:count])


def slot_prefix(class_name: str) -> str:
    """The class name, shortened with a hash when `<prefix>-<index>` could pass 63 characters."""
    room = MAX_SLOT_ID - 1 - len(str(MAX_SLOTS - 1))
    if len(class_name) <= room:
        return class_name
    digest = hashlib.sha256(class_name.encode()).hexdigest()[:8]
    return f"{class_name[:room - 9].rstrip('.-')}-{digest}"


def slot_ids(class_name: str, count: int) -> list[str]:
    prefix = slot_prefix(class_name)
    return [f"{prefix}-{i}" for i in range(count)]


def _kept_elsewhere(held: Mapping[str, tuple[Amount | None, ...]], matching: Collection[str],
                    sharing: Sharing | None) -> int:
    """Slots the kubelet keeps allocated to pods for grants of this resource on devices outside
    `matching` (gone from discovery, or no longer matching the class): one per exclusive grant,
    amount / unit per shared one."""
    total = Fraction(0)
    for device, amounts in held.items():
        if device in matching:
            continue
        for amount in amounts:
            total += 1 if amount is None or sharing is None else Fraction(amount) / Fraction(sharing.unit)
    return math.ceil(total)


def plan_endpoints(classes: Iterable[ResourceClass], devices: Iterable[Device],
                   held_grants: HeldGrants | None = None) -> dict[str, EndpointPlan]:
    """resourceName -> endpoint, for every valid class that matches at least one local device.

    Device health here is the agent's own (the status it publishes), not a stale apiserver copy.
    `held_grants`: what non-terminal pods on this node were assigned, per resource name and
    device; a held device's slots count as Healthy (see the module docstring), under any resource
    name. `spec.unschedulable` does not reduce slots: a cordoned device may still be in use by a pod
    that the kubelet has to keep admitting on restart. Grants on devices the class no longer has here (a
    GPU that vanished, a selector that stopped matching) add Healthy slots. The kubelet keeps
    those pods' slots allocated (available = healthy - allocated), while the scheduler counts such
    a device as held, not free: without them the kubelet would have fewer free slots than the
    scheduler has free devices, and a pod it rightly placed would fail admission.
    """
    registry = ClassRegistry()
    for cls in classes:  # the core's rules: invalid classes and resourceName clashes drop out
        registry.upsert(cls, ())
    local = list(devices)
    held = held_names(held_grants or {})
    plans: dict[str, EndpointPlan] = {}
    # the devices' own resourceName is another device plugin's count (NVIDIA's `nvidia.com/gpu`):
    # the core refuses a class on it (`ClusterState._admitted`), and an endpoint of that name
    # would take the kubelet's registration of it over from that plugin
    carried = {device.resource_name for device in local}
    for resource_name, cls in sorted(registry.by_resource.items()):
        if resource_name in carried:
            continue
        matching = [d for d in local if cls.matches(d)]
        if not matching:
            continue
        usable = [d for d in matching if d.healthy or d.name in held]
        if cls.sharing is None:
            total = len(matching)
            healthy = len(usable)
        else:
            total = sum(max(0, cls.sharing.slices_on(d)) for d in matching)
            healthy = sum(max(0, cls.sharing.slices_on(d)) for d in usable)
            if total == 0:
                log.warning("slots.no_capacity", resource_class=cls.name, dimension=cls.sharing.dimension,
                            message=f"matching devices have no {cls.sharing.dimension} capacity of at least one unit")
                continue
        kept = _kept_elsewhere((held_grants or {}).get(resource_name, {}), {d.name for d in matching}, cls.sharing)
        total += kept
        healthy += kept
        capped = total > MAX_SLOTS
        if capped:
            log.warning("slots.capped", resource_class=cls.name, slots=total, advertised=MAX_SLOTS,
                        message=f"{total} slots would be advertised; only {MAX_SLOTS} are (choose a larger sharing unit)")
        plans[resource_name] = EndpointPlan(
            class_name=cls.name, resource_name=resource_name, sharing=cls.sharing,
            devices=tuple(sorted(d.name for d in matching)), slots=min(total, MAX_SLOTS),
            healthy=min(healthy, MAX_SLOTS), capped=capped)
    return plans
