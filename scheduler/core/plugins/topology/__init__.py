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
- Candidates are the domains whose free capacity (summed per resource over their nodes) can hold
  the members still needed; they are tried tightest first — least free capacity of the gang's
  resources, extended resources first — so a gang takes the smallest domain it fits in, as KAI's
  and Kueue's BestFit, and fragmentation scoring places each member inside it. The cycle keeps
  the first domain where every pending member fits (upstream's PodGroupPodsCount prefers the
  placement with most pods; among full placements the tightest wins), else the one with most.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from scheduler.core.framework.cycle_state import PodContext
from scheduler.core.framework.handle import Handle
from scheduler.core.framework.interface import (
    Bools,
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
from scheduler.core.objects import GangTopology
from scheduler.core.plugins.topology.args import TopologyPlacementArgs, level_name
from scheduler.core.plugins.topology.domains import Chain, LevelView, level_view
from scheduler.core.resources import CPU, MEMORY, is_extended
from scheduler.core.state import EventKind, NodeInfo

NAME = "TopologyPlacement"


def outside_reason(domain: Domain) -> str:
    return f"node(s) were outside {domain.level} {domain.name} of the pod's gang"


class TopologyPlacement(FilterPlugin, PlacementPlugin):
    name = NAME

    def __init__(self, handle: Handle, args: TopologyPlacementArgs) -> None:
        self.handle = handle
        self.max_trials = args.max_domain_trials
        self.labels = tuple(level.node_label for level in args.levels)
        self.words = {level.node_label: level.name for level in args.levels}

    def queueing_hints(self) -> Mapping[EventKind, QueueingHint]:
        # a node's labels or capacity, or a member leaving, may open a domain
        return dict.fromkeys((EventKind.NODE_ADDED, EventKind.NODE_UPDATED, EventKind.ASSIGNED_POD_REMOVED), always)

    # --- Filter: keep the attempt inside the domain being tried -------------------------------

    def filter_applies(self, ctx: PodContext) -> bool:
        return ctx.domain is not None

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
        resources = _resources(members)
        columns = table.group(ResourceColumns)
        free = [columns.of(name).free for name in resources]
        demand = np.array([[ctx.plain_request(name) for name in resources] for ctx in members], np.float64)
        cumulative = np.cumsum(demand, axis=0) if len(resources) else np.zeros((len(members), 0))
        bound_rows = [row for pod in view.bound
                      if (node := self.handle.state.node_of(pod.uid)) is not None
                      and (row := self.handle.state.node_position(node)) is not None]
        tiers: list[PlacementTier] = []
        for chain in self._climb(topology):
            level = level_view(table, chain, free)
            word = self.words.get(chain[-1], level_name(chain[-1]))
            codes = level.present
            if bound_rows:
                pinned = {int(level.codes[row]) for row in bound_rows}
                if -1 in pinned or len(pinned) > 1:
                    if topology.required and chain[-1] == topology.required:
                        spread = ("a member's node has no label " + chain[-1] if -1 in pinned
                                  else f"more than 1 {word} found for pod group {view.key}: "
                                  + ", ".join(sorted("/".join(level.paths[c]) for c in pinned)))
                        return PlacementPlan((PlacementTier(word, ()),), True, spread)
                    continue  # the bound members are not together at this level: climb
                codes = np.array(sorted(pinned), np.int64)
            tiers.append(self._tier(table, level, word, codes, cumulative, needed))
        if not topology.required:
            tiers.append(PlacementTier("", None))
        return PlacementPlan(tuple(tiers), bool(topology.required))

    def _climb(self, topology: GangTopology) -> list[Chain]:
        """The levels to try, narrowest first: the preferred level up to the required one (or the
        widest configured level); a key that is not a configured level stands alone."""
        required, preferred = topology.required, topology.preferred
        chains: list[Chain] = []
        if preferred and preferred != required:
            if preferred in self.labels:
                top = self.labels.index(required) if required in self.labels else 0
                at = self.labels.index(preferred)
                if not required or required in self.labels and top < at:
                    chains = [self.labels[: i + 1] for i in range(at, top - 1, -1)]
            elif not required:
                chains = [(preferred,)]
        if required and (not chains or chains[-1][-1] != required):
            chains.append(self._chain(required))
        return chains

    def _chain(self, key: str) -> Chain:
        return self.labels[: self.labels.index(key) + 1] if key in self.labels else (key,)

    def _tier(self, table: NodeTable, level: LevelView, word: str, codes: np.ndarray,
              cumulative: np.ndarray, needed: int) -> PlacementTier:
        """The level's domains that can hold `needed` members by free capacity, tightest first."""
        free = level.free[codes]
        fits = (cumulative[None, :, :] <= free[:, None, :] + 1e-9).all(axis=2).sum(axis=1)
        short = fits < needed
        holds = int(fits[short].max()) if short.any() else 0
        eligible = np.flatnonzero(~short)
        # tightest first: least free capacity of the gang's resources in order; then by name
        order = sorted(eligible.tolist(), key=lambda i: (*free[i].tolist(), level.paths[int(codes[i])]))
        domains = []
        for i in order[: self.max_trials]:
            code = int(codes[i])
            mask = level.mask(code)
            nodes = frozenset(table.infos[row].name for row in np.flatnonzero(mask).tolist())
            domains.append(Domain(word, level.paths[code], nodes, mask))
        return PlacementTier(word, tuple(domains), holds)


def _resources(members: Sequence[PodContext]) -> list[str]:
    """The plain resources the members request: extended ones first (the scarce ones decide
    tightness), then CPU and memory, then the rest."""
    names = {name for ctx in members for name, _ in ctx.plain}
    rank = {CPU: 1, MEMORY: 2}
    return sorted(names, key=lambda name: (0 if is_extended(name) else rank.get(name, 3), name))
