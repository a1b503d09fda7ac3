"""DefaultPreemption: when a pod (or a whole gang) fits nowhere, evict lower-priority pods so it does.

Single pods, and a gang member preempting alone once its gang has its minimum (at its gang's
priority, never evicting its own gang), follow kube-scheduler's DefaultPreemption (pkg/scheduler/
framework/plugins/defaultpreemption, pkg/scheduler/framework/preemption;
docs/research/preemption-upstream.md):
- eligible unless `preemptionPolicy: Never`, or a victim of its earlier preemption still
  terminates on its nominated node;
- only nodes whose filter rejection removing pods can resolve are tried (`preemption_helps`;
  read from the failed search's per-node statuses, as upstream, not filtered again), from a
  random offset, until enough candidates are found (minCandidateNodesPercentage/Absolute); a
  node without a pod below the preemptor (floor.py) has no victims and is not searched;
- on a node: remove every lower-priority unit, check the pod fits, then put units back most
  important first (PDB-violating ones first) while it still fits: the rest are the victims;
- node choice: fewest PDB violations, lowest highest-victim priority, smallest priority sum,
  fewest victims, latest start of the most important victims, then the first found.
Units instead of pods (victims.py): a gang is never left below its minimum.

Gangs as preemptors run the gang transaction on the cluster without every lower-priority unit (one
priority tier more at a time); if the gang cannot fit even so (its minimum), nothing is evicted.
Otherwise two placements are candidates: where it first fits, and where upstream's workload-aware
order leads it (podgrouppreemption.go: every removed unit put back, PDB-violating ones first, the
gang placed again whenever one no longer lets it fit where it is). On each, units are put back
(PDB-violating first, most important first) while every member still fits; the candidate with the
fewest PDB violations wins, then the single pod's tie-breaks (pick_candidate).

A gang with a required topology level runs that dry run once per domain of the level, every member
placed inside the domain and only the units on the domain's nodes removed (a victim gang leaves
whole, wherever its other members run): each domain is what upstream's per-pod preemption makes
of a node (tried from a random offset until the candidate domains hold as many nodes as one pod's
search wants), and the candidates of every domain tried are compared as nodes are (pick_candidate). Upstream
(podgrouppreemption.go, 1.36) runs its pod-group dry run over one domain, the whole cluster; this is
that dry run over each of the domains the gang is confined to.

Device requests need no special case: the filters that decide whether the pod fits after the
evictions are the device plugin's too, so victims are chosen for the devices they free.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, TypeVar

import numpy as np
import numpy.typing as npt

from scheduler.core.capacity import Needs, Providers, gang_needs, never_holds
from scheduler.core.disruption import split_by_violation
from scheduler.core.framework.cycle_state import PodContext, prepare
from scheduler.core.framework.handle import Handle
from scheduler.core.framework.interface import Ints, NodeStatuses, PostFilterPlugin, Preemption
from scheduler.core.framework.placement import Domain
from scheduler.core.objects import INT32_MAX, Pod, gang_name
from scheduler.core.plugins.preemption.floor import VictimFloor
from scheduler.core.plugins.preemption.args import PreemptionArgs, candidates_to_try
from scheduler.core.plugins.preemption.victims import Unit, flatten, most_important_first, units_for
from scheduler.core.state import ClusterState, NodeInfo
from scheduler.core.state.cluster import placement_of
from scheduler.core.state.nodes import Lifted, Placement

NAME = "DefaultPreemption"
NEVER = "not eligible due to preemptionPolicy=Never."
TERMINATING = "not eligible due to a terminating pod on the nominated node."
NO_VICTIMS = "No preemption victims found for incoming pod"  # one pod's (SelectVictimsOnNode)
# a pod group's, as one preemptor (podgrouppreemption.go selectVictimsOnDomain)
NO_GROUP_VICTIMS = "No preemption victims found for incoming preemptor"
NOT_HELPFUL = "Preemption is not helpful for scheduling"

# Runs one pod's ordinary attempt on the current state and assumes it where it lands; the node, or None.
Place = Callable[[Pod], str | None]
# The same inside a topology domain (None: anywhere): what the cycle hands PostFilter.
PlaceWithin = Callable[[Pod, Domain | None], str | None]


@dataclass(slots=True)
class Candidate:
    node: str
    victims: list[Unit]  # most important first
    pdb_violations: int
    hold: Placement


@dataclass(frozen=True, slots=True)
class NoRoom:
    """Why a gang's dry run found no candidate: no lower-priority unit where it may go (`fit`
    None), or only `fit` members fit even with every one of them removed."""
    fit: int | None


@dataclass(slots=True)
class GangCandidate:
    """A gang's placement with its victims: compared as upstream compares nodes (pick_candidate)."""
    victims: list[Unit]  # most important first
    pdb_violations: int
    holds: dict[str, Placement]  # member uid -> its room


class DefaultPreemption(PostFilterPlugin):
    name = NAME
    also_extends: ClassVar[frozenset[str]] = frozenset({"preEnqueue"})  # upstream's, for async preemption

    def __init__(self, handle: Handle, args: PreemptionArgs) -> None:
        self.handle = handle
        self.state: ClusterState = handle.state
        self.args = args
        self.rng = random.Random(0)  # upstream's random offset into the candidate nodes, seeded

    # --- eligibility -----------------------------------------------------------------------

    def ineligible(self, pods: Sequence[Pod], nominated: Mapping[str, str], priority: int,
                   statuses: NodeStatuses | None = None) -> str | None:
        """upstream's PodEligibleToPreemptOthers, for one pod or every member of a gang
        (`nominated`: pod uid -> its nominated node; `priority`: the pod's, or its gang's;
        `statuses`: one pod's failed search). A nominated node that is gone, or that the search
        rejected for a reason evictions cannot resolve (tainted, cordoned since), no longer
        holds the pod back: it may preempt elsewhere at once."""
        if any(pod.preempt_never for pod in pods):
            return NEVER
        for pod in pods:
            node = nominated.get(pod.uid)
            if node and not self._unresolvable(node, statuses, pod) and self._victim_terminating_on(node, priority):
                return TERMINATING
        return None

    def _unresolvable(self, node: str, statuses: NodeStatuses | None, pod: Pod) -> bool:
        """The node has no Node object any more, or the failed search's first rejecting filter
        there is one that removing pods cannot resolve (upstream's UnschedulableAndUnresolvable)."""
        info = self.state.nodes.get(node)
        if info is None or info.node is None:
            return True
        if statuses is None:
            return False
        if statuses.pre_filter:
            return True
        row = next((i for i, candidate in enumerate(statuses.nodes) if candidate is info), None)
        if row is None:
            return False
        rejector = int(statuses.rejector[row])
        if rejector < 0:
            return False
        plugin = statuses.plugins[rejector]
        if not self.handle.resolvable(plugin):
            return True
        return bool(self.handle.unresolvable_rows(plugin, prepare(pod, self.state.classes), np.array([row]))[0])

    def _victim_terminating_on(self, node: str, priority: int) -> bool:
        info = self.state.nodes.get(node)
        if info is None:
            return False
        preempting = self.state.preempting
        return any((pod := self.state.pods.get(uid)) is not None and pod.priority < priority
                   and (pod.preempted or uid in preempting) for uid in info.pods)

    # --- PostFilter --------------------------------------------------------------------------

    def post_filter(self, pods: Sequence[Pod], minimum: int, nominated: Mapping[str, str], place: PlaceWithin,
                    statuses: NodeStatuses | None, now: float,
                    domains: Sequence[Domain] | None = None) -> Preemption:
        priority = self.state.competing_priority(pods[0])
        reason = self.ineligible(pods, nominated, priority, statuses)
        if reason is not None:
            return Preemption(message=reason)
        if statuses is not None and statuses.pre_filter:
            return self.after_pre_filter(pods[0])
        if len(pods) == 1 and minimum <= 1 and (pods[0].gang is None or statuses is not None):
            # a gang member alone (its gang has its minimum) preempts as one pod, as upstream's
            # DefaultPreemption runs per pod — on its gang's required domain's nodes only, when
            # it has one; its own gang is never its victim
            if statuses is None:
                raise ValueError("a single pod's PostFilter needs its failed search's per-node statuses")
            return self._preempt_pod(pods[0], statuses, now, domains)
        if domains is not None:
            return self._preempt_in_domains(pods, minimum, place, domains, now)
        return self._preempt_gang(pods, minimum, _within(place, None), now)

    def after_pre_filter(self, pod: Pod) -> Preemption:
        """upstream's Preempt after a PreFilter rejection: not eligible (preemptionPolicy Never; a
        victim terminating on the nominated node does not hold it back, that node being
        UnschedulableAndUnresolvable too), else no node where preemption might help: all of them
        "not helpful" (findCandidates: no node with an Unschedulable status)."""
        if pod.preempt_never:
            return Preemption(message=NEVER)
        return self._no_candidate(Counter({NOT_HELPFUL: len(self.state.node_order)}))

    # --- one pod -------------------------------------------------------------------------------

    def _preempt_pod(self, pod: Pod, failed: NodeStatuses, now: float,
                     within: Sequence[Domain] | None = None) -> Preemption:
        statuses: Counter[str] = Counter()
        potential = self.might_help(failed, prepare(pod, self.state.classes))
        if within is not None:  # evicting outside them frees room the pod may not use
            potential = potential[_rows_inside(within, len(failed.nodes))[potential]]
        statuses[NOT_HELPFUL] = len(failed.nodes) - len(potential)
        if not len(potential):
            return self._no_candidate(statuses)
        wanted = candidates_to_try(self.args, len(potential))
        offset = self.rng.randrange(len(potential))
        table = self.handle.table
        table.sync()
        rotated = np.roll(potential, -offset)  # upstream's random offset into the potential nodes
        below = table.group(VictimFloor).lowest[rotated] < self.state.competing_priority(pod)
        statuses[NO_VICTIMS] = int(np.count_nonzero(~below))  # no pod there could be a victim
        fine: list[Candidate] = []
        violating: list[Candidate] = []
        for row in rotated[below].tolist():
            found = self.victims_on(pod, failed.nodes[row], now)
            if isinstance(found, tuple):
                statuses.update(found)  # every reason of the node's rejecting filter, as FitError counts them
                continue
            (fine if found.pdb_violations == 0 else violating).append(found)
            if fine and len(fine) + len(violating) >= wanted:
                break
        candidates = fine[:wanted] + violating[:wanted]
        if not candidates:
            return self._no_candidate(statuses)
        best = pick_candidate(candidates)
        return Preemption(flatten(best.victims), {pod.uid: best.hold})

    def might_help(self, failed: NodeStatuses, ctx: PodContext) -> Ints:
        """upstream's nodesWherePreemptionMightHelp: the rows of the nodes whose first rejecting
        filter is one that removing pods can resolve (not a taint, a selector, a cordon...), and
        can there (not a request larger than the node's allocatable)."""
        helps = np.array([self.handle.resolvable(name) for name in failed.plugins] + [False], np.bool_)
        rows = np.flatnonzero(helps[failed.rejector])  # -1 (not rejected) reads the trailing False
        if not len(rows):
            return rows
        keep = np.ones(len(rows), np.bool_)
        by_plugin = failed.rejector[rows]
        for index in np.unique(by_plugin).tolist():
            mine = by_plugin == index
            keep[mine] = ~self.handle.unresolvable_rows(failed.plugins[index], ctx, rows[mine])
        return rows[keep]

    def _no_candidate(self, statuses: Counter[str]) -> Preemption:
        total = len(self.state.node_order)
        parts = sorted(f"{count} {reason}" for reason, count in statuses.items() if count)
        return Preemption(message=f"0/{total} nodes are available: {', '.join(parts)}.", clear=True)

    def frees_room(self, pod: Pod, info: NodeInfo, plugin: str) -> bool:
        """Would the pod pass `plugin`'s filter on the node once every pod it may evict there is
        off it (SelectVictimsOnNode's first check, for the one filter whose node hint asks)?"""
        units, lifted = self._lift_units(pod, info)
        try:
            return bool(units) and self.handle.passes_filter(plugin, prepare(pod, self.state.classes), info)
        finally:
            for entries in lifted.values():
                for entry in entries:
                    self.state.restore(entry)

    def _lift_units(self, pod: Pod, info: NodeInfo) -> tuple[list[Unit], dict[str, list[Lifted]]]:
        """The units the pod may evict on the node, each lifted off it (its pods there): a gang
        member preempts at its gang's priority, and never evicts its own gang. The lifted
        entries by unit (its first pod's uid), for the caller to restore."""
        state = self.state
        here = [state.pods[uid] for uid in sorted(info.pods) if uid in state.pods]
        units = units_for(state, state.competing_priority(pod), here,
                          exclude_gang=pod.gang.key if pod.gang is not None else "")
        return units, {unit.pods[0].uid: [state.lift(p.uid) for p in unit.pods if state.node_of(p.uid) == info.name]
                       for unit in units}

    def victims_on(self, pod: Pod, info: NodeInfo, now: float) -> Candidate | tuple[str, ...]:
        """upstream's SelectVictimsOnNode with units: the candidate, or the node's reasons."""
        state = self.state
        units, lifted = self._lift_units(pod, info)
        if not units:
            return (NO_VICTIMS,)
        try:
            ctx = prepare(pod, state.classes)
            rejected = self.handle.filter_node(ctx, info)
            if rejected is not None:
                return tuple(rejected[1])
            order, breaking = reprieve_order(units, state)
            victims: list[Unit] = []
            violations = 0
            for unit in order:
                for entry in lifted[unit.pods[0].uid]:
                    state.restore(entry)
                if self.handle.filter_node(prepare(pod, state.classes), info) is None:
                    continue  # reprieved
                lifted[unit.pods[0].uid] = [state.lift(e.uid) for e in lifted[unit.pods[0].uid]]
                victims.append(unit)
                violations += sum(1 for p in unit.pods if p.uid in breaking)
            victims = _with_surplus_of_lost_cores(victims, units)
            ctx = prepare(pod, state.classes)
            if self.handle.filter_node(ctx, info) is not None:
                return (NOT_HELPFUL,)  # cannot happen: every victim is off the node again
            hold = self._trial(pod, ctx, info, now)
            return Candidate(info.name, most_important_first(victims), violations, hold)
        finally:
            for entries in lifted.values():
                for entry in entries:
                    if entry.uid not in state.placements:
                        state.restore(entry)

    # --- a gang ----------------------------------------------------------------------------------

    def _preempt_gang(self, members: Sequence[Pod], minimum: int, place: Place, now: float) -> Preemption:
        gang = members[0].gang.key if members[0].gang is not None else ""
        found = self._gang_candidates(members, minimum, place, now, None)
        if isinstance(found, NoRoom):
            if found.fit is None:  # upstream's pod-group status for its one domain, the cluster
                return Preemption(message=NO_GROUP_VICTIMS)
            return Preemption(message=f"pod group {gang_name(gang)} needs {minimum} members placed together; "
                                      f"even without every lower-priority pod only {found.fit} fit")
        if not found:
            return Preemption(message=f"pod group {gang_name(gang)}: the placement found without lower-priority "
                                      "pods does not hold")  # cannot happen: a superset is off its nodes
        return _chosen(found)

    def _preempt_in_domains(self, members: Sequence[Pod], minimum: int, place: PlaceWithin,
                            domains: Sequence[Domain], now: float) -> Preemption:
        """The gang's dry run inside each domain in turn; the best candidate of them all (as
        nodes are compared), or, when no domain has one, why per node (upstream's FitError form:
        each domain's reason counted over its nodes; nodes in no domain the gang may take are
        ones preemption cannot help).

        Bounded as upstream bounds the nodes it dry-runs for one pod (DryRunPreemption from a
        random offset, until minCandidateNodesPercentage / minCandidateNodesAbsolute of the
        potential nodes are candidates and one of them violates no budget): the domains with a
        possible victim are tried from a random offset until the candidate domains hold that many
        nodes — a domain's dry run places the whole gang again per victim put back, so trying
        every rack of a large cluster costs seconds.

        A domain whose schedulable nodes, empty, offer less in all than the gang's minimum asks
        for has its nodes read upstream's "Preemption is not helpful for scheduling"
        (as a node whose rejection removing pods cannot resolve: nodesWherePreemptionMightHelp);
        one with no possible victim reads "No preemption victims found for incoming preemptor"
        (selectVictimsOnDomain's words for a pod group, checked before any fit): a trial's gang
        that could never fit read the latter, as if lower-priority pods were what it lacked. Such a domain is still tried
        as before (the random order of the domains, and so the choice among candidates, stays)."""
        gang = gang_name(members[0].gang.key) if members[0].gang is not None else members[0].key
        candidates: list[GangCandidate] = []
        no_candidate: list[tuple[Domain, str]] = []  # each domain without a candidate, and why
        table = self.handle.table
        table.sync()
        below = table.group(VictimFloor).lowest[: table.size] < self.state.competing_priority(members[0])
        potential = []
        for domain in domains:
            if (below & _rows_inside((domain,), table.size)).any():
                potential.append(domain)
            else:
                no_candidate.append((domain, NO_GROUP_VICTIMS))
        wanted = candidates_to_try(self.args, sum(len(domain.nodes) for domain in potential))
        offset = self.rng.randrange(len(potential)) if potential else 0
        covered = 0
        for domain in potential[offset:] + potential[:offset]:
            found = self._gang_candidates(members, minimum, _within(place, domain), now, domain)
            if isinstance(found, NoRoom):
                reason = NO_GROUP_VICTIMS if found.fit is None else (
                    f"node(s) were in a {domain.level} where only {found.fit} of the {minimum} pods of pod group "
                    f"{gang} fit even without every lower-priority pod")
                no_candidate.append((domain, reason))
                continue
            candidates += found
            covered += len(domain.nodes)
            if covered >= wanted and any(c.pdb_violations == 0 for c in candidates):
                break
        if candidates:
            return _chosen(candidates)
        needs = gang_needs(self.state, members, minimum)  # only now: a gang that finds room pays nothing
        reasons: Counter[str] = Counter()
        for domain, reason in no_candidate:
            reasons[_none_here(self.state, domain, needs, reason)] += len(domain.nodes)
        reasons[NOT_HELPFUL] += len(self.state.node_order) - sum(reasons.values())
        return self._no_candidate(reasons)

    def _gang_candidates(self, members: Sequence[Pod], minimum: int, place: Place, now: float,
                         within: Domain | None) -> list[GangCandidate] | NoRoom:
        """The gang's dry run (`place` keeps it inside `within` when given, and only the units on
        that domain's nodes are removed): its candidate placements with their victims, or why
        there is none."""
        state = self.state
        gang = members[0].gang.key if members[0].gang is not None else ""
        priority = state.competing_priority(members[0])
        placed = [pod for info in self._nodes_below(priority, within) for uid in sorted(info.pods)
                  if (pod := state.pods.get(uid)) is not None]
        units = units_for(state, priority, placed, exclude_gang=gang)
        if not units:
            return NoRoom(None)
        lifted: dict[str, list[Lifted]] = {}
        assumed: list[str] = []
        try:
            # Lower priorities first: lift one priority tier more at a time until the gang fits,
            # so that a gang never displaces a higher tier it could have done without.
            nodes: dict[str, str] = {}
            for tier in sorted({unit.priority for unit in units}):
                for unit in units:
                    if unit.priority == tier:
                        lifted[unit.pods[0].uid] = [state.lift(p.uid) for p in unit.pods]
                self._forget(assumed)
                nodes = self._place_all(members, place, assumed)
                if len(nodes) >= minimum:
                    break
            if len(nodes) < minimum:
                return NoRoom(len(nodes))
            self._forget(assumed)
            # Two placements to choose from: where the gang first fits (the best-scored nodes,
            # with every pod of those tiers removed: PodDisruptionBudgets play no part there), and
            # where upstream's order leads it (each removed pod put back, budget-protected ones
            # first, the gang placed again when one does not fit where it is).
            first = dict(nodes)
            settled = self._settle(members, minimum, nodes, place, [u for u in units if u.pods[0].uid in lifted],
                                   lifted, assumed, now)
        finally:
            self._forget(assumed)
            self._restore(lifted)
        candidates: list[GangCandidate] = []
        for placement in (first, settled) if settled != first else (first,):
            found = self._victims_for(members, minimum, placement, place, gang, priority, now)
            if found is not None:
                candidates.append(found)
        return candidates

    def _settle(self, members: Sequence[Pod], minimum: int, nodes: dict[str, str], place: Place,
                units: Sequence[Unit], lifted: dict[str, list[Lifted]], assumed: list[str],
                now: float) -> dict[str, str]:
        """upstream's selectVictimsOnDomain for a pod group (podgrouppreemption.go): every removed
        unit put back in turn, those whose eviction would violate a PodDisruptionBudget first,
        each most important first; one the gang no longer fits beside where it is placed makes
        the gang's placement run again, anywhere the still-removed units left room, and stays
        removed only if that fails too. The placement the gang ends in: its nodes give up the
        fewest budget-protected pods this order can save.

        A unit with no pod on the gang's nodes is put back unchecked: every filter looks at one
        node (Tessera has no inter-pod affinity or spread filter), so it cannot change whether the
        gang fits there — as `_victims_for` puts back the units off its nodes. Checking each cost
        every member's filters per unit: ten times the whole preemption on 1000 full nodes."""
        def fits(entries: Sequence[Lifted]) -> bool:  # where the gang is placed now
            used = set(nodes.values())
            return not any(entry.placement.node in used for entry in entries) or self._fits(
                members, nodes, assumed, now)

        for unit in reprieve_order(units, self.state)[0]:
            put = self._put_back(unit, lifted, nodes, fits, members, minimum, place, assumed)
            if put is not None:
                nodes = put
        return nodes

    def _put_back(self, unit: Unit, lifted: dict[str, list[Lifted]], nodes: dict[str, str],
                  fits: Callable[[Sequence[Lifted]], bool], members: Sequence[Pod], minimum: int, place: Place,
                  assumed: list[str]) -> dict[str, str] | None:
        """`unit` put back (its entries leave `lifted`): the gang's placement with it back — `nodes`
        when `fits` (given the unit's entries) says the gang still fits there, else the gang placed
        again where the still-removed units leave room — or None, the unit removed again, when its
        minimum fits neither way. The one step `_settle` and `_victims_for` take per unit."""
        entries = lifted.pop(unit.pods[0].uid)
        for entry in entries:
            self.state.restore(entry)
        if fits(entries):
            return nodes
        self._forget(assumed)
        moved = self._place_all(members, place, assumed)
        self._forget(assumed)
        if len(moved) >= minimum:
            return moved
        lifted[unit.pods[0].uid] = [self.state.lift(e.uid) for e in entries]
        return None

    def _fits(self, members: Sequence[Pod], nodes: dict[str, str], assumed: list[str], now: float) -> bool:
        """_still_fits, the members forgotten again."""
        fits = self._still_fits(members, nodes, assumed, now)
        self._forget(assumed)
        return fits

    def _victims_for(self, members: Sequence[Pod], minimum: int, nodes: dict[str, str], place: Place,
                     gang: str, priority: int, now: float) -> GangCandidate | None:
        """The victims for the gang placed at `nodes` (member uid -> node), or None if it does not
        fit there even without every eligible pod of those nodes. The units are taken from those
        nodes only: a victim gang's surplus is then chosen among its members where the room is
        needed (as for one pod), not as the latest-started anywhere — which put a needed member in
        the core, and the core took the whole gang with it. Units are put back in reprieve order
        (budget-protected first) while every member still fits where it is; one that does not
        may still move the placement (upstream re-runs the group's scheduling per victim)."""
        state = self.state
        used = set(nodes.values())
        here = [pod for node in sorted(used) for uid in sorted(state.nodes[node].pods)
                if (pod := state.pods.get(uid)) is not None]
        units = units_for(state, priority, here, exclude_gang=gang)
        lifted = {unit.pods[0].uid: [state.lift(p.uid) for p in unit.pods] for unit in units}
        assumed: list[str] = []
        try:
            if not self._still_fits(members, nodes, assumed, now):
                return None
            self._forget(assumed)
            relevant = [u for u in units if any(e.placement.node in used for e in lifted[u.pods[0].uid])]
            for unit in units:
                if unit not in relevant:
                    for entry in lifted.pop(unit.pods[0].uid):
                        state.restore(entry)
            order, breaking = reprieve_order(relevant, state)
            victims: list[Unit] = []
            violations = 0

            def fits(entries: Sequence[Lifted]) -> bool:  # reprieved where the gang is placed now
                return self._still_fits(members, nodes, assumed, now)

            for unit in order:
                put = self._put_back(unit, lifted, nodes, fits, members, minimum, place, assumed)
                if put is not None:  # reprieved, the gang where it was or moved
                    nodes = put
                    continue
                victims.append(unit)
                violations += sum(1 for p in unit.pods if p.uid in breaking)
            extra = [u for u in _with_surplus_of_lost_cores(victims, units) if u not in victims]
            for unit in extra:
                lifted[unit.pods[0].uid] = [state.lift(p.uid) for p in unit.pods if p.uid in state.placements]
            victims += extra
            if not self._still_fits(members, nodes, assumed, now):
                return None  # cannot happen: all victims are off
            holds = {uid: state.placements[uid] for uid in assumed}
            return GangCandidate(most_important_first(victims), violations, holds)
        finally:
            self._forget(assumed)
            self._restore(lifted)

    def _nodes_below(self, priority: int, within: Domain | None = None) -> list[NodeInfo]:
        """The nodes (of the domain, when given) where some placed pod could be a victim of this
        priority (the victim floor), in table order: the only ones whose pods can make a unit.
        Reading their pods instead of every pod in the cluster is what keeps a failed gang cheap
        on a full cluster (no victim anywhere: no work)."""
        table = self.handle.table
        table.sync()
        below = table.group(VictimFloor).lowest[: table.size] < priority
        if within is not None:
            below &= _rows_inside((within,), table.size)
        rows = np.flatnonzero(below)
        return [table.infos[row] for row in rows.tolist()]

    def _place_all(self, members: Sequence[Pod], place: Place, assumed: list[str]) -> dict[str, str]:
        nodes: dict[str, str] = {}
        for member in members:
            node = place(member)
            if node is not None:
                nodes[member.uid] = node
                assumed.append(member.uid)
        return nodes

    def _still_fits(self, members: Sequence[Pod], nodes: dict[str, str], assumed: list[str], now: float) -> bool:
        """Every placed member passes the filters on its node again, in order, each assumed
        before the next is checked (so members never count the same room twice). The members
        stay assumed when True (the caller's `finally` forgets them)."""
        self._forget(assumed)
        state = self.state
        for member in members:
            node = nodes.get(member.uid)
            if node is None:
                continue
            info = state.nodes[node]
            ctx = prepare(member, state.classes)
            if self.handle.filter_node(ctx, info) is not None:
                self._forget(assumed)
                return False
            state.assume(member.uid, node, self.handle.reserve(ctx, info, now).devices)
            assumed.append(member.uid)
        return True

    def _trial(self, pod: Pod, ctx: PodContext, info: NodeInfo, now: float) -> Placement:
        """What placing the pod on the node (it passed the filters) would charge: its hold."""
        return placement_of(pod, info.name, self.handle.reserve(ctx, info, now).devices,
                            self.state.ledger.counted_as)

    def _restore(self, lifted: dict[str, list[Lifted]]) -> None:
        """Put every lifted pod back (those not placed again already) and empty `lifted`."""
        for entries in lifted.values():
            for entry in entries:
                if entry.uid not in self.state.placements:
                    self.state.restore(entry)
        lifted.clear()

    def _forget(self, assumed: list[str]) -> None:
        for uid in reversed(assumed):
            self.state.forget(uid)
        assumed.clear()


def _none_here(state: ClusterState, domain: Domain, needs: tuple[Needs, Providers], reason: str) -> str:
    """Why a domain has no candidate, for its nodes: "not helpful" when its schedulable nodes,
    empty, offer less in all than the gang's minimum asks for (`capacity.never_holds`), else
    `reason`. Only the words: which domains are tried, and in what order, is as before."""
    return NOT_HELPFUL if never_holds(state, domain.nodes, *needs) else reason


def _rows_inside(domains: Sequence[Domain], size: int) -> npt.NDArray[np.bool_]:
    """The node-table rows (of the first `size`) in any of the domains."""
    inside = np.zeros(size, np.bool_)
    for domain in domains:
        count = min(size, len(domain.mask))
        inside[:count] |= domain.mask[:count]
    return inside


def _within(place: PlaceWithin, domain: Domain | None) -> Place:
    """The cycle's placement, kept inside `domain` (None: anywhere)."""
    return lambda pod: place(pod, domain)


def _chosen(candidates: Sequence[GangCandidate]) -> Preemption:
    """The gang's preemption: a candidate that needs no victim at once, else the one with the
    fewest PDB violations, then upstream's tie-breaks (pick_candidate)."""
    best = next((c for c in candidates if not c.victims), None) or pick_candidate(candidates)
    return Preemption(flatten(best.victims), best.holds)


def reprieve_order(units: Sequence[Unit], state: ClusterState) -> tuple[list[Unit], set[str]]:
    """The order in which units are put back (upstream's reprieve): those whose eviction would
    violate a PodDisruptionBudget first, then the rest, each most important first; and the uids
    of the pods that would violate one."""
    ordered = most_important_first(units)
    violating, _ = split_by_violation(flatten(ordered), state.pdbs.values())
    breaking = {pod.uid for pod in violating}
    first = [u for u in ordered if any(p.uid in breaking for p in u.pods)]
    return first + [u for u in ordered if u not in first], breaking


def _with_surplus_of_lost_cores(victims: list[Unit], units: Sequence[Unit]) -> list[Unit]:
    """A gang whose core is evicted loses its surplus members too (never a running remnant)."""
    lost = {unit.gang for unit in victims if unit.gang}
    extra = [u for u in units if not u.gang and u not in victims and u.pods[0].gang is not None
             and u.pods[0].gang.key in lost]
    return victims + extra


AnyCandidate = TypeVar("AnyCandidate", Candidate, GangCandidate)


def pick_candidate(candidates: Sequence[AnyCandidate]) -> AnyCandidate:
    """upstream's pickOneNodeForPreemption: each criterion keeps the best-scoring candidates
    until one is left; then the first. A gang's candidate placements are compared the same way.
    Every candidate has a victim."""

    def highest(c: AnyCandidate) -> int:
        return -max(u.priority for u in c.victims)

    def priority_sum(c: AnyCandidate) -> int:  # per pod, at its unit's priority (a gang member's is its gang's)
        return -sum((u.priority + INT32_MAX + 1) * len(u.pods) for u in c.victims)

    def fewest(c: AnyCandidate) -> int:
        return -len(flatten(c.victims))

    def latest_start(c: AnyCandidate) -> str:
        top = max(u.priority for u in c.victims)
        return min(p.start_time or "\uffff" for u in c.victims if u.priority == top for p in u.pods)

    left = list(candidates)
    for score in (lambda c: -c.pdb_violations, highest, priority_sum, fewest, latest_start):
        if len(left) == 1:
            break
        values = [score(c) for c in left]
        best = max(values)
        left = [c for c, v in zip(left, values) if v == best]
    return left[0]
