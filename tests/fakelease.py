"""An in-memory coordination.k8s.io Lease endpoint with resourceVersion semantics (conditional PUT,
409 on a stale resourceVersion or a second create), for leader election unit tests; hooks fail a
request before it is applied or run after it is applied, before its answer is returned."""
from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import anyio
import orjson

from scheduler.kube.http import Response
from scheduler.kube.leader import LeaderElector
from tests.helpers import until


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class LeaseServer:
    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.rv = 1
        # hook(method, who) -> awaited after the request is applied, before the answer is returned
        self.after: Callable[[str, str, Response], Awaitable[None]] | None = None
        self.fail: Callable[[str, str], Response | None] | None = None  # before applying
        self.calls: list[tuple[str, str]] = []  # (who, method) of every request, in order

    def client(self, who: str) -> LeaseClient:
        return LeaseClient(self, who)

    def _apply(self, method: str, body: Any) -> Response:
        if method == "GET":
            if self.lease is None:
                return Response(404, b'{"kind":"Status","reason":"NotFound","code":404}')
            return Response(200, orjson.dumps(self.lease))
        if method == "POST":
            if self.lease is not None:
                return Response(409, b'{"kind":"Status","reason":"AlreadyExists","code":409}')
            self.rv += 1
            self.lease = copy.deepcopy(body)
            self.lease["metadata"]["resourceVersion"] = str(self.rv)
            return Response(201, orjson.dumps(self.lease))
        if method == "PUT":
            if self.lease is None:
                return Response(404, b'{"kind":"Status","reason":"NotFound","code":404}')
            if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
                return Response(409, b'{"kind":"Status","reason":"Conflict","code":409}')
            self.rv += 1
            self.lease = copy.deepcopy(body)
            self.lease["metadata"]["resourceVersion"] = str(self.rv)
            return Response(200, orjson.dumps(self.lease))
        raise AssertionError(method)

    @property
    def holder(self) -> str | None:
        return None if self.lease is None else self.lease["spec"]["holderIdentity"]


class LeaseClient:
    def __init__(self, server: LeaseServer, who: str) -> None:
        self.server = server
        self.who = who
        # what `KubeHttp.api` would be: the server a start-up line names (`tessera run`'s `_run`)
        self.api = SimpleNamespace(configuration=SimpleNamespace(host="https://127.0.0.1:6443"))
        self.limiter = None  # KubeHttp's: none here
        self.on_result: Callable[[str, str, str], None] | None = None  # KubeHttp's (`tessera run` sets it)

    def tell_result(self, code: str, method: str, host: str) -> None:
        """KubeHttp's: what the loop's Event client counts its requests through."""
        if self.on_result is not None:
            self.on_result(code, method, host)

    async def acquire(self) -> None:
        pass

    async def request(self, method: str, path: str, *, query: Any = (), body: Any = None,
                      content_type: str = "application/json", timeout: float = 30.0,
                      limited: bool = True) -> Response:
        s = self.server
        s.calls.append((self.who, method))
        if s.fail is not None:
            early = s.fail(method, self.who)
            if early is not None:
                return early
        response = s._apply(method, copy.deepcopy(body))
        if s.after is not None:
            await s.after(method, self.who, response)
        return response


async def a_real_newer_holder_deposes(server: LeaseServer, a: LeaderElector, b: LeaderElector, b_clock: Clock) -> None:
    """A runs and leads; B, by whose clock A's record expired (by A's no time passed), takes the Lease
    and shows its term token on a pod: the write A's doubt sends at once finds B's record, and A
    steps down within a second, B holding the Lease."""
    stopped: list[bool] = []
    a._on_stopped_leading = lambda: stopped.append(True)
    async with anyio.create_task_group() as owner:
        owner.start_soon(a.run)
        await until(lambda: a.is_leader)
        await anyio.sleep(0.1)
        assert not await b._try_acquire_or_renew()
        b_clock.t += 30
        assert await b._try_acquire_or_renew()
        b._start_leading()
        assert b.fence_token is not None and a.saw_term(b.fence_token, "default/p")
        await until(lambda: bool(stopped), seconds=1.0)
        assert not a.is_leader and server.holder == "B"
        owner.cancel_scope.cancel()
