"""A ResourceClass's `status.matchingDevices` against the real apiserver: it counts the class's
existing matching devices — not a deleted one a pod still holds (the core keeps it as a ghost,
counted against its node until released) — and the status follows every change of what it
reports, also one that comes from a Node or a Pod event rather than a device or class event."""

from __future__ import annotations

import asyncio
from typing import Any

from scheduler.sim import builders as b
from tests.e2e.live import Kube, bound_nodes, eventually

NODES = "/api/v1/nodes"
ERS = "/apis/tessera.dev/v1alpha1/extendedresources"
CLASSES = "/apis/tessera.dev/v1alpha1/resourceclasses"
MERGE = "application/merge-patch+json"


async def _create_node(kubectl: Kube, node: dict[str, Any]) -> None:
    await kubectl.create(NODES, node)
    await kubectl.call("PATCH", f"{NODES}/{node['metadata']['name']}/status", {"status": node["status"]},
                       content_type=MERGE)


async def _status(kubectl: Kube, name: str) -> dict[str, Any]:
    return dict((await kubectl.call("GET", f"{CLASSES}/{name}")).json().get("status") or {})


async def _matching(kubectl: Kube, name: str, count: int, generation: int = 0) -> dict[str, Any] | None:
    status = await _status(kubectl, name)
    if status.get("matchingDevices") == count and status.get("observedGeneration", 0) >= generation:
        return status
    return None


async def test_a_deleted_device_a_pod_still_holds_is_not_counted_after_a_class_edit(
        tessera: Any, kubectl: Kube, namespace: str, clean_cluster: Any) -> None:
    loop = await tessera("config/binpack.yaml")
    await _create_node(kubectl, b.node("cs-1"))
    devices = [b.device("cs-1", 0, model="CS"), b.device("cs-1", 1, model="CS")]
    for device in devices:
        await kubectl.create(ERS, device)
    await kubectl.create(CLASSES, b.resource_class("cs", match_labels={"model": "CS"}))
    await eventually(lambda: _matching(kubectl, "cs", 2))
    await kubectl.create_pod(namespace, b.pod("holder", limits={"class.tessera.dev/cs": 1}))

    async def bound() -> bool:
        return bool((await bound_nodes(kubectl, namespace)).get("holder"))

    await eventually(bound)
    held = next(name for name, use in loop.core.state.ledger.use.items() if use.busy)
    await kubectl.call("DELETE", f"{ERS}/{held}")
    await eventually(lambda: _matching(kubectl, "cs", 1))
    assert loop.core.state.ledger.is_ghost(held)  # the holder still has it
    # an edit of the class's spec matches it again against every device the core keeps
    edited = await kubectl.call("PATCH", f"{CLASSES}/cs", {"spec": {"selector": {"matchExpressions": [
        {"key": "vendor", "operator": "Exists"}]}}}, content_type=MERGE)
    generation = edited.json()["metadata"]["generation"]
    status = await eventually(lambda: _status_at(kubectl, "cs", generation))
    assert status["matchingDevices"] == 1, status


async def _status_at(kubectl: Kube, name: str, generation: int) -> dict[str, Any] | None:
    status = await _status(kubectl, name)
    return status if status.get("observedGeneration") == generation else None


async def test_the_status_follows_a_node_leaving(tessera: Any, kubectl: Kube, clean_cluster: Any) -> None:
    """A class whose resourceName a node advertises through a device plugin is invalid while the
    node is there; the node leaving makes it valid, with no device or class event."""
    await tessera("config/binpack.yaml")
    await _create_node(kubectl, b.node("cs-plugin", extra={"example.com/fpga": "2"}))
    await _create_node(kubectl, b.node("cs-2"))
    await kubectl.create(ERS, b.device("cs-2", 0, model="FP"))
    await kubectl.create(CLASSES, b.resource_class("fp", match_labels={"model": "FP"}, resource_name="example.com/fpga"))

    async def valid(want: str) -> dict[str, Any] | None:
        status = await _status(kubectl, "fp")
        conditions = status.get("conditions") or [{}]
        return status if conditions[0].get("status") == want else None

    await eventually(lambda: valid("False"))
    await kubectl.call("DELETE", f"{NODES}/cs-plugin")
    status = await eventually(lambda: valid("True"), timeout=10.0)
    assert status["matchingDevices"] == 1
    await asyncio.sleep(0)


async def test_a_class_matching_no_device_reads_valid_with_reason_no_matching_devices(
        tessera: Any, kubectl: Kube, clean_cluster: Any) -> None:
    """`kubectl get rcl` of a class for a model the cluster lacks: DEVICES 0, VALID True (its spec
    is valid), REASON NoMatchingDevices; the first matching device makes it Valid, and losing it
    NoMatchingDevices again."""
    from tests.e2e.test_observability import _printed

    await tessera("config/binpack.yaml")
    await _create_node(kubectl, b.node("nm-1"))
    await kubectl.create(ERS, b.device("nm-1", 0, model="V100"))
    await kubectl.create(CLASSES, b.resource_class("nm", match_labels={"model": "A100"}))

    async def reason(want: str) -> dict[str, Any] | None:
        status = await _status(kubectl, "nm")
        conditions = status.get("conditions") or [{}]
        return status if conditions[0].get("reason") == want else None

    status = await eventually(lambda: reason("NoMatchingDevices"))
    assert status["conditions"][0]["status"] == "True" and status["matchingDevices"] == 0
    assert status["conditions"][0]["message"] == (
        "selector and resourceName are valid (no ExtendedResource matches the selector now)")
    row = (await _printed(clean_cluster, CLASSES))["nm"]
    assert (row["Devices"], row["Valid"], row["Reason"]) == ("0", "True", "NoMatchingDevices"), row
    a100 = b.device("nm-1", 1, model="A100")
    await kubectl.create(ERS, a100)
    status = await eventually(lambda: reason("Valid"))
    assert status["matchingDevices"] == 1
    await kubectl.call("DELETE", f"{ERS}/{a100['metadata']['name']}")
    await eventually(lambda: reason("NoMatchingDevices"))
