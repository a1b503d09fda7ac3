"""What a plugin may ask of the framework that runs it (upstream's framework.Handle)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from scheduler.core.state import ClusterEvent, ClusterState

T = TypeVar("T")


class Handle(Protocol):
    @property
    def state(self) -> ClusterState:
        """The cluster cache (read it; only the framework changes it)."""

    def fits_node(self, uid: str, event: ClusterEvent) -> bool:
        """QueueingHint for node events: does the pod now pass every filter on `event.node`?"""

    def find(self, kind: Callable[..., T]) -> T | None:
        """Another plugin of this profile that implements `kind` (a protocol), if any."""
