"""The scheduling cycle: one pod (or one whole gang) from the queue to an assumed placement.

A cycle pops the next pod, runs its profile's plugins (PreFilter, Filter on the sampled nodes,
Score, pick with a seeded tie-break, Reserve), assumes the placement in the cluster state — so the
next cycle can run while the Binding is in flight — and asks the permit plugins whether the
Binding may go out now. A gang is one transaction: every pending member is placed on the live
state; if fewer than its minimum fit, every assumption is undone and nothing is held. A gang with
a topology constraint runs that transaction per candidate domain (see `_place_in_domains`).
"""

from __future__ import annotations

import random
from collections import Counter
from itertools import islice

from scheduler.core.engine import Engine
from scheduler.core.framework.attempt import Attempt
from scheduler.core.framework.cycle_state import PodContext, prepare
from scheduler.core.framework.interface import GangView, GroupPlugin, NodeStatuses, Reservation
from scheduler.core.framework.placement import Domain, PlacementPlan
from scheduler.core.framework.runtime import PRE_FILTER_REJECTION, ProfileRuntime, Rejection
from scheduler.core.framework.timing import Code
from scheduler.core.objects import WORKLOAD_API, Pod, gang_name
from scheduler.core.plugins.preemption.victims import why_evicted
from scheduler.core.state.nodes import Hold, NodeInfo

MIN_FEASIBLE_NODES = 100
MIN_FEASIBLE_PERCENTAGE = 5
NO_NODES = "no nodes available to schedule pods"
TIED_NAMED = 8  # the nodes an attempt names of those it tied with (`Attempt.tied`); all are counted


def num_feasible_nodes_to_find(percentage: int, num_nodes: int) -> int:
    """kube-scheduler's numFeasibleNodesToFind (adaptive when percentage is 0)."""
    if num_nodes < MIN_FEASIBLE_NODES:
        return num_nodes
    if percentage == 0:
        percentage = max(50 - num_nodes // 125, MIN_FEASIBLE_PERCENTAGE)
    return max(num_nodes * percentage // 100, MIN_FEASIBLE_NODES)


def fit_error(num_nodes: int, reasons: Counter[str]) -> str:
    """The FitError message: `0/N nodes are available: <count reason, sorted as strings>.`"""
    return f"0/{num_nodes} nodes are available: {histogram(reasons)}."


def histogram(reasons: Counter[str]) -> str:
    """FitError's reasons histogram: `<count> <reason>`, sorted as strings, joined by ", "."""
    return ", ".join(sorted(f"{count} {reason}" for reason, count in reasons.items()))


GROUP_ERROR = "failed to schedule other pod from a pod group: "  # schedule_one_podgroup.go's wrapping


def pod_group_error(message: str) -> str:
    """The error a pod group's cycle failed with, as upstream words it for the group's other
    members and its PodGroupScheduled condition, given any member's message."""
    return message if message.startswith(GROUP_ERROR) else f"{GROUP_ERROR}{message}"


class Cycle:
    def __init__(self, engine: Engine, seed: int, explain: bool, breakdown: bool = False) -> None:
        self.engine = engine
        self.rng = random.Random(seed)
        self.explain = explain
        self.breakdown = breakdown  # `Scheduler`'s: each plugin's part for the nodes a pick was among
        self.next_start = 0  # the sampled nodes' rotating start (upstream's nextStartNodeIndex)
        # lower-priority holds dropped because a placement took their node, until that placement
        # is kept: a gang transaction or a dry run that is undone gives them back
        self._displaced: dict[str, Hold] = {}
        # per pod, its last attempt's failed search over every node (not a topology domain): its
        # PostFilter reads the per-node statuses (upstream's NodeToStatusMap) instead of filtering
        # every node again — a single pod's, and a gang member's that preempts alone
        self._failed_searches: dict[str, NodeStatuses] = {}
        # per pod, its last attempt's failed search inside a topology domain (the domain's path):
        # what a member alone of a gang required in that domain preempts on, the domain's nodes only
        self._domain_searches: dict[str, tuple[NodeStatuses, tuple[str, ...]]] = {}

    def schedule_next(self, now: float) -> list[Attempt] | None:
        """Run one cycle (one pod, or one whole gang); None when no pod is ready at `now`."""
        engine = self.engine
        engine.now = now
        engine.release(None, now)  # permit plugins may let held Bindings go with time
        self._displaced = {}
        self._failed_searches = {}
        self._domain_searches = {}
        uid = engine.queue.pop(now)
        if uid is None:
            return None
        pod = engine.state.pods.get(uid)
        if pod is None or uid not in engine.state.pending:
            engine.queue.remove(uid)
            return []
        timing = engine.timing
        timing.sampled = timing.stopwatch.sample()  # this cycle times each plugin (upstream: 10 % of cycles)
        holds = list(engine.state.holds.values())
        try:
            return self._run(pod, engine.profiles[pod.scheduler_name], now)
        finally:
            timing.sampled = False
            if holds:  # the holds it set aside and did not put back end with it: their ghosts go
                engine.state.forget_released_ghosts(holds)

    def _run(self, pod: Pod, runtime: ProfileRuntime, now: float) -> list[Attempt]:
        """The cycle of a popped pod: its attempt (or its gang's), PostFilter, Permit."""
        engine = self.engine
        uid = pod.uid
        if pod.gang is not None and runtime.grouping is not None:
            history: dict[str, tuple[int, float]] = {}  # filled before the gang's queue entries change
            attempts = self._schedule_gang(pod, runtime, now, history)
        else:
            history = self._history(pod)
            held = engine.state.set_aside_hold(uid)
            attempts = [self._attempt(pod, runtime, now, held.node if held else pod.nominated_node)]
            if attempts[0].node is not None:
                engine.queue.done(uid)
            elif attempts[0].error:  # upstream: no PostFilter after an error, and the nomination goes
                self._clear(attempts, {uid: held} if held else {})
                engine.queue.error_failure(uid, now)
            else:
                self._post_filter(runtime, [pod], 1, attempts, {uid: held} if held else {}, now,
                                  self._failed_searches.get(uid))
                engine.queue.unschedulable_failure(uid, attempts[0].rejectors, now)
        timing = engine.timing
        for attempt in attempts:
            if attempt.node is not None:
                permitting = engine.runtime_of(attempt.pod)
                started = timing.stopwatch.now()
                allowed = permitting.permit(attempt, now)
                timing.point("Permit", "Success" if allowed else "Wait", permitting.profile.scheduler_name, started)
        for attempt in attempts:
            failures, queued_at = history.get(attempt.pod.uid, (0, now))
            attempt.attempts, attempt.queued_at = failures + 1, queued_at
        return attempts

    def _history(self, pod: Pod, alone: bool = False) -> dict[str, tuple[int, float]]:
        """Failed attempts so far of the pod (and its gang siblings, unless `alone`: a member whose
        gang waits is tried alone), and when each first passed PreEnqueue into the queue (the SLI's
        start: time spent gated is not scheduling time)."""
        state = self.engine.state
        uids = (state.gang_uids(pod) or [pod.uid]) if pod.gang is not None and not alone else [pod.uid]
        history = {}
        for uid in uids:
            entry = self.engine.queue.entries.get(uid)
            if entry is not None:
                history[uid] = (entry.attempts, entry.initial if entry.admitted is None else entry.admitted)
        return history

    def _attempt(self, pod: Pod, runtime: ProfileRuntime, now: float, nominated: str = "",
                 within: Domain | None = None) -> Attempt:
        """PreFilter, filter, score and pick a node for one pod; on success the pod is assumed.

        A nominated pod (its preemption made room there) tries its node first and takes it if it
        passes the filters, as upstream. Holds of lower-priority nominated pods do not bind this
        pod: they are set aside for its attempt, and a hold on the node it takes is dropped."""
        state = self.engine.state
        self._failed_searches.pop(pod.uid, None)  # an earlier attempt's (undone) search is stale
        self._domain_searches.pop(pod.uid, None)
        ctx = prepare(pod, state.classes)
        ctx.domain = within
        num_nodes = len(state.node_order)
        rejected = self._pre_filter(runtime, ctx)
        if rejected is not None:
            plugin, reasons = rejected
            return Attempt(pod, None, message=f"0/{num_nodes} nodes are available: {reasons[0]}.",
                           rejectors=frozenset({plugin}))
        if num_nodes == 0:
            return Attempt(pod, None, message=NO_NODES, rejectors=frozenset(p.name for p in runtime.filters))
        aside = state.set_aside_holds_below(state.competing_priority(pod)) if state.holds else {}  # holds are rare
        taken: set[str] = set()
        try:
            info = state.nodes.get(nominated) if nominated else None
            if info is not None and info.node is not None and self._nominated_fits(runtime, ctx, info):
                reservation = self._reserve(runtime, ctx, info, now)
                attempt = Attempt(pod, info.name, dict(reservation.annotations), claims=reservation.claims)
            else:
                attempt = self._search(pod, runtime, ctx, now)
            taken = {attempt.node} if attempt.node else set()
            return attempt
        finally:
            self._put_back_holds(aside, taken)

    def _pre_filter(self, runtime: ProfileRuntime, ctx: PodContext) -> Rejection | None:
        """One PreFilter run, timed as upstream's RunPreFilterPlugins: one extension point, its
        status the rejecting plugin's code (each plugin too in a sampled cycle, by the runtime)."""
        timing = self.engine.timing
        started = timing.stopwatch.now()
        rejected = runtime.pre_filter(ctx)
        timing.point("PreFilter", "Success" if rejected is None else PRE_FILTER_REJECTION,
                     runtime.profile.scheduler_name, started)
        return rejected

    def _nominated_fits(self, runtime: ProfileRuntime, ctx: PodContext, info: NodeInfo) -> bool:
        """Do the filters pass the pod on its nominated node? A Filter run of its own, as
        upstream's evaluateNominatedNode runs findNodesThatPassFilters on that one node."""
        timing = self.engine.timing
        started = timing.stopwatch.now()
        fits = runtime.filter_node(ctx, info) is None
        timing.point("Filter", "Success", runtime.profile.scheduler_name, started)
        return fits

    def _reserve(self, runtime: ProfileRuntime, ctx: PodContext, info: NodeInfo, now: float) -> Reservation:
        """Reserve: the plugins fix what the pod gets on the node, and the pod is assumed there."""
        timing = self.engine.timing
        started = timing.stopwatch.now()
        reservation = runtime.reserve(ctx, info, now)
        self.engine.state.assume(ctx.pod.uid, info.name, reservation.devices, reservation.claims)
        timing.point("Reserve", "Success", runtime.profile.scheduler_name, started)
        return reservation

    def _put_back_holds(self, aside: dict[str, Hold], taken: set[str]) -> None:
        """Holds set aside whose nodes this attempt took are gone (their pods will try again); the rest return."""
        for uid, hold in aside.items():
            if hold.node in taken:
                self._displaced[uid] = hold
            else:
                self.engine.state.hold(uid, hold.placement, hold.priority)

    def _give_back_displaced(self, since: dict[str, Hold]) -> None:
        """The placements that took these holds' nodes were undone: the holds return."""
        state = self.engine.state
        for uid, hold in list(self._displaced.items()):
            if uid not in since and uid in state.pending and uid not in state.holds:
                state.hold(uid, hold.placement, hold.priority)
                del self._displaced[uid]

    def _search(self, pod: Pod, runtime: ProfileRuntime, ctx: PodContext, now: float) -> Attempt:
        """Filter the sampled nodes, score the feasible ones, pick one, reserve and assume."""
        state = self.engine.state
        num_nodes = len(state.node_order)
        percentage = runtime.profile.percentage_of_nodes_to_score
        if percentage is None:
            percentage = self.engine.config.percentage_of_nodes_to_score
        to_find = num_feasible_nodes_to_find(percentage, num_nodes) if runtime.scores else 1
        start = self.next_start
        timing = self.engine.timing
        profile = runtime.profile.scheduler_name
        started = timing.stopwatch.now()
        found = runtime.find_feasible(ctx, start, to_find, self.explain)
        # upstream's Filter point is Success unless a filter errs, nodes rejected or not (findNodesThatPassFilters)
        timing.point("Filter", "Success", profile, started)
        self.next_start = (start + found.processed) % num_nodes
        table = runtime.table
        filtered = ({table.info(row).name: reason for row, reason in found.filtered.items()}
                    if found.filtered is not None else None)
        if not found.rows:
            # a domain's search says nothing about the nodes outside it: kept apart, for a member
            # that preempts inside that domain
            if found.statuses is not None:
                if ctx.domain is None:
                    self._failed_searches[pod.uid] = found.statuses
                else:
                    self._domain_searches[pod.uid] = (found.statuses, ctx.domain.path)
            return Attempt(pod, None, message=fit_error(num_nodes, found.reasons), rejectors=frozenset(found.rejectors),
                           filtered=filtered, scores={} if self.explain else None)
        if len(found.rows) > 1:  # upstream scores (so runs PreScore) only when more than one node fits
            started = timing.stopwatch.now()
            error = runtime.scoring_error(ctx)
            timing.point("PreScore", "Success" if error is None else "Error", profile, started)
            if error is not None:
                return Attempt(pod, None, message=error, error=True, filtered=filtered)
        scores: dict[str, dict[str, int]] | None = None
        tied: tuple[int, ...] = ()
        named: tuple[int, ...] = ()  # the tied rows the attempt names (`Attempt.tied`)
        top: int | None = None
        if len(found.rows) == 1 and not self.explain:
            best = 0
        else:
            started = timing.stopwatch.now()
            scored = runtime.score(ctx, found.rows, self.explain or self.breakdown)
            timing.point("Score", "Success", profile, started)
            best, tied = self._pick(scored.totals)
            top = scored.totals[best]
            named = tuple(islice((i for i in tied if i != best), TIED_NAMED))
            if scored.per_plugin is not None:
                scores = {}
                for i in range(len(found.rows)) if self.explain else (best, *named):
                    line = {name: values[i] for name, values in scored.per_plugin.items()}
                    line["total"] = scored.totals[i]
                    scores[table.info(found.rows[i]).name] = line
        chosen = table.info(found.rows[best])
        reservation = self._reserve(runtime, ctx, chosen, now)
        return Attempt(pod, chosen.name, dict(reservation.annotations), claims=reservation.claims, scores=scores,
                       filtered=filtered, tied=tuple(table.info(found.rows[i]).name for i in named), tied_count=max(0, len(tied) - 1),
                       score=top)

    def _pick(self, totals: list[int]) -> tuple[int, tuple[int, ...]]:
        """Index of the highest total, and every index sharing it; ties broken uniformly at random
        (as selectHost's reservoir sampling, pkg/scheduler/schedule_one.go)."""
        top = max(totals)
        ties = tuple(i for i, total in enumerate(totals) if total == top)
        return (ties[0] if len(ties) == 1 else self.rng.choice(ties)), ties

    def _schedule_gang(self, pod: Pod, runtime: ProfileRuntime, now: float,
                       history: dict[str, tuple[int, float]]) -> list[Attempt]:
        """Place every pending member on the live state as one transaction: all (≥ min) or nothing.
        A gang with a topology constraint is tried domain by domain (the placement plugin's plan).
        `history` gets `_history` of the pods attempted, read before their queue entries change."""
        engine = self.engine
        queue = engine.queue
        grouping = runtime.grouping
        assert grouping is not None
        timing = engine.timing
        started = timing.stopwatch.now()
        view = grouping.view(pod)
        # only the pod is attempted while its gang waits: its siblings' history is not read (each
        # is retried at every sibling's arrival, so reading all would be quadratic per arrival)
        history.update(self._history(pod, alone=view is None))
        if view is None:  # siblings still waiting stay parked; only this pod reports
            reason = grouping.waiting_message(pod)
            # scheduler-plugins' Coscheduling rejects it in PreFilter, UnschedulableAndUnresolvable
            # (pkg/coscheduling PreFilter), and upstream records that PreFilter run as any other:
            # the attempt counts one PreFilter observation (a trial's PreFilter count fell short of
            # its attempts by the gang's "waiting" ones). The plugins before it are not run here.
            timing.alone(grouping.name, "PreFilter", PRE_FILTER_REJECTION, runtime.profile.scheduler_name, started)
            queue.unschedulable_failure(pod.uid, {grouping.name}, now)
            message = f"0/{len(engine.state.node_order)} nodes are available: {reason}."
            attempt = Attempt(pod, None, message=message, rejectors=frozenset({grouping.name}), gang_outcome="waiting")
            if pod.gang is not None and pod.gang.api != WORKLOAD_API:
                self._post_filter_refused(runtime, grouping, attempt)
            # A gang that lost members (e.g. its running ones are being evicted) holds no room
            # while it waits: a member that preempted for itself gives its room and nomination up.
            released: dict[str, Hold] = {}
            if engine.state.holds:  # rare: no member to visit (each of a large gang's retries would)
                siblings = engine.state.gang_uids(pod) if pod.gang is not None else []
                released = {uid: hold for uid in (pod.uid, *siblings)
                            if (hold := engine.state.release_hold(uid)) is not None}
            self._clear([attempt], released)
            return [attempt]
        members = sorted(view.pending, key=grouping.placement_order)
        for member in members:
            queue.take(member.uid)
        holds = {m.uid: held for m in members if (held := engine.state.set_aside_hold(m.uid)) is not None}
        plan = None
        refused: list[Attempt] | None = None
        if view.topology is not None and runtime.placement is not None:
            contexts = [prepare(m, engine.state.classes) for m in members]
            refused = self._refused_before_nodes(members, contexts)
            if refused is None:  # no domain helps a pod its PreFilter refuses: no plan for it
                # the room is counted as the members' own attempts will find it: without the
                # holds of lower-priority nominated pods, which those attempts set aside
                aside = engine.state.set_aside_holds_below(engine.state.competing_priority(members[0])) \
                    if engine.state.holds else {}
                try:
                    plan = runtime.placement.placements(view, contexts)
                finally:
                    self._put_back_holds(aside, set())
        if refused is not None:
            attempts = refused
        elif plan is None:
            attempts = self._transaction(members, holds, None, now)
        else:
            attempts = self._place_in_domains(view, plan, members, holds, runtime, now)
        errored = next((a for a in attempts if a.error), None)
        if errored is not None:  # only the last attempt of a transaction can be one
            return self._gang_error(members, attempts, errored, holds, now)
        placed = [a for a in attempts if a.node is not None]
        failed = [a for a in attempts if a.node is None]
        succeeded = len(view.bound) + len(placed) >= view.minimum
        for attempt in attempts:
            attempt.gang_outcome = "placed" if succeeded else "failed"
        if succeeded:
            for attempt in placed:
                queue.done(attempt.pod.uid)
            # a gang required in one domain keeps its members alone there too
            kept = self._gang_domain(view, runtime, placed) if failed and plan is not None and plan.required else None
            for attempt in failed:
                # the gang has its minimum: a member that fit nowhere is a pod like any other, and
                # preempts as one (upstream's Coscheduling PostFilter leaves it to DefaultPreemption)
                uid = attempt.pod.uid
                searched = self._failed_searches.get(uid) if kept is None else self._search_in(attempt.pod, kept, now)
                self._post_filter(runtime, [attempt.pod], 1, [attempt], {uid: holds[uid]} if uid in holds else {},
                                  now, searched, domains=kept)
                queue.unschedulable_failure(uid, attempt.rejectors | {grouping.name}, now)
            queue.group_succeeded(view.key)
            return attempts
        # Not enough: undo every assumption so the group holds nothing between cycles.
        rejectors = frozenset({grouping.name}).union(*(a.rejectors for a in failed))
        # One format on every member, as upstream gives a pod group one status and words a
        # member's failure for the group as the group's context and then the member's own error
        # (schedule_one_podgroup.go): the gang's state, then a member that found no node and why —
        # its own reasons for such a member, the first one's for the members that fit.
        short = f"pod group {gang_name(view.key)}: only {len(view.bound) + len(placed)} of the {view.minimum} members it needs fit"
        why = {id(attempt): f"{attempt.pod.key}: {attempt.message}" for attempt in failed}
        # with a required topology the failed members' reason already says it ("no rack has room
        # for N pods of gang ...")
        topology_says = plan is not None and plan.required
        for attempt in attempts:
            if attempt.node is not None or not topology_says:
                attempt.message = f"{short}; {why.get(id(attempt), why[id(failed[0])])}"
        self._undo(placed)
        for attempt in attempts:
            attempt.rejectors = rejectors
            queue.unschedulable_failure(attempt.pod.uid, rejectors, now)
        # a gang required in one domain preempts inside one: the dry run domain by domain
        domains = runtime.placement.domains(view, view.topology.required) \
            if plan is not None and plan.required and view.topology is not None and runtime.placement is not None \
            else None
        self._post_filter(runtime, members, view.minimum - len(view.bound), attempts, holds, now, domains=domains)
        attempts[0].preemptor_type = "podgroup"  # upstream's workload-aware preemption: the group preempts
        if not any(member.uid in engine.state.holds for member in members):
            self._back_off(grouping, view.key, now)
        return attempts

    def _post_filter_refused(self, runtime: ProfileRuntime, grouping: GroupPlugin, attempt: Attempt) -> None:
        """A scheduler-plugins member its gang's PreFilter refused: kube-scheduler runs PostFilter
        on that FitError too (schedule_one.go), DefaultPreemption first (every node
        UnschedulableAndUnresolvable: nothing to search), then Coscheduling's; their reasons
        join with ", " after the PreFilter's sentence (Status.Message, FitError.Error)."""
        if not self.engine.state.node_order:  # upstream: no nodes is no FitError, and no PostFilter runs
            return
        pod = attempt.pod
        reasons: list[str] = []
        plugin = runtime.post_filter
        if plugin is not None:
            timing = self.engine.timing
            started = timing.stopwatch.now()
            reasons.append(preemption_reason(plugin.after_pre_filter(pod).message))
            timing.alone(plugin.name, "PostFilter", "Unschedulable", runtime.profile.scheduler_name, started)
            attempt.preemption_tried = True
        rejected = grouping.post_filter_message(pod)
        if rejected:
            reasons.append(rejected)
        if reasons:
            attempt.message = f"{attempt.message} {', '.join(reasons)}"

    def _back_off(self, grouping: GroupPlugin, key: str, now: float) -> None:
        """podGroupBackoffSeconds: a gang that failed and holds no room is kept out of the queue.
        scheduler-plugins' Coscheduling backs the group off in its PostFilter, which runs only when
        DefaultPreemption's, before it in the profile, found no candidate: a gang whose preemption
        succeeds is not backed off there either. Where this differs on purpose: upstream's next
        try while the victims still terminate finds DefaultPreemption not eligible (a terminating
        pod on the nominated node), so Coscheduling backs the group off then; here a gang still
        nominated (waiting for its victims) is not, so it binds as soon as a victim's deletion
        wakes it and its room is free, not a whole backoff later."""
        if grouping.backoff_seconds > 0:
            self.engine.queue.back_off_group(key, now + grouping.backoff_seconds)

    def _search_in(self, pod: Pod, domains: tuple[Domain, ...], now: float) -> NodeStatuses | None:
        """The pod's failed search inside its gang's domain, per node (what it preempts on): its
        last attempt's, else a quiet attempt of its own there (the plan found no room in the
        domain, so no member was tried in it; its room check is never too strict, so the attempt
        fails — and is undone if it does not)."""
        if len(domains) != 1:
            return None
        (domain,) = domains
        searched = self._domain_searches.get(pod.uid)
        if searched is None or searched[1] != domain.path:
            timing = self.engine.timing
            timing.quiet += 1
            try:
                probe = self._attempt(pod, self.engine.profiles[pod.scheduler_name], now, within=domain)
            finally:
                timing.quiet -= 1
            self._undo([probe])
            searched = self._domain_searches.get(pod.uid)
        return searched[0] if searched is not None else None

    def _gang_domain(self, view: GangView, runtime: ProfileRuntime, placed: list[Attempt]) -> tuple[Domain, ...]:
        """The domain of its required level the gang is in (where members are bound or were
        just placed): none when that cannot be told."""
        if view.topology is None or runtime.placement is None:
            return ()
        state = self.engine.state
        nodes = {a.node for a in placed if a.node is not None} | {
            node for pod in view.bound if (node := state.node_of(pod.uid)) is not None}
        return tuple(d for d in runtime.placement.domains(view, view.topology.required) if d.nodes & nodes)

    def _gang_error(self, members: list[Pod], attempts: list[Attempt], errored: Attempt, holds: dict[str, Hold],
                    now: float) -> list[Attempt]:
        """A member's attempt failed with an error: the gang's cycle fails with it, as upstream's pod
        group cycle (podGroupSchedulingDefaultAlgorithm stops at the error; every other member gets
        `failed to schedule other pod from a pod group: <err>`, the erring one its own error; no
        PostFilter; every member backs off as after an error and loses its nomination)."""
        self._undo([a for a in attempts if a.node is not None])
        tried = {a.pod.uid: a for a in attempts}
        out: list[Attempt] = []
        for member in members:
            attempt = tried.get(member.uid) or Attempt(member, None)
            if attempt is not errored:
                attempt.message = pod_group_error(errored.message)
            attempt.error, attempt.rejectors, attempt.gang_outcome = True, frozenset(), "failed"
            self.engine.queue.error_failure(member.uid, now)
            out.append(attempt)
        self._clear(out, holds)
        return out

    def _transaction(self, members: list[Pod], holds: dict[str, Hold], within: Domain | None, now: float,
                     give_up_below: int | None = None) -> list[Attempt]:
        """Each member's attempt in turn on the live state (each assumed where it lands), inside
        `within` when given; with `give_up_below`, stop once fewer than that many can still fit."""
        profiles = self.engine.profiles
        attempts: list[Attempt] = []
        misses_allowed = len(members) - give_up_below if give_up_below is not None else len(members)
        for member in members:
            nominated = holds[member.uid].node if member.uid in holds else member.nominated_node
            attempt = self._attempt(member, profiles[member.scheduler_name], now, nominated, within)
            attempts.append(attempt)
            if attempt.error:  # the gang's cycle fails with it: the rest are not tried
                break
            if attempt.node is None:
                misses_allowed -= 1
                if misses_allowed < 0:
                    break
        return attempts

    def _undo(self, attempts: list[Attempt]) -> None:
        """Forget the placements of these attempts (a transaction or trial that is not kept)."""
        for attempt in attempts:
            if attempt.node is not None:
                self.engine.state.forget(attempt.pod.uid)
                attempt.node = None
                attempt.annotations = {}
        self._give_back_displaced({})

    def _refused_before_nodes(self, members: list[Pod], contexts: list[PodContext]) -> list[Attempt] | None:
        """A member its PreFilter refuses (an unknown class...) fails the whole gang with that
        reason, as the ordinary transaction would say it; None when every member passes."""
        for member, ctx in zip(members, contexts):
            refused = self._pre_filter(self.engine.profiles[member.scheduler_name], ctx)
            if refused is not None:
                plugin, reasons = refused
                message = f"0/{len(self.engine.state.node_order)} nodes are available: {reasons[0]}."
                return [Attempt(m, None, message=message, rejectors=frozenset({plugin})) for m in members]
        return None

    def _place_in_domains(self, view: GangView, plan: PlacementPlan, members: list[Pod], holds: dict[str, Hold],
                          runtime: ProfileRuntime, now: float) -> list[Attempt]:
        """Try the gang in the plan's domains, tier by tier: keep the first domain where every
        pending member fits. Only when no tier (nor "anywhere", where allowed) takes every member
        does a domain that took the most (at least the minimum) do, narrowest first among equals:
        a preferred level gives way to a wider one that holds the whole gang (Kueue's preferred
        topology). When nothing fits anywhere allowed, every member gets the plan's reason with
        the first failure of the domain that came closest, and the rejectors of every trial (so
        the events that may help — a class, a device, a node — bring the gang back)."""
        num_nodes = len(self.engine.state.node_order)
        needed = max(1, view.minimum - len(view.bound))
        largest = 0
        closest: tuple[int, Domain, Attempt] | None = None  # the trial that placed the most: its first failure
        rejectors: set[str] = set()
        partial: list[tuple[int, int, int, Domain]] = []  # (-placed, tier, order, domain) of trials that reached the minimum
        anywhere = bool(plan.tiers) and plan.tiers[-1].domains is None
        for index, tier in enumerate(plan.tiers):
            if tier.domains is None:  # anywhere: the ordinary transaction, if it places every member
                attempts = self._transaction(members, holds, None, now)
                if not partial or all(attempt.node is not None for attempt in attempts) or _erred(attempts):
                    return attempts
                self._undo(attempts)
                break
            largest = max(largest, tier.holds)
            for order, domain in enumerate(tier.domains):
                attempts = self._transaction(members, holds, domain, now, needed)
                count = sum(1 for attempt in attempts if attempt.node is not None)
                if count == len(members) or _erred(attempts):  # an error ends the gang's cycle
                    return attempts
                failed = next(a for a in attempts if a.node is None)
                rejectors.update(failed.rejectors)
                if closest is None or count > closest[0]:
                    closest = (count, domain, failed)
                largest = max(largest, count)
                self._undo(attempts)
                if count >= needed:
                    partial.append((-count, index, order, domain))
        for _, _, _, domain in sorted(partial):  # a re-run draws new tie-breaks: the next one may do
            attempts = self._transaction(members, holds, domain, now)
            if sum(1 for attempt in attempts if attempt.node is not None) >= needed or _erred(attempts):
                return attempts
            self._undo(attempts)
        if anywhere:
            return self._transaction(members, holds, None, now)
        assert runtime.placement is not None
        reason = plan.no_room(gang_name(view.key), needed, min(largest, needed - 1))
        message = f"0/{num_nodes} nodes are available: {reason}."
        # the nodes no member can use are in no domain's count: their own reasons, as a failed
        # search counts them (upstream's FitError: the histogram after the PreFilter sentence)
        unusable = None
        if plan.unusable is not None and plan.unusable.any() and not plan.refusal:
            unusable = runtime.rejections(prepare(members[0], self.engine.state.classes), plan.unusable, self.explain)
            rejectors.update(unusable.rejectors)
            if unusable.reasons:
                message += f" {histogram(unusable.reasons)}."
        if closest is not None:
            _, domain, failed = closest
            message += f" Closest: {domain.level} {domain.name}, where {failed.pod.key} did not fit: {failed.message}"
        filtered = None if unusable is None or unusable.filtered is None else {
            runtime.table.info(row).name: why for row, why in unusable.filtered.items()}
        return [Attempt(member, None, message=message, rejectors=frozenset({runtime.placement.name, *rejectors}),
                        filtered=dict(filtered) if filtered is not None else None)  # each attempt owns its map
                for member in members]

    # --- PostFilter (preemption) -----------------------------------------------------------------

    def _post_filter(self, runtime: ProfileRuntime, pods: list[Pod], minimum: int, attempts: list[Attempt],
                     holds: dict[str, Hold], now: float, statuses: NodeStatuses | None = None,
                     domains: tuple[Domain, ...] | None = None) -> None:
        """Nothing fit: ask the profile's PostFilter (preemption) to make room (inside one of
        `domains` when given). On success the victims go on the first attempt (the caller evicts
        them), each preemptor is nominated to its node and holds its room there; a preemptor
        still waiting for its earlier victims keeps its holds; otherwise the nominations go and
        the message says why."""
        plugin = runtime.post_filter
        state = self.engine.state
        if plugin is None or not state.node_order:  # upstream: no PostFilter, or no nodes (not a FitError)
            self._clear(attempts, holds)
            return
        refused = next((rejected for pod in pods
                        if (rejected := runtime.pre_filter(prepare(pod, state.classes), again=True))), None)
        if refused is not None:  # a PreFilter's FitError: PostFilter runs and finds every node unresolvable
            statuses = runtime.pre_filter_statuses(refused[0])

        def place(member: Pod, within: Domain | None) -> str | None:
            return self._attempt(member, self.engine.profiles[member.scheduler_name], now, within=within).node

        nominated = {pod.uid: holds[pod.uid].node if pod.uid in holds else pod.nominated_node for pod in pods}
        priority = self.engine.state.competing_priority(pods[0])
        aside = self.engine.state.set_aside_holds_below(priority)
        chosen: set[str] = set()
        before = dict(self._displaced)
        timing = self.engine.timing
        started = timing.stopwatch.now()
        timing.quiet += 1  # a gang's dry run runs ordinary attempts: not extension points of their own
        try:
            result = plugin.post_filter(pods, max(1, minimum), nominated, place, statuses, now, domains)
            chosen = {placement.node for placement in result.holds.values()}
        finally:  # upstream clears lower-priority nominations on the nodes a preemption chose
            timing.quiet -= 1
            self._give_back_displaced(before)  # the dry run's placements are undone
            self._put_back_holds(aside, chosen)
        code: Code = "Success" if result.victims else "Unschedulable"  # upstream: Success names a node
        timing.alone(plugin.name, "PostFilter", code, runtime.profile.scheduler_name, started)
        attempts[0].preemption_tried = True  # one PostFilter run, for one pod or a whole gang
        if result.victims:
            attempts[0].victim_reasons = why_evicted(state, result.victims)  # before they are marked leaving
            for victim in result.victims:
                waited_on = state.node_of(victim.uid)
                if waited_on is not None and self.engine.reject_waiting(victim.uid, now):
                    attempts[0].rejected_waiting[victim.uid] = waited_on
                else:
                    state.mark_going(victim.uid, pods[0].uid)
            attempts[0].preempted = result.victims
            # upstream's prepareCandidate clears lower-priority nominations on the chosen nodes: such
            # a pod is nominated nowhere now, and its next try may preempt elsewhere at once
            for displaced in self._lower_nominated(chosen, priority, aside, {pod.uid for pod in pods}):
                displaced.nominated_node = ""
                attempts[0].nominations_cleared.append(displaced)
            for attempt in attempts:
                placement = result.holds.get(attempt.pod.uid)
                if placement is not None:
                    state.hold(attempt.pod.uid, placement, priority)
                    attempt.nominated_node = attempt.pod.nominated_node = placement.node
            return
        for attempt in attempts:
            attempt.message = f"{attempt.message} {preemption_reason(result.message)}"
        if result.clear:
            self._clear(attempts, holds)
        else:
            for uid, hold in holds.items():
                state.hold(uid, hold.placement, hold.priority)

    def _lower_nominated(self, nodes: set[str], priority: int, aside: dict[str, Hold],
                         preemptors: set[str]) -> list[Pod]:
        """upstream's getLowerPriorityNominatedPods for the chosen nodes: the pending pods below
        `priority` whose hold there this preemption set aside, and those nominated there without a
        hold — whose hold a higher-priority placement took earlier in this cycle (it comes back
        after it: nominations.py), or a leader before this one nominated to a node that had no
        Node object then — as upstream's nominator knows every pod by its `status.nominatedNodeName`."""
        state = self.engine.state
        found = [pod for uid, hold in aside.items()
                 if hold.node in nodes and (pod := state.pods.get(uid)) is not None and uid not in state.holds]
        nominated = [pod for uid in state.pending if (pod := state.pods.get(uid)) is not None
                     and pod.nominated_node in nodes and uid not in aside and uid not in state.holds
                     and uid not in preemptors and state.competing_priority(pod) < priority]
        return found + sorted(nominated, key=lambda pod: pod.uid)

    def _clear(self, attempts: list[Attempt], holds: dict[str, Hold]) -> None:
        """The pods' nominations go (their holds, set aside or released, are not given back)."""
        for attempt in attempts:
            if attempt.pod.nominated_node or attempt.pod.uid in holds:
                attempt.nominated_node = ""
                # the core's own view goes at once, as upstream's nominator: the status write
                # (live) or nothing (a replay) only tells others
                attempt.pod.nominated_node = ""


def preemption_reason(message: str) -> str:
    """DefaultPreemption's PostFilter reason as the pod reads it: its message after "preemption: ",
    and the full stop FitError.Error puts after the PostFilter message (SeparatorFormat " %v.";
    one, where the message ends with its own: "No preemption victims found for incoming
    preemptor." as "... for incoming pod.")."""
    return f"preemption: {message}{'' if message.endswith('.') else '.'}"


def _erred(attempts: list[Attempt]) -> bool:
    """A member's attempt failed with an error: the gang's cycle ends with it."""
    return any(attempt.error for attempt in attempts)
