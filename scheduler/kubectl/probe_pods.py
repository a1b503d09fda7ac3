"""`kubectl tessera what-if -f FILE`: pods that do not exist, as the apiserver would create them.

Why: "would an 8-GPU job fit now?" needed the job to be created (or a pod parked behind a
schedulingGate, which what-if skipped). The file's pods join the listed cluster as new pending
pods — after every pod already waiting, as the newest in the queue — and are replayed with them;
nothing is written.

A file holds YAML or JSON documents: Pods, `List`s of them (`kubectl get -o yaml` output), Jobs (a
Job becomes the pods its controller would start first: min(parallelism, completions), default 1,
named `<job>-<index>`), and PodGroups (scheduler-plugins' or upstream's) for gangs. A pod gets what
the apiserver would give it: the namespace of -n (a different one in the file is an error, as
`kubectl create -f` says), a uid, a creation time of now, no node, phase Pending, and
`default-scheduler` when it names no scheduler (so a pod meant for Tessera must say
`schedulerName`). A pod keeps no schedulingGates: the question is where it would go.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import yaml

POD_GROUP_KIND = "PodGroup"
DEFAULT_SCHEDULER = "default-scheduler"  # the apiserver's default for spec.schedulerName


class ProbeError(Exception):
    """The file cannot stand for pods to create: one line for the user."""


def read_probes(text: str, source: str, namespace: str, namespace_flag: str | None, now: float) -> list[dict[str, Any]]:
    """The objects the file at `source` (its `text`) would create, completed as the apiserver
    would complete them: pods (at least one) and the PodGroups beside them."""
    try:
        documents = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as err:
        raise ProbeError(f"{source}: not YAML: {' '.join(str(err).split())}") from None
    created = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    objects: list[dict[str, Any]] = []
    for number, document in enumerate(_flattened(documents), start=1):
        objects += _completed(document, f"{source}: object {number}", namespace, namespace_flag, created)
    if not any(obj["kind"] == "Pod" for obj in objects):
        raise ProbeError(f"{source}: no Pod or Job in it: what-if -f places pods")
    names = [(obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"]) for obj in objects]
    twice = sorted({f"{kind} {ns}/{name}" for kind, ns, name in names if names.count((kind, ns, name)) > 1})
    if twice:
        raise ProbeError(f"{source}: named more than once: {', '.join(twice)}")
    return objects


def clashes(probes: Iterable[Mapping[str, Any]], listed: Iterable[Mapping[str, Any]]) -> list[str]:
    """The file's objects that exist in the cluster already (the apiserver would refuse to create them)."""
    existing = {(obj.get("kind"), (obj.get("metadata") or {}).get("namespace"), (obj.get("metadata") or {}).get("name"))
                for obj in listed}
    return [f"{obj['kind']} {obj['metadata']['namespace']}/{obj['metadata']['name']}" for obj in probes
            if (obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"]) in existing]


def probe_keys(probes: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """`namespace/name` of the file's pods."""
    return frozenset(f"{obj['metadata']['namespace']}/{obj['metadata']['name']}" for obj in probes
                     if obj["kind"] == "Pod")


def _flattened(documents: list[Any]) -> Iterable[Any]:
    for document in documents:
        if isinstance(document, dict) and document.get("kind") in ("List", "PodList") \
                and isinstance(document.get("items"), list):
            yield from document["items"]
        else:
            yield document


def _completed(obj: Any, where: str, namespace: str, namespace_flag: str | None,
               created: str) -> list[dict[str, Any]]:
    if not isinstance(obj, dict) or not isinstance(obj.get("metadata", {}), dict):
        raise ProbeError(f"{where}: not a Kubernetes object")
    kind = obj.get("kind")
    meta = obj.get("metadata") or {}
    ns = _namespace(meta, where, namespace, namespace_flag)
    if kind == "Pod":
        return [_pod(obj, _name(meta, where), ns, created, where)]
    if kind == "Job":
        return _job_pods(obj, _name(meta, where), ns, created, where)
    if kind == POD_GROUP_KIND:
        group = copy.deepcopy(obj)
        group["metadata"] = {**meta, "name": _name(meta, where), "namespace": ns, "uid": str(uuid.uuid4()),
                             "creationTimestamp": created}
        return [group]
    raise ProbeError(f"{where} is a {kind or 'object without a kind'}: what-if -f takes Pods, Lists of them, "
                     "Jobs and PodGroups")


def _namespace(meta: Mapping[str, Any], where: str, namespace: str, namespace_flag: str | None) -> str:
    own = meta.get("namespace")
    if own and namespace_flag is not None and own != namespace_flag:
        # kubectl create -f's refusal (k8s.io/cli-runtime resource.Builder)
        raise ProbeError(f"{where}: the namespace from the provided object \"{own}\" does not match the namespace "
                         f"\"{namespace_flag}\". You must pass '--namespace={own}' to perform this operation.")
    return str(own or namespace)


def _name(meta: Mapping[str, Any], where: str) -> str:
    name = meta.get("name")
    if isinstance(name, str) and name:
        return name
    generate = meta.get("generateName")
    if isinstance(generate, str) and generate:
        return f"{generate}what-if"
    raise ProbeError(f"{where}: metadata.name or generateName is required")


def _pod(obj: Mapping[str, Any], name: str, namespace: str, created: str, where: str) -> dict[str, Any]:
    spec = obj.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("containers"), list) or not spec["containers"]:
        raise ProbeError(f"{where}: Pod {namespace}/{name} has no spec.containers")
    if spec.get("nodeName"):
        raise ProbeError(f"{where}: Pod {namespace}/{name} sets spec.nodeName: it would not be scheduled at all")
    pod_spec = {k: v for k, v in copy.deepcopy(spec).items() if k != "schedulingGates"}
    pod_spec.setdefault("schedulerName", DEFAULT_SCHEDULER)
    meta = {**copy.deepcopy(obj.get("metadata") or {}), "name": name, "namespace": namespace,
            "uid": str(uuid.uuid4()), "creationTimestamp": created}
    meta.pop("generateName", None)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec, "status": {"phase": "Pending"}}


def _job_pods(job: Mapping[str, Any], name: str, namespace: str, created: str, where: str) -> list[dict[str, Any]]:
    spec = job.get("spec")
    template = spec.get("template") if isinstance(spec, dict) else None
    if not isinstance(spec, dict) or not isinstance(template, dict):
        raise ProbeError(f"{where}: Job {namespace}/{name} has no spec.template")
    parallelism = _count(spec.get("parallelism"), 1, f"{where}: spec.parallelism")
    completions = spec.get("completions")
    pods = parallelism if completions is None else min(parallelism, _count(completions, 1, f"{where}: spec.completions"))
    raw_meta = template.get("metadata")
    meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
    labels = {**(meta.get("labels") or {}), "batch.kubernetes.io/job-name": name}
    return [_pod({"metadata": {**meta, "labels": labels}, "spec": template.get("spec")}, f"{name}-{index}",
                 namespace, created, where) for index in range(pods)]


def _count(value: Any, default: int, where: str) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ProbeError(f"{where}: {value!r} is not a count")
    return value
