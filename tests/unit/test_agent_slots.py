"""Endpoint planning: one endpoint per valid class matching local devices, with the right slot counts."""

from __future__ import annotations

from typing import Any

from scheduler.agent.devices import DeviceInfo
from scheduler.agent.publish import device_view
from scheduler.agent.slots import MAX_SLOT_ID, MAX_SLOTS, plan_endpoints, slot_ids
from scheduler.core.classes import ResourceClass, parse_resource_class
from scheduler.core.objects import Device
from scheduler.sim import builders as b

GI = 2**30


def _devices(*specs: tuple[str, int, bool]) -> list[Device]:
    return [device_view("n", "nvidia.com/gpu", DeviceInfo(uuid=f"GPU-{i}", model=model, memory_bytes=mem * GI,
                                                          healthy=healthy))
            for i, (model, mem, healthy) in enumerate(specs)]


def _classes(*objs: dict[str, Any]) -> list[ResourceClass]:
    return [parse_resource_class(obj) for obj in objs]


def test_exclusive_classes_count_matching_and_healthy_devices() -> None:
    devices = _devices(("V100", 32, True), ("V100", 32, False), ("V100", 16, True), ("T4", 16, True))
    plans = plan_endpoints(_classes(
        b.resource_class("v100", match_labels={"model": "V100"}),
        b.resource_class("big", expressions=[{"key": "memory", "operator": "Gt", "values": ["16Gi"]}],
                         resource_name="gpu.example.com/big"),
        b.resource_class("a100", match_labels={"model": "A100"}),  # matches nothing here: no endpoint
    ), devices)
    assert sorted(plans) == ["class.tessera.dev/v100", "gpu.example.com/big"]
    v100 = plans["class.tessera.dev/v100"]
    assert (v100.class_name, v100.slots, v100.healthy, v100.sharing) == ("v100", 3, 2, None)
    assert v100.slot_ids() == ["v100-0", "v100-1", "v100-2"]
    assert (plans["gpu.example.com/big"].slots, plans["gpu.example.com/big"].healthy) == (2, 1)


def test_sharing_classes_advertise_units() -> None:
    devices = _devices(("P100", 16, True), ("P100", 12, False), ("P100", 8, True))
    plans = plan_endpoints(_classes(
        b.resource_class("p100-slice", match_labels={"model": "P100"}, sharing={"dimension": "memory", "unit": "1Gi"}),
        b.resource_class("p100-5g", match_labels={"model": "P100"}, sharing={"dimension": "memory", "unit": "5Gi"}),
        b.resource_class("by-cores", match_labels={"model": "P100"}, sharing={"dimension": "cores", "unit": "1"}),
    ), devices)
    assert (plans["class.tessera.dev/p100-slice"].slots, plans["class.tessera.dev/p100-slice"].healthy) == (36, 24)
    assert (plans["class.tessera.dev/p100-5g"].slots, plans["class.tessera.dev/p100-5g"].healthy) == (3 + 2 + 1, 3 + 1)
    assert "class.tessera.dev/by-cores" not in plans  # no such capacity: nothing to advertise


def test_sharing_slots_are_capped() -> None:
    devices = _devices(*[("H100", 80, True)] * 16)
    [plan] = plan_endpoints(_classes(b.resource_class(
        "tiny", sharing={"dimension": "memory", "unit": "256Mi"})), devices).values()
    assert plan.slots == MAX_SLOTS and plan.healthy == MAX_SLOTS and plan.capped


def test_invalid_and_clashing_classes_are_the_cores_decision() -> None:
    devices = _devices(("V100", 32, True))
    plans = plan_endpoints(_classes(
        b.resource_class("old", resource_name="gpu.example.com/v100", created="2026-01-01T00:00:00Z"),
        b.resource_class("new", resource_name="gpu.example.com/v100", created="2026-02-01T00:00:00Z"),
        b.resource_class("bare", resource_name="nvidia.tesla.k80"),  # not fully qualified: invalid
    ), devices)
    assert list(plans) == ["gpu.example.com/v100"] and plans["gpu.example.com/v100"].class_name == "old"


def test_slot_ids_fit_the_api_limit() -> None:
    ids = slot_ids("a" * 250, MAX_SLOTS)
    assert all(len(i) <= MAX_SLOT_ID for i in ids) and len(set(ids)) == MAX_SLOTS
    assert slot_ids("a" * 250, 1) != slot_ids("a" * 249 + "b", 1)


def test_unhealthy_devices_still_held_by_pods_keep_their_slots_healthy() -> None:
    """Slots are not tied to devices: the kubelet keeps a held slot allocated, so marking one more
    slot Unhealthy for a held device would refuse the next pod placed on a healthy device."""
    devices = _devices(("V100", 32, False), ("V100", 32, True), ("V100", 32, False))
    classes = _classes(b.resource_class("v100", match_labels={"model": "V100"}),
                       b.resource_class("slice", match_labels={"model": "V100"}, sharing={"dimension": "memory", "unit": "8Gi"}))
    free = plan_endpoints(classes, devices)
    assert (free["class.tessera.dev/v100"].slots, free["class.tessera.dev/v100"].healthy) == (3, 1)
    assert (free["class.tessera.dev/slice"].slots, free["class.tessera.dev/slice"].healthy) == (12, 4)
    held = plan_endpoints(classes, devices, {"class.tessera.dev/v100": {devices[0].name: (None,)}})
    assert (held["class.tessera.dev/v100"].slots, held["class.tessera.dev/v100"].healthy) == (3, 2)
    assert (held["class.tessera.dev/slice"].slots, held["class.tessera.dev/slice"].healthy) == (12, 8)


def test_a_class_on_the_devices_own_resource_name_gets_no_endpoint() -> None:
    """The core refuses a class whose resourceName the ExtendedResources carry as their own
    (`nvidia.com/gpu`: the count NVIDIA's device plugin advertises); the agent registering an
    endpoint under that name would take the kubelet's registration of it over from that plugin."""
    plans = plan_endpoints(_classes(b.resource_class("any-gpu", match_labels={"model": "V100"},
                                                     resource_name="nvidia.com/gpu"),
                                    b.resource_class("v100", match_labels={"model": "V100"})),
                           _devices(("V100", 32, True)))
    assert sorted(plans) == ["class.tessera.dev/v100"]
