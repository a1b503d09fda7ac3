"""The GPU pod policy (deploy/admission/gpu-pod-policy.yaml) against workload controllers.

tests/e2e/test_admission_policy.py creates the refused pods itself; a platform user's pods are
created by a Deployment's ReplicaSet or a Job, and the refusal then reaches nobody's terminal: the
Deployment simply never gets its pods. deploy/README.md ("GPU pod policy") says where the message
is: the ReplicaSet's `ReplicaFailure` condition (which the Deployment controller copies onto the
Deployment) and the workload's `FailedCreate` Events. Here kube-controller-manager's deployment,
replicaset and job controllers run against a kube-apiserver with the policy, and a Deployment and a
Job whose pods ask for a class without `schedulerName: tessera` show the policy's message there.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from scheduler.kube.controlplane import ControlPlaneBinaries, LocalControlPlane
from scheduler.kube.controlplane.rest import ApiError
from tests.deploy_manifests import DEPLOY, load_documents

Obj = dict[str, Any]
T = TypeVar("T")
POLICY_FILE = DEPLOY / "admission" / "gpu-pod-policy.yaml"
ANNOTATION_POLICY_FILE = DEPLOY / "admission" / "annotation-policy.yaml"
VAP = "/apis/admissionregistration.k8s.io/v1"
CLASS = "class.tessera.dev/v100-32g"
# the policy's message for such a pod (its messageExpression with the default variables)
MESSAGE = ("this pod asks for GPUs that Tessera schedules (class.tessera.dev/*; container main) but its "
           "spec.schedulerName is default-scheduler, and only Tessera knows which GPUs it has given out: set "
           "spec.schedulerName: tessera")


@pytest.fixture(scope="module")
def plane(control_plane_binaries: ControlPlaneBinaries,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalControlPlane]:
    if control_plane_binaries.kube_controller_manager is None:
        pytest.fail("this test needs kube-controller-manager (the workload controllers)")
    with LocalControlPlane(tmp_path_factory.mktemp("gpu-policy-workloads"), binaries=control_plane_binaries,
                           with_controller_manager=True, install_crds=False,
                           controllers=("deployment-controller", "replicaset-controller", "job-controller")) as started:
        for doc in load_documents(POLICY_FILE) + load_documents(ANNOTATION_POLICY_FILE):
            kind = "validatingadmissionpolicies" if doc["kind"] == "ValidatingAdmissionPolicy" \
                else "validatingadmissionpolicybindings"
            started.admin.create(f"{VAP}/{kind}", doc)
        yield started


def _until(what: str, probe: Callable[[], T | None], timeout: float = 60.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found is not None:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {timeout:.0f} s")
        time.sleep(0.2)


def _template(name: str) -> Obj:
    """A pod template asking for a class and naming no scheduler (the apiserver: default-scheduler)."""
    return {"metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "main", "image": "busybox",
                                     "resources": {"limits": {CLASS: "1"}}}]}}


def _enforced(plane: LocalControlPlane, namespace: str) -> bool | None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe"}, "spec": _template("probe")["spec"]}
    try:
        plane.admin.create(f"/api/v1/namespaces/{namespace}/pods?dryRun=All", pod)
    except ApiError as err:
        if err.status == 403 and MESSAGE in err.message:
            return True
        raise
    return None


def _condition(obj: Obj, kind: str) -> Obj | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or () if c.get("type") == kind), None)


def _failed_create_events(plane: LocalControlPlane, namespace: str, kind: str, name: str) -> list[Obj] | None:
    events = plane.admin.get(f"/api/v1/namespaces/{namespace}/events")["items"]
    found = [e for e in events if e.get("reason") == "FailedCreate"
             and (e.get("involvedObject") or {}).get("kind") == kind
             and (e.get("involvedObject") or {}).get("name") == name]
    return found or None


def test_a_workloads_refused_pods_show_the_policys_message_on_the_workload(plane: LocalControlPlane) -> None:
    admin = plane.admin
    namespace = f"gpu-wl-{secrets.token_hex(3)}"
    admin.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
    _until("the gpu pod policy was not enforced", lambda: _enforced(plane, namespace))

    admin.create(f"/apis/apps/v1/namespaces/{namespace}/deployments", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "train"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "train"}}, "template": _template("train")}})
    admin.create(f"/apis/batch/v1/namespaces/{namespace}/jobs", {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "batch"},
        "spec": {"template": {**_template("batch"), "spec": {**_template("batch")["spec"], "restartPolicy": "Never"}}}})

    # the ReplicaSet the Deployment made: its ReplicaFailure condition carries the policy's message
    def replica_failure() -> tuple[Obj, Obj] | None:
        sets = admin.get(f"/apis/apps/v1/namespaces/{namespace}/replicasets")["items"]
        for rs in sets:
            condition = _condition(rs, "ReplicaFailure")
            if condition is not None:
                return rs, condition
        return None

    rs, condition = _until("no ReplicaSet got a ReplicaFailure condition", replica_failure)
    assert [owner["name"] for owner in rs["metadata"]["ownerReferences"]] == ["train"]
    assert (condition["status"], condition["reason"]) == ("True", "FailedCreate"), condition
    assert "ValidatingAdmissionPolicy 'tessera-gpu-pods'" in condition["message"], condition
    assert MESSAGE in condition["message"], condition
    # the Deployment controller copies it onto the Deployment (`kubectl describe deploy` shows it)
    deployment = _until("the Deployment got no ReplicaFailure condition", lambda: _condition(
        admin.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/train"), "ReplicaFailure"))
    assert deployment["message"] == condition["message"], deployment
    # and the FailedCreate Events of the ReplicaSet and of the Job say it too
    for kind, name in (("ReplicaSet", rs["metadata"]["name"]), ("Job", "batch")):
        events = _until(f"no FailedCreate Event on the {kind}",
                        lambda: _failed_create_events(plane, namespace, kind, name))
        assert all(MESSAGE in event["message"] for event in events), events
    assert admin.get(f"/api/v1/namespaces/{namespace}/pods")["items"] == []  # no pod was admitted


def test_a_workloads_pods_with_ledger_annotations_are_refused_to_the_controllers(plane: LocalControlPlane) -> None:
    """A security review: where kube-controller-manager ran as system:masters (exempt from the
    annotation policy) a tenant's ReplicaSet with spec.nodeName and a garbage `tessera.dev/devices`
    in its pod template had its pods created unchecked, and the broken ledger annotation took the
    node's GPUs out of use. The plane runs it as kubeadm does (--use-service-account-credentials):
    the ReplicaSet controller creates pods as its own ServiceAccount, which the policy checks."""
    admin = plane.admin
    namespace = f"ledger-wl-{secrets.token_hex(3)}"
    admin.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
    template = {"metadata": {"labels": {"app": "squat"}, "annotations": {"tessera.dev/devices": "garbage"}},
                "spec": {"nodeName": "gpu-node-1", "containers": [{"name": "main", "image": "busybox"}]}}
    admin.create(f"/apis/apps/v1/namespaces/{namespace}/replicasets", {
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "squat"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "squat"}}, "template": template}})

    def outcome() -> Obj | None:
        if admin.get(f"/api/v1/namespaces/{namespace}/pods")["items"]:
            return {"admitted": True}
        condition = _condition(admin.get(f"/apis/apps/v1/namespaces/{namespace}/replicasets/squat"),
                               "ReplicaFailure")
        return condition

    condition = _until("the ReplicaSet neither made a pod nor got a ReplicaFailure condition", outcome)
    assert "admitted" not in condition, "the ReplicaSet controller created a pod with a forged ledger annotation"
    assert "ValidatingAdmissionPolicy 'tessera-annotations'" in condition["message"], condition
    assert ("system:serviceaccount:kube-system:replicaset-controller may not change tessera.dev/devices"
            in condition["message"]), condition
    assert admin.get(f"/api/v1/namespaces/{namespace}/pods")["items"] == []
