"""A node that joins before its node agent publishes its GPUs wakes the pod its selector asks for
(real apiserver; the unit proof is test_requeue_hints' node-hint section).

The user trial: a pod asking a ResourceClass, with a nodeSelector for a pool no node had yet, was
rejected by NodeAffinity alone. The pool's node then registered, and its node agent created the
node's ExtendedResources a moment later (GPUs arrive as objects of their own, after the Node).
NodeAffinity's hint ran every filter on the new node, which had no GPU yet, so the NodeAdd did not
wake the pod; the ExtendedResources that followed are not an event NodeAffinity registers. The pod
stayed parked, its status still "didn't match Pod's node affinity/selector", until the 5-minute
flush of the unschedulable queue.
"""

from __future__ import annotations

from typing import Any

from scheduler.sim import builders as b
from tests.e2e.live import Kube, bound_nodes, eventually
from tests.e2e.test_live_scheduling import CLASSES, ERS, _create_nodes

SELECTOR = "didn't match Pod's node affinity/selector"


async def _pod_scheduled(kubectl: Kube, namespace: str, name: str) -> dict[str, Any]:
    pod = (await kubectl.pods(namespace))[name]
    return next((c for c in pod["status"].get("conditions") or () if c["type"] == "PodScheduled"), {})


async def test_a_pod_waiting_for_a_pool_lands_once_the_node_joins_and_its_gpus_follow(
        tessera: Any, kubectl: Kube, namespace: str) -> None:
    await tessera("config/binpack.yaml")
    await _create_nodes(kubectl, None, [b.node(f"other-{i}", gpus=1, labels={"pool": "other"}) for i in range(2)])
    for i in range(2):
        await kubectl.create(ERS, b.device(f"other-{i}", 0))
    await kubectl.create(CLASSES, b.resource_class("readd-v100", match_labels={"model": "V100"}))
    resource = "class.tessera.dev/readd-v100"
    await kubectl.create_pod(namespace, b.pod("p", limits={resource: 1}, spec_extra={"nodeSelector": {"pool": "train"}}))

    async def rejected_by_selector_alone() -> bool:
        cond = await _pod_scheduled(kubectl, namespace, "p")
        return cond.get("status") == "False" and cond.get("reason") == "Unschedulable" and \
            cond.get("message", "").startswith(f"0/2 nodes are available: 2 node(s) {SELECTOR}.")

    await eventually(rejected_by_selector_alone, timeout=15)

    # the pool's node registers; its node agent has not published the GPU yet
    await _create_nodes(kubectl, None, [b.node("train-0", gpus=1, labels={"pool": "train"})])

    async def rejected_for_the_missing_gpu() -> dict[str, Any] | None:
        cond = await _pod_scheduled(kubectl, namespace, "p")
        message = f"0/3 nodes are available: 1 Insufficient {resource}, 2 node(s) {SELECTOR}."
        return cond if cond.get("message", "").startswith(message) else None

    try:
        cond = await eventually(rejected_for_the_missing_gpu, timeout=10)
    except AssertionError:  # before the fix: parked for 5 minutes, the status unchanged
        stale = (await _pod_scheduled(kubectl, namespace, "p")).get("message")
        raise AssertionError(f"train-0 joined but p's status still says {stale!r}") from None
    assert cond["status"] == "False" and cond["reason"] == "Unschedulable", cond

    await kubectl.create(ERS, b.device("train-0", 0))

    async def placed() -> str:
        return (await bound_nodes(kubectl, namespace))["p"]

    assert await eventually(placed, timeout=20) == "train-0"
