"""The apiserver client reads the proxy environment once, at connect time — not per request.

Why: kubernetes-asyncio opens its aiohttp session with `trust_env=True`, and aiohttp then looks
the proxy up for *every* request in a worker thread (`asyncio.to_thread(get_env_proxy_for_url)`,
which also stats ~/.netrc). At kube-scheduler's default client limits (qps 50) every Binding and
Event paid a thread hop and its futex wake-ups: `bench.live` measured Tessera at 2.9 ms of CPU per
pod against 1.3 ms with the limits raised, most of the difference in that hop (issue 13). The
proxy settings (HTTPS_PROXY / NO_PROXY, as client-go honours them) must still apply.
"""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest
from aiohttp import web

from scheduler.kube.http import KubeHttp, connect
from tests.helpers import write_kubeconfig


def _kubeconfig(path: Path, server: str) -> str:
    return str(write_kubeconfig(path, server))


@pytest.fixture
def no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy",
                 "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


async def test_proxy_from_the_environment_is_kept(tmp_path: Path, no_proxy_env: pytest.MonkeyPatch) -> None:
    no_proxy_env.setenv("HTTPS_PROXY", "http://user:secret@proxy.invalid:3128")
    api = await connect(_kubeconfig(tmp_path / "kc", "https://apiserver.invalid:6443"))
    async with api:
        assert api.rest_client.proxy == "http://proxy.invalid:3128"
        assert api.rest_client.proxy_headers["Proxy-Authorization"].startswith("Basic ")
        assert api.rest_client.pool_manager.trust_env is False


async def test_the_session_keeps_kubernetes_asyncios_connector(tmp_path: Path, no_proxy_env: pytest.MonkeyPatch) -> None:
    """The TLS settings (CA, client certificate, skip-verify) live in the library's connector: the
    replacement session must use that very connector, not a default one that verifies by default."""
    path = write_kubeconfig(tmp_path / "kc", "https://apiserver.invalid:6443", skip_tls_verify=True)
    api = await connect(str(path))
    async with api:
        connector = api.rest_client.pool_manager.connector
        assert connector is not None and not connector.closed
        context = connector._ssl  # type: ignore[attr-defined]
        assert isinstance(context, ssl.SSLContext) and context.verify_mode == ssl.CERT_NONE


async def test_no_proxy_is_honoured(tmp_path: Path, no_proxy_env: pytest.MonkeyPatch) -> None:
    no_proxy_env.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    no_proxy_env.setenv("NO_PROXY", "apiserver.invalid")
    api = await connect(_kubeconfig(tmp_path / "kc", "https://apiserver.invalid:6443"))
    async with api:
        assert api.rest_client.proxy is None


async def test_requests_take_no_thread_hop(tmp_path: Path, no_proxy_env: pytest.MonkeyPatch) -> None:
    async def version(request: web.Request) -> web.Response:
        return web.json_response({"gitVersion": "v0.0.0", "auth": request.headers.get("Authorization")})

    app = web.Application()
    app.router.add_get("/version", version)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        api = await connect(_kubeconfig(tmp_path / "kc", f"http://127.0.0.1:{port}"))
        async with api:
            http = KubeHttp(api)
            for _ in range(5):
                response = await http.request("GET", "/version", limited=False)
                assert response.status == 200
                assert response.json()["auth"] == "Bearer abc"
            # aiohttp's per-request proxy lookup runs in the loop's default executor; none was made
            assert asyncio.get_running_loop()._default_executor is None  # type: ignore[attr-defined]
    finally:
        await runner.cleanup()
