"""Builders for the Kubernetes objects Tessera consumes, in the apiserver's JSON shape.

Tests, the shipped examples and the benchmarks all describe clusters with these, so every
synthetic object looks exactly like one read from a real watch stream (apiVersion, kind, uid,
string quantities) and goes through the same parsing as production input.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

Obj = dict[str, Any]


def uid_for(kind: str, namespace: str, name: str) -> str:
    digest = hashlib.sha1(f"{kind}/{namespace}/{name}".encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def event(kind: str, obj: Obj) -> Obj:
    return {"type": kind, "object": obj}


def node(name: str, cpu: str = "32", memory: str = "128Gi", gpus: int = 0, pods: int = 110,
         labels: Mapping[str, str] | None = None, taints: list[Obj] | None = None,
         unschedulable: bool = False, extra: Mapping[str, str] | None = None) -> Obj:
    allocatable: dict[str, str] = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    allocatable.update(extra or {})
    spec: Obj = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": uid_for("Node", "", name),
                     "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": spec,
        "status": {"allocatable": allocatable, "capacity": dict(allocatable)},
    }


def container(name: str = "main", requests: Mapping[str, str | int] | None = None,
              limits: Mapping[str, str | int] | None = None, restart_policy: str | None = None) -> Obj:
    resources: Obj = {}
    if requests:
        resources["requests"] = {k: str(v) for k, v in requests.items()}
    if limits:
        resources["limits"] = {k: str(v) for k, v in limits.items()}
    out: Obj = {"name": name, "image": "busybox", "resources": resources}
    if restart_policy:
        out["restartPolicy"] = restart_policy
    return out


def pod(name: str, namespace: str = "default", scheduler: str = "tessera",
        requests: Mapping[str, str | int] | None = None, limits: Mapping[str, str | int] | None = None,
        containers: list[Obj] | None = None, init_containers: list[Obj] | None = None,
        labels: Mapping[str, str] | None = None, annotations: Mapping[str, str] | None = None,
        node_name: str = "", phase: str = "Pending", priority: int | None = None,
        spec_extra: Mapping[str, Any] | None = None, created: str = "2026-01-01T00:00:00Z") -> Obj:
    spec: Obj = {
        "schedulerName": scheduler,
        "containers": containers or [container("main", requests, limits)],
    }
    if init_containers:
        spec["initContainers"] = init_containers
    if node_name:
        spec["nodeName"] = node_name
    if priority is not None:
        spec["priority"] = priority
    spec.update(spec_extra or {})
    meta: Obj = {"name": name, "namespace": namespace, "uid": uid_for("Pod", namespace, name),
                 "creationTimestamp": created}
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


def gang_labels(group: str, min_available: int) -> dict[str, str]:
    return {"pod-group.scheduling.sigs.k8s.io/name": group,
            "pod-group.scheduling.sigs.k8s.io/min-available": str(min_available)}


def device(node_name: str, index: int, model: str = "V100", memory: str = "32Gi",
           resource_name: str = "nvidia.com/gpu", attributes: Mapping[str, str] | None = None,
           healthy: bool = True, unschedulable: bool = False, heartbeat: str | None = None) -> Obj:
    """One ExtendedResource; `heartbeat` (RFC 3339) makes it look served by a node agent."""
    device_id = f"GPU-{uid_for('GPU', node_name, str(index))}"
    name = f"{node_name}.{device_id.lower()}"
    return {
        "apiVersion": "tessera.dev/v1alpha1",
        "kind": "ExtendedResource",
        "metadata": {"name": name, "uid": uid_for("ExtendedResource", "", name),
                     "labels": {"tessera.dev/node": node_name}},
        "spec": {
            "nodeName": node_name,
            "resourceName": resource_name,
            "deviceID": device_id,
            "attributes": {"model": model, "vendor": "nvidia", "index": str(index), **(attributes or {})},
            "capacity": {"memory": memory},
            "unschedulable": unschedulable,
        },
        "status": {"conditions": [{"type": "Healthy", "status": "True" if healthy else "False"}],
                   **({"lastHeartbeatTime": heartbeat} if heartbeat else {})},
    }


def resource_class(name: str, match_labels: Mapping[str, str] | None = None,
                   expressions: list[Obj] | None = None, resource_name: str | None = None,
                   sharing: Mapping[str, str] | None = None, created: str = "2026-01-01T00:00:00Z") -> Obj:
    selector: Obj = {}
    if match_labels:
        selector["matchLabels"] = dict(match_labels)
    if expressions:
        selector["matchExpressions"] = expressions
    spec: Obj = {"selector": selector}
    if resource_name:
        spec["resourceName"] = resource_name
    if sharing:
        spec["sharing"] = dict(sharing)
    return {"apiVersion": "tessera.dev/v1alpha1", "kind": "ResourceClass",
            "metadata": {"name": name, "uid": uid_for("ResourceClass", "", name), "creationTimestamp": created},
            "spec": spec}


def podgroup(name: str, min_member: int, namespace: str = "default",
             annotations: Mapping[str, str] | None = None) -> Obj:
    meta: Obj = {"name": name, "namespace": namespace, "uid": uid_for("PodGroup", namespace, name)}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": meta,
            "spec": {"minMember": min_member}}


def workload_podgroup(name: str, min_count: int | None, namespace: str = "default",
                      topology_key: str = "") -> Obj:
    """Upstream's PodGroup (scheduling.k8s.io/v1alpha2): gang policy with `min_count`, or the
    basic policy when None; `topology_key` a required topology constraint."""
    policy: Obj = {"gang": {"minCount": min_count}} if min_count is not None else {"basic": {}}
    spec: Obj = {"schedulingPolicy": policy}
    if topology_key:
        spec["schedulingConstraints"] = {"topology": [{"key": topology_key}]}
    return {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace, "uid": uid_for("WorkloadPodGroup", namespace, name)},
            "spec": spec}
