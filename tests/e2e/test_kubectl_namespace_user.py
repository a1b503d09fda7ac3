"""`kubectl tessera` run by a researcher, on the real apiserver: a ServiceAccount token bound to
the built-in `edit` ClusterRole in one namespace only, then with a hand-made grant of nodes and
pods (what docs/kubectl-tessera.md used to ask for), then with the shipped roles
`tessera-explainer` and `tessera-config-reader` (deploy/rbac/user-roles.yaml). A trial found a
bare `cannot list nodes: ... 403`, and with the listing half denied, wrong verdicts: "PodGroup
ml-alice/big does not exist" where the admin saw the gang's 40 GPUs against the cluster's 32, and
"no ResourceClass provides class.tessera.dev/v100-32g". Each 403 must say which permission is
missing and which shipped role grants it; nothing unread may read as absent."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from scheduler.core import annotations as ann
from scheduler.core.objects import PODGROUP_LABEL
from scheduler.kube.controlplane import LocalControlPlane
from scheduler.kube.http import Impersonation, KubeHttp, connect
from scheduler.sim import builders as b
from tests.deploy_manifests import DEPLOY, load_documents
from tests.e2e.live import Kube
from tests.e2e.test_deploy import SYSTEM_NAMESPACE, apply_documents, service_account_token, token_kubeconfig
from tests.e2e.test_kubectl_plugin import PLUGIN
from tests.e2e.test_live_scheduling import CLASSES, ERS, _create_nodes

RBAC = "/apis/rbac.authorization.k8s.io/v1"
LABEL = "tessera.dev/e2e-kubectl-user"
CLASS = "class.tessera.dev/v100-32g"
ROLES = DEPLOY / "rbac" / "user-roles.yaml"


def _kube_system_lease_grant(role_namespace: str) -> str:
    return ("needs get on leases.coordination.k8s.io kube-system/tessera: the shipped Role tessera-config-reader "
            f"grants only a Lease in {role_namespace}; ask for a Role in kube-system granting it, bound with a "
            "RoleBinding in kube-system (kubectl -n kube-system create role tessera-lease-reader --verb=get "
            "--resource=leases.coordination.k8s.io --resource-name=tessera)")


ASK_EXPLAINER = "ask for the ClusterRole tessera-explainer (bound with a ClusterRoleBinding; deploy/rbac/user-roles.yaml)"
Obj = dict[str, Any]


@pytest.fixture
def shipped_roles(control_plane: LocalControlPlane) -> Iterator[None]:
    """deploy/rbac/user-roles.yaml applied (tessera-system made if missing); this test's bindings
    and roles removed afterwards (by label)."""
    admin = control_plane.admin
    admin.request("POST", "/api/v1/namespaces", {"metadata": {"name": SYSTEM_NAMESPACE}}, ok=(201, 409))
    apply_documents(admin, load_documents(ROLES))
    try:
        yield
    finally:
        selector = f"?labelSelector={LABEL}"
        admin.request("DELETE", f"{RBAC}/clusterrolebindings{selector}")
        admin.request("DELETE", f"{RBAC}/clusterroles{selector}")
        admin.request("DELETE", f"{RBAC}/namespaces/{SYSTEM_NAMESPACE}/rolebindings{selector}")
        admin.request("DELETE", f"{RBAC}/namespaces/kube-system/rolebindings{selector}")
        admin.request("DELETE", f"{RBAC}/namespaces/kube-system/roles{selector}")


def _bind(admin: Any, ns: str, kind: str, name: str, role_kind: str, role: str, where: str = "") -> None:
    meta: Obj = {"name": name, "labels": {LABEL: "true"}}
    path = f"{RBAC}/namespaces/{where}/{kind}" if where else f"{RBAC}/{kind}"
    admin.create(path, {"metadata": meta, "subjects": [{"kind": "ServiceAccount", "name": "alice", "namespace": ns}],
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role}})


async def _plugin(kubeconfig: Path, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(str(PLUGIN), *args, "--kubeconfig", str(kubeconfig),
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def _settled(kubeconfig: Path, args: tuple[str, ...], done: Any, timeout: float = 30.0) -> tuple[int, str, str]:
    """The plugin's answer once `done(answer)` holds: RBAC learns of new bindings through a watch."""
    deadline = time.monotonic() + timeout
    while True:
        answer = await _plugin(kubeconfig, *args)
        if done(answer) or time.monotonic() > deadline:
            return answer
        await asyncio.sleep(0.5)


async def _cluster(kube: Kube, ns: str) -> None:
    """4 nodes of 8 V100s (32 GPUs) and their devices, the class v100-32g; in `ns` the gang `big`
    (5 members of 8 GPUs: 40, beyond the cluster), a pod asking for the class, and `held`, bound
    to u-n0 with two of its GPUs by the class (its tessera.dev/devices annotation)."""
    await _create_nodes(kube, None, [b.node(f"u-n{i}", gpus=8) for i in range(4)])
    for i in range(4):
        for k in range(8):
            await kube.create(ERS, b.device(f"u-n{i}", k))
    await kube.create(CLASSES, b.resource_class("v100-32g", match_labels={"model": "V100"}))
    await kube.create(f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups", b.podgroup("big", 5, ns))
    for i in range(5):
        await kube.create_pod(ns, b.pod(f"big-{i}", ns, limits={"nvidia.com/gpu": 8}, labels={PODGROUP_LABEL: "big"}))
    classy = await kube.create_pod(ns, b.pod("classy", ns, limits={CLASS: 1}))
    grants = tuple(ann.DeviceGrant(device["spec"]["deviceID"], device["metadata"]["name"], None, "", "nvidia.com/gpu")
                   for device in (b.device("u-n0", 0), b.device("u-n0", 1)))
    await kube.create_pod(ns, b.pod("held", ns, node_name="u-n0", limits={CLASS: 2},
                                    annotations={ann.DEVICES: ann.encode_devices({"main": {CLASS: grants}})}))
    await kube.create(f"/api/v1/namespaces/{ns}/events", {
        "metadata": {"name": "classy.1", "namespace": ns}, "type": "Warning", "reason": "FailedScheduling",
        "message": "0/4 nodes are available: tried by hand", "count": 1, "source": {"component": "tessera"},
        "lastTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "involvedObject": {"kind": "Pod", "name": "classy", "namespace": ns, "uid": classy["metadata"]["uid"],
                           "apiVersion": "v1"}})


async def test_a_researcher_is_told_what_to_ask_for_and_never_given_a_verdict_of_absence(
        clean_cluster: LocalControlPlane, kubectl: Kube, namespace: str, shipped_roles: None, tmp_path: Path) -> None:
    admin, ns = clean_cluster.admin, namespace
    await _cluster(kubectl, ns)
    admin.create(f"/api/v1/namespaces/{ns}/serviceaccounts", {"metadata": {"name": "alice"}})
    _bind(admin, ns, "rolebindings", "alice-edit", "ClusterRole", "edit", where=ns)
    kubeconfig = token_kubeconfig(clean_cluster, tmp_path / "alice.kubeconfig", "alice",
                                  service_account_token(admin, ns, "alice"))
    explain = ("explain", f"{ns}/big-0", "--config", "config/binpack.yaml")

    # 1. `edit` alone: every command stops at the nodes, and says what to ask for
    for args in (("nodes", "-n", ns), explain, ("what-if", "-n", ns)):
        status, out, err = await _settled(kubeconfig, args, lambda a: "cannot list" in a[2])
        assert (status, out) == (1, ""), err
        assert err.startswith("error: cannot list nodes: the apiserver at "), err
        assert (f'nodes is forbidden: User "system:serviceaccount:{ns}:alice" cannot list resource "nodes" in API '
                'group "" at the cluster scope') in err
        assert err.rstrip().endswith(f"needs list on nodes (cluster-scoped): {ASK_EXPLAINER}"), err

    # 2. nodes and pods granted by hand: PodGroups are read in the pod's namespace (edit's), the
    #    gang gets the admin's verdict; the class request gets none, and says why
    admin.create(f"{RBAC}/clusterroles", {"metadata": {"name": f"{ns}-nodes-pods", "labels": {LABEL: "true"}},
                                         "rules": [{"apiGroups": [""], "resources": ["nodes", "pods"],
                                                    "verbs": ["list"]}]})
    _bind(admin, ns, "clusterrolebindings", f"{ns}-nodes-pods", "ClusterRole", f"{ns}-nodes-pods")
    status, out, err = await _settled(kubeconfig, explain, lambda a: a[0] == 0)
    assert status == 0, err
    assert "does not exist" not in out and "not found" not in out, out
    assert "its 5 members ask for 40 nvidia.com/gpu" in out and "32 in all" in out, out
    assert ("warning: podgroups.scheduling.x-k8s.io: cannot be read: denied (HTTP 403): needs list on "
            f"podgroups.scheduling.x-k8s.io in all namespaces: {ASK_EXPLAINER}; read in namespace {ns} only; "
            "in the others gangs cannot be judged") in err, err
    assert ("warning: resourceclasses.tessera.dev: cannot be read: denied (HTTP 403): needs list on "
            "resourceclasses.tessera.dev (cluster-scoped): ask for the ClusterRole tessera-inventory-reader or "
            "tessera-explainer (bound with a ClusterRoleBinding; deploy/rbac/user-roles.yaml); requests of "
            "ResourceClasses cannot be judged") in err, err
    status, out, err = await _plugin(kubeconfig, "explain", f"{ns}/classy", "--config", "config/binpack.yaml")
    assert status == 0, err
    assert (f"cannot tell: it asks for {CLASS} and ResourceClasses cannot be read, so whether a class provides it "
            "is not known (resourceclasses.tessera.dev: denied (HTTP 403)") in out, out
    assert "no ResourceClass" not in out and "no valid ResourceClass" not in out, out
    # the Lease (who leads) is the config reader's: the Leader line says so
    assert ("cannot be read (denied, HTTP 403: needs get on leases.coordination.k8s.io ") in out, out
    assert f"cannot be read (denied, HTTP 403: {_kube_system_lease_grant(SYSTEM_NAMESPACE)}" in out, out
    # `edit` reads the core API's Events, not events.k8s.io's: the pod's Event is shown
    assert "FailedScheduling" in out and "0/4 nodes are available: tried by hand" in out, out
    status, out, err = await _plugin(kubeconfig, "what-if", "-n", ns, "--config", "config/binpack.yaml")
    assert status == 0, err
    assert f"{ns}/classy" in out and f"cannot tell: it asks for {CLASS}" in out, out
    assert "6 pending pods: 0 would be placed, 5 would stay pending, 1 cannot tell (see RESULT)" in out, out
    status, out, err = await _plugin(kubeconfig, "nodes", "-n", ns)
    assert status == 0, err
    # ExtendedResources unread: held's GPUs are in use as its annotation says, not ghosts (a trial)
    assert "ghost" not in out and "no ExtendedResource" not in out, out
    assert "GPUs: 32 total, 2 in use, 30 free, 0 unavailable" in out, out
    assert "a GPU a pod's annotations name shows in use as they say, its model and memory unknown" in err, err
    status, doc, err = await _plugin(kubeconfig, "nodes", "-n", ns, "-o", "json")
    assert status == 0, err
    u_n0 = next(node for node in orjson.loads(doc)["nodes"] if node["name"] == "u-n0")["gpus"]
    assert sorted((g["state"], g["model"], tuple(h["pod"] for h in g["holders"])) for g in u_n0)[-2:] == \
        [("whole", "", (f"{ns}/held",)), ("whole", "", (f"{ns}/held",))]
    assert ("warning: configmap tessera-system/tessera-scheduler-config: denied (HTTP 403): needs get on it: ask "
            "for the Role tessera-config-reader in tessera-system (bound with a RoleBinding there; "
            "deploy/rbac/user-roles.yaml)") in err, err

    # 3. the shipped roles: tessera-explainer and tessera-config-reader; no warning, the class's verdict
    _bind(admin, ns, "clusterrolebindings", f"{ns}-explainer", "ClusterRole", "tessera-explainer")
    _bind(admin, ns, "rolebindings", f"{ns}-config-reader", "Role", "tessera-config-reader", where=SYSTEM_NAMESPACE)
    classy = ("explain", f"{ns}/classy", "--config", "config/binpack.yaml")
    status, out, err = await _settled(kubeconfig, classy, lambda a: "warning" not in a[2])
    assert (status, err) == (0, ""), err
    assert "would go to u-n" in out and "cannot tell" not in out, out
    status, out, err = await _plugin(kubeconfig, *explain)
    assert (status, err) == (0, ""), err
    assert "its 5 members ask for 40 nvidia.com/gpu" in out, out
    status, out, err = await _plugin(kubeconfig, "what-if", "-n", ns, "--config", "config/binpack.yaml")
    assert (status, err) == (0, ""), err
    assert "6 pending pods: 1 would be placed, 5 would stay pending" in out, out
    # On dev-cluster no scheduler is installed, so the Leader line reads the Lease of the configuration
    # tried (--config's, config/binpack.yaml: kube-system/tessera), outside the namespace of the shipped Role: a trial's team users all
    # read `Leader: unknown ... 403` there, told to ask for the Role they held. Here --scheduler-namespace
    # names a namespace with no install (the shared test cluster may hold one in tessera-system, whose
    # own Lease the line would read instead). The line names the Role and RoleBinding missing...
    dev_flow = ("what-if", "-n", ns, "--config", "config/binpack.yaml", "--scheduler-namespace", ns)
    status, out, err = await _plugin(kubeconfig, *dev_flow)
    assert (status, err) == (0, ""), err
    assert ("Leader: unknown: the Lease kube-system/tessera cannot be read (denied, HTTP 403: "
            f"{_kube_system_lease_grant(ns)}") in out, out
    # ... and with them (docs/kubectl-tessera.md's commands) it reads the Lease
    admin.create(f"{RBAC}/namespaces/kube-system/roles", {
        "metadata": {"name": f"{ns}-lease-reader", "labels": {LABEL: "true"}},
        "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["tessera"],
                   "verbs": ["get"]}]})
    _bind(admin, ns, "rolebindings", f"{ns}-lease-reader", "Role", f"{ns}-lease-reader", where="kube-system")
    status, out, err = await _settled(kubeconfig, dev_flow, lambda a: "HTTP 403" not in a[1])
    assert (status, err) == (0, ""), err
    leader = next(line for line in out.splitlines() if line.startswith("Leader:"))
    assert "Lease kube-system/tessera" in leader and not leader.startswith("Leader: unknown"), leader


async def test_an_admin_sees_what_a_team_identity_is_shown_with_as(
        clean_cluster: LocalControlPlane, namespace: str, shipped_roles: None) -> None:
    """kubectl's impersonation flags (a multi-team admin's trial: `--as` was refused): the
    apiserver answers as the identity --as names — its 403, then, once it is granted the
    explainer role, its answer — and --as-group sends each group on its own."""
    admin, ns, kubeconfig = clean_cluster.admin, namespace, clean_cluster.kubeconfig
    team = f"system:serviceaccount:{ns}:default"
    what_if = ("what-if", "-n", ns, "--config", "config/binpack.yaml")
    for args in ((*what_if, "--as", team), ("--as", team, *what_if)):  # after the command, or before it
        status, out, err = await _plugin(kubeconfig, *args)
        assert (status, out) == (1, ""), err
        assert (f'nodes is forbidden: User "{team}" cannot list resource "nodes" in API group "" at the cluster '
                "scope") in err, err
        assert err.rstrip().endswith(f"needs list on nodes (cluster-scoped): {ASK_EXPLAINER}"), err
    admin.create(f"{RBAC}/clusterrolebindings", {
        "metadata": {"name": f"{ns}-default-explainer", "labels": {LABEL: "true"}},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": ns}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "tessera-explainer"}})
    status, out, err = await _settled(kubeconfig, (*what_if, "--as", team), lambda a: a[0] == 0)
    assert status == 0, err
    assert out.startswith("No pending pods to place (configuration config/binpack.yaml"), out

    # groups: one header each (joined, "team-a,system:masters" would be one group, and denied)
    status, out, err = await _plugin(kubeconfig, "nodes", "--as", "someone", "--as-group", "team-a",
                                     "--as-group", "system:masters")
    assert status == 0, err
    status, _, err = await _plugin(kubeconfig, "nodes", "--as", "someone", "--as-group", "team-a")
    assert status == 1 and 'User "someone" cannot list resource "nodes"' in err, err
    # groups or a uid without a user: refused before any request, as kubectl refuses it
    status, out, err = await _plugin(kubeconfig, "nodes", "--as-group", "system:masters")
    assert (status, out) == (2, "") and err.startswith("Error in configuration: requesting uid, groups or user-extra "
                                                       "for "), err
    assert err.endswith(" without impersonating a user\n"), err

    # what the apiserver makes of the headers: the identity, each group, the uid
    api = await connect(str(kubeconfig), impersonate=Impersonation("someone", ("team-a", "team-b"), "uid-1"))
    try:
        review = await KubeHttp(api).request(
            "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", limited=False,
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    finally:
        await api.close()
    assert review.status == 201, review.message()
    user = review.json()["status"]["userInfo"]
    assert (user["username"], user.get("uid")) == ("someone", "uid-1"), user
    assert {"team-a", "team-b"} <= set(user["groups"]), user
