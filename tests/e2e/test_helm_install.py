"""The Helm chart on the real kube-apiserver (issue 16): its rendered manifests apply server-side,
and `helm install` into another namespace gives a scheduler that leads and binds with nothing but
what the chart grants it.

Why two planes:
- The default rendering is applied server-side to the session's shared plane, with test_deploy's
  helpers and field manager: it is the kustomize tree's objects (tests/unit/test_helm_chart.py),
  so it coexists with what the deploy, RBAC and admission tests apply there.
- A real `helm install` needs objects no one else owns (Helm refuses to adopt the ClusterRoles the
  other modules applied), so it runs on a fresh etcd + kube-apiserver (about 6 s) without the
  CRDs, which the chart's crds/ then installs. It installs into `gpu-sched`, not
  tessera-system: the namespace is where the chart differs from the tree (the Lease's Role, the
  admission policy's ServiceAccount names, the ClusterRoleBindings' subjects), and a scheduler
  run with the chart's ServiceAccount and ConfigMap proves those references hold.
"""

from __future__ import annotations

import asyncio
import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from scheduler.core import annotations as ann
from scheduler.kube.controlplane import ControlPlaneBinaries, LocalControlPlane
from scheduler.kube.controlplane.rest import ApiError
from scheduler.sim import builders as b
from tests.deploy_manifests import DEPLOY, deploy_documents, find, helm_binary, helm_template, helm_template_args, key, load_documents, run_helm
from tests.e2e.live import Kube, TesseraProcess, eventually
from tests.e2e.test_deploy import (
    FIELD_MANAGER,
    SYSTEM_NAMESPACE,
    Discovery,
    apply_documents,
    call_as,
    dry_run_pod_templates,
    remove_admission_policy,
    service_account_token,
    token_kubeconfig,
)
from tests.e2e.test_secure_serving_live import _get, _secure_url

NAMESPACE = "gpu-sched"
CLASSES = "/apis/tessera.dev/v1alpha1/resourceclasses"
NETWORK_POLICIES = f"/apis/networking.k8s.io/v1/namespaces/{NAMESPACE}/networkpolicies"
# the ServiceAccount monitoring.prometheusServiceAccount names (kube-prometheus' Prometheus)
PROMETHEUS_SA = {"name": "prometheus-k8s", "namespace": "monitoring"}


@pytest.fixture(scope="module")
def helm() -> Path:
    return helm_binary()


def test_rendered_chart_applies_server_side(control_plane: LocalControlPlane, helm: Path) -> None:
    admin = control_plane.admin
    docs = helm_template(helm)  # CRDs first, then Helm's install order
    # What `--create-namespace` does: a bare namespace (a no-op if the deploy tests made it).
    admin.apply(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NAMESPACE}},
                field_manager="helm-e2e")
    try:
        applied = apply_documents(admin, docs)
        assert [key(a) for a in applied] == [key(d) for d in docs]
        discovery = Discovery(admin)
        for doc in docs:
            live = admin.get(discovery.url(doc))
            assert FIELD_MANAGER in {e.get("manager") for e in live["metadata"].get("managedFields", [])}
        dry_run_pod_templates(admin, docs)
    finally:
        remove_admission_policy(admin)


@pytest.fixture(scope="module")
def fresh_plane(control_plane_binaries: ControlPlaneBinaries,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalControlPlane]:
    with LocalControlPlane(tmp_path_factory.mktemp("helm-plane"), binaries=control_plane_binaries,
                           install_crds=False) as plane:
        yield plane


async def test_helm_install_in_another_namespace_schedules(fresh_plane: LocalControlPlane, helm: Path,
                                                           tmp_path: Path) -> None:
    plane, admin = fresh_plane, fresh_plane.admin
    # with the scheduler's NetworkPolicy (networkPolicy.enabled): the apiserver takes it; no network
    # plugin runs here, so nothing enforces it (the scheduler below is a local process anyway)
    prometheus = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                  "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}
    values = {"networkPolicy": {"enabled": True, "from": [prometheus]},
              "monitoring": {"prometheusServiceAccount": PROMETHEUS_SA}}
    installed = run_helm(helm, "install", *helm_template_args(values, tmp_path, NAMESPACE), "--create-namespace",
                         kubeconfig=plane.kubeconfig)
    assert installed.returncode == 0, installed.stderr
    assert "kubectl label namespace gpu-sched pod-security.kubernetes.io/enforce=privileged" in installed.stdout
    assert "The NetworkPolicy tessera-scheduler admits to port 10259 only" in installed.stdout, installed.stdout
    policy = admin.get(f"{NETWORK_POLICIES}/tessera-scheduler")
    assert policy["spec"]["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "tessera",
                                                             "app.kubernetes.io/component": "scheduler"}}
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    assert policy["spec"]["ingress"] == [{"from": [prometheus], "ports": [{"port": 10259, "protocol": "TCP"}]}]
    pod_labels = admin.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/tessera-scheduler")[
        "spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()

    # The scheduler as its pod would run: the chart's ServiceAccount, the chart's ConfigMap.
    token = service_account_token(admin, NAMESPACE, "tessera-scheduler")
    kubeconfig = token_kubeconfig(plane, tmp_path / "scheduler.kubeconfig", "tessera-scheduler", token)
    # Its secure port's reviews: the chart's system:auth-delegator binding lets that token create
    # TokenReviews and SubjectAccessReviews (asked as the ServiceAccount itself).
    for group, resource in (("authentication.k8s.io", "tokenreviews"), ("authorization.k8s.io", "subjectaccessreviews")):
        assert _self_allowed(plane, token, {"resourceAttributes": {"verb": "create", "group": group,
                                                                   "resource": resource}}), resource
    # The chart's tessera-metrics-reader lets the named Prometheus ServiceAccount get /metrics only.
    for name in (PROMETHEUS_SA["name"], "not-bound"):
        admin.apply(f"/api/v1/namespaces/{PROMETHEUS_SA['namespace']}",
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PROMETHEUS_SA["namespace"]}},
                    field_manager="helm-e2e")
        admin.apply(f"/api/v1/namespaces/{PROMETHEUS_SA['namespace']}/serviceaccounts/{name}",
                    {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
                    field_manager="helm-e2e")
    scraper = service_account_token(admin, PROMETHEUS_SA["namespace"], PROMETHEUS_SA["name"])
    unbound = service_account_token(admin, PROMETHEUS_SA["namespace"], "not-bound")
    for path, allowed in (("/metrics", True), ("/configz", False)):
        assert _self_allowed(plane, scraper, {"nonResourceAttributes": {"verb": "get", "path": path}}) is allowed
    assert not _self_allowed(plane, unbound, {"nonResourceAttributes": {"verb": "get", "path": "/metrics"}})
    config = tmp_path / "config.yaml"
    config.write_text(admin.get(f"/api/v1/namespaces/{NAMESPACE}/configmaps/tessera-scheduler-config")
                      ["data"]["config.yaml"])
    (node,) = plane.add_fake_gpu_nodes(1, 2, "V100", memory="32Gi", prefix="helm-v100")
    classes = load_documents(DEPLOY / "examples" / "resourceclasses.yaml")
    apply_documents(admin, classes)

    # the Deployment's serving flags (--secure-port, HTTPS with delegated authentication), on a free port
    args = find(helm_template(helm, values, NAMESPACE), "Deployment", "tessera-scheduler")["spec"]["template"][
        "spec"]["containers"][0]["args"]
    assert "--secure-port=10259" in args and not any(a.startswith("--port") for a in args)
    process = TesseraProcess(kubeconfig, config, tmp_path, name="helm")
    at = process.args.index("--port")
    process.args[at:at + 2] = ["--secure-port", str(process.port)]
    process.start()
    kube = await Kube.connect(plane.kubeconfig)
    try:
        base = await _secure_url(process, 30)

        async def leading() -> bool:  # the Lease in gpu-sched, granted by the chart's Role
            status, text = await _get(base + "/metrics", scraper)  # reviewed with the chart's RBAC
            assert status == 200, text
            return bool(re.search(r"^tessera_leader 1(\.0)?$", text, re.M))

        await eventually(leading, 30)
        assert (await _get(base + "/readyz"))[0] == 200  # the kubelet's probe: no token
        # 403 (not 401: the TokenReview worked) for a token without the role, and for /configz
        for path, who in (("/metrics", "not-bound"), ("/configz", PROMETHEUS_SA["name"])):
            status, text = await _get(base + path, unbound if who == "not-bound" else scraper)
            assert status == 403, text
            assert orjson.loads(text)["message"] == (f'forbidden: User "system:serviceaccount:'
                                                     f'{PROMETHEUS_SA["namespace"]}:{who}" cannot get path "{path}"')
        lease = admin.get(f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/tessera")
        assert lease["spec"]["holderIdentity"] == process.identity

        # A class pod is bound with its devices: RBAC lets the Binding through and the admission
        # policy accepts its tessera.dev/* annotations from gpu-sched's ServiceAccount.
        await kube.create_pod("default", b.pod("helm-class", limits={"class.tessera.dev/v100-32g": 1}))

        async def bound() -> dict[str, Any] | None:
            pod = (await kube.call("GET", "/api/v1/namespaces/default/pods/helm-class")).json()
            return pod if pod["spec"].get("nodeName") == node else None

        pod = await eventually(bound, 30)
        devices = orjson.loads(pod["metadata"]["annotations"][ann.DEVICES])
        assert devices["containers"]["main"]["class.tessera.dev/v100-32g"][0]["id"].startswith("GPU-")
        # the Binding also records what it gave in tessera.dev/held-devices: the chart's policy takes it
        assert pod["metadata"]["annotations"][ann.HELD_DEVICES] == pod["metadata"]["annotations"][ann.DEVICES]
        # An edit of its devices annotation (as an admin: system:masters is exempt) is recorded by
        # the scheduler in tessera.dev/held-devices through pods/status: the chart's policy lets
        # gpu-sched's ServiceAccount write that key.
        [grant] = devices["containers"]["main"]["class.tessera.dev/v100-32g"]
        edited = {**grant, "device": grant["device"] + "-x"}
        devices["containers"]["main"]["class.tessera.dev/v100-32g"] = [edited]
        await kube.call("PATCH", "/api/v1/namespaces/default/pods/helm-class",
                        {"metadata": {"annotations": {ann.DEVICES: orjson.dumps(devices).decode()}}},
                        content_type="application/merge-patch+json")

        async def held() -> list[str] | None:
            pod = (await kube.call("GET", "/api/v1/namespaces/default/pods/helm-class")).json()
            raw = pod["metadata"]["annotations"].get(ann.HELD_DEVICES)
            names = [] if raw is None else sorted(g["device"] for g in orjson.loads(raw)["containers"]["main"]
                                                  ["class.tessera.dev/v100-32g"])
            return names if len(names) == 2 else None  # the Binding's value names the first alone

        assert await eventually(held, 30) == sorted([grant["device"], edited["device"]])
    finally:
        await kube.close()
        code = process.terminate()
        await asyncio.to_thread(admin.request, "DELETE", "/api/v1/namespaces/default/pods/helm-class?gracePeriodSeconds=0")
    assert code == 0, process.log()
    assert "forbidden" not in process.log_path.read_text(errors="replace").lower(), process.log()
    assert "serving.review_failed" not in process.log_path.read_text(errors="replace"), process.log()

    # helm uninstall removes what it installed and keeps the CRDs (Helm's rule for crds/).
    removed = run_helm(helm, "uninstall", "tessera", "--namespace", NAMESPACE, kubeconfig=plane.kubeconfig)
    assert removed.returncode == 0, removed.stderr
    for path in ("/apis/rbac.authorization.k8s.io/v1/clusterroles/tessera-scheduler",
                 "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/tessera-scheduler-auth-delegator",
                 "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/tessera-metrics-reader",
                 "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/tessera-annotations",
                 f"{NETWORK_POLICIES}/tessera-scheduler"):
        with pytest.raises(ApiError) as gone:
            admin.get(path)
        assert gone.value.status == 404
    assert admin.get(CLASSES)["items"], "the CRDs and their objects stay"
    # So do what the release never owned (deploy/README.md says so and how to remove them): the
    # namespace `--create-namespace` made and the Lease the scheduler process created.
    assert admin.get(f"/api/v1/namespaces/{NAMESPACE}")["status"]["phase"] == "Active"
    assert admin.get(f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/tessera")["metadata"]["name"] == "tessera"


def _self_allowed(plane: LocalControlPlane, token: str, attributes: dict[str, Any]) -> bool:
    """A SelfSubjectAccessReview made with `token`: may its ServiceAccount do this?"""
    status, body = call_as(plane, token, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                           {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                            "spec": attributes})
    assert status == 201, body
    return bool(orjson.loads(body)["status"].get("allowed"))


RESTRICTED = "gpu-restricted"


def test_helm_install_refuses_a_namespace_whose_pod_security_forbids_the_agent(
        fresh_plane: LocalControlPlane, helm: Path, tmp_path: Path) -> None:
    """The agent needs Pod Security level `privileged` (root, a hostPath). In a namespace that
    enforces `restricted` (or `baseline`), `helm install` succeeded and the DaemonSet controller's
    pod creations were refused, seen only in the DaemonSet's events: the chart reads the
    namespace's label (Helm's `lookup`) and refuses the install, naming the label to set. With the
    agent off, the scheduler alone installs there, and its pods meet `restricted` (the apiserver's
    PodSecurity admission accepts them)."""
    plane, admin = fresh_plane, fresh_plane.admin
    admin.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": RESTRICTED, "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}})
    refused = run_helm(helm, "install", *helm_template_args(None, tmp_path, RESTRICTED), kubeconfig=plane.kubeconfig)
    assert refused.returncode != 0, refused.stdout
    assert ("namespace gpu-restricted enforces Pod Security level \"restricted\": the node agent needs "
            "\"privileged\"") in refused.stderr, refused.stderr
    assert f"kubectl label namespace {RESTRICTED} pod-security.kubernetes.io/enforce=privileged --overwrite" in refused.stderr
    with pytest.raises(ApiError) as none:
        admin.get(f"/apis/apps/v1/namespaces/{RESTRICTED}/deployments/tessera-scheduler")
    assert none.value.status == 404

    # Why: the apiserver refuses the agent's pods there, and accepts the scheduler's.
    docs = helm_template(helm, namespace=RESTRICTED)

    def dry_run(kind: str, name: str) -> None:
        template = find(docs, kind, name)["spec"]["template"]
        admin.create(f"/api/v1/namespaces/{RESTRICTED}/pods?dryRun=All", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{name}-dry-run", "namespace": RESTRICTED},
            "spec": {**template["spec"], "nodeName": "dry-run-node"}})

    with pytest.raises(ApiError) as forbidden:
        dry_run("DaemonSet", "tessera-agent")
    assert forbidden.value.status == 403 and "violates PodSecurity \"restricted:latest\"" in forbidden.value.message
    dry_run("Deployment", "tessera-scheduler")

    without_agent = run_helm(helm, "install", *helm_template_args({"agent": {"enabled": False}}, tmp_path, RESTRICTED),
                             kubeconfig=plane.kubeconfig)
    try:
        assert without_agent.returncode == 0, without_agent.stderr
        assert admin.get(f"/apis/apps/v1/namespaces/{RESTRICTED}/deployments/tessera-scheduler")
    finally:
        run_helm(helm, "uninstall", "tessera", "--namespace", RESTRICTED, kubeconfig=plane.kubeconfig)


def test_helm_upgrade_rolls_the_scheduler_only_when_its_configuration_changes(
        fresh_plane: LocalControlPlane, helm: Path, tmp_path: Path) -> None:
    """The scheduler reads its configuration once, at start-up: a `helm upgrade` that changes it
    must change the pod template (a rollout), and one that changes nothing must not restart it.
    Upgrades between one and two replicas (leader election off and on) apply."""
    plane, admin = fresh_plane, fresh_plane.admin
    namespace = "gpu-upgrade"
    deployment = f"/apis/apps/v1/namespaces/{namespace}/deployments/tessera-scheduler"

    def helm_run(verb: str, values: dict[str, Any] | None) -> None:
        done = run_helm(helm, verb, *helm_template_args(values, tmp_path, namespace), "--create-namespace",
                        kubeconfig=plane.kubeconfig)
        assert done.returncode == 0, done.stderr

    def template() -> tuple[int, dict[str, Any]]:
        live = admin.get(deployment)
        return live["metadata"]["generation"], live["spec"]["template"]

    try:
        helm_run("install", None)
        generation, installed = template()
        helm_run("upgrade", None)
        assert template() == (generation, installed), "an upgrade that changes nothing restarted the scheduler"
        helm_run("upgrade", {"schedulerConfig": {"podMaxBackoffSeconds": 60}})
        new_generation, upgraded = template()
        assert new_generation == generation + 1
        assert (upgraded["metadata"]["annotations"]["checksum/config"]
                != installed["metadata"]["annotations"]["checksum/config"])
        config = admin.get(f"/api/v1/namespaces/{namespace}/configmaps/tessera-scheduler-config")["data"]["config.yaml"]
        assert "podMaxBackoffSeconds: 60" in config
        # One replica without leader election: the strategy becomes Recreate (its rollingUpdate
        # must go, which the apiserver checks), and the Lease's Role goes; and back again.
        helm_run("upgrade", {"scheduler": {"replicas": 1}, "leaderElection": {"enabled": False}})
        assert admin.get(deployment)["spec"]["strategy"] == {"type": "Recreate"}
        with pytest.raises(ApiError) as gone:
            admin.get(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles/tessera-scheduler-leader-election")
        assert gone.value.status == 404
        # (Not `upgrade` without values: Helm then reuses the release's last values.) Leader
        # election on under a running replica would run two schedulers: no replica first
        helm_run("upgrade", {"scheduler": {"replicas": 0}, "leaderElection": {"enabled": False}})
        helm_run("upgrade", {"scheduler": {"replicas": 2}, "leaderElection": {"enabled": True}})
        assert admin.get(deployment)["spec"]["strategy"] == {
            "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
        assert admin.get(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles/tessera-scheduler-leader-election")
    finally:
        run_helm(helm, "uninstall", "tessera", "--namespace", namespace, kubeconfig=plane.kubeconfig)


def test_an_upgrade_that_would_run_two_leaders_is_refused_while_the_old_scheduler_runs(
        fresh_plane: LocalControlPlane, helm: Path, tmp_path: Path) -> None:
    """A `helm upgrade` that moves the scheduler to another Lease (a new `leaderElection.resourceName`),
    or turns leader election on under a running replica, rolls new pods in beside the old ones
    (maxSurge 1): the new pods lead on the new Lease while the old leader still leads on the old
    one, or schedules with no Lease at all — two schedulers, one GPU given to two pods (a day-2
    trial saw 9 GPUs in use on an 8-GPU node). The chart refuses such an upgrade while the old
    Deployment has replicas, naming the two steps deploy/README gives; scaled to 0 first, it goes."""
    plane, admin = fresh_plane, fresh_plane.admin
    namespace = "gpu-lease"
    deployment = f"/apis/apps/v1/namespaces/{namespace}/deployments/tessera-scheduler"

    def helm_run(verb: str, values: dict[str, Any] | None) -> subprocess.CompletedProcess[str]:
        return run_helm(helm, verb, *helm_template_args(values, tmp_path, namespace), "--create-namespace",
                        kubeconfig=plane.kubeconfig)

    try:
        assert helm_run("install", None).returncode == 0
        moved = helm_run("upgrade", {"leaderElection": {"resourceName": "tessera-v2"}})
        assert moved.returncode != 0
        assert ("leaderElection: the Lease moves from gpu-lease/tessera to gpu-lease/tessera-v2 while "
                "scheduler replicas run") in moved.stderr
        assert "scheduler.replicas=0" in moved.stderr and "%!" not in moved.stderr
        config = admin.get(f"/api/v1/namespaces/{namespace}/configmaps/tessera-scheduler-config")["data"]["config.yaml"]
        assert "resourceName: tessera\n" in config  # nothing changed
        # the documented way: no scheduler first, then the new Lease
        assert helm_run("upgrade", {"scheduler": {"replicas": 0}}).returncode == 0
        assert admin.get(deployment)["spec"]["replicas"] == 0
        done = helm_run("upgrade", {"leaderElection": {"resourceName": "tessera-v2"}})
        assert done.returncode == 0, done.stderr
        assert admin.get(deployment)["spec"]["replicas"] == 2
        # one replica without leader election, then leader election on under it: refused too
        assert helm_run("upgrade", {"scheduler": {"replicas": 1}, "leaderElection": {"enabled": False}}).returncode == 0
        elected = helm_run("upgrade", {"scheduler": {"replicas": 2}, "leaderElection": {"enabled": True}})
        assert elected.returncode != 0
        assert "leaderElection: the Lease moves from none (leader election off) to gpu-lease/tessera" in elected.stderr
        # values that keep the Lease are no move: the same upgrade with replicas unchanged and a weight
        same = helm_run("upgrade", {"scheduler": {"replicas": 1}, "leaderElection": {"enabled": False},
                                    "schedulerConfig": {"podMaxBackoffSeconds": 60}})
        assert same.returncode == 0, same.stderr
    finally:
        run_helm(helm, "uninstall", "tessera", "--namespace", namespace, kubeconfig=plane.kubeconfig)


def test_an_install_made_with_kubectl_apply_k_moves_to_helm_as_deploy_readme_says(
        fresh_plane: LocalControlPlane, helm: Path, tmp_path: Path) -> None:
    """The chart renders the tree's objects so that one can replace the other, but Helm refuses
    to take over objects it did not create ("invalid ownership metadata"): a team that started
    with `kubectl apply -k deploy/` had no way to `helm upgrade` later. deploy/README.md's
    `kubectl label -k` / `kubectl annotate -k` commands mark the objects as the release's, and
    the install then adopts them. No kubectl binary here (tests/deploy_manifests.py): the tree is
    applied server-side (`kubectl apply --server-side -k deploy/`) and the README's labels and
    annotations are set with the merge patch `kubectl label/annotate` send, on every object the
    kustomization lists."""
    plane, admin = fresh_plane, fresh_plane.admin
    docs = deploy_documents()
    apply_documents(admin, docs)
    try:
        refused = run_helm(helm, "install", *helm_template_args(None, tmp_path, SYSTEM_NAMESPACE),
                           kubeconfig=plane.kubeconfig)
        assert refused.returncode != 0 and "invalid ownership metadata" in refused.stderr, refused.stderr
        label, annotate = _readme_commands("kubectl label -k deploy/", "kubectl annotate -k deploy/")
        metadata = {"labels": _assignments(label), "annotations": _assignments(annotate)}
        assert metadata["labels"] == {"app.kubernetes.io/managed-by": "Helm"}
        discovery = Discovery(admin)
        for doc in docs:
            admin.merge_patch(discovery.url(doc), {"metadata": metadata})
        installed = run_helm(helm, "install", *helm_template_args(None, tmp_path, SYSTEM_NAMESPACE),
                             kubeconfig=plane.kubeconfig)
        assert installed.returncode == 0, installed.stderr
        deployment = admin.get(f"/apis/apps/v1/namespaces/{SYSTEM_NAMESPACE}/deployments/tessera-scheduler")
        assert deployment["metadata"]["labels"]["app.kubernetes.io/instance"] == "tessera"
        assert "checksum/config" in deployment["spec"]["template"]["metadata"]["annotations"]
        # The Namespace (and its Pod Security label) stays, outside the release.
        namespace = admin.get(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}")
        assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    finally:
        run_helm(helm, "uninstall", "tessera", "--namespace", SYSTEM_NAMESPACE, kubeconfig=plane.kubeconfig)


def _readme_commands(*prefixes: str) -> list[list[str]]:
    """The shell commands of deploy/README.md that start with each of `prefixes` (one each), split
    as the shell would."""
    lines = (DEPLOY / "README.md").read_text().replace("\\\n", " ").splitlines()
    found = []
    for prefix in prefixes:
        (command,) = [shlex.split(line) for line in lines if line.strip().startswith(prefix)]
        found.append(command)
    return found


def _assignments(command: list[str]) -> dict[str, str]:
    """The KEY=VALUE arguments of a `kubectl label|annotate` command."""
    return dict(arg.split("=", 1) for arg in command if "=" in arg and not arg.startswith("-"))


def test_a_second_release_on_the_same_cluster_is_refused_and_the_first_keeps_working(
        fresh_plane: LocalControlPlane, helm: Path, tmp_path: Path) -> None:
    """Two Tessera installs on the same GPU nodes would be two schedulers, each with its own
    Lease, each giving a GPU the other gave (the promise broken). The chart's cluster-scoped
    objects have fixed names (ClusterRole and ClusterRoleBinding tessera-scheduler, rendered with
    every set of values), so Helm refuses a second release, in another namespace or under another
    name ("invalid ownership metadata"), but not with `--take-ownership`, which skips that check:
    the chart itself refuses a release while another owns the ClusterRole (its `lookup`), before
    anything is created. deploy/README.md says "one release per cluster". The first release is
    left as it was: its ClusterRoleBinding still grants its own ServiceAccount."""
    plane, admin = fresh_plane, fresh_plane.admin
    first, second = "gpu-first", "gpu-second"
    binding = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/tessera-scheduler"

    def install(release: str, namespace: str, *flags: str) -> subprocess.CompletedProcess[str]:
        # with the optional cluster-scoped objects off: the scheduler's ClusterRole alone refuses it
        values = {"agent": {"enabled": False}, "admissionPolicy": {"enabled": False},
                  "gpuPodPolicy": {"enabled": False}, "userRoles": {"enabled": False}}
        args = helm_template_args(values if namespace == second else None, tmp_path, namespace)
        return run_helm(helm, "install", release, *args[1:], "--create-namespace", *flags, kubeconfig=plane.kubeconfig)

    def may_bind(namespace: str) -> bool:
        review = admin.create("/apis/authorization.k8s.io/v1/subjectaccessreviews", {
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": f"system:serviceaccount:{namespace}:tessera-scheduler",
                     "resourceAttributes": {"verb": "create", "resource": "pods", "subresource": "binding",
                                            "namespace": "default"}}})
        return bool(review["status"].get("allowed"))

    try:
        installed = install("tessera", first)
        assert installed.returncode == 0, installed.stderr
        subjects = admin.get(binding)["subjects"]
        assert may_bind(first)
        # Another namespace, another name in the same namespace, and Helm 3.17's --take-ownership,
        # which skips Helm's own ownership check (how objects made without Helm are adopted: it
        # took the ClusterRoleBinding for the second release's ServiceAccount and ran a second
        # scheduler): the chart refuses each while another release owns the ClusterRole.
        for release, namespace, *flags in (("tessera", second), ("tessera-b", first),
                                           ("tessera", second, "--take-ownership")):
            refused = install(release, namespace, *flags)
            assert refused.returncode != 0, refused.stdout
            assert (f"another Tessera release (tessera in {first}) owns ClusterRole tessera-scheduler: one "
                    "release per cluster") in refused.stderr, refused.stderr
        with pytest.raises(ApiError) as none:
            admin.get(f"/apis/apps/v1/namespaces/{second}/deployments/tessera-scheduler")
        assert none.value.status == 404, "the refused release created its scheduler"
        assert admin.get(binding)["subjects"] == subjects
        assert may_bind(first) and not may_bind(second)
        status = run_helm(helm, "status", "tessera", "--namespace", first, "-o", "json", kubeconfig=plane.kubeconfig)
        assert orjson.loads(status.stdout)["info"]["status"] == "deployed", status.stderr
    finally:
        for release, namespace in (("tessera-b", first), ("tessera", second), ("tessera", first)):
            run_helm(helm, "uninstall", release, "--namespace", namespace, kubeconfig=plane.kubeconfig)
