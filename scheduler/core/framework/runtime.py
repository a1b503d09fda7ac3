"""One profile's plugins, run: PreFilter, Filter over the nodes, Score, Reserve, queueing hints.

Generic: it runs whatever the registry builds for the profile and never names a plugin. Filter
plugins run in registry order, less the Filters and PreFilters the profile turned off (upstream's
default filters: `Profile.disabled_filters`, `disabled_pre_filters`); score plugins run in the
profile's order with its weights; a plugin that only scores is built only when the profile scores
with it.

Filtering (`find_feasible`) follows upstream's findNodesThatPassFilters: nodes are visited from a
rotating start until `to_find` pass, and a node's reasons are those of the first plugin in order
that rejects it. With batch forms on, plugins that have one answer for every node at once; plugins
without one (or whose batch answer is only a necessary condition) then run per node on the
survivors, in visiting order, only until enough nodes passed. The result — feasible nodes,
nodes processed, reasons and, when nothing passed, each node's first rejecting plugin (what
PostFilter reads) — is exactly the per-node answer (tests/unit/test_vector_equivalence.py
runs both), and `--explain` shows this same path.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import chain
from typing import TypeVar, cast

import numpy as np

from scheduler.api.config_model import Profile
from scheduler.core.framework.attempt import Attempt
from scheduler.core.framework.cycle_state import MAX_NODE_SCORE, PodContext, prepare
from scheduler.core.framework.interface import (
    BatchFilter,
    BatchScore,
    Bools,
    FilterPlugin,
    Ints,
    NodeStatuses,
    Normalize,
    PermitPlugin,
    PlacementPlugin,
    Plugin,
    GroupPlugin,
    PostFilterPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueueingHint,
    Reasons,
    Reservation,
    ReservePlugin,
    RowVerdict,
    ScorePlugin,
)
from scheduler.core.framework.nodetable import NodeTable
from scheduler.core.framework.timing import Code, Stopwatch, Timing, rejection_code
from scheduler.core.objects import Pod
from scheduler.core.plugins.registry import REGISTRY
from scheduler.core.volumes import ClaimBinding
from scheduler.core.state import ClusterEvent, ClusterState, EventKind, NodeInfo

T = TypeVar("T")
# Tessera's PreFilter rejections are unresolvable: its PostFilter finds no node eviction helps
PRE_FILTER_REJECTION: Code = "UnschedulableAndUnresolvable"
Rejection = tuple[str, Reasons]  # (plugin, reasons)


@dataclass(slots=True)
class Feasible:
    """What filtering found: feasible rows in visiting order, how many rows it visited, and —
    when nothing passed, or for --explain — why the others did not."""

    rows: list[int]
    processed: int
    reasons: Counter[str] = field(default_factory=Counter)
    rejectors: set[str] = field(default_factory=set)
    filtered: dict[int, str] | None = None  # row -> its first reason (explain only)
    statuses: NodeStatuses | None = None  # each row's first rejecting filter, when nothing passed


@dataclass(slots=True)
class Scores:
    totals: list[int]
    per_plugin: dict[str, list[int]] | None  # each plugin's 0..100 scores before weight (explain)


class ProfileRuntime:
    def __init__(self, profile: Profile, state: ClusterState, table: NodeTable, timing: Timing,
                 batch: bool = True) -> None:
        self.profile = profile
        self.timing = timing  # per-plugin durations, in the cycles the stopwatch samples
        self._state = state
        self.table = table
        self.batch = batch
        self.plugins: dict[str, Plugin] = {}
        for spec in REGISTRY:
            if not spec.built_for(profile):
                continue  # a score plugin the profile does not use costs nothing
            self.plugins[spec.name] = spec.build(self, profile.plugin_args.get(spec.name) or spec.default_args())
        self.pre_enqueues = [p for p in self.plugins.values() if isinstance(p, PreEnqueuePlugin)]
        # a plugin built for another part runs no Filter or PreFilter the profile turned off
        self.pre_filters = [p for p in self.plugins.values()
                            if isinstance(p, PreFilterPlugin) and p.name not in profile.disabled_pre_filters]
        self.filters = [p for p in self.plugins.values()
                        if isinstance(p, FilterPlugin) and p.name not in profile.disabled_filters]
        self._filters = {p.name: p for p in self.filters}
        self.reservers = [p for p in self.plugins.values() if isinstance(p, ReservePlugin)]
        self.permits = [p for p in self.plugins.values() if isinstance(p, PermitPlugin)]
        self.scores: list[tuple[ScorePlugin, int]] = [
            (plugin, weight) for name, weight in profile.score_weights.items()
            if isinstance(plugin := self.plugins.get(name), ScorePlugin)]
        self.pre_scores = [plugin for name in profile.pre_score
                           if isinstance(plugin := self.plugins.get(name), PreScorePlugin)]
        self.grouping = self.find(GroupPlugin)
        self.placement = self.find(PlacementPlugin)
        self.post_filter = self.find(PostFilterPlugin) if profile.preemption else None
        # protocol checks are slow: decided once per plugin, not once per attempt
        self._batch_filters: dict[str, BatchFilter] = {
            p.name: p for p in self.filters if batch and isinstance(p, BatchFilter)}
        self._batch_scores: dict[str, BatchScore] = {
            p.name: p for p, _ in self.scores if batch and isinstance(p, BatchScore)}
        # a plugin left with scoring only rejects no pod here: it listens to no event
        scoring_only = {p.name for p in self.plugins.values() if isinstance(p, FilterPlugin | PreFilterPlugin)
                        and p not in self.filters and p not in self.pre_filters}
        self.hints: dict[str, Mapping[EventKind, QueueingHint]] = {
            name: plugin.queueing_hints() for name, plugin in self.plugins.items() if name not in scoring_only}

    # --- Handle (what plugins may ask) --------------------------------------------------------

    @property
    def state(self) -> ClusterState:
        return self._state

    def find(self, kind: Callable[..., T]) -> T | None:
        # `kind` may be abstract or a protocol (mypy's type[T] would refuse those): a class at runtime
        found = next((p for p in self.plugins.values() if isinstance(p, cast(type, kind))), None)
        return cast(T | None, found)

    def usable_rows(self, members: Sequence[PodContext]) -> Bools:
        """Per distinct form of the members (the applicable filters' `pod_form`s: members that
        differ only in what no filter reads are judged once), batch filters first; a filter
        without a batch form then checks the rows left, one by one (node affinity: what a gang's
        selector rules out is most of what a domain lacks). The union over the forms."""
        table = self.table
        table.sync()
        usable = np.zeros(table.size, np.bool_)
        seen: set[Hashable] = set()
        for ctx in members:
            applicable, form = self.applicable_form(ctx)
            if form in seen:
                continue
            seen.add(form)
            alive, verdicts, lazy = self._batch_pass(ctx, applicable)
            for plugin in lazy:
                verdict = verdicts.get(plugin.name)
                if verdict is not None and verdict.fails is not None:
                    continue  # an inexact batch form: its rows left are a superset, which is all this needs
                # (one that ruled out nothing, leaving the pod to its per-node form, is asked that)
                passes = plugin.node_filter(ctx)
                for row in np.flatnonzero(alive).tolist():
                    if passes(table.infos[row]) is not None:
                        alive[row] = False
            usable |= alive
        return usable

    def applicable(self, ctx: PodContext) -> list[FilterPlugin]:
        """The profile's filters that may reject the pod (`filter_applies`), in their order: the
        rest are left out of its search, its rejections and its form."""
        return [p for p in self.filters if p.filter_applies(ctx)]

    def applicable_form(self, ctx: PodContext) -> tuple[list[FilterPlugin], Hashable]:
        """The filters applying to the pod and its form as they read it: each one's name and
        `pod_form`, and the pod's uid while the state keeps a hold or a placement for it (the
        filters set the pod's own aside: `nominated_on`'s skip, the tallies' own part), so two
        such pods see the nodes differently whatever else they share."""
        applicable = self.applicable(ctx)
        uid, state = ctx.pod.uid, self._state
        own = uid if uid in state.holds or uid in state.placements else ""
        return applicable, (own, tuple((p.name, p.pod_form(ctx)) for p in applicable))

    def node_hint(self, plugin: str) -> QueueingHint:
        return partial(self._own_rule_on_node, plugin)

    def _own_rule_on_node(self, plugin: str, uid: str, event: ClusterEvent) -> bool:
        """The node hint of `plugin`: may the pod, rejected by it, pass ITS filter on the node
        now — as it is, or (when this profile preempts and the pod may) once the pods it may
        evict there are gone? Upstream's node hints each check their own plugin's rule
        (nodeaffinity/tainttoleration/nodeunschedulable isSchedulableAfterNodeChange, Fit's
        isFit), not every filter: a node that matches a pod's selector before its GPUs are
        published must wake it, so that its retry records the device plugin, whose own hints
        then wake it when the GPUs appear. Asking every filter dropped that NodeAdd, and no
        event NodeAffinity registers came after, so the pod waited for the 5-minute flush.

        Events carry no old node, so this cannot ask upstream's "and not before" (an update that
        leaves a matching node matching queues here, QueueSkip there): it over-queues a little
        on real node changes (`ClusterState` emits NODE_UPDATED for those only, not heartbeats).

        The node is judged as the pod's attempt finds it: without the pod's own hold (set aside
        for its attempt) or the holds of lower-priority nominated pods (which the attempt sets
        aside too, `ClusterState.holds_below`), set aside for the look and put back."""
        state = self._state
        pod = state.pods.get(uid)
        info = state.nodes.get(event.node)
        if pod is None or info is None or info.node is None:
            return False
        ignored = [uid, *state.holds_below(state.competing_priority(pod))] if state.holds else []  # holds are rare
        aside = {holder: hold for holder in ignored if (hold := state.set_aside_hold(holder)) is not None}
        try:
            return self._passes_or_frees(plugin, pod, info)
        finally:
            for holder, hold in aside.items():
                state.hold(holder, hold.placement, hold.priority)

    def _passes_or_frees(self, plugin: str, pod: Pod, info: NodeInfo) -> bool:
        """The node hint's check on the node as the attempt finds it: the pod passes the
        PreFilters, and `plugin`'s filter there, or — when evicting pods can resolve that
        filter's rejection — once the pods its preemption may evict there are gone (the
        PostFilter's own rule: a gang's members count at their gang's priority)."""
        ctx = prepare(pod, self._state.classes)
        if self.pre_filter(ctx) is not None:
            return False
        if self.passes_filter(plugin, ctx, info):
            return True
        return (self.post_filter is not None and not pod.preempt_never and self.resolvable(plugin)
                and self.post_filter.frees_room(pod, info, plugin))

    def passes_filter(self, plugin: str, ctx: PodContext, info: NodeInfo) -> bool:
        found = self._filters.get(plugin)
        return found is None or not found.filter_applies(ctx) or not found.filter(ctx, info)

    # --- the cycle's steps ----------------------------------------------------------------

    def observe(self, pod: object) -> None:
        for plugin in self.plugins.values():
            plugin.observe(pod)  # type: ignore[arg-type]

    def worth_retrying(self, uid: str, rejectors: frozenset[str], event: ClusterEvent) -> bool:
        """Requeue hints: may this event make the pod, rejected by these plugins, schedulable?"""
        if not rejectors:
            return True
        for name in rejectors:
            hint = self.hints.get(name, {}).get(event.kind)
            if hint is not None and hint(uid, event):
                return True
        return False

    def pre_enqueue(self, pod: Pod) -> Rejection | None:
        """The first PreEnqueue plugin that keeps the pod out of the queue, and why; None when
        every one lets it in (upstream's runPreEnqueuePlugins)."""
        for plugin in self.pre_enqueues:
            reason = plugin.pre_enqueue(pod)
            if reason is not None:
                return plugin.name, (reason,)
        return None

    def pre_filter(self, ctx: PodContext, *, again: bool = False) -> Rejection | None:
        """The first PreFilter plugin that rejects the pod, and why; None when every one passes.
        Each plugin is timed in a sampled cycle, unless `again`: a second look at a run already
        timed (PostFilter asking which plugin refused the attempt), which upstream does not run."""
        timing = self.timing if self.timing.sampled and not again else None
        for plugin in self.pre_filters:
            started = timing.stopwatch.now() if timing else 0.0
            reason = plugin.pre_filter(ctx)
            if timing:
                timing.plugin(plugin.name, "PreFilter", "Success" if reason is None else PRE_FILTER_REJECTION, started)
            if reason is not None:
                return plugin.name, (reason,)
        return None

    def pre_filter_statuses(self, plugin: str) -> NodeStatuses:
        """Every node rejected by the PreFilter `plugin`: what PostFilter reads after a PreFilter
        rejection, as upstream hands it a NodeToStatus whose absent nodes all carry that status."""
        self.table.sync()
        size = self.table.size
        return NodeStatuses(tuple(self.table.infos[:size]), (plugin,), np.zeros(size, np.int64), pre_filter=True)

    def filter_node(self, ctx: PodContext, info: NodeInfo) -> Rejection | None:
        """The first applicable filter that rejects the node, per node (no batch forms)."""
        timing = self.timing if self.timing.sampled else None
        for plugin in self.filters:
            if plugin.filter_applies(ctx):
                started = timing.stopwatch.now() if timing else 0.0
                reasons = plugin.filter(ctx, info)
                if timing:
                    timing.plugin(plugin.name, "Filter", rejection_code(plugin.preemption_helps) if reasons else "Success",
                                  started)
                if reasons:
                    return plugin.name, reasons
        return None

    def resolvable(self, plugin: str) -> bool:
        found = self.plugins.get(plugin)
        return isinstance(found, FilterPlugin) and found.preemption_helps

    def unresolvable_rows(self, plugin: str, ctx: PodContext, rows: Ints) -> Bools:
        found = self.plugins.get(plugin)
        if not isinstance(found, FilterPlugin):
            return np.ones(len(rows), np.bool_)
        return found.unresolvable_rows(self.table, ctx, rows)

    def find_feasible(self, ctx: PodContext, start: int, to_find: int, explain: bool) -> Feasible:
        table = self.table
        table.sync()
        n = table.size
        applicable = self.applicable(ctx)
        narrowing = self._narrowing(ctx)
        alive, verdicts, lazy = self._batch_pass(ctx, applicable, None if narrowing is None else narrowing.allowed)
        head = np.flatnonzero(alive[start:])  # visiting order: rows from `start` on, then the rest
        head += start
        rows: list[int]
        if not lazy and len(head) >= to_find:
            rows = head[:to_find].tolist()
        elif not lazy:
            rows = head.tolist() + np.flatnonzero(alive[:start])[: to_find - len(head)].tolist()
        else:
            rows = self._scan(ctx, lazy, chain(head.tolist(), np.flatnonzero(alive[:start]).tolist()), to_find)
        processed = (rows[-1] - start) % n + 1 if len(rows) >= to_find else n
        found = Feasible(rows, processed)
        if not rows or explain:
            visited = np.ones(n, np.bool_)
            if processed < n:  # the rows from start on, wrapping around: the rest were not visited
                visited[:] = False
                end = start + processed
                visited[start:min(end, n)] = True
                visited[: max(0, end - n)] = True
            visited[rows] = False
            self._attribute(ctx, applicable, verdicts, visited, found, explain, narrowing)
        return found

    def rejections(self, ctx: PodContext, rows: Bools, explain: bool) -> Feasible:
        """Why the pod's filters reject each of `rows` (rows it cannot use, e.g. a gang's nodes no
        member can use): reasons and rejectors as a failed search counts them, each row's first
        reason for --explain."""
        self.table.sync()
        applicable = self.applicable(ctx)
        narrowing = self._narrowing(ctx)
        _, verdicts, _ = self._batch_pass(ctx, applicable, None if narrowing is None else narrowing.allowed)
        found = Feasible([], 0)
        self._attribute(ctx, applicable, verdicts, rows, found, explain, narrowing)
        return found

    def _scan(self, ctx: PodContext, lazy: list[FilterPlugin], candidates: Iterable[int], to_find: int) -> list[int]:
        """find_feasible's per-node pass: the first `to_find` candidates every plugin in `lazy`
        passes. Earlier plugins thin the rows lazily; the last one scans them. In a sampled cycle
        each plugin's share is timed too: the earlier plugins' checks run inside the last one's
        scan, so each is timed row by row and the scan's own time is what is left; a plugin's
        status is Success when it rejected none of the rows it saw, else its rejection code."""
        infos = self.table.infos
        watch = self.timing.stopwatch if self.timing.sampled else None
        spent = [0.0] * len(lazy)
        rejected = [False] * len(lazy)
        for index, plugin in enumerate(lazy[:-1]):
            check = plugin.node_filter(ctx)
            candidates = _passing(candidates, check if watch is None else
                                  _timed_check(check, watch, spent, rejected, index), infos)
        if watch is None:
            return lazy[-1].scan(ctx, candidates, infos, to_find)
        fed = [0]

        def counted(rows: Iterable[int]) -> Iterator[int]:
            for row in rows:
                fed[0] += 1
                yield row

        started = watch.now()
        rows = lazy[-1].scan(ctx, counted(candidates), infos, to_find)
        spent[-1] = watch.now() - started - sum(spent[:-1])
        rejected[-1] = fed[0] > len(rows)
        for index, plugin in enumerate(lazy):
            code = rejection_code(plugin.preemption_helps) if rejected[index] else "Success"
            watch.plugin(plugin.name, "Filter", code, spent[index])
        return rows

    def _narrowing(self, ctx: PodContext) -> _Narrowing | None:
        """The rows of the nodes the PreFilters leave (upstream's merged PreFilterResult: the
        intersection of every plugin's names, nodes that do not exist ignored), or None for all."""
        allowed: Bools | None = None
        plugins: list[str] = []
        for plugin in self.pre_filters:
            names = plugin.node_names(ctx)
            if names is None:
                continue
            plugins.append(plugin.name)
            mask = np.zeros(self.table.size, np.bool_)
            rows = [row for name in names if (row := self._state.node_position(name)) is not None]
            mask[rows] = True
            allowed = mask if allowed is None else allowed & mask
        if allowed is None:
            return None
        return _Narrowing(tuple(plugins), allowed, f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(plugins))}]")

    def _batch_pass(self, ctx: PodContext, applicable: list[FilterPlugin], rows: Bools | None = None
                    ) -> tuple[Bools, dict[str, RowVerdict], list[FilterPlugin]]:
        """Every applicable batch filter over `rows` (all rows by default), in order: the rows
        left, each batch plugin's verdict, and the plugins that still need their per-node form (no
        batch form, or an inexact one), in order."""
        verdicts: dict[str, RowVerdict] = {}
        lazy: list[FilterPlugin] = []
        alive = np.ones(self.table.size, np.bool_) if rows is None else rows.copy()
        timing = self.timing if self.timing.sampled else None
        for plugin in applicable:
            batch = self._batch_filters.get(plugin.name)
            if batch is None:
                lazy.append(plugin)
                continue
            started = timing.stopwatch.now() if timing else 0.0
            verdict = batch.filter_rows(self.table, ctx, alive)
            # one observation per batch call (upstream: per node), Success if it failed none; but
            # none for a call that left the pod to its per-node form (inexact, ruling out nothing):
            # that form's scan is the plugin's one observation, as it was before the batch form
            if timing and (verdict.exact or verdict.fails is not None):
                failed = verdict.fails is not None and bool(verdict.fails.any())
                timing.plugin(plugin.name, "Filter", rejection_code(plugin.preemption_helps) if failed else "Success",
                              started)
            if verdict.fails is not None:
                alive ^= verdict.fails  # a plugin only fails rows it was asked about: XOR removes them
            verdicts[plugin.name] = verdict
            if not verdict.exact:
                lazy.append(plugin)
        return alive, verdicts, lazy

    def _attribute(self, ctx: PodContext, applicable: list[FilterPlugin], verdicts: dict[str, RowVerdict],
                   rows: Bools, found: Feasible, explain: bool, narrowing: _Narrowing | None) -> None:
        """Each of `rows` to the first plugin (in order) that rejects it: reasons, rejectors and,
        for --explain, each row's first reason. Rows the PreFilters left out come first: no filter
        ran on them (upstream's absent nodes)."""
        remaining = rows.copy()
        first: dict[int, str] | None = {} if explain else None
        rejector = np.full(len(rows), -1, np.int64)  # row -> index in `applicable` of its first rejector
        names = tuple(plugin.name for plugin in applicable)
        if narrowing is not None:
            names += narrowing.plugins[:1]  # their status's plugin: unresolvable, as NodeAffinity's
            left_out = remaining & ~narrowing.allowed
            count = int(np.count_nonzero(left_out))
            if count:
                found.reasons[narrowing.reason] += count
                found.rejectors.update(narrowing.plugins)
                rejector[left_out] = len(applicable)
                if first is not None:
                    first.update(dict.fromkeys(np.flatnonzero(left_out).tolist(), narrowing.reason))
                remaining &= narrowing.allowed
        # per-row reasons are tallied by their tuple and counted out once at the end: on a full
        # cluster thousands of rows share a handful of tuples, and Counter.update per row dominated
        tally: Counter[Reasons] = Counter()

        def reject(index: int, plugin: FilterPlugin, row: int, reasons: Reasons) -> None:
            tally[reasons] += 1
            found.rejectors.add(plugin.name)
            if first is not None and reasons:
                first[row] = reasons[0]
            remaining[row] = False
            rejector[row] = index

        for index, plugin in enumerate(applicable):
            verdict = verdicts.get(plugin.name)
            if verdict is not None:
                failing = verdict.fails & remaining if verdict.fails is not None else None
                if failing is not None and failing.any():
                    found.rejectors.add(plugin.name)
                    rejector[failing] = index
                    covered = np.zeros(len(failing), np.bool_)
                    masks = verdict.reasons()
                    for reason, mask in masks:
                        hit = mask & failing
                        count = int(np.count_nonzero(hit))
                        if count:
                            found.reasons[reason] += count
                            covered |= hit
                    if first is not None:
                        for row in np.flatnonzero(failing).tolist():
                            first[row] = verdict.reasons_of(row, masks)[0]
                    for row in np.flatnonzero(failing & ~covered).tolist():
                        tally[verdict.reasons_of(row, masks)] += 1
                    remaining &= ~failing
                if verdict.exact:
                    continue
            for row in np.flatnonzero(remaining).tolist():
                reasons = plugin.filter(ctx, self.table.info(row))
                if reasons:
                    reject(index, plugin, row, reasons)
        for reasons, count in tally.items():
            for reason in reasons:
                found.reasons[reason] += count
        found.filtered = first
        if not found.rows:
            found.statuses = NodeStatuses(tuple(self.table.infos[: self.table.size]), names, rejector)

    def scoring_error(self, ctx: PodContext) -> str | None:
        """Why scoring the pod fails, in upstream's words, or None. prioritizeNodes runs the
        profile's PreScore plugins — its own list, apart from the score list — and stops at the
        first error (RunPreScorePlugins: `running PreScore plugin "<name>": <err>`); then a score
        plugin whose PreScore the profile left out reads the pod in its Score instead and fails
        there (RunScorePlugins: `running Score plugins: plugin "<name>" failed with: <err>`).
        Neither runs in a profile without score plugins (HasScorePlugins)."""
        if not self.scores:
            return None
        timing = self.timing if self.timing.sampled else None
        for pre in self.pre_scores:
            started = timing.stopwatch.now() if timing else 0.0
            error = pre.pre_score(ctx)
            if timing:
                timing.plugin(pre.name, "PreScore", "Success" if error is None else "Error", started)
            if error is not None:
                return f'running PreScore plugin "{pre.name}": {error}'
        for plugin, _ in self.scores:
            if isinstance(plugin, PreScorePlugin) and plugin not in self.pre_scores:
                error = plugin.pre_score(ctx)
                if error is not None:
                    return f'running Score plugins: plugin "{plugin.name}" failed with: {error}'
        return None

    def score(self, ctx: PodContext, rows: list[int], explain: bool) -> Scores:
        """Weighted totals per feasible row (and, for --explain, each plugin's normalised scores)."""
        array = np.array(rows, np.int64)
        totals = np.zeros(len(rows), np.int64)
        per_plugin: dict[str, list[int]] | None = {} if explain else None
        timing = self.timing if self.timing.sampled else None
        for plugin, weight in self.scores:
            started = timing.stopwatch.now() if timing else 0.0
            applies = plugin.score_applies(ctx)
            if not applies and plugin.normalize is not Normalize.REVERSE:
                if per_plugin is not None:
                    per_plugin[plugin.name] = [0] * len(rows)
                continue
            if not applies:
                raw = np.zeros(len(rows), np.int64)
            else:
                plugin.prepare_scores(self.table, ctx, array)
                if plugin.name in self._batch_scores:
                    raw = self._batch_scores[plugin.name].score_rows(self.table, ctx, array)
                else:
                    raw = np.array([plugin.score(ctx, self.table.info(row)) for row in rows], np.int64)
            normalized = normalize(raw, plugin.normalize)
            if timing and applies:  # one observation per plugin over every node, normalising included
                timing.plugin(plugin.name, "Score", "Success", started)
            totals += normalized * weight
            if per_plugin is not None:
                per_plugin[plugin.name] = [int(v) for v in normalized.tolist()]
        return Scores([int(total) for total in totals.tolist()], per_plugin)

    def reserve(self, ctx: PodContext, info: NodeInfo, now: float) -> Reservation:
        """Every reserve plugin's part of the placement, merged."""
        annotations: dict[str, str] = {}
        devices = None
        claims: tuple[ClaimBinding, ...] = ()
        timing = self.timing if self.timing.sampled else None
        for plugin in self.reservers:
            started = timing.stopwatch.now() if timing else 0.0
            made = plugin.reserve(ctx, info, now)
            if timing:
                timing.plugin(plugin.name, "Reserve", "Success", started)
            annotations.update(made.annotations)
            devices = made.devices if made.devices is not None else devices
            claims += made.claims
        return Reservation(annotations, devices, claims)

    def permit(self, attempt: Attempt, now: float) -> bool:
        """May the placed attempt's Binding go out now? Each permit plugin in turn, up to the first
        that holds it (its status Wait)."""
        timing = self.timing if self.timing.sampled else None
        for plugin in self.permits:
            started = timing.stopwatch.now() if timing else 0.0
            allowed = plugin.permit(attempt, now)
            if timing:
                timing.plugin(plugin.name, "Permit", "Success" if allowed else "Wait", started)
            if not allowed:
                return False
        return True

    def scored(self) -> Iterator[str]:
        return (plugin.name for plugin, _ in self.scores)

    def weights(self) -> dict[str, int]:
        """Each score plugin's weight in this profile: what `explain` multiplies the normalised
        scores of `Scores.per_plugin` by, to show how a node's total adds up."""
        return {plugin.name: weight for plugin, weight in self.scores}


@dataclass(frozen=True, slots=True)
class _Narrowing:
    """What the PreFilters left of the nodes: the plugins that narrowed, the rows left, and the
    reason every other row reads."""

    plugins: tuple[str, ...]
    allowed: Bools
    reason: str


def _timed_check(check: Callable[[NodeInfo], Reasons | None], watch: Stopwatch, spent: list[float],
                 rejected: list[bool], index: int) -> Callable[[NodeInfo], Reasons | None]:
    """`check`, adding the time of each call to `spent[index]` and noting a rejection in `rejected[index]`."""
    def timed(info: NodeInfo) -> Reasons | None:
        started = watch.now()
        reasons = check(info)
        spent[index] += watch.now() - started
        if reasons:
            rejected[index] = True
        return reasons
    return timed


def _passing(rows: Iterable[int], check: Callable[[NodeInfo], Reasons | None],
             infos: Sequence[NodeInfo]) -> Iterator[int]:
    """The rows whose node `check` lets through, produced as they are asked for."""
    return (row for row in rows if not check(infos[row]))


def normalize(raw: Ints, how: Normalize) -> Ints:
    """helper.DefaultNormalizeScore over an array (identity for Normalize.NONE). MIN_MAX is
    InterPodAffinity's NormalizeScore, in its float arithmetic: int64(100 * ((s - min) / (max - min))),
    truncated, all 0 when max == min. SPREAD is PodTopologySpread's, in its integer arithmetic: over the
    scores not below 0, min (none: every score 0) and max (at least 0); each such score
    100 * (max + min - s) / max, truncated, or 100 when max is 0; a score below 0 becomes 0."""
    if how is Normalize.NONE:
        return raw
    if how is Normalize.SPREAD:
        valid = raw >= 0
        if not valid.any():
            return np.zeros(len(raw), np.int64)
        lowest, highest = int(raw[valid].min()), int(raw[valid].max())
        if highest == 0:
            return np.where(valid, MAX_NODE_SCORE, 0).astype(np.int64)
        return np.where(valid, MAX_NODE_SCORE * (highest + lowest - raw) // highest, 0).astype(np.int64)
    if how is Normalize.MIN_MAX:
        if not len(raw) or (spread := int(raw.max()) - (lowest := int(raw.min()))) <= 0:
            return np.zeros(len(raw), np.int64)
        return (float(MAX_NODE_SCORE) * ((raw - lowest) / float(spread))).astype(np.int64)
    highest = int(raw.max()) if len(raw) else 0
    reverse = how is Normalize.REVERSE
    if highest == 0:
        return np.full(len(raw), MAX_NODE_SCORE, np.int64) if reverse else raw
    out = MAX_NODE_SCORE * raw // highest
    return MAX_NODE_SCORE - out if reverse else out
