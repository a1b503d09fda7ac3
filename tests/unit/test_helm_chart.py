"""The Helm chart (deploy/helm/tessera) installs what the kustomize tree (deploy/) installs, and its
values reach the objects they name (issue 16).

Why compare rendered objects: the chart and the tree are two copies of one installation, and a
rule, a probe or a CRD field changed in one of them only would ship two different schedulers.
`helm template --include-crds` at default values must give the tree's objects, field for field,
with three deliberate differences, each checked rather than ignored:
- no Namespace object: Helm creates the release namespace (`--create-namespace`), and a chart
  cannot own the namespace its release is stored in;
- the ConfigMap's configuration is compared as YAML data, not text (the chart renders it from
  values, without the tree's comments);
- the Deployment's pod template carries `checksum/config`, the hash of that configuration, so a
  `helm upgrade` with a new configuration restarts the scheduler.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.api.config import load_config
from tests.deploy_manifests import CHART, deploy_documents, find, helm_binary, helm_template, helm_template_error, key, run_helm

Obj = dict[str, Any]
CONFIG_MAP = "tessera-scheduler-config"
CHECKSUM = "checksum/config"


@pytest.fixture(scope="module")
def helm() -> Path:
    return helm_binary()


@pytest.fixture(scope="module")
def rendered(helm: Path) -> list[Obj]:
    return helm_template(helm)


def _config_text(docs: list[Obj]) -> str:
    return str(find(docs, "ConfigMap", CONFIG_MAP)["data"]["config.yaml"])


def _comparable(doc: Obj) -> Obj:
    """The object with its configuration file parsed (text -> data) and without the config hash."""
    doc = json.loads(json.dumps(doc))
    if doc["kind"] == "ConfigMap" and doc["metadata"]["name"] == CONFIG_MAP:
        doc["data"]["config.yaml"] = yaml.safe_load(doc["data"]["config.yaml"])
    if doc["kind"] == "Deployment":
        doc["spec"]["template"]["metadata"].get("annotations", {}).pop(CHECKSUM, None)
    return doc


def _diff(expected: Obj, actual: Obj) -> str:
    lines = difflib.unified_diff(yaml.safe_dump(expected, sort_keys=True).splitlines(),
                                 yaml.safe_dump(actual, sort_keys=True).splitlines(),
                                 "kustomize", "helm", lineterm="")
    return "\n".join(lines)


def _containers(docs: list[Obj], kind: str, name: str) -> Obj:
    (container,) = find(docs, kind, name)["spec"]["template"]["spec"]["containers"]
    return dict(container)


# --- one source of truth ------------------------------------------------------------------------


def test_helm_lint_passes_strictly(helm: Path) -> None:
    done = run_helm(helm, "lint", "--strict", str(CHART))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 chart(s) failed" in done.stdout


def test_default_values_render_exactly_the_kustomize_tree(rendered: list[Obj]) -> None:
    tree = {key(doc): doc for doc in deploy_documents()}
    chart = {key(doc): doc for doc in rendered}
    assert len(chart) == len(rendered), "the chart renders an object twice"
    namespaces = [k for k in tree if k[0] == "Namespace"]
    assert namespaces == [("Namespace", "", "tessera-system")]
    assert set(chart) == set(tree) - set(namespaces), (
        f"only in the chart: {sorted(set(chart) - set(tree))}; only in deploy/: {sorted(set(tree) - set(chart))}")
    for k, doc in chart.items():
        expected, actual = _comparable(tree[k]), _comparable(doc)
        assert expected == actual, f"{k} differs between deploy/ and the chart:\n{_diff(expected, actual)}"


def test_the_config_hash_is_the_rendered_configuration(rendered: list[Obj]) -> None:
    annotations = find(rendered, "Deployment", "tessera-scheduler")["spec"]["template"]["metadata"]["annotations"]
    text = _config_text(rendered)
    assert annotations[CHECKSUM] == hashlib.sha256(text.rstrip("\n").encode()).hexdigest()


# --- values ------------------------------------------------------------------------------------------


def test_another_namespace_moves_every_reference_to_it(helm: Path, tmp_path: Path) -> None:
    docs = helm_template(helm, namespace="gpu-sched")
    namespaced = [d for d in docs if "namespace" in d["metadata"]]
    assert {d["metadata"]["namespace"] for d in namespaced} == {"gpu-sched"}
    for binding in (d for d in docs if d["kind"] in ("ClusterRoleBinding", "RoleBinding")):
        assert [s["namespace"] for s in binding["subjects"]] == ["gpu-sched"]
    # The Lease the configuration names is the one the Role grants, in the release namespace.
    path = tmp_path / "config.yaml"
    path.write_text(_config_text(docs))
    election = load_config(str(path)).leader_election
    role = find(docs, "Role", "tessera-scheduler-leader-election")
    assert election.leader_elect and election.resource_namespace == role["metadata"]["namespace"] == "gpu-sched"
    assert [r["resourceNames"] for r in role["rules"] if r.get("resourceNames")] == [[election.resource_name]]
    # The admission policy exempts exactly the chart's two ServiceAccounts.
    policy = json.dumps(find(docs, "ValidatingAdmissionPolicy", "tessera-annotations"))
    named = set(re.findall(r"system:serviceaccount:([a-z0-9-]+):([a-z0-9-]+)", policy))
    accounts = {(d["metadata"]["namespace"], d["metadata"]["name"]) for d in docs if d["kind"] == "ServiceAccount"}
    assert named == accounts == {("gpu-sched", "tessera-scheduler"), ("gpu-sched", "tessera-agent")}


def test_values_reach_the_objects(helm: Path) -> None:
    values = {
        "image": {"repository": "registry.example.com/tessera", "tag": "9.9.9", "pullPolicy": "Always"},
        "scheduler": {"replicas": 3, "resources": {"requests": {"cpu": "1"}}, "tolerations": [{"operator": "Exists"}],
                      "extraArgs": ["--gpu-map"]},
        "leaderElection": {"resourceName": "tessera-gpu", "leaseDuration": "60s"},
        "schedulerConfig": {"podMaxBackoffSeconds": 60},
        "agent": {"nodeSelector": {"gpu": "yes"}, "runtimeClassName": "nvidia", "backend": "fake",
                  "extraArgs": ["--fake-devices=/etc/gpus.yaml"]},
    }
    docs = helm_template(helm, values)
    deployment = find(docs, "Deployment", "tessera-scheduler")
    scheduler = _containers(docs, "Deployment", "tessera-scheduler")
    agent = _containers(docs, "DaemonSet", "tessera-agent")
    assert scheduler["image"] == agent["image"] == "registry.example.com/tessera:9.9.9"
    assert scheduler["imagePullPolicy"] == "Always"
    assert deployment["spec"]["replicas"] == 3
    assert scheduler["args"][-1] == "--gpu-map"
    assert scheduler["resources"]["requests"] == {"cpu": "1", "memory": "256Mi"}  # values merge over defaults
    assert deployment["spec"]["template"]["spec"]["tolerations"] == [{"operator": "Exists"}]
    config = yaml.safe_load(_config_text(docs))
    assert config["podMaxBackoffSeconds"] == 60 and config["podInitialBackoffSeconds"] == 2  # merged over defaults
    assert config["leaderElection"]["resourceName"] == "tessera-gpu" and config["leaderElection"]["leaseDuration"] == "60s"
    role = find(docs, "Role", "tessera-scheduler-leader-election")
    assert [r["resourceNames"] for r in role["rules"] if r.get("resourceNames")] == [["tessera-gpu"]]
    pod = find(docs, "DaemonSet", "tessera-agent")["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"gpu": "yes"} and pod["runtimeClassName"] == "nvidia"
    assert "nodeAffinity" in pod["affinity"], "the default GPU-node affinity still applies"
    assert agent["args"][2:] == ["--backend=fake", "--fake-devices=/etc/gpus.yaml"]
    # A new configuration is a new pod template (the pods roll).
    default = find(helm_template(helm), "Deployment", "tessera-scheduler")
    assert (deployment["spec"]["template"]["metadata"]["annotations"][CHECKSUM]
            != default["spec"]["template"]["metadata"]["annotations"][CHECKSUM])


def test_optional_parts_can_be_left_out(helm: Path) -> None:
    values = {"agent": {"enabled": False}, "admissionPolicy": {"enabled": False}, "userRoles": {"enabled": False},
              "scheduler": {"replicas": 1, "podDisruptionBudget": {"enabled": False},
                            "metricsService": {"enabled": False}},
              "leaderElection": {"enabled": False}}
    docs = helm_template(helm, values)
    assert {(d["kind"], d["metadata"]["name"]) for d in docs if d["kind"] != "CustomResourceDefinition"} == {
        ("ServiceAccount", "tessera-scheduler"), ("ClusterRole", "tessera-scheduler"),
        ("ClusterRoleBinding", "tessera-scheduler"), ("ConfigMap", CONFIG_MAP), ("Deployment", "tessera-scheduler")}
    assert yaml.safe_load(_config_text(docs))["leaderElection"]["leaderElect"] is False


@pytest.mark.parametrize(("values", "message"), [
    ({"leaderElection": {"enabled": False}}, "scheduler.replicas > 1 needs leaderElection.enabled"),
    ({"schedulerConfig": {"leaderElection": {"leaderElect": False}}}, "schedulerConfig.leaderElection: set leader"),
])
def test_unsafe_values_are_refused(helm: Path, values: Obj, message: str) -> None:
    assert message in helm_template_error(helm, values)
