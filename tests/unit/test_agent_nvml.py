"""NVML backend without a GPU: the mapping from NVML values to device attributes, with a stub module.

What only a real GPU (and driver) can verify — and these tests therefore cannot:
- that the real libnvidia-ml returns these values in these shapes for a given board (names with
  spaces, `00000000:3B:00.0` bus ids, memory totals a little under the marketing size, e.g.
  32510 MiB on some V100-32GB drivers);
- that `nvmlDeviceGetNumaNodeId` exists in the installed driver (R530+) or sysfs has `numa_node`;
- that Xid events are delivered through `nvmlEventSetWait_v2` for a real fault, and that an
  unplugged or fallen-off-the-bus GPU raises `GPU is lost` on queries.
The stub's function and struct field names are checked against the real `pynvml` below, so a
rename in nvidia-ml-py fails here rather than on a GPU node.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from scheduler.agent.devices import BackendError
from scheduler.agent.nvml import NvmlBackend, load_pynvml, normalise_bus_id

NOT_SUPPORTED, TIMEOUT, GPU_IS_LOST = 3, 10, 15
XID_EVENT = 0x8


class StubError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


class Gpu:
    def __init__(self, uuid: Any, name: Any, total: int, cc: tuple[int, int] | None, bus: Any, numa: int | None,
                 lost: bool = False) -> None:
        self.uuid, self.name, self.total, self.cc, self.bus, self.numa, self.lost = uuid, name, total, cc, bus, numa, lost


class StubNvml:
    """The subset of pynvml the backend uses, with the same names."""

    NVMLError = StubError
    NVML_ERROR_TIMEOUT = TIMEOUT
    nvmlEventTypeXidCriticalError = XID_EVENT

    def __init__(self, gpus: list[Gpu], *, events_supported: bool = True, init_error: int | None = None) -> None:
        self.gpus = gpus
        self.events: list[Any] = []
        self.events_supported = events_supported
        self.init_error = init_error
        self.registered: list[int] = []
        self.calls: list[str] = []

    def _gpu(self, handle: int) -> Gpu:
        gpu = self.gpus[handle]
        if gpu.lost:
            raise StubError(GPU_IS_LOST)
        return gpu

    def nvmlInit(self) -> None:
        self.calls.append("init")
        if self.init_error is not None:
            raise StubError(self.init_error)

    def nvmlShutdown(self) -> None:
        self.calls.append("shutdown")

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetUUID(self, handle: int) -> Any:
        return self.gpus[handle].uuid  # even a lost GPU still has its UUID cached by NVML

    def nvmlDeviceGetName(self, handle: int) -> Any:
        return self._gpu(handle).name

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Any:
        return SimpleNamespace(total=self._gpu(handle).total, free=0, used=0)

    def nvmlDeviceGetCudaComputeCapability(self, handle: int) -> tuple[int, int]:
        cc = self._gpu(handle).cc
        if cc is None:
            raise StubError(NOT_SUPPORTED)
        return cc

    def nvmlDeviceGetPciInfo(self, handle: int) -> Any:
        return SimpleNamespace(busId=self._gpu(handle).bus)

    def nvmlDeviceGetNumaNodeId(self, handle: int) -> int:
        numa = self._gpu(handle).numa
        if numa is None:
            raise StubError(NOT_SUPPORTED)
        return numa

    def nvmlEventSetCreate(self) -> object:
        if not self.events_supported:
            raise StubError(NOT_SUPPORTED)
        return object()

    def nvmlDeviceRegisterEvents(self, handle: int, types: int, event_set: object) -> None:
        assert types == XID_EVENT
        self.registered.append(handle)

    def nvmlEventSetWait_v2(self, event_set: object, timeout_ms: int) -> Any:
        assert timeout_ms == 0  # discovery must never block on events
        if not self.events:
            raise StubError(TIMEOUT)
        return self.events.pop(0)

    def nvmlEventSetFree(self, event_set: object) -> None:
        self.calls.append("free")


def _two_gpus() -> list[Gpu]:
    return [
        Gpu(b"GPU-8f1c2d3e-aaaa", b"Tesla V100-SXM2-32GB", 32510 * 2**20, (7, 0), b"00000000:3B:00.0", 0),
        Gpu("GPU-1a2b3c4d-bbbb", "NVIDIA A100 80GB PCIe", 80 * 2**30, (8, 0), "00000000:AF:00.0", None),
    ]


def test_maps_nvml_values_to_device_attributes(tmp_path: Path) -> None:
    (tmp_path / "0000:af:00.0").mkdir()
    (tmp_path / "0000:af:00.0" / "numa_node").write_text("1\n")
    backend = NvmlBackend(StubNvml(_two_gpus()), sysfs_pci=str(tmp_path))
    v100, a100 = backend.discover()
    assert (v100.uuid, v100.model, v100.memory_bytes) == ("GPU-8f1c2d3e-aaaa", "Tesla V100-SXM2-32GB", 32510 * 2**20)
    assert (v100.compute_capability, v100.pci_bus_id, v100.numa_node) == ("7.0", "0000:3b:00.0", 0)
    assert v100.healthy and v100.health_reason == "NVMLOK" and v100.vendor == "nvidia"
    # no NVML NUMA query on this driver: the kernel's answer from sysfs
    assert (a100.model, a100.compute_capability, a100.pci_bus_id, a100.numa_node) == \
        ("NVIDIA A100 80GB PCIe", "8.0", "0000:af:00.0", 1)


def test_missing_optional_values_and_negative_numa(tmp_path: Path) -> None:
    gpu = Gpu("GPU-1", "T4", 16 * 2**30, None, "00000000:01:00.0", -1)
    [device] = NvmlBackend(StubNvml([gpu]), sysfs_pci=str(tmp_path)).discover()
    assert device.compute_capability is None and device.numa_node is None and device.healthy


def test_lost_gpu_is_unhealthy_not_invisible() -> None:
    gpus = _two_gpus()
    gpus[1].lost = True
    v100, lost = NvmlBackend(StubNvml(gpus)).discover()
    assert v100.healthy
    assert lost.uuid == "GPU-1a2b3c4d-bbbb" and not lost.healthy
    assert lost.health_reason == "NVMLQueryFailed" and str(GPU_IS_LOST) in lost.health_message


def test_a_gpu_lost_after_discovery_keeps_its_model_and_memory() -> None:
    """A review found a GPU whose queries began to fail published as model "unknown" with no
    memory: it stopped matching its class, so its slot vanished from the device plugin while a pod
    held it (and the ExtendedResource's spec flipped between the two models). Only health changes."""
    gpus = _two_gpus()
    backend = NvmlBackend(StubNvml(gpus))
    before = backend.discover()[1]
    gpus[1].lost = True
    after = backend.discover()[1]
    assert (after.model, after.memory_bytes, after.pci_bus_id) == (before.model, before.memory_bytes, before.pci_bus_id)
    assert not after.healthy and after.health_reason == "NVMLQueryFailed" and str(GPU_IS_LOST) in after.health_message
    gpus[1].lost = False
    assert backend.discover()[1] == before


def test_critical_xid_marks_the_device_unhealthy_until_restart() -> None:
    stub = StubNvml(_two_gpus())
    backend = NvmlBackend(stub)
    assert all(d.healthy for d in backend.discover())
    assert stub.registered == [0, 1]
    stub.events = [SimpleNamespace(eventType=XID_EVENT, eventData=13, device=1),  # application Xid: ignored
                   SimpleNamespace(eventType=XID_EVENT, eventData=48, device=1)]  # double-bit ECC
    v100, a100 = backend.discover()
    assert v100.healthy and not a100.healthy
    assert a100.health_reason == "XidCriticalError" and "critical Xid 48" in a100.health_message
    assert not backend.discover()[1].healthy  # sticky
    assert stub.registered == [0, 1]  # registered once


def test_unattributed_xid_marks_every_device() -> None:
    stub = StubNvml(_two_gpus())
    backend = NvmlBackend(stub)
    backend.discover()

    def lost_uuid(handle: Any) -> Any:
        raise StubError(GPU_IS_LOST)

    original = stub.nvmlDeviceGetUUID
    stub.nvmlDeviceGetUUID = lost_uuid  # type: ignore[method-assign]
    stub.events = [SimpleNamespace(eventType=XID_EVENT, eventData=79, device=None)]
    backend._drain_events()
    stub.nvmlDeviceGetUUID = original  # type: ignore[method-assign]
    assert not any(d.healthy for d in backend.discover())


def test_without_event_support_discovery_still_works() -> None:
    stub = StubNvml(_two_gpus(), events_supported=False)
    backend = NvmlBackend(stub)
    assert len(backend.discover()) == 2 and stub.registered == []
    backend.close()
    assert stub.calls[-1] == "shutdown" and "free" not in stub.calls


def test_init_failure_is_a_clear_backend_error() -> None:
    with pytest.raises(BackendError, match="NVML initialisation failed: .*driver loaded"):
        NvmlBackend(StubNvml([], init_error=9)).discover()


class NvLinkStub(StubNvml):
    """A stub with NVLinks: `links[handle]` lists each active link's remote bus id (a GPU's or an
    NVSwitch's); links past the list answer "not supported", as NVML does."""

    NVML_NVLINK_MAX_LINKS = 18

    def __init__(self, gpus: list[Gpu], links: dict[int, list[str]]) -> None:
        super().__init__(gpus)
        self.links = links

    def nvmlDeviceGetNvLinkState(self, handle: int, link: int) -> int:
        if link >= len(self.links.get(handle, [])):
            raise StubError(NOT_SUPPORTED)
        return 1

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle: int, link: int) -> Any:
        return SimpleNamespace(busId=self.links[handle][link].encode())


def test_nvlink_groups_from_direct_links_and_shared_switches() -> None:
    gpus = [Gpu(f"GPU-{i}", "A100", 80 * 2**30, (8, 0), f"00000000:{i + 1:02X}:00.0", 0) for i in range(5)]
    links = {0: ["00000000:02:00.0"], 1: ["00000000:01:00.0"],  # GPUs 0 and 1 bridged directly
             2: ["00000000:F0:00.0"], 3: ["00000000:F0:00.0", "00000000:F1:00.0"],  # 2 and 3 through a switch
             4: []}  # no NVLink
    devices = NvmlBackend(NvLinkStub(gpus, links)).discover()
    assert [d.nvlink_group for d in devices] == ["0000:01:00.0", "0000:01:00.0", "0000:03:00.0", "0000:03:00.0", None]


def test_bus_id_normalisation() -> None:
    assert normalise_bus_id(b"00000000:3B:00.0\x00") == "0000:3b:00.0"
    assert normalise_bus_id("0000:3b:00.0") == "0000:3b:00.0"
    assert normalise_bus_id("weird") == "weird"


# --- the real pynvml, as far as a machine without a GPU can check it --------------------------


def test_stub_names_exist_in_the_real_pynvml() -> None:
    pynvml = load_pynvml()
    for name in ("nvmlInit", "nvmlShutdown", "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex", "nvmlDeviceGetUUID",
                 "nvmlDeviceGetName", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetCudaComputeCapability",
                 "nvmlDeviceGetPciInfo", "nvmlDeviceGetNumaNodeId", "nvmlEventSetCreate", "nvmlDeviceRegisterEvents",
                 "nvmlEventSetWait_v2", "nvmlEventSetFree", "NVMLError", "NVML_ERROR_TIMEOUT",
                 "nvmlEventTypeXidCriticalError", "nvmlDeviceGetNvLinkState", "nvmlDeviceGetNvLinkRemotePciInfo",
                 "NVML_NVLINK_MAX_LINKS"):
        assert hasattr(pynvml, name), name
    assert pynvml.NVML_ERROR_TIMEOUT == TIMEOUT and pynvml.nvmlEventTypeXidCriticalError == XID_EVENT

    def fields(struct: type[ctypes.Structure]) -> set[str]:
        return {f[0] for f in struct._fields_}

    assert "total" in fields(pynvml.c_nvmlMemory_t)
    assert "busId" in fields(pynvml.nvmlPciInfo_t)
    assert {"device", "eventType", "eventData"} <= fields(pynvml.c_nvmlEventData_t)
    assert pynvml.NVMLError(GPU_IS_LOST).value == GPU_IS_LOST


def test_real_pynvml_without_a_driver_fails_clearly() -> None:
    """On this GPU-less machine libnvidia-ml.so is absent: a BackendError, not a crash."""
    backend = NvmlBackend()
    try:
        backend.discover()
    except BackendError as err:
        assert "NVML initialisation failed" in str(err)
    else:  # pragma: no cover - only on a machine with a GPU driver
        pytest.skip("an NVIDIA driver is present: this checks the failure path only")
    finally:
        backend.close()
