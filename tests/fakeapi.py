"""An in-memory stand-in for the apiserver's HTTP layer, for unit tests of the live shell.

It answers `KubeHttp.request` calls for the few endpoints the binder, the status writer and the
event recorder use (Events are created and merge-patched), with the apiserver's semantics where they matter (a Binding to a bound or
deleting pod is a 409, to a missing pod a 404; the uid in a Binding is a precondition). Faults
are scripted per call: answer with a status, fail with a transport error, or *hold* a request —
the client sees a broken connection while the request is delivered later, as a proxy or a dead
TCP connection can do.
"""

from __future__ import annotations

import copy
import re
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import aiohttp
import anyio
import orjson

from scheduler.kube.http import Response
from scheduler.kube.informers import SCHEDULER_KINDS

JSON = dict[str, Any]
_BUILTIN_LISTS = frozenset(kind.path for kind in SCHEDULER_KINDS if kind.builtin)
_BINDING = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding$")
_POD = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)$")
_PODS = re.compile(r"^/api/v1/namespaces/([^/]+)/pods$")
_POD_STATUS = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/status$")
_EVENTS = re.compile(r"^/apis/events\.k8s\.io/v1/namespaces/([^/]+)/events$")
_EVENT = re.compile(r"^/apis/events\.k8s\.io/v1/namespaces/([^/]+)/events/([^/]+)$")


@dataclass(slots=True)
class Call:
    method: str
    path: str
    body: Any
    query: tuple[tuple[str, str], ...]
    content_type: str
    limited: bool | None  # the caller's `limited` flag; None through `call_api` (KubeHttp applied it)


@dataclass(slots=True)
class Fault:
    """What happens to the next matching call: a status answer, a transport error, `hold` (the
    client gets a transport error, the request is applied only when `deliver_held` runs) or
    `stall` (no answer until the caller gives up)."""

    method: str
    path_contains: str
    status: int = 0
    error: BaseException | None = None
    hold: bool = False
    stall: bool = False  # no answer ever: the call waits until it is cancelled


def _status(code: int, message: str, reason: str = "", details: JSON | None = None) -> Response:
    body: JSON = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
                  "reason": reason, "code": code}
    if details is not None:
        body["details"] = details
    return Response(code, orjson.dumps(body))


@dataclass
class FakeApi:
    pods: dict[tuple[str, str], JSON] = field(default_factory=dict)
    faults: deque[Fault] = field(default_factory=deque)
    calls: list[Call] = field(default_factory=list)
    held: list[Call] = field(default_factory=list)
    events: dict[tuple[str, str], JSON] = field(default_factory=dict)  # (namespace, name) -> Event
    handlers: list[Callable[[Call], Response | None]] = field(default_factory=list)
    before: Callable[[str, str], object] | None = None  # runs first on every call: (method, path); result unused
    resource_version: int = 100
    lists: dict[str, list[JSON]] = field(default_factory=dict)  # cluster-wide list path -> items (pods: `pods`)
    stalled: int = 0  # calls waiting on a `stall` fault right now
    # every version of a pod a write left, in order, as a watch from an older resourceVersion
    # replays them; `history_expired`: the watch cache no longer holds them (a watch gets 410)
    history: list[JSON] = field(default_factory=list)
    history_expired: bool = False
    # the server `KubeHttp.api.configuration.host` names (start-up lines and messages say it)
    configuration: Any = field(default_factory=lambda: SimpleNamespace(host="https://fake-apiserver"))

    def add_pod(self, pod: JSON) -> None:
        self.pods[(pod["metadata"]["namespace"], pod["metadata"]["name"])] = copy.deepcopy(pod)

    def pod(self, namespace: str, name: str) -> JSON:
        return self.pods[(namespace, name)]

    def fail_next(self, method: str, path_contains: str, *, status: int = 0, error: BaseException | None = None,
                  hold: bool = False, stall: bool = False) -> None:
        self.faults.append(Fault(method, path_contains, status, error, hold, stall))

    def deliver_held(self) -> list[Response]:
        """The requests a broken connection swallowed reach the server now."""
        held, self.held = self.held, []
        return [self._serve(call) for call in held]

    def of(self, method: str, path_contains: str = "") -> list[Call]:
        return [c for c in self.calls if c.method == method and path_contains in c.path]

    async def acquire(self) -> None:
        """`KubeHttp.acquire`: no rate limit here."""

    async def request(self, method: str, path: str, *, query: Sequence[tuple[str, str]] = (), body: Any = None,
                      content_type: str = "application/json", timeout: float = 30.0,
                      limited: bool = True, resend: Callable[[], bool] | None = None) -> Response:
        """`KubeHttp.request`'s signature: a FakeApi can stand in for a KubeHttp (its answers carry
        no Retry-After, so `resend` is never asked)."""
        return await self._call(Call(method, path, copy.deepcopy(body), tuple(query), content_type, limited))

    async def call_api(self, path: str, method: str, *, query_params: Sequence[tuple[str, str]],
                       header_params: dict[str, str], auth_settings: list[str], _preload_content: bool,
                       _request_timeout: Any, body: Any = None) -> _ClientResponse:
        """kubernetes-asyncio `ApiClient.call_api`, as `KubeHttp` calls it: a FakeApi can also stand
        behind a real `KubeHttp` (its rate limiter included). A watch gets a stream that stays open
        and silent (a watch of one namespace's pods replays `history` and ends)."""
        if ("watch", "true") in query_params and not _PODS.match(path):  # one namespace's pods: its history
            self.calls.append(Call(method, path, None, tuple(query_params), "", None))
            return _ClientResponse(200, b"", stream=True)
        call = Call(method, path, copy.deepcopy(body), tuple(query_params),
                    header_params.get("Content-Type", "application/json"), None)
        response = await self._call(call)
        return _ClientResponse(response.status, response.body)

    async def _call(self, call: Call) -> Response:
        await anyio.sleep(0)
        if self.before is not None:
            self.before(call.method, call.path)
        self.calls.append(call)
        for fault in self.faults:
            if fault.method == call.method and fault.path_contains in call.path:
                self.faults.remove(fault)
                if fault.hold:
                    self.held.append(call)
                    raise aiohttp.ServerDisconnectedError()
                if fault.error is not None:
                    raise fault.error
                if fault.stall:
                    self.stalled += 1
                    try:
                        await anyio.sleep_forever()
                    finally:
                        self.stalled -= 1
                return _status(fault.status, f"injected HTTP {fault.status}")
        return self._serve(call)

    def _serve(self, call: Call) -> Response:
        for handler in self.handlers:
            answer = handler(call)
            if answer is not None:
                return answer
        if (m := _BINDING.match(call.path)) and call.method == "POST":
            return self.bind(m.group(1), m.group(2), call.body)
        if (m := _POD.match(call.path)) and call.method == "GET":
            pod = self.pods.get((m.group(1), m.group(2)))
            if pod is None:
                return _status(404, f'pods "{m.group(2)}" not found', "NotFound", {"name": m.group(2), "kind": "pods"})
            return Response(200, orjson.dumps(pod))
        if (m := _PODS.match(call.path)) and call.method == "GET" and ("watch", "true") in call.query:
            return self._watch_history(m.group(1), call.query)
        if call.method == "GET" and call.path == "/api/v1/pods":
            return self._list([pod for pod in self.pods.values() if _selected(pod, call.query)])
        if call.method == "GET" and call.path in self.lists:
            return self._list(self.lists[call.path])
        if call.method == "GET" and call.path in _BUILTIN_LISTS:  # every apiserver serves these (maybe empty)
            return self._list([])
        if (m := _POD_STATUS.match(call.path)) and call.method == "PATCH":
            return self._patch_status(m.group(1), m.group(2), call.body)
        if (m := _POD.match(call.path)) and call.method == "PATCH":
            return self._patch_metadata(m.group(1), m.group(2), call.body)
        if (m := _POD.match(call.path)) and call.method == "DELETE":
            return self._delete(m.group(1), m.group(2), call.body)
        if (m := _EVENTS.match(call.path)) and call.method == "POST":
            key = (m.group(1), call.body["metadata"]["name"])
            if key in self.events:
                return _status(409, f'events.events.k8s.io "{key[1]}" already exists', "AlreadyExists")
            self.events[key] = call.body
            return Response(201, orjson.dumps(call.body))
        if (m := _EVENT.match(call.path)) and call.method == "PATCH":
            event = self.events.get((m.group(1), m.group(2)))
            if event is None:
                return _status(404, f'events.events.k8s.io "{m.group(2)}" not found', "NotFound")
            _merge(event, call.body)
            return Response(200, orjson.dumps(event))
        return _status(404, f"no fake route for {call.method} {call.path}", "NotFound")

    def _list(self, items: list[JSON]) -> Response:
        return Response(200, orjson.dumps({"kind": "List", "metadata": {"resourceVersion": str(self.resource_version)},
                                           "items": items}))

    def _patch_status(self, namespace: str, name: str, body: JSON) -> Response:
        """A strategic merge of status.conditions (by type) and metadata.annotations; metadata.uid and
        metadata.resourceVersion are preconditions."""
        pod = self.pods.get((namespace, name))
        if pod is None:
            return _status(404, f'pods "{name}" not found', "NotFound")
        meta = pod["metadata"]
        uid = (body.get("metadata") or {}).get("uid")
        if uid is not None and uid != meta.get("uid"):
            return _status(409, f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
                                f"{meta.get('uid')}", "Conflict")
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != meta.get("resourceVersion", ""):
            return _status(409, f'Operation cannot be fulfilled on pods "{name}": the object has been modified; '
                                "please apply your changes to the latest version and try again", "Conflict")
        # the apiserver keeps metadata.annotations from a status write (podStatusStrategy
        # .PrepareForUpdate takes only spec, deletionTimestamp and ownerReferences from the old pod)
        for key, value in ((body.get("metadata") or {}).get("annotations") or {}).items():
            if value is None:
                meta.get("annotations", {}).pop(key, None)
            else:
                meta.setdefault("annotations", {})[key] = value
        status = pod.setdefault("status", {})
        for key, value in (body.get("status") or {}).items():
            if key != "conditions":
                _merge(status, {key: value})
        for condition in (body.get("status") or {}).get("conditions", []):
            kept = [c for c in status.get("conditions", []) if c.get("type") != condition.get("type")]
            status["conditions"] = [*kept, condition]
        self._bump(pod)
        return Response(200, orjson.dumps(pod))

    def _patch_metadata(self, namespace: str, name: str, body: JSON) -> Response:
        """A JSON merge patch of the pod's metadata.annotations and labels (what Tessera writes to
        a pod itself); every write changes the resourceVersion."""
        pod = self.pods.get((namespace, name))
        if pod is None:
            return _status(404, f'pods "{name}" not found', "NotFound", {"name": name, "kind": "pods"})
        meta = pod["metadata"]
        for field_name in ("annotations", "labels"):
            for key, value in ((body.get("metadata") or {}).get(field_name) or {}).items():
                if value is None:
                    meta.get(field_name, {}).pop(key, None)
                else:
                    meta.setdefault(field_name, {})[key] = value
        self._bump(pod)
        return Response(200, orjson.dumps(pod))

    def _delete(self, namespace: str, name: str, body: JSON | None) -> Response:
        """DELETE with DeleteOptions.preconditions.uid; the pod is gone at once (grace period 0)."""
        pod = self.pods.get((namespace, name))
        if pod is None:
            return _status(404, f'pods "{name}" not found', "NotFound")
        wanted = ((body or {}).get("preconditions") or {}).get("uid")
        if wanted is not None and wanted != pod["metadata"]["uid"]:
            return _status(409, f"Precondition failed: UID in precondition: {wanted}, "
                                f"UID in object meta: {pod['metadata']['uid']}", "Conflict")
        del self.pods[(namespace, name)]
        return Response(200, orjson.dumps(pod))

    def _bump(self, obj: JSON) -> None:
        self.resource_version += 1
        obj["metadata"]["resourceVersion"] = str(self.resource_version)
        if obj.get("kind", "Pod") == "Pod" and "spec" in obj:
            self.history.append(copy.deepcopy(obj))

    def _watch_history(self, namespace: str, query: tuple[tuple[str, str], ...]) -> Response:
        """A watch of one namespace's pods (a `metadata.name` fieldSelector) from `resourceVersion`,
        with `timeoutSeconds`: the versions written after it, as newline-delimited MODIFIED events,
        then the stream ends; with `history_expired`, one ERROR event (410 Expired) instead."""
        params = dict(query)
        since = int(params.get("resourceVersion") or "0")
        name = params.get("fieldSelector", "").removeprefix("metadata.name=")
        kept = [pod for pod in self.history if pod["metadata"]["namespace"] == namespace
                and (not name or pod["metadata"]["name"] == name)]
        if self.history_expired:
            expired = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Expired", "code": 410,
                       "message": f"too old resource version: {since}"}
            return Response(200, orjson.dumps({"type": "ERROR", "object": expired}) + b"\n")
        events = [{"type": "MODIFIED", "object": pod} for pod in kept
                  if int(pod["metadata"]["resourceVersion"]) > since]
        return Response(200, b"".join(orjson.dumps(event) + b"\n" for event in events))

    def bind(self, namespace: str, name: str, body: JSON) -> Response:
        pod = self.pods.get((namespace, name))
        if pod is None:
            return _status(404, f'pods "{name}" not found', "NotFound")
        meta = pod["metadata"]
        if body["metadata"].get("uid") and body["metadata"]["uid"] != meta["uid"]:
            return _status(409, f"Precondition failed: UID in precondition: {body['metadata']['uid']}, "
                                f"UID in object meta: {meta['uid']}", "Conflict")
        wanted = body["metadata"].get("resourceVersion")
        if wanted and wanted != meta.get("resourceVersion", ""):  # storage.Preconditions, checked first
            return _status(409, f'Operation cannot be fulfilled on pods "{name}": Precondition failed: ResourceVersion '
                                f'in precondition: {wanted}, ResourceVersion in object meta: '
                                f'{meta.get("resourceVersion", "")}', "Conflict")
        if meta.get("deletionTimestamp"):
            return _status(409, f"pod {name} is being deleted, cannot be assigned to a host", "Conflict")
        if pod["spec"].get("nodeName"):
            return _status(409, f'pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"', "Conflict")
        pod["spec"]["nodeName"] = body["target"]["name"]
        meta["annotations"] = {**(meta.get("annotations") or {}), **(body["metadata"].get("annotations") or {})}
        status = pod.setdefault("status", {})
        status["conditions"] = [*(c for c in status.get("conditions", []) if c.get("type") != "PodScheduled"),
                                {"type": "PodScheduled", "status": "True"}]
        self._bump(pod)
        return Response(201, orjson.dumps({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}))


def _selected(pod: JSON, query: tuple[tuple[str, str], ...]) -> bool:
    """A `fieldSelector` of `field=value` terms (comma: all of them), for the fields this fake
    knows; anything else is refused loudly, as the apiserver refuses a field it cannot select on."""
    for name, selector in query:
        if name != "fieldSelector":
            continue
        for term in selector.split(","):
            field_name, _, value = term.partition("=")
            if field_name == "spec.schedulerName":
                actual = pod.get("spec", {}).get("schedulerName", "default-scheduler")
            elif field_name == "spec.nodeName":
                actual = pod.get("spec", {}).get("nodeName", "")
            else:
                raise AssertionError(f"the fake apiserver cannot select pods on {field_name!r}")
            if actual != value.lstrip("="):
                return False
    return True


def _merge(target: JSON, patch: JSON) -> None:
    """A JSON merge patch (RFC 7386), in place."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


class _ClientResponse:
    """What `KubeHttp` reads of an aiohttp response: the status, the body, and a watch's content."""

    def __init__(self, status: int, body: bytes, *, stream: bool = False) -> None:
        self.status = status
        self._body = body
        self.headers: dict[str, str] = {}
        self.content = _SilentStream() if stream else None

    async def read(self) -> bytes:
        return self._body

    def release(self) -> None:
        return None


class _SilentStream:
    """A watch on which nothing ever happens (until the reader is cancelled)."""

    async def readany(self) -> bytes:
        await anyio.sleep_forever()
        return b""
