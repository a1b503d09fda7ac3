"""Node agent, Allocate and slot planning: defects found by a review of the one promise (never give
one GPU to two pods) against the kubelet's device manager (k8s.io/kubernetes
pkg/kubelet/cm/devicemanager) and NVIDIA's device plugin. Each test failed before its fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scheduler.agent.agent import Agent, AgentOptions
from scheduler.agent.allocate import AllocationError
from scheduler.agent.devices import DeviceInfo
from scheduler.agent.publish import device_view
from scheduler.agent.slots import EndpointPlan
from scheduler.core import annotations as ann
from scheduler.sim import builders as b
from tests.fakeapi import FakeApi
from tests.unit.test_agent_loop import _applied_plan

V100 = "class.tessera.dev/v100"
LOCAL = [DeviceInfo(uuid=f"GPU-{i}", model="V100", memory_bytes=32 * 2**30) for i in range(3)]  # n.gpu-0 .. n.gpu-2
PLAN = EndpointPlan(class_name="v100", resource_name=V100, sharing=None,
                    devices=tuple(f"n.gpu-{i}" for i in range(3)), slots=3, healthy=3)


def _agent(tmp_path: Path, api: FakeApi, devices: list[DeviceInfo]) -> Agent:
    agent = Agent(AgentOptions(node_name="n", device_plugin_dir=tmp_path), api, api, backend=None)  # type: ignore[arg-type]
    agent.pod_informer.synced.set()
    agent.class_informer.synced.set()
    agent.devices = devices
    agent.views = [device_view("n", "nvidia.com/gpu", d) for d in devices]
    return agent


def _pod(name: str, *grants: tuple[str, str], status: str = "Pending",
         phase: str = ann.PHASE_ALLOCATING) -> dict[str, Any]:
    assignment = {"main": {V100: tuple(ann.DeviceGrant(device_id, device, None) for device_id, device in grants)}}
    return b.pod(name, namespace="ns", node_name="n", phase=status,
                 containers=[b.container("main", limits={V100: len(grants)})],
                 annotations={ann.DEVICES: ann.encode_devices(assignment), ann.PHASE: phase})


async def test_allocate_refuses_a_device_of_another_node(tmp_path: Path) -> None:
    """The pod's annotation names a GPU of node m (`m.gpu-9`, id GPU-9), not one of this node's.
    The agent handed out NVIDIA_VISIBLE_DEVICES=GPU-9 anyway: the container fails to start with a
    runtime error (or, without the NVIDIA hook, runs with no GPU) while holding a kubelet slot.
    NVIDIA k8s-device-plugin's Allocate refuses ids it does not have ("invalid allocation request
    ... unknown device"); the kubelet then fails the pod's admission (UnexpectedAdmissionError)."""
    api = FakeApi()
    agent = _agent(tmp_path, api, LOCAL)
    api.add_pod(_pod("p", ("GPU-9", "m.gpu-9")))
    with pytest.raises(AllocationError, match="m.gpu-9.*not a device of node n"):
        await agent._allocate(PLAN, ["v100-0"])
    assert len(agent.ledger) == 0


async def test_allocate_hands_out_the_id_of_the_device_the_scheduler_charged(tmp_path: Path) -> None:
    """The scheduler charges a grant's `device` (the ExtendedResource name); the agent hands out its
    `id` verbatim. An annotation whose id is not that device's deviceID gives the container
    another GPU than the one charged: `{"id": "all", "device": "n.gpu-0"}` became
    NVIDIA_VISIBLE_DEVICES=all (every GPU of the node, all of them held by other pods too), and
    `{"id": "GPU-1", "device": "n.gpu-0"}` handed out GPU-1, which the scheduler thinks is free and
    gives to the next pod. NVIDIA's Allocate only hands out devices it discovered."""
    api = FakeApi()
    agent = _agent(tmp_path, api, LOCAL)
    api.add_pod(_pod("everything", ("all", "n.gpu-0")))
    with pytest.raises(AllocationError, match="n.gpu-0 has device id GPU-0, not all"):
        await agent._allocate(PLAN, ["v100-0"])
    del api.pods[("ns", "everything")]
    api.add_pod(_pod("swapped", ("GPU-1", "n.gpu-0")))
    with pytest.raises(AllocationError, match="n.gpu-0 has device id GPU-0, not GPU-1"):
        await agent._allocate(PLAN, ["v100-0"])


async def test_allocate_refuses_a_device_that_turned_unhealthy_or_vanished(tmp_path: Path) -> None:
    """The scheduler placed the pod on a healthy GPU; before the kubelet admitted it, the agent saw
    the GPU fail (a critical Xid) or disappear. The agent still handed it out. The kubelet never
    allocates an Unhealthy device (devicemanager/manager.go devicesToAllocate: "no healthy devices
    present; cannot allocate unhealthy devices"); failing admission lets the pod's controller
    place a replacement on a working GPU instead of running on a broken or missing one."""
    api = FakeApi()
    sick = [LOCAL[0], DeviceInfo(uuid="GPU-1", model="V100", memory_bytes=32 * 2**30, healthy=False,
                                 health_reason="XidCritical", health_message="Xid 79: GPU has fallen off the bus")]
    agent = _agent(tmp_path, api, sick)
    api.add_pod(_pod("on-sick", ("GPU-1", "n.gpu-1")))
    with pytest.raises(AllocationError, match="n.gpu-1 is unhealthy.*Xid 79"):
        await agent._allocate(PLAN, ["v100-0"])
    del api.pods[("ns", "on-sick")]
    api.add_pod(_pod("on-gone", ("GPU-2", "n.gpu-2")))
    with pytest.raises(AllocationError, match="n.gpu-2.*not a device of node n"):
        await agent._allocate(PLAN, ["v100-0"])
    del api.pods[("ns", "on-gone")]
    api.add_pod(_pod("fine", ("GPU-0", "n.gpu-0")))
    assert (await agent._allocate(PLAN, ["v100-0"])).envs["NVIDIA_VISIBLE_DEVICES"] == "GPU-0"


async def test_a_held_gpu_that_vanished_keeps_its_slot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Four V100s; p0 holds n.gpu-0, p3 holds n.gpu-3; then gpu-3 disappears from discovery (an
    agent restart after it fell off the bus). The agent advertised 3 slots. The kubelet keeps p3's
    slot allocated (devicemanager: available = healthy - allocated, allocated comes from its
    checkpoint, whether or not the id is still advertised), and the lowest ids are the ones in use
    (GetPreferredAllocation), so it has 3 - 2 = 1 free slot, while the scheduler, which keeps a held
    deleted device as a cordoned ghost, sees gpu-1 and gpu-2 free: the second pod it rightly places
    fails admission ("requested number of devices unavailable"). A held device the node no longer
    has (or that no longer matches the class) must keep the slot the kubelet keeps for it, as a
    held unhealthy device does."""
    api = FakeApi()
    agent = _agent(tmp_path, api, LOCAL)
    agent._on_class("ADDED", b.resource_class("v100", match_labels={"model": "V100"}))
    agent._on_pod("ADDED", _pod("p0", ("GPU-0", "n.gpu-0"), status="Running", phase=ann.PHASE_ALLOCATED))
    agent._on_pod("ADDED", _pod("p3", ("GPU-3", "n.gpu-3"), status="Running", phase=ann.PHASE_ALLOCATED))
    plan = await _applied_plan(agent, monkeypatch)
    assert (plan.slots, plan.healthy) == (4, 4), "kubelet free slots = healthy - 2 in use must be 2 (gpu-1, gpu-2)"
