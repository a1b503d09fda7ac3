"""VolumeBinding on a real apiserver, side by side with the real kube-scheduler v1.36.3: a claim
bound to a local volume whose node affinity names one of two nodes takes its pod there, and a pod
naming a claim that does not exist stays Pending with upstream's FailedScheduling note from both
schedulers. The rules are in tests/replay/test_volume_binding.py."""

from __future__ import annotations

from typing import Any

from scheduler.sim import builders as b
from tests.e2e.live import Kube, eventually

NODES = "/api/v1/nodes"
VOLUMES = "/api/v1/persistentvolumes"
HOSTNAME = "kubernetes.io/hostname"
NODE_NAMES = ("vb-1", "vb-2")
MISSING = ('0/2 nodes are available: persistentvolumeclaim "nope" not found. preemption: 0/2 nodes are '
           "available: 2 Preemption is not helpful for scheduling.")
# kube-scheduler v1.36.3 ends its note otherwise: VolumeBinding's PreFilter rejects the pod before
# DynamicResources' PreFilter has written its cycle state, so DynamicResources' PostFilter (run
# before DefaultPreemption's) fails reading it ("not found") and preemption's word never comes.
# Tessera has no DynamicResources plugin: its note is the one upstream gives without that plugin.
UPSTREAM_MISSING = '0/2 nodes are available: persistentvolumeclaim "nope" not found. not found'


def _pod(name: str, claim: str, tessera: bool) -> dict[str, Any]:
    pod = b.pod(name, requests={"cpu": "100m"},
                spec_extra={"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]})
    del pod["metadata"]["uid"], pod["status"]
    if not tessera:
        del pod["spec"]["schedulerName"]
    return pod


async def _bound(kubectl: Kube, namespace: str, pod: str) -> str | None:
    return (await kubectl.pods(namespace))[pod]["spec"].get("nodeName") or None


async def _failed_scheduling(kubectl: Kube, namespace: str, pod: str) -> dict[str, Any] | None:
    events = [e for e in await kubectl.events(namespace)
              if e["regarding"]["name"] == pod and e["reason"] == "FailedScheduling"]
    return events[0] if events else None


async def _bound_claim(kubectl: Kube, namespace: str, claim: str, volume: str, node: str) -> None:
    """A local volume on `node` and a claim bound to it (both sides, as the PV controller leaves them)."""
    await kubectl.create(VOLUMES, {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": volume},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                 "local": {"path": "/mnt/nvme0"},
                 "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": namespace,
                              "name": claim},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [
                     {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}]}}}})
    await kubectl.create(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": claim, "namespace": namespace,
                     "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": volume,
                 "resources": {"requests": {"storage": "1Gi"}}}})


async def test_a_local_volume_takes_its_pod_to_its_node_and_a_missing_claim_is_upstreams_note(
        tessera: Any, kubectl: Kube, namespace: str, clean_cluster: Any) -> None:
    clean_cluster.start_kube_scheduler()
    await tessera("config/binpack.yaml")
    for name in NODE_NAMES:
        node = b.node(name, labels={HOSTNAME: name})
        await kubectl.create(NODES, node)
        await kubectl.call("PATCH", f"{NODES}/{name}/status", {"status": node["status"]},
                           content_type="application/merge-patch+json")
    volumes = [f"nvme-{namespace}-{i}" for i in range(2)]
    try:
        await _bound_claim(kubectl, namespace, "mine", volumes[0], "vb-2")
        await _bound_claim(kubectl, namespace, "theirs", volumes[1], "vb-2")
        await kubectl.create_pod(namespace, _pod("mine", "mine", tessera=True))
        await kubectl.create_pod(namespace, _pod("theirs", "theirs", tessera=False))
        assert await eventually(lambda: _bound(kubectl, namespace, "mine")) == "vb-2"
        assert await eventually(lambda: _bound(kubectl, namespace, "theirs")) == "vb-2"

        await kubectl.create_pod(namespace, _pod("mine-lost", "nope", tessera=True))
        await kubectl.create_pod(namespace, _pod("theirs-lost", "nope", tessera=False))
        ours = await eventually(lambda: _failed_scheduling(kubectl, namespace, "mine-lost"))
        upstream = await eventually(lambda: _failed_scheduling(kubectl, namespace, "theirs-lost"))
        assert ours["reportingController"] == "tessera" and upstream["reportingController"] == "default-scheduler"
        assert (ours["note"], upstream["note"]) == (MISSING, UPSTREAM_MISSING)
        pods = await kubectl.pods(namespace)
        assert not pods["mine-lost"]["spec"].get("nodeName") and not pods["theirs-lost"]["spec"].get("nodeName")
    finally:
        for volume in volumes:
            await kubectl.call("DELETE", f"{VOLUMES}/{volume}")
