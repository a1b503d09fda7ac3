"""TesseraDevices: ResourceClass devices — which nodes can give a pod its devices, which devices,
and how full that leaves them.

- PreFilter: every class the pod asks for exists and is valid (else the class's problem is the
  pod's reason).
- Filter: a node passes when the planner finds devices for every request (`planner.py`); batch
  form: the class columns rule out nodes without enough free matching devices (`columns.py`), and
  for a single exclusive request decide alone. A node whose devices could not hold the request
  even with every pod gone rejects it UnschedulableAndUnresolvable (`unresolvable_rows`), as
  upstream's Fit does a request above the node's allocatable: preemption does not try it.
- Score: device-level binpack (how full the matching devices are after the placement).
- Reserve: the chosen node's plan becomes the `tessera.dev/devices` annotation of the Binding.
- Permit: the allocation gate (`gate.py`) holds a Binding while the node agent is still handing
  another pod the same resource on that node.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import ClassVar

import numpy as np

from scheduler.core import annotations as ann
from scheduler.core.framework.attempt import Attempt
from scheduler.core.framework.cycle_state import MAX_NODE_SCORE, DeviceDemand, DevicePlan, PodContext
from scheduler.core.framework.handle import Handle
from scheduler.core.framework.interface import (
    Bools,
    FilterPlugin,
    Ints,
    PermitPlugin,
    PreFilterPlugin,
    QueueingHint,
    Reasons,
    Released,
    Reservation,
    ReservePlugin,
    RowVerdict,
    ScorePlugin,
    always,
)
from scheduler.core.framework.nodetable import NodeTable
from scheduler.core.framework.resources import ResourceColumns
from scheduler.core.plugins.devices.args import DeviceArgs
from scheduler.core.plugins.devices.columns import ClassColumns, devices_possible, simple_exclusive
from scheduler.core.plugins.devices.gate import AllocationGate
from scheduler.core.plugins.devices.planner import BROKEN, DevicePlanner, SliceChooser
from scheduler.core.state import EventKind, NodeInfo

NAME = "TesseraDevices"


class TesseraDevices(PreFilterPlugin, FilterPlugin, ScorePlugin, ReservePlugin, PermitPlugin):
    name = NAME
    preemption_helps = True  # devices held by pods come free when they are evicted
    stays_on: ClassVar[str] = ("it chooses the devices a pod is granted among the free ones: without it one device "
                               "could be given twice")

    def __init__(self, handle: Handle, args: DeviceArgs) -> None:
        self.handle = handle
        self.state = handle.state
        self.args = args
        self.default_class_controller = args.default_class_controller
        self.planner = DevicePlanner(self.state, lambda: handle.find(SliceChooser))
        self.gate = AllocationGate(self.state, args)
        self._rows_plans: tuple[PodContext, Ints, list[DevicePlan]] | None = None

    def queueing_hints(self) -> Mapping[EventKind, QueueingHint]:
        on_node = self.handle.node_hint(self.name)
        return {EventKind.NODE_ADDED: on_node, EventKind.NODE_UPDATED: on_node,
                EventKind.ASSIGNED_POD_REMOVED: always, EventKind.DEVICE_CHANGED: always,
                EventKind.CLASS_CHANGED: always}

    def pre_filter(self, ctx: PodContext) -> str | None:
        return ctx.prefilter_error

    # --- filter --------------------------------------------------------------------------------

    def filter_applies(self, ctx: PodContext) -> bool:
        return bool(ctx.device_requests)

    def pod_form(self, ctx: PodContext) -> Hashable:
        """Its device requests (by class, container and phases) and plain requests (a plain request of a
        device's resource name shares its count)."""
        return ctx.plain, tuple((r.container, r.resource_name, r.count, r.cls.name, r.phases) for r in ctx.device_requests)

    def filter(self, ctx: PodContext, info: NodeInfo) -> Reasons | None:
        return self.planner.filter_node(ctx, info)

    def node_filter(self, ctx: PodContext) -> Callable[[NodeInfo], Reasons | None]:
        return self.planner.node_filter(ctx)

    def scan(self, ctx: PodContext, rows: Iterable[int], infos: Sequence[NodeInfo], want: int) -> list[int]:
        return self.planner.scan(ctx, rows, infos, want)

    def filter_rows(self, table: NodeTable, ctx: PodContext, rows: Bools) -> RowVerdict:
        columns = table.group(ClassColumns)
        n = table.size
        single = len(ctx.device_requests) == 1
        known: list[Bools] = []  # devices_possible, computed once if asked for

        def possible() -> Bools:
            if not known:
                known.append(devices_possible(columns, ctx, n))
            return known[0]

        def explain(row: int) -> Reasons:
            info = table.info(row)
            if single and not possible()[row]:
                return (BROKEN if info.broken else f"Insufficient {ctx.device_requests[0].resource_name}",)
            return self.filter(ctx, info) or ()

        simple = simple_exclusive(columns, ctx)
        if simple is None:
            ctx.device_demand = lambda feasible: _demand_from_plans(self._plans_of(table, ctx, feasible))
            return RowVerdict(rows & ~possible(), explain=explain, exact=False)
        name, resource, count = simple
        column = table.group(ResourceColumns).of(resource)
        alloc, score_alloc = column.alloc[:n], column.score_alloc[:n]
        advertised = ~((alloc == 0) & (score_alloc > 0))  # the node reports the resource itself
        own = ctx.plain_request(resource)  # the pod's plain request of the same resource shares the count
        room = ~advertised | (column.free[:n] >= count + own)
        ok = ~columns.broken[:n] & (columns.free[name][:n] >= count) & room
        ctx.device_demand = lambda feasible: {
            resource: DeviceDemand(np.full(len(feasible), count, np.int64), np.ones(len(feasible), np.bool_))}
        return RowVerdict(rows & ~ok, explain=explain)

    def unresolvable_rows(self, table: NodeTable, ctx: PodContext, rows: Ints) -> Bools:
        """The rows whose node could not give the pod its devices even with every pod gone
        (upstream's Fit: a request above the node's allocatable is UnschedulableAndUnresolvable,
        with the same "Insufficient <resource>" reason): fewer schedulable matching devices
        than the pod holds at once (`class_needs`), or, for a sharing class, a slice larger than
        any one of them holds in its dimension. Devices other pods hold stay merely
        Unschedulable: evicting them frees the devices. Devices matching two of the pod's
        classes count for both, so a node is never called unresolvable that is not."""
        columns = table.group(ClassColumns)
        never = np.zeros(len(rows), np.bool_)
        for name, need in ctx.class_needs().items():
            total = columns.total.get(name)
            never |= total[rows] < need if total is not None else True
        for req in ctx.device_requests:
            if req.cls.sharing is not None:
                most = columns.most_units.get(req.cls.name)
                never |= most[rows] < req.count if most is not None else True
        return never

    def _plans_of(self, table: NodeTable, ctx: PodContext, rows: Ints) -> list[DevicePlan]:
        """The plans of the feasible rows (the per-node filter made one for each), in row order;
        resource scoring and this plugin's score both ask for the same rows in one cycle."""
        memo = self._rows_plans
        if memo is not None and memo[0] is ctx and memo[1] is rows:
            return memo[2]
        nodes, order, plans = table.state.nodes, table.state.node_order, ctx.plans
        found = [plans[nodes[order[row]].name] for row in rows.tolist()]
        self._rows_plans = (ctx, rows, found)
        return found

    # --- score ---------------------------------------------------------------------------------

    def score_applies(self, ctx: PodContext) -> bool:
        return bool(ctx.device_requests)

    def score(self, ctx: PodContext, info: NodeInfo) -> int:
        plan = ctx.plans.get(info.name)
        return plan.score if plan is not None else 0

    def score_rows(self, table: NodeTable, ctx: PodContext, rows: Ints) -> Ints:
        columns = table.group(ClassColumns)
        simple = simple_exclusive(columns, ctx)
        if simple is not None:  # the columns decided feasibility: no plans were made
            name, _, count = simple
            total = columns.total[name][rows]
            busy_after = total - columns.free[name][rows] + count
            score = busy_after * MAX_NODE_SCORE // np.where(total > 0, total, 1)
            if count > 1:  # spanning two NVLink groups (NUMA nodes) halves it, as the planner does
                largest = columns.largest_group[name][rows]
                score = np.where((largest >= 0) & (largest < count), score // 2, score)
            return score
        return np.array([plan.score for plan in self._plans_of(table, ctx, rows)], np.int64)

    # --- reserve -------------------------------------------------------------------------------

    def reserve(self, ctx: PodContext, info: NodeInfo, now: float) -> Reservation:
        """The chosen node's devices (planned now if the columns decided the node) and the
        Binding annotations that carry them."""
        plan = ctx.plans.get(info.name)
        if plan is None and ctx.device_requests:
            made = self.planner.plan(ctx.device_requests, info)
            assert not isinstance(made, str), made
            plan = made
        if plan is None:
            if any(self.state.classes.is_class_resource(name) for name in ctx.pod.requests):
                raise AssertionError(f"{ctx.pod.key}: placed on {info.name} without a device plan")
            if ann.DEVICES in ctx.pod.meta.annotations or ann.HELD_DEVICES in ctx.pod.meta.annotations:
                # device annotations the pod came with (a manifest copied from a bound pod): a
                # Binding adds annotations and removes none, so left alone they would name GPUs the
                # bound pod then holds, which no one chose for it — they say "none" instead
                return Reservation(_given(ann.encode_devices({})), {})
            return Reservation()
        return _reservation(self, plan, now)


    # --- permit (the allocation gate) ---------------------------------------------------------

    def permit(self, attempt: Attempt, now: float) -> bool:
        return self.gate.permit(attempt, now)

    def release(self, node: str | None, now: float) -> Released:
        return self.gate.release(node, now)

    def held(self) -> list[Attempt]:
        return self.gate.held()

    def abandon(self) -> list[Attempt]:
        return self.gate.abandon()

    def reject(self, uid: str) -> bool:
        return self.gate.reject(uid)


def _demand_from_plans(plans: list[DevicePlan]) -> dict[str, DeviceDemand]:
    names = {name for plan in plans for name in plan.resources}
    return {name: DeviceDemand(np.array([plan.newly_busy.get(name, 0) for plan in plans], np.int64),
                               np.array([name in plan.resources for plan in plans], np.bool_))
            for name in names}


def _reservation(plugin: TesseraDevices, plan: DevicePlan, now: float) -> Reservation:
    devices = plugin.state.devices
    assignment = {
        container: {
            resource: tuple(ann.DeviceGrant(devices[name].device_id, name, amount, dimension,
                                            devices[name].resource_name)
                            for name, amount, dimension in grants)
            for resource, grants in by_resource.items()
        }
        for container, by_resource in plan.grants.items()
    }
    annotations = {
        **_given(ann.encode_devices(assignment)),
        ann.PHASE: ann.PHASE_ALLOCATING,
        ann.ASSUME_TIME: str(int(now * 1_000_000_000)),
    }
    return Reservation(annotations, assignment)


def _given(encoded: str) -> dict[str, str]:
    """The Binding's record of the devices it gives: `tessera.dev/devices` (what the node agent
    hands out, and what a user may edit) and `tessera.dev/held-devices` with the same value. The
    apiserver copies a Binding's annotations onto the pod (pkg/registry/core/pod/storage/
    storage.go setPodNodeAndMetadata), so the pod carries from birth what it was given: an edit of
    its devices annotation while no scheduler runs is still held by the next one (the intake
    holds the union of both annotations)."""
    return {ann.DEVICES: encoded, ann.HELD_DEVICES: encoded}
