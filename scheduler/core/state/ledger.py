"""The device ledger: which pod holds which device (exclusively, or a slice of it), per node how
many devices of each resource are busy, deleted devices still held ("ghosts"), and which pods
still wait for the node agent to hand their devices out (the allocation gate's part of the state).

Charges come only from a pod's `tessera.dev/devices` and `tessera.dev/held-devices` annotations
(or our own assumptions), so the ledger after a restart is the ledger before it — also for a
bound pod whose devices annotation was edited: it holds every device any version named
(`cluster.union_holds`), and the union recorded in held-devices (the Binding's own value, then
the scheduler's write after an edit) gives a process started after the edit the same holds. A
deleted ExtendedResource stays counted — as a
cordoned ghost — until the last pod holding it is gone: devices are released when their pods are,
not when their objects are.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Container, Iterable, Set
from dataclasses import dataclass, field, replace

from scheduler.api.quantity import Amount, format_alike, format_quantity
from scheduler.core.classes import ClassRegistry
from scheduler.core.lifecycle import DeviceHold
from scheduler.core.objects import Device, ObjectMeta, Pod
from scheduler.core.resources import Resources
from scheduler.core.state.events import Notice
from scheduler.core.state.nodes import NodeInfo
from scheduler.core.tenants import pods_named


UNSEEN_RESOURCE = "nvidia.com/gpu"
"""What a held device that no ExtendedResource ever described counts against while its node has
no device to name its resource (the device plugin's GPU resource, what such nodes advertise)."""


UNTOLD = ("found so when its pods were first seen, already bound (a start, a relist, a pod created with "
          "spec.nodeName): it cannot tell a capacity that went down beneath slices given within it from slices "
          "given beyond it (another scheduler, or a Binding by hand)")
"""What an over-full device's notice and REASON add when its holders were found so (`DeviceLedger.untold`)."""


# a held device's capacity went down below its slices (`DeviceLedger.upsert`): the reason of its
# Warning, while they stay over it (`standing.still_stands`)
CAPACITY_LOWERED = "CapacityLoweredWhileHeld"


SliceKind = tuple[str, str]
"""What a slice is of: (its resource name, the dimension its grant names — "" when it names none)."""


@dataclass(slots=True)
class DeviceUse:
    """Who holds a device: pods that have it whole, and pods' slices of it per kind.

    Slices are kept per resource name and dimension, not as one total, because each uses one
    capacity of the device: a GPU can hold a slice of its memory and a slice of its cores at
    once, each within its own capacity. A slice's dimension is the one its grant names (the
    class's `sharing.dimension` when it was granted: an edit of the class since does not change
    what the pod was given); for a grant that names none, the one its resource name's class has
    when asked (`DeviceLedger.shared_use`), so the ledger is the same whether a pod arrived before
    its class or after (a restart lists them in any order)."""

    exclusive: set[str] = field(default_factory=set)  # pod uids
    shared: dict[str, dict[SliceKind, Amount]] = field(default_factory=dict)  # pod uid -> kind -> slices
    by_kind: dict[SliceKind, Amount] = field(default_factory=dict)  # kind -> every pod's slices of it
    # the pods that held slices of it when a capacity of its object went down beneath them
    # (`DeviceLedger.upsert`): over that capacity with these alone, the device was cut, not
    # given twice (`DeviceLedger.cut`); a holder charged since is no such pod
    kept: frozenset[str] = frozenset()

    @property
    def busy(self) -> bool:
        return bool(self.exclusive or self.shared)

    def add(self, uid: str, amount: Amount | None, resource: str, dimension: str) -> bool:
        """Charge a pod's hold; True when it conflicts (a whole device given twice, or whole and
        in slices)."""
        conflict = bool(self.exclusive) or (amount is None and bool(self.shared))
        if amount is None:
            self.exclusive.add(uid)
        else:
            kind = (resource, dimension)
            held = self.shared.setdefault(uid, {})
            held[kind] = held.get(kind, 0) + amount
            self.by_kind[kind] = self.by_kind.get(kind, 0) + amount
        return conflict

    def remove(self, uid: str, amount: Amount | None, resource: str, dimension: str) -> None:
        if amount is None:
            self.exclusive.discard(uid)
            return
        kind = (resource, dimension)
        held = self.shared.get(uid)
        if held is None or kind not in held:
            return
        total = self.by_kind[kind] - held.pop(kind)
        if not held:
            del self.shared[uid]
        if any(kind in other for other in self.shared.values()):
            self.by_kind[kind] = total
        else:
            del self.by_kind[kind]


class DeviceLedger:
    def __init__(self, devices: dict[str, Device], classes: ClassRegistry,
                 node_info: Callable[[str], NodeInfo], touch: Callable[[NodeInfo], None],
                 pod_key: Callable[[str], str], holds: Container[str]) -> None:
        self.devices = devices  # the cache's devices (ghosts included)
        self._holds = holds  # uids of nominated preemptors whose grants are holds, not placements
        self.classes = classes
        self._node_info = node_info
        self._touch = touch
        self._pod_key = pod_key  # uid -> namespace/name, for messages naming a device's holders
        self.use: dict[str, DeviceUse] = {}
        self.ghosts: set[str] = set()  # deleted ExtendedResources still held by pods
        self.moved: dict[str, Device] = {}  # name -> its object on another node, taken in once released
        # ghosts known only from their holders' annotations whose resourceName those record (what
        # the device was granted under): their object, when it comes, does not rename them
        self.recorded: set[str] = set()
        # GPUs pods hold by a name the ledger keeps for another GPU (`hold_unseen`): node ->
        # deviceID -> holder uid -> the name it holds it by; a device of the node naming that
        # deviceID is a duplicate (`mark_duplicates`) until the last such holder is gone
        self.elsewhere: dict[str, dict[str, dict[str, str]]] = {}
        self._elsewhere_of: dict[str, set[tuple[str, str]]] = {}  # holder uid -> its (node, deviceID)s
        # pods first seen already bound (a start, a relist, spec.nodeName): what they hold was given before
        # this process saw it given, within what capacity it cannot know (`untold`)
        self.found: set[str] = set()
        # nodes whose devices a ghost's coming (`hold_unseen`) or going (`drop_released_ghosts`)
        # changed, for the cache to judge their classes again (`ClusterState._recount_foreign`)
        self.reshaped: set[str] = set()

    def charge(self, pod: Pod, device: str, amount: Amount | None, resource: str, dimension: str) -> list[Notice]:
        """Charge a pod's hold; a conflict's notice names the pod and every other holder (the log
        line and the Event are all an audit has once the pods are gone): a device held whole and
        by another pod besides, or one whose holders' slices together exceed a capacity of it
        (`overfilled`) — unless only the pods that held them when that capacity went down do
        (`cut`: the pods keep what they were given). A nominated preemptor's hold is no holder
        here: it is the room kept for it beside victims on their way out, which a victim's Binding
        confirmed after the hold was made charges again (a pod whose Binding was in flight is a
        victim too)."""
        use = self.use.setdefault(device, DeviceUse())
        whole_conflict = use.add(pod.uid, amount, resource, dimension)
        if pod.uid in self._holds:
            return []
        if not whole_conflict:
            # the usual charge: a free device, a slice beside no other pod's, slices that fit
            if amount is None or len(use.shared) < 2 or not (over := self.overfilled(device, use)):
                return []
            _, sliced = self.holders(use)
            sliced.discard(pod.uid)
            return self._overfill_notice(device, use, over, sliced, pod.key, pod.meta.namespace, pod.uid)
        whole, sliced = self.holders(use)
        whole.discard(pod.uid)
        sliced.discard(pod.uid)
        if whole or (amount is None and sliced):  # beside holds and slices only: no conflict
            return [self._whole_conflict(device, pod, amount is None, whole, sliced)]
        if amount is None or not sliced:
            return []
        over = self.overfilled(device, use)
        return self._overfill_notice(device, use, over, sliced, pod.key, pod.meta.namespace, pod.uid) if over else []

    def _whole_conflict(self, device: str, pod: Pod, charged_whole: bool, whole: set[str], sliced: set[str]) -> Notice:
        """The DeviceConflict of a device held whole beside another pod's hold, on `pod` (charged
        it whole when `charged_whole`, else a slice; naming the other holders, `whole` and in
        slices `sliced`), worded for what each holds: two whole holds are a GPU "assigned to more
        than one pod exclusively", a whole hold beside a slice is not."""
        def named(namespace: str, uids: set[str], what: str, what_many: str) -> str:
            keys = sorted(self._pod_key(uid) for uid in uids)
            return f"{pods_named(namespace, keys)} that {'holds ' + what if len(keys) == 1 else 'hold ' + what_many}"

        if not sliced and charged_whole:
            return _conflict(pod.key, pod.meta.namespace, pod.uid, lambda namespace: (
                f"device {device} is assigned to more than one pod exclusively: {pod.key}, and "
                f"{named(namespace, whole, 'it', 'it')}"))

        def others(namespace: str) -> str:
            said = [named(namespace, whole, "it whole", "it whole")] if whole else []
            return "; ".join(said + ([named(namespace, sliced, "a slice of it", "slices of it")] if sliced else []))

        mine = "whole" if charged_whole else "a slice"
        return _conflict(pod.key, pod.meta.namespace, pod.uid, lambda namespace: (
            f"device {device} is held whole and by another pod besides: {pod.key} ({mine}), and {others(namespace)}"))

    def _overfill_notice(self, device: str, use: DeviceUse, over: list[tuple[str, Amount, Amount]],
                         others: set[str], key: str, namespace: str, uid: str) -> list[Notice]:
        """The DeviceConflict of a device whose holders' slices exceed a capacity of it (`over`:
        `overfilled`), on the holder `key` (naming the `others`, the other real slice holders);
        none when it has no other, or only the pods that held it when that capacity went down
        (`cut`) hold it."""
        if not others or self.cut(use, others | {uid}):
            return []
        if self.untold(use):
            return [self._untold_notice(device, use, over)]
        named = sorted(self._pod_key(other) for other in others)
        holds = "holds a slice" if len(named) == 1 else "hold slices"
        return [_conflict(key, namespace, uid, lambda here: (
            f"device {device} is shared beyond its capacity: {key}, and {pods_named(here, named)} that {holds} of it, "
            f"use {over_text(over)}"))]

    def untold(self, use: DeviceUse) -> bool:
        """Its slices are over a capacity (asked of an over-full device) and every real holder was
        found holding its slice (`found`: first seen already bound: at a start, in a relist, or
        created with spec.nodeName), none seen given
        it nor the capacity seen going down beneath them: a cut before this process started (the
        live reading `cut`) or slices given beyond the capacity by two writers (a conflict) —
        a listing cannot tell which. It reads as the conservative one, a conflict (nothing more
        is placed there either way), and its notice and REASON say it cannot tell (`UNTOLD`)."""
        whole, sliced = self.holders(use)
        return not use.kept and not whole and bool(sliced) and sliced <= self.found

    def _untold_notice(self, device: str, use: DeviceUse, over: list[tuple[str, Amount, Amount]]) -> Notice:
        """The DeviceConflict of an over-full device whose origin a start cannot tell (`untold`):
        on its ExtendedResource, naming every holder, blaming none — the same whatever order the
        pods and the object were listed in."""
        _, sliced = self.holders(use)
        holders = ", ".join(sorted(self._pod_key(uid) for uid in sliced))
        found = self.devices.get(device)
        return Notice("ExtendedResource", device, "DeviceConflict",
                      f"ExtendedResource {device}: its slices use {over_text(over)}, held by {holders}, {UNTOLD}; "
                      "no more of it is given out until they fit", "", found.meta.uid if found is not None else "")

    @staticmethod
    def cut(use: DeviceUse, sliced: Iterable[str]) -> bool:
        """The slice holders `sliced` all held the device when a capacity of it went down beneath
        them (`DeviceUse.kept`): over it, they were cut, not given it twice."""
        kept = use.kept
        return bool(kept) and all(uid in kept for uid in sliced)

    def holders(self, use: DeviceUse) -> tuple[set[str], set[str]]:
        """The pods that hold the device whole and in slices: nominated preemptors' holds left
        out (the room kept for them beside victims on their way out is no second holder)."""
        return ({uid for uid in use.exclusive if uid not in self._holds},
                {uid for uid in use.shared if uid not in self._holds})

    def conflicting(self, use: DeviceUse, device: str) -> bool:
        """Held whole by a pod and by any other pod besides, whole or in slices, or in slices by
        two or more pods that together use more of a capacity of it than it has (`overfilled`):
        what `charge` reports as it happens (DeviceConflict), asked of the state now (a notice
        still standing, the view)."""
        whole, sliced = self.holders(use)
        if whole:
            return len(whole) + len(sliced) > 1
        return len(sliced) > 1 and not self.cut(use, sliced) and bool(self.overfilled(device, use))

    def capacity_cut(self, device: str, use: DeviceUse | None = None) -> list[tuple[str, Amount, Amount]]:
        """(dimension, in use, capacity) of each capacity of the device its slices exceed because it
        went down beneath them (`cut`): no conflict — the pods keep what they were given, and no
        more of it is given out until they fit (the slice room is below none); [] otherwise."""
        use = self.use.get(device) if use is None else use
        if use is None or not use.kept:
            return []
        whole, sliced = self.holders(use)
        return self.overfilled(device, use) if sliced and not whole and self.cut(use, sliced) else []

    def overfilled(self, device: str, use: DeviceUse) -> list[tuple[str, Amount, Amount]]:
        """(dimension, in use, capacity) of each capacity of the device its holders' slices
        together exceed: more than one Tessera (or a Binding by hand) shared it beyond what it has,
        as the core never does. Only what the slices are known to be of counts — the dimension
        their grant names, else the one their resource name's class shares by now — and nominated
        preemptors' holds do not (the room kept for them beside victims on their way out): a
        conflict is a fact, never a guess; placing counts slices of no known dimension against
        every capacity (`shared_use`) and so never places onto such a device either."""
        found = self.devices.get(device)
        if found is None or not use.shared:
            return []
        by_kind: dict[SliceKind, Amount] = use.by_kind
        holds = self._holds
        for uid in use.shared:  # a loop, not any(): this runs on every slice charged beside another
            if uid in holds:
                by_kind = {}
                for holder, held in use.shared.items():
                    if holder not in holds:
                        for kind, amount in held.items():
                            by_kind[kind] = by_kind.get(kind, 0) + amount
                break
        capacities = found.capacity
        used = self.by_dimension(by_kind)
        return [(dimension, amount, capacity)
                for dimension, amount in (sorted(used.items()) if len(used) > 1 else used.items())
                if dimension and (capacity := capacities.get(dimension)) is not None and amount > capacity]

    def by_dimension(self, by_kind: dict[SliceKind, Amount]) -> dict[str, Amount]:
        """The slices `by_kind` summed per dimension they use: the one their grant names, else the
        one their resource name's class shares by now (the rule `shared_use`, `shared_dimensions`
        and `overfilled` all read); under "" those of no known dimension (a resource name no
        sharing class owns now: deleted, or changed)."""
        dimension_of = self.classes.sharing_dimension
        if len(by_kind) == 1:  # slices of one kind (the usual case; this runs per GPU per node tried)
            for (resource, granted), amount in by_kind.items():
                return {granted or dimension_of(resource): amount}
        used: dict[str, Amount] = {}
        for (resource, granted), amount in by_kind.items():
            named = granted or dimension_of(resource)
            used[named] = used.get(named, 0) + amount
        return used

    def shared_use(self, use: DeviceUse | None, dimension: str) -> Amount:
        """How much of the device's `dimension` capacity its slices use: the slices granted in
        that dimension; of those whose grant names none, the ones of a class that shares by it
        now, and those whose resource name no sharing class owns now (deleted, or changed), which
        may be of any dimension and so count against each."""
        if use is None:
            return 0
        used = self.by_dimension(use.by_kind)
        total = used.get(dimension, 0)
        return total + used.get("", 0) if dimension else total

    def shared_dimensions(self, use: DeviceUse) -> dict[str, Amount]:
        """Each dimension the device's slices use, and how much of it (`shared_use`), by name;
        "" for slices of no known dimension when no slice of a known one is beside them."""
        used = self.by_dimension(use.by_kind)
        unknown = used.pop("", None)
        if unknown is None:
            return dict(sorted(used.items())) if len(used) > 1 else used
        if not used:
            return {"": unknown}
        return {dimension: used[dimension] + unknown for dimension in sorted(used)}

    def hold_unseen(self, name: str, device_id: str, info: NodeInfo, uid: str, granted_as: str = "") -> list[Notice]:
        """A pod on `info`'s node holds device `name` (the GPU `device_id`), which the cache does
        not have there: deleted before its holder was seen (a successor replica seeing the
        deletion before the killed leader's Binding), or before this replica started (its pods can
        be listed before its ExtendedResources), or listed on another node (it moved while held,
        before this replica started, or naming another deviceID now). The pod still has the GPU, so it stays counted against the
        node, as a ghost of the node's device resource (the one its other devices carry; unnamed
        until a device of the node arrives, counted as UNSEEN_RESOURCE meanwhile) that names the
        GPU the holder has — another name for that GPU is then a duplicate — until its last holder
        is gone; an object listed elsewhere waits in `moved` until then, as on the live path
        (`upsert`). Only the node's devices are read: at start-up every held device may be unseen.

        `granted_as` is the resourceName the holder's annotation records the device was granted
        under ("" in annotations written before the field existed): the node count it stays
        charged under until released, whatever its object names now — the restart half of what
        `upsert` does live for a held device whose resourceName changes (a restarted replica never
        saw the old name on the object).

        A name the ledger already keeps held for another GPU (a ghost, or a held object, on
        another node or naming another deviceID: the object moved while held, and another actor
        bound `uid` by what it reads now) cannot stand for this one too: the pod's GPU is kept
        as held by deviceID on its node (`elsewhere`), so a device of the node that names it —
        that object, or the GPU published again under another name — is a duplicate, given to no
        other pod, until `uid` is gone (`release_elsewhere`)."""
        known = self.devices.get(name)
        if known is not None and (name in self.ghosts or ((use := self.use.get(name)) is not None and use.busy)):
            if device_id and (known.node_name != info.name or known.device_id not in ("", device_id)):
                self.elsewhere.setdefault(info.name, {}).setdefault(device_id, {})[uid] = name
                self._elsewhere_of.setdefault(uid, set()).add((info.name, device_id))
                notices = self.mark_duplicates(info)
                self.refresh(info)
                return notices
            return []
        if known is not None and known.node_name == info.name and known.device_id in ("", device_id):
            if not granted_as or known.resource_name == granted_as:
                return []
            # its object names another resourceName now: held as granted, the object parked
            self.moved[name] = known
            self.classes.device_removed(name)
            self.devices[name] = info.devices[name] = replace(known, resource_name=granted_as, unschedulable=True)
            self.ghosts.add(name)
            return [_renamed_while_held(known, granted_as, info.name)]
        if known is not None:  # elsewhere, or naming another GPU now: parked until the holder is gone
            self.moved[name] = known
            self.classes.device_removed(name)
            elsewhere = self._node_info(known.node_name)
            elsewhere.devices.pop(name, None)
            self.reshaped.add(known.node_name)
            self.mark_duplicates(elsewhere)
            self.refresh(elsewhere)
        names = Counter(device.resource_name for device in info.devices.values() if device.resource_name)
        resource_name = names.most_common(1)[0][0] if names else ""  # named when a device of the node arrives
        if known is not None:
            resource_name = known.resource_name
        if granted_as:
            resource_name = granted_as
            self.recorded.add(name)
        meta = ObjectMeta(name, "", "", "", {}, {}, "", True)
        ghost = Device(meta, info.name, resource_name, device_id, {}, {}, unschedulable=True, healthy=False)
        self.classes.device_removed(name)  # no class indexes a ghost: its generation moves (one device more)
        self.devices[name] = info.devices[name] = ghost
        self.ghosts.add(name)
        self.reshaped.add(info.name)
        self.mark_duplicates(info)
        return []

    def release_elsewhere(self, uid: str) -> None:
        """The pod is gone (or placed again): the GPUs it held by another GPU's name are free."""
        for node, device_id in self._elsewhere_of.pop(uid, ()):
            by_id = self.elsewhere[node]
            holders = by_id[device_id]
            del holders[uid]
            if not holders:
                del by_id[device_id]
            if not by_id:
                del self.elsewhere[node]
            info = self._node_info(node)
            self.mark_duplicates(info)
            self.refresh(info)

    def uncharge(self, uid: str, grants: Iterable[DeviceHold]) -> None:
        for device, amount, resource, dimension in grants:
            use = self.use.get(device)
            if use is None:
                continue
            use.remove(uid, amount, resource, dimension)
            if not use.busy:
                del self.use[device]

    def recharge(self, uid: str, grants: Iterable[DeviceHold]) -> None:
        """Put a lifted pod's grants back (in any order relative to other lifted pods)."""
        for device, amount, resource, dimension in grants:
            self.use.setdefault(device, DeviceUse()).add(uid, amount, resource, dimension)

    def drop_released_ghosts(self, device_names: Iterable[str]) -> set[str]:
        """Forget deleted devices whose last holder has left (until then they still count); the
        nodes a moved one's object was taken in on (`moved`): each has one more device now. The
        nodes either changes are `reshaped`."""
        joined: set[str] = set()
        for device in device_names:
            if device in self.ghosts and device not in self.use:
                self.ghosts.discard(device)
                self.recorded.discard(device)
                self.classes.device_removed(device)  # no class indexes a ghost: its generation moves (one device less)
                ghost = self.devices.pop(device)
                holder = self._node_info(ghost.node_name)
                holder.devices.pop(device, None)
                self.reshaped.add(holder.name)
                self.mark_duplicates(holder)
                self.refresh(holder)
                if (moved := self.moved.pop(device, None)) is not None:
                    self.upsert(moved, None)
                    joined.add(moved.node_name)
                    self.reshaped.add(moved.node_name)
        return joined

    def refresh_for(self, device_names: Iterable[str]) -> None:
        nodes = {self.devices[name].node_name for name in device_names if name in self.devices}
        for node_name in nodes:
            self.refresh(self._node_info(node_name))

    def counted_as(self, name: str) -> str:
        """The resource a device counts against on its node while held (`refresh`): its own
        resourceName, or UNSEEN_RESOURCE for a held device no ExtendedResource has named yet."""
        device = self.devices.get(name)
        return device.resource_name or UNSEEN_RESOURCE if device is not None else UNSEEN_RESOURCE

    def refresh(self, info: NodeInfo) -> None:
        """Recount the node's busy devices per resource (what plain count requests share), and
        those of them only holds use (`held_only`). A GPU a pod of the node holds by the name of
        a device held elsewhere (`elsewhere`) is one of them too, under that name's resource
        (its ghost still counts where it is: more in use, never less)."""
        busy: dict[str, int] = {}
        held_busy: dict[str, int] = {}
        # per resourceName: the distinct GPUs (deviceIDs) described, and those no count may take
        # (unschedulable or in use) — what `NodeInfo.described` and `ClusterState.count_room` read
        described: dict[str, set[str]] = {}
        taken: dict[str, set[str]] = {}
        for name, device in info.devices.items():
            key = device.device_id or name
            ids = described.get(device.resource_name)
            if ids is None:
                ids = described[device.resource_name] = set()
            ids.add(key)
            use = self.use.get(device.name)
            if use is not None and use.busy:
                resource = self.counted_as(device.name)
                busy[resource] = busy.get(resource, 0) + 1
                if self.held_only(use):
                    held_busy[resource] = held_busy.get(resource, 0) + 1
                taken.setdefault(device.resource_name, set()).add(key)
            elif not device.schedulable:
                taken.setdefault(device.resource_name, set()).add(key)
        for resource, _ in self.counted_elsewhere(info):
            busy[resource] = busy.get(resource, 0) + 1
        info.busy = busy
        info.held_busy = held_busy
        info.described_ids = {resource: len(ids) for resource, ids in described.items()}
        info.free_ids = {resource: len(ids - taken[resource]) if resource in taken else len(ids)
                         for resource, ids in described.items()}
        self._touch(info)

    def counted_elsewhere(self, info: NodeInfo) -> list[tuple[str, Set[str]]]:
        """The GPUs pods of the node hold by the name of a device kept elsewhere (`elsewhere`)
        that count busy here (`refresh`), each under that name's resource with its holders: those
        whose deviceID no busy device of the node names already."""
        kept = self.elsewhere.get(info.name)
        if not kept:
            return []
        busy_ids = {device.device_id for device in info.devices.values()
                    if (use := self.use.get(device.name)) is not None and use.busy}
        return [(self.counted_as(min(holders.values())), holders.keys())
                for device_id, holders in kept.items() if device_id not in busy_ids]

    def held_only(self, use: DeviceUse | None) -> bool:
        """The device is busy only through nominated preemptors' holds: kept for them, but not in
        use yet — no real holder (bound or assumed pod) counts it, so a pod sharing it makes it
        one more GPU in use now."""
        if use is None or not use.busy:
            return False
        holds = self._holds
        return all(uid in holds for uid in use.exclusive) and all(uid in holds for uid in use.shared)

    def upsert(self, device: Device, old: Device | None) -> list[Notice]:
        """A new or changed ExtendedResource (a deleted one coming back is no ghost any more).

        A held device's name appearing on another node (its `spec.nodeName` edited, or deleted and
        created again there) does not move while held: the holder still has the GPU where it runs,
        so it stays counted there, as a ghost, and the object is taken in once the holder is gone.
        The same for a held device whose deviceID changes: the holder has the GPU it was given, so
        the ghost keeps naming that one (another name for it is a duplicate) until released. And
        for one whose resourceName changes (a node agent restarted with another `--resource-name`):
        the holder was given it as one of the node's devices of the old name, whose count plain
        requests share, so it keeps counting there. Not for a ghost known only from its holder's
        annotation (`hold_unseen`): its resourceName was the node's guess, the object says it — the
        ghost takes the object's resourceName, also when it stays behind for a node or deviceID
        change — unless the annotation records the name it was granted under (`recorded`): that
        one it keeps, as a device seen changing live does."""
        guessed = _unseen(old) and device.name not in self.recorded if old is not None else False
        if old is not None and (old.node_name != device.node_name or old.device_id != device.device_id
                                or (old.resource_name != device.resource_name and not guessed)) \
                and (use := self.use.get(device.name)) and use.busy:
            first = device.name not in self.moved
            self.moved[device.name] = device
            if device.name not in self.ghosts:
                self.delete(device.name)
            elif first and guessed and old.resource_name != device.resource_name:
                # named after its node's devices (a restart listed the holder first): its own
                # object, seen now, names what it was counted under, whichever was listed first
                holder = self._node_info(old.node_name)
                self.classes.device_removed(device.name)  # a ghost renamed: the generation moves
                self.devices[device.name] = holder.devices[device.name] = replace(
                    old, resource_name=device.resource_name)
                self.refresh(holder)
            if not first:
                return []
            if old.node_name != device.node_name:
                return [Notice("ExtendedResource", device.name, "DeviceMovedWhileHeld",
                               f"ExtendedResource {device.name} now names node {device.node_name}, but a pod on node "
                               f"{old.node_name} holds it: it counts on {old.node_name} until released, then on "
                               f"{device.node_name}", "", device.meta.uid)]
            if old.device_id != device.device_id:
                return [Notice("ExtendedResource", device.name, "DeviceIDChangedWhileHeld",
                               f"ExtendedResource {device.name} now names deviceID {device.device_id}, but a pod "
                               f"holds it as {old.device_id}: it stays that GPU, given to no other pod, until released",
                               "", device.meta.uid)]
            return [_renamed_while_held(device, old.resource_name, old.node_name)]
        self.moved.pop(device.name, None)
        self.recorded.discard(device.name)
        use = self.use.get(device.name)
        over_before = bool(self.overfilled(device.name, use)) if use is not None else False
        if old is not None and old.node_name != device.node_name:
            previous = self._node_info(old.node_name)
            previous.devices.pop(device.name, None)
            self.mark_duplicates(previous)
            self.refresh(previous)
        self.devices[device.name] = device
        self.ghosts.discard(device.name)
        info = self._node_info(device.node_name)
        info.devices[device.name] = device
        for name in self.ghosts & info.devices.keys():  # ghosts made before any device of the node was known
            held = info.devices[name]
            if not held.resource_name:
                self.devices[name] = info.devices[name] = replace(held, resource_name=device.resource_name)
        self.classes.device_changed(device)
        notices = self.mark_duplicates(info)
        self.refresh(info)
        if use is not None:
            notices += self._capacity_changed(device, old, use, over_before)
        return notices

    def _capacity_changed(self, device: Device, old: Device | None, use: DeviceUse, over_before: bool) -> list[Notice]:
        """What a held device's new object says of its slices: nothing while they fit (a cut
        they outgrew is forgotten) or were over before. Over only now, because a capacity its
        object had went down beneath them (an admin's edit, the agent publishing less memory),
        they were cut, not given twice: the pods keep what they were given (`DeviceUse.kept`) and
        a Warning on the object says so (`CapacityLoweredWhileHeld`), as a Node whose count went
        down below the GPUs in use gets one (`GPUsOvercommitted`). Over a capacity only the object
        says (listed after its holders, at a restart — a listing cannot tell a cut from a second
        scheduler's Binding, so its notice says so: `untold` — or a capacity its object did not have) is a conflict."""
        over = self.overfilled(device.name, use)
        if not over:
            use.kept = frozenset()
            return []
        if over_before:
            return []
        whole, sliced = self.holders(use)
        before = old.capacity if old is not None else {}
        if sliced and not whole and all(before.get(dimension, 0) > capacity for dimension, _, capacity in over):
            use.kept = frozenset(sliced)
            return [self._capacity_lowered(device, before, over, sliced)]
        if len(sliced) < 2:
            return []
        key, uid = max((self._pod_key(holder), holder) for holder in sliced)
        sliced.discard(uid)
        return self._overfill_notice(device.name, use, over, sliced, key, key.rpartition("/")[0], uid)

    def _capacity_lowered(self, device: Device, before: dict[str, Amount], over: list[tuple[str, Amount, Amount]],
                          sliced: set[str]) -> Notice:
        """The Warning on a held device's object whose capacity went down below its slices."""
        holders = ", ".join(sorted(self._pod_key(uid) for uid in sliced))
        went = " and ".join("its {} went down from {} to {} under {} held".format(
            dimension, *format_alike(before[dimension], capacity, used)) for dimension, used, capacity in over)
        return Notice("ExtendedResource", device.name, CAPACITY_LOWERED,
                      f"ExtendedResource {device.name}: {went} in slices by {holders} (its object was edited, or "
                      "its node agent publishes less): they keep the slices they hold, and no more is given out "
                      "until they fit", "", device.meta.uid)

    def mark_duplicates(self, info: NodeInfo) -> list[Notice]:
        """Mark the node's devices that share a deviceID with another of its ExtendedResources
        (a ghost still held included): the node agent hands GPUs out by deviceID, so one GPU under
        two names would go to two pods. Neither is given out until one is gone; a Warning on each
        device that becomes a duplicate says why."""
        by_id: dict[str, list[str]] = {}
        for name, device in info.devices.items():
            if device.device_id:
                by_id.setdefault(device.device_id, []).append(name)
        held_elsewhere = self.elsewhere.get(info.name, {})
        notices: list[Notice] = []
        for name, device in list(info.devices.items()):
            names = by_id.get(device.device_id, ()) if device.device_id else ()
            holders = held_elsewhere.get(device.device_id, {}) if device.device_id else {}
            duplicate = len(names) > 1 or bool(holders)
            if duplicate == device.duplicate:
                continue
            self.devices[name] = info.devices[name] = replace(device, duplicate=duplicate)
            if duplicate and name not in self.ghosts and len(names) > 1:
                others = ", ".join(sorted(n for n in names if n != name))
                notices.append(Notice(
                    "ExtendedResource", name, "DuplicateDeviceID",
                    f"ExtendedResource {name} names deviceID {device.device_id}, as {others} on node "
                    f"{info.name} does: neither is given to a pod until one of them is deleted (or, held "
                    f"by a pod, released)", "", device.meta.uid))
            elif duplicate and name not in self.ghosts:
                held = ", ".join(sorted(f"{self._pod_key(uid)} (as {as_name})" for uid, as_name in holders.items()))
                notices.append(Notice(
                    "ExtendedResource", name, "DuplicateDeviceID",
                    f"ExtendedResource {name} names deviceID {device.device_id}, which {held} on node "
                    f"{info.name} {'holds' if len(holders) == 1 else 'hold'} by the name of a device held "
                    "elsewhere: it is not given to a pod until released", "", device.meta.uid))
        return notices

    def delete(self, name: str) -> str | None:
        """An ExtendedResource was deleted: its node (None if unknown or already a ghost)."""
        old = self.devices.get(name)
        if old is None or name in self.ghosts:
            return None
        info = self._node_info(old.node_name)
        self.classes.device_removed(name)
        use = self.use.get(name)
        if use is not None and use.busy:
            ghost = replace(old, unschedulable=True)
            self.devices[name] = info.devices[name] = ghost
            self.ghosts.add(name)
        else:
            del self.devices[name]
            info.devices.pop(name, None)
            self.mark_duplicates(info)
        self.refresh(info)
        return old.node_name

    def forget_moved(self, device: Device) -> bool:
        """The deletion of an object waiting in `moved`: it is not taken in (True), and the held
        ghost it waited behind stays as it is."""
        waiting = self.moved.get(device.name)
        if waiting is None or (device.meta.uid and waiting.meta.uid != device.meta.uid):
            return False
        del self.moved[device.name]
        return True

    def is_ghost(self, name: str) -> bool:
        return name in self.ghosts

    def update_allocating(self, info: NodeInfo, pod: Pod) -> bool:
        """Track whether a bound pod still waits for the node agent; True when it just stopped."""
        resources = allocating_resources(pod)
        if resources:
            info.allocating[pod.uid] = resources
            return False
        return info.allocating.pop(pod.uid, None) is not None


def counted_requests(requests: Resources, grants: Iterable[DeviceHold],
                     counted_as: Callable[[str], str]) -> Resources:
    """What a pod's requests charge its node as counts, given the devices it holds (`grants`).

    A pod's `tessera.dev/devices` annotation is what it holds (DESIGN §2): a device it holds
    counts on its node as busy, under the resource the device counts as (`counted_as`). When the
    pod's grants name such devices under that very resource name (`nvidia.com/gpu` given by a
    class that owned the name then, or by an older release), its request of the name is those
    devices: counting it as well would count each GPU twice — for the pod's whole life, restarts
    included. So the request goes down by the whole devices it names there; a slice of such a
    device is a share of it, not a GPU count, so the device counting once covers the request
    whole. Whatever a request asks beyond the devices named (an annotation naming fewer than the
    pod asks for) stays a count: the device plugin may have given it (fail closed)."""
    whole: dict[str, int] = {}
    sliced: set[str] = set()
    for device, amount, resource, _ in grants:
        if resource not in requests or counted_as(device) != resource:
            continue
        if amount is None:
            whole[resource] = whole.get(resource, 0) + 1
        else:
            sliced.add(resource)
    if not whole and not sliced:
        return requests
    counted = dict(requests)
    for resource in sliced:
        del counted[resource]
    for resource, devices in whole.items():
        if resource in counted:
            left = counted[resource] - devices
            if left > 0:
                counted[resource] = left
            else:
                del counted[resource]
    return counted


def over_text(over: Iterable[tuple[str, Amount, Amount]]) -> str:
    """"20Gi of its 16Gi memory" (each capacity the slices exceed, joined by "and")."""
    return " and ".join(f"{format_quantity(used)} of its {format_quantity(capacity)} {dimension}"
                        for dimension, used, capacity in over)


def _conflict(key: str, namespace: str, uid: str, worded: Callable[[str], str]) -> Notice:
    """A DeviceConflict on the pod `key` of `namespace`, `worded(namespace)` its message naming
    other holders as an Event there may (`pods_named`): the log line (`worded("")`) names them all."""
    message, told = worded(""), worded(namespace)
    return Notice("Pod", key, "DeviceConflict", message, namespace, uid, event_message="" if told == message else told)


def _renamed_while_held(device: Device, held_as: str, node: str) -> Notice:
    """The Warning on a held device's object that names another resourceName than the one its
    holder was given it under, which it keeps counting as until released."""
    return Notice("ExtendedResource", device.name, "ResourceNameChangedWhileHeld",
                  f"ExtendedResource {device.name} now names resourceName {device.resource_name}, but a pod "
                  f"holds it as {held_as}: it counts as {held_as} on node {node}, given to no other pod, "
                  "until released", "", device.meta.uid)


def _unseen(device: Device) -> bool:
    """A ghost made from its holder's annotation alone (`hold_unseen`): no object, so no uid
    (every object read from the apiserver has one)."""
    return not device.meta.uid


def allocating_resources(pod: Pod) -> frozenset[str]:
    """Resource names a bound pod still waits for the node agent to hand out (empty when done).

    The gate holds while `tessera.dev/phase` is `Allocating` and the pod has not started; it opens
    on `Allocated`/`Failed`, when the pod runs or ends, when it is being deleted (nothing is handed
    to it any more; a pod whose kubelet died stays Terminating for good and would hold the gate
    with it), or when the pod is gone.
    """
    if not pod.allocating or pod.phase != "Pending" or not pod.devices or pod.meta.deleting:
        return frozenset()
    return frozenset(resource for by_resource in pod.devices.values() for resource in by_resource)
