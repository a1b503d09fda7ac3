"""TesseraDevices over the whole node table: per ResourceClass, how many matching devices a node
has free (or the most room on one device, for sharing classes).

A necessary condition for the planner: a node with too few free matching devices cannot have a
plan, so it is never planned. For the commonest request — one exclusive class whose devices all
belong to one resourceName — it is also sufficient, together with the node's count of that
resource (`simple_exclusive`): feasibility, the devices made busy and the device score then
follow from the columns, and only the chosen node gets a real plan.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from scheduler.core.framework.cycle_state import PodContext
from scheduler.core.framework.interface import Bools, Ints
from scheduler.core.framework.nodetable import ColumnGroup, NodeTable, grown
from scheduler.core.objects import Device
from scheduler.core.plugins.devices.planner import described
from scheduler.core.state import ClusterState, NodeInfo


# A column holds int64: a tiny unit or a huge capacity would overflow it. No pod asks for more
# than 2**62 of anything (larger quantities are refused when pods are read), so more room than
# that is as good as that.
UNITS_MAX = 2**62


class ClassColumns(ColumnGroup):
    def __init__(self, table: NodeTable) -> None:
        self.state: ClusterState = table.state
        self.capacity = table.capacity
        self.free: dict[str, Ints] = {}  # free matching devices, or most units on one device (sharing)
        self.total: dict[str, Ints] = {}  # matching schedulable devices
        # sharing classes: the most of the class's units one matching schedulable device holds
        # when no pod uses it (its capacity in the dimension over the unit, rounded down)
        self.most_units: dict[str, Ints] = {}
        # exclusive classes: the most free matching devices in one NVLink group or NUMA node (the
        # largest of either; -1 when the free devices describe neither): a request of more spans
        # two groups and the planner halves the node's score (`within_one_group`)
        self.largest_group: dict[str, Ints] = {}
        self.resources: dict[str, set[str]] = {}  # device resourceNames per class
        self.broken: Bools = np.zeros(table.capacity, np.bool_)
        self.reset()

    def epoch(self) -> int:
        """The class registry's epoch: new or changed classes need columns of their own."""
        return self.state.classes.epoch

    def reset(self) -> None:
        valid = [cls.name for cls in self.state.classes.by_resource.values()]
        self.free = {name: np.zeros(self.capacity, np.int64) for name in valid}
        self.total = {name: np.zeros(self.capacity, np.int64) for name in valid}
        self.most_units = {name: np.zeros(self.capacity, np.int64) for name in valid}
        self.largest_group = {name: np.full(self.capacity, -1, np.int64) for name in valid}
        self.resources = {name: set() for name in valid}

    def grow(self, capacity: int) -> None:
        self.capacity = capacity
        self.broken = grown(self.broken, capacity)
        for columns in (self.free, self.total, self.most_units, self.largest_group):
            for name, column in list(columns.items()):
                columns[name] = grown(column, capacity)

    def fill(self, row: int, info: NodeInfo) -> None:
        self.broken[row] = bool(info.broken)
        classes = self.state.classes
        uses = self.state.ledger.use
        for name, column in self.free.items():
            cls = classes.classes[name]
            best = most = 0
            free: list[Device] = []  # exclusive classes: the free matching devices
            candidates = self.state.class_devices(info, name)  # and all of them, busy or free (their groups)
            for device in candidates:
                self.resources[name].add(device.resource_name)
                use = uses.get(device.name)
                if cls.sharing is None:
                    if use is None or not use.busy:
                        best += 1
                        free.append(device)
                else:
                    most = max(most, min(UNITS_MAX, cls.sharing.slices_on(device)))
                    capacity = device.capacity.get(cls.sharing.dimension)
                    if capacity is None:
                        continue
                    if use is None or not use.exclusive:
                        room = capacity - self.state.ledger.shared_use(use, cls.sharing.dimension)
                        best = max(best, min(UNITS_MAX, math.ceil(room / cls.sharing.unit)))
            column[row] = best
            self.total[name][row] = len(candidates)
            self.most_units[name][row] = most
            self.largest_group[name][row] = largest_group(free, described(candidates))


def largest_group(free: list[Device], attributes: tuple[str, ...]) -> int:
    """The most of `free` in one group of the first grouping attribute the node's devices of the
    class describe (`attributes`, see the planner's `described`: NVLink group, else NUMA node; a
    device without it is a group of its own); -1 when they describe none. The planner
    (`within_one_group`) calls a request split when that attribute's groups cannot hold it, even
    if a NUMA node could: both forms must score alike."""
    if not attributes:
        return -1
    attribute = attributes[0]
    sizes = Counter(device.attributes.get(attribute, "\0" + device.name) for device in free)
    return max(sizes.values()) if sizes else 0


def simple_exclusive(columns: ClassColumns, ctx: PodContext) -> tuple[str, str, int] | None:
    """(class, device resourceName, count) when the pod makes one exclusive class request whose
    devices all belong to one resourceName (see the module docstring)."""
    if len(ctx.device_requests) != 1:
        return None
    req = ctx.device_requests[0]
    resources = columns.resources.get(req.cls.name)
    if req.cls.sharing is not None or resources is None or len(resources) != 1:
        return None
    return req.cls.name, next(iter(resources)), req.count


def devices_possible(columns: ClassColumns, ctx: PodContext, n: int) -> Bools:
    """Rows with enough free matching devices (or shared room) for the pod's class requests."""
    exclusive = ctx.class_needs()
    shared: dict[str, int] = {}
    for req in ctx.device_requests:
        if req.cls.sharing is not None:
            shared[req.cls.name] = max(shared.get(req.cls.name, 0), req.count)
    possible = np.ones(n, np.bool_)
    for needs in (exclusive, shared):
        for name, need in needs.items():
            column = columns.free.get(name)
            if column is None:
                return np.zeros(n, np.bool_)
            possible &= column[:n] >= need
    return possible
