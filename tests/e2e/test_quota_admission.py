"""deploy/apiserver/: the apiserver's quota admission for teams sharing Tessera's GPUs.

A researcher's trial found two ways a namespace with `edit` takes more than its share: a
ResourceQuota limits only the resources it names (a class added after the quota was written is
free to use), and any namespace may give its pods `system-cluster-critical` priority and preempt
other teams' pods. deploy/README.md answers both with kube-apiserver's own ResourceQuota admission
configuration (`limitedResources`), shipped as deploy/apiserver/quota-admission.yaml with the
quotas that keep the system priority classes for the system namespaces. These tests start a
kube-apiserver with exactly that file (and kube-controller-manager's resourcequota controller,
which fills the quotas' status that admission reads) and check every case the docs state, with
the apiserver's own refusals. Without the file each refused pod is admitted.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scheduler.kube.controlplane import ControlPlaneBinaries, LocalControlPlane
from scheduler.kube.controlplane.rest import ApiError
from tests.deploy_manifests import DEPLOY, load_documents

Obj = dict[str, Any]
CONFIG = DEPLOY / "apiserver" / "quota-admission.yaml"
CRITICAL_QUOTAS = DEPLOY / "apiserver" / "critical-priority-quota.yaml"
TEAM_QUOTA = DEPLOY / "examples" / "quota.yaml"


@pytest.fixture(scope="module")
def plane(control_plane_binaries: ControlPlaneBinaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalControlPlane]:
    with LocalControlPlane(tmp_path_factory.mktemp("quota-plane"), binaries=control_plane_binaries,
                           with_controller_manager=True, controllers=("resourcequota-controller",),
                           install_crds=False,
                           extra_apiserver_args=[f"--admission-control-config-file={CONFIG}"]) as started:
        admin = started.admin
        for name in ("team-a", "team-b", "tessera-system"):
            admin.create("/api/v1/namespaces", {"metadata": {"name": name}})
        _create_quotas(started, [{**doc, "metadata": {**doc["metadata"], "namespace": "team-a"}}
                                 for doc in load_documents(TEAM_QUOTA)])
        _create_quotas(started, load_documents(CRITICAL_QUOTAS))
        yield started


def _create_quotas(plane: LocalControlPlane, quotas: list[Obj]) -> None:
    """Create the quotas and wait for the controller to fill their status: admission refuses
    every pod a quota covers ("status unknown for quota") until it has."""
    for quota in quotas:
        plane.admin.create(f"/api/v1/namespaces/{quota['metadata']['namespace']}/resourcequotas", quota)
    deadline = time.monotonic() + 60
    for quota in quotas:
        path = f"/api/v1/namespaces/{quota['metadata']['namespace']}/resourcequotas/{quota['metadata']['name']}"
        while not plane.admin.get(path).get("status", {}).get("hard"):
            assert time.monotonic() < deadline, f"{path}: the resourcequota controller filled no status"
            time.sleep(0.2)


def _pod(name: str, limits: dict[str, str], priority_class: str | None = None) -> Obj:
    spec: Obj = {"schedulerName": "tessera",
                 "containers": [{"name": "main", "image": "busybox", "resources": {"limits": limits}}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def _admit(plane: LocalControlPlane, namespace: str, pod: Obj) -> str | None:
    """None when the apiserver admits the pod (a dry run: nothing is left behind), else its message.
    The apiserver refuses a missing covering quota as 403 Forbidden, but a missing scoped one as
    500 (its quota admission returns that error unwrapped; as of v1.36)."""
    try:
        plane.admin.create(f"/api/v1/namespaces/{namespace}/pods?dryRun=All", pod)
    except ApiError as err:
        assert err.status in (403, 500), err
        return err.message
    return None


def test_a_class_the_team_quota_does_not_name_is_refused(plane: LocalControlPlane) -> None:
    """quota.yaml names class.tessera.dev/v100-32g, a100-80g, t4, t4-shared and nvidia.com/gpu:
    those are admitted within it; a class added later (v100) is not, whatever the quota allows."""
    assert _admit(plane, "team-a", _pod("listed", {"class.tessera.dev/v100-32g": "2"})) is None
    assert _admit(plane, "team-a", _pod("plain", {"nvidia.com/gpu": "1"})) is None
    refused = _admit(plane, "team-a", _pod("unlisted", {"class.tessera.dev/v100": "8"}))
    assert refused is not None
    assert "insufficient quota to consume: requests.class.tessera.dev/v100" in refused


def test_a_namespace_without_class_quota_gets_no_class_gpus_but_runs_other_pods(plane: LocalControlPlane) -> None:
    """Plain nvidia.com/gpu is any scheduler's (NVIDIA's device plugin counts it): not limited."""
    refused = _admit(plane, "team-b", _pod("gpu", {"class.tessera.dev/t4": "1"}))
    assert refused is not None and "insufficient quota to consume: requests.class.tessera.dev/t4" in refused
    assert _admit(plane, "team-b", _pod("cpu", {"cpu": "1"})) is None
    assert _admit(plane, "team-b", _pod("plain", {"nvidia.com/gpu": "1"})) is None


@pytest.mark.parametrize("priority_class", ["system-cluster-critical", "system-node-critical"])
def test_system_priority_classes_stay_with_the_system_namespaces(plane: LocalControlPlane, priority_class: str) -> None:
    """A team's pod may not preempt other teams' pods with a system priority; kube-system and
    tessera-system (Tessera's scheduler and node agent use them) hold the scoped quotas."""
    refused = _admit(plane, "team-a", _pod("urgent", {"cpu": "1"}, priority_class))
    assert refused is not None and "insufficient quota to match these scopes" in refused
    for namespace in ("kube-system", "tessera-system"):
        assert _admit(plane, namespace, _pod("system", {"cpu": "1"}, priority_class)) is None, namespace


def test_the_files_are_where_the_docs_say() -> None:
    """deploy/README.md points at both files by these paths."""
    readme = (DEPLOY / "README.md").read_text()
    for path in (CONFIG, CRITICAL_QUOTAS):
        assert f"apiserver/{Path(path).name}" in readme
