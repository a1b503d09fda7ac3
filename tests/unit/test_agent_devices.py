"""The fake device backend: the file format tests and GPU-less machines describe devices with."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.agent.devices import BackendError, DeviceInfo, FakeBackend, parse_fake_devices
from scheduler.agent.publish import er_name

V100 = {"uuid": "GPU-1111", "model": "Tesla V100-SXM2-32GB", "memory": "32Gi", "computeCapability": "7.0",
        "numaNode": 0, "pciBusID": "0000:3b:00.0"}


def test_parses_yaml_list_with_defaults(tmp_path: Path) -> None:
    path = tmp_path / "devices.yaml"
    path.write_text("""
- uuid: GPU-1111
  model: Tesla V100-SXM2-32GB
  memory: 32Gi
  computeCapability: 7.0      # a YAML float: kept as "7.0"
  numaNode: 1
  nvlinkGroup: 0              # an integer: kept as "0"
  pciBusID: "0000:3b:00.0"
- {uuid: GPU-2222, model: A100, memory: 85899345920, healthy: false}
""")
    devices = FakeBackend(path).discover()
    assert devices[0] == DeviceInfo(uuid="GPU-1111", model="Tesla V100-SXM2-32GB", memory_bytes=32 * 2**30,
                                    compute_capability="7.0", numa_node=1, pci_bus_id="0000:3b:00.0",
                                    nvlink_group="0", healthy=True, health_reason="FakeDeviceOK", health_message="")
    assert devices[1].memory_bytes == 80 * 2**30 and devices[1].compute_capability is None
    assert not devices[1].healthy and devices[1].health_reason == "FakeDeviceUnhealthy"
    assert "fake device file" in devices[1].health_message


def test_json_and_devices_key_and_empty(tmp_path: Path) -> None:
    path = tmp_path / "devices.json"
    path.write_text('{"devices": [{"uuid": "GPU-1", "model": "T4", "memory": "16Gi", "message": "x"}]}')
    assert [d.uuid for d in FakeBackend(path).discover()] == ["GPU-1"]
    path.write_text("")
    assert FakeBackend(path).discover() == []
    path.write_text("[]")
    assert FakeBackend(path).discover() == []


def test_file_is_re_read_on_every_discovery(tmp_path: Path) -> None:
    path = tmp_path / "devices.yaml"
    backend = FakeBackend(path)
    path.write_text('[{"uuid": "GPU-1", "model": "T4", "memory": "16Gi"}, {"uuid": "GPU-2", "model": "T4", "memory": "16Gi"}]')
    assert len(backend.discover()) == 2
    path.write_text('[{"uuid": "GPU-1", "model": "T4", "memory": "16Gi", "healthy": false}]')
    [only] = backend.discover()
    assert only.uuid == "GPU-1" and not only.healthy


def test_numa_node_as_the_extended_resource_attribute_writes_it() -> None:
    """An ExtendedResource carries `numaNode: "0"` (attributes are strings, docs/api.md): the device
    file takes that form as well as the integer, as it does for `nvlinkGroup`."""
    [as_string, as_int] = parse_fake_devices([{**V100, "numaNode": "1"}, {**V100, "uuid": "GPU-2", "numaNode": 1}])
    assert as_string.numa_node == as_int.numa_node == 1


@pytest.mark.parametrize(("doc", "message"), [
    ({"a": 1}, "expected a list of devices"),
    ([{**V100, "heathy": False}], r"unknown field\(s\) heathy"),
    ([{**V100, "uuid": ""}], r"\[0\]\.uuid: Required value"),
    ([V100, V100], r"\[1\]\.uuid: Duplicate value"),
    ([{**V100, "model": None}], r"\.model: Required value"),
    ([{k: v for k, v in V100.items() if k != "memory"}], r"\.memory: Required value"),
    ([{**V100, "memory": "32GiB"}], r"\.memory: "),
    ([{**V100, "memory": "0.5"}], "whole, non-negative"),
    ([{**V100, "numaNode": "zero"}], r"numaNode: expected an integer \(0, or the attribute's string form \"0\"\), got 'zero'"),
    ([{**V100, "numaNode": "1.5"}], "numaNode: expected an integer"),
    ([{**V100, "numaNode": 1.0}], "numaNode: expected an integer"),
    ([{**V100, "healthy": "no"}], "healthy: expected true or false"),
    ([{**V100, "nvlinkGroup": ""}], "nvlinkGroup: expected a non-empty string or an integer"),
    (["GPU-1"], r"\[0\]: expected an object"),
])
def test_errors_name_the_field(doc: object, message: str) -> None:
    with pytest.raises(BackendError, match=message):
        parse_fake_devices(doc, "devices.yaml")


def test_unreadable_files_are_backend_errors(tmp_path: Path) -> None:
    with pytest.raises(BackendError, match="cannot read"):
        FakeBackend(tmp_path / "missing.yaml").discover()
    broken = tmp_path / "broken.yaml"
    broken.write_text("[{uuid: GPU-1")
    with pytest.raises(BackendError, match="not valid YAML"):
        FakeBackend(broken).discover()


def test_string_numa_node_reads_as_the_integer_does_negative_included() -> None:
    """The string form is the integer's decimal form, sign included: "-1" is what -1 is."""
    [as_string, as_int] = parse_fake_devices([{**V100, "numaNode": "-1"}, {**V100, "uuid": "GPU-2", "numaNode": -1}])
    assert as_string.numa_node == as_int.numa_node == -1


@pytest.mark.parametrize(("memory", "read"), [(0, 0), ("0", 0), (2**62, 2**62), ("1Ki", 1024)])
def test_memory_bounds_are_inclusive(memory: object, read: int) -> None:
    """Whole and non-negative: zero bytes is a value (not missing), 2^62 is the largest."""
    [device] = parse_fake_devices([{**V100, "memory": memory}])
    assert device.memory_bytes == read


@pytest.mark.parametrize("memory", [-1, "-1", 2**62 + 1])
def test_memory_out_of_bounds_is_refused(memory: object) -> None:
    with pytest.raises(BackendError, match="whole, non-negative"):
        parse_fake_devices([{**V100, "memory": memory}])


def test_uuids_that_differ_only_by_surrounding_spaces_are_duplicates() -> None:
    """A device's uuid is read stripped, so " GPU-1111" is GPU-1111: a second entry of it is the
    same GPU twice (two devices under one UUID, one ExtendedResource name), refused as a plain
    duplicate is."""
    with pytest.raises(BackendError, match=r"\[1\]\.uuid: Duplicate value"):
        parse_fake_devices([V100, {**V100, "uuid": " GPU-1111 "}])


@pytest.mark.parametrize("other", ["gpu-1111", "Gpu-1111"])
def test_uuids_published_under_one_name_are_duplicates(other: str) -> None:
    """A review (session 54): GPU-1111 and gpu-1111 passed the duplicate check, but the agent
    publishes a device as `<node>.<its uuid, lowercased>` (publish.er_name): one ExtendedResource
    for both, and the desired set kept one of them. Duplicates are compared as the name will be."""
    assert er_name("n", "GPU-1111") == er_name("n", other)  # one object for both
    with pytest.raises(BackendError, match=r"^fake devices\[1\]\.uuid: Duplicate value: '" + other
                       + r"': its ExtendedResource name \(<node>\.gpu-1111\) is that of fake devices\[0\] "
                       r"\('GPU-1111'\)$"):
        parse_fake_devices([V100, {**V100, "uuid": other}])
    # ids that differ in a way the name keeps stay two devices
    assert len(parse_fake_devices([V100, {**V100, "uuid": "GPU-1112"}, {**V100, "uuid": "GPU_1111"}])) == 3
