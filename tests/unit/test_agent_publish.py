"""ExtendedResource objects as the agent publishes them: names, owner, attributes, capacity, status."""

from __future__ import annotations

import re
from typing import Any

import orjson

from scheduler.agent.devices import DeviceInfo
from scheduler.agent.publish import (
    Publisher,
    _merged,
    build_object,
    build_status,
    device_view,
    er_name,
    memory_quantity,
    model_attribute,
)
from scheduler.core.classes import parse_resource_class
from scheduler.kube.http import Response
from scheduler.sim import builders as b
from tests.fakeapi import Call, FakeApi

DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

V100 = DeviceInfo(uuid="GPU-8F1C2D3E-1111-2222-3333-444455556666", model="Tesla V100-SXM2-32GB",
                  memory_bytes=32 * 2**30, compute_capability="7.0", numa_node=0, pci_bus_id="0000:3b:00.0")


def test_names_are_dns_subdomains_and_unique() -> None:
    assert er_name("gpu-node-1", "GPU-8f1c2d3e-aaaa") == "gpu-node-1.gpu-8f1c2d3e-aaaa"  # the builders' convention
    assert er_name("gpu-node-1", V100.uuid) == "gpu-node-1.gpu-8f1c2d3e-1111-2222-3333-444455556666"
    mig_a, mig_b = er_name("n", "MIG-GPU-1/1/0"), er_name("n", "MIG-GPU-1_1_0")
    assert mig_a != mig_b and mig_a.startswith("n.mig-gpu-1-1-0-")  # lossy: a hash keeps them apart
    long = er_name("node-" + "x" * 200, "GPU-" + "y" * 100)
    weird = er_name("n", "___")
    for name in (mig_a, mig_b, long, weird):
        assert DNS_SUBDOMAIN.match(name) and len(name) <= 253, name
    assert long != er_name("node-" + "x" * 200, "GPU-" + "y" * 99 + "z")


def test_a_name_holds_no_dot_after_its_node_and_a_long_nodes_digest_form_is_its_own_prefix() -> None:
    """The agent device policy (deploy/admission/annotation-policy.yaml, the chart's copy) takes
    `<node>.<device>` only when the name's last dot is the one after <node> (node `a`'s agent may
    not take `a.b.gpu-x`, node `a.b`'s), and for a node name of 241 characters or more the digest
    form starting with the node's first 200: er_name must never write otherwise."""
    nodes = ["a", "a.b", "gpu-node-1.rack-2.example.com", "n." + "x" * 237, "a.b" * 80, "n." + "x" * 239, "a.b" * 84]
    devices = ["GPU-1", "MIG-GPU-1/1/0", "a.b.c", "...", "GPU-" + "y.z" * 90, "Ünïcode.Ωmega"]
    for node in nodes:
        for device in devices:
            name = er_name(node, device)
            assert DNS_SUBDOMAIN.match(name) and len(name) <= 253, (node, device, name)
            if len(node) >= 241:
                assert name.startswith(node[:200]), (node, device, name)
            else:
                assert name.startswith(node + ".") and name.rindex(".") == len(node), (node, device, name)


def test_object_spec_labels_and_owner() -> None:
    obj = build_object("gpu-node-1", "uid-123", "nvidia.com/gpu", V100)
    assert obj["apiVersion"] == "tessera.dev/v1alpha1" and obj["kind"] == "ExtendedResource"
    assert obj["metadata"]["labels"] == {"tessera.dev/node": "gpu-node-1"}
    assert obj["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": "gpu-node-1",
                                                   "uid": "uid-123"}]
    assert obj["spec"] == {
        "nodeName": "gpu-node-1", "resourceName": "nvidia.com/gpu", "deviceID": V100.uuid,
        "attributes": {"model": "Tesla-V100-SXM2-32GB", "vendor": "nvidia", "uuid": V100.uuid,
                       "computeCapability": "7.0", "numaNode": "0", "pciBusID": "0000:3b:00.0"},
        "capacity": {"memory": "32Gi"}, "unschedulable": False,
    }
    linked = build_object("n", "u", "nvidia.com/gpu", DeviceInfo(uuid="GPU-1", model="A100", memory_bytes=0,
                                                                 nvlink_group="0000:01:00.0"))
    assert linked["spec"]["attributes"]["nvlinkGroup"] == "0000:01:00.0"
    bare = build_object("n", "u", "nvidia.com/gpu", DeviceInfo(uuid="GPU-1", model="T4", memory_bytes=0))
    assert set(bare["spec"]["attributes"]) == {"model", "vendor", "uuid"}


def test_model_and_memory_formatting() -> None:
    assert model_attribute("NVIDIA  A100 80GB PCIe") == "NVIDIA-A100-80GB-PCIe"
    assert memory_quantity(32510 * 2**20 + 12345) == "32510Mi"  # whole MiB, never "MiB"
    assert memory_quantity(80 * 2**30) == "80Gi"
    assert memory_quantity(0) == "0"


def test_status_keeps_transition_time_while_health_is_unchanged() -> None:
    first = build_status(V100, "2026-01-01T00:00:00Z")
    assert first["phase"] == "Available" and first["lastHeartbeatTime"] == "2026-01-01T00:00:00Z"
    [cond] = first["conditions"]
    assert cond["type"] == "Healthy" and cond["status"] == "True" and cond["reason"] == "DeviceOK"
    later = build_status(V100, "2026-01-01T00:05:00Z", first)
    assert later["conditions"][0]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert later["lastHeartbeatTime"] == "2026-01-01T00:05:00Z"
    sick = DeviceInfo(uuid=V100.uuid, model=V100.model, memory_bytes=V100.memory_bytes, healthy=False,
                      health_reason="XidCriticalError", health_message="critical Xid 48")
    bad = build_status(sick, "2026-01-01T00:10:00Z", later)
    assert bad["phase"] == "Unhealthy"
    assert bad["conditions"][0] == {"type": "Healthy", "status": "False", "reason": "XidCriticalError",
                                    "message": "critical Xid 48", "lastTransitionTime": "2026-01-01T00:10:00Z"}


def test_device_view_is_what_the_scheduler_parses_and_classes_match_it() -> None:
    view = device_view("gpu-node-1", "nvidia.com/gpu", V100)
    assert view.name == "gpu-node-1.gpu-8f1c2d3e-1111-2222-3333-444455556666"
    assert view.healthy and view.device_id == V100.uuid and view.capacity["memory"] == 32 * 2**30
    big = parse_resource_class(b.resource_class("big", expressions=[{"key": "memory", "operator": "Gt", "values": ["16Gi"]}]))
    volta = parse_resource_class(b.resource_class("v", match_labels={"model": "Tesla-V100-SXM2-32GB"}))
    cc8 = parse_resource_class(b.resource_class("a", expressions=[{"key": "computeCapability", "operator": "In", "values": ["8.0"]}]))
    assert big.matches(view) and volta.matches(view) and not cc8.matches(view)
    sick = DeviceInfo(uuid="GPU-2", model="T4", memory_bytes=2**30, healthy=False)
    assert not device_view("n", "nvidia.com/gpu", sick).healthy


def _existing(**spec_overrides: Any) -> dict[str, Any]:
    obj = build_object("gpu-node-1", "uid-123", "nvidia.com/gpu", V100)
    obj["metadata"].update({"uid": "er-uid", "resourceVersion": "7", "annotations": {"note": "keep"}})
    obj["metadata"]["labels"]["team"] = "ml"
    obj["spec"].update(spec_overrides)
    obj["status"] = {"phase": "Available"}
    return obj


def test_update_keeps_the_admins_cordon_and_other_metadata() -> None:
    desired = build_object("gpu-node-1", "uid-123", "nvidia.com/gpu", V100)
    assert _merged(_existing(), desired) is None  # nothing to do
    assert _merged(_existing(unschedulable=True), desired) is None  # the cordon is not ours to lift
    changed = _merged(_existing(capacity={"memory": "16Gi"}, unschedulable=True), desired)
    assert changed is not None
    assert changed["spec"]["capacity"] == {"memory": "32Gi"} and changed["spec"]["unschedulable"] is True
    assert changed["metadata"]["labels"] == {"tessera.dev/node": "gpu-node-1", "team": "ml"}
    assert changed["metadata"]["annotations"] == {"note": "keep"} and changed["metadata"]["resourceVersion"] == "7"
    assert "status" not in changed
    # a re-created Node has a new uid: the ownerReference follows it, other owners stay
    stale = _existing()
    stale["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": "gpu-node-1", "uid": "old"},
                                            {"apiVersion": "x/v1", "kind": "Thing", "name": "t", "uid": "t1"}]
    fixed = _merged(stale, desired)
    assert fixed is not None and fixed["metadata"]["ownerReferences"] == [
        {"apiVersion": "x/v1", "kind": "Thing", "name": "t", "uid": "t1"},
        {"apiVersion": "v1", "kind": "Node", "name": "gpu-node-1", "uid": "uid-123"}]


# --- reconciling: a restart updates in place; replaced devices never overlap -----------------------


class _ErStore:
    """The apiserver's ExtendedResource collection for one node, recording how many objects exist
    after every write (what the scheduler's surplus check sees)."""

    def __init__(self, node: str) -> None:
        self.node = node
        self.objects: dict[str, dict[str, Any]] = {}
        self.counts: list[int] = []
        self.writes: list[tuple[str, str]] = []
        self._uid = 0

    def handle(self, call: Call) -> Response | None:
        ers = "/apis/tessera.dev/v1alpha1/extendedresources"
        if call.path == f"/api/v1/nodes/{self.node}":
            return Response(200, orjson.dumps({"metadata": {"name": self.node, "uid": "node-uid"}}))
        if call.path == ers and call.method == "GET":
            return Response(200, orjson.dumps({"items": list(self.objects.values())}))
        if call.path == ers and call.method == "POST":
            self._uid += 1
            obj = {**call.body, "metadata": {**call.body["metadata"], "uid": f"er-{self._uid}"}}
            self.objects[obj["metadata"]["name"]] = obj
            return self._wrote("POST", obj)
        name = call.path.removeprefix(ers + "/").removesuffix("/status")
        if call.method == "DELETE":
            self.objects.pop(name)
            return self._wrote("DELETE", {"metadata": {"name": name}})
        if call.method == "PUT":
            self.objects[name] = call.body
            return self._wrote("PUT", call.body)
        if call.method == "PATCH":
            self.objects[name]["status"] = call.body["status"]
            return Response(200, orjson.dumps(self.objects[name]))
        return None

    def _wrote(self, method: str, obj: dict[str, Any]) -> Response:
        self.writes.append((method, obj["metadata"]["name"]))
        self.counts.append(len(self.objects))
        return Response(200, orjson.dumps(obj))


def _gpu(i: int, model: str = "Tesla V100-SXM2-32GB") -> DeviceInfo:
    return DeviceInfo(uuid=f"GPU-{i:08d}-0000-0000-0000-000000000000", model=model, memory_bytes=32 * 2**30)


async def test_a_restart_updates_the_same_objects_and_replaced_devices_never_overlap() -> None:
    store = _ErStore("gpu-node-1")
    api = FakeApi()
    api.handlers.append(store.handle)
    eight = [_gpu(i) for i in range(8)]
    assert await Publisher(api, "gpu-node-1", "nvidia.com/gpu").sync(eight)  # type: ignore[arg-type]
    names = set(store.objects)
    assert names == {er_name("gpu-node-1", d.uuid) for d in eight}

    # a restart (a new Publisher) with the same devices: the same names, no create, no delete
    store.writes.clear()
    assert await Publisher(api, "gpu-node-1", "nvidia.com/gpu").sync(eight)  # type: ignore[arg-type]
    assert set(store.objects) == names and store.writes == []

    # a start with other devices (a dev-cluster node's seeded GPUs, then a device file of 2 A100):
    # the stale objects go before the new ones come, so the node never describes 8 + 2 GPUs
    # (a `DevicesBeyondAllocatable` Warning for a state that lasts under a second)
    store.counts.clear()
    two = [_gpu(100 + i, "A100") for i in range(2)]
    assert await Publisher(api, "gpu-node-1", "nvidia.com/gpu").sync(two)  # type: ignore[arg-type]
    assert set(store.objects) == {er_name("gpu-node-1", d.uuid) for d in two}
    assert max(store.counts) <= len(eight), store.counts
