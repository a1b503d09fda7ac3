"""A loopback fault-injecting HTTPS proxy between Tessera and kube-apiserver.

Why a TLS-terminating HTTP proxy and not a plain TCP one: the faults that matter most for a
scheduler are HTTP-level — a Binding POST answered with 500 *after* the apiserver applied it (the
bind happened, the client must not believe otherwise), a watch answered with ``410 Gone`` — and
the apiserver only speaks TLS. So the proxy is a TLS server with its own throw-away CA (Tessera
gets a kubeconfig that trusts it) and a TLS client of the real apiserver (trusting the control
plane's CA). Credentials pass through untouched: Tessera uses a bearer-token kubeconfig and the
``Authorization`` header is forwarded with the rest of the request head, so the proxy never needs
a client certificate of its own.

HTTP/1.1 is parsed only as far as routing needs: request line and headers, ``Content-Length`` or
chunked bodies, keep-alive, and chunk-by-chunk relaying of responses so that watches (long chunked
responses) stream through without buffering. Each client connection gets its own upstream
connection, so keep-alive and connection cuts behave like the real thing (a cut drops exactly the
requests in flight on that connection).

Faults (:class:`Faults`) are probabilities per request, drawn from one seeded RNG, and can be
changed at any time with :meth:`FaultProxy.configure` (also from other threads: the configuration
is an immutable object swapped atomically). Every injected fault is counted by type
(:data:`FAULT_TYPES`), so a test or the soak can report exactly what it did.

:class:`FaultProxyThread` runs a proxy on its own event loop in a daemon thread: scenario code
calls blocking helpers (``LocalControlPlane.restart_apiserver``) and must not stall the proxy.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import random
import re
import socket
import ssl
import struct
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from urllib.parse import SplitResult, parse_qs, urlsplit

import orjson

from scheduler.kube.controlplane.certs import CertificateAuthority
from scheduler.kube.controlplane.kubeconfig import write_kubeconfig

__all__ = [
    "BIND_500_AFTER",
    "BIND_500_BEFORE",
    "BIND_HANG_AFTER",
    "BIND_HELD",
    "CUT_CONNECTION",
    "CUT_WATCH",
    "DELAY_REQUEST",
    "DELAY_RESPONSE",
    "DELETE_500_BEFORE",
    "FAULT_TYPES",
    "RESET",
    "STALL_WATCH",
    "WATCH_410_EVENT",
    "WATCH_410_STATUS",
    "NO_FAULTS",
    "FaultProxy",
    "FaultProxyThread",
    "Faults",
    "proxied",
]

DELAY_REQUEST = "delay_request"
DELAY_RESPONSE = "delay_response"
RESET = "reset"
BIND_500_BEFORE = "bind_500_before"
BIND_500_AFTER = "bind_500_after"
BIND_HANG_AFTER = "bind_hang_after"
BIND_HELD = "bind_held"
DELETE_500_BEFORE = "delete_500_before"
WATCH_410_STATUS = "watch_410_status"
WATCH_410_EVENT = "watch_410_event"
CUT_WATCH = "cut_watch"
CUT_CONNECTION = "cut_connection"
STALL_WATCH = "stall_watch"
FAULT_TYPES = (DELAY_REQUEST, DELAY_RESPONSE, RESET, BIND_500_BEFORE, BIND_500_AFTER, BIND_HANG_AFTER, BIND_HELD,
               DELETE_500_BEFORE, WATCH_410_STATUS, WATCH_410_EVENT, CUT_WATCH, CUT_CONNECTION, STALL_WATCH)
"""Every fault type the proxy counts (the keys of :attr:`FaultProxy.counts`)."""

_BINDING = re.compile(r"^/api/v1/namespaces/[^/]+/pods/[^/]+/binding/?$")
_POD = re.compile(r"^/api/v1/namespaces/[^/]+/pods/[^/]+/?$")
_HEAD_LIMIT = 1 << 20  # request/response heads; the apiserver's own limit is similar
_BODY_LIMIT = 64 << 20  # request bodies are buffered (they are small: objects, patches, bindings)
_PIECE = 64 << 10


_PROBABILITIES = ("delay_request", "delay_response", "reset", "bind_fail_before", "bind_fail_after",
                  "bind_hang_after", "watch_gone")


@dataclass(frozen=True)
class Faults:
    """What to inject. Probabilities are per request (per watch request for the watch faults).

    ``bind_fail_before`` answers a Binding POST with 500 without forwarding it (nothing happened);
    ``bind_fail_after`` forwards it, discards the apiserver's answer and sends 500 (the bind
    happened); ``bind_hang_after`` forwards it and then answers nothing, dropping the connection
    after ``hang_seconds`` (the client sees a timeout or a reset; the bind happened). The three
    are exclusive and tried in that order. ``watch_gone`` answers a watch with ``410 Gone`` — as
    an HTTP status or as an ERROR event in a 200 stream, half and half — instead of forwarding it.
    ``cut_every`` cuts connections every that many seconds (only those streaming a watch when
    ``cut_watches_only``). ``pod_deletes_before_failing`` (None: off) forwards that many pod
    DELETEs from the moment it is configured, then answers every further one with 500 without
    forwarding it: a replica whose evictions stop part-way. ``hold_bindings`` keeps every Binding
    POST in the proxy, not forwarded, until :meth:`FaultProxy.release_bindings`; then each is
    forwarded, whether or not its client still waits (a link that stopped passing client bytes
    and healed: the old leader's Bindings arrive after a new leader took over).
    """

    delay_request: float = 0.0
    delay_response: float = 0.0
    delay_seconds: tuple[float, float] = (0.05, 0.5)
    reset: float = 0.0
    bind_fail_before: float = 0.0
    bind_fail_after: float = 0.0
    bind_hang_after: float = 0.0
    hang_seconds: float = 5.0
    watch_gone: float = 0.0
    cut_every: float | None = None
    cut_watches_only: bool = True
    pod_deletes_before_failing: int | None = None
    hold_bindings: bool = False

    def __post_init__(self) -> None:
        for name in _PROBABILITIES:
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"Faults.{name}: a probability must be within 0..1, got {value}")
        low, high = self.delay_seconds
        if not 0 <= low <= high:
            raise ValueError(f"Faults.delay_seconds: need 0 <= low <= high, got {self.delay_seconds}")
        if self.cut_every is not None and self.cut_every <= 0:
            raise ValueError("Faults.cut_every: must be positive (or None)")
        if self.hang_seconds < 0:
            raise ValueError("Faults.hang_seconds: must be >= 0")
        if self.pod_deletes_before_failing is not None and self.pod_deletes_before_failing < 0:
            raise ValueError("Faults.pod_deletes_before_failing: must be >= 0 (or None)")

    @property
    def disrupts_watches(self) -> bool:
        """Whether these faults can leave a client's watch-fed view behind the apiserver's."""
        return bool(self.cut_every or self.watch_gone or self.reset)


NO_FAULTS = Faults()


class _Closed(Exception):
    """The peer closed the connection (cleanly or not) where we needed more bytes."""


class _Reader:
    """A byte buffer over a StreamReader, so that watching a client for EOF while relaying a
    response never loses bytes it might send meanwhile (they stay buffered for the next request)."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self._stream = stream
        self._buf = bytearray()

    async def fill(self) -> bool:
        data = await self._stream.read(_PIECE)
        if not data:
            return False
        self._buf += data
        return True

    @property
    def buffered(self) -> int:
        return len(self._buf)

    async def read_until(self, separator: bytes, limit: int = _HEAD_LIMIT) -> bytes:
        start = 0
        while True:
            end = self._buf.find(separator, start)
            if end >= 0:
                end += len(separator)
                data = bytes(self._buf[:end])
                del self._buf[:end]
                return data
            if len(self._buf) > limit:
                raise _Closed(f"head longer than {limit} bytes")
            start = max(0, len(self._buf) - len(separator) + 1)
            if not await self.fill():
                raise _Closed("connection closed" + (" mid-message" if self._buf else ""))

    async def read_exact(self, n: int) -> bytes:
        while len(self._buf) < n:
            if not await self.fill():
                raise _Closed("connection closed mid-body")
        data = bytes(self._buf[:n])
        del self._buf[:n]
        return data

    async def read_some(self, n: int) -> bytes:
        if not self._buf and not await self.fill():
            return b""
        data = bytes(self._buf[:n])
        del self._buf[:n]
        return data

    async def at_eof(self) -> bool:
        """True when nothing is buffered and the peer has closed (waits for either)."""
        return not self._buf and not await self.fill()


@dataclass
class _Message:
    head: bytes  # start line + headers + blank line, exactly as received
    start: str
    headers: dict[str, str]  # lower-cased names; repeated headers joined with ", "

    def header(self, name: str) -> str:
        return self.headers.get(name, "")

    @property
    def chunked(self) -> bool:
        return "chunked" in self.header("transfer-encoding").lower()

    @property
    def content_length(self) -> int | None:
        raw = self.header("content-length")
        if not raw:
            return None
        try:
            value = int(raw.split(",")[0].strip())
        except ValueError:
            raise _Closed(f"bad Content-Length {raw!r}") from None
        if value < 0:
            raise _Closed(f"bad Content-Length {raw!r}")
        return value

    def wants_close(self) -> bool:
        tokens = {t.strip().lower() for t in self.header("connection").split(",")}
        return "close" in tokens or self.start.endswith("HTTP/1.0")


async def _read_head(reader: _Reader) -> _Message:
    head = await reader.read_until(b"\r\n\r\n")
    lines = head[:-4].decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise _Closed(f"malformed header line {line!r}")
        key = name.strip().lower()
        headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
    return _Message(head, lines[0], headers)


async def _read_body(reader: _Reader, message: _Message) -> bytes:
    """A request body, buffered, framing included (it is forwarded byte for byte)."""
    if message.chunked:
        parts: list[bytes] = []
        total = 0
        while True:
            line = await reader.read_until(b"\r\n", 4096)
            parts.append(line)
            size = _chunk_size(line)
            if size == 0:
                while (trailer := await reader.read_until(b"\r\n", _HEAD_LIMIT)) != b"\r\n":
                    parts.append(trailer)
                parts.append(b"\r\n")
                return b"".join(parts)
            total += size
            if total > _BODY_LIMIT:
                raise _Closed("request body too large")
            parts.append(await reader.read_exact(size + 2))
    length = message.content_length or 0
    if length > _BODY_LIMIT:
        raise _Closed("request body too large")
    return await reader.read_exact(length)


def _chunk_size(line: bytes) -> int:
    try:
        return int(line.split(b";", 1)[0].strip(), 16)
    except ValueError:
        raise _Closed(f"bad chunk size line {line[:40]!r}") from None


def _status_body(code: int, reason: str, message: str) -> bytes:
    return orjson.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                         "message": message, "reason": reason, "code": code})


def _response(code: int, phrase: str, body: bytes, close: bool = False) -> bytes:
    head = (f"HTTP/1.1 {code} {phrase}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{'Connection: close' + chr(13) + chr(10) if close else ''}\r\n")
    return head.encode() + body


def _watch_gone_event() -> bytes:
    event = orjson.dumps({"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "fault proxy: too old resource version", "reason": "Expired", "code": 410}}) + b"\n"
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            + f"{len(event):x}\r\n".encode() + event + b"\r\n0\r\n\r\n")


def _rst(writer: asyncio.StreamWriter) -> None:
    """Abort with a TCP RST (SO_LINGER 0), not a FIN: what a crashed middlebox does."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class _Connection:
    """One client connection and its (lazily opened) upstream connection."""

    def __init__(self, ident: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.ident = ident
        self.client = _Reader(reader)
        self.client_writer = writer
        self.upstream: _Reader | None = None
        self.upstream_writer: asyncio.StreamWriter | None = None
        self.watching = False  # relaying a watch response right now
        self.stalled = False  # `stall_watches`: nothing more of the response reaches the client
        self.closed = False

    def abort(self, rst: bool = False) -> None:
        self.closed = True
        if rst:
            _rst(self.client_writer)
        else:
            self.client_writer.transport.abort()
        self.drop_upstream()

    def drop_upstream(self) -> None:
        if self.upstream_writer is not None:
            self.upstream_writer.transport.abort()
        self.upstream = self.upstream_writer = None


class FaultProxy:
    """The proxy on the current event loop: ``await start()``, point clients at :attr:`url`.

    ``upstream`` is the apiserver's https URL, ``upstream_ca`` the PEM (or a path to it) of the CA
    that signed its serving certificate. ``seed`` makes the sequence of fault decisions
    reproducible for a given sequence of requests.
    """

    def __init__(self, upstream: str, upstream_ca: bytes | str | Path, *, seed: int = 0,
                 faults: Faults = NO_FAULTS, host: str = "127.0.0.1", port: int = 0) -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "https" or not parts.hostname:
            raise ValueError(f"upstream must be an https:// URL, got {upstream!r}")
        self.upstream_host = parts.hostname
        self.upstream_port = parts.port or 443
        ca = upstream_ca if isinstance(upstream_ca, bytes) else Path(upstream_ca).read_bytes()
        self._client_context = ssl.create_default_context(cadata=ca.decode())
        self._client_context.set_alpn_protocols(["http/1.1"])
        self._ca = CertificateAuthority.generate("tessera-faultproxy-ca")
        self.host = host
        self.port = port
        self.faults = faults
        self.history: list[tuple[float, Faults]] = [(time.monotonic(), faults)]  # every configuration, when
        self.rng = random.Random(seed)
        self.requests = 0  # requests received
        self.forwarded = 0  # requests sent to the apiserver
        self.bindings_forwarded = 0
        self.pod_deletes_forwarded = 0  # since the last configure()
        self.bindings_held = 0  # Binding POSTs waiting in the proxy right now (`hold_bindings`)
        # requests other than watches between their arrival and the end of their answer (also
        # those of a client that has gone: a delayed request is still forwarded after a kill -9)
        self.requests_in_progress = 0
        self._release: asyncio.Event | None = None  # set by release_bindings(); made on the proxy's loop
        self.errors = 0  # connections ended by an unexpected exception (see last_error)
        self.last_error = ""
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()  # counts are read from other threads
        self._connections: dict[int, _Connection] = {}
        self._ids = itertools.count(1)
        self._server: asyncio.Server | None = None
        self._cutter: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # --- public ----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    @property
    def ca_pem(self) -> bytes:
        """The CA that signed the proxy's serving certificate (what clients must trust)."""
        return self._ca.cert_pem

    @property
    def counts(self) -> dict[str, int]:
        """Faults injected so far, per type (every type present, zero included)."""
        with self._lock:
            return {name: self._counts.get(name, 0) for name in FAULT_TYPES}

    @property
    def connections(self) -> int:
        return len(self._connections)

    def configure(self, faults: Faults | None = None, **changes: object) -> Faults:
        """Replace the fault configuration (a whole :class:`Faults`, and/or some of its fields).
        Safe from any thread: the new immutable object is swapped in with one assignment."""
        base = faults if faults is not None else self.faults
        updated = dataclasses.replace(base, **changes)  # type: ignore[arg-type]
        self.faults = updated
        self.pod_deletes_forwarded = 0
        self.history.append((time.monotonic(), updated))
        return updated

    def write_kubeconfig(self, path: Path, token: str) -> Path:
        """A kubeconfig that reaches the apiserver through this proxy with a bearer token."""
        return write_kubeconfig(path, server=self.url, ca_pem=self.ca_pem, user="tessera-via-faultproxy",
                                token=token, cluster="tessera-faultproxy")

    async def start(self) -> None:
        serving = self._ca.issue_serving("tessera-faultproxy", ips=("127.0.0.1",), dns_names=("localhost",))
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.set_alpn_protocols(["http/1.1"])
        with tempfile.TemporaryDirectory(prefix="faultproxy-") as directory:
            cert, key = serving.write(Path(directory), "serving")
            context.load_cert_chain(cert, key)
        self._server = await asyncio.start_server(self._serve, self.host, self.port, ssl=context,
                                                  limit=_HEAD_LIMIT, ssl_handshake_timeout=10)
        self.port = int(self._server.sockets[0].getsockname()[1])
        self._cutter = asyncio.create_task(self._cut_periodically(), name="faultproxy-cutter")

    async def close(self) -> None:
        if self._cutter is not None:
            self._cutter.cancel()
            await asyncio.gather(self._cutter, return_exceptions=True)
        if self._server is not None:
            self._server.close()
        for conn in list(self._connections.values()):
            conn.abort()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    async def __aenter__(self) -> FaultProxy:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    def release_bindings(self) -> int:
        """Forward every Binding POST held so far (`Faults.hold_bindings`); returns how many.
        Bindings that arrive later are held again while the fault is configured. Must run on the
        proxy's loop (see :meth:`FaultProxyThread.release_bindings` otherwise)."""
        held, release = self.bindings_held, self._release
        self._release = None
        if release is not None:
            release.set()
        return held

    def cut(self, watches_only: bool = False) -> int:
        """Cut connections now (only those relaying a watch when ``watches_only``); returns how
        many. Must run on the proxy's loop (see :meth:`FaultProxyThread.cut` otherwise)."""
        cut = 0
        for conn in list(self._connections.values()):
            if watches_only and not conn.watching:
                continue
            self._count(CUT_WATCH if conn.watching else CUT_CONNECTION)
            conn.abort()
            cut += 1
        return cut

    def stall_watches(self) -> int:
        """Stall every watch stream relayed now: the connection stays open, nothing more of its
        response reaches the client (the apiserver's bytes are held, unread), while other requests
        and later watches pass — a proxy holding watch responses. Returns how many. Must run on
        the proxy's loop (see :meth:`FaultProxyThread.stall_watches` otherwise)."""
        stalled = 0
        for conn in self._connections.values():
            if conn.watching and not conn.stalled:
                conn.stalled = True
                self._count(STALL_WATCH)
                stalled += 1
        return stalled

    # --- internals -------------------------------------------------------------------------

    def _count(self, fault: str) -> None:
        with self._lock:
            self._counts[fault] += 1

    def _roll(self, probability: float) -> bool:
        return probability > 0 and self.rng.random() < probability

    async def _cut_periodically(self) -> None:
        while True:
            every = self.faults.cut_every
            if every is None:
                await asyncio.sleep(0.2)
                continue
            await asyncio.sleep(every * self.rng.uniform(0.8, 1.2))
            current = self.faults
            if current.cut_every is not None:
                self.cut(watches_only=current.cut_watches_only)

    async def _delay(self, faults: Faults, probability: float, fault: str) -> None:
        if self._roll(probability):
            self._count(fault)
            await asyncio.sleep(self.rng.uniform(*faults.delay_seconds))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        conn = _Connection(next(self._ids), reader, writer)
        self._connections[conn.ident] = conn
        try:
            while not conn.closed:
                if not await self._one_request(conn):
                    break
        except (_Closed, ConnectionError, OSError, ssl.SSLError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the peer went away, or we cut it: the connection ends, nothing else
        except Exception as err:  # a malformed message or a proxy bug ends this connection only
            self.errors += 1
            self.last_error = repr(err)
        finally:
            self._connections.pop(conn.ident, None)
            self._tasks.discard(task)
            conn.abort()

    async def _connect_upstream(self, conn: _Connection) -> None:
        if conn.upstream is not None:
            return
        reader, writer = await asyncio.wait_for(asyncio.open_connection(
            self.upstream_host, self.upstream_port, ssl=self._client_context,
            server_hostname=self.upstream_host, limit=_HEAD_LIMIT), 10)
        conn.upstream, conn.upstream_writer = _Reader(reader), writer

    async def _one_request(self, conn: _Connection) -> bool:
        """Relay one request and its response; False when the connection must end."""
        try:
            request = await _read_head(conn.client)
        except _Closed:
            return False
        body = await _read_body(conn.client, request)
        self.requests += 1
        method, _, rest = request.start.partition(" ")
        target = rest.rpartition(" ")[0]
        url = urlsplit(target)
        query = parse_qs(url.query)
        watch = method == "GET" and (query.get("watch", [""])[0] in ("true", "1") or "/watch/" in url.path)
        binding = method == "POST" and bool(_BINDING.match(url.path))
        if watch:
            return await self._answer(conn, request, body, method, url, watch, binding)
        self.requests_in_progress += 1
        try:
            return await self._answer(conn, request, body, method, url, watch, binding)
        finally:
            self.requests_in_progress -= 1

    async def _answer(self, conn: _Connection, request: _Message, body: bytes, method: str, url: SplitResult,
                      watch: bool, binding: bool) -> bool:
        """Inject this request's faults, forward it and relay the answer; False when the
        connection must end."""
        faults = self.faults  # one consistent configuration for the whole request
        client = conn.client_writer

        if self._roll(faults.reset):
            self._count(RESET)
            conn.abort(rst=True)
            return False
        if watch and self._roll(faults.watch_gone):
            if self.rng.random() < 0.5:
                self._count(WATCH_410_STATUS)
                client.write(_response(410, "Gone", _status_body(
                    410, "Expired", "fault proxy: too old resource version")))
            else:
                self._count(WATCH_410_EVENT)
                client.write(_watch_gone_event())
            await client.drain()
            return not request.wants_close()
        if binding and self._roll(faults.bind_fail_before):
            self._count(BIND_500_BEFORE)
            client.write(_response(500, "Internal Server Error", _status_body(
                500, "InternalError", "fault proxy: injected error before forwarding")))
            await client.drain()
            return not request.wants_close()
        if binding and faults.hold_bindings:
            self._count(BIND_HELD)
            if self._release is None:
                self._release = asyncio.Event()
            release = self._release
            self.bindings_held += 1
            try:
                await release.wait()
            finally:
                self.bindings_held -= 1
        if method == "DELETE" and _POD.match(url.path) and faults.pod_deletes_before_failing is not None:
            if self.pod_deletes_forwarded >= faults.pod_deletes_before_failing:
                self._count(DELETE_500_BEFORE)
                client.write(_response(500, "Internal Server Error", _status_body(
                    500, "InternalError", "fault proxy: injected error before forwarding")))
                await client.drain()
                return not request.wants_close()
            self.pod_deletes_forwarded += 1
        after: str | None = None
        if binding:
            if self._roll(faults.bind_fail_after):
                after = BIND_500_AFTER
            elif self._roll(faults.bind_hang_after):
                after = BIND_HANG_AFTER
        await self._delay(faults, faults.delay_request, DELAY_REQUEST)

        try:
            await self._connect_upstream(conn)
        except (OSError, ssl.SSLError, asyncio.TimeoutError):
            return False  # apiserver down: drop the client, as a load balancer would
        assert conn.upstream is not None and conn.upstream_writer is not None
        conn.upstream_writer.write(request.head + body)
        await conn.upstream_writer.drain()
        self.forwarded += 1
        if binding:
            self.bindings_forwarded += 1

        if after is not None:
            response = await self._read_whole_response(conn.upstream, method)
            if response.wants_close():
                conn.drop_upstream()
            self._count(after)
            if after == BIND_500_AFTER:
                client.write(_response(500, "Internal Server Error", _status_body(
                    500, "InternalError", "fault proxy: injected error after forwarding")))
                await client.drain()
                return not request.wants_close()
            with contextlib.suppress(asyncio.TimeoutError):  # hang: no answer at all
                await asyncio.wait_for(conn.client.at_eof(), faults.hang_seconds)
            conn.abort()
            return False
        return await self._relay_response(conn, method, watch, faults) and not request.wants_close()

    async def _read_whole_response(self, upstream: _Reader, method: str) -> _Message:
        while True:  # skip interim 1xx answers
            response = await _read_head(upstream)
            if not _status(response).startswith("1"):
                break
        if _has_body(method, response):
            if response.chunked:
                await _read_body(upstream, response)
            elif response.content_length is not None:
                await upstream.read_exact(response.content_length)
            else:
                while await upstream.read_some(_PIECE):
                    pass
                response.headers["connection"] = "close"
        return response

    async def _relay_response(self, conn: _Connection, method: str, watch: bool, faults: Faults) -> bool:
        upstream = conn.upstream
        assert upstream is not None
        client = conn.client_writer
        while True:  # interim 1xx responses are relayed and followed by the real one
            response = await _read_head(upstream)
            code = _status(response)
            if not code.startswith("1") or code == "101":
                break
            client.write(response.head)
        await self._delay(faults, faults.delay_response, DELAY_RESPONSE)
        client.write(response.head)
        await client.drain()
        if not _has_body(method, response):
            return not response.wants_close()
        conn.watching = watch and code == "200"
        monitor = asyncio.create_task(conn.client.at_eof())
        relay = asyncio.create_task(self._relay_body(upstream, _Gated(conn), response))
        try:
            done, _ = await asyncio.wait({monitor, relay}, return_when=asyncio.FIRST_COMPLETED)
            if relay not in done:  # the client went away mid-response (or sent garbage)
                relay.cancel()
                await asyncio.gather(relay, return_exceptions=True)
                return False
            keep = relay.result()
        finally:  # also when this relay itself is cancelled (a cut): neither task outlives it
            conn.watching = False
            monitor.cancel()
            relay.cancel()
            await asyncio.gather(monitor, relay, return_exceptions=True)
        if not keep or response.wants_close():
            conn.drop_upstream()
            return False
        return True

    async def _relay_body(self, upstream: _Reader, client: _Gated, response: _Message) -> bool:
        """Copy one response body; False when it was delimited by the connection closing."""
        if response.chunked:
            while True:
                line = await upstream.read_until(b"\r\n", 4096)
                client.write(line)
                size = _chunk_size(line)
                if size == 0:
                    while (trailer := await upstream.read_until(b"\r\n")) != b"\r\n":
                        client.write(trailer)
                    client.write(b"\r\n")
                    await client.drain()
                    return True
                await _copy_exactly(upstream, client, size + 2, "chunk")  # the data and its CRLF
        length = response.content_length
        if length is not None:
            await _copy_exactly(upstream, client, length, "body")
            return True
        while piece := await upstream.read_some(_PIECE):
            client.write(piece)
            await client.drain()
        return False


class _Gated:
    """The client side of one response relay: writes pass until the connection is stalled
    (`FaultProxy.stall_watches`), then are held for good and `drain` never returns (the relay
    stops reading the apiserver)."""

    def __init__(self, conn: _Connection) -> None:
        self.conn = conn

    def write(self, data: bytes) -> None:
        if not self.conn.stalled:
            self.conn.client_writer.write(data)

    async def drain(self) -> None:
        if self.conn.stalled:
            await asyncio.Event().wait()
        await self.conn.client_writer.drain()


async def _copy_exactly(upstream: _Reader, client: _Gated, count: int, what: str) -> None:
    """Relay exactly `count` bytes; the upstream closing first is an error (a truncated `what`)."""
    while count:
        piece = await upstream.read_some(min(count, _PIECE))
        if not piece:
            raise _Closed(f"upstream closed mid-{what}")
        client.write(piece)
        count -= len(piece)
        await client.drain()


def _status(response: _Message) -> str:
    parts = response.start.split(" ")
    return parts[1] if len(parts) > 1 else ""


def _has_body(method: str, response: _Message) -> bool:
    code = _status(response)
    return not (method == "HEAD" or code.startswith("1") or code in ("204", "304"))


class FaultProxyThread:
    """A :class:`FaultProxy` on its own event loop in a daemon thread.

    Why: scenario code calls blocking helpers (starting/stopping the apiserver, creating fake
    nodes) and the proxy must keep relaying meanwhile. Use as a context manager or call
    :meth:`start` / :meth:`stop`. :meth:`configure` and :attr:`counts` are safe from any thread;
    :meth:`cut` is forwarded to the proxy's loop.
    """

    def __init__(self, upstream: str, upstream_ca: bytes | str | Path, *, seed: int = 0,
                 faults: Faults = NO_FAULTS) -> None:
        self.proxy = FaultProxy(upstream, upstream_ca, seed=seed, faults=faults)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        return self.proxy.url

    @property
    def counts(self) -> dict[str, int]:
        return self.proxy.counts

    @property
    def faults(self) -> Faults:
        return self.proxy.faults

    @property
    def requests_in_progress(self) -> int:
        return self.proxy.requests_in_progress

    @property
    def history(self) -> list[tuple[float, Faults]]:
        return self.proxy.history

    def configure(self, faults: Faults | None = None, **changes: object) -> Faults:
        return self.proxy.configure(faults, **changes)

    def write_kubeconfig(self, path: Path, token: str) -> Path:
        return self.proxy.write_kubeconfig(path, token)

    def cut(self, watches_only: bool = False, timeout: float = 5.0) -> int:
        loop = self._loop
        if loop is None:
            return 0

        async def _cut() -> int:
            return self.proxy.cut(watches_only)

        return asyncio.run_coroutine_threadsafe(_cut(), loop).result(timeout)

    def stall_watches(self, timeout: float = 5.0) -> int:
        loop = self._loop
        if loop is None:
            return 0

        async def _stall() -> int:
            return self.proxy.stall_watches()

        return asyncio.run_coroutine_threadsafe(_stall(), loop).result(timeout)

    def release_bindings(self, timeout: float = 5.0) -> int:
        loop = self._loop
        if loop is None:
            return 0

        async def _release() -> int:
            return self.proxy.release_bindings()

        return asyncio.run_coroutine_threadsafe(_release(), loop).result(timeout)

    def start(self, timeout: float = 15.0) -> FaultProxyThread:
        self._thread = threading.Thread(target=self._run, name="faultproxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise RuntimeError("fault proxy did not start")
        if self._error is not None:
            raise RuntimeError(f"fault proxy failed to start: {self._error!r}")
        return self

    def stop(self, timeout: float = 10.0) -> None:
        loop, stopped = self._loop, self._stopped
        if loop is not None and stopped is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stopped.set)
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def __enter__(self) -> FaultProxyThread:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stopped = asyncio.Event()
            try:
                await self.proxy.start()
            except BaseException as err:
                self._error = err
                self._ready.set()
                return
            self._ready.set()
            try:
                await self._stopped.wait()
            finally:
                await self.proxy.close()

        asyncio.run(main())


@contextlib.contextmanager
def proxied(upstream: str, upstream_ca: bytes | str | Path, *, seed: int = 0,
            faults: Faults = NO_FAULTS) -> Iterator[FaultProxyThread]:
    """``with proxied(plane.server, plane.ca_file) as proxy: ...`` — a started FaultProxyThread."""
    thread = FaultProxyThread(upstream, upstream_ca, seed=seed, faults=faults).start()
    try:
        yield thread
    finally:
        thread.stop()
