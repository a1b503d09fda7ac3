"""deploy/README.md's security notes: the probe port serves /configz (and the GPU map when it is
on) without authentication, as an on-call trial found, and the NetworkPolicy the notes give
selects the scheduler pods of both the kustomize tree and the chart, on their probe port."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.deploy_manifests import find, helm_binary, helm_template

REPO = Path(__file__).resolve().parents[2]


def _notes() -> str:
    text = (REPO / "deploy" / "README.md").read_text()
    return text.split("## Security notes", 1)[1].split("\n## ", 1)[0]


def network_policy() -> dict[str, Any]:
    """The NetworkPolicy of the security notes, as a user copies it."""
    block = _notes().split("```yaml", 1)[1].split("```", 1)[0]
    policy: dict[str, Any] = yaml.safe_load(block)
    assert policy["kind"] == "NetworkPolicy"
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


def test_the_notes_network_policy_selects_the_scheduler_pods_on_their_probe_port() -> None:
    policy = network_policy()
    selector = policy["spec"]["podSelector"]["matchLabels"]
    [rule] = policy["spec"]["ingress"]
    allowed = {p["port"] for p in rule["ports"]}
    kustomize = yaml.safe_load((REPO / "deploy" / "scheduler" / "deployment.yaml").read_text())
    chart = find(helm_template(helm_binary()), "Deployment", "tessera-scheduler")
    for deployment in (kustomize, chart):
        labels, ports = _pod_template(deployment)
        assert selector.items() <= labels.items(), labels
        assert allowed == ports == {10251}
        assert deployment["metadata"]["namespace"] == policy["metadata"]["namespace"]
