"""Status writes: PodScheduled=False on pods still waiting, PodGroup status, ResourceClass status.

Writes are desired-state and coalesced: the loop says what a status should be, a background task
writes the latest wish per object, skipping writes that would not change anything (the same
message for the same pod twice is one PATCH, as kube-scheduler's `updatePod` only patches when the
condition changed; a wish is compared with the write in flight, if any, else the last one written).
A failed write is retried `retry_seconds` later, or with the next wish if that comes first. Each
flush writes in a task group of its own, so no write outlives `run()`.

A condition's lastTransitionTime moves only when its status does (upstream
`podutil.UpdatePodCondition`, `meta.SetStatusCondition`, API conventions): a new message under the
same status keeps the time first written, also across a restart or a change of leader — the first
wish of a term takes the time from the condition the watched object shows (`observed`), since a
patch replaces the condition, time included. What is remembered per object is forgotten when the
object goes (`pod_gone`, ...), also while a write to it is in flight, so a new object of the same
name starts clean; and all of what it wrote when the replica stops leading (`reset`): only the
leader writes (`allowed`, asked at write time), and a later term cannot trust what it wrote before
another leader's term.

A PodGroup's status is also compared with what the watch shows of the group
(`podgroup_observed`): a status another writer put there after ours — an earlier leader term's
late PATCH — makes the next wish a write again instead of a no-op.

A pod's PodScheduled=False is written only while the pod still waits — asked of the cache at write
time, not when it was wished — and with the pod's resourceVersion as a precondition: a Binding
that lands first (it sets PodScheduled=True) turns the late write into a 409 instead of leaving a
bound pod marked Unschedulable.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import orjson
import structlog

from scheduler.core.annotations import TERM
from scheduler.core.objects import PLUGINS_API, WORKLOAD_API, podgroup_api
# the PodScheduled reasons, the core's (re-exported: the writer's callers name them from here)
from scheduler.core.scheduler import SCHEDULER_ERROR as SCHEDULER_ERROR
from scheduler.core.scheduler import UNSCHEDULABLE as UNSCHEDULABLE
from scheduler.core.scheduler import WAITING_FOR_ALLOCATION as WAITING_FOR_ALLOCATION
from scheduler.kube.concurrency import Wakeup
from scheduler.kube.http import TRANSPORT_ERRORS, MERGE_PATCH, STRATEGIC_PATCH, KubeHttp, Response
from scheduler.kube.pod_answers import pod_in
from scheduler.kube.recorder import micro_time
from scheduler.logs import describe_error

log = structlog.get_logger("tessera.status")

_Key = tuple[str, str]  # (path, content type)
_PLUGINS_PODGROUP = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups/{name}/status"
_WORKLOAD_PODGROUP = "/apis/scheduling.k8s.io/v1alpha2/namespaces/{namespace}/podgroups/{name}/status"
_CLASS = "/apis/tessera.dev/v1alpha1/resourceclasses/{name}/status"
_CONDITION_TYPES = ("PodScheduled", "PodGroupScheduled", "Valid")  # the conditions this writer stamps
@dataclass(slots=True)
class StatusWrite:
    """One status write in flight: for a pod, the resourceVersion it was conditional on and the one
    it left (None until it succeeds; both None for other objects); and whether it has been
    answered (or given up on)."""

    base: str | None = None
    written: str | None = None
    answered: anyio.Event = field(default_factory=anyio.Event)


# (namespace, name, reason) -> the resourceVersion to write against while the pod still waits for
# that reason (None: for any reason), or None when it no longer does (bound, assumed, gone)
PodVersion = Callable[[str, str, "str | None"], "str | None"]


class StatusWriter:
    def __init__(self, http: KubeHttp, pod_version: PodVersion, *, concurrency: int = 8,
                 retry_seconds: float = 1.0, allowed: Callable[[], bool] = lambda: True,
                 on_pod_written: Callable[[dict[str, Any]], None] = lambda pod: None,
                 term_token: Callable[[], str | None] = lambda: None) -> None:
        self.http = http
        # the leader's term token, written onto a pod with its PodScheduled=False: a deposed leader
        # whose clock runs slow learns from the first pod this term marks, as from its fence and
        # its Bindings (LeaderElector.saw_term); None without leader election
        self.term_token = term_token
        self.pod_version = pod_version
        # the pod as a status write left it: the cache learns its new resourceVersion before the
        # watch does, so the pod's next Binding is not conditional on the version this write
        # replaced (a 409, a retry, and another status write: round and round while the watch lags)
        self.on_pod_written = on_pod_written
        self.allowed = allowed
        self._dirty: dict[_Key, dict[str, Any]] = {}
        self._written: dict[_Key, bytes] = {}
        self._inflight: dict[_Key, tuple[bytes, StatusWrite]] = {}  # fingerprint and the write, per object
        self._since: dict[tuple[_Key, str], tuple[str, str]] = {}  # (key, type) -> (status, transition time)
        self._observed: dict[tuple[_Key, str], tuple[str, str]] = {}  # the same, as the watched object shows it
        self._nominated: dict[_Key, str] = {}  # the last nominatedNodeName wished per pod ("" clears)
        self._wake = Wakeup()
        self._concurrency = concurrency
        self._retry_seconds = retry_seconds
        self._retry_at: float | None = None  # when failed writes are due again (anyio.current_time)
        self.writes = 0

    def pod_waiting(self, namespace: str, name: str, reason: str, message: str,
                    nominated_node: str | None = None, generation: int = 0) -> None:
        """PodScheduled=False with `reason` (Unschedulable, WaitingForAllocation behind the gate, or
        SchedulerError after a refused Binding) and `observedGeneration` the pod's generation (as
        upstream, PodObservedGenerationTracking being GA); with `nominated_node`, also
        status.nominatedNodeName (a preemption's node; "" clears it), in the same write, as
        upstream's updatePod."""
        condition: dict[str, Any] = {"type": "PodScheduled", "status": "False", "reason": reason, "message": message,
                                     "lastProbeTime": None}
        if generation > 0:
            condition["observedGeneration"] = generation
        status: dict[str, Any] = {"conditions": [condition]}
        key = _pod_status(namespace, name)
        if nominated_node is None:  # "leave it": a nomination wished earlier stays in every later wish
            nominated_node = self._nominated.get(key)
        else:
            self._nominated[key] = nominated_node
        if nominated_node is not None:
            status["nominatedNodeName"] = nominated_node or None  # null removes the field
        self._want(key, {"status": status}, stamp=("lastTransitionTime",))

    def pod_nomination_cleared(self, namespace: str, name: str) -> None:
        """status.nominatedNodeName removed: a higher-priority pod's preemption chose the node this
        pod was nominated to (upstream's prepareCandidate clears such lower-priority nominations).
        A condition wished and not yet written is kept in the same write."""
        key = _pod_status(namespace, name)
        self._nominated[key] = ""
        pending = self._dirty.get(key)
        status = {k: v for k, v in pending["status"].items()} if pending is not None else {}
        status["nominatedNodeName"] = None
        self._want(key, {"status": status}, stamp=("lastTransitionTime",))

    async def pod_write_settled(self, namespace: str, name: str) -> StatusWrite | None:
        """Wait until the status write to the pod in flight, if any, is answered, and return it
        (None: none was in flight). A pod decided while its PodScheduled=False (or nomination)
        PATCH was on the wire is bound after it: that write is conditional on the pod's version
        and changes it, so a Binding conditional on the version it replaced would run into it (a
        409, an error and a retry for a write of our own). Once the pod is assumed no new write
        to it starts (`pod_version` says it no longer waits), so this waits for one request at
        most."""
        inflight = self._inflight.get(_pod_status(namespace, name))
        if inflight is None:
            return None
        await inflight[1].answered.wait()
        return inflight[1]

    def pod_gone(self, namespace: str, name: str) -> None:
        """Forget what we wrote for a pod (it was bound or deleted), so a new one starts clean."""
        self._forget(_pod_status(namespace, name))

    def podgroup_gone(self, namespace: str, name: str, api: str) -> None:
        self._forget(_podgroup_key(namespace, name, api))

    def podgroup_observed(self, obj: dict[str, Any]) -> bool:
        """What the watch shows of a PodGroup: True when its status no longer shows what this
        writer last wrote to it — another writer's status landed after ours (a late PATCH of an
        earlier leader's term, this replica's own included) — and the write is then forgotten, so
        the next wish for the group is written again instead of being skipped as already written.
        Upstream's writers compare what they compute with the object they read (scheduler-plugins'
        PodGroup controller, kube-scheduler's updatePodGroupCondition), not with what they wrote.
        An echo of our own earlier write arriving after a later write reads the same way: one
        redundant PATCH, never a stale status left standing."""
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            return False
        key = _podgroup_key(str(meta.get("namespace") or ""), str(meta.get("name") or ""), podgroup_api(obj))
        written = self._written.get(key)
        if written is None:
            return False
        status = obj.get("status")
        if _shows(status if isinstance(status, dict) else {}, orjson.loads(written)["status"]):
            return False
        del self._written[key]
        return True

    def resource_class_gone(self, name: str) -> None:
        self._forget((_CLASS.format(name=name), MERGE_PATCH))

    def _forget(self, key: _Key) -> None:
        """The object is gone: drop its wish and everything remembered of it (a write in flight to
        it is not recorded as written when it returns)."""
        self._dirty.pop(key, None)
        self._written.pop(key, None)
        self._inflight.pop(key, None)
        self._nominated.pop(key, None)
        for condition_type in _CONDITION_TYPES:
            self._since.pop((key, condition_type), None)
            self._observed.pop((key, condition_type), None)

    def observed(self, obj: dict[str, Any]) -> None:
        """What the watch shows of a pod waiting for a node or of a ResourceClass: the status and
        lastTransitionTime of the condition this writer stamps on it (none of other kinds). A wish
        with nothing of its own remembered (a new process, a new term) keeps that time while it
        keeps that status, as upstream reads the object it updates. Bound pods are left out: the
        writer is done with them (`pod_gone`)."""
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            return
        name = str(meta.get("name") or "")
        if obj.get("kind") == "Pod" and not (obj.get("spec") or {}).get("nodeName"):
            since = (_pod_status(str(meta.get("namespace") or ""), name), "PodScheduled")
        elif obj.get("kind") == "ResourceClass":
            since = ((_CLASS.format(name=name), MERGE_PATCH), "Valid")
        else:
            return
        shown = next(((c.get("status"), c.get("lastTransitionTime")) for c in _conditions(obj)
                      if c.get("type") == since[1]), None)
        if shown is not None and isinstance(shown[0], str) and isinstance(shown[1], str) and shown[1]:
            self._observed[since] = (shown[0], shown[1])
        else:
            self._observed.pop(since, None)

    def reset(self) -> None:
        """The replica stopped leading: no wish is written, nothing written is trusted any more
        (what the watch shows, `observed`, stays true: it is the objects' own)."""
        self._dirty.clear()
        self._written.clear()
        self._inflight.clear()
        self._nominated.clear()
        self._since.clear()
        self._retry_at = None

    def pod_group(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        """phase, running, succeeded, failed (the scheduler-plugins PodGroup status). No uid
        precondition (see `_for_object`): a CRD's status subresource copies the stored object's
        metadata over the patched one (apiextensions-apiserver statusStrategy.PrepareForUpdate),
        so a uid in the patch is never compared. A late write for a deleted group that lands on
        its successor is written over: the writer forgot the old group on its DELETED event and
        always has a phase to write for the new one, after the late write (one write per object
        at a time)."""
        self._want(_podgroup_key(namespace, name, PLUGINS_API), {"status": status})

    def workload_pod_group(self, namespace: str, name: str, scheduled: bool, reason: str, message: str, *,
                           transition: bool, uid: str, generation: int = 0) -> None:
        """Upstream's PodGroupScheduled condition on a Workload API PodGroup (a strategic merge
        patch keyed by condition type, as kube-scheduler's updatePodGroupCondition). With
        `transition` the status changes and lastTransitionTime is stamped; without, the patch
        leaves the object's lastTransitionTime as it is (only reason and message move).
        `generation`: the PodGroup's metadata.generation, the condition's observedGeneration
        (upstream sets it on every write); `uid` the object's (`_for_object`): a group that has
        not been tried has no condition to write, so a late one for a deleted group of the name
        would stand on it."""
        condition: dict[str, Any] = {"type": "PodGroupScheduled", "status": "True" if scheduled else "False",
                                     "reason": reason, "message": message}
        if generation > 0:
            condition["observedGeneration"] = generation
        self._want(_podgroup_key(namespace, name, WORKLOAD_API),
                   _for_object(uid, {"status": {"conditions": [condition]}}),
                   stamp=("lastTransitionTime",) if transition else ())

    def resource_class(self, name: str, valid: bool, message: str, matching: int, resource_name: str, *,
                       generation: int, reason: str = "") -> None:
        """``resource_name`` is the effective one (``spec.resourceName`` or the default
        ``class.tessera.dev/<name>``): the RESOURCENAME column shows it, so a user sees what pods
        must ask for even when the spec leaves it out. ``generation``: the spec's
        metadata.generation the status describes (status and condition observedGeneration).
        ``reason``: the condition's (`ClassStatus.reason`); by default `Valid` or `InvalidSpec`."""
        condition = {"type": "Valid", "status": "True" if valid else "False",
                     "reason": reason or ("Valid" if valid else "InvalidSpec"), "message": message,
                     "observedGeneration": generation}
        path = _CLASS.format(name=name)
        status = {"resourceName": resource_name, "matchingDevices": matching, "observedGeneration": generation,
                  "conditions": [condition]}
        self._want((path, MERGE_PATCH), {"status": status}, stamp=("lastTransitionTime",))

    def _want(self, key: _Key, body: dict[str, Any], stamp: tuple[str, ...] = ()) -> None:
        fingerprint = orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
        inflight = self._inflight.get(key)
        if (inflight[0] if inflight is not None else self._written.get(key)) == fingerprint:
            self._dirty.pop(key, None)
            return
        for condition in _conditions(body):
            for stamped in stamp:
                since = (key, str(condition.get("type")))
                known = self._since.get(since) or self._observed.get(since)
                if known is None or known[0] != condition.get("status"):
                    known = (str(condition.get("status")), micro_time().split(".")[0] + "Z")
                self._since[since] = known
                condition[stamped] = known[1]
        body["_fingerprint"] = fingerprint
        self._dirty[key] = body
        self._wake.set()

    async def run(self) -> None:
        """Write what is wished until cancelled, at most `concurrency` writes at a time; while this
        replica may not write (not leading, or in doubt for a moment), the wishes wait."""
        slots = anyio.Semaphore(self._concurrency, fast_acquire=True)

        async def write(key: _Key, body: dict[str, Any]) -> None:
            async with slots:
                await self._write(key, body)

        while True:
            retry_in = math.inf if self._retry_at is None else self._retry_at - anyio.current_time()
            await self._wake.wait(retry_in)
            if self._retry_at is not None and anyio.current_time() >= self._retry_at:
                self._retry_at = None
            if not self.allowed():  # not leading for now: the wishes wait (a new term's reset drops them)
                if self._dirty and self._retry_at is None:
                    self._retry_at = anyio.current_time() + self._retry_seconds
                continue
            batch, self._dirty = self._dirty, {}
            async with anyio.create_task_group() as group:
                for key, body in batch.items():
                    group.start_soon(write, key, body)

    async def _write(self, key: _Key, body: dict[str, Any]) -> None:
        fingerprint = body.pop("_fingerprint")
        path, content_type = key
        # the token first, then the question: a replica deposed while it waited (seconds when
        # Bindings and evictions drain the bucket) must not write over the new leader's statuses
        await self.http.acquire()
        if not self.allowed():
            # not leading now, maybe for a moment (a doubt the same term settles): kept until it
            # leads again, as a status is wished again only when what it says moves; losing the
            # term for good resets the writer, and a new term wishes every status afresh
            self._retry(key, body, fingerprint)
            return
        pod = _pod_of(path)
        if pod is not None:
            conditions = _conditions(body)
            reason = conditions[0]["reason"] if conditions else None  # None: a nomination cleared alone
            version = self.pod_version(pod[0], pod[1], reason)
            if version is None:
                return  # no longer waiting for that reason: the wish is stale, drop it
            term = self.term_token()
            body = {**body, "metadata": {"resourceVersion": version,
                                         **({"annotations": {TERM: term}} if term is not None else {})}}
        token = StatusWrite(base=version if pod is not None else None)
        self._inflight[key] = (fingerprint, token)
        try:
            await self._send(key, body, fingerprint, token, pod is not None)
        finally:  # answered, refused, failed or cancelled: and a pod's new version already in the cache
            token.answered.set()

    async def _send(self, key: _Key, body: dict[str, Any], fingerprint: bytes, token: StatusWrite,
                    to_pod: bool) -> None:
        path, content_type = key
        response: Response | None = None
        try:
            response = await self.http.request("PATCH", path, body=body, content_type=content_type, limited=False,
                                               resend=self.allowed)
        except TRANSPORT_ERRORS as err:
            log.warning("status.write_failed", path=path, error=describe_error(err))
        finally:  # also when cancelled: a write that never returned must not hold back its wish
            current = self._inflight.get(key)
            forgotten = current is None or current[1] is not token  # _forget()/reset() ran meanwhile
            if not forgotten:
                del self._inflight[key]
        if forgotten:
            return
        if response is None:
            self._retry(key, body, fingerprint)
            return
        if response.ok:
            self._written[key] = fingerprint
            self.writes += 1
            written = pod_in(response) if to_pod else None
            if written is not None:
                token.written = str(written["metadata"].get("resourceVersion") or "") or None
                try:
                    self.on_pod_written(written)
                except Exception:  # the callback is ours; a bug there must not stop the writer
                    log.exception("status.callback_failed", path=path)
        elif response.status == 404:
            self._written.pop(key, None)  # the object is gone (or the CRD has no status): nothing to do
        elif response.status == 409 and to_pod:
            body.pop("metadata")  # the pod changed since our cache saw it: ask the cache again
            self._retry(key, body, fingerprint)
        else:
            log.warning("status.rejected", path=path, status=response.status, message=response.message())
            if response.status >= 500 or response.status == 429:
                self._retry(key, body, fingerprint)

    def _retry(self, key: _Key, body: dict[str, Any], fingerprint: bytes) -> None:
        if key not in self._dirty:  # a newer wish for the object replaces the failed one
            body["_fingerprint"] = fingerprint
            self._dirty[key] = body
            if self._retry_at is None:
                self._retry_at = anyio.current_time() + self._retry_seconds


def _pod_of(path: str) -> tuple[str, str] | None:
    """(namespace, name) of a pods/{name}/status path."""
    parts = path.split("/")
    if len(parts) == 8 and parts[:4] == ["", "api", "v1", "namespaces"] and parts[5] == "pods":
        return parts[4], parts[6]
    return None


def _pod_status(namespace: str, name: str) -> _Key:
    """The writer's key for a pod's status: its path and the patch type every pod write uses."""
    return (f"/api/v1/namespaces/{namespace}/pods/{name}/status", STRATEGIC_PATCH)


def _podgroup_key(namespace: str, name: str, api: str) -> _Key:
    """The writer's key for a PodGroup's status, in the API the group is of."""
    if api == WORKLOAD_API:
        return (_WORKLOAD_PODGROUP.format(namespace=namespace, name=name), STRATEGIC_PATCH)
    return (_PLUGINS_PODGROUP.format(namespace=namespace, name=name), MERGE_PATCH)


def _for_object(uid: str, body: dict[str, Any]) -> dict[str, Any]:
    """A status patch that applies only to the object `uid`: a built-in object deleted and created
    again under its name while the write was on the wire refuses it (the uid is immutable)
    instead of taking the old object's status, as upstream's preparePatchBytesForPodStatus puts
    the pod's uid in its patches."""
    return {"metadata": {"uid": uid}, **body} if uid else body


def _shows(shown: dict[str, Any], wished: dict[str, Any]) -> bool:
    """Whether an object's status holds every field of a status written to it (conditions matched
    by type, each field the write set)."""
    for key, value in wished.items():
        if key != "conditions":
            if shown.get(key) != value:
                return False
            continue
        present = {c.get("type"): c for c in _conditions({"status": shown})}
        for condition in value:
            have = present.get(condition.get("type"))
            if have is None or any(have.get(k) != v for k, v in condition.items()):
                return False
    return True


def _conditions(body: dict[str, Any]) -> list[dict[str, Any]]:
    status = body.get("status")
    if isinstance(status, dict) and isinstance(status.get("conditions"), list):
        return [c for c in status["conditions"] if isinstance(c, dict)]
    return []
