"""The cluster state: what the scheduler knows, kept in step with the watch streams.

`ClusterState` (cluster.py) holds the objects and per-node accounting; its parts by job are the
device ledger (ledger.py) and the gang index (gangs.py). Plugins read it as the cycle's snapshot;
everything outside the core asks `Scheduler`'s queries instead.
"""

from scheduler.core.state.cluster import ClusterState
from scheduler.core.state.events import ClusterEvent, EventKind, Notice
from scheduler.core.state.ledger import DeviceUse, allocating_resources
from scheduler.core.state.nodes import NodeInfo, Placement

__all__ = ["ClusterEvent", "ClusterState", "DeviceUse", "EventKind", "NodeInfo", "Notice", "Placement",
           "allocating_resources"]
