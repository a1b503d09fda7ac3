"""NVML discovery (`--backend nvml`): the node's NVIDIA GPUs through `nvidia-ml-py` (`pynvml`).

What is read, per GPU: UUID, name (model), total memory, CUDA compute capability, PCI bus id and
NUMA node. Health: a device is unhealthy when NVML cannot query it (e.g. `GPU is lost`) or when it
reported a critical Xid event since the agent started. Like NVIDIA's own device plugin, Xids that
an application causes (13, 31, 43, 45, 68, 109: exceptions, page faults, timeouts of one context)
do not condemn the device, and an unhealthy device stays unhealthy until the agent restarts — a
GPU that threw a double-bit ECC error is not trusted again because the next query happened to work.

The pynvml module is injected (`NvmlBackend(nvml=...)`) so the mapping from NVML values to device
attributes is unit-tested with a stub module; only a real GPU can show that the real library
returns what the stub pretends (see tests/unit/test_agent_nvml.py for the list).
"""

from __future__ import annotations

import dataclasses

import os
from typing import Any

import structlog

from scheduler.agent.devices import BackendError, DeviceInfo

__all__ = ["APPLICATION_XIDS", "NvmlBackend", "load_pynvml", "normalise_bus_id"]

log = structlog.get_logger("tessera.agent.nvml")

# Xids caused by an application rather than the device (NVIDIA k8s-device-plugin's default list).
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})
_SYSFS_PCI = "/sys/bus/pci/devices"


def load_pynvml() -> Any:
    """The real `pynvml` module; a clear error when nvidia-ml-py is not installed."""
    try:
        import pynvml  # type: ignore[import-untyped]
    except ImportError as err:  # pragma: no cover - nvidia-ml-py is a dependency
        raise BackendError(f"nvidia-ml-py is not installed ({err}); use --backend fake without GPUs") from None
    return pynvml


def _text(value: object) -> str:
    """NVML strings come as bytes from ctypes buffers and as str from wrapped getters."""
    if isinstance(value, bytes):
        return value.decode(errors="replace").strip("\x00").strip()
    return str(value).strip()


def normalise_bus_id(raw: object) -> str:
    """NVML's `00000000:3B:00.0` as the kernel writes it (`0000:3b:00.0`), what sysfs and lspci use."""
    text = _text(raw).lower()
    domain, sep, rest = text.partition(":")
    if sep and len(domain) == 8:
        domain = domain[4:]
    return f"{domain}{sep}{rest}" if sep else text


class NvmlBackend:
    name = "nvml"

    def __init__(self, nvml: Any | None = None, sysfs_pci: str = _SYSFS_PCI) -> None:
        self.nvml = nvml if nvml is not None else load_pynvml()
        self.sysfs_pci = sysfs_pci
        self._initialised = False
        self._events: Any = None  # NVML event set, None when events are not supported
        self._registered: set[str] = set()  # UUIDs registered for Xid events
        self._xid_failures: dict[str, str] = {}  # UUID -> why it is unhealthy (sticky)
        self._known: dict[str, DeviceInfo] = {}  # UUID -> its last successful query
        self._uuid_at: dict[int, str] = {}  # index -> the UUID found there last (a lost GPU keeps it)

    # --- lifecycle -----------------------------------------------------------------------------

    def _init(self) -> None:
        if self._initialised:
            return
        try:
            self.nvml.nvmlInit()
        except self.nvml.NVMLError as err:
            raise BackendError(f"NVML initialisation failed: {err} (is the NVIDIA driver loaded and "
                               "libnvidia-ml.so visible to the agent?)") from None
        self._initialised = True
        try:
            self._events = self.nvml.nvmlEventSetCreate()
        except self.nvml.NVMLError as err:
            log.warning("nvml.events_unavailable", reason=str(err),
                        message="Xid events cannot be watched; health comes from device queries only")
            self._events = None

    def close(self) -> None:
        if not self._initialised:
            return
        try:
            if self._events is not None:
                self.nvml.nvmlEventSetFree(self._events)
            self.nvml.nvmlShutdown()
        except self.nvml.NVMLError as err:
            log.warning("nvml.shutdown_failed", reason=str(err))
        self._initialised = False
        self._events = None
        self._registered.clear()

    # --- discovery -----------------------------------------------------------------------------

    def discover(self) -> list[DeviceInfo]:
        self._init()
        nvml = self.nvml
        try:
            count = int(nvml.nvmlDeviceGetCount())
        except nvml.NVMLError as err:
            raise BackendError(f"NVML cannot count devices: {err}") from None
        devices: list[DeviceInfo] = []
        handles: dict[str, Any] = {}
        for index in range(count):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                uuid = _text(nvml.nvmlDeviceGetUUID(handle))
            except nvml.NVMLError as err:
                # A GPU fallen off the bus (NVML_ERROR_GPU_IS_LOST) has no handle: the one seen at
                # this index before is published unhealthy, not deleted — a pod holding it keeps
                # its slot, and its object keeps an admin's spec.unschedulable. One never seen
                # has nothing to publish.
                lost = self._known.get(self._uuid_at.get(index, ""))
                log.error("nvml.device_unreadable", index=index, reason=str(err),
                          uuid=lost.uuid if lost is not None else None)
                if lost is not None:
                    devices.append(dataclasses.replace(
                        lost, healthy=False, health_reason="NVMLDeviceLost",
                        health_message=f"NVML cannot reach GPU {index} ({err}): fallen off the bus or otherwise "
                                       "inaccessible; reset the GPU or reboot the node"))
                continue
            self._uuid_at[index] = uuid
            handles[uuid] = handle
            devices.append(self.device_info(handle, uuid))
        groups = self._nvlink_groups(handles, {d.uuid: d.pci_bus_id for d in devices})
        devices = [dataclasses.replace(d, nvlink_group=groups.get(d.uuid)) for d in devices]
        self._watch_events(handles)
        self._drain_events()
        return [self._with_xid_health(d) for d in devices]

    def _nvlink_groups(self, handles: dict[str, Any], buses: dict[str, str | None]) -> dict[str, str]:
        """GPUs joined by active NVLinks — to each other or through the same NVSwitches — form a
        group, named after its lowest GPU bus id; a GPU without NVLink peers has none. Drivers or
        boards without NVLink answer "not supported": no groups, nothing else changes."""
        nvml = self.nvml
        link_state = getattr(nvml, "nvmlDeviceGetNvLinkState", None)
        remote_pci = getattr(nvml, "nvmlDeviceGetNvLinkRemotePciInfo", None)
        if link_state is None or remote_pci is None:
            return {}
        parent: dict[str, str] = {}

        def root(bus: str) -> str:
            while parent.setdefault(bus, bus) != bus:
                parent[bus] = parent[parent[bus]]
                bus = parent[bus]
            return bus

        links = int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18))
        for uuid, handle in handles.items():
            bus = buses.get(uuid)
            if bus is None:
                continue
            root(bus)
            for link in range(links):
                try:
                    if int(link_state(handle, link)) != 1:
                        continue
                    remote = normalise_bus_id(remote_pci(handle, link).busId)
                except nvml.NVMLError:
                    break  # no (more) links on this device
                parent[root(remote)] = root(bus)
        members: dict[str, list[str]] = {}
        for uuid, bus in buses.items():
            if bus is not None and bus in parent:
                members.setdefault(root(bus), []).append(bus)
        groups: dict[str, str] = {}
        for uuid, bus in buses.items():
            if bus is not None and bus in parent and len(together := members[root(bus)]) > 1:
                groups[uuid] = min(together)
        return groups

    def device_info(self, handle: Any, uuid: str) -> DeviceInfo:
        """One device's attributes; a failing query makes the device unhealthy, not invisible, and
        keeps the attributes it last answered with: a lost GPU that turned into model "unknown"
        would stop matching its class, and its slot would leave the device plugin while a pod holds it."""
        nvml = self.nvml
        try:
            model = _text(nvml.nvmlDeviceGetName(handle))
            memory = int(nvml.nvmlDeviceGetMemoryInfo(handle).total)
        except nvml.NVMLError as err:
            known = self._known.get(uuid) or DeviceInfo(uuid=uuid, model="unknown", memory_bytes=0)
            return dataclasses.replace(known, healthy=False, health_reason="NVMLQueryFailed",
                                       health_message=f"NVML query failed: {err}")
        capability: str | None = None
        try:
            major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
            capability = f"{int(major)}.{int(minor)}"
        except nvml.NVMLError as err:
            log.info("nvml.no_compute_capability", uuid=uuid, reason=str(err))
        bus: str | None = None
        try:
            bus = normalise_bus_id(nvml.nvmlDeviceGetPciInfo(handle).busId)
        except nvml.NVMLError as err:
            log.info("nvml.no_pci_info", uuid=uuid, reason=str(err))
        info = DeviceInfo(uuid=uuid, model=model, memory_bytes=memory, compute_capability=capability,
                          numa_node=self._numa_node(handle, bus), pci_bus_id=bus, healthy=True,
                          health_reason="NVMLOK", health_message="")
        self._known[uuid] = info
        return info

    def _numa_node(self, handle: Any, bus: str | None) -> int | None:
        """NVML's answer where the driver has it (R530+), else the kernel's; -1 means "none"."""
        getter = getattr(self.nvml, "nvmlDeviceGetNumaNodeId", None)
        if getter is not None:
            try:
                node = int(getter(handle))
                return node if node >= 0 else None
            except self.nvml.NVMLError:
                pass
        if bus is None:
            return None
        try:
            with open(os.path.join(self.sysfs_pci, bus, "numa_node")) as f:
                node = int(f.read().strip())
        except (OSError, ValueError):
            return None
        return node if node >= 0 else None

    # --- health events -------------------------------------------------------------------------

    def _watch_events(self, handles: dict[str, Any]) -> None:
        if self._events is None:
            return
        nvml = self.nvml
        for uuid, handle in handles.items():
            if uuid in self._registered:
                continue
            try:
                nvml.nvmlDeviceRegisterEvents(handle, nvml.nvmlEventTypeXidCriticalError, self._events)
            except nvml.NVMLError as err:
                log.warning("nvml.events_not_supported", uuid=uuid, reason=str(err))
            self._registered.add(uuid)

    def _drain_events(self) -> None:
        """Consume every pending event without blocking (timeout 0 ms)."""
        if self._events is None:
            return
        nvml = self.nvml
        for _ in range(1024):  # bounded: a storm of events must not stall discovery
            try:
                event = nvml.nvmlEventSetWait_v2(self._events, 0)
            except nvml.NVMLError as err:
                if getattr(err, "value", None) != nvml.NVML_ERROR_TIMEOUT:
                    log.warning("nvml.event_wait_failed", reason=str(err))
                return
            self.record_event(event)

    def record_event(self, event: Any) -> None:
        nvml = self.nvml
        if int(event.eventType) != int(nvml.nvmlEventTypeXidCriticalError):
            return
        xid = int(event.eventData)
        if xid in APPLICATION_XIDS:
            log.info("nvml.application_xid", xid=xid)
            return
        try:
            uuid = _text(nvml.nvmlDeviceGetUUID(event.device))
        except nvml.NVMLError:
            uuid = ""
        if not uuid:
            # An event NVML cannot attribute: mark every registered device, as NVIDIA's plugin does.
            for known in self._registered:
                self._xid_failures.setdefault(known, f"critical Xid {xid} on an unidentified device")
            log.error("nvml.critical_xid", xid=xid, uuid="unknown")
            return
        self._xid_failures.setdefault(uuid, f"critical Xid {xid}")
        log.error("nvml.critical_xid", xid=xid, uuid=uuid)

    def _with_xid_health(self, device: DeviceInfo) -> DeviceInfo:
        reason = self._xid_failures.get(device.uuid)
        if reason is None or not device.healthy:
            return device
        return dataclasses.replace(device, healthy=False, health_reason="XidCriticalError",
                                   health_message=f"{reason}; restart the agent after the GPU has been reset")
