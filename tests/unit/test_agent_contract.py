"""The node agent against the kubelet device-plugin contract: cases a review found.

The first four failed before their fixes, for the reasons their docstrings give.
"""

from __future__ import annotations

import copy
import re
import tempfile
from pathlib import Path
from typing import Any

import anyio

from scheduler.agent.agent import Agent, AgentOptions
from scheduler.agent.deviceplugin.v1beta1 import api_pb2
from scheduler.agent.devices import DeviceInfo
from scheduler.agent.nvml import NvmlBackend
from scheduler.agent.plugin import Endpoint
from scheduler.agent.publish import build_object, device_view
from scheduler.agent.slots import EndpointPlan
from scheduler.core import annotations as ann
from scheduler.sim import builders as b
from tessera_testing.fakekubelet import FakeKubelet
from tests.fakeapi import FakeApi
from tests.unit.test_agent_nvml import GPU_IS_LOST, StubError, StubNvml, _two_gpus
from tests.unit.test_agent_plugin import _fast_supervision, kubelet, plugin_dir  # noqa: F401 (pytest fixtures)

V100 = "class.tessera.dev/v100"
T4 = "class.tessera.dev/t4"
PLAN_V100 = EndpointPlan(class_name="v100", resource_name=V100, sharing=None, devices=("n.gpu-a",), slots=1, healthy=1)
PLAN_T4 = EndpointPlan(class_name="t4", resource_name=T4, sharing=None, devices=("n.gpu-b",), slots=1, healthy=1)

# k8s.io/apimachinery/pkg/util/validation IsValidLabelValue
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _kubelet_merge(responses: list[api_pb2.ContainerAllocateResponse]) -> dict[str, str]:
    """pkg/kubelet/cm/devicemanager/pod_devices.go deviceRunContainerOptions: the envs of every
    resource's Allocate response of one container go into one map; a key already present is
    skipped ("Environment variable has conflicting setting"), the first value stays."""
    envs: dict[str, str] = {}
    for response in responses:
        for key, value in response.envs.items():
            envs.setdefault(key, value)
    return envs


def _discover(agent: Agent, *uuids: str) -> None:
    """The agent discovered these GPUs on node n (Allocate hands out only those)."""
    agent.devices = [DeviceInfo(uuid=u, model="V100", memory_bytes=2**35) for u in uuids]
    agent.views = [device_view("n", "nvidia.com/gpu", d) for d in agent.devices]


async def test_a_container_with_two_classes_sees_all_its_gpus() -> None:
    """A container asking for two classes (the planner plans per (container, resource), the
    annotation is container -> resource -> grants) gets one Allocate call per resource. Each answer
    sets NVIDIA_VISIBLE_DEVICES to that resource's UUIDs only; the kubelet keeps the first value of
    an env key across a container's responses, so the container sees the GPU of one class only,
    although the scheduler charged it both."""
    api = FakeApi()
    with tempfile.TemporaryDirectory() as tmp:
        agent = Agent(AgentOptions(node_name="n", device_plugin_dir=Path(tmp)), api, api, backend=None)  # type: ignore[arg-type]
        _discover(agent, "GPU-a", "GPU-b")
        assignment = {"main": {V100: (ann.DeviceGrant("GPU-a", "n.gpu-a", None),),
                               T4: (ann.DeviceGrant("GPU-b", "n.gpu-b", None),)}}
        api.add_pod(b.pod("two-classes", namespace="ns", node_name="n",
                          containers=[b.container("main", limits={V100: 1, T4: 1})],
                          annotations={ann.DEVICES: ann.encode_devices(assignment), ann.PHASE: ann.PHASE_ALLOCATING}))
        first = await agent._allocate(PLAN_V100, ["v100-0"])
        second = await agent._allocate(PLAN_T4, ["t4-0"])
    for order in ([first, second], [second, first]):  # the kubelet walks a map: either order
        visible = set(_kubelet_merge(order)["NVIDIA_VISIBLE_DEVICES"].split(","))
        assert visible == {"GPU-a", "GPU-b"}, f"container would see only {sorted(visible)}"


def test_extended_resource_labels_are_valid_for_long_node_names() -> None:
    """Node names are DNS-1123 subdomains of up to 253 characters; label values are limited to 63.
    The object name is shortened with a hash for long names, but the `tessera.dev/node` label
    carries the node name verbatim: the apiserver rejects the create (422) and the label-selector
    list (400), so such a node never gets its devices published."""
    node = "gpu-worker-0001.rack-17.row-b.datacenter-frankfurt-1.example-corp.internal"  # 74 characters
    obj = build_object(node, "uid-1", "nvidia.com/gpu",
                       DeviceInfo(uuid="GPU-8f1c2d3e-aaaa", model="Tesla V100-SXM2-32GB", memory_bytes=32 * 2**30))
    for key, value in obj["metadata"]["labels"].items():
        assert len(value) <= 63 and LABEL_VALUE.match(value), f"label {key}={value!r} is not a valid label value"


async def _ok(plan: EndpointPlan, ids: list[str]) -> api_pb2.ContainerAllocateResponse:
    return api_pb2.ContainerAllocateResponse()


def _pod(uid: str) -> dict[str, Any]:
    return {"metadata": {"uid": uid, "name": uid, "namespace": "ns"},
            "spec": {"containers": [{"name": "main", "resources": {"limits": {V100: "1"}}}]}}


async def test_the_slot_of_a_running_pod_is_not_reported_unhealthy_for_another_gpu(
        kubelet: FakeKubelet, plugin_dir: Path) -> None:
    """Health is positional: slots 0..healthy-1 are Healthy, the rest Unhealthy, whichever slots
    the kubelet has allocated. Two GPUs A, B; p1 (on A) got slot v100-0, p2 (on B) slot v100-1;
    p1 ends; then A (held by nobody) goes unhealthy, and plan_endpoints gives slots=2, healthy=1.
    The agent marks v100-1 - p2's slot, whose GPU B is fine - Unhealthy and keeps the free v100-0
    Healthy. The kubelet ties health to the allocated id: devicesToAllocate refuses to re-admit p2
    ("previously allocated devices are no longer healthy", after a node reboot or a kubelet restart
    while the container is not running), and the pod's allocatedResourcesStatus (KEP-4680) reports
    p2's device unhealthy."""
    endpoint = Endpoint(plugin_dir, EndpointPlan("v100", V100, None, ("n.gpu-a", "n.gpu-b"), 2, 2), _ok)
    async with anyio.create_task_group() as group:
        await group.start(endpoint.run)
        try:
            await kubelet.wait_for(lambda: kubelet.status().get(V100) == (2, 2))
            await kubelet.admit(_pod("p1"))
            await kubelet.admit(_pod("p2"))
            p2_slot = kubelet.allocations["p2"]["main"][V100]
            assert p2_slot == ["v100-1"]
            kubelet.release("p1")
            # what the agent plans once A fails: one healthy GPU, and the slot Allocate gave p2
            endpoint.update(EndpointPlan("v100", V100, None, ("n.gpu-a", "n.gpu-b"), 2, 1,
                                         in_use=frozenset(p2_slot)))
            await kubelet.wait_for(lambda: kubelet.status().get(V100) == (2, 1))
            health = kubelet.plugins[V100].devices
            assert health[p2_slot[0]] == "Healthy", f"p2's slot reported {health[p2_slot[0]]}: {health}"
        finally:
            await endpoint.stop()


async def test_the_agent_plans_the_slots_allocate_gave_to_live_pods_as_in_use() -> None:
    """The agent remembers which slot ids each Allocate call was for and whose pod it served;
    those slots are `in_use` in the plan while the pod is on the node and not terminal."""
    api = FakeApi()
    with tempfile.TemporaryDirectory() as tmp:
        agent = Agent(AgentOptions(node_name="n", device_plugin_dir=Path(tmp)), api, api, backend=None)  # type: ignore[arg-type]
        _discover(agent, "GPU-a", "GPU-b")
        assignment = {"main": {V100: (ann.DeviceGrant("GPU-a", "n.gpu-a", None),)}}
        pod = b.pod("p2", namespace="ns", node_name="n", containers=[b.container("main", limits={V100: 1})],
                    annotations={ann.DEVICES: ann.encode_devices(assignment), ann.PHASE: ann.PHASE_ALLOCATING})
        api.add_pod(pod)
        await agent._allocate(PLAN_V100, ["v100-1"])
        agent._on_pod("ADDED", api.pod("ns", "p2"))
        assert agent._slots_in_use(V100) == {"v100-1"}
        ended = copy.deepcopy(api.pod("ns", "p2"))
        ended["status"]["phase"] = "Succeeded"
        agent._on_pod("MODIFIED", ended)
        assert agent._slots_in_use(V100) == frozenset()


def test_unhealthy_slots_spare_the_ones_in_use() -> None:
    plan = EndpointPlan("v100", V100, None, ("a", "b", "c"), 3, 1, in_use=frozenset({"v100-2", "v100-0"}))
    assert plan.unhealthy_slots() == {"v100-1", "v100-2"}  # the free one first, then from the top
    assert EndpointPlan("v100", V100, None, ("a", "b"), 2, 1).unhealthy_slots() == {"v100-1"}


def test_a_gpu_whose_handle_cannot_be_read_is_kept_unhealthy_not_deleted() -> None:
    """NVML documents NVML_ERROR_GPU_IS_LOST (and UNKNOWN) for nvmlDeviceGetHandleByIndex when a
    GPU falls off the bus. discover() then drops the device altogether: the agent deletes its
    ExtendedResource, its slot leaves the device plugin while a pod may hold it, and when NVML
    answers again the object is re-created with `spec.unschedulable: false` - the admin's cordon
    gone. docs/design.md: a flaky NVML call must not delete devices; docs/node-agent.md: a GPU whose NVML
    queries fail "is published unhealthy ... so a pod holding it keeps its slot"."""
    stub = StubNvml(_two_gpus())
    backend = NvmlBackend(stub)
    before = backend.discover()
    assert len(before) == 2

    def handle(index: int) -> int:
        if index == 1:
            raise StubError(GPU_IS_LOST)
        return index

    stub.nvmlDeviceGetHandleByIndex = handle  # type: ignore[method-assign]
    after = {d.uuid: d for d in backend.discover()}
    assert before[1].uuid in after, "the lost GPU vanished from discovery (its ExtendedResource is deleted)"
    assert not after[before[1].uuid].healthy
