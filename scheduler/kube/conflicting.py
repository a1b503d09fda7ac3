"""A second Tessera leading on another Lease on the same GPU nodes: seen, counted and said out loud.

The Lease is what makes replicas one scheduler. Two installs on different Leases (two Helm
releases; the README's `tessera run` left running beside the chart, `kube-system/tessera` against
`tessera-system/tessera`) both lead and both bind, each blind to the other's decisions in flight,
so on the same GPU nodes they can give one GPU to two pods — whether they share a `schedulerName`
or each serves its own (`tessera` and `tessera-b`: adversary round 10 found 4 V100s held twice
in one run). More scheduler names belong in one install's profiles; two installs need disjoint GPU
nodes. Nothing in the API stops it (two kube-schedulers on the same nodes race the same way,
silently; kubelet admission refuses counted over-commit on real nodes, the node agent refuses a
slice overfill), and Tessera cannot tell which install is the wanted one, so it does not step
aside on its own: it makes the mistake loud the first time it is visible. Every term token names
its Lease (scheduler/kube/term_token.py), so a leader watching a pod's `tessera.dev/term` *change*
to another Lease's token has watched the other install fence or bind it — a pod of its own
scheduler names, or one of another name in the update that binds it (`SchedulerLoop._term_written`:
a token a user wrote onto their pod is no install's). A token first seen on an already-written pod
(a LIST at start-up) is not counted: it may be history — a Lease renamed since, an install removed
since.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Container, Mapping
from typing import Any

import structlog

from scheduler.core.tenants import pods_named
from scheduler.kube.recorder import EventRecorder, ObjectRef
from scheduler.kube.term_token import parse_term_token

log = structlog.get_logger("tessera.loop")

REASON = "ConflictingScheduler"
# the core's notices of a GPU given out twice (beyond its node's count, or to two pods), whose
# message names the other install when it was watched binding pods on that node (`other_install_note`)
GIVEN_TWICE = frozenset({"GPUsOvercommitted", "DeviceConflict"})


def other_install_note(holders: Mapping[str, str], other_lease: Callable[[str], str | None],
                       watched: Container[str], namespace: str = "") -> str:
    """What a GPUsOvercommitted or DeviceConflict message adds when another install is known to
    have done it: `holders` are the pods on the node (namespace/name -> its `tessera.dev/term`
    token); those written under another Lease this process has watched writing (`watched`: a
    ConflictingScheduler it reported) are named with it — as an Event regarding an object of
    `namespace` may name them (`pods_named`: "", a Node's Event or the log line, names all). ""
    when none (a token of another Lease only listed may be history: a Lease renamed, an install
    removed since)."""
    by_lease: dict[str, list[str]] = {}
    for pod, token in holders.items():
        other = other_lease(token)
        if other is not None and other in watched:
            by_lease.setdefault(other, []).append(pod)
    if not by_lease:
        return ""
    named = "; ".join(f"Lease {lease} ({pods_named(namespace, sorted(pods))})"
                      for lease, pods in sorted(by_lease.items()))
    return (f". Another Tessera install was seen writing pods of this node (ConflictingScheduler): {named}: "
            "two installs (two Leases) on the same GPU nodes give one GPU to two pods, whatever their scheduler names; "
            "run one install per set of GPU nodes, with every scheduler name in its profiles")


class ConflictingSchedulers:
    """`term_changed` is told each pod whose term token changed while this replica leads; a
    token of another Lease is counted (`writes`, tessera_conflicting_scheduler_writes_total) and,
    once per term of the other install, logged at error and recorded as a Warning Event on the pod."""

    def __init__(self, other_lease: Callable[[str], str | None], own_token: Callable[[], str | None],
                 events: EventRecorder) -> None:
        self.other_lease = other_lease
        self.own_token = own_token
        self.events = events
        self.writes: Tally[str] = Tally()  # the other Lease -> its writes watched
        self._said: set[str] = set()  # the other install's terms already reported

    def term_changed(self, token: str, pod: dict[str, Any]) -> None:
        other = self.other_lease(token)
        if other is None:
            return
        self.writes[other] += 1
        if token in self._said:
            return
        self._said.add(token)
        meta = pod.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        spec = pod.get("spec") or {}
        scheduler_name = str(spec.get("schedulerName") or "")
        own = parse_term_token(self.own_token() or "")
        lease = own.lease if own is not None and own.lease is not None else "its own Lease"
        theirs = parse_term_token(token)
        identity = theirs.identity if theirs is not None else ""
        wrote = "bound" if spec.get("nodeName") else "wrote"
        message = (f"another Tessera leading on Lease {other} (identity {identity}) {wrote} this pod of "
                   f"schedulerName {scheduler_name} while this scheduler leads on Lease {lease}: two installs "
                   "(two Leases) that schedule onto the same GPU nodes each decide without the other's choices "
                   "in flight and can give one GPU to two pods, whatever their scheduler names; run one "
                   "install per set of GPU nodes, with every scheduler name it serves in its profiles")
        log.error("leader.conflicting_scheduler", pod=f"{namespace}/{name}", lease=lease, other_lease=other,
                  other_identity=identity, token=token, message=message)
        self.events.record(ObjectRef("Pod", "v1", name, namespace, str(meta.get("uid") or "")), "Warning",
                           REASON, "Scheduling", message)
