"""docs/migrating.md's examples on a real kube-apiserver with `tessera run`: KAI-Scheduler's
`gpu-memory` annotation (MiB of one GPU) moves to a sharing class with `unit: 1Mi`
(deploy/examples/gpu-memory-class.yaml). The class is Valid on a fleet of 80Gi A100s, and its
two pods (4000Mi and 20000Mi) are bound to A100s (not the V100s) with exactly those amounts of
one GPU's memory — the second on the first one's GPU, as docs/semantics.md (Fragmentation)
promises for config/gpu-cluster.yaml's fragmentation profile (with `unit: 1Mi` the measure's
rounding once sent it to the node's other, empty A100: tests/replay/test_slice_join_fine_units.py).
A fresh plane: the class's selector would match the A100s other tests' nodes publish."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from scheduler.api.quantity import exact, parse_quantity
from scheduler.core import annotations as ann
from scheduler.kube.controlplane import ControlPlaneBinaries, LocalControlPlane
from tests.deploy_manifests import DEPLOY, load_documents
from tests.e2e.live import Kube, TesseraProcess, eventually
from tests.e2e.test_deploy import apply_documents

EXAMPLE = DEPLOY / "examples" / "gpu-memory-class.yaml"
CONFIG = Path(__file__).resolve().parents[2] / "config" / "gpu-cluster.yaml"
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def plane(control_plane_binaries: ControlPlaneBinaries,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalControlPlane]:
    with LocalControlPlane(tmp_path_factory.mktemp("migration-plane"), binaries=control_plane_binaries) as fresh:
        yield fresh


async def test_gpu_memory_in_mib_is_a_class_with_unit_1mi(plane: LocalControlPlane, tmp_path: Path) -> None:
    admin = plane.admin
    # two nodes of two 80Gi A100s (a name the selector lists) and a node of V100s the class leaves out
    plane.add_fake_gpu_nodes(2, 2, "NVIDIA-A100-SXM4-80GB", memory="80Gi", prefix="mig-a100")
    plane.add_fake_gpu_nodes(1, 2, "Tesla-V100-SXM2-32GB", memory="32Gi", prefix="mig-v100")
    docs = load_documents(EXAMPLE)
    assert [d["kind"] for d in docs] == ["ResourceClass", "Pod", "Pod"]
    process = TesseraProcess(plane.kubeconfig, CONFIG, tmp_path, name="migration")
    process.start()
    kube = await Kube.connect(plane.kubeconfig)
    try:
        await process.wait_ready(30)
        apply_documents(admin, docs[:2], "default")  # the class, then one pod at a time

        async def valid() -> bool:
            status = (await kube.call("GET", "/apis/tessera.dev/v1alpha1/resourceclasses/a100-80g-mib")).json()
            return any(c["type"] == "Valid" and c["status"] == "True" for c in status.get("status", {}).get("conditions", []))

        await eventually(valid, 30)

        async def bound() -> dict[str, Any] | None:
            pods = {name: (await kube.call("GET", f"/api/v1/namespaces/default/pods/{name}")).json()
                    for name in ("infer-4000mib", "infer-20000mib")}
            return pods if all(p["spec"].get("nodeName") for p in pods.values()) else None

        async def first_bound() -> bool:
            pod = (await kube.call("GET", "/api/v1/namespaces/default/pods/infer-4000mib")).json()
            return bool(pod["spec"].get("nodeName"))

        await eventually(first_bound, 30)
        apply_documents(admin, docs[2:], "default")
        pods = await eventually(bound, 30)
        grants: dict[str, int | object] = {}
        gpus: dict[str, tuple[str, str]] = {}
        for name, pod in pods.items():
            assert pod["spec"]["nodeName"].startswith("mig-a100"), pod["spec"]["nodeName"]
            devices = orjson.loads(pod["metadata"]["annotations"][ann.DEVICES])
            [grant] = devices["containers"]["main"]["class.tessera.dev/a100-80g-mib"]
            assert grant["dimension"] == "memory"
            grants[name] = exact(parse_quantity(grant["amount"]))
            gpus[name] = (pod["spec"]["nodeName"], grant["device"])
        assert grants == {"infer-4000mib": 4000 * MIB, "infer-20000mib": 20000 * MIB}
        assert gpus["infer-20000mib"] == gpus["infer-4000mib"]  # the second slice joins the first one's A100
    finally:
        await kube.close()
        code = process.terminate()
        for name in ("infer-4000mib", "infer-20000mib"):
            await asyncio.to_thread(admin.request, "DELETE",
                                    f"/api/v1/namespaces/default/pods/{name}?gracePeriodSeconds=0", ok=(200, 404))
    assert code == 0, process.log()


async def test_volcano_vgpu_resources_are_counted_as_plain_extended_resources(
        plane: LocalControlPlane, tmp_path: Path) -> None:
    """docs/not-supported.md: Volcano's vGPU resources are counted like any extended resource a
    node advertises, where one does (Volcano's vGPU device plugin), and Tessera picks no GPU for
    them: the pod is bound to the node that advertises them, with no device in its
    tessera.dev/devices; one asking more vgpu-memory than any node has stays pending."""
    admin = plane.admin
    (node,) = plane.add_fake_gpu_nodes(1, 2, "Tesla-T4", memory="16Gi", prefix="mig-vgpu")
    vgpu = {"volcano.sh/vgpu-number": "20", "volcano.sh/vgpu-memory": "30000", "volcano.sh/vgpu-cores": "200"}
    admin.merge_patch(f"/api/v1/nodes/{node}/status", {"status": {"capacity": vgpu, "allocatable": vgpu}})

    def pod(name: str, memory: int) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                "spec": {"schedulerName": "tessera", "containers": [{"name": "main", "image": "x", "resources": {
                    "limits": {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": str(memory)}}}]}}

    process = TesseraProcess(plane.kubeconfig, CONFIG, tmp_path, name="vgpu")
    process.start()
    kube = await Kube.connect(plane.kubeconfig)
    try:
        await process.wait_ready(30)
        admin.create("/api/v1/namespaces/default/pods", pod("vgpu-fits", 3000))
        admin.create("/api/v1/namespaces/default/pods", pod("vgpu-too-big", 40000))

        async def bound() -> dict[str, Any] | None:
            found = (await kube.call("GET", "/api/v1/namespaces/default/pods/vgpu-fits")).json()
            return found if found["spec"].get("nodeName") else None

        fits = await eventually(bound, 30)
        assert fits["spec"]["nodeName"] == node
        devices = orjson.loads(fits["metadata"].get("annotations", {}).get(ann.DEVICES, '{"containers": {}}'))
        assert not any(devices["containers"].values()), devices

        async def refused() -> str | None:
            found = (await kube.call("GET", "/api/v1/namespaces/default/pods/vgpu-too-big")).json()
            assert not found["spec"].get("nodeName")
            conditions = found.get("status", {}).get("conditions", [])
            return next((c["message"] for c in conditions if c["type"] == "PodScheduled" and c["status"] == "False"), None)

        assert "volcano.sh/vgpu-memory" in await eventually(refused, 30)
    finally:
        await kube.close()
        code = process.terminate()
        for name in ("vgpu-fits", "vgpu-too-big"):
            await asyncio.to_thread(admin.request, "DELETE",
                                    f"/api/v1/namespaces/default/pods/{name}?gracePeriodSeconds=0", ok=(200, 404))
    assert code == 0, process.log()
