"""`kubectl tessera explain POD`: why a pod waits, or where it went and with which devices.

Two sources, kept apart in the output: what the scheduler said (the pod's PodScheduled condition,
its Events) and what the core says now. For the second, the pod is put through a fresh core built
from the listed cluster — its nodes, devices, classes, groups and bound pods, the pod and its
pending gang siblings, and the pending pods nominated to a node at its priority or higher (whose
room the scheduler keeps), but no other pending pod — with per-node explanations on: each node's first
failing filter, or its score. That is the answer to "where would it go if it were next", through
the very plugins the scheduler runs; nothing is written. For a pod that waits, the command also
says who schedules now (the Lease, `leadership.py`): a pod "not tried yet" while no replica leads
looks like a scheduler bug.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from difflib import get_close_matches
from typing import Any

from scheduler.api.config_model import LeaderElectionConfig, SchedulerConfig
from scheduler.api.quantity import format_quantity
from scheduler.core.annotations import TERM
from scheduler.core.capacity import beyond_every_node, beyond_min_resources, beyond_the_cluster, too_few_members
from scheduler.core.framework.cycle_state import prepare
from scheduler.core.objects import (CORDONED_DEVICE, DUPLICATE_DEVICE, UNHEALTHY_DEVICE, Pod, gang_key,
                                    gang_key_parts, gang_name)
from scheduler.core.plugins.devices.planner import HELD_WHOLE, IN_USE, slice_rooms
from scheduler.core.plugins.interpod_affinity import EXISTING, repelled_by
from scheduler.core.plugins.node_affinity import named_nodes
from scheduler.core.plugins.preemption.victims import listed_all
from scheduler.core.plugins.taints import UNTOLERATED, untolerated_taint
from scheduler.core.scheduler import WAITING_FOR_ALLOCATION, Scheduler
from scheduler.core.state import ClusterState, NodeInfo, Notice
from scheduler.first_few import first_few
from scheduler.kube.fence import FENCE_REFUSED
from scheduler.kube.snapshot import Unread, last_seen, seen_at
from scheduler.kube.term_token import parse_term_token
from scheduler.kubectl.installed import DEFAULT_NAMESPACE
from scheduler.kubectl.leadership import UNKNOWN, Leadership
from scheduler.kubectl.not_read import not_read, volume_note
from scheduler.kubectl.other_profile import (configuration, evidence, evidence_writer, hint, lacks, no_longer_leads,
                                             replicas)
from scheduler.kubectl.unread import (Offered, cannot_tell, extended_requests, offered, podgroup_unread,
                                      podgroup_unread_message)
from scheduler.sim.snapshot import is_bound, load
from scheduler.view.cluster import extended_amounts, gang_view, gate_holds, removed_by_podgc, undescribed
from scheduler.view.model import GangView, PluginScore, node_scores, plain
from scheduler.view.reasons import wait_reason
from scheduler.view.text import age, columns, score_sum, tie_note


# the dry run's core is new: what TesseraFragmentation learned of the workload mix is the listed pods'
# task types only, where the running scheduler counts every pod since it started (docs/semantics.md)
FRESH = ("a fresh core: its packing score learned task types only from the pods listed now, a long-running "
         "scheduler's from every pod it has seen, so it may place differently")


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    node: str
    fits: bool
    detail: str  # the first failing filter's reason, or "score N = PLUGIN SCORExWEIGHT + ..." (`score_sum`)
    scores: tuple[PluginScore, ...] = ()  # a scored node's every score plugin, in the profile's order


@dataclass(frozen=True, slots=True)
class DryRun:
    node: str  # where it would go now; "" when nowhere
    message: str
    held: bool  # the allocation gate would hold its Binding
    preempts: tuple[str, ...]  # victims preemption would evict for it (or for its gang)
    nodes: tuple[NodeVerdict, ...]
    nominated: str = ""  # where its (or its gang's) preemption makes room for it
    tied_with: tuple[str, ...] = ()  # other nodes with the same top score (some): the pick among them is random
    tied_count: int = 0  # how many other nodes had it
    score: int | None = None  # `node`'s total score, when more than one node was scored
    # why each of `preempts` goes, in its order ("" for a pod alone): a gang left below its minimum goes whole
    preempt_reasons: tuple[str, ...] = ()
    # no verdict: `message` says which kind it depends on could not be read (`unread.cannot_tell`)
    unknown: bool = False


@dataclass(frozen=True, slots=True)
class DeviceLine:
    container: str
    resource: str
    device: str  # ExtendedResource name
    device_id: str
    amount: str  # a slice; "" for the whole device


@dataclass(frozen=True, slots=True)
class EventLine:
    last_seen: str
    type: str
    reason: str
    count: int
    source: str  # the reporting controller (tessera, kubelet, ...)
    message: str


@dataclass(frozen=True, slots=True)
class Explanation:
    pod: str
    scheduler: str
    ours: bool  # one of the configuration's profiles schedules it
    phase: str
    node: str
    status: str  # the verdict in one line
    reason: str  # PodScheduled=False reason the scheduler wrote ("" when none)
    message: str
    nominated_node: str
    gang: GangView | None
    gate: str
    devices: tuple[DeviceLine, ...]
    dry_run: DryRun | None
    terminating: tuple[str, ...]  # "ns/name on node (what it holds)": bound pods being deleted that hold devices
    events: tuple[EventLine, ...]
    # "8 nvidia.com/gpu (the most any node offers: 4)": requests larger than any node's allocatable
    beyond_every_node: tuple[str, ...] = ()
    beyond_the_cluster: str = ""  # why its gang can never fit the cluster's schedulable nodes, or ""
    beyond_min_resources: str = ""  # why its PodGroup's minResources can never be free together, or ""
    missing_named_nodes: tuple[str, ...] = ()  # nodes its required affinity names by metadata.name that do not exist
    released: int = 0  # a finished pod's devices its annotation still names: it holds none of them
    # "4 nvidia.com/gpu": what a bound pod holds by plain count (no device objects: the device
    # plugin picks the GPUs), "" when none
    counted: str = ""
    config: str = ""  # the configuration's source: the dry run's profile and which pods are Tessera's
    # per requested name a ResourceClass owns or claims: which class, and what that makes of it
    classes: tuple[str, ...] = ()
    # who schedules while it waits: the configuration's Lease (set by the command, which reads it;
    # None when the pod does not wait for Tessera or leader election is off)
    leader: Leadership | None = None
    ungated: bool = False  # it has spec.schedulingGates: the dry run is the one it gets once they are removed
    # "nvidia.com/gpus: no node advertises it (did you mean ...)": extended resources it asks for
    # that no node offers at all (a typo reads upstream's plain "Insufficient")
    unadvertised: tuple[str, ...] = ()
    # "PodGroup ns/trian does not exist (did you mean "train"?)": its gang's PodGroup, not there
    missing_podgroup: str = ""
    # "nodeSelector gpu-type=a100: no node has this value (nodes have gpu-type: h100, v100)": a
    # nodeSelector no node matches (`_unmatched_selector`)
    unmatched_selector: tuple[str, ...] = ()
    # "Only 4 pods of PodGroup ns/g exist and its minMember is 5: ...": fewer of its gang's pods
    # exist than its minimum (`capacity.too_few_members`)
    too_few_members: str = ""
    # the status says a leader's term fence was refused on it (its latest FailedScheduling Event),
    # and the pod's tessera.dev/term: `with_leader` drops the refusal when the term leading now
    # wrote it (the pod was fenced since)
    fence_refused: bool = False
    term: str = ""
    # "Room on n is kept for ns/boss (priority 1000, nominated there: ...)": per node the dry run
    # refuses it only because of the room kept for pods nominated there ahead of it (`_room_kept`)
    room_kept: tuple[str, ...] = ()
    events_unread: str = ""  # why the pod's Events cannot be read ("" when they were)
    # other schedulers' keys and preferred terms a pod of Tessera's carries, which it does not
    # read (`not_read.not_read`)
    ignored: str = ""
    # its claims, which Tessera does not check (`not_read.volume_note`): "" when it has none or is not Tessera's
    volumes: str = ""
    # what shows it is Tessera's under a profile the configuration does not have (`other_profile`), or ""
    other_profile: str = ""
    other_profile_writer: str = ""  # the replica that last ran its profile (`evidence_writer`; `with_leader` compares)


def explain(objects: Sequence[dict[str, Any]], key: str, config: SchedulerConfig,
            events: Sequence[Mapping[str, Any]], now: float,
            unread: Mapping[str, Unread] | None = None, events_unread: str = "",
            scheduler_namespace: str = DEFAULT_NAMESPACE) -> Explanation | None:
    """The explanation of pod `key` (namespace/name) in the listed cluster; None if it is not there.
    `unread`: the kinds the listing could not read (`ClusterListing.unread`): a dry run that
    depends on one gives no verdict, and says why. `scheduler_namespace`: where the installed
    ConfigMap is looked for, named when the pod's profile is not in `config`."""
    raw = next((obj for obj in objects if obj.get("kind") == "Pod" and _key(obj) == key), None)
    if raw is None:
        return None
    core = Scheduler(config)
    notices = load(core, objects, now)
    return explain_loaded(core, notices, objects, raw, config, events, now, unread, events_unread,
                          scheduler_namespace)


def explain_loaded(core: Scheduler, notices: Sequence[Notice], objects: Sequence[dict[str, Any]],
                   raw: Mapping[str, Any], config: SchedulerConfig, events: Sequence[Mapping[str, Any]], now: float,
                   unread: Mapping[str, Unread] | None = None, events_unread: str = "",
                   scheduler_namespace: str = DEFAULT_NAMESPACE) -> Explanation:
    """`explain` of the listed pod `raw` with `objects` already loaded into `core` (its `notices`):
    a PodGroup's explanation (`explain_group`) loads the listing once for its members and the one
    whose dry run speaks for the gang."""
    key = _key(raw)
    state = core.state
    pod = state.pod_by_key(key)
    if pod is None:  # the core refused the object; say what it said
        said = next((n.message for n in notices if n.kind == "Pod" and n.key == key), "")
        return replace(_unreadable(raw, key, events, said, state.scheduler_names), events_unread=events_unread)
    wait = wait_reason(raw)
    info = state.nodes.get(pod.node_name) if pod.node_name else None
    # only where the gate holds does an "Allocating" pod keep others out
    gates = info is not None and pod.uid in info.allocating and gate_holds(core, info.name, now)
    ours = state.is_ours(pod)
    pending = pod.uid in state.pending
    # a pod held by spec.schedulingGates (a capacity probe, a queue's admission) gets the dry run
    # it would get once they are removed, labelled so
    ungated = pod.gated and ours and not pod.node_name and not pod.meta.deleting and not pod.terminal
    listed = _without_gates(objects, key) if ungated else objects
    names = offered(state)
    # no dry run where its verdict would read an unread kind as absent
    blind = cannot_tell(pod, unread or {}, names) if pending or ungated else ""
    run = (DryRun("", blind, False, (), (), unknown=True) if blind else
           _dry_run(listed, _waiting_with(state, pod) | _nominated_before(state, pod), key, config, now)) \
        if pending or ungated else None
    stays = run is not None and not run.node and not run.unknown  # a verdict of pending: say why
    known = replicas(state.pods.values())
    shown = "" if ours else evidence(pod, events, known)
    writer = evidence_writer(pod, state.pods.values(), events, known) if shown else ""
    other = _not_evaluated(pod.scheduler_name, shown, writer, "", config.source, scheduler_namespace) if shown else ""
    status = _status(state, pod, ours, wait.reason if wait else "", wait.node if wait else "", gates,
                     _finalizers(raw), core.gated().get(key, ""), _fence_refused(events),
                     _preempted_for(state, pod, events), other, _scheduling_gates(raw))
    return Explanation(
        pod=key,
        scheduler=pod.scheduler_name,
        ours=ours,
        phase=pod.phase,
        node=pod.node_name,
        status=status,
        reason=wait.reason if wait else "",
        message=wait.message if wait else "",
        nominated_node=pod.nominated_node,
        gang=_gang_view(state, pod, unread or {}),
        ignored=not_read(pod, state.asks_gpus(pod)) if ours else "",
        volumes=volume_note(raw.get("spec")) if ours else "",
        gate=_gate(state, pod, wait.node if wait else "", gates),
        devices=() if pod.terminal else _devices(pod),
        dry_run=run,
        terminating=_terminating(state) if stays and extended_amounts(pod.requests) else (),
        events=tuple(_event(event) for event in events),
        beyond_every_node=beyond_every_node(state, pod) if stays else (),
        beyond_the_cluster=beyond_the_cluster(state, pod, core.cluster_totals()) if stays else "",
        beyond_min_resources=beyond_min_resources(state, pod) if stays else "",
        missing_named_nodes=_missing_named_nodes(state, pod) if stays else (),
        released=len(_devices(pod)) if pod.terminal else 0,
        counted=_counted(state, pod),
        config=config.source,
        classes=_classes(state, pod) if run is not None and not run.unknown else (),
        ungated=ungated,
        unadvertised=_unadvertised(state, pod, names) if stays else (),
        missing_podgroup=_missing_podgroup(state, pod) if stays else "",
        unmatched_selector=_unmatched_selector(state, pod) if stays else (),
        too_few_members=too_few_members(state, pod) if stays else "",
        fence_refused=status == FENCE_STATUS,
        term=pod.meta.annotations.get(TERM, ""),
        room_kept=_room_kept(listed, state, pod, run, config, now) if run is not None and stays else (),
        events_unread=events_unread,
        other_profile=shown,
        other_profile_writer=writer,
    )


def _not_evaluated(profile: str, shown: str, writer: str, holder: str, source: str, scheduler_namespace: str) -> str:
    """The status of a pod Tessera schedules under a profile the configuration (`source`) lacks:
    `shown` is the evidence, `writer` the replica that last ran the profile (`evidence_writer`),
    `holder` the Lease's ("" unknown)."""
    stale = no_longer_leads(writer, holder, profile)
    lead = (f"Tessera replica {writer} ran profile {profile} ({shown})," if stale
            else f"Tessera schedules it under profile {profile} ({shown}),")
    return f"not evaluated: {lead} {lacks(source, stale)}: {hint(scheduler_namespace, 'explain')}"


def pending_line(core: Scheduler, raw: Mapping[str, Any], pod: Pod, other: str = "") -> str:
    """A pending pod's reason in one line: what the scheduler last wrote on it (its PodScheduled
    condition's reason and message), else its status as explain says it (a PreEnqueue gate, its
    spec.schedulingGates, not tried yet, `other`: why a pod of a profile the configuration does not
    have is not evaluated): `explain pg/NAME` lists one per waiting member."""
    wait = wait_reason(raw)
    if wait is not None and wait.reason:
        return f"{wait.reason}: {wait.message}" if wait.message else wait.reason
    state = core.state
    return _status(state, pod, state.is_ours(pod), "", "", False, (), core.gated().get(pod.key, ""), other=other,
                   scheduling_gates=_scheduling_gates(raw))


def _gang_view(state: ClusterState, pod: Pod, unread: Mapping[str, Unread]) -> GangView | None:
    """The pod's gang; its PodGroup unread, its message says so (not the core's "not found")."""
    if pod.gang is None:
        return None
    view = gang_view(state, pod.gang.key)
    missing = podgroup_unread(pod, unread)
    return view if view is None or missing is None else replace(view, message=podgroup_unread_message(view.gang, missing))


def with_leader(explanation: Explanation, leader: Leadership | None,
                source: str = "the configuration's", scheduler_namespace: str = DEFAULT_NAMESPACE) -> Explanation:
    """The explanation with who leads now (the command reads the Lease once the pod is known to
    wait for Tessera). A fence refusal is current unless the pod carries the token of the term
    that leads now: the refusal is a leader failing to write its fence onto the pod, and a pod
    carrying the current term's token was written by it (a retry of the refusing term, or a
    later term's fence), so the refusal is an earlier attempt's. Terms, not times, decide: the
    refusal Event and the Lease's acquireTime come from different replicas' clocks. Without a
    current term (leader election off, no Lease, none held, the Lease unreadable) nothing tells
    whether a term fenced the pod since: the status says the refusal was earlier and that
    whether it still holds the pod is unknown, and why (it used to show the refusal as current).

    The Lease read is the one the configuration names (`source` says which: the installed
    configuration's, a --config file's, the built-in one's); explain cannot know how the scheduler
    was started. A pod whose tessera.dev/term names another Lease was written by a leader on that
    one (`_other_lease`): the Leader line says so (a trial: the ConfigMap installed, the scheduler
    run as `tessera run` without --config on the built-in Lease, and explain said "none ... is
    Tessera running?").

    A pod of a profile the configuration lacks whose evidence names another replica than the
    Lease's holder: its status says that replica no longer leads (a re-trial: Tessera restarted
    without the profile, and explain still said Tessera schedules the pod)."""
    x = explanation
    token = parse_term_token(x.term)
    if leader is not None and x.other_profile and (token is None or token.of_lease(leader.lease or None)) \
            and x.status == _not_evaluated(
            x.scheduler, x.other_profile, x.other_profile_writer, "", x.config, scheduler_namespace):  # it waits
        explanation = replace(x, status=_not_evaluated(x.scheduler, x.other_profile, x.other_profile_writer,
                                                       leader.holder, x.config, scheduler_namespace))
    if leader is not None and (note := _other_lease(explanation.term, leader, source)):
        leader = replace(leader, message=f"{leader.message}; {note}")
    if explanation.fence_refused and (leader is None or not leader.term):
        why = ("leader election is off in the configuration" if leader is None
               else "the Lease cannot be read" if leader.state == UNKNOWN
               else "no replica holds the Lease")
        return replace(explanation, leader=leader, fence_refused=False, status=FENCE_UNKNOWN.format(why=why))
    if explanation.fence_refused and leader is not None and _same_term(explanation.term, leader.term):
        return replace(explanation, leader=leader, fence_refused=False, status=NOT_TRIED)
    return replace(explanation, leader=leader)


def _other_lease(token: str, leader: Leadership, source: str) -> str:
    """What the Leader line adds when the pod's tessera.dev/term `token` names another Lease than
    the one `leader` read (`source`'s), else "". A token that names no Lease (written before
    tokens did) tells nothing."""
    parsed = parse_term_token(token)
    if parsed is None or parsed.lease is None or parsed.of_lease(leader.lease or None):
        return ""
    namespace, name = parsed.lease.split("/", 1)
    default = LeaderElectionConfig()
    return (f"but this pod's tessera.dev/term was written by {parsed.identity} leading on the Lease {parsed.lease}, "
            f"not {leader.lease} ({source}): a scheduler runs with another configuration (`tessera run` without "
            f"--config elects on {default.resource_namespace}/{default.resource_name}), and that Lease says who "
            f"leads: kubectl -n {namespace} get lease {name}")


def _same_term(token: str, current: str) -> bool:
    """Pod token `token` is of term `current` (a token); one written before tokens named their
    Lease (a rolling upgrade) is read as the current Lease's."""
    ours, theirs = parse_term_token(token), parse_term_token(current)
    return ours is not None and theirs is not None and ours.lease in (None, theirs.lease) \
        and (ours.identity, ours.transitions, ours.acquire_time) == (theirs.identity, theirs.transitions,
                                                                     theirs.acquire_time)


# HAMi's per-container slice of a GPU (beside its `nvidia.com/gpu` count of vGPUs): a pod written
# for HAMi asks for these, which no Tessera node advertises; its slice is a sharing class here
HAMI_SLICE_RESOURCES = frozenset({"nvidia.com/gpumem", "nvidia.com/gpumem-percentage", "nvidia.com/gpucores"})
HAMI_SECTION = "docs/migrating.md#hami"


def _unadvertised(state: ClusterState, pod: Pod, names: Offered) -> tuple[str, ...]:
    """The extended resources (a domain-prefixed name) the pod asks for that no node advertises
    and no ResourceClass provides, each with the close name that is, if any: upstream's
    `Insufficient nvidia.com/gpus` says nothing of a typo (a platform engineer's trial). A HAMi
    slice name (`nvidia.com/gpumem`) gets no close name: the close one is the whole-GPU count, the
    wrong advice for a slice (a HAMi team's trial); it points to the sharing classes instead."""
    known = names.advertised | names.counted | names.owned
    found = []
    for name in extended_requests(pod):
        if name in known or state.classes.is_class_resource(name):
            continue
        if name in HAMI_SLICE_RESOURCES:  # one edit from nvidia.com/gpu, but a slice was asked, not a whole GPU
            found.append(f"{name}: no node advertises it (a HAMi resource name: under Tessera a GPU slice is asked "
                         f"through a sharing class, see {HAMI_SECTION})")
            continue
        close = get_close_matches(name, sorted(known), n=1, cutoff=0.8)
        found.append(f"{name}: no node advertises it" + (f' (did you mean "{close[0]}"?)' if close else ""))
    return tuple(found)


_VALUES_SHOWN = 8  # a label's values named in a hint, at most


def _unmatched_selector(state: ClusterState, pod: Pod) -> tuple[str, ...]:
    """When no node matches the pod's nodeSelector: per pair no node has, the values the nodes
    have for its label (or, no node having the label, the close label that is); or, each pair
    being on some node, that no node has them all. Upstream's "didn't match Pod's node
    affinity/selector" names neither (a trial's `gpu-type: a100` among h100 and v100 nodes)."""
    selector = pod.node_selector
    labels = [info.node.meta.labels for info in state.node_infos() if info.node is not None]
    if not selector or any(all(have.get(k) == v for k, v in selector.items()) for have in labels):
        return ()
    found = []
    for key, value in sorted(selector.items()):
        values = sorted({have[key] for have in labels if key in have})
        if value in values:
            continue
        if values:
            found.append(f"nodeSelector {key}={value}: no node has this value "
                         f"(nodes have {key}: {first_few(values, _VALUES_SHOWN)})")
        else:
            close = _close_label(key, sorted({k for have in labels for k in have}))
            found.append(f"nodeSelector {key}={value}: no node has the label {key}"
                         + (f' (did you mean "{close}"?)' if close else ""))
    if not found:
        pairs = ", ".join(f"{key}={value}" for key, value in sorted(selector.items()))
        found.append(f"nodeSelector {pairs}: each is on some node, but no node has them all")
    return tuple(found)


_NAME_SEPARATORS = ".-_"  # where a label's name may end with the key asked (`gpu.product` in `nvidia.com/gpu.product`)


def _close_label(key: str, keys: list[str]) -> str | None:
    """The node label a nodeSelector key probably meant: one whose name (after its prefix/) is the
    key's name, then one whose name ends with it (after a `.`, `-` or `_`), then a close spelling;
    the first of them in `keys`' (sorted) order."""
    asked = key.rpartition("/")[2]
    for matches in (lambda name: name == asked,
                    lambda name: any(name.endswith(sep + asked) for sep in _NAME_SEPARATORS)):
        found = next((have for have in keys if matches(have.rpartition("/")[2])), None)
        if found is not None:
            return found
    close = get_close_matches(key, keys, n=1, cutoff=0.8)
    return close[0] if close else None


def _missing_podgroup(state: ClusterState, pod: Pod) -> str:
    """Its gang's PodGroup object when there is none (nor an unreadable one), with the PodGroup of
    a close name in its namespace and API, if any. The scheduler's message stays scheduler-plugins'
    (`podgroup "ns/trian" not found`) or kube-scheduler's; the hint is explain's."""
    gang = pod.gang
    if gang is None or not gang.from_podgroup or gang.key in state.gangs.podgroups \
            or gang.key in state.unreadable_podgroups:
        return ""
    namespace, name = gang_key_parts(gang.key)
    names = sorted(group_name for key in state.gangs.podgroups
                   if (group := gang_key_parts(key))[0] == namespace
                   and gang_key(namespace, (group_name := group[1]), gang.api) == key)
    close = get_close_matches(name, names, n=1, cutoff=0.6)
    return f"PodGroup {namespace}/{name} does not exist" + (f' (did you mean "{close[0]}"?)' if close else "")


def _preempted_for(state: ClusterState, pod: Pod, events: Sequence[Mapping[str, Any]]) -> str:
    """For a preemption's victim: whom its latest `Preempted` Event names (upstream's `Preempted
    by pod <uid> on node <node>`, the uid looked up), and, when every member of its gang is
    leaving too, that the gang goes whole (Tessera never leaves a gang below its minimum). The
    node is where a single pod preemptor is nominated (upstream's candidate); a gang preempting
    as one (a PodGroup, or a label-form gang's pod) has no single node: the note names the
    victim's own (scheduler/kube/loop.py `_evict`), said as such ("on node N", the note's words)
    when the preemptor may be a gang. The latest Event by time, not by text
    (`seen_at`: an older Event's deprecatedLastTimestamp has whole seconds)."""
    if pod.preemption_mark is None or not pod.node_name:
        return ""
    preempted = [event for event in events if event.get("reason") == "Preempted"]
    said = ""
    if preempted:
        note = _event(max(preempted, key=lambda event: seen_at(last_seen(event)))).message
        kind, _, rest = note.removeprefix("Preempted by ").partition(" ")
        uid, _, node = rest.partition(" on node ")
        node = node.removesuffix(" (in kube-scheduler memory).")
        single = False
        if kind == "pod":
            preemptor = state.pods.get(uid)
            said = f" for pod {preemptor.key if preemptor is not None else uid}"
            # a gang preempting as one names each victim's own node: another node is a single
            # pod's nomination (a gang member too, under a profile without gang scheduling)
            single = node != pod.node_name or (preemptor is not None and preemptor.gang is None)
        elif kind == "podgroup":
            group = next((key for key, obj in state.gangs.podgroups.items() if obj.meta.uid == uid), None)
            said = f" for podgroup {gang_name(group) if group is not None else uid}"
        if said and node:
            said += f" (nominated to {node})" if single else f" on node {node}"
    gang = pod.gang
    if gang is not None:
        members = [state.pods[uid] for uid in state.gangs.members.get(gang.key, set()) if uid in state.pods]
        if len(members) > 1 and all(state.leaving(member) for member in members):
            minimum = state.gang_minimum(gang.key, pod, len(members))
            said += (f"; its whole gang {gang_name(gang.key)} goes with it: a gang is never left below its "
                     f"minMember {minimum}")
    return said


def _without_gates(objects: Sequence[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """The listing with pod `key`'s spec.schedulingGates removed (the other objects as they are)."""
    return [{**obj, "spec": {k: v for k, v in obj["spec"].items() if k != "schedulingGates"}}
            if obj.get("kind") == "Pod" and _key(obj) == key and isinstance(obj.get("spec"), dict) else obj
            for obj in objects]


def _counted(state: ClusterState, pod: Pod) -> str:
    """A bound pod's plain device requests (`nvidia.com/gpu: 4`): the node counts them, no device
    object names them (the device plugin picks which GPUs)."""
    if not pod.node_name or pod.terminal:
        return ""
    return extended_amounts({name: amount for name, amount in pod.requests.items()
                             if not state.classes.is_class_resource(name)})


def _classes(state: ClusterState, pod: Pod) -> tuple[str, ...]:
    """What ResourceClasses make of the pod's requests: a name a class owns is served only by the
    devices that class matches, whatever the nodes count of it (`nvidia.com/gpu` owned by a class
    is no longer a count); a name an invalid class claims says why the class is refused and whether
    the request stays a plain count. A new user's trial: a class on `nvidia.com/gpu` left a plain
    1-GPU pod "Insufficient" beside free GPUs, and nothing named the class."""
    registry = state.classes
    found = []
    for name in sorted(pod.requests):
        owner = registry.by_resource.get(name)
        if owner is not None:
            matching = state.matching_devices(owner.name)
            found.append(f"{name}: a request of ResourceClass {owner.name}, served only by the {matching} "
                         f"device{'' if matching == 1 else 's'} it matches")
            continue
        claimant = next((cls for cls in sorted(registry.classes.values(), key=lambda c: c.name)
                         if cls.resource_name == name), None)
        if claimant is None:
            continue
        then = ("the pod waits until the class is fixed" if registry.is_class_resource(name)
                else "the request is a plain count of the node's GPUs")
        found.append(f"{name}: ResourceClass {claimant.name} names it but is not valid "
                     f"({registry.error_of(claimant.name)}): {then}")
    return tuple(found)


def _missing_named_nodes(state: ClusterState, pod: Pod) -> tuple[str, ...]:
    """The nodes the pod may only go to (NodeAffinity's PreFilter: every required term names them
    by `metadata.name`) that do not exist: upstream's "didn't satisfy plugin(s) [NodeAffinity]"
    does not say so (a new user's trial)."""
    names = named_nodes(pod)
    return tuple(sorted(name for name in names or () if name not in state.nodes))


def _terminating(state: ClusterState) -> tuple[str, ...]:
    """Bound pods being deleted (a finalizer, a grace period) that still hold extended resources:
    a pod that waits for GPUs reads "Insufficient" until they are gone, with no other hint (a new
    user's trial)."""
    found = []
    for pod in state.pods.values():
        placement = state.placements.get(pod.uid)
        if not pod.meta.deleting or pod.terminal or placement is None:
            continue
        held = extended_amounts(pod.requests)  # its placement counts the GPUs it holds by name once
        if held:
            found.append(f"{pod.key} on {placement.node} ({held})")
    return tuple(sorted(found))


def _waiting_with(state: ClusterState, pod: Pod) -> frozenset[str]:
    """The pod and its gang's other pending members: a gang is tried as one. Those held by
    spec.schedulingGates come too (never tried) so that the dry run's reason names them as the
    scheduler's does."""
    uids = state.gangs.members.get(pod.gang.key, set()) if pod.gang is not None else set()
    return frozenset({pod.key} | {state.pods[uid].key for uid in uids
                                  if (uid in state.pending or uid in state.gated) and uid in state.pods})


def _nominated_before(state: ClusterState, pod: Pod) -> frozenset[str]:
    """The other pending pods nominated to a node (status.nominatedNodeName: preemption made room
    for them) that compete at the pod's priority or higher, with their pending gang siblings.
    Upstream filters a pod with such pods added to their nodes (framework.go
    addGENominatedPods); in the dry run they are tried first and hold that room again, so
    "as if it were next" does not hand the pod room the scheduler keeps for them."""
    priority = state.competing_priority(pod)
    nominated = [other for uid in state.pending if (other := state.pods.get(uid)) is not None
                 and other.uid != pod.uid and other.nominated_node and state.competing_priority(other) >= priority]
    return frozenset(key for other in nominated for key in _waiting_with(state, other))


def _room_kept(objects: Sequence[dict[str, Any]], state: ClusterState, pod: Pod, run: DryRun,
               config: SchedulerConfig, now: float) -> tuple[str, ...]:
    """Per node the dry run refuses the pod only for the room kept for the pods nominated there
    ahead of it (`_nominated_before`): it fits there in the same dry run without them. Upstream's
    message names no such pod (its Filter runs with them added, framework.go addGENominatedPods,
    and says what the filter says: `Insufficient nvidia.com/gpu`); this says which."""
    before = _nominated_before(state, pod)
    ahead = [other for uid in sorted(state.pending) if (other := state.pods.get(uid)) is not None
             and other.key in before and other.nominated_node]
    if not ahead:
        return ()
    alone = _dry_run(objects, _waiting_with(state, pod), pod.key, config, now)
    if alone is None:
        return ()
    fits = {verdict.node for verdict in alone.nodes if verdict.fits} | ({alone.node} if alone.node else set())
    refused = sorted(fits - {verdict.node for verdict in run.nodes if verdict.fits})
    said = []
    for node in refused:
        kept = sorted((other for other in ahead if other.nominated_node == node), key=lambda other: other.key)
        if not kept:
            continue
        names = ", ".join(f"{other.key} (priority {state.competing_priority(other)}"
                          + (", nominated there: preemption made room for it)" if len(kept) == 1 else ")")
                          for other in kept)
        lowest = min(state.competing_priority(other) for other in kept)
        said.append(f"Room on {node} is kept for {names}"
                    + ("" if len(kept) == 1 else ", nominated there: preemption made room for them")
                    + f"; this pod (priority {state.competing_priority(pod)}) would fit {node} without "
                    + ("it" if len(kept) == 1 else "them") + f", and no pod of priority {lowest} or lower gets that room.")
    return tuple(said)


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _unreadable(raw: Mapping[str, Any], key: str, events: Sequence[Mapping[str, Any]], said: str,
                profiles: Iterable[str]) -> Explanation:
    spec = raw.get("spec") if isinstance(raw.get("spec"), Mapping) else {}
    status = raw.get("status") if isinstance(raw.get("status"), Mapping) else {}
    assert isinstance(spec, Mapping) and isinstance(status, Mapping)
    scheduler = str(spec.get("schedulerName") or "default-scheduler")
    return Explanation(pod=key, scheduler=scheduler, ours=scheduler in profiles,
                       phase=str(status.get("phase") or ""), node=str(spec.get("nodeName") or ""),
                       status=f"the scheduler cannot read this pod: {said}" if said else
                       "the scheduler cannot read this pod (see its InvalidObject Event)", reason="",
                       message="", nominated_node="", gang=None, gate="", devices=(), dry_run=None, terminating=(),
                       events=tuple(_event(event) for event in events))


def _finalizers(raw: Mapping[str, Any]) -> tuple[str, ...]:
    meta = raw.get("metadata")
    names = meta.get("finalizers") if isinstance(meta, Mapping) else None
    return tuple(str(name) for name in names) if isinstance(names, list) else ()


def _scheduling_gates(raw: Mapping[str, Any]) -> tuple[str, ...]:
    """The names of the pod's spec.schedulingGates, in their order."""
    spec = raw.get("spec")
    gates = spec.get("schedulingGates") if isinstance(spec, Mapping) else None
    return tuple(str(gate.get("name")) for gate in gates if isinstance(gate, Mapping)) if isinstance(gates, list) else ()


def _fence_refused(events: Sequence[Mapping[str, Any]]) -> bool:
    """The pod's latest FailedScheduling Event is a leader's term fence refused on it (the loop's
    `_fence_refused`, one per pod and term): that leader decides nothing until the write
    succeeds. Times are compared as times (`seen_at`: an eventTime has microseconds, an older
    Event's deprecatedLastTimestamp whole seconds). A later FailedScheduling (an attempt since)
    says the fence was written; whether a term fenced the pod since without an attempt yet is the
    pod's token against the term leading now (`with_leader`)."""
    failed = [event for event in events if event.get("reason") == "FailedScheduling"]
    if not failed:
        return False
    latest = max(failed, key=lambda event: seen_at(last_seen(event)))
    return str(latest.get("note") or "").startswith(FENCE_REFUSED)


NOT_TRIED = "pending: not tried yet"
_GATES_SHOWN = 5  # a pod's spec.schedulingGates named on its Status line, at most
# the Gate line without the allocation gate: "-" alone read as "no gates" right under a Status
# naming spec.schedulingGates
NO_ALLOCATION_GATE = "- (Tessera's allocation gate: neither held nor waited for)"
FENCE_STATUS = ("pending, not tried: the leader's term fence could not be written onto it (FailedScheduling in "
                "Events): the leader schedules nothing until every pending pod carries it (TesseraTermFenceStuck; "
                "docs/operations.md)")
# a refusal with no current term to judge it by (`with_leader`)
FENCE_UNKNOWN = ("pending: a leader's term fence could not be written onto it earlier (FailedScheduling in Events); "
                 "whether it still holds the pod is unknown: {why}, so no current term to compare the pod's "
                 "tessera.dev/term with")


def _status(state: ClusterState, pod: Pod, ours: bool, reason: str, gate_node: str, gates: bool,
            finalizers: Sequence[str], gated: str, fence_refused: bool = False, preempted_for: str = "",
            other: str = "", scheduling_gates: Sequence[str] = ()) -> str:
    """The verdict in one line; `other`: what a pod of Tessera's under a profile the configuration
    does not have waits with (it is not "not scheduled by Tessera"); `scheduling_gates`: the names
    of its spec.schedulingGates (which admission layer holds it: Kueue's, a capacity probe's)."""
    mark = pod.preemption_mark
    # a preemption's victim says so (its DisruptionTarget condition), and a finalizer is what may keep it
    why = f", preempted by {mark.scheduler or 'a scheduler'}{preempted_for}" if mark is not None and pod.node_name \
        else ""
    kept = f"; finalizers: {', '.join(finalizers)}" if finalizers else ""
    if pod.terminal:
        # the core releases a finished pod's devices (and all it charged) at once, deleted or not
        deleting = f"being deleted{kept}; " if pod.meta.deleting else ""
        return (f"{pod.phase}" + (f" on {pod.node_name}" if pod.node_name else "") + why
                + (f" ({deleting}a finished pod holds no devices)" if deleting or why or pod.devices else ""))
    if pod.node_name and pod.meta.deleting:
        # kubectl's "Terminating": still bound and holding what it holds, but not "bound" as a running pod is
        return f"terminating on {pod.node_name}{why} (being deleted; what it holds is freed when it is gone{kept})"
    if pod.node_name and (info := state.nodes.get(pod.node_name)) is not None and info.node is None:
        # its Node deleted under it (or never created): nothing runs it, and upstream's PodGC removes it
        return f"bound to {pod.node_name}, whose Node object is gone: it keeps what it holds {removed_by_podgc(False)}"
    if pod.node_name:
        return f"bound to {pod.node_name}" + (", waiting for the node agent to hand out its devices" if gates else "")
    if pod.meta.deleting:
        return "being deleted"
    if not ours and other:
        return other
    if not ours:
        return (f"not scheduled by Tessera: spec.schedulerName is {pod.scheduler_name} "
                f"(Tessera's profiles: {', '.join(sorted(state.scheduler_names))})")
    if pod.gated:
        named = f" ({first_few(scheduling_gates, _GATES_SHOWN)})" if scheduling_gates else ""
        return f"has spec.schedulingGates{named}: no scheduler considers it until they are removed"
    if gated:  # a PreEnqueue plugin's gate writes no condition: say it here
        return f"pending, not tried: {gated}"
    if reason == WAITING_FOR_ALLOCATION:
        return f"assigned to {gate_node or 'a node'}; its Binding waits for the allocation gate"
    if reason:
        return f"pending: {reason}"
    if fence_refused:
        return FENCE_STATUS
    return NOT_TRIED


def _gate(state: ClusterState, pod: Pod, waiting_on: str, gates: bool) -> str:
    if waiting_on and not pod.node_name:
        return f"waits for the allocation gate of {waiting_on} (see Message)"
    info = state.nodes.get(pod.node_name) if pod.node_name else None
    resources = info.allocating.get(pod.uid) if info is not None else None
    if gates and resources:
        return (f"holds the allocation gate on {pod.node_name} for {', '.join(sorted(resources))}: other pods asking "
                "for them there wait until the node agent marks this one Allocated")
    return ""


def _devices(pod: Pod) -> tuple[DeviceLine, ...]:
    return tuple(DeviceLine(container, resource, grant.device, grant.device_id,
                            format_quantity(grant.amount) if grant.amount is not None else "")
                 for container, by_resource in sorted((pod.devices or {}).items())
                 for resource, grants in sorted(by_resource.items()) for grant in grants)


def _event(event: Mapping[str, Any]) -> EventLine:
    series = event.get("series") or {}
    count = int(series.get("count") or event.get("deprecatedCount") or 1)
    return EventLine(last_seen(event), str(event.get("type") or ""), str(event.get("reason") or ""), count,
                     str(event.get("reportingController") or (event.get("deprecatedSource") or {}).get("component")
                         or ""), str(event.get("note") or ""))


def _dry_run(objects: Sequence[dict[str, Any]], pods: frozenset[str], key: str, config: SchedulerConfig,
             now: float) -> DryRun | None:
    """Pod `key` (with `pods`: itself, its pending gang siblings and the nominated pods ahead of
    it) through a fresh core that knows the listed cluster without its other pending pods."""
    core = Scheduler(config, explain=True)
    load(core, [obj for obj in objects if obj.get("kind") != "Pod" or is_bound(obj) or _key(obj) in pods], now)
    while (attempts := core.schedule_next(now)) is not None:
        for attempt in attempts:
            if attempt.pod.key != key:
                continue
            weights = core.profiles[attempt.pod.scheduler_name].weights()
            verdicts = [NodeVerdict(scored.node, True, score_sum(scored.total, scored.scores), scored.scores)
                        for scored in node_scores(attempt.scores, weights)]
            verdicts += [NodeVerdict(node, False, _naming_blockers(core.state, attempt.pod, node, reason))
                         for node, reason in sorted((attempt.filtered or {}).items())]
            # a gang's victims ride on its first member's attempt; every member is nominated
            victims = attempt.preempted or [victim for other in attempts for victim in other.preempted]
            reasons = {uid: why for other in attempts for uid, why in other.victim_reasons.items()}
            return DryRun(attempt.node or "", attempt.message, attempt.deferred,
                          tuple(victim.key for victim in victims), tuple(verdicts), attempt.nominated_node or "",
                          tuple(sorted(attempt.tied)) if attempt.node else (), attempt.tied_count if attempt.node else 0,
                          attempt.score if attempt.node else None,
                          tuple(reasons.get(victim.uid, "") for victim in victims))
    gated = core.gated().get(key)  # a PreEnqueue plugin keeps it out of the queue: never tried
    return DryRun("", gated, False, (), ()) if gated is not None else None


def _naming_blockers(state: ClusterState, pod: Pod, node: str, reason: str) -> str:
    """A filter's reason for `node` with what it leaves unnamed (upstream's wording, which the
    pod's status keeps): the taint the pod does not tolerate, the pods whose anti-affinity keeps it
    off; on a node some or all of whose GPUs no ExtendedResource describes yet, why a class
    request finds none of those (`view.cluster.undescribed`). Only explain's node table says them:
    the on-call reader's next question is which (or why)."""
    info = state.nodes.get(node)
    if info is None or info.node is None:
        return reason
    note = undescribed(state, info)
    if note and any(f"Insufficient {name}" in reason for name in pod.requests if state.classes.is_class_resource(name)):
        reason = f"{reason}: {note}"
    room = _device_room(state, pod, info, reason)
    if room:
        reason = f"{reason}: {room}"
    taint = untolerated_taint(info.node, pod) if UNTOLERATED in reason else None
    if taint is not None:
        reason = reason.replace(UNTOLERATED, f"{UNTOLERATED}: {taint}")
    blocking = repelled_by(state, pod, node) if EXISTING in reason else []
    if blocking:
        named = ", ".join(f"{other.key} (on {on})" for other, on in blocking)
        reason = reason.replace(EXISTING, f"{EXISTING}: {named}")
    return reason


def _device_room(state: ClusterState, pod: Pod, info: NodeInfo, reason: str) -> str:
    """For a class's `Insufficient <resource>` on the node (a plain count request's:
    `_count_room`): for a sharing class, the largest slice one of its GPUs has room for, in whole
    units of the class (a container's slice goes on one GPU, so room spread over several does not
    add up, and the planner takes whole units), beside the slices asked (each container's when
    several ask: those running together add up on a GPU they share); for a whole-GPU class, how
    many of the GPUs it matches are free beside those asked; and the matching GPUs that take no
    slice, or no pod (held whole, in use, cordoned, a deviceID named twice, unhealthy, no capacity
    of the class's dimension, idle beyond the node's `nvidia.com/gpu` count, or in use where its
    pods use more GPUs than it counts: an idle GPU's room beside a used-up count is none the pod
    could get), or that none matches: the rooms and reasons are the planner's (`slice_rooms`), so
    explain cannot tell another story. Upstream's reason names the resource alone, and the pod's
    condition counts the nodes by it (`4 Insufficient <resource>`), so only explain says it (a
    HAMi team's trial: 14Gi asked with 13Gi free on one GPU read the same as a full node; a
    node-maintenance trial: 6 of 8 GPUs unhealthy read the same as 8 in use)."""
    context = prepare(pod, state.classes)
    requests = [req for req in context.device_requests if reason == f"Insufficient {req.resource_name}"]
    if not requests:
        return _count_room(state, info, reason, context.plain)
    cls, sharing = requests[0].cls, requests[0].cls.sharing
    rooms = slice_rooms(state, info, cls)
    if not rooms:
        return f"no GPU of the node matches class {cls.name}"
    none = Counter(room for room in rooms.values() if isinstance(room, str))
    if sharing is None:
        asked = sum(req.count for req in requests)
        found = [f"{len(rooms) - sum(none.values())} free of {len(rooms)} matching GPUs ({asked} asked)"]
        taking = "pod"
    else:
        free = [max(room, 0) // sharing.unit * sharing.unit for room in rooms.values() if not isinstance(room, str)]
        sliced = f"{format_quantity(requests[0].count * sharing.unit)} asked" if len(requests) == 1 else \
            "asked: " + ", ".join(f"{format_quantity(req.count * sharing.unit)} by {req.container}" for req in requests)
        found = [f"largest free slice on one GPU: {format_quantity(max(free))} ({sliced})"] if free else []
        taking = "slice"
    if none:
        found.append(f"matching GPUs that take no {taking}: {_reasons(none)}")
    return "; ".join(found)


def _count_room(state: ClusterState, info: NodeInfo, reason: str, plain: Iterable[tuple[str, int]]) -> str:
    """For a plain count request's `Insufficient <resource>` (`nvidia.com/gpu: 1`) on a node whose
    ExtendedResources describe GPUs of it: the count's free GPUs (`NodeResourcesFit`'s: the
    allocatable less what is in use, no more than `ClusterState.count_room`) of its allocatable
    beside those asked, and why the others take no pod: idle ones by `Device.unschedulable_because`
    (the rule the slice lines and the planner use), the rest in use (`NodeInfo.used`: plain
    requests, GPUs class pods or holds use). "" for any other reason."""
    asked = next((amount for resource, amount in plain if reason == f"Insufficient {resource}"
                  and info.described(resource)), None)
    if asked is None or info.node is None or info.hides_devices_of(reason.removeprefix("Insufficient ")):
        return ""  # an unreadable device annotation makes none free (`NodeInfo.hides_devices_of`): no count to tell
    resource = reason.removeprefix("Insufficient ")
    allocatable, used = info.node.allocatable.get(resource, 0), info.used(resource)
    free = max(0, min(allocatable - used, state.count_room(info).get(resource, allocatable)))
    ledger = state.ledger
    none = Counter(device.unschedulable_because for device in info.devices.values()
                   if device.resource_name == resource and not device.schedulable
                   and not ((use := ledger.use.get(device.name)) is not None and use.busy))
    why = [_reasons(none)] if none else []
    why += [f"{used} {IN_USE}"] if used else []
    return f"{free} free of {allocatable} ({asked} asked)" + (f"; {', '.join(why)}" if why else "")


def _reasons(counted: Counter[str]) -> str:
    """Why GPUs take no new pod, counted (`2 held whole, 6 unhealthy`), in one order for every line."""
    order = (HELD_WHOLE, IN_USE, CORDONED_DEVICE, DUPLICATE_DEVICE, UNHEALTHY_DEVICE)
    named = sorted(counted, key=lambda why: (order.index(why) if why in order else len(order), why))
    return ", ".join(f"{counted[why]} {why}" for why in named)


def as_dict(explanation: Explanation) -> dict[str, Any]:
    out: dict[str, Any] = plain(explanation)
    return out


def dry_run_verdict(run: DryRun, said: str = "") -> str:
    """The dry run's verdict in one line: where the pod would go, or why it would stay pending,
    with the victims its preemption would evict and the nodes tied with the one named. `said`: the
    message of the pod's condition shown above it ("" when none). The same long message printed
    twice hid a changed reason, so the same one is referred to, and a different one is marked as
    the current one (the condition is the scheduler's last attempt)."""
    compared = bool(said) and not run.unknown
    message = "(same as Message above)" if compared and run.message == said else run.message
    now = " (now; Message above is the scheduler's last attempt)" if compared and run.message != said else ""
    if run.unknown:
        verdict = f"cannot tell: {message}"
    elif run.node and run.held:
        verdict = f"would go to {run.node}{now}, its Binding held by the allocation gate: {message}"
    elif run.node:
        verdict = f"would go to {run.node}"
    elif run.nominated:
        verdict = f"would stay pending{now}, nominated to {run.nominated} (preemption makes room there): {message}"
    else:
        verdict = f"would stay pending{now}: {message}"
    if run.preempts:
        verdict += f"; preemption would evict {listed_all(run.preempts, run.preempt_reasons)}"
    if run.tied_count:
        verdict += f"; {tie_note(run.tied_with, run.tied_count, run.score)}"
    return verdict


def render(x: Explanation, now: float) -> str:
    """The explanation for a terminal: `describe`-style fields, then the dry run and the Events
    (their age as of `now`)."""
    gang = ""
    if x.gang is not None:
        g = x.gang
        minimum = "its PodGroup is not known" if g.minimum is None else f"min {g.minimum}"
        gang = (f"{g.gang}: {g.members} member{'' if g.members == 1 else 's'} ({minimum}), {g.placed} placed, "
                + (f"{g.leaving} leaving, " if g.leaving else "") + f"{g.pending - g.gated} waiting"
                + (f", {g.gated} gated" if g.gated else "") + f"; phase {g.phase}" + (f"; {g.message}" if g.message else ""))
    profile = ("" if x.ours else " (a Tessera profile the configuration does not have)" if x.other_profile
               else " (not a Tessera profile)")
    fields = [("Pod:", x.pod), ("Scheduler:", x.scheduler + profile),
              ("Status:", x.status)]
    if x.leader is not None:
        fields.append(("Leader:", x.leader.message))
        if x.leader.drift:
            fields.append(("Warning:", x.leader.drift))
    fields.append(("Node:", x.node or "-"))
    if x.reason:
        fields += [("Reason:", x.reason), ("Message:", x.message)]
    if x.nominated_node:
        fields.append(("Nominated:", f"{x.nominated_node} (preemption made room there)"))
    held = ("" if x.devices else f"released: the pod is {x.phase}; its annotation names {x.released}, which the "
            "scheduler counts free" if x.released else "-")
    if x.counted:
        plain_count = f"{x.counted} counted, no device objects (the device plugin picks the GPUs)"
        held = f"{held}; {plain_count}" if held not in ("", "-") else plain_count
    fields.append(("Gang:", gang or "-"))
    if x.ignored:
        fields.append(("Not read:", x.ignored))
    if x.volumes:
        fields.append(("Volumes:", x.volumes))
    # the allocation gate, not spec.schedulingGates (the Status line names those)
    fields += [("Gate:", x.gate or NO_ALLOCATION_GATE), ("Devices:", held)]
    width = max(len(label) for label, _ in fields)
    lines = [f"{label.ljust(width)}  {value}".rstrip() for label, value in fields]
    if x.devices:
        table = columns([["CONTAINER", "RESOURCE", "DEVICE", "DEVICE ID", "AMOUNT"]]
                        + [[d.container, d.resource, d.device, d.device_id, d.amount or "whole"] for d in x.devices])
        lines += ["  " + line for line in table.splitlines()]
    if x.dry_run is not None:
        run = x.dry_run
        verdict = dry_run_verdict(run, x.message if x.reason else "")
        config = configuration(x.config)
        when = ("once its spec.schedulingGates are removed (they keep it out of every scheduler now)"
                if x.ungated else "as if it were next")
        lines += ["", f"Dry run through the core with {config}, now, {when} (nothing is written; {FRESH}):",
                  f"  {verdict}"]
        fitting = sum(1 for v in run.nodes if v.fits)
        if not run.node and fitting and x.gang is not None:
            # the table is this member's attempt in its gang's dry run; without this it reads as a contradiction
            lines.append(f"  Tried in its gang's dry run (any members tried before it in place), it would fit "
                         f"{fitting} of {len(run.nodes)} nodes (below), but a gang is placed whole or not at all.")
        if run.nodes:
            table = columns([["NODE", "RESULT"]]
                            + [[v.node, ("fits, " if v.fits else "") + v.detail] for v in run.nodes])
            lines += ["  " + line for line in table.splitlines()]
        if x.classes:
            lines += [f"  ResourceClasses: {line}" for line in x.classes]
        if x.terminating:
            lines.append("  Pods being deleted still hold devices (freed when they are gone): "
                         + "; ".join(x.terminating))
        if x.beyond_every_node:
            lines.append("  It asks for more than any node has, so it cannot fit anywhere as it is: "
                         + "; ".join(x.beyond_every_node))
        if x.beyond_the_cluster:
            lines.append(f"  {x.beyond_the_cluster}")
        if x.beyond_min_resources:
            lines.append(f"  {x.beyond_min_resources}")
        if x.missing_named_nodes:
            missing = ", ".join(x.missing_named_nodes)
            lines.append(f"  It may only go to nodes it names by metadata.name, and {missing} "
                         f"{'does' if len(x.missing_named_nodes) == 1 else 'do'} not exist.")
        lines += [f"  {line}" for line in x.unadvertised]
        if x.missing_podgroup:
            lines.append(f"  {x.missing_podgroup}")
        lines += [f"  {line}" for line in x.unmatched_selector]
        if x.too_few_members:
            lines.append(f"  {x.too_few_members}")
        lines += [f"  {line}" for line in x.room_kept]
    lines += ["", "Events:" + (f" cannot be read: {x.events_unread}" if x.events_unread
                               else " <none>" if not x.events else "")]
    if x.events:
        table = columns([["LAST SEEN", "TYPE", "REASON", "COUNT", "FROM", "MESSAGE"]]
                        + [[age(e.last_seen, now), e.type, e.reason, str(e.count), e.source, e.message] for e in x.events])
        lines += ["  " + line for line in table.splitlines()]
    return "\n".join(lines)
