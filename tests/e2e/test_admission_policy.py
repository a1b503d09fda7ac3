"""The `tessera.dev/*` annotation policy (deploy/admission/annotation-policy.yaml) on the real
apiserver (issues 4 and 6), and the policy that keeps GPU pods Tessera's
(deploy/admission/gpu-pod-policy.yaml, at the end).

The device ledger lives in pod annotations, so whoever can write them can claim GPUs or make the
scheduler hand a GPU out twice. These tests act as each kind of caller, with real credentials:
- a user (client certificate) with edit-like rights on pods in a namespace — and, to show that the
  policy and not merely RBAC stops them, also with `pods/binding`, `bindings` and `pods/status`
  rights, which ordinary users never have;
- the scheduler's ServiceAccount (TokenRequest token), binding through pods/binding, and recording
  `tessera.dev/held-devices` through pods/status;
- the agent's ServiceAccount with a token bound to a pod on a node, as the kubelet mounts it into
  the DaemonSet pod there; and with an unbound token;
- the admin (system:masters), the documented break-glass exemption.

A new ValidatingAdmissionPolicyBinding takes a moment to be enforced: the first check polls with
dry-run creates (admission runs on dry runs) until it is.
"""

from __future__ import annotations

import base64
import secrets
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import pytest
import yaml

from scheduler.kube.controlplane import LocalControlPlane
from scheduler.kube.controlplane.rest import ApiError, RestClient
from scheduler.kube.http import MERGE_PATCH, STRATEGIC_PATCH
from scheduler.sim import builders as b
from tests.deploy_manifests import deploy_documents, helm_binary, helm_template
from tests.e2e.live import creatable
from tests.e2e.test_deploy import (
    AGENT_SA,
    SCHEDULER_SA,
    SYSTEM_NAMESPACE,
    agent_token_for_node,
    apply_documents,
    call_as,
    install_deploy,
    remove_admission_policy,
    service_account_token,
)

DEVICES = "tessera.dev/devices"
PHASE = "tessera.dev/phase"
HELD = "tessera.dev/held-devices"
TERM = "tessera.dev/term"
POLICY_MESSAGE = "tessera.dev/* annotations are written only by the Tessera scheduler"
LEDGER = '{"containers":{},"version":1}'  # a well-formed (empty) device assignment
RBAC = "/apis/rbac.authorization.k8s.io/v1"
USER = "alice"


@dataclass
class Setup:
    plane: LocalControlPlane
    namespace: str
    user: RestClient  # alice, client certificate
    node: str
    other_node: str


def _client(plane: LocalControlPlane, user: str, groups: list[str]) -> RestClient:
    kubeconfig = plane.kubeconfig_for(user, groups)
    directory = kubeconfig.parent
    # RestClient wants files: write the certificate and key the kubeconfig embeds.
    config = yaml.safe_load(kubeconfig.read_text())
    creds = config["users"][0]["user"]
    cert, key = directory / f"{user}.crt", directory / f"{user}.key"
    cert.write_bytes(base64.b64decode(creds["client-certificate-data"]))
    key.touch(mode=0o600)
    key.write_bytes(base64.b64decode(creds["client-key-data"]))
    return RestClient(plane.server, str(plane.ca_file), cert_file=str(cert), key_file=str(key))


@pytest.fixture(scope="module")
def setup(control_plane: LocalControlPlane) -> Iterator[Setup]:
    install_deploy(control_plane)
    admin = control_plane.admin
    namespace = f"vap-{secrets.token_hex(3)}"
    admin.create("/api/v1/namespaces", {"metadata": {"name": namespace, "labels": {"tessera.dev/e2e": "true"}}})
    # Edit-like rights on pods (what the built-in `edit` role gives), plus the rights that let a
    # caller write annotations through the other doors (binding, status): the policy must hold
    # even for a user an admin trusted with those.
    admin.create(f"{RBAC}/namespaces/{namespace}/roles", {
        "metadata": {"name": "pod-editor"},
        "rules": [{"apiGroups": [""], "resources": ["pods"],
                   "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
                  {"apiGroups": [""], "resources": ["pods/binding", "bindings"], "verbs": ["create"]},
                  {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["update", "patch"]}]})
    admin.create(f"{RBAC}/namespaces/{namespace}/rolebindings", {
        "metadata": {"name": "pod-editor"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-editor"},
        "subjects": [{"kind": "User", "name": USER, "apiGroup": "rbac.authorization.k8s.io"}]})
    nodes = control_plane.add_fake_gpu_nodes(2, 1, "T4", memory="16Gi", prefix="vap-t4")
    user = _client(control_plane, USER, ["tessera-e2e-users"])
    try:
        _wait_until_enforced(user, namespace)
        yield Setup(control_plane, namespace, user, nodes[0], nodes[1])
    finally:
        user.close()
        # Bound pods wait for a kubelet to confirm their deletion: force them out (grace 0), or
        # they linger with test annotations that later tests' cluster-wide checks would read.
        admin.request("DELETE", f"/api/v1/namespaces/{namespace}/pods?gracePeriodSeconds=0")
        admin.delete(f"/api/v1/namespaces/{namespace}")
        control_plane.remove_fake_gpu_nodes(nodes)
        admin.request("DELETE", f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/pods"
                      "?labelSelector=tessera.dev%2Fe2e-stand-in%3Dtrue&gracePeriodSeconds=0")
        remove_admission_policy(admin)


def _pod(name: str, namespace: str, annotations: dict[str, str] | None = None, node: str = "") -> dict[str, object]:
    return creatable(b.pod(name, namespace=namespace, annotations=annotations, node_name=node))


def _wait_until_enforced(user: RestClient, namespace: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    path = f"/api/v1/namespaces/{namespace}/pods?dryRun=All"
    while True:
        try:
            user.create(path, _pod("probe", namespace, {DEVICES: "{}"}))
        except ApiError as err:
            if err.status == 403 and POLICY_MESSAGE in err.message:
                return
            if err.status != 403:  # RBAC not there yet answers 403 too, without our message
                raise
        if time.monotonic() > deadline:
            raise AssertionError("the admission policy was not enforced within 30 s")
        time.sleep(0.2)


def _refused_by_policy(err: ApiError, key: str) -> bool:
    return err.status == 403 and POLICY_MESSAGE in err.message and key in err.message


# --- a user ----------------------------------------------------------------------------------------


def test_user_cannot_create_a_pod_with_device_annotations(setup: Setup) -> None:
    ns = setup.namespace
    with pytest.raises(ApiError) as refused:
        setup.user.create(f"/api/v1/namespaces/{ns}/pods", _pod("forged", ns, {DEVICES: '{"version":1,"containers":{}}'}))
    assert _refused_by_policy(refused.value, DEVICES), refused.value.message
    assert f"{USER} may not change {DEVICES} (leave them out of the pod manifest)" in refused.value.message
    with pytest.raises(ApiError) as phase:
        setup.user.create(f"/api/v1/namespaces/{ns}/pods", _pod("forged-phase", ns, {PHASE: "Allocated"}))
    assert _refused_by_policy(phase.value, PHASE)


def test_user_can_create_and_annotate_pods_otherwise(setup: Setup) -> None:
    ns = setup.namespace
    created = setup.user.create(f"/api/v1/namespaces/{ns}/pods", _pod("plain", ns, {"team": "vision"}))
    assert created["metadata"]["annotations"] == {"team": "vision"}
    patched = setup.user.merge_patch(f"/api/v1/namespaces/{ns}/pods/plain",
                                     {"metadata": {"annotations": {"owner": "alice", "tessera.dev.example/x": "y"}}})
    assert patched["metadata"]["annotations"]["owner"] == "alice"


def test_user_cannot_patch_device_annotations_onto_a_pod(setup: Setup) -> None:
    ns = setup.namespace
    setup.user.create(f"/api/v1/namespaces/{ns}/pods", _pod("target", ns))
    for key, value in ((DEVICES, '{"version":1,"containers":{}}'), (PHASE, "Allocated"), ("tessera.dev/new-key", "x")):
        with pytest.raises(ApiError) as refused:
            setup.user.merge_patch(f"/api/v1/namespaces/{ns}/pods/target", {"metadata": {"annotations": {key: value}}})
        assert _refused_by_policy(refused.value, key), refused.value.message
        # The same through the status subresource, which keeps metadata changes.
        with pytest.raises(ApiError) as via_status:
            setup.user.merge_patch(f"/api/v1/namespaces/{ns}/pods/target/status",
                                   {"metadata": {"annotations": {key: value}}})
        assert _refused_by_policy(via_status.value, key), via_status.value.message
    assert "tessera.dev/devices" not in (setup.plane.admin.get(f"/api/v1/namespaces/{ns}/pods/target")["metadata"]
                                         .get("annotations") or {})


def test_user_cannot_change_or_remove_annotations_tessera_wrote(setup: Setup) -> None:
    ns = setup.namespace
    admin = setup.plane.admin
    # An admin (system:masters, exempt) stands in for a pod that the scheduler bound.
    admin.create(f"/api/v1/namespaces/{ns}/pods", _pod("bound", ns, {DEVICES: LEDGER, PHASE: "Allocated"}))
    for patch in ({DEVICES: "mine-now"}, {DEVICES: None}, {PHASE: None}):
        with pytest.raises(ApiError) as refused:
            setup.user.merge_patch(f"/api/v1/namespaces/{ns}/pods/bound", {"metadata": {"annotations": patch}})
        assert _refused_by_policy(refused.value, next(iter(patch))), refused.value.message
        assert "keep them as the pod has them: kubectl apply and kubectl patch do" in refused.value.message
    # Unrelated edits of the same pod are fine: the policy compares only tessera.dev/* keys.
    setup.user.merge_patch(f"/api/v1/namespaces/{ns}/pods/bound", {"metadata": {"labels": {"a": "b"}}})
    assert admin.get(f"/api/v1/namespaces/{ns}/pods/bound")["metadata"]["annotations"][DEVICES] == LEDGER


def test_user_cannot_forge_through_a_binding(setup: Setup) -> None:
    """A Binding's annotations are copied onto the pod: pods/binding and the legacy `bindings`
    resource are both checked. Without annotations, the user's Binding is allowed (RBAC decides
    who may bind; the policy only guards the ledger)."""
    ns = setup.namespace
    for i, path in enumerate((f"/api/v1/namespaces/{ns}/pods/{{name}}/binding", f"/api/v1/namespaces/{ns}/bindings")):
        name = f"bind-{i}"
        setup.user.create(f"/api/v1/namespaces/{ns}/pods", _pod(name, ns))
        target = {"apiVersion": "v1", "kind": "Node", "name": setup.node}
        for key in (DEVICES, HELD):  # HELD: every Tessera Binding carries it; nobody else's may
            forged = {"apiVersion": "v1", "kind": "Binding", "target": target,
                      "metadata": {"name": name, "annotations": {key: "forged"}}}
            with pytest.raises(ApiError) as refused:
                setup.user.create(path.format(name=name), forged)
            assert _refused_by_policy(refused.value, key), refused.value.message
        setup.user.create(path.format(name=name), {"apiVersion": "v1", "kind": "Binding", "target": target,
                                                   "metadata": {"name": name, "annotations": {"note": "no ledger keys"}}})
        pod = setup.plane.admin.get(f"/api/v1/namespaces/{ns}/pods/{name}")
        assert pod["spec"]["nodeName"] == setup.node and DEVICES not in pod["metadata"]["annotations"]


# --- Tessera's own identities ------------------------------------------------------------------------


def test_scheduler_binds_with_device_annotations(setup: Setup) -> None:
    ns = setup.namespace
    admin = setup.plane.admin
    admin.create(f"/api/v1/namespaces/{ns}/pods", _pod("scheduled", ns))
    token = service_account_token(admin, SYSTEM_NAMESPACE, SCHEDULER_SA)
    # what the scheduler's Binding carries: the devices, recorded in held-devices too (so an edit
    # of the devices annotation while no scheduler runs is still held by the next one)
    binding = {"apiVersion": "v1", "kind": "Binding",
               "metadata": {"name": "scheduled", "namespace": ns,
                            "annotations": {DEVICES: LEDGER, HELD: LEDGER, PHASE: "Allocating"}},
               "target": {"apiVersion": "v1", "kind": "Node", "name": setup.node}}
    status, body = call_as(setup.plane, token, "POST", f"/api/v1/namespaces/{ns}/pods/scheduled/binding", binding)
    assert status == 201, body
    pod = admin.get(f"/api/v1/namespaces/{ns}/pods/scheduled")
    assert pod["spec"]["nodeName"] == setup.node
    assert pod["metadata"]["annotations"][PHASE] == "Allocating"
    assert pod["metadata"]["annotations"][HELD] == LEDGER
    # The exemption is for the Binding only: the scheduler may not rewrite the ledger otherwise
    # (its role has no pods patch, and pods/status writes of the ledger keys are not exempt).
    status, body = call_as(setup.plane, token, "PATCH", f"/api/v1/namespaces/{ns}/pods/scheduled/status",
                           {"metadata": {"annotations": {DEVICES: "rewritten"}}}, MERGE_PATCH)
    assert status == 403 and POLICY_MESSAGE in body, body


def test_scheduler_records_held_devices_through_pods_status_and_only_that(setup: Setup) -> None:
    """After an edit of a bound pod's devices annotation the scheduler writes the union into
    `tessera.dev/held-devices` through pods/status (scheduler/kube/held.py): the one exemption
    beside its Binding. It may not remove it, nor change another ledger key in the same write; a
    user may not write it at all (a forged one would fence or claim GPUs)."""
    ns = setup.namespace
    admin = setup.plane.admin
    admin.create(f"/api/v1/namespaces/{ns}/pods", _pod("edited", ns, {DEVICES: LEDGER, PHASE: "Allocated"}))
    token = service_account_token(admin, SYSTEM_NAMESPACE, SCHEDULER_SA)
    path = f"/api/v1/namespaces/{ns}/pods/edited/status"
    uid = admin.get(f"/api/v1/namespaces/{ns}/pods/edited")["metadata"]["uid"]
    status, body = call_as(setup.plane, token, "PATCH", path,
                           {"metadata": {"uid": uid, "annotations": {HELD: LEDGER}}}, STRATEGIC_PATCH)
    assert status == 200, body
    # the apiserver keeps metadata.annotations from a pods/status write
    assert admin.get(f"/api/v1/namespaces/{ns}/pods/edited")["metadata"]["annotations"][HELD] == LEDGER
    for patch in ({HELD: None}, {HELD: LEDGER + " ", DEVICES: "rewritten"}, {PHASE: "Allocating"}):
        status, body = call_as(setup.plane, token, "PATCH", path, {"metadata": {"annotations": patch}},
                               STRATEGIC_PATCH)
        assert status == 403 and POLICY_MESSAGE in body, (patch, body)
    status, body = call_as(setup.plane, token, "PATCH", f"/api/v1/namespaces/{ns}/pods/edited",
                           {"metadata": {"annotations": {HELD: LEDGER + " "}}}, MERGE_PATCH)
    assert status == 403, body  # only through pods/status (RBAC or the policy refuses the pod itself)
    with pytest.raises(ApiError) as refused:
        setup.user.merge_patch(path, {"metadata": {"annotations": {HELD: "forged"}}})
    assert _refused_by_policy(refused.value, HELD), refused.value.message
    assert admin.get(f"/api/v1/namespaces/{ns}/pods/edited")["metadata"]["annotations"][HELD] == LEDGER


def test_scheduler_writes_its_term_fence_through_pods_status_and_only_that(setup: Setup) -> None:
    """A new leader writes `tessera.dev/term` onto each unbound pod it schedules before its first
    decision (scheduler/kube/fence.py), through pods/status: allowed for the scheduler's
    ServiceAccount, alone (not with a ledger key), and refused to a user."""
    ns = setup.namespace
    admin = setup.plane.admin
    admin.create(f"/api/v1/namespaces/{ns}/pods", _pod("waiting", ns))
    token = service_account_token(admin, SYSTEM_NAMESPACE, SCHEDULER_SA)
    path = f"/api/v1/namespaces/{ns}/pods/waiting/status"
    before = admin.get(f"/api/v1/namespaces/{ns}/pods/waiting")["metadata"]
    status, body = call_as(setup.plane, token, "PATCH", path,
                           {"metadata": {"uid": before["uid"], "annotations": {TERM: "rep-a/1/t"}}}, MERGE_PATCH)
    assert status == 200, body
    after = admin.get(f"/api/v1/namespaces/{ns}/pods/waiting")["metadata"]
    assert after["annotations"][TERM] == "rep-a/1/t" and after["resourceVersion"] != before["resourceVersion"]
    status, body = call_as(setup.plane, token, "PATCH", path, {"metadata": {"annotations": {TERM: "rep-b/2/t"}}},
                           MERGE_PATCH)
    assert status == 200, body  # the next term's fence
    status, body = call_as(setup.plane, token, "PATCH", path,
                           {"metadata": {"annotations": {TERM: "rep-b/3/t", DEVICES: LEDGER}}}, MERGE_PATCH)
    assert status == 403 and POLICY_MESSAGE in body, body
    with pytest.raises(ApiError) as refused:
        setup.user.merge_patch(path, {"metadata": {"annotations": {TERM: "forged"}}})
    assert _refused_by_policy(refused.value, TERM), refused.value.message
    with pytest.raises(ApiError) as refused:
        setup.user.merge_patch(f"/api/v1/namespaces/{ns}/pods/waiting", {"metadata": {"annotations": {TERM: "x"}}})
    assert _refused_by_policy(refused.value, TERM), refused.value.message
    assert admin.get(f"/api/v1/namespaces/{ns}/pods/waiting")["metadata"]["annotations"][TERM] == "rep-b/2/t"


def test_agent_marks_pods_on_its_node_allocated_and_nothing_else(setup: Setup) -> None:
    ns = setup.namespace
    admin = setup.plane.admin
    admin.create(f"/api/v1/namespaces/{ns}/pods", _pod("here", ns, {DEVICES: LEDGER, PHASE: "Allocating"}, setup.node))
    admin.create(f"/api/v1/namespaces/{ns}/pods",
                 _pod("elsewhere", ns, {DEVICES: LEDGER, PHASE: "Allocating"}, setup.other_node))
    token = agent_token_for_node(admin, setup.node)

    def patch(pod: str, annotations: dict[str, str]) -> tuple[int, str]:
        return call_as(setup.plane, token, "PATCH", f"/api/v1/namespaces/{ns}/pods/{pod}",
                       {"metadata": {"annotations": annotations}}, MERGE_PATCH)

    status, body = patch("here", {PHASE: "Allocated"})
    assert status == 200, body
    assert admin.get(f"/api/v1/namespaces/{ns}/pods/here")["metadata"]["annotations"][PHASE] == "Allocated"
    # Not another node's pod, not the device assignment, not a new key.
    for pod, annotations, key in (("elsewhere", {PHASE: "Allocated"}, PHASE), ("here", {DEVICES: "other"}, DEVICES),
                                  ("here", {"tessera.dev/extra": "x"}, "tessera.dev/extra")):
        status, body = patch(pod, annotations)
        assert status == 403 and POLICY_MESSAGE in body and key in body, (pod, status, body)
    # A token of the agent's ServiceAccount that is not bound to a pod on a node is refused:
    # a leaked `kubectl create token tessera-agent` cannot mark any pod.
    unbound = service_account_token(admin, SYSTEM_NAMESPACE, AGENT_SA)
    status, body = call_as(setup.plane, unbound, "PATCH", f"/api/v1/namespaces/{ns}/pods/elsewhere",
                           {"metadata": {"annotations": {PHASE: "Allocated"}}}, MERGE_PATCH)
    assert status == 403 and POLICY_MESSAGE in body, body


def test_system_masters_is_exempt(setup: Setup) -> None:
    """Break-glass: the admin can repair a corrupt ledger annotation without disabling the policy."""
    ns = setup.namespace
    admin = setup.plane.admin
    admin.create(f"/api/v1/namespaces/{ns}/pods", _pod("repair", ns, {DEVICES: "corrupt"}))
    repaired = admin.merge_patch(f"/api/v1/namespaces/{ns}/pods/repair", {"metadata": {"annotations": {DEVICES: None}}})
    assert DEVICES not in (repaired["metadata"].get("annotations") or {})


# --- GPU pods are Tessera's (deploy/admission/gpu-pod-policy.yaml) -------------------------------------
#
# A trial (HIGH): a namespace user with `edit` rights got GPUs Tessera had already given out, by a pod
# that left spec.schedulerName to kube-scheduler (which cannot see grants by class) and by a pod
# created with spec.nodeName (no scheduler at all). The policy refuses both at creation.

GPU_POLICY = "tessera-gpu-pods"
WRONG_SCHEDULER = "set spec.schedulerName: tessera"
NODE_NAME_SET = "let the scheduler choose the node"
EXEMPT_LABEL = "tessera.dev/gpu-pod-policy"
CLASS = "class.tessera.dev/v100-32g"


def _gpu_pod(name: str, namespace: str, *, scheduler: str | None = "tessera", node: str = "",
             limits: dict[str, str | int] | None = None, init_limits: dict[str, str | int] | None = None,
             requests: dict[str, str | int] | None = None) -> dict[str, object]:
    init = [b.container("setup", limits=init_limits, requests=init_limits)] if init_limits else None
    pod = creatable(b.pod(name, namespace=namespace, node_name=node, limits=limits, requests=requests,
                          init_containers=init))
    spec = pod["spec"]
    assert isinstance(spec, dict)
    if scheduler is None:
        del spec["schedulerName"]  # the apiserver defaults it to default-scheduler
    else:
        spec["schedulerName"] = scheduler
    return pod


def _wait_until_gpu_policy_enforced(user: RestClient, namespace: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    probe = _gpu_pod("probe", namespace, scheduler=None, limits={CLASS: 1})
    while True:
        try:
            user.create(f"/api/v1/namespaces/{namespace}/pods?dryRun=All", probe)
        except ApiError as err:
            if err.status == 403 and WRONG_SCHEDULER in err.message:
                return
            if err.status != 403:
                raise
        if time.monotonic() > deadline:
            raise AssertionError(f"the {GPU_POLICY} policy was not enforced within {timeout:.0f} s")
        time.sleep(0.2)


@dataclass
class GpuSetup:
    base: Setup
    exempt: str  # a namespace labelled tessera.dev/gpu-pod-policy=exempt, where alice is `admin`


@pytest.fixture(scope="module")
def gpu(setup: Setup) -> Iterator[GpuSetup]:
    admin = setup.plane.admin
    exempt = f"vap-exempt-{secrets.token_hex(3)}"
    admin.create("/api/v1/namespaces", {"metadata": {"name": exempt, "labels": {
        "tessera.dev/e2e": "true", EXEMPT_LABEL: "exempt"}}})
    admin.create(f"{RBAC}/namespaces/{exempt}/rolebindings", {
        "metadata": {"name": "pod-editor"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
        "subjects": [{"kind": "User", "name": USER, "apiGroup": "rbac.authorization.k8s.io"}]})
    try:
        _wait_until_gpu_policy_enforced(setup.user, setup.namespace)
        yield GpuSetup(setup, exempt)
    finally:
        admin.request("DELETE", f"/api/v1/namespaces/{exempt}/pods?gracePeriodSeconds=0")
        admin.delete(f"/api/v1/namespaces/{exempt}")


def _refused(client: RestClient, namespace: str, pod: dict[str, object]) -> str:
    with pytest.raises(ApiError) as refused:
        client.create(f"/api/v1/namespaces/{namespace}/pods", pod)
    assert refused.value.status == 403 and GPU_POLICY in refused.value.message, refused.value.message
    return refused.value.message


def test_a_gpu_pod_for_another_scheduler_is_refused_with_what_to_do(gpu: GpuSetup) -> None:
    """The trial's first pod, asking for a class without spec.schedulerName (kube-scheduler's)."""
    setup = gpu.base
    ns = setup.namespace
    for name, pod in (
            ("default", _gpu_pod("default", ns, scheduler=None, limits={CLASS: 4})),
            ("named", _gpu_pod("named", ns, scheduler="default-scheduler", limits={CLASS: 4})),
            ("other", _gpu_pod("other", ns, scheduler="volcano", limits={CLASS: 8})),
            ("init", _gpu_pod("init", ns, scheduler=None, init_limits={CLASS: 1})),
            ("requests", _gpu_pod("requests", ns, scheduler=None, requests={CLASS: 1}, limits={CLASS: 1}))):
        message = _refused(setup.user, ns, pod)
        assert WRONG_SCHEDULER in message, (name, message)
        assert "spec.schedulerName is " in message and "tessera" in message, (name, message)
    message = _refused(setup.user, ns, _gpu_pod("which", ns, scheduler="volcano",
                                                 limits={"class.tessera.dev/t4": 2}, init_limits={CLASS: 1}))
    assert "spec.schedulerName is volcano" in message and "containers main, setup)" in message, message
    names = {p["metadata"]["name"] for p in setup.plane.admin.get(f"/api/v1/namespaces/{ns}/pods")["items"]}
    assert not names & {"default", "named", "other", "init", "requests", "which"}


def test_a_gpu_pod_that_names_its_node_is_refused_also_for_tessera(gpu: GpuSetup) -> None:
    """The trial's second pod: `spec.nodeName` and 8 GPUs of a class skip every scheduler; so does
    a pod that names Tessera's scheduler and its node. The admin (system:masters) is held too: it
    has no reason to bypass the scheduler that a namespace exempt from the policy does not give."""
    setup = gpu.base
    ns = setup.namespace
    for client in (setup.user, setup.plane.admin):
        for pod in (_gpu_pod("pinned", ns, node=setup.node, limits={CLASS: 8}),
                    _gpu_pod("pinned-init", ns, node=setup.node, init_limits={CLASS: 1})):
            message = _refused(client, ns, pod)
            assert NODE_NAME_SET in message and f"spec.nodeName ({setup.node})" in message, message
            assert "kubernetes.io/hostname label in spec.nodeSelector" in message, message
    both = _refused(setup.user, ns, _gpu_pod("both", ns, scheduler=None, node=setup.node,
                                              limits={CLASS: 8}))
    assert WRONG_SCHEDULER in both and NODE_NAME_SET in both, both  # both fixes at once


def test_pods_the_policy_lets_through(gpu: GpuSetup) -> None:
    """A Tessera GPU pod; a pod without GPUs for any scheduler, also on a named node; a pod asking for
    zero GPUs; a resource merely named like a GPU (not one Tessera schedules); and, at the default
    lists, `nvidia.com/gpu` for another scheduler: NVIDIA's device plugin serves it on nodes the
    agent does not serve (on the agent's no plugin does), so kube-scheduler's GPU pods stay its own."""
    setup = gpu.base
    ns = setup.namespace
    path = f"/api/v1/namespaces/{ns}/pods"
    created = setup.user.create(path, _gpu_pod("tessera-gpu", ns, limits={"nvidia.com/gpu": 4},
                                                init_limits={CLASS: 1}))
    assert created["spec"]["schedulerName"] == "tessera"
    setup.user.create(path, _gpu_pod("cpu-only", ns, scheduler=None, limits={"cpu": "1"}))
    setup.user.create(path, _gpu_pod("cpu-pinned", ns, scheduler="volcano", node=setup.node))
    setup.user.create(path, _gpu_pod("zero-gpus", ns, scheduler=None, limits={CLASS: 0}))
    setup.user.create(path, _gpu_pod("nvidia-plugin", ns, scheduler=None, limits={"nvidia.com/gpu": 1}))
    setup.user.create(path, _gpu_pod("lookalike", ns, scheduler=None, limits={"example.com/gpu": 1}))
    names = {p["metadata"]["name"] for p in setup.plane.admin.get(path)["items"]}
    assert {"tessera-gpu", "cpu-only", "cpu-pinned", "zero-gpus", "lookalike", "nvidia-plugin"} <= names


def test_an_exempt_namespace_and_kube_system_are_not_checked(gpu: GpuSetup) -> None:
    """The platform's own GPU pods (e.g. the NVIDIA GPU Operator's validator pods) run in a namespace a
    cluster admin labels tessera.dev/gpu-pod-policy=exempt; kube-system is exempt by name."""
    setup = gpu.base
    created = setup.user.create(f"/api/v1/namespaces/{gpu.exempt}/pods",
                                _gpu_pod("validator", gpu.exempt, scheduler=None, node=setup.node,
                                         limits={CLASS: 1}))
    assert created["spec"]["nodeName"] == setup.node
    setup.plane.admin.create("/api/v1/namespaces/kube-system/pods?dryRun=All",
                             _gpu_pod("system", "kube-system", scheduler=None, node=setup.node,
                                      limits={CLASS: 1}))
    # a namespace's users cannot exempt it, nor take an exemption away: `admin` (and so `edit`)
    # grant no namespace writes
    for namespace, labels in ((setup.namespace, {EXEMPT_LABEL: "exempt"}), (gpu.exempt, {EXEMPT_LABEL: None})):
        with pytest.raises(ApiError) as forbidden:
            setup.user.merge_patch(f"/api/v1/namespaces/{namespace}", {"metadata": {"labels": labels}})
        assert forbidden.value.status == 403 and "cannot patch resource" in forbidden.value.message, \
            forbidden.value.message


def test_a_nodes_mirror_pod_is_not_checked(gpu: GpuSetup) -> None:
    """A static pod runs whether or not its mirror pod is admitted: refusing the mirror pod would
    only hide its GPUs from the scheduler's count. Nodes (group system:nodes) are not checked;
    NodeRestriction holds a kubelet to mirror pods on its own node."""
    setup = gpu.base
    ns = setup.namespace
    node_user = f"system:node:{setup.node}"
    setup.plane.admin.create(f"{RBAC}/namespaces/{ns}/rolebindings", {
        "metadata": {"name": "node-pods"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "User", "name": node_user, "apiGroup": "rbac.authorization.k8s.io"}]})
    kubelet = _client(setup.plane, node_user, ["system:nodes"])
    try:
        pod = _gpu_pod("static-gpu", ns, scheduler=None, node=setup.node, limits={CLASS: 1})
        pod["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "hash"}  # type: ignore[index]
        deadline = time.monotonic() + 30
        while True:  # the RoleBinding takes a moment to reach the authorizer
            try:
                created = kubelet.create(f"/api/v1/namespaces/{ns}/pods", pod)
                break
            except ApiError as err:
                if err.status != 403 or GPU_POLICY in err.message or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        assert created["spec"]["nodeName"] == setup.node
    finally:
        kubelet.close()



def test_the_charts_policy_with_a_platforms_values_holds_on_the_apiserver(gpu: GpuSetup) -> None:
    """The chart renders the policy's lists from values (tests/unit/test_helm_chart.py compares the
    text): rendered for a platform with a second profile and a ResourceClass resourceName of its
    own, the apiserver compiles it and refuses and lets through by those lists."""
    setup = gpu.base
    ns = setup.namespace
    admin = setup.plane.admin
    profile: dict[str, object] = {"plugins": {}, "pluginConfig": []}
    values = {"schedulerConfig": {"profiles": [{"schedulerName": "tessera", **profile},
                                               {"schedulerName": "tessera-batch", **profile}]},
              "gpuPodPolicy": {"resourceNames": ["nvidia.com/gpu", "gpu.example.com/v100-32g"]}}
    chart = [d for d in helm_template(helm_binary(), values) if d["metadata"]["name"] == GPU_POLICY]
    assert {d["kind"] for d in chart} == {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
    path = f"/api/v1/namespaces/{ns}/pods?dryRun=All"
    own_class = _gpu_pod("own-class", ns, scheduler=None, limits={"gpu.example.com/v100-32g": 1})
    try:
        apply_documents(admin, chart)
        deadline = time.monotonic() + 30
        while True:  # until the new version of the policy is the one enforced
            try:
                setup.user.create(path, own_class)
            except ApiError as err:
                if err.status == 403 and GPU_POLICY in err.message:
                    message = err.message
                    break
                raise
            assert time.monotonic() < deadline, "the chart's policy was not enforced within 30 s"
            time.sleep(0.2)
        assert "(nvidia.com/gpu, gpu.example.com/v100-32g, class.tessera.dev/*; container main)" in message, message
        assert "set spec.schedulerName: tessera or tessera-batch" in message, message
        setup.user.create(path, _gpu_pod("batch", ns, scheduler="tessera-batch", limits={"nvidia.com/gpu": 2}))
        _refused(setup.user, ns, _gpu_pod("other", ns, scheduler="volcano", limits={CLASS: 1}))
        # nvidia.com/gpu listed (every GPU pod of the cluster Tessera's): kube-scheduler's is refused
        _refused(setup.user, ns, _gpu_pod("plain", ns, scheduler=None, limits={"nvidia.com/gpu": 1}))
    finally:
        apply_documents(admin, [d for d in deploy_documents() if d["metadata"]["name"] == GPU_POLICY])


PRIORITY_MESSAGE = "which is for the cluster's own components: Tessera would preempt other teams' GPU pods for it"


def test_a_tessera_pod_may_not_take_the_clusters_own_priority_classes(gpu: GpuSetup) -> None:
    """A security review: any namespace editor's Tessera pod with priorityClassName
    system-cluster-critical (or system-node-critical) preempted other teams' GPU jobs; the quota
    fix (deploy/apiserver/quota-admission.yaml) needs an apiserver flag managed clusters refuse.
    The GPU pod policy refuses those classes on Tessera's pods outside the exempt namespaces."""
    setup = gpu.base
    ns = setup.namespace
    for priority_class in ("system-cluster-critical", "system-node-critical"):
        for name, pod in (("gpus", _gpu_pod("gpus", ns, limits={CLASS: 1})), ("cpu", _gpu_pod("cpu", ns))):
            pod["spec"]["priorityClassName"] = priority_class  # type: ignore[index]
            message = _refused(setup.user, ns, pod)
            assert PRIORITY_MESSAGE in message, (name, message)
            assert f"spec.schedulerName: tessera) and sets spec.priorityClassName: {priority_class}" in message, message
            assert "use a PriorityClass of your own" in message, message
    # another scheduler's pod is not Tessera's business; an exempt namespace is not checked
    other = _gpu_pod("kube-critical", ns, scheduler=None)
    other["spec"]["priorityClassName"] = "system-cluster-critical"  # type: ignore[index]
    setup.user.create(f"/api/v1/namespaces/{ns}/pods?dryRun=All", other)
    exempt = _gpu_pod("platform", gpu.exempt, limits={CLASS: 1})
    exempt["spec"]["priorityClassName"] = "system-cluster-critical"  # type: ignore[index]
    setup.user.create(f"/api/v1/namespaces/{gpu.exempt}/pods?dryRun=All", exempt)


VISIBLE_MESSAGE = "sets NVIDIA_VISIBLE_DEVICES in its env"


def _with_env(pod: dict[str, object], env: Sequence[Mapping[str, object]], init: bool = False) -> dict[str, object]:
    spec = pod["spec"]
    assert isinstance(spec, dict)
    for container in spec["initContainers" if init else "containers"]:
        container["env"] = env
    return pod


def test_a_pod_may_not_name_gpus_through_nvidia_visible_devices(gpu: GpuSetup) -> None:
    """A security review: the agent hands GPUs out through NVIDIA_VISIBLE_DEVICES, and under the
    NVIDIA toolkit's default (accept-nvidia-visible-devices-envvar-when-unprivileged = true) a pod
    that sets NVIDIA_VISIBLE_DEVICES=all sees every GPU of its node. The GPU pod policy refuses a
    pod (any scheduler, GPUs asked for or not) that sets it in a container's env; an image's ENV is
    the node setting's job, which the message says."""
    setup = gpu.base
    ns = setup.namespace
    everything = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    from_config = [{"name": "NVIDIA_VISIBLE_DEVICES",
                    "valueFrom": {"configMapKeyRef": {"name": "gpus", "key": "which"}}}]
    for name, pod in (
            ("all", _with_env(_gpu_pod("all", ns, scheduler=None), everything)),
            ("tessera", _with_env(_gpu_pod("tessera", ns, limits={CLASS: 1}), [{"name": "NVIDIA_VISIBLE_DEVICES",
                                                                                 "value": "0,1,2,3"}])),
            ("init", _with_env(_gpu_pod("init", ns, init_limits={"cpu": "1"}), everything, init=True)),
            ("from", _with_env(_gpu_pod("from", ns, scheduler="volcano"), from_config))):
        message = _refused(setup.user, ns, pod)
        assert VISIBLE_MESSAGE in message, (name, message)
        assert "accept-nvidia-visible-devices-envvar-when-unprivileged = false" in message, (name, message)
    message = _refused(setup.user, ns, _with_env(_gpu_pod("which", ns, init_limits={"cpu": "1"}), everything,
                                                  init=True))
    assert "(container setup)" in message, message
    # what hides GPUs (void, none) and the other NVIDIA variables are fine; an exempt namespace is not
    # checked; the node agent's own pods (=all, to read the GPUs through NVML) are let through
    for value in ("void", "none"):
        setup.user.create(f"/api/v1/namespaces/{ns}/pods?dryRun=All", _with_env(
            _gpu_pod(f"hidden-{value}", ns, scheduler=None), [{"name": "NVIDIA_VISIBLE_DEVICES", "value": value}]))
    setup.user.create(f"/api/v1/namespaces/{ns}/pods?dryRun=All", _with_env(
        _gpu_pod("caps", ns), [{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "all"}]))
    setup.user.create(f"/api/v1/namespaces/{gpu.exempt}/pods?dryRun=All",
                      _with_env(_gpu_pod("dcgm", gpu.exempt, scheduler=None), everything))
    agent = _with_env(_gpu_pod("agent", SYSTEM_NAMESPACE, scheduler=None), everything)
    agent["spec"]["serviceAccountName"] = AGENT_SA  # type: ignore[index]
    setup.plane.admin.create(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/pods?dryRun=All", agent)
    agent["spec"]["serviceAccountName"] = "default"  # type: ignore[index]
    _refused(setup.plane.admin, SYSTEM_NAMESPACE, agent)


# --- the chart's policy at other values: --replace-default-scheduler, and the env rule off ------------


def _admitted(client: RestClient, namespace: str, pod: dict[str, object]) -> bool:
    """Whether the GPU pod policy lets `pod` be created (a dry run: admission runs, nothing stays)."""
    try:
        client.create(f"/api/v1/namespaces/{namespace}/pods?dryRun=All", pod)
        return True
    except ApiError as err:
        if err.status == 403 and GPU_POLICY in err.message:
            return False
        raise


def _until(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """A new version of the policy takes a moment to be the one enforced."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} within {timeout:.0f} s"
        time.sleep(0.2)


def _apply_charts_policy(admin: RestClient, values: dict[str, object]) -> None:
    chart = [d for d in helm_template(helm_binary(), values) if d["metadata"]["name"] == GPU_POLICY]
    assert {d["kind"] for d in chart} == {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
    apply_documents(admin, chart)


def _restore_deploys_policy(setup: Setup) -> None:
    apply_documents(setup.plane.admin, [d for d in deploy_documents() if d["metadata"]["name"] == GPU_POLICY])
    ns = setup.namespace
    kube_schedulers = _gpu_pod("restored", ns, scheduler=None, limits={CLASS: 1})
    everything = _with_env(_gpu_pod("restored-env", ns), [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])
    _until(lambda: not _admitted(setup.user, ns, kube_schedulers) and not _admitted(setup.user, ns, everything),
           "deploy/'s policy was not enforced again")


def test_where_tessera_replaces_kube_scheduler_its_default_scheduler_pods_keep_their_priority_classes(
        gpu: GpuSetup) -> None:
    """`tessera run --replace-default-scheduler` (scheduler.replaceDefaultScheduler) lets a profile
    take kube-scheduler's name `default-scheduler`, which every pod without spec.schedulerName has:
    the cluster's own critical pods (CNI, CSI, Tessera's own scheduler and agent) at
    system-cluster-critical or system-node-critical, in namespaces that are not exempt. The
    priority-class rule skips pods naming default-scheduler, and only those: a second profile's
    pods are still refused those classes."""
    setup = gpu.base
    ns = setup.namespace
    profile: dict[str, object] = {"plugins": {}, "pluginConfig": []}
    values: dict[str, object] = {
        "scheduler": {"replaceDefaultScheduler": True},
        "schedulerConfig": {"profiles": [{"schedulerName": "default-scheduler", **profile},
                                         {"schedulerName": "tessera", **profile}]}}
    unnamed_gpus = _gpu_pod("unnamed-gpus", ns, scheduler=None, limits={CLASS: 1})
    try:
        _apply_charts_policy(setup.plane.admin, values)
        # deploy/'s policy refuses a GPU pod of default-scheduler; the chart's at these values does not
        _until(lambda: _admitted(setup.user, ns, unnamed_gpus), "the chart's policy was not enforced")
        for priority_class in ("system-cluster-critical", "system-node-critical"):
            for name, pod in (("unnamed", _gpu_pod("unnamed", ns, scheduler=None)),
                              ("named", _gpu_pod("named", ns, scheduler="default-scheduler")),
                              ("named-gpus", _gpu_pod("named-gpus", ns, scheduler="default-scheduler",
                                                      limits={CLASS: 1}))):
                pod["spec"]["priorityClassName"] = priority_class  # type: ignore[index]
                created = setup.user.create(f"/api/v1/namespaces/{ns}/pods?dryRun=All", pod)
                assert created["spec"]["schedulerName"] == "default-scheduler", name
                assert created["spec"]["priorityClassName"] == priority_class, name
            tessera = _gpu_pod("tessera", ns, limits={CLASS: 1})
            tessera["spec"]["priorityClassName"] = priority_class  # type: ignore[index]
            message = _refused(setup.user, ns, tessera)
            assert PRIORITY_MESSAGE in message, message
            assert f"spec.schedulerName: tessera) and sets spec.priorityClassName: {priority_class}" in message, message
        # the other rules hold for the profile named default-scheduler too
        message = _refused(setup.user, ns, _gpu_pod("pinned", ns, scheduler=None, node=setup.node,
                                                    limits={CLASS: 1}))
        assert NODE_NAME_SET in message, message
        message = _refused(setup.user, ns, _gpu_pod("other", ns, scheduler="volcano", limits={CLASS: 1}))
        assert "set spec.schedulerName: default-scheduler or tessera" in message, message
    finally:
        _restore_deploys_policy(setup)


def test_the_charts_policy_without_the_visible_devices_rule_keeps_its_other_rules(gpu: GpuSetup) -> None:
    """gpuPodPolicy.refuseVisibleDevicesEnv: false drops the NVIDIA_VISIBLE_DEVICES rule alone (for a
    platform whose GPU tools set it where it cannot exempt them, on nodes that ignore it): the
    apiserver compiles the policy without it and still refuses by the other rules."""
    setup = gpu.base
    ns = setup.namespace
    everything = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    dcgm = _with_env(_gpu_pod("dcgm", ns, scheduler=None), everything)
    try:
        _apply_charts_policy(setup.plane.admin, {"gpuPodPolicy": {"refuseVisibleDevicesEnv": False}})
        _until(lambda: _admitted(setup.user, ns, dcgm), "the chart's policy was not enforced")
        created = setup.user.create(f"/api/v1/namespaces/{ns}/pods?dryRun=All",
                                    _with_env(_gpu_pod("tessera-env", ns, limits={CLASS: 1}), everything))
        assert created["spec"]["containers"][0]["env"] == everything
        message = _refused(setup.user, ns, _with_env(_gpu_pod("other", ns, scheduler="volcano", limits={CLASS: 1}),
                                                     everything))
        assert WRONG_SCHEDULER in message and VISIBLE_MESSAGE not in message, message
        pinned = _refused(setup.user, ns, _gpu_pod("pinned", ns, node=setup.node, limits={CLASS: 1}))
        assert NODE_NAME_SET in pinned, pinned
        critical = _gpu_pod("critical", ns, limits={CLASS: 1})
        critical["spec"]["priorityClassName"] = "system-cluster-critical"  # type: ignore[index]
        assert PRIORITY_MESSAGE in _refused(setup.user, ns, critical)
    finally:
        _restore_deploys_policy(setup)
