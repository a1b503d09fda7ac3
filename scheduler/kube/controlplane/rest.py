"""A small synchronous HTTPS client for setting up the local control plane.

Why not kubernetes-asyncio here: set-up code (readiness polling, CRD installation, fake nodes)
runs in synchronous pytest fixtures and in the CLI before any event loop exists, and an aiohttp
session is bound to the loop it was made in. ``http.client`` with one keep-alive connection per
thread is enough, and lets a thread pool create thousands of objects quickly.
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

__all__ = ["ApiError", "RestClient"]

JSON = dict[str, Any]


class ApiError(RuntimeError):
    """A non-2xx answer from the apiserver."""

    def __init__(self, method: str, path: str, status: int, body: bytes) -> None:
        self.status = status
        self.body = body
        try:
            decoded = json.loads(body)
            self.reason = str(decoded.get("reason", ""))
            self.message = str(decoded.get("message", body[:500].decode(errors="replace")))
        except ValueError:
            self.reason = ""
            self.message = body[:500].decode(errors="replace")
        super().__init__(f"{method} {path}: HTTP {status} {self.reason}: {self.message}")


class RestClient:
    """Authenticated JSON requests against one apiserver (bearer token or client certificate)."""

    def __init__(
        self,
        server: str,
        ca_file: str,
        *,
        token: str | None = None,
        cert_file: str | None = None,
        key_file: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        url = urlsplit(server)
        if url.scheme != "https" or url.hostname is None:
            raise ValueError(f"expected an https:// server URL, got {server!r}")
        self.server = server
        self._host = url.hostname
        self._port = url.port or 443
        self._timeout = timeout
        self._token = token
        self._context = ssl.create_default_context(cafile=ca_file)
        self._context.verify_flags |= ssl.VERIFY_X509_STRICT
        if cert_file is not None:
            self._context.load_cert_chain(cert_file, key_file)
        self._local = threading.local()

    def _connection(self) -> http.client.HTTPSConnection:
        conn: http.client.HTTPSConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPSConnection(
                self._host, self._port, context=self._context, timeout=self._timeout
            )
            self._local.conn = conn
        return conn

    def _drop_connection(self) -> None:
        conn: http.client.HTTPSConnection | None = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def request_raw(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        content_type: str = "application/json",
    ) -> tuple[int, bytes]:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token}"
        for attempt in (1, 2):
            conn = self._connection()
            try:
                conn.request(method, path, body=body, headers=headers)
                response = conn.getresponse()
                data = response.read()
                if response.will_close:
                    self._drop_connection()
                return response.status, data
            except (http.client.HTTPException, ConnectionError, ssl.SSLError, TimeoutError):
                # A kept-alive connection the server closed (or an apiserver restart): reconnect
                # once, then give up.
                self._drop_connection()
                if attempt == 2:
                    raise
            except OSError:
                self._drop_connection()
                raise
        raise AssertionError("unreachable")

    def request(
        self,
        method: str,
        path: str,
        obj: Any = None,
        *,
        content_type: str = "application/json",
        ok: Iterable[int] = (200, 201, 202),
    ) -> JSON:
        body = json.dumps(obj).encode() if obj is not None else None
        status, data = self.request_raw(method, path, body, content_type)
        if status not in tuple(ok):
            raise ApiError(method, path, status, data)
        if not data:
            return {}
        decoded = json.loads(data)
        return decoded if isinstance(decoded, dict) else {"items": decoded}

    def get(self, path: str) -> JSON:
        return self.request("GET", path)

    def create(self, path: str, obj: JSON) -> JSON:
        return self.request("POST", path, obj)

    def merge_patch(self, path: str, patch: JSON) -> JSON:
        return self.request("PATCH", path, patch, content_type="application/merge-patch+json")

    def apply(self, path: str, obj: JSON, field_manager: str = "tessera-controlplane") -> JSON:
        """Server-side apply (``force=true``) of a full object to its own URL."""
        sep = "&" if "?" in path else "?"
        return self.request(
            "PATCH",
            f"{path}{sep}fieldManager={field_manager}&force=true",
            obj,
            content_type="application/apply-patch+yaml",
        )

    def delete(self, path: str) -> JSON:
        return self.request("DELETE", path, ok=(200, 202, 404))

    def close(self) -> None:
        self._drop_connection()
