"""The device planner: concrete devices for a pod's ResourceClass requests on one node.

Filter and device choice are one computation: a node is feasible exactly when a plan exists, and
the plan is kept for Reserve and for scoring. Choice rules:
- exclusive requests take free, healthy, schedulable matching devices, preferring devices that
  match the fewest *other* classes (keep scarce devices for narrow classes), then by name;
- shared requests (`spec.sharing`) take N×unit of the dimension on ONE device per container,
  within that dimension's capacity less the slices of it already held (slices of classes that
  share by another dimension use another capacity of the device), choosing the fullest device
  that still fits (pack slices) — or, when another plugin chooses slices (`SliceChooser`, e.g.
  by fragmentation), its choice — never a device in exclusive use; a pod's slices are planned
  largest first, so one whose phase does not meet a larger one's shares that one's room;
- a multi-GPU container takes its GPUs from one NVLink group, else one NUMA node, when the node's
  devices describe them (`within_one_group`); a node where the request must span groups scores
  half, so nodes where it fits inside one win;
- a container takes first the devices its pod's finished plain init containers had whole, under
  any resource name (of slices, the room on a device under the same resource name), as the
  kubelet hands them on (`devicesToReuse`; it hands slots on per resource name, the GPU behind
  them is free either way); a sidecar's or another running container's never (`lifecycle`): a pod
  with a 1-GPU init container and a 1-GPU app container holds one GPU. A slice, of whatever
  class, may go on a GPU the pod has whole in phases its container's do not meet (a 2-GPU init
  container's GPU, for a sidecar started after it): the pod holds that GPU whole for its life
  already, the slice costs nothing more; never on one a container running beside it has whole;
- a device with any shared use is not free for exclusive use, and vice versa;
- on nodes that advertise the device resourceName (e.g. `nvidia.com/gpu: 4`), plain count requests
  and class-assigned devices share that count, so neither can oversubscribe the other (a slice
  takes no free GPU the count has no room for: a GPU in use may still take it) — counted
  with the nominated preemptors' holds and without them (`count_short`): a slice beside a hold's
  slice puts a GPU in use now that the hold only keeps for after its victims are gone, and a
  slice beside pods that are all leaving keeps their GPU in use after they are gone, where the
  holds counted on getting it back (`_vacating`); where holds are kept, a slice goes first to a
  GPU a staying pod uses (it costs the count nothing, now or later: `_count_cost`), then to one
  the holds count on getting back, then to a free one — fullest first within each group.
The node score is device-level binpack: how full the matching devices are after the placement.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from scheduler.api.quantity import Amount
from scheduler.core.classes import ResourceClass
from scheduler.core.framework.cycle_state import MAX_NODE_SCORE, DevicePlan, DeviceRequest, PodContext
from scheduler.core.framework.nodecache import NodeCache
from scheduler.core.lifecycle import Grant, Phases, slice_peak
from scheduler.core.objects import Device
from scheduler.core.state import ClusterState, DeviceUse, NodeInfo
from scheduler.core.state.ledger import DeviceLedger

_CACHED_REQUESTS = 128
GROUP_ATTRIBUTES = ("nvlinkGroup", "numaNode")  # device topology inside a node, tightest first
BROKEN = "node(s) had unreadable device assignments"
HELD_WHOLE = "held whole"  # why a GPU takes no slice (`slice_room`)
IN_USE = "in use"  # why a GPU takes no whole-GPU class request (`slice_rooms`)
RequestKey = tuple[tuple[str, str, int, Phases], ...]


@runtime_checkable
class SliceChooser(Protocol):
    """Picks the device for a slice among those it fits on (given fullest first); `epoch` moves
    whenever its choices may change, so cached plans are redone."""

    @property
    def epoch(self) -> int: ...

    def choose_slice(self, info: NodeInfo, dimension: str, amount: Amount, options: list[Device]) -> Device: ...


class DevicePlanner:
    def __init__(self, state: ClusterState, slice_chooser: Callable[[], SliceChooser | None] = lambda: None) -> None:
        self.state = state
        self._find_chooser: Callable[[], SliceChooser | None] | None = slice_chooser  # resolved on first use:
        self._chooser: SliceChooser | None = None  # the chooser may be built after the planner
        # Plans depend only on the device requests and the node (and the class registry), not on
        # the rest of the pod, so pods that differ in CPU or memory share them.
        self._plans: OrderedDict[RequestKey, NodeCache[DevicePlan | str]] = OrderedDict()

    @property
    def slice_chooser(self) -> SliceChooser | None:
        if self._find_chooser is not None:
            self._chooser, self._find_chooser = self._find_chooser(), None
        return self._chooser

    def filter_node(self, ctx: PodContext, info: NodeInfo) -> tuple[str, ...] | None:
        if not ctx.device_requests:
            return None
        if info.broken:
            return (BROKEN,)
        plan = self.cached_plan(ctx.device_requests, info)
        if isinstance(plan, str):
            return (plan,)
        short = over_count(ctx, plan, info, self.state)
        if short is not None:
            return (short,)
        ctx.plans[info.name] = plan
        return None

    def scan(self, ctx: PodContext, rows: Iterable[int], infos: Sequence[NodeInfo], want: int) -> list[int]:
        """filter_node over many rows until `want` pass, inline: one planning loop per attempt
        is where a pod with slices of shared GPUs spends its cycle."""
        requests = ctx.device_requests
        cache = self._cache_for(requests)
        entries = cache.entries
        generation = self.generation
        plans = ctx.plans
        passed: list[int] = []
        for row in rows:
            info = infos[row]
            if info.broken:
                continue
            hit = entries.get(info.name)
            if hit is not None and hit[0] == info.generation and hit[1] == generation:
                plan = hit[2]
            else:
                plan = cache.put(info, generation, self.plan(requests, info))
            if isinstance(plan, str) or over_count(ctx, plan, info, self.state) is not None:
                continue
            plans[info.name] = plan
            passed.append(row)
            if len(passed) >= want:
                break
        return passed

    def node_filter(self, ctx: PodContext) -> Callable[[NodeInfo], tuple[str, ...] | None]:
        """filter_node for many nodes of one attempt: the plan cache and its epoch looked up once."""
        requests = ctx.device_requests
        cache = self._cache_for(requests)
        entries = cache.entries
        generation = self.generation
        plans = ctx.plans

        def check(info: NodeInfo) -> tuple[str, ...] | None:
            if info.broken:
                return (BROKEN,)
            hit = entries.get(info.name)
            if hit is not None and hit[0] == info.generation and hit[1] == generation:
                plan = hit[2]
            else:
                plan = cache.put(info, generation, self.plan(requests, info))
            if isinstance(plan, str):
                return (plan,)
            short = over_count(ctx, plan, info, self.state)
            if short is not None:
                return (short,)
            plans[info.name] = plan
            return None

        return check

    def _cache_for(self, requests: tuple[DeviceRequest, ...]) -> NodeCache[DevicePlan | str]:
        """The per-node plan cache for these requests."""
        key = tuple((r.container, r.resource_name, r.count, r.phases) for r in requests)
        per_node = self._plans.get(key)
        if per_node is None:
            per_node = self._plans[key] = NodeCache()
            if len(self._plans) > _CACHED_REQUESTS:
                self._plans.popitem(last=False)
        return per_node

    @property
    def generation(self) -> int:
        """What cached plans depend on beyond the node: the class registry and the slice chooser."""
        chooser = self.slice_chooser
        epoch = chooser.epoch if chooser is not None else 0
        return self.state.classes.generation * 1_000_000 + epoch

    def cached_plan(self, requests: tuple[DeviceRequest, ...], info: NodeInfo) -> DevicePlan | str:
        cache = self._cache_for(requests)
        generation = self.generation
        hit = cache.get(info, generation)
        if hit is not None:
            return hit
        return cache.put(info, generation, self.plan(requests, info))

    def plan(self, requests: tuple[DeviceRequest, ...], info: NodeInfo) -> DevicePlan | str:
        """A device plan for all requests on this node, or the reason there is none."""
        ledger = self.state.ledger
        use = ledger.use
        matches = self.state.classes.device_classes
        dimension_of = self.state.classes.sharing_dimension
        # the pod's whole devices -> (resource name, phases of its life they are taken in): a
        # container of the pod running in other phases only takes them first, of whichever of its
        # classes selects them (the kubelet's devicesToReuse hands slots on per resource name,
        # but the GPU is free once its init container is done, and the node agent hands out the
        # GPU the annotation names), any other request of the pod never
        whole: dict[str, tuple[str, set[int]]] = {}
        sliced: dict[str, dict[str, dict[int, Amount]]] = {}  # the pod's slices: device -> resource -> phase -> amount
        grants: dict[str, dict[str, list[Grant]]] = {}
        newly_busy: dict[str, int] = {}
        held_busy: dict[str, int] = {}  # devices the pod shares with holds only (in use by no pod yet)
        kept_on: dict[str, int] = {}  # devices the pod shares with leaving pods only, holds kept here
        # nominated preemptors of this attempt's priority or higher keep room here (lower ones are
        # lifted for it): the GPUs their victims leave are what their counts wait for
        holds_here = info.held > 0
        state = self.state
        vacating: Callable[[DeviceUse | None], bool] = (lambda use: _vacating(state, use)) if holds_here else _never
        scores: list[int] = []
        # the most constrained request first — whole devices before slices, then the fewest
        # devices to choose from — so that a request with more choice never takes the only
        # device another one of the pod can use (a feasible plan is then found greedily); whole
        # requests of one resource name stay in container order (kubelet order), which reuse
        # needs; slices go largest first: a smaller slice of a phase the larger one's does not
        # meet then lands on the larger one's device for free, where placed first it could
        # take a device the larger one no longer fits beside it, and the pod would hold both
        # for its whole life (more than PodRequests counts: room stranded)
        choices = [self.state.class_devices(info, req.cls.name) for req in requests]
        rooms = self.state.count_room(info)
        order = sorted(range(len(requests)), key=lambda i: _plan_order(requests[i], len(choices[i])))
        for index in order:
            req, candidates = requests[index], choices[index]
            cls = req.cls
            chosen: list[Grant] = []

            def others(device: Device) -> int:  # how many classes could use it (fewest first)
                return len(matches.get(device.name, ()))

            if cls.sharing is None:
                reused = sorted((d for d in candidates if (held := whole.get(d.name)) is not None
                                 and held[1].isdisjoint(req.phases)),
                                key=lambda d: (others(d), d.name))[:req.count]
                free = [d for d in candidates if d.name not in whole and d.name not in sliced
                        and not _busy(use.get(d.name))]
                need = req.count - len(reused)
                if len(free) < need:
                    return f"Insufficient {req.resource_name}"
                free.sort(key=lambda d: (others(d), d.name))
                picked, split = within_one_group(free, need, described(candidates), others) if need else ([], False)
                for device in reused:
                    whole[device.name][1].update(req.phases)
                    chosen.append((device.name, None, ""))
                for device in picked:
                    whole[device.name] = (req.resource_name, set(req.phases))
                    chosen.append((device.name, None, ""))
                    newly_busy[device.resource_name] = newly_busy.get(device.resource_name, 0) + 1
                busy_after = sum(1 for d in candidates if d.name in whole or _busy(use.get(d.name)))
                score = busy_after * MAX_NODE_SCORE // len(candidates)
                scores.append(score // 2 if split else score)
            else:
                amount = cls.sharing.unit * req.count
                dimension = cls.sharing.dimension  # each dimension's slices count against its own capacity
                # ((what the pod's hold of the device grows by, the GPUs of the count it takes now
                # and after the leaving pods are gone, where holds are kept here (`_count_cost`),
                # room left, others, name), device)
                fitting: list[tuple[tuple[Amount, int, Amount, int, str], Device]] = []
                for device in candidates:
                    held_whole = whole.get(device.name)
                    if held_whole is not None and not held_whole[1].isdisjoint(req.phases):
                        continue  # a container of the pod that runs beside this one has it whole
                    room = slice_room(ledger, device, dimension)
                    if isinstance(room, str):
                        continue
                    device_use = use.get(device.name)
                    own = sliced.get(device.name)
                    before: Amount
                    after: Amount
                    if own is None:  # the pod's first slice of this device (the usual case)
                        before, after = 0, amount if req.phases else 0
                    else:
                        mine = {resource: by_phase for resource, by_phase in own.items()
                                if dimension_of(resource) == dimension}
                        before = slice_peak(mine)
                        after = _peak_with(mine, req.resource_name, req.phases, amount)
                    left = room - after
                    if left < 0:
                        continue
                    if held_whole is not None:
                        # the pod holds it whole for its life already (`device_holds`): the slice
                        # costs nothing more, and its room is no other pod's
                        fitting.append(((0, 0, 0, others(device), device.name), device))
                        continue
                    if device.name not in sliced and beyond_count(
                            info, device, device_use, rooms, newly_busy.get(device.resource_name, 0),
                            held_busy.get(device.resource_name, 0)):
                        continue  # one GPU more in use than the count has: a used GPU may still take the slice
                    cost = _count_cost(device_use, ledger.held_only, vacating) \
                        if holds_here and device.name not in sliced else 0
                    fitting.append(((after - before, cost, left, others(device), device.name), device))
                if not fitting:
                    return f"Insufficient {req.resource_name}"
                fitting.sort(key=lambda item: item[0])
                best, best_device = fitting[0]
                if self.slice_chooser is not None and len(fitting) > 1 and not whole and not sliced:
                    # only for a pod's first device request: the chooser sees the node as it is,
                    # among the devices that cost the count least where holds are kept
                    options = [device for key, device in fitting if key[1] == best[1]]
                    chosen_device = self.slice_chooser.choose_slice(info, dimension, amount, options) \
                        if len(options) > 1 else options[0]
                    best, best_device = next(item for item in fitting if item[1] is chosen_device)
                device_use = use.get(best_device.name)
                if best_device.name not in sliced and best_device.name not in whole:
                    if not _busy(device_use):
                        newly_busy[best_device.resource_name] = newly_busy.get(best_device.resource_name, 0) + 1
                    elif ledger.held_only(device_use):
                        held_busy[best_device.resource_name] = held_busy.get(best_device.resource_name, 0) + 1
                    elif vacating(device_use):
                        kept_on[best_device.resource_name] = kept_on.get(best_device.resource_name, 0) + 1
                by_phase = sliced.setdefault(best_device.name, {}).setdefault(req.resource_name, {})
                for phase in req.phases:
                    by_phase[phase] = by_phase.get(phase, 0) + amount
                chosen.append((best_device.name, amount, dimension))
                capacity = best_device.capacity[dimension]
                scores.append(int((capacity - best[2]) * MAX_NODE_SCORE // capacity) if capacity else 0)
            grants.setdefault(req.container, {}).setdefault(req.resource_name, []).extend(chosen)
        devices = self.state.devices
        resources = frozenset(devices[name].resource_name for by_resource in grants.values()
                              for chosen_grants in by_resource.values() for name, *_ in chosen_grants)
        for resource in resources | newly_busy.keys() | held_busy.keys():
            kept = kept_on.get(resource, 0)
            if count_short(info, resource, newly_busy.get(resource, 0), held_busy.get(resource, 0),
                           rooms.get(resource), kept, going(self.state, info, resource) if kept else 0):
                return f"Insufficient {_asked_as(requests, grants, resource, devices)}"
        return DevicePlan(grants, newly_busy, sum(scores) // len(scores) if scores else 0, resources, held_busy,
                          kept_on)


def slice_room(ledger: DeviceLedger, device: Device, dimension: str) -> Amount | str:
    """The room `device` has for new slices of `dimension`: its capacity of it less the slices
    of it held (`DeviceLedger.shared_use`: pods' and nominated preemptors' holds'; below 0 when
    overfilled) — or why it takes none: held whole (by a pod or a hold: no slice beside it), or
    no capacity of that dimension. Its health, cordon and deviceID are the caller's to judge
    (`Device.schedulable`). The planner's rule; the class columns and `slice_rooms` read it."""
    use = ledger.use.get(device.name)
    if use is not None and use.exclusive:
        return HELD_WHOLE
    capacity = device.capacity.get(dimension)
    if capacity is None:
        return f"no {dimension} capacity"
    return capacity - ledger.shared_use(use, dimension)


def slice_rooms(state: ClusterState, info: NodeInfo, cls: ResourceClass) -> dict[str, Amount | str]:
    """Each GPU of the node class `cls` matches (any health; a ghost matches no class), by name:
    the room it has for a new pod's slice of a sharing class (`slice_room`), or 1 for a whole-GPU
    class where it is idle; or why it takes none (`Device.unschedulable_because`, else
    `slice_room`'s reason or, for a whole-GPU class, in use, else idle while the node's count has
    no GPU left to make busy, `beyond_count`, or in use while the node's pods use more GPUs than
    it counts, `count_short` with nothing added: the planner gives no slice there). A
    container's slice goes on one GPU, so the rooms do not add up; empty when no GPU of the node
    matches the class. Explain's node lines read it (`_device_room`)."""
    dimension = cls.sharing.dimension if cls.sharing is not None else None
    matches = state.classes.device_classes
    ledger = state.ledger
    counts = state.count_room(info)
    rooms: dict[str, Amount | str] = {}
    for device in info.devices.values():
        if cls.name not in matches.get(device.name, ()):
            continue
        room = device.unschedulable_because or (
            slice_room(ledger, device, dimension) if dimension is not None
            else IN_USE if _busy(ledger.use.get(device.name)) else 1)
        resource = device.resource_name
        if not isinstance(room, str):
            if beyond_count(info, device, ledger.use.get(device.name), counts):
                room = f"idle beyond the node's {resource} count"
            elif count_short(info, resource, 0, 0, counts.get(resource)):
                room = f"in use on a node whose {resource} count is below its pods' GPUs"
        rooms[device.name] = room
    return rooms


def beyond_count(info: NodeInfo, device: Device, use: DeviceUse | None, rooms: Mapping[str, int],
                 newly_busy: int = 0, held_busy: int = 0) -> bool:
    """Whether a slice on `device` (in `use`) would make it one GPU more busy than the node's
    count of its resource name has room for (`count_short`), beside the `newly_busy` GPUs the pod
    makes busy already and the `held_busy` it shares with holds only; `rooms`:
    `ClusterState.count_room`. The planner gives no slice there — a GPU in use still may take
    it, costing the count nothing — and explain names it so (`slice_rooms`)."""
    return not _busy(use) and count_short(info, device.resource_name, newly_busy + 1, held_busy,
                                          rooms.get(device.resource_name))


def _vacating(state: ClusterState, use: DeviceUse | None) -> bool:
    """The device is in use only by pods that are leaving (deleted, or a preemption's victims
    not yet gone: `ClusterState.leaving`), and no hold shares it: once they are gone it is free
    — the room a nominated preemptor's hold counts on (its preemption's dry run, and `_room`
    after a restart, counted the node without the leaving pods). Leaving, not only the victims
    of the holds here: a restarted Tessera knows no victims, only pods being deleted, and a
    hold counts on every GPU those give back. A pod sharing such a device keeps it in use after
    they are gone: one more GPU in use for the holds, though none more now."""
    if use is None or not use.busy:
        return False
    holds, pods = state.holds, state.pods
    for uid in (*use.exclusive, *use.shared):
        if uid in holds:
            return False
        pod = pods.get(uid)
        if pod is None or not state.leaving(pod):
            return False  # a holder not in the cache is no pod known to leave: it stays
    return True


def going(state: ClusterState, info: NodeInfo, resource: str) -> int:
    """The node's GPUs of `resource` in use now by leaving pods only: the devices `_vacating`,
    and the leaving pods' plain requests of it (`nvidia.com/gpu: 2`). `info.used` less these
    is what stays in use, holds included, once the leaving pods are gone."""
    ledger = state.ledger
    devices = sum(1 for name in info.devices
                  if ledger.counted_as(name) == resource and _vacating(state, ledger.use.get(name)))
    plain = sum(placement.requests.get(resource, 0) for uid in info.pods
                if (pod := state.pods.get(uid)) is not None and state.leaving(pod)
                and (placement := state.placements.get(uid)) is not None)
    return devices + plain


def _asked_as(requests: tuple[DeviceRequest, ...], grants: dict[str, dict[str, list[Grant]]], resource: str,
              devices: Mapping[str, Device]) -> str:
    """The pod's own name for a shortage of the node's `resource` count its class requests caused:
    the first request granted devices of that resource name. The pod asked for
    `class.tessera.dev/v100-32g`, not `nvidia.com/gpu` (a new user's trial read "Insufficient
    nvidia.com/gpu" on a class pod); upstream's "Insufficient <resource>" shape is kept."""
    for req in requests:
        granted = grants.get(req.container, {}).get(req.resource_name, ())
        if any(devices[name].resource_name == resource for name, *_ in granted):
            return req.resource_name
    return resource


def _plan_order(req: DeviceRequest, choices: int) -> tuple[bool, int, Amount]:
    """Where a request is planned among its pod's (`DevicePlanner.plan`): whole devices first,
    then the fewest choices, slices largest first."""
    sharing = req.cls.sharing
    return sharing is not None, choices, -sharing.unit * req.count if sharing is not None else 0


def described(devices: Iterable[Device]) -> tuple[str, ...]:
    """The grouping attributes (NVLink group, NUMA node) the node's devices of a class describe:
    any of them carries it, busy or free (a GPU without NVLink peers carries no `nvlinkGroup`)."""
    carried = {attribute for device in devices for attribute in GROUP_ATTRIBUTES if attribute in device.attributes}
    return tuple(attribute for attribute in GROUP_ATTRIBUTES if attribute in carried)


def within_one_group(free: list[Device], count: int, attributes: tuple[str, ...],
                     others: Callable[[Device], int]) -> tuple[list[Device], bool]:
    """`count` of the `free` devices (in preference order) for one container — a single GPU too,
    so that it fills a partly used group before it breaks a whole one: from one NVLink
    group, else one NUMA node, when the node's devices describe them (`attributes`, see
    `described`: published by the node agent) and one has room — the group with the fewest free
    devices that still holds the request, so larger groups stay whole for larger requests; among
    those, the one whose best device the fewest other classes can use (`others`; so a group never
    takes the only device another request of the pod needs), then by name. `split`: the node describes NVLink groups (or only NUMA nodes) and the request had to
    span two of them (the node then scores half)."""
    spanned = False
    for attribute in attributes:
        groups: dict[str, list[Device]] = {}
        for device in free:  # a device without the attribute is a group of its own (no peers)
            groups.setdefault(device.attributes.get(attribute, "\0" + device.name), []).append(device)
        holding = [(len(devices), min(others(device) for device in devices), key)
                   for key, devices in groups.items() if len(devices) >= count]
        if holding:
            return groups[min(holding)[2]][:count], spanned
        spanned = True
    return free[:count], spanned and count > 1


def count_short(info: NodeInfo, resource: str, added: int, shared_with_holds: int, room: int | None,
                kept_on: int = 0, going: int = 0) -> bool:
    """Whether the node's count of `resource` cannot take `added` more GPUs in use (devices a plan
    makes busy, and the pod's own plain request of it) and `shared_with_holds` devices it shares
    with nominated preemptors' holds only. With nothing added (slices of GPUs already in use) it
    is short when the node's real holders already use more than it counts (`real_used`, as
    `GPUsOvercommitted` judges it: a hold beside its terminating victims over-commits nothing): its
    count was cut below its pods' GPUs (an edited allocatable, a device plugin reporting GPUs
    gone), and a new pod there would run on GPUs the node no longer offers. Checked as upstream runs a pod's filters twice
    (RunFilterPluginsWithNominatedPods): with the holds of equal or higher priority (the ones left
    in the state for this attempt; lower ones are lifted) — there a shared device is counted
    already — and with the real holders alone (`real_used`), where it is not: the hold keeps it for
    after its victims are gone, while they still have their GPUs, and the pod would use it now.
    `room` (`ClusterState.count_room`, None without devices): the healthy free GPUs a count may
    still take; `added` (above 0) beyond it is short too — an unhealthy GPU goes to no new pod.
    `kept_on`: devices the pod shares with leaving pods only, on a node where holds are kept
    (`_vacating`); `going`: the node's GPUs of `resource` only leaving pods use now (the function
    `going`). In the pass with the holds, such a device is one more GPU in use once the leaving
    pods are gone, when the holds count on getting it back: short when what stays in use then
    (`used` less `going`, the holds included) with the pod's is over the count. A slice beside a
    pod that stays takes nothing from the holds (the GPUs the leaving pods give back serve them).
    With `added` above 0 the first check is the stricter one (`used` counts the kept devices)."""
    node = info.node
    if node is None or resource not in node.allocatable:
        return False
    if room is not None and 0 < added and added > room:
        return True
    allocatable = node.allocatable[resource]
    over = info.used(resource) + added > allocatable if added > 0 else info.real_used(resource) > allocatable
    return over or (
        shared_with_holds > 0 and info.real_used(resource) + added + shared_with_holds > allocatable) or (
        kept_on > 0 and info.used(resource) - going + added + kept_on > allocatable)


def over_count(ctx: PodContext, plan: DevicePlan, info: NodeInfo, state: ClusterState) -> str | None:
    """The pod's own plain request of a device resource (e.g. `nvidia.com/gpu: 2`) and the devices
    its class grants make busy share the node's count; the cached plan only knows the latter."""
    for counts in (plan.newly_busy, plan.held_busy, plan.kept_on):  # a resource in two is checked twice, alike
        for resource in counts:
            own = ctx.plain_request(resource)
            if not own:
                continue
            kept = plan.kept_on.get(resource, 0)
            if count_short(info, resource, plan.newly_busy.get(resource, 0) + own,
                                   plan.held_busy.get(resource, 0), state.count_room(info).get(resource),
                                   kept, going(state, info, resource) if kept else 0):
                return f"Insufficient {resource}"
    return None


def _peak_with(held: dict[str, dict[int, Amount]], resource: str, phases: Iterable[int], amount: Amount) -> Amount:
    """`slice_peak` of a pod's slices of one device with one more slice of `resource`."""
    grown = dict(held.get(resource, {}))
    for phase in phases:
        grown[phase] = grown.get(phase, 0) + amount
    return slice_peak({**held, resource: grown})


def _busy(use: DeviceUse | None) -> bool:
    return use is not None and use.busy


def _never(use: DeviceUse | None) -> bool:
    return False


def _count_cost(use: DeviceUse | None, held_only: Callable[[DeviceUse | None], bool],
                vacating: Callable[[DeviceUse | None], bool]) -> int:
    """Where nominated preemptors keep room on the node: how many GPUs of the count a slice's
    first share of the device takes, now and once the leaving pods are gone — none beside a pod
    that stays, one beside holds only (in use now, the holds' later) or beside leaving pods only
    (in use now, the holds' GPU later), two on a free device. Cheapest first, so a slice the
    count allows beside a staying pod never takes a GPU a hold waits for."""
    if not _busy(use):
        return 2
    return 1 if held_only(use) or vacating(use) else 0
