"""`kubectl tessera rollback-check`: may an older Tessera take over without giving a GPU in use away?

Why: a bound pod's `tessera.dev/held-devices` records every device it was given while bound
(`scheduler.core.annotations.HELD_DEVICES`). After someone edits its `tessera.dev/devices`, the
held record still names the devices the edit dropped, which its containers keep using, and this
version holds them until the pod ends. A version from before held-devices existed reads
`tessera.dev/devices` alone: it takes those devices for free and gives them to the next pod. The
older version cannot be fixed, so an operator checks before rolling back: this lists every such
pod and each device (or part of a slice) an older version would not see held.

What an older version does with the other cases, so they are not listed: a `tessera.dev/devices`
it cannot read excludes the pod's node from device scheduling (it fails closed: no GPU is given
twice, the node's free GPUs wait); a pod that ended (Succeeded, Failed) frees what it held in
both versions. A `tessera.dev/held-devices` that cannot be read is listed: what the pod holds
beyond its devices annotation is unknown, so the rollback cannot be called safe.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.api.quantity import Amount, format_quantity
from scheduler.core import annotations as ann
from scheduler.core.objects import ObjectError, Pod, in_terminal_phase, parse_pod
from scheduler.core.state.cluster import pod_holds
from scheduler.view.text import columns

# the commit that brought tessera.dev/held-devices: a rollback target from it on reads both annotations,
# so the verdict names the builds it is about (the check cannot know which one an operator goes to)
HELD_DEVICES_SINCE = "6ba0c29"

# a device's hold by one pod: None whole, else per dimension its slices held at the same time
# added up (`_holds`; "" for slices whose grant names no dimension)
Hold = dict[str, Amount] | None


@dataclass(frozen=True, slots=True)
class Unseen:
    """A bound pod whose held record names what its devices annotation does not."""

    pod: str  # namespace/name
    node: str
    devices: tuple[str, ...]  # what an older version would take for free: "gpu-0", "gpu-1 (8Gi held, 4Gi named)"
    why: str = ""  # set when held-devices cannot be read (devices is then empty)


@dataclass(frozen=True, slots=True)
class RollbackCheck:
    pods: tuple[Unseen, ...]

    @property
    def safe(self) -> bool:
        return not self.pods

    def verdict(self) -> str:
        if self.safe:
            return (f"safe to roll back: every bound pod's {ann.DEVICES} names all the devices its "
                    f"{ann.HELD_DEVICES} records")
        count = f"{len(self.pods)} pods hold" if len(self.pods) != 1 else "1 pod holds"
        return (f"{count} devices an older version cannot "
                f"see (it reads {ann.DEVICES} alone and would give them to another pod): not safe to roll back to "
                f"a build without {ann.HELD_DEVICES} (before {HELD_DEVICES_SINCE}) until they end; a build from "
                f"{HELD_DEVICES_SINCE} on reads both, and this check does not apply to it")


def check(objects: Iterable[Mapping[str, Any]]) -> RollbackCheck:
    """Every bound pod still running (or waiting to run) among `objects` (raw Pods as listed)
    that holds a device its `tessera.dev/devices` does not name, in namespace/name order."""
    found: list[Unseen] = []
    for pod in objects:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        annotations = meta.get("annotations") or {}
        node = spec.get("nodeName") or ""
        if not node or ann.HELD_DEVICES not in annotations or in_terminal_phase(pod):
            continue
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        try:
            held = ann.decode_devices(annotations[ann.HELD_DEVICES])
            parsed = parse_pod(pod)
        except (ann.AnnotationError, ObjectError) as err:
            what = ann.HELD_DEVICES if isinstance(err, ann.AnnotationError) else "the pod"
            found.append(Unseen(key, node, (), f"{what} cannot be read ({err}): what the pod holds "
                                               f"beyond {ann.DEVICES} is unknown"))
            continue
        raw = annotations.get(ann.DEVICES)
        try:
            named = ann.decode_devices(raw) if raw is not None else {}  # removed: an older version sees none
        except ann.AnnotationError:
            continue  # an older version excludes the node from device scheduling: nothing is given twice
        unseen = _unseen(_holds(parsed, held), _holds(parsed, named))
        if unseen:
            found.append(Unseen(key, node, unseen))
    return RollbackCheck(tuple(sorted(found, key=lambda unseen: unseen.pod)))


def _holds(pod: Pod, assignment: ann.DeviceAssignment) -> dict[str, Hold]:
    """Each device the assignment gives the pod, as every version charges it (`pod_holds`, which
    the versions before held-devices had too): whole if any container has it whole, else its
    slices that run at the same time added up over every resource name, per dimension. Not the
    largest grant: two app containers' 4Gi slices of a device hold 8Gi, and an edit leaving one
    lets an older version give the other 4Gi away. Not one sum over dimensions: a slice uses the
    device's capacity its dimension names, so 2 of its cores dropped are given away however much
    more of its memory an edit names."""
    holds: dict[str, Hold] = {}
    for device, amount, _resource, dimension in pod_holds(pod, assignment):
        known = holds.setdefault(device, {})
        if amount is None or known is None:
            holds[device] = None
        else:
            known[dimension] = known.get(dimension, 0) + amount
    return holds


def _unseen(held: Mapping[str, Hold], named: Mapping[str, Hold]) -> tuple[str, ...]:
    """The held devices `named` leaves out, or names a smaller part of, as the table shows them."""
    out: list[str] = []
    for device, hold in sorted(held.items()):
        if device not in named:
            out.append(device if hold is None else f"{device} ({_amounts(hold)})")
            continue
        seen = named[device]
        if seen is None:
            continue
        if hold is None:
            out.append(f"{device} (whole held, {_amounts(seen)} named)")
            continue
        short = [f"{_amount(dimension, amount)} held, {format_quantity(seen.get(dimension, 0))} named"
                 for dimension, amount in sorted(hold.items()) if seen.get(dimension, 0) < amount]
        if short:
            out.append(f"{device} ({'; '.join(short)})")
    return tuple(out)


def _amount(dimension: str, amount: Amount) -> str:
    """A slice's amount with the dimension it is of ("2 cores"; a grant naming none: "8Gi")."""
    return f"{format_quantity(amount)}{' ' + dimension if dimension else ''}"


def _amounts(slices: Mapping[str, Amount]) -> str:
    """A device's slices, each dimension's: "8Gi memory, 2 cores"."""
    return ", ".join(_amount(dimension, amount) for dimension, amount in sorted(slices.items()))


def as_dict(result: RollbackCheck) -> dict[str, Any]:
    """`-o json|yaml`: the verdict and the pods."""
    return {"safe": result.safe, "verdict": result.verdict(),
            "pods": [{"pod": unseen.pod, "node": unseen.node, "unseenDevices": list(unseen.devices),
                      **({"reason": unseen.why} if unseen.why else {})} for unseen in result.pods]}


def render(result: RollbackCheck) -> str:
    """A table of the pods (none: the verdict alone), then the verdict."""
    if result.safe:
        return result.verdict()
    rows: list[list[str | None]] = [["POD", "NODE", "DEVICES AN OLDER VERSION WOULD SEE FREE"]]
    rows += [[unseen.pod, unseen.node, unseen.why or ", ".join(unseen.devices)] for unseen in result.pods]
    return columns(rows) + "\n\n" + result.verdict()
