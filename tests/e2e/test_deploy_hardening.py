"""How Tessera is installed (deploy/ and deploy/helm/tessera): cases a review found.

Every test here failed before its fix, for the reason its docstring gives.

Two groups:
- `helm template` renders (fast, need only the pinned helm binary);
- three checks on a real kube-apiserver + etcd (the local control plane of tests/e2e, about 10 s
  to start once for the module) with `kubectl apply -k deploy/`'s objects installed: what the
  node agent's node-bound token and an ordinary workload identity can and cannot do to pods and
  devices once the annotation policy is enforced. Both groups skip when their binaries are
  missing (fail with CI=true), as tests/deploy_manifests.py does.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.deploy_manifests import find, helm_binary, helm_template

Obj = dict[str, Any]


@pytest.fixture(scope="module")
def helm() -> Path:
    return helm_binary()


def _deployment(docs: list[Obj]) -> Obj:
    return find(docs, "Deployment", "tessera-scheduler")


# --- Helm chart: scheduler availability and safety -----------------------------------------------


def test_single_replica_without_leader_election_never_runs_two_schedulers_in_a_rollout(helm: Path) -> None:
    """replicas: 1 + leaderElection.enabled: false is a supported combination (values.yaml: "Turn it
    off only with one replica"; test_helm_chart.test_optional_parts_can_be_left_out renders it), and
    the chart itself refuses replicas > 1 without election because "two active schedulers would
    bind the same GPUs twice". But the Deployment keeps `RollingUpdate` with maxSurge: 1 and
    maxUnavailable: 0, so every rollout (an image bump, or any `helm upgrade` that changes the
    configuration: `checksum/config` rolls the pods on purpose) starts the new scheduler, waits for
    it to become Ready (informers synced: it is then scheduling, there is no election to lose) and
    only then stops the old one: two active schedulers with separate caches, the very double-binding
    the chart refuses elsewhere. Without leader election the strategy must not surge
    (`Recreate`, or maxSurge: 0 / maxUnavailable: 1)."""
    docs = helm_template(helm, {"scheduler": {"replicas": 1}, "leaderElection": {"enabled": False}})
    strategy = _deployment(docs)["spec"]["strategy"]
    surge = strategy.get("rollingUpdate", {}).get("maxSurge", "25%") if strategy.get("type") != "Recreate" else 0
    assert strategy.get("type") == "Recreate" or surge in (0, "0", "0%"), (
        f"leader election off, yet the rollout strategy {strategy} runs the old and the new scheduler together")


@pytest.mark.parametrize("leader_election", [True, False])
def test_pod_disruption_budget_never_forbids_every_eviction(helm: Path, leader_election: bool) -> None:
    """With scheduler.replicas: 1 (documented; with or without leader election) the chart still
    renders the PDB with minAvailable: 1, i.e. minAvailable == replicas: the eviction API refuses to
    evict the only scheduler pod ever, so `kubectl drain` of its node retries forever and cluster
    autoscaler / managed node upgrades stall on it. Policy libraries flag exactly this
    (Gatekeeper library k8spoddisruptionbudget: "minAvailable == replicas ... will prevent
    PodDisruptionBudgets from blocking voluntary disruptions such as node draining"; Kyverno
    pdb-minavailable-check). Render the PDB only when replicas > minAvailable (or refuse the values
    with `fail`)."""
    docs = helm_template(helm, {"scheduler": {"replicas": 1}, "leaderElection": {"enabled": leader_election}})
    replicas = _deployment(docs)["spec"]["replicas"]
    pdbs = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    for pdb in pdbs:
        min_available = pdb["spec"].get("minAvailable")
        if isinstance(min_available, int):
            assert min_available < replicas, (
                f"PDB minAvailable {min_available} with {replicas} replica(s): no voluntary eviction is ever allowed")


def test_chart_can_pull_the_image_from_a_private_registry(helm: Path) -> None:
    """deploy/README.md's install is `docker push REGISTRY/tessera:0.1.0` then
    `helm install ... --set image.repository=REGISTRY/tessera`, but the chart has no
    `imagePullSecrets` value (neither pod spec can carry one, and the chart owns both
    ServiceAccounts), so a private registry - the usual case for an in-house image - gives
    ErrImagePull until someone patches the ServiceAccounts by hand. The `helm create` scaffold and
    most infrastructure charts (NVIDIA device plugin, Kueue) offer `imagePullSecrets`."""
    secret = [{"name": "regcred"}]
    docs = helm_template(helm, {"imagePullSecrets": secret})
    scheduler = _deployment(docs)["spec"]["template"]["spec"]
    agent = find(docs, "DaemonSet", "tessera-agent")["spec"]["template"]["spec"]
    assert scheduler.get("imagePullSecrets") == secret, "the scheduler's pods cannot pull from a private registry"
    assert agent.get("imagePullSecrets") == secret, "the agent's pods cannot pull from a private registry"


# --- on a real apiserver: the annotation policy and the agent's reach ---------------------------------


STRATEGIC_PATCH = "application/strategic-merge-patch+json"
POLICY_MESSAGE = "tessera.dev/* annotations are written only by the Tessera scheduler"


class Live:
    def __init__(self, plane: Any, namespace: str, here: str, elsewhere: str) -> None:
        self.plane = plane
        self.namespace = namespace
        self.here = here  # the node the agent's token is bound to
        self.elsewhere = elsewhere


def _binaries() -> Any:
    from scheduler.kube.controlplane import BinariesNotFound, find_binaries

    try:
        return find_binaries(build=False)
    except BinariesNotFound as err:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and {err}", pytrace=False)
        pytest.skip(str(err))


def _wait_until_refused(plane: Any, token: str, path: str, body: Obj, message: str, timeout: float = 30.0) -> None:
    """A new ValidatingAdmissionPolicy and its binding take a moment, each its own (a run in CI
    found the device policy not yet enforced a few tests after the pod policy was): dry-run a
    request the policy refuses until it is refused with `message`."""
    from tests.e2e.test_deploy import call_as

    deadline = time.monotonic() + timeout
    while True:
        status, answer = call_as(plane, token, "POST", f"{path}?dryRun=All", body)
        if status == 403 and message in answer:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the admission policy was not enforced within {timeout} s ({status} {answer})")
        time.sleep(0.2)


def _wait_until_enforced(plane: Any, token: str, namespace: str) -> None:
    """The pod policy: a user's pod with a ledger annotation is refused."""
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "probe", "annotations": {"tessera.dev/devices": "{}"}},
           "spec": {"containers": [{"name": "main", "image": "busybox"}]}}
    _wait_until_refused(plane, token, f"/api/v1/namespaces/{namespace}/pods", pod, POLICY_MESSAGE)


def _wait_until_devices_enforced(plane: Any, here: str, elsewhere: str) -> None:
    """The device policy: the agent on `here` writing a device of `elsewhere` is refused."""
    from scheduler.agent.devices import DeviceInfo
    from scheduler.agent.publish import EXTENDED_RESOURCES, build_object
    from tests.e2e.test_deploy import agent_token_for_node

    admin = plane.admin
    uid = admin.get(f"/api/v1/nodes/{elsewhere}")["metadata"]["uid"]
    theirs = build_object(elsewhere, uid, "nvidia.com/gpu",
                          DeviceInfo(uuid="GPU-probe-0001", model="Tesla T4", memory_bytes=16 * 1024 ** 3))
    _wait_until_refused(plane, agent_token_for_node(admin, here), EXTENDED_RESOURCES, theirs,
                        "a Tessera node agent writes only the ExtendedResources of the node its token is bound to")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    from scheduler.kube.controlplane import LocalControlPlane
    from tests.e2e.test_deploy import install_deploy, service_account_token

    binaries = _binaries()
    with LocalControlPlane(tmp_path_factory.mktemp("review-deploy-plane"), binaries=binaries) as plane:
        install_deploy(plane)
        admin = plane.admin
        namespace = f"review-{secrets.token_hex(3)}"
        admin.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
        # An ordinary workload identity: may create and edit pods in its namespace (what `edit` gives).
        admin.create(f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": "submitter"}})
        rbac = "/apis/rbac.authorization.k8s.io/v1"
        admin.create(f"{rbac}/namespaces/{namespace}/roles", {
            "metadata": {"name": "pods"},
            "rules": [{"apiGroups": [""], "resources": ["pods"],
                       "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}]})
        admin.create(f"{rbac}/namespaces/{namespace}/rolebindings", {
            "metadata": {"name": "pods"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pods"},
            "subjects": [{"kind": "ServiceAccount", "name": "submitter", "namespace": namespace}]})
        here, elsewhere = plane.add_fake_gpu_nodes(2, 1, "T4", memory="16Gi", prefix="review")
        _wait_until_enforced(plane, service_account_token(admin, namespace, "submitter"), namespace)
        _wait_until_devices_enforced(plane, here, elsewhere)
        yield Live(plane, namespace, here, elsewhere)


def test_agent_token_may_change_nothing_but_the_phase_annotation_of_its_own_nodes_pods(live: Live) -> None:
    """deploy/rbac/agent.yaml: "What the agent may do to pods is narrowed further by the admission
    policy: it may change only the `tessera.dev/phase` annotation, and only of pods on its own
    node" (deploy/README.md says the same). Not so: the ClusterRole grants `patch` on every pod,
    and the policy only looks at `tessera.dev/*` keys (`size(variables.changed) == 0` passes), so
    the agent's node-bound token - readable by root on any GPU node, where user containers run -
    can relabel any pod in any namespace on any node, or change a running pod's container image
    (an allowed pod UPDATE): e.g. swap the image of a pod whose ServiceAccount is powerful (the
    scheduler's, a controller's in kube-system) and run code with that token. Node-to-cluster
    escalation through a DaemonSet with cluster-wide `patch pods` is the pattern Unit 42's
    "powerful permissions" research flags. The code needs only a merge patch of one annotation
    (scheduler/agent/agent.py Agent._patch_allocated): the policy should refuse every agent request
    that is not exactly that on a pod of its token's node (e.g. validation
    `request.userInfo.username != '<agent>' || variables.agentPhase`, with agentPhase also
    requiring `object.spec == oldObject.spec` and labels / other annotations unchanged)."""
    from scheduler.kube.http import MERGE_PATCH
    from scheduler.sim import builders as b
    from tests.e2e.live import creatable
    from tests.e2e.test_deploy import agent_token_for_node, call_as

    admin, ns = live.plane.admin, live.namespace
    admin.create(f"/api/v1/namespaces/{ns}/pods", creatable(b.pod("elsewhere", namespace=ns, node_name=live.elsewhere)))
    admin.create(f"/api/v1/namespaces/{ns}/pods", creatable(b.pod("here", namespace=ns, node_name=live.here)))
    token = agent_token_for_node(admin, live.here)
    container = admin.get(f"/api/v1/namespaces/{ns}/pods/elsewhere")["spec"]["containers"][0]["name"]
    image = {"spec": {"containers": [{"name": container, "image": "attacker.example/evil:1"}]}}
    attempts = [
        ("elsewhere", {"metadata": {"labels": {"hijacked": "true"}}}, MERGE_PATCH),
        ("elsewhere", image, STRATEGIC_PATCH),
        ("here", image, STRATEGIC_PATCH),
        ("here", {"metadata": {"labels": {"app": "someone-elses-service"}}}, MERGE_PATCH),
    ]
    allowed = []
    for pod, patch, content_type in attempts:
        status, _ = call_as(live.plane, token, "PATCH", f"/api/v1/namespaces/{ns}/pods/{pod}", patch, content_type)
        if status < 300:
            allowed.append((pod, patch))
    images = {p: admin.get(f"/api/v1/namespaces/{ns}/pods/{p}")["spec"]["containers"][0]["image"]
              for p in ("here", "elsewhere")}
    assert not allowed, f"the agent's node-bound token was allowed {allowed}; pod images now {images}"


def test_agent_token_cannot_rewrite_or_delete_another_nodes_devices(live: Live) -> None:
    """The agent's ClusterRole lets every agent get/update/delete every ExtendedResource, and nothing
    (no policy rule, no per-node scoping) stops the agent on node A from deleting node B's GPUs or
    rewriting their capacity/model, which the scheduler trusts as the device inventory: one
    compromised GPU node can make the scheduler over-commit or lose every other node's GPUs. The
    code only ever touches devices of its own node (scheduler/agent/publish.py lists them with the
    label selector tessera.dev/node=<node> and names them `<node>.gpu-<uuid>`); the same
    node-name claim the pod rule uses (`authentication.kubernetes.io/node-name`) can bind
    ExtendedResource writes to `spec.nodeName` (as NodeRestriction does for kubelets' Node
    objects)."""
    from tests.e2e.test_deploy import agent_token_for_node, call_as

    admin = live.plane.admin
    path = "/apis/tessera.dev/v1alpha1/extendedresources"
    theirs = [d for d in admin.get(path)["items"] if d["spec"].get("nodeName") == live.elsewhere]
    assert theirs, "the fake GPU node has no ExtendedResource"
    device = theirs[0]
    token = agent_token_for_node(admin, live.here)
    name = device["metadata"]["name"]
    rewritten = {**device, "spec": {**device["spec"], "model": "H100-forged"}}
    update, _ = call_as(live.plane, token, "PUT", f"{path}/{name}", rewritten)
    delete, _ = call_as(live.plane, token, "DELETE", f"{path}/{name}")
    assert update >= 400 and delete >= 400, (
        f"the agent bound to {live.here} rewrote ({update}) and deleted ({delete}) {name} of node {live.elsewhere}")


def test_users_can_set_the_documented_topology_annotation_on_a_label_gang(live: Live) -> None:
    """docs/topology.md: for scheduler-plugins' label form of gangs, the topology is given by
    "annotations ... on its members `tessera.dev/topology-required: <node label>` and/or
    `tessera.dev/topology-preferred`" (scheduler/core/objects.py _gang reads them from the pod).
    But the admission policy installed by default (deploy/admission/annotation-policy.yaml and the
    chart's admission-policy.yaml) refuses any `tessera.dev/` pod annotation from anyone but the
    scheduler's Binding and the agent: the documented feature cannot be used on a cluster
    installed as documented (the pod create - by a user, or by the Job controller from a
    template - is denied). The policy should guard the ledger keys (tessera.dev/devices, /phase,
    /assume-time), not the whole prefix, or exempt the user-facing topology keys."""
    from scheduler.sim import builders as b
    from tests.e2e.live import creatable
    from tests.e2e.test_deploy import call_as, service_account_token

    ns = live.namespace
    token = service_account_token(live.plane.admin, ns, "submitter")
    pod = creatable(b.pod("worker-0", namespace=ns, limits={"nvidia.com/gpu": 1},
                          labels={"pod-group.scheduling.sigs.k8s.io/name": "train",
                                  "pod-group.scheduling.sigs.k8s.io/min-available": "2"},
                          annotations={"tessera.dev/topology-required": "cloud.example.com/rack"}))
    status, body = call_as(live.plane, token, "POST", f"/api/v1/namespaces/{ns}/pods", pod)
    assert status == 201, f"a gang member with the documented topology annotation is refused: {status} {body[:400]}"


def test_agent_token_cannot_change_a_pods_finalizers_or_owner_references(live: Live) -> None:
    """A security review: the agent's node-bound token could set an ownerReference (to an object
    that does not exist: the garbage collector then deleted the pod) or a finalizer on a pod of its
    node, though deploy/README.md says it may change nothing but the tessera.dev/phase annotation."""
    from scheduler.kube.http import MERGE_PATCH
    from scheduler.sim import builders as b
    from tests.e2e.live import creatable
    from tests.e2e.test_deploy import agent_token_for_node, call_as

    admin, ns = live.plane.admin, live.namespace
    admin.create(f"/api/v1/namespaces/{ns}/pods", creatable(b.pod("owned-here", namespace=ns, node_name=live.here)))
    token = agent_token_for_node(admin, live.here)
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "gone", "uid": "00000000-0000-0000-0000-000000000001"}
    allowed = []
    for patch in ({"metadata": {"ownerReferences": [owner]}}, {"metadata": {"finalizers": ["example.com/hold"]}},
                  {"metadata": {"ownerReferences": [owner], "annotations": {"tessera.dev/phase": "Allocated"}}}):
        status, body = call_as(live.plane, token, "PATCH", f"/api/v1/namespaces/{ns}/pods/owned-here", patch,
                               MERGE_PATCH)
        if status < 300:
            allowed.append(patch)
        else:  # refused as a change beyond the phase annotation, or (with it) as a phase change not allowed
            assert status == 403 and ("may only change the tessera.dev/phase annotation" in body
                                      or "tessera-agent may not change tessera.dev/phase" in body), body
    meta = admin.get(f"/api/v1/namespaces/{ns}/pods/owned-here")["metadata"]
    assert not allowed, f"the agent's token was allowed {allowed}: {meta.get('ownerReferences')} {meta.get('finalizers')}"
    # the one write it needs still goes through
    status, body = call_as(live.plane, token, "PATCH", f"/api/v1/namespaces/{ns}/pods/owned-here",
                           {"metadata": {"annotations": {"tessera.dev/phase": "Allocated"}}}, MERGE_PATCH)
    assert status == 200, body


def test_agent_token_cannot_create_devices_named_after_another_node(live: Live) -> None:
    """A security review: an agent created `<other node>.gpu-squat` with its own spec.nodeName;
    the device policy checked only spec.nodeName, so an agent could take the names another node's
    agent will publish under (scheduler/agent/publish.py er_name: `<node>.<device>`, label
    tessera.dev/node=<node>). The name and the label must be its own node's; its own still go."""
    from scheduler.agent.devices import DeviceInfo
    from scheduler.agent.publish import EXTENDED_RESOURCES, build_object
    from tests.e2e.test_deploy import agent_token_for_node, call_as

    admin = live.plane.admin
    token = agent_token_for_node(admin, live.here)
    uid = admin.get(f"/api/v1/nodes/{live.here}")["metadata"]["uid"]
    device = DeviceInfo(uuid="GPU-squat-0001", model="Tesla T4", memory_bytes=16 * 1024 ** 3)
    own = build_object(live.here, uid, "nvidia.com/gpu", device)
    squat = {**own, "metadata": {**own["metadata"], "name": f"{live.elsewhere}.gpu-squat"}}
    mislabelled = {**own, "metadata": {**own["metadata"], "name": f"{live.here}.gpu-mislabelled",
                                       "labels": {"tessera.dev/node": live.elsewhere}}}
    # `<node>.b.gpu-x` is node `<node>.b`'s name (er_name puts no dot after `<node>.`): startsWith
    # `<node>.` alone let this node's agent take it
    dotted = {**own, "metadata": {**own["metadata"], "name": f"{live.here}.b.gpu-dotted"}}
    results = {}
    for name, body in (("squat", squat), ("mislabelled", mislabelled), ("dotted", dotted)):
        status, text = call_as(live.plane, token, "POST", EXTENDED_RESOURCES, body)
        results[name] = (status, json.loads(text).get("message", text))  # the body escapes < and >
    assert all(status == 403 and "names its ExtendedResources <node>.<device>" in text
               for status, text in results.values()), results
    status, text = call_as(live.plane, token, "POST", EXTENDED_RESOURCES, own)
    assert status == 201, text
    admin.delete(f"{EXTENDED_RESOURCES}/{own['metadata']['name']}")
