"""kubeconfig files for the local control plane.

Why inline ``*-data`` fields: a kubeconfig that embeds its CA, certificate and key is a single
self-contained file that kubectl, kubernetes-asyncio and kube-scheduler all read, and it stays
valid when copied elsewhere (for example into a benchmark's output directory).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml

__all__ = ["write_kubeconfig"]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def write_kubeconfig(
    path: Path,
    *,
    server: str,
    ca_pem: bytes,
    user: str,
    cert_pem: bytes | None = None,
    key_pem: bytes | None = None,
    token: str | None = None,
    cluster: str = "tessera-local",
) -> Path:
    """Write a one-context kubeconfig (mode 0600) using a client certificate or a token."""
    if (cert_pem is None) != (key_pem is None):
        raise ValueError("cert_pem and key_pem go together")
    if cert_pem is None and token is None:
        raise ValueError("a kubeconfig user needs a client certificate or a token")
    credentials: dict[str, str] = {}
    if cert_pem is not None and key_pem is not None:
        credentials["client-certificate-data"] = _b64(cert_pem)
        credentials["client-key-data"] = _b64(key_pem)
    if token is not None:
        credentials["token"] = token
    context = f"{user}@{cluster}"
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": cluster,
                "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)},
            }
        ],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": context, "context": {"cluster": cluster, "user": user}}],
        "current-context": context,
        "preferences": {},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path
