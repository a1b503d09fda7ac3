"""`tessera agent` against the real apiserver, with a test kubelet speaking the real gRPC protocol.

The node is a plain Node object (no kubelet). The agent runs in-process with the fake device
backend (a YAML file the tests edit) and a short device-plugin directory; `FakeKubelet` serves
`Registration` on `<dir>/kubelet.sock`, dials the agent's endpoints back, consumes ListAndWatch
and calls GetPreferredAllocation/Allocate the way the kubelet's device manager does at pod
admission. `KubeletRunner` plays the rest of the kubelet: it admits every pod bound to the node
once and writes the advertised counts into the Node's capacity/allocatable.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from scheduler.agent import plugin
from scheduler.agent.agent import Agent, AgentOptions
from scheduler.agent.deviceplugin.v1beta1 import api_pb2
from scheduler.agent.devices import FakeBackend
from tessera_testing.fakekubelet import AdmissionError, FakeKubelet
from scheduler.agent.publish import er_name
from scheduler.core import annotations as ann
from scheduler.kube.http import KubeHttp, connect
from scheduler.sim import builders as b
from tests.e2e.live import REPO, BackgroundLoop, Kube, eventually

NODES = "/api/v1/nodes"
ERS = "/apis/tessera.dev/v1alpha1/extendedresources"
CLASSES = "/apis/tessera.dev/v1alpha1/resourceclasses"
V100 = "Tesla V100-SXM2-32GB"
T4 = "Tesla T4"
V100_CLASS = b.resource_class("v100", match_labels={"model": "Tesla-V100-SXM2-32GB"})
T4_SLICE = b.resource_class("t4-slice", match_labels={"model": "Tesla-T4"}, sharing={"dimension": "memory", "unit": "1Gi"})


def gpu(node: str, index: int, model: str = V100, memory: str = "32Gi", healthy: bool = True) -> dict[str, Any]:
    return {"uuid": f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{node}/{index}')}", "model": model, "memory": memory,
            "computeCapability": "7.5" if model == T4 else "7.0", "numaNode": index % 2,
            "pciBusID": f"0000:{0x3b + index:02x}:00.0", "healthy": healthy}


@pytest.fixture(autouse=True)
def _fast_supervision(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plugin, "SUPERVISE_SECONDS", 0.1)
    monkeypatch.setattr(plugin, "STOP_GRACE", 0.2)


@dataclass
class AgentNode:
    """One node: its Node object, fake device file, device-plugin dir, test kubelet and agent."""

    name: str
    kubeconfig: Path
    dir: Path
    kubelet: FakeKubelet
    devices_file: Path
    agent: Agent | None = None
    task: asyncio.Task[None] | None = None
    clients: list[Any] = field(default_factory=list)

    def write_devices(self, devices: list[dict[str, Any]]) -> None:
        tmp = self.devices_file.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump(devices))
        os.replace(tmp, self.devices_file)  # atomic: the agent never reads half a file

    async def start_agent(self, heartbeat: float = 0.5) -> Agent:
        api, watch_api = await connect(str(self.kubeconfig)), await connect(str(self.kubeconfig))
        self.clients += [api, watch_api]
        options = AgentOptions(node_name=self.name, device_plugin_dir=self.dir, heartbeat_seconds=heartbeat,
                               state_file=self.dir / "tessera-agent-state.json")
        self.agent = Agent(options, KubeHttp(api), KubeHttp(watch_api), FakeBackend(self.devices_file))
        self.task = asyncio.create_task(self.agent.run())
        return self.agent

    async def stop_agent(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
            self.task = None
        for api in self.clients:
            await api.close()
        self.clients = []

    async def wait_endpoints(self, expected: dict[str, tuple[int, int]], timeout: float = 30) -> None:
        await self.kubelet.wait_for(lambda: self.kubelet.status() == expected, timeout)


async def create_node(kubectl: Kube, name: str) -> dict[str, Any]:
    node = b.node(name, labels={"tessera.dev/agent": "true"})
    created = await kubectl.create(NODES, node)
    await kubectl.call("PATCH", f"{NODES}/{name}/status", {"status": node["status"]},
                       content_type="application/merge-patch+json")
    return created


@pytest_asyncio.fixture
async def agent_node(clean_cluster: Any, kubectl: Kube) -> AsyncIterator[Callable[..., Awaitable[AgentNode]]]:
    made: list[AgentNode] = []

    async def make(name: str, devices: list[dict[str, Any]], *, start: bool = True) -> AgentNode:
        await create_node(kubectl, name)
        directory = Path(tempfile.mkdtemp(prefix="dp-", dir="/tmp"))  # unix socket paths are short
        kubelet = FakeKubelet(directory)
        await kubelet.start()
        node = AgentNode(name, clean_cluster.kubeconfig, directory, kubelet, directory / "devices.yaml")
        node.write_devices(devices)
        made.append(node)
        if start:
            await node.start_agent()
        return node

    yield make
    for node in made:
        await node.stop_agent()
        await node.kubelet.stop()
        shutil.rmtree(node.dir, ignore_errors=True)


async def node_ers(kubectl: Kube, node: str) -> dict[str, dict[str, Any]]:
    items = (await kubectl.call("GET", f"{ERS}?labelSelector=tessera.dev%2Fnode%3D{node}")).json()["items"]
    return {item["metadata"]["name"]: item for item in items}


def healthy_of(er: dict[str, Any]) -> str | None:
    return next((c["status"] for c in (er.get("status") or {}).get("conditions", []) if c["type"] == "Healthy"), None)


# --- publishing ----------------------------------------------------------------------------------


async def test_publishes_one_extended_resource_per_device_and_follows_the_devices(
        agent_node: Callable[..., Awaitable[AgentNode]], kubectl: Kube, clean_cluster: Any) -> None:
    devices = [gpu("pub-1", 0), gpu("pub-1", 1), gpu("pub-1", 2, model=T4, memory="15360Mi")]
    node = await agent_node("pub-1", devices)
    node_obj = (await kubectl.call("GET", f"{NODES}/pub-1")).json()
    ers = await eventually(lambda: _ers_with_status(kubectl, "pub-1", 3))
    v100 = ers[er_name("pub-1", devices[0]["uuid"])]
    assert v100["metadata"]["labels"] == {"tessera.dev/node": "pub-1"}
    assert v100["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": "pub-1", "uid": node_obj["metadata"]["uid"]}]
    assert v100["spec"] == {
        "nodeName": "pub-1", "resourceName": "nvidia.com/gpu", "deviceID": devices[0]["uuid"],
        "attributes": {"model": "Tesla-V100-SXM2-32GB", "vendor": "nvidia", "uuid": devices[0]["uuid"],
                       "computeCapability": "7.0", "numaNode": "0", "pciBusID": "0000:3b:00.0"},
        "capacity": {"memory": "32Gi"}, "unschedulable": False}
    status = v100["status"]
    assert status["phase"] == "Available" and healthy_of(v100) == "True"
    t4 = ers[er_name("pub-1", devices[2]["uuid"])]
    assert t4["spec"]["capacity"] == {"memory": "15Gi"} and t4["spec"]["attributes"]["model"] == "Tesla-T4"

    # heartbeats move lastHeartbeatTime (second resolution)
    first = status["lastHeartbeatTime"]
    await eventually(lambda: _heartbeat_after(kubectl, v100["metadata"]["name"], first), timeout=10)

    # an admin cordon survives the agent's updates
    await kubectl.call("PATCH", f"{ERS}/{v100['metadata']['name']}", {"spec": {"unschedulable": True}},
                       content_type="application/merge-patch+json")

    # unhealthy in the backend -> Healthy False, phase Unhealthy; a vanished device -> object deleted
    node.write_devices([devices[0], {**devices[1], "healthy": False, "message": "Xid 79 (fell off the bus)"}])

    async def changed() -> dict[str, dict[str, Any]] | None:
        current = await node_ers(kubectl, "pub-1")
        sick = current.get(er_name("pub-1", devices[1]["uuid"]))
        if len(current) == 2 and sick is not None and healthy_of(sick) == "False":
            return current
        return None

    current = await eventually(changed)
    sick = current[er_name("pub-1", devices[1]["uuid"])]
    assert sick["status"]["phase"] == "Unhealthy"
    assert sick["status"]["conditions"][0]["message"] == "Xid 79 (fell off the bus)"
    await asyncio.sleep(1.5)  # a few heartbeats later the cordon is still there
    assert (await kubectl.call("GET", f"{ERS}/{v100['metadata']['name']}")).json()["spec"]["unschedulable"] is True

    # the ownerReference lets the garbage collector remove the objects with the Node; the agent
    # does not re-create them while the Node is missing
    # (a skip would hide the check, and CI fails on skips: a dead controller manager is a failure)
    assert "kube-controller-manager" in clean_cluster.log_files() and not clean_cluster.dead_components(), \
        "kube-controller-manager (garbage collector) is not running"
    await kubectl.call("DELETE", f"{NODES}/pub-1")

    async def gone_for_good() -> bool:
        # an agent pass that read the Node's uid just before the delete may re-create an object
        # the collector then removes again: what counts is that they end gone and stay gone
        if not await _no_ers(kubectl, "pub-1"):
            return False
        await asyncio.sleep(2.0)
        return await _no_ers(kubectl, "pub-1")

    await eventually(gone_for_good, timeout=60)


async def _ers_with_status(kubectl: Kube, node: str, count: int) -> dict[str, dict[str, Any]] | None:
    ers = await node_ers(kubectl, node)
    return ers if len(ers) == count and all(healthy_of(er) for er in ers.values()) else None


async def _heartbeat_after(kubectl: Kube, name: str, previous: str) -> bool:
    er = (await kubectl.call("GET", f"{ERS}/{name}")).json()
    return bool(er["status"]["lastHeartbeatTime"] > previous)


async def _no_ers(kubectl: Kube, node: str) -> bool:
    return not await node_ers(kubectl, node)


# --- device-plugin endpoints -----------------------------------------------------------------------


async def test_one_endpoint_per_matching_class_with_counts_and_re_registration(
        agent_node: Callable[..., Awaitable[AgentNode]], kubectl: Kube) -> None:
    await kubectl.create(CLASSES, V100_CLASS)
    await kubectl.create(CLASSES, T4_SLICE)
    await kubectl.create(CLASSES, b.resource_class("a100", match_labels={"model": "NVIDIA-A100-SXM4-80GB"}))
    devices = [gpu("ep-1", 0), gpu("ep-1", 1), gpu("ep-1", 2, model=T4, memory="16Gi")]
    node = await agent_node("ep-1", devices)
    await node.wait_endpoints({"class.tessera.dev/v100": (2, 2), "class.tessera.dev/t4-slice": (16, 16)})
    registered = {r.resource_name: r for r in node.kubelet.registrations}
    assert set(registered) == {"class.tessera.dev/v100", "class.tessera.dev/t4-slice"}  # a100 matches nothing here
    assert all(r.version == "v1beta1" and r.preferred_allocation for r in registered.values())
    assert sorted(node.kubelet.plugins["class.tessera.dev/v100"].devices) == ["v100-0", "v100-1"]

    # a new class -> a new endpoint; the existing ones are not re-registered
    await kubectl.create(CLASSES, b.resource_class("big", expressions=[{"key": "memory", "operator": "Gt", "values": ["16Gi"]}],
                                                   resource_name="gpu.example.com/big"))
    await node.wait_endpoints({"class.tessera.dev/v100": (2, 2), "class.tessera.dev/t4-slice": (16, 16),
                               "gpu.example.com/big": (2, 2)})
    assert len(node.kubelet.registrations) == 3

    # an unhealthy device: its slots turn Unhealthy through ListAndWatch
    node.write_devices([devices[0], {**devices[1], "healthy": False}, devices[2]])
    await node.wait_endpoints({"class.tessera.dev/v100": (2, 1), "class.tessera.dev/t4-slice": (16, 16),
                               "gpu.example.com/big": (2, 1)})

    # a class removed -> its endpoint stops and its socket goes away
    await kubectl.call("DELETE", f"{CLASSES}/big")
    await node.wait_endpoints({"class.tessera.dev/v100": (2, 1), "class.tessera.dev/t4-slice": (16, 16)})
    await eventually(lambda: _sockets(node.dir, {"kubelet.sock", "tessera-class.tessera.dev_v100.sock",
                                                 "tessera-class.tessera.dev_t4-slice.sock"}))

    # a kubelet restart (sockets wiped, kubelet.sock re-created): the agent registers again
    before = len(node.kubelet.registrations)
    await node.kubelet.restart()
    await node.wait_endpoints({"class.tessera.dev/v100": (2, 1), "class.tessera.dev/t4-slice": (16, 16)})
    assert len(node.kubelet.registrations) == before + 2


async def _sockets(directory: Path, expected: set[str]) -> bool:
    return {p.name for p in directory.iterdir() if p.is_socket()} == expected


# --- the handoff: scheduler -> annotations -> kubelet Allocate -> container ------------------------


class KubeletRunner(BackgroundLoop):
    """The kubelet's pod side: admit each pod bound to the node once; publish plugin counts in the
    Node status. Also checks the scheduler's gate as the apiserver shows it: in every (consistent)
    list, at most one pod per resource name on the node is still Allocating."""

    def __init__(self, kubectl: Kube, node: AgentNode, namespace: str) -> None:
        self.kubectl = kubectl
        self.node = node
        self.namespace = namespace
        self.admitted: dict[str, dict[str, dict[str, api_pb2.ContainerAllocateResponse]]] = {}
        self.errors: dict[str, str] = {}
        self.gate_violations: list[str] = []
        self._status: dict[str, tuple[int, int]] = {}

    async def __aenter__(self) -> KubeletRunner:
        await super().__aenter__()
        return self

    async def _run(self) -> None:
        while True:
            await self._publish_capacity()
            pods = (await self.kubectl.call(
                "GET", f"/api/v1/namespaces/{self.namespace}/pods?fieldSelector=spec.nodeName%3D{self.node.name}")).json()["items"]
            self._check_gate(pods)
            for pod in pods:
                name = pod["metadata"]["name"]
                if name in self.admitted or name in self.errors or pod["status"].get("phase") != "Pending":
                    continue
                try:
                    self.admitted[name] = await self.node.kubelet.admit(pod)
                except AdmissionError as err:
                    self.errors[name] = str(err)
            await asyncio.sleep(0.1)

    def _check_gate(self, pods: list[dict[str, Any]]) -> None:
        """At any moment, at most one pod per resource name on the node is Allocating."""
        holders: dict[str, str] = {}
        for pod in pods:
            if (pod["metadata"].get("annotations") or {}).get(ann.PHASE) != ann.PHASE_ALLOCATING:
                continue
            for resource in _resources(pod):
                if resource in holders:
                    self.gate_violations.append(f"{pod['metadata']['name']} and {holders[resource]} both Allocating {resource}")
                holders[resource] = pod["metadata"]["name"]

    async def _publish_capacity(self) -> None:
        status = self.node.kubelet.status()
        if status == self._status:
            return
        capacity = {r: str(c) for r, (c, _) in status.items()}
        allocatable = {r: str(a) for r, (_, a) in status.items()}
        await self.kubectl.call("PATCH", f"{NODES}/{self.node.name}/status",
                                {"status": {"capacity": capacity, "allocatable": allocatable}},
                                content_type="application/merge-patch+json")
        self._status = status


def _resources(pod: dict[str, Any]) -> set[str]:
    raw = pod["metadata"].get("annotations", {}).get(ann.DEVICES)
    return {r for by_resource in ann.decode_devices(raw).values() for r in by_resource} if raw else set()


def _assigned(pod: dict[str, Any]) -> dict[str, dict[str, list[str]]]:
    containers = ann.decode_devices(pod["metadata"]["annotations"][ann.DEVICES])
    return {c: {r: [g.device_id for g in grants] for r, grants in by_resource.items()}
            for c, by_resource in containers.items()}


async def _all_allocated(kubectl: Kube, namespace: str, names: set[str]) -> dict[str, dict[str, Any]] | None:
    pods = await kubectl.pods(namespace)
    ok = names <= set(pods) and all(
        pods[n]["metadata"].get("annotations", {}).get(ann.PHASE) == ann.PHASE_ALLOCATED for n in names)
    return pods if ok else None


async def test_scheduler_binds_and_each_container_gets_exactly_its_devices(
        tessera: Any, agent_node: Callable[..., Awaitable[AgentNode]], kubectl: Kube, namespace: str) -> None:
    await tessera("config/binpack.yaml")
    await kubectl.create(CLASSES, V100_CLASS)
    await kubectl.create(CLASSES, T4_SLICE)
    devices = [gpu("hand-1", i) for i in range(4)] + [gpu("hand-1", 4, model=T4, memory="16Gi")]
    node = await agent_node("hand-1", devices)
    await node.wait_endpoints({"class.tessera.dev/v100": (4, 4), "class.tessera.dev/t4-slice": (16, 16)})
    await eventually(lambda: _ers_with_status(kubectl, "hand-1", 5))

    v100, t4 = "class.tessera.dev/v100", "class.tessera.dev/t4-slice"
    pods = [
        b.pod("p1", limits={v100: 1}),
        b.pod("p2", limits={v100: 1}),
        b.pod("multi", init_containers=[b.container("setup", limits={v100: 1})],
              containers=[b.container("trainer", limits={v100: 1}), b.container("logger", limits={t4: 4})]),
        b.pod("s1", limits={t4: 6}),
        b.pod("s2", limits={t4: 2}),
    ]
    async with KubeletRunner(kubectl, node, namespace) as runner:
        for pod in pods:
            await kubectl.create_pod(namespace, pod)
        names = {p["metadata"]["name"] for p in pods}
        final = await eventually(lambda: _all_allocated(kubectl, namespace, names), timeout=90)
    assert runner.errors == {}
    assert runner.gate_violations == []
    uuids_by_er = {er["metadata"]["name"]: er["spec"]["deviceID"] for er in (await node_ers(kubectl, "hand-1")).values()}
    exclusive: list[str] = []
    for name in names:
        pod = final[name]
        assert pod["spec"]["nodeName"] == "hand-1"
        assigned = _assigned(pod)
        responses = runner.admitted[name]
        assert set(responses) == set(assigned)
        for container, by_resource in assigned.items():
            for resource, ids in by_resource.items():
                env = responses[container][resource].envs
                assert env["NVIDIA_VISIBLE_DEVICES"] == ",".join(ids), (name, container, resource)
                assert env["TESSERA_POD"] == f"{namespace}/{name}" and env["TESSERA_CONTAINER"] == container
                assert [uuids_by_er[d] for d in env["TESSERA_DEVICES"].split(",")] == ids
                if resource == v100:
                    exclusive += ids
    # p1, p2 and multi's trainer hold different GPUs; multi's init container "setup" finished before
    # the trainer started, and its GPU is the trainer's (as the kubelet's devicesToReuse hands it on)
    assert len(exclusive) == 4 and len(set(exclusive)) == 3
    multi = _assigned(final["multi"])
    assert multi["setup"][v100] == multi["trainer"][v100]
    t4_uuid = devices[4]["uuid"]
    assert runner.admitted["s1"]["main"][t4].envs["NVIDIA_VISIBLE_DEVICES"] == t4_uuid
    assert runner.admitted["s1"]["main"][t4].envs["TESSERA_SHARED_MEMORY"] == "6Gi"
    assert runner.admitted["multi"]["logger"][t4].envs["TESSERA_SHARED_MEMORY"] == "4Gi"
    # the kubelet-advertised counts reached the Node, as a real kubelet would put them
    node_obj = (await kubectl.call("GET", f"{NODES}/hand-1")).json()
    assert node_obj["status"]["allocatable"][v100] == "4" and node_obj["status"]["capacity"][t4] == "16"

    # p1's GPU fails while p1 holds it: its ExtendedResource turns unhealthy (the scheduler stops
    # using it), but the kubelet's healthy slot count stays, because p1's slot is still allocated
    # there and slots are not tied to devices (otherwise the next pod on a healthy GPU is refused)
    p1_uuid = _assigned(final["p1"])["main"][v100][0]
    node.write_devices([{**d, "healthy": d["uuid"] != p1_uuid} for d in devices])
    await eventually(lambda: _device_health(kubectl, "hand-1", p1_uuid, "False"))
    await asyncio.sleep(1.0)
    assert node.kubelet.status()[v100] == (4, 4)


async def _device_health(kubectl: Kube, node: str, device_id: str, status: str) -> bool:
    return any(er["spec"]["deviceID"] == device_id and healthy_of(er) == status
               for er in (await node_ers(kubectl, node)).values())


async def test_forged_or_unscheduled_pods_get_an_error_not_a_guess(
        agent_node: Callable[..., Awaitable[AgentNode]], kubectl: Kube, namespace: str) -> None:
    await kubectl.create(CLASSES, V100_CLASS)
    devices = [gpu("forge-1", 0), gpu("forge-1", 1)]
    node = await agent_node("forge-1", devices)
    await node.wait_endpoints({"class.tessera.dev/v100": (2, 2)})
    v100 = "class.tessera.dev/v100"

    def forged(name: str, uuid_: str) -> dict[str, Any]:
        grant = ann.DeviceGrant(uuid_, er_name("forge-1", uuid_), None)
        return b.pod(name, node_name="forge-1", limits={v100: 1}, annotations={
            ann.DEVICES: ann.encode_devices({"main": {v100: (grant,)}}), ann.PHASE: ann.PHASE_ALLOCATING})

    a = await kubectl.create_pod(namespace, forged("forged-a", devices[0]["uuid"]))
    await kubectl.create_pod(namespace, forged("forged-b", devices[1]["uuid"]))
    await asyncio.sleep(0.5)
    # the agent cannot tell which pod a call is for here: the refused pod's message (its tenant's to
    # read) counts the pods, which may be of any namespace; the agent's log names them
    with pytest.raises(AdmissionError, match=r"FAILED_PRECONDITION: 2 pods on node forge-1 match a request for "
                                             r"1 class.tessera.dev/v100: 2 pods\. Refusing to guess"):
        await node.kubelet.admit(a)
    stray = await kubectl.create_pod(namespace, b.pod("stray", node_name="forge-1", limits={v100: 2}))
    with pytest.raises(AdmissionError, match=r"FAILED_PRECONDITION: 1 pod also asks for 2 "
                                             r"class.tessera.dev/v100 but Tessera did not set up its devices here"):
        await node.kubelet.admit(stray)
    pods = await kubectl.pods(namespace)
    assert pods["forged-a"]["metadata"]["annotations"][ann.PHASE] == ann.PHASE_ALLOCATING  # nothing was served


async def test_a_slice_beyond_the_gpus_memory_is_refused_while_the_holders_admitted_first_keep_it(
        agent_node: Callable[..., Awaitable[AgentNode]], kubectl: Kube, namespace: str) -> None:
    """Two classes share a 16Gi T4 by memory (1Gi and 2Gi units): the kubelet counts each class's
    slots on its own, so its slot count lets 15Gi of one and 6Gi of the other through. Bound by
    something other than one Tessera (a second install on another Lease, a deposed leader's late
    Binding), the pod whose slice would push the T4 over its memory is refused by the agent; the
    three admitted first keep theirs. Once a holder is gone it fits and is admitted."""
    await kubectl.create(CLASSES, T4_SLICE)
    await kubectl.create(CLASSES, b.resource_class("t4-big", match_labels={"model": "Tesla-T4"},
                                                   sharing={"dimension": "memory", "unit": "2Gi"}))
    t4 = gpu("over-1", 0, model=T4, memory="16Gi")
    node = await agent_node("over-1", [t4])
    small, big = "class.tessera.dev/t4-slice", "class.tessera.dev/t4-big"
    await node.wait_endpoints({small: (16, 16), big: (8, 8)})

    def bound(name: str, resource: str, units: int, gib: int) -> dict[str, Any]:
        grant = ann.DeviceGrant(t4["uuid"], er_name("over-1", t4["uuid"]), gib * 2**30, "memory")
        return b.pod(name, node_name="over-1", limits={resource: units}, annotations={
            ann.DEVICES: ann.encode_devices({"main": {resource: (grant,)}}), ann.PHASE: ann.PHASE_ALLOCATING})

    holders = []
    for i in range(3):
        holders.append(await kubectl.create_pod(namespace, bound(f"slice-{i}", small, 5, 5)))
        await node.kubelet.admit(holders[-1])
        await eventually(lambda: _all_allocated(kubectl, namespace, {str(holders[-1]["metadata"]["name"])}))
    late = await kubectl.create_pod(namespace, bound("late", big, 3, 6))
    with pytest.raises(AdmissionError, match=rf"FAILED_PRECONDITION: device {t4['uuid']} is shared beyond its "
                                             rf"capacity: {namespace}/late, and {namespace}/slice-0, .*slice-2 that hold "
                                             r"slices of it, still on node over-1, would use 21Gi of its 16Gi memory"):
        await node.kubelet.admit(late)
    assert set(node.kubelet.allocations) == {h["metadata"]["uid"] for h in holders}  # the holders keep theirs
    await kubectl.call("DELETE", f"/api/v1/namespaces/{namespace}/pods/slice-0?gracePeriodSeconds=0")
    node.kubelet.release(holders[0]["metadata"]["uid"])
    responses = await node.kubelet.admit(late)
    assert responses["main"][big].envs["NVIDIA_VISIBLE_DEVICES"] == t4["uuid"]
    assert responses["main"][big].envs["TESSERA_SHARED_MEMORY"] == "6Gi"


async def test_agent_restart_between_containers_keeps_them_apart(
        agent_node: Callable[..., Awaitable[AgentNode]], kubectl: Kube, namespace: str) -> None:
    """Containers a and b both want 1 device: after a restart the agent must still know a was served."""
    await kubectl.create(CLASSES, V100_CLASS)
    devices = [gpu("restart-1", 0), gpu("restart-1", 1)]
    node = await agent_node("restart-1", devices)
    await node.wait_endpoints({"class.tessera.dev/v100": (2, 2)})
    v100 = "class.tessera.dev/v100"
    first, second = (ann.DeviceGrant(d["uuid"], er_name("restart-1", d["uuid"]), None) for d in devices)
    pod = b.pod("two", node_name="restart-1", containers=[b.container("a", limits={v100: 1}),
                                                          b.container("b", limits={v100: 1})],
                annotations={ann.DEVICES: ann.encode_devices({"a": {v100: (first,)}, "b": {v100: (second,)}}),
                             ann.PHASE: ann.PHASE_ALLOCATING})
    await kubectl.create_pod(namespace, pod)
    await asyncio.sleep(0.5)

    async def allocate(slot: str) -> api_pb2.ContainerAllocateResponse:
        stub = node.kubelet.plugins[v100].stub
        response = await stub.Allocate(api_pb2.AllocateRequest(
            container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=[slot])]), timeout=10)
        reply: api_pb2.ContainerAllocateResponse = response.container_responses[0]  # protobuf is untyped
        return reply

    assert (await allocate("v100-0")).envs["NVIDIA_VISIBLE_DEVICES"] == devices[0]["uuid"]
    registrations = len(node.kubelet.registrations)
    await node.stop_agent()
    await node.kubelet.wait_for(lambda: v100 not in node.kubelet.status())
    await node.start_agent()
    await node.kubelet.wait_for(lambda: len(node.kubelet.registrations) > registrations
                                and node.kubelet.status().get(v100) == (2, 2))
    response = await allocate("v100-1")
    assert response.envs["NVIDIA_VISIBLE_DEVICES"] == devices[1]["uuid"]
    assert response.envs["TESSERA_CONTAINER"] == "b"
    await eventually(lambda: _all_allocated(kubectl, namespace, {"two"}))


async def test_agent_process_shuts_down_cleanly_on_sigterm(kubectl: Kube, clean_cluster: Any) -> None:
    await create_node(kubectl, "proc-1")
    directory = Path(tempfile.mkdtemp(prefix="dp-", dir="/tmp"))
    kubelet = FakeKubelet(directory)
    await kubelet.start()
    await kubectl.create(CLASSES, V100_CLASS)
    devices_file = directory / "devices.yaml"
    devices_file.write_text(yaml.safe_dump([gpu("proc-1", 0)]))
    log_path = directory / "agent.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "scheduler", "agent", "--node-name", "proc-1",
             "--kubeconfig", str(clean_cluster.kubeconfig), "--backend", "fake", "--fake-devices", str(devices_file),
             "--device-plugin-dir", str(directory), "--heartbeat-seconds", "1"],
            cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, "NO_PROXY": "127.0.0.1,localhost", "TESSERA_LOG_FORMAT": "json"})
    try:
        await kubelet.wait_for(lambda: kubelet.status().get("class.tessera.dev/v100") == (1, 1), 30)
        [published] = (await eventually(lambda: _ers_with_status(kubectl, "proc-1", 1))).values()
        managers = {entry["manager"] for entry in published["metadata"].get("managedFields") or ()}
        assert managers == {"tessera-agent"}  # the field manager of what the agent writes, status included
        assert (directory / "tessera-class.tessera.dev_v100.sock").is_socket()
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(proc.wait, 20)
        output = log_path.read_text()
        assert code == 0, output
        assert not (directory / "tessera-class.tessera.dev_v100.sock").exists()
        assert len(await node_ers(kubectl, "proc-1")) == 1  # devices stay published
        assert '"event": "agent.stopped"' in output
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        await kubelet.stop()
        shutil.rmtree(directory, ignore_errors=True)
