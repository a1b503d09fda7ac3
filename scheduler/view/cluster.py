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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from scheduler.api.quantity import Amount, format_quantity
from scheduler.core.annotations import DEVICES
from scheduler.core.capacity import ClusterTotals, and_never_fits
from scheduler.core.framework.attempt import Attempt
from scheduler.core.objects import Device, Pod, gang_name
from scheduler.core.plugins.coscheduling import group_status, waiting_message
from scheduler.core.resources import CPU, is_extended
from scheduler.core.scheduler import WAITING_FOR_ALLOCATION, Scheduler
from scheduler.core.plugins.devices.gate import AllocationGate
from scheduler.core.state import ClusterState, DeviceUse, NodeInfo
from scheduler.view import model as m

GPU = "nvidia.com/gpu"  # counted as GPUs on nodes without ExtendedResources
NO_NODE = "no Node object: no pod is placed on this node"  # why its free GPUs are fenced
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
               decisions: Sequence[m.Decision] = (), diverged: Mapping[str, str] | None = None) -> m.ClusterView:
    """The view of `scheduler`'s state. `reasons` by pod key; `held`: attempts whose Binding a
    permit plugin holds (`Scheduler.held()`); `decisions` newest first; `diverged`: a replay's
    nodes where a recorded Binding landed on its own placements (`ReplayStats.diverged`), whose
    overcommit is that and not another scheduler's. A pod gated at PreEnqueue reads its gate,
    not a blank (it is never attempted, so no reason comes for it) nor its last attempt's reason
    from before its gang lost a member (the gate is why it waits now). A pod held by
    spec.schedulingGates is pending too (kube-scheduler's "gated" queue), with the condition the
    apiserver wrote on it (a replay's pods have none written)."""
    state = scheduler.state
    waits = dict(reasons or {})
    waits.update((key, WaitReason(SCHEDULING_GATED, why)) for key, why in scheduler.gated().items())
    waits.update((state.pods[uid].key, WaitReason(SCHEDULING_GATED, GATES_MESSAGE)) for uid in state.gated
                 if uid in state.pods)
    for attempt in held:
        waits[attempt.pod.key] = WaitReason(WAITING_FOR_ALLOCATION, attempt.message, attempt.node or "")
    facts = _Facts(state, frozenset(attempt.pod.uid for attempt in held), gate_timeout(scheduler), now,
                   dict(diverged or {}))
    gate_waiters: dict[str, list[str]] = {}
    for key, wait in waits.items():
        pod = state.pod_by_key(key)
        if wait.node and pod is not None and (pod.uid in state.pending or pod.uid in facts.held):
            gate_waiters.setdefault(wait.node, []).append(key)
    infos = sorted((info for info in state.nodes.values() if info.node is not None or info.devices),
                   key=lambda info: info.name)
    nodes = tuple(_node(facts, info, sorted(gate_waiters.get(info.name, ()))) for info in infos)
    pending = _pending(state, waits, facts.held)
    return m.ClusterView(
        source=source,
        generated=now,
        nodes=nodes,
        pending=pending,
        gangs=_gangs(state, pending, facts.held),
        summary=_summary(nodes),
        decisions=tuple(decisions),
        profiles=tuple(sorted(scheduler.config.scheduler_names)),
    )


@dataclass(frozen=True, slots=True)
class _Facts:
    """What one build knows beyond a node: the state, held Bindings, and where the gate holds."""

    state: ClusterState
    held: frozenset[str]  # pod uids whose Binding the allocation gate holds
    gate_timeout: float | None  # None: no profile runs the allocation gate
    now: float
    diverged: dict[str, str]  # node -> "binds A there, where this replay had placed B"

    def gate_holds(self, info: NodeInfo) -> bool:
        """The allocation gate holds on this node: a node agent serves it (a fresh heartbeat)."""
        return self.gate_timeout is not None and info.agent_serves(self.now, self.gate_timeout)


def gate_timeout(scheduler: Scheduler) -> float | None:
    """The agent heartbeat timeout of the profiles' allocation gate (None when it is off)."""
    for runtime in scheduler.profiles.values():
        for plugin in runtime.plugins.values():
            gate = getattr(plugin, "gate", None)
            if isinstance(gate, AllocationGate) and gate.enabled:
                return gate.timeout
    return None


def gate_holds(scheduler: Scheduler, node: str, now: float) -> bool:
    """The allocation gate holds on `node`: a profile runs it and a node agent serves the node."""
    info = scheduler.state.nodes.get(node)
    timeout = gate_timeout(scheduler)
    return info is not None and timeout is not None and info.agent_serves(now, timeout)


# --- nodes and GPUs -------------------------------------------------------------------------


def _node(facts: _Facts, info: NodeInfo, gate_waiters: list[str]) -> m.NodeView:
    state = facts.state
    fence = _fence_reason(state, info)
    gpus, beyond, surplus = _gpus(facts, info, fence)
    extra = surplus + _second_names(gpus)  # rows that are no GPU of their own: counted once, or not at all
    node = info.node
    notes: list[str] = []
    if node is None:
        notes.append("no Node object: only its devices are known")
    if facts.gate_holds(info):
        for uid, resources in sorted(info.allocating.items(), key=lambda item: _key(state, item[0])):
            if uid not in facts.held:
                notes.append(f"allocation gate held by {_key(state, uid)}: the node agent has not handed out "
                             f"its {', '.join(sorted(resources))} yet")
    notes += [f"{key} waits for the allocation gate" for key in gate_waiters]
    if fence:
        notes.append(f"{fence}: which GPUs it holds is unknown, so the node's GPUs are fenced (none is given "
                     "out) until the annotation is fixed or the pod is gone")
    why = (f"the recording {facts.diverged[info.name]}: the replay diverged from the cluster here"
           if info.name in facts.diverged else "pods of other schedulers hold GPUs that Tessera's classes gave out")
    over = tuple(m.OverCapacity(*found) for found in info.over_capacity({d.resource_name for d in info.devices.values()}))
    notes += [f"{o.resource} overcommitted: {o.used} in use, {o.capacity} allocatable ({why})" for o in over]
    for resource, holders in beyond.items():
        for pod, count in Counter(holder.pod for holder in holders).items():
            notes.append(f"{pod}: {count} {resource} counted beyond the node's GPUs (shown on none)")
    allocatable = node.allocatable.get(CPU, 0) if node is not None else 0
    # as the scheduler counts them: no pod goes to a cordoned node but one that tolerates it (a
    # fenced node's free GPUs, and a node's without a Node object, are already `fenced`, not `free`)
    takes_pods = node is not None and not node.unschedulable
    return m.NodeView(
        name=info.name,
        cordoned=node is not None and node.unschedulable,
        gpus=gpus,
        gpus_used=sum(1 for gpu in gpus if gpu.state in m.IN_USE),
        gpus_free=sum(1 for gpu in gpus if takes_pods and gpu.state == m.FREE),
        gpus_unavailable=sum(1 for gpu in gpus if gpu.state in m.UNAVAILABLE) - extra,
        gpus_total=len(gpus) - extra,
        conflicts=sum(1 for gpu in gpus if gpu.state == m.CONFLICT),
        over_capacity=over,
        cpu=f"{info.requested.get(CPU, 0) / 1000:g}/{allocatable / 1000:g}",
        pods=len(info.pods),
        taints=tuple(f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"
                     for t in (node.taints if node is not None else ())),
        notes=tuple(notes),
    )


def _fence_reason(state: ClusterState, info: NodeInfo) -> str:
    """Why the node is fenced (`NodeInfo.broken`): each pod whose device annotation cannot be
    read, and how (`default/bad: unreadable tessera.dev/devices annotation`); "" when it is not."""
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


def _second_names(gpus: Sequence[m.GpuView]) -> int:
    """Rows that name a GPU another row already names (one deviceID under two ExtendedResources,
    a held ghost and its new name): one GPU, so counted once — as the row in use, if one is."""
    names: Counter[str] = Counter()
    idle: Counter[str] = Counter()
    for gpu in gpus:
        if gpu.device and gpu.device_id:
            names[gpu.device_id] += 1
            idle[gpu.device_id] += gpu.state not in m.IN_USE
    return sum(min(count - 1, idle[device_id]) for device_id, count in names.items())


def _gpus(facts: _Facts, info: NodeInfo,
          fence: str) -> tuple[tuple[m.GpuView, ...], dict[str, list[m.Holder]], int]:
    """The node's GPUs: its devices, then GPUs it only counts (allocatable beyond its devices),
    per resource the counted holders no GPU is left to show (more counted than it has), and how
    many free rows are fenced for being beyond the node's count (ExtendedResources describing
    more GPUs than it allocates, `NodeInfo.surplus_devices`: the core gives out no more than the
    count, so the last free rows go to no pod; which object is the surplus is unknown).
    Devices its pods hold that have no ExtendedResource any more are the ledger's ghosts (also
    when deleted before this core saw them, e.g. after a restart); plain count requests
    (`nvidia.com/gpu: 1`) fill the GPUs no device assignment holds: free ones first, then
    unhealthy or cordoned ones nobody holds (the device plugin picked one of those: no free one
    was left). Free GPUs the core gives out to no pod are `fenced`: all of a node without a Node
    object (no pod is placed there), and those of a resource an unreadable device annotation hides
    (`fence` says whose, `NodeInfo.hides_devices_of`)."""
    devices = sorted(info.devices.values(), key=_device_order)
    resources = list(dict.fromkeys(device.resource_name for device in devices))
    allocatable = info.node.allocatable if info.node is not None else {}
    if GPU in allocatable and GPU not in resources:
        resources.append(GPU)
    gpus: list[m.GpuView] = []
    beyond: dict[str, list[m.Holder]] = {}
    surplus = 0
    for resource in resources:
        own = [device for device in devices if device.resource_name == resource]
        model = own[0].attributes.get("model", "") if own else ""
        unknown = max(0, allocatable.get(resource, 0) - info.described(resource))
        counted = _counted_holders(facts, info, resource)
        taken = info.busy.get(resource, 0) + len(counted)  # GPUs of the node's count in use
        why = "; ".join(reason for reason in (NO_NODE if info.node is None else "",
                                              fence if info.hides_devices_of(resource) else "") if reason)
        first = len(gpus)
        for _ in range(unknown):  # GPUs known only by count: counted requests go here first
            gpus.append(m.GpuView(len(gpus), "", "", resource, model, "", m.FREE, 0.0))
        gpus += [_device_gpu(facts, device, index) for index, device in enumerate(own, start=len(gpus))]
        for i in range(first, len(gpus)):
            gpu = gpus[i]
            if gpu.state == m.FREE and counted:
                gpus[i] = replace(gpu, state=m.COUNTED, fill=1.0, holders=(counted.pop(0),))
            elif gpu.state == m.FREE and why:
                gpus[i] = replace(gpu, state=m.FENCED, reason=why)
        for i in range(first, len(gpus)):  # no free GPU left for these: the unavailable ones nobody holds
            gpu = gpus[i]
            if counted and gpu.state in (m.UNHEALTHY, m.CORDONED) and not gpu.holders:
                holder = counted.pop(0)
                gpus[i] = replace(gpu, fill=1.0, holders=(holder,),
                                  reason=f"{gpu.state}; {holder.pod}'s {resource} request is counted here: "
                                         "no free GPU of the node is left for it")
        if counted:
            beyond[resource] = counted
        free = [i for i in range(first, len(gpus)) if gpus[i].state == m.FREE]
        room = max(0, allocatable[resource] - taken) if resource in allocatable else len(free)
        for i in free[room:]:
            count = allocatable[resource]
            why = (f"the node counts {count} {resource}, all in use: no pod can get this one" if not room else
                   f"the node counts {count} {resource} but its ExtendedResources describe "
                   f"{info.described(resource)}: pods get {room} more, shown free on the others")
            gpus[i] = replace(gpus[i], state=m.FENCED, reason=why)
            surplus += 1
    return tuple(gpus), beyond, surplus


def _counted_holders(facts: _Facts, info: NodeInfo, resource: str) -> list[m.Holder]:
    """One holder per GPU the node's pods ask for by count, in pod order, then the GPUs held for
    nominated preemptors (the core counts those as taken: no pod of their priority or lower
    gets them)."""
    state = facts.state
    holders: list[m.Holder] = []
    for uid in sorted(info.pods, key=lambda uid: _key(state, uid)):
        placement = state.placements.get(uid)
        if placement is not None:
            holders += [m.Holder(_key(state, uid), status=_status(facts, info.name, uid))] * placement.requests.get(resource, 0)
    for uid in sorted((uid for uid, hold in state.holds.items() if hold.node == info.name), key=lambda uid: _key(state, uid)):
        holders += [m.Holder(_key(state, uid), status=m.NOMINATED)] * state.holds[uid].placement.requests.get(resource, 0)
    return holders


def _holders(facts: _Facts, node: str, use: DeviceUse) -> tuple[m.Holder, ...]:
    state = facts.state
    whole = [m.Holder(_key(state, uid), status=_status(facts, node, uid)) for uid in use.exclusive]
    slices = [m.Holder(_key(state, uid), " + ".join(format_quantity(amount) for amount in held.values()),
                       _status(facts, node, uid))
              for uid, held in use.shared.items()]
    return tuple(sorted(whole, key=lambda h: h.pod) + sorted(slices, key=lambda h: h.pod))


def _slices_used(device: Device, dimensions: Mapping[str, Amount]) -> tuple[str, float]:
    """A sliced GPU's USE ("4Gi/16Gi"; "cores 10/100, memory 4Gi/16Gi" when classes of several
    dimensions share it, each of its own capacity) and fill (the fullest dimension's share)."""
    parts: list[str] = []
    fill = 0.0
    for dimension, amount in dimensions.items():
        capacity = device.capacity.get(dimension)
        parts.append(f"{format_quantity(amount)}/{format_quantity(capacity) if capacity else '?'}")
        fill = max(fill, min(1.0, float(amount / capacity)) if capacity else 1.0)
    if len(parts) > 1:
        parts = [f"{dimension} {part}" for dimension, part in zip(dimensions, parts, strict=True)]
    return ", ".join(parts), fill


def _device_gpu(facts: _Facts, device: Device, index: int) -> m.GpuView:
    state = facts.state
    use = state.ledger.use.get(device.name)
    holders = _holders(facts, device.node_name, use) if use is not None else ()
    fill, used = 0.0, ""
    if use is not None and use.exclusive:
        fill = 1.0
    elif use is not None and use.shared:
        used, fill = _slices_used(device, state.ledger.shared_dimensions(use))
    unavailable = ""
    if state.ledger.is_ghost(device.name):
        unavailable = m.GHOST
    elif not device.healthy:
        unavailable = m.UNHEALTHY
    elif device.unschedulable or (device.duplicate and use is None):
        unavailable = m.CORDONED  # not given out: an admin's cordon, or one GPU under two names (REASON says so)
    claimants = list(dict.fromkeys(holder.pod for holder in holders))  # a pod with a whole device and slices once
    reason = ""
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
        what = "no ExtendedResource describes it any more" if unavailable == m.GHOST else unavailable
        reason = f"{what}, still held by {', '.join(claimants)}"
    elif unavailable == m.CORDONED and device.duplicate:
        info = state.nodes[device.node_name]
        others = sorted(name for name, other in info.devices.items()
                        if other.device_id == device.device_id and name != device.name)
        reason = (f"deviceID {device.device_id} is also named by {', '.join(others)}: neither is given to a pod "
                  "until one is gone")
    if use is not None and use.exclusive and len(claimants) > 1:  # the ledger keeps every claimant (DeviceConflict)
        status = m.CONFLICT
        reason = f"claimed by {len(claimants)} pods at once: {', '.join(claimants)}" + \
            (f"; {unavailable} too" if unavailable else "")
    elif unavailable:
        status = unavailable
    elif use is not None and not facts.held.isdisjoint((*use.exclusive, *use.shared)):
        status = m.GATED
    elif use is not None and use.exclusive:
        status = m.WHOLE
    elif use is not None and use.shared:
        status = m.SLICES
    else:
        status = m.FREE
    memory = device.capacity.get("memory")
    return m.GpuView(index, device.name, device.device_id, device.resource_name, device.attributes.get("model", ""),
                     format_quantity(memory) if memory is not None else "", status, fill, used, holders, reason)


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


def _gangs(state: ClusterState, pending: Sequence[m.PendingPod], held: frozenset[str]) -> tuple[m.GangView, ...]:
    """Gangs with a member still waiting: how far they are, and why the group cannot go yet.
    The pending pods are walked once, not once per gang: this runs on the scheduler's event loop
    for the live page, where thousands of waiting gangs made it gangs x pending."""
    messages: dict[str, str] = {}  # gang key -> its first waiting member's message ("" if none has one)
    for p in pending:
        pod = state.pod_by_key(p.pod) if p.gang else None
        if pod is not None and pod.gang is not None and not messages.get(pod.gang.key):
            messages[pod.gang.key] = p.message
    out = []
    totals = ClusterTotals(state)
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
                      reason or message)


def _summary(nodes: Sequence[m.NodeView]) -> m.Summary:
    """Counts by `model.counted_state` (fenced GPUs among the unavailable; free GPUs on a cordoned
    node, which only pods tolerating the cordon get, cordoned), as `tessera_devices` counts them.
    The total is the nodes' GPUs (`NodeView.gpus_total`), not their rows: one GPU under two names
    is one, and rows beyond a node's count are none; unavailable is the rest."""
    gpus = [gpu for node in nodes for gpu in node.gpus]
    states = [m.counted_state(node, gpu) for node in nodes for gpu in node.gpus]
    free = states.count(m.FREE)
    partial = sum(node.gpus_free for node in nodes if any(gpu.state in m.IN_USE for gpu in node.gpus))
    largest = max(sorted((node for node in nodes if node.gpus_free), key=lambda node: node.name),
                  key=lambda node: node.gpus_free, default=None)
    total = sum(node.gpus_total for node in nodes)
    used = sum(1 for gpu in gpus if gpu.state in m.IN_USE)
    return m.Summary(
        gpus=total,
        used=used,
        shared=sum(1 for gpu in gpus if gpu.state == m.SLICES),
        free=free,
        unavailable=total - used - free,
        free_on_partial=partial,
        largest_free=largest.gpus_free if largest is not None else 0,
        largest_free_node=largest.name if largest is not None else "",
        conflicts=sum(node.conflicts for node in nodes),
    )
