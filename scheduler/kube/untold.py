"""The notices a replica saw while it could not record Events, kept for when it leads.

Only the leader records Events, and the core raises a notice once, when it first sees the
problem: typically while the informers list after a start (nobody leads yet) or on a standby. A
notice dropped then never reached `kubectl get events`, as the next leader's core had raised it
while that replica did not lead either. So a replica that cannot tell keeps what it saw here,
and tells it when it leads: once per term, and only while the problem still stands
(`Scheduler.still_stands`). Kept per object and reason (the latest message), at most `limit` of
them (the oldest go first, logged), and dropped when their object is deleted.

An edited devices annotation (DevicesAnnotationChanged) is not kept here: its notice travels with
the held-devices wish (`HeldDevicesWriter`), told by the replica that writes the union.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator

import structlog

from scheduler.core.state import Notice

log = structlog.get_logger("tessera.untold")

UNTOLD_LIMIT = 1000  # notices kept per replica; a cluster with more distinct problems loses the oldest

_Key = tuple[str, str, str]  # (kind, namespace/name or name, reason)


class UntoldNotices:
    def __init__(self, limit: int = UNTOLD_LIMIT) -> None:
        self.limit = limit
        self._notices: OrderedDict[_Key, Notice] = OrderedDict()

    def __iter__(self) -> Iterator[Notice]:
        return iter(list(self._notices.values()))

    def __len__(self) -> int:
        return len(self._notices)

    def add(self, notice: Notice) -> None:
        """Keep `notice` (a newer one of the same object and reason replaces it, at the end)."""
        key = (notice.kind, notice.key, notice.reason)
        self._notices.pop(key, None)
        self._notices[key] = notice
        while len(self._notices) > self.limit:
            (kind, name, reason), _ = self._notices.popitem(last=False)
            log.warning("untold.dropped", kind=kind, object=name, reason=reason, limit=self.limit,
                        message="too many notices seen while not leading: the oldest is not told as an Event")

    def object_gone(self, kind: str, key: str, uid: str) -> None:
        """The object was deleted: its notices (by uid where they name one) are not told."""
        for stored, notice in list(self._notices.items()):
            if notice.kind == kind and (notice.uid == uid if notice.uid and uid else notice.key == key):
                del self._notices[stored]

    def take(self) -> list[Notice]:
        """Every notice kept, oldest first; none is kept any more."""
        notices = list(self._notices.values())
        self._notices.clear()
        return notices
