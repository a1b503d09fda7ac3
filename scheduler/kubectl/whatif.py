"""`kubectl tessera what-if --config FILE`: where the pending pods would go under another configuration.

The listed cluster is replayed as `tessera simulate` replays a recording (`sim/replay.py`, in the
order `sim/snapshot.py` gives: everything bound first, then the pending pods), except that every
object is taken in before the first decision, as the pending pods wait together in the cluster
(the queue tries the highest priority first), with the other configuration: the same core, plugins and gang transactions the scheduler would run. The
replay plays the apiserver for its Bindings and the node agent for allocations, in memory; the
cluster is only read.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from scheduler.api.config_model import SchedulerConfig
from scheduler.api.quantity import format_quantity
from scheduler.core import annotations as ann
from scheduler.core.framework.attempt import Attempt
from scheduler.core.objects import gang_name
from scheduler.core.plugins.preemption.victims import listed_all
from scheduler.core.scheduler import Scheduler
from scheduler.first_few import first_few
from scheduler.kube.snapshot import Unread
from scheduler.kube.term_token import TermToken
from scheduler.kubectl.capacity import Capacity
from scheduler.kubectl.installed import DEFAULT_NAMESPACE
from scheduler.kubectl.leadership import Leadership
from scheduler.kubectl.not_read import not_read, volume_note
from scheduler.kubectl.other_profile import hint, lacks, no_longer_leads, terms
from scheduler.kubectl.limitrange import LIMIT_RANGER
from scheduler.kubectl.quota import RESOURCE_QUOTA, Refusal
from scheduler.kubectl.unread import cannot_tell, devices_unread, offered
from scheduler.sim.replay import Replay, WatchEvent
from scheduler.sim.snapshot import replay_order
from scheduler.view.cluster import build_view
from scheduler.view.listed import listed_core
from scheduler.view.model import NodeScore, node_scores, plain
from scheduler.view.text import columns, count, score_sum, tie_note, ties_line


# per admission plugin, what its refusals are said to be by (the summary) and for (a gang's loss)
REFUSED_BY = {LIMIT_RANGER: "a LimitRange", RESOURCE_QUOTA: "a ResourceQuota"}
REFUSED_FOR = {LIMIT_RANGER: "a LimitRange", RESOURCE_QUOTA: "quota"}


@dataclass(frozen=True, slots=True)
class Outcome:
    pod: str
    node: str  # "" when it would stay pending
    devices: tuple[str, ...]  # ExtendedResource names (a slice's amount after it)
    held: bool  # placed, Binding held by the allocation gate
    preempts: tuple[str, ...]  # pods preemption would evict for it
    message: str
    tied_with: tuple[str, ...] = ()  # other nodes with the same top score (some): the pick among them is random
    tied_count: int = 0  # how many other nodes had it
    score: int | None = None  # the node's total score, when more than one node was scored
    preempt_reasons: tuple[str, ...] = ()  # why each of `preempts` goes (as `WhatIf.evicted_reasons`)
    # the nodes it would pick among (`node`, then those tied with it named) and how each one's score
    # adds up, as explain's node table says it; none when it was not placed or one node alone was scored
    scored: tuple[NodeScore, ...] = ()
    # no verdict: `message` says which kind it depends on could not be read (`unread.cannot_tell`)
    unknown: bool = False
    # never created: the apiserver's admission would refuse it (`message` says why: `quota.admit`, `limitrange.admit`)
    refused: bool = False
    refused_by: str = ""  # the admission plugin that would refuse it (`Refusal.plugin`)
    was_on: str = ""  # a pod of a node taken away (--without-node), replayed as pending: that node


@dataclass(frozen=True, slots=True)
class PodNote:
    """What a listed pod carries that the replay (and Tessera) does not read: other schedulers'
    keys, preferred terms not scored, claims (`not_read`), as `explain` says under Not read: and Volumes:."""
    pod: str
    note: str


@dataclass(frozen=True, slots=True)
class WhatIf:
    config: str
    outcomes: tuple[Outcome, ...]
    evicted: tuple[str, ...]
    before: str  # the GPU summary line now
    after: str  # and after the replay
    hidden: int = 0  # pending pods replayed in other namespaces than -n's (not listed)
    # pending pods no profile of the configuration schedules, per spec.schedulerName (in -n's namespace)
    other_schedulers: dict[str, int] = field(default_factory=dict)
    profiles: tuple[str, ...] = ()  # the configuration's schedulerNames
    # who schedules the pending pods now (the installed configuration's Lease, as explain reads it;
    # None when nothing is pending or leader election is off)
    leader: Leadership | None = None
    from_file: str = ""  # `-f FILE`: the outcomes are that file's pods (not created); `hidden` the others
    # why each of `evicted` goes, in its order (victims.why_evicted, as explain's dry run says it):
    # "gang ns/g: would fall below minMember 2", "" for a pod alone (its lower priority is all)
    evicted_reasons: tuple[str, ...] = ()
    notes: tuple[PodNote, ...] = ()  # per listed pod that has any, in the outcomes' order
    # per profile of a running Tessera the configuration lacks (pods of it carry its tessera.dev/term:
    # `other_profile`), not counted in `other_schedulers`: that it is, and how to give the profile
    other_profiles: tuple[str, ...] = ()
    # those profiles' pending pods (-f: the file's pods), per schedulerName, and the term one of their
    # pods carries (the replica that wrote it and its Lease: `with_leader` asks whether it still leads)
    other_profile_pods: dict[str, int] = field(default_factory=dict)
    other_profile_terms: dict[str, TermToken] = field(default_factory=dict)
    # the capacity changed (`capacity.Capacity`): the file's Nodes added, the nodes taken away (and
    # how they were chosen), the pods that went with them (a DaemonSet's, finished ones)
    added_nodes: tuple[str, ...] = ()
    removed_nodes: tuple[str, ...] = ()
    selected_by: str = ""
    gone: tuple[str, ...] = ()
    # the replay's placing attempts (every pending pod's, listed or not), how many of them picked
    # among equally scored nodes, and the tie-break seed that picked (`view.text.ties_line`)
    decisions: int = 0
    ties: int = 0
    seed: int = 0

    @property
    def placed(self) -> int:
        return sum(1 for outcome in self.outcomes if outcome.node)

    @property
    def unknown(self) -> int:
        return sum(1 for outcome in self.outcomes if outcome.unknown)

    @property
    def refused(self) -> int:
        return sum(1 for outcome in self.outcomes if outcome.refused)


def what_if(objects: Sequence[dict[str, Any]], config: SchedulerConfig, now: float,
            namespace: str | None = None, only: frozenset[str] | None = None, from_file: str = "",
            unread: Mapping[str, Unread] | None = None, scheduler_namespace: str = DEFAULT_NAMESPACE,
            refused: Sequence[Refusal] = (), capacity: Capacity | None = None,
            seed: int = 0) -> WhatIf:
    """Replay the listed cluster under `config`; outcomes of the pending pods (in `namespace` only,
    when given, or the pods `only` names — `-f FILE`'s: the replay still places every pending pod,
    as the scheduler would). A pod whose outcome depends on a kind in `unread` (the kinds the
    listing could not read) gets none: its RESULT says why (`unread.cannot_tell`); one of `only`
    the scheduler cannot read stays pending, its message `invalid: <why>`. `scheduler_namespace`:
    where the installed ConfigMap is looked for, named when pods are a profile `config` lacks.
    `refused`: the file's pods LimitRanger or ResourceQuota admission would refuse
    (`limitrange.admit`, `quota.admit`): never created, so not replayed; each is said, and so is
    its gang's loss to its members left pending. `capacity`: Nodes added and nodes taken away for
    the replay (the "Now" summary stays the cluster's); the pods of those taken away are pending
    in it, and always listed, each with the node it was on. `seed`: the replay's tie-break among equally
    scored nodes (`tessera simulate --seed`)."""
    capacity = capacity or Capacity()
    refused_keys = {refusal.pod for refusal in refused}
    objects = [obj for obj in objects if obj.get("kind") != "Pod" or _key(obj) not in refused_keys]
    unknown = devices_unread(unread or {})  # GPUs pods' annotations name: in use as they say, no ghosts
    listed = listed_core(config, objects, now, unknown)  # the cluster now, as `kubectl tessera nodes` reads it
    current = listed.core
    replay = Replay(config, seed=seed, breakdown=True)  # each plugin's part of the picked nodes' scores (`_scored`)
    replay.now = now  # node agents' heartbeats are judged against the real clock
    changed = capacity.applied(objects)
    for _ in replay.run_listing(WatchEvent("ADDED", obj) for obj in replay_order(changed.objects)):
        pass
    victims = _victims(replay)
    found = {key: _outcome(attempt, tuple(victims.get(key, ())), replay)
             for key, attempt in replay.stats.final.items()}
    # pods a PreEnqueue plugin keeps out are never attempted: their gate says why they stay pending
    found.update((key, Outcome(key, "", (), False, (), why)) for key, why in replay.scheduler.gated().items())
    _never_fits(found, replay.scheduler)
    if only is not None:  # a file's pod the replay could not read is said, not dropped (-f checks them first)
        found.update((notice.key, Outcome(notice.key, "", (), False, (), f"invalid: {notice.message}"))
                     for notice in replay.stats.notices
                     if notice.kind == "Pod" and notice.reason == "InvalidObject" and notice.key in only
                     and notice.key not in found)
    names = offered(replay.scheduler.state) if unread else None
    for key in found:
        pod = replay.scheduler.state.pod_by_key(key)
        blind = cannot_tell(pod, unread, names) if pod is not None and unread and names is not None else ""
        if blind:  # its verdict would read an unread kind as absent
            found[key] = Outcome(key, "", (), False, (), blind, unknown=True)
    _refused(found, refused, replay.scheduler)
    outcomes = []
    hidden = 0
    for key, outcome in sorted(found.items(), key=lambda item: _natural(item[0])):
        if key in replay.stats.evicted:
            continue
        if key in changed.displaced:
            outcomes.append(replace(outcome, was_on=changed.displaced[key]))
            continue
        if (namespace is not None and not key.startswith(f"{namespace}/")) or (only is not None and key not in only):
            hidden += 1
            continue
        outcomes.append(outcome)
    state = current.state
    waiting = Counter(pod.scheduler_name for pod in state.pods.values()
                      if not pod.node_name and not pod.terminal and not pod.meta.deleting and not state.is_ours(pod)
                      and (namespace is None or pod.meta.namespace == namespace) and (only is None or pod.key in only))
    found_terms = terms(state.pods.values(), state.scheduler_names)
    others = {name: n for name, n in waiting.items() if name not in found_terms}
    profile_pods = {name: n for name, n in sorted(waiting.items()) if name in found_terms}
    profile_terms = {name: found_terms[name] for name in profile_pods}
    evicted = tuple(sorted(replay.stats.evicted))
    metas = ((obj.get("metadata") or {}, obj.get("spec")) for obj in objects if obj.get("kind") == "Pod")
    specs = {f"{meta.get('namespace')}/{meta.get('name')}": spec for meta, spec in metas}
    notes = []
    for outcome in outcomes:
        pod = replay.scheduler.state.pod_by_key(outcome.pod)
        if pod is not None and replay.scheduler.state.is_ours(pod):
            note = " ".join(filter(None, (not_read(pod, replay.scheduler.state.asks_gpus(pod)),
                                           volume_note(specs.get(outcome.pod)))))
            if note:
                notes.append(PodNote(outcome.pod, note))
    return WhatIf(config.source, tuple(outcomes), evicted,
                  listed.view(now).summary.line(),
                  build_view(replay.scheduler, source="what-if", now=replay.now, devices_unread=unknown).summary.line(),
                  hidden,
                  dict(sorted(others.items())), tuple(sorted(state.scheduler_names)), from_file=from_file,
                  evicted_reasons=tuple(replay.stats.evicted_why.get(key, "") for key in evicted), notes=tuple(notes),
                  other_profiles=_profile_lines(profile_pods, profile_terms, None, config.source, from_file,
                                                scheduler_namespace),
                  other_profile_pods=profile_pods, other_profile_terms=profile_terms,
                  added_nodes=capacity.added_nodes, removed_nodes=capacity.without, selected_by=capacity.selected_by,
                  gone=changed.gone,
                  decisions=replay.stats.placements, ties=replay.stats.ties, seed=seed)


def with_leader(result: WhatIf, leader: Leadership | None, scheduler_namespace: str = DEFAULT_NAMESPACE) -> WhatIf:
    """The result with who leads now; a profile the configuration lacks whose term names another
    replica than the Lease's holder is said to be perhaps no one's now (`no_longer_leads`)."""
    return replace(result, leader=leader, other_profiles=_profile_lines(
        result.other_profile_pods, result.other_profile_terms, leader, result.config, result.from_file,
        scheduler_namespace))


def _profile_lines(pods: Mapping[str, int], found: Mapping[str, TermToken], leader: Leadership | None, source: str,
                   from_file: str, scheduler_namespace: str) -> tuple[str, ...]:
    """A line per profile of a running Tessera the configuration (`source`) lacks: its waiting
    pods (`pods`; -f: the file's), the replica its term (`found`) names, whether that one still
    leads by `leader`'s Lease (a term of another Lease tells nothing of it), and how to give it."""
    lines = []
    for name, n in pods.items():
        token = found[name]
        what = "it" if n == 1 else "them"
        holder = leader.holder if leader is not None and token.of_lease(leader.lease or None) else ""
        stale = no_longer_leads(token.identity, holder, name, what)
        profile = (f"a profile Tessera replica {token.identity} ran (pods of it carry its tessera.dev/term)" if stale
                   else f"a profile of a running Tessera (pods of it carry tessera.dev/term, written by Tessera "
                        f"replica {token.identity})")
        lines.append(f"{_pods(n, from_file)} {'is' if n == 1 else 'are'} for {name}, {profile}, "
                     f"{lacks(source, stale)}: {hint(scheduler_namespace, 'what-if', what)}")
    return tuple(lines)


def _pods(n: int, from_file: str) -> str:
    """The pods a line counts: `3 pods from b-job.yaml` (-f: the file's), else `3 pending pods`."""
    return f"{count(n, 'pod')} from {from_file}" if from_file else count(n, "pending pod")


def _natural(name: str) -> tuple[tuple[int, int | str], ...]:
    """`name` sorted as people read numbered names: team-b-train-2 before team-b-train-10 (a
    trial's table read 0, 1, 10, 11, 2, ...). Runs of digits compare as numbers, the rest as text."""
    return tuple((0, int(part)) if part.isdecimal() else (1, part) for part in re.split(r"(\d+)", name) if part)


def _victims(replay: Replay) -> dict[str, list[str]]:
    """Per pod, the victims its preemption evicted. Its final attempt (the one that binds it)
    preempts none, the attempt before it did. A gang preempts as one and the replay credits its
    victims to the member whose attempt carried them; each member names those on the node it lands
    on instead (their room is its room: members sharing a node both name them), as a re-trial read
    "placed" on a member whose node two evictions had made room on. A victim on a node no member
    lands on (a victim gang's other member, evicted whole for its minimum, as its reason says)
    stays with the member that carried them, so every victim is named on some row."""
    landed: dict[tuple[str, str], list[str]] = {}  # (gang, node) -> its members placed there
    for key, attempt in replay.stats.final.items():
        if attempt.node and attempt.pod.gang is not None:
            landed.setdefault((attempt.pod.gang.key, attempt.node), []).append(key)
    victims: dict[str, list[str]] = {}
    for victim, preemptor in sorted(replay.stats.evicted.items()):
        gang = replay.stats.final[preemptor].pod.gang
        node = replay.stats.evicted_from.get(victim, "")
        for key in landed.get((gang.key, node), [preemptor]) if gang is not None else [preemptor]:
            victims.setdefault(key, []).append(victim)
    return victims


def _outcome(attempt: Attempt, victims: tuple[str, ...], replay: Replay) -> Outcome:
    """A pod's outcome from its final attempt; `victims`: those its preemption evicted."""
    scored = _scored(attempt, replay.scheduler)
    return Outcome(attempt.pod.key, attempt.node or "", _devices(attempt.annotations), attempt.deferred, victims,
                   "" if attempt.node and not attempt.deferred else attempt.message,
                   tuple(sorted(attempt.tied)) if attempt.node else (), attempt.tied_count if attempt.node else 0,
                   attempt.score if attempt.node else None,
                   tuple(replay.stats.evicted_why.get(victim, "") for victim in victims), scored)


def _scored(attempt: Attempt, scheduler: Scheduler) -> tuple[NodeScore, ...]:
    """The nodes `attempt`'s pod would pick among — its node first, then those tied with it that
    it names: the replay's breakdown keeps their scores alone — with how each one's score adds up
    (`node_scores`, as explain reads them); none when it was not placed or when one node alone fit
    (no choice: upstream scores only when more than one does)."""
    if not attempt.node or not attempt.scores:
        return ()
    weights = scheduler.profiles[attempt.pod.scheduler_name].weights()
    return tuple(sorted(node_scores(attempt.scores, weights), key=lambda scored: scored.node != attempt.node))


def _key(obj: Mapping[str, Any]) -> str:
    """A listed object's "ns/name", as outcomes and `Refusal.pod` name a pod (read before the replay parses it)."""
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def _refused(found: dict[str, Outcome], refused: Sequence[Refusal], scheduler: Scheduler) -> None:
    """The refused pods' outcomes (the apiserver's message), and on each member of their gangs
    left pending, that the gang cannot be whole: a gang admission cuts short waits for members that
    are never created (not only "too few fit")."""
    lost: dict[str, list[Refusal]] = {}
    for refusal in refused:
        gang = f"; its gang {refusal.gang} cannot be whole without it" if refusal.gang else ""
        found[refusal.pod] = Outcome(refusal.pod, "", (), False, (), f"refused by the apiserver ({refusal.plugin} "
                                     f"admission): {refusal.message}{gang}", refused=True, refused_by=refusal.plugin)
        if refusal.gang:
            lost.setdefault(refusal.gang, []).append(refusal)
    for key, outcome in found.items():
        pod = scheduler.state.pod_by_key(key)
        gang = gang_name(pod.gang.key) if pod is not None and pod.gang is not None else ""
        if outcome.node or outcome.refused or gang not in lost:
            continue
        pods = [refusal.pod for refusal in lost[gang]]
        why = " and ".join(REFUSED_FOR[plugin] for plugin in sorted({refusal.plugin for refusal in lost[gang]}))
        found[key] = replace(outcome, message=f"{outcome.message}; gang {gang} cannot be whole: the apiserver would "
                                              f"refuse {len(pods)} of its pods for {why} "
                                              f"({first_few(pods, 3)})")


def _never_fits(found: dict[str, Outcome], scheduler: Scheduler) -> None:
    """A pod left pending whose gang the cluster can never hold (or has too few pods to be tried)
    says so after its message, as `kubectl tessera explain` and the PodGroup's Event do (a new
    user's trial: upstream's "only 4 of the 5 members it needs fit" read as if waiting would help)."""
    told = scheduler.never_fits_told({key: outcome.message for key, outcome in found.items() if not outcome.node})
    for key, message in told.items():
        found[key] = replace(found[key], message=message)


def _devices(annotations: dict[str, str]) -> tuple[str, ...]:
    raw = annotations.get(ann.DEVICES)
    if raw is None:
        return ()
    return tuple(grant.device + (f" ({format_quantity(grant.amount)})" if grant.amount is not None else "")
                 for by_resource in ann.decode_devices(raw).values()
                 for grants in by_resource.values() for grant in grants)


def as_dict(result: WhatIf) -> dict[str, Any]:
    return {**plain(result), "placed": result.placed, "unknown": result.unknown, "refused": result.refused}


def render(result: WhatIf) -> str:
    if result.from_file:
        elsewhere = (f"; {count(result.hidden, 'pending pod')} already in the cluster replayed ahead of them, "
                     "not listed" if result.hidden else "")
    else:
        elsewhere = (f"; {result.hidden} pending in other namespaces, replayed but not listed: -A lists them"
                     if result.hidden else "")
    theirs = _other_schedulers(result)
    if not result.outcomes:
        nothing = (f"None of the pods in {result.from_file} is for a profile of the configuration" if result.from_file
                   else "No pending pods to place")
        return "\n".join([f"{nothing} (configuration {result.config}; nothing was written{elsewhere}).",
                          *([theirs] if theirs else []), *_capacity_lines(result), "", f"Now:    {result.before}"])
    rows: list[list[str | None]] = [["POD", "NODE", "DEVICES", "RESULT"]]
    below: list[list[str]] = [[]]  # per row, the lines under it: how its node's score adds up
    for o in result.outcomes:
        if o.node:
            verdict = "placed, Binding held by the allocation gate" if o.held else "placed"
            if o.preempts:
                verdict += f" after evicting {listed_all(o.preempts, o.preempt_reasons)}"
            if o.tied_count:
                verdict += f"; {tie_note(o.tied_with, o.tied_count, o.score)}"
        else:
            verdict = f"cannot tell: {o.message}" if o.unknown else o.message
            if o.preempts:  # its preemption evicted them, and it still did not fit
                verdict += f" (its preemption would evict {listed_all(o.preempts, o.preempt_reasons)})"
        if o.was_on:
            verdict += f" (was on {o.was_on})"
        rows.append([o.pod, o.node, ", ".join(o.devices), verdict])
        below.append(_breakdown(o.scored))
    stay = len(result.outcomes) - result.placed - result.unknown - result.refused
    unknown = f", {result.unknown} cannot tell (see RESULT)" if result.unknown else ""
    by = Counter(outcome.refused_by for outcome in result.outcomes if outcome.refused)
    unknown += "".join(f", {by[plugin]} would be refused by {REFUSED_BY[plugin]}" for plugin in sorted(by))
    displaced = sum(1 for outcome in result.outcomes if outcome.was_on)
    which = _pods(len(result.outcomes) - displaced if result.from_file else len(result.outcomes), result.from_file)
    if result.from_file:
        which += " (not created)" + (f" and {count(displaced, 'pod')} of the nodes taken away" if displaced else "")
    elif displaced:
        which += f" ({displaced} of them from the nodes taken away)"
    table = [line for row, under in zip(columns(rows).split("\n"), below, strict=True) for line in (row, *under)]
    lines = [*table, "",
             f"{which}: {result.placed} would be placed, {stay} would stay pending{unknown} "
             f"(configuration {result.config}; a dry run, nothing was written{elsewhere})"]
    if theirs:
        lines.append(theirs)
    lines += _notes(result.notes)
    ties = ties_line(result.ties, result.decisions, result.seed)
    if ties:
        lines.append(ties)
    if result.evicted:
        lines.append(f"Preemption would evict: {listed_all(result.evicted, result.evicted_reasons)}")
    lines += _capacity_lines(result)
    if result.leader is not None:
        lines.append(f"Leader: {result.leader.message}")
        if result.leader.drift:
            lines.append(f"Warning: {result.leader.drift}")
    lines += [f"Now:    {result.before}", f"After:  {result.after}"]
    return "\n".join(lines)


def _capacity_lines(result: WhatIf) -> list[str]:
    """What the replay changed of the cluster: the Nodes added (not created) and the nodes taken
    away (not deleted), with what became of their pods."""
    lines = []
    if result.added_nodes:
        lines.append(f"Added:   {count(len(result.added_nodes), 'node')} (not created): "
                     f"{first_few(result.added_nodes, 8)}")
    if result.removed_nodes:
        how = f"; {result.selected_by}" if result.selected_by else ""
        moved = [outcome for outcome in result.outcomes if outcome.was_on]
        placed = sum(1 for outcome in moved if outcome.node)
        pods = (f"; their {count(len(moved), 'pod')} replayed as pending (RESULT says which node each was on): "
                f"{placed} would be placed, {len(moved) - placed} would stay pending" if moved else
                "; no pod of theirs to place again")
        gone = (f"; {count(len(result.gone), 'pod')} {'goes' if len(result.gone) == 1 else 'go'} with them, not "
                f"re-created elsewhere (a DaemonSet's, or finished): {first_few(result.gone, 3)}" if result.gone else "")
        lines.append(f"Removed: {count(len(result.removed_nodes), 'node')} (not deleted{how}): "
                     f"{first_few(result.removed_nodes, 8)}{pods}{gone}")
    return lines


def _breakdown(scored: Sequence[NodeScore]) -> list[str]:
    """`  n1, n2: score 325 = TaintToleration 100x3 + NodeResourcesFit 25x1`: how the score of
    each node a pod would pick among adds up, in explain's words (`score_sum`); nodes that add up
    alike share a line."""
    nodes: dict[str, list[str]] = {}
    for node in scored:
        nodes.setdefault(score_sum(node.total, node.scores), []).append(node.node)
    return [f"  {', '.join(names)}: {line}" for line, names in nodes.items()]


def _notes(notes: Sequence[PodNote]) -> list[str]:
    """`Not read:` lines, one per note, naming the pods that have it (a workload's replicas share one)."""
    pods: dict[str, list[str]] = {}
    for note in notes:
        pods.setdefault(note.note, []).append(note.pod)
    return [f"Not read: {first_few(names, 3)}: {note}" for note, names in pods.items()]


def _other_schedulers(result: WhatIf) -> str:
    """The pending pods (-f: the file's pods) the configuration leaves alone, per schedulerName (a
    new user's trial: "No pending pods to place" while pods for another schedulerName waited), and
    which of those names are a running Tessera's profiles."""
    if not result.other_schedulers:
        return "\n".join(result.other_profiles)
    names = ", ".join(f"{name}: {n}" for name, n in result.other_schedulers.items())
    total = sum(result.other_schedulers.values())
    return "\n".join((f"{_pods(total, result.from_file)} {'is' if total == 1 else 'are'} for other schedulers ({names}): "
                      f"the configuration's profiles schedule only pods whose spec.schedulerName is "
                      f"{' or '.join(result.profiles)}.", *result.other_profiles))
