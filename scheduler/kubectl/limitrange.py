"""`kubectl tessera what-if -f`: the requests and limits the apiserver's LimitRanger admission gives the file's pods.

Why: a namespace's LimitRange with a container default of `nvidia.com/gpu: "1"` makes every
container that states none ask one GPU; a re-trial's Job of 3 such pods under a quota of 2 GPUs
was "3 would be placed", no GPU taken, while really each pod got 1 GPU and the apiserver refused
the third for quota. LimitRanger runs before ResourceQuota (and before the scheduler sees the pod:
k8s.io/kubernetes pkg/kubeapiserver/options/plugins.go AllOrderedPlugins), so what-if defaults the
pods first, then admits them against quotas (`quota.admit`) and places them.

`default_pods` replays the plugin's mutation (plugin/pkg/admission/limitranger/admission.go
PodMutateLimitFunc): for each LimitRange of the pod's namespace, each container and init container
without a limit of R gets the LimitRange's `default[R]`, without a request of R its
`defaultRequest[R]` (the `type: Container` items', a later item's value over an earlier one's).
A LimitRange as stored went through SetDefaults_LimitRangeItem (a Container item's `max` is its
`default` where it names none, its `default` then its `min` its `defaultRequest`); a listed one is
read through the same rules, so a LimitRange that somehow lacks them defaults alike. A container's
request of R it does not state but limits is its limit (SetDefaults_Pod, at decoding, before any
admission), so the LimitRange's defaultRequest does not replace it. Pod-level `spec.resources` are
left as written, as upstream leaves them. Several LimitRanges apply in turn, by name (upstream's
order is its informer's): the first to give R sets it. Not judged: the refusals of the plugin's
validation (min, max and maxLimitRequestRatio of Container and Pod items) and of
PersistentVolumeClaim items (a file's claims are not created).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from scheduler.kube.informers import ResourceKind

LIMIT_RANGES = ResourceKind("LimitRange", "v1", "/api/v1/limitranges", builtin=True, namespaced=True)
CONTAINER = "Container"

ResourceList = dict[str, Any]  # a ResourceList's quantities as written (strings, or numbers in a file)


def container_defaults(limit_range: Mapping[str, Any]) -> tuple[ResourceList, ResourceList]:
    """The limits and requests a LimitRange gives a container that lacks them
    (defaultContainerResourceRequirements, over SetDefaults_LimitRangeItem's defaulting)."""
    limits: ResourceList = {}
    requests: ResourceList = {}
    for item in (limit_range.get("spec") or {}).get("limits") or ():
        if not isinstance(item, dict) or item.get("type") != CONTAINER:
            continue
        default = {**(item.get("max") or {}), **(item.get("default") or {})}
        default_request = {**(item.get("min") or {}), **default, **(item.get("defaultRequest") or {})}
        limits.update(default)
        requests.update(default_request)
    return limits, requests


def default_pods(pods: Sequence[dict[str, Any]], limit_ranges: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The file's `pods` as the apiserver would store them after LimitRanger's mutation by their
    namespaces' `limit_ranges` (as listed): copies, the pods without a LimitRange as they are."""
    by_namespace: dict[str, list[tuple[ResourceList, ResourceList]]] = {}
    for limit_range in sorted(limit_ranges, key=lambda obj: str((obj.get("metadata") or {}).get("name"))):
        namespace = str((limit_range.get("metadata") or {}).get("namespace"))
        by_namespace.setdefault(namespace, []).append(container_defaults(limit_range))
    out = []
    for pod in pods:
        defaults = by_namespace.get(str((pod.get("metadata") or {}).get("namespace")))
        if not defaults or pod.get("kind") != "Pod":
            out.append(pod)
            continue
        pod = copy.deepcopy(pod)
        spec = pod.setdefault("spec", {})
        for field in ("containers", "initContainers"):
            for container in spec.get(field) or ():
                if isinstance(container, dict):
                    _merge(container, defaults)
        out.append(pod)
    return out


def _merge(container: dict[str, Any], defaults: Sequence[tuple[ResourceList, ResourceList]]) -> None:
    """mergeContainerResources of each LimitRange in turn, on a container whose unstated requests
    are its limits (SetDefaults_Pod)."""
    resources = container.get("resources")
    resources = container["resources"] = dict(resources) if isinstance(resources, dict) else {}
    limits = dict(resources.get("limits") or {})
    requests = {**limits, **(resources.get("requests") or {})}
    for default_limits, default_requests in defaults:
        limits = {**default_limits, **limits}
        requests = {**default_requests, **requests}
    if limits:
        resources["limits"] = limits
    if requests:
        resources["requests"] = requests
