"""List+watch informers: the scheduler's only view of the cluster (docs/design.md §1).

Why our own and not kubernetes-asyncio's ``Watch``:

- The core and ``simulate`` want the apiserver's JSON as-is (see ``http.py``); the typed client
  would deserialise every Pod into models and back.
- Recovering from ``410 Gone`` needs control the library does not give: in watch-forever mode it
  retries a 410 once with the *same* resourceVersion and then raises, and it never tells which
  objects vanished while we were not watching. client-go's answer (reflector + DeltaFIFO.Replace)
  is to relist and diff against what was delivered before; we do the same with one small store
  per informer (key -> last object delivered, shared with the sink, so it costs no copies).

The protocol is client-go's reflector: a paginated LIST (``limit``/``continue``) delivered as
ADDED events, then a WATCH from the list's resourceVersion with ``allowWatchBookmarks`` and a
server-side ``timeoutSeconds``. A stream that ends is resumed from the last resourceVersion seen
(events and BOOKMARKs both advance it); a stream that hangs is cut by the socket read timeout
(watch timeout + 30 s) — or, once this kind's watches have been seen to carry the apiserver's
periodic BOOKMARKs, after WATCH_SILENCE_SECONDS without a whole event (see `_Silent`). ``410 Gone`` — an HTTP 410 on connect or an ERROR event with code 410
inside a 200 stream — means the history we need is gone: relist, deliver synthetic DELETED
events (with the last known object, so the core can release what it held) for what vanished,
ADDED for what is new and MODIFIED for what changed. Everything else is retried with jittered
exponential backoff; only cancellation ends ``run``. As the reflector, every new list+watch (a 410
included) comes after a backoff, so a watch that keeps expiring cannot drive back-to-back LISTs;
unlike it, an answer from the server (a 410, a LIST delivered) forgets the pauses an outage piled
up, so the relist after an apiserver restart comes within BACKOFF_INITIAL (jittered), not after
up to a minute with the cache stale (`relist_pending` says while it waits), and one informer's
answer wakes its set's others from a connection error's pause (`Answers`); each watch asks for a
random ``timeoutSeconds`` between 5 and 10 minutes, so informers started together (every node's agent) do not reconnect in lock-step; and a paged LIST whose
continue token expired is finished by one LIST without ``limit`` (client-go's pager). A 401 or 403 (bad credentials, missing
RBAC) is retried the same way but reported once per episode, not per retry (see `Denials`). Reads are never rate limited: they are few,
long-lived, and throttling them would only delay the cache.

A CRD that is not installed (404 on LIST, e.g. no PodGroup CRD) must not hold the scheduler
back: that kind counts as synced with an empty list, a warning says it is unavailable, and the
list is retried every 30 s so the kind appears once the CRD is installed. So does an optional kind
the role may not read (403). While a kind is treated as empty, `Informer.unavailable` says why
("not_served", "forbidden", or "unauthorized" when a kind already empty then meets a 401: the
`tessera_informer_unavailable` gauge, the reason of the latest answer) and the warning is
repeated every UNAVAILABLE_REPEAT_SECONDS (not at every retry).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

import aiohttp
import anyio
from anyio.streams.memory import MemoryObjectSendStream
import orjson
import structlog

from scheduler.core.objects import in_terminal_phase
from scheduler.kube.http import KubeHttp, Response
from scheduler.kube.resource_version import compare_resource_versions
from scheduler.logs import describe_error

__all__ = [
    "ALL_KINDS",
    "Answers",
    "Denials",
    "EXTENDED_RESOURCES",
    "NODES",
    "PODS",
    "POD_GROUPS",
    "WORKLOAD_POD_GROUPS",
    "RESOURCE_CLASSES",
    "SCHEDULER_KINDS",
    "EventSink",
    "Informer",
    "InformerSet",
    "InformerStats",
    "ResourceKind",
    "UNAVAILABLE_REASONS",
    "Unavailable",
]

log = structlog.get_logger("tessera.informers")

EventSink = Callable[[str, dict[str, Any]], None]
"""(type "ADDED"|"MODIFIED"|"DELETED", full object with kind and apiVersion). Called in order from
the informer's task; it must not mutate the object (the informer keeps it for a later DELETED)."""

# Module-level so tests can shrink them. The backoff is client-go's reflector's
# (NewExponentialBackoffManager(800ms, 30s, 2min, 2.0, 1.0)): it doubles from 0.8 s, is jittered up
# to twice that, and starts again at 0.8 s only after two minutes without one (client-go
# tools/cache/reflector.go: connection-refused watch retries and the wait.BackoffUntil before each new
# ListAndWatch, a 410's included, share that one manager) - or, unlike the reflector, once the server
# answers: a LIST delivered; a 410, whose relist's pause grows only with the 410s since a watch last
# delivered something.
BACKOFF_INITIAL = 0.8
BACKOFF_MAX = 30.0
BACKOFF_RESET = 120.0
MIN_WATCH_TIMEOUT = 300  # reflector's minWatchTimeout: each watch asks for 5-10 min, at random
UNAVAILABLE_RETRY_SECONDS = 30.0
UNAVAILABLE_REPEAT_SECONDS = 300.0  # the informer.unavailable warning again while it lasts
READ_TIMEOUT_MARGIN = 30.0
# The watch cache sends every watch that allows bookmarks one about every minute
# (k8s.io/apiserver pkg/storage/cacher/cacher.go defaultBookmarkFrequency), whatever its selectors
# and whether anything changed; upstream's own epsilon over that period is 15 s
# (DefaultEventFreshDuration). A stream silent for longer is stalled, not quiet.
BOOKMARK_PERIOD_SECONDS = 60.0
WATCH_SILENCE_SECONDS = BOOKMARK_PERIOD_SECONDS + 15.0
# A watch resumed from a resourceVersion gets at once every change newer than it (the watch cache
# sends them before any live event): changes its restarted stream delivers this soon after opening
# are what the stream before it held back (`_QuietSpell`).
STALL_REPLAY_SECONDS = 1.0
# ... and only those whose object was last written this long before the restart: metadata times
# are RFC 3339 in whole seconds (truncated), and the apiserver's clock is not ours. A quiet kind's
# first change can land in a restart's first second too, and is news, not a backlog (`_held_back`).
STALL_EVIDENCE_MARGIN_SECONDS = 2.0
LIST_TIMEOUT = 60.0


@dataclass(frozen=True)
class ResourceKind:
    kind: str
    api_version: str
    path: str  # the cluster-wide list path
    # Scheduling goes on without it: a 403 (RBAC from before the kind was read) counts as empty,
    # with a warning, instead of keeping the scheduler unready.
    optional: bool = False
    name: str = ""  # how logs, stats and metrics name it when two APIs share the kind; default: kind
    # Served by every apiserver (a GA built-in API): a 404 on its list is a transient error (a proxy
    # or load balancer in a bad moment), never "not served" — treating it as empty would delete
    # every object (for Pods: free every running pod's GPUs). Only CRDs and alpha APIs can be absent.
    builtin: bool = False
    # Its objects live in namespaces: a list denied cluster-wide may be allowed in one namespace
    # (`snapshot.namespaced_path`), and the permission a list needs is "in all namespaces".
    namespaced: bool = False

    @property
    def label(self) -> str:
        return self.name or self.kind

    @property
    def plural(self) -> str:
        """The resource's plural, the last segment of its list path: `nodes`, `podgroups`."""
        return self.path.rsplit("/", 1)[-1]

    @property
    def group(self) -> str:
        """Its API group, "" for the core API: `tessera.dev`."""
        return self.api_version.rpartition("/")[0]

    @property
    def resource(self) -> str:
        """kubectl's name of the kind's resource: `nodes`, `resourceclasses.tessera.dev`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def aliases(self) -> tuple[str, ...]:
        """The names kubectl takes for it (and `tessera record --kinds`): "pod", "pods", and for a
        named API group "podgroups.scheduling.x-k8s.io" and "podgroup.scheduling.x-k8s.io" too (the
        short names select every API that has the kind)."""
        singular = self.kind.lower()
        qualified = (f"{self.plural}.{self.group}", f"{singular}.{self.group}") if self.group else ()
        return (singular, self.plural, *qualified)


NODES = ResourceKind("Node", "v1", "/api/v1/nodes", builtin=True)
PODS = ResourceKind("Pod", "v1", "/api/v1/pods", builtin=True, namespaced=True)
EXTENDED_RESOURCES = ResourceKind(
    "ExtendedResource", "tessera.dev/v1alpha1", "/apis/tessera.dev/v1alpha1/extendedresources")
RESOURCE_CLASSES = ResourceKind(
    "ResourceClass", "tessera.dev/v1alpha1", "/apis/tessera.dev/v1alpha1/resourceclasses")
POD_GROUPS = ResourceKind(
    "PodGroup", "scheduling.x-k8s.io/v1alpha1", "/apis/scheduling.x-k8s.io/v1alpha1/podgroups", namespaced=True)
DISRUPTION_BUDGETS = ResourceKind("PodDisruptionBudget", "policy/v1", "/apis/policy/v1/poddisruptionbudgets",
                                  optional=True, builtin=True, namespaced=True)
PRIORITY_CLASSES = ResourceKind("PriorityClass", "scheduling.k8s.io/v1", "/apis/scheduling.k8s.io/v1/priorityclasses",
                                optional=True, builtin=True)
# VolumeBinding's kinds (optional: a role from before the plugin may not read them, and pods with
# claims then pass it as before: `ClusterState.unread`)
CLAIMS = ResourceKind("PersistentVolumeClaim", "v1", "/api/v1/persistentvolumeclaims",
                      optional=True, builtin=True, namespaced=True)
VOLUMES = ResourceKind("PersistentVolume", "v1", "/api/v1/persistentvolumes", optional=True, builtin=True)
STORAGE_CLASSES = ResourceKind("StorageClass", "storage.k8s.io/v1", "/apis/storage.k8s.io/v1/storageclasses",
                               optional=True, builtin=True)
STORAGE_KINDS: tuple[ResourceKind, ...] = (CLAIMS, VOLUMES, STORAGE_CLASSES)
# upstream's Workload API (Kubernetes 1.36, alpha, off by default): a 404 while it is not served
WORKLOAD_POD_GROUPS = ResourceKind("PodGroup", "scheduling.k8s.io/v1alpha2", "/apis/scheduling.k8s.io/v1alpha2/podgroups",
                                   optional=True, name="PodGroup.scheduling.k8s.io", namespaced=True)
ALL_KINDS: tuple[ResourceKind, ...] = (NODES, PODS, EXTENDED_RESOURCES, RESOURCE_CLASSES, POD_GROUPS,
                                       DISRUPTION_BUDGETS, PRIORITY_CLASSES, *STORAGE_KINDS)
# what the scheduler, `kubectl tessera`'s snapshot and `tessera record` watch: upstream PodGroups too
# (optional: a 404 while the alpha API is off)
SCHEDULER_KINDS: tuple[ResourceKind, ...] = (*ALL_KINDS, WORKLOAD_POD_GROUPS)


Unavailable = Literal["forbidden", "not_served", "unauthorized"]
"""Why a kind is treated as empty, as the apiserver last answered its LIST: the role may not read
it (403 on an optional kind, or on a kind already empty), the apiserver does not serve it (404 on
a CRD or an alpha API), or it rejects our credentials (401 on a kind already empty: a kind that
was read keeps its objects while the refusal is retried)."""
UNAVAILABLE_REASONS: tuple[Unavailable, ...] = ("forbidden", "not_served", "unauthorized")


@dataclass
class InformerStats:
    lists: int = 0    # complete LISTs delivered (the first one included)
    relists: int = 0  # LISTs forced by 410 Gone (or a resource that went missing)
    watches: int = 0  # watch streams opened with HTTP 200
    events: int = 0   # events delivered to the sink, synthetic ones included
    errors: int = 0   # failures that were retried (transport, HTTP, JSON, sink)


class _Expired(Exception):
    """Our resourceVersion (or continue token) is too old: only a relist can catch up."""


class _Silent(Exception):
    """The watch stream sent nothing (no event, no BOOKMARK) for longer than the apiserver's bookmark
    period allows: the connection is open but stalled (a proxy holding responses, a half-dead
    peer). client-go finds these with HTTP/2 pings (ReadIdleTimeout 30 s + PingTimeout 15 s,
    k8s.io/apimachinery pkg/util/net/http.go); over HTTP/1.1 the bookmarks are the heartbeat.
    `sent`: the stream had sent something before. One silent from its start may be healthy: the
    watch cache sends a watch only what is newer than the resourceVersion it started from,
    bookmarks included (k8s.io/apiserver cache_watcher.go `process`), and a bookmark carries its
    resource's last version, so a watch of a kind nothing changed since gets none."""

    def __init__(self, seconds: float, sent: bool = True) -> None:
        super().__init__(f"the watch sent nothing for {seconds:.0f} s")
        self.seconds = seconds
        self.sent = sent


@dataclass
class _QuietSpell:
    """Watches of a kind that sent nothing from their start and were restarted (`_Silent`, not
    `sent`), since one last sent something: a quiet kind's (nothing newer than our resourceVersion,
    so not even a bookmark) or a stalled stream's. Only what comes next tells: the restarted watch
    (or the relist a 410 calls for) delivering at once changes the held streams should have sent
    proves a stall (`Informer._quiet_ended`); a restart that is quiet too adds to the spell."""

    seconds: float = 0.0
    restarts: int = 0


class _Unavailable(Exception):
    """404 on LIST: the resource is not served (typically a CRD that is not installed)."""


class _HttpError(Exception):
    def __init__(self, status: object, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


class Denials:
    """The apiserver refusing an InformerSet's credentials (401) or permissions (403).

    Retried like any error, but said once: the first refusal is one error line that says why and
    what to check; while it lasts the retries are silent (a bad token would otherwise log a warning
    per kind and retry, forever); when every kind gets through again one info line says so.
    `reason` is the one-line account /readyz gives meanwhile.
    """

    def __init__(self) -> None:
        self._by_kind: dict[str, _HttpError] = {}

    def refused(self, kind: str, err: _HttpError) -> None:
        first = not self._by_kind
        self._by_kind[kind] = err
        if first:
            log.error("informers.denied", kind=kind, status=err.status, reason=err.message,
                      message=f"{_denial_text(err, [kind])}; retrying with backoff")

    def allowed(self, kind: str) -> None:
        if self._by_kind.pop(kind, None) is not None and not self._by_kind:
            log.info("informers.allowed", kind=kind, message="the apiserver accepts our requests again")

    @property
    def reason(self) -> str | None:
        if not self._by_kind:
            return None
        return _denial_text(next(iter(self._by_kind.values())), sorted(self._by_kind))


class Answers:
    """The apiserver answering one informer of a set (a LIST delivered, a watch opened, a 410):
    wakes the set's others that wait out a connection error's pause. Back from a restart, the
    apiserver is then found by whichever informer retries first, not by each at the end of its own
    pause (up to a minute after an outage's retries). Only those pauses end early: one after an
    HTTP error (a 429, a 5xx) is the server asking for time."""

    def __init__(self) -> None:
        self._event: anyio.Event | None = None

    def answered(self) -> None:
        if self._event is not None:
            self._event.set()
            self._event = None

    async def pause(self, seconds: float) -> bool:
        """Sleep `seconds`, or less if the server answers another informer meanwhile (True then)."""
        if self._event is None:
            self._event = anyio.Event()
        event = self._event
        with anyio.move_on_after(seconds):
            await event.wait()
            return True
        return False


def _denial_text(err: _HttpError, kinds: Sequence[str]) -> str:
    """One line, most telling part first (/readyz truncates long reasons)."""
    if err.status == 401:
        return ("the apiserver rejected our credentials (HTTP 401 Unauthorized): check the token or client "
                "certificate in the kubeconfig")
    return f"the apiserver denied access to {', '.join(kinds)} (HTTP {err.status}): {err.message}"


def _key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not meta.get("name"):
        raise ValueError("object without metadata.name")
    namespace = meta.get("namespace")
    return f"{namespace}/{meta['name']}" if namespace else str(meta["name"])


def _held_back(event_type: object, obj: object, restarted: float) -> bool:
    """Whether a change delivered at once by a restarted watch (or the relist its 410 called for)
    is evidence that the stream before held it back: its object was last written at least
    STALL_EVIDENCE_MARGIN_SECONDS before the restart (`restarted`, wall clock seconds). When it was
    last written is the newest time it carries (`_written`). A DELETED event carries the object as
    it was before, an object without those times tells nothing: no evidence, as a change made just
    as the watch restarted (a quiet kind's, which are restarted every WATCH_SILENCE_SECONDS) is none."""
    if event_type == "DELETED" or not isinstance(obj, dict) or not isinstance(meta := obj.get("metadata"), dict):
        return False
    try:
        stamps = list(_written(event_type, meta, obj.get("status")))
    except (ValueError, TypeError, OverflowError):  # a time the apiserver would not have written
        return False
    if not stamps or any(stamp.tzinfo is None for stamp in stamps):
        return False
    return max(stamps).timestamp() <= restarted - STALL_EVIDENCE_MARGIN_SECONDS


def _written(event_type: object, meta: dict[str, Any], status: object) -> Iterator[datetime]:
    """The times an object says it was written: each `metadata.managedFields[].time` (an update,
    a patch, an apply), else its creationTimestamp if ADDED (a MODIFIED one's may be long before
    the change); and the writes that leave managedFields as they were: a graceful deletion (when
    it was asked: deletionTimestamp less deletionGracePeriodSeconds) and a condition's move (its
    lastTransitionTime: a Binding's PodScheduled)."""
    fields = meta.get("managedFields")
    times = [entry["time"] for entry in fields if isinstance(entry, dict) and isinstance(entry.get("time"), str)] \
        if isinstance(fields, list) else []
    if not times and event_type == "ADDED" and isinstance(meta.get("creationTimestamp"), str):
        times = [meta["creationTimestamp"]]
    yield from (datetime.fromisoformat(stamp) for stamp in times)
    if meta.get("deletionTimestamp") is not None:
        grace = meta.get("deletionGracePeriodSeconds") or 0
        if not isinstance(meta["deletionTimestamp"], str) or not isinstance(grace, int):
            raise TypeError("deletionTimestamp or deletionGracePeriodSeconds of no such type")
        yield datetime.fromisoformat(meta["deletionTimestamp"]) - timedelta(seconds=grace)
    conditions = status.get("conditions") if isinstance(status, dict) else None
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, dict) and isinstance(condition.get("lastTransitionTime"), str):
            yield datetime.fromisoformat(condition["lastTransitionTime"])


def _freeing(obj: dict[str, Any]) -> int:
    """Where a relist applies `obj` among the changes (lowest first): 0 for a pod in a terminal
    phase (Succeeded, Failed: its devices are free, it takes none), 1 for one with a
    deletionTimestamp (its hold on devices, if it has one, ends), 2 for anything else."""
    if in_terminal_phase(obj):
        return 0
    return 1 if _meta(obj, "deletionTimestamp") else 2


def _meta(obj: dict[str, Any], field: str) -> str:
    meta = obj.get("metadata")
    value = meta.get(field) if isinstance(meta, dict) else None
    return value if isinstance(value, str) else ""


def field_selected(obj: dict[str, Any], field_selector: str) -> bool:
    """Whether the apiserver's equality field selector (`a.b=v,c=w`, `==` too) picks `obj`: each
    dotted field's value, as the string the apiserver compares ("" when unset), equals its value.
    The catch-up tells by it which stored objects its LIST was asked about."""
    for term in filter(None, field_selector.split(",")):
        field, _, wanted = term.partition("==") if "==" in term else term.partition("=")
        if "!" in field:
            raise ValueError(f"only equality field selectors are supported, not {term!r}")
        value: Any = obj
        for part in field.strip().split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if str(value if value is not None else "") != wanted.strip():
            return False
    return True


async def _lines(response: aiohttp.ClientResponse, silence: Callable[[], float | None],
                 wake_at: float | None = None) -> AsyncIterator[bytes]:
    """Newline-delimited chunks of a watch stream; raises `_Silent` when no whole line came for
    `silence()` seconds (None: no such bound; asked at every read, as it can arm mid-stream). With
    `wake_at` (monotonic), an empty line then if the stream is waiting: a moment for the caller to
    judge what came before it even when nothing comes after.

    Not ``content.readline()``: aiohttp caps a line at its buffer high-water mark (128-512 KiB
    depending on the version) and a Node or Pod can legitimately be larger (objects go up to
    ~1.5 MiB), which would turn into an endless error/retry loop on that one object.
    """
    buffer = bytearray()
    last_line = time.monotonic()
    while True:
        bound = silence()
        deadline = min(math.inf if bound is None else last_line + bound, math.inf if wake_at is None else wake_at)
        if deadline == math.inf:  # nothing to wait for: no cancel scope around every read
            chunk = await response.content.readany()
        else:
            with anyio.move_on_after(deadline - time.monotonic()) as scope:
                chunk = await response.content.readany()
            if scope.cancelled_caught:  # readany keeps what it had not returned: reading on loses nothing
                if bound is not None and time.monotonic() >= last_line + bound:
                    raise _Silent(time.monotonic() - last_line)
                wake_at = None
                yield b""
                continue
        if not chunk:
            break
        buffer += chunk
        start = 0
        while (end := buffer.find(b"\n", start)) >= 0:
            last_line = time.monotonic()
            yield bytes(buffer[start:end])
            start = end + 1
        del buffer[:start]
    if buffer.strip():
        yield bytes(buffer)  # a truncated last event: the JSON decoder will say so


class Informer:
    """List+watch of one resource kind into a synchronous sink; see the module docstring."""

    def __init__(self, http: KubeHttp, kind: ResourceKind, sink: EventSink, *, page_size: int = 500,
                 watch_timeout_seconds: int = MIN_WATCH_TIMEOUT, label_selector: str | None = None,
                 field_selector: str | None = None, denials: Denials | None = None,
                 answers: Answers | None = None) -> None:
        self.http = http
        self.denials = denials or Denials()
        self.answers = answers or Answers()
        self.kind = kind
        self.sink = sink
        self.page_size = page_size
        self.watch_timeout_seconds = watch_timeout_seconds
        self._selectors: list[tuple[str, str]] = []
        if label_selector:
            self._selectors.append(("labelSelector", label_selector))
        if field_selector:
            self._selectors.append(("fieldSelector", field_selector))
        self.synced = anyio.Event()  # set once the first LIST is delivered (never cleared)
        self.stats = InformerStats()
        # why the kind is treated as empty now (None: it is read)
        self.unavailable: Unavailable | None = None
        self._unavailable_told = float("-inf")  # when (monotonic) the warning last said so
        self._unavailable_since = float("-inf")  # when (monotonic) this episode began
        self.resource_version = ""
        # when (monotonic clock) the LIST whose objects the store holds was sent: a consistent
        # read, so every write acknowledged before then is in the store (`InformerSet.listed_since`)
        self.listed_since: float | None = None
        self._store: dict[str, dict[str, Any]] = {}
        # field selector -> the resourceVersion of the last `catch_up` LIST with it: a whole picture
        # of the objects it picks at that version, so older news of them is old, stored or not
        # (dropped once the watch has passed it: nothing older can come then)
        self._pictures: dict[str, str] = {}
        # a watch of this kind has delivered a BOOKMARK: the apiserver serves its watches from the
        # watch cache, which sends one about every minute, so a longer silence is a stall (with the
        # cache off — `--watch-cache=false`, or a size of 0 for the resource — none come, and only
        # the read timeout can tell)
        self.bookmarks_seen = False
        self._quiet: _QuietSpell | None = None
        # when (wall clock, as the apiserver's metadata times) the latest watch was asked for: what
        # its restart delivers at once proves a stall only if written before then (`_held_back`)
        self._watch_sent = float("-inf")
        self._failures = 0          # backoffs since the last quiet BACKOFF_RESET seconds
        self._last_backoff = float("-inf")
        # a pause since the last delivered LIST was for no answer (connection refused, a timeout):
        # the next delivered LIST or 410 forgets the pauses (those of HTTP errors and bugs count on)
        self._outage = False
        # a 410 (or an unforeseen error) made the store stale: a relist is due and its LIST not yet
        # delivered (while it waits its pause or its LIST fails); `tessera_informer_relist_pending`
        self.relist_pending = False

    def __len__(self) -> int:
        return len(self._store)

    @property
    def available(self) -> bool:
        return self.unavailable is None

    def objects(self) -> list[dict[str, Any]]:
        """The objects as last listed or watched (read, never changed: the sink has them too)."""
        return list(self._store.values())

    # --- main loop --------------------------------------------------------------------------

    async def run(self) -> None:
        """List, then watch, forever; only cancellation ends it."""
        must_list = True
        while True:
            unanswered = False  # a connection error: the pause ends when another informer gets an answer
            relist = False  # a 410: the relist still tells whether a quiet spell was a stall
            try:
                if must_list:
                    await self._list()
                    must_list = False
                await self._watch()
                continue  # the server ended the watch (timeoutSeconds): resume from our RV
            except _Silent as err:  # stalled, or (silent from its start) maybe quiet: resume from our RV either way
                if err.sent:
                    log.warning("informer.watch_silent", kind=self.kind.label, silent_seconds=round(err.seconds, 1),
                                resource_version=self.resource_version,
                                message=f"the {self.kind.label} watch sent nothing (no event, no bookmark) for "
                                        f"{err.seconds:.0f} s, longer than the apiserver's bookmark period allows: "
                                        "restarting it")
                else:
                    self._quiet = self._quiet or _QuietSpell()
                    self._quiet.seconds += err.seconds
                    self._quiet.restarts += 1
                    log.debug("informer.watch_quiet", kind=self.kind.label, silent_seconds=round(err.seconds, 1),
                              resource_version=self.resource_version,
                              message=f"the {self.kind.label} watch sent nothing for {err.seconds:.0f} s from its "
                                      f"start: nothing newer than resourceVersion {self.resource_version} (the "
                                      "apiserver sends no bookmark then), or a stall: restarting it")
                continue
            except _Expired as err:
                must_list = relist = True
                self.relist_pending = True
                self.stats.relists += 1
                # A 410 is an answer: the server is back, and the pauses an outage piled up while it
                # was not (connection refused through an apiserver restart, up to 60 s) say nothing
                # about it now. The reflector keeps them (its one backoff manager forgets only after
                # two minutes without a pause) and would wait them out with the cache stale; we
                # forget those, as a delivered LIST does. Any other pauses (429s, 5xx, earlier 410s:
                # an apiserver that answers but struggles) count on, and a watch counts as having
                # worked only as the reflector's: open BACKOFF_RESET without a pause (`_backoff`),
                # not for an event it delivered before it was closed.
                if self._outage:  # kept: the relist's LIST forgets this 410's pause too
                    self._failures = 0
                self.answers.answered()
                pause = self._backoff()  # the reflector's: a new ListAndWatch only after a backoff
                log.info("informer.relist", kind=self.kind.label, reason=str(err),
                         resource_version=self.resource_version, retry_in=round(pause, 2))
            except _Unavailable as err:
                must_list = True
                pause = UNAVAILABLE_RETRY_SECONDS
                self.denials.allowed(self.kind.label)
                self._mark_unavailable("not_served", str(err), "is not served by the apiserver (a CRD not "
                                                               "installed, an API turned off)")
            except _HttpError as err:
                self.stats.errors += 1
                pause = self._backoff()
                if err.status == 403 and self.kind.optional:
                    must_list = True
                    pause = UNAVAILABLE_RETRY_SECONDS
                    self._mark_unavailable("forbidden", str(err), "may not be read by the scheduler's role (update "
                                                                  "its RBAC: deploy/rbac/scheduler.yaml)")
                elif err.status in (401, 403):
                    self.denials.refused(self.kind.label, err)
                    if self.unavailable is not None:  # still empty: now for the latest answer's reason
                        # (403: a CRD installed since, for RBAC; 401: our credentials, whatever it was)
                        self.unavailable = "forbidden" if err.status == 403 else "unauthorized"
                else:
                    log.warning("informer.error", kind=self.kind.label, reason=describe_error(err),
                                relist=must_list, retry_in=round(pause, 2))
            except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as err:
                # Transport, HTTP or JSON trouble: resume the watch from our RV (or redo the
                # list if it was the list that failed).
                self.stats.errors += 1
                pause = self._backoff()
                unanswered = not isinstance(err, aiohttp.ClientResponseError | ValueError)
                self._outage = self._outage or unanswered
                log.warning("informer.error", kind=self.kind.label, reason=describe_error(err),
                            relist=must_list, retry_in=round(pause, 2))
            except Exception as err:  # a bug or something unforeseen: trust nothing, relist
                self.stats.errors += 1
                must_list = True
                self.relist_pending = True
                pause = self._backoff()
                log.exception("informer.error", kind=self.kind.label, reason=describe_error(err),
                              relist=True, retry_in=round(pause, 2))
            if not relist:  # an error between: changes its retry delivers at once may be the outage's
                self._quiet = None
            if not unanswered:
                await anyio.sleep(pause)
            elif await self.answers.pause(pause):
                log.info("informer.retry_now", kind=self.kind.label, relist=must_list,
                         message="the apiserver answers another informer again: retrying now")

    def _backoff(self) -> float:
        """The next pause: doubling from BACKOFF_INITIAL up to BACKOFF_MAX, jittered by up to 100 %,
        back to the start after BACKOFF_RESET seconds without a pause (the reflector's manager)."""
        now = time.monotonic()
        if now - self._last_backoff > BACKOFF_RESET:
            self._failures = 0
        self._last_backoff = now
        delay = min(BACKOFF_MAX, BACKOFF_INITIAL * (1 << min(self._failures, 16)))
        self._failures += 1
        return delay * (1.0 + random.random())

    def _mark_unavailable(self, reason: Unavailable, error: str, why: str) -> None:
        """Treat the kind as empty (counted synced) for `reason`; warned when it starts, when its
        reason changes and every UNAVAILABLE_REPEAT_SECONDS while it lasts."""
        now = time.monotonic()
        if self.unavailable != reason or now - self._unavailable_told >= UNAVAILABLE_REPEAT_SECONDS:
            since = "" if self.unavailable is None else f" (for {now - self._unavailable_since:.0f} s)"
            if self.unavailable is None:
                self._unavailable_since = now
            self.unavailable = reason
            self._unavailable_told = now
            log.warning("informer.unavailable", kind=self.kind.label, reason=reason, error=error,
                        message=f"{self.kind.label} {why}; treating it as empty{since} and retrying every "
                                f"{UNAVAILABLE_RETRY_SECONDS:g} s")
        self._replace({})  # whatever we had is gone with the resource
        self.synced.set()

    # --- list ---------------------------------------------------------------------------------

    async def _list(self) -> None:
        """A complete (paginated) LIST, delivered as a diff against what the sink has seen.

        Pages are fetched one ahead of their intake (`_pages`), so the apiserver encodes the next
        page while this task hands the last one to the sink. When the sink has seen nothing of this
        kind (the first list), each page's objects go to it as they arrive: all of them are ADDED
        anyway, and the sink's work overlaps the apiserver's."""
        listed: dict[str, dict[str, Any]] = {}
        # only before the first sync: afterwards the sink schedules between pages, and half a list
        # (a pod bound elsewhere on a later page not yet counted) could give its GPU away
        as_they_come = not self._store and not self.synced.is_set()
        resource_version = ""
        sent = time.monotonic()
        # after a quiet spell, the metadata and status of what the relist finds, kept before
        # `_prepare` drops the managedFields that tell when each was written (`_held_back`)
        found: dict[str, dict[str, Any]] = {}

        def take(doc: dict[str, Any], whole: bool) -> None:
            nonlocal resource_version
            if whole:  # the whole list again: it replaces the pages so far
                listed.clear()
            if self._quiet is not None:
                found.update((_key(raw), {"metadata": dict(raw["metadata"]), "status": raw.get("status")})
                             for raw in doc.get("items") or ()
                             if isinstance(raw, dict) and isinstance(raw.get("metadata"), dict)
                             and raw["metadata"].get("name"))
            for key, item in self._items(doc):
                listed[key] = item
                if as_they_come and key not in self._store:
                    self._store[key] = item
                    self._emit("ADDED", item)
            meta = doc.get("metadata") or {}
            if not meta.get("continue"):
                resource_version = str(meta["resourceVersion"])

        await self._each_page(self._selectors, take)
        self.denials.allowed(self.kind.label)
        told = self._replace(listed, resource_version)
        if self._quiet is not None:
            self._quiet_ended(sum(_held_back(event_type, found.get(key), self._watch_sent) for event_type, key in told),
                              "the relist after it found")
        self.resource_version = resource_version
        self.listed_since = sent
        self.stats.lists += 1
        self.relist_pending = False
        if self._outage:  # the server answers again: a later error's pause starts from BACKOFF_INITIAL
            self._failures = 0
            self._outage = False
        self.answers.answered()
        if self.unavailable is not None:
            log.info("informer.available", kind=self.kind.label, was=self.unavailable)
            self.unavailable = None
        if not self.synced.is_set():
            self.synced.set()
            log.info("informer.synced", kind=self.kind.label, objects=len(self._store),
                     resource_version=resource_version)

    def _items(self, doc: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
        """A LIST page's objects with their store keys (unreadable ones skipped, as client-go does)."""
        for raw in doc.get("items") or ():
            if not isinstance(raw, dict):
                self.stats.errors += 1
                log.warning("informer.unreadable_item", kind=self.kind.label, item=str(raw)[:200])
                continue
            item = self._prepare(raw)
            key = self._checked_key(item)
            if key is not None:
                yield key, item

    async def _each_page(self, selectors: Sequence[tuple[str, str]],
                         take: Callable[[dict[str, Any], bool], None]) -> None:
        """A LIST with `selectors`, each page handed to `take(doc, whole)` as it arrives, in order
        (`whole`: the whole list again, which replaces the pages so far); raises what the LIST
        raised, as itself (`_pages`), and stops fetching then."""
        failure: BaseException | None = None
        send, receive = anyio.create_memory_object_stream[_Page](1)
        async with anyio.create_task_group() as group:
            group.start_soon(self._pages, send, selectors)
            async with receive:
                async for page in receive:
                    if isinstance(page, BaseException):
                        failure = page
                        break
                    if isinstance(page, _FullList):
                        take(page.doc, True)
                    else:
                        take(page, False)
            group.cancel_scope.cancel()  # a failure stops the fetcher (it has finished otherwise)
        if failure is not None:
            raise failure

    async def _pages(self, send: MemoryObjectSendStream[_Page], selectors: Sequence[tuple[str, str]]) -> None:
        """The LIST's pages, decoded, in order; a failure is handed over (and ends the pages) so
        that `_each_page` raises it as itself, not wrapped in the task group's exception group."""
        async with send:
            token = ""
            while True:
                query = [("limit", str(self.page_size)), *selectors]
                if token:
                    query.append(("continue", token))
                try:
                    response = await self.http.request("GET", self.kind.path, query=query,
                                                       timeout=LIST_TIMEOUT, limited=False)
                    if response.status == 410 and token:
                        # the continue token expired between pages: client-go's pager
                        # (FullListIfExpired) finishes with one LIST without a limit, which
                        # replaces the pages so far (a paged LIST slower than the token's life
                        # would otherwise start over for ever)
                        log.info("informer.full_list", kind=self.kind.label, reason=response.message())
                        response = await self.http.request("GET", self.kind.path, query=list(selectors),
                                                           timeout=LIST_TIMEOUT, limited=False)
                        _raise_for_status(response, self.kind)
                        whole = response.json()
                        if "resourceVersion" not in (whole.get("metadata") or {}):
                            raise ValueError(f"{self.kind.label} list: no metadata.resourceVersion")
                        await send.send(_FullList(whole))
                        return
                    _raise_for_status(response, self.kind)
                    doc = response.json()
                    meta = doc.get("metadata") or {}
                    token = str(meta.get("continue") or "")
                    if not token and "resourceVersion" not in meta:
                        raise ValueError(f"{self.kind.label} list: the last page has no metadata.resourceVersion")
                except Exception as err:  # noqa: BLE001 - handed over, raised by _list
                    await send.send(err)
                    return
                await send.send(doc)
                if not token:
                    return

    def _replace(self, listed: dict[str, dict[str, Any]], resource_version: str = "") -> list[tuple[str, str]]:
        """Make the store equal `listed` (a LIST at `resource_version`), telling the sink only what
        changed: every deletion first (objects gone, and the old incarnation of one deleted and
        created again in the gap), then the changes that give devices up (`_freeing`: a pod
        finished, then one being deleted), then the rest, so the devices they held are free before
        anything listed can be seen taking them. An object the store holds in a version newer than
        the LIST (a `catch_up` read it after this LIST's snapshot) is kept: the LIST can only be
        older news of it. Returns what it told the sink: (event type, key) each."""
        told: list[tuple[str, str]] = []
        later = {key for key, old in self._store.items()
                 if compare_resource_versions(resource_version, _meta(old, "resourceVersion")) == -1}
        # objects a newer catch-up pictured are its to tell: one it found deleted stays out
        later |= {key for key, obj in listed.items() if key not in self._store and self._pictured(obj, resource_version)}
        for key in [key for key, old in self._store.items() if key not in later
                    and (key not in listed or _meta(old, "uid") != _meta(listed[key], "uid"))]:
            self._emit("DELETED", self._store.pop(key))
            told.append(("DELETED", key))
        # then what ends its hold on devices (a pod finished, one being deleted), then the rest, each
        # in list order: a relist shows at once a pod finished in the gap and one bound onto its GPU
        # since, and the new holder listed first was a GPU "given twice" (a DeviceConflict or
        # GPUsOvercommitted warning on the standby after an apiserver restart, nothing double-booked)
        for key, obj in sorted(listed.items(), key=lambda entry: _freeing(entry[1])):  # stable
            if key in later:
                continue
            old = self._store.get(key)
            if old is None:
                self._store[key] = obj
                self._emit("ADDED", obj)
                told.append(("ADDED", key))
            elif _meta(old, "resourceVersion") != _meta(obj, "resourceVersion"):
                self._store[key] = obj
                self._emit("MODIFIED", obj)
                told.append(("MODIFIED", key))
        return told

    # --- watch --------------------------------------------------------------------------------

    async def _watch(self) -> None:
        timeout = int(self.watch_timeout_seconds * (random.random() + 1.0))  # the reflector's spread
        query = [("watch", "true"), ("resourceVersion", self.resource_version),
                 ("allowWatchBookmarks", "true"), ("timeoutSeconds", str(timeout)), *self._selectors]
        started, self._watch_sent = time.monotonic(), time.time()
        async with self.http.stream(self.kind.path, query, read_timeout=timeout + READ_TIMEOUT_MARGIN) as response:
            if response.status == 404:  # the resource went away: let a LIST decide what it means
                raise _Expired("watch answered 404 Not Found")
            if response.status != 200:
                _raise_for_status(Response(response.status, await response.read()), self.kind)
            self.denials.allowed(self.kind.label)
            self.stats.watches += 1
            self.answers.answered()
            received = False
            opened, before = time.monotonic(), self.stats.events
            replayed = opened + STALL_REPLAY_SECONDS  # what came by then was held back, after a quiet spell
            late = 0  # of those, the ones written before the watch was asked for: the evidence
            try:
                async for line in _lines(response, self._silence_bound,
                                             None if self._quiet is None else replayed):
                    if self._quiet is not None and time.monotonic() >= replayed and (line.strip() or
                                                                                     self.stats.events > before):
                        self._quiet_ended(late, "its restart delivered at once")
                    if not line.strip():
                        continue
                    event, told = orjson.loads(line), self.stats.events
                    # judged before `_prepare` drops the managedFields that say when it was written
                    evidence = self._quiet is not None and isinstance(event, dict) and _held_back(
                        event.get("type"), event.get("object"), self._watch_sent)
                    self._on_watch_event(event)
                    if evidence and self.stats.events > told:
                        late += 1
                    received = True
            except _Silent as err:
                raise _Silent(err.seconds, received) from None
            finally:  # the stream ended (or failed) within its first moments, after delivering some
                if self._quiet is not None and self.stats.events > before:
                    self._quiet_ended(late, "its restart delivered at once")
        if not received and time.monotonic() - started < 1.0:
            raise _HttpError(200, "watch closed at once without data")

    def _quiet_ended(self, late: int, how: str) -> None:
        """The quiet spell is over: `late` changes written before the restart came at once after it
        (`how`, `_held_back`), which only a stalled stream explains (a quiet kind's restart delivers
        nothing until something changes, and then what was written after it), and the operator is
        told; none, and it was quiet."""
        spell, self._quiet = self._quiet, None
        if late and spell is not None:
            log.warning("informer.watch_stalled", kind=self.kind.label, silent_seconds=round(spell.seconds, 1),
                        restarts=spell.restarts, late_events=late, resource_version=self.resource_version,
                        message=f"the {self.kind.label} watch sent nothing for {spell.seconds:.0f} s from its start "
                                f"({spell.restarts} restart(s)), and {how} {late} change{'s' if late > 1 else ''} "
                                "made meanwhile: it was stalled, not quiet, and the scheduler did not see "
                                "them until now")

    def _silence_bound(self) -> float | None:
        return WATCH_SILENCE_SECONDS if self.bookmarks_seen else None

    def _on_watch_event(self, event: Any) -> None:
        if not isinstance(event, dict) or not isinstance(event.get("object"), dict):
            # well-formed JSON but no event: skipped, as client-go's watch handler does (the
            # server would replay it at every reconnect from this resourceVersion)
            self.stats.errors += 1
            log.warning("informer.unreadable_event", kind=self.kind.label, line=str(event)[:200])
            return
        event_type, obj = event.get("type"), event["object"]
        if event_type == "ERROR":
            code = obj.get("code")
            message = str(obj.get("message") or obj.get("reason") or "watch error")
            if code == 410 or obj.get("reason") in ("Expired", "Gone"):
                raise _Expired(message)
            raise _HttpError(code, message)
        resource_version = _meta(obj, "resourceVersion")
        if event_type in ("ADDED", "MODIFIED", "DELETED"):
            obj = self._prepare(obj)
            key = self._checked_key(obj)
            if key is not None and (self._not_newer(key, resource_version)
                                    or (self._pictures and self._pictured(obj, resource_version))):
                log.debug("informer.stale_event", kind=self.kind.label, key=key, type=event_type,
                          resource_version=resource_version)
            elif key is not None:
                if event_type == "DELETED":
                    self._store.pop(key, None)
                else:
                    self._store[key] = obj
                self._emit(event_type, obj)
        elif event_type == "BOOKMARK":
            self.bookmarks_seen = True
        else:
            log.warning("informer.unknown_event", kind=self.kind.label, type=event_type)
        if resource_version:
            self.resource_version = resource_version
            if self._pictures:  # after a takeover only: nothing to do on the watch's usual path
                self._pictures = {selector: as_of for selector, as_of in self._pictures.items()
                                  if compare_resource_versions(resource_version, as_of) == -1}

    def _pictured(self, obj: dict[str, Any], resource_version: str) -> bool:
        """A `catch_up` LIST newer than `resource_version` (or as new) pictured every object its
        selector picks, and `obj` is one: news of it at that version is old news, whether the store
        holds it or the LIST found it deleted (a lagging watch's backlog would bring it back)."""
        return any(compare_resource_versions(resource_version, as_of) in (-1, 0) and field_selected(obj, selector)
                   for selector, as_of in self._pictures.items())

    def _not_newer(self, key: str, resource_version: str) -> bool:
        """The store already holds `key` in this version or a newer one: a watch event a
        `catch_up` got ahead of (resourceVersions of one resource are ordered across its objects,
        so a delete or re-create older than the store's version is old news too)."""
        held = self._store.get(key)
        return held is not None and compare_resource_versions(resource_version,
                                                              _meta(held, "resourceVersion")) in (-1, 0)

    async def catch_up(self, field_selector: str) -> int:
        """Bring the objects `field_selector` picks up to what the apiserver holds *now*, ahead of
        the watch: a LIST without a resourceVersion (a consistent read: every write the apiserver
        acknowledged before it is in the answer). First, an object the store holds that the
        selector picks, at a version older than the LIST's, and that the LIST lacks was deleted
        meanwhile: it goes, as DELETED (as the watch's DELETED would, only sooner: before the new
        objects come in, so a GPU the deleted pod held and a newer pod holds now is not judged
        taken twice). One the watch showed at a newer version than the LIST's (created after it)
        stays. Then the listed objects newer than the store's — or not in it — go to the sink, as
        MODIFIED (ADDED when new; a re-created one's old incarnation DELETED first). The watch's
        older news of these objects — and of the ones it found deleted, which a lagging watch's
        backlog would bring back — and an older relist's copies are skipped afterwards
        (`_not_newer`, `_pictured`). Returns how many objects changed. Raises what the LIST raised; the store is untouched then."""
        listed: dict[str, dict[str, Any]] = {}
        as_of = [""]  # the LIST's resourceVersion

        def take(doc: dict[str, Any], whole: bool) -> None:
            if whole:
                listed.clear()
            listed.update(self._items(doc))
            as_of[0] = _meta(doc, "resourceVersion") or as_of[0]

        await self._each_page([("fieldSelector", field_selector)], take)
        changed = 0
        gone = [key for key, held in self._store.items()
                if key not in listed and as_of[0] and field_selected(held, field_selector)
                and compare_resource_versions(_meta(held, "resourceVersion"), as_of[0]) == -1]
        for key in gone:
            self._emit("DELETED", self._store.pop(key))
            changed += 1
        if as_of[0]:
            self._pictures[field_selector] = as_of[0]
        for key, obj in listed.items():
            held = self._store.get(key)
            version = _meta(obj, "resourceVersion")
            if held is not None and (self._not_newer(key, version) or _meta(held, "resourceVersion") == version):
                continue  # the watch has shown this version already, or a later one
            same = held is not None and _meta(held, "uid") == _meta(obj, "uid")
            if held is not None and not same:
                self._emit("DELETED", self._store.pop(key))
            self._store[key] = obj
            self._emit("MODIFIED" if same else "ADDED", obj)
            changed += 1
        return changed

    def _prepare(self, obj: dict[str, Any]) -> dict[str, Any]:
        """kind/apiVersion filled in (LIST items lack them), and no managedFields: server-side
        apply bookkeeping is often a third of an object, and nothing downstream reads it."""
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            meta.pop("managedFields", None)
        if "kind" in obj and "apiVersion" in obj:
            return obj
        return {"kind": self.kind.kind, "apiVersion": self.kind.api_version, **obj}

    def _checked_key(self, obj: dict[str, Any]) -> str | None:
        """The store key, or None (logged, skipped) for an object without a name: retrying
        would only fetch the same object again."""
        try:
            return _key(obj)
        except ValueError as err:
            self.stats.errors += 1
            log.warning("informer.bad_object", kind=self.kind.label, reason=str(err))
            return None

    def _emit(self, event_type: str, obj: dict[str, Any]) -> None:
        self.stats.events += 1
        try:
            self.sink(event_type, obj)
        except Exception as err:  # the sink's bug must not stop the informer (or lose our place)
            self.stats.errors += 1
            log.exception("informer.sink_error", kind=self.kind.label, type=event_type,
                          key=_key(obj), reason=describe_error(err))


@dataclass(frozen=True, slots=True)
class _FullList:
    """A LIST without `limit`, sent after a page's continue token expired: all items at once."""

    doc: dict[str, Any]


_Page = dict[str, Any] | _FullList | BaseException  # what `_pages` hands `_each_page`


def _raise_for_status(response: Response, kind: ResourceKind) -> None:
    if response.ok:
        return
    if response.status == 410:
        raise _Expired(response.message())
    if response.status == 404 and not kind.builtin:
        raise _Unavailable(response.message())
    raise _HttpError(response.status, response.message())


class InformerSet:
    """One informer per kind, feeding one sink; what the scheduler loop and `record` run."""

    def __init__(self, http: KubeHttp, sink: EventSink, kinds: Sequence[ResourceKind] = ALL_KINDS,
                 **informer_kwargs: Any) -> None:
        self.denials = Denials()
        self.answers = Answers()
        self.informers = tuple(Informer(http, kind, sink, denials=self.denials, answers=self.answers,
                                        **informer_kwargs)
                               for kind in kinds)

    async def run(self) -> None:
        """Every informer, until cancelled (cancelling it ends them all)."""
        async with anyio.create_task_group() as group:
            for informer in self.informers:
                group.start_soon(informer.run, name=f"informer-{informer.kind.label}")

    async def wait_synced(self) -> None:
        for informer in self.informers:
            await informer.synced.wait()

    @property
    def synced(self) -> bool:
        return all(informer.synced.is_set() for informer in self.informers)

    @property
    def denied(self) -> str | None:
        """Why the apiserver refuses us (401/403) while it does, in one line; else None."""
        return self.denials.reason

    def stats(self) -> dict[str, InformerStats]:
        return {informer.kind.label: informer.stats for informer in self.informers}

    def listed_since(self, kind: ResourceKind) -> float | None:
        """When (monotonic clock) the oldest of `kind`'s LISTs held now was sent; None before
        every informer of `kind` has listed (or when none here watches it)."""
        times = [informer.listed_since for informer in self.informers if informer.kind == kind]
        if not times or None in times:
            return None
        return min(t for t in times if t is not None)

    def listed(self, kind: ResourceKind) -> list[dict[str, Any]]:
        """`kind`'s objects as last listed or watched; none when no informer here watches it."""
        return [obj for informer in self.informers if informer.kind == kind for obj in informer.objects()]

    async def catch_up(self, kind: ResourceKind, field_selectors: Sequence[str]) -> int:
        """`Informer.catch_up` of `kind`'s informer, once per field selector (field selectors have
        no set form: one LIST per value); how many objects changed."""
        changed = 0
        for informer in self.informers:
            if informer.kind == kind:
                for selector in field_selectors:
                    changed += await informer.catch_up(selector)
        return changed
