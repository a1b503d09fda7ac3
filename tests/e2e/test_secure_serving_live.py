"""`tessera run --secure-port 0` against the real apiserver: HTTPS with a self-signed certificate,
bearer tokens checked with real TokenReviews and requests authorized with real
SubjectAccessReviews (RBAC), answered with the same Status bodies the apiserver itself gives for
the same identity and path. The scheduler runs with the admin kubeconfig (system:masters), which
may create both reviews, as `system:auth-delegator` lets a deployed scheduler."""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from pathlib import Path
from typing import Any

import aiohttp

from scheduler.kube.controlplane import LocalControlPlane
from tests.e2e.live import TesseraProcess, fast_lease_config
from tests.e2e.test_deploy import service_account_token

RBAC = "/apis/rbac.authorization.k8s.io/v1"


async def _secure_url(proc: TesseraProcess, timeout: float = 40.0) -> str:
    """The address `serving.started` logs (port 0: the one bound), once /healthz answers there."""
    deadline = time.monotonic() + timeout
    url = ""
    async with aiohttp.ClientSession(trust_env=False) as session:
        while time.monotonic() < deadline:
            assert proc.alive(), proc.log()
            for line in proc.log_path.read_text(errors="replace").splitlines():
                if '"serving.started"' in line:
                    url = json.loads(line)["address"]
            if url:
                try:
                    async with session.get(f"{url}/healthz", ssl=False) as response:
                        if response.status == 200:
                            return url
                except aiohttp.ClientError:
                    pass
            await asyncio.sleep(0.2)
    raise AssertionError(f"no secure server after {timeout}s:\n{proc.log()}")


async def _get(url: str, token: str | None = None, context: ssl.SSLContext | bool = False) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with aiohttp.ClientSession(trust_env=False) as session:
        async with session.get(url, headers=headers, ssl=context) as response:
            return response.status, await response.text()


async def test_the_secure_port_authenticates_and_authorizes_with_the_apiserver(
        control_plane: LocalControlPlane, namespace: str, tmp_path: Path) -> None:
    admin = control_plane.admin
    reader = f"{namespace}-metrics-reader"
    for name in ("scraper", "nobody"):
        admin.create(f"/api/v1/namespaces/{namespace}/serviceaccounts",
                     {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})
    admin.create(f"{RBAC}/clusterroles", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": reader},
        "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]})
    admin.create(f"{RBAC}/clusterrolebindings", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": reader},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": reader},
        "subjects": [{"kind": "ServiceAccount", "name": "scraper", "namespace": namespace}]})
    scraper = service_account_token(admin, namespace, "scraper")
    nobody = service_account_token(admin, namespace, "nobody")
    apiserver = ssl.create_default_context(cafile=str(control_plane.ca_file))

    proc = TesseraProcess(control_plane.kubeconfig, fast_lease_config(tmp_path, f"{namespace}-lease"), tmp_path)
    at = proc.args.index("--port")
    proc.args[at:at + 2] = ["--secure-port", "0"]
    proc.start()
    try:
        base = await _secure_url(proc)
        assert base.startswith("https://127.0.0.1:")
        assert await _get(f"{base}/healthz") == (200, "ok")
        assert (await _get(f"{base}/readyz"))[0] in (200, 500)  # always allowed: no 401/403 either way

        status, body = await _get(f"{base}/metrics", scraper)
        assert status == 200 and "scheduler_pending_pods" in body, body
        assert (await _get(f"{base}/configz", scraper))[0] == 403  # the role names /metrics only

        # the same Status bodies as the apiserver's own for the same identity and path
        for token in (nobody, "not-a-token"):
            ours = await _get(f"{base}/metrics", token)
            theirs = await _get(f"{control_plane.server}/metrics", token, apiserver)
            assert ours[0] == theirs[0] and json.loads(ours[1]) == json.loads(theirs[1]), (ours, theirs)
        status, body = await _get(f"{base}/metrics")
        expected: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                    "message": 'forbidden: User "system:anonymous" cannot get path "/metrics"',
                                    "reason": "Forbidden", "details": {}, "code": 403}
        assert (status, json.loads(body)) == (403, expected)
        assert json.loads((await _get(f"{base}/metrics", nobody))[1])["message"] == \
            f'forbidden: User "system:serviceaccount:{namespace}:nobody" cannot get path "/metrics"'
    finally:
        assert proc.terminate() == 0, proc.log()
        for kind in ("clusterrolebindings", "clusterroles"):
            admin.delete(f"{RBAC}/{kind}/{reader}")
