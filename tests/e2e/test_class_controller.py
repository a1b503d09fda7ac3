"""The default class controller inside the live scheduler, against the real apiserver."""

from __future__ import annotations

import asyncio
from typing import Any

from scheduler.kube.class_controller import MANAGED_BY, MANAGED_BY_LABEL, DefaultClassController
from scheduler.kube.http import KubeHttp, connect
from scheduler.sim import builders as b
from tests.e2e.live import Kube, eventually

NODES = "/api/v1/nodes"
ERS = "/apis/tessera.dev/v1alpha1/extendedresources"
CLASSES = "/apis/tessera.dev/v1alpha1/resourceclasses"


async def _classes(kubectl: Kube) -> dict[str, dict[str, Any]]:
    return {c["metadata"]["name"]: c for c in (await kubectl.call("GET", CLASSES)).json()["items"]}


async def test_one_class_per_model_and_admin_classes_untouched(tessera: Any, kubectl: Kube, clean_cluster: Any) -> None:
    loop = await tessera("config/binpack.yaml")
    for name in ("cc-1", "cc-2"):
        await kubectl.create(NODES, b.node(name))
    for device in (b.device("cc-1", 0, model="Tesla-V100-SXM2-32GB"), b.device("cc-1", 1, model="Tesla-V100-SXM2-32GB"),
                   b.device("cc-2", 0, model="Tesla-T4", memory="16Gi")):
        await kubectl.create(ERS, device)
    # the admin already has a class under the name the controller would use for the T4s
    admin = await kubectl.create(CLASSES, b.resource_class(
        "tesla-t4", expressions=[{"key": "memory", "operator": "Gt", "values": ["8Gi"]}],
        resource_name="gpu.example.com/t4"))

    api = await connect(str(clean_cluster.kubeconfig))
    state = loop.core.state
    controller = DefaultClassController(KubeHttp(api), lambda: list(state.devices.values()),
                                        lambda: list(state.classes.classes.values()), ready=lambda: loop.informers.synced,
                                        interval=0.3)
    task = asyncio.create_task(controller.run())
    try:
        async def v100_class() -> dict[str, Any] | None:
            return (await _classes(kubectl)).get("tesla-v100-sxm2-32gb")

        created = await eventually(v100_class)
        assert created["metadata"]["labels"] == {MANAGED_BY_LABEL: MANAGED_BY}
        assert created["spec"]["selector"] == {"matchLabels": {"model": "Tesla-V100-SXM2-32GB"}}
        # the scheduler sees it as a valid class matching both V100s
        status = await eventually(lambda: _status(kubectl, "tesla-v100-sxm2-32gb"))
        assert status["matchingDevices"] == 2

        # a new model appears -> its class follows; the admin's class keeps its spec and labels
        await kubectl.create(ERS, b.device("cc-2", 1, model="NVIDIA-A100-SXM4-80GB", memory="80Gi"))
        await eventually(lambda: _has(kubectl, "nvidia-a100-sxm4-80gb"))
        await asyncio.sleep(1.0)  # several more reconciles
        classes = await _classes(kubectl)
        assert set(classes) == {"tesla-t4", "tesla-v100-sxm2-32gb", "nvidia-a100-sxm4-80gb"}
        t4 = classes["tesla-t4"]
        assert t4["spec"] == admin["spec"] and t4["metadata"].get("labels") == admin["metadata"].get("labels")
        assert t4["metadata"]["generation"] == admin["metadata"]["generation"]
        assert sorted(controller.created) == ["nvidia-a100-sxm4-80gb", "tesla-v100-sxm2-32gb"]  # idempotent

        # a managed class an admin edits is left alone too (create-only)
        await kubectl.call("PATCH", f"{CLASSES}/tesla-v100-sxm2-32gb",
                           {"spec": {"selector": {"matchLabels": {"model": "Tesla-V100-SXM2-32GB", "vendor": "nvidia"}}}},
                           content_type="application/merge-patch+json")
        await asyncio.sleep(1.0)
        edited = (await _classes(kubectl))["tesla-v100-sxm2-32gb"]
        assert edited["spec"]["selector"]["matchLabels"]["vendor"] == "nvidia"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await api.close()


async def _status(kubectl: Kube, name: str) -> dict[str, Any] | None:
    status = (await _classes(kubectl)).get(name, {}).get("status")
    return status if status and "matchingDevices" in status else None


async def _has(kubectl: Kube, name: str) -> bool:
    return name in await _classes(kubectl)
