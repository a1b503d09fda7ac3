"""Which of a pod's containers run at the same time, as the kubelet starts them.

The kubelet runs the init containers one at a time in spec order, each plain one to completion
before the next starts; a sidecar (an init container with `restartPolicy: Always`) keeps running
from its start until the pod ends; the app containers start together after the last init
container. A pod therefore lives through *phases*: one per plain init container (it, and the
sidecars started before it), then the app phase (every sidecar and every app container).

Two containers whose phases do not meet never run together, so a device one had can be the
other's. That is what the kubelet's device manager does (pkg/kubelet/cm/devicemanager/manager.go
`Allocate`, `devicesToAllocate`): a finished plain init container's devices go to
`devicesToReuse` and later containers of the pod asking for the same resource name take them
first; a sidecar's or an app container's devices leave that set, as they keep running. And it is
why kube-scheduler's `resourcehelper.PodRequests` charges the larger of each init step and the
app phase. Container names the pod spec does not have count as running in every phase (what
such a grant holds, it holds throughout).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

from scheduler.api.quantity import Amount

ContainerKind = Literal["init", "sidecar", "app"]
INIT: ContainerKind = "init"  # a plain init container: runs to completion before the next starts
SIDECAR: ContainerKind = "sidecar"  # a restartable init container: runs until the pod ends
APP: ContainerKind = "app"

Phases = frozenset[int]
# one grant: (device name, shared amount or None for the whole device, the sharing dimension the
# amount is of — "" for a whole device, or a slice whose annotation does not say)
Grant = tuple[str, Amount | None, str]
# container -> resource name -> its grants
GrantsByContainer = Mapping[str, Mapping[str, Iterable[Grant]]]
# what a pod holds of a device: (device name, its slices of one resource name in one dimension or
# None for the whole device, that resource name, that dimension ("" as in `Grant`))
DeviceHold = tuple[str, Amount | None, str, str]


def container_phases(containers: Iterable[tuple[str, ContainerKind]]) -> dict[str, Phases]:
    """The phases each container runs in, for the pod's containers in kubelet order (init
    containers in spec order, then app containers)."""
    listed = list(containers)
    app_phase = sum(1 for _, kind in listed if kind == INIT)
    phases: dict[str, Phases] = {}
    step = 0
    for name, kind in listed:
        if kind == INIT:
            phases[name] = frozenset((step,))
            step += 1
        elif kind == SIDECAR:
            phases[name] = frozenset(range(step, app_phase + 1))
        else:
            phases[name] = frozenset((app_phase,))
    return phases


def always(phases: Mapping[str, Phases]) -> Phases:
    """Every phase of the pod: where a container the spec does not name counts."""
    return frozenset(range(max((p for ran in phases.values() for p in ran), default=0) + 1))


def peak(needs: Iterable[tuple[Phases, int]]) -> int:
    """The most that runs at once of needs given with their phases (PodRequests' max)."""
    per_phase: dict[int, int] = {}
    for phases, amount in needs:
        for phase in phases:
            per_phase[phase] = per_phase.get(phase, 0) + amount
    return max(per_phase.values(), default=0)


def slice_peak(by_phase: Mapping[str, Mapping[int, Amount]]) -> Amount:
    """What a pod holds of one device through shared slices: per resource name the most its
    containers' slices there add up to in one phase, summed over resource names (the kubelet
    reuses a finished container's slots only under the same resource name)."""
    return sum((max(amounts.values(), default=0) for amounts in by_phase.values()), 0)


def device_holds(grants: GrantsByContainer, phases: Mapping[str, Phases]) -> list[DeviceHold]:
    """What a pod holds of each device over its life, from its per-container grants: a device
    any container has whole once, `(device, None, the resource name of its first grant, "")`; a
    device it has in slices once per resource name and dimension, `(device, the most its
    containers' slices of that name add up to in one phase, resource name, dimension)` — per
    resource name, as the kubelet hands slots on (their sum is `slice_peak`), and per dimension,
    because each slice uses the capacity of the device its grant names (an edit of the class
    since does not change what the pod was given). A device that two containers are given in
    phases that do not meet is held once."""
    if len(grants) == 1:  # one container: its grants all run at once (the usual pod)
        return _one_container_holds(next(iter(grants.values())))
    every = always(phases)
    whole: dict[str, str] = {}
    sliced: dict[str, dict[tuple[str, str], dict[int, Amount]]] = {}
    first: dict[str, str] = {}
    for container, by_resource in grants.items():
        ran = phases.get(container, every)
        for resource, entries in by_resource.items():
            for device, amount, dimension in entries:
                first.setdefault(device, resource)
                if amount is None:
                    whole[device] = resource
                    continue
                by_phase = sliced.setdefault(device, {}).setdefault((resource, dimension), {})
                for phase in ran:
                    by_phase[phase] = by_phase.get(phase, 0) + amount
    holds: list[DeviceHold] = []
    for device, resource in first.items():
        if device in whole:
            holds.append((device, None, resource, ""))
        else:
            holds += [(device, max(amounts.values(), default=0), name, dimension)
                      for (name, dimension), amounts in sliced[device].items()]
    return holds


def _one_container_holds(by_resource: Mapping[str, Iterable[Grant]]) -> list[DeviceHold]:
    """`device_holds` of a pod with one container: nothing is handed on, every slice adds up."""
    if len(by_resource) == 1:  # one resource name (the usual case; this runs per pod per node tried)
        for resource, entries in by_resource.items():
            grants = entries if isinstance(entries, (list, tuple)) else list(entries)
            if len(grants) == 1:
                device, amount, dimension = grants[0]
                return [(device, amount, resource, "" if amount is None else dimension)]
    whole: dict[str, str] = {}
    sliced: dict[str, dict[tuple[str, str], Amount]] = {}
    first: dict[str, str] = {}
    for resource, entries in by_resource.items():
        for device, amount, dimension in entries:
            first.setdefault(device, resource)
            if amount is None:
                whole[device] = resource
            else:
                by_kind = sliced.setdefault(device, {})
                by_kind[resource, dimension] = by_kind.get((resource, dimension), 0) + amount
    holds: list[DeviceHold] = []
    for device, resource in first.items():
        if device in whole:
            holds.append((device, None, resource, ""))
        else:
            holds += [(device, amount, name, dimension) for (name, dimension), amount in sliced[device].items()]
    return holds


def shared_while_running(devices: Mapping[str, Iterable[str]], phases: Mapping[str, Phases]) -> list[tuple[str, str, str]]:
    """Devices given whole to two containers of one pod that run at the same time, as (device,
    one container, the other): the kubelet would hand such a GPU to both. Only a hand-written
    annotation can say so (the planner hands a device on only between phases that do not meet);
    `devices` maps each container to the devices it has whole."""
    every = always(phases)
    holder: dict[str, list[str]] = {}
    found: list[tuple[str, str, str]] = []
    for container, names in devices.items():
        ran = phases.get(container, every)
        for device in dict.fromkeys(names):
            earlier = next((other for other in holder.get(device, ()) if not ran.isdisjoint(phases.get(other, every))),
                           None)
            if earlier is not None:
                found.append((device, earlier, container))
            holder.setdefault(device, []).append(container)
    return found


def whole_beside_slice(whole: Mapping[str, Iterable[str]], sliced: Mapping[str, Iterable[str]],
                       phases: Mapping[str, Phases]) -> list[tuple[str, str, str]]:
    """Devices one container of a pod has whole and another has a slice of while both run, as
    (device, the whole one's container, the slice's): the kubelet would hand that GPU to both.
    Only a hand-written annotation can say so (the planner puts a slice on a GPU its pod has whole
    only in phases that do not meet); a finished init container's GPU sliced by a later container
    is not this. `whole` and `sliced` map each container to the devices it has whole, in slices."""
    every = always(phases)
    found: list[tuple[str, str, str]] = []
    for owner, names in whole.items():
        ran = phases.get(owner, every)
        for device in dict.fromkeys(names):
            found += [(device, owner, other) for other, theirs in sliced.items()
                      if other != owner and device in theirs and not ran.isdisjoint(phases.get(other, every))]
    return found
