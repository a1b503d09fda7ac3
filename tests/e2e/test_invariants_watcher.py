"""The invariant checker's history against a real apiserver (no scheduler: the pods are written
bound, as a Binding leaves them): resourceVersions of pods and devices, from two watch streams,
order what happened (tests/unit/test_invariants_history.py has the synthetic orders)."""

from __future__ import annotations

import secrets
from typing import Any

import orjson
import pytest

from scheduler.core import annotations as ann
from scheduler.kube.controlplane import LocalControlPlane
from scheduler.sim import builders as b
from tessera_testing.invariants import DEVICE_CAPACITY, ApiReader, ClusterWatcher, check, read_view
from tests.e2e.live import Kube, eventually

pytestmark = pytest.mark.timeout(120)

ERS = "/apis/tessera.dev/v1alpha1/extendedresources"
SLICE = "class.tessera.dev/v100-mem"
WHOLE = "class.tessera.dev/v100"


def _doc(device: dict[str, Any], amount: str | None) -> str:
    grant = {"id": device["spec"]["deviceID"], "device": device["metadata"]["name"],
             **({"amount": amount, "dimension": "memory"} if amount else {})}
    return orjson.dumps({"version": 1, "containers": {"main": {SLICE if amount else WHOLE: [grant]}}}).decode()


def _holder(name: str, node: str, device: dict[str, Any], amount: str | None) -> dict[str, Any]:
    record = _doc(device, amount)
    return b.pod(name, limits={SLICE if amount else WHOLE: 1}, node_name=node,
                 annotations={ann.DEVICES: record, ann.HELD_DEVICES: record})


async def _patch(kube: Kube, device: dict[str, Any], spec: dict[str, Any]) -> None:
    await kube.call("PATCH", f"{ERS}/{device['metadata']['name']}", {"spec": spec},
                    content_type="application/merge-patch+json")


async def test_watcher_judges_holds_in_resource_version_order(control_plane: LocalControlPlane, kubectl: Kube,
                                                              namespace: str) -> None:
    node, other = f"n-{secrets.token_hex(3)}", f"m-{secrets.token_hex(3)}"
    sliced, moved = b.device(node, 0, memory="40Gi"), b.device(node, 1)
    names = {sliced["metadata"]["name"], moved["metadata"]["name"]}
    for device in (sliced, moved):
        await kubectl.create(ERS, device)
    api = ApiReader(control_plane.server, control_plane.ca_file, control_plane.admin_token)
    watcher = ClusterWatcher(api, namespaces=[namespace], grace=0.0)
    await watcher.start()
    try:
        # capacity lowered under held slices (16Gi + 16Gi of 40Gi, then 16Gi): allowed
        for pod in (_holder("p", node, sliced, "16Gi"), _holder("q", node, sliced, "16Gi")):
            await kubectl.create_pod(namespace, pod)
        await _patch(kubectl, sliced, {"capacity": {"memory": "16Gi"}})
        # a device moved while held stays its holder's
        await kubectl.create_pod(namespace, _holder("early", node, moved, None))
        await _patch(kubectl, moved, {"nodeName": other})

        async def seen() -> bool:
            caps = [(d.get("spec") or {}).get("capacity", {}).get("memory") for d in watcher.view.devices.values()
                    if d["metadata"]["name"] == sliced["metadata"]["name"]]
            spots = [(d.get("spec") or {}).get("nodeName") for d in watcher.view.devices.values()
                     if d["metadata"]["name"] == moved["metadata"]["name"]]
            return caps == ["16Gi"] and spots == [other] and len(watcher.view.pods) == 3
        await eventually(seen)

        async def final() -> list[str]:
            watcher._run_checks()
            view = await read_view(api, [namespace])
            found = {str(v) for v in check(view, watcher=watcher, grace=0.0) if v.invariant == DEVICE_CAPACITY
                     and v.subject in names}
            return sorted(found | {str(v) for v in watcher.violations() if v.subject in names})
        assert await final() == []

        # after the cut, a new slice holder is one too many; after the move, a new holder on the
        # old node holds a GPU of another node
        await kubectl.create_pod(namespace, _holder("r", node, sliced, "8Gi"))
        await kubectl.create_pod(namespace, _holder("late", node, moved, None))
        found = await eventually(lambda: _both(final))
        assert any(f"{namespace}/r" in f and "> capacity 16Gi" in f for f in found), found
        assert any(f.endswith(f"other nodes hold it: {namespace}/late") for f in found), found
    finally:
        await watcher.stop()
        await api.close()
        for name in names:
            await kubectl.call("DELETE", f"{ERS}/{name}", ok=(200, 404))


async def _both(final: Any) -> list[str] | None:
    found: list[str] = await final()
    return found if len(found) >= 2 else None
