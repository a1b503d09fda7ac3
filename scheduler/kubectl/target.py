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

from scheduler.kube.http import (Impersonation, KubeconfigError, first_current_context, kubeconfig_path,
                                  named_contexts, read_kubeconfigs)

DEFAULT_NAMESPACE = "default"
IN_CLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


@dataclass(frozen=True, slots=True)
class Target:
    kubeconfig: str | None  # None: the in-cluster service account
    context: str | None  # the context to use: --context, else the current one kubectl would use; None: none set
    namespace: str
    impersonate: Impersonation | None = None  # --as, --as-group, --as-uid


def user_name(target: Target) -> str:
    """The kubeconfig user (authInfo) the target's context names ("" in a pod, or none named)."""
    if target.kubeconfig is None:
        return ""
    try:
        docs = read_kubeconfigs(target.kubeconfig)
    except KubeconfigError:
        return ""
    chosen = (named_contexts(docs) or {}).get(target.context) if target.context else None
    user = chosen.get("user") if isinstance(chosen, dict) else None
    return user if isinstance(user, str) else ""


def resolve(kubeconfig: str | None, context: str | None, namespace: str | None,
            environ: Mapping[str, str] = os.environ, home: Path | None = None) -> Target:
    """The context kubectl would use (`--context`, else the first file's current-context) and the
    namespace it names; the connection resolves the same context (`connect`)."""
    path = kubeconfig_path(kubeconfig, environ=environ, home=home)
    chosen, context_namespace = _context(path, context)
    return Target(path, chosen, namespace or context_namespace or DEFAULT_NAMESPACE)


def _context(kubeconfig: str | None, context: str | None) -> tuple[str | None, str | None]:
    """The context to use and the namespace it names, merged as client-go merges several files
    (`clientcmd.ClientConfigLoadingRules.Load`): the first file that sets current-context, or
    defines a context's name, wins. In a pod: no context, the service account's namespace. None
    where nothing says; a file that cannot be read or has odd fields is left to the connection,
    which reports it with its reason."""
    if kubeconfig is None:
        try:
            return None, IN_CLUSTER_NAMESPACE.read_text().strip() or None
        except OSError:
            return None, None
    try:
        docs = read_kubeconfigs(kubeconfig)
    except KubeconfigError:
        return context, None  # the connection reports it, with its reason
    current = context or first_current_context(docs)
    chosen = (named_contexts(docs) or {}).get(current) if current else None
    namespace = chosen.get("namespace") if isinstance(chosen, dict) else None
    return current, namespace if isinstance(namespace, str) and namespace else None
