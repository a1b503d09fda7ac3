"""ResourceClass objects: which devices a class selects, and under which resource name pods ask.

A class is evaluated against each device's attributes first, then its capacity, with label-selector
semantics (`NotIn`/`DoesNotExist` hold when the key is absent) and quantity comparison for `Gt`/`Lt`.
Invalid classes are kept (with their error) rather than dropped, so that pods asking for them get a
message naming the problem and the class gets a `Valid=False` condition.
"""

from __future__ import annotations

from collections import Counter

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction

from scheduler.api.quantity import Amount, QuantityError, exact, format_quantity, parse_quantity
from scheduler.api.names import DNS_SUBDOMAIN, QUALIFIED_NAME, label_key_problem
from scheduler.core.objects import JSON, Device, ObjectError, ObjectMeta, parse_meta

DEFAULT_RESOURCE_PREFIX = "class.tessera.dev/"
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
_NANO = 10**9  # quantities are exact to 1n: a sharing unit must be a whole number of them


@dataclass(frozen=True, slots=True)
class DeviceRequirement:
    key: str
    operator: str
    values: tuple[str, ...]
    bound: Fraction | None  # parsed value for Gt/Lt

    def matches(self, device: Device) -> bool:
        attr = device.attributes.get(self.key)
        cap = device.capacity.get(self.key) if attr is None else None
        present = attr is not None or cap is not None
        op = self.operator
        if op == "Exists":
            return present
        if op == "DoesNotExist":
            return not present
        if op in ("In", "NotIn"):
            if attr is not None:
                found = attr in self.values
            elif cap is not None:
                found = any(_quantity_equals(cap, v) for v in self.values)
            else:
                found = False
            return found if op == "In" else not found
        # Gt / Lt compare as quantities; missing or unparsable keys never match.
        assert self.bound is not None
        value = cap
        if attr is not None:
            try:
                value = parse_quantity(attr)
            except QuantityError:
                return False
        if value is None:
            return False
        return value > self.bound if op == "Gt" else value < self.bound


def _quantity_equals(value: Amount, text: str) -> bool:
    try:
        return parse_quantity(text) == value
    except QuantityError:
        return False


@dataclass(frozen=True, slots=True)
class Sharing:
    dimension: str
    unit: Amount

    def slices_on(self, device: Device) -> int:
        """How many slices the device holds when nothing runs on it: its capacity in the
        dimension over the unit, rounded down; 0 when it has no such capacity."""
        capacity = device.capacity.get(self.dimension)
        return int(capacity // self.unit) if capacity is not None else 0


@dataclass(frozen=True, slots=True)
class ResourceClass:
    meta: ObjectMeta
    resource_name: str
    requirements: tuple[DeviceRequirement, ...]
    sharing: Sharing | None
    error: str | None  # why the class is not Valid; None when it is
    # its resourceName is another device plugin's (nodes advertise it): pods asking for that name
    # are plain requests, not the class's, while it is refused for that
    name_taken: bool = False

    @property
    def name(self) -> str:
        return self.meta.name

    def matches(self, device: Device) -> bool:
        return self.error is None and all(req.matches(device) for req in self.requirements)


def validate_resource_name(name: str) -> str | None:
    """Extended resource names must be `<domain>/<name>`, outside kubernetes.io (upstream validation)."""
    if "/" not in name:
        return f'"{name}" must be a fully qualified extended resource name such as "example.com/{name}"'
    domain, _, short = name.partition("/")
    if not DNS_SUBDOMAIN.fullmatch(domain) or len(domain) > 253:
        return f'"{name}": prefix part must be a DNS subdomain'
    if domain == "kubernetes.io" or domain.endswith(".kubernetes.io") or domain == "k8s.io" or domain.endswith(".k8s.io"):
        return f'"{name}": extended resource names may not use the kubernetes.io or k8s.io domains'
    if not QUALIFIED_NAME.fullmatch(short) or len(short) > 63:
        return f'"{name}": name part must consist of alphanumeric characters, "-", "_" or "."'
    return None


def parse_resource_class(obj: JSON) -> ResourceClass:
    """Parse a ResourceClass; semantic problems become `error`, only unreadable objects raise."""
    meta = parse_meta(obj, "ResourceClass")
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise ObjectError("ResourceClass.spec: expected an object")
    errors: list[str] = []
    resource_name = spec.get("resourceName") or f"{DEFAULT_RESOURCE_PREFIX}{meta.name}"
    if not isinstance(resource_name, str):
        errors.append("spec.resourceName: must be a string")
        resource_name = f"{DEFAULT_RESOURCE_PREFIX}{meta.name}"
    elif (problem := validate_resource_name(resource_name)) is not None:
        errors.append(f"spec.resourceName: Invalid value: {problem}")
    requirements = _requirements(spec.get("selector"), errors)
    sharing = _sharing(spec.get("sharing"), errors)
    return ResourceClass(meta, resource_name, requirements, sharing, "; ".join(errors) or None)


def _requirements(selector: object, errors: list[str]) -> tuple[DeviceRequirement, ...]:
    if selector is None:
        return ()
    if not isinstance(selector, Mapping):
        errors.append("spec.selector: must be an object")
        return ()
    out: list[DeviceRequirement] = []
    labels = selector.get("matchLabels") or {}
    if not isinstance(labels, Mapping):
        errors.append("spec.selector.matchLabels: must be a map of strings")
    else:
        for key, value in labels.items():
            if not isinstance(key, str) or not isinstance(value, str):
                errors.append(f"spec.selector.matchLabels[{key}]: Invalid value: {value!r}: must be a string")
                continue
            if (problem := _key_problem("spec.selector.matchLabels", key)) is not None:
                errors.append(problem)
                continue
            out.append(DeviceRequirement(key, "In", (value,), None))
    expressions = selector.get("matchExpressions") or []
    if not isinstance(expressions, list):
        errors.append("spec.selector.matchExpressions: must be a list")
        return tuple(out)
    for i, raw in enumerate(expressions):
        where = f"spec.selector.matchExpressions[{i}]"
        if not isinstance(raw, Mapping):
            errors.append(f"{where}: must be an object")
            continue
        key, op, values = raw.get("key"), raw.get("operator"), raw.get("values") or []
        if not isinstance(key, str) or not key:
            errors.append(f"{where}.key: Required value")
            continue
        if (problem := _key_problem(f"{where}.key", key)) is not None:
            errors.append(problem)
            continue
        if op not in _OPERATORS:
            errors.append(f'{where}.operator: Unsupported value: "{op}": supported values: '
                          + ", ".join(f'"{name}"' for name in _OPERATORS))
            continue
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            errors.append(f"{where}.values: must be a list of strings")
            continue
        bound: Fraction | None = None
        if op in ("In", "NotIn") and not values:
            errors.append(f"{where}.values: Required value: must be specified when `operator` is 'In' or 'NotIn'")
            continue
        if op in ("Exists", "DoesNotExist") and values:
            errors.append(f"{where}.values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
            continue
        if op in ("Gt", "Lt"):
            if len(values) != 1:
                errors.append(f"{where}.values: Invalid value: must have exactly one value when `operator` is 'Gt' or 'Lt'")
                continue
            try:
                bound = parse_quantity(values[0])
            except QuantityError:
                hint = values[0].replace("iB", "i").replace("B", "")
                errors.append(f'{where}.values[0]: Invalid value: "{values[0]}": not a Kubernetes quantity (did you mean "{hint}"?)')
                continue
        out.append(DeviceRequirement(key, op, tuple(values), bound))
    return tuple(out)


def _key_problem(where: str, key: str) -> str | None:
    """A selector key that is no label key, in the shape of the apiserver's error for it in a label
    selector (apimachinery ValidateLabelName: `<field>: Invalid value: "<key>": <why>`; the `why` is
    `label_key_problem`'s, shorter than apimachinery's list of rules): the apiserver
    refuses such a key in every LabelSelector, and a class whose selector could never be written
    as one should say so rather than select nothing."""
    problem = label_key_problem(key)
    return None if problem is None else f'{where}: Invalid value: "{key}": {problem}'


def _sharing(raw: object, errors: list[str]) -> Sharing | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        errors.append("spec.sharing: must be an object")
        return None
    dimension = raw.get("dimension", "memory")
    if not isinstance(dimension, str) or not dimension:
        errors.append("spec.sharing.dimension: Required value")
        return None
    try:
        unit = parse_quantity(raw.get("unit", "1Gi"))
    except QuantityError as err:
        errors.append(f"spec.sharing.unit: Invalid value: {err}")
        return None
    if unit <= 0:
        errors.append(f"spec.sharing.unit: Invalid value: {format_quantity(unit)}: must be positive")
        return None
    if (unit * _NANO).denominator != 1:
        # A slice's amount travels in the pod's `tessera.dev/devices` annotation as a quantity,
        # exact to 1n as Kubernetes quantities are: a finer unit would be written rounded up, and
        # the ledger rebuilt from the annotations would hold more than the planner gave out.
        errors.append(f'spec.sharing.unit: Invalid value: "{raw.get("unit")}": must be a whole number of '
                      "nano units (1n, the finest a quantity carries)")
        return None
    return Sharing(dimension, exact(unit))


class ClassRegistry:
    """All classes, the resource names they own, and which classes each device matches.

    Two classes may not share a resourceName: the oldest (creationTimestamp, then name) keeps it and
    the others become invalid, so the choice does not depend on event order.

    A class change matches again only the classes whose standing moved (the class itself, and a
    class that won or lost its resourceName by it), each against the devices once: a change costs
    O(devices) plus O(classes) of bookkeeping, never devices x classes. The indexes end exactly as
    matching every device against every usable class would leave them.
    """

    def __init__(self) -> None:
        self.classes: dict[str, ResourceClass] = {}
        self.by_resource: dict[str, ResourceClass] = {}
        self.claimed: frozenset[str] = frozenset()  # resourceNames of every class, valid or not (not name_taken)
        self._device_resources: Counter[str] = Counter()  # devices' own resourceName -> how many devices
        self._resource_of: dict[str, str] = {}  # device name -> its resourceName
        self._keys_of: dict[str, frozenset[str]] = {}  # device name -> its attribute and capacity names
        self._with_key: dict[str, set[str]] = {}  # attribute or capacity name -> devices that have it
        self.clash: dict[str, str] = {}  # class name -> message for classes that lost a name clash
        self.device_classes: dict[str, frozenset[str]] = {}  # device name -> matching class names
        # class name -> devices it matches (any health); a deleted device pods still hold (a ghost)
        # is none: `device_removed` takes a device off every class until `device_changed` tells of it again
        self.matching: Counter[str] = Counter()
        self.generation = 0  # moves on any class or device change
        self.epoch = 0  # moves only when the set of classes (or their specs) changes
        # usable class name -> the epoch of the last class change that may have moved what the
        # class selects: it became usable (new, its spec edited, a name clash won), or devices it
        # matches changed as that change indexed them. Readers that keep something per class (the
        # class columns) rebuild only the classes newer than what they hold.
        self.versions: dict[str, int] = {}
        self._slices = _SliceCapacity()
        self._indexed: dict[str, Device] = {}  # device name -> the object `device_classes` judged

    def upsert(self, cls: ResourceClass, devices: Iterable[Device]) -> None:
        """Add or change a class. ``devices`` are every device the cluster knows: one
        `device_changed` told of and not removed since whose object there is another (its
        duplicate mark or heartbeat replaced since) is indexed as it stands (`device_changed`);
        the others there, deleted ones pods still hold (ghosts), stay out of every class."""
        self.classes[cls.name] = cls
        self._reindex(devices)

    def refresh(self, cls: ResourceClass) -> None:
        """Replace a class by a newer object of the same meaning (only its metadata moved, e.g.
        `generation` after an equivalent edit): every index points at the new object, nothing is
        judged again, so no verdict, match or placement moves and `epoch` stays."""
        old = self.classes[cls.name]
        self.classes[cls.name] = cls
        if self.by_resource.get(cls.resource_name) is old:
            self.by_resource[cls.resource_name] = cls
        self._slices.refresh(cls)

    def remove(self, name: str, devices: Iterable[Device]) -> None:
        if self.classes.pop(name, None) is not None:
            self._reindex(devices)

    def error_of(self, name: str) -> str | None:
        cls = self.classes.get(name)
        if cls is None:
            return None
        return cls.error or self.clash.get(name) or self._slices.problem(cls)

    def sharing_dimension(self, resource_name: str) -> str:
        """The device capacity slices of ``resource_name`` use (its class's `sharing.dimension`),
        "" when no class that shares owns the name now (deleted, or no longer sharing): whoever
        holds such slices, they may be of any dimension."""
        cls = self.by_resource.get(resource_name)
        return cls.sharing.dimension if cls is not None and cls.sharing is not None else ""

    def resource_class(self, resource_name: str) -> ResourceClass | None:
        """The usable class that owns ``resource_name``: None also for a sharing class whose
        matching devices cannot hold a single slice (see `_SliceCapacity`), so pods asking for it
        are told why instead of "Insufficient"."""
        cls = self.by_resource.get(resource_name)
        if cls is not None and cls.sharing is not None and self._slices.unusable(cls.name):
            return None
        return cls

    def is_class_resource(self, resource_name: str) -> bool:
        """A request for this name is a class request: a valid class owns it, or an invalid one
        does whose name no device carries as its own resource (so its pods are told what is
        wrong with the class, never bound as if the name were a plain count; a device plugin's
        own name, `nvidia.com/gpu`, stays a plain count), or it has the default class prefix."""
        if resource_name in self.by_resource or resource_name.startswith(DEFAULT_RESOURCE_PREFIX):
            return True
        return resource_name in self.claimed and self._device_resources[resource_name] <= 0

    def carried(self, resource_name: str) -> bool:
        """Whether ExtendedResources carry ``resource_name`` as their own resourceName (deleted
        ones still held not included): a plain request for it is then a count of those devices."""
        return self._device_resources[resource_name] > 0

    def device_changed(self, device: Device) -> None:
        self._count_resource(device.name, device.resource_name)
        self._count_keys(device.name, frozenset(device.attributes) | frozenset(device.capacity))
        matching = frozenset(cls.name for cls in self.by_resource.values() if cls.matches(device))
        self.matching.subtract(self.device_classes.get(device.name, ()))
        self.matching.update(matching)
        self.device_classes[device.name] = matching
        self._indexed[device.name] = device
        self._slices.device_changed(device, matching)
        self.generation += 1

    def device_removed(self, name: str) -> None:
        self._count_resource(name, None)
        self._count_keys(name, frozenset())
        self.matching.subtract(self.device_classes.pop(name, ()))
        self._indexed.pop(name, None)
        self._slices.device_removed(name)
        self.generation += 1

    def _count_keys(self, device: str, keys: frozenset[str]) -> None:
        for key in self._keys_of.pop(device, frozenset()) - keys:
            holders = self._with_key[key]
            holders.discard(device)
            if not holders:
                del self._with_key[key]
        if keys:
            self._keys_of[device] = keys
            for key in keys:
                self._with_key.setdefault(key, set()).add(device)

    def unknown_keys_note(self, cls: ResourceClass) -> str:
        """` (no device has the attribute "modle")` when the class's selector needs keys no device
        has (a typo such as `modle` for `model`), else "": why a valid class matches nothing, told
        to its pods and in its status."""
        if not self._keys_of:
            return ""  # no device at all: nothing to tell a typo by
        keys = sorted({req.key for req in cls.requirements
                       if req.operator not in ("NotIn", "DoesNotExist") and not self._with_key.get(req.key)})
        if not keys:
            return ""
        names = ", ".join(f'"{key}"' for key in keys)
        return f" (no device has the attribute{'s' if len(keys) > 1 else ''} {names})"

    def _count_resource(self, device: str, resource: str | None) -> None:
        old = self._resource_of.pop(device, None)
        if old is not None:
            self._device_resources[old] -= 1
        if resource is not None:
            self._resource_of[device] = resource
            self._device_resources[resource] += 1

    def _judge_owners(self) -> None:
        """Who owns each resourceName (the oldest valid class), who lost it, and every claimed name."""
        self.by_resource = {}
        self.claimed = frozenset(cls.resource_name for cls in self.classes.values() if not cls.name_taken)
        self.clash = {}
        for cls in sorted(self.classes.values(), key=lambda c: (c.meta.creation_timestamp, c.name)):
            if cls.error is not None:
                continue
            owner = self.by_resource.get(cls.resource_name)
            if owner is not None:
                self.clash[cls.name] = (f"spec.resourceName: Duplicate value: \"{cls.resource_name}\" "
                                        f"is already used by ResourceClass {owner.name}")
                continue
            self.by_resource[cls.resource_name] = cls

    def _reindex(self, devices: Iterable[Device]) -> None:
        """After a class change: judge the owners again, then match again only the usable classes
        that are new or changed (dropping those no longer usable), and index again the devices
        whose objects were replaced since the registry judged them (not a removed one: `upsert`)."""
        epoch = self.epoch + 1
        versions = self.versions
        before = {cls.name: cls for cls in self.by_resource.values()}
        self._judge_owners()
        after = {cls.name: cls for cls in self.by_resource.values()}
        dropped = frozenset(name for name, cls in before.items() if after.get(name) is not cls)
        added = [cls for name, cls in after.items() if before.get(name) is not cls]
        for name in dropped:
            self._slices.remove_class(name)
            del versions[name]
        for cls in added:
            versions[cls.name] = epoch
            if cls.sharing is not None:
                self._slices.add_class(cls)
        if dropped or added:
            self._match_again(dropped, added)
        indexed = self._indexed
        for device in devices:
            known = indexed.get(device.name)
            if known is not None and known is not device:
                old = self.device_classes.get(device.name, frozenset())
                self.device_changed(device)
                for name in old ^ self.device_classes[device.name]:
                    versions[name] = epoch
        self.generation += 1
        self.epoch = epoch

    def _match_again(self, dropped: frozenset[str], added: list[ResourceClass]) -> None:
        """Take the dropped classes off every device, and match each added one against the
        devices that have the rarest of the keys its selector needs present (`_candidates`)."""
        device_classes = self.device_classes
        if dropped:
            for name, old in device_classes.items():
                if not old.isdisjoint(dropped):
                    device_classes[name] = old - dropped
            for name in dropped:
                self.matching.pop(name, None)
        indexed = self._indexed
        for cls in added:
            matched = [name for name, device in self._candidates(cls) if cls.matches(device)]
            if not matched:
                continue
            self.matching[cls.name] = len(matched)
            one = frozenset((cls.name,))
            for name in matched:
                device_classes[name] = device_classes[name] | one
            if cls.sharing is not None:
                for name in matched:
                    self._slices.add(cls.name, indexed[name])

    def _candidates(self, cls: ResourceClass) -> Iterator[tuple[str, Device]]:
        """The indexed devices the class may match: those with the fewest of the keys its
        selector needs present (In, Exists, Gt, Lt hold only when the key is there); all
        when it needs none, none when it is not valid. In index order when they are many
        (walking a large set of names costs more than asking it)."""
        if cls.error is not None:
            return
        needed = [self._with_key.get(req.key, set()) for req in cls.requirements
                  if req.operator not in ("NotIn", "DoesNotExist")]
        keys = min(needed, key=len) if needed else None
        if keys is None:
            yield from self._indexed.items()
        elif len(keys) * 4 > len(self._indexed):
            yield from ((name, device) for name, device in self._indexed.items() if name in keys)
        else:
            yield from ((name, self._indexed[name]) for name in keys if name in self._indexed)


class _SliceCapacity:
    """Which matching devices of each sharing class can hold a slice of it.

    A slice is `sharing.unit` of the device capacity named by `sharing.dimension`. A class whose
    matching devices have no such capacity (or less than one unit), e.g. `dimension: cores` on GPUs
    that publish only `memory`, can never place a pod: it is reported not valid, naming the
    dimension and the capacities the devices do have, rather than Valid with matching devices and
    every pod "Insufficient". A class that matches no device yet stays valid (nothing to judge by).
    Counts are kept per device event, so the check costs nothing per scheduling attempt.
    """

    def __init__(self) -> None:
        self._classes: dict[str, ResourceClass] = {}  # the usable sharing classes
        self._fits: dict[str, dict[str, bool]] = {}  # class -> device -> fits
        self._fitting: dict[str, int] = {}
        self._capacities: dict[str, frozenset[str]] = {}  # device -> its capacity names (sharing matches only)
        self._sharing_of: dict[str, set[str]] = {}  # device -> the sharing classes it matches

    def add_class(self, cls: ResourceClass) -> None:
        """A sharing class became usable: it matches no device until `add` says so."""
        self._classes[cls.name] = cls
        self._fits[cls.name] = {}
        self._fitting[cls.name] = 0

    def remove_class(self, name: str) -> None:
        """A class is no longer a usable sharing class (or is judged again): off every device."""
        if self._classes.pop(name, None) is None:
            return
        del self._fitting[name]
        for device in self._fits.pop(name):
            classes = self._sharing_of[device]
            classes.discard(name)
            if not classes:
                del self._sharing_of[device]
                del self._capacities[device]

    def add(self, name: str, device: Device) -> None:
        """The device matches sharing class ``name``."""
        sharing = self._classes[name].sharing
        assert sharing is not None
        capacity = device.capacity.get(sharing.dimension)
        fits = capacity is not None and capacity >= sharing.unit
        self._fits[name][device.name] = fits
        self._fitting[name] += fits
        self._capacities[device.name] = frozenset(device.capacity)
        self._sharing_of.setdefault(device.name, set()).add(name)

    def device_changed(self, device: Device, matching: frozenset[str]) -> None:
        self.device_removed(device.name)
        for name in matching & self._classes.keys():
            self.add(name, device)

    def refresh(self, cls: ResourceClass) -> None:
        """A newer object of a class of the same sharing (`ClassRegistry.refresh`)."""
        if cls.name in self._classes:
            self._classes[cls.name] = cls

    def device_removed(self, device: str) -> None:
        if self._capacities.pop(device, None) is None:
            return
        for name in self._sharing_of.pop(device):
            if self._fits[name].pop(device):
                self._fitting[name] -= 1

    def unusable(self, name: str) -> bool:
        return bool(self._fits.get(name)) and not self._fitting.get(name)

    def problem(self, cls: ResourceClass) -> str | None:
        if cls.sharing is None or not self.unusable(cls.name):
            return None
        devices = self._fits[cls.name]
        names = sorted(set().union(*(self._capacities[d] for d in devices)))
        return (f'spec.sharing.dimension: Invalid value: "{cls.sharing.dimension}": none of the {len(devices)} '
                f"matching devices has a {cls.sharing.dimension} capacity of at least one unit "
                f"({format_quantity(cls.sharing.unit)}); their capacities: {', '.join(names) or 'none'}")
