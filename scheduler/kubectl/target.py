"""Which cluster and namespace a command talks to, resolved as kubectl resolves them.

`--kubeconfig`, else `$KUBECONFIG` (several files joined by `:`), else `~/.kube/config` if it
exists, else the in-cluster service account; `--context`, else the current context; `-n`, else the
context's namespace, else `default`. kubectl hands a plugin only its own arguments, so these flags
are the plugin's and must mean what they mean to kubectl.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from scheduler.kube.http import kubeconfig_path

DEFAULT_NAMESPACE = "default"
IN_CLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


@dataclass(frozen=True, slots=True)
class Target:
    kubeconfig: str | None  # None: the in-cluster service account
    context: str | None  # None: the kubeconfig's current context
    namespace: str


def resolve(kubeconfig: str | None, context: str | None, namespace: str | None,
            environ: Mapping[str, str] = os.environ, home: Path | None = None) -> Target:
    path = kubeconfig_path(kubeconfig, environ=environ, home=home)
    return Target(path, context, namespace or _context_namespace(path, context) or DEFAULT_NAMESPACE)


def _context_namespace(kubeconfig: str | None, context: str | None) -> str | None:
    """The namespace the chosen context names (the first file defining a name wins, as kubectl
    merges), or the service account's namespace in a pod; None when nothing says."""
    if kubeconfig is None:
        try:
            return IN_CLUSTER_NAMESPACE.read_text().strip() or None
        except OSError:
            return None
    current: str | None = context
    contexts: dict[str, object] = {}
    for part in kubeconfig.split(os.pathsep):
        try:
            doc = yaml.safe_load(Path(os.path.expanduser(part)).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue  # connecting reports an unusable file with its reason
        if not isinstance(doc, dict):
            continue
        current = current or doc.get("current-context") or None
        for entry in doc.get("contexts") or ():
            if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                contexts.setdefault(entry["name"], entry.get("context"))
    chosen = contexts.get(current) if current else None
    namespace = chosen.get("namespace") if isinstance(chosen, dict) else None
    return namespace if isinstance(namespace, str) and namespace else None
