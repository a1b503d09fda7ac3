"""One small cluster with every GPU state the map and `kubectl tessera` show, on the real apiserver.

Three nodes of four V100s (ExtendedResources with an `index` attribute, so GPU n is device n):

- map-n0: `train` holds GPUs 0 and 1 whole (class v100: 2); `infer-a` (8Gi) and `infer-b` (12Gi)
  share one GPU by memory slices (class v100-shared);
- map-n1: `plain` asks `nvidia.com/gpu: 1` (a counted GPU); `ghostly` holds a device whose
  ExtendedResource is then deleted (a ghost); GPU 2 is cordoned, GPU 3 unhealthy;
- map-n2: its devices carry a node agent's heartbeat, so the allocation gate holds there:
  `alloc-1` is bound and stays `Allocating` (no agent marks it), `alloc-2` is assigned but its
  Binding is held (gated);
- pending: `too-big` (5 GPUs: Insufficient) and a gang `wave` of 2 members with min-available 3.

Every pod is pinned with a nodeSelector, so placements do not depend on scores.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from scheduler.sim import builders as b
from tests.e2e.live import Kube, eventually
from tests.e2e.test_live_scheduling import CLASSES, ERS, _create_nodes

NODES = ("map-n0", "map-n1", "map-n2")
WHOLE = "class.tessera.dev/v100"
SHARED = "class.tessera.dev/v100-shared"
HOSTNAME = "kubernetes.io/hostname"


@dataclass(frozen=True)
class Scenario:
    namespace: str
    ghost: str  # the deleted device still held by `ghostly`

    def key(self, pod: str) -> str:
        return f"{self.namespace}/{pod}"


def _pinned(name: str, node: str, limits: dict[str, str | int], **extra: Any) -> dict[str, Any]:
    return b.pod(name, limits=limits, spec_extra={"nodeSelector": {HOSTNAME: node}}, **extra)


async def _status(kube: Kube, device: str, status: dict[str, Any]) -> None:
    await kube.call("PATCH", f"{ERS}/{device}/status", {"status": status}, content_type="application/merge-patch+json")


async def create_cluster(kube: Kube) -> None:
    """Nodes, devices (one cordoned, one unhealthy, map-n2's heartbeating) and the two classes."""
    await _create_nodes(kube, None, [b.node(name, gpus=4) for name in NODES])
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for node in NODES:
        for index in range(4):
            device = b.device(node, index, unschedulable=(node, index) == ("map-n1", 2))
            await kube.create(ERS, device)
            name = device["metadata"]["name"]
            if (node, index) == ("map-n1", 3):
                await _status(kube, name, {"conditions": [{"type": "Healthy", "status": "False", "reason": "XidError"}]})
            if node == "map-n2":
                await _status(kube, name, {"lastHeartbeatTime": now})
    await kube.create(CLASSES, b.resource_class("v100", match_labels={"model": "V100"}))
    await kube.create(CLASSES, b.resource_class("v100-shared", match_labels={"model": "V100"},
                                                sharing={"dimension": "memory", "unit": "1Gi"}))


async def _bound(kube: Kube, namespace: str, names: tuple[str, ...]) -> dict[str, Any] | None:
    pods = await kube.pods(namespace)
    return pods if all(pods.get(name, {}).get("spec", {}).get("nodeName") for name in names) else None


async def _waiting(kube: Kube, namespace: str, name: str, reason: str) -> bool:
    pod = (await kube.pods(namespace)).get(name, {})
    return any(c.get("type") == "PodScheduled" and c.get("reason") == reason
               for c in pod.get("status", {}).get("conditions") or ())


async def create_workload(kube: Kube, namespace: str) -> Scenario:
    """The pods, in an order that makes every state appear; returns once Tessera has placed them
    all and written its reasons (a Tessera with config/binpack.yaml must be running)."""
    for pod in (_pinned("train", "map-n0", {WHOLE: 2}), _pinned("infer-a", "map-n0", {SHARED: 8}),
                _pinned("infer-b", "map-n0", {SHARED: 12}), _pinned("plain", "map-n1", {"nvidia.com/gpu": 1}),
                _pinned("ghostly", "map-n1", {WHOLE: 1}), _pinned("alloc-1", "map-n2", {WHOLE: 1})):
        await kube.create_pod(namespace, pod)
    pods = await eventually(lambda: _bound(kube, namespace, ("train", "infer-a", "infer-b", "plain", "ghostly",
                                                             "alloc-1")))
    annotation = pods["ghostly"]["metadata"]["annotations"]["tessera.dev/devices"]
    ghost = annotation.split('"device":"', 1)[1].split('"', 1)[0]
    await kube.call("DELETE", f"{ERS}/{ghost}")
    await kube.create_pod(namespace, _pinned("alloc-2", "map-n2", {WHOLE: 1}))
    await kube.create_pod(namespace, b.pod("too-big", limits={"nvidia.com/gpu": 5}))
    for i in range(2):
        await kube.create_pod(namespace, b.pod(f"wave-{i}", limits={WHOLE: 1}, labels=b.gang_labels("wave", 3)))
    await eventually(lambda: _waiting(kube, namespace, "alloc-2", "WaitingForAllocation"))
    await eventually(lambda: _waiting(kube, namespace, "too-big", "Unschedulable"))

    async def gang_told() -> bool:  # the cycle reports on the member it popped
        return any([await _waiting(kube, namespace, f"wave-{i}", "Unschedulable") for i in range(2)])

    await eventually(gang_told)
    return Scenario(namespace, ghost)
