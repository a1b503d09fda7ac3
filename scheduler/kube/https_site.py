"""The HTTPS site of `tessera run --secure-port` (scheduler/kube/serving.py): aiohttp's TCPSite with
TLS, except that a plain-HTTP request is answered as Go's net/http answers it.

Why: kube-scheduler's secure port answers `http://` with `400 Client sent an HTTP request to an
HTTPS server.`, which tells an operator what is wrong; a TLS server that just closes the connection
gives curl's "Empty reply from server" and a Go client's `EOF`, neither saying why.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Awaitable

from aiohttp import web

# net/http's answer, on the bare connection, to a first TLS record that looks like an HTTP request
PLAIN_HTTP_ANSWER = b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"
_HTTP_STARTS = frozenset((b"GET /", b"HEAD ", b"POST ", b"PUT /", b"OPTIO"))  # tlsRecordHeaderLooksLikeHTTP
PLAIN_HTTP_READ = 4096  # at most this much of a plain-HTTP request is read before it is answered
ACCEPT_RETRY_SECONDS = 1.0  # asyncio's own wait after a failed accept (out of file descriptors)


class HttpsSite(web.BaseSite):
    """aiohttp's TCPSite with TLS, except that a connection whose first bytes are a plain-HTTP
    request gets net/http's `400 Client sent an HTTP request to an HTTPS server.` instead of being
    closed (curl: "Empty reply from server", a Go client: `EOF`, neither saying why). The first byte
    is peeked at before the connection is handed to TLS (asyncio's `connect_accepted_socket`), as a
    TLS record never starts with a letter; what does is read, and answered when its first five bytes
    are one of Go's (`tlsRecordHeaderLooksLikeHTTP`), closed otherwise, as the TLS stack would."""

    __slots__ = ("_host", "_port", "_idle_seconds", "_listeners", "_tasks")

    def __init__(self, runner: web.BaseRunner, host: str, port: int, *, ssl_context: ssl.SSLContext,
                 idle_seconds: float) -> None:
        super().__init__(runner, ssl_context=ssl_context)
        self._host = host
        self._port = port
        self._idle_seconds = idle_seconds  # a connection that says nothing for this long is closed
        self._listeners: list[socket.socket] = []
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def name(self) -> str:
        return f"https://{self._host}:{self._port}"

    async def start(self) -> None:
        await super().start()
        loop = asyncio.get_running_loop()
        factory = self._runner.server
        assert factory is not None  # BaseSite refuses a runner not set up
        # bound as TCPSite binds, but the connections are accepted here (`_accept`), not by asyncio
        self._server = await loop.create_server(factory, self._host, self._port, backlog=self._backlog,
                                                start_serving=False)
        for bound in self._server.sockets:
            listener = socket.fromfd(bound.fileno(), bound.family, bound.type)  # asyncio hands out wrappers
            listener.setblocking(False)
            listener.listen(self._backlog)  # asyncio listens when it starts serving, which it does not here
            self._listeners.append(listener)
            self._spawn(self._accept(listener))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for listener in self._listeners:
            listener.close()
        await super().stop()

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _accept(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _ = await loop.sock_accept(listener)
            except OSError:
                await asyncio.sleep(ACCEPT_RETRY_SECONDS)
                continue
            self._spawn(self._serve(conn))

    async def _serve(self, conn: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        factory, context = self._runner.server, self._ssl_context
        assert factory is not None and context is not None
        try:
            async with asyncio.timeout(self._idle_seconds):  # a connection that says nothing
                first = await _peek(conn)
                if first and any(start.startswith(first) for start in _HTTP_STARTS):
                    # what has come, as crypto/tls reads a record header: the request left unread
                    # would make the close a reset, and the client not read the answer
                    head = b""
                    while len(head) < 5 and (more := await loop.sock_recv(conn, PLAIN_HTTP_READ)):
                        head += more
                    if head[:5] in _HTTP_STARTS:
                        await loop.sock_sendall(conn, PLAIN_HTTP_ANSWER)
                    conn.close()
                    return
            if not first:
                conn.close()
                return
            # the handshake and everything after it are asyncio's and aiohttp's, as with TCPSite
            await loop.connect_accepted_socket(factory, conn, ssl=context)
        except (OSError, TimeoutError):  # the handshake failed, the peer went away, or said nothing
            conn.close()
        except asyncio.CancelledError:
            conn.close()
            raise


async def _peek(conn: socket.socket) -> bytes:
    """The connection's first byte, left for whoever reads next (b"": closed before it sent one)."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            return conn.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            pass
        readable: asyncio.Future[None] = loop.create_future()
        loop.add_reader(conn, _set_once, readable)
        try:
            await readable
        finally:
            loop.remove_reader(conn)


def _set_once(future: asyncio.Future[None]) -> None:
    """Done, once: a level-triggered reader fires again until the waiting task has run."""
    if not future.done():
        future.set_result(None)
