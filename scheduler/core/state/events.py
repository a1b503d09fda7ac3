"""What a change to the cluster state means for waiting pods, and what a person should be told.

`ClusterEvent`s drive requeueing (plugins' queueing hints key on their kind); `Notice`s are bad or
surprising input — a Warning Event live, a stderr line in a replay — or a gang that was tried and
did not fit, told on its PodGroup (`Scheduler.group_notice`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scheduler.core.objects import Pod


class EventKind(enum.Enum):
    NODE_ADDED = "NodeAdd"
    NODE_UPDATED = "NodeUpdate"
    NODE_REMOVED = "NodeDelete"  # the Node object deleted (pods may still run there: `NodeInfo.deleted_labels`)
    ASSIGNED_POD_ADDED = "AssignedPodAdd"  # a pod seen bound for the first time, whoever bound it
    ASSIGNED_POD_RELABELLED = "AssignedPodUpdatePodLabel"  # a bound pod's labels changed
    ASSIGNED_POD_REMOVED = "AssignedPodDelete"
    POD_ADDED = "UnschedulablePodAdd"
    DEVICE_CHANGED = "DeviceChange"
    CLASS_CHANGED = "ResourceClassChange"
    PODGROUP_CHANGED = "PodGroupChange"
    ALLOCATION_DONE = "AllocationDone"  # a pod on the node left `tessera.dev/phase: Allocating`
    # storage objects added or updated (upstream's PersistentVolumeClaim, PersistentVolume and
    # StorageClass Add|Update: their deletion registers no event); `ClusterEvent.name` says which,
    # an update's `label` is upstream's ...Update
    CLAIM_CHANGED = "PersistentVolumeClaimAdd"
    VOLUME_CHANGED = "PersistentVolumeAdd"
    STORAGE_CLASS_CHANGED = "StorageClassAdd"


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """A change that may make waiting pods schedulable (the queue's requeue hints key on it)."""

    kind: EventKind
    node: str = ""
    group: str = ""
    name: str = ""  # a storage event's object: a claim's namespace/name, a volume's or class's name
    # the queue's event label when it is finer than the kind's (scheduler_queue_incoming_pods_total):
    # a node update is upstream's Node + the UpdateNodeXYZ action of the property that changed
    label: str = ""
    # the assigned pod an AssignedPodAdd / AssignedPodUpdatePodLabel is about, and for a relabel the
    # version before it (upstream's QueueingHintFn newObj / oldObj): hints that ask whether that
    # very pod can help (InterPodAffinity's terms) read them
    pod: Pod | None = field(default=None, compare=False)
    old: Pod | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Notice:
    """What a person should see on an object: bad or surprising input (a Warning Event live, a
    stderr line in replay), or a PodGroup's gang that did not fit (a Warning Event live)."""

    kind: str
    key: str
    reason: str
    message: str
    namespace: str = ""
    uid: str = ""
    api_version: str = ""  # the object's apiVersion where its kind alone does not say (two PodGroup APIs)
    # the Event's message where it must say less than `message` (the log line's, a replay's): an
    # Event on a namespaced object names no pod of another namespace (`scheduler.core.tenants`);
    # "" when it says the same
    event_message: str = ""
    # DevicesAnnotationChanged: the `tessera.dev/held-devices` value the live shell writes onto the
    # pod (every device it held while bound, encoded), so a restarted scheduler holds them all too
    held_devices: str = ""

    @property
    def told(self) -> str:
        """What the notice's Event says (`event_message`, else `message`)."""
        return self.event_message or self.message
