"""Least privilege, proven on the real apiserver (issue 6, "Security"): the roles in deploy/rbac/
grant exactly what the scheduler and the agent use — nothing works without any one of their
permissions, and nothing beyond them is granted.

How each claim is covered:
- **Every permission is needed** (per rule, resource and verb — the "atoms" of a role): for each
  atom, a fresh ServiceAccount gets a copy of the role without that atom, and every API call the
  component makes is issued with that ServiceAccount's token. The calls that the missing atom
  covered must answer 403 from the authorizer, all others must pass authorization. The calls are
  the exact ones of the code (paths from ``scheduler/kube``'s own constants, same verbs, same
  subresources; writes are dry runs or aim at absent objects, since a 404 or 409 already proves
  that authorization passed).
- **The role is enough**: the complete role passes every call, and test_deploy.py runs the whole
  scheduler process with its ServiceAccount until it has bound pods, written Events, a
  PodScheduled condition, a PodGroup and a ResourceClass status and held the Lease.
- **Nothing more**: the complete roles are refused a list of calls that neither component makes
  (Secrets, other Leases, creating pods, ...).
- **Failure is visible** when a permission is missing, for the two that matter most, with the real
  process: without ``pods/binding create`` nothing is bound, ``tessera_bindings_total{result=
  "error"}`` counts the failures and the pod gets a FailedScheduling Event that says why; without
  ``nodes list`` the process stays unready (``/readyz`` 500, the reason in the log) and alive (``/healthz`` 200).
  Leader election without ``leases get/update`` is covered by the API-call check (the elector's
  first step is that GET).
- The agent's role is checked the same way against the calls of scheduler/agent/ (its process
  needs a kubelet and GPUs or a fake device file, and is exercised end to end by the agent's own
  tests; its pod-annotation writes are also checked in test_admission_policy.py).
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from scheduler.agent.publish import EXTENDED_RESOURCES as AGENT_ERS
from scheduler.kube.controlplane import LocalControlPlane
from scheduler.kube.controlplane.rest import RestClient
from scheduler.kube.http import MERGE_PATCH, STRATEGIC_PATCH
from scheduler.kube.informers import (
    CLAIMS,
    DISRUPTION_BUDGETS,
    EXTENDED_RESOURCES,
    NODES,
    POD_GROUPS,
    PODS,
    PRIORITY_CLASSES,
    RESOURCE_CLASSES,
    STORAGE_CLASSES,
    VOLUMES,
    WORKLOAD_POD_GROUPS,
)
from scheduler.kube.leader import LEASES
from scheduler.sim import builders as b
from tests.deploy_manifests import deploy_documents
from tests.e2e.live import TesseraProcess, creatable, eventually
from tests.e2e.test_deploy import (
    SYSTEM_NAMESPACE,
    assert_no_secrets,
    call_as,
    fetch,
    find,
    forbidden_by_rbac,
    install_deploy,
    remove_admission_policy,
    service_account_token,
    token_kubeconfig,
    write_scheduler_config,
)

RBAC = "/apis/rbac.authorization.k8s.io/v1"
E2E_LABEL = "tessera.dev/e2e-rbac"
LEASE_NAME = "tessera"
Obj = dict[str, Any]


@dataclass(frozen=True)
class Atom:
    """One permission: verb on group/resource (optionally only the named objects)."""

    group: str
    resource: str
    verb: str
    names: tuple[str, ...] = ()
    namespace: str = ""  # "" = from a ClusterRole (all namespaces), else a Role's namespace

    def grants(self, call: Call) -> bool:
        return (self.group == call.group and self.resource == call.resource and self.verb == call.verb
                and (not self.names or call.name in self.names)
                and (not self.namespace or self.namespace == call.namespace))

    def rule(self) -> Obj:
        rule: Obj = {"apiGroups": [self.group], "resources": [self.resource], "verbs": [self.verb]}
        if self.names:
            rule["resourceNames"] = list(self.names)
        return rule


@dataclass(frozen=True)
class Call:
    """One API request a component makes, and the permission it needs."""

    where: str  # the code that makes it
    method: str
    path: str
    group: str
    resource: str
    verb: str
    name: str = ""  # the object name the authorizer sees ("" for create, list and watch)
    namespace: str = ""
    body: Any = None
    content_type: str = "application/json"


def atoms_of(role: Obj) -> list[Atom]:
    namespace = role["metadata"].get("namespace", "") if role["kind"] == "Role" else ""
    return [Atom(group, resource, verb, tuple(rule.get("resourceNames", ())), namespace)
            for rule in role["rules"] for group in rule["apiGroups"] for resource in rule["resources"]
            for verb in rule["verbs"]]


def scheduler_atoms() -> list[Atom]:
    docs = deploy_documents()
    return (atoms_of(find(docs, "ClusterRole", "tessera-scheduler"))
            + atoms_of(find(docs, "Role", "tessera-scheduler-leader-election")))


def agent_atoms() -> list[Atom]:
    return atoms_of(find(deploy_documents(), "ClusterRole", "tessera-agent"))


def _watch(path: str, selector: str = "") -> str:
    # informers.py Informer._watch; timeoutSeconds short because we only need the answer's status.
    return f"{path}?watch=true&allowWatchBookmarks=true&timeoutSeconds=1{selector}"


def scheduler_calls(ns: str) -> list[Call]:
    """Every request `tessera run` makes (scheduler/kube), with the permission each needs."""
    leases = LEASES.format(namespace=SYSTEM_NAMESPACE)
    calls = []
    for kind, group, resource in ((NODES, "", "nodes"), (PODS, "", "pods"),
                                  (EXTENDED_RESOURCES, "tessera.dev", "extendedresources"),
                                  (RESOURCE_CLASSES, "tessera.dev", "resourceclasses"),
                                  (POD_GROUPS, "scheduling.x-k8s.io", "podgroups"),
                                  (DISRUPTION_BUDGETS, "policy", "poddisruptionbudgets"),
                                  (PRIORITY_CLASSES, "scheduling.k8s.io", "priorityclasses"),
                                  (WORKLOAD_POD_GROUPS, "scheduling.k8s.io", "podgroups"),
                                  (CLAIMS, "", "persistentvolumeclaims"), (VOLUMES, "", "persistentvolumes"),
                                  (STORAGE_CLASSES, "storage.k8s.io", "storageclasses")):
        calls += [Call(f"informers.py {kind.label} list", "GET", f"{kind.path}?limit=500", group, resource, "list"),
                  Call(f"informers.py {kind.label} watch", "GET", _watch(kind.path), group, resource, "watch")]
    binding = {"apiVersion": "v1", "kind": "Binding",
               "metadata": {"name": "absent", "namespace": ns, "annotations": {"tessera.dev/phase": "Allocating"}},
               "target": {"apiVersion": "v1", "kind": "Node", "name": "absent-node"}}
    event = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "rbac-probe", "namespace": ns},
             "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "tessera",
             "reportingInstance": "rbac-probe", "action": "Binding", "reason": "Scheduled", "type": "Normal",
             "note": "probe", "regarding": {"kind": "Pod", "apiVersion": "v1", "name": "absent", "namespace": ns}}
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": LEASE_NAME, "namespace": SYSTEM_NAMESPACE}, "spec": {"holderIdentity": ""}}
    calls += [
        Call("binder.py Binder._resolve", "GET", f"/api/v1/namespaces/{ns}/pods/absent", "", "pods", "get",
             "absent", ns),
        Call("binder.py Binder._bound_by_ours", "GET",
             f"/api/v1/namespaces/{ns}/pods?watch=true&fieldSelector=metadata.name%3Dabsent"
             "&allowWatchBookmarks=false&timeoutSeconds=1", "", "pods", "watch", "absent", ns),
        Call("binder.py Binder._post", "POST", f"/api/v1/namespaces/{ns}/pods/absent/binding?dryRun=All",
             "", "pods/binding", "create", "absent", ns, binding),
        Call("status.py StatusWriter.pod_waiting", "PATCH", f"/api/v1/namespaces/{ns}/pods/absent/status",
             "", "pods/status", "patch", "absent", ns, {"status": {"conditions": []}}, STRATEGIC_PATCH),
        Call("evictor.py Evictor._evict (delete)", "DELETE", f"/api/v1/namespaces/{ns}/pods/absent", "", "pods",
             "delete", "absent", ns),
        Call("recorder.py EventRecorder._write", "POST", f"/apis/events.k8s.io/v1/namespaces/{ns}/events?dryRun=All",
             "events.k8s.io", "events", "create", "", ns, event),
        Call("recorder.py EventRecorder._patch_series", "PATCH",
             f"/apis/events.k8s.io/v1/namespaces/{ns}/events/absent", "events.k8s.io", "events", "patch", "absent",
             ns, {"series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:00.000000Z"}}, MERGE_PATCH),
        Call("volume_writes.py write (volume)", "PATCH", "/api/v1/persistentvolumes/absent", "", "persistentvolumes",
             "patch", "absent", "", {"spec": {"claimRef": {"namespace": ns, "name": "absent"}}}, MERGE_PATCH),
        Call("volume_writes.py write (claim)", "PATCH", f"/api/v1/namespaces/{ns}/persistentvolumeclaims/absent", "",
             "persistentvolumeclaims", "patch", "absent", ns,
             {"metadata": {"annotations": {"volume.kubernetes.io/selected-node": "absent-node"}}}, MERGE_PATCH),
        Call("status.py StatusWriter.resource_class", "PATCH", "/apis/tessera.dev/v1alpha1/resourceclasses/absent/status",
             "tessera.dev", "resourceclasses/status", "patch", "absent", "", {"status": {"matchingDevices": 0}},
             MERGE_PATCH),
        Call("status.py StatusWriter.pod_group", "PATCH",
             f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups/absent/status",
             "scheduling.x-k8s.io", "podgroups/status", "patch", "absent", ns, {"status": {"phase": "Pending"}},
             MERGE_PATCH),
        Call("status.py StatusWriter.workload_pod_group", "PATCH",
             f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{ns}/podgroups/absent/status",
             "scheduling.k8s.io", "podgroups/status", "patch", "absent", ns, {"status": {"conditions": []}},
             STRATEGIC_PATCH),
        Call("leader.py LeaderElector._get", "GET", f"{leases}/{LEASE_NAME}", "coordination.k8s.io", "leases", "get",
             LEASE_NAME, SYSTEM_NAMESPACE),
        Call("leader.py LeaderElector._create", "POST", f"{leases}?dryRun=All", "coordination.k8s.io", "leases",
             "create", "", SYSTEM_NAMESPACE, lease),
        Call("leader.py LeaderElector._update", "PUT", f"{leases}/{LEASE_NAME}?dryRun=All", "coordination.k8s.io",
             "leases", "update", LEASE_NAME, SYSTEM_NAMESPACE, lease),
    ]
    return calls


def agent_calls(ns: str) -> list[Call]:
    """Every request `tessera agent` makes (scheduler/agent), with the permission each needs."""
    ers = AGENT_ERS
    er = {"apiVersion": "tessera.dev/v1alpha1", "kind": "ExtendedResource", "metadata": {"name": "absent"},
          "spec": {"nodeName": "absent-node", "resourceName": "nvidia.com/gpu", "deviceID": "GPU-absent"}}
    by_node = "&fieldSelector=spec.nodeName%3Dabsent-node"
    return [
        Call("publish.py Publisher.list_objects", "GET", f"{ers}?labelSelector=tessera.dev%2Fnode%3Dabsent-node",
             "tessera.dev", "extendedresources", "list"),
        Call("publish.py Publisher._publish_one (create)", "POST", f"{ers}?dryRun=All", "tessera.dev",
             "extendedresources", "create", body=er),
        Call("publish.py Publisher._publish_one (adopt)", "GET", f"{ers}/absent", "tessera.dev", "extendedresources",
             "get", "absent"),
        Call("publish.py Publisher._publish_one (update)", "PUT", f"{ers}/absent", "tessera.dev", "extendedresources",
             "update", "absent", body=er),
        Call("publish.py Publisher._publish_one (status)", "PATCH", f"{ers}/absent/status", "tessera.dev",
             "extendedresources/status", "patch", "absent",
             body={"status": {"lastHeartbeatTime": "2026-01-01T00:00:00Z"}}, content_type=MERGE_PATCH),
        Call("publish.py Publisher._delete", "DELETE", f"{ers}/absent", "tessera.dev", "extendedresources", "delete",
             "absent"),
        Call("publish.py Publisher.fetch_node_uid", "GET", "/api/v1/nodes/absent-node", "", "nodes", "get",
             "absent-node"),
        Call("agent.py class informer list", "GET", f"{RESOURCE_CLASSES.path}?limit=500", "tessera.dev",
             "resourceclasses", "list"),
        Call("agent.py class informer watch", "GET", _watch(RESOURCE_CLASSES.path), "tessera.dev", "resourceclasses",
             "watch"),
        Call("agent.py pod informer list / _list_pods", "GET", f"{PODS.path}?limit=500{by_node}", "", "pods", "list"),
        Call("agent.py pod informer watch", "GET", _watch(PODS.path, by_node), "", "pods", "watch"),
        Call("agent.py Agent._patch_allocated", "PATCH", f"/api/v1/namespaces/{ns}/pods/absent", "", "pods", "patch",
             "absent", ns, {"metadata": {"annotations": {"tessera.dev/phase": "Allocated"}}}, MERGE_PATCH),
    ]


def never_granted(ns: str) -> list[Call]:
    """Requests neither component makes: the complete roles must refuse them all."""
    kube_system_leases = LEASES.format(namespace="kube-system")
    own_leases = LEASES.format(namespace=SYSTEM_NAMESPACE)
    return [
        Call("secrets", "GET", "/api/v1/secrets?limit=1", "", "secrets", "list"),
        Call("secret", "GET", f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/secrets/any", "", "secrets", "get", "any"),
        Call("configmaps", "GET", "/api/v1/configmaps?limit=1", "", "configmaps", "list"),
        Call("kube-scheduler's lease", "GET", f"{kube_system_leases}/kube-scheduler", "coordination.k8s.io",
             "leases", "get", "kube-scheduler", "kube-system"),
        Call("another lease", "PUT", f"{own_leases}/other?dryRun=All", "coordination.k8s.io", "leases", "update",
             "other", SYSTEM_NAMESPACE, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                         "metadata": {"name": "other", "namespace": SYSTEM_NAMESPACE}}),
        Call("create pods", "POST", f"/api/v1/namespaces/{ns}/pods?dryRun=All", "", "pods", "create", "", ns,
             creatable(b.pod("x", namespace=ns))),
        Call("evict pods", "POST", f"/api/v1/namespaces/{ns}/pods/absent/eviction", "", "pods/eviction", "create",
             "absent", ns, {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "absent"}}),
        Call("patch nodes", "PATCH", "/api/v1/nodes/absent", "", "nodes", "patch", "absent", "",
             {"metadata": {"labels": {"x": "y"}}}, MERGE_PATCH),
        Call("delete classes", "DELETE", "/apis/tessera.dev/v1alpha1/resourceclasses/absent", "tessera.dev",
             "resourceclasses", "delete", "absent"),
        Call("serviceaccounts", "GET", "/api/v1/namespaces/default/serviceaccounts?limit=1", "", "serviceaccounts",
             "list"),
        Call("RBAC", "GET", f"{RBAC}/clusterroles?limit=1", "rbac.authorization.k8s.io", "clusterroles", "list"),
    ]


@dataclass
class Variant:
    """A ServiceAccount holding `atoms` (a component's role, possibly without one atom)."""

    component: str
    label: str
    atoms: list[Atom]
    missing: Atom | None = None
    token: str = ""
    results: dict[str, tuple[int, str]] = field(default_factory=dict)  # by Call.where


def _create_variant(admin: RestClient, ns: str, index: int, variant: Variant) -> None:
    sa = f"rbac-{index:02d}"
    admin.create(f"/api/v1/namespaces/{ns}/serviceaccounts", {"metadata": {"name": sa}})
    subject = [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]
    labels = {E2E_LABEL: ns}
    cluster_rules = [a.rule() for a in variant.atoms if not a.namespace]
    by_namespace: dict[str, list[Obj]] = {}
    for atom in variant.atoms:
        if atom.namespace:
            by_namespace.setdefault(atom.namespace, []).append(atom.rule())
    name = f"{ns}-{sa}"
    admin.create(f"{RBAC}/clusterroles", {"metadata": {"name": name, "labels": labels}, "rules": cluster_rules})
    admin.create(f"{RBAC}/clusterrolebindings", {
        "metadata": {"name": name, "labels": labels}, "subjects": subject,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}})
    for role_ns, rules in by_namespace.items():
        admin.create(f"{RBAC}/namespaces/{role_ns}/roles", {"metadata": {"name": name, "labels": labels}, "rules": rules})
        admin.create(f"{RBAC}/namespaces/{role_ns}/rolebindings", {
            "metadata": {"name": name, "labels": labels}, "subjects": subject,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}})
    variant.token = service_account_token(admin, ns, sa)


def _run_calls(plane: LocalControlPlane, variant: Variant, calls: list[Call], timeout: float = 30.0) -> None:
    """Issue the calls; repeat while a call the variant should be allowed is still refused (RBAC is
    eventually consistent: the authorizer learns of new bindings through a watch). A variant that
    never settles is reported by the tests with the answers it got."""
    expected = [call for call in calls if any(atom.grants(call) for atom in variant.atoms)]
    deadline = time.monotonic() + timeout
    while True:
        for call in calls:
            variant.results[call.where] = call_as(plane, variant.token, call.method, call.path, call.body, call.content_type)
        if not any(forbidden_by_rbac(*variant.results[c.where]) for c in expected) or time.monotonic() > deadline:
            return
        time.sleep(0.3)


@pytest.fixture(scope="module")
def rbac_namespace(control_plane: LocalControlPlane) -> Iterator[str]:
    """deploy/ installed, plus a namespace for the variant ServiceAccounts; everything the module
    made is removed afterwards (the roles by label)."""
    install_deploy(control_plane)
    admin = control_plane.admin
    ns = f"rbac-{secrets.token_hex(3)}"
    admin.create("/api/v1/namespaces", {"metadata": {"name": ns, "labels": {"tessera.dev/e2e": "true"}}})
    # The elector only PUTs a Lease it has read. A PUT of an absent Lease would be a create (Leases
    # allow create-on-update) and need the `create` verb instead; so the Lease must exist.
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": LEASE_NAME, "namespace": SYSTEM_NAMESPACE}, "spec": {}}
    admin.request("POST", LEASES.format(namespace=SYSTEM_NAMESPACE), lease, ok=(201, 409))
    try:
        yield ns
    finally:
        selector = f"?labelSelector={E2E_LABEL}%3D{ns}"
        admin.request("DELETE", f"{RBAC}/clusterrolebindings{selector}")
        admin.request("DELETE", f"{RBAC}/clusterroles{selector}")
        admin.request("DELETE", f"{RBAC}/namespaces/{SYSTEM_NAMESPACE}/rolebindings{selector}")
        admin.request("DELETE", f"{RBAC}/namespaces/{SYSTEM_NAMESPACE}/roles{selector}")
        admin.delete(f"/api/v1/namespaces/{ns}")
        remove_admission_policy(admin)


@pytest.fixture(scope="module")
def variants(control_plane: LocalControlPlane, rbac_namespace: str) -> dict[str, Variant]:
    """One ServiceAccount per (component, missing atom), plus one per complete role; all calls
    issued with each."""
    ns = rbac_namespace
    plan: list[Variant] = []
    for component, atoms in (("scheduler", scheduler_atoms()), ("agent", agent_atoms())):
        plan.append(Variant(component, f"{component}: complete role", atoms))
        for atom in atoms:
            rest = [a for a in atoms if a != atom]
            group = f".{atom.group}" if atom.group else ""
            plan.append(Variant(component, f"{component}: without {atom.verb} {atom.resource}{group}", rest, atom))
    admin = control_plane.admin
    for index, variant in enumerate(plan):
        _create_variant(admin, ns, index, variant)
    calls = {"scheduler": scheduler_calls(ns), "agent": agent_calls(ns)}
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda v: _run_calls(control_plane, v, calls[v.component] + never_granted(ns)), plan))
    return {v.label: v for v in plan}


def _refused(variant: Variant, call: Call) -> bool:
    return forbidden_by_rbac(*variant.results[call.where])


def test_complete_roles_allow_every_call_and_nothing_else(variants: dict[str, Variant], rbac_namespace: str) -> None:
    for component, calls in (("scheduler", scheduler_calls(rbac_namespace)), ("agent", agent_calls(rbac_namespace))):
        variant = variants[f"{component}: complete role"]
        refused = [f"{c.where}: {variant.results[c.where]}" for c in calls if _refused(variant, c)]
        assert not refused, f"the {component} role does not allow:\n" + "\n".join(refused)
        allowed = [c.where for c in never_granted(rbac_namespace) if not _refused(variant, c)]
        assert not allowed, f"the {component} role allows more than it needs: {allowed}"


@pytest.mark.parametrize("component", ["scheduler", "agent"])
def test_every_permission_is_needed(variants: dict[str, Variant], rbac_namespace: str, component: str) -> None:
    """Without any one atom of the role, exactly the calls that atom covers are refused."""
    calls = scheduler_calls(rbac_namespace) if component == "scheduler" else agent_calls(rbac_namespace)
    problems = []
    checked = 0
    for variant in variants.values():
        if variant.component != component or variant.missing is None:
            continue
        checked += 1
        needs = [c for c in calls if variant.missing.grants(c)]
        if not needs:
            problems.append(f"{variant.label}: no call of {component} uses it (remove it from the role)")
        for call in calls:
            should_refuse = not any(atom.grants(call) for atom in variant.atoms)
            if _refused(variant, call) != should_refuse:
                status, body = variant.results[call.where]
                problems.append(f"{variant.label}: {call.where} answered {status} {body[:160]}")
    assert checked >= (20 if component == "scheduler" else 12)
    assert not problems, "\n".join(problems)


# --- the real process without a permission -------------------------------------------------------------


async def _start(plane: LocalControlPlane, variant: Variant, tmp_path: Path, name: str) -> TesseraProcess:
    kubeconfig = token_kubeconfig(plane, tmp_path / f"{name}.kubeconfig", name, variant.token)
    # No leader election: these runs check other permissions and must not wait for the Lease.
    config = write_scheduler_config(tmp_path / f"{name}.yaml", leader_elect=False)
    process = TesseraProcess(kubeconfig, config, tmp_path, name=name)
    process.start()
    return process


async def test_without_binding_permission_nothing_is_bound_and_it_says_why(
        control_plane: LocalControlPlane, variants: dict[str, Variant], namespace: str, tmp_path: Path) -> None:
    variant = variants["scheduler: without create pods/binding"]
    nodes = control_plane.add_fake_gpu_nodes(1, 2, "T4", memory="16Gi", prefix="rbac-t4")
    process = await _start(control_plane, variant, tmp_path, "no-binding")
    try:
        await process.wait_ready(30)
        admin = control_plane.admin
        admin.create(f"/api/v1/namespaces/{namespace}/pods",
                     creatable(b.pod("wants-gpu", namespace=namespace, limits={"nvidia.com/gpu": 1})))

        async def failed_event() -> Obj | None:
            events = admin.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
            return next((e for e in events if e["reason"] == "FailedScheduling"
                         and "Binding rejected" in e.get("note", "")), None)

        event = await eventually(failed_event, 30)
        assert 'cannot create resource "pods/binding"' in event["note"]
        _, metrics = await fetch(f"http://127.0.0.1:{process.port}/metrics")
        errors = re.search(r'^tessera_bindings_total\{result="error"\} (\d+)', metrics, re.M)
        assert errors and int(errors.group(1)) >= 1, metrics
        assert not admin.get(f"/api/v1/namespaces/{namespace}/pods/wants-gpu")["spec"].get("nodeName")
        assert process.alive()
    finally:
        process.terminate()
        control_plane.remove_fake_gpu_nodes(nodes)
    assert_no_secrets("the scheduler log", process.log_path.read_text(errors="replace"),
                      [variant.token, control_plane.admin_token])


async def test_without_nodes_list_it_stays_unready_but_alive(
        control_plane: LocalControlPlane, variants: dict[str, Variant], tmp_path: Path) -> None:
    variant = variants["scheduler: without list nodes"]
    process = await _start(control_plane, variant, tmp_path, "no-nodes")
    base = f"http://127.0.0.1:{process.port}"
    try:
        async def serving() -> bool:
            try:
                return (await fetch(base + "/healthz"))[0] == 200
            except OSError:
                return False

        await eventually(serving, 30)
        denied = "[-]informer-sync failed: the apiserver denied access to Node (HTTP 403): nodes is forbidden"

        def logged() -> list[str]:
            lines = process.log_path.read_text(errors="replace").splitlines()
            entries = [json.loads(line) for line in lines if line.startswith("{")]
            return [e["failures"] for e in entries if e["event"] == "probe.failed" and e["probe"] == "readyz"]

        async def says_why() -> bool:  # once the first LIST of nodes has been refused
            status, body = await fetch(base + "/readyz")
            assert status == 500, (status, body)
            return bool(logged()) and logged()[-1].startswith(denied)  # /readyz withholds it, the log has it

        await eventually(says_why, 30)
        for _ in range(10):  # 3 s: the other informers have long synced by then
            status, body = await fetch(base + "/readyz")
            assert status == 500 and body == ("[+]shutdown ok\n[-]informer-sync failed: reason withheld\n"
                                                "[+]term-fence ok\nreadyz check failed\n"), \
                (status, body)
            assert (await fetch(base + "/healthz"))[0] == 200
            await asyncio.sleep(0.3)
        assert logged()[-1].startswith(denied)
        assert process.alive()
    finally:
        process.terminate()
    log = process.log_path.read_text(errors="replace")
    assert 'cannot list resource \\"nodes\\"' in log or 'cannot list resource "nodes"' in log, process.log()
    assert_no_secrets("the scheduler log", log, [variant.token, control_plane.admin_token])
