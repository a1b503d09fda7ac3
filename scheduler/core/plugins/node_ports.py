"""NodePorts: a pod's host ports must be free on the node (kube-scheduler v1.36
pkg/scheduler/framework/plugins/nodeports/node_ports.go).

The ports a pod takes are upstream's util.GetHostPorts: every port with a hostPort of its app
containers and of its restartable init containers (sidecars), read by the pod parser
(`Pod.host_ports`, hostIP and protocol sanitized to 0.0.0.0 and TCP). A node's ports in use are
those of the pods placed on it — bound, and assumed in this cycle, so the members of one gang
never share a port — and of the nominated preemptors holding room there (upstream adds nominated
pods to the node before filtering). Two ports conflict as in HostPortInfo.CheckConflict: the same
protocol and port, and the same hostIP or either one 0.0.0.0.

A pod without host ports skips the plugin (upstream's PreFilter returns Skip). The rejection is
Unschedulable, not ...AndUnresolvable: evicting the pods holding the port resolves it, so
preemption tries the node. Requeueing follows EventsToRegister (with queueing hints on, as by
default): a Node added always, an assigned pod deleted only where the port is free now on its node
(upstream: the deleted pod had a port in common with the waiting one). Batch form: the table marks
the nodes with any host port in use; only those are checked one by one.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Mapping
from typing import ClassVar

import numpy as np

from scheduler.core.framework.cycle_state import PodContext
from scheduler.core.framework.handle import Handle
from scheduler.core.framework.interface import Bools, FilterPlugin, QueueingHint, Reasons, RowVerdict, always
from scheduler.core.framework.nodetable import ColumnGroup, EachArray, NodeTable
from scheduler.core.objects import BIND_ALL, HostPort
from scheduler.core.state import ClusterEvent, ClusterState, EventKind, NodeInfo

NAME = "NodePorts"
REASON = "node(s) didn't have free ports for the requested pod ports"


def conflicts(want: HostPort, used: Iterable[HostPort]) -> bool:
    """HostPortInfo.CheckConflict: `want` collides with a port in use."""
    for port in used:
        if port.port == want.port and port.protocol == want.protocol and (
                want.ip == BIND_ALL or port.ip == BIND_ALL or port.ip == want.ip):
            return True
    return False


def fits(wants: Iterable[HostPort], used: Iterable[HostPort]) -> bool:
    """upstream's fitsPorts: none of the wanted ports collides with one in use."""
    taken = tuple(used)
    return not any(conflicts(want, taken) for want in wants)


def ports_in_use(state: ClusterState, info: NodeInfo, skip: str = "") -> Iterator[HostPort]:
    """The host ports taken on the node by the pods counted there (`ClusterState.on_node`:
    placed, and nominated preemptors holding room, all but `skip`)."""
    for uid in state.on_node(info, skip):
        pod = state.pods.get(uid)
        if pod is not None:
            yield from pod.host_ports


class PortColumn(ColumnGroup):
    """Whether a node has any host port in use."""

    def __init__(self, table: NodeTable) -> None:
        super().__init__(table)
        self.state = table.state
        self.used: Bools = np.zeros(self.capacity, np.bool_)

    def row_arrays(self, each: EachArray) -> None:
        self.used = each(self.used)

    def fill(self, row: int, info: NodeInfo) -> None:
        self.used[row] = next(ports_in_use(self.state, info), None) is not None


class NodePorts(FilterPlugin):
    name = NAME
    also_extends: ClassVar[frozenset[str]] = frozenset({"preFilter"})  # upstream's
    preemption_helps = True  # upstream: Unschedulable; evicting the port's holders frees it

    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    def queueing_hints(self) -> Mapping[EventKind, QueueingHint]:
        return {EventKind.NODE_ADDED: always, EventKind.ASSIGNED_POD_REMOVED: self._after_pod_removed}

    def _after_pod_removed(self, uid: str, event: ClusterEvent) -> bool:
        """upstream's isSchedulableAfterPodDeleted: only a removal that may have freed one of the
        pod's ports helps. The event names the node, not the pod gone, so: is every port of the
        pod free there now? (A removal with no node — a nominated pod's hold dropped — always may.)"""
        state = self.handle.state
        pod = state.pods.get(uid)
        info = state.nodes.get(event.node) if event.node else None
        if pod is None or info is None:
            return True
        return fits(pod.host_ports, ports_in_use(state, info, skip=uid))

    def filter_applies(self, ctx: PodContext) -> bool:
        return bool(ctx.pod.host_ports)  # upstream's PreFilter: Skip for a pod without host ports

    def pod_form(self, ctx: PodContext) -> Hashable:
        """Its host ports (its own, where placed, are not in use against it: gang members are pending)."""
        return ctx.pod.host_ports

    def filter(self, ctx: PodContext, info: NodeInfo) -> Reasons | None:
        if fits(ctx.pod.host_ports, ports_in_use(self.handle.state, info, skip=ctx.pod.uid)):
            return None
        return (REASON,)

    def filter_rows(self, table: NodeTable, ctx: PodContext, rows: Bools) -> RowVerdict:
        used = table.group(PortColumn).used[: table.size]
        candidates = rows & used
        if not candidates.any():
            return RowVerdict(None)
        for row in np.flatnonzero(candidates).tolist():
            if not self.filter(ctx, table.info(row)):
                candidates[row] = False  # its ports are other ones
        return RowVerdict(candidates, lambda: ((REASON, candidates),))
