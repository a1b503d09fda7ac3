"""TopologyPlacement: a gang inside one rack (block, NVLink domain, ...), or nothing.

Distributed training is bound by the network between its pods; Kueue (TAS), Volcano (HyperNode),
KAI-Scheduler and kube-scheduler 1.36 (`TopologyPlacementGenerator`, alpha) all place a gang
inside one topology domain. This plugin gives the cycle the domains to try the gang transaction in
(`placements`) and keeps every member's attempt inside the domain being tried (`filter`).

- A gang's constraint names node label keys: `required` (all members in one domain of that
  level, or the gang waits) and/or `preferred` (try that level, climb to wider configured levels,
  then — unless a required level caps the climb — the whole cluster).
- Domains are identified by their ancestors' values too (see `args.py`); nodes without the
  level's labels belong to none.
- Members already on a node pin the domain: the rest must join them there (upstream's rule;
  bound members in two domains make a required constraint unplaceable, with upstream's message).
  A node deleted under bound members pins by its last known labels (its pods run there until the
  pod GC removes them); a member bound to a node never seen leaves a required gang unplaceable
  (upstream: "cannot determine domain for already scheduled pods").
- Candidates are the domains whose free capacity, on the nodes the members can use (the
  filters of each distinct member form, as the filters read the pod: `FilterPlugin.pod_form`), can hold the
  members still needed; they are tried tightest first — fewest members that fit (per node, summed: Kueue's
  BestFit and LeastFreeCapacity count pods, not free capacity), then least free capacity of the
  gang's resources, extended resources first — so a gang takes the smallest domain it fits in and
  fragmentation scoring places each member inside it. The cycle keeps
  the first domain where every pending member fits (upstream's PodGroupPodsCount prefers the
  placement with most pods; among full placements the tightest wins), else the one with most.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import ClassVar

import numpy as np

from scheduler.core.framework.cycle_state import PodContext, prepare
from scheduler.core.framework.handle import Handle
from scheduler.core.framework.interface import (
    Bools,
    Ints,
    FilterPlugin,
    GangView,
    PlacementPlugin,
    QueueingHint,
    Reasons,
    RowVerdict,
    always,
)
from scheduler.core.framework.nodetable import NodeTable
from scheduler.core.framework.placement import Domain, PlacementPlan, PlacementTier
from scheduler.core.framework.resources import ResourceColumns
from scheduler.core.plugins.devices.columns import ClassColumns
from scheduler.api.names import label_key_problem
from scheduler.core.objects import TOPOLOGY_REQUIRED, GangTopology, Pod
from scheduler.quoted import quoted
from scheduler.core.plugins.topology.args import TopologyPlacementArgs, level_name
from scheduler.core.framework.label_columns import Chain, level_column
from scheduler.core.plugins.topology.domains import LevelView, level_view
from scheduler.core.resources import CPU, MEMORY, is_extended
from scheduler.core.state import EventKind, NodeInfo

NAME = "TopologyPlacement"


def outside_reason(domain: Domain) -> str:
    return f"node(s) were outside {domain.level} {domain.name} of the pod's gang"


class TopologyPlacement(FilterPlugin, PlacementPlugin):
    name = NAME
    stays_on: ClassVar[str] = ("it keeps a gang inside the topology domain it requires: without it a gang could be "
                               "split across domains")

    def __init__(self, handle: Handle, args: TopologyPlacementArgs) -> None:
        self.handle = handle
        self.max_trials = args.max_domain_trials
        self.labels = tuple(level.node_label for level in args.levels)
        self.words = {level.node_label: level.name for level in args.levels}

    def queueing_hints(self) -> Mapping[EventKind, QueueingHint]:
        # a node's labels or capacity, a pod leaving, or devices and classes (the room check counts
        # free class devices) may open a domain
        return dict.fromkeys((EventKind.NODE_ADDED, EventKind.NODE_UPDATED, EventKind.ASSIGNED_POD_REMOVED,
                              EventKind.DEVICE_CHANGED, EventKind.CLASS_CHANGED), always)

    # --- Filter: keep the attempt inside the domain being tried -------------------------------

    def filter_applies(self, ctx: PodContext) -> bool:
        return ctx.domain is not None

    def pod_form(self, ctx: PodContext) -> Hashable:
        """The domain the attempt is held to (its level and path): the filter reads nothing of
        the pod itself. Gang members judged outside any domain (`_usable`) share this form."""
        domain = ctx.domain
        return None if domain is None else (domain.level, domain.path)

    def filter(self, ctx: PodContext, info: NodeInfo) -> Reasons | None:
        domain = ctx.domain
        assert domain is not None
        return None if info.name in domain.nodes else (outside_reason(domain),)

    def filter_rows(self, table: NodeTable, ctx: PodContext, rows: Bools) -> RowVerdict:
        domain = ctx.domain
        assert domain is not None
        inside = np.zeros(table.size, np.bool_)
        inside[: min(table.size, len(domain.mask))] = domain.mask[: table.size]
        fails = rows & ~inside
        return RowVerdict(fails, lambda: ((outside_reason(domain), fails),))

    # --- Placements: the domains to try, in order -----------------------------------------------

    def placements(self, view: GangView, members: Sequence[PodContext]) -> PlacementPlan | None:
        topology = view.topology
        if topology is None or not members:
            return None
        table: NodeTable = self.handle.table
        table.sync()
        needed = max(1, view.minimum - len(view.bound))
        free, demand = _demand(table, members)
        # the k smallest requests of each resource, summed: no k members can need less, so a domain
        # is refused only when no `needed` of them can fit (a necessary condition, never too strict)
        smallest = np.cumsum(np.sort(demand, axis=0), axis=0) if demand.shape[1] else demand
        # nodes no member can use (a selector, a taint, a cordon) hold none of them
        usable = self._usable(members)
        slots = np.where(usable, _slots(table, free, demand), 0)
        bound = self._bound_nodes(view)
        unknown = next(((pod, name) for pod, name, info in bound if info is None), None)
        tiers: list[PlacementTier] = []
        for chain, word in self._climb(topology):
            column = level_column(table, chain)  # a deleted node's domain is interned before the view
            pinned = {column.code(info.labels, chain) if info is not None else -1 for _, _, info in bound}
            level = level_view(table, chain, free)
            codes = level.present
            at_required = bool(topology.required) and chain == self._chain(topology.required)
            if at_required and not len(codes):
                # a key no node carries (a typo, a level's name instead of its label) is not a
                # lack of room (Kueue: "no requested topology level"); one no node can carry (a
                # label gang's member said so: its Pod's InvalidObject Warning) is named as such
                problem = label_key_problem(topology.required)
                return PlacementPlan((PlacementTier(word, ()),), True,
                                     f"{TOPOLOGY_REQUIRED}: Invalid value: {quoted(topology.required)}: {problem}"
                                     if problem is not None else
                                     f"no node has the label{'s' if len(chain) > 1 else ''} "
                                     f"{', '.join(chain)} of the required {word} level")
            if pinned:
                if -1 in pinned or len(pinned) > 1:
                    if at_required:
                        if unknown is not None:  # upstream: "cannot determine domain for already scheduled pods"
                            spread = f'the node "{unknown[1]}" of member {unknown[0].key} is not known'
                        elif -1 in pinned:
                            spread = f"a member's node has no label {self._missing(chain, bound)}"
                        else:
                            spread = (f"more than 1 {word} found for pod group {view.key}: "
                                      + ", ".join(sorted("/".join(level.paths[c]) for c in pinned)))
                        return PlacementPlan((PlacementTier(word, ()),), True, spread)
                    continue  # the bound members are not together at this level: climb
                codes = np.array(sorted(pinned), np.int64)
            tiers.append(self._tier(table, level, word, codes, smallest, slots, needed,
                                    "/".join(level.paths[codes[0]]) if pinned else ""))
        if not topology.required:
            tiers.append(PlacementTier("", None))
        return PlacementPlan(tuple(tiers), bool(topology.required), unusable=~usable)

    def domains(self, view: GangView, key: str) -> tuple[Domain, ...]:
        """Every domain of the level with a node in it, in path order, free room or not: where a
        gang required at that level may preempt. Bound members pin it as for `placements` (their
        domain only; none when they span two, or a member's node is in none or unknown)."""
        table: NodeTable = self.handle.table
        table.sync()
        chain, word = self.level(key)
        column = level_column(table, chain)
        codes = column.codes[: table.size]
        bound = self._bound_nodes(view)
        pinned = {column.code(info.labels, chain) if info is not None else -1 for _, _, info in bound}
        if -1 in pinned or len(pinned) > 1:
            return ()
        present = sorted(pinned or set(np.unique(codes[codes >= 0]).tolist()), key=lambda code: column.paths[code])
        out = []
        for code in present:
            mask: Bools = codes == code
            nodes = frozenset(table.infos[row].name for row in np.flatnonzero(mask).tolist())
            out.append(Domain(word, column.paths[code], nodes, mask))
        return tuple(out)

    def _usable(self, members: Sequence[PodContext]) -> Bools:
        """Rows some member's filters leave (never too strict: a batch form that is inexact rules
        out no more than its per-node form), each member as it is, outside any domain."""
        state = self.handle.state
        return self.handle.usable_rows([prepare(ctx.pod, state.classes) for ctx in members])

    def _bound_nodes(self, view: GangView) -> list[tuple[Pod, str, NodeInfo | None]]:
        """Each bound member, its node's name and the node (None when no Node object of that
        name was ever seen). A node deleted under its pods still counts, by its last labels: the
        members there run in that domain until they are gone, and the rest must join them."""
        state = self.handle.state
        out: list[tuple[Pod, str, NodeInfo | None]] = []
        for pod in view.bound:
            name = state.node_of(pod.uid)
            if name is not None:
                info = state.nodes.get(name)
                known = info is not None and (info.node is not None or bool(info.deleted_labels))
                out.append((pod, name, info if known else None))
        return out

    def _missing(self, chain: Chain, bound: list[tuple[Pod, str, NodeInfo | None]]) -> str:
        """The first label of `chain` (a level and its wider configured levels) that a bound
        member's node lacks: a node is in a level's domain only with all of them."""
        for _, _, info in bound:
            labels = info.labels if info is not None else {}
            for label in chain:
                if label not in labels:
                    return label
        return chain[-1]

    def _climb(self, topology: GangTopology) -> list[tuple[Chain, str]]:
        """The levels to try, narrowest first, each with its word for messages: the preferred
        level, then its wider configured levels, up to the required level (or the widest
        configured one), then the required level itself. A key that is not a configured level
        stands alone; combined with the other key it narrows its domains (a preferred rack inside
        a required zone: the nodes sharing both values)."""
        required, preferred = topology.required, topology.preferred
        chains: list[tuple[Chain, str]] = []
        if preferred and preferred != required:
            top = self.labels.index(required) if required in self.labels else -1
            if preferred in self.labels and self.labels.index(preferred) > top:
                extra = (required,) if required and required not in self.labels else ()
                for i in range(self.labels.index(preferred), top, -1):
                    chain = self.labels[: i + 1]
                    chains.append((chain + extra, self._word(chain[-1])))
            elif preferred not in self.labels:
                chains.append(((*self._chain(required), preferred) if required else (preferred,),
                               self._word(preferred)))
        if required:
            chains.append((self._chain(required), self._word(required)))
        return chains

    def level(self, key: str) -> tuple[Chain, str]:
        return self._chain(key), self._word(key)

    def _chain(self, key: str) -> Chain:
        return self.labels[: self.labels.index(key) + 1] if key in self.labels else (key,)

    def _word(self, key: str) -> str:
        return self.words.get(key) or level_name(key)

    def _tier(self, table: NodeTable, level: LevelView, word: str, codes: np.ndarray,
              smallest: np.ndarray, slots: Ints, needed: int, pinned: str) -> PlacementTier:
        """The level's domains that may hold `needed` members by free capacity, tightest first
        (`pinned`: the name of the one domain in `codes`, where bound members are; "" if none)."""
        free = level.free[codes]
        fits = (smallest[None, :, :] <= free[:, None, :] + 1e-9).all(axis=2).sum(axis=1)
        inside = level.codes >= 0  # and no more than the members each node can take, summed
        per_domain = np.bincount(level.codes[inside], weights=slots[inside], minlength=len(level.paths))
        room = per_domain[codes].astype(np.int64)  # members of the smallest request each domain's nodes take
        fits = np.minimum(fits, room)
        short = fits < needed
        holds = int(fits[short].max()) if short.any() else 0
        eligible = np.flatnonzero(~short)
        # tightest first: fewest members that fit (Kueue's BestFit), then least free capacity of
        # the gang's resources in order, then by name
        order = sorted(eligible.tolist(), key=lambda i: (int(room[i]), *free[i].tolist(), level.paths[int(codes[i])]))
        domains = []
        for i in order[: self.max_trials]:
            code = int(codes[i])
            mask = level.mask(code)
            nodes = frozenset(table.infos[row].name for row in np.flatnonzero(mask).tolist())
            domains.append(Domain(word, level.paths[code], nodes, mask))
        return PlacementTier(word, tuple(domains), holds, pinned)


def _slots(table: NodeTable, free: list[Ints], demand: np.ndarray) -> Ints:
    """Per node row, how many members it can take: its free amount of each resource over the
    smallest member's request of it (a node's free GPUs cannot be pooled with another's); as
    Kueue's `fillInCounts`, not capped by the gang's size (a member asking for nothing: any)."""
    slots = np.full(table.size, np.iinfo(np.int32).max, np.int64)
    if demand.shape[1]:
        for column, need in zip(free, demand.min(axis=0).tolist()):
            if need > 0:
                slots = np.minimum(slots, np.maximum(column[: table.size], 0) // int(need))
    return slots


def _demand(table: NodeTable, members: Sequence[PodContext]) -> tuple[list[Ints], np.ndarray]:
    """Per resource the gang asks for: each row's free amount, and each member's request
    (members × resources). Resources: extended ones first (the scarce ones decide tightness),
    then exclusive ResourceClass devices (free matching devices per node), CPU, memory, the rest.
    Shared (sliced) class requests are left out: their room is not additive over devices."""
    names = _resources(members)
    columns = table.group(ResourceColumns)
    free: list[Ints] = [columns.of(name).free for name in names]
    rows: list[list[float]] = [[float(ctx.plain_request(name)) for name in names] for ctx in members]
    classes = sorted({req.cls.name for ctx in members for req in ctx.device_requests if req.cls.sharing is None})
    if classes:
        class_columns = table.group(ClassColumns)
        for name in classes:
            free.insert(0, class_columns.free.get(name, np.zeros(table.capacity, np.int64)))
        for ctx, row in zip(members, rows):
            needs = ctx.class_needs()
            row[:0] = [float(needs.get(name, 0)) for name in reversed(classes)]
    return free, np.array(rows, np.float64).reshape(len(members), len(free))


def _resources(members: Sequence[PodContext]) -> list[str]:
    """The plain resources the members request: extended ones first (the scarce ones decide
    tightness), then CPU and memory, then the rest."""
    names = {name for ctx in members for name, _ in ctx.plain}
    rank = {CPU: 1, MEMORY: 2}
    return sorted(names, key=lambda name: (0 if is_extended(name) else rank.get(name, 3), name))
