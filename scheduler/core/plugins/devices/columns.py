"""TesseraDevices over the whole node table: per ResourceClass, how many matching devices a node
has free (or the most room on one device, for sharing classes).

A necessary condition for the planner: a node with too few free matching devices cannot have a
plan, so it is never planned. For the commonest request — one exclusive class whose devices all
belong to one resourceName — it is also sufficient, together with the node's count of that
resource (`simple_exclusive`): feasibility, the devices made busy and the device score then
follow from the columns, and only the chosen node gets a real plan.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Iterable

import numpy as np

from scheduler.core.framework.cycle_state import PodContext
from scheduler.core.framework.interface import Bools, Ints
from scheduler.core.framework.nodetable import ColumnGroup, EachArray, NodeTable
from scheduler.core.objects import Device
from scheduler.core.plugins.devices.planner import described, slice_room
from scheduler.core.state import ClusterState, NodeInfo


# A column holds int64: a tiny unit or a huge capacity would overflow it. No pod asks for more
# than 2**62 of anything (larger quantities are refused when pods are read), so more room than
# that is as good as that.
UNITS_MAX = 2**62


class ClassColumns(ColumnGroup):
    """The columns of every usable class. A class change refreshes only the classes the registry
    says may select otherwise since the columns were built (`ClassRegistry.versions`), and those
    whose room on a shared device moved with another class (`_slices_moved`); a changed node
    refills its row for every class."""

    def __init__(self, table: NodeTable) -> None:
        super().__init__(table)
        self.state: ClusterState = table.state
        self.free: dict[str, Ints] = {}  # free matching devices, or most units on one device (sharing)
        self.total: dict[str, Ints] = {}  # matching schedulable devices
        # sharing classes: the most of the class's units one matching schedulable device holds
        # when no pod uses it (its capacity in the dimension over the unit, rounded down)
        self.most_units: dict[str, Ints] = {}
        # exclusive classes: the most free matching devices in one NVLink group or NUMA node (the
        # largest of either; -1 when the free devices describe neither): a request of more spans
        # two groups and the planner halves the node's score (`within_one_group`)
        self.largest_group: dict[str, Ints] = {}
        # class -> the device resourceNames its matching schedulable devices carry now, each with
        # the number of rows where they do (a name leaves when no row's devices carry it any more)
        self.resources: dict[str, Counter[str]] = {}
        self.broken: Bools = np.zeros(self.capacity, np.bool_)
        self._named: dict[int, dict[str, frozenset[str]]] = {}  # row -> class -> its devices' resourceNames there
        self._built = 0  # the registry epoch the columns follow
        self._dimensions: dict[str, str] = {}  # resourceName -> the dimension its sharing class shares then
        self.reset()

    def epoch(self) -> int:
        """The class registry's epoch: new or changed classes need columns of their own."""
        return self.state.classes.epoch

    def reset(self) -> None:
        self.free, self.total, self.most_units, self.largest_group = {}, {}, {}, {}
        self.resources, self._named = {}, {}
        for cls in self.state.classes.by_resource.values():
            self._new_columns(cls.name)
        self._built, self._dimensions = self.state.classes.epoch, self._sharing_dimensions()

    def renew(self, table: NodeTable) -> None:
        """Columns for the classes that became usable or may select otherwise, none for those
        no longer usable; the others' stay (a changed node's row is refilled by `fill`)."""
        classes = self.state.classes
        built = self._built
        dirty = {name for name, version in classes.versions.items() if version > built}
        dropped = self.free.keys() - classes.versions.keys()
        dimensions = self._sharing_dimensions()
        if dimensions != self._dimensions:
            dirty |= self._slices_moved({name for name in dimensions.keys() | self._dimensions.keys()
                                         if dimensions.get(name) != self._dimensions.get(name)})
        self._built, self._dimensions = classes.epoch, dimensions
        gone = dirty | dropped
        if not gone:
            return
        for named in self._named.values():
            for name in [name for name in named if name in gone]:
                del named[name]
        for name in dropped:
            for columns in self._per_class():
                del columns[name]
            del self.resources[name]
        for name in dirty:
            self._new_columns(name)
        wanted = {name for name in dirty if classes.matching[name] > 0}  # others select no device: zero
        if not wanted:
            return
        matches = classes.device_classes
        for row in range(table.size):
            info = table.infos[row]
            found: set[str] = set()
            for device in info.devices.values():
                classes_of = matches.get(device.name)
                if classes_of and not wanted.isdisjoint(classes_of):
                    found |= wanted & classes_of
            if found:
                named = self._fill_classes(row, info, found)
                if named:
                    self._named.setdefault(row, {}).update(named)
                    for name, names in named.items():
                        self._count(name, names, 1)

    def _sharing_dimensions(self) -> dict[str, str]:
        return {name: cls.sharing.dimension for name, cls in self.state.classes.by_resource.items()
                if cls.sharing is not None}

    def _slices_moved(self, resources: set[str]) -> set[str]:
        """The sharing classes matching a device that holds slices of these resourceNames whose
        grant names no dimension: those count in the dimension the name's class shares by now
        (`DeviceLedger.shared_use`), which moved, and so did the room the classes see there."""
        classes = self.state.classes
        sharing = {cls.name for cls in classes.by_resource.values() if cls.sharing is not None}
        moved: set[str] = set()
        for device, use in self.state.ledger.use.items():
            if any(not granted and resource in resources for resource, granted in use.by_kind):
                moved |= sharing & classes.device_classes.get(device, frozenset())
        return moved

    def _per_class(self) -> tuple[dict[str, Ints], ...]:
        """The per-row columns kept per class (`_new_columns` makes a class's)."""
        return self.free, self.total, self.most_units, self.largest_group

    def _new_columns(self, name: str) -> None:
        self.free[name] = np.zeros(self.capacity, np.int64)
        self.total[name] = np.zeros(self.capacity, np.int64)
        self.most_units[name] = np.zeros(self.capacity, np.int64)
        self.largest_group[name] = np.full(self.capacity, -1, np.int64)
        self.resources[name] = Counter()

    def row_arrays(self, each: EachArray) -> None:
        self.broken = each(self.broken)
        for columns in self._per_class():
            for name, column in list(columns.items()):
                columns[name] = each(column)

    def remove_rows(self, table: NodeTable, rows: list[int], size: int) -> None:
        super().remove_rows(table, rows, size)  # the columns; then the classes' resourceNames per row
        gone = set(rows)
        named: dict[int, dict[str, frozenset[str]]] = {}
        for row, classes in self._named.items():
            if row in gone:
                for name, names in classes.items():
                    self._count(name, names, -1)
            else:
                named[row - bisect.bisect_left(rows, row)] = classes
        self._named = named

    def fill(self, row: int, info: NodeInfo) -> None:
        self.broken[row] = bool(info.broken)
        named = self._fill_classes(row, info, self.free)
        old = self._named.pop(row, {})
        if named:
            self._named[row] = named
        if old != named:
            for name in old.keys() | named.keys():
                before, after = old.get(name, frozenset()), named.get(name, frozenset())
                if before != after:
                    self._count(name, before - after, -1)
                    self._count(name, after - before, 1)

    def _count(self, name: str, resources: frozenset[str], step: int) -> None:
        """Rows whose devices of class `name` carry `resources`: one more (`step` 1) or one less."""
        rows = self.resources[name]
        for resource in resources:
            rows[resource] += step
            if rows[resource] <= 0:
                del rows[resource]

    def _fill_classes(self, row: int, info: NodeInfo, names: Iterable[str]) -> dict[str, frozenset[str]]:
        """Write the columns of these classes in `row`; the resourceNames each one's devices there
        carry (classes with none left out)."""
        classes = self.state.classes.classes
        ledger = self.state.ledger
        uses = ledger.use
        named: dict[str, frozenset[str]] = {}
        for name in names:
            cls = classes[name]
            best = most = 0
            free: list[Device] = []  # exclusive classes: the free matching devices
            candidates = self.state.class_devices(info, name)  # and all of them, busy or free (their groups)
            if candidates:
                named[name] = frozenset([device.resource_name for device in candidates])
            for device in candidates:
                use = uses.get(device.name)
                if cls.sharing is None:
                    if use is None or not use.busy:
                        best += 1
                        free.append(device)
                else:
                    most = max(most, min(UNITS_MAX, cls.sharing.slices_on(device)))
                    room = slice_room(ledger, device, cls.sharing.dimension)
                    if not isinstance(room, str):
                        best = max(best, min(UNITS_MAX, math.ceil(room / cls.sharing.unit)))
            self.free[name][row] = best
            self.total[name][row] = len(candidates)
            self.most_units[name][row] = most
            self.largest_group[name][row] = largest_group(free, described(candidates))
        return named


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
