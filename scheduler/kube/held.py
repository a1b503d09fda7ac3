"""Writes `tessera.dev/held-devices` onto a bound pod whose `tessera.dev/devices` was edited.

The core holds every device such a pod named while bound (its containers keep what they were
given), and says so in a `DevicesAnnotationChanged` notice that carries the union, encoded. In
memory alone the union would die with the process: a restarted scheduler, a standby taking over
and `kubectl tessera` would read only the current annotation and give the original device away.
This writer puts it on the pod, so every reader's intake holds it too.

The write is a strategic-merge PATCH of pods/status (Tessera's RBAC has it; the apiserver keeps
metadata.annotations from a status write, only spec, deletionTimestamp and ownerReferences are
the old object's: podStatusStrategy.PrepareForUpdate) with the pod's uid as precondition, so a
pod created again under the name is never written. The value only grows (the core's union), so a
late or repeated write loses nothing. Every replica queues the wish; only the leader writes, so a
standby that takes over before the leader wrote does it. A wish the watch shows written (the pod's
HELD_DEVICES is its value: an earlier leader's write) is dropped.

The wish also carries the notices a standby saw but could not tell (only the leader records
Events): whichever replica writes the union reports them (`on_written`), so an edit made while
the leader was gone still reaches `kubectl describe pod`. A leader tells at once and queues none;
a wish the old leader wrote is dropped with its notices, as that leader told when it saw the edit.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from scheduler.core.annotations import HELD_DEVICES
from scheduler.core.state import Notice
from scheduler.kube.concurrency import Wakeup
from scheduler.kube.http import TRANSPORT_ERRORS, STRATEGIC_PATCH, KubeHttp
from scheduler.logs import describe_error

log = structlog.get_logger("tessera.held")


@dataclass(frozen=True, slots=True)
class _Wish:
    namespace: str
    name: str
    value: str  # the encoded assignment (annotations.encode_devices)
    untold: tuple[Notice, ...] = ()  # notices seen while standing by: reported with the write


class HeldDevicesWriter:
    def __init__(self, http: KubeHttp, allowed: Callable[[], bool], *, retry_seconds: float = 1.0,
                 on_written: Callable[[tuple[Notice, ...]], None] = lambda untold: None) -> None:
        self.http = http
        self.allowed = allowed
        self.on_written = on_written
        self._wishes: dict[str, _Wish] = {}  # pod uid -> the latest union (a superset of earlier ones)
        self._wake = Wakeup()
        self._retry_seconds = retry_seconds
        self.writes = 0

    def want(self, namespace: str, name: str, uid: str, value: str, untold: Notice | None = None) -> None:
        """Write `value` into the pod's HELD_DEVICES (it replaces an earlier wish: it contains it);
        `untold`: the notice of the edit, when this replica could not report it (a standby)."""
        earlier = self._wishes.get(uid)
        kept = earlier.untold if earlier is not None else ()
        self._wishes[uid] = _Wish(namespace, name, value, kept + ((untold,) if untold is not None else ()))
        self._wake.set()

    def observed(self, uid: str, value: str) -> None:
        """The watch shows the pod's HELD_DEVICES as `value`: a wish for it was written (by an
        earlier leader, which told of the edit itself) and is dropped with its notices."""
        wish = self._wishes.get(uid)
        if wish is not None and wish.value == value:
            del self._wishes[uid]

    def pod_gone(self, uid: str) -> None:
        """The pod was deleted: nothing left to write."""
        self._wishes.pop(uid, None)

    async def run(self) -> None:
        """Write the wishes until cancelled; a failed write (or one waiting for leadership) is tried
        again after `retry_seconds`."""
        retry = False
        while True:
            await self._wake.wait(self._retry_seconds if retry else math.inf)
            retry = False
            if not self.allowed():
                retry = bool(self._wishes)
                continue
            for uid, wish in list(self._wishes.items()):
                if not await self._write(uid, wish):
                    retry = True

    async def _write(self, uid: str, wish: _Wish) -> bool:
        """One PATCH; False when it is to be tried again."""
        await self.http.acquire()
        if not self.allowed():
            return False  # deposed while it waited for the token: the leader writes
        body = {"metadata": {"uid": uid, "annotations": {HELD_DEVICES: wish.value}}}
        path = f"/api/v1/namespaces/{wish.namespace}/pods/{wish.name}/status"
        try:
            response = await self.http.request("PATCH", path, body=body, content_type=STRATEGIC_PATCH,
                                               limited=False, resend=self.allowed)
        except TRANSPORT_ERRORS as err:
            log.warning("held.write_failed", pod=f"{wish.namespace}/{wish.name}", error=describe_error(err))
            return False
        if response.ok or response.status in (404, 409, 422):  # written, or the pod (that uid) is gone
            self._done(uid, wish, told=response.ok)
            self.writes += response.ok
            return True
        log.warning("held.rejected", pod=f"{wish.namespace}/{wish.name}", status=response.status,
                    message=response.message())
        if response.status >= 500 or response.status == 429:
            return False
        self._done(uid, wish, told=True)  # refused for good (a policy, a bad request): logged, dropped; the edit still told
        return True

    def _done(self, uid: str, wish: _Wish, *, told: bool) -> None:
        """The wish had its write: dropped (a newer one that came meanwhile is still to write, its
        notices less the ones reported here), and its notices reported when `told`."""
        current = self._wishes.get(uid)
        if current is wish:
            del self._wishes[uid]
        elif current is not None:
            self._wishes[uid] = _Wish(current.namespace, current.name, current.value,
                                      tuple(n for n in current.untold if n not in wish.untold))
        if told and wish.untold:
            self.on_written(wish.untold)
