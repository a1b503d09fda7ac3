"""`tessera run --gpu-map`: the GPU map page on the probe port, read from the running loop.

`/gpu-map` is the page (scheduler/view/page.py), `/gpu-map.json` the view model it fetches every
few seconds, built from the loop's core at request time: the handlers run on the loop's event
loop between two steps of the synchronous core, so each picture is one consistent state. Recent
decisions and the reasons pending pods wait come from the loop's hooks (the core keeps neither);
a standby, which decides nothing, reads the reasons from the pods' PodScheduled conditions
(`view.reasons`, the leader's word) and shows no decisions.

Read-only by construction: two GET routes, no query parameters read, nothing written to the
cluster; the view carries names, states and the scheduler's own messages — no annotations beyond
the device assignment, no environment, no configuration, no credentials. Off unless asked for:
the probe port is often reachable by more than the operator (`--bind-address 0.0.0.0` in the
Deployment).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import orjson
from aiohttp import web

from scheduler.core.framework.attempt import Attempt
from scheduler.kube.binder import BindResult, Outcome
from scheduler.kube.informers import PODS
from scheduler.kube.loop import LoopHooks, SchedulerLoop
from scheduler.kube.serving import GPU_MAP_DATA, GPU_MAP_PAGE, VARY, Route, accepts_gzip, gzipped
from scheduler.kube.status import SCHEDULER_ERROR
from scheduler.view.cluster import WaitReason, build_view
from scheduler.view.decisions import DecisionLog
from scheduler.view.model import ClusterView, as_dict
from scheduler.view.page import render_page
from scheduler.view.reasons import wait_reasons

PRUNE_EVERY = 30.0  # seconds between drops of reasons of pods that no longer wait
FRESH_FOR = 1.0  # seconds a built view answers further requests (the page asks every 3 s)
_HEADERS = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store", "Referrer-Policy": "no-referrer",
            "X-Frame-Options": "DENY"}


class DecisionHooks(LoopHooks):
    """The loop's hooks, passed on to `inner` (the metrics), with each decision noted in `log`."""

    def __init__(self, inner: LoopHooks, log: DecisionLog, clock: Callable[[], float] = time.time,
                 prune: Callable[[], None] = lambda: None) -> None:
        self.inner = inner
        self.log = log
        self.clock = clock
        self.prune = prune
        self._pruned_at = clock()

    def on_event(self, event_type: str, kind: str) -> None:
        self.inner.on_event(event_type, kind)

    def on_attempt(self, result: str, profile: str, seconds: float, attempt: Attempt) -> None:
        self.inner.on_attempt(result, profile, seconds, attempt)
        if result != "error" or attempt.error:  # a failed Binding is logged by on_bind, with its reason
            self.log.attempt(attempt, self.clock())

    def on_cycle(self, attempts: list[Attempt], seconds: float) -> None:
        self.inner.on_cycle(attempts, seconds)

    def on_bind(self, result: BindResult, redecided: bool = False) -> None:
        self.inner.on_bind(result, redecided)
        if result.outcome is not Outcome.BOUND:
            binding = result.binding
            # refused: the pod waits in the queue again, its condition SchedulerError with this
            # message (as the loop writes it); the placed attempt had dropped its last reason. One
            # the core decided again at once (changed by someone else) has no condition written;
            # one that fell back to the backoff (too many in a row) has, as any refusal
            waiting = (WaitReason(SCHEDULER_ERROR, result.refusal)
                       if result.outcome is Outcome.RETRY and not redecided else None)
            self.log.binding(f"{binding.namespace}/{binding.name}", binding.node, result.outcome.value,
                             result.message, self.clock(), waiting)

    def on_permit_wait(self, result: str, seconds: float) -> None:
        self.inner.on_permit_wait(result, seconds)

    def on_queue(self, counts: dict[str, int], incoming: dict[tuple[str, str], int]) -> None:
        self.inner.on_queue(counts, incoming)
        # pods deleted while they waited leave their reason behind: drop those now and then, also
        # when nobody looks at the page
        # abs: a wall clock stepped back (NTP, a resumed VM) must not stop the pruning until it catches up
        if abs(self.clock() - self._pruned_at) >= PRUNE_EVERY:
            self._pruned_at = self.clock()
            self.prune()


class GpuMap:
    """The page's routes over one loop. Install `hooks(...)` as the loop's hooks to see decisions."""

    def __init__(self, loop: SchedulerLoop, clock: Callable[[], float] = time.time) -> None:
        self.loop = loop
        self.log = DecisionLog()
        self.clock = clock
        # the page never changes while the process runs: render it (and its CSP hashes) once
        page = render_page(source_url=GPU_MAP_DATA.lstrip("/"))
        self._page = page.html.encode()
        self._page_headers = {**_HEADERS, "Content-Type": "text/html; charset=utf-8",
                              "Content-Security-Policy": page.content_security_policy}
        self._data: tuple[float, bytes] | None = None  # (built at, body) of the last /gpu-map.json
        self._gzipped: bytes | None = None  # that body gzipped, once the first viewer asked for it

    def hooks(self, inner: LoopHooks) -> LoopHooks:
        return DecisionHooks(inner, self.log, self.clock, self._prune)

    def _prune(self) -> None:
        """Keep the wait reasons of pods that still wait (pending, or their Binding held)."""
        core = self.loop.core
        state = core.state
        self.log.prune([pod.key for uid in state.pending if (pod := state.pods.get(uid)) is not None]
                       + [attempt.pod.key for attempt in core.held()])

    def view(self) -> ClusterView:
        self._prune()
        core = self.loop.core
        # a standby's page must not pass for the leader's: it decides nothing, so it shows no
        # decisions — also none from a term it led before losing the Lease, which another
        # replica's decisions have replaced — and why pods wait as their PodScheduled condition
        # says (the leader's word, as `kubectl tessera nodes` reads it), not its own old reasons
        leading = self.loop.is_leader()
        reasons = self.log.reasons() if leading else wait_reasons(self.loop.informers.listed(PODS))
        return build_view(core, source="live" if leading else "standby", now=self.clock(),
                          reasons=reasons, held=core.held(), decisions=self.log.recent() if leading else ())

    def routes(self) -> list[Route]:
        return [(GPU_MAP_PAGE, self._serve_page), (GPU_MAP_DATA, self._serve_data)]

    async def _serve_page(self, request: web.Request) -> web.Response:
        return web.Response(body=self._page, headers=self._page_headers)

    async def _serve_data(self, request: web.Request) -> web.Response:
        # the view is built on the scheduler's event loop: many viewers (or a script polling the
        # unauthenticated port) share one build per FRESH_FOR seconds instead of one each, and one
        # compression of it; abs: a wall clock stepped back rebuilds at once instead of serving
        # one picture until it catches up
        now = self.clock()
        if self._data is None or abs(now - self._data[0]) >= FRESH_FOR:
            self._data = (now, orjson.dumps(as_dict(self.view())))
            self._gzipped = None
        headers = {**_HEADERS, **VARY, "Content-Type": "application/json"}
        if accepts_gzip(request.headers.get("Accept-Encoding", "")):
            if self._gzipped is None:
                self._gzipped = gzipped(self._data[1])
            return web.Response(body=self._gzipped, headers={**headers, "Content-Encoding": "gzip"})
        return web.Response(body=self._data[1], headers=headers)
