"""Every plugin Tessera has, in one place: its name, how a profile builds it, its default weight.

The order is the filter order (upstream's: NodeUnschedulable, TaintToleration, NodeAffinity,
NodeResourcesFit; device classes last because they are the most expensive). Adding a plugin is
one module under `scheduler/core/plugins/` and one entry here (docs/architecture.md shows how).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from scheduler.api.config import Profile
from scheduler.core.framework.handle import Handle
from scheduler.core.framework.interface import Plugin
from scheduler.core.plugins.coscheduling import Coscheduling
from scheduler.core.plugins.devices import TesseraDevices
from scheduler.core.plugins.fit import NodeResourcesFit
from scheduler.core.plugins.fragmentation import TesseraFragmentation
from scheduler.core.plugins.node_affinity import NodeAffinity
from scheduler.core.plugins.node_unschedulable import NodeUnschedulable
from scheduler.core.plugins.taints import TaintToleration


@dataclass(frozen=True, slots=True)
class PluginSpec:
    kind: type[Plugin]
    build: Callable[[Handle, Profile], Plugin]
    default_weight: int | None  # score weight in the default profile; None: not scored by default

    @property
    def name(self) -> str:
        return self.kind.name


REGISTRY: tuple[PluginSpec, ...] = (
    PluginSpec(NodeUnschedulable, lambda handle, profile: NodeUnschedulable(handle), None),
    PluginSpec(TaintToleration, lambda handle, profile: TaintToleration(handle), 3),
    PluginSpec(NodeAffinity, lambda handle, profile: NodeAffinity(handle), 2),
    PluginSpec(NodeResourcesFit, lambda handle, profile: NodeResourcesFit(handle, profile.fit), 1),
    PluginSpec(Coscheduling, lambda handle, profile: Coscheduling(handle, profile.coscheduling), None),
    PluginSpec(TesseraDevices, lambda handle, profile: TesseraDevices(handle), 1),
    PluginSpec(TesseraFragmentation, lambda handle, profile: TesseraFragmentation(handle, profile.fragmentation),
               None),
)
