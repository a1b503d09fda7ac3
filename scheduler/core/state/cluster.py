"""The cluster cache: every object the scheduler knows, fed by watch events, with node accounting.

Why it looks like this:
- Pods are keyed by uid and applied idempotently: a repeated event changes nothing, a MODIFIED
  before its ADDED is an upsert, an event for a deleted uid or with an older resourceVersion is
  ignored. That is what survives informer relists, replays and recorded streams.
- Every pod bound by anyone counts against its node; pods *we* placed but whose Binding has not
  come back yet are "assumed" and count the same way, so the next cycle never hands out the same
  capacity twice.
- Its parts by job: this module keeps the objects and the node accounting; the device ledger
  (`ledger.py`) who holds which device; the gang index (`gangs.py`) which pods form groups.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from typing import TypeVar

from scheduler.api.quantity import Amount, format_quantity
from scheduler.core.annotations import DEVICES, HELD_DEVICES, DeviceAssignment, encode_devices, merge_devices
from scheduler.core.classes import DEFAULT_RESOURCE_PREFIX, ClassRegistry, ResourceClass, parse_resource_class
from scheduler.core.disruption import DisruptionBudget, parse_disruption_budget
from scheduler.core.foreign import IGNORED_SCHEDULER_KEY, ignored_message
from scheduler.core.pod_terms import IGNORED_PREFERRED_TERMS, preferred_message
from scheduler.core.lifecycle import DeviceHold, device_holds, shared_while_running, whole_beside_slice
from scheduler.core.objects import (
    JSON,
    Device,
    Node,
    ObjectError,
    Pod,
    object_uid,
    parse_device,
    parse_node,
    parse_pod,
    gang_key,
    parse_podgroup,
    podgroup_api,
    parse_priority_class,
)
from scheduler.core.resources import CPU, MEMORY, Resources
from scheduler.core.state.device_ids import DeviceIdIndex
from scheduler.core.state.events import ClusterEvent, EventKind, Notice
from scheduler.core.state.gangs import GangIndex
from scheduler.core.state.ledger import DeviceLedger, counted_requests
from scheduler.core.state.nodes import Hold, Lifted, NodeInfo, Placement
from scheduler.core.volumes import (CLAIM_KIND, STORAGE_CLASS_KIND, VOLUME_KIND, Claim, ClaimBinding, StorageClass,
                                    Volume, parse_claim, parse_storage_class, parse_volume)

_TOMBSTONES = 200_000
_Stored = TypeVar("_Stored", Claim, Volume, StorageClass)  # the storage objects `_stored` keeps
UNKNOWN_ATTRIBUTE = "UnknownDeviceAttribute"  # a valid class's selector needs an attribute no device has
NO_MATCHING_DEVICES = "NoMatchingDevices"  # a valid class matches no existing device (another cause)
NO_MATCH_NOTE = "no ExtendedResource matches the selector now"
IGNORED_SHOWN = 200  # characters of an ignored device annotation quoted in the Warning


class ClusterState:
    def __init__(self, scheduler_names: frozenset[str]) -> None:
        self.scheduler_names = scheduler_names
        self.nodes: dict[str, NodeInfo] = {}
        self.node_order: list[str] = []  # nodes with an object, in arrival order (sampling order)
        self._node_index: dict[str, int] = {}
        self.order_version = 0  # bumped when a node leaves node_order (positions shift)
        self.capacity_version = 0  # bumped when a node comes, goes or changes its allocatable
        # what a change deep in the state found to report (a moved device's node going over its
        # count as the device's holder left: `_unplace`), handed out by the `apply` it happened in,
        # else by `take_deferred_notices` (a pod forgotten outside any watch event: `Scheduler.take_notices`)
        self.deferred: list[Notice] = []
        # classes judged again as a ghost's coming or going changed whether a node has devices
        # (`_recount_reshaped`), handed out by the `apply` it happened in, else taken by the engine
        # (`take_deferred_events`) once the step that changed it is over: a forgotten pod's
        # (`Engine.take`), a scheduling cycle's (a hold it ended: the class is judged at once, its
        # waiting pods woken as the cycle ends, not at the next watch event)
        self.deferred_events: list[ClusterEvent] = []
        self.victim_priority_version = 0  # bumped when a PodGroup's class or a class's value changes
        # bumped by whatever may change which gang members count toward a minimum (`coscheduling.
        # counted_count`: pods, pending, placements, preempting, the gang index): once by every
        # public method here that changes one, at its start (no count is asked inside one; the
        # private steps they share, `_place`, `_unplace`, `_remove_pod`, leave it to them);
        # nothing outside writes those containers (`drop_pending`, `mark_going` … are the ways in)
        self.members_version = 0
        self.counted: dict[str, int] = {}  # gang key -> its count, as of members_version counted_at
        self.counted_at = -1
        # nodes changed since the node table last looked, those that left node_order among them
        # (`_touch`): the table finds the rows to take out from these (`NodeTable._rows_taken`)
        self.dirty: set[str] = set()
        self.pods: dict[str, Pod] = {}
        self.by_key: dict[str, str] = {}  # "<ns>/<name>" -> uid
        self.placements: dict[str, Placement] = {}
        self.pending: set[str] = set()  # our pods without a node (and not assumed)
        self.gated: set[str] = set()  # our pods without a node held back by spec.schedulingGates
        self.devices: dict[str, Device] = {}
        self.classes = ClassRegistry()
        self._class_specs: dict[str, ResourceClass] = {}  # each class as its object says, before `_admitted`
        # class name -> the generation whose selector's unknown attribute was warned of (`_unknown_attributes`)
        self._told_unknown: dict[str, int] = {}
        # gang key -> why its PodGroup, which exists, could not be read (and none was read before)
        self.unreadable_podgroups: dict[str, str] = {}
        # names nodes advertise that no Tessera agent serves (a node with no ExtendedResource: the
        # agent advertises the class names of its node itself): name -> such nodes, node -> its names
        self._foreign: Counter[str] = Counter()
        self._foreign_of: dict[str, frozenset[str]] = {}
        self.holds: dict[str, Hold] = {}  # nominated preemptors' room on their nodes
        self.ledger = DeviceLedger(self.devices, self.classes, self._node_info, self._touch, self._pod_key,
                                   self.holds)
        self.gangs = GangIndex()
        self.device_ids = DeviceIdIndex()
        # pods that were nominated to a node (status.nominatedNodeName, or a hold made here): the
        # ones whose room `nominations.hold_nominated` keeps when they hold none
        self.nominated: set[str] = set()
        # node -> its placed pods with any pod (anti-)affinity term, with a required pod
        # anti-affinity term (upstream's HavePodsWithAffinityList, HavePodsWithRequiredAntiAffinityList):
        # InterPodAffinity's score reads the first's terms for a pod without preferred terms of its
        # own, its symmetry check the second's; it reads only the nodes holding some
        self.affine_on: dict[str, set[str]] = {}
        self.anti_affine_on: dict[str, set[str]] = {}
        self.touches = 0  # node changes (a placement, a label) so far: what per-cycle caches key on
        # victim uid -> the preemptors waiting for its room ("": finishing a gang), until gone: a
        # victim already leaving can be a later preemptor's too, and if it stays, each lets go
        self.preempting: dict[str, set[str]] = {}
        self.marked: set[str] = set()  # gang members one of our profiles marked as preemption victims
        # bound pods whose devices annotation was edited: every assignment they held while bound
        # (what DevicesAnnotationChanged asks the shell to write into HELD_DEVICES), kept here so
        # a second edit before the first write lands loses nothing
        self.held_assignments: dict[str, DeviceAssignment] = {}
        self.pdbs: dict[str, DisruptionBudget] = {}
        self.priority_classes: dict[str, int] = {}  # PriorityClass name -> value (for PodGroups)
        # VolumeBinding's objects: claims by namespace/name, volumes and StorageClasses by name
        self.claims: dict[str, Claim] = {}
        self.volumes: dict[str, Volume] = {}
        self.storage_classes: dict[str, StorageClass] = {}
        # upstream's AssumePodVolumes: what placed pods' unbound WaitForFirstConsumer claims were
        # given (pod uid -> its ClaimBindings), and the two views VolumeBinding's filter reads: a
        # volume given to a claim (volume -> claim key), a claim to be provisioned on a node (claim
        # key -> node). Each entry lasts until the watch shows it done (the volume names a claim,
        # the claim carries selected-node or is bound) or the pod's placement is given up (forget,
        # the pod deleted): a later cycle, or a later member of the same gang, never gets it too
        self.claim_bindings: dict[str, tuple[ClaimBinding, ...]] = {}
        self.volumes_given: dict[str, str] = {}
        self.claims_provisioned: dict[str, str] = {}
        # moves whenever `volumes` changes: what VolumeBinding's index of them is valid for
        self.volumes_version = 0
        # kinds the shell cannot read (its role may not: an optional informer marked unavailable),
        # kind -> why: what reads them must not take their absence for "there are none"
        self.unread: dict[str, str] = {}
        self._tombstones: OrderedDict[str, None] = OrderedDict()
        self._resource_versions: dict[str, int] = {}

    def take_touched_groups(self) -> set[str]:
        """Gangs whose members or PodGroup changed since the last call."""
        touched, self.gangs.touched = self.gangs.touched, set()
        return touched

    # --- public queries ----------------------------------------------------------------------

    def node_infos(self) -> Iterator[NodeInfo]:
        for name in self.node_order:
            yield self.nodes[name]

    def is_ours(self, pod: Pod) -> bool:
        return pod.scheduler_name in self.scheduler_names

    def asks_gpus(self, pod: Pod) -> bool:
        """The pod asks GPUs: a ResourceClass request, or a resource named like a GPU
        (nvidia.com/gpu). Such a pod is never told to run under kube-scheduler instead
        (`pod_terms.refusal`, `pod_terms.preferred_note`)."""
        return any(self.classes.is_class_resource(name) or "gpu" in name for name in pod.requests)

    def only_ours_on(self, info: NodeInfo) -> bool:
        """Every pod counted on the node is of our scheduler names: an over-full count there is
        not another scheduler's doing."""
        return all(self.is_ours(self.pods[uid]) for uid in info.pods if uid in self.pods)

    def class_devices(self, info: NodeInfo, name: str) -> list[Device]:
        """The node's devices a request of ResourceClass `name` may take: the schedulable ones
        (healthy, not cordoned, no duplicate ID) the class matches. The planner chooses among
        them, the class columns count them, and `kubectl tessera explain` says how many there are."""
        matches = self.classes.device_classes
        return [device for device in info.devices.values()
                if device.schedulable and name in matches.get(device.name, ())]

    def count_room(self, info: NodeInfo) -> dict[str, int]:
        """Per device resource of the node (none without devices: its allocatable alone counts),
        how many more GPUs of it a count may take: a plain request (`nvidia.com/gpu: 2`) or the
        devices a class request makes busy. Its schedulable GPUs (healthy, not cordoned, no
        deviceID named twice: `Device.schedulable`, as for class requests) in use by no pod or
        hold (distinct deviceIDs), plus the GPUs its allocatable counts that no
        ExtendedResource describes (an agent yet to publish them all), less the plain requests
        counted there, which run on those GPUs too. A GPU its ExtendedResource marks
        Healthy=False or cordons goes to no new pod, by count as by class (docs/operations.md, Replace a
        failed GPU), where allocatable alone would still count it: nothing lowers it on a
        cluster whose device plugin does not (and where one does, the GPU is not counted twice:
        the lower of the two holds, `NodeResourcesFit` and `count_short`)."""
        if not info.devices:
            return {}
        # the distinct GPUs per resource and the free schedulable ones among them are kept by
        # `DeviceLedger.refresh` (run on every change of the node's devices or their use)
        allocatable = info.node.allocatable if info.node is not None else {}
        requested, described = info.requested, info.described_ids
        return {resource: free + max(0, allocatable.get(resource, 0) - described[resource])
                - requested.get(resource, 0) for resource, free in info.free_ids.items()}

    def _pod_key(self, uid: str) -> str:
        """namespace/name of a pod in the cache (its uid if it is not: a message still names it)."""
        pod = self.pods.get(uid)
        return pod.key if pod is not None else uid

    def take_deferred_notices(self) -> list[Notice]:
        """The notices `deferred` holds, now handed out (and no longer held)."""
        deferred, self.deferred = self.deferred, []
        return deferred

    def pod_by_key(self, key: str) -> Pod | None:
        uid = self.by_key.get(key)
        return self.pods.get(uid) if uid is not None else None

    def node_of(self, uid: str) -> str | None:
        placement = self.placements.get(uid)
        return placement.node if placement is not None else None

    def on_node(self, info: NodeInfo, skip: str = "") -> Iterator[str]:
        """The pods the filters count on the node (NodePorts' ports): those placed there (bound,
        assumed) and its `nominated_on`, but `skip`."""
        yield from info.pods
        yield from self.nominated_on(info, skip)

    def nominated_on(self, info: NodeInfo, skip: str = "") -> Iterator[str]:
        """As upstream's addGENominatedPods, the nominated preemptors holding room on the node
        (the cycle sets aside the holds of lower priority than the filtered pod's, and its own), but
        `skip`: a filter adds them while that node alone is filtered."""
        for uid in info.holders:
            if uid != skip and uid not in self.placements:
                yield uid

    def leaving(self, pod: Pod) -> bool:
        """Deleted, or a preemption's victim not yet gone: it still holds its room, but no longer
        counts as one of its gang's members (a gang is neither completed nor kept whole by it)."""
        return pod.meta.deleting or pod.preempted or pod.uid in self.preempting

    def gang_priority(self, key: str, members: Iterable[Pod], *, as_victim: bool = False) -> int:
        """A gang's priority: its PodGroup's `priorityClassName` where set (and the class known),
        else its members': the lowest when it preempts (no more urgent than its least urgent
        member), the highest when it is a victim (no member is evicted for an equal priority)."""
        fixed = self.class_priority(key)
        if fixed is not None:
            return fixed
        priorities = [pod.priority for pod in members]
        return (max if as_victim else min)(priorities, default=0)

    def competing_priority(self, pod: Pod) -> int:
        """What the pod competes with, in a cycle and as a preemptor (the one rule both use): its
        own priority, or for a gang member its gang's — over every live member, bound ones
        included, so a half-bound gang preempts no more urgently than its least urgent member and
        holds the room it made at that same priority."""
        if pod.gang is None:
            return pod.priority
        members = [self.pods[uid] for uid in self.gang_uids(pod)]
        return self.gang_priority(pod.gang.key, members or [pod])

    def gang_uids(self, pod: Pod) -> list[str]:
        """The live members of the pod's gang: pods naming the same group in the same form (a label
        gang or a PodGroup of one API: the form is part of the key, `gang_key`)."""
        assert pod.gang is not None
        return [uid for uid in self.gangs.members.get(pod.gang.key, ()) if uid in self.pods]

    def group_min(self, key: str, pod: Pod) -> int | None:
        """The gang's minimum, or None when its PodGroup object has not been seen."""
        return self.gangs.minimum(key, pod)

    def gang_minimum(self, key: str, pod: Pod, members: int) -> int:
        """The gang's minimum, or all its `members` when its PodGroup object has not been seen
        (all or nothing)."""
        return self.group_min(key, pod) or members

    def matching_devices(self, name: str) -> int:
        """The existing devices ResourceClass `name` matches (any health): what its status and
        `kubectl tessera explain` count, as placements do (`classes.matching`: no deleted device
        pods still hold, no ghost, is a match)."""
        return self.classes.matching[name]

    def class_status(self, name: str) -> tuple[bool, str, int, str]:
        """(valid, message, matching devices, reason) for a ResourceClass status. The reason is
        its `Valid` condition's: `InvalidSpec` (False), else `UnknownDeviceAttribute` while it
        matches no device because its selector needs an attribute none has (a typo), else
        `NoMatchingDevices` while it matches no device for another reason (a model the cluster
        does not have, or no device yet), else `Valid`. The condition stays True in both: it is
        about the spec, and matching devices may come; but VALID True beside DEVICES 0 read as
        healthy, so the reason (the REASON column) and the message say it."""
        error = self.classes.error_of(name)
        matching = self.matching_devices(name)
        cls = self.classes.classes.get(name)
        why_none = self.classes.unknown_keys_note(cls) if cls is not None and error is None and not matching else ""
        if error is not None:
            return False, error, matching, "InvalidSpec"
        if why_none:
            return True, f"selector and resourceName are valid{why_none}", matching, UNKNOWN_ATTRIBUTE
        if not matching:
            return True, f"selector and resourceName are valid ({NO_MATCH_NOTE})", matching, NO_MATCHING_DEVICES
        return True, "selector and resourceName are valid", matching, "Valid"

    # --- events ------------------------------------------------------------------------------

    def drop_pending(self, uid: str) -> None:
        """The pod no longer waits for a node here (its Binding settled elsewhere): it leaves
        `pending`, and gang counts are asked afresh."""
        self.pending.discard(uid)
        self.members_version += 1

    def mark_going(self, victim_uid: str, preemptor_uid: str) -> None:
        """`victim_uid` is leaving for `preemptor_uid` ("": finishing a gang's eviction). Whether a
        pod is leaving is part of every plan of its node (a hold's room is what leaving pods give
        back, `planner._vacating`), and of its gang's count: the node is touched, counts asked afresh."""
        self.preempting.setdefault(victim_uid, set()).add(preemptor_uid)
        self._going_changed(victim_uid)

    def unmark_going(self, victim_uid: str) -> set[str] | None:
        """`victim_uid` stays after all (its eviction refused): the preemptors that waited for it."""
        preemptors = self.preempting.pop(victim_uid, None)
        self._going_changed(victim_uid)
        return preemptors

    def unmark_all_going(self) -> list[str]:
        """No eviction will be written (the lease is lost): every victim stays; returns them."""
        victims = list(self.preempting)
        self.preempting.clear()
        for uid in victims:
            self._going_changed(uid)
        return victims

    def _going_changed(self, uid: str) -> None:
        self.members_version += 1
        placement = self.placements.get(uid)
        if placement is not None and (info := self.nodes.get(placement.node)) is not None:
            self._touch(info)

    def apply(self, event_type: str, obj: JSON) -> tuple[list[ClusterEvent], list[Notice]]:
        """Apply one watch event; returns what changed (for requeueing) and what to report."""
        self.members_version += 1
        if not isinstance(obj, dict):
            return [], [Notice("Unknown", "", "InvalidEvent", "event object is not a JSON object")]
        kind = obj.get("kind")
        if event_type not in ("ADDED", "MODIFIED", "DELETED"):
            return [], [] if event_type in ("BOOKMARK",) else [
                Notice(str(kind), "", "InvalidEvent", f"unknown event type {event_type!r}")]
        handler = _HANDLERS.get(str(kind))
        if handler is None:
            return [], [Notice(str(kind), "", "UnknownKind", f"ignoring object of unknown kind {kind!r}")]
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        assert isinstance(meta, dict)
        name = str(meta.get("name", ""))
        namespace = str(meta.get("namespace", "") or "")
        key = f"{namespace}/{name}" if namespace else name
        # what the object is held under: a PodGroup under the key of the gang it is (API included)
        held = gang_key(namespace, name, podgroup_api(obj)) if kind == "PodGroup" else key
        fixed = self._fixed_priority(str(kind), held)
        try:
            events, notices = handler(self, event_type, obj)
            if self.deferred:
                notices = [*notices, *self.take_deferred_notices()]
            if self.deferred_events:
                events = [*events, *self.take_deferred_events()]
            return events, notices
        except ObjectError as err:
            events = self._delete_unreadable(str(kind), obj, name, held) if event_type == "DELETED" else []
            if kind == "PodGroup":  # its members say why, not "not found"
                if event_type == "DELETED":
                    self.unreadable_podgroups.pop(held, None)
                elif held not in self.gangs.podgroups and self.unreadable_podgroups.get(held) != str(err):
                    self.unreadable_podgroups[held] = str(err)
                    events = [ClusterEvent(EventKind.PODGROUP_CHANGED, group=held)]  # its waiting members are told
            return events, [Notice(str(kind), key, "InvalidObject", f"{_described(str(kind), namespace, name)}: {err}",
                                   namespace, str(meta.get("uid", "") or ""), str(obj.get("apiVersion") or ""))]
        finally:
            if fixed is not _NOT_FIXING and self._fixed_priority(str(kind), held) != fixed:
                self.victim_priority_version += 1

    def class_priority(self, gang: str) -> int | None:
        """The priority a gang's PodGroup fixes through its `priorityClassName` (None: not set, or
        the class not known; the members' priorities decide then)."""
        group = self.gangs.podgroups.get(gang)
        if group is None:
            return None
        return self.priority_classes.get(group.priority_class_name) if group.priority_class_name else None

    def _fixed_priority(self, kind: str, key: str) -> int | None | object:
        """What an event of this kind may change in the priorities gangs have as victims (a
        PodGroup's class, a class's value); _NOT_FIXING for other kinds."""
        if kind == "PodGroup":
            return self.class_priority(key)
        if kind == "PriorityClass":
            return self.priority_classes.get(key)
        return _NOT_FIXING

    def _delete_unreadable(self, kind: str, obj: JSON, name: str, key: str) -> list[ClusterEvent]:
        """A DELETED event whose last state does not parse still deletes what we hold under its name."""
        if kind == "Pod":
            uid = object_uid(obj)
            pod = self.pods.get(uid) if uid is not None else None
            if pod is None:
                return []
            self._bury(pod.uid)
            return self._remove_pod(pod)
        if kind == "Node":
            info = self.nodes.get(name)
            return self._remove_node(info, info.node) if info is not None and info.node is not None else []
        if kind == "ExtendedResource":
            return self._delete_device(name)[0]
        if kind == "ResourceClass":
            return self._forget_class(name)
        if kind == "PodGroup" and self.gangs.podgroup_deleted(key):
            return [ClusterEvent(EventKind.PODGROUP_CHANGED, group=key)]
        if kind == "PodDisruptionBudget":
            self.pdbs.pop(key, None)
        if kind == "PriorityClass":
            self.priority_classes.pop(name, None)
        if kind == CLAIM_KIND:
            self.claims.pop(key, None)
            self.claims_provisioned.pop(key, None)
        if kind == VOLUME_KIND:
            self.volumes.pop(name, None)
            self.volumes_given.pop(name, None)
            self.volumes_version += 1
        if kind == STORAGE_CLASS_KIND:
            self.storage_classes.pop(name, None)
        return []

    def _stale(self, uid: str, resource_version: str) -> bool:
        if uid in self._tombstones:
            return True
        try:
            rv = int(resource_version)
        except ValueError:
            return False
        seen = self._resource_versions.get(uid)
        if seen is not None and rv < seen:
            return True
        self._resource_versions[uid] = rv
        return False

    def _bury(self, uid: str) -> None:
        self._resource_versions.pop(uid, None)
        self._tombstones[uid] = None
        if len(self._tombstones) > _TOMBSTONES:
            self._tombstones.popitem(last=False)

    # --- nodes -------------------------------------------------------------------------------

    def _on_node(self, event_type: str, obj: JSON) -> tuple[list[ClusterEvent], list[Notice]]:
        node = parse_node(obj)
        info = self.nodes.get(node.name)
        if event_type == "DELETED":
            if info is None or info.node is None or info.node.meta.uid != node.meta.uid:
                return [], []
            return self._remove_node(info, info.node), []
        if self._stale(node.meta.uid, node.meta.resource_version):
            return [], []
        if info is None:
            info = self.nodes[node.name] = NodeInfo(node.name)
        old = info.node
        info.node = node
        self._touch(info)
        notices: list[Notice] = []
        if old is None or old.allocatable != node.allocatable:
            self.capacity_version += 1
            notices = self.check_overcommit(info, None, old.allocatable if old is not None else None) + \
                self.check_surplus(info)
        classes = self._recount_foreign(node.name)
        if old is None:
            self._node_index[node.name] = len(self.node_order)
            self.node_order.append(node.name)
            return [ClusterEvent(EventKind.NODE_ADDED, node=node.name), *classes], notices
        updates = [ClusterEvent(EventKind.NODE_UPDATED, node=node.name, label=label)
                   for label in _node_changes(old, node)]
        return [*updates, *classes], notices

    def _remove_node(self, info: NodeInfo, node: Node) -> list[ClusterEvent]:
        """The node's object is gone; the pods still on it run in the domain its last labels
        named (`deleted_labels`), which the NodeDelete event's hints read too (upstream's
        QueueingHintFn gets the deleted Node as oldObj)."""
        info.deleted_labels, info.node = node.meta.labels, None
        self._remove_from_order(info)
        self.capacity_version += 1
        return [ClusterEvent(EventKind.NODE_REMOVED, node=info.name), *self._recount_foreign(info.name)]

    def _touch(self, info: NodeInfo) -> None:
        info.generation += 1
        self.touches += 1
        self.dirty.add(info.name)

    def node_position(self, name: str) -> int | None:
        return self._node_index.get(name)

    def _remove_from_order(self, info: NodeInfo) -> None:
        """The node left: out of `node_order`, and touched (the node table takes out the rows of
        dirty nodes no longer where its rows have them: `NodeTable._rows_taken`)."""
        self.order_version += 1
        index = self._node_index.pop(info.name)
        self.node_order.pop(index)
        for i in range(index, len(self.node_order)):
            self._node_index[self.node_order[i]] = i
        self._touch(info)

    def _node_info(self, name: str) -> NodeInfo:
        info = self.nodes.get(name)
        if info is None:
            info = self.nodes[name] = NodeInfo(name)
        return info

    # --- pods --------------------------------------------------------------------------------

    def _on_pod(self, event_type: str, obj: JSON) -> tuple[list[ClusterEvent], list[Notice]]:
        pod = parse_pod(obj)
        uid = pod.uid
        if event_type == "DELETED":
            old = self.pods.get(uid)
            self._bury(uid)
            if old is None:
                return [], []
            return self._remove_pod(old), []
        if self._stale(uid, pod.meta.resource_version):
            return [], []
        old = self.pods.get(uid)
        events: list[ClusterEvent] = []
        notices: list[Notice] = []
        if old is not None:
            if old.key != pod.key:  # same uid, different name: not a real object; keep the first
                return [], [Notice("Pod", pod.key, "InvalidObject", f"pod uid {uid} reused by {pod.key}")]
            if old.gang is not None and (pod.gang is None or pod.gang.key != old.gang.key):
                events += self._left(old)
        else:
            previous_uid = self.by_key.get(pod.key)
            if previous_uid is not None and previous_uid in self.pods:  # recreated under the same name
                events += self._remove_pod(self.pods[previous_uid])
        self.pods[uid] = pod
        self.by_key[pod.key] = uid
        if (placed_on := self.node_of(uid)) is not None:  # its terms, were they to change
            self._file_affine(uid, placed_on, True)
        if pod.nominated_node:
            self.nominated.add(uid)
        mark = pod.preemption_mark
        if pod.gang is not None and mark is not None and mark.scheduler in self.scheduler_names:
            self.marked.add(uid)
        else:
            self.marked.discard(uid)
        if old is not None and old.gang is not None and (pod.gang is None or pod.gang.key != old.gang.key):
            self.gangs.forget(old)
        if pod.gang is not None:
            self.gangs.seen(pod, self.is_ours(pod))
        if pod.label_error is not None and (old is None or old.label_error != pod.label_error):
            notices.append(Notice("Pod", pod.key, "InvalidObject", f"Pod {pod.key}: {pod.label_error}",
                                  pod.meta.namespace, uid))
        # what a pending pod of Tessera's carries that Tessera does not read (other schedulers'
        # keys, preferred terms it does not score): told once per pod (again when the set changes), not per attempt
        for reason, unread, before, message in (
                (IGNORED_SCHEDULER_KEY, pod.ignored, old and old.ignored, ignored_message),
                (IGNORED_PREFERRED_TERMS, pod.unread, old and old.unread,
                 lambda key, unread: preferred_message(key, unread, self.asks_gpus(pod)))):
            if unread and before != unread and not pod.node_name and not pod.terminal and self.is_ours(pod):
                notices.append(Notice("Pod", pod.key, reason, message(pod.key, unread), pod.meta.namespace, uid))
        placement = self.placements.get(uid)
        if placement is not None and old is not None and (_as_victim(old) != _as_victim(pod)
                                                          or old.meta.deleting != pod.meta.deleting
                                                          or _inter_pod_terms(old) != _inter_pod_terms(pod)):
            # its node's possible preemption victims changed, or the pods leaving it (what a slice
            # beside them keeps from the holds there: `planner._vacating`), or the inter-pod terms
            # InterPodAffinity's tallies took there
            self._touch(self.nodes[placement.node])
        elif old is not None and old.meta.labels != pod.meta.labels and (
                (where := placement or (self.holds[uid].placement if uid in self.holds else None)) is not None
                and (info := self.nodes.get(where.node)) is not None):
            # what an inter-pod term matches on its node changed: caches keyed on `touches` (the
            # InterPodAffinity counts) must not keep the old labels
            self._touch(info)
        if uid in self.holds and (pod.terminal or pod.node_name or pod.meta.deleting or _nomination_left(
                old, pod, self.holds[uid].placement.node)):
            self.release_hold(uid)
            events.append(ClusterEvent(EventKind.ASSIGNED_POD_REMOVED, node=""))
        if pod.terminal:
            self.held_assignments.pop(uid, None)
            if placement is not None:
                events += self._unplace(uid)
            self.pending.discard(uid)
            self.gated.discard(uid)
            if pod.gang is not None:
                events += self._left(pod)
            return events, notices
        if pod.gang is not None:
            changed, mismatch = self.gangs.join(pod)
            if changed:  # its members' topology annotations changed: the gang is tried again
                events.append(ClusterEvent(EventKind.PODGROUP_CHANGED, group=pod.gang.key))
            if mismatch is not None:
                notices.append(Notice("Pod", pod.key, "GangTopologyMismatch", mismatch, pod.meta.namespace, uid))
        if pod.node_name:
            self.pending.discard(uid)
            self.gated.discard(uid)
            if placement is None or placement.assumed or placement.node != pod.node_name or old is None \
                    or old.devices != pod.devices or old.requests != pod.requests \
                    or old.held_devices != pod.held_devices or old.held_error != pod.held_error:
                # a bound pod keeps what it held: an edit of its devices annotation moves no hold,
                # and a later change (a resize) keeps what earlier edits left held
                bound = placement is not None and not placement.assumed and placement.node == pod.node_name
                kept = placement.grants if bound and placement is not None else ()
                edited = bound and old is not None and _devices_edited(old, pod)
                # Swap the old charge for the new one without letting go of a deleted device in
                # between: the pod may hold it under both (our assumption, then its Binding).
                swapped = self._unplace(uid, drop_ghosts=False) if placement is not None else []
                if placement is not None and placement.assumed and placement.node != pod.node_name:
                    # bound elsewhere by another (ours held, or lost): what our decision gave its
                    # claims on our node is not its, and is free again
                    self._drop_claim_bindings(uid)
                if old is None and placement is None:  # first seen bound: given before we saw it
                    self.ledger.found.add(uid)
                notices += self._place(pod, pod.node_name, pod.devices, assumed=False, kept=kept)
                if edited and old is not None:
                    held = merge_devices(self.held_assignments.get(uid), old.held_devices, old.devices,
                                         pod.held_devices, pod.devices)
                    self.held_assignments[uid] = held
                    notices.append(_edit_notice(old, pod, self.placements[uid], held))
                elif not bound and _named_beyond_held(pod):
                    held = merge_devices(pod.held_devices, pod.devices)
                    self.held_assignments[uid] = held
                    notices.append(_unwatched_edit_notice(pod, self.placements[uid], held))
                elif bound and old is not None and old.held_devices != pod.held_devices and pod.held_error is None:
                    # the record itself edited: what it names now must still cover every device
                    # any version named while bound, or a scheduler started later gives them away
                    held = merge_devices(self.held_assignments.get(uid), old.held_devices, old.devices, pod.devices)
                    if merge_devices(pod.held_devices, held) != merge_devices(pod.held_devices):
                        held = merge_devices(held, pod.held_devices)
                        self.held_assignments[uid] = held
                        notices.append(_held_edit_notice(old, pod, self.placements[uid], held))
                if placement is not None:
                    self.ledger.drop_released_ghosts(placement.devices)
                    self._recount_reshaped()
                    # a swap that frees nothing (our Binding confirmed, requests grown) is no
                    # removal: it must not wake every pod parked for room (upstream's Fit
                    # registers pod deletion and scale-down only)
                    events += [event for event in swapped if event.kind is not EventKind.ASSIGNED_POD_REMOVED
                               or _frees(placement, self.placements[uid])]
            if old is None or not old.node_name:  # bound by anyone: our Binding confirmed, or another's
                events.append(ClusterEvent(EventKind.ASSIGNED_POD_ADDED, node=pod.node_name, pod=pod))
            elif old.meta.labels != pod.meta.labels:
                events.append(ClusterEvent(EventKind.ASSIGNED_POD_RELABELLED, node=pod.node_name, pod=pod, old=old))
            events += self._update_gate(pod, pod.node_name)
            return events, notices
        if placement is not None and placement.assumed:
            return events, notices  # our Binding is in flight; the assumption stands
        if placement is not None:  # a pod cannot lose its node; treat as a fresh object
            events += self._unplace(uid)
        waiting = self.is_ours(pod) and not pod.meta.deleting
        if waiting:
            notices += _ignored_devices(old, pod)
        if waiting and pod.gated:
            self.gated.add(uid)  # counted as upstream's scheduler_pending_pods{queue="gated"}
        else:
            self.gated.discard(uid)
        if waiting and not pod.gated:
            if uid not in self.pending:
                self.pending.add(uid)
                events.append(ClusterEvent(EventKind.POD_ADDED, group=pod.gang.key if pod.gang else ""))
        else:
            self.pending.discard(uid)
        return events, notices

    def _left(self, pod: Pod) -> list[ClusterEvent]:
        """The member left its gang: the rest are tried again if that changed what their members'
        topology annotations say (a disagreeing member gone)."""
        assert pod.gang is not None
        return [ClusterEvent(EventKind.PODGROUP_CHANGED, group=pod.gang.key)] if self.gangs.leave(pod) else []

    def _update_gate(self, pod: Pod, node_name: str) -> list[ClusterEvent]:
        """Rebuild this pod's allocation gate entry from its annotations (never from a timer)."""
        if self.ledger.update_allocating(self._node_info(node_name), pod):
            return [ClusterEvent(EventKind.ALLOCATION_DONE, node=node_name)]
        return []

    def _file_affine(self, uid: str, node_name: str, placed: bool) -> None:
        """The pod in `affine_on` at its node while placed there with any pod (anti-)affinity
        term, in `anti_affine_on` while placed there with a required anti-affinity term (its
        terms as last read: a pod re-read is filed again); out of them otherwise."""
        pod = self.pods.get(uid)
        affine = pod is not None and bool(pod.affinity or pod.anti_affinity or pod.preferred_affinity
                                          or pod.preferred_anti_affinity)
        anti_affine = pod is not None and bool(pod.anti_affinity)
        for member, on in ((affine, self.affine_on), (anti_affine, self.anti_affine_on)):
            if placed and member:
                on.setdefault(node_name, set()).add(uid)
            elif (held := on.get(node_name)) is not None:
                held.discard(uid)
                if not held:
                    del on[node_name]

    def mark_allocating(self, uid: str, node_name: str, resources: frozenset[str]) -> None:
        """Our Binding for an assumed pod is going out: it holds the gate from now on."""
        self._node_info(node_name).allocating[uid] = resources

    def _remove_pod(self, pod: Pod) -> list[ClusterEvent]:
        uid = pod.uid
        events = self._unplace(uid) if uid in self.placements else []
        self._drop_claim_bindings(uid)
        self.preempting.pop(uid, None)
        self.marked.discard(uid)
        self.held_assignments.pop(uid, None)
        self.nominated.discard(uid)
        self.ledger.found.discard(uid)
        if self.release_hold(uid) is not None:
            events.append(ClusterEvent(EventKind.ASSIGNED_POD_REMOVED, node=""))
        self.pods.pop(uid, None)
        if self.by_key.get(pod.key) == uid:
            del self.by_key[pod.key]
        self.pending.discard(uid)
        self.gated.discard(uid)
        if pod.gang is not None:
            events += self._left(pod)
            self.gangs.forget(pod)
        return events

    def _place(self, pod: Pod, node_name: str, devices: DeviceAssignment | None,
               assumed: bool, kept: tuple[DeviceHold, ...] = ()) -> list[Notice]:
        """Charge the pod on the node for `devices`, and for `kept`: what it held before its
        devices annotation was edited while bound (`_devices_edited`), which it holds as well."""
        info = self._node_info(node_name)
        notices: list[Notice] = []
        # our own assumption charges the devices we chose: what the pending pod's own annotations
        # say (unreadable or not) is no record of anything, and the Binding replaces them
        errors = [] if assumed else [error for error in (pod.device_error, pod.held_error) if error is not None]
        broken = bool(errors)
        if broken:
            info.broken.add(pod.uid)
            notices.append(Notice("Pod", pod.key, "BrokenDeviceAnnotation",
                                  f"{'; '.join(errors)}; node {node_name} is excluded from device scheduling "
                                  "until the annotation is fixed or the pod is gone",
                                  pod.meta.namespace, pod.uid))
        held = pod.held_devices if not assumed else None
        granted_as = _granted_as(held, devices)
        for by_resource in (*(devices or {}).values(), *(held or {}).values()):
            for entries in by_resource.values():
                for grant in entries:
                    notices += self.ledger.hold_unseen(grant.device, grant.device_id, info, pod.uid,
                                                       granted_as.get(grant.device, ""))
        self._recount_reshaped()
        placement = placement_of(pod, node_name, devices, self.ledger.counted_as, broken, assumed)
        if kept or held:
            placement = replace(placement, grants=union_holds((*kept, *pod_holds(pod, held)), placement.grants))
        for device, amount, resource, dimension in placement.grants:
            notices += self.ledger.charge(pod, device, amount, resource, dimension)
        for device, first, second in whole_in_two_running_containers(pod, devices):
            notices.append(Notice("Pod", pod.key, "DeviceConflict",
                                  f"device {device} is assigned whole to containers {first} and {second} of the "
                                  "pod, which run at the same time", pod.meta.namespace, pod.uid))
        for device, owner, other in whole_beside_running_slice(pod, devices):
            notices.append(Notice("Pod", pod.key, "DeviceConflict",
                                  f"device {device} is assigned whole to container {owner} and in a slice to "
                                  f"container {other} of the pod, which run at the same time",
                                  pod.meta.namespace, pod.uid))
        self.placements[pod.uid] = placement
        info.pods.add(pod.uid)
        self._file_affine(pod.uid, info.name, True)
        _charge(info, placement)
        self._touch(info)
        self.ledger.refresh_for(placement.devices)
        if assumed:  # our own decision: the filters kept it within capacity
            return notices
        return notices + self.check_overcommit(info, pod)

    def check_overcommit(self, info: NodeInfo, pod: Pod | None,
                         counted_before: Mapping[str, int] | None = None) -> list[Notice]:
        """A Warning when a device resource of the node goes over its capacity: once per crossing,
        on the bound pod that took it over, else (the count found exceeded when the Node or its
        devices arrive or change, after the pods) on the Node. A Node whose count went down
        (`counted_before`: its allocatable before this update) below the GPUs in use was cut; else
        another scheduler got it there: kube-scheduler counts plain `nvidia.com/gpu` requests, not
        the GPUs Tessera's classes hand out, which are the same GPUs; with only Tessera's pods on
        the node, a cut this core did not see (it went over before a restart, or before
        `kubectl tessera` listed it: a listing cannot tell) or a Binding it did not decide (by hand,
        or a deposed leader's). A cut seen is kept for the views (`NodeInfo.cut_from`)."""
        over = info.over_capacity(info.gpu_resources())
        crossed = [entry for entry in over if entry[0] not in info.over]
        info.over = frozenset(resource for resource, _, _ in over)
        info.cut_from = {resource: count for resource, count in info.cut_from.items() if resource in info.over}
        notices = []
        # with no other scheduler's pod on the node, blaming one would send the user the wrong way
        all_ours = self.only_ours_on(info)
        for resource, used, capacity in crossed:
            before = (counted_before or {}).get(resource, capacity)
            head = f"node {info.name} has {used} {resource} in use but only {capacity} {info.capacity_words(resource)}"
            if before > capacity:
                info.cut_from[resource] = before
                message = (f"{head} since its count went down from {before} (the Node's allocatable was edited, or "
                           "its device plugin reports fewer GPUs): its pods keep the GPUs they hold, and new pods get "
                           "none of them here until the count covers what is in use")
            elif all_ours:
                message = (f"{head}, every pod on it Tessera's: its count was cut below what its pods use (the "
                           "Node's allocatable edited, or its device plugin reporting fewer GPUs), or a Binding "
                           "Tessera did not decide (a pod bound by hand, or an earlier leader's late Binding) took "
                           "GPUs already given out")
            elif not any(device.resource_name == resource for device in info.devices.values()):
                # no class hands these GPUs out: every scheduler counts the same plain requests
                message = (f"{head} (no ExtendedResources describe its GPUs, so every scheduler counts only plain "
                           f"{resource} requests here: a pod bound with no scheduler's check (spec.nodeName set when "
                           "it was created, or a Binding made by hand), or another scheduler's Binding racing "
                           "Tessera's, took GPUs already in use): its pods keep the GPUs they hold, and new pods get "
                           "none here until the count covers what is in use")
            else:
                message = (f"{head} (pods of other schedulers count plain {resource} requests; the GPUs Tessera's classes hand "
                           "out are the same GPUs): schedule every GPU pod on this node with Tessera")
            if pod is not None:
                notices.append(Notice("Pod", pod.key, "GPUsOvercommitted", message, pod.meta.namespace, pod.uid))
            elif info.node is not None:
                notices.append(Notice("Node", info.name, "GPUsOvercommitted", message, "", info.node.meta.uid))
        return notices

    def check_surplus(self, info: NodeInfo) -> list[Notice]:
        """A Warning on the Node when its ExtendedResources come to describe more GPUs of a
        resource than it allocates, and again with the current numbers whenever they change while
        it does (more objects, fewer, a new count: a node-maintenance trial's Warning said 9 of
        16 objects for ever, written when the 9th appeared; a new note is a new Event, the
        recorder aggregates only repeats); its end says nothing. A replica still listing its
        caches tells only the latest (the live shell's `UntoldNotices`). Which object is the
        surplus the objects do not say, so none is singled out; the views fence the free GPUs
        beyond the count (`kubectl tessera nodes`), as the core gives them to no pod."""
        surplus = {resource: (described, allocatable) for resource, described, allocatable in info.surplus_devices()}
        changed = [(resource, *counts) for resource, counts in surplus.items() if info.surplus.get(resource) != counts]
        info.surplus = surplus
        if info.node is None:
            return []
        return [Notice("Node", info.name, "DevicesBeyondAllocatable",
                       f"node {info.name} has ExtendedResources for {described} {resource} devices (distinct "
                       f"deviceIDs) but only {allocatable} {resource} allocatable: pods get at most {allocatable} "
                       "of them; delete the ExtendedResources no GPU of the node backs (made by hand, or left "
                       "behind by a node agent)", "", info.node.meta.uid)
                for resource, described, allocatable in changed]

    def _unplace(self, uid: str, drop_ghosts: bool = True) -> list[ClusterEvent]:
        placement = self.placements.pop(uid)
        info = self.nodes[placement.node]
        info.pods.discard(uid)
        self._file_affine(uid, info.name, False)
        info.broken.discard(uid)
        gate_opened = info.allocating.pop(uid, None) is not None
        _discharge(info, placement)
        self._touch(info)
        self.ledger.uncharge(uid, placement.grants)
        self.ledger.release_elsewhere(uid)
        self.ledger.refresh_for(placement.devices)
        if info.over:  # a removal can only end a crossing: nothing to report, only to forget
            self.check_overcommit(info, None)
        if drop_ghosts:
            joined = self.ledger.drop_released_ghosts(placement.devices)
            if info.surplus:  # a dropped ghost: fewer here (the surplus's end says nothing)
                self.deferred += self.check_surplus(info)
            for name in sorted(joined - {info.name}):  # a moved device taken in: one more there
                self.deferred += self.check_surplus(self._node_info(name))
            self._recount_reshaped()
        events = [ClusterEvent(EventKind.ASSIGNED_POD_REMOVED, node=placement.node)]
        if gate_opened:
            events.append(ClusterEvent(EventKind.ALLOCATION_DONE, node=placement.node))
        return events

    # --- assume / forget (our own decisions, before the apiserver confirms them) ------------

    def assume(self, uid: str, node_name: str, devices: DeviceAssignment | None,
               claims: tuple[ClaimBinding, ...] = ()) -> None:
        self.members_version += 1
        pod = self.pods[uid]
        self.pending.discard(uid)
        self._place(pod, node_name, devices, assumed=True)
        if claims:
            self.claim_bindings[uid] = claims
            for binding in claims:
                if binding.volume:
                    self.volumes_given[binding.volume] = binding.claim
                else:
                    self.claims_provisioned[binding.claim] = node_name

    def _drop_claim_bindings(self, uid: str) -> None:
        """The pod's placement is given up: what its claims were given is free again (what the
        watch already shows done was dropped then; another pod's later entry is not this one's),
        unless another pod sharing the claim was given the same and still holds it (upstream's
        assumed cache is per claim, not per pod). Only an entry the watch has not shown done yet
        is looked for in the others' bindings, which keeps that scan rare."""
        for binding in self.claim_bindings.pop(uid, ()):
            if binding.volume:
                live = self.volumes_given.get(binding.volume) == binding.claim
            else:
                live = binding.claim in self.claims_provisioned
            if live and not any((other.claim, other.volume) == (binding.claim, binding.volume)
                                for held in self.claim_bindings.values() for other in held):
                if binding.volume:
                    del self.volumes_given[binding.volume]
                else:
                    del self.claims_provisioned[binding.claim]

    def forget(self, uid: str) -> list[ClusterEvent]:
        """Undo an assumption (failed Binding or discarded gang transaction): what that frees."""
        self.members_version += 1
        placement = self.placements.get(uid)
        if placement is None or not placement.assumed:
            return []
        freed = self._unplace(uid)
        self._drop_claim_bindings(uid)
        pod = self.pods.get(uid)
        if pod is not None and not pod.node_name and self.is_ours(pod) and not pod.terminal and not pod.meta.deleting:
            self.pending.add(uid)  # a pod being deleted is never scheduled again (upstream's skipPodSchedule)
        return freed

    # --- what-if: pods lifted off their nodes, nominated pods' holds -------------------------

    def lift(self, uid: str) -> Lifted:
        """Take a placed pod off its node for a what-if (preemption's dry runs): its charges go,
        nothing else changes (no events; deleted devices it holds stay ghosts). `restore` puts
        back exactly what was there, in any order, within the same cycle."""
        self.members_version += 1
        placement = self.placements.pop(uid)
        info = self.nodes[placement.node]
        allocating = info.allocating.pop(uid, None)
        broken = uid in info.broken
        info.pods.discard(uid)
        self._file_affine(uid, info.name, False)
        info.broken.discard(uid)
        _discharge(info, placement)
        self.ledger.uncharge(uid, placement.grants)
        self.ledger.refresh_for(placement.devices)
        self._touch(info)
        return Lifted(uid, placement, allocating, broken)

    def restore(self, lifted: Lifted) -> None:
        self.members_version += 1
        placement = lifted.placement
        info = self.nodes[placement.node]
        self.placements[lifted.uid] = placement
        info.pods.add(lifted.uid)
        self._file_affine(lifted.uid, info.name, True)
        if lifted.broken:
            info.broken.add(lifted.uid)
        if lifted.allocating is not None:
            info.allocating[lifted.uid] = lifted.allocating
        _charge(info, placement)
        self.ledger.recharge(lifted.uid, placement.grants)
        self.ledger.refresh_for(placement.devices)
        self._touch(info)

    def hold(self, uid: str, placement: Placement, priority: int) -> None:
        """Keep a node's room for a nominated preemptor while its victims terminate: the pod's
        requests and the devices its dry run chose (`placement`, as an assumption made them)
        count on the node as if it were there, so no pod of its priority or lower takes them. A
        hold is no placement: no Binding, and the pod stays pending. Its devices may still be
        held by the terminating victims meanwhile."""
        self.release_hold(uid)
        info = self._node_info(placement.node)
        self.holds[uid] = Hold(placement, priority)
        self.nominated.add(uid)
        info.holders.add(uid)
        _charge(info, placement)
        _add(info.held_requested, placement.requests, 1)
        self.ledger.recharge(uid, placement.grants)
        self.ledger.refresh_for(placement.devices)
        self._touch(info)

    def release_hold(self, uid: str) -> Hold | None:
        """Drop the pod's hold (its node's room is free again); the hold, or None. Deleted
        devices only it still held are forgotten now (`set_aside_hold` alone keeps them)."""
        held = self.set_aside_hold(uid)
        if held is not None:
            self.forget_released_ghosts([held])
        return held

    def set_aside_hold(self, uid: str) -> Hold | None:
        """Take the pod's hold off its node for a what-if (a queueing hint's look at the node, a
        scheduling cycle's attempts): its charges go, nothing else changes; `hold` puts back
        exactly what was there. A ghost it alone held stays (a hold put back charges it again):
        whoever ends the hold instead forgets it (`forget_released_ghosts`)."""
        held = self.holds.pop(uid, None)
        if held is None:
            return None
        placement = held.placement
        info = self.nodes[placement.node]
        info.holders.discard(uid)
        _discharge(info, placement)
        _add(info.held_requested, placement.requests, -1)
        self.ledger.uncharge(uid, placement.grants)
        self.ledger.refresh_for(placement.devices)
        self._touch(info)
        return held

    def forget_released_ghosts(self, holds: Iterable[Hold]) -> None:
        """The deleted devices these holds held that no one holds now are forgotten, and the
        classes of the nodes that changes judged again: the end of holds set aside (those put
        back hold their ghosts again, which stay)."""
        self.ledger.drop_released_ghosts([name for hold in holds for name in hold.placement.devices])
        self._recount_reshaped()

    def holds_below(self, priority: int) -> list[str]:
        """The nominated pods whose holds an attempt at `priority` does not count: those of lower
        priority (upstream's filters add only the nominated pods of priority >= the pod's,
        addGENominatedPods), whose room it may take."""
        return [uid for uid, hold in self.holds.items() if hold.priority < priority]

    def set_aside_holds_below(self, priority: int) -> dict[str, Hold]:
        """Set the `holds_below` the priority aside; the holds, by pod, for the caller to give back."""
        return {uid: hold for uid in self.holds_below(priority) if (hold := self.set_aside_hold(uid)) is not None}

    # --- devices, classes, pod groups --------------------------------------------------------

    def _on_device(self, event_type: str, obj: JSON) -> tuple[list[ClusterEvent], list[Notice]]:
        device = parse_device(obj)
        old = self.devices.get(device.name)
        if event_type == "DELETED":
            if self.ledger.forget_moved(device):
                return [], []
            if old is not None and device.meta.uid and old.meta.uid and old.meta.uid != device.meta.uid:
                return [], []  # a predecessor's late deletion: its successor stays
            self.device_ids.remove(device.name)
            events, notices = self._delete_device(device.name)
            self._refresh_heartbeat(device.node_name, *((old.node_name,) if old is not None else ()))
            return events, notices + self._unknown_attributes(self.classes.classes)
        if self._stale(device.meta.uid, device.meta.resource_version):
            return [], []
        if old is not None and not self.ledger.is_ghost(device.name) and old.same_spec(device):
            if old.heartbeat != device.heartbeat:
                device = replace(device, duplicate=old.duplicate)
                self.devices[device.name] = self._node_info(device.node_name).devices[device.name] = device
                self._refresh_heartbeat(device.node_name)
            return [], []
        nodes = {device.node_name} | ({old.node_name} if old is not None else set())
        held = self._held_as(nodes)
        notices = self.device_ids.put(device) + self.ledger.upsert(device, old)
        self._recount_holders(held)
        classes, judged = self._rejudge_classes({device.resource_name, *((old.resource_name,) if old else ())})
        classes += self._recount_foreign(device.node_name)
        if old is not None and old.node_name != device.node_name:
            classes += self._recount_foreign(old.node_name)
        info = self._node_info(device.node_name)
        self._refresh_heartbeat(device.node_name, *((old.node_name,) if old is not None else ()))
        if old is not None and old.node_name != device.node_name:
            notices += self.check_surplus(self._node_info(old.node_name))  # fewer there
        return [ClusterEvent(EventKind.DEVICE_CHANGED, node=device.node_name), *classes], \
            notices + judged + self.check_overcommit(info, None) + self.check_surplus(info) \
            + self._unknown_attributes(self.classes.classes)

    def _held_as(self, nodes: Iterable[str]) -> dict[str, str]:
        """The held devices of these nodes and the resource each counts as (`ledger.counted_as`)."""
        use, counted_as = self.ledger.use, self.ledger.counted_as
        return {name: counted_as(name) for node in nodes if (info := self.nodes.get(node)) is not None
                for name in info.devices if name in use}

    def _recount_holders(self, held: dict[str, str]) -> None:
        """A held device now counts as another resource (a device the pod was listed before, as
        after a restart, named by its object): its holders' requests are counted again against
        it (`counted_requests`), so the request its devices stand for is not counted twice."""
        counted_as = self.ledger.counted_as
        holders = {uid for name, was in held.items() if counted_as(name) != was
                   and (use := self.ledger.use.get(name)) is not None for uid in (*use.exclusive, *use.shared)}
        for uid in sorted(holders):
            pod = self.pods.get(uid)
            hold = self.holds.get(uid)
            placement = self.placements.get(uid) or (hold.placement if hold is not None else None)
            if pod is None or placement is None:
                continue
            requests = counted_requests(dict(pod.requests), placement.grants, counted_as)
            if requests == placement.requests:
                continue
            recounted = replace(placement, requests=requests)
            info = self.nodes[placement.node]
            _discharge(info, placement)
            _charge(info, recounted)
            if uid in self.placements:
                self.placements[uid] = recounted
            elif hold is not None:
                self.holds[uid] = replace(hold, placement=recounted)
                _add(info.held_requested, placement.requests, -1)
                _add(info.held_requested, recounted.requests, 1)
            self._touch(info)

    def _refresh_heartbeat(self, *node_names: str) -> None:
        """A node's agent heartbeat: the newest `status.lastHeartbeatTime` of the devices it
        publishes now (a device deleted but still held, a ghost, publishes nothing); None when none
        carries one (no agent serves it: not silent, no gate). Not the newest ever seen: a node
        whose devices lost the field, or were deleted, stayed "agent silent" for ever."""
        for name in set(node_names):
            info = self.nodes.get(name)
            if info is not None:
                info.agent_heartbeat = max((d.heartbeat for d in info.devices.values()
                                            if d.heartbeat is not None and not self.ledger.is_ghost(d.name)),
                                           default=None)

    def _delete_device(self, name: str) -> tuple[list[ClusterEvent], list[Notice]]:
        known = self.devices.get(name)
        node = self.ledger.delete(name)
        if node is None or known is None:
            return [], []
        fewer = self.check_surplus(self._node_info(node))
        classes, judged = self._rejudge_classes({known.resource_name})
        return [ClusterEvent(EventKind.DEVICE_CHANGED, node=node), *classes, *self._recount_foreign(node)], \
            fewer + judged

    def _recount_reshaped(self) -> None:
        """Judge again the classes of the nodes a ghost came to or left (`ledger.reshaped`): a
        node with no device left counts its allocatable against them, one given its first device
        no longer does — as every other change of a node's devices does (`_on_device`)."""
        reshaped, self.ledger.reshaped = self.ledger.reshaped, set()
        for name in sorted(reshaped):
            self.deferred_events += self._recount_foreign(name)

    def take_deferred_events(self) -> list[ClusterEvent]:
        """The class events `deferred_events` holds, now handed out (and no longer held)."""
        events, self.deferred_events = self.deferred_events, []
        return events

    def _recount_foreign(self, node_name: str) -> list[ClusterEvent]:
        """The names `node_name` advertises count against classes only while no Tessera agent
        serves it (no ExtendedResource of the node is known): what the agent advertises is the
        classes' own. Classes whose name a change affects are judged again (`_admitted`)."""
        info = self.nodes.get(node_name)
        now = frozenset(info.node.allocatable) if info is not None and info.node is not None and not info.devices \
            else frozenset()
        was = self._foreign_of.get(node_name, frozenset())
        if now == was:
            return []
        self._foreign.subtract(was)
        self._foreign.update(now)
        if now:
            self._foreign_of[node_name] = now
        else:
            self._foreign_of.pop(node_name, None)
        events: list[ClusterEvent] = []
        for spec in list(self._class_specs.values()):
            if spec.resource_name in was ^ now:
                events += self._put_class(self._admitted(spec))[0]
        return events

    def _admitted(self, cls: ResourceClass) -> ResourceClass:
        """A resourceName that is already a count of GPUs makes the class invalid: nodes
        advertising it through another device plugin, or ExtendedResources carrying it as their
        own (`nvidia.com/gpu` of the devices the agent publishes, which the node's device plugin
        count stands for). Taking it over would turn every plain request for it into a class
        request — a pod asking for one GPU left waiting beside free GPUs its class does not
        match — and pods holding GPUs by count would meet pods holding them by name under one
        count. The verdict follows the nodes and the devices (`_recount_foreign`,
        `_rejudge_classes`), whichever came first. A class already invalid for another reason
        keeps that reason, but gives the name up all the same."""
        name = cls.resource_name
        if self._foreign[name] > 0:
            why = "nodes already advertise this resource through a device plugin; use a name of its own"
        elif self.classes.carried(name):
            why = ("ExtendedResources carry this resourceName as their own, so a plain request for it is a "
                   "count of those devices; use a name of its own (without resourceName the class's is "
                   f"{DEFAULT_RESOURCE_PREFIX}{cls.name})")
        else:
            return cls
        return replace(cls, error=cls.error or f'spec.resourceName: Invalid value: "{name}": {why}', name_taken=True)

    def _rejudge_classes(self, names: Iterable[str]) -> tuple[list[ClusterEvent], list[Notice]]:
        """Judge again the classes of these resourceNames (`_admitted`): devices carrying one
        of them came or went."""
        events: list[ClusterEvent] = []
        notices: list[Notice] = []
        for spec in list(self._class_specs.values()):
            if spec.resource_name in names:
                changed, told = self._put_class(self._admitted(spec))
                events += changed
                notices += told
        return events, notices

    def _on_class(self, event_type: str, obj: JSON) -> tuple[list[ClusterEvent], list[Notice]]:
        cls = parse_resource_class(obj)
        if event_type == "DELETED":
            return self._forget_class(cls.name), []
        self._class_specs[cls.name] = cls
        return self._put_class(self._admitted(cls))

    def _forget_class(self, name: str) -> list[ClusterEvent]:
        """A deleted class goes, its spec with it: a spec left behind would be judged again
        (`_rejudge_classes`, `_recount_foreign`) and bring the class back."""
        self._class_specs.pop(name, None)
        self._told_unknown.pop(name, None)
        self.classes.remove(name, self.devices.values())
        return [ClusterEvent(EventKind.CLASS_CHANGED)]

    def _put_class(self, cls: ResourceClass) -> tuple[list[ClusterEvent], list[Notice]]:
        old = self.classes.classes.get(cls.name)
        if old is not None and _same_class(old, cls):
            # an edit that keeps the meaning (`1Gi` -> `1024Mi`, matchLabels -> the same
            # matchExpressions) still moves metadata.generation, which the status reports
            self.classes.refresh(cls)
            return [], []
        notices = self._dimension_changed(old, cls)
        self.classes.upsert(cls, self.devices.values())
        for name in sorted({cls.name, *self.classes.clash}):  # the class, and those that lost a clash
            error = self.classes.error_of(name)
            if error is not None:
                notices.append(Notice("ResourceClass", name, "InvalidResourceClass",
                                      f"ResourceClass {name} is not valid: {error}", "",
                                      self.classes.classes[name].meta.uid))
        return [ClusterEvent(EventKind.CLASS_CHANGED)], notices + self._unknown_attributes((cls.name,))

    def _unknown_attributes(self, names: Iterable[str]) -> list[Notice]:
        """A Warning on each of these valid classes whose selector needs an attribute no
        ExtendedResource has (a typo: `modle` for `model`), so it matches nothing: its status says
        so (`class_status`), and an admin reading Events is told too. Once per generation of the
        class: a resync, or devices coming and going, do not repeat it; an edit still wrong does.
        Asked again on every device change (a device may be the last with the attribute), which
        costs a dictionary look-up per class once told."""
        notices: list[Notice] = []
        for name in names:
            cls = self.classes.classes.get(name)
            if cls is None or self._told_unknown.get(name) == cls.meta.generation or self.classes.error_of(name):
                continue
            note = self.classes.unknown_keys_note(cls)
            if note:
                self._told_unknown[name] = cls.meta.generation
                notices.append(Notice("ResourceClass", name, UNKNOWN_ATTRIBUTE,
                                      f"ResourceClass {name} matches no device{note}", "", cls.meta.uid))
        return notices

    def unknown_attribute_stands(self, name: str, uid: str) -> bool:
        """Whether the class (the same object) still needs an attribute no device has."""
        cls = self.classes.classes.get(name)
        return cls is not None and cls.meta.uid == uid and not self.classes.error_of(name) \
            and bool(self.classes.unknown_keys_note(cls))

    def _dimension_changed(self, old: ResourceClass | None, cls: ResourceClass) -> list[Notice]:
        """A Warning when a sharing class moves to another dimension while pods hold slices of it:
        allowed (new slices are of the new one), but those pods keep what they were given in the
        old dimension until they end (their grants name it), which an admin reading the GPU's use
        in two dimensions should be told."""
        if old is None or old.sharing is None or cls.sharing is None \
                or old.sharing.dimension == cls.sharing.dimension:
            return []
        kind = (old.resource_name, old.sharing.dimension)
        holders = sorted({pod.key for use in self.ledger.use.values() for uid, held in use.shared.items()
                          if kind in held and (pod := self.pods.get(uid)) is not None})
        if not holders:
            return []
        return [Notice("ResourceClass", cls.name, "SharingDimensionChanged",
                       f"ResourceClass {cls.name} now shares by {cls.sharing.dimension}; "
                       + ("1 pod holds" if len(holders) == 1 else f"{len(holders)} pods hold")
                       + f" slices of it granted in {old.sharing.dimension} ({', '.join(holders)}): they keep those "
                       f"until they end, new slices are of {cls.sharing.dimension}", "", cls.meta.uid)]

    def _on_podgroup(self, event_type: str, obj: JSON) -> tuple[list[ClusterEvent], list[Notice]]:
        group = parse_podgroup(obj)
        self.unreadable_podgroups.pop(group.key, None)
        if event_type == "DELETED":
            if not self.gangs.podgroup_deleted(group.key):
                return [], []
            return [ClusterEvent(EventKind.PODGROUP_CHANGED, group=group.key)], []
        if not self.gangs.podgroup_changed(group):
            return [], []
        return [ClusterEvent(EventKind.PODGROUP_CHANGED, group=group.key)], []


def _on_priority_class(state: ClusterState, event_type: str, obj: JSON) -> tuple[list[ClusterEvent], list[Notice]]:
    """PriorityClasses only give PodGroups with `priorityClassName` their priority."""
    cls = parse_priority_class(obj)
    if event_type == "DELETED":
        state.priority_classes.pop(cls.name, None)
    else:
        state.priority_classes[cls.name] = cls.value
    return [], []


def _on_pdb(state: ClusterState, event_type: str, obj: JSON) -> tuple[list[ClusterEvent], list[Notice]]:
    """PodDisruptionBudgets only steer preemption's choice of victims: no event requeues a pod."""
    budget = parse_disruption_budget(obj)
    if event_type == "DELETED":
        state.pdbs.pop(budget.key, None)
    else:
        state.pdbs[budget.key] = budget
    return [], []


def _stored(store: dict[str, _Stored], key: str, value: _Stored, event_type: str,
            kind: EventKind) -> tuple[list[ClusterEvent], list[Notice]]:
    """A storage object (claim, volume, class) kept by `key`, and the event its add or change gives
    (upstream's label for an update); a deletion gives none (upstream registers none: the pods
    naming it wait for it to come back), nor does an update that changes nothing read here."""
    if event_type == "DELETED":
        store.pop(key, None)
        return [], []
    old = store.get(key)
    store[key] = value
    if old == value:
        return [], []
    label = kind.value.removesuffix("Add") + "Update" if old is not None else ""
    return [ClusterEvent(kind, name=key, label=label)], []


def _on_claim(state: ClusterState, event_type: str, obj: JSON) -> tuple[list[ClusterEvent], list[Notice]]:
    """A claim added or changed may let the pods naming it through VolumeBinding (bound at last)."""
    claim = parse_claim(obj)
    if claim.selected_node is not None or claim.bound or event_type == "DELETED":
        state.claims_provisioned.pop(claim.key, None)  # the assumption is done (or moot)
    return _stored(state.claims, claim.key, claim, event_type, EventKind.CLAIM_CHANGED)


def _on_volume(state: ClusterState, event_type: str, obj: JSON) -> tuple[list[ClusterEvent], list[Notice]]:
    """A PersistentVolume added or changed: its node affinity is what VolumeBinding matches."""
    volume = parse_volume(obj)
    if volume.claim_ref is not None or event_type == "DELETED":
        state.volumes_given.pop(volume.name, None)  # the assumption is done (or moot)
    state.volumes_version += 1
    return _stored(state.volumes, volume.name, volume, event_type, EventKind.VOLUME_CHANGED)


def _on_storage_class(state: ClusterState, event_type: str, obj: JSON) -> tuple[list[ClusterEvent], list[Notice]]:
    """A StorageClass added or changed: its binding mode tells VolumeBinding whether an unbound
    claim of it should have been bound already."""
    cls = parse_storage_class(obj)
    return _stored(state.storage_classes, cls.name, cls, event_type, EventKind.STORAGE_CLASS_CHANGED)


def placement_of(pod: Pod, node_name: str, devices: DeviceAssignment | None, counted_as: Callable[[str], str],
                 broken: bool = False, assumed: bool = True) -> Placement:
    """What placing the pod on the node with these devices charges: each device once, as the
    pod holds it over its containers' lives (`_holds`), and its requests as counts but for
    what those devices already count (`counted_requests`; `counted_as` is the ledger's)."""
    grants = tuple(pod_holds(pod, devices))
    requests = counted_requests(dict(pod.requests), grants, counted_as)
    return Placement(node_name, requests, pod.node_scoring_requests.get(CPU, 0),
                     pod.node_scoring_requests.get(MEMORY, 0), grants, broken, assumed)


def whole_in_two_running_containers(pod: Pod, devices: DeviceAssignment | None) -> list[tuple[str, str, str]]:
    """The devices `devices` gives whole to two containers of the pod that run at the same time, as
    (device, one container, the other): the pod's own DeviceConflict, as placing it finds it and as
    a notice of it still standing is asked (`standing.still_stands`)."""
    whole = {container: [grant.device for entries in by_resource.values() for grant in entries
                         if grant.amount is None]
             for container, by_resource in (devices or {}).items()}
    return shared_while_running(whole, pod.container_phases())


def whole_beside_running_slice(pod: Pod, devices: DeviceAssignment | None) -> list[tuple[str, str, str]]:
    """The devices `devices` gives whole to one container of the pod and in a slice to another
    that runs at the same time, as (device, the whole one's container, the slice's): the pod's own
    DeviceConflict too (`lifecycle.whole_beside_slice`); a slice of a finished init container's
    GPU is none."""
    whole: dict[str, list[str]] = {}
    sliced: dict[str, list[str]] = {}
    for container, by_resource in (devices or {}).items():
        for entries in by_resource.values():
            for grant in entries:
                (whole if grant.amount is None else sliced).setdefault(container, []).append(grant.device)
    if not whole or not sliced:
        return []
    return whole_beside_slice(whole, sliced, pod.container_phases())


def _granted_as(held: DeviceAssignment | None, devices: DeviceAssignment | None) -> dict[str, str]:
    """The resourceName each device was granted under, as the pod's grants record it: the
    Binding's own record (`tessera.dev/held-devices`) first, so an edit of the field in
    `tessera.dev/devices` does not move a device to another count; devices no grant names one
    for are left out (written before the field existed)."""
    named: dict[str, str] = {}
    for assignment in (held, devices):
        for by_resource in (assignment or {}).values():
            for entries in by_resource.values():
                for grant in entries:
                    if grant.resource_name:
                        named.setdefault(grant.device, grant.resource_name)
    return named


def pod_holds(pod: Pod, devices: DeviceAssignment | None) -> list[DeviceHold]:
    """What the pod holds of each device, whole or per resource name in slices: a device its
    containers are given in phases of its life that do not meet (a finished init container's,
    handed on as the kubelet does) is held once (`lifecycle.device_holds`)."""
    grants = {container: {resource: [(grant.device, grant.amount, grant.dimension) for grant in entries]
                          for resource, entries in by_resource.items()}
              for container, by_resource in (devices or {}).items()}
    return device_holds(grants, pod.container_phases())


def _nomination_left(old: Pod | None, pod: Pod, held_on: str) -> bool:
    """The watch shows the pod's nominatedNodeName leave the node its hold is on (cleared, or
    moved): whoever leads let that room go (a higher-priority preemptor took it, or the pod was
    tried again elsewhere), and a replica that kept it would reserve GPUs for a pod promised
    nothing there. A nomination written to where the hold already is (the leader's own write
    arriving) keeps it; a hold made before its nomination was written is not touched."""
    return old is not None and old.nominated_node == held_on and pod.nominated_node != held_on


def _devices_edited(old: Pod, pod: Pod) -> bool:
    """Whether a bound pod's `tessera.dev/devices` says something else now: other devices or
    amounts, or unreadable (or gone) where it was readable, or the other way. Only the decoded
    content counts, so the node agent's `tessera.dev/phase` write (Allocating -> Allocated) and
    a rewrite of the same assignment in other JSON are no edit; nor is an annotation naming no
    device where there was none (or the other way): nothing named, nothing to hold or tell."""
    return _named(old) != _named(pod) or (old.device_error is None) != (pod.device_error is None)


def _named(pod: Pod) -> DeviceAssignment:
    """The grants a pod's devices annotation names, containers naming none left out: an absent
    annotation and one naming no device read the same."""
    return {name: by_resource for name, by_resource in (pod.devices or {}).items()
            if any(by_resource.values())}


def union_holds(before: Iterable[DeviceHold], after: Iterable[DeviceHold]) -> tuple[DeviceHold, ...]:
    """Every hold either list has, each at its largest: a device whole in either is held whole
    (a slice beside it would be the pod conflicting with itself), slices of one device, resource
    name and dimension at the larger amount. Never fewer holds than either list says."""
    whole: dict[str, DeviceHold] = {}
    slices: dict[tuple[str, str, str], Amount] = {}
    for device, amount, resource, dimension in (*before, *after):
        if amount is None:
            whole.setdefault(device, (device, None, resource, dimension))
        else:
            key = (device, resource, dimension)
            slices[key] = max(slices.get(key, amount), amount)
    return (*whole.values(), *((device, amount, resource, dimension)
                               for (device, resource, dimension), amount in slices.items() if device not in whole))


def _grants_text(devices: DeviceAssignment | None) -> str:
    """An annotation's devices for a message: names, slices with their amounts."""
    names = [grant.device if grant.amount is None else f"{grant.device} ({format_quantity(grant.amount)}"
             f"{' ' + grant.dimension if grant.dimension else ''})"
             for by_resource in (devices or {}).values() for entries in by_resource.values() for grant in entries]
    return ", ".join(names) if names else "no device"


def _annotation_text(pod: Pod) -> str:
    if pod.device_error is not None:
        return "nothing readable" if DEVICES in pod.meta.annotations else "nothing (the annotation was removed)"
    return _grants_text(pod.devices)


# a device annotation on a pod still waiting for us, never read: its Warning's reason, and why
IGNORED_ANNOTATIONS = (
    (DEVICES, "DevicesAnnotationIgnored", "Tessera chooses a pod's devices and its Binding replaces the annotation"),
    (HELD_DEVICES, "HeldDevicesAnnotationIgnored",
     "it is the scheduler's record of the devices a bound pod holds, not a request; Tessera chooses a pod's "
     "devices and its Binding replaces the annotation with the devices it gives (none for a pod that asks for "
     "no class device)"),
)


def _ignored_devices(old: Pod | None, pod: Pod) -> list[Notice]:
    """A device annotation on a pod still waiting for us is never read as a choice — the core
    picks the devices, its assumption charges only those (`_place`), and the Binding's annotations
    replace both — but it should not vanish in silence: a Warning the first time the pod is seen
    with it, and again only for a value written anew. `tessera.dev/devices`: an admin hoping to
    choose its GPUs, a manifest copied from a bound pod; `tessera.dev/held-devices`: the record
    of what a bound pod holds, copied along or set by a webhook."""
    notices: list[Notice] = []
    for key, reason, why in IGNORED_ANNOTATIONS:
        said = pod.meta.annotations.get(key)
        if said is None or (old is not None and old.meta.annotations.get(key) == said):
            continue
        shown = said if len(said) <= IGNORED_SHOWN else said[:IGNORED_SHOWN] + "…"
        notices.append(Notice("Pod", pod.key, reason,
                              f"the {key} annotation on pending pod {pod.key} is ignored: {why} (it said {shown})",
                              pod.meta.namespace, pod.uid))
    return notices


def _edit_notice(old: Pod, pod: Pod, placement: Placement, held_devices: DeviceAssignment) -> Notice:
    """The Warning a bound pod's edited devices annotation gets: what it named, what it names
    now, and that every device it named while bound stays held (`union_holds`) until it ends.

    Why both: the kubelet's device manager keeps a container's devices in its checkpoint and
    reuses them when the container restarts (`devicesToAllocate`: "pre-allocated devices", no new
    Allocate call), so the old ones stay in use; the node agent answers the Allocate calls of
    containers not started yet (the pod still `Allocating`) from the annotation as it is then,
    so the new ones may be handed out too; and a scheduler started later counts the new ones."""
    held = ", ".join(placement.devices) or "no device"
    return Notice("Pod", pod.key, "DevicesAnnotationChanged",
                  f"annotation {DEVICES} of pod {pod.key} on node {placement.node} was changed while the pod is "
                  f"bound: it named {_annotation_text(old)}; it now names {_annotation_text(pod)}. Its containers "
                  "keep the devices they were given, and the node agent serves those not started yet from the "
                  "annotation as it is now, so every device it named while bound stays held until the pod ends: "
                  f"{held}. Assignments are Tessera's to write; the scheduler records them all in {HELD_DEVICES}, "
                  "so a scheduler started after this edit holds them too",
                  pod.meta.namespace, pod.uid,
                  held_devices=encode_devices(held_devices))


def _held_edit_notice(old: Pod, pod: Pod, placement: Placement, held_devices: DeviceAssignment) -> Notice:
    """The Warning a bound pod's `tessera.dev/held-devices` gets when an edit left it naming less
    than the pod holds: the union goes back onto the pod (the notice carries it), as after an
    edit of its devices annotation."""
    held = ", ".join(placement.devices) or "no device"
    return Notice("Pod", pod.key, "HeldDevicesChanged",
                  f"annotation {HELD_DEVICES} of pod {pod.key} on node {placement.node} was changed while the pod is "
                  f"bound: it named {_grants_text(old.held_devices)}; it now names {_grants_text(pod.held_devices)}, "
                  "less than the pod holds. The pod keeps every device any version of its annotations named while "
                  f"bound until it ends: {held}; the scheduler writes them back into {HELD_DEVICES}, so a scheduler "
                  "started later holds them too",
                  pod.meta.namespace, pod.uid, held_devices=encode_devices(held_devices))


def _named_beyond_held(pod: Pod) -> bool:
    """A bound pod first seen whose `tessera.dev/devices` names what its `tessera.dev/held-devices`
    (what its Binding gave, and every edit a scheduler saw) lacks: the devices annotation was
    edited while no scheduler watched. Both readable, or nothing can be said."""
    if pod.devices is None or pod.held_devices is None or pod.device_error or pod.held_error:
        return False
    return merge_devices(pod.held_devices, pod.devices) != merge_devices(pod.held_devices)


def _unwatched_edit_notice(pod: Pod, placement: Placement, held_devices: DeviceAssignment) -> Notice:
    """The Warning for `_named_beyond_held`, carrying the union for HELD_DEVICES, so that a
    second unwatched edit before the next restart still leaves this one's devices held."""
    return Notice("Pod", pod.key, "DevicesAnnotationChanged",
                  f"annotation {DEVICES} of pod {pod.key} on node {placement.node} names {_annotation_text(pod)}, "
                  f"but {HELD_DEVICES} (what its Binding gave it, and every edit a scheduler saw) names "
                  f"{_grants_text(pod.held_devices)}: the annotation was changed while no scheduler watched. Its "
                  "containers keep the devices they were given, and the node agent serves those not started yet "
                  "from the annotation as it is now, so both stay held until the pod ends: "
                  f"{', '.join(placement.devices) or 'no device'}. Assignments are Tessera's to write; the "
                  f"scheduler records them all in {HELD_DEVICES}",
                  pod.meta.namespace, pod.uid, held_devices=encode_devices(held_devices))


def _described(kind: str, namespace: str, name: str) -> str:
    """`Pod team-a/train-0` for a notice's message; an object without a name says so (its empty
    key read `Pod : ...`, `Pod team-a/: ...`)."""
    if name:
        return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"
    return f"{kind} without a name in namespace {namespace}" if namespace else f"{kind} without a name"


def _as_victim(pod: Pod) -> tuple[str | None, int]:
    """What makes a placed pod a possible preemption victim (the apiserver keeps spec.priority
    fixed; a replayed stream need not)."""
    return pod.gang.key if pod.gang is not None else None, pod.priority


def _inter_pod_terms(pod: Pod) -> tuple[object, ...]:
    """A pod's inter-pod (anti-)affinity terms (the apiserver keeps spec.affinity fixed; a
    replayed stream need not)."""
    return pod.affinity, pod.anti_affinity, pod.preferred_affinity, pod.preferred_anti_affinity


def _charge(info: NodeInfo, placement: Placement) -> None:
    for name, amount in placement.requests.items():
        info.requested[name] = info.requested.get(name, 0) + amount
    info.scoring_cpu += placement.scoring_cpu
    info.scoring_memory += placement.scoring_memory


def _discharge(info: NodeInfo, placement: Placement) -> None:
    _add(info.requested, placement.requests, -1)
    info.scoring_cpu -= placement.scoring_cpu
    info.scoring_memory -= placement.scoring_memory


def _add(total: Resources, requests: Resources, sign: int) -> None:
    """Add (`sign` 1) or take away (-1) requests from a running total, dropping zeros."""
    for name, amount in requests.items():
        left = total.get(name, 0) + sign * amount
        if left:
            total[name] = left
        else:
            total.pop(name, None)


def _frees(old: Placement, new: Placement) -> bool:
    """Whether replacing `old` by `new` gives anything back: another node, less of a resource, a
    device (or part of one) no longer held, or an unreadable device annotation fixed."""
    return (old.node != new.node or any(amount > new.requests.get(name, 0) for name, amount in old.requests.items())
            or bool(set(old.grants) - set(new.grants)) or (old.broken and not new.broken))


def _same_class(a: ResourceClass, b: ResourceClass) -> bool:
    """Whether `b` means what `a` does for every index of the registry: then it replaces `a`
    without a reindex. `name_taken` counts (it decides `claimed`), also when the error stays."""
    return (a.resource_name, a.requirements, a.sharing, a.error, a.name_taken, a.meta.creation_timestamp) == \
        (b.resource_name, b.requirements, b.sharing, b.error, b.name_taken, b.meta.creation_timestamp)


_NOT_FIXING = object()  # an event kind that fixes no gang's priority

_HANDLERS = {
    "Node": ClusterState._on_node,
    "Pod": ClusterState._on_pod,
    "ExtendedResource": ClusterState._on_device,
    "ResourceClass": ClusterState._on_class,
    "PodGroup": ClusterState._on_podgroup,
    "PodDisruptionBudget": _on_pdb,
    "PriorityClass": _on_priority_class,
    CLAIM_KIND: _on_claim,
    VOLUME_KIND: _on_volume,
    STORAGE_CLASS_KIND: _on_storage_class,
}


def _node_changes(old: Node, new: Node) -> list[str]:
    """What a node update changed that scheduling reads, as upstream's
    NodeSchedulingPropertiesChange (framework/events.go) names it, in its order: one queue event
    label per property, Resource + ActionType ("NodeUpdateNodeTaint" also for spec.unschedulable)."""
    changed = [(old.unschedulable != new.unschedulable, "NodeUpdateNodeTaint"),
               (old.allocatable != new.allocatable, "NodeUpdateNodeAllocatable"),
               (old.meta.labels != new.meta.labels, "NodeUpdateNodeLabel"),
               (old.taints != new.taints, "NodeUpdateNodeTaint")]
    return list(dict.fromkeys(label for change, label in changed if change))
