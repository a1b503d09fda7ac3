"""``tessera dev-cluster --with-controller-manager`` as a user runs it: the workload controllers a
user expects are there, so a Deployment gets a ReplicaSet and pods, a Job, StatefulSet and
DaemonSet get their pods and a PodDisruptionBudget its status (issue 10, part 3.1: a Job showed
0/4 with no pods). No kubelet runs, so the pods stay Pending; that they exist is the point.

One node of each model the shipped examples ask for (`--gpu-model V100,T4`, as the README's
command), each carrying its model's label and memory.

The plane is the command's own (a child process, as the README's quick start starts it), not the
session fixture: the shared test plane runs a smaller controller set on purpose (see
``TEST_CONTROLLERS`` in scheduler/kube/controlplane/components.py).
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from scheduler.kube.controlplane import ControlPlaneBinaries
from tests.e2e.live import REPO, Kube, eventually

NS = "default"
LABELS = {"app": "devcluster-e2e"}


def _template(name: str) -> dict[str, Any]:
    return {"metadata": {"labels": {**LABELS, "workload": name}},
            "spec": {"schedulerName": "tessera",
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}


def _selector(name: str) -> dict[str, Any]:
    return {"matchLabels": {**LABELS, "workload": name}}


@pytest_asyncio.fixture
async def dev_cluster(control_plane_binaries: ControlPlaneBinaries, tmp_path: Path) -> AsyncIterator[Kube]:
    """`tessera dev-cluster --nodes 2 --gpu-model V100,T4 --with-controller-manager` (the README's
    models, fewer nodes and GPUs) until the test ends (SIGINT)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "scheduler", "dev-cluster", "--dir", str(tmp_path / "dev"), "--nodes", "2",
        "--gpu-model", "V100,T4", "--gpus-per-node", "2", "--with-controller-manager", cwd=REPO,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    try:
        async with asyncio.timeout(120):
            line = (await proc.stdout.readline()).decode()
        if not line.startswith("ready: "):
            raise AssertionError(f"dev-cluster did not get ready: {line}{(await proc.stderr.read()).decode()}")
        kube = await Kube.connect(Path(line.removeprefix("ready: ").strip()))
        try:
            yield kube
        finally:
            await kube.close()
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGINT)
        async with asyncio.timeout(60):
            _, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()


async def _owned_pods(kube: Kube, kind: str, owner: str) -> list[str]:
    pods = (await kube.call("GET", f"/api/v1/namespaces/{NS}/pods")).json()["items"]
    return sorted(p["metadata"]["name"] for p in pods
                  if any(ref["kind"] == kind and ref["name"] == owner for ref in p["metadata"].get("ownerReferences", ())))


async def test_workload_controllers_create_pods(dev_cluster: Kube) -> None:
    kube = dev_cluster
    apps, batch = f"/apis/apps/v1/namespaces/{NS}", f"/apis/batch/v1/namespaces/{NS}"
    await kube.call("POST", f"{apps}/deployments", {
        "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": _selector("web"), "template": _template("web")}})
    await kube.call("POST", f"{batch}/jobs", {
        "metadata": {"name": "train"},
        "spec": {"parallelism": 3, "completions": 3, "template": {
            **_template("train"), "spec": {**_template("train")["spec"], "restartPolicy": "Never"}}}})
    await kube.call("POST", f"{apps}/statefulsets", {
        "metadata": {"name": "db"},
        "spec": {"replicas": 1, "serviceName": "db", "selector": _selector("db"), "template": _template("db")}})
    await kube.call("POST", f"{apps}/daemonsets", {
        "metadata": {"name": "agent"},
        "spec": {"selector": _selector("agent"), "template": _template("agent")}})
    await kube.call("POST", f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets", {
        "metadata": {"name": "web"}, "spec": {"minAvailable": 1, "selector": _selector("web")}})

    async def replica_set() -> str | None:
        items = (await kube.call("GET", f"{apps}/replicasets")).json()["items"]
        owned = [rs["metadata"]["name"] for rs in items
                 if any(ref["kind"] == "Deployment" and ref["name"] == "web"
                        for ref in rs["metadata"].get("ownerReferences", ()))]
        return owned[0] if owned else None

    rs = await eventually(replica_set, timeout=60)
    assert len(await eventually(lambda: _counted(kube, "ReplicaSet", rs, 2), timeout=60)) == 2
    assert len(await eventually(lambda: _counted(kube, "Job", "train", 3), timeout=60)) == 3
    assert await eventually(lambda: _counted(kube, "StatefulSet", "db", 1), timeout=60) == ["db-0"]
    assert len(await eventually(lambda: _counted(kube, "DaemonSet", "agent", 2), timeout=60)) == 2  # one a node

    async def job_active() -> int:
        return int((await kube.call("GET", f"{batch}/jobs/train")).json().get("status", {}).get("active", 0))

    assert await eventually(job_active, timeout=60) == 3

    async def pdb_expected() -> int:
        status = (await kube.call("GET", f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/web")).json()["status"]
        return int(status.get("expectedPods", 0))

    assert await eventually(pdb_expected, timeout=60) == 2


async def test_one_cluster_has_every_model_the_examples_need(dev_cluster: Kube) -> None:
    """A new user's trial: `pod.yaml` needs V100s and `shared-pod.yaml` 16Gi T4s, and dev-cluster
    made one model, so the examples list meant a restart half-way. `--gpu-model V100,T4` gives the
    nodes the models in turn, each node its model's label and its GPUs their model's memory."""
    nodes = (await dev_cluster.call("GET", "/api/v1/nodes")).json()["items"]
    assert {n["metadata"]["name"]: (n["metadata"]["labels"]["nvidia.com/gpu.product"],
                                    n["status"]["allocatable"]["nvidia.com/gpu"]) for n in nodes} == {
        "v100-node-000": ("V100", "2"), "t4-node-000": ("T4", "2")}
    devices = (await dev_cluster.call("GET", "/apis/tessera.dev/v1alpha1/extendedresources")).json()["items"]
    assert sorted((d["spec"]["nodeName"], d["spec"]["attributes"]["model"], d["spec"]["capacity"]["memory"])
                  for d in devices) == [("t4-node-000", "T4", "16Gi")] * 2 + [("v100-node-000", "V100", "32Gi")] * 2


async def _counted(kube: Kube, kind: str, owner: str, count: int) -> list[str] | None:
    pods = await _owned_pods(kube, kind, owner)
    return pods if len(pods) == count else None


async def test_an_upstream_podgroup_can_be_deleted(dev_cluster: Kube) -> None:
    """A new user's `kubectl delete podgroups.scheduling.k8s.io train` hung for good: the
    apiserver's PodGroupProtection finalizer was never taken off (tests/e2e/test_podgroup_deletion.py)."""
    groups = f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{NS}/podgroups"
    await dev_cluster.call("POST", groups, {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
                                            "metadata": {"name": "train"},
                                            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}})
    await dev_cluster.call("DELETE", f"{groups}/train")

    async def gone() -> bool:
        return (await dev_cluster.call("GET", f"{groups}/train", ok=(200, 404))).status == 404

    assert await eventually(gone, timeout=30)
