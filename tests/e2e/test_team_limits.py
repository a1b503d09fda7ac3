"""deploy/examples/team-limits.yaml on a real apiserver, with no kube-apiserver flag (the stock
admission plugins and the resourcequota controller): a multi-team trial (research, prod-inference,
interns) found no documented way to keep one team off another team's PriorityClass, or to cap a
slice size per namespace, short of the admission configuration in deploy/apiserver/. The example
does both; deploy/README.md ("Teams sharing the GPUs") points at it and quotes these refusals.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from scheduler.kube.controlplane import LocalControlPlane
from scheduler.kube.controlplane.rest import ApiError
from tests.deploy_manifests import DEPLOY, load_documents

Obj = dict[str, Any]
LIMITS = DEPLOY / "examples" / "team-limits.yaml"
PRIORITY_CLASSES = [doc for doc in load_documents(DEPLOY / "examples" / "preemption-batch.yaml")
                    if doc["kind"] == "PriorityClass"]


@pytest.fixture
def namespaces(control_plane: LocalControlPlane) -> Iterator[tuple[str, str]]:
    """A team's namespace with team-limits.yaml applied (its quota's status filled: admission
    refuses every pod a quota covers while it has none), and another namespace without it."""
    admin = control_plane.admin
    suffix = uuid.uuid4().hex[:6]
    interns, research = f"interns-{suffix}", f"research-{suffix}"
    for name in (interns, research):
        admin.create("/api/v1/namespaces", {"metadata": {"name": name}})
    for priority_class in PRIORITY_CLASSES:
        admin.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", priority_class, ok=(201, 409))
    plural = {"ResourceQuota": "resourcequotas", "LimitRange": "limitranges"}
    for doc in load_documents(LIMITS):
        admin.create(f"/api/v1/namespaces/{interns}/{plural[doc['kind']]}", doc)
    deadline = time.monotonic() + 60
    while not admin.get(f"/api/v1/namespaces/{interns}/resourcequotas/no-high-priority").get("status", {}).get("hard"):
        assert time.monotonic() < deadline, "the resourcequota controller filled no status"
        time.sleep(0.2)
    try:
        yield interns, research
    finally:
        for name in (interns, research):
            admin.delete(f"/api/v1/namespaces/{name}")


def _pod(limits: dict[str, str], priority_class: str | None = None) -> Obj:
    spec: Obj = {"schedulerName": "tessera",
                 "containers": [{"name": "main", "image": "busybox", "resources": {"limits": limits}}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


def _refusal(plane: LocalControlPlane, namespace: str, pod: Obj) -> str | None:
    """None when the apiserver admits the pod (a dry run), else its message (403 Forbidden)."""
    try:
        plane.admin.create(f"/api/v1/namespaces/{namespace}/pods?dryRun=All", pod)
    except ApiError as err:
        assert err.status == 403, err
        return err.message
    return None


def test_a_team_is_kept_off_the_priority_classes_its_quota_names(
        control_plane: LocalControlPlane, namespaces: tuple[str, str]) -> None:
    interns, research = namespaces
    for priority_class in ("tessera-urgent", "tessera-batch"):
        refused = _refusal(control_plane, interns, _pod({"nvidia.com/gpu": "1"}, priority_class))
        assert refused is not None and ("exceeded quota: no-high-priority, requested: pods=1, used: pods=0, "
                                        "limited: pods=0") in refused, refused
        assert _refusal(control_plane, research, _pod({"nvidia.com/gpu": "1"}, priority_class)) is None
    assert _refusal(control_plane, interns, _pod({"nvidia.com/gpu": "1"})) is None


def test_a_slice_over_the_namespace_cap_is_refused(control_plane: LocalControlPlane,
                                                   namespaces: tuple[str, str]) -> None:
    interns, research = namespaces
    refused = _refusal(control_plane, interns, _pod({"class.tessera.dev/t4-shared": "16"}))
    assert refused is not None and ("maximum class.tessera.dev/t4-shared usage per Container is 8, but limit is 16"
                                    in refused), refused
    assert _refusal(control_plane, interns, _pod({"class.tessera.dev/t4-shared": "8"})) is None
    assert _refusal(control_plane, research, _pod({"class.tessera.dev/t4-shared": "16"})) is None


def test_the_readme_points_at_the_example() -> None:
    assert "examples/team-limits.yaml" in (DEPLOY / "README.md").read_text()
