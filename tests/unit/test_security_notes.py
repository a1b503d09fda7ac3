"""deploy/README.md's security notes: the probe port serves /configz (and the GPU map when it is
on) without authentication, as an on-call trial found, and the NetworkPolicy that restricts it (the
chart's networkPolicy option, deploy/optional/scheduler-networkpolicy.yaml for the kustomize tree;
the notes once gave one to copy) selects the scheduler pods of both, on their probe port."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.deploy_manifests import deploy_documents, find, helm_binary, helm_template, load_documents

REPO = Path(__file__).resolve().parents[2]
OPTIONAL_POLICY = REPO / "deploy" / "optional" / "scheduler-networkpolicy.yaml"


def _notes() -> str:
    text = (REPO / "deploy" / "README.md").read_text()
    return text.split("## Security notes", 1)[1].split("\n## ", 1)[0]


def network_policy() -> dict[str, Any]:
    """The kustomize tree's optional NetworkPolicy, as a user applies it."""
    [policy] = load_documents(OPTIONAL_POLICY)
    assert policy["kind"] == "NetworkPolicy"
    return policy


def chart_network_policy() -> dict[str, Any]:
    """The chart's NetworkPolicy at networkPolicy.enabled and its default peers."""
    [policy] = [d for d in helm_template(helm_binary(), {"networkPolicy": {"enabled": True}})
                if d["kind"] == "NetworkPolicy"]
    return policy


def test_the_notes_say_configz_and_the_gpu_map_are_on_the_unauthenticated_port() -> None:
    notes = " ".join(_notes().split())
    assert "/configz" in notes and "/gpu-map" in notes and "--gpu-map" in notes
    assert "secure port (10259)" in notes  # kube-scheduler's, for comparison
    assert "--bind-address" in notes


def _pod_template(doc: dict[str, Any]) -> tuple[dict[str, str], set[int]]:
    template = doc["spec"]["template"]
    ports = {p["containerPort"] for c in template["spec"]["containers"] for p in c.get("ports", [])}
    return template["metadata"]["labels"], ports


def test_the_network_policies_select_the_scheduler_pods_on_their_probe_port() -> None:
    kustomize = yaml.safe_load((REPO / "deploy" / "scheduler" / "deployment.yaml").read_text())
    chart = find(helm_template(helm_binary()), "Deployment", "tessera-scheduler")
    for policy in (network_policy(), chart_network_policy()):
        selector = policy["spec"]["podSelector"]["matchLabels"]
        [rule] = policy["spec"]["ingress"]
        assert rule["from"], "a rule without peers admits every source"
        allowed = {p["port"] for p in rule["ports"]}
        for deployment in (kustomize, chart):
            labels, ports = _pod_template(deployment)
            assert selector.items() <= labels.items(), labels
            assert allowed == ports == {10259}
            assert deployment["metadata"]["namespace"] == policy["metadata"]["namespace"]


def test_the_notes_point_at_the_option_not_a_policy_to_copy() -> None:
    """The notes once gave a NetworkPolicy to copy; now the chart's option (its values, rendered
    here) and deploy/'s optional file, which the tests keep equal to the chart's."""
    notes = " ".join(_notes().split())
    assert "networkPolicy.enabled" in notes and "deploy/optional/scheduler-networkpolicy.yaml" in notes
    assert "kind: NetworkPolicy" not in _notes()
    [block] = [b.split("```", 1)[0] for b in _notes().split("```yaml")[1:]]
    values = yaml.safe_load(block)
    [policy] = [d for d in helm_template(helm_binary(), values) if d["kind"] == "NetworkPolicy"]
    [rule] = policy["spec"]["ingress"]
    assert rule["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                             "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}]


# The objects that give the node agent its pod-patch right, and the policies that narrow it.
_AGENT_RIGHTS = {("ServiceAccount", "tessera-agent"), ("ClusterRole", "tessera-agent"),
                 ("ClusterRoleBinding", "tessera-agent"), ("DaemonSet", "tessera-agent")}
_AGENT_POLICIES = {("ValidatingAdmissionPolicy", "tessera-annotations"),
                   ("ValidatingAdmissionPolicyBinding", "tessera-annotations"),
                   ("ValidatingAdmissionPolicy", "tessera-agent-devices"),
                   ("ValidatingAdmissionPolicyBinding", "tessera-agent-devices")}


def _kinds_and_names(docs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(doc["kind"], doc["metadata"]["name"]) for doc in docs]


def test_kubectl_apply_k_creates_the_agent_policies_before_the_agents_rights() -> None:
    """A security review: the agent's ClusterRole patches any pod, and only the annotation policies
    narrow it (to tessera.dev/phase on its own node). `kubectl apply -k deploy/` applies in order:
    the policies and their bindings come before the agent's ServiceAccount, RBAC and DaemonSet,
    so no agent token is ever unrestricted, even while an install is half done."""
    order = _kinds_and_names(deploy_documents())
    last_policy = max(order.index(p) for p in _AGENT_POLICIES)
    first_right = min(order.index(r) for r in _AGENT_RIGHTS)
    assert last_policy < first_right, order
