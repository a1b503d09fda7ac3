"""The two ways Tessera is installed, read as Kubernetes objects: the kustomize tree `deploy/` and
the Helm chart `deploy/helm/tessera`. Shared by the unit tests (the chart must not drift from the
tree) and the end-to-end tests (both apply to a real apiserver).

Why no kubectl/kustomize binary: kubectl is optional in the pinned cache (only
tests/unit/test_security_notes.py compares with its render, skipped without it), and
`deploy/kustomization.yaml` uses only a flat `resources` list of files, an `images` override and
`sortOptions: fifo` (kustomize keeps the files' order), which are read here exactly as kustomize
applies them. Any other kustomization field makes `kustomize_documents` fail, so a new kustomize
feature cannot silently be ignored by the comparison with the chart.

Why helm is found like the control-plane binaries: it is built by `hack/build-control-plane.sh`
into the same pinned cache, and a missing binary skips on a developer machine but fails in CI
(`CI=true`), where `.ci/run` would reject the skip anyway.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.kube.controlplane import BinariesNotFound, find_binaries
from scheduler.kube.controlplane.binaries import K8S_VERSION, build_script

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
CHART = DEPLOY / "helm" / "tessera"
RELEASE = "tessera"
NAMESPACE = "tessera-system"

Obj = dict[str, Any]

# The kustomization fields read here; anything else would change what kustomize installs.
_KUSTOMIZATION_FIELDS = {"apiVersion", "kind", "resources", "images", "sortOptions"}
# The one sortOptions read here: the files' order (kustomize's default sorts by kind).
_FIFO = {"order": "fifo"}


# --- the kustomize tree ----------------------------------------------------------------------


def load_documents(path: Path) -> list[Obj]:
    """All non-empty YAML documents of one file."""
    return [doc for doc in yaml.safe_load_all(path.read_text()) if isinstance(doc, dict)]


def kustomization() -> Obj:
    found: Obj = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    unknown = set(found) - _KUSTOMIZATION_FIELDS
    if unknown:
        raise AssertionError(f"deploy/kustomization.yaml uses {sorted(unknown)}, which tests/deploy_manifests.py "
                             "does not apply: teach it (and the Helm chart) the same change")
    if found.get("sortOptions") != _FIFO:
        raise AssertionError(f"deploy/kustomization.yaml needs sortOptions {_FIFO}: tests/deploy_manifests.py "
                             "applies its resources in file order, as kubectl apply -k does only then")
    return found


def kustomization_files() -> list[Path]:
    """The files listed in deploy/kustomization.yaml `resources`, in order."""
    return [DEPLOY / entry for entry in kustomization()["resources"]]


def _set_image(image: str, rule: Obj) -> str:
    """kustomize's image transformer for one `images` entry that matched `image`."""
    name, _, digest = image.partition("@")
    if not digest and ":" in name.rsplit("/", 1)[-1]:
        name, tag = name.rsplit(":", 1)
    else:
        tag = ""
    name = rule.get("newName", name)
    if "digest" in rule:
        return f"{name}@{rule['digest']}"
    if "newTag" in rule:
        return f"{name}:{rule['newTag']}"
    return f"{name}@{digest}" if digest else f"{name}:{tag}" if tag else name


def _image_name(image: str) -> str:
    name = image.partition("@")[0]
    last = name.rsplit("/", 1)[-1]
    return name.rsplit(":", 1)[0] if ":" in last else name


def _apply_images(node: Any, rules: list[Obj]) -> None:
    """Rewrite every container's image that an `images` rule names, wherever a pod spec is."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("containers", "initContainers", "ephemeralContainers") and isinstance(value, list):
                for container in value:
                    image = container.get("image") if isinstance(container, dict) else None
                    for rule in rules:
                        if isinstance(image, str) and _image_name(image) == rule["name"]:
                            container["image"] = _set_image(image, rule)
            _apply_images(value, rules)
    elif isinstance(node, list):
        for item in node:
            _apply_images(item, rules)


def deploy_documents() -> list[Obj]:
    """What `kubectl apply -k deploy/` applies, in order."""
    docs = [doc for path in kustomization_files() for doc in load_documents(path)]
    _apply_images(docs, kustomization().get("images", []))
    return docs


# --- the Helm chart ------------------------------------------------------------------------------


def helm_binary() -> Path:
    """The pinned helm from the control-plane cache; skips (fails in CI) when it is missing."""
    try:
        path = find_binaries(build=False).helm
        reason = "the binary directory has no helm"
    except BinariesNotFound as err:
        path, reason = None, str(err)
    if path is None:
        message = f"helm unavailable ({reason}); build it with 'bash {build_script()}'"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and {message}", pytrace=False)
        pytest.skip(message)
    return path


def run_helm(helm: Path, *args: str, kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:
    """helm with its cache, config and data directories out of the user's home."""
    with tempfile.TemporaryDirectory(prefix="helm-home-") as home:
        env = {**os.environ, "HELM_CACHE_HOME": f"{home}/cache", "HELM_CONFIG_HOME": f"{home}/config",
               "HELM_DATA_HOME": f"{home}/data"}
        if kubeconfig is not None:
            env["KUBECONFIG"] = str(kubeconfig)
        return subprocess.run([str(helm), *args], capture_output=True, text=True, env=env, timeout=120, check=False)


def values_file(values: Obj, directory: Path) -> Path:
    path = directory / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def helm_template_args(values: Obj | None, directory: Path, namespace: str = NAMESPACE) -> list[str]:
    """`helm template`/`install` arguments: the release, the chart, the namespace and the values."""
    args = [RELEASE, str(CHART), "--namespace", namespace]
    if values:
        args += ["--values", str(values_file(values, directory))]
    return args


def kube_version_args() -> list[str]:
    """`helm template` renders for the pinned control plane's Kubernetes version. Without it Helm
    assumes a version of its own (v1.37.0 for the cached v3.22.0), not the control plane's."""
    return ["--kube-version", K8S_VERSION]


def helm_template(helm: Path, values: Obj | None = None, namespace: str = NAMESPACE) -> list[Obj]:
    """The chart's objects (CRDs included) as `helm install` would create them."""
    with tempfile.TemporaryDirectory() as directory:
        done = run_helm(helm, "template", *helm_template_args(values, Path(directory), namespace), "--include-crds",
                        *kube_version_args())
    if done.returncode != 0:
        raise AssertionError(f"helm template failed ({done.returncode}):\n{done.stderr}")
    return [doc for doc in yaml.safe_load_all(done.stdout) if isinstance(doc, dict)]


def helm_template_error(helm: Path, values: Obj, namespace: str = NAMESPACE) -> str:
    """The error of a `helm template` that must fail."""
    with tempfile.TemporaryDirectory() as directory:
        done = run_helm(helm, "template", *helm_template_args(values, Path(directory), namespace),
                        *kube_version_args())
    if done.returncode == 0:
        raise AssertionError(f"helm template accepted {values}")
    return done.stderr


def key(obj: Obj) -> tuple[str, str, str]:
    """kind, namespace and name: what identifies an object to the apiserver (within its group)."""
    return obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def find(docs: list[Obj], kind: str, name: str) -> Obj:
    for doc in docs:
        if doc.get("kind") == kind and doc["metadata"]["name"] == name:
            return doc
    raise KeyError(f"no {kind} {name}")
