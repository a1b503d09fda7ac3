"""A node as the scheduler sees it: its object, what is placed on it, and what each pod charged."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from scheduler.core.lifecycle import DeviceHold
from scheduler.core.objects import Device, Node
from scheduler.core.resources import Resources

COUNTED_GPU = "nvidia.com/gpu"
"""The device plugin's GPU resource: a node counting it holds GPUs, ExtendedResources or not."""


@dataclass(frozen=True, slots=True)
class Placement:
    """Exactly what a pod charged, so releasing it is the exact inverse even if the pod changes."""

    node: str
    requests: Resources
    scoring_cpu: int
    scoring_memory: int
    grants: tuple[DeviceHold, ...]  # (device name, shared amount or None, resource name, dimension)
    broken: bool
    assumed: bool

    @property
    def devices(self) -> list[str]:
        """The devices it holds, each once (a device held in slices of two classes has two grants)."""
        return list(dict.fromkeys(device for device, *_ in self.grants))


@dataclass(frozen=True, slots=True)
class Lifted:
    """A placed pod taken off its node for a what-if, with what restores it exactly."""

    uid: str
    placement: Placement
    allocating: frozenset[str] | None
    broken: bool


@dataclass(frozen=True, slots=True)
class Hold:
    """A nominated preemptor's room on its node: its requests and the devices its dry run chose,
    and the priority it preempted with (a gang's, for its members)."""

    placement: Placement
    priority: int

    @property
    def node(self) -> str:
        return self.placement.node


class NodeInfo:
    """One node's object (if known yet) and everything placed on it."""

    __slots__ = ("name", "node", "pods", "holders", "requested", "held_requested", "scoring_cpu", "scoring_memory",
                 "devices", "busy", "held_busy", "described_ids", "free_ids", "broken", "allocating", "agent_heartbeat", "generation", "over", "surplus",
                 "cut_from", "deleted_labels")

    def __init__(self, name: str) -> None:
        self.name = name
        self.node: Node | None = None
        self.pods: set[str] = set()
        # the nominated preemptors holding room here (`ClusterState.holds`, by node): each takes a
        # pod slot, as upstream's filters add the nominated pods of equal or higher priority to the
        # node before "Too many pods"
        self.holders: set[str] = set()
        self.requested: Resources = {}  # every placement's requests here, and every hold's
        self.held_requested: Resources = {}  # the holds' part of `requested`
        self.scoring_cpu = 0
        self.scoring_memory = 0
        self.devices: dict[str, Device] = {}
        self.busy: dict[str, int] = {}  # device resourceName -> devices in use (any pod, or a hold)
        # device resourceName -> the devices of `busy` only holds use: not in use yet, only kept
        self.held_busy: dict[str, int] = {}
        # kept with `busy` by `DeviceLedger.refresh`, per device resourceName: the GPUs the node's
        # ExtendedResources describe (distinct deviceIDs, a held ghost included: `described`), and
        # of them those a count may still take (schedulable, in use by no pod or hold: `count_room`)
        self.described_ids: dict[str, int] = {}
        self.free_ids: dict[str, int] = {}
        self.broken: set[str] = set()  # pods whose device annotation could not be read
        # pods whose devices the node agent has not handed out yet -> their resource names; a
        # second pod with a common resource name must not be bound here until they are done
        self.allocating: dict[str, frozenset[str]] = {}
        self.agent_heartbeat: float | None = None  # the newest heartbeat of the node's devices
        self.over: frozenset[str] = frozenset()  # device resources last found over capacity (reported once)
        # of `over`, those this core saw go over as the Node's count of them went down -> the count before
        self.cut_from: dict[str, int] = {}
        # device resources with more ExtendedResources (distinct deviceIDs) than allocatable -> those
        # two numbers, as last reported (`ClusterState.check_surplus`: again when they change)
        self.surplus: Mapping[str, tuple[int, int]] = {}
        self.generation = 0
        # the labels of its Node object when that was deleted: the pods still on it run in the
        # topology domain those labels named until they are gone (a gang's rest must join them)
        self.deleted_labels: Mapping[str, str] = {}

    @property
    def held(self) -> int:
        """How many holds are on the node."""
        return len(self.holders)

    @property
    def labels(self) -> Mapping[str, str]:
        """The node's labels: its object's, or — deleted while pods remain — the last ones known."""
        return self.node.meta.labels if self.node is not None else self.deleted_labels

    def allocation_blocks(self, resources: frozenset[str]) -> bool:
        return self.allocation_holder(resources) is not None

    def allocation_holder(self, resources: frozenset[str]) -> str | None:
        """The uid of a pod still waiting for its devices under one of these resource names."""
        return next((uid for uid, held in self.allocating.items() if not held.isdisjoint(resources)), None)

    def agent_serves(self, now: float, timeout: float) -> bool:
        """A node agent heartbeated recently (a heartbeat ahead of `now` is clock skew: fresh)."""
        return self.agent_heartbeat is not None and now - self.agent_heartbeat <= timeout

    def agent_silent_for(self, now: float, timeout: float) -> float | None:
        """Seconds since the node agent's last heartbeat, when that is over `timeout`: an agent
        served the node once and stopped (killed, or cut off from the apiserver); None while it
        heartbeats, and on a node no agent ever served."""
        if self.agent_heartbeat is None or self.agent_serves(now, timeout):
            return None
        return now - self.agent_heartbeat

    def used(self, resource: str) -> int:
        """Requested amount of a resource, counting devices handed out by class."""
        return self.requested.get(resource, 0) + self.busy.get(resource, 0)

    def real_used(self, resource: str) -> int:
        """`used` by the real holders alone (bound or assumed pods): what is in use on the node
        now. A nominated preemptor's hold keeps room for after its victims go, while they still
        have it, so the two together may exceed the node; the real holders never may."""
        return self.used(resource) - self.held_requested.get(resource, 0) - self.held_busy.get(resource, 0)

    def hides_devices_of(self, resource: str) -> bool:
        """A pod here has a device annotation that cannot be read, and the node has devices of
        `resource`: which of them that pod holds is unknown, so none counts as free — for plain
        count requests (`nvidia.com/gpu: 1`) as for class requests — until the annotation is fixed
        or the pod is gone (fail closed: counting them free could give a held GPU twice)."""
        return bool(self.broken) and any(device.resource_name == resource for device in self.devices.values())

    def over_capacity(self, resources: Iterable[str] | None = None) -> list[tuple[str, int, int]]:
        """(resource, in use, capacity) for each of `resources` (default: everything the node
        allocates) that more is held of than the node has. Tessera's own decisions never get there;
        pods bound by another scheduler (which does not count the GPUs Tessera's classes give out)
        or a node whose allocatable shrank under its pods do."""
        if self.node is None:
            return []
        found = []
        for resource in sorted(self.node.allocatable if resources is None else resources):
            used = self.real_used(resource)  # a hold beside its running victims over-commits nothing
            if not used:
                continue
            capacity = self.device_capacity(resource)
            if used > capacity:
                found.append((resource, used, capacity))
        return found

    def gpu_resources(self) -> set[str]:
        """The GPU resources whose count `GPUsOvercommitted` and `tessera_gpus_overcommitted` watch:
        those the node's devices carry and, with devices or without (a node no agent publishes
        for still counts GPUs its pods hold), `nvidia.com/gpu` where the node allocates it or a
        pod here requests it."""
        found = set(self.described_ids)  # the resourceNames of its devices (`DeviceLedger.refresh`)
        allocatable = self.node.allocatable if self.node is not None else {}
        if COUNTED_GPU in allocatable or self.requested.get(COUNTED_GPU, 0) or self.busy.get(COUNTED_GPU, 0):
            found.add(COUNTED_GPU)
        return found

    def described(self, resource: str) -> int:
        """How many GPUs of `resource` the node's ExtendedResources describe: distinct deviceIDs
        (one GPU under two names is one GPU; a held ghost is still one of the node's)."""
        return self.described_ids.get(resource, 0)  # kept by `DeviceLedger.refresh`

    def surplus_devices(self) -> list[tuple[str, int, int]]:
        """(resource, GPUs described, allocatable) for each resource the node's ExtendedResources
        describe more GPUs of than the Node allocates: some object describes no GPU a pod can get
        (made by hand, left by an agent). The core never gives out more than the count (plain and
        class requests share it), so the surplus is a GPU that reads free but goes to no pod."""
        if self.node is None:
            return []
        found = []
        for resource in sorted(resource for resource in self.described_ids if resource):
            allocatable = self.node.allocatable.get(resource)
            described = self.described(resource)
            if allocatable is not None and described > allocatable:
                found.append((resource, described, allocatable))
        return found

    def device_capacity(self, resource: str) -> int:
        """Allocatable of a device resource, or the number of its devices if the node does not say."""
        assert self.node is not None
        alloc = self.node.allocatable.get(resource)
        if alloc is not None:
            return alloc
        return sum(1 for d in self.devices.values() if d.resource_name == resource)

    def capacity_words(self, resource: str) -> str:
        """What `device_capacity`'s number counts, said after it ("2 allocatable"): the Node's
        allocatable, or where the Node does not allocate the resource (created again, its device
        plugin not registered yet) the node's ExtendedResources of it."""
        assert self.node is not None
        if resource in self.node.allocatable:
            return "allocatable"
        return "ExtendedResources of it, its Node allocating none"
