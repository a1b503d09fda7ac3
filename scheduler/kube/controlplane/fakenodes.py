"""Fake GPU nodes: Node objects plus one ExtendedResource per GPU, with no kubelet behind them.

Why: end-to-end tests and benchmarks need clusters of hundreds of GPU nodes on a laptop. A
scheduler only reads ``status.allocatable``, labels, taints and conditions, so plain API objects
are enough (docs/design.md §6). Status must be written through the ``/status`` subresource because
create ignores it. A thread pool with keep-alive connections makes 500 nodes x 8 GPUs (about
9,000 requests) take well under a minute on a loopback apiserver.

Device IDs are derived deterministically from node name and index, so a rerun produces the same
objects and replay fixtures stay stable.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import re
import uuid
import zlib
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from scheduler.api.node_owner import node_owner_reference
from scheduler.view.text import count

from .components import KWOK_NODE_ANNOTATION
from .rest import ApiError, RestClient

__all__ = [
    "ER_PATH",
    "FAKE_LABEL",
    "NODE_LABEL",
    "FakeGpuNodeSpec",
    "create_fake_gpu_nodes",
    "delete_fake_gpu_nodes",
    "device_id",
    "extended_resource_name",
    "fake_nodes",
    "models_in_turn",
    "sanitise_device_id",
]

FAKE_LABEL = "tessera.dev/fake"
NODE_LABEL = "tessera.dev/node"
ER_PATH = "/apis/tessera.dev/v1alpha1/extendedresources"
_DEVICE_NAMESPACE = uuid.UUID("6f1d3c1e-5b1a-4c55-9a53-7d0e1f7a2b11")

# Compute capability by model, for realistic attributes. Unknown models get "8.0".
_COMPUTE_CAPABILITY = {
    "K80": "3.7",
    "P100": "6.0",
    "P4": "6.1",
    "V100": "7.0",
    "T4": "7.5",
    "A100": "8.0",
    "A30": "8.0",
    "A10": "8.6",
    "A40": "8.6",
    "L4": "8.9",
    "L40S": "8.9",
    "H100": "9.0",
    "H200": "9.0",
    "B200": "10.0",
}
# Memory per GPU of each model's common data-centre part (the larger one where there are two:
# the shipped `a100-80g` example class asks for more than 64Gi), so that `--gpu-model T4` makes
# 16Gi T4s, as the shipped T4 slicing example expects; any other model gets DEFAULT_GPU_MEMORY.
_MEMORY = {
    "K80": "12Gi",
    "P4": "8Gi",
    "P100": "16Gi",
    "V100": "32Gi",
    "T4": "16Gi",
    "A10": "24Gi",
    "A30": "24Gi",
    "A40": "48Gi",
    "A100": "80Gi",
    "L4": "24Gi",
    "L40S": "48Gi",
    "H100": "80Gi",
    "H200": "141Gi",
    "B200": "180Gi",
}
DEFAULT_GPU_MEMORY = "32Gi"


def gpu_memory(model: str) -> str:
    """A fake GPU's memory when none is given: its model's (any case), else DEFAULT_GPU_MEMORY."""
    return _MEMORY.get(model.upper(), DEFAULT_GPU_MEMORY)


def fake_nodes(groups: Sequence[tuple[int, str]], gpus_per_node: int) -> str:
    """`2 fake nodes with 4 V100 GPUs each`, `1 fake node with 1 V100 GPU`, `2 fake nodes with 8
    V100 GPUs each and 1 with 8 T4 GPUs`: what dev-cluster makes, ``groups`` being (nodes, model)
    pairs, in the lines that say so ("each" of one node read as a slip to a new user)."""
    return " and ".join(
        f"{count(n, 'fake node') if i == 0 else n} with {count(gpus_per_node, f'{model} GPU')}"
        f"{' each' if n != 1 else ''}"
        for i, (n, model) in enumerate(groups))


def models_in_turn(nodes: int, models: Sequence[str]) -> list[tuple[int, str]]:
    """How many of ``nodes`` get each of ``models`` when node i gets model i mod len(models), as
    (nodes, model) pairs in the models' order, models left without a node left out.

    Why in turn: one dev-cluster whose nodes carry every model the shipped examples ask for (V100s
    for `pod.yaml`, T4s for `shared-pod.yaml`), so a user follows them without a restart."""
    made = [((nodes - i + len(models) - 1) // len(models), model) for i, model in enumerate(models)]
    return [(n, model) for n, model in made if n > 0]


def device_id(node: str, index: int) -> str:
    """A deterministic NVIDIA-style UUID, ``GPU-<uuid>``, for GPU ``index`` of ``node``."""
    return f"GPU-{uuid.uuid5(_DEVICE_NAMESPACE, f'{node}/{index}')}"


def sanitise_device_id(raw: str) -> str:
    """Lower-case DNS-label form of a device id (``GPU-AB_12`` -> ``gpu-ab-12``)."""
    cleaned = re.sub(r"[^a-z0-9-]+", "-", raw.lower()).strip("-")
    return cleaned or "device"


def extended_resource_name(node: str, raw_device_id: str) -> str:
    """The ExtendedResource object name: ``<node>.<sanitised device id>``."""
    return f"{node}.{sanitise_device_id(raw_device_id)}"


@dataclass(frozen=True)
class FakeGpuNodeSpec:
    gpus_per_node: int
    gpu_model: str
    memory: str = "32Gi"
    vendor: str = "nvidia"
    resource_name: str = "nvidia.com/gpu"
    compute_capability: str | None = None
    numa_nodes: int = 2
    # the sizes of the NVLink groups the GPUs form, in index order (4, 4: GPUs 0-3 and 4-7); a
    # group of one is a GPU without NVLink peers (no `nvlinkGroup`, as the node agent publishes
    # it); () for none at all
    nvlink_groups: tuple[int, ...] = ()
    cpu: str = "64"
    node_memory: str = "256Gi"
    max_pods: int = 110
    labels: Mapping[str, str] = field(default_factory=dict)
    # stamp status.lastHeartbeatTime as a node agent would; without an agent's heartbeat Tessera
    # does not hold its allocation gate on the node (nobody would ever open it)
    agent_heartbeat: bool = False


NODE_CIDR = ipaddress.ip_network("10.250.0.0/16")  # the fake nodes' InternalIPs (clear of pods and Services)


def internal_ip(name: str) -> str:
    """A fake node's InternalIP, the same for the same name on every run."""
    hosts = NODE_CIDR.num_addresses - 2
    return str(NODE_CIDR.network_address + 1 + zlib.crc32(name.encode()) % hosts)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _node_objects(name: str, spec: FakeGpuNodeSpec) -> tuple[dict[str, Any], dict[str, Any]]:
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "tessera-fake-gpu",
        "nvidia.com/gpu.product": spec.gpu_model,
        "nvidia.com/gpu.count": str(spec.gpus_per_node),
        FAKE_LABEL: "true",
        **spec.labels,
    }
    # kwok's annotation: the kwok of `tessera dev-cluster` (on unless --no-kwok) runs this node's pods (and only
    # this annotation: no kwok taint, so the node advertises exactly what is set here)
    key, value = KWOK_NODE_ANNOTATION
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels, "annotations": {key: value}}}
    resources = {
        "cpu": spec.cpu,
        "memory": spec.node_memory,
        "pods": str(spec.max_pods),
        "ephemeral-storage": "1Ti",
        spec.resource_name: str(spec.gpus_per_node),
    }
    now = _now()
    status = {
        "status": {
            "capacity": resources,
            "allocatable": resources,
            # an InternalIP as a kubelet reports one: kwok gives each pod it runs this hostIP (and a
            # hostNetwork pod this podIP)
            "addresses": [{"type": "InternalIP", "address": internal_ip(name)}, {"type": "Hostname", "address": name}],
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "fake node created by the Tessera local control plane",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ],
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": "v0.0.0-fake",
                "containerRuntimeVersion": "fake://0",
                "kernelVersion": "",
                "osImage": "",
                "kubeProxyVersion": "",
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
            },
        }
    }
    return node, status


def nvlink_attribute(index: int, groups: tuple[int, ...]) -> dict[str, str]:
    """GPU `index`'s `nvlinkGroup` when `groups` (sizes, in index order) puts it in a group of
    more than one: the group's position ("0", "1", ...); none for a GPU alone or beyond them."""
    start = 0
    for number, size in enumerate(groups):
        if index < start + size:
            return {"nvlinkGroup": str(number)} if size > 1 else {}
        start += size
    return {}


def _device_objects(
    node: str, node_uid: str, index: int, spec: FakeGpuNodeSpec
) -> tuple[dict[str, Any], dict[str, Any]]:
    raw_id = device_id(node, index)
    numa = index * max(spec.numa_nodes, 1) // max(spec.gpus_per_node, 1)
    capability = spec.compute_capability or _COMPUTE_CAPABILITY.get(spec.gpu_model.upper(), "8.0")
    obj = {
        "apiVersion": "tessera.dev/v1alpha1",
        "kind": "ExtendedResource",
        "metadata": {
            "name": extended_resource_name(node, raw_id),
            "labels": {FAKE_LABEL: "true", NODE_LABEL: node},
            # as the node agent's: deleting the Node garbage-collects its GPUs (with a controller manager)
            "ownerReferences": [node_owner_reference(node, node_uid)],
        },
        "spec": {
            "nodeName": node,
            "resourceName": spec.resource_name,
            "deviceID": raw_id,
            "attributes": {
                "model": spec.gpu_model,
                "vendor": spec.vendor,
                "computeCapability": capability,
                "numaNode": str(numa),
                # a bus id in index order, as a node agent publishes one: the GPU views order a
                # node's GPUs by it, so GPU N there is fake GPU N (its NVLink group, its NUMA node)
                "pciBusID": f"0000:{index:04x}:00.0",
                **nvlink_attribute(index, spec.nvlink_groups),
            },
            "capacity": {"memory": spec.memory},
            "unschedulable": False,
        },
    }
    now = _now()
    status = {
        "status": {
            "conditions": [
                {
                    "type": "Healthy",
                    "status": "True",
                    "reason": "FakeDevice",
                    "message": "fake device created by the Tessera local control plane",
                    "lastTransitionTime": now,
                }
            ],
            **({"lastHeartbeatTime": now} if spec.agent_heartbeat else {}),
        }
    }
    return obj, status


def _create(client: RestClient, path: str, obj: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    """Create `obj` (or patch the one already there) and write its status; the object as stored."""
    name = obj["metadata"]["name"]
    try:
        client.create(path, obj)
    except ApiError as err:
        if err.status != 409:
            raise
        client.merge_patch(f"{path}/{name}", {k: v for k, v in obj.items() if k != "status"})
    stored: dict[str, Any] = client.merge_patch(f"{path}/{name}/status", status)
    return stored


def _create_one_node(client: RestClient, name: str, spec: FakeGpuNodeSpec) -> None:
    node, node_status = _node_objects(name, spec)
    uid = _create(client, "/api/v1/nodes", node, node_status)["metadata"]["uid"]
    for index in range(spec.gpus_per_node):
        device, device_status = _device_objects(name, uid, index, spec)
        _create(client, ER_PATH, device, device_status)


def create_fake_gpu_nodes(
    client: RestClient, names: list[str], spec: FakeGpuNodeSpec, workers: int = 16
) -> None:
    """Create (or refresh) the nodes ``names`` and their devices, in parallel."""
    if not names:
        return
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(names)))) as pool:
        for future in [pool.submit(_create_one_node, client, name, spec) for name in names]:
            future.result()


def delete_fake_gpu_nodes(client: RestClient, names: Sequence[str] | None = None) -> None:
    """Delete the given fake nodes and their ExtendedResources; all fake ones when ``names`` is
    None. Pods bound to them are left alone."""
    if names is None:
        selector = f"labelSelector={quote(FAKE_LABEL)}%3Dtrue"
        client.request("DELETE", f"{ER_PATH}?{selector}", ok=(200, 202, 404))
        client.request("DELETE", f"/api/v1/nodes?{selector}", ok=(200, 202, 404))
        return
    for name in names:
        selector = f"labelSelector={quote(f'{NODE_LABEL}={name}')}"
        client.request("DELETE", f"{ER_PATH}?{selector}", ok=(200, 202, 404))
        client.delete(f"/api/v1/nodes/{name}")
