"""The plugin interface: what a scheduling rule implements, once, in its own module.

Modelled on kube-scheduler's framework (`pkg/scheduler/framework/interface.go`): a plugin is a
named object that implements some extension points. Tessera's points, in the order a cycle runs
them:

- `pre_enqueue(pod)` — keep the pod out of the queue until it could be tried at all (upstream's
  PreEnqueue): it is parked gated, never attempted, until one of the plugin's queueing hints
  brings it back and the check passes;
- `pre_filter(ctx)` — reject the pod outright (an unknown ResourceClass, a gang still short);
- `filter(ctx, node)` — may the pod go to this node; the reasons if not (upstream's messages);
- `pre_score(ctx)` — an error that fails the cycle before scoring (upstream's PreScore returning
  an Error status: no placement, no preemption, error backoff); asked only when at least two
  nodes are feasible and the profile scores, as upstream scores nothing for a lone feasible node;
- `score(ctx, node)` — 0..100 (after the plugin's normalisation), weighted by the profile; each
  scoring plugin is first shown the feasible nodes (`prepare_scores`, upstream's PreScore's);
- `reserve(ctx, node)` — what the chosen node's Binding carries (devices and their annotations);
- `placements(gang)` — for a gang with a topology constraint, the domains its transaction is
  tried in (upstream's PlacementGenerate);
- `queueing_hints()` — which cluster events may make a pod this plugin rejected schedulable.

Filter and score have a per-node form and, where a rule is a function of per-node columns, a
batch form over the whole node table (`BatchFilter.filter_rows`, `BatchScore.score_rows`, in the
plugin's own module next to the per-node form). The runner uses the batch form whenever a plugin
has one — for decisions and for `--explain` alike — so what a user is shown is what ran; the
per-node form is the reference the batch form is tested against.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from scheduler.core.annotations import DeviceAssignment
from scheduler.core.framework.cycle_state import PodContext
from scheduler.core.state.events import EventKind
from scheduler.core.volumes import ClaimBinding

if TYPE_CHECKING:
    from scheduler.core.framework.attempt import Attempt
    from scheduler.core.framework.placement import Domain, PlacementPlan
    from scheduler.core.framework.nodetable import NodeTable
    from scheduler.core.objects import GangTopology, Pod
    from scheduler.core.state import ClusterEvent, NodeInfo
    from scheduler.core.state.nodes import Placement

Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
Reasons = tuple[str, ...]


class Normalize(enum.Enum):
    """How raw scores become 0..100 over the feasible nodes (upstream's NormalizeScore)."""

    NONE = "none"  # already 0..100
    MAX = "max"  # helper.DefaultNormalizeScore(MaxNodeScore, false, scores)
    REVERSE = "reverse"  # helper.DefaultNormalizeScore(MaxNodeScore, true, scores)
    MIN_MAX = "min-max"  # InterPodAffinity's NormalizeScore: min..max onto 0..100 (raw scores may be negative)
    # PodTopologySpread's NormalizeScore: the fewer matching pods the higher, 100 * (max + min - s) / max;
    # a raw score below 0 (upstream's invalidScore: a node lacking a topology key) becomes 0
    SPREAD = "spread"


# What a plugin without queueing hints is retried on: upstream's defaultEnqueueExtension registers
# UnrollWildCardResource, the in-tree resources only (pods, nodes, storage, ResourceClaim,
# DeviceClass, and the Workload API's PodGroup under GenericWorkload), never a custom resource.
# Tessera's ExtendedResource and ResourceClass are its own custom resources: a plugin that reads
# them says so. Every other kind is a Pod, Node or PodGroup event upstream too (AllocationDone is
# an assigned pod's update; PodGroupChange is a member joining or leaving, or the PodGroup itself,
# which for scheduler-plugins' custom PodGroup upstream would not give: one kind for both APIs,
# so the default errs on the side of a retry).
DEFAULT_EVENTS = frozenset(EventKind) - {EventKind.DEVICE_CHANGED, EventKind.CLASS_CHANGED}


class Plugin(ABC):  # noqa: B024 - a base with only optional hooks; concrete points are the subclasses
    """A named rule. Subclass FilterPlugin and/or ScorePlugin (and the batch forms)."""

    name: ClassVar[str]
    # Extension points upstream's plugin of this name implements that Tessera carries out
    # elsewhere or has no use for (a gang's QueueSort, a PreFilter folded into the filter): a
    # profile may enable the plugin there, a no-op, as kube-scheduler accepts it. The points a
    # Tessera interface stands for (`EXTENSION_POINTS`) need no entry.
    also_extends: ClassVar[frozenset[str]] = frozenset()
    # Why a profile may not turn this plugin's filtering off (`plugins.filter.disabled` or
    # `plugins.preFilter.disabled` naming it is Forbidden with this reason, `"*"` leaves it on):
    # the promise it keeps (a device given once, a gang whole). Empty: a profile may disable its
    # Filter and PreFilter, as upstream lets a profile disable any plugin.
    stays_on: ClassVar[str] = ""

    def queueing_hints(self) -> Mapping[EventKind, QueueingHint]:
        """Events that may make a pod this plugin rejected schedulable, each with a check. A
        plugin that does not say is retried on every event upstream would give it, as upstream
        registers a plugin without EnqueueExtensions with a hint that always queues
        (framework.go's defaultEnqueueExtension): `DEFAULT_EVENTS`. A rejection no event can
        undo is declared as an empty mapping (upstream's EventsToRegister returning none)."""
        return dict.fromkeys(DEFAULT_EVENTS, always)

    def observe(self, pod: Pod) -> None:
        """A pod was seen for the first time (plugins that learn the workload count it)."""
        return None


# (pod uid, the event) -> may the event have made the pod schedulable?
QueueingHint = Callable[[str, "ClusterEvent"], bool]


def always(uid: str, event: ClusterEvent) -> bool:
    """The QueueingHint for events that always deserve a retry."""
    return True


class PreEnqueuePlugin(Plugin):
    """Upstream's PreEnqueuePlugin: asked whenever the queue would move a pod into activeQ or
    backoffQ (kube-scheduler v1.36 backend/queue/scheduling_queue.go runPreEnqueuePlugins, from
    moveToActiveQ and moveToBackoffQ). A pod it refuses is not attempted: it waits among the
    unschedulable pods as gated (scheduler_pending_pods{queue="gated"}) with this plugin as its
    rejector, gets no FailedScheduling Event, no PodScheduled condition and no attempt counted,
    and only the events this plugin's queueing hints accept bring it back to be asked again."""

    @abstractmethod
    def pre_enqueue(self, pod: Pod) -> str | None:
        """Why the pod may not enter the queue yet, or None."""


class PreFilterPlugin(Plugin):
    # A Tessera PreFilter with no upstream namesake that a profile turns off by naming it under
    # `plugins.preFilter.disabled`, `plugins.filter.disabled` or `plugins.multiPoint.disabled`
    # (`"*"` keeps it): a rule refusing what Tessera cannot do, which a file disabling "every
    # filter" of upstream's does not mean to lift. Other PreFilters follow upstream's per-point
    # rules (`stays_on`).
    may_disable: ClassVar[bool] = False

    @abstractmethod
    def pre_filter(self, ctx: PodContext) -> str | None:
        """The reason the pod cannot go anywhere now, or None."""

    def node_names(self, ctx: PodContext) -> frozenset[str] | None:
        """The only nodes the pod may go to (upstream's PreFilterResult.NodeNames), or None for
        every node. The nodes left out are not filtered: each reads "node(s) didn't satisfy
        plugin(s) [...]", a rejection no eviction can resolve."""
        return None


class FilterPlugin(Plugin):
    # Whether removing pods from a node can resolve this plugin's rejection (upstream: it answers
    # Unschedulable rather than UnschedulableAndUnresolvable); only such nodes are tried by preemption.
    preemption_helps: ClassVar[bool] = False
    # Of a plugin that `preemption_helps`, the verdicts no eviction resolves (upstream answers
    # them UnschedulableAndUnresolvable): the default `unresolvable_rows` asks `filter` for them
    unresolvable_verdicts: ClassVar[frozenset[tuple[str, ...]]] = frozenset()

    def filter_applies(self, ctx: PodContext) -> bool:
        """False when the plugin can only pass this pod (it is then left out of its cycle)."""
        return True

    def pod_form(self, ctx: PodContext) -> Hashable:
        """What of the pod this filter reads: pods of equal forms pass it on the same nodes, so a
        gang's members are asked once per form (`Handle.usable_rows`). By default the pod itself
        (shared with no other pod): a plugin that says less must read no more than it says."""
        return ctx.pod.uid

    def unresolvable_rows(self, table: NodeTable, ctx: PodContext, rows: Ints) -> Bools:
        """Of these node rows (each rejected by this plugin), those where no eviction could make
        the pod fit, although the plugin's rejections usually can be resolved (upstream: this
        node's status is UnschedulableAndUnresolvable): by default the rows whose `filter`
        verdict is one of `unresolvable_verdicts` (none unless the plugin names some)."""
        out = np.zeros(len(rows), np.bool_)
        if self.unresolvable_verdicts:
            for i, row in enumerate(rows.tolist()):
                info = table.info(row)
                out[i] = info.node is None or self.filter(ctx, info) in self.unresolvable_verdicts
        return out

    @abstractmethod
    def filter(self, ctx: PodContext, info: NodeInfo) -> Reasons | None:
        """None if the pod may go to the node, else the reasons (upstream's wording)."""

    def node_filter(self, ctx: PodContext) -> Callable[[NodeInfo], Reasons | None]:
        """`filter` for this attempt's pod, for many nodes in a row: a plugin whose per-node work
        starts with per-attempt lookups (caches, generations) does them once here."""
        return lambda info: self.filter(ctx, info)

    def scan(self, ctx: PodContext, rows: Iterable[int], infos: Sequence[NodeInfo], want: int) -> list[int]:
        """The first `want` of `rows` (in order) whose node (`infos[row]`) passes `filter`. The
        runner's loop over thousands of nodes: a plugin may override it to do its per-node work inline."""
        check = self.node_filter(ctx)
        passed: list[int] = []
        for row in rows:
            if not check(infos[row]):
                passed.append(row)
                if len(passed) >= want:
                    break
        return passed


def _no_reasons() -> Sequence[tuple[str, Bools]]:
    return ()


@dataclass(slots=True)
class RowVerdict:
    """A batch filter's answer over the node table's rows.

    `fails` marks the rows the plugin rejects, a subset of those it was asked about (None: it
    rejects none, which saves the runner a pass over the table). `reasons()` pairs each reason
    with the rows it applies to — a callable, because only a cycle where nothing fits (or
    --explain) asks — and `explain(row)` gives the reasons of a failing row no mask covers. With
    `exact` False the verdict is only a necessary condition: rows it lets through still go
    through the plugin's per-node `filter`.
    """

    fails: Bools | None
    reasons: Callable[[], Sequence[tuple[str, Bools]]] = _no_reasons
    explain: Callable[[int], Reasons] | None = None
    exact: bool = True

    def reasons_of(self, row: int, masks: Sequence[tuple[str, Bools]]) -> Reasons:
        """A failing row's reasons, given `masks` = `reasons()` (asked once per verdict)."""
        found = tuple(reason for reason, rows in masks if rows[row])
        if found or self.explain is None:
            return found
        return self.explain(row)


@runtime_checkable
class BatchFilter(Protocol):
    def filter_rows(self, table: NodeTable, ctx: PodContext, rows: Bools) -> RowVerdict:
        """The verdict for the rows marked in `rows` (other rows' entries are ignored)."""


class PreScorePlugin(Plugin):
    """Upstream's PreScore point, enabled and disabled apart from Score (`plugins.preScore`), as
    kube-scheduler builds each extension point's list on its own. A plugin that also scores reads
    the same in its Score when the profile runs that Score without this PreScore (upstream
    NodeAffinity's fallback), so the same error then fails the Score instead."""

    @abstractmethod
    def pre_score(self, ctx: PodContext) -> str | None:
        """Why scoring this pod is an error (upstream's PreScore returning an Error status: the
        apiserver accepted something the plugin cannot read), or None. The runner says which
        plugin failed, as upstream's RunPreScorePlugins."""


class ScorePlugin(Plugin):
    normalize: ClassVar[Normalize] = Normalize.NONE

    def score_applies(self, ctx: PodContext) -> bool:
        """False when the plugin would score every node 0 for this pod."""
        return True

    def prepare_scores(self, table: NodeTable, ctx: PodContext, rows: Ints) -> None:
        """The feasible nodes (`rows` of `table`) the pod is about to be scored on, before its
        `score` calls (upstream's PreScore `filteredNodes`): for a plugin whose node scores depend
        on which nodes passed. Nothing by default (and nothing built for it: rows, not NodeInfos)."""
        return None

    @abstractmethod
    def score(self, ctx: PodContext, info: NodeInfo) -> int:
        """The raw score of the node for the pod (0..100 unless the plugin normalises)."""


@runtime_checkable
class BatchScore(Protocol):
    def score_rows(self, table: NodeTable, ctx: PodContext, rows: Ints) -> Ints:
        """Raw scores of the given rows (feasible nodes, in the order given)."""


@dataclass(frozen=True, slots=True)
class Reservation:
    """What a reserve plugin adds to the chosen placement: Binding annotations, the devices the
    cluster state charges to the pod (container -> resource -> grants), and its claims' volumes."""

    annotations: Mapping[str, str] = field(default_factory=dict)
    devices: DeviceAssignment | None = None
    # what the pod's unbound WaitForFirstConsumer claims get on the node (VolumeBinding)
    claims: tuple[ClaimBinding, ...] = ()


@dataclass(slots=True)
class Released:
    """Held Bindings a permit plugin lets go: `allowed` may be sent now; `invalid` ones would not
    be chosen any more (a device, its class or the node changed meanwhile): decide them again,
    each with its `message` saying why (upstream's `waitingPod.Reject` message)."""

    allowed: list[Attempt] = field(default_factory=list)
    invalid: list[Attempt] = field(default_factory=list)

    def add(self, other: Released) -> None:
        self.allowed += other.allowed
        self.invalid += other.invalid


class PermitPlugin(Plugin):
    """Holds a placed pod's Binding until something outside the cycle happens (upstream's Permit
    returning Wait). The framework asks it to release on events and periodically."""

    @abstractmethod
    def permit(self, attempt: Attempt, now: float) -> bool:
        """True: bind now. False: the plugin holds the Binding (and says why in the attempt)."""

    @abstractmethod
    def release(self, node: str | None, now: float) -> Released:
        """Held Bindings on `node` (every node when None) that may go out, or must be redone."""

    @abstractmethod
    def held(self) -> list[Attempt]:
        """Every Binding the plugin holds."""

    @abstractmethod
    def abandon(self) -> list[Attempt]:
        """Drop every held Binding (this replica no longer leads) and return them."""

    @abstractmethod
    def reject(self, uid: str) -> bool:
        """Drop this pod's held Binding: a preemption chose it as a victim while it waited
        (upstream's waitingPod.Preempt). Whether the plugin held it."""


@dataclass(slots=True)
class Preemption:
    """A PostFilter's answer. `victims` empty: no preemption, `message` says why (and `clear`
    whether the pods' nominations go). Otherwise the victims to evict and, per preemptor, the
    placement its dry run found (node, requests, devices) to hold while they terminate."""

    victims: list[Pod] = field(default_factory=list)
    holds: dict[str, Placement] = field(default_factory=dict)  # preemptor uid -> placement to hold
    message: str = ""
    clear: bool = False


@dataclass(frozen=True, slots=True)
class NodeStatuses:
    """Which filter rejected each node in a pod's failed search: upstream's NodeToStatusMap, which
    PostFilter reads instead of filtering every node again. Row i is `nodes[i]` (the state's node
    order), first rejected by `plugins[rejector[i]]`; -1 where no filter rejected it.
    `pre_filter`: a PreFilter rejected the pod, so every node carries that plugin's
    UnschedulableAndUnresolvable status (upstream's `SetAbsentNodesStatus` on a PreFilter
    rejection): no eviction can help anywhere."""

    nodes: Sequence[NodeInfo]
    plugins: Sequence[str]
    rejector: Ints
    pre_filter: bool = False


class PostFilterPlugin(Plugin):
    """Runs when a pod (or a whole gang) found no node: upstream's PostFilter (preemption)."""

    @abstractmethod
    def post_filter(self, pods: Sequence[Pod], minimum: int, nominated: Mapping[str, str],
                    place: Callable[[Pod, Domain | None], str | None], statuses: NodeStatuses | None, now: float,
                    domains: Sequence[Domain] | None = None) -> Preemption:
        """Make room for `pods` (one pod, or a gang's pending members of which `minimum` must fit);
        `nominated`: the pods' current nominations (uid -> node); `place` runs one pod's ordinary
        attempt on the current state, inside the domain when one is given, and assumes it where it
        lands (the gang's dry run); `statuses`: one pod's failed search over every node, per node —
        a single pod's, or a gang member's that preempts alone; None for a gang placed member by
        member (the gang dry run); `domains`: a gang with a required topology level must land
        inside one of these (every member in the same one), None: anywhere."""

    @abstractmethod
    def frees_room(self, pod: Pod, info: NodeInfo, plugin: str) -> bool:
        """Would the pod pass the filter plugin `plugin` on the node once every pod it may evict
        there is gone? (`plugin`'s node hint: its own rule, not every filter's.)"""

    @abstractmethod
    def after_pre_filter(self, pod: Pod) -> Preemption:
        """What this PostFilter answers for a pod a PreFilter refused (every node carries that
        refusal, UnschedulableAndUnresolvable: no eviction can help anywhere), without searching."""


class ReservePlugin(Plugin):
    @abstractmethod
    def reserve(self, ctx: PodContext, info: NodeInfo, now: float) -> Reservation:
        """Fix what the pod gets on the chosen node (e.g. concrete devices)."""


@dataclass(frozen=True, slots=True)
class GangView:
    """A pod group the cycle may place now: its minimum and its members by where they are."""

    key: str
    minimum: int
    bound: list[Pod]  # members already on a node (bound or assumed)
    pending: list[Pod]  # members waiting for a node
    topology: GangTopology | None = None  # where the members must (or should) be together


class GroupPlugin(Plugin):
    """The rules of pod groups (gangs): the cycle places a group as one transaction and asks these."""

    backoff_seconds: int = 0  # keep a group that failed placement out of the queue this long

    @abstractmethod
    def waiting_message(self, pod: Pod) -> str | None:
        """Why the pod's group cannot be tried yet, or None."""

    @abstractmethod
    def view(self, pod: Pod) -> GangView | None:
        """The pod's group, or None when it cannot be tried yet."""

    @abstractmethod
    def placement_order(self, pod: Pod) -> tuple[int, int, int, str]:
        """Sort key: members placed first come first."""

    @abstractmethod
    def post_filter_message(self, pod: Pod) -> str | None:
        """The group's own PostFilter reason after the pod found no node, or None when it gives none."""


class PlacementPlugin(Plugin):
    """Where a gang with a topology constraint may go as a whole (upstream's PlacementGenerate)."""

    @abstractmethod
    def placements(self, view: GangView, members: Sequence[PodContext]) -> PlacementPlan | None:
        """The domains to try the gang's transaction in, or None when the gang has no constraint.
        `members`: the pending members' contexts, in placement order."""

    @abstractmethod
    def domains(self, view: GangView, key: str) -> tuple[Domain, ...]:
        """Every domain of the topology level `key` the gang could take, whatever room is free
        there now — only its bound members' one once some are bound, none when they span two or
        their nodes are in none: where a gang required at that level may preempt."""

    @abstractmethod
    def level(self, key: str) -> tuple[tuple[str, ...], str]:
        """The node labels naming a domain of the topology level `key`, widest first, and the
        level's word in messages (what can-never-fit verdicts group nodes by: `capacity`)."""


# A profile's extension points (`plugins.<point>`, v1alpha1's `unreserve` too) and the plugin type
# upstream's framework asks of a plugin enabled there (framework.go updatePluginList: `plugin %q
# does not extend %s plugin`), with the Tessera interface standing for it where there is one.
EXTENSION_POINTS: Mapping[str, tuple[str, type[Plugin] | None]] = {
    "preEnqueue": ("PreEnqueuePlugin", PreEnqueuePlugin),
    "queueSort": ("QueueSortPlugin", None),
    "preFilter": ("PreFilterPlugin", PreFilterPlugin),
    "filter": ("FilterPlugin", FilterPlugin),
    "postFilter": ("PostFilterPlugin", PostFilterPlugin),
    "preScore": ("PreScorePlugin", PreScorePlugin),
    "score": ("ScorePlugin", ScorePlugin),
    "reserve": ("ReservePlugin", ReservePlugin),
    "permit": ("PermitPlugin", PermitPlugin),
    "preBind": ("PreBindPlugin", None),
    "bind": ("BindPlugin", None),
    "postBind": ("PostBindPlugin", None),
    "unreserve": ("UnreservePlugin", None),
}


def extends(kind: type[Plugin], point: str) -> bool:
    """Does a plugin of this class implement the extension point, in Tessera or upstream?"""
    interface = EXTENSION_POINTS[point][1]
    return point in kind.also_extends or (interface is not None and issubclass(kind, interface))
