"""Device discovery: the small interface the agent needs, and the file-backed fake backend.

Why an interface at all: the agent must be testable end to end on machines without GPUs (CI, a
laptop, this repository's e2e tests), and NVML is only one way to find devices. A backend answers
one question, "which devices are here, and are they healthy?", synchronously (NVML is a blocking C
library; the agent calls backends in a worker thread).

The fake backend reads a YAML or JSON file on every call, so a test (or a person trying Tessera on
a laptop) changes the node's devices by editing the file: remove an entry and the device vanishes,
set `healthy: false` and it turns unhealthy. A file that cannot be read or parsed raises
`BackendError`; the agent keeps the last good list and logs the error instead of dropping every
device because of a half-written file.
"""

from __future__ import annotations

import hashlib
import re

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Protocol

import yaml

from scheduler.api.quantity import QuantityError, parse_quantity

__all__ = ["BackendError", "DeviceBackend", "DeviceInfo", "FakeBackend", "parse_fake_devices"]


class BackendError(Exception):
    """Discovery failed as a whole (no device list at all); the message says why."""


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """One physical device as a backend sees it (vendor terms, before any Kubernetes naming)."""

    uuid: str
    model: str  # the vendor's name, e.g. "Tesla V100-SXM2-32GB" (spaces are fine here)
    memory_bytes: int
    compute_capability: str | None = None  # "7.0"
    numa_node: int | None = None
    pci_bus_id: str | None = None  # "0000:3b:00.0"
    nvlink_group: str | None = None  # GPUs joined by NVLink (directly or through NVSwitches) share it
    healthy: bool = True
    health_reason: str = "DeviceOK"  # CamelCase, goes to the Healthy condition's reason
    health_message: str = ""
    vendor: str = "nvidia"


class DeviceBackend(Protocol):
    name: str

    def discover(self) -> list[DeviceInfo]:
        """All devices of this node, in a stable order; raises `BackendError` when it cannot tell."""

    def close(self) -> None:
        """Release the backend's resources (NVML shutdown); discovery is not called again."""


_NAME_INVALID = re.compile(r"[^a-z0-9-]+")


def digest(text: str, length: int = 10) -> str:
    """The first `length` hex digits of `text`'s sha256: what keeps apart the device names that
    `name_part` and `publish.er_name` shorten or clean alike."""
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def name_part(device_id: str) -> str:
    """The device's part of its ExtendedResource's name (`publish.er_name`: `<node>.<this>`, cut
    to length there): the id lowercased, with what a name cannot hold replaced and a digest of the
    id added, so ids that differ only in such characters stay apart; ids that differ only by case
    share it."""
    lowered = device_id.lower()
    clean = _NAME_INVALID.sub("-", lowered).strip("-")
    if clean != lowered or not clean:
        suffix = digest(device_id)
        return f"{clean}-{suffix}" if clean else suffix
    return clean


_FAKE_KEYS = frozenset({"uuid", "model", "memory", "computeCapability", "numaNode", "nvlinkGroup", "pciBusID",
                        "healthy", "vendor", "message"})


def parse_fake_devices(doc: Any, source: str = "fake devices") -> list[DeviceInfo]:
    """Parse the fake backend's document: a list of devices, or `{devices: [...]}`.

    Each device: `uuid` and `model` (strings), `memory` (a quantity such as `32Gi`, or bytes),
    optional `computeCapability` ("7.0"), `numaNode` (an integer, or its string form "0" as the
    ExtendedResource attribute carries it), `nvlinkGroup` (a name or number shared by
    the GPUs of one NVLink domain), `pciBusID`, `vendor` (default nvidia),
    `healthy` (default true) and `message` (why it is unhealthy). Unknown keys are errors, so a
    typo (`heathy: false`) does not silently leave a device healthy.
    """
    if isinstance(doc, Mapping) and set(doc) == {"devices"}:
        doc = doc["devices"]
    if doc is None:
        return []
    if not isinstance(doc, list):
        raise BackendError(f"{source}: expected a list of devices (or {{devices: [...]}}), got {type(doc).__name__}")
    out: list[DeviceInfo] = []
    seen: dict[str, tuple[int, str]] = {}  # name_part -> the index and uuid that has it
    for i, raw in enumerate(doc):
        where = f"{source}[{i}]"
        if not isinstance(raw, Mapping):
            raise BackendError(f"{where}: expected an object")
        unknown = sorted(str(k) for k in raw if k not in _FAKE_KEYS)
        if unknown:
            raise BackendError(f"{where}: unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(_FAKE_KEYS))})")
        uuid, model = raw.get("uuid"), raw.get("model")
        if not isinstance(uuid, str) or not uuid.strip():
            raise BackendError(f"{where}.uuid: Required value (a non-empty string)")
        uuid = uuid.strip()  # as the device is published: " GPU-1" is GPU-1, a duplicate of it
        # compared as the device is published, `<node>.<name_part>`: GPU-1 and gpu-1 are one object
        part = name_part(uuid)
        if part in seen:
            index, first = seen[part]
            same = "" if first == uuid else (f": its ExtendedResource name (<node>.{part}) is that of {source}[{index}] "
                                             f"({first!r})")
            raise BackendError(f"{where}.uuid: Duplicate value: {uuid!r}{same}")
        seen[part] = (i, uuid)
        if not isinstance(model, str) or not model.strip():
            raise BackendError(f"{where}.model: Required value (a non-empty string)")
        memory = _memory_bytes(raw.get("memory"), f"{where}.memory")
        capability = raw.get("computeCapability")
        if capability is not None:
            if isinstance(capability, bool) or not isinstance(capability, (str, int, float)):
                raise BackendError(f"{where}.computeCapability: expected a string such as \"7.0\"")
            capability = str(capability)
        numa = _numa_node(raw.get("numaNode"), f"{where}.numaNode")
        group = raw.get("nvlinkGroup")
        if group is not None and (isinstance(group, bool) or not isinstance(group, (str, int)) or not str(group).strip()):
            raise BackendError(f"{where}.nvlinkGroup: expected a non-empty string or an integer")
        bus = raw.get("pciBusID")
        if bus is not None and not isinstance(bus, str):
            raise BackendError(f"{where}.pciBusID: expected a string")
        healthy = raw.get("healthy", True)
        if not isinstance(healthy, bool):
            raise BackendError(f"{where}.healthy: expected true or false")
        vendor = raw.get("vendor", "nvidia")
        message = raw.get("message", "")
        if not isinstance(vendor, str) or not isinstance(message, str):
            raise BackendError(f"{where}: vendor and message must be strings")
        out.append(DeviceInfo(
            uuid=uuid.strip(), model=model.strip(), memory_bytes=memory, compute_capability=capability,
            numa_node=numa, pci_bus_id=bus, nvlink_group=None if group is None else str(group).strip(),
            healthy=healthy,
            health_reason="FakeDeviceOK" if healthy else "FakeDeviceUnhealthy",
            health_message=message or ("" if healthy else "marked unhealthy in the fake device file"),
            vendor=vendor))
    return out


def _numa_node(value: object, where: str) -> int | None:
    """An integer, or its decimal string: the ExtendedResource attribute is a string (`numaNode: "0"`,
    attributes are a string map), so a file written after an object's YAML works as it reads."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value.strip()):
        return int(value)
    raise BackendError(f"{where}: expected an integer (0, or the attribute's string form \"0\"), got {value!r}")


def _memory_bytes(value: object, where: str) -> int:
    if value is None:
        raise BackendError(f"{where}: Required value (a quantity such as 32Gi)")
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise BackendError(f"{where}: expected a quantity such as 32Gi")
    try:
        quantity = parse_quantity(value)
    except QuantityError as err:
        raise BackendError(f"{where}: {err}") from None
    if quantity < 0 or quantity.denominator != 1 or quantity > Fraction(2**62):
        raise BackendError(f"{where}: must be a whole, non-negative number of bytes")
    return int(quantity)


class FakeBackend:
    """Devices listed in a YAML/JSON file, re-read on every discovery."""

    name = "fake"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def discover(self) -> list[DeviceInfo]:
        try:
            text = self.path.read_text()
        except OSError as err:
            raise BackendError(f"cannot read {self.path}: {err.strerror or err}") from None
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise BackendError(f"{self.path}: not valid YAML/JSON: {err}") from None
        return parse_fake_devices(doc, str(self.path))

    def close(self) -> None:
        pass
