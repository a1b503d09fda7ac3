"""Upstream PodGroups (scheduling.k8s.io/v1alpha2) can be deleted on the local control plane.

With the GenericWorkload gate on, kube-apiserver's PodGroupProtection admission stamps the
finalizer `scheduling.k8s.io/podgroup-protection` on every new PodGroup, and only
kube-controller-manager's podgroup-protection-controller removes it (once no active pod uses the
group). A new user found `kubectl delete podgroups.scheduling.k8s.io train` hanging for good on
`tessera dev-cluster`, with and without --with-controller-manager: the controller was not run (and
kube-controller-manager did not have the gate). Now a plane that runs the controller protects a
group while a pod uses it and lets it go after; a plane without a controller manager does not
stamp the finalizer at all.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from scheduler.api.quantity import parse_quantity
from scheduler.kube.controlplane import ControlPlaneBinaries, LocalControlPlane
from tests.e2e.live import Kube, eventually

FINALIZER = "scheduling.k8s.io/podgroup-protection"


def _group(name: str) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 1}}}}


def _member(name: str, group: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"schedulerName": "nobody", "schedulingGroup": {"podGroupName": group},
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}


async def _gone(kube: Kube, path: str) -> bool:
    return (await kube.call("GET", path, ok=(200, 404))).status == 404


async def _controller_manager_holds_pods(kube: Kube, namespace: str, count: int) -> None:
    """Wait until kube-controller-manager's shared pod informer holds `count` pods of `namespace`.

    The podgroup-protection controller asks only that informer whether a pod uses a group
    (upstream `hasActivePods` reads its index, never the apiserver), so a DELETE the informer has
    not caught up with lets a used group go. After an apiserver outage (earlier tests stop and
    restart the shared one) client-go's reflector backs off up to 30 s before it lists again: the
    informer trailed by 21 s after test_leader's outage, and CI failed here twice, once behind a 2 s
    pause (12 s outage, then that pause: the group went 2 of 2 times). So no pause is safe.
    The resourcequota controller counts pods from the same shared informer: a quota status
    computed for our latest `hard` says what the informer held then, and changing `hard` makes the
    controller compute it again.
    """
    quotas = f"/api/v1/namespaces/{namespace}/resourcequotas"
    await kube.call("POST", quotas, {"apiVersion": "v1", "kind": "ResourceQuota",
                                     "metadata": {"name": "informer-probe"}, "spec": {"hard": {"pods": "1000"}}})
    for hard in range(1000, 1100):
        if hard > 1000:
            await kube.call("PATCH", f"{quotas}/informer-probe", {"spec": {"hard": {"pods": str(hard)}}},
                            content_type="application/merge-patch+json")

        async def computed(limit: int = hard) -> dict[str, Any] | None:
            status: dict[str, Any] = (await kube.call("GET", f"{quotas}/informer-probe")).json().get("status", {})
            return status if parse_quantity(status.get("hard", {}).get("pods", 0)) == limit else None

        used = parse_quantity((await eventually(computed, timeout=120))["used"]["pods"])  # "1000" reads "1k"
        if used == count:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"kube-controller-manager's pod informer never held {count} pod(s) of {namespace}")


async def test_a_group_is_protected_while_a_pod_uses_it_and_deleted_after(control_plane: LocalControlPlane,
                                                                          namespace: str) -> None:
    kube = await Kube.connect(control_plane.kubeconfig)
    try:
        groups = f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{namespace}/podgroups"
        created = (await kube.call("POST", groups, _group("train"))).json()
        assert FINALIZER in created["metadata"].get("finalizers", [])  # the plane runs the controller
        await kube.call("POST", f"/api/v1/namespaces/{namespace}/pods", _member("train-0", "train"))
        await _controller_manager_holds_pods(kube, namespace, 1)
        await kube.call("DELETE", f"{groups}/train")
        await asyncio.sleep(2)  # the controller has had its chance: the pod still uses the group
        held = (await kube.call("GET", f"{groups}/train")).json()
        assert held["metadata"].get("deletionTimestamp") and FINALIZER in held["metadata"]["finalizers"]
        await kube.call("DELETE", f"/api/v1/namespaces/{namespace}/pods/train-0?gracePeriodSeconds=0")
        assert await eventually(lambda: _gone(kube, f"{groups}/train"), timeout=30)
    finally:
        await kube.close()


async def test_without_a_controller_manager_a_group_is_deleted_at_once(
        control_plane_binaries: ControlPlaneBinaries, tmp_path: Path) -> None:
    with LocalControlPlane(tmp_path / "plane", binaries=control_plane_binaries, install_crds=False) as plane:
        kube = await Kube.connect(plane.kubeconfig)
        try:
            groups = "/apis/scheduling.k8s.io/v1alpha2/namespaces/default/podgroups"
            created = (await kube.call("POST", groups, _group("solo"))).json()
            assert FINALIZER not in created["metadata"].get("finalizers", [])
            await kube.call("DELETE", f"{groups}/solo")
            assert await _gone(kube, f"{groups}/solo")
        finally:
            await kube.close()
