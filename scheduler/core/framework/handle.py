"""What a plugin may ask of the framework that runs it (upstream's framework.Handle)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from scheduler.core.framework.cycle_state import PodContext
    from scheduler.core.framework.interface import Bools, Ints, QueueingHint, Reasons, Reservation
    from scheduler.core.framework.nodetable import NodeTable
    from scheduler.core.state import ClusterState, NodeInfo

T = TypeVar("T")


class Handle(Protocol):
    @property
    def state(self) -> ClusterState:
        """The cluster cache (read it; only the framework changes it)."""

    @property
    def table(self) -> NodeTable:
        """The node table (batch plugins' columns), rows in the state's node order."""

    def node_hint(self, plugin: str) -> QueueingHint:
        """The QueueingHint for node events of the filter plugin `plugin`: does the pod pass
        that plugin's own filter on `event.node` as its attempt would find the node (or, when
        it may preempt, once the pods it may evict there are gone)? Its own rule only, as
        upstream's node hints: the retry finds the next rejector, whose hints take over."""

    def passes_filter(self, plugin: str, ctx: PodContext, info: NodeInfo) -> bool:
        """Whether the filter plugin `plugin` lets the pod on the node (it does when the
        profile runs no Filter of it, or its filter does not apply to the pod)."""

    def usable_rows(self, members: Sequence[PodContext]) -> Bools:
        """The rows some of the pods may use now, as the filters judge each alone (a superset
        of where each fits): a gang's nodes no member can use hold none of them."""

    def find(self, kind: Callable[..., T]) -> T | None:
        """Another plugin of this profile that implements `kind` (a protocol), if any."""

    def filter_node(self, ctx: PodContext, info: NodeInfo) -> tuple[str, Reasons] | None:
        """The first filter plugin that rejects the node for the pod, with its reasons."""

    def resolvable(self, plugin: str) -> bool:
        """Whether removing pods from a node can resolve this filter plugin's rejection."""

    def unresolvable_rows(self, plugin: str, ctx: PodContext, rows: Ints) -> Bools:
        """Of these rows, rejected by `plugin`, those no eviction can resolve for this pod."""

    def reserve(self, ctx: PodContext, info: NodeInfo, now: float) -> Reservation:
        """What the pod would get on the node (it passed the filters there): devices, annotations."""
