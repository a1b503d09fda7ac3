"""Raw JSON access to the apiserver, on kubernetes-asyncio's authenticated connection.

Why not the generated typed client: the scheduler reads every Pod and Node in the cluster and the
core wants the apiserver's JSON as-is (that is also what `simulate` replays). Deserialising into
generated models and back would cost more than the scheduling itself, and the Binding call's typed
response cannot even be decoded (kubernetes-client/python#825). kubernetes-asyncio still does what
it is good at: kubeconfig / in-cluster loading, TLS, tokens and their refresh.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import anyio
import orjson
import yaml
from aiohttp.helpers import get_env_proxy_for_url
from multidict import CIMultiDict
from yarl import URL

from scheduler import __version__
from scheduler.core.selectors import go_int64
from scheduler.kube.lean_client import import_connection_parts

import_connection_parts()  # before the library's first import: its generated client stays unimported
from kubernetes_asyncio import client, config

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
# what a request that never got an answer raises: the write may or may not have landed
TRANSPORT_ERRORS = (aiohttp.ClientError, TimeoutError, OSError)  # ConnectionError is an OSError
# uvloop's sock_connect when a socket number is reused before the transport that held it is gone
# (MagicStack/uvloop#653, open; aiohappyeyeballs re-raises it): a connect that failed
_FD_IN_USE = re.compile(r"File descriptor \d+ is used by transport")


@asynccontextmanager
async def _connecting() -> AsyncIterator[None]:
    """uvloop's "File descriptor N is used by transport" RuntimeError, raised while connecting
    through a path that resets connections, as the failed connect it is (a
    `ClientConnectionError`, one of `TRANSPORT_ERRORS`): it used to escape every caller's transport
    handling, and ended the process from the status writer's task group. Any other RuntimeError
    is a bug, not the network's: it goes on as it is."""
    try:
        yield
    except RuntimeError as err:
        if _FD_IN_USE.search(str(err)) is None:
            raise
        raise aiohttp.ClientConnectionError(f"connection failed: {err}") from err


class RateLimiter:
    """client-go's token bucket (`flowcontrol.NewTokenBucketRateLimiter(qps, burst)`).

    Like golang.org/x/time/rate, a caller reserves its token first (the bucket may go negative)
    and then waits for it, so time spent elsewhere is never lost from the rate.
    """

    def __init__(self, qps: float, burst: int, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = anyio.sleep) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(self.burst)
        self._last = clock()

    async def acquire(self) -> None:
        if self.qps <= 0:
            return
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1
        if self._tokens < 0:
            await self._sleep(-self._tokens / self.qps)


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body) if self.body else None

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def message(self) -> str:
        """The apiserver's Status message, or the raw body."""
        try:
            doc = self.json()
        except orjson.JSONDecodeError:
            return self.body.decode(errors="replace")[:300]
        if isinstance(doc, dict) and isinstance(doc.get("message"), str):
            return str(doc["message"])
        return self.body.decode(errors="replace")[:300]


@dataclass(frozen=True, slots=True)
class _Answer:
    """One attempt's answer, with the headers the retry rule reads."""

    status: int
    body: bytes
    headers: Mapping[str, str]


USER_AGENT = "tessera"
AGENT_USER_AGENT = "tessera-agent"


class ConnectError(Exception):
    """A start-up problem with the kubeconfig or the apiserver, worded as one line for the user."""


class Unreachable(ConnectError):
    """No answer from the apiserver at all (refused, reset, timed out, no route): `server` and
    `reason` apart, for a caller that waits and says so per attempt (`scheduler/kube/apiserver_wait.py`)."""

    def __init__(self, server: str | None, source: str, reason: str) -> None:
        self.server = str(server)
        self.reason = reason
        super().__init__(f"cannot reach the apiserver at {server}{source}: {reason}")


class KubeconfigError(ConnectError):
    """The kubeconfig itself is missing or unusable (the CLIs exit 2 for it, as for bad arguments)."""


class ContextNotFound(KubeconfigError):
    """The context to use (`--context`, else the current-context) is not defined in the kubeconfig.

    `upstream` is client-go's wording (tools/clientcmd validation.go `errContextNotFound`), which
    the kubectl plugin prints as kubectl does; the message names the file for the other commands,
    whose lines all do."""

    def __init__(self, kubeconfig: str, context: str) -> None:
        self.upstream = f"context was not found for specified context: {context}"
        super().__init__(f"kubeconfig {kubeconfig}: {self.upstream}")


def kubeconfig_path(flag: str | None, configured: str | None = None,
                    environ: Mapping[str, str] = os.environ, home: Path | None = None) -> str | None:
    """Which kubeconfig every Tessera command uses: --kubeconfig, else the configuration's
    (`clientConnection.kubeconfig`, for `tessera run`), else $KUBECONFIG (what `tessera
    dev-cluster` tells you to export), else ~/.kube/config when it exists (as kubectl), else
    None: the in-cluster service account."""
    chosen = flag or configured or environ.get("KUBECONFIG")
    if chosen:
        return chosen
    default = (home or Path.home()) / ".kube" / "config"
    return str(default) if default.is_file() else None


@dataclass(frozen=True, slots=True)
class Impersonation:
    """Whom to act as (kubectl's --as, --as-group, --as-uid): the apiserver authorizes each
    request as that identity, once the caller's own may `impersonate` it."""

    user: str
    groups: tuple[str, ...] = ()
    uid: str = ""

    def headers(self) -> list[tuple[str, str]]:
        """The headers kubectl sends (client-go transport's impersonating round tripper): one
        Impersonate-Group per group, as the apiserver reads them (a joined value is one group)."""
        return [("Impersonate-User", self.user), *(("Impersonate-Group", group) for group in self.groups),
                *((("Impersonate-Uid", self.uid),) if self.uid else ())]


async def connect(kubeconfig: str | None, *, user_agent: str = USER_AGENT,
                  context: str | None = None, impersonate: Impersonation | None = None) -> client.ApiClient:
    """An authenticated ApiClient from a kubeconfig file, or the in-cluster service account.

    Every request carries ``User-Agent: <user_agent>/<version>``: the apiserver names the field
    manager of each write after it (``metadata.managedFields``, e.g. who wrote a status), and audit
    logs show it; the library's default would be ``OpenAPI-Generator``. Kubeconfig problems raise
    `KubeconfigError` with one readable line: the loader's own errors are cryptic (an empty file
    gives "'NoneType' object does not support item assignment") or come with a stray log line.
    `context` picks a kubeconfig context other than the current one (`kubectl --context`);
    `impersonate` has every request act as another identity (`kubectl --as`).
    """
    if kubeconfig:
        context = _check_kubeconfig(kubeconfig, context)
        loader_log = logging.getLogger("kubernetes_asyncio.config.kube_config")
        quiet, loader_log.disabled = loader_log.disabled, True  # it logs what it then raises: said once, below
        try:
            api = await config.new_client_from_config(config_file=kubeconfig, context=context)
        except Exception as err:  # the loader raises many types; all mean an unusable file
            raise KubeconfigError(f"kubeconfig {kubeconfig} is not usable: {_first_line(err)}") from None
        finally:
            loader_log.disabled = quiet
    else:
        try:
            config.load_incluster_config()  # type: ignore[no-untyped-call]
        except config.ConfigException as err:
            raise KubeconfigError(f"no kubeconfig given (--kubeconfig, $KUBECONFIG, ~/.kube/config) and no in-cluster "
                                  f"service account ({_first_line(err)}); pass --kubeconfig FILE") from None
        api = client.ApiClient()
    api.user_agent = f"{user_agent}/{__version__}"
    _read_proxy_environment_once(api, impersonate.headers() if impersonate is not None else ())
    return api


def _read_proxy_environment_once(api: client.ApiClient, headers: Sequence[tuple[str, str]] = ()) -> None:
    """Resolve HTTPS_PROXY/NO_PROXY for the apiserver once and stop aiohttp from doing it per request.

    kubernetes-asyncio opens its session with ``trust_env=True``, so aiohttp looks the proxy up for
    every request in a worker thread (``asyncio.to_thread(get_env_proxy_for_url)``, a ~/.netrc stat
    included). At the default client limits each Binding and Event paid that thread hop and its
    wake-ups (issue 13). The environment does not change under a running process, so the answer for
    the one server we talk to is fixed at connect time and given to the client explicitly.
    `headers` go on every request (the session's: a header given more than once is sent so).
    """
    rest = api.rest_client
    if rest.proxy is None:
        try:
            proxy, auth = get_env_proxy_for_url(URL(api.configuration.host))
        except LookupError:  # no proxy for this server (none set, or NO_PROXY matches)
            pass
        else:
            rest.proxy = str(proxy)
            if auth is not None:
                # aiohttp sends proxy_headers on the CONNECT of an https target; a plain-http target
                # goes through the proxy as an ordinary request and needs the header on it
                rest.proxy_headers = {**(rest.proxy_headers or {}), "Proxy-Authorization": auth.encode()}
                if URL(api.configuration.host).scheme == "http":
                    api.set_default_header("Proxy-Authorization", auth.encode())
    old = rest.pool_manager
    rest.pool_manager = aiohttp.ClientSession(connector=old.connector, trust_env=False, headers=CIMultiDict(headers),
                                              read_bufsize=2**21)  # kubernetes-asyncio's own buffer size
    old.detach()  # the connector (TLS context, pool) now belongs to the new session


def read_kubeconfigs(kubeconfig: str) -> list[dict[str, Any]]:
    """The files of ``kubeconfig`` (several joined by ``:``, as ``$KUBECONFIG``), in order, each a
    readable, non-empty YAML mapping, or `KubeconfigError` saying which file is wrong and how.
    Files that do not exist are skipped, as client-go skips them, unless none exists."""
    paths = [os.path.expanduser(p) for p in kubeconfig.split(os.pathsep) if p]
    existing = [p for p in paths if os.path.exists(p)]
    if not existing:
        raise KubeconfigError(f"cannot read kubeconfig {kubeconfig}: no such file")
    docs: list[dict[str, Any]] = []
    for path in existing:
        try:
            with open(path, encoding="utf-8") as stream:
                doc = yaml.safe_load(stream)
        except OSError as err:
            raise KubeconfigError(f"cannot read kubeconfig {path}: {(err.strerror or str(err)).lower()}") from None
        except UnicodeDecodeError:
            raise KubeconfigError(f"kubeconfig {path} is not a text file") from None
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            problem = getattr(err, "problem", None) or "cannot be parsed"
            raise KubeconfigError(f"kubeconfig {path} is not valid YAML: {problem}{where}") from None
        if doc is None:
            raise KubeconfigError(f"kubeconfig {path} is empty")
        if not isinstance(doc, dict):
            raise KubeconfigError(f"kubeconfig {path} is not a kubeconfig (expected a mapping with clusters, "
                                  "users, contexts and current-context)")
        docs.append(doc)
    return docs


def first_current_context(docs: Sequence[Mapping[str, Any]]) -> str | None:
    """The current-context kubectl uses: the first file's that sets one (client-go's loading
    rules; kubernetes-asyncio's merger would take the last file's)."""
    return next((named for doc in docs if isinstance(named := doc.get("current-context"), str) and named), None)


def named_contexts(docs: Sequence[Mapping[str, Any]]) -> dict[str, object] | None:
    """Each context's name and body, merged as client-go merges several files (the first file
    that defines a name wins); None when a file's `contexts` is not a list, which the loader then
    refuses with its own reason."""
    contexts: dict[str, object] = {}
    for doc in docs:
        entries = doc.get("contexts")
        if entries is not None and not isinstance(entries, list):
            return None
        for entry in entries or ():
            if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                contexts.setdefault(entry["name"], entry.get("context"))
    return contexts


def _check_kubeconfig(kubeconfig: str, chosen: str | None) -> str:
    """`read_kubeconfigs`, and the context to use: `chosen`, else the current-context kubectl
    would use, which must exist and be defined (`ContextNotFound`, as client-go's ConfirmUsable;
    kubernetes-asyncio's loader words it "Invalid kube-config file. Expected object with name")."""
    docs = read_kubeconfigs(kubeconfig)
    context = chosen or first_current_context(docs)
    if context is None:
        raise KubeconfigError(f"kubeconfig {kubeconfig} has no current-context; choose one with "
                              f"`kubectl config use-context NAME --kubeconfig {kubeconfig}`")
    contexts = named_contexts(docs)
    if contexts is not None and context not in contexts:
        raise ContextNotFound(kubeconfig, context)
    return context


async def check_apiserver(http: KubeHttp, kubeconfig: str | None) -> Response:
    """GET /version once: the answer (any status), or `Unreachable` naming the server when it
    cannot be reached at all. A certificate the client cannot verify is a plain `ConnectError`
    instead (same words): the kubeconfig's CA or server name is wrong, and no retry mends that."""
    host = http.api.configuration.host
    source = f" (from {kubeconfig})" if kubeconfig else ""
    try:
        return await http.request("GET", "/version", timeout=10.0, limited=False)
    except TimeoutError:
        raise Unreachable(host, source, "no answer within 10 s") from None
    except aiohttp.ClientConnectorCertificateError as err:
        raise ConnectError(f"cannot reach the apiserver at {host}{source}: {_transport_reason(err)}") from None
    except (aiohttp.ClientError, OSError) as err:
        raise Unreachable(host, source, _transport_reason(err)) from None


def rejected(http: KubeHttp, response: Response) -> str:
    """What a 401/403 from the apiserver means for the user, in one line."""
    host = http.api.configuration.host
    if response.status == 401:
        return (f"the apiserver at {host} rejected our credentials (HTTP 401 Unauthorized): check the token "
                "or client certificate in the kubeconfig")
    return f"the apiserver at {host} denied access (HTTP {response.status}): {response.message()}"


def _transport_reason(err: BaseException) -> str:
    if isinstance(err, aiohttp.ClientConnectorCertificateError):
        # its os_error is the SSL error, whose errno 1 would read "operation not permitted"
        return _first_line(err.certificate_error)
    if isinstance(err, aiohttp.ClientConnectorError):
        os_error = err.os_error
        if os_error.errno and os_error.errno > 0:
            return os.strerror(os_error.errno).lower()  # "connection refused", not "Connect call failed (...)"
        return os_error.strerror or _first_line(os_error)
    return _first_line(err)


def _first_line(err: BaseException) -> str:
    """The error's first line, without a closing full stop (it is quoted inside our sentence)."""
    text = str(err).strip()
    return text.splitlines()[0].rstrip(".") if text else type(err).__name__


MAX_RETRIES = 10  # client-go rest.Request's maxRetries for answers carrying Retry-After


def retry_after(status: int, headers: Mapping[str, str]) -> float | None:
    """The seconds a 429 or 5xx answer asks the client to wait before sending again, or None when
    it asks nothing: client-go's `checkWait` (only an integer `Retry-After`, as `strconv.Atoi`
    reads it; an HTTP date is not a wait)."""
    if status != 429 and status < 500:
        return None
    seconds = go_int64(headers.get("Retry-After", ""))
    if seconds is None:
        return None
    return float(max(0, seconds))  # a negative wait is none (Go's Sleep returns at once)


# (code, method, host): told of every HTTP request sent, once per try, as client-go's
# RequestResult metric (`rest_client_requests_total`) is; code "<error>" when no answer came
RequestResult = Callable[[str, str, str], None]


class KubeHttp:
    def __init__(self, api: client.ApiClient, limiter: RateLimiter | None = None, *,
                 sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
                 clock: Callable[[], float] = time.monotonic, on_result: RequestResult | None = None) -> None:
        self.api = api
        self.limiter = limiter
        self._sleep = sleep
        self._clock = clock
        self.on_result = on_result
        # client-go's `host` label: the base URL's host[:port] ("none" without one)
        server = getattr(getattr(api, "configuration", None), "host", None)
        self.host = (urlsplit(server).netloc if isinstance(server, str) else "") or "none"

    def _told(self, code: str, method: str) -> None:
        self.tell_result(code, method, self.host)

    def tell_result(self, code: str, method: str, host: str) -> None:
        """Tell `on_result`, as it is now, of a request's result: also the `on_result` of another
        client that counts with this one (the loop's Event client)."""
        if self.on_result is not None:
            self.on_result(code, method, host)

    async def acquire(self) -> None:
        """Wait for a write token now (then send with `limited=False`): for a caller that must
        check something — its leadership — after the wait and right before the request."""
        if self.limiter is not None:
            await self.limiter.acquire()

    async def request(self, method: str, path: str, *, query: Sequence[tuple[str, str]] = (),
                      body: Any = None, content_type: str = "application/json",
                      timeout: float = 30.0, limited: bool = True,
                      resend: Callable[[], bool] | None = None) -> Response:
        """One request; transport errors raise `aiohttp.ClientError` / `TimeoutError`.

        An answer of 429 or 5xx with an integer `Retry-After` (the apiserver's priority and fairness,
        its max-in-flight limit) is sent again after that many seconds, up to `MAX_RETRIES` times,
        as client-go's REST client does for every request kube-scheduler makes. Each resend of a
        throttled request takes a write token first (`limited`, or a caller that took one itself and
        passes `resend`), and then asks `resend`: a write that belongs to a leadership term is not
        sent again once the term is over. No wait runs past `timeout` from the first send: the
        caller gets the last answer instead."""
        if limited and self.limiter is not None:
            await self.limiter.acquire()
        deadline = self._clock() + timeout
        retries = 0
        while True:
            response = await self._send(method, path, query, body, content_type, max(0.001, deadline - self._clock()))
            wait = retry_after(response.status, response.headers)
            if wait is None or retries >= MAX_RETRIES or self._clock() + wait >= deadline:
                return Response(response.status, response.body)
            await self._sleep(wait)
            retries += 1
            if self.limiter is not None and (limited or resend is not None):
                await self.limiter.acquire()
            if resend is not None and not resend():
                return Response(response.status, response.body)

    async def _send(self, method: str, path: str, query: Sequence[tuple[str, str]], body: Any,
                    content_type: str, timeout: float) -> _Answer:
        try:
            async with _connecting():
                response = await self.api.call_api(
                    path, method, query_params=list(query), header_params={"Content-Type": content_type,
                                                                           "Accept": "application/json"},
                    body=body, auth_settings=["BearerToken"], _preload_content=False,
                    _request_timeout=timeout)
        except BaseException:
            self._told("<error>", method)
            raise
        self._told(str(response.status), method)
        try:
            data = await response.read()
        finally:
            response.release()
        return _Answer(response.status, data, response.headers)

    @asynccontextmanager
    async def stream(self, path: str, query: Sequence[tuple[str, str]], read_timeout: float) -> AsyncIterator[aiohttp.ClientResponse]:
        """A long-running GET (watch); the caller reads lines. Dead connections time out on read."""
        try:
            async with _connecting():
                response = await self.api.call_api(
                    path, "GET", query_params=list(query), header_params={"Accept": "application/json"},
                    auth_settings=["BearerToken"], _preload_content=False,
                    _request_timeout=aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=read_timeout))
        except BaseException:
            self._told("<error>", "GET")
            raise
        self._told(str(response.status), "GET")
        try:
            yield response
        finally:
            response.release()
