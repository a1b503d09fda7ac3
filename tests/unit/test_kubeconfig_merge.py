"""Several kubeconfig files (`KUBECONFIG=prod:dev`): every Tessera command connects to the cluster
kubectl would, the first file's current-context (client-go tools/clientcmd/loader.go
`ClientConfigLoadingRules.Load`: "the first file to set a particular map key wins", the
current-context included). kubernetes-asyncio's `KubeConfigMerger` lets the *last* file's
current-context win, so `tessera run`, `tessera record` and the node agent talked to dev while
kubectl showed prod. `kubectl tessera` already resolved it itself (`target.py`); `connect` now does
for everyone. The test failed before the fix (the host was dev's).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from scheduler.kube.http import connect


def _kubeconfig(path: Path, name: str, server: str, current: bool = True) -> Path:
    path.write_text(textwrap.dedent(f"""\
        apiVersion: v1
        kind: Config
        {f"current-context: {name}" if current else ""}
        contexts: [{{name: {name}, context: {{cluster: {name}, user: {name}}}}}]
        clusters: [{{name: {name}, cluster: {{server: "{server}"}}}}]
        users: [{{name: {name}, user: {{token: t-{name}}}}}]
        """))
    return path


async def test_several_files_connect_with_the_first_files_current_context(tmp_path: Path) -> None:
    prod = _kubeconfig(tmp_path / "prod", "prod", "https://prod.example:6443")
    dev = _kubeconfig(tmp_path / "dev", "dev", "https://dev.example:6443")
    api = await connect(f"{prod}:{dev}")
    try:
        assert api.configuration.host == "https://prod.example:6443"
    finally:
        await api.close()


async def test_a_first_file_without_a_current_context_leaves_it_to_the_next(tmp_path: Path) -> None:
    prod = _kubeconfig(tmp_path / "prod", "prod", "https://prod.example:6443", current=False)
    dev = _kubeconfig(tmp_path / "dev", "dev", "https://dev.example:6443")
    api = await connect(f"{prod}:{dev}")
    try:
        assert api.configuration.host == "https://dev.example:6443"
    finally:
        await api.close()


async def test_an_explicit_context_still_chooses(tmp_path: Path) -> None:
    prod = _kubeconfig(tmp_path / "prod", "prod", "https://prod.example:6443")
    dev = _kubeconfig(tmp_path / "dev", "dev", "https://dev.example:6443")
    api = await connect(f"{prod}:{dev}", context="dev")
    try:
        assert api.configuration.host == "https://dev.example:6443"
    finally:
        await api.close()
