"""VolumeBinding for WaitForFirstConsumer claims on a real apiserver, with kube-controller-manager's
PV controller (persistentvolume-binder) completing what Tessera starts, as in a cluster: a local
volume's claimRef written before the Binding makes the controller bind the claim, and the Binding
waits for that (upstream's checkBindings); two pods needing one local volume each land on the two
nodes that have one; a provisioner class gets the pod's node as the claim's selected-node, within
its allowedTopologies, and with no provisioner running the wait times out (bindTimeoutSeconds)
and the pod is decided again. The rules are in tests/replay/test_volume_binding.py, the writes in
tests/unit/test_volume_writes.py, the wait in tests/unit/test_volume_bind_wait.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.kube.controlplane import ControlPlaneBinaries, LocalControlPlane
from scheduler.kube.controlplane.components import TEST_CONTROLLERS
from scheduler.sim import builders as b
from tests.e2e.live import REPO, Kube, eventually

NODES = "/api/v1/nodes"
VOLUMES = "/api/v1/persistentvolumes"
CLASSES = "/apis/storage.k8s.io/v1/storageclasses"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
SELECTED_NODE = "volume.kubernetes.io/selected-node"


@pytest.fixture(scope="module")
def control_plane(control_plane_binaries: ControlPlaneBinaries,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalControlPlane]:
    """The shared plane's controllers and the PV controller, which binds a claim to the volume
    whose claimRef names it (the shared plane runs none: other tests' claims stay as written)."""
    if control_plane_binaries.kube_controller_manager is None:
        pytest.fail("this test needs kube-controller-manager (the PV controller)")
    with LocalControlPlane(tmp_path_factory.mktemp("volume-binding-wffc"), binaries=control_plane_binaries,
                           with_controller_manager=True,
                           controllers=(*TEST_CONTROLLERS, "persistentvolume-binder-controller")) as plane:
        yield plane


async def _nodes(kubectl: Kube, *names: str) -> None:
    for i, name in enumerate(names):
        node = b.node(name, labels={HOSTNAME: name, ZONE: f"zone-{i}"})
        await kubectl.create(NODES, node)
        await kubectl.call("PATCH", f"{NODES}/{name}/status", {"status": node["status"]},
                           content_type="application/merge-patch+json")


async def _class(kubectl: Kube, name: str, provisioner: str, **extra: Any) -> None:
    await kubectl.create(CLASSES, {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                                   "metadata": {"name": name}, "provisioner": provisioner,
                                   "volumeBindingMode": "WaitForFirstConsumer", **extra})


async def _local_volume(kubectl: Kube, name: str, cls: str, node: str) -> None:
    await kubectl.create(VOLUMES, {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": cls,
                 "local": {"path": "/mnt/nvme0"},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [
                     {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}]}}}})


async def _claim_and_pod(kubectl: Kube, namespace: str, name: str, cls: str) -> None:
    await kubectl.create(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": namespace},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": cls,
                 "resources": {"requests": {"storage": "1Gi"}}}})
    pod = b.pod(name, requests={"cpu": "100m"},
                spec_extra={"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": name}}]})
    del pod["metadata"]["uid"], pod["status"]
    await kubectl.create_pod(namespace, pod)


async def _claim(kubectl: Kube, namespace: str, name: str) -> dict[str, Any]:
    return (await kubectl.call("GET", f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}")).json()  # type: ignore[no-any-return]


async def _bound(kubectl: Kube, namespace: str, pod: str) -> str | None:
    return (await kubectl.pods(namespace))[pod]["spec"].get("nodeName") or None


async def _cleanup(kubectl: Kube, volumes: list[str], classes: list[str]) -> None:
    for volume in volumes:
        await kubectl.call("DELETE", f"{VOLUMES}/{volume}", ok=(200, 202, 404))
    for cls in classes:
        await kubectl.call("DELETE", f"{CLASSES}/{cls}", ok=(200, 202, 404))


async def test_a_local_volume_on_one_node_takes_the_pod_there_and_its_claim_is_bound(
        tessera: Any, kubectl: Kube, namespace: str, clean_cluster: Any) -> None:
    await tessera("config/binpack.yaml")
    await _nodes(kubectl, "wf-a", "wf-b")
    cls, volume = f"local-{namespace}", f"nvme-{namespace}"
    try:
        await _class(kubectl, cls, "kubernetes.io/no-provisioner")
        await _local_volume(kubectl, volume, cls, "wf-b")
        await _claim_and_pod(kubectl, namespace, "train", cls)
        assert await eventually(lambda: _bound(kubectl, namespace, "train"), timeout=60) == "wf-b"
        pv = (await kubectl.call("GET", f"{VOLUMES}/{volume}")).json()
        claim = await _claim(kubectl, namespace, "train")
        ref = pv["spec"]["claimRef"]
        assert (ref["kind"], ref["namespace"], ref["name"], ref["uid"]) == (
            "PersistentVolumeClaim", namespace, "train", claim["metadata"]["uid"])
        assert pv["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"
        # the Binding waited for the PV controller: the claim was bound before the pod was
        assert claim["status"].get("phase") == "Bound" and claim["spec"].get("volumeName") == volume
        assert "pv.kubernetes.io/bind-completed" in claim["metadata"]["annotations"]
    finally:
        await _cleanup(kubectl, [volume], [cls])


async def test_two_pods_needing_a_local_volume_each_land_on_the_two_nodes_that_have_one(
        tessera: Any, kubectl: Kube, namespace: str, clean_cluster: Any) -> None:
    await tessera("config/binpack.yaml")  # bin packing would put both on one node, volumes aside
    await _nodes(kubectl, "wf-a", "wf-b")
    cls = f"local-{namespace}"
    volumes = [f"nvme-{namespace}-{node}" for node in ("wf-a", "wf-b")]
    try:
        await _class(kubectl, cls, "kubernetes.io/no-provisioner")
        for volume, node in zip(volumes, ("wf-a", "wf-b")):
            await _local_volume(kubectl, volume, cls, node)
        for pod in ("one", "two"):
            await _claim_and_pod(kubectl, namespace, pod, cls)
        one = await eventually(lambda: _bound(kubectl, namespace, "one"))
        two = await eventually(lambda: _bound(kubectl, namespace, "two"))
        assert {one, two} == {"wf-a", "wf-b"}
    finally:
        await _cleanup(kubectl, volumes, [cls])


def _with_bind_timeout(tmp_path: Path, seconds: int) -> str:
    """config/binpack.yaml with VolumeBindingArgs.bindTimeoutSeconds set."""
    raw = yaml.safe_load((REPO / "config/binpack.yaml").read_text())
    raw["profiles"][0]["pluginConfig"].append({"name": "VolumeBinding", "args": {"bindTimeoutSeconds": seconds}})
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


async def test_a_provisioner_class_gets_the_pods_node_and_without_a_provisioner_the_wait_times_out(
        tessera: Any, kubectl: Kube, namespace: str, clean_cluster: Any, tmp_path: Path) -> None:
    """The claim's selected-node is the node within allowedTopologies; nobody provisions it, so
    the Binding is never sent: after bindTimeoutSeconds the pod is decided again, with upstream's
    message in its PodScheduled condition and a FailedScheduling Event, and it stays unbound."""
    await tessera(_with_bind_timeout(tmp_path, 2))
    await _nodes(kubectl, "wf-a", "wf-b")  # zone-0, zone-1
    cls = f"fake-{namespace}"
    message = 'running PreBind plugin "VolumeBinding": binding volumes: context deadline exceeded'
    try:
        await _class(kubectl, cls, "example.com/fake",
                     allowedTopologies=[{"matchLabelExpressions": [{"key": ZONE, "values": ["zone-1"]}]}])
        await _claim_and_pod(kubectl, namespace, "train", cls)

        async def selected() -> str | None:
            node = (await _claim(kubectl, namespace, "train"))["metadata"].get("annotations", {}).get(SELECTED_NODE)
            return str(node) if node else None
        assert await eventually(selected) == "wf-b"

        async def failed_twice() -> bool:
            events = [e for e in await kubectl.events(namespace)
                      if e["reason"] == "FailedScheduling" and e["regarding"]["name"] == "train"]
            count = sum(max(1, (e.get("series") or {}).get("count", 1)) for e in events)
            return count >= 2 and all(e["note"] == message for e in events)
        assert await eventually(failed_twice, timeout=30)  # decided again, and timed out again
        pod = (await kubectl.pods(namespace))["train"]
        condition = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
        assert (condition["status"], condition["message"]) == ("False", message)
        assert not pod["spec"].get("nodeName")
    finally:
        await _cleanup(kubectl, [], [cls])
