"""The view model: one cluster picture for the terminal, JSON/YAML and the GPU map page.

Plain frozen records of strings and numbers, so `as_dict` is the JSON that `kubectl tessera -o
json` prints and the page's script reads: one schema, documented here, for every consumer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

# GPU states, as the page colours them and `kubectl tessera nodes` names them. One per GPU, the
# first that applies, in this order: a GPU two pods claim says so above all (something bound
# outside one scheduler's ledger), then a device that cannot take new work says so even while pods
# still hold it.
# held whole by two or more pods, whole and in slices, or in slices beyond its capacity (the core's DeviceConflict)
CONFLICT = "conflict"
# its ExtendedResource was deleted (or moved, or names another GPU, since it was given); pods
# still hold it, so it still counts here
GHOST = "ghost"
UNHEALTHY = "unhealthy"  # Healthy=False (or phase Unhealthy/Unknown)
CORDONED = "cordoned"  # spec.unschedulable on the device (or one GPU under two names)
# free, but the core gives it to no pod: a bound pod's unreadable (or stripped) device annotation
# hides which of the node's GPUs of that resource it holds, the node has no Node object, or its
# ExtendedResources describe more GPUs than it allocates and no more of its count is left
FENCED = "fenced"
GATED = "gated"  # assigned to a pod whose Binding the allocation gate holds
WHOLE = "whole"  # one pod holds the whole device
SLICES = "slices"  # shared: pods hold slices of its sharing dimension
COUNTED = "counted"  # in use by a plain count request (e.g. nvidia.com/gpu: 1): the device plugin picks the GPU
FREE = "free"
STATES = (FREE, WHOLE, SLICES, COUNTED, GATED, CONFLICT, FENCED, UNHEALTHY, CORDONED, GHOST)
IN_USE = frozenset({WHOLE, SLICES, COUNTED, GATED, CONFLICT})
UNAVAILABLE = frozenset({GHOST, UNHEALTHY, CORDONED, FENCED})


def held_unavailable(gpu: GpuView) -> bool:
    """A GPU that takes no new work while pods still hold it (unhealthy, cordoned or a ghost)."""
    return gpu.state in UNAVAILABLE and bool(gpu.holders)

# a node whose pods are bound to it but whose Node object is gone (`NodeView.deleted`): its label's
# mark in the nodes table, its note's and its ghost rows' reason
NODE_DELETED = "Node deleted"

# how a holder holds its GPU
BOUND = "bound"  # bound, its devices handed out (or no node agent involved)
ALLOCATING = "allocating"  # bound, the node agent has not handed its devices out yet (it holds the gate)
BINDING = "binding"  # placed by this scheduler, Binding on its way
HELD = "held"  # placed, Binding held by the allocation gate
TERMINATING = "terminating"  # bound and being deleted (a finalizer, a grace period): its GPUs free when it is gone
NOMINATED = "nominated"  # pending preemptor: its room is held here while its victims terminate


@dataclass(frozen=True, slots=True)
class PluginScore:
    """One score plugin's part of a node's total in a dry run: its normalised score (0..100)
    times its weight in the profile."""
    plugin: str
    score: int
    weight: int


@dataclass(frozen=True, slots=True)
class NodeScore:
    """A scored node's total in a dry run and its every score plugin's part, in the profile's
    order (`text.score_sum` says how it adds up)."""
    node: str
    total: int
    scores: tuple[PluginScore, ...]


def node_scores(scores: Mapping[str, Mapping[str, int]] | None, weights: Mapping[str, int]) -> tuple[NodeScore, ...]:
    """An attempt's scored nodes (`Attempt.scores`: per node, each plugin's normalised score and the
    `total`, kept by a core run with explain or breakdown) with each plugin's weight in the profile
    (`ProfileRuntime.weights`), the highest total first, then by name: the one reading of them
    that explain's node table and what-if's breakdown share, so both say a node's score alike."""
    return tuple(NodeScore(node, line.get("total", 0),
                           tuple(PluginScore(name, line.get(name, 0), weight) for name, weight in weights.items()))
                 for node, line in sorted((scores or {}).items(), key=lambda item: (-item[1].get("total", 0), item[0])))


@dataclass(frozen=True, slots=True)
class Holder:
    pod: str  # namespace/name
    amount: str = ""  # a slice ("8Gi"); "" for a whole device or a counted GPU
    status: str = BOUND


@dataclass(frozen=True, slots=True)
class GpuView:
    index: int  # position on its node (devices by attributes.index, PCI bus, then name)
    device: str  # ExtendedResource name; "" for a GPU the node only counts (no ExtendedResource)
    device_id: str
    resource: str  # the device-plugin resource it belongs to (nvidia.com/gpu)
    model: str
    memory: str  # capacity.memory ("32Gi"), "" when unknown
    state: str
    fill: float  # the share in use: 1 for a whole or counted GPU, the slices' share, 0 when free
    used: str = ""  # slices: "16Gi/32Gi" of the sharing dimension ("cores 10/100, memory 16Gi/32Gi" for several)
    holders: tuple[Holder, ...] = ()
    # why a GPU is not simply what its state says: the pods a conflict names, the pod and annotation
    # that fence it, the pods still holding an unhealthy, cordoned or deleted one; "" otherwise
    reason: str = ""
    # where it sits inside its node, as its ExtendedResource's attributes say (the node agent's
    # `numaNode` and `nvlinkGroup`, which the device planner packs by); "" when not said
    numa_node: str = ""
    nvlink_group: str = ""


@dataclass(frozen=True, slots=True)
class OverCapacity:
    """A device resource held beyond what a node has (pods of another scheduler, or allocatable
    shrunk under its pods): a note says so, `tessera_gpus_overcommitted` counts the excess."""

    resource: str
    used: int
    capacity: int


@dataclass(frozen=True, slots=True)
class NodeView:
    name: str
    cordoned: bool
    gpus: tuple[GpuView, ...]
    gpus_used: int
    cpu: str  # "12/64" cores requested / allocatable
    pods: int
    taints: tuple[str, ...] = ()  # key=value:effect
    # the allocation gate, unreadable device annotations, a missing Node object, counted requests
    # beyond the node's GPUs
    notes: tuple[str, ...] = ()
    # free GPUs a new pod can get here (the summary's free counts these): none on a cordoned node
    # (fenced ones are not free: a node without a Node object, an unreadable device annotation)
    gpus_free: int = 0
    # GPUs in an unavailable state (ghost, unhealthy, cordoned, fenced), a GPU under two names once
    gpus_unavailable: int = 0
    # the node's GPUs: its rows, a GPU under two names (DuplicateDeviceID) once, and rows beyond the
    # node's count (more ExtendedResources than it allocates: fenced) not at all
    gpus_total: int = 0
    conflicts: int = 0  # GPUs in conflict (claimed by more than one pod)
    over_capacity: tuple[OverCapacity, ...] = ()  # its device resources held beyond what it has
    # seconds since its node agent's last heartbeat (ExtendedResources' status.lastHeartbeatTime),
    # when that is over agentHeartbeatTimeoutSeconds: the agent stopped, its GPUs' health is what it
    # last published; None while it heartbeats, or where no agent ever did
    agent_silent_for: float | None = None
    # pods are bound to it but it has no Node object (deleted under them): they hold what they hold,
    # shown as ghosts, until the PodGC deletes them (a note says so)
    deleted: bool = False


def counted_as(state: str, node_cordoned: bool) -> str:
    """The state the summary (and `tessera_devices{state}`) counts a GPU in: its own, but a free
    GPU of a cordoned node is `cordoned`: no pod goes there but one tolerating the cordon, so it is
    not free for new work (`NodeView.gpus_free` leaves it out)."""
    return CORDONED if state == FREE and node_cordoned else state


@dataclass(frozen=True, slots=True)
class GpuCounts:
    """The nodes' GPUs by (model, `counted_as` state), as the summary counts them (a GPU under two
    names once, rows beyond a node's count not at all), the GPUs held beyond the nodes' capacity,
    and the schedulable nodes whose agent went silent (`cluster.silent_agents`): what
    `tessera_devices`, `tessera_devices_by_model`, `tessera_gpus_overcommitted` and
    `tessera_node_agents_silent` export. `cluster.gpu_counts` builds it without the rest of the
    view, in one walk over the nodes (each /metrics scrape)."""

    states: dict[tuple[str, str], int]
    overcommitted: int = 0
    agents_silent: int = 0


@dataclass(frozen=True, slots=True)
class PendingPod:
    pod: str
    priority: int
    wants: str  # "2 nvidia.com/gpu, 1 class.tessera.dev/v100"
    gang: str = ""
    reason: str = ""  # Unschedulable, WaitingForAllocation, SchedulingGated, ... ("" before the first attempt)
    message: str = ""
    node: str = ""  # where it is assigned while the allocation gate holds its Binding


@dataclass(frozen=True, slots=True)
class GangView:
    gang: str  # its name as users read it (objects.gang_name)
    minimum: int | None  # None while its PodGroup is not known
    members: int  # live (non-terminal) members
    placed: int  # on a node and staying
    leaving: int  # on a node but deleted or a preemption's victim: no longer counted toward the minimum
    pending: int  # waiting for a node, those held by spec.schedulingGates included
    phase: str  # the PodGroup status phase (Pending, Scheduling, Scheduled, Running, ...)
    message: str = ""
    gated: int = 0  # of `pending`, held by spec.schedulingGates: never tried, not counted toward the minimum


@dataclass(frozen=True, slots=True)
class Decision:
    at: float  # seconds since the epoch (a replay's virtual time for simulate)
    pod: str
    outcome: str  # placed, held, unschedulable, preempting, error (the cycle failed), or a Binding's failure
    node: str = ""
    message: str = ""


@dataclass(frozen=True, slots=True)
class Overruled:
    """A replay's pod that a recorded Binding put elsewhere than the replay's own decision for it
    (`ReplayStats.overruled`): the nodes show the recorded Binding, the decisions the replay's."""
    pod: str
    message: str  # "the recording binds it to n2, where this replay had placed it on n1"


@dataclass(frozen=True, slots=True)
class InputWarning:
    """What a replay said of its input (simulate only), the lines it writes to stderr: a Notice
    of the core (`DevicesAnnotationIgnored`, `UnknownDeviceAttribute`, `InvalidObject`, ...), or
    a line it could not read (reason `UnreadableLine`)."""
    reason: str
    message: str


UNREADABLE_LINE = "UnreadableLine"


@dataclass(frozen=True, slots=True)
class Summary:
    gpus: int  # the nodes' GPUs (NodeView.gpus_total): used + free + unavailable
    used: int  # whole, counted and gated GPUs and shared ones
    shared: int  # of those, GPUs in slices
    free: int  # on nodes that take new pods
    # unhealthy, cordoned, ghost or fenced GPUs, and free ones on a cordoned node (NodeView.gpus_free)
    unavailable: int
    # free GPUs on nodes where some GPU is in use: they cannot take a job that wants a whole node
    free_on_partial: int
    largest_free: int  # most free GPUs on one node (the largest job that fits on one node today)
    largest_free_node: str
    conflicts: int = 0  # of the GPUs in use, those claimed by more than one pod (state conflict)
    # of the unavailable GPUs, those pods still hold (unhealthy, cordoned or ghost, with holders):
    # they take no new work, yet a pod runs on each; their nodes count as used for free_on_partial
    held_unavailable: int = 0

    @property
    def fragmentation(self) -> float:
        """The share of free GPUs that sit on partly used nodes (0 when nothing is free): `-o json`'s
        `summary.fragmentation` and the benchmarks' figure; the line says it in words (not
        TesseraFragmentation's measure)."""
        return self.free_on_partial / self.free if self.free else 0.0

    def line(self) -> str:
        """One line for a terminal: `GPUs: 16 total, 6 in use (2 shared), ...`."""
        shared = f" ({self.shared} shared)" if self.shared else ""
        conflicts = (f", {self.conflicts} GPU{'' if self.conflicts == 1 else 's'} claimed by more than one pod"
                     if self.conflicts else "")
        held = self.held_unavailable
        # a running pod on an unhealthy (or deleted) GPU is no GPU "in use" for new work, but its
        # node is not idle: said apart, and "in use or held" where the nodes are counted
        held_text = (f" ({held} of them still held by {'a pod' if held == 1 else 'pods'})" if held else "")
        using = "in use or held" if held else "in use"
        text = (f"GPUs: {self.gpus} total, {self.used} in use{shared}, {self.free} free, "
                f"{self.unavailable} unavailable{held_text}{conflicts}")
        if self.free:  # `fragmentation` in words: "fragmentation 100 %" read as a badly fragmented cluster
            text += (f"; of the {self.free} free, {self.free_on_partial} ({round(self.fragmentation * 100)} %) "
                     f"{'sits' if self.free_on_partial == 1 else 'sit'} on nodes with GPUs {using}, "
                     f"{self.free - self.free_on_partial} on nodes with none {using}; "
                     f"most free on one node: {self.largest_free}, {self.largest_free_node}")
        return text


@dataclass(frozen=True, slots=True)
class ClusterView:
    source: str  # "live" (tessera run, leading), "standby" (tessera run, not leading), "cluster" (kubectl tessera), "simulate"
    generated: float  # seconds since the epoch (virtual for simulate)
    nodes: tuple[NodeView, ...]
    pending: tuple[PendingPod, ...]
    gangs: tuple[GangView, ...]
    summary: Summary
    decisions: tuple[Decision, ...] = ()  # newest first
    profiles: tuple[str, ...] = field(default=())  # the scheduler names whose pods are pending here
    overruled: tuple[Overruled, ...] = ()  # a replay's pods recorded Bindings put elsewhere (simulate only)
    input_warnings: tuple[InputWarning, ...] = ()  # what a replay said of its input (simulate only)


def plain(record: Any) -> Any:
    """A record (nested dataclasses) as plain JSON values: dicts, lists, strings and numbers."""
    return orjson.loads(orjson.dumps(record))


def as_dict(view: ClusterView) -> dict[str, Any]:
    """The JSON form (`-o json`, the page's data): the records as nested objects, plus the
    summary's derived fragmentation and line, so no consumer recomputes them."""
    out: dict[str, Any] = plain(view)
    out["summary"] = summary_dict(view.summary)
    return out


def summary_dict(summary: Summary) -> dict[str, Any]:
    """The summary's JSON form (`as_dict`'s `summary`, `tessera simulate -o json`'s last line):
    its counts, plus the derived fragmentation and line."""
    out: dict[str, Any] = plain(summary)
    out["fragmentation"] = round(summary.fragmentation, 4)
    out["line"] = summary.line()
    return out
