"""Every plugin Tessera has, in one place: its name, how a profile builds it, its default weight,
its arguments (model and parser, in the plugin's own module) and the names the seed's v1alpha1
configuration files used for it.

The order is the filter order (upstream's: NodeUnschedulable, NodeName, TaintToleration,
NodeAffinity, NodePorts, NodeResourcesFit, VolumeBinding, PodTopologySpread, InterPodAffinity; a gang's
topology domain before the resource checks because it is the cheapest and rules out the most
nodes; device classes last because they are the most expensive) and the order of upstream's
default multiPoint set. Adding a plugin is one module under
`scheduler/core/plugins/` and one entry here, plus the chart's schema and the configuration docs
that list plugins (docs/architecture.md, "Adding a plugin", says what).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from pydantic import BaseModel, ConfigDict

from scheduler.api.config_model import Profile, SchedulerConfig
from scheduler.api.config_reader import ArgsReader
from scheduler.core.framework.handle import Handle
from scheduler.core.framework.interface import (
    FilterPlugin,
    GroupPlugin,
    PlacementPlugin,
    Plugin,
    PostFilterPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    ReservePlugin,
    ScorePlugin,
)
from scheduler.core.plugins import coscheduling
from scheduler.core.plugins.coscheduling import Coscheduling
from scheduler.core.plugins.default_binder import DefaultBinder
from scheduler.core.plugins.devices import TesseraDevices
from scheduler.core.plugins.devices import args as device_args
from scheduler.core.plugins.fit import NodeResourcesFit
from scheduler.core.plugins.fit import args as fit_args
from scheduler.core.plugins.fit import balanced
from scheduler.core.plugins.fragmentation import TesseraFragmentation
from scheduler.core.plugins.fragmentation import args as fragmentation_args
from scheduler.core.plugins import gpu_packing
from scheduler.core.plugins.preemption import DefaultPreemption
from scheduler.core.plugins.preemption import args as preemption_args
from scheduler.core.plugins import node_affinity_args
from scheduler.core.plugins.node_affinity import NodeAffinity
from scheduler.core.plugins.node_name import NodeName
from scheduler.core.plugins.node_ports import NodePorts
from scheduler.core.plugins.node_unschedulable import NodeUnschedulable
from scheduler.core.plugins.taints import TaintToleration
from scheduler.core.plugins.topology import TopologyPlacement
from scheduler.core.plugins.topology import args as topology_args
from scheduler.core.plugins.unhonoured_terms import TesseraUnhonouredTerms
from scheduler.core.plugins import volume_binding
from scheduler.core.plugins.volume_binding import VolumeBinding
from scheduler.core.plugins import interpod_affinity
from scheduler.core.plugins.interpod_affinity import InterPodAffinity
from scheduler.core.plugins import pod_topology_spread
from scheduler.core.plugins.pod_topology_spread import PodTopologySpread
from scheduler.core.plugins.priority_sort import PrioritySort
from scheduler.core.resources import GPU_RESOURCES


class NoArgs(BaseModel):
    """The args of a plugin that takes none."""

    model_config = ConfigDict(frozen=True, extra="forbid")


@dataclass(frozen=True, slots=True)
class ArgsSpec:
    """A plugin's `pluginConfig[].args`: the model, its parser, and the keys it knows."""

    model: type[BaseModel]
    parse: Callable[[ArgsReader], BaseModel]
    fields: tuple[str, ...]
    ignored: tuple[str, ...] = ()  # accepted for compatibility, without effect
    unused: tuple[str, ...] = ()  # of `fields`: read and shown in /configz, without effect in Tessera
    hints: Mapping[str, str] = field(default_factory=dict)  # why a known upstream key is refused


@dataclass(frozen=True, slots=True)
class LegacyForm:
    """How v1alpha1 (Kubernetes 1.17) files name the plugin: `enable` names switch it on (and
    pick its args through `resolve`), `disable` names switch it off, `args_name` is the
    pluginConfig entry read by `parse_args` (keys match case-insensitively, as Go decoded them)."""

    enable: tuple[str, ...] = ()
    disable: tuple[str, ...] = ()
    args_name: str | None = None
    parse_args: Callable[[ArgsReader], BaseModel] | None = None
    resolve: Callable[[str, BaseModel | None], BaseModel] | None = None


@dataclass(frozen=True, slots=True)
class GpuScore:
    """A score plugin that says where GPU pods go (`gpu_scoring_notices`): with which args
    (`applies`), as `condition` words it for the user."""

    applies: Callable[[BaseModel], bool] = lambda args: True
    condition: str = ""


@dataclass(frozen=True, slots=True)
class PluginSpec:
    kind: type[Plugin]
    build: Callable[[Handle, BaseModel], Plugin]  # (handle, the plugin's args or their defaults)
    default_weight: int | None = None  # score weight in the default profile; None: not scored by default
    args: ArgsSpec | None = None
    legacy: LegacyForm | None = None
    gpu_score: GpuScore | None = None  # its score places GPU pods (for a whole GPU, not a class's slice)

    @property
    def name(self) -> str:
        return self.kind.name

    @property
    def scores(self) -> bool:
        return issubclass(self.kind, ScorePlugin)

    @property
    def pre_scores(self) -> bool:
        return issubclass(self.kind, PreScorePlugin)

    def default_args(self) -> BaseModel:
        return self.args.model() if self.args is not None else NoArgs()

    def built_for(self, profile: Profile) -> bool:
        """Does a profile's runtime build this plugin? Every plugin with a part beside scoring
        (reserve, grouping, placement, post-filter, pre-enqueue, a Filter or PreFilter the profile
        did not turn off: `Profile.disabled_filters`, `disabled_pre_filters`); a plugin left with
        scoring only when the profile scores with it or runs its PreScore (otherwise it would
        cost for nothing)."""
        kind = self.kind
        filters = issubclass(kind, FilterPlugin) and self.name not in profile.disabled_filters
        pre_filters = issubclass(kind, PreFilterPlugin) and self.name not in profile.disabled_pre_filters
        other = issubclass(kind, ReservePlugin | GroupPlugin | PostFilterPlugin | PlacementPlugin | PreEnqueuePlugin)
        return filters or pre_filters or other or self.name in profile.score_weights or self.name in profile.pre_score


A = TypeVar("A", bound=BaseModel)


def _no_args(plugin: Callable[[Handle], Plugin]) -> Callable[[Handle, BaseModel], Plugin]:
    return lambda handle, args: plugin(handle)


def _with(plugin: Callable[[Handle, A], Plugin], model: type[A]) -> Callable[[Handle, BaseModel], Plugin]:
    def build(handle: Handle, args: BaseModel) -> Plugin:
        assert isinstance(args, model), f"{model.__name__} expected, got {type(args).__name__}"
        return plugin(handle, args)
    return build


REGISTRY: tuple[PluginSpec, ...] = (
    PluginSpec(PrioritySort, lambda handle, args: PrioritySort()),  # a name only: the queue sorts (queue.py)
    PluginSpec(NodeUnschedulable, _no_args(NodeUnschedulable)),
    PluginSpec(NodeName, lambda handle, args: NodeName()),
    PluginSpec(TaintToleration, _no_args(TaintToleration), 3, legacy=LegacyForm(disable=("TaintTolerationPriority",))),
    PluginSpec(NodeAffinity, _with(NodeAffinity, node_affinity_args.NodeAffinityArgs), 2,
               ArgsSpec(node_affinity_args.NodeAffinityArgs, node_affinity_args.parse_args, node_affinity_args.FIELDS),
               LegacyForm(disable=("NodeAffinityPriority",))),
    PluginSpec(NodePorts, _no_args(NodePorts)),
    PluginSpec(TopologyPlacement, _with(TopologyPlacement, topology_args.TopologyPlacementArgs),
               args=ArgsSpec(topology_args.TopologyPlacementArgs, topology_args.parse_args, topology_args.FIELDS)),
    PluginSpec(NodeResourcesFit, _with(NodeResourcesFit, fit_args.ScoringStrategy), 1, ArgsSpec(fit_args.ScoringStrategy, fit_args.parse_args, fit_args.FIELDS),
               LegacyForm(enable=tuple(fit_args.LEGACY_STRATEGIES),
                          disable=tuple(fit_args.LEGACY_STRATEGIES) + fit_args.LEGACY_PRIORITIES,
                          args_name=fit_args.LEGACY_ARGS_NAME, parse_args=fit_args.parse_legacy_args,
                          resolve=fit_args.resolve_legacy),
               GpuScore(lambda args: isinstance(args, fit_args.ScoringStrategy) and args.scores_gpus,
                        f"with a GPU resource ({', '.join(sorted(GPU_RESOURCES))}) in its scoringStrategy.resources")),
    # its args are the shell's (how long a Binding waits for the claims to be bound: kube/binder.py)
    PluginSpec(VolumeBinding, _no_args(VolumeBinding),
               args=ArgsSpec(volume_binding.VolumeBindingArgs, volume_binding.parse_args, volume_binding.FIELDS,
                             hints=volume_binding.HINTS)),
    PluginSpec(Coscheduling, _with(Coscheduling, coscheduling.CoschedulingArgs),
               args=ArgsSpec(coscheduling.CoschedulingArgs, coscheduling.parse_args, coscheduling.ARGS_FIELDS,
                             coscheduling.ARGS_IGNORED, unused=coscheduling.ARGS_UNUSED)),
    PluginSpec(TesseraDevices, _with(TesseraDevices, device_args.DeviceArgs), 1, ArgsSpec(device_args.DeviceArgs, device_args.parse_args, device_args.FIELDS)),
    PluginSpec(TesseraUnhonouredTerms, _no_args(TesseraUnhonouredTerms)),
    PluginSpec(PodTopologySpread, lambda handle, args: PodTopologySpread(handle), 2,
               ArgsSpec(pod_topology_spread.PodTopologySpreadArgs, pod_topology_spread.parse_args,
                        pod_topology_spread.FIELDS)),
    PluginSpec(InterPodAffinity, _with(InterPodAffinity, interpod_affinity.InterPodAffinityArgs), 2,
               ArgsSpec(interpod_affinity.InterPodAffinityArgs, interpod_affinity.parse_args, interpod_affinity.FIELDS)),
    # upstream's default profile scores with it (weight 1); Tessera's does not (balanced.py says why)
    PluginSpec(balanced.NodeResourcesBalancedAllocation, _with(balanced.NodeResourcesBalancedAllocation,
                                                               balanced.BalancedAllocationArgs),
               args=ArgsSpec(balanced.BalancedAllocationArgs, balanced.parse_args, balanced.FIELDS)),
    PluginSpec(TesseraFragmentation, _with(TesseraFragmentation, fragmentation_args.FragmentationArgs),
               args=ArgsSpec(fragmentation_args.FragmentationArgs, fragmentation_args.parse_args,
                             fragmentation_args.FIELDS), gpu_score=GpuScore()),
    PluginSpec(DefaultPreemption, _with(DefaultPreemption, preemption_args.PreemptionArgs),
               args=ArgsSpec(preemption_args.PreemptionArgs, preemption_args.parse_args, preemption_args.FIELDS)),
    PluginSpec(gpu_packing.TesseraGpuPacking, _with(gpu_packing.TesseraGpuPacking, gpu_packing.GpuPackingArgs),
               args=ArgsSpec(gpu_packing.GpuPackingArgs, gpu_packing.parse_args, gpu_packing.FIELDS),
               gpu_score=GpuScore()),
    PluginSpec(DefaultBinder, lambda handle, args: DefaultBinder()),  # a name only: Tessera binds (kube/binder.py)
)
BY_NAME: Mapping[str, PluginSpec] = {spec.name: spec for spec in REGISTRY}
# kube-scheduler's plugins (v1.36's in-tree registry) Tessera does not have, that a ported profile
# may enable or give args -> why, said when a file does (docs/not-supported.md): the one table
_VOLUMES = "docs/not-supported.md, Volumes"
_GANGS = ("Tessera's Coscheduling places gangs (the Workload API's spec.schedulingGroup, scheduler-plugins' PodGroups) "
          "and TopologyPlacement a gang's topology domain: enable those instead (docs/api.md, docs/topology.md)")
NOT_SUPPORTED: Mapping[str, str] = {
    "ImageLocality": "it scores nodes by the container images they already hold (Node status.images), which "
                     "Tessera does not read, and GPU placement outweighs an image pull; remove it from the profile "
                     "(docs/not-supported.md)",
    "VolumeZone": "it keeps a pod with a zonal PersistentVolume in the volume's zone labels, which Tessera does not "
                  "check (VolumeBinding matches a bound volume's nodeAffinity); remove it from the profile "
                  f"({_VOLUMES})",
    "NodeVolumeLimits": "it counts volumes against each node's CSI attach limit (CSINode allocatable.count), which "
                        f"Tessera does not read; remove it from the profile ({_VOLUMES})",
    "VolumeRestrictions": "it refuses ReadWriteOncePod claims in use and conflicting disks, which Tessera does not "
                          f"check; remove it from the profile ({_VOLUMES})",
    "DynamicResources": "Tessera allocates no DRA ResourceClaims: its GPUs are devices TesseraDevices hands out, "
                        "asked for by count or by ResourceClass; remove it from the profile (docs/api.md)",
    "SchedulingGates": "Tessera always honours spec.schedulingGates itself (a gated pod is not tried), as "
                       "kube-scheduler's default profile does with this plugin; remove it from the profile",
    "NodeDeclaredFeatures": "it matches pods to the features a node declares (Node status.declaredFeatures), which "
                            "Tessera does not read; remove it from the profile",
    "GangScheduling": _GANGS,
    "TopologyPlacementGenerator": _GANGS,
    "PodGroupPodsCount": _GANGS,
}


def not_supported_note(name: str) -> str:
    """Why `name`, a kube-scheduler plugin, is refused ("" for a name kube-scheduler does not have
    either), for the messages that refuse it wherever a file names it."""
    why = NOT_SUPPORTED.get(name)
    return f"{name} is kube-scheduler's and not supported by Tessera: {why}" if why else ""


def enabled_in(profile: Profile) -> tuple[PluginSpec, ...]:
    """The plugins a profile runs, in registry order: the ones its runtime builds, less
    DefaultPreemption when the profile turned preemption off (built, never called). What
    `/configz` shows the args of, as kube-scheduler's defaulting gives every enabled plugin that
    has args a pluginConfig entry."""
    return tuple(spec for spec in REGISTRY if spec.built_for(profile)
                 and (profile.preemption or not issubclass(spec.kind, PostFilterPlugin)))


def gpu_scoring_notices(config: SchedulerConfig) -> dict[str, str]:
    """By scheduler name, one line per profile none of whose scores places GPU pods, for `tessera run`'s log and
    `tessera simulate`'s stderr. Why: a `--config` file starts from kube-scheduler's defaults
    (NodeResourcesFit on cpu and memory, no TesseraFragmentation), so a file written only to
    change, say, the queue order lost the built-in GPU packing without a word (`make demo` split
    its 4-GPU job 3/1). TesseraDevices does not count, although that profile scores with it: it
    scores only pods asking for a ResourceClass, and left the demo's nvidia.com/gpu pods to cpu
    and memory."""
    scoring = [spec for spec in REGISTRY if spec.gpu_score is not None]
    named = ", ".join(f"{spec.name} {spec.gpu_score.condition}".rstrip() for spec in scoring if spec.gpu_score)
    return {
        profile.scheduler_name: f'profile "{profile.scheduler_name}" scores no GPUs: no plugin in it scores GPU placement ({named}); GPU '
        "pods will be placed as the CPU/memory scores say (a --config file starts from kube-scheduler's "
        "defaults, not the built-in profile): see docs/configuration.md, 'To keep the built-in packing'"
        for profile in config.profiles
        if not any(spec.name in profile.score_weights and spec.gpu_score is not None
                   and spec.gpu_score.applies(profile.plugin_args.get(spec.name, spec.default_args()))
                   for spec in scoring)}


def args_of(profile: Profile, model: type[A]) -> A:
    """The profile's args of the plugin whose args are a `model` (the defaults when not configured)."""
    spec = next(s for s in REGISTRY if s.args is not None and s.args.model is model)
    found = profile.plugin_args.get(spec.name)
    return found if isinstance(found, model) else model()
