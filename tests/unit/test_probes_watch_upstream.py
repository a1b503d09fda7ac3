"""Review of the probe/metrics endpoint (scheduler/kube/serving.py, run_cli.py) and the informers'
list+watch loop (scheduler/kube/informers.py) against kube-scheduler v1.36.3, k8s.io/apiserver
v0.36.3 pkg/server/healthz/healthz.go and k8s.io/client-go v0.36.3 tools/cache/reflector.go +
tools/pager/pager.go. Each test failed before its fix (a review found them), for the reason its docstring gives."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import resource
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import aiohttp
import orjson
import pytest

from scheduler.kube import informers
from scheduler.kube.http import KubeHttp, Response
from scheduler.kube.informers import PODS, Denials, Informer, _HttpError
from scheduler.kube.metrics import Metrics
from scheduler.kube import run_cli
from scheduler.kube.apiserver_wait import ApiserverWait
from scheduler.kube.run_cli import _healthz_checks, _readyz_checks
from scheduler.kube.serving import PING, serve
from tests.unit.test_informer_relist import (GONE, FakeStream, event, fast_backoff, make, page,  # noqa: F401
                                             pod, run_until)

REPO = Path(__file__).resolve().parents[2]


# --- probes and metrics ----------------------------------------------------------------------


async def _get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session:
        async with session.get(url) as response:
            return response.status, await response.text()


async def test_verbose_probes_list_their_checks_and_say_check_passed() -> None:
    """Upstream: k8s.io/apiserver pkg/server/healthz/healthz.go `handleRootHealth` (what
    kube-scheduler's newEndpointsHandler installs for /healthz, /livez and /readyz) answers
    `?verbose` with one `[+]<check> ok` line per check and a last line `<name> check passed`
    (name = the path without its slash); only without `verbose` is the body a bare `ok`.
    Tessera ignores the query: `/healthz?verbose` is `ok`, so `curl .../readyz?verbose` (the
    documented way to see which check holds a component back) tells nothing."""
    loop = cast(Any, SimpleNamespace(healthy=True, stopping=False, fence_error=None,
                                     informers=SimpleNamespace(synced=True, denied=None)))
    waiting = ApiserverWait()
    async with serve("127.0.0.1", 0, healthz=_healthz_checks(loop, waiting), readyz=_readyz_checks(loop, waiting),
                     registry=Metrics().registry) as server:
        for name in ("healthz", "livez", "readyz"):
            status, text = await _get(f"{server.url}/{name}?verbose")
            assert status == 200
            lines = text.rstrip("\n").split("\n")
            assert lines[-1] == f"{name} check passed", f"/{name}?verbose answered {text!r}"
            assert len(lines) >= 2 and all(line.startswith("[+]") and line.endswith(" ok") for line in lines[:-1])
            assert (await _get(f"{server.url}/{name}"))[1] == "ok"  # without verbose: unchanged


async def test_readyz_does_not_hand_the_apiservers_error_text_to_anonymous_clients() -> None:
    """Upstream: healthz.go `handleRootHealth` writes `[-]<check> failed: reason withheld` for a
    failing check — "don't include the error since this endpoint is public" — and keeps the detail
    for the log. Tessera's /readyz (unauthenticated; the Deployment binds 0.0.0.0) answers with
    run_cli._ready's reason, which for a 401/403 is `Denials.reason` = the apiserver's own Status
    message verbatim: it tells any pod that can reach the port the scheduler's service-account
    identity and namespace (serving.py's docstring promises "our own short sentence")."""
    denials = Denials()
    identity = "system:serviceaccount:gpu-system:tessera-scheduler"
    denials.refused("Node", _HttpError(403, f'nodes is forbidden: User "{identity}" cannot list resource "nodes" '
                                            'in API group "" at the cluster scope'))
    loop = cast(Any, SimpleNamespace(healthy=True, stopping=False, fence_error=None,
                                     informers=SimpleNamespace(synced=False, denied=denials.reason)))
    waiting = ApiserverWait()
    async with serve("127.0.0.1", 0, healthz=_healthz_checks(loop, waiting), readyz=_readyz_checks(loop, waiting),
                     registry=Metrics().registry) as server:
        status, text = await _get(f"{server.url}/readyz")
    assert status >= 500
    assert "serviceaccount" not in text and "gpu-system" not in text, f"/readyz answered {text!r}"


async def test_a_malformed_request_does_not_log_a_traceback(caplog: pytest.LogCaptureFixture) -> None:
    """Upstream: kube-scheduler serves through Go net/http (`conn.serve`): a request it cannot
    parse (a 20 KB URL is fine up to MaxHeaderBytes 1 MiB; a bad header line, an unknown HTTP
    version) gets a fixed `400 Bad Request` and nothing is logged. Tessera's aiohttp server logs
    each one as `Error handling request` at ERROR with a full traceback on the stdlib logger
    `aiohttp.server` — which `configure_logging` never routes into structlog, so it reaches stderr
    as raw multi-line text in the middle of the JSON log stream. Anyone who can reach the port
    writes ~1 KB of non-JSON error log per request, as fast as they like."""
    requests = [b"GET /healthz?" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",  # a very long URL
                b"GET /healthz HTTP/1.1\r\nHost: x\r\nnot a header line\r\n\r\n",
                b"GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n"]
    caplog.set_level(logging.DEBUG, logger="aiohttp")
    async with serve("127.0.0.1", 0, healthz=[PING], readyz=[PING], registry=Metrics().registry) as server:
        for request in requests:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(request)
            await writer.drain()
            answer = await asyncio.wait_for(reader.read(), 5)
            writer.close()
            assert answer.split(b" ", 2)[1].startswith(b"4"), answer[:80]  # refused, as it should be
        await asyncio.sleep(0.05)
    logged = [(r.name, r.levelname, r.getMessage()) for r in caplog.records
              if r.name.startswith("aiohttp") and (r.levelno >= logging.WARNING or r.exc_info)]
    assert not logged, f"{len(logged)} error lines (with tracebacks) for {len(requests)} bad requests: {logged[:1]}"


_CHILD = textwrap.dedent("""
    import asyncio, resource, sys
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[2]), hard))
    import uvloop
    from prometheus_client import CollectorRegistry
    from scheduler.kube.serving import PING, serve
    from scheduler.open_files import raise_open_files_limit
    raise_open_files_limit()  # what `tessera run` does first (test_run_raises_the_open_files_limit_first)

    async def main():
        async with serve("127.0.0.1", 0, healthz=[PING], readyz=[PING], registry=CollectorRegistry()) as server:
            print("PORT", server.port, flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
            try:  # what the scheduler does all the time: a new connection to its apiserver
                _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", int(sys.argv[1])), 5)
                writer.close()
                print("RESULT connected", flush=True)
            except OSError as err:
                print("RESULT failed:", err, flush=True)

    uvloop.run(main())
""")


def test_idle_probe_connections_cannot_use_up_the_schedulers_file_descriptors(tmp_path: Path) -> None:
    """Upstream: kube-scheduler is a Go binary, and Go's runtime raises RLIMIT_NOFILE's soft limit
    to the hard limit at start (os package, Go >= 1.19), so its net/http server (no connection cap
    either; ReadHeaderTimeout 32 s) can hold hundreds of thousands of sockets. Tessera neither caps
    the connections its aiohttp server accepts nor raises the soft limit, which a container often
    inherits as 1024 (containerd 2.x: 1024 soft / 524288 hard). Any pod that reaches the probe
    port (bound 0.0.0.0 in the Deployment) and opens ~1000 idle connections — each held 30 s, then
    reopened — leaves the process with no descriptor for its own apiserver connections (watches,
    Bindings, the Lease renewal: leadership lost). Here: the probe server under uvloop, as in
    `tessera run`, with a 1024 soft limit; 1100 idle connections; then one outgoing connection."""
    soft = 1024
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 1300:
        pytest.skip(f"needs a hard RLIMIT_NOFILE >= 1300 for the test's own sockets (have {hard})")
    apiserver = socket.create_server(("127.0.0.1", 0), backlog=16)
    errors = (tmp_path / "child.err").open("w")
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(apiserver.getsockname()[1]), str(soft)],
                             cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, text=True,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
    assert child.stdin is not None and child.stdout is not None

    def answer(prefix: str) -> str:
        assert child.stdout is not None
        while line := child.stdout.readline():
            if line.startswith(prefix):
                return line[len(prefix):].strip()
        raise AssertionError(f"the child ended without {prefix!r}: {(tmp_path / 'child.err').read_text()[-2000:]}")

    held: list[socket.socket] = []
    try:
        port = int(answer("PORT "))
        refused = 0
        while len(held) < 1100 and refused < 3:
            try:
                held.append(socket.create_connection(("127.0.0.1", port), timeout=3))
                refused = 0
            except OSError:  # a full accept backlog (or a server that caps connections): try a little more
                refused += 1
        time.sleep(0.5)
        child.stdin.write("go\n")
        child.stdin.flush()
        result = answer("RESULT ")
    finally:
        for sock in held:
            sock.close()
        child.kill()
        child.wait(10)
        errors.close()
        apiserver.close()
    assert result == "connected", (f"with {len(held)} idle connections held to the probe port, the scheduler "
                                   f"could not open an apiserver connection: {result}")


def test_run_raises_the_open_files_limit_first(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`tessera run` raises the soft limit before anything else (even before reading its
    configuration), as Go's runtime does before kube-scheduler's main."""
    calls: list[str] = []

    def raise_open_files_limit() -> int:
        calls.append("raised")
        return 0

    monkeypatch.setattr(run_cli, "raise_open_files_limit", raise_open_files_limit)
    monkeypatch.setattr(run_cli, "load_config_or_report", lambda path: calls.append("config"))
    assert run_cli.run(SimpleNamespace(config=str(tmp_path / "missing.yaml"))) == 2  # type: ignore[arg-type]
    assert calls == ["raised", "config"]


# --- the informers' list+watch -------------------------------------------------------------


async def test_watch_timeouts_are_spread_between_min_watch_timeout_and_twice_that() -> None:
    """Upstream: client-go tools/cache/reflector.go `watch()` asks each watch for
    `timeoutSeconds = minWatchTimeout + rand*(maxWatchTimeout-minWatchTimeout)` with
    minWatchTimeout 5 min and maxWatchTimeout = 2x, "so that clients won't be synchronized":
    watchers started together (every node agent of a DaemonSet rollout, every informer after an
    apiserver restart) drift apart. Tessera asks for exactly `watch_timeout_seconds` (300) every
    time, on every informer and every node's agent: they all reconnect in lock-step, every 5 min,
    forever."""
    bookmark = {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "5"}}
    streams = [FakeStream(event("BOOKMARK", bookmark), end="eof") for _ in range(25)]
    informer, http, _ = make([page([], "5")], streams)
    await run_until(informer, lambda: len(http.watch_calls) >= 25)
    timeouts = [int(q["timeoutSeconds"]) for _, q, _ in http.watch_calls]
    assert all(300 <= t <= 600 for t in timeouts), timeouts
    assert len(set(timeouts)) > 1, f"every watch asked for timeoutSeconds={timeouts[0]}"


class _ExpiringContinueHttp:
    """A cluster whose LIST takes longer than etcd keeps a continue token: every `continue`
    is answered 410 Expired ("The provided continue parameter is too old ..."); a LIST without
    `limit` (one page) is served."""

    def __init__(self) -> None:
        self.calls: list[dict[str, str]] = []

    async def request(self, method: str, path: str, *, query: Sequence[tuple[str, str]] = (), **_: Any) -> Response:
        await asyncio.sleep(0)
        q = dict(query)
        self.calls.append(q)
        if "continue" in q:
            return Response(410, orjson.dumps({**GONE, "message": "The provided continue parameter is too old to "
                                                                  "display a consistent list result."}))
        if "limit" in q:
            return page([pod("a", "1"), pod("b", "2")], "9", cont="tok")
        return page([pod("a", "1"), pod("b", "2"), pod("c", "3")], "9")

    @asynccontextmanager
    async def stream(self, path: str, query: Sequence[tuple[str, str]], read_timeout: float) -> AsyncIterator[FakeStream]:
        yield FakeStream()  # silent


async def test_an_expired_continue_token_falls_back_to_a_full_list() -> None:
    """Upstream: client-go tools/pager/pager.go `ListPager.list` (FullListIfExpired, true in
    `pager.New`, which reflector.go `list()` uses): an Expired error on page 2 or later is answered
    by one full LIST (Limit=0, no continue) at the requested resourceVersion, so a list that
    outlives the continue token still completes. Tessera's `Informer._list` turns the 410 into
    `_Expired` and starts the same paginated LIST again from page 1, after a backoff: when pages
    take longer than the token lives (a big cluster, a slow apiserver), every attempt expires the
    same way and the informer never syncs — the scheduler stays unready for good."""
    http = _ExpiringContinueHttp()
    informer = Informer(cast(KubeHttp, http), PODS, lambda t, o: None, page_size=2)
    with contextlib.suppress(TimeoutError):  # it had its chance; did it get there?
        await run_until(informer, lambda: informer.synced.is_set(), timeout=2.0)
    requests = [("limit" in q, "continue" in q) for q in http.calls]
    assert informer.synced.is_set(), (f"never synced after {len(http.calls)} LIST requests, none without a limit: "
                                      f"{requests[:6]}...")
    assert sorted(informer._store) == ["ns/a", "ns/b", "ns/c"]
    assert (False, False) in requests  # the full-list fallback


class _ChurningHttp:
    """Every LIST succeeds; every watch delivers one event and then `ERROR 410` (history compacted
    faster than the watch can follow: a cluster under heavy churn, a small watch cache)."""

    def __init__(self) -> None:
        self.lists = 0
        self.rv = 10

    async def request(self, method: str, path: str, *, query: Sequence[tuple[str, str]] = (), **_: Any) -> Response:
        await asyncio.sleep(0)
        self.lists += 1
        self.rv += 1
        return page([pod("a", str(self.rv))], str(self.rv))

    @asynccontextmanager
    async def stream(self, path: str, query: Sequence[tuple[str, str]], read_timeout: float) -> AsyncIterator[FakeStream]:
        self.rv += 1
        yield FakeStream(event("MODIFIED", {"kind": "Pod", "apiVersion": "v1", **pod("a", str(self.rv))})
                         + event("ERROR", GONE), end="eof")


async def test_repeated_410s_after_watch_data_do_not_relist_in_a_hot_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Upstream: client-go reflector.go runs ListAndWatch under `wait.BackoffUntil` with the
    reflector's backoff (defaultBackoffInit 800 ms, factor 2, cap 30 s, reset only after 2 min
    without one): after a watch ends in Expired, `watch()` returns and the next LIST comes only
    after that delay, growing while it keeps happening. Tessera's `Informer.run` relists *at once*
    whenever the watch before the 410 had delivered an event (`_watched_since_list`), and the first
    event of every watch also resets `_failures`: a watch that keeps delivering one event and then
    410 drives back-to-back full LISTs (every pod in the cluster, each time) as fast as the
    apiserver answers them — hundreds per second here, with the informer's real backoff."""
    monkeypatch.setattr(informers, "BACKOFF_INITIAL", 0.5)  # the shipped values, not the tests' fast ones
    monkeypatch.setattr(informers, "BACKOFF_MAX", 30.0)
    http = _ChurningHttp()
    informer = Informer(cast(KubeHttp, http), PODS, lambda t, o: None)
    task = asyncio.create_task(informer.run())
    await asyncio.sleep(1.0)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    # upstream: the first LIST, then one every >= 0.8 s (growing); allow some slack for a first immediate relist
    assert http.lists <= 5, f"{http.lists} full LISTs in one second ({informer.stats.relists} relists)"
