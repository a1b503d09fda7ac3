"""deploy/ on the real kube-apiserver: every manifest applies, and the scheduler schedules with
nothing but the permissions its ServiceAccount is given there (issue 4, "Tests on the local
control plane").

Why this way:
- The manifests are read from ``deploy/kustomization.yaml``'s ``resources`` and ``images``
  (tests/deploy_manifests.py, no kubectl), so a file that is missing from the kustomization is
  never installed by a user either, and is caught by tests/unit/test_dockerfile.py.
- Server-side apply against the real apiserver runs the real schema validation, defaulting,
  CEL rules (CRDs and the admission policy compile) and admission of every object. The workloads'
  pod templates are additionally dry-run created as Pods, which runs the Pod validation and the
  Pod Security and Priority admission that a Deployment object alone never meets (no
  controllers create pods here).
- The scheduler runs as a child process (``python -m scheduler run``) with a kubeconfig holding a
  TokenRequest token of ``tessera-system/tessera-scheduler`` and the configuration taken from the
  deploy ConfigMap: exactly what the Deployment gives it in a cluster, minus the kubelet.
- The same run also checks what issue 6 asks of the endpoints and logs: no token or key material.

The helpers at the top are shared with test_rbac.py and test_admission_policy.py.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import re
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import aiohttp
import orjson
import pytest
import yaml

from scheduler.core import annotations as ann
from scheduler.kube.controlplane import LocalControlPlane
from scheduler.kube.controlplane.crds import wait_established
from scheduler.kube.controlplane.kubeconfig import write_kubeconfig
from scheduler.kube.controlplane.rest import ApiError, RestClient
from scheduler.sim import builders as b
from tests.deploy_manifests import DEPLOY, deploy_documents, load_documents
from tests.e2e.live import Kube, TesseraProcess, bound_nodes, eventually

SYSTEM_NAMESPACE = "tessera-system"
SCHEDULER_SA = "tessera-scheduler"
AGENT_SA = "tessera-agent"
FIELD_MANAGER = "tessera-e2e"
POLICY = "tessera-annotations"
GPU_POD_POLICY = "tessera-gpu-pods"
VAP_PATH = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
VAP_BINDING_PATH = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"
TFJOB_CRD = "tfjobs.kubeflow.org"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

Obj = dict[str, Any]


# --- reading deploy/ (the kustomize tree: tests/deploy_manifests.py) ---------------------------


def find(docs: list[Obj], kind: str, name: str) -> Obj:
    for doc in docs:
        if doc.get("kind") == kind and doc["metadata"]["name"] == name:
            return doc
    raise KeyError(f"no {kind} {name} in deploy/")


def scheduler_config_text() -> str:
    """The configuration file the Deployment mounts (the ConfigMap's config.yaml)."""
    configmap = find(deploy_documents(), "ConfigMap", "tessera-scheduler-config")
    return str(configmap["data"]["config.yaml"])


def write_scheduler_config(path: Path, *, leader_elect: bool | None = None) -> Path:
    """The deploy ConfigMap's configuration as a file; optionally with leader election switched."""
    text = scheduler_config_text()
    if leader_elect is not None:
        config = yaml.safe_load(text)
        config["leaderElection"]["leaderElect"] = leader_elect
        text = yaml.safe_dump(config, sort_keys=False)
    path.write_text(text)
    return path


# --- applying objects ------------------------------------------------------------------------


class Discovery:
    """(apiVersion, kind) -> (plural, namespaced), read from the apiserver's discovery documents,
    so every kind in deploy/ is applied to the URL the apiserver itself names (no kind table here
    to drift from the manifests)."""

    def __init__(self, admin: RestClient) -> None:
        self.admin = admin
        self._cache: dict[str, dict[str, tuple[str, bool]]] = {}

    def resource(self, api_version: str, kind: str) -> tuple[str, bool]:
        if api_version not in self._cache:
            path = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
            found = self.admin.get(path)
            self._cache[api_version] = {r["kind"]: (r["name"], bool(r["namespaced"]))
                                        for r in found.get("resources", []) if "/" not in r["name"]}
        try:
            return self._cache[api_version][kind]
        except KeyError:
            raise AssertionError(f"the apiserver does not serve {kind} in {api_version}") from None

    def url(self, obj: Obj, namespace: str | None = None) -> str:
        plural, namespaced = self.resource(obj["apiVersion"], obj["kind"])
        group_path = f"/api/{obj['apiVersion']}" if "/" not in obj["apiVersion"] else f"/apis/{obj['apiVersion']}"
        name = quote(obj["metadata"]["name"], safe="")
        if not namespaced:
            return f"{group_path}/{plural}/{name}"
        ns = obj["metadata"].get("namespace") or namespace
        if not ns:
            raise AssertionError(f"{obj['kind']} {name} is namespaced but has no namespace")
        return f"{group_path}/namespaces/{ns}/{plural}/{name}"


def apply_documents(admin: RestClient, docs: list[Obj], namespace: str | None = None) -> list[Obj]:
    """Server-side apply each document in order; a CRD is waited for until it is served, so the
    documents after it may use it. Returns the apiserver's answers."""
    discovery = Discovery(admin)
    applied = []
    for doc in docs:
        obj = json.loads(json.dumps(doc))  # a copy we may touch
        if namespace and discovery.resource(obj["apiVersion"], obj["kind"])[1]:
            obj["metadata"].setdefault("namespace", namespace)
        try:
            applied.append(admin.apply(discovery.url(obj, namespace), obj, field_manager=FIELD_MANAGER))
        except ApiError as err:
            raise AssertionError(f"{obj['kind']} {obj['metadata']['name']} does not apply: {err}") from None
        if obj["kind"] == "CustomResourceDefinition":
            wait_crd_served(admin, obj)
    return applied


def wait_crd_served(admin: RestClient, crd: Obj, timeout: float = 60.0) -> None:
    """Until the CRD is Established (right after a create its `status.conditions` can still be
    null) and then as controlplane.crds.wait_established: until its resource answers a LIST."""
    path = f"{CRD_PATH}/{crd['metadata']['name']}"
    deadline = time.monotonic() + timeout
    while True:
        conditions = (admin.get(path).get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"CRD {crd['metadata']['name']} was not Established within {timeout:.0f} s")
        time.sleep(0.1)
    wait_established(admin, crd, timeout=max(1.0, deadline - time.monotonic()))


def install_deploy(plane: LocalControlPlane) -> list[Obj]:
    """Apply everything `kubectl apply -k deploy/` would, in the kustomization's order."""
    return apply_documents(plane.admin, deploy_documents())


def remove_admission_policy(admin: RestClient) -> None:
    """The policies are cluster-wide and the control plane is shared by the whole session: remove
    them when a module is done so later tests' identities and GPU pods are not held to them."""
    for policy in (POLICY, GPU_POD_POLICY):
        admin.delete(f"{VAP_BINDING_PATH}/{policy}")
        admin.delete(f"{VAP_PATH}/{policy}")
    # the apiserver drops a deleted policy from its cache a moment later: until then the GPU pod
    # policy still refuses the admin's own pods that stand in for bound ones (spec.nodeName and a
    # class), which the next module creates at once (a run in three failed so)
    probe = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gpu-policy-gone"},
             "spec": {"nodeName": "no-such-node", "containers": [{
                 "name": "main", "image": "busybox",
                 "resources": {"limits": {"class.tessera.dev/probe": "1"}}}]}}
    deadline = time.monotonic() + 30
    while True:
        try:
            admin.create("/api/v1/namespaces/default/pods?dryRun=All", probe)
            return
        except ApiError as err:
            if err.status != 403 or GPU_POD_POLICY not in err.message or time.monotonic() > deadline:
                raise
        time.sleep(0.2)


# --- identities --------------------------------------------------------------------------------


def service_account_token(admin: RestClient, namespace: str, name: str, *, bound_pod: Obj | None = None,
                          seconds: int = 3600) -> str:
    """A token from the TokenRequest API (what the kubelet mounts into a pod). Bound to a pod, the
    token carries the pod's node in `authentication.kubernetes.io/node-name`, as a DaemonSet
    pod's token does."""
    spec: Obj = {"expirationSeconds": seconds}
    if bound_pod is not None:
        spec["boundObjectRef"] = {"kind": "Pod", "apiVersion": "v1", "name": bound_pod["metadata"]["name"],
                                  "uid": bound_pod["metadata"]["uid"]}
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
    answer = admin.create(f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", body)
    return str(answer["status"]["token"])


def token_kubeconfig(plane: LocalControlPlane, path: Path, user: str, token: str) -> Path:
    return write_kubeconfig(path, server=plane.server, ca_pem=plane.ca_file.read_bytes(), user=user, token=token)


def agent_token_for_node(admin: RestClient, node: str) -> str:
    """A tessera-agent token bound to a stand-in agent pod on `node` (the DaemonSet's pod there)."""
    name = f"tessera-agent-{node}"[:63].rstrip("-")
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": SYSTEM_NAMESPACE,
                        "labels": {"app.kubernetes.io/name": "tessera", "tessera.dev/e2e-stand-in": "true"}},
           "spec": {"serviceAccountName": AGENT_SA, "nodeName": node,
                    "containers": [{"name": "agent", "image": "tessera:0.1.0"}]}}
    path = f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/pods"
    try:
        created = admin.create(path, pod)
    except ApiError as err:
        if err.status != 409:
            raise
        created = admin.get(f"{path}/{name}")
    return service_account_token(admin, SYSTEM_NAMESPACE, AGENT_SA, bound_pod=created)


def call_as(plane: LocalControlPlane, token: str, method: str, path: str, body: Any = None,
            content_type: str = "application/json") -> tuple[int, str]:
    """One request with a bearer token; returns (status, body). A watch that is accepted answers
    200 at once and is closed without reading its stream."""
    url = urlsplit(plane.server)
    context = ssl.create_default_context(cafile=str(plane.ca_file))
    conn = http.client.HTTPSConnection(url.hostname or "127.0.0.1", url.port, context=context, timeout=15)
    try:
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        if response.status == 200 and "watch=" in path:
            return 200, ""
        return response.status, response.read().decode(errors="replace")
    finally:
        conn.close()


def forbidden_by_rbac(status: int, body: str) -> bool:
    """403 from the authorizer (not from admission): its message says who `cannot` do what."""
    return status == 403 and " cannot " in body


# --- secrets in output -----------------------------------------------------------------------

_SECRET_PATTERNS = [
    re.compile(r"eyJ[A-Za-z0-9_-]{10,}\.eyJ"),  # a JWT (every ServiceAccount token is one)
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    re.compile(r"(?i)authorization:\s*bearer"),
    re.compile(r"(?i)client-key-data|client-certificate-data|certificate-authority-data"),
]


def assert_no_secrets(where: str, text: str, secrets: list[str]) -> None:
    """No literal secret, nor anything shaped like a token, key or kubeconfig credential."""
    for secret in secrets:
        for piece in (secret, secret[:24], secret[-24:]):
            assert piece not in text, f"{where} contains (part of) a credential"
    for pattern in _SECRET_PATTERNS:
        match = pattern.search(text)
        if match is not None:
            context = text[max(0, match.start() - 80):match.end() + 20]
            raise AssertionError(f"{where} contains {pattern.pattern!r}: {context!r}")


async def fetch(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session:
        async with session.get(url) as response:
            return response.status, await response.text()


# --- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def deployed(control_plane: LocalControlPlane) -> Iterator[LocalControlPlane]:
    """deploy/ installed on the session's control plane; the admission policy removed afterwards."""
    install_deploy(control_plane)
    try:
        yield control_plane
    finally:
        remove_admission_policy(control_plane.admin)
        control_plane.admin.request("DELETE", f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/pods"
                                    "?labelSelector=tessera.dev%2Fe2e-stand-in%3Dtrue&gracePeriodSeconds=0")


# --- tests -----------------------------------------------------------------------------------------


def test_every_manifest_applies_server_side(deployed: LocalControlPlane) -> None:
    admin = deployed.admin
    discovery = Discovery(admin)
    docs = deploy_documents()
    kinds = {doc["kind"] for doc in docs}
    assert {"CustomResourceDefinition", "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
            "RoleBinding", "ConfigMap", "Deployment", "DaemonSet", "PodDisruptionBudget", "Service",
            "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} <= kinds
    for doc in docs:
        live = admin.get(discovery.url(doc))
        managers = {entry.get("manager") for entry in live["metadata"].get("managedFields", [])}
        assert FIELD_MANAGER in managers, f"{doc['kind']} {doc['metadata']['name']} was not applied by us"
    # Applying a second time changes nothing (the manifests are stable under server-side apply).
    before = {discovery.url(d): admin.get(discovery.url(d))["metadata"]["resourceVersion"] for d in docs}
    install_deploy(deployed)
    after = {discovery.url(d): admin.get(discovery.url(d))["metadata"]["resourceVersion"] for d in docs}
    assert before == after
    # The admission policy's CEL was compiled when it was created (a syntax or function error is
    # a 422 above); that it enforces what it says is test_admission_policy.py's job.


def test_workload_pod_templates_pass_pod_validation_and_admission(deployed: LocalControlPlane) -> None:
    """No controller turns the Deployment and DaemonSet into pods here: dry-run create their pod
    templates as Pods, which runs Pod validation, Pod Security admission (the namespace's level)
    and the Priority admission (priorityClassName must resolve)."""
    dry_run_pod_templates(deployed.admin, deploy_documents())


def dry_run_pod_templates(admin: RestClient, docs: list[Obj], namespace: str = SYSTEM_NAMESPACE) -> None:
    """Dry-run create the scheduler Deployment's and the agent DaemonSet's pod templates as Pods."""
    for kind, name in (("Deployment", "tessera-scheduler"), ("DaemonSet", "tessera-agent")):
        template = find(docs, kind, name)["spec"]["template"]
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"{name}-dry-run", "namespace": namespace,
                            "labels": template["metadata"]["labels"]},
               "spec": {**template["spec"], "nodeName": "dry-run-node"}}
        created = admin.create(f"/api/v1/namespaces/{namespace}/pods?dryRun=All", pod)
        assert created["spec"]["serviceAccountName"] == template["spec"]["serviceAccountName"]
        assert created["spec"]["priority"] >= 2_000_000_000, "critical priority class resolved"


TFJOB_CRD_STUB: Obj = {
    # Kubeflow's training operator is not installed here. A stub CRD for the same group, version
    # and kind that keeps unknown fields lets the apiserver accept and store the example as a
    # user's cluster would; the part Tessera cares about, the pod templates, is then checked as
    # real Pods below. (The real TFJob CRD embeds the full PodTemplateSpec schema, 1 MB of YAML.)
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": TFJOB_CRD},
    "spec": {"group": "kubeflow.org", "scope": "Namespaced",
             "names": {"kind": "TFJob", "plural": "tfjobs", "singular": "tfjob", "listKind": "TFJobList"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                                        "required": ["tfReplicaSpecs"],
                                        "properties": {"tfReplicaSpecs": {
                                            "type": "object", "x-kubernetes-preserve-unknown-fields": True}}},
                               "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]},
}


def test_examples_apply(deployed: LocalControlPlane, namespace: str) -> None:
    admin = deployed.admin
    examples = {path.name: load_documents(path) for path in sorted((DEPLOY / "examples").glob("*.yaml"))}
    assert set(examples) >= {"gang-job.yaml", "tfjob-seed1.yaml", "resourceclasses.yaml", "shared-class.yaml",
                             "shared-pod.yaml", "quota.yaml", "pod.yaml", "preemption-batch.yaml",
                             "preemption-urgent.yaml"}
    apply_documents(admin, [TFJOB_CRD_STUB])
    classes = [doc for docs in examples.values() for doc in docs if doc["kind"] == "ResourceClass"]
    # the preemption walk-through fills GPUs on purpose: a namespace of its own, clear of quota.yaml's
    apart = f"{namespace}-preemption"
    admin.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": apart}})
    try:
        for name, docs in examples.items():
            apply_documents(admin, docs, apart if name.startswith("preemption-") else namespace)
        # The TFJob's pod templates are real pod specs: dry-run them as Pods of the namespace.
        tfjob = examples["tfjob-seed1.yaml"][0]
        for role, replica in tfjob["spec"]["tfReplicaSpecs"].items():
            template = replica["template"]
            assert template["spec"]["schedulerName"] == "tessera"
            assert template["metadata"]["labels"]["pod-group.scheduling.sigs.k8s.io/min-available"] == "5"
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": f"tf-smoke-gpu-{role.lower()}-0", **template["metadata"]},
                   "spec": template["spec"]}
            admin.create(f"/api/v1/namespaces/{namespace}/pods?dryRun=All", pod)
        # Quota per class: the apiserver counts the class resources.
        quota = admin.get(f"/api/v1/namespaces/{namespace}/resourcequotas/gpu-classes")
        assert "requests.class.tessera.dev/v100-32g" in quota["spec"]["hard"]
        for cls in classes:
            live = admin.get(f"/apis/tessera.dev/v1alpha1/resourceclasses/{cls['metadata']['name']}")
            assert live["spec"].get("resourceName", f"class.tessera.dev/{cls['metadata']['name']}")
    finally:
        for cls in classes:
            admin.delete(f"/apis/tessera.dev/v1alpha1/resourceclasses/{cls['metadata']['name']}")
        admin.delete(f"{CRD_PATH}/{TFJOB_CRD}")
        # its pods first and the namespace gone before the next test's scheduler starts: a pending
        # pod in a terminating namespace would meet a Binding refused as forbidden
        admin.request("DELETE", f"/api/v1/namespaces/{apart}/pods?gracePeriodSeconds=0", ok=(200, 404))
        admin.request("DELETE", f"/apis/batch/v1/namespaces/{apart}/jobs?propagationPolicy=Background", ok=(200, 404))
        admin.delete(f"/api/v1/namespaces/{apart}")
        deadline = time.monotonic() + 60
        while admin.request_raw("GET", f"/api/v1/namespaces/{apart}")[0] == 200 and time.monotonic() < deadline:
            time.sleep(0.2)


async def _agent_marks_allocated(deployed: LocalControlPlane, token: str, namespace: str, node: str,
                                 stop: asyncio.Event, marked: list[str]) -> None:
    """Play the node agent's part with the agent's own credentials: PATCH `tessera.dev/phase:
    Allocated` onto this node's pods that are Allocating (its RBAC + the admission policy); the
    names it marked go into `marked` as it goes."""
    while not stop.is_set():
        status, body = await asyncio.to_thread(
            call_as, deployed, token, "GET",
            f"/api/v1/namespaces/{namespace}/pods?fieldSelector=spec.nodeName%3D{node}")
        assert status == 200, body
        for pod in json.loads(body)["items"]:
            annotations = pod["metadata"].get("annotations") or {}
            if annotations.get(ann.PHASE) == "Allocating":
                patch = {"metadata": {"annotations": {ann.PHASE: "Allocated"}}}
                status, answer = await asyncio.to_thread(
                    call_as, deployed, token, "PATCH", f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}",
                    patch, "application/merge-patch+json")
                assert status == 200, answer
                marked.append(pod["metadata"]["name"])
        await asyncio.sleep(0.2)


async def test_scheduler_schedules_with_its_service_account(deployed: LocalControlPlane, clean_cluster: LocalControlPlane,
                                                            kubectl: Kube, namespace: str, tmp_path: Path) -> None:
    admin = deployed.admin
    admin.delete(f"/apis/coordination.k8s.io/v1/namespaces/{SYSTEM_NAMESPACE}/leases/tessera")
    token = service_account_token(admin, SYSTEM_NAMESPACE, SCHEDULER_SA)
    kubeconfig = token_kubeconfig(deployed, tmp_path / "scheduler.kubeconfig", SCHEDULER_SA, token)
    config = write_scheduler_config(tmp_path / "config.yaml")
    apply_documents(admin, load_documents(DEPLOY / "examples" / "resourceclasses.yaml"))
    (node,) = deployed.add_fake_gpu_nodes(1, 4, "V100", memory="32Gi", prefix="deploy-v100")
    agent_token = agent_token_for_node(admin, node)

    process = TesseraProcess(kubeconfig, config, tmp_path, name="deployed")
    process.start()
    stop_agent = asyncio.Event()
    marked: list[str] = []
    agent = asyncio.create_task(_agent_marks_allocated(deployed, agent_token, namespace, node, stop_agent, marked))
    try:
        await process.wait_ready(30)
        base = f"http://127.0.0.1:{process.port}"
        await eventually(lambda: _leading(base), 30)

        for i in range(2):
            await kubectl.create_pod(namespace, b.pod(f"plain-{i}", limits={"nvidia.com/gpu": 1}))
            await kubectl.create_pod(namespace, b.pod(f"class-{i}", limits={"class.tessera.dev/v100-32g": 1}))
        await kubectl.create(f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups",
                             b.podgroup("pg", 2, namespace))
        for i in range(2):
            await kubectl.create_pod(namespace, b.pod(f"member-{i}", requests={"cpu": "1"},
                                                      labels={"scheduling.x-k8s.io/pod-group": "pg"}))
        await kubectl.create_pod(namespace, b.pod("too-big", limits={"nvidia.com/gpu": 8}))

        expected = {f"{kind}-{i}" for kind in ("plain", "class", "member") for i in range(2)}

        async def all_bound() -> dict[str, str]:
            nodes = await bound_nodes(kubectl, namespace)
            return nodes if all(nodes.get(name) == node for name in expected) else {}

        await eventually(all_bound, 30)
        pods = await kubectl.pods(namespace)
        for name in ("class-0", "class-1"):
            devices = orjson.loads(pods[name]["metadata"]["annotations"][ann.DEVICES])
            assert devices["containers"]["main"]["class.tessera.dev/v100-32g"][0]["id"].startswith("GPU-")

        # Scheduled events (events create), the unschedulable pod's condition (pods/status patch),
        # the PodGroup phase (podgroups/status patch), the class status (resourceclasses/status).
        events = await eventually(lambda: _scheduled_events(kubectl, namespace, expected), 20)
        assert all(e["reportingController"] == "tessera" for e in events)
        await eventually(lambda: _unschedulable(kubectl, namespace, "too-big"), 20)
        await eventually(lambda: _podgroup_phase(kubectl, namespace, "pg", "Scheduling"), 20)  # bound, not running
        cls = await eventually(lambda: _class_matching(kubectl, "v100-32g"), 20)
        assert cls["status"]["matchingDevices"] == 4

        async def class_pods_marked() -> bool:  # the agent's credentials may mark them Allocated
            return {"class-0", "class-1"} <= set(marked)

        await eventually(class_pods_marked, 20)

        # Issue 6: nothing sensitive on the probe and metrics endpoints, nor in the logs.
        for path in ("/metrics", "/healthz", "/readyz", "/livez"):
            status, text = await fetch(base + path)
            assert status == 200, (path, status)
            assert_no_secrets(path, text, [token, agent_token, deployed.admin_token])
    finally:
        stop_agent.set()
        await agent
        code = process.terminate()
        for cls_doc in load_documents(DEPLOY / "examples" / "resourceclasses.yaml"):
            admin.delete(f"/apis/tessera.dev/v1alpha1/resourceclasses/{cls_doc['metadata']['name']}")
        deployed.remove_fake_gpu_nodes([node])
    assert code == 0, process.log()
    log = process.log_path.read_text(errors="replace")
    assert "forbidden" not in log.lower(), "the ServiceAccount lacked a permission:\n" + process.log()
    assert_no_secrets("the scheduler log", log, [token, agent_token, deployed.admin_token])
    lease = admin.get(f"/apis/coordination.k8s.io/v1/namespaces/{SYSTEM_NAMESPACE}/leases/tessera")
    assert not lease["spec"].get("holderIdentity"), "the Lease was released on SIGTERM"


async def _leading(base: str) -> bool:
    _, text = await fetch(base + "/metrics")
    return bool(re.search(r"^tessera_leader 1(\.0)?$", text, re.M))


async def _scheduled_events(kubectl: Kube, namespace: str, names: set[str]) -> list[Obj]:
    events = [e for e in await kubectl.events(namespace) if e["reason"] == "Scheduled"]
    return events if {e["regarding"]["name"] for e in events} >= names else []


async def _unschedulable(kubectl: Kube, namespace: str, name: str) -> bool:
    pod = (await kubectl.pods(namespace))[name]
    conditions = {c["type"]: c for c in pod["status"].get("conditions", [])}
    cond = conditions.get("PodScheduled")
    failed = [e for e in await kubectl.events(namespace)
              if e["reason"] == "FailedScheduling" and e["regarding"]["name"] == name]
    return bool(cond and cond["status"] == "False" and cond["reason"] == "Unschedulable" and failed)


async def _podgroup_phase(kubectl: Kube, namespace: str, name: str, phase: str) -> Obj | None:
    group = (await kubectl.call("GET", f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups/{name}")).json()
    return group if (group.get("status") or {}).get("phase") == phase else None


async def _class_matching(kubectl: Kube, name: str) -> Obj | None:
    cls = (await kubectl.call("GET", f"/apis/tessera.dev/v1alpha1/resourceclasses/{name}")).json()
    return cls if (cls.get("status") or {}).get("matchingDevices") else None
