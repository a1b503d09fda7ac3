"""A device grant records the resourceName the device was granted under (`resourceName` in each
entry of `tessera.dev/devices`): the node count it stays charged under while held, across
restarts. The field is optional: entries written before it existed still read, and every reader
of the annotation (the node agent's allocation, the merge of edited versions) takes it."""

from __future__ import annotations

import orjson
import pytest

from scheduler.agent.allocate import find_allocation
from scheduler.core import annotations as ann
from scheduler.sim import builders as b

T4 = "class.tessera.dev/t4"


def _entries(raw: str) -> list[dict[str, object]]:
    doc = orjson.loads(raw)
    return [entry for by_resource in doc["containers"].values() for entries in by_resource.values()
            for entry in entries]


def test_a_grant_writes_its_resource_name_and_reads_it_back() -> None:
    grant = ann.DeviceGrant("GPU-1", "n.gpu-1", None, "", "nvidia.com/gpu")
    raw = ann.encode_devices({"main": {T4: (grant,)}})
    assert _entries(raw) == [{"id": "GPU-1", "device": "n.gpu-1", "resourceName": "nvidia.com/gpu"}]
    assert ann.decode_devices(raw) == {"main": {T4: (grant,)}}


def test_an_entry_written_before_the_field_existed_reads_with_no_resource_name() -> None:
    raw = '{"containers":{"main":{"class.tessera.dev/t4":[{"device":"n.gpu-1","id":"GPU-1"}]}},"version":1}'
    [[grant]] = [list(by.values())[0] for by in ann.decode_devices(raw).values()]
    assert grant == ann.DeviceGrant("GPU-1", "n.gpu-1", None)
    assert grant.resource_name == ""
    assert "resourceName" not in ann.encode_devices({"main": {T4: (grant,)}})  # written back as it was


@pytest.mark.parametrize("value", ["", 3, None, ["nvidia.com/gpu"]])
def test_a_resource_name_that_is_no_name_is_refused(value: object) -> None:
    entry = {"id": "GPU-1", "device": "n.gpu-1", "resourceName": value}
    with pytest.raises(ann.AnnotationError, match=r"containers\.main\.class\.tessera\.dev/t4\[0\]\.resourceName"):
        ann.decode_devices(orjson.dumps({"version": 1, "containers": {"main": {T4: [entry]}}}).decode())


def test_the_merge_of_edited_versions_keeps_the_name_a_device_was_granted_under() -> None:
    """A user's edit that drops the field, or names another one, does not change what the pod
    was given: the earliest version recording a name wins, also where a later one wins the amount."""
    given = ann.DeviceGrant("GPU-1", "n.gpu-1", 2, "memory", "nvidia.com/gpu")
    edited = ann.DeviceGrant("GPU-1", "n.gpu-1", 4, "memory")
    renamed = ann.DeviceGrant("GPU-1", "n.gpu-1", 1, "memory", "example.com/other")
    merged = ann.merge_devices({"main": {T4: (given,)}}, {"main": {T4: (edited,)}}, {"main": {T4: (renamed,)}})
    assert merged == {"main": {T4: (ann.DeviceGrant("GPU-1", "n.gpu-1", 4, "memory", "nvidia.com/gpu"),)}}
    unnamed_first = ann.merge_devices({"main": {T4: (edited,)}}, {"main": {T4: (given,)}})
    assert unnamed_first == {"main": {T4: (ann.DeviceGrant("GPU-1", "n.gpu-1", 4, "memory", "nvidia.com/gpu"),)}}


def test_the_node_agent_serves_a_grant_that_records_its_resource_name() -> None:
    grants = tuple(ann.DeviceGrant(f"GPU-{i}", f"n.gpu-{i}", None, "", "nvidia.com/gpu") for i in (1, 2))
    pod = b.pod("a", namespace="ns", node_name="n", phase="Pending",
                annotations={ann.DEVICES: ann.encode_devices({"main": {T4: grants}}),
                             ann.PHASE: ann.PHASE_ALLOCATING})
    found = find_allocation([pod], "n", T4, 2, None, set())
    assert (found.pod_key, found.container, found.device_ids) == ("ns/a", "main", ["GPU-1", "GPU-2"])
