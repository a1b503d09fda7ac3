"""Cluster snapshot -> view model: what the core's state says about every node, GPU and waiting pod.

Read from the core's own `ClusterState` (the device ledger, placements, the gang index), never
recomputed from raw objects, so a GPU shows as held exactly when the scheduler counts it held.
What the state does not keep is passed in: why a pending pod waits (`reasons`: a live loop's last
attempt, a listed pod's PodScheduled condition, a replay's final attempt), which placed pods the
allocation gate holds (`held`, live only) and the recent decisions. A pod a PreEnqueue plugin
gates (`Scheduler.gated()`) has no attempt to say why: its gate is read from the core.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from scheduler.api.quantity import Amount, format_alike, format_quantity
from scheduler.core.annotations import DEVICES
from scheduler.core.capacity import ClusterTotals, and_never_fits
from scheduler.core.classes import ResourceClass
from scheduler.core.framework.attempt import Attempt
from scheduler.core.objects import Device, gang_name
from scheduler.core.plugins.coscheduling import group_status, waiting_message
from scheduler.core.plugins.taints import keeps_pods_off
from scheduler.core.resources import CPU, is_extended
from scheduler.core.scheduler import WAITING_FOR_ALLOCATION, Scheduler
from scheduler.core.plugins.devices.args import DeviceArgs
from scheduler.core.plugins.devices.gate import AllocationGate
from scheduler.core.state import ClusterState, DeviceUse, NodeInfo
from scheduler.core.state.ledger import UNTOLD, over_text
from scheduler.view import model as m
from scheduler.view.text import duration

GPU = "nvidia.com/gpu"  # counted as GPUs on nodes without ExtendedResources
NO_NODE = "no Node object: no pod is placed on this node"  # why its free GPUs are fenced
# a node that advertises GPUs before any node agent published them (a new node, an agent not yet
# running): its GPUs are free to plain count requests, a class pod finds none of its class there
PARTLY_UNDESCRIBED = f"no ExtendedResource describes yet: only plain {GPU} pods can use them"
UNDESCRIBED = f"no ExtendedResource describes this node's GPUs yet: only plain {GPU} pods can use them"
# a pending pod a PreEnqueue plugin keeps out of the queue (never attempted since): Kubernetes'
# word for a pod held before scheduling; the message names the gate ("gated by Coscheduling: ...")
SCHEDULING_GATED = "SchedulingGated"
# a pod held by spec.schedulingGates: the PodScheduled=False condition the apiserver gives it at
# creation (pkg/registry/core/pod/strategy.go applySchedulingGatedCondition), reason SCHEDULING_GATED
GATES_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"


@dataclass(frozen=True, slots=True)
class WaitReason:
    """Why a pending pod waits, as the scheduler last said it."""

    reason: str  # Unschedulable, WaitingForAllocation, ...
    message: str
    node: str = ""  # the node it is assigned to while the allocation gate holds its Binding


def build_view(scheduler: Scheduler, *, source: str, now: float,
               reasons: Mapping[str, WaitReason] | None = None, held: Sequence[Attempt] = (),
               decisions: Sequence[m.Decision] = (), diverged: Mapping[str, str] | None = None,
               overruled: Mapping[str, str] | None = None,
               input_warnings: Sequence[m.InputWarning] = (), devices_unread: bool = False) -> m.ClusterView:
    """The view of `scheduler`'s state. `reasons` by pod key; `held`: attempts whose Binding a
    permit plugin holds (`Scheduler.held()`); `decisions` newest first; `diverged`: a replay's
    nodes where a recorded Binding landed on its own placements (`ReplayStats.diverged`), whose
    overcommit is that and not another scheduler's; `overruled`: a replay's pods a recorded Binding
    put elsewhere than its own decision (`ReplayStats.overruled`), by pod key; `input_warnings`:
    what a replay said of its input (its stderr lines: the core's notices, unreadable lines);
    `devices_unread`: the state was fed without ExtendedResources (a listing that could not read
    them): a GPU pods' annotations name is in use as they say, not a ghost (`_unavailable`).
    A pod gated at PreEnqueue reads its gate, not a blank (it is never attempted, so no reason
    comes for it) nor its last attempt's reason from before its gang lost a member (the gate is
    why it waits now). A pod held by
    spec.schedulingGates is pending too (kube-scheduler's "gated" queue), with the condition the
    apiserver wrote on it (a replay's pods have none written)."""
    state = scheduler.state
    waits = dict(reasons or {})
    waits.update((key, WaitReason(SCHEDULING_GATED, why)) for key, why in scheduler.gated().items())
    waits.update((state.pods[uid].key, WaitReason(SCHEDULING_GATED, GATES_MESSAGE)) for uid in state.gated
                 if uid in state.pods)
    for attempt in held:
        waits[attempt.pod.key] = WaitReason(WAITING_FOR_ALLOCATION, attempt.message, attempt.node or "")
    facts = _facts(scheduler, now, frozenset(attempt.pod.uid for attempt in held), diverged, devices_unread)
    gate_waiters: dict[str, list[str]] = {}
    for key, wait in waits.items():
        pod = state.pod_by_key(key)
        if wait.node and pod is not None and (pod.uid in state.pending or pod.uid in facts.held):
            gate_waiters.setdefault(wait.node, []).append(key)
    built = [_node(facts, info, sorted(gate_waiters.get(info.name, ())))
             for info in sorted(_shown_nodes(state), key=lambda info: info.name)]
    nodes = tuple(node for node, _ in built)
    counts: Counter[tuple[str, str]] = Counter()
    for _, node_counts in built:
        counts.update(node_counts)
    pending = _pending(state, waits, facts.held)
    return m.ClusterView(
        source=source,
        generated=now,
        nodes=nodes,
        pending=pending,
        gangs=_gangs(state, pending, facts.held, scheduler.cluster_totals()),
        summary=_summary(nodes, counts, frozenset(info.name for info in state.nodes.values() if info.node is not None
                                                  and any(keeps_pods_off(taint) for taint in info.node.taints))),
        decisions=tuple(decisions),
        profiles=tuple(sorted(scheduler.config.scheduler_names)),
        overruled=tuple(m.Overruled(key, why) for key, why in (overruled or {}).items()),
        input_warnings=tuple(input_warnings),
    )


@dataclass(frozen=True, slots=True)
class _Facts:
    """What one build knows beyond a node: the state, held Bindings, and where the gate holds."""

    state: ClusterState
    held: frozenset[str]  # pod uids whose Binding the allocation gate holds
    gate_timeout: float | None  # None: no profile runs the allocation gate
    now: float
    diverged: dict[str, str]  # node -> "binds A there, where this replay had placed B"
    agent_timeout: float  # agentHeartbeatTimeoutSeconds (`agent_timeout`)
    # fed without ExtendedResources (they could not be read): every device is known from its
    # holders' annotations alone, its object unread, not gone (`_unavailable`)
    devices_unread: bool = False

    def gate_holds(self, info: NodeInfo) -> bool:
        """The allocation gate holds on this node: a node agent serves it (a fresh heartbeat)."""
        return self.gate_timeout is not None and info.agent_serves(self.now, self.gate_timeout)

    def agent_silent_for(self, info: NodeInfo) -> float | None:
        """Seconds since the last heartbeat of the node's agent when it has gone silent (over
        `agent_timeout`) while the node still has devices it published; None otherwise."""
        return info.agent_silent_for(self.now, self.agent_timeout) if info.devices else None


def gate_timeout(scheduler: Scheduler) -> float | None:
    """The agent heartbeat timeout of the profiles' allocation gate (None when it is off)."""
    return _timeouts(scheduler)[0]


def agent_timeout(scheduler: Scheduler) -> float:
    """`agentHeartbeatTimeoutSeconds`: how old a node agent's last heartbeat may be before the
    agent counts as gone — the allocation gate's (of a profile running it, else of any), also when
    the gate is off (a silent agent's published health is stale all the same); the default without
    a TesseraDevices plugin."""
    return _timeouts(scheduler)[1]


def _timeouts(scheduler: Scheduler) -> tuple[float | None, float]:
    """(`gate_timeout`, `agent_timeout`) from one walk over the profiles' plugins."""
    gates = [gate for runtime in scheduler.profiles.values() for plugin in runtime.plugins.values()
             for gate in [getattr(plugin, "gate", None)] if isinstance(gate, AllocationGate)]
    enabled = next((gate for gate in gates if gate.enabled), None)
    chosen = enabled or (gates[0] if gates else None)
    return (enabled.timeout if enabled is not None else None,
            chosen.timeout if chosen is not None else float(DeviceArgs().agent_heartbeat_timeout_seconds))


def _facts(scheduler: Scheduler, now: float, held: frozenset[str] = frozenset(),
           diverged: Mapping[str, str] | None = None, devices_unread: bool = False) -> _Facts:
    """The `_Facts` of one build or count at `now`: both timeouts from one walk (`_timeouts`)."""
    gate, agent = _timeouts(scheduler)
    return _Facts(scheduler.state, held, gate, now, dict(diverged or {}), agent, devices_unread)


def silent_agents(scheduler: Scheduler, *, now: float) -> dict[str, float]:
    """The schedulable nodes whose node agent heartbeated once but not within `agent_timeout` at
    `now`, with the seconds since its last heartbeat (what `tessera_node_agents_silent` counts:
    `GpuCounts.agents_silent`): their devices' health is what the agent last published. A
    cordoned node is left out: out of service on purpose (the runbook's step while an agent is
    down), it is no page — the alert would never clear during maintenance; `kubectl tessera
    nodes` still says it in REASON."""
    facts = _facts(scheduler, now)
    found = {info.name: _silent_in_service(facts, info) for info in _shown_nodes(scheduler.state)}
    return {name: seconds for name, seconds in sorted(found.items()) if seconds is not None}


def _silent_in_service(facts: _Facts, info: NodeInfo) -> float | None:
    """`_Facts.agent_silent_for` of a schedulable node (`silent_agents`); None for a cordoned
    node and for one without a Node object."""
    if info.node is None or info.node.unschedulable:
        return None
    return facts.agent_silent_for(info)


def gate_holds(scheduler: Scheduler, node: str, now: float) -> bool:
    """The allocation gate holds on `node`: a profile runs it and a node agent serves the node."""
    info = scheduler.state.nodes.get(node)
    timeout = gate_timeout(scheduler)
    return info is not None and timeout is not None and info.agent_serves(now, timeout)


# --- nodes and GPUs -------------------------------------------------------------------------


def _node(facts: _Facts, info: NodeInfo, gate_waiters: list[str]) -> tuple[m.NodeView, Counter[tuple[str, str]]]:
    """The node's view, and its GPUs as the summary counts them (`_count`)."""
    state = facts.state
    fence = _fence_reason(state, info)
    rows = _rows(facts, info, fence)
    gpus, beyond = _gpus(facts, info, rows)
    counts: Counter[tuple[str, str]] = Counter()
    _count(info, rows, counts)
    node = info.node
    notes: list[str] = []
    if node is None and info.pods:
        bound = sorted(_key(state, uid) for uid in info.pods)
        one = len(bound) == 1
        notes.append(f"{m.NODE_DELETED}: {', '.join(bound)} {'stays' if one else 'stay'} bound and "
                     f"{'holds what it holds' if one else 'hold what they hold'} {removed_by_podgc(not one)}")
    elif node is None:
        notes.append("no Node object: only its devices are known")
    # with ExtendedResources unread, which GPUs they describe is unknown, not none
    if not facts.devices_unread and (note := undescribed(state, info)):
        notes.append(note)
    if facts.gate_holds(info):
        for uid, resources in sorted(info.allocating.items(), key=lambda item: _key(state, item[0])):
            if uid not in facts.held:
                notes.append(f"allocation gate held by {_key(state, uid)}: the node agent has not handed out "
                             f"its {', '.join(sorted(resources))} yet")
    notes += [f"{key} waits for the allocation gate" for key in gate_waiters]
    silent = facts.agent_silent_for(info)
    if silent is not None:
        notes.append(_silent_note(facts, info, silent))
    if fence:
        notes.append(f"{fence}: it holds the GPUs shown for it, and what else it may hold is unknown, so the "
                     "node's other GPUs are fenced (none is given out) until the annotation is fixed or the pod "
                     "is gone")
    over = _over_capacity(info)
    notes += [f"{o.resource} overcommitted: {o.used} in use, {o.capacity} {info.capacity_words(o.resource)} "
              f"({_why_over(facts, info, o.resource)})" for o in over]
    leaving = bool(beyond) and any((pod := state.pods.get(uid)) is not None and state.leaving(pod) for uid in info.pods)
    for resource, holders in beyond.items():
        nominated = {holder.pod for holder in holders if holder.status == m.NOMINATED}
        for pod_key, count in Counter(holder.pod for holder in holders).items():
            # a nominated preemptor's room is counted beside its victims, never in their stead
            notes.append(f"{pod_key}: {count} more {resource} kept for it (nominated here), shown on none: "
                         + ("they are held by pods being deleted here until those are gone" if leaving else
                            "the node's other pods leave no room for them (a nominated pod is counted "
                            "whether it fits or not, as upstream's nominator counts it)")
                         if pod_key in nominated else
                         f"{pod_key}: {count} {resource} counted beyond the node's GPUs (shown on none)")
    allocatable = node.allocatable.get(CPU, 0) if node is not None else 0
    # as the scheduler counts them: no pod goes to a cordoned node but one that tolerates it (a
    # fenced node's free GPUs, and a node's without a Node object, are already `fenced`, not `free`)
    takes_pods = node is not None and not node.unschedulable
    view = m.NodeView(
        name=info.name,
        cordoned=node is not None and node.unschedulable,
        gpus=gpus,
        gpus_used=sum(1 for gpu in gpus if gpu.state in m.IN_USE),
        gpus_free=sum(1 for gpu in gpus if takes_pods and gpu.state == m.FREE),
        # the rest of its GPUs (free ones of a cordoned node are neither: the summary counts those)
        gpus_unavailable=sum(counts.values()) - sum(1 for gpu in gpus if gpu.state in m.IN_USE or gpu.state == m.FREE),
        gpus_total=sum(counts.values()),
        conflicts=sum(1 for gpu in gpus if gpu.state == m.CONFLICT),
        over_capacity=over,
        agent_silent_for=silent,
        deleted=node is None and bool(info.pods),
        cpu=f"{info.requested.get(CPU, 0) / 1000:g}/{allocatable / 1000:g}",
        pods=len(info.pods),
        taints=tuple(str(t) for t in (node.taints if node is not None else ())),
        notes=tuple(notes),
    )
    return view, counts


def undescribed(state: ClusterState, info: NodeInfo) -> str:
    """The node's note when it allocates GPUs no ExtendedResource describes and a ResourceClass
    exists ("" otherwise): those rows read free with MODEL `-`, and count for the most free on one
    node (plain pods fit there), so the node's note, and explain's row for a class pod rejected
    there, say why a class pod does not use them. A node whose agent has published only some says
    how many are not (`UNDESCRIBED` is for none published: "this node's GPUs"). Without a class
    there is no class pod to explain: a cluster of plain count requests alone (no node agent) gets
    no note on every node. The count is the rows' (`_rows`): beyond what its ExtendedResources
    describe, less those the ledger's moved objects describe (`_parked`)."""
    if info.node is None or not state.classes.classes:
        return ""
    unknown = max(0, info.node.allocatable.get(GPU, 0) - info.described(GPU))
    unknown -= len(_parked(state, info.name, GPU)[:unknown])
    if not unknown:
        return ""
    return UNDESCRIBED if not info.devices else f"{unknown} of its GPUs {PARTLY_UNDESCRIBED}"


def removed_by_podgc(plural: bool) -> str:
    """Until when pods bound to a node without a Node object (deleted under them) keep what they
    hold: upstream's PodGC (pkg/controller/podgc gcOrphaned) waits out a 40 s quarantine, looking
    every 20 s, then marks each Failed with that condition and deletes it (grace period 0). Said by
    the node's note and by `explain` of such a pod."""
    them = "them" if plural else "it"
    return (f"until the PodGC (kube-controller-manager) marks {them} Failed and deletes {them}, 40 s after the Node "
            "is gone at the earliest (DisruptionTarget DeletionByPodGC: PodGC: node no longer exists)")


def _why_over(facts: _Facts, info: NodeInfo, resource: str) -> str:
    """Why more of `resource` is in use on the node than it has, as far as the listing tells."""
    state = facts.state
    if resource in info.cut_from:
        return f"its count went down from {info.cut_from[resource]}"
    if info.name in facts.diverged:
        return f"the recording {facts.diverged[info.name]}: the replay diverged from the cluster here"
    if state.only_ours_on(info):
        return ("every pod on it Tessera's: its count was cut below what its pods use, or a Binding Tessera did not "
                "decide took GPUs already given out")
    if not info.busy.get(resource, 0) - info.held_busy.get(resource, 0):  # no GPU of it handed out by class
        return ("all of it by plain count, which every scheduler sees: a pod bound with spec.nodeName, which no "
                "scheduler checks, or another scheduler deciding on an older view took GPUs already in use")
    return "pods of other schedulers hold GPUs that Tessera's classes gave out"


def _silent_note(facts: _Facts, info: NodeInfo, silent: float) -> str:
    """What a silent node agent means for the node: its GPUs' health is stale, the allocation gate
    (where a profile runs it) no longer holds there, and the pods it had yet to hand devices to
    stay Allocating."""
    note = (f"node agent silent: its last heartbeat (ExtendedResources' status.lastHeartbeatTime) is "
            f"{duration(silent)} old, over agentHeartbeatTimeoutSeconds {facts.agent_timeout:g}: the health its "
            "GPUs show is what it last published")
    if facts.gate_timeout is not None:
        note += ", and the allocation gate no longer holds here"
    waiting = sorted(_key(facts.state, uid) for uid in info.allocating)
    if waiting:
        note += (f"; {', '.join(waiting)} stay{'s' if len(waiting) == 1 else ''} tessera.dev/phase: Allocating "
                 f"until an agent hands out {'its' if len(waiting) == 1 else 'their'} devices")
    return note


def _over_capacity(info: NodeInfo) -> tuple[m.OverCapacity, ...]:
    """The node's device resources held beyond what it has (a note in the view, the metric's count)."""
    return tuple(m.OverCapacity(*found) for found in info.over_capacity(info.gpu_resources()))


def gpu_counts(scheduler: Scheduler, *, now: float, held: Sequence[Attempt] = ()) -> m.GpuCounts:
    """The GPUs by (model, state) as `build_view`'s summary counts them, those held beyond the
    nodes' capacity, and the nodes whose agent went silent (`silent_agents`), without building the
    view: each GPU classified by the same rules (`_rows`), but no holders, reasons, notes, pending
    pods or gangs. Each /metrics scrape runs this on the scheduler's event loop, where the whole
    view cost ten times the old per-device count (`python -m bench.scrape`): one walk over the
    nodes counts all three."""
    facts = _facts(scheduler, now, frozenset(attempt.pod.uid for attempt in held))
    states: Counter[tuple[str, str]] = Counter()
    overcommitted = 0
    silent = 0
    for info in _shown_nodes(facts.state):
        _count(info, _rows(facts, info, _fence_reason(facts.state, info), ordered=False), states)
        if info.node is not None:  # with devices or without: GPUs counted there (`NodeInfo.gpu_resources`)
            overcommitted += sum(o.used - o.capacity for o in _over_capacity(info))
        if info.node is not None and info.devices:  # no devices: no agent to be silent (`agent_silent_for`)
            silent += _silent_in_service(facts, info) is not None
    return m.GpuCounts(dict(states), overcommitted, silent)


def _shown_nodes(state: ClusterState) -> Iterator[NodeInfo]:
    """The nodes the views show: those with a Node object, devices, or pods bound to them (a Node
    deleted under its pods: what they hold is held until the PodGC deletes them)."""
    return (info for info in state.nodes.values() if info.node is not None or info.devices or info.pods)


def _fence_reason(state: ClusterState, info: NodeInfo) -> str:
    """Why the node is fenced (`NodeInfo.broken`): each pod whose device annotation cannot be
    read, and how (`default/bad: unreadable tessera.dev/devices annotation`); "" when it is not."""
    if not info.broken:
        return ""
    reasons = []
    for uid in sorted(info.broken, key=lambda uid: _key(state, uid)):
        pod = state.pods.get(uid)
        stripped = pod is not None and DEVICES not in pod.meta.annotations  # its phase says it was given devices
        reasons.append(f"{_key(state, uid)}: {f'{DEVICES} annotation missing' if stripped else f'unreadable {DEVICES} annotation'}")
    return "; ".join(reasons)


def _device_order(device: Device) -> tuple[int, str, str]:
    """By the devices' index; a held device no ExtendedResource described to this process (a ghost
    known only from its holder's annotation: no attributes, no capacity) first, as the node's
    GPUs it counts are; other devices without an index last."""
    index = device.attributes.get("index", "")
    described = bool(device.device_id) and bool(device.attributes or device.capacity)
    position = int(index) if index.isdecimal() and index.isascii() else (1 << 30 if described else -1)
    return (position, device.attributes.get("pciBusID", ""), device.name)


@dataclass(slots=True)
class _Row:
    """One GPU row of a node as classified (`_rows`), before the view dresses it with holders and
    reasons (`_gpus`): what the summary and the metric count, decided once for both."""

    device: Device | None  # None: a GPU the node only counts (allocatable beyond its devices)
    resource: str
    model: str
    state: str
    reason: str = ""  # why a free GPU is fenced
    counted: int = -1  # the node's counted request of `resource` shown here (its index), -1 for none
    surplus: bool = False  # fenced for being beyond the node's count: no GPU of its own
    # a GPU the node only counts: the object describing it, when one names the node but waits in
    # the ledger's `moved` (a pod elsewhere still holds it)
    described: Device | None = None


def _rows(facts: _Facts, info: NodeInfo, fence: str, ordered: bool = True) -> list[_Row]:
    """The node's GPU rows and their states: its devices, then GPUs it only counts (allocatable
    beyond its devices). Devices its pods hold that have no ExtendedResource any more are the
    ledger's ghosts (also when deleted before this core saw them, e.g. after a restart); plain
    count requests (`nvidia.com/gpu: 1`) fill the GPUs no device assignment holds: free ones
    first, then unhealthy or cordoned ones nobody holds (the device plugin picked one of those: no
    free one was left); more than that are shown on none. Free GPUs the core gives out to no pod
    are `fenced`: all of a node without a Node object (no pod is placed there), those of a
    resource an unreadable device annotation hides (`fence` says whose,
    `NodeInfo.hides_devices_of`), and free rows beyond the node's count (ExtendedResources
    describing more GPUs than it allocates, `NodeInfo.surplus_devices`: the core gives out no more
    than the count, so the last free rows go to no pod; which object is the surplus is unknown),
    listed after all the node's other rows: they are no GPU a pod can get or holds. On a node
    whose Node object is gone while pods are bound to it (deleted under them), what they ask by
    count beyond its devices' rows is shown as `ghost` rows held by them: they keep it until the
    PodGC deletes them, as a class pod keeps a device no object describes any more.
    Rows in the node's order (`_device_order`), which decides which row is shown as what; with
    `ordered` False, only when that could change the counts (`_count`, `_order_counts`; a /metrics
    scrape sorts no more than it must)."""
    state = facts.state
    devices = list(info.devices.values())
    if ordered or _order_counts(devices):
        devices.sort(key=_device_order)
    resources = list(dict.fromkeys(device.resource_name for device in devices))
    allocatable = info.node.allocatable if info.node is not None else {}
    if GPU not in resources and (GPU in allocatable or info.node is None and any(_count_holders(state, info, GPU))):
        resources.append(GPU)
    rows: list[_Row] = []
    surplus: list[_Row] = []
    for resource in resources:
        own = [device for device in devices if device.resource_name == resource]
        described = info.described(resource)
        unknown = max(0, allocatable.get(resource, 0) - described)
        asked = sum(n for _, n, _ in _count_holders(state, info, resource))
        taken = info.busy.get(resource, 0) + asked  # GPUs of the node's count in use
        why = "" if info.node is not None and not info.broken else \
            "; ".join(reason for reason in (NO_NODE if info.node is None else "",
                                            fence if info.hides_devices_of(resource) else "") if reason)
        # GPUs known only by count first: counted requests go there first
        parked = _parked(state, info.name, resource)[:unknown]
        mine = [_Row(None, resource, device.attributes.get("model", ""), m.FREE, described=device)
                for device in parked]
        # no object describes these: their model is unknown (shown `-`), whatever the node's
        # other devices or labels say
        mine += [_Row(None, resource, "", m.FREE) for _ in range(unknown - len(parked))]
        mine += [_Row(device, resource, _model(state, device), _device_state(facts, device)) for device in own]
        shown = 0
        free: list[_Row] = []
        for row in mine:
            if row.state != m.FREE:
                continue
            if shown < asked:
                row.state, row.counted = m.COUNTED, shown
                shown += 1
            elif why:
                row.state, row.reason = m.FENCED, why
            else:
                free.append(row)
        for row in mine if shown < asked else ():  # no free GPU left for these: the unavailable ones nobody holds
            if shown < asked and row.state in (m.UNHEALTHY, m.CORDONED) and not _held(state, row.device):
                row.counted = shown
                shown += 1
        if info.node is None:  # deleted under its pods: what they ask by count they hold until the PodGC deletes them
            bound = sum(n for _, n, nominated in _count_holders(state, info, resource) if not nominated)
            mine += [_Row(None, resource, "", m.GHOST, m.NODE_DELETED, counted) for counted in range(shown, bound)]
        room = max(0, allocatable[resource] - taken) if resource in allocatable else len(free)
        for row in free[room:]:
            count = allocatable[resource]
            row.state, row.surplus = m.FENCED, True
            row.reason = (f"the node counts {count} {resource}, all in use: no pod can get this one" if not room else
                          f"the node counts {count} {resource} but its ExtendedResources describe "
                          f"{described}: pods get {room} more, shown free on the others")
        rows += [row for row in mine if not row.surplus]
        surplus += [row for row in mine if row.surplus]
    return rows + surplus


def _order_counts(devices: Sequence[Device]) -> bool:
    """Whether the order of a node's devices can change what its GPUs count as (`_count`): when
    two of them name one GPU (under one resourceName or two: the last idle row of a deviceID is the
    one counted) or a resource's devices are of more than one model (which row a plain count
    request or a fence takes decides the model counted)."""
    if len({device.device_id or device.name for device in devices}) < len(devices):
        return True
    models: dict[str, set[str]] = {}
    for device in devices:
        models.setdefault(device.resource_name, set()).add(device.attributes.get("model", ""))
    return any(len(names) > 1 for names in models.values())


def _parked(state: ClusterState, node: str, resource: str) -> list[Device]:
    """The ExtendedResources of `resource` that name `node` but wait in the ledger's `moved` (they
    moved here while a pod on their old node held them): GPUs the node counts, described by them."""
    if not state.ledger.moved:
        return []
    return sorted((device for device in state.ledger.moved.values()
                   if device.node_name == node and device.resource_name == resource), key=_device_order)


def _described(state: ClusterState, device: Device) -> Device:
    """The object that describes the GPU (model, memory): the device's own, or, for a ghost known
    only from its holder's annotation (no attributes, no capacity) whose ExtendedResource is listed
    on another node now (it moved while held: the ledger's `moved`), that object."""
    if device.attributes or device.capacity:
        return device
    return state.ledger.moved.get(device.name, device)


def _model(state: ClusterState, device: Device) -> str:
    """A device's model as its row shows it and the summary and `tessera_devices_by_model` count
    it: what the object that describes it says (`_described`); for a ghost no object describes
    (known from its holders' annotations alone: a listing after its ExtendedResource went, where
    the leader that saw it still knows its model), the one model the classes its holders were
    granted it under select (`model: T4`), when they agree; "" (shown `-`) otherwise."""
    described = _described(state, device)
    if described.attributes or described.capacity:
        return described.attributes.get("model", "")
    use = state.ledger.use.get(device.name)
    holders = (state.pods.get(uid) for uid in (*use.exclusive, *use.shared)) if use is not None else ()
    granted = {resource for pod in holders if pod is not None for assignment in (pod.devices, pod.held_devices)
               for by_resource in (assignment or {}).values() for resource, grants in by_resource.items()
               if any(grant.device == device.name for grant in grants)}
    models = {_selected_model(state.classes.by_resource.get(resource)) for resource in granted}
    return models.pop() if len(models) == 1 else ""


def _selected_model(cls: ResourceClass | None) -> str:
    """The one model a class selects (`matchLabels: {model: T4}`, or `model In (T4)`), "" when it
    selects none or several."""
    values = [req.values[0] for req in (cls.requirements if cls is not None else ())
              if req.key == "model" and req.operator == "In" and len(req.values) == 1]
    return values[0] if len(set(values)) == 1 else ""


def _held(state: ClusterState, device: Device | None) -> bool:
    use = state.ledger.use.get(device.name) if device is not None else None
    return use is not None and use.busy


def _count(info: NodeInfo, rows: Sequence[_Row], counts: Counter[tuple[str, str]]) -> None:
    """Add the node's GPUs to `counts` by (model, `model.counted_as` state), as the summary and the
    metric count them: not its rows. Rows beyond its count (`_Row.surplus`) are no GPU; one
    deviceID under two ExtendedResources (or a held ghost and its new name) is one GPU, counted as
    the row in use if one is, else once in its last row's state."""
    ids = [row.device.device_id for row in rows if row.device is not None and row.device.device_id]
    gpus = _one_row_per_gpu(rows) if len(set(ids)) < len(ids) else rows
    if info.node is not None and info.node.unschedulable:
        counts.update((row.model, m.counted_as(row.state, True)) for row in gpus if not row.surplus)
    else:
        counts.update((row.model, row.state) for row in gpus if not row.surplus)


def _one_row_per_gpu(rows: Sequence[_Row]) -> list[_Row]:
    """The rows without the idle second names of a deviceID (all of them when a row of it is in use)."""
    names = Counter(row.device.device_id for row in rows if row.device is not None and row.device.device_id)
    second: Counter[str] = Counter()  # deviceID -> idle rows of it not to count
    for device_id, count in names.items():
        if count > 1:
            idle = sum(1 for row in rows if row.device is not None and row.device.device_id == device_id
                       and row.state not in m.IN_USE)
            second[device_id] = min(count - 1, idle)  # all idle: the last one counts
    kept = []
    for row in rows:
        if row.device is not None and second[row.device.device_id] > 0 and row.state not in m.IN_USE:
            second[row.device.device_id] -= 1
        else:
            kept.append(row)
    return kept


def _gpus(facts: _Facts, info: NodeInfo, rows: Sequence[_Row]) -> tuple[tuple[m.GpuView, ...], dict[str, list[m.Holder]]]:
    """The rows as the view shows them: who holds each GPU and why it is in its state; per
    resource the counted holders no GPU is left to show (more counted than it has)."""
    holders = {resource: _counted_holders(facts, info, resource) for resource in dict.fromkeys(row.resource for row in rows)}
    gpus: list[m.GpuView] = []
    for index, row in enumerate(rows):
        if row.device is None:
            memory = row.described.capacity.get("memory") if row.described is not None else None
            gpu = m.GpuView(index, "", "", row.resource, row.model, format_quantity(memory) if memory is not None else "",
                            row.state, 0.0, reason=row.reason)
            gpu = _placed(gpu, row.described)
        else:
            gpu = _device_gpu(facts, row.device, index, row.state, row.reason)
        if row.counted >= 0:
            holder = holders[row.resource][row.counted]
            reason = (gpu.reason if row.state == m.COUNTED else
                      f"{row.reason}, still held by {holder.pod}" if row.device is None else  # a deleted Node's
                      f"{gpu.state}; {holder.pod}'s {row.resource} request is counted here: no free GPU of the node "
                      "is left for it")
            gpu = replace(gpu, fill=1.0, holders=(holder,), reason=reason)
        gpus.append(gpu)
    beyond = {}
    for resource, counted in holders.items():
        shown = sum(1 for row in rows if row.resource == resource and row.counted >= 0)
        if counted[shown:]:
            beyond[resource] = counted[shown:]
    return tuple(gpus), beyond


def _count_holders(state: ClusterState, info: NodeInfo, resource: str) -> Iterator[tuple[str, int, bool]]:
    """(pod uid, GPUs, nominated) for each pod the node's GPUs of `resource` are counted for: its
    pods asking by count, then the nominated preemptors held here (the core counts those as taken:
    no pod of their priority or lower gets them)."""
    for uid in info.pods:
        placement = state.placements.get(uid)
        if placement is not None and placement.requests.get(resource, 0):
            yield uid, placement.requests[resource], False
    for uid, hold in state.holds.items():
        if hold.node == info.name and hold.placement.requests.get(resource, 0):
            yield uid, hold.placement.requests[resource], True


def _counted_holders(facts: _Facts, info: NodeInfo, resource: str) -> list[m.Holder]:
    """One holder per GPU counted (`_count_holders`): the node's pods in pod order, then the
    nominated preemptors."""
    state = facts.state
    requests = sorted(_count_holders(state, info, resource), key=lambda found: (found[2], _key(state, found[0])))
    return [holder for uid, count, nominated in requests
            for holder in [m.Holder(_key(state, uid), status=m.NOMINATED if nominated else _status(facts, info.name, uid))]
            * count]


def _holders(facts: _Facts, node: str, use: DeviceUse) -> tuple[m.Holder, ...]:
    state = facts.state
    whole = [m.Holder(_key(state, uid), status=_status(facts, node, uid)) for uid in use.exclusive]
    slices = [m.Holder(_key(state, uid), " + ".join(format_quantity(amount) for amount in held.values()),
                       _status(facts, node, uid))
              for uid, held in use.shared.items()]
    return tuple(sorted(whole, key=lambda h: h.pod) + sorted(slices, key=lambda h: h.pod))


def _slices_used(device: Device, dimensions: Mapping[str, Amount]) -> tuple[str, float]:
    """A sliced GPU's USE ("4Gi/16Gi"; "cores 10/100, memory 4Gi/16Gi" when classes of several
    dimensions share it, each of its own capacity; in one unit, "19360Mi/32768Mi" when a 1Mi and a
    1Gi class share it: `format_alike`) and fill (the fullest dimension's share)."""
    parts: list[str] = []
    fill = 0.0
    for dimension, amount in dimensions.items():
        capacity = device.capacity.get(dimension)
        parts.append("/".join(format_alike(amount, capacity)) if capacity else f"{format_quantity(amount)}/?")
        fill = max(fill, min(1.0, float(amount / capacity)) if capacity else 1.0)
    if len(parts) > 1:
        parts = [f"{dimension} {part}" for dimension, part in zip(dimensions, parts, strict=True)]
    return ", ".join(parts), fill


def _unavailable(facts: _Facts, device: Device, use: DeviceUse | None) -> str:
    """Why a device takes no new work, "" when it can: its ExtendedResource is gone (a ghost), it is
    unhealthy, or cordoned (an admin's spec.unschedulable, or one GPU under two names not held).
    With ExtendedResources unread (`_Facts.devices_unread`) the core knows each device from its
    holders' annotations alone, as a ghost made unhealthy and unschedulable
    (`DeviceLedger.hold_unseen`): its object is unread, not gone, and its health unknown, so it is none of those: it is in use
    as the annotations say (whole, or slices), the summary counting it so as everywhere."""
    state = facts.state
    if facts.devices_unread:
        return m.CORDONED if device.duplicate and use is None else ""
    if state.ledger.is_ghost(device.name):
        return m.GHOST
    if not device.healthy:
        return m.UNHEALTHY
    if device.unschedulable or (device.duplicate and use is None):
        return m.CORDONED
    return ""


def _device_state(facts: _Facts, device: Device) -> str:
    """A device's own state (`model.STATES`, the first that applies): claimed whole by more than
    one pod, or in slices by pods that together use more than it has (the ledger keeps every
    claimant: DeviceConflict), then unavailable, then how it is held."""
    state = facts.state
    name = device.meta.name
    use = state.ledger.use.get(name)
    if use is None and device.schedulable and not state.ledger.is_ghost(name):
        return m.FREE  # most GPUs: the rest of `_unavailable` says the same, slower
    unavailable = _unavailable(facts, device, use)
    if use is None:
        return unavailable or m.FREE
    if state.ledger.conflicting(use, name) and len({_key(state, uid) for uid in (*use.exclusive, *use.shared)}) > 1:
        return m.CONFLICT
    if unavailable:
        return unavailable
    if not facts.held.isdisjoint((*use.exclusive, *use.shared)):
        return m.GATED
    if use.exclusive:
        return m.WHOLE
    return m.SLICES if use.shared else m.FREE


def _device_gpu(facts: _Facts, device: Device, index: int, status: str, fenced: str) -> m.GpuView:
    """A device's row in its state (`_rows`), with its holders, the share in use and why it is
    in that state (`fenced`: why a free one is fenced)."""
    state = facts.state
    use = state.ledger.use.get(device.name)
    holders = _holders(facts, device.node_name, use) if use is not None else ()
    fill, used = 0.0, ""
    if use is not None and use.exclusive:
        fill = 1.0
    elif use is not None and use.shared:
        used, fill = _slices_used(device, state.ledger.shared_dimensions(use))
    unavailable = _unavailable(facts, device, use)
    claimants = list(dict.fromkeys(holder.pod for holder in holders))  # a pod with a whole device and slices once
    reason = fenced
    moved = state.ledger.moved.get(device.name)
    if unavailable == m.GHOST and moved is not None and holders:  # its object changed while held (the ledger's `moved`)
        if moved.node_name != device.node_name:
            reason = f"moved to node {moved.node_name} while held by {', '.join(claimants)}: it counts here until released"
        elif moved.device_id != device.device_id:
            reason = (f"its ExtendedResource now names deviceID {moved.device_id}; held by {', '.join(claimants)} "
                      "as this GPU until released")
        else:
            reason = (f"its ExtendedResource now names resourceName {moved.resource_name}; held by "
                      f"{', '.join(claimants)} as {device.resource_name} until released")
    elif unavailable and holders:  # held anyway: a grant naming it, or its holders from before it changed
        info = state.nodes[device.node_name]
        # on a Node deleted under its pods the Node is the cause (its ExtendedResources go with it),
        # as its plain pods' ghost rows say (`_rows`)
        what = (unavailable if unavailable != m.GHOST else
                m.NODE_DELETED if info.node is None and info.pods else "no ExtendedResource describes it any more")
        reason = f"{what}, still held by {', '.join(claimants)}"
    elif unavailable == m.CORDONED and device.duplicate:
        info = state.nodes[device.node_name]
        others = sorted(name for name, other in info.devices.items()
                        if other.device_id == device.device_id and name != device.name)
        reason = (f"deviceID {device.device_id} is also named by {', '.join(others)}: neither is given to a pod "
                  "until one is gone")
        elsewhere = state.ledger.elsewhere.get(device.node_name, {}).get(device.device_id, {})
        if not others and elsewhere:  # held under the name of a device held elsewhere (`ledger.hold_unseen`)
            held = ", ".join(sorted(f"{state.pods[uid].key if uid in state.pods else uid} (as {name})"
                                   for uid, name in elsewhere.items()))
            reason = f"deviceID {device.device_id} is held by {held}: not given to a pod until released"
    if status == m.CONFLICT:
        over = state.ledger.overfilled(device.name, use) if use is not None and not use.exclusive else []
        reason = (f"its slices use {over_text(over)}: shared by {len(claimants)} pods at once: " if over else
                  f"claimed by {len(claimants)} pods at once: ") + ', '.join(claimants) + \
            (f"; {unavailable} too" if unavailable else "") + \
            (f"; {UNTOLD}" if over and use is not None and state.ledger.untold(use) else "")
    elif not reason and use is not None and use.kept and (cut := state.ledger.capacity_cut(device.name, use)):
        reason = "; ".join("its {} went down to {} under {} held".format(dimension, *format_alike(capacity, used))
                           for dimension, used, capacity in cut) + \
            f" by {', '.join(claimants)}: they keep their slices, no more is given out until they fit"
    elif (not reason and use is not None and len(alone := state.ledger.holders(use)[1]) == 1 and not use.exclusive
          and (over := state.ledger.overfilled(device.name, use))):
        # one pod's slices over a capacity, not seen cut beneath them: no second holder to conflict with,
        # and the core never gives a slice beyond a capacity
        how = (UNTOLD if state.ledger.untold(use) else
               "given beyond it by a Binding Tessera did not decide (another scheduler, or a Binding by hand)")
        holder = next(iter(alone))
        reason = (f"its slices use {over_text(over)}, held by {_key(state, holder)} "
                  f"alone: {how}; no more of it is given out until they fit")
    other_nodes = state.device_ids.elsewhere(device.name) if device.device_id else []
    if other_nodes and state.device_ids.node_of(device.name) == device.node_name:  # not a held form it left behind
        named = ", ".join(f"{other} on node {node}" for other, node in other_nodes)
        two_nodes = (f"deviceID {device.device_id} is also named by {named}: a GPU sits in one node, so one of them "
                     "describes no GPU of its node (a pod given it gets a deviceID its node agent does not have): "
                     "delete the one no node agent backs")
        reason = f"{reason}; {two_nodes}" if reason else two_nodes
    described = _described(state, device)
    memory = described.capacity.get("memory")
    return _placed(m.GpuView(index, device.name, device.device_id, device.resource_name,
                             _model(state, device), format_quantity(memory) if memory is not None else "",
                             status, fill, used, holders, reason), described)


def _placed(gpu: m.GpuView, described: Device | None) -> m.GpuView:
    """`gpu` with where it sits in its node (`numa_node`, `nvlink_group`), as the device that
    describes it says; as it is for a GPU no ExtendedResource describes."""
    if described is None:
        return gpu
    return replace(gpu, numa_node=described.attributes.get("numaNode", ""),
                   nvlink_group=described.attributes.get("nvlinkGroup", ""))


def _status(facts: _Facts, node: str, uid: str) -> str:
    if uid in facts.held:
        return m.HELD
    if uid in facts.state.holds:
        return m.NOMINATED
    placement = facts.state.placements.get(uid)
    if placement is not None and placement.assumed:
        return m.BINDING
    info = facts.state.nodes.get(node)
    if info is not None and uid in info.allocating and facts.gate_holds(info):
        return m.ALLOCATING
    return _bound_status(facts.state, uid)


def _bound_status(state: ClusterState, uid: str) -> str:
    """A bound pod that is being deleted still holds its GPUs: say so, or a pod waiting for them
    reads "Insufficient" beside GPUs that look taken for good (a new user's trial). `_status`
    asks this last: a pod deleted while it holds a node's allocation gate still shows
    `allocating`, the state that blocks the node's other pods."""
    pod = state.pods.get(uid)
    return m.TERMINATING if pod is not None and pod.meta.deleting else m.BOUND


def _key(state: ClusterState, uid: str) -> str:
    pod = state.pods.get(uid)
    return pod.key if pod is not None else uid


# --- pending pods and gangs -----------------------------------------------------------------


def extended_amounts(requests: Mapping[str, int]) -> str:
    """`4 nvidia.com/gpu, 1 class.tessera.dev/v100`: the device resources of a request, for a
    pending pod's wants or a holder's share; "" when it asks for none."""
    return ", ".join(f"{amount} {name}" for name, amount in sorted(requests.items()) if is_extended(name) and amount)


def _pending(state: ClusterState, waits: Mapping[str, WaitReason], held: frozenset[str]) -> tuple[m.PendingPod, ...]:
    pods = [state.pods[uid] for uid in state.pending | state.gated | held if uid in state.pods]
    out = []
    for pod in sorted(pods, key=lambda pod: pod.key):
        wait = waits.get(pod.key)
        out.append(m.PendingPod(pod.key, pod.priority, extended_amounts(pod.requests), gang_name(pod.gang.key) if pod.gang else "",
                                wait.reason if wait else "", wait.message if wait else "", wait.node if wait else ""))
    return tuple(out)


def _gangs(state: ClusterState, pending: Sequence[m.PendingPod], held: frozenset[str],
           totals: ClusterTotals) -> tuple[m.GangView, ...]:
    """Gangs with a member still waiting: how far they are, and why the group cannot go yet.
    The pending pods are walked once, not once per gang: this runs on the scheduler's event loop
    for the live page, where thousands of waiting gangs made it gangs x pending."""
    messages: dict[str, str] = {}  # gang key -> its first waiting member's message ("" if none has one)
    for p in pending:
        pod = state.pod_by_key(p.pod) if p.gang else None
        if pod is not None and pod.gang is not None and not messages.get(pod.gang.key):
            messages[pod.gang.key] = p.message
    out = []
    for key in sorted(messages, key=lambda key: (gang_name(key), key)):
        gang = gang_view(state, key, held, messages[key])
        if gang is not None and gang.pending:
            # a gang the cluster can never hold says so (`capacity.and_never_fits`); its pods keep their reason
            first = next(state.pods[uid] for uid in sorted(state.gangs.members.get(key, ())) if uid in state.pods)
            out.append(replace(gang, message=and_never_fits(gang.message, state, first, totals)))
    return tuple(out)


def gang_view(state: ClusterState, key: str, held: frozenset[str] = frozenset(), message: str = "") -> m.GangView | None:
    """A gang's progress (None when it has no live member): its minimum, members placed, leaving
    (as the scheduler counts them: a deleted member or a victim no longer completes the gang) and
    waiting (held by spec.schedulingGates included), its PodGroup phase, and why it cannot be tried yet (or `message`, a member's last
    reason, when it can)."""
    members = sorted((state.pods[uid] for uid in state.gangs.members.get(key, ()) if uid in state.pods),
                     key=lambda pod: pod.key)
    if not members:  # every member finished: the PodGroup's final word, when it has one
        status = group_status(state, key)
        if status is None:
            return None
        ended = sum(1 for uid in state.gangs.history.get(key, ()) if uid in state.pods)
        return m.GangView(gang_name(key), status.minimum, ended, 0, 0, 0, status.phase, "")
    waiting = [pod for pod in members if pod.uid in state.pending or pod.uid in state.gated or pod.uid in held]
    on_node = [pod for pod in members if pod.uid in state.placements and pod.uid not in held]
    leaving = sum(1 for pod in on_node if state.leaving(pod))
    minimum = state.group_min(key, members[0])
    status = group_status(state, key)
    phase = status.phase if status is not None else \
        "Pending" if minimum is None or len(members) < minimum else "Scheduled" if not waiting else "Scheduling"
    # members held by spec.schedulingGates are never tried: the group's reason is a tried one's, or the gates
    tried = [pod for pod in waiting if pod.uid not in state.gated]
    reason = waiting_message(state, tried[0]) if tried else GATES_MESSAGE if waiting else None
    return m.GangView(gang_name(key), minimum, len(members), len(on_node) - leaving, leaving, len(waiting), phase,
                      reason or message, len(waiting) - len(tried))


def _summary(nodes: Sequence[m.NodeView], counts: Mapping[tuple[str, str], int], tainted: frozenset[str]) -> m.Summary:
    """The GPU counts of `counts` (`_count`: by `model.counted_as` state, fenced GPUs among the
    unavailable, free GPUs on a cordoned node cordoned), the very numbers `tessera_devices`
    exports (`gpu_counts`): the total is the nodes' GPUs, not their rows (one GPU under two names
    is one, rows beyond a node's count are none); unavailable is the rest. The most free on one
    node (the biggest single-node job that fits now) leaves out the `tainted` nodes (a NoSchedule
    or NoExecute taint), as a cordoned node's: only pods tolerating it go there; their free GPUs
    are still counted free."""
    states: Counter[str] = Counter()
    for (_, state), count in counts.items():
        states[state] += count
    total = sum(states.values())
    used = sum(states[state] for state in m.IN_USE)
    partial = sum(node.gpus_free for node in nodes
                  if any(gpu.state in m.IN_USE or m.held_unavailable(gpu) for gpu in node.gpus))
    largest = max(sorted((node for node in nodes if node.gpus_free and node.name not in tainted), key=lambda node: node.name),
                  key=lambda node: node.gpus_free, default=None)
    return m.Summary(
        gpus=total,
        used=used,
        shared=states[m.SLICES],
        free=states[m.FREE],
        unavailable=total - used - states[m.FREE],
        free_on_partial=partial,
        largest_free=largest.gpus_free if largest is not None else 0,
        largest_free_node=largest.name if largest is not None else "",
        conflicts=states[m.CONFLICT],
        held_unavailable=sum(1 for node in nodes for gpu in node.gpus if m.held_unavailable(gpu)),
    )
