"""The Helm chart (deploy/helm/tessera) installs what the kustomize tree (deploy/) installs, and its
values reach the objects they name (issue 16).

Why compare rendered objects: the chart and the tree are two copies of one installation, and a
rule, a probe or a CRD field changed in one of them only would ship two different schedulers.
`helm template --include-crds` at default values must give the tree's objects, field for field,
with four deliberate differences, each checked rather than ignored:
- no Namespace object: Helm creates the release namespace (`--create-namespace`), and a chart
  cannot own the namespace its release is stored in;
- the ConfigMap's configuration is compared as YAML data, not text (the chart renders it from
  values, without the tree's comments);
- the Deployment's pod template carries `checksum/config`, the hash of that configuration, so a
  `helm upgrade` with a new configuration restarts the scheduler;
- Helm's standard labels (helm.sh/chart, managed-by, instance, version) on every templated object
  and pod template, never in a selector.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.api.config import ConfigError, load_config
from scheduler.api.config_parse import V1_API_VERSION
from scheduler.api.quantity import QuantityError, parse_quantity
from scheduler.core.framework.interface import extends
from scheduler.core.plugins.registry import REGISTRY
from scheduler.kube import run_cli
from tests import dashboard
from tests.deploy_manifests import (
    CHART,
    DEPLOY,
    NAMESPACE,
    RELEASE,
    deploy_documents,
    find,
    helm_binary,
    helm_template,
    helm_template_args,
    helm_template_error,
    key,
    kube_version_args,
    load_documents,
    run_helm,
    values_file,
)

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


# Helm's standard labels (https://helm.sh/docs/chart_best_practices/labels): on every object the
# chart templates and on its pod templates, never in a selector; the kustomize tree has none.
HELM_LABELS = {"helm.sh/chart": "tessera-0.1.0", "app.kubernetes.io/managed-by": "Helm",
               "app.kubernetes.io/instance": RELEASE, "app.kubernetes.io/version": "0.1.0"}


def _label_sets(doc: Obj) -> list[dict[str, str]]:
    """The object's labels and, for a workload, its pod template's."""
    found = [doc["metadata"].setdefault("labels", {})]
    template = doc.get("spec", {}).get("template") if isinstance(doc.get("spec"), dict) else None
    if isinstance(template, dict) and "metadata" in template:
        found.append(template["metadata"].setdefault("labels", {}))
    return found


def _without_helm_labels(doc: Obj) -> Obj:
    doc = json.loads(json.dumps(doc))
    if doc["kind"] != "CustomResourceDefinition":  # crds/ are copied as they are, not templated
        for labels in _label_sets(doc):
            for name, value in HELM_LABELS.items():
                assert labels.pop(name, None) == value, f"{key(doc)} has no {name}: {value}"
    return doc


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
        expected, actual = _comparable(tree[k]), _comparable(_without_helm_labels(doc))
        assert expected == actual, f"{k} differs between deploy/ and the chart:\n{_diff(expected, actual)}"


def test_objects_carry_helms_standard_labels_and_selectors_do_not(helm: Path, rendered: list[Obj]) -> None:
    """helm.sh/chart, app.kubernetes.io/managed-by and app.kubernetes.io/instance are REC in Helm's
    best practices (app.kubernetes.io/version OPT): `kubectl get all -l app.kubernetes.io/instance=tessera`
    found nothing. Selectors keep the tree's two labels: they are immutable, and one must be able
    to replace the other."""
    for doc in rendered:
        _without_helm_labels(doc)  # asserts each label on the object and its pod template
    for kind, name in (("Deployment", "tessera-scheduler"), ("DaemonSet", "tessera-agent"),
                       ("PodDisruptionBudget", "tessera-scheduler")):
        assert set(find(rendered, kind, name)["spec"]["selector"]["matchLabels"]) == {
            "app.kubernetes.io/name", "app.kubernetes.io/component"}
    assert set(find(rendered, "Service", "tessera-scheduler-metrics")["spec"]["selector"]) == {
        "app.kubernetes.io/name", "app.kubernetes.io/component"}
    # The version label is the image's: an overridden tag is what runs.
    tagged = helm_template(helm, {"image": {"tag": "0.2.0+build.7"}})
    assert find(tagged, "Deployment", "tessera-scheduler")["metadata"]["labels"]["app.kubernetes.io/version"] == "0.2.0_build.7"


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
    values = {"agent": {"enabled": False}, "admissionPolicy": {"enabled": False}, "gpuPodPolicy": {"enabled": False},
              "userRoles": {"enabled": False},
              "scheduler": {"replicas": 1, "podDisruptionBudget": {"enabled": False},
                            "metricsService": {"enabled": False}},
              "leaderElection": {"enabled": False}}
    docs = helm_template(helm, values)
    assert {(d["kind"], d["metadata"]["name"]) for d in docs if d["kind"] != "CustomResourceDefinition"} == {
        ("ServiceAccount", "tessera-scheduler"), ("ClusterRole", "tessera-scheduler"),
        ("ClusterRoleBinding", "tessera-scheduler"), ("ConfigMap", CONFIG_MAP), ("Deployment", "tessera-scheduler"),
        # the secure port's TokenReviews and SubjectAccessReviews, and who may read /metrics there
        ("ClusterRoleBinding", "tessera-scheduler-auth-delegator"), ("ClusterRole", "tessera-metrics-reader")}
    assert yaml.safe_load(_config_text(docs))["leaderElection"]["leaderElect"] is False


def _gpu_policy_lists(docs: list[Obj]) -> dict[str, Any]:
    """The GPU pod policy's list variables (CEL list literals, JSON here) and its binding's scope."""
    policy = find(docs, "ValidatingAdmissionPolicy", "tessera-gpu-pods")
    lists = {v["name"]: json.loads(v["expression"]) for v in policy["spec"]["variables"]
             if v["name"] in ("schedulerNames", "gpuResourceNames", "gpuResourcePrefixes", "refusedPriorityClasses")}
    binding = find(docs, "ValidatingAdmissionPolicyBinding", "tessera-gpu-pods")["spec"]
    expressions = {e["key"]: e for e in binding["matchResources"]["namespaceSelector"]["matchExpressions"]}
    lists["exempt"] = expressions.get("kubernetes.io/metadata.name", {}).get("values", [])
    lists["exemptLabel"] = (expressions["tessera.dev/gpu-pod-policy"]["operator"],
                            expressions["tessera.dev/gpu-pod-policy"]["values"])
    lists["actions"] = binding["validationActions"]
    return lists


def test_the_gpu_pod_policy_names_the_configured_profiles() -> None:
    """deploy/: the policy lets through exactly the scheduler names of the ConfigMap's profiles (a
    profile added to one and not the other would refuse that profile's GPU pods, or let another
    scheduler's through)."""
    docs = deploy_documents()
    config = yaml.safe_load(find(docs, "ConfigMap", CONFIG_MAP)["data"]["config.yaml"])
    names = [p.get("schedulerName", "tessera") for p in config["profiles"]]
    assert _gpu_policy_lists(docs) == {
        "schedulerNames": names, "gpuResourceNames": [], "gpuResourcePrefixes": ["class.tessera.dev/"],
        "refusedPriorityClasses": ["system-cluster-critical", "system-node-critical"], "exempt": ["kube-system"], "exemptLabel": ("NotIn", ["exempt"]), "actions": ["Deny"]}


def test_gpu_pod_policy_values_reach_the_policy(helm: Path) -> None:
    """The chart renders the policy's lists from values: the profiles' names (also a second
    profile), the resources a platform's ResourceClasses use, exempt namespaces, Warn to try it."""
    values = {**_two_profiles("tessera-batch"),
              "gpuPodPolicy": {"resourceNames": ["nvidia.com/gpu", "gpu.example.com/v100-32g"],
                               "resourcePrefixes": ["class.tessera.dev/", "gpu.example.com/a100-"],
                               "exemptNamespaces": ["kube-system", "gpu-operator"],
                               "refusedPriorityClasses": ["system-cluster-critical", "platform-high"],
                               "validationActions": ["Warn", "Audit"]}}
    assert _gpu_policy_lists(helm_template(helm, values)) == {
        "schedulerNames": ["tessera", "tessera-batch"],
        "gpuResourceNames": ["nvidia.com/gpu", "gpu.example.com/v100-32g"],
        "gpuResourcePrefixes": ["class.tessera.dev/", "gpu.example.com/a100-"],
        "refusedPriorityClasses": ["system-cluster-critical", "platform-high"],
        "exempt": ["kube-system", "gpu-operator"], "exemptLabel": ("NotIn", ["exempt"]), "actions": ["Warn", "Audit"]}
    # no exempt namespace: no empty NotIn (the apiserver refuses one), the label alone
    none = _gpu_policy_lists(helm_template(helm, {"gpuPodPolicy": {"exemptNamespaces": []}}))
    assert none["exempt"] == [] and none["exemptLabel"] == ("NotIn", ["exempt"])
    docs = helm_template(helm, {"gpuPodPolicy": {"enabled": False}})
    assert not [d for d in docs if d["metadata"]["name"] == "tessera-gpu-pods"]
    assert find(docs, "ValidatingAdmissionPolicy", "tessera-annotations")  # the other policy stays


@pytest.mark.parametrize("values", [
    # a quote would end the CEL string literal the name is rendered into
    {"gpuPodPolicy": {"resourceNames": ["nvidia.com/gpu']"]}},
    {"gpuPodPolicy": {"resourceNames": ["gpu"]}},  # not an extended resource name
    {"gpuPodPolicy": {"resourcePrefixes": ["class.tessera.dev"]}},  # no domain/: matches other domains
    {"gpuPodPolicy": {"validationActions": []}},
    {"gpuPodPolicy": {"validationActions": ["Deny", "Warn"]}},  # the apiserver refuses both together
    {"gpuPodPolicy": {"exemptNamespaces": ["Kube-System"]}},
    {"gpuPodPolicy": {"refusedPriorityClasses": ["x']"]}},  # not a PriorityClass name
])
def test_gpu_pod_policy_values_are_checked(helm: Path, values: Obj) -> None:
    assert "gpuPodPolicy" in helm_template_error(helm, values)


def _two_profiles(second: str) -> Obj:
    profile: Obj = {"plugins": {}, "pluginConfig": []}
    return {"schedulerConfig": {"profiles": [{"schedulerName": "tessera", **profile},
                                             {"schedulerName": second, **profile}]}}


@pytest.mark.parametrize(("values", "message"), [
    # what JSON schema cannot say (uniqueItems compares whole profiles, not one field of them; a
    # minimum cannot name another value), checked by the templates as `tessera run` checks it
    (_two_profiles("tessera"), 'schedulerConfig.profiles[1].schedulerName: Duplicate value: "tessera": '
                               "already used by profiles[0].schedulerName"),
    ({"schedulerConfig": {"podMaxBackoffSeconds": 1}},
     "schedulerConfig.podMaxBackoffSeconds: Invalid value: 1: must be greater than or equal to podInitialBackoffSeconds (2)"),
    ({"leaderElection": {"enabled": False}}, "scheduler.replicas > 1 needs leaderElection.enabled"),
    ({"schedulerConfig": {"leaderElection": {"leaderElect": False}}}, "schedulerConfig.leaderElection: set leader"),
])
def test_unsafe_values_are_refused(helm: Path, values: Obj, message: str) -> None:
    assert message in helm_template_error(helm, values)


# --- refused at install, not in a crash-looping pod ----------------------------------------------


def test_the_agent_without_the_annotation_policy_is_refused(helm: Path) -> None:
    """A security review: the agent's ClusterRole patches any pod in the cluster, and only the
    tessera-annotations policy narrows that to tessera.dev/phase on its own node. With the policy
    off and the agent on, a node's agent token could rewrite any pod (image, labels): the chart
    refuses the pair, naming both values and why. Without the agent the policy may be off."""
    error = helm_template_error(helm, {"admissionPolicy": {"enabled": False}})
    assert "admissionPolicy.enabled=false needs agent.enabled=false" in error, error
    assert "any pod in the cluster" in error, error
    docs = helm_template(helm, {"admissionPolicy": {"enabled": False}, "agent": {"enabled": False}})
    assert not [d for d in docs if d["metadata"]["name"] in ("tessera-annotations", "tessera-agent")]



def test_a_kubernetes_older_than_1_30_is_refused_by_name(helm: Path, tmp_path: Path) -> None:
    """deploy/README.md: Kubernetes 1.30 or newer (ValidatingAdmissionPolicy v1). Without Chart.yaml
    `kubeVersion`, an older cluster got half an install and a mapping error for the policy."""
    done = run_helm(helm, "template", *helm_template_args(None, tmp_path), "--kube-version", "1.29.9")
    assert done.returncode != 0
    assert "chart requires kubeVersion: >=1.30.0-0 which is incompatible with Kubernetes v1.29.9" in done.stderr


@pytest.mark.parametrize("version", ["1.30.0", "1.31.4-eks-1234567", "1.36.3"])
def test_default_values_render_without_a_cluster(helm: Path, tmp_path: Path, version: str) -> None:
    """`helm template --kube-version` (CI, GitOps) works for any supported version, vendor builds
    (their versions carry a pre-release suffix) included."""
    done = run_helm(helm, "template", *helm_template_args(None, tmp_path), "--kube-version", version)
    assert done.returncode == 0, done.stderr
    kinds = {d["kind"] for d in yaml.safe_load_all(done.stdout) if isinstance(d, dict)}
    assert {"Deployment", "DaemonSet", "ValidatingAdmissionPolicy"} <= kinds


def _config_of(docs: list[Obj], tmp_path: Path) -> Any:
    path = tmp_path / "rendered-config.yaml"
    path.write_text(_config_text(docs))
    return load_config(str(path))


def _profile(**keys: Any) -> Obj:
    """A profile the chart accepts: one stating its plugins and pluginConfig (empty: upstream's
    default plugins, no TesseraFragmentation, and default args), as checkProfilesAreWhole requires."""
    return {"plugins": {}, "pluginConfig": [], **keys}


_DEFAULT_SCHEDULER_PROFILES = {"schedulerConfig": {"profiles": [_profile(schedulerName="tessera"),
                                                                _profile(schedulerName="default-scheduler")]}}


@pytest.mark.parametrize(("values", "namespace", "message"), [
    (_DEFAULT_SCHEDULER_PROFILES, "tessera-system",
     'schedulerConfig.profiles: schedulerName "default-scheduler" is kube-scheduler\'s'),
    ({"leaderElection": {"resourceName": "kube-scheduler"}}, "kube-system",
     "leaderElection: the Lease kube-system/kube-scheduler is kube-scheduler's"),
])
def test_taking_kube_schedulers_name_or_lease_is_refused_at_install(
        helm: Path, tmp_path: Path, values: Obj, namespace: str, message: str) -> None:
    """`tessera run` exits 2 on such a configuration unless --replace-default-scheduler: the chart
    said nothing and installed a scheduler that crash-looped. It refuses what `tessera run` refuses
    (the same rule, kube_scheduler_clashes) and names the value that lets it through; with that
    value (or the flag in extraArgs, as deploy/README.md has it) the scheduler gets the flag."""
    error = helm_template_error(helm, values, namespace=namespace)
    assert message in error and "scheduler.replaceDefaultScheduler: true" in error, error
    for extra in ({"replaceDefaultScheduler": True}, {"extraArgs": ["--replace-default-scheduler"]}):
        docs = helm_template(helm, {**values, "scheduler": extra}, namespace=namespace)
        assert _config_of(docs, tmp_path).kube_scheduler_clashes(), "the chart refused what tessera run accepts"
        args = _containers(docs, "Deployment", "tessera-scheduler")["args"]
        assert args.count("--replace-default-scheduler") == 1, args


def test_the_default_configuration_takes_nothing_of_kube_schedulers(helm: Path, rendered: list[Obj],
                                                                      tmp_path: Path) -> None:
    assert _config_of(rendered, tmp_path).kube_scheduler_clashes() == ()
    assert "--replace-default-scheduler" not in _containers(rendered, "Deployment", "tessera-scheduler")["args"]
    # Neither the name nor the Lease alone is a clash: kube-system/tessera, or a Lease named
    # kube-scheduler elsewhere, is Tessera's own.
    # A profile without a schedulerName is Tessera's (scheduler/api/config_model.py), unlike
    # kube-scheduler's.
    for values, namespace in (({}, "kube-system"), ({"leaderElection": {"resourceName": "kube-scheduler"}}, "gpu"),
                              ({"schedulerConfig": {"profiles": [_profile()]}}, "tessera-system")):
        docs = helm_template(helm, values, namespace=namespace)
        assert _config_of(docs, tmp_path).kube_scheduler_clashes() == ()


@pytest.mark.parametrize("args", [["--secure-port=9000"], ["--secure-port", "9000"], ["--config=/tmp/c.yaml"],
                                  ["--bind-address=127.0.0.1"], ["--tls-cert-file=/tls/c.crt"],
                                  ["--tls-private-key-file", "/tls/c.key"]])
def test_extra_args_cannot_override_the_flags_the_chart_sets(helm: Path, args: list[str]) -> None:
    """The last flag wins in `tessera run`: --port in extraArgs moved the server off the probes'
    port (a liveness restart loop), --bind-address=127.0.0.1 hid it from the kubelet. The TLS
    files are the mounted scheduler.tls.secretName's (the chart mounts no other volume)."""
    error = helm_template_error(helm, {"scheduler": {"extraArgs": args}})
    flag = args[0].split("=")[0]
    assert f"scheduler.extraArgs: {flag} is set by the chart" in error, error


@pytest.mark.parametrize("args", [["--port=9000"], ["--port", "10251"]])
def test_extra_args_cannot_add_the_plain_http_port(helm: Path, args: list[str]) -> None:
    """--port and --secure-port are exclusive in `tessera run` (argparse exits 2: a crash loop), and
    plain HTTP stays out of the deployed scheduler: refused at install, saying why."""
    error = helm_template_error(helm, {"scheduler": {"extraArgs": args}})
    assert "scheduler.extraArgs: --port serves plain HTTP" in error and "scheduler.port" in error, error


@pytest.mark.parametrize("args", [["--authorization-always-allow-paths=/healthz,/livez,/gpu-map"],
                                  ["--authorization-always-allow-paths", "/readyz"],
                                  ["--authorization-always-allow-paths=/health*,readyz/*"]])
def test_always_allowed_paths_without_the_probes_are_refused(helm: Path, args: list[str]) -> None:
    """The kubelet's probes send no token: with /healthz or /readyz off the list each probe waits
    for a SubjectAccessReview (a 500 while the apiserver is unreachable, a 403 where RBAC does
    not grant it to system:unauthenticated), and the liveness probe restarts the pods."""
    error = helm_template_error(helm, {"scheduler": {"extraArgs": args}})
    assert "scheduler.extraArgs: --authorization-always-allow-paths must keep /healthz and /readyz" in error, error


@pytest.mark.parametrize("args", [["--authorization-always-allow-paths=/healthz,/readyz,/livez,/gpu-map"],
                                  ["--authorization-always-allow-paths", "healthz,/ready*"],
                                  ["--authorization-always-allow-paths=*"]])
def test_always_allowed_paths_with_the_probes_render(helm: Path, args: list[str]) -> None:
    deployment = next(doc for doc in helm_template(helm, {"scheduler": {"extraArgs": args}})
                      if doc["kind"] == "Deployment" and doc["metadata"]["name"] == "tessera-scheduler")
    assert deployment["spec"]["template"]["spec"]["containers"][0]["args"][-len(args):] == args


def _run_options() -> tuple[set[str], set[str]]:
    """`tessera run`'s long options (without --help): those that take a value, those that do not."""
    parser = argparse.ArgumentParser()
    run_cli.add_parser(parser.add_subparsers())
    run = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["run"]
    options = [(o, a.nargs == 0) for a in run._actions if not isinstance(a, argparse._HelpAction)
               for o in a.option_strings]
    return {o for o, bare in options if not bare}, {o for o, bare in options if bare}


def test_the_schemas_extra_args_flags_are_tessera_runs() -> None:
    """The chart refuses a flag `tessera run` does not take; its list must follow run_cli.py's."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    pattern = schema["properties"]["scheduler"]["properties"]["extraArgs"]["items"]["pattern"]
    match = re.fullmatch(r"\^\(--\(([-a-z|]+)\)\(=\.\*\)\?\|--\(([-a-z|]+)\)\|\[\^-\]\.\*\)\$", pattern)
    assert match is not None, pattern
    valued, bare = _run_options()
    assert ({f"--{o}" for o in match[1].split("|")}, {f"--{o}" for o in match[2].split("|")}) == (valued, bare)


@pytest.mark.parametrize("args", [["--v=4"], ["--v", "4"], ["-v"], ["--gpu-map=true"], ["--gpu-maps"],
                                  ["--identity=x", "--leader-elect=false"]])
def test_extra_args_refuse_a_flag_tessera_run_does_not_take(helm: Path, args: list[str]) -> None:
    """kube-scheduler's --v=4 rendered, then `tessera run` exited `unrecognized arguments` in a
    crash loop. The error names the value."""
    error = helm_template_error(helm, {"scheduler": {"extraArgs": args}})
    bad = next(a for a in args if a.startswith("-") and not re.match(r"--(identity|gpu-map)(=x)?$", a))
    assert "/scheduler/extraArgs/" in error and f"'{bad}'" in error, error


def test_extra_args_take_tessera_runs_flags_in_every_form(helm: Path) -> None:
    args = ["--gpu-map", "--event-loop=uvloop", "--identity", "me", "--kubeconfig="]
    docs = helm_template(helm, {"scheduler": {"extraArgs": args}})
    assert _containers(docs, "Deployment", "tessera-scheduler")["args"][-len(args):] == args


@pytest.mark.parametrize(("values", "where"), [
    ({"scheduler": {"replicas": "two"}}, "/scheduler/replicas"),
    ({"scheduler": {"replicas": -1}}, "/scheduler/replicas"),
    ({"scheduler": {"port": 0}}, "/scheduler/port"),
    ({"scheduler": {"extraArgs": "--gpu-map"}}, "/scheduler/extraArgs"),
    ({"logFormat": "text"}, "/logFormat"),
    ({"agent": {"backend": "nvidia"}}, "/agent/backend"),
    ({"image": {"repository": ""}}, "/image/repository"),
    ({"image": {"pullPolicy": "always"}}, "/image/pullPolicy"),
    ({"leaderElection": {"leaseDuration": 30}}, "/leaderElection/leaseDuration"),
    ({"scheduler": {"nodeSelector": ["linux"]}}, "/scheduler/nodeSelector"),
    ({"scheduler": {"tolerations": {"key": "gpu"}}}, "/scheduler/tolerations"),
    ({"scheduler": {"replica": 3}}, "replica"),
    ({"monitoring": {"prometheusRule": {"noLeaderFor": 5}}}, "/monitoring/prometheusRule/noLeaderFor"),
    ({"monitoring": {"prometheusRule": {"termFenceStuckFor": "5 minutes"}}},
     "/monitoring/prometheusRule/termFenceStuckFor"),
    ({"monitoring": {"serviceMonitor": {"enable": True}}}, "enable"),
    # quantities (the apiserver refused the Deployment or DaemonSet at upgrade, in KBs of its JSON)
    ({"scheduler": {"resources": {"limits": {"cpu": "banana"}}}}, "/scheduler/resources/limits/cpu"),
    ({"scheduler": {"resources": {"limits": {"memory": "4GB"}}}}, "/scheduler/resources/limits/memory"),
    ({"scheduler": {"resources": {"requests": {"cpu": "-1"}}}}, "/scheduler/resources/requests/cpu"),
    ({"scheduler": {"resources": {"requests": {"ephemeral-storage": "1 Gi"}}}},
     "/scheduler/resources/requests/ephemeral-storage"),
    ({"agent": {"resources": {"requests": {"memory": "64mb"}}}}, "/agent/resources/requests/memory"),
    ({"agent": {"resources": {"limits": {"cpu": True}}}}, "/agent/resources/limits/cpu"),
    ({"scheduler": {"resources": {"limit": {"cpu": "1"}}}}, "limit"),
    ({"scheduler": {"podDisruptionBudget": {"minAvailable": "150%"}}}, "/scheduler/podDisruptionBudget/minAvailable"),
    # label keys (the apiserver refuses the Deployment, DaemonSet or monitoring object at install)
    ({"scheduler": {"nodeSelector": {"Bad Label!!": "x"}}}, "/scheduler/nodeSelector"),
    ({"agent": {"nodeSelector": {"example.com/": "true"}}}, "/agent/nodeSelector"),
    ({"monitoring": {"serviceMonitor": {"labels": {"release name": "kps"}}}}, "/monitoring/serviceMonitor/labels"),
    ({"monitoring": {"prometheusRule": {"labels": {"Prometheus/rules": "x"}}}}, "/monitoring/prometheusRule/labels"),
    # a prefix longer than a DNS subdomain's 253 characters (k8s.io/apimachinery IsQualifiedName)
    ({"scheduler": {"nodeSelector": {"a" * 254 + "/x": "x"}}}, "/scheduler/nodeSelector"),
    ({"agent": {"nodeSelector": {"a." * 127 + "io/x": "x"}}}, "/agent/nodeSelector"),
    ({"monitoring": {"serviceMonitor": {"labels": {"a" * 254 + "/release": "kps"}}}},
     "/monitoring/serviceMonitor/labels"),
    ({"monitoring": {"prometheusRule": {"labels": {"a" * 254 + "/x": "x"}}}}, "/monitoring/prometheusRule/labels"),
])
def test_values_of_the_wrong_shape_are_refused_by_the_schema(helm: Path, values: Obj, where: str) -> None:
    """Each of these rendered, installed and failed later: a crash-looping pod (`tessera run`'s
    TESSERA_LOG_FORMAT or `tessera agent --backend` check, probes on port 0), an apiserver error on
    one object, or (a misspelt key) nothing at all. values.schema.json names the value."""
    error = helm_template_error(helm, values)
    assert "values don't meet the specifications of the schema" in error and where in error, error


def _notes(helm: Path, tmp_path: Path, values: Obj | None = None) -> str:
    """NOTES.txt as `helm install` prints it. `helm install --dry-run` needs a cluster and
    `helm template` leaves NOTES out, so the chart is copied with NOTES.txt as a named template
    rendered into a YAML string."""
    tmp_path = Path(tempfile.mkdtemp(dir=tmp_path))
    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart)
    notes = chart / "templates" / "NOTES.txt"
    (chart / "templates" / "_notes.tpl").write_text('{{- define "test.notes" -}}\n' + notes.read_text() + "{{- end -}}\n")
    notes.unlink()
    (chart / "templates" / "notes.yaml").write_text('notes: {{ include "test.notes" . | toJson }}\n')
    args = ["template", RELEASE, str(chart), "--namespace", NAMESPACE, "--show-only", "templates/notes.yaml",
            *kube_version_args()]
    if values:
        args += ["--values", str(values_file(values, tmp_path))]
    done = run_helm(helm, *args)
    assert done.returncode == 0, done.stderr
    return str(yaml.safe_load(done.stdout)["notes"])


def test_notes_name_what_was_installed(helm: Path, tmp_path: Path) -> None:
    """NOTES.txt said `spec.schedulerName: tessera` and the chart's appVersion whatever the values."""
    default = _notes(helm, tmp_path)
    assert "Tessera 0.1.0 is installed" in default and "`spec.schedulerName: tessera`" in default
    notes = _notes(helm, tmp_path, {"image": {"tag": "0.2.0-rc1"},
                                    "schedulerConfig": {"profiles": [_profile(schedulerName="gpu-batch"),
                                                                     _profile(schedulerName="gpu-train")]}})
    assert "Tessera 0.2.0-rc1 is installed" in notes
    assert "`spec.schedulerName: gpu-batch` or `spec.schedulerName: gpu-train`" in notes
    assert "schedulerName: tessera" not in notes
    unnamed = _notes(helm, tmp_path, {"schedulerConfig": {"profiles": [_profile()]}})
    assert "`spec.schedulerName: tessera`" in unnamed
    # `profiles: null` drops the chart's list: Tessera's built-in profile, named tessera.
    none = _notes(helm, tmp_path, {"schedulerConfig": {"profiles": None}})
    assert "Pods opt in with `spec.schedulerName: tessera`;" in none
    # the GPU pod policy refuses any pod setting NVIDIA_VISIBLE_DEVICES outside exempt namespaces:
    # node-level GPU tools (DCGM exporter, the GPU Operator) must be exempted now, not found out
    # when a new node's DaemonSet pod is refused; the node setting is what the install needs
    assert "kubectl label namespace NAMESPACE tessera.dev/gpu-pod-policy=exempt" in default
    assert "accept-nvidia-visible-devices-envvar-when-unprivileged = false" in default
    off = _notes(helm, tmp_path, {"gpuPodPolicy": {"enabled": False}})
    assert "tessera.dev/gpu-pod-policy=exempt" not in off
    assert "accept-nvidia-visible-devices-envvar-when-unprivileged = false" in off


def test_the_readmes_recipe_keeps_the_scheduler_off_gpu_nodes_and_its_replicas_apart(helm: Path) -> None:
    """A platform engineer's trial: the scheduler pods landed on GPU nodes (only nodeSelector
    kubernetes.io/os). deploy/README.md's recipe adds a node affinity; `affinity` is a map, which
    Helm merges, so the chart's anti-affinity between replicas stays."""
    readme = (CHART.parents[1] / "README.md").read_text()
    recipe = readme.split("#### Keeping the scheduler off GPU nodes", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    docs = helm_template(helm, yaml.safe_load(recipe))
    spec = find(docs, "Deployment", "tessera-scheduler")["spec"]["template"]["spec"]
    [term] = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {"key": "nvidia.com/gpu.present", "operator": "NotIn", "values": ["true"]} in term["matchExpressions"]
    assert {"key": "tessera.dev/agent", "operator": "NotIn", "values": ["true"]} in term["matchExpressions"]
    assert spec["affinity"]["podAntiAffinity"] == find(helm_template(helm), "Deployment", "tessera-scheduler")[
        "spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}


@pytest.mark.parametrize(("replicas", "says"), [
    (2, "2 scheduler replicas, one leads (Lease tessera-system/tessera)."),
    (1, "1 scheduler replica (Lease tessera-system/tessera), no standby:"),
    (0, "no scheduler replica (scheduler.replicas is 0): nothing schedules the Tessera profiles' pods until "
        "`tessera run` runs elsewhere with the configuration in the ConfigMap tessera-scheduler-config "
        "(Lease tessera-system/tessera)."),
])
def test_notes_count_the_scheduler_replicas(helm: Path, tmp_path: Path, replicas: int, says: str) -> None:
    """A platform engineer's trial: with scheduler.replicas=0 (the dev-cluster recipe) the notes
    said `0 scheduler replica(s), one leads`."""
    notes = _notes(helm, tmp_path, {"scheduler": {"replicas": replicas}})
    assert f"is installed in namespace tessera-system: {says}" in notes, notes.splitlines()[0]
    # a new user's trial: with no replica the notes still said to wait for the Deployment's rollout
    assert ("rollout status deploy/tessera-scheduler" in notes) == (replicas > 0)


@pytest.mark.parametrize(("lease", "renew", "retry"), [
    ("30s", "20s", "4s"),        # the defaults
    ("1m", "45s", "10s"),
    ("1m30s", "1m", "5s"),
    ("30s", "20s", "16s"),       # 20 > 16 * 1.2
    ("10s", "20s", "4s"),        # leaseDuration <= renewDeadline
    ("20s", "20s", "4s"),
    ("30s", "20s", "17s"),       # renewDeadline <= retryPeriod * 1.2 (client-go's JitterFactor)
    ("30s", "20s", "1m"),
    ("20500ms", "20s", "4s"),    # the Lease stores whole seconds: 20 <= 20
    ("900ms", "500ms", "100ms"),  # under a second
    ("0.5m", "20s", "4s"),
])
def test_leader_election_timings_are_refused_at_install_exactly_when_tessera_run_refuses_them(
        helm: Path, rendered: list[Obj], tmp_path: Path, lease: str, renew: str, retry: str) -> None:
    """values.yaml states the rule (leaseDuration > renewDeadline > retryPeriod * 1.2); breaking it
    installed a scheduler whose every start ended in `tessera: invalid configuration` (exit 2)."""
    config = yaml.safe_load(_config_text(rendered))
    config["leaderElection"].update(leaseDuration=lease, renewDeadline=renew, retryPeriod=retry)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    try:
        load_config(str(path))
        run_refuses = ""
    except ConfigError as err:
        run_refuses = str(err)
    values = {"leaderElection": {"leaseDuration": lease, "renewDeadline": renew, "retryPeriod": retry}}
    if run_refuses:
        error = helm_template_error(helm, values)
        assert "leaderElection: " in error and "leaseDuration > renewDeadline > retryPeriod * 1.2" in error, (run_refuses, error)
    else:
        docs = helm_template(helm, values)
        assert yaml.safe_load(_config_text(docs))["leaderElection"]["leaseDuration"] == lease


@pytest.mark.parametrize(("replicas", "min_available", "rendered_pdb"), [
    (2, 1, True), (3, 2, True),
    (2, "50%", True),    # 1 of 2 must stay: one eviction at a time
    (3, "60%", True),    # ceil(1.8) = 2 of 3
    (4, "75%", True),    # 3 of 4
    (1, 1, False),       # one replica: no PDB (it would block every drain), as NOTES says
    (1, "100%", False),
    (0, 1, False),
])
def test_a_pdb_is_rendered_only_when_it_allows_an_eviction(helm: Path, replicas: int, min_available: int | str,
                                                          rendered_pdb: bool) -> None:
    """PDB minAvailable is an int or a percentage of the pods, rounded up (policy/v1; the disruption
    controller's GetScaledValueFromIntOrPercent(..., roundUp=true)). "100%" rendered a PDB that
    forbids every eviction (a drain of the node never ends); "50%" must stay accepted."""
    docs = helm_template(helm, {"scheduler": {"replicas": replicas,
                                              "podDisruptionBudget": {"minAvailable": min_available}}})
    pdbs = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    assert bool(pdbs) == rendered_pdb, pdbs
    if pdbs:
        assert pdbs[0]["spec"]["minAvailable"] == min_available


@pytest.mark.parametrize(("replicas", "min_available", "message"), [
    (2, 2, "scheduler.podDisruptionBudget.minAvailable 2 keeps 2 of scheduler.replicas 2"),
    (3, 5, "scheduler.podDisruptionBudget.minAvailable 5 keeps 5 of scheduler.replicas 3"),
    (2, "51%", "scheduler.podDisruptionBudget.minAvailable 51% keeps 2 of scheduler.replicas 2"),  # ceil(1.02)
    (2, "100%", "scheduler.podDisruptionBudget.minAvailable 100% keeps 2 of scheduler.replicas 2"),
    (2, 0, "scheduler.podDisruptionBudget.minAvailable 0 keeps no replica"),
    (3, "0%", "scheduler.podDisruptionBudget.minAvailable 0% keeps no replica"),
])
def test_a_pdb_that_allows_no_eviction_or_protects_nothing_is_refused(helm: Path, replicas: int,
                                                                      min_available: int | str, message: str) -> None:
    """A user trial: minAvailable 100% (or a number >= replicas) rendered no PodDisruptionBudget
    and said nothing, and 0 rendered one that protects nothing. Both are a value the user chose that
    the chart cannot honour: refused with the reason, as other impossible values are."""
    error = helm_template_error(helm, {"scheduler": {"replicas": replicas,
                                                     "podDisruptionBudget": {"minAvailable": min_available}}})
    assert message in error, error
    assert "scheduler.podDisruptionBudget.enabled: false" in error, error


def test_the_image_can_be_pinned_by_digest(helm: Path) -> None:
    """Production installs pin images by digest (a tag can be moved); `image.tag` could only hold
    a tag, and `image.repository=REPO@sha256:...` rendered REPO@sha256:...:0.1.0, an invalid
    reference. With image.digest the reference is REPO@DIGEST (the tag, if any, is dropped, as
    kustomize's `images: digest` does)."""
    digest = "sha256:" + "0123456789abcdef" * 4
    docs = helm_template(helm, {"image": {"repository": "registry.example.com/tessera", "digest": digest}})
    for kind, name in (("Deployment", "tessera-scheduler"), ("DaemonSet", "tessera-agent")):
        assert _containers(docs, kind, name)["image"] == f"registry.example.com/tessera@{digest}"
    assert "values don't meet the specifications of the schema" in helm_template_error(
        helm, {"image": {"digest": "0123abcd"}})


def test_notes_say_when_the_image_has_no_registry(helm: Path, tmp_path: Path) -> None:
    """A new user's trial: `helm install` with the default values rendered `image: tessera:0.1.0`,
    which no node can pull (nothing publishes it), and said nothing; the pods sat in
    ImagePullBackOff. The notes now say so whenever the repository names no registry."""
    default = _notes(helm, tmp_path)
    assert ("The image tessera:0.1.0 names no registry: nodes can pull it only if it was loaded onto "
            "them (kind load, a local build). Build it from the repository's Dockerfile, push it to a "
            "registry your nodes pull from, and set image.repository (and image.tag or image.digest).") in default
    pushed = _notes(helm, tmp_path, {"image": {"repository": "registry.example.com/gpu/tessera"}})
    assert "names no registry" not in pushed


def test_notes_say_the_metrics_service_reaches_the_standby_too(helm: Path, tmp_path: Path) -> None:
    """A new user scraped the Service address NOTES gave and read scheduler_pending_pods 0 from
    the standby while the leader had 4 waiting: NOTES must say to scrape every pod and keep the
    leader's series (tessera_leader == 1), as the dashboard does, and how to get a ServiceMonitor."""
    notes = " ".join(_notes(helm, tmp_path).split())
    assert "https://tessera-scheduler-metrics.tessera-system:10259/metrics" in notes
    assert "standby" in notes and "scrape every scheduler pod" in notes
    assert "and on (job, instance) (tessera_leader == 1)" in notes
    # in the values file, not `--set`: an upgrade with only `--set` resets every other value
    assert "monitoring.serviceMonitor.enabled: true in your values file" in notes
    assert "monitoring.prometheusRule.enabled: true in your values file" in notes
    assert "its CRDs installed first" in notes and "--set" not in notes
    with_monitor = " ".join(_notes(helm, tmp_path, {"monitoring": {"serviceMonitor": {"enabled": True}}}).split())
    assert "ServiceMonitor tessera-scheduler scrapes every scheduler pod" in with_monitor
    assert "monitoring.serviceMonitor.enabled: true" not in with_monitor


# --- Prometheus Operator: ServiceMonitor and alert rules (a new user's trial) ------------------

MONITORING = {"monitoring": {
    "serviceMonitor": {"enabled": True, "interval": "15s", "labels": {"release": "kube-prometheus-stack"}},
    "prometheusRule": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}, "noLeaderFor": "3m",
                       "additionalLabels": {"team": "gpu"}}}}
ALERTS = {"TesseraNoLeader", "TesseraMultipleLeaders", "TesseraConflictingScheduler", "TesseraGPUConflict", "TesseraGPUOvercommitted", "TesseraGPUFenced",
          "TesseraGPUUnhealthy",
          "TesseraBindingErrors", "TesseraSchedulingErrors", "TesseraPodsUnschedulable", "TesseraPodSchedulingSlow",
          "TesseraSchedulerDown", "TesseraInformerNotSynced", "TesseraInformerUnavailable", "TesseraStandbyMissing",
          "TesseraTermFenceStuck", "TesseraNodeAgentSilent"}


# The release's series: its namespace's (the ServiceMonitor's targets carry it), or unlabelled.
SELECTOR = 'job="tessera-scheduler-metrics", namespace=~"tessera-system|"'


def rule_alerts(docs: list[Obj]) -> dict[str, Obj]:
    rule = find(docs, "PrometheusRule", "tessera-scheduler")
    return {r["alert"]: r for group in rule["spec"]["groups"] for r in group["rules"]}


def test_service_monitor_and_alert_rules_are_off_by_default_and_render_when_asked(helm: Path,
                                                                                  rendered: list[Obj]) -> None:
    assert not {d["kind"] for d in rendered} & {"ServiceMonitor", "PrometheusRule"}
    docs = helm_template(helm, MONITORING)
    monitor = find(docs, "ServiceMonitor", "tessera-scheduler")
    service = find(docs, "Service", "tessera-scheduler-metrics")
    pods = find(docs, "Deployment", "tessera-scheduler")["spec"]["template"]["metadata"]["labels"]
    # the ServiceMonitor finds the Service, whose endpoints are every scheduler pod (the standby too)
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert service["spec"]["selector"].items() <= pods.items()
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    # HTTPS with the Prometheus pod's own ServiceAccount token (bound to tessera-metrics-reader), the
    # scheduler's self-signed certificate not verified unless a tlsConfig (a CA) is given
    assert monitor["spec"]["endpoints"] == [{"port": "https", "path": "/metrics", "scheme": "https",
                                             "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
                                             "tlsConfig": {"insecureSkipVerify": True},
                                             "interval": "15s", "scrapeTimeout": "10s"}]
    assert [(p["name"], p["port"]) for p in service["spec"]["ports"]] == [("https", 10259)]
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    alerts = rule_alerts(docs)
    assert set(alerts) == ALERTS
    assert find(docs, "PrometheusRule", "tessera-scheduler")["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert alerts["TesseraNoLeader"]["for"] == "3m" and alerts["TesseraPodsUnschedulable"]["for"] == "30m"
    assert all(a["labels"]["team"] == "gpu" and a["labels"]["severity"] in ("warning", "critical") for a in alerts.values())
    # Prometheus' own templates reach the rule unrendered by Helm
    assert alerts["TesseraGPUConflict"]["annotations"]["description"].startswith("{{ $value }} GPUs")
    only_rules = helm_template(helm, {"monitoring": {"prometheusRule": {"enabled": True}}})
    assert {d["kind"] for d in only_rules} & {"ServiceMonitor", "PrometheusRule"} == {"PrometheusRule"}


def test_the_service_monitor_can_send_a_token_from_a_secret_instead_of_bearer_token_file(helm: Path) -> None:
    """bearerTokenFile is deprecated from prometheus-operator 0.73 and refused where the Prometheus
    resource denies file-system access (arbitraryFSAccessThroughSMs.deny): the endpoint's
    `authorization` (SafeAuthorization) takes a Secret key instead; the default stays the file."""
    credentials = {"name": "prometheus-scraper-token", "key": "token"}
    docs = helm_template(helm, {"monitoring": {"serviceMonitor": {"enabled": True,
                                                                  "authorization": {"credentials": credentials}}}})
    endpoint = find(docs, "ServiceMonitor", "tessera-scheduler")["spec"]["endpoints"][0]
    assert "bearerTokenFile" not in endpoint
    assert endpoint["authorization"] == {"type": "Bearer", "credentials": credentials}
    for wrong in ({"credentials": {"name": "prometheus-scraper-token"}}, {"credentials": {"name": "", "key": "t"}},
                  {"type": "Basic", "credentials": credentials}):
        error = helm_template_error(helm, {"monitoring": {"serviceMonitor": {"enabled": True, "authorization": wrong}}})
        assert "/monitoring/serviceMonitor/authorization" in error, error


def test_a_service_monitor_without_the_metrics_service_is_refused(helm: Path) -> None:
    values = {"monitoring": {"serviceMonitor": {"enabled": True}}, "scheduler": {"metricsService": {"enabled": False}}}
    assert "monitoring.serviceMonitor.enabled needs scheduler.metricsService.enabled" in helm_template_error(helm, values)


def test_every_series_the_alert_rules_query_is_exported(helm: Path) -> None:
    """promtool is not at hand: the rules' PromQL is read as the dashboard's is, and every metric,
    label and label value it names must be in the exporter's registry (the real process's /metrics
    is checked in tests/e2e/test_observability.py). Upstream names where upstream has the metric."""
    from tests.unit.test_grafana_dashboard import exported_samples

    alerts = rule_alerts(helm_template(helm, MONITORING))
    exprs = [alert["expr"] for alert in alerts.values()]
    assert dashboard.problems_in(exprs, exported_samples()) == []
    selectors = [selector for expr in exprs for selector in dashboard.parse(expr).selectors]
    assert {s.metric for s in selectors} == {
        "tessera_leader", "tessera_devices", "tessera_gpus_overcommitted", "tessera_bindings_total",
        "tessera_conflicting_scheduler_writes_total", "tessera_leader_fence_pending_pods",
        "scheduler_schedule_attempts_total", "tessera_informer_synced", "tessera_informer_unavailable", "up",
        "scheduler_pending_pods", "scheduler_pod_scheduling_sli_duration_seconds_bucket", "tessera_node_agents_silent"}
    assert all(("job", "=", "tessera-scheduler-metrics") in s.matchers for s in selectors)  # the ServiceMonitor's job
    # and the release's namespace (two installs share the job): tests/unit/test_prometheus_rules.py
    assert all(("namespace", "=~", "tessera-system|") in s.matchers for s in selectors)


def _duration_seconds(text: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
    return sum(float(n) * units[u] for n, u in re.findall(r"(\d+)(ms|s|m|h|d)", text))


def test_alerts_outlive_a_failover(helm: Path) -> None:
    """A platform engineer's trial: GPUConflict, GPUFenced, GPUOvercommitted and PodsUnschedulable
    were `... and on (job, instance) (tessera_leader == 1)`, empty for the 30-70 s of every
    failover, and Prometheus drops a pending alert whose expression returns nothing at one
    evaluation (its `for` starts over): a leader restarting more often than the `for` never let
    them fire. GPU states come from any synced replica (a standby's cache counts the same GPUs),
    one alert per job; pending pods from the replicas that led within failoverWindow, which must be
    longer than a failover as Prometheus sees it."""
    alerts = rule_alerts(helm_template(helm, MONITORING))
    for name in ("TesseraGPUConflict", "TesseraGPUOvercommitted", "TesseraGPUFenced", "TesseraGPUUnhealthy",
                 "TesseraNodeAgentSilent"):
        expr = alerts[name]["expr"]
        assert "tessera_leader" not in expr, name
        assert expr.startswith("max by (job, namespace) (") and "tessera_informer_synced{" in expr, name
    pending = alerts["TesseraPodsUnschedulable"]["expr"]
    window = re.findall(r"\[(\w+)\]", pending)
    assert len(window) == 2 and window[0] == window[1], pending
    assert f"max_over_time(scheduler_pending_pods{{{SELECTOR}, queue=\"unschedulable\"}}[{window[0]}])" in pending
    assert f"max_over_time(tessera_leader{{{SELECTOR}}}[{window[0]}]) == 1" in pending
    assert pending.startswith("max by (job, namespace) (")
    # longer than a failover with the chart's defaults: lease, retry with jitter, two scrapes apart
    failover = 30 + 4 * 1.2 + 2 * 30
    assert _duration_seconds(window[0]) > failover


def test_alert_severities_and_the_new_alerts(helm: Path) -> None:
    """Two leaders can give one GPU twice (critical, as the description says); no replica up, an
    informer that never synced, and a missing standby (only rendered when there should be one)."""
    alerts = rule_alerts(helm_template(helm, MONITORING))
    assert alerts["TesseraMultipleLeaders"]["labels"]["severity"] == "critical"
    assert alerts["TesseraSchedulerDown"]["expr"] == f'absent(up{{{SELECTOR}}} == 1)'
    assert alerts["TesseraSchedulerDown"]["labels"]["severity"] == "critical"
    assert alerts["TesseraInformerNotSynced"]["expr"] == \
        f'max by (job, namespace, instance, kind) (tessera_informer_synced{{{SELECTOR}}}) == 0'
    unavailable = " ".join(alerts["TesseraInformerUnavailable"]["expr"].split())
    assert unavailable == (
        'max by (job, namespace, instance, kind, reason) ( '
        f'tessera_informer_unavailable{{{SELECTOR}, reason="forbidden"}} '
        f'or tessera_informer_unavailable{{{SELECTOR}, reason="unauthorized"}} '
        f'or tessera_informer_unavailable{{{SELECTOR}, reason="not_served", '
        'kind=~"ExtendedResource|ResourceClass"} ) == 1')
    assert alerts["TesseraInformerUnavailable"]["for"] == "10m"
    assert alerts["TesseraStandbyMissing"]["expr"] == \
        f'(count(tessera_leader{{{SELECTOR}}} == 0) or vector(0)) < 1'
    three = rule_alerts(helm_template(helm, {**MONITORING, "scheduler": {"replicas": 3}}))
    assert three["TesseraStandbyMissing"]["expr"].endswith("< 2")
    one = rule_alerts(helm_template(helm, {**MONITORING, "scheduler": {"replicas": 1}}))
    assert "TesseraStandbyMissing" not in one
    # no leader while replicas are up; none up is TesseraSchedulerDown's
    assert alerts["TesseraNoLeader"]["expr"].endswith(f'and on () (count(up{{{SELECTOR}}} == 1) > 0)')
    for alert in alerts.values():
        assert {"summary", "description"} <= alert["annotations"].keys(), alert["alert"]



def test_alert_descriptions_say_what_their_rules_count(helm: Path) -> None:
    """A day-2 trial read the descriptions during a GPU swap and a node removal. GPUFenced counts
    `tessera_devices{state="fenced"}`, which holds the free GPUs of a node with a broken device
    annotation or without a Node object but not the rows beyond a node's allocatable count
    (DevicesBeyondAllocatable: no GPU, tests/unit/test_metrics_gpu_states.py), so the description
    says both, and what to do about a removed node. PodsUnschedulable's `for` holds while the
    unschedulable gauge stays above 0, whichever pods it counts: no pod need have waited that long.
    BindingErrors counts every `error` outcome, including a 409 read back at a newer resourceVersion
    (a pod changed between decision and Binding), so a controller that keeps editing pending pods
    fires it too: the description names that cause."""
    alerts = rule_alerts(helm_template(helm, MONITORING))
    fenced = " ".join(alerts["TesseraGPUFenced"]["annotations"]["description"].split())
    assert "BrokenDeviceAnnotation" in fenced and "no Node object" in fenced
    assert "delete its ExtendedResources" in fenced
    assert "DevicesBeyondAllocatable" in fenced and "not counted here" in fenced
    pending = alerts["TesseraPodsUnschedulable"]
    text = " ".join(pending["annotations"]["description"].split())
    assert "have been there" not in text and "waited" not in pending["annotations"]["summary"]
    assert f"above 0 for {pending['for']}" in text and "not necessarily the same pods" in text
    binding = " ".join(alerts["TesseraBindingErrors"]["annotations"]["description"].split())
    assert "changed between decision and Binding" in binding and "newer resourceVersion" in binding

def test_alerts_whose_expressions_keep_no_label_name_the_install(helm: Path) -> None:
    """NoLeader, SchedulerDown and StandbyMissing return a series without labels: two installs'
    alerts were one to Alertmanager (same labels). They carry the release's namespace, as the
    other alerts carry their series' (`by (job, namespace)`); a `namespace` in additionalLabels
    takes its place, not a second key."""
    alerts = rule_alerts(helm_template(helm, MONITORING, namespace="gpu"))
    for name in ("TesseraNoLeader", "TesseraSchedulerDown", "TesseraStandbyMissing"):
        assert alerts[name]["labels"] == {"severity": alerts[name]["labels"]["severity"], "team": "gpu",
                                          "namespace": "gpu"}, name
        assert 'namespace=~"gpu|"' in alerts[name]["expr"]
    ops = {"monitoring": {"prometheusRule": {"enabled": True, "additionalLabels": {"namespace": "ops"}}}}
    with tempfile.TemporaryDirectory() as directory:
        done = run_helm(helm, "template", *helm_template_args(ops, Path(directory)), *kube_version_args(),
                        "--show-only", "templates/scheduler-prometheusrule.yaml")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("namespace: tessera-system") == 1  # the PrometheusRule's own, no alert's
    alerts = rule_alerts([doc for doc in yaml.safe_load_all(done.stdout) if isinstance(doc, dict)])
    assert all(alert["labels"]["namespace"] == "ops" for alert in alerts.values())


def test_the_install_namespace_an_alert_names_is_a_string_whatever_it_is_called(helm: Path) -> None:
    """The label was written unquoted: a release namespace named `on`, `yes` or `null` (valid
    namespace names) came out a YAML boolean or null, not the string the labels map must hold."""
    for namespace in ("on", "yes", "null", "0123"):
        alerts = rule_alerts(helm_template(helm, MONITORING, namespace=namespace))
        for name in ("TesseraNoLeader", "TesseraSchedulerDown", "TesseraStandbyMissing"):
            assert alerts[name]["labels"]["namespace"] == namespace, (namespace, name, alerts[name]["labels"])


def test_the_term_fence_alert_has_its_own_for(helm: Path) -> None:
    """TesseraTermFenceStuck borrowed noLeaderFor: a user who shortened the no-leader page (or
    lengthened it) moved the term fence's with it, and could not set it alone. It has its own
    setting, 5m by default as before, in its `for` and in the description that names it."""
    defaults = rule_alerts(helm_template(helm, {"monitoring": {"prometheusRule": {"enabled": True}}}))
    assert defaults["TesseraTermFenceStuck"]["for"] == "5m"
    alerts = rule_alerts(helm_template(helm, {"monitoring": {"prometheusRule": {
        "enabled": True, "noLeaderFor": "3m", "termFenceStuckFor": "12m"}}}))
    fence = alerts["TesseraTermFenceStuck"]
    assert fence["for"] == "12m" and alerts["TesseraNoLeader"]["for"] == "3m"
    assert "for 12m" in " ".join(fence["annotations"]["description"].split())
    assert "3m" not in fence["annotations"]["description"]
    only_no_leader = rule_alerts(helm_template(helm, {"monitoring": {"prometheusRule": {"enabled": True,
                                                                                         "noLeaderFor": "3m"}}}))
    assert only_no_leader["TesseraTermFenceStuck"]["for"] == "5m"

# --- `--set` on a list entry: Helm replaces lists -------------------------------------------------


def _helm_set(helm: Path, command: str, *settings: str, values: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`helm template` or `helm lint --strict` of the chart with `--set` (and `-f`) as a user types them."""
    args = (["template", RELEASE, str(CHART), "--namespace", NAMESPACE, *kube_version_args()] if command == "template"
            else ["lint", "--strict", str(CHART)])
    for setting in settings:
        args += ["--set", setting]
    if values is not None:
        args += ["--values", str(values)]
    return run_helm(helm, *args)


@pytest.mark.parametrize("command", ["template", "lint"])
def test_set_on_a_plugin_entry_is_refused_by_template_and_lint(helm: Path, command: str) -> None:
    """A new user's trial: `--set ...score.enabled[0].weight=5` rendered `enabled: [{weight: 5}]`
    (the list replaced, not merged), which `tessera run` refuses (`...enabled[0].name: Required
    value`, exit 2): the scheduler crash-looped while `helm lint` and the schema said nothing."""
    done = _helm_set(helm, command, "schedulerConfig.profiles[0].plugins.score.enabled[0].weight=5")
    assert done.returncode != 0, done.stdout
    assert "at '/schedulerConfig/profiles/0/plugins/score/enabled/0': missing property 'name'" in done.stdout + done.stderr


def test_set_on_a_profile_key_is_refused_with_the_reason(helm: Path) -> None:
    """`--set schedulerConfig.profiles[0].schedulerName=tessera` rendered a profile of that one key:
    valid for Tessera, which then ran upstream's default plugins and args instead of the chart's, with
    no word said. The chart refuses it (a template check: `helm lint` logs a chart's `fail` as
    [INFO] and passes) and says what to do instead."""
    done = _helm_set(helm, "template", "schedulerConfig.profiles[0].schedulerName=tessera")
    assert done.returncode != 0
    assert "schedulerConfig.profiles[0] has no plugins or pluginConfig: every profile states" in done.stderr, done.stderr
    assert "add `plugins: {}` and `pluginConfig: []` for the defaults" in done.stderr, done.stderr
    assert '"Changing one weight"' in done.stderr
    assert "#### Changing one weight" in (CHART.parents[1] / "README.md").read_text()
    # a second profile by --set leaves a null first entry: refused by the schema, not by a TypeError
    done = _helm_set(helm, "template", "schedulerConfig.profiles[1].schedulerName=other")
    assert done.returncode != 0 and "at '/schedulerConfig/profiles/0': got null, want object" in done.stderr, done.stderr


def test_the_readmes_values_file_changes_one_weight_and_nothing_else(helm: Path, rendered: list[Obj],
                                                                     tmp_path: Path) -> None:
    """deploy/README.md's recipe (the whole profile in a values file) gives the chart's
    configuration with that one weight changed: it is the default profile, kept equal here."""
    recipe = CHART.parent / "values-one-weight.yaml"
    assert "deploy/helm/values-one-weight.yaml" in (CHART.parents[1] / "README.md").read_text()
    done = _helm_set(helm, "template", values=recipe)
    assert done.returncode == 0, done.stderr
    changed = _config_text([d for d in yaml.safe_load_all(done.stdout) if isinstance(d, dict)])
    expected = yaml.safe_load(_config_text(rendered))
    expected["profiles"][0]["plugins"]["score"]["enabled"][1] = {"name": "TesseraDevices", "weight": 5}
    assert yaml.safe_load(changed) == expected
    path = tmp_path / "config.yaml"
    path.write_text(changed)
    assert dict(load_config(str(path)).profiles[0].score_weights)["TesseraDevices"] == 5


def _set(path: str, value: Any) -> Any:
    """A change to the chart's default scheduler configuration: value at a dotted path (list
    indices as numbers); `None` deletes the key."""
    def change(config: Any) -> None:
        *parents, last = [int(part) if part.isdigit() else part for part in path.split(".")]
        for part in parents:
            config = config[part]
        if value is None:
            del config[last]
        else:
            config[last] = value
    return change


def _add_args(name: str, args: Obj) -> Any:
    """A change that appends a pluginConfig entry to the chart's first profile."""
    def change(config: Obj) -> None:
        config["profiles"][0]["pluginConfig"].append({"name": name, "args": args})
    return change


_FIT = "/schedulerConfig/profiles/0/pluginConfig/0/args/scoringStrategy"
_DEVICES = "/schedulerConfig/profiles/0/pluginConfig/2/args"
_ADDED = "/schedulerConfig/profiles/0/pluginConfig/3/args"


@pytest.mark.parametrize(("change", "where"), [
    # plugin args (a platform engineer's trial: each was accepted by `helm upgrade` and `helm lint`
    # and crash-looped every replica that restarted); ranges as validation_pluginargs.go
    (_set("profiles.0.pluginConfig.0.args.scoringStrategy.type", "Balanced"), f"{_FIT}/type"),
    (_set("profiles.0.pluginConfig.0.args.scoringStrategy.type", "leastallocated"), f"{_FIT}/type"),
    (_set("profiles.0.pluginConfig.0.args.scoringStrategy.resources.0.weight", 101), f"{_FIT}/resources/0/weight"),
    (_set("profiles.0.pluginConfig.0.args.scoringStrategy.resources.0.weight", -1), f"{_FIT}/resources/0/weight"),
    (_set("profiles.0.pluginConfig.0.args.scoringStrategy.resources.0.name", ""), f"{_FIT}/resources/0/name"),
    (_set("profiles.0.pluginConfig.0.args.scoringStrategy.requestedToCapacityRatio",
          {"shape": [{"utilization": 0, "score": 11}]}), f"{_FIT}/requestedToCapacityRatio"),
    (_set("profiles.0.pluginConfig.0.args.scoringStrategy", {
        "type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": [{"utilization": 101, "score": 1}]}}),
     f"{_FIT}/requestedToCapacityRatio/shape/0/utilization"),
    (_set("profiles.0.pluginConfig.0.args.scoringStrategy", {"type": "RequestedToCapacityRatio"}), _FIT),
    (_set("profiles.0.pluginConfig.1.args.podGroupBackoffSeconds", -1),
     "/schedulerConfig/profiles/0/pluginConfig/1/args/podGroupBackoffSeconds"),
    (_set("profiles.0.pluginConfig.2.args.agentHeartbeatTimeoutSeconds", 0), f"{_DEVICES}/agentHeartbeatTimeoutSeconds"),
    (_set("profiles.0.pluginConfig.2.args.allocationGate", "yes"), f"{_DEVICES}/allocationGate"),
    (_add_args("DefaultPreemption", {"minCandidateNodesPercentage": 101}), f"{_ADDED}/minCandidateNodesPercentage"),
    (_add_args("DefaultPreemption", {"minCandidateNodesAbsolute": -1}), f"{_ADDED}/minCandidateNodesAbsolute"),
    (_add_args("TesseraFragmentation", {"maxTaskTypes": 0}), f"{_ADDED}/maxTaskTypes"),
    (_add_args("TesseraFragmentation", {"scarcityExponent": 5}), f"{_ADDED}/scarcityExponent"),
    (_add_args("TesseraFragmentation", {"multiGpuPrior": -1}), f"{_ADDED}/multiGpuPrior"),
    (_add_args("TopologyPlacement", {"maxDomainTrials": 0}), f"{_ADDED}/maxDomainTrials"),
    # a level's nodeLabel is a label key (a platform engineer's `nodeLabel: "Bad Label!!"` passed
    # `helm upgrade` and crash-looped the replicas on `tessera run`'s check)
    (_add_args("TopologyPlacement", {"levels": [{"nodeLabel": "Bad Label!!"}]}), f"{_ADDED}/levels/0/nodeLabel"),
    (_add_args("TopologyPlacement", {"levels": [{"nodeLabel": "Topology.Example.com/rack"}]}),
     f"{_ADDED}/levels/0/nodeLabel"),
    (_add_args("TopologyPlacement", {"levels": [{"nodeLabel": "example.com/" + "r" * 64}]}),
     f"{_ADDED}/levels/0/nodeLabel"),
    (_add_args("TopologyPlacement", {"levels": [{"nodeLabel": "rack"}, {"nodeLabel": "example.com/"}]}),
     f"{_ADDED}/levels/1/nodeLabel"),
    (_add_args("TopologyPlacement", {"levels": [{"nodeLabel": ""}]}), f"{_ADDED}/levels/0/nodeLabel"),
    (_set("profiles.0.plugins.score.enabled.0.name", None), "/schedulerConfig/profiles/0/plugins/score/enabled/0"),
    (_set("profiles.0.plugins.score.enabled.0.weight", -1), "/schedulerConfig/profiles/0/plugins/score/enabled/0/weight"),
    (_set("profiles.0.plugins.score.enabled.0.weight", 2**31), "/schedulerConfig/profiles/0/plugins/score/enabled/0/weight"),
    (_set("profiles.0.plugins.score.enabled.0.weight", "5"), "/schedulerConfig/profiles/0/plugins/score/enabled/0/weight"),
    (_set("profiles.0.plugins.score.enabled.0.wieght", 5), "/schedulerConfig/profiles/0/plugins/score/enabled/0"),
    (_set("profiles.0.plugins.score.disabled", [{}]), "/schedulerConfig/profiles/0/plugins/score/disabled/0"),
    (_set("profiles.0.plugins.score.enabled.0.name", "TesseraFragmentaton"),
     "/schedulerConfig/profiles/0/plugins/score/enabled/0/name"),
    (_set("profiles.0.plugins.score.enabled.0.name", "Coscheduling"),  # no score
     "/schedulerConfig/profiles/0/plugins/score/enabled/0/name"),
    (_set("profiles.0.plugins.queueSort", {"enabled": [{"name": "PrioritySrot"}]}),
     "/schedulerConfig/profiles/0/plugins/queueSort/enabled/0/name"),
    (_set("profiles.0.plugins.filter", {"enabled": [{"name": "TesseraGpuPacking"}]}),  # no filter
     "/schedulerConfig/profiles/0/plugins/filter/enabled/0/name"),
    (_set("profiles.0.plugins.queueSort", {"enabled": [{"name": "NodeResourcesFit"}]}),  # no queue sort
     "/schedulerConfig/profiles/0/plugins/queueSort/enabled/0/name"),
    (_set("profiles.0.plugins.bind", {"enabled": [{"name": "TesseraDevices"}]}),  # DefaultBinder alone binds
     "/schedulerConfig/profiles/0/plugins/bind/enabled/0/name"),
    (_set("profiles.0.plugins.filter", {"disabled": [{"name": "NodeResourcesFit"}]}),  # it keeps devices given once
     "/schedulerConfig/profiles/0/plugins/filter/disabled/0/name"),
    (_set("profiles.0.plugins.preFilter", {"disabled": [{"name": "Coscheduling"}]}),  # it keeps gangs whole
     "/schedulerConfig/profiles/0/plugins/preFilter/disabled/0/name"),
    (_set("profiles.0.pluginConfig.0.name", "TaintToleration"), "/schedulerConfig/profiles/0/pluginConfig/0/name"),
    (_set("profiles.0.plugins.scores", {}), "/schedulerConfig/profiles/0/plugins"),
    (_set("profiles.0.plugins.score.enable", []), "/schedulerConfig/profiles/0/plugins/score"),
    (_set("profiles.0.pluginConfig.0.name", None), "/schedulerConfig/profiles/0/pluginConfig/0"),
    (_set("profiles.0.pluginConfig.1.args", 10), "/schedulerConfig/profiles/0/pluginConfig/1/args"),
    (_set("profiles.0.plugin", {}), "/schedulerConfig/profiles/0"),
    (_set("profiles.0.schedulerName", ""), "/schedulerConfig/profiles/0/schedulerName"),
    (_set("profiles.0.percentageOfNodesToScore", 101), "/schedulerConfig/profiles/0/percentageOfNodesToScore"),
    (_set("percentageOfNodesToScore", 150), "/schedulerConfig/percentageOfNodesToScore"),
    (_set("podInitialBackoffSeconds", 0), "/schedulerConfig/podInitialBackoffSeconds"),
    (_set("podMaxBackoffSeconds", 0), "/schedulerConfig/podMaxBackoffSeconds"),
    (_set("parallelism", 0), "/schedulerConfig/parallelism"),
    (_set("clientConnection.qps", -1), "/schedulerConfig/clientConnection/qps"),
    (_set("clientConnection.burts", 10), "/schedulerConfig/clientConnection"),
    (_set("extenders", [{"urlPrefix": "http://x"}]), "/schedulerConfig/extenders"),
    (_set("apiVersion", "kubescheduler.config.k8s.io/v1beta3"), "/schedulerConfig/apiVersion"),
    (_set("kind", "KubeProxyConfiguration"), "/schedulerConfig/kind"),
    (_set("percentageOfNodeToScore", 50), "/schedulerConfig"),
])
def test_the_schema_refuses_scheduler_configurations_tessera_refuses(
        helm: Path, rendered: list[Obj], tmp_path: Path, change: Any, where: str) -> None:
    """values.schema.json says of `schedulerConfig` what JSON schema can say of `tessera run`'s
    checks, so these fail at `helm install`/`lint` rather than in a crash-looping pod. Each case
    is first shown to be refused by Tessera itself (the schema must not refuse what it runs)."""
    config = yaml.safe_load(_config_text(rendered))
    change(config)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError):
        load_config(str(path))
    del config["leaderElection"]
    error = helm_template_error(helm, {"schedulerConfig": config})
    assert "values don't meet the specifications of the schema" in error and f"at '{where}'" in error, error


@pytest.mark.parametrize("change", [
    _set("profiles.0.pluginConfig.0.args.scoringStrategy.resources.0.weight", 0),  # 0 means 1 (v1 defaults.go)
    _set("profiles.0.pluginConfig.0.args.scoringStrategy.resources.0.weight", 100),
    _set("profiles.0.pluginConfig.0.args.scoringStrategy.type", "MostAllocated"),
    _set("profiles.0.pluginConfig.0.args.scoringStrategy", {
        "type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0},
                                                                                  {"utilization": 100, "score": 10}]}}),
    _set("profiles.0.pluginConfig.2.args.agentHeartbeatTimeoutSeconds", 1),
    _set("profiles.0.pluginConfig.1.args.podGroupBackoffSeconds", 0),
    _add_args("DefaultPreemption", {"minCandidateNodesPercentage": 100, "minCandidateNodesAbsolute": 0}),
    _add_args("TesseraFragmentation", {"maxTaskTypes": 10000, "scarcityExponent": 4, "multiGpuPrior": 0.5}),
    _add_args("TesseraFragmentation", {"resourceName": "example.com/npu"}),
    _add_args("TesseraGpuPacking", {"resourceName": "example.com/npu"}),
    _set("profiles.0.pluginConfig.1.args.podGroupRejectPercentage", 50),  # scheduler-plugins' key, no effect
    # args as upstream's examples write them, typed (a review: the closed args schemas refused them)
    _set("profiles.0.pluginConfig.0.args.apiVersion", "kubescheduler.config.k8s.io/v1"),
    _set("profiles.0.pluginConfig.0.args.kind", "NodeResourcesFitArgs"),
    _add_args("TopologyPlacement", {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "TopologyPlacementArgs",
                                    "levels": [{"nodeLabel": "topology.kubernetes.io/rack"}]}),
    _add_args("TopologyPlacement", {"levels": [{"nodeLabel": "topology.kubernetes.io/rack"}], "maxDomainTrials": 1}),
    _add_args("TopologyPlacement", {"levels": [{"nodeLabel": "example.com/Rack_1.a", "name": "rack"},
                                               {"nodeLabel": "kubernetes.io/hostname"}]}),
    _add_args("TopologyPlacement", {"levels": [{"nodeLabel": "r" * 63}, {"nodeLabel": "a" * 253 + "/b"}]}),
    _set("profiles.0.plugins.score.enabled.0.weight", 0),       # 0 means 1, as upstream
    _set("profiles.0.plugins.score.enabled.0.weight", 2**31 - 1),
    _set("profiles.0.plugins", {}),                             # upstream's default plugins
    _set("profiles.0.pluginConfig", []),
    _set("profiles.0.plugins.multiPoint", {"disabled": [{"name": "*"}],  # the queue sort and binder kept: one per profile
                                           "enabled": [{"name": "TesseraDevices"}, {"name": "PrioritySort"},
                                                       {"name": "DefaultBinder"}]}),
    _set("profiles.0.plugins.filter", {"disabled": [{"name": "*"}]}),
    _set("profiles.0.plugins.filter", {"disabled": [{"name": "NodePorts"}, {"name": "TaintToleration"}]}),
    _set("profiles.0.plugins.preFilter", {"disabled": [{"name": "NodeAffinity"}]}),
    _set("profiles.0.plugins.multiPoint", {"disabled": [{"name": "NodeResourcesFit"}]}),  # its score only
    _set("profiles.0.plugins.queueSort", {"enabled": [{"name": "PrioritySort"}]}),  # kube-scheduler's default
    _set("profiles.0.plugins.multiPoint", {"enabled": [{"name": "PrioritySort"}]}),
    _set("profiles.0.plugins.bind", {"enabled": [{"name": "DefaultBinder"}]}),  # kube-scheduler's default binder
    _set("profiles.0.percentageOfNodesToScore", 0),
    _set("percentageOfNodesToScore", 100),
    _set("parallelism", 16),
    _set("enableProfiling", False),
    _set("extenders", []),
    _set("clientConnection.qps", 0.5),
])
def test_the_schema_accepts_what_tessera_accepts(helm: Path, rendered: list[Obj], tmp_path: Path,
                                                 change: Any) -> None:
    config = yaml.safe_load(_config_text(rendered))
    change(config)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    load_config(str(path))
    del config["leaderElection"]
    docs = helm_template(helm, {"schedulerConfig": config})
    assert {k: v for k, v in yaml.safe_load(_config_text(docs)).items() if k != "leaderElection"} == config


def test_a_refused_configuration_is_the_scheduler_pods_termination_message(rendered: list[Obj],
                                                                           tmp_path: Path) -> None:
    """A configuration the schema cannot refuse (two profiles of one name, an unknown plugin) ends
    `tessera run` with exit 2 and one line on stderr. With FallbackToLogsOnError the kubelet makes
    the log's tail the container's termination message (kuberuntime_container.go
    convertToKubeContainerStatus: exit code != 0 and no message file), so `kubectl describe pod`
    shows the line under Last State instead of only `Error`, exit code 2 (the kustomize tree's
    Deployment says the same: test_default_values_render_exactly_the_kustomize_tree)."""
    assert _containers(rendered, "Deployment", "tessera-scheduler")["terminationMessagePolicy"] == "FallbackToLogsOnError"
    config = yaml.safe_load(_config_text(rendered))
    config["profiles"].append(config["profiles"][0])
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    done = subprocess.run([sys.executable, "-m", "scheduler", "run", f"--config={path}"], capture_output=True,
                          text=True, env={**os.environ, "TESSERA_LOG_FORMAT": "json"}, timeout=60, check=False)
    assert done.returncode == 2
    assert (done.stdout + done.stderr).splitlines() == [
        f"tessera: invalid configuration: {path}: profiles[1].schedulerName: Duplicate value: \"tessera\": "
        "already used by profiles[0].schedulerName"]


@pytest.mark.parametrize("command", [["run"], ["simulate", "-"]])
def test_every_error_of_a_rendered_configuration_is_on_the_one_line(rendered: list[Obj], tmp_path: Path,
                                                                   command: list[str]) -> None:
    """The chart's configuration with two bad weights in one profile's plugins and two bad values in
    one plugin's args: `tessera run` and `tessera simulate` name all four, in validation.go's order
    (within a profile: plugins, then pluginConfig; each args' errors in their validator's order),
    as kube-scheduler's aggregate does; only the first was named before."""
    config = yaml.safe_load(_config_text(rendered))
    first = config["profiles"][0]
    first["plugins"] = {"score": {"enabled": [{"name": "NodeResourcesFit", "weight": -1},
                                              {"name": "TaintToleration", "weight": -2}]}}
    first["pluginConfig"] = [{"name": "DefaultPreemption",
                              "args": {"minCandidateNodesPercentage": 101, "minCandidateNodesAbsolute": -1}}]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    done = subprocess.run([sys.executable, "-m", "scheduler", *command, f"--config={path}"], capture_output=True,
                          text=True, env={**os.environ, "TESSERA_LOG_FORMAT": "json"}, input="", timeout=60,
                          check=False)
    assert done.returncode == 2
    assert (done.stdout + done.stderr).splitlines() == [
        f"tessera: invalid configuration: {path}: ["
        "profiles[0].plugins.score.enabled[0].weight: Invalid value: -1: must be in the range [0, 2147483647], "
        "profiles[0].plugins.score.enabled[1].weight: Invalid value: -2: must be in the range [0, 2147483647], "
        "profiles[0].pluginConfig[0].args.minCandidateNodesPercentage: Invalid value: 101: not in valid range [0, 100], "
        "profiles[0].pluginConfig[0].args.minCandidateNodesAbsolute: Invalid value: -1: not in valid range [0, inf)]"]


@pytest.mark.parametrize(("change", "where"), [
    (_set("profiles.0.pluginConfig.0.args.scoringStrategy.type", "Balanced"), f"{_FIT}/type"),
    (_set("profiles.0.pluginConfig.0.args.scoringStrategy.resources.1.weight", 101), f"{_FIT}/resources/1/weight"),
    (_set("profiles.0.pluginConfig.2.args.agentHeartbeatTimeoutSeconds", -5), f"{_DEVICES}/agentHeartbeatTimeoutSeconds"),
    # an on-call trial: misspelt args keys passed lint and crash-looped `tessera run` (exit 2)
    (_set("profiles.0.pluginConfig.1.args.podGroupBackofSeconds", 10), "/schedulerConfig/profiles/0/pluginConfig/1/args"),
    (_set("profiles.0.pluginConfig.2.args.agentHeartbeatTimeout", 90), _DEVICES),
    (_set("profiles.0.pluginConfig.0.args.scoringStratgy", {"type": "LeastAllocated"}),
     "/schedulerConfig/profiles/0/pluginConfig/0/args"),
    # a re-trial: another plugin's kind, or an old apiVersion, rendered and then crash-looped
    (_set("profiles.0.pluginConfig.0.args.kind", "CoschedulingArgs"), "/schedulerConfig/profiles/0/pluginConfig/0/args/kind"),
    (_set("profiles.0.pluginConfig.0.args.apiVersion", "kubescheduler.config.k8s.io/v1beta3"),
     "/schedulerConfig/profiles/0/pluginConfig/0/args/apiVersion"),
])
def test_helm_lint_refuses_the_plugin_args_a_trial_upgraded_to(helm: Path, rendered: list[Obj], tmp_path: Path,
                                                                change: Any, where: str) -> None:
    """A platform engineer's trial: `helm lint -f` passed each of these, `helm upgrade` took them,
    and every replica that restarted crash-looped. The schema makes lint fail, naming the value."""
    config = yaml.safe_load(_config_text(rendered))
    del config["leaderElection"]
    change(config)
    done = _helm_set(helm, "lint", values=values_file({"schedulerConfig": config}, tmp_path))
    assert done.returncode != 0 and f"at '{where}'" in done.stdout + done.stderr, done.stdout


def test_the_schemas_plugin_names_are_tesseras() -> None:
    """values.schema.json lists the plugin names `tessera run` accepts (a name it does not know is
    refused at install); a plugin added to the registry must be added there too."""
    schema = json.loads((CHART / "values.schema.json").read_text())["definitions"]
    assert schema["pluginName"]["enum"] == [spec.name for spec in REGISTRY]
    assert schema["scorePluginName"]["enum"] == [spec.name for spec in REGISTRY if spec.scores]
    assert schema["argsPluginName"]["enum"] == [spec.name for spec in REGISTRY if spec.args is not None]


def test_each_extension_points_plugin_names_are_those_that_extend_it() -> None:
    """Each extension point's `enabled` names in values.schema.json are the plugins that
    implement the point (`interface.extends`: `tessera run` refuses the others as upstream's
    framework build does, "plugin %q does not extend %s plugin"); a point no plugin implements
    takes no enabled entry."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    points = schema["properties"]["schedulerConfig"]["properties"]["profiles"]["items"]["properties"]["plugins"]["properties"]
    for point, entry in points.items():
        if point in ("multiPoint", "score"):
            continue
        names = [spec.name for spec in REGISTRY if extends(spec.kind, point)]
        ref = entry["allOf"][1]["$ref"].removeprefix("#/definitions/")
        enabled = schema["definitions"][ref]["properties"]["enabled"]
        assert (enabled["items"]["properties"]["name"]["enum"] if names else enabled["maxItems"]) == (names or 0), point


def _args_schemas(schema: Obj) -> dict[str, Obj]:
    """The args schema of each plugin in pluginConfig's if/then entries, by plugin name."""
    entry = schema["properties"]["schedulerConfig"]["properties"]["profiles"]["items"]["properties"]["pluginConfig"]
    found: dict[str, Obj] = {}
    for case in entry["items"]["allOf"]:
        name = case["if"]["properties"]["name"]["const"]
        ref = case["then"]["properties"]["args"]["$ref"].removeprefix("#/definitions/")
        found[name] = schema["definitions"][ref]
    return found


def test_the_schemas_plugin_args_are_closed_on_the_keys_tessera_reads() -> None:
    """An on-call trial: `podGroupBackofSeconds`, `agentHeartbeatTimeout` and `scoringStratgy`
    passed `helm lint` and `helm template` (the args objects were open), and `tessera run` refused
    the ConfigMap (exit 2, a crash-loop). Each plugin's args schema names exactly the keys its
    parser accepts (the registry's fields and ignored keys) and refuses any other."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    by_name = _args_schemas(schema)
    assert set(by_name) == {spec.name for spec in REGISTRY if spec.args is not None}
    for spec in REGISTRY:
        if spec.args is None:
            continue
        args = by_name[spec.name]
        assert args.get("additionalProperties") is False, spec.name
        assert set(args["properties"]) == {"apiVersion", "kind", *spec.args.fields, *spec.args.ignored}, spec.name
        # typed args name the one version and the one kind `tessera run` accepts for the plugin
        assert args["properties"]["apiVersion"]["const"] == V1_API_VERSION, spec.name
        assert args["properties"]["kind"]["const"] == f"{spec.name}Args", spec.name


def _open_objects(schema: Obj, where: str) -> list[str]:
    """The object schemas under `where` that take keys they do not name (no additionalProperties
    false and no patternProperties), following $refs into the definitions."""
    root = schema
    found: list[str] = []
    seen: set[str] = set()

    def walk(node: Any, path: str) -> None:
        if isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, f"{path}[{i}]")
            return
        if not isinstance(node, dict):
            return
        if "$ref" in node and node["$ref"] not in seen:
            seen.add(node["$ref"])
            walk(root["definitions"][node["$ref"].removeprefix("#/definitions/")], node["$ref"])
        if node.get("type") == "object" and "properties" in node and node.get("additionalProperties") is not False:
            found.append(path)
        for key, value in node.items():
            if key not in ("if",):  # an if's properties only select a case
                walk(value, f"{path}/{key}")

    walk(schema["properties"][where], where)
    return found


def test_every_object_of_the_schemas_scheduler_configuration_is_closed() -> None:
    """`tessera run` refuses an unknown key anywhere in its configuration (the config model forbids
    extra fields; the parser names known fields), so every object the schema describes under
    schedulerConfig must refuse one too, or a misspelt key passes lint and crash-loops the pods."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert _open_objects(schema, "schedulerConfig") == []


@pytest.mark.parametrize("replicas", [0, 1, 2, 3])
@pytest.mark.parametrize("rule_enabled", [True, False])
def test_notes_list_exactly_the_alerts_the_chart_renders(helm: Path, tmp_path: Path, replicas: int,
                                                         rule_enabled: bool) -> None:
    """NOTES.txt always listed "no standby" among the alerts, but TesseraStandbyMissing renders only
    with more than one replica (and TesseraConflictingScheduler was missing): the notes name each
    alert the PrometheusRule has at these values, rendered or (rule off) offered, and no other."""
    values = {"scheduler": {"replicas": replicas}, "monitoring": {"prometheusRule": {"enabled": rule_enabled}}}
    notes = _notes(helm, tmp_path, values)
    on = {"scheduler": {"replicas": replicas}, "monitoring": {"prometheusRule": {"enabled": True}}}
    rules = find(helm_template(helm, on), "PrometheusRule", "tessera-scheduler")
    rendered = {rule["alert"] for group in rules["spec"]["groups"] for rule in group["rules"]}
    [line] = [line for line in notes.splitlines() if "TesseraNoLeader" in line]
    assert set(re.findall(r"\bTessera[A-Z][A-Za-z]+\b", line)) == rendered, line
    assert ("no standby" in line) == (replicas > 1), line
    assert ("The PrometheusRule tessera-scheduler alerts on" in line) == rule_enabled


@pytest.mark.parametrize("replicas", [0, 1, 2])
def test_notes_say_what_one_replica_and_none_mean(helm: Path, tmp_path: Path, replicas: int) -> None:
    """At scheduler.replicas=1 there is no standby: no PodDisruptionBudget, and a failover waits for
    a new pod. At 0 the metrics Service has no endpoints: the notes said its address "reaches
    whichever pod answers"."""
    notes = _notes(helm, tmp_path, {"scheduler": {"replicas": replicas}})
    rendered_pdb = any(d["kind"] == "PodDisruptionBudget" for d in helm_template(helm, {"scheduler": {"replicas": replicas}}))
    [first] = [line for line in notes.splitlines() if " is installed in namespace " in line]
    if replicas == 1:
        assert not rendered_pdb
        assert "no standby: no PodDisruptionBudget, and a failover waits for a new pod" in first, first
    else:
        assert "no standby" not in first and "PodDisruptionBudget" not in first, first
    url = f"https://tessera-scheduler-metrics.{NAMESPACE}:10259/metrics"
    if replicas == 0:
        assert url not in notes and "reaches whichever pod" not in notes
        assert "the Service tessera-scheduler-metrics has no endpoints" in notes, notes
        # the scheduler serves HTTPS on --secure-port: "(its --port)" sent the reader to plain HTTP
        assert "(its --port)" not in notes and "--secure-port" in notes, notes
    elif replicas == 1:
        assert f"{url} reaches the scheduler pod" in notes.replace("\n", " ")
        assert "the standby too" not in notes
    else:
        assert f"{url} reaches whichever pod answers, the standby too" in notes.replace("\n", " ")


def test_the_schemas_label_key_is_names_py_rule() -> None:
    """values.schema.json states the label-key rule as patterns (JSON schema cannot call
    scheduler/api/names.py): both say the same of every kind of key, valid or not."""
    from scheduler.api.names import label_key_problem

    text = (CHART / "values.schema.json").read_text()
    schema = json.loads(text)
    patterns = [re.compile(part["pattern"]) for part in schema["definitions"]["labelKey"]["allOf"]]
    # the maps keyed by label keys say it with the first pattern, and refuse a prefix longer than 253
    # characters by a second one (their keys' prefix was unbounded: "a" * 254 + "/x" passed helm
    # and the apiserver refused the Deployment at install)
    assert text.count(json.dumps(patterns[0].pattern) + ": {") == 5
    maps = {**_label_key_maps(schema), **_label_key_maps(schema["definitions"]["labelSelector"],
                                                         "#/definitions/labelSelector")}
    assert sorted(maps) == ["#/definitions/labelSelector/matchLabels", "/agent/nodeSelector",
                            "/monitoring/prometheusRule/labels", "/monitoring/serviceMonitor/labels",
                            "/scheduler/nodeSelector"]
    keys = ["rack", "Rack", "r" * 63, "r" * 64, "a.b", "a_b", "a-b", "-a", "a-", "_a", "a.", "", "/", "/a", "a/",
            "a/b/c", "example.com/x", "Example.com/x", "ex_ample.com/x", "example..com/x", "-example.com/x",
            "a" * 253 + "/x", "a" * 254 + "/x", "kubernetes.io/hostname", "topology.kubernetes.io/zone",
            "Bad Label!!", "Not A/Valid Label!!", "example.com/a b", "nvidia.com/gpu.present", "1/2", "x" * 200]
    for key in keys:
        by_schema = all(pattern.search(key) for pattern in patterns)
        assert by_schema == (label_key_problem(key) is None), (key, label_key_problem(key))
        for where, properties in maps.items():
            assert _map_takes(properties, key) == (label_key_problem(key) is None), (where, key)


def test_a_label_key_with_a_253_character_prefix_is_accepted(helm: Path) -> None:
    """The bound on the prefix is the apiserver's (253, DNS subdomain), not less: helm renders it."""
    key = "a" * 253 + "/x"
    docs = helm_template(helm, {"scheduler": {"nodeSelector": {key: "x"}}})
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    assert deployment["spec"]["template"]["spec"]["nodeSelector"][key] == "x"


def _label_key_maps(schema: Obj, where: str = "") -> dict[str, Obj]:
    """The objects of values.schema.json whose keys are label keys (a patternProperties), by path."""
    found: dict[str, Obj] = {}
    if "patternProperties" in schema:
        found[where] = schema
    for name, sub in schema.get("properties", {}).items():
        found.update(_label_key_maps(sub, f"{where}/{name}"))
    return found


def _map_takes(properties: Obj, key: str) -> bool:
    """Whether an object schema of `patternProperties` (each a string schema, `{"type": "string"}`
    or a label value's, or `{"not": {}}`) and `additionalProperties: false` accepts `key` with a
    valid value, as JSON schema judges: every pattern the key matches must accept the value, and
    the key must match one."""
    assert properties.get("additionalProperties") is False, properties
    matched = [sub for pattern, sub in properties["patternProperties"].items() if re.search(pattern, key)]
    for sub in matched:
        assert sub.get("type") == "string" or sub == {"not": {}}, sub
    return bool(matched) and all(sub.get("type") == "string" for sub in matched)


# --- the scheduler's NetworkPolicy (networkPolicy) -----------------------------------------------
#
# A security review: port 10251 serves /metrics, /configz and, with --gpu-map, every tenant's pod
# names in plain HTTP without authentication, and the chart shipped no NetworkPolicy (deploy/README.md
# gave one to copy). networkPolicy.enabled renders one that admits only the configured peers.

MONITORING_NAMESPACE = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
PROMETHEUS = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
              "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}
NETWORK_POLICY = "tessera-scheduler"


def _network_policies(docs: list[Obj]) -> list[Obj]:
    return [d for d in docs if d["kind"] == "NetworkPolicy"]


def test_the_network_policy_is_off_by_default(rendered: list[Obj]) -> None:
    """Off by default, as deploy/ (which the defaults render) and most charts ship: which pods
    may scrape is the cluster's (Prometheus' namespace and labels), and a wrong guess would cut
    Prometheus off the scheduler (deploy/README.md, Security notes, says why)."""
    assert _network_policies(rendered) == []


def test_the_network_policy_admits_only_the_configured_peers_to_the_scheduler_port(helm: Path) -> None:
    docs = helm_template(helm, {"networkPolicy": {"enabled": True, "from": [PROMETHEUS]}})
    [policy] = _network_policies(docs)
    assert policy["metadata"]["name"] == NETWORK_POLICY and policy["metadata"]["namespace"] == NAMESPACE
    spec = policy["spec"]
    # the scheduler pods (their template's labels), not the agent's
    labels = find(docs, "Deployment", "tessera-scheduler")["spec"]["template"]["metadata"]["labels"]
    agent = find(docs, "DaemonSet", "tessera-agent")["spec"]["template"]["metadata"]["labels"]
    assert spec["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "tessera",
                                                   "app.kubernetes.io/component": "scheduler"}}
    assert spec["podSelector"]["matchLabels"].items() <= labels.items()
    assert not spec["podSelector"]["matchLabels"].items() <= agent.items()
    # ingress only: the scheduler's calls to the apiserver stay open
    assert spec["policyTypes"] == ["Ingress"] and "egress" not in spec
    assert spec["ingress"] == [{"from": [PROMETHEUS], "ports": [{"port": 10259, "protocol": "TCP"}]}]
    # the port follows scheduler.port, which the container listens on
    moved = helm_template(helm, {"networkPolicy": {"enabled": True}, "scheduler": {"port": 10300}})
    [policy] = _network_policies(moved)
    [port] = _containers(moved, "Deployment", "tessera-scheduler")["ports"]
    assert policy["spec"]["ingress"][0]["ports"] == [{"port": 10300, "protocol": "TCP"}]
    assert port["containerPort"] == 10300
    # the default peers: the namespace `monitoring` (the README's policy), all its pods
    assert policy["spec"]["ingress"][0]["from"] == [MONITORING_NAMESPACE]


def test_a_network_policy_without_peers_admits_no_pod(helm: Path) -> None:
    """An ingress rule without `from` admits every source: no peers must render no rule at all
    (only the node, whose kubelet probes NetworkPolicy always lets through, reaches the port)."""
    [policy] = _network_policies(helm_template(helm, {"networkPolicy": {"enabled": True, "from": []}}))
    assert policy["spec"]["ingress"] == [] and policy["spec"]["policyTypes"] == ["Ingress"]


def test_a_service_monitor_behind_a_network_policy_without_peers_is_refused(helm: Path) -> None:
    error = helm_template_error(helm, {"networkPolicy": {"enabled": True, "from": []},
                                       "monitoring": {"serviceMonitor": {"enabled": True}}})
    assert "networkPolicy.from" in error and "Prometheus" in error, error


@pytest.mark.parametrize("peer", [
    {},  # the apiserver refuses a peer naming nothing
    {"podSelector": {"matchLabels": {"Bad Label!!": "x"}}},
    {"namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "Equals", "values": ["a"]}]}},
    {"namespaceSelector": {"matchLabel": {"team": "a"}}},  # misspelt: would select every namespace
    {"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}},  # the apiserver refuses ipBlock with a selector
    {"ipBlock": {"except": ["10.1.0.0/16"]}},
    {"namespace": "monitoring"},
])
def test_network_policy_peers_of_the_wrong_shape_are_refused_by_the_schema(helm: Path, peer: Obj) -> None:
    error = helm_template_error(helm, {"networkPolicy": {"enabled": True, "from": [peer]}})
    assert "values don't meet the specifications of the schema" in error and "/networkPolicy/from" in error, error


def test_network_policy_peers_the_apiserver_takes_render(helm: Path) -> None:
    peers = [PROMETHEUS, {"podSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}},
             {"namespaceSelector": {}}, {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}]
    [policy] = _network_policies(helm_template(helm, {"networkPolicy": {"enabled": True, "from": peers}}))
    assert policy["spec"]["ingress"][0]["from"] == peers


def test_the_kustomize_trees_optional_network_policy_is_the_charts(helm: Path) -> None:
    """deploy/optional/scheduler-networkpolicy.yaml (not in the kustomization: it needs your
    Prometheus' namespace) is what the chart renders with networkPolicy.enabled at default peers."""
    [tree] = load_documents(DEPLOY / "optional" / "scheduler-networkpolicy.yaml")
    [chart] = _network_policies(helm_template(helm, {"networkPolicy": {"enabled": True}}, "tessera-system"))
    assert _without_helm_labels(chart) == tree, _diff(tree, _without_helm_labels(chart))


def test_notes_say_who_reaches_the_scheduler_port(helm: Path, tmp_path: Path) -> None:
    default = " ".join(_notes(helm, tmp_path).split())
    assert "any pod of the cluster can reach port 10259 of the scheduler pods" in default, default
    assert "networkPolicy.enabled: true" in default
    gpu_map = " ".join(_notes(helm, tmp_path, {"scheduler": {"extraArgs": ["--gpu-map"]}}).split())
    assert "with --gpu-map, every namespace's GPU pods by name" in gpu_map, gpu_map
    on = " ".join(_notes(helm, tmp_path, {"networkPolicy": {"enabled": True, "from": [PROMETHEUS]}}).split())
    assert "any pod of the cluster can reach" not in on
    assert "The NetworkPolicy tessera-scheduler admits to port 10259 only" in on, on
    assert "kubernetes.io/metadata.name: monitoring" in on and "app.kubernetes.io/name: prometheus" in on, on
    monitored = " ".join(_notes(helm, tmp_path, {"networkPolicy": {"enabled": True},
                                                 "monitoring": {"serviceMonitor": {"enabled": True}}}).split())
    assert "your Prometheus' pods must be among them" in monitored, monitored
    closed = " ".join(_notes(helm, tmp_path, {"networkPolicy": {"enabled": True, "from": []}}).split())
    assert "admits no pod to port 10259" in closed, closed


DEBUG_READER = ("kubectl create clusterrole tessera-debug-reader --verb=get --non-resource-url=/configz "
                "--non-resource-url=/gpu-map --non-resource-url=/gpu-map.json")


@pytest.mark.parametrize(("args", "open_paths"), [
    ([], ""),
    (["--gpu-map"], ""),
    (["--gpu-map", "--authorization-always-allow-paths=/healthz,/readyz,/livez,/gpu-map,/gpu-map.json"],
     "/gpu-map, /gpu-map.json"),
    (["--gpu-map", "--authorization-always-allow-paths", "healthz,readyz,gpu-map*"], "/gpu-map, /gpu-map.json"),
    (["--authorization-always-allow-paths=/healthz,/readyz,configz"], "/configz"),
])
def test_notes_say_how_to_grant_configz_and_the_gpu_map_and_what_always_allowed_paths_open(
        helm: Path, tmp_path: Path, args: list[str], open_paths: str) -> None:
    """A trial found NOTES saying the GPU map goes only to tokens allowed `get` on it while
    docs/kubectl-tessera.md's browser recipe puts it in --authorization-always-allow-paths, which
    serves it to anyone who reaches the port; nor did they say how to grant the reads."""
    notes = " ".join(_notes(helm, tmp_path, {"scheduler": {"extraArgs": args}}).split())
    assert DEBUG_READER in notes, notes
    opened = f"--authorization-always-allow-paths serves {open_paths} without a token"
    assert (opened in notes) == bool(open_paths), notes
    if open_paths:
        assert "anyone who reaches port 10259 reads" in notes, notes
    else:
        assert "without a token" not in notes, notes


def test_the_readmes_clusterrolebindings_are_not_the_charts(helm: Path) -> None:
    """deploy/README's `kubectl create clusterrolebinding tessera-metrics-reader` took the name of
    the chart's binding (monitoring.prometheusServiceAccount): moving from deploy/ to the chart
    stopped at "exists and cannot be imported into the current release"."""
    readme = (CHART.parents[1] / "README.md").read_text().replace("\\\n", " ")
    made = set(re.findall(r"kubectl create clusterrolebinding ([a-z0-9.-]+)", readme))
    assert made, "no kubectl create clusterrolebinding in deploy/README.md"
    rendered = helm_template(helm, {"monitoring": {"prometheusServiceAccount": {
        "name": "kube-prometheus-stack-prometheus", "namespace": "monitoring"}}})
    chart = {d["metadata"]["name"] for d in rendered if d["kind"] == "ClusterRoleBinding"}
    assert "tessera-metrics-reader" in chart
    assert not made & chart, made & chart


def test_the_readmes_service_monitor_for_deploy_is_the_charts(helm: Path) -> None:
    """deploy/README.md gave kustomize users no ServiceMonitor, and its plain scrape config named
    the port `metrics` the scheduler pods lost in daa24b3: the README's is the chart's spec."""
    readme = (CHART.parents[1] / "README.md").read_text()
    section = readme.split("- **Prometheus Operator with deploy/**", 1)[1]
    block = section.split("```yaml", 1)[1].split("```", 1)[0]
    monitor = yaml.safe_load(textwrap.dedent(block))
    chart = find(helm_template(helm, {"monitoring": {"serviceMonitor": {"enabled": True}}}, "tessera-system"),
                 "ServiceMonitor", "tessera-scheduler")
    assert monitor["spec"] == chart["spec"], _diff(chart["spec"], monitor["spec"])


# --- the GPU pod policy's NVIDIA_VISIBLE_DEVICES rule (gpuPodPolicy.refuseVisibleDevicesEnv) ---------


def _validations(docs: list[Obj]) -> list[str]:
    policy = find(docs, "ValidatingAdmissionPolicy", "tessera-gpu-pods")
    return [v["expression"] for v in policy["spec"]["validations"]]


def test_the_visible_devices_rule_can_be_turned_off(helm: Path, rendered: list[Obj]) -> None:
    """On by default (deploy/ has it); off, the policy keeps its other rules, unchanged, and drops
    the rule with the variable it reads (a platform whose GPU tools must set NVIDIA_VISIBLE_DEVICES
    outside namespaces it can exempt, and whose nodes ignore the variable)."""
    on = find(rendered, "ValidatingAdmissionPolicy", "tessera-gpu-pods")
    assert "size(variables.visibleDevicesContainers) == 0" in _validations(rendered)
    assert find(helm_template(helm, {"gpuPodPolicy": {"refuseVisibleDevicesEnv": True}}),
                "ValidatingAdmissionPolicy", "tessera-gpu-pods") == on
    docs = helm_template(helm, {"gpuPodPolicy": {"refuseVisibleDevicesEnv": False}})
    off = find(docs, "ValidatingAdmissionPolicy", "tessera-gpu-pods")
    assert "visibleDevicesContainers" not in json.dumps(off) and "NVIDIA_VISIBLE_DEVICES" not in json.dumps(off["spec"])
    assert _validations(docs) == [e for e in _validations(rendered) if "visibleDevicesContainers" not in e]
    assert [v for v in off["spec"]["variables"]] == [v for v in on["spec"]["variables"]
                                                     if v["name"] != "visibleDevicesContainers"]
    assert find(docs, "ValidatingAdmissionPolicyBinding", "tessera-gpu-pods") == \
        find(rendered, "ValidatingAdmissionPolicyBinding", "tessera-gpu-pods")


def test_refuse_visible_devices_env_is_a_boolean(helm: Path) -> None:
    error = helm_template_error(helm, {"gpuPodPolicy": {"refuseVisibleDevicesEnv": "false"}})
    assert "/gpuPodPolicy/refuseVisibleDevicesEnv" in error, error


def test_notes_say_when_the_visible_devices_rule_is_off(helm: Path, tmp_path: Path) -> None:
    default = " ".join(_notes(helm, tmp_path).split())
    assert "or that set NVIDIA_VISIBLE_DEVICES" in default
    off = " ".join(_notes(helm, tmp_path, {"gpuPodPolicy": {"refuseVisibleDevicesEnv": False}}).split())
    assert "or that set NVIDIA_VISIBLE_DEVICES" not in off
    assert "gpuPodPolicy.refuseVisibleDevicesEnv is false: pods that set NVIDIA_VISIBLE_DEVICES are let through" in off, off
    assert "accept-nvidia-visible-devices-envvar-when-unprivileged = false" in off


def test_the_whole_profile_message_and_values_say_what_empty_plugins_give(helm: Path) -> None:
    """A re-trial: the message said `plugins: {}` gives "the built-in ones" and values.yaml said
    empty ones mean "Tessera's built-in defaults", but `plugins: {}` gives upstream's default plugins
    (and TesseraDevices) without TesseraFragmentation, as /configz, config/two-teams.yaml and
    deploy/README.md say: GPUs are not packed."""
    done = _helm_set(helm, "template", "schedulerConfig.profiles[0].schedulerName=tessera")
    assert done.returncode != 0
    assert ("add `plugins: {}` and `pluginConfig: []` for the defaults (`plugins: {}` is upstream's default plugins "
            "and TesseraDevices, without TesseraFragmentation: GPUs are not packed unless plugins.score enables it, "
            "as the chart's profile does with weight 10; `pluginConfig: []` is every plugin's default args)"
            ) in done.stderr, done.stderr
    assert "built-in" not in done.stderr
    comment = (CHART / "values.yaml").read_text().split("schedulerConfig:\n", 1)[0]
    assert "built-in defaults" not in comment and "TesseraFragmentation" in comment


def test_a_values_file_profile_without_plugin_config_is_told_what_to_add(helm: Path, tmp_path: Path) -> None:
    """A capacity planner's trial: `-f values.yaml` with whole profiles lacking `pluginConfig` was
    refused with "Helm replaces a list ... --set" though no --set was used. The message is true of
    both ways (a values file, --set) and says what to add."""
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"schedulerConfig": {"profiles": [
        {"schedulerName": "tessera", "plugins": {}}, {"schedulerName": "tessera-spread", "plugins": {}}]}}))
    done = _helm_set(helm, "template", values=values)
    assert done.returncode != 0
    assert ("schedulerConfig.profiles[0] has no pluginConfig: every profile states its plugins and pluginConfig, "
            "as one without them runs the defaults, not the chart's; add `pluginConfig: []` for the defaults "
            "(`plugins: {}` is upstream's default plugins") in done.stderr
    assert "or the ones it should have (the chart's are in its values.yaml)" in done.stderr
    assert "so `--set schedulerConfig.profiles[0]...` keeps only" not in done.stderr
    assert ("If you used --set schedulerConfig.profiles[...]: Helm replaces the whole list, so the profile holds "
            "only the keys set; change a profile in a values file holding the whole profile "
            '(deploy/README.md, "Changing one weight")') in done.stderr


# --- values the apiserver or Prometheus would refuse only later --------------------------------


QUANTITIES = ["500m", "2", "1.5", ".5", "2.", "2Gi", "64Mi", "1e3", "1E-3", "1k", "10M", "+1", "100n", "3u",
              "banana", "4GB", "64mb", "1 Gi", "-1", "1.2.3", "Gi", "1e", "1ki", "", "1K", "0x10", "1e3Gi"]


def _quantity_schema() -> Obj:
    schema = json.loads((CHART / "values.schema.json").read_text())
    return dict(schema["definitions"]["quantity"])


@pytest.mark.parametrize("text", QUANTITIES)
def test_the_schemas_quantity_is_the_apiservers(text: str) -> None:
    """The schema's pattern takes exactly the quantities scheduler/api/quantity.py (the
    apiserver's grammar) parses, less the negative ones, which the apiserver refuses in a
    container's resources."""
    try:
        takes = parse_quantity(text) >= 0
    except QuantityError:
        takes = False
    pattern = next(alt["pattern"] for alt in _quantity_schema()["anyOf"] if "pattern" in alt)
    assert bool(re.search(pattern, text)) == takes, (text, pattern)


def test_quantities_the_apiserver_takes_render(helm: Path) -> None:
    resources = {"requests": {"cpu": 0.5, "memory": "+1Gi", "ephemeral-storage": "2Ti"},
                 "limits": {"cpu": 2, "memory": "2G", "nvidia.com/gpu": "0"}}
    docs = helm_template(helm, {"scheduler": {"resources": resources}, "agent": {"resources": resources}})
    assert _containers(docs, "Deployment", "tessera-scheduler")["resources"] == resources


@pytest.mark.parametrize(("request_", "limit"), [
    ("2", "1"), (2, 1), ("1001m", "1"), ("1Gi", "1G"), ("1025Mi", "1Gi"), ("1.5", "1500m"), (0.5, "500m"),
    ("1e3", "1k"), ("2.e3", "2Ki"), ("1000000001", "1G"), ("+1", "999m"), (".5", "499m"), ("3u", "2999n"),
    ("1.5", "1499m"), (0.5, "499m"), ("1.e+3", "999"), ("2.e+3", "1999"), ("2.", "1999m"), ("1Ei", "1E"), ("2", 2), (1.5, "1.5"),
    ("1Ki", "1001"), ("+1Gi", "1023Mi"), ("1u", "1001n"), ("1P", "999T"), ("1Pi", "1125899906842623"),
])
@pytest.mark.parametrize("component", ["scheduler", "agent"])
def test_a_request_above_its_limit_is_refused_naming_both(helm: Path, component: str, request_: Any,
                                                          limit: Any) -> None:
    """A re-trial: `--set scheduler.resources.requests.cpu=2` beside the default limit 1 went
    through `helm template`, and the apiserver refused the Deployment at install ("must be less
    than or equal to cpu limit of 1"), leaving a failed revision. Refused when rendered, each
    resource a request and a limit name, quantities compared by value (scheduler/api/quantity.py
    is the reference: equal values in other units are taken)."""
    for name in ("cpu", "memory", "ephemeral-storage"):
        values = {component: {"resources": {"requests": {name: request_}, "limits": {name: limit}}}}
        if parse_quantity(str(request_)) > parse_quantity(str(limit)):
            error = helm_template_error(helm, values)
            assert (f'{component}.resources.requests.{name}: Invalid value: "{request_}": must be less than or equal '
                    f"to {name} limit of {limit} ({component}.resources.limits.{name})") in error, error
        else:
            helm_template(helm, values)


def test_a_prometheus_rule_reading_another_job_than_the_service_monitors_is_refused(helm: Path) -> None:
    """A user trial: prometheusRule.job other than the ServiceMonitor's job (the Service's name)
    made every rule read no series, and TesseraSchedulerDown fired forever."""
    values = json.loads(json.dumps(MONITORING))
    values["monitoring"]["prometheusRule"]["job"] = "tessera"
    error = helm_template_error(helm, values)
    assert ('monitoring.prometheusRule.job "tessera" is not the job "tessera-scheduler-metrics" of the '
            "ServiceMonitor's series (monitoring.serviceMonitor.enabled)") in error, error
    # without the chart's ServiceMonitor the job is the user's scrape config's: any name is taken
    values["monitoring"]["serviceMonitor"]["enabled"] = False
    assert rule_alerts(helm_template(helm, values))


@pytest.mark.parametrize(("interval", "timeout", "refused"), [
    ("30s", "40s", True), ("30s", "30s", False), ("1m", "45s", False), ("1m", "1m1s", True), ("1d", "2d", True),
])
def test_a_scrape_timeout_longer_than_the_interval_is_refused(helm: Path, interval: str, timeout: str,
                                                              refused: bool) -> None:
    """Prometheus refuses a scrape config whose timeout is longer than its interval ("scrape
    timeout greater than scrape interval"): the ServiceMonitor installed and was never scraped."""
    values = {"monitoring": {"serviceMonitor": {"enabled": True, "interval": interval, "scrapeTimeout": timeout}}}
    if refused:
        error = helm_template_error(helm, values)
        assert (f"monitoring.serviceMonitor.scrapeTimeout {timeout} must not be longer than "
                f"monitoring.serviceMonitor.interval {interval}") in error, error
    else:
        helm_template(helm, values)


@pytest.mark.parametrize(("window", "lease", "interval", "refused"), [
    ("3m", "30s", "30s", False),     # the defaults: 30 + 4.8 + 60 = 94.8s
    ("1m", "30s", "30s", True),
    ("95s", "30s", "30s", False),
    ("94s", "30s", "30s", True),
    ("3m", "2m", "30s", True),       # 120 + 4.8 + 60
    ("3m", "30s", "1m", False),      # 30 + 4.8 + 120 = 154.8s
    ("2m", "30s", "1m", True),
])
def test_a_failover_window_shorter_than_a_failover_is_refused(helm: Path, window: str, lease: str, interval: str,
                                                              refused: bool) -> None:
    """values.yaml's rule: failoverWindow is longer than a failover as Prometheus sees it
    (leaseDuration + retryPeriod * 1.2 + two scrape intervals); shorter, TesseraPodsUnschedulable's
    `for` started over at every failover."""
    values = {"leaderElection": {"leaseDuration": lease, "renewDeadline": "20s", "retryPeriod": "4s"},
              "monitoring": {"serviceMonitor": {"interval": interval},
                             "prometheusRule": {"enabled": True, "failoverWindow": window}}}
    if refused:
        error = helm_template_error(helm, values)
        assert (f"monitoring.prometheusRule.failoverWindow {window} must be longer than a failover as Prometheus "
                f"sees it: leaderElection.leaseDuration {lease} + leaderElection.retryPeriod 4s * 1.2 + "
                f"2 * monitoring.serviceMonitor.interval {interval}") in error, error
    else:
        assert rule_alerts(helm_template(helm, values))


@pytest.mark.parametrize("actions", [["Deny", "Warn"], ["Warn", "Audit", "Deny"]])
def test_deny_and_warn_together_are_refused_with_the_apiservers_reason(helm: Path, actions: list[str]) -> None:
    """A user trial: [Warn, Deny] was refused with only "'not' failed". The apiserver's
    ValidatingAdmissionPolicyBinding validation words it."""
    error = helm_template_error(helm, {"gpuPodPolicy": {"validationActions": actions}})
    assert ("gpuPodPolicy.validationActions: must not contain both Deny and Warn (repeating the same validation "
            "failure information in the API response and headers serves no purpose)") in error, error
    assert "'not' failed" not in error


def test_the_readme_says_which_kubernetes_version_helm_template_assumes(helm: Path, tmp_path: Path) -> None:
    """deploy/README.md said a helm built without the release's ldflags assumes v1.20.0; the
    cached one (no ldflags: GitCommit is empty) assumes another. The README names what this helm
    prints for .Capabilities.KubeVersion."""
    chart = tmp_path / "capabilities"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: capabilities\nversion: 0.1.0\n")
    (chart / "templates" / "kube.yaml").write_text("kube: {{ .Capabilities.KubeVersion.Version }}\n"
                                                   "helm: {{ .Capabilities.HelmVersion.Version }}\n")
    done = run_helm(helm, "template", str(chart))
    assert done.returncode == 0, done.stderr
    printed = yaml.safe_load(done.stdout.split("---", 1)[1])
    readme = " ".join((CHART.parents[1] / "README.md").read_text().split())
    assert "v1.20.0" not in readme
    assert f"Helm {printed['helm']} assumes {printed['kube']}" in readme, printed


def test_deploying_links_to_the_dev_cluster_path() -> None:
    """docs/deploying.md had no way to try the chart locally: it links deploy/README.md's."""
    assert "#### Trying the chart on a `tessera dev-cluster`" in (CHART.parents[1] / "README.md").read_text()
    deploying = (CHART.parents[2] / "docs" / "deploying.md").read_text()
    assert "(../deploy/README.md#trying-the-chart-on-a-tessera-dev-cluster)" in deploying


def test_changing_one_weight_says_when_set_merges_into_a_profile(helm: Path, tmp_path: Path) -> None:
    """`--set profiles[0]...weight=5` replaces the list only when the profiles come from the
    chart's defaults; with a values file holding them, Helm sets the key in that file's list item."""
    done = _helm_set(helm, "template", "schedulerConfig.profiles[0].plugins.score.enabled[0].weight=5",
                     values=CHART.parent / "values-one-weight.yaml")
    assert done.returncode == 0, done.stderr
    config = yaml.safe_load(_config_text([d for d in yaml.safe_load_all(done.stdout) if isinstance(d, dict)]))
    assert config["profiles"][0]["plugins"]["score"]["enabled"] == [
        {"name": "TesseraFragmentation", "weight": 5}, {"name": "TesseraDevices", "weight": 5}]
    readme = " ".join((CHART.parents[1] / "README.md").read_text().split())
    assert "with `-f` values holding `schedulerConfig.profiles`, Helm sets the key inside that list item" in readme


# --- the secure port (kube-scheduler's 10259): HTTPS, delegated authentication and authorization ----

TLS_DIR = "/etc/tessera-tls"
TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"


def test_the_scheduler_serves_https_on_the_secure_port_with_delegated_auth(rendered: list[Obj]) -> None:
    """As kube-scheduler deployments do: HTTPS on 10259, tokens checked with TokenReviews and paths
    authorized with SubjectAccessReviews (the scheduler's ServiceAccount bound to
    system:auth-delegator), the probes' paths always allowed; no plain HTTP port. The defaults are
    the kustomize tree (test_default_values_render_exactly_the_kustomize_tree)."""
    container = _containers(rendered, "Deployment", "tessera-scheduler")
    args = run_cli_args(container["args"])
    assert (args.secure_port, args.bind_address, args.tls_cert_file) == (10259, "0.0.0.0", None)
    assert not any(a.startswith("--port") for a in container["args"])
    assert {"/healthz", "/readyz"} <= set(args.authorization_always_allow_paths)  # the kubelet sends no token
    assert container["ports"] == [{"name": "https", "containerPort": 10259, "protocol": "TCP"}]
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        assert container[probe]["httpGet"] == {"path": path, "port": "https", "scheme": "HTTPS"}
    service = find(rendered, "Service", "tessera-scheduler-metrics")
    assert service["spec"]["ports"] == [{"name": "https", "port": 10259, "targetPort": "https", "protocol": "TCP"}]
    delegator = find(rendered, "ClusterRoleBinding", "tessera-scheduler-auth-delegator")
    assert delegator["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                    "name": "system:auth-delegator"}
    assert delegator["subjects"] == [{"kind": "ServiceAccount", "name": "tessera-scheduler", "namespace": NAMESPACE}]
    reader = find(rendered, "ClusterRole", "tessera-metrics-reader")
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    # bound to nobody until told whom: who scrapes is the cluster's choice
    assert not [d for d in rendered if d.get("roleRef", {}).get("name") == "tessera-metrics-reader"]


def run_cli_args(args: list[str]) -> argparse.Namespace:
    """The container's args as `tessera run` parses them (an unknown or clashing flag exits)."""
    from scheduler.cli import build_parser

    return build_parser().parse_args(args)


def test_a_tls_secret_is_mounted_and_served(helm: Path) -> None:
    docs = helm_template(helm, {"scheduler": {"tls": {"secretName": "tessera-serving-cert"}}})
    container = _containers(docs, "Deployment", "tessera-scheduler")
    args = run_cli_args(container["args"])
    assert (args.tls_cert_file, args.tls_private_key_file) == (f"{TLS_DIR}/tls.crt", f"{TLS_DIR}/tls.key")
    assert {"name": "tls", "mountPath": TLS_DIR, "readOnly": True} in container["volumeMounts"]
    volumes = find(docs, "Deployment", "tessera-scheduler")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "tls", "secret": {"secretName": "tessera-serving-cert"}} in volumes
    # without a Secret, nothing is mounted (the scheduler makes its own self-signed certificate)
    default = find(helm_template(helm), "Deployment", "tessera-scheduler")
    assert "tls" not in {v["name"] for v in default["spec"]["template"]["spec"]["volumes"]}


def test_the_service_monitor_verifies_the_certificate_when_given_a_ca(helm: Path) -> None:
    tls = {"ca": {"secret": {"name": "tessera-ca", "key": "ca.crt"}},
           "serverName": "tessera-scheduler-metrics.tessera-system.svc"}
    docs = helm_template(helm, {"scheduler": {"tls": {"secretName": "tessera-serving-cert"}},
                                "monitoring": {"serviceMonitor": {"enabled": True, "tlsConfig": tls}}})
    [endpoint] = find(docs, "ServiceMonitor", "tessera-scheduler")["spec"]["endpoints"]
    assert endpoint["tlsConfig"] == tls and endpoint["bearerTokenFile"] == TOKEN_FILE


def test_the_metrics_reader_is_bound_to_the_named_prometheus(helm: Path) -> None:
    account = {"name": "kube-prometheus-stack-prometheus", "namespace": "monitoring"}
    docs = helm_template(helm, {"monitoring": {"prometheusServiceAccount": account}})
    binding = find(docs, "ClusterRoleBinding", "tessera-metrics-reader")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": "tessera-metrics-reader"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", **account}]
    error = helm_template_error(helm, {"monitoring": {"prometheusServiceAccount": {"name": "prometheus"}}})
    assert "/monitoring/prometheusServiceAccount" in error and "namespace" in error, error
