"""NodeResourcesFitArgs: the scoring strategy, the ignored extended resources, their defaults and
upstream's validation.

v1 (`scoringStrategy`, shape scores 0..10 scaled x10 onto 0..100) follows k/k
`pkg/scheduler/apis/config/v1/defaults.go` and `validation_pluginargs.go`; the seed's v1alpha1
form (`RequestedToCapacityRatio` args `functionShape`/`resourceToWeightMap`, scores already
0..100, keys matched case-insensitively) is read by `parse_legacy_args`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from scheduler.api.config_reader import (ArgsReader, Checks, forbidden, go_int, invalid, invalid_error, required, type_name,
                                         unsupported)
from scheduler.api.names import label_key_errors
from scheduler.core.resources import GPU_RESOURCES, PODS

ScoringType = Literal["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"]
SCORING_TYPES: tuple[ScoringType, ...] = ("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ShapePoint(_Frozen):
    """One point of the RequestedToCapacityRatio broken line; `score` is on the internal 0..100
    scale (a v1 file's 0..10 score times 10)."""

    utilization: int = Field(ge=0, le=100)
    score: int = Field(ge=0, le=100)


class ResourceWeight(_Frozen):
    name: str = Field(min_length=1)
    weight: int = Field(ge=1)


class ScoringStrategy(_Frozen):
    """NodeResourcesFit's args: its scoring strategy (upstream `NodeResourcesFitArgs.scoringStrategy`:
    type, resources, shape) and the extended resources its filter does not check
    (`ignoredResources` by name, `ignoredResourceGroups` by the prefix before "/"; `ignores`)."""

    type: ScoringType = "LeastAllocated"
    resources: tuple[ResourceWeight, ...] = (
        ResourceWeight(name="cpu", weight=1),
        ResourceWeight(name="memory", weight=1),
    )
    shape: tuple[ShapePoint, ...] = ()
    ignored_resources: tuple[str, ...] = ()
    ignored_resource_groups: tuple[str, ...] = ()

    def ignores(self, name: str) -> bool:
        """Does the filter skip the (extended) resource `name`? Upstream's fitsRequest: named in
        ignoredResources, or its prefix before "/" named in ignoredResourceGroups. Only for
        extended resources: the caller checks that (native ones are always checked)."""
        return name in self.ignored_resources or name.split("/")[0] in self.ignored_resource_groups

    @property
    def scored(self) -> tuple[ResourceWeight, ...]:
        """The resources a score can count: upstream never scores `pods` (a node's pod count is
        not among its scalar resources, so it always reads as zero allocatable and is skipped)."""
        return tuple(resource for resource in self.resources if resource.name != PODS)

    @property
    def scores_gpus(self) -> bool:
        """Does the score count GPUs (so it says where a GPU pod goes)? Upstream's default counts
        cpu and memory only; any vendor's GPU resource counts (not only nvidia.com/gpu: an AMD
        cluster packed by MostAllocated on amd.com/gpu was told its profile scores no GPUs)."""
        return any(resource.name in GPU_RESOURCES for resource in self.scored)

    @model_validator(mode="after")
    def _shape_matches_type(self) -> ScoringStrategy:
        if (self.type == "RequestedToCapacityRatio") != bool(self.shape):
            raise ValueError("shape is required for RequestedToCapacityRatio and only for it")
        return self


DEFAULT = ScoringStrategy()  # v1 SetDefaults_NodeResourcesFitArgs: LeastAllocated cpu:1 memory:1
FIELDS = ("ignoredResources", "ignoredResourceGroups", "scoringStrategy")
# The device resources Tessera hands out itself (TesseraDevices' grants count on Fit's check of
# them): ignoring one, or its group, cannot be honoured
_DEVICE_GROUPS = frozenset(name.split("/")[0] for name in GPU_RESOURCES)
_HANDED_OUT = ("Tessera hands out these devices itself, and its device grants count on this check: without it a "
               "node could be promised more than it has, a GPU twice; remove it from the list")
# v1alpha1 (Kubernetes 1.17) score plugin names that were NodeResourcesFit strategies
LEGACY_STRATEGIES: dict[str, ScoringType] = {
    "NodeResourcesFit": "LeastAllocated",
    "NodeResourcesLeastAllocated": "LeastAllocated",
    "NodeResourcesMostAllocated": "MostAllocated",
    "RequestedToCapacityRatio": "RequestedToCapacityRatio",
}
# the old algorithm-provider priorities of the same rule, as they appear in `disabled` lists
LEGACY_PRIORITIES = ("LeastRequestedPriority", "MostRequestedPriority", "RequestedToCapacityRatioPriority")
LEGACY_ARGS_NAME = "RequestedToCapacityRatio"  # the v1alpha1 pluginConfig entry holding the shape


def parse_args(args: ArgsReader) -> ScoringStrategy:
    """NodeResourcesFitArgs: v1 defaulting, then ValidateNodeResourcesFitArgs (every error, in
    its order: the ignored resources, the groups, the type, the resources, the shape)."""
    found = Checks()
    none: tuple[str, ...] = ()
    ignored = found.read(lambda: _ignored(args, "ignoredResources", group=False), none)
    groups = found.read(lambda: _ignored(args, "ignoredResourceGroups", group=True), none)
    strategy = found.read(lambda: _strategy(args), DEFAULT)
    found.raise_errors()
    if not ignored and not groups:
        return strategy
    return strategy.model_copy(update={"ignored_resources": ignored, "ignored_resource_groups": groups})


def _ignored(args: ArgsReader, key: str, *, group: bool) -> tuple[str, ...]:
    """ignoredResources (label keys) or ignoredResourceGroups (label keys without "/"), each
    message of upstream's as one error; then Tessera's own: not a device resource it hands out."""
    found = Checks()
    names: list[str] = []
    for i, raw in enumerate(args.get_list(key)):
        path = f"{args.at(key)}[{i}]"
        if not isinstance(raw, str):
            found.record(invalid_error(path, raw, f"must be a string, not {type_name(raw)}"))
            continue
        names.append(raw)
        messages = (["resource group name can't contain '/'"] if group and "/" in raw else []) + label_key_errors(raw)
        for message in messages:
            found.record(invalid_error(path, raw, message))
        if not messages and (raw in _DEVICE_GROUPS if group else raw in GPU_RESOURCES):
            found.record(invalid_error(path, raw, _HANDED_OUT))
    found.raise_errors()
    return tuple(names)


def _strategy(args: ArgsReader) -> ScoringStrategy:
    strategy = args.get_obj("scoringStrategy")
    if strategy is None:
        return DEFAULT
    strategy.check_keys(("type", "resources", "requestedToCapacityRatio"))
    found = Checks()
    written = strategy.raw("type")
    kind = next((t for t in SCORING_TYPES if t == written), None)
    if kind is None:
        found.check(lambda: unsupported(strategy.at("type"), "" if written is None else written, SCORING_TYPES))
    resources = found.read(lambda: _resources(strategy), DEFAULT.resources)
    shape: tuple[ShapePoint, ...] = found.read(lambda: _ratio_shape(strategy, kind), ())
    found.raise_errors()
    assert kind is not None
    return ScoringStrategy(type=kind, resources=resources, shape=shape)


def _ratio_shape(strategy: ArgsReader, kind: ScoringType | None) -> tuple[ShapePoint, ...]:
    """requestedToCapacityRatio's shape: required for that type, refused with another (a shape the
    strategy would ignore, as kube-scheduler 1.36 refuses it); nothing to check without a type."""
    ratio = strategy.get_obj("requestedToCapacityRatio")
    if kind == "RequestedToCapacityRatio":
        if ratio is None:
            required(strategy.at("requestedToCapacityRatio"), "must be specified when type is RequestedToCapacityRatio")
        ratio.check_keys(("shape",))
        return _shape(ratio, "shape", max_score=10, scale=10)
    if ratio is not None and kind is not None:
        forbidden(strategy.at("requestedToCapacityRatio"), "must be nil when type is not RequestedToCapacityRatio")
    return ()


def _resources(strategy: ArgsReader) -> tuple[ResourceWeight, ...]:
    items = strategy.get_list("resources")
    if not items:
        return DEFAULT.resources
    found = Checks()
    resources = [found.read(lambda: _resource(ArgsReader(raw, f"{strategy.at('resources')}[{i}]")), None)
                 for i, raw in enumerate(items)]
    found.raise_errors()
    return tuple(resource for resource in resources if resource is not None)


def _resource(item: ArgsReader) -> ResourceWeight:
    item.check_keys(("name", "weight"))
    found = Checks()
    name = found.read(lambda: item.get_str("name", ""), None)
    if name == "":
        found.check(lambda: required(item.at("name")))

    def read_weight() -> int:
        weight = item.get_int("weight", 0) or 1  # v1 defaulting: unset or 0 -> 1
        if not 0 < weight <= 100:
            invalid(item.at("weight"), weight, f"resource weight of {name or ''} not in valid range (0, 100]")
        return weight

    weight = found.read(read_weight, 1)
    found.raise_errors()
    assert name is not None
    return ResourceWeight(name=name, weight=weight)


def _shape(owner: ArgsReader, key: str, *, max_score: int, scale: int) -> tuple[ShapePoint, ...]:
    """validateFunctionShape: non-empty, strictly increasing utilization in [0, 100], score in
    [0, max_score]; scores are then multiplied by `scale` onto the internal 0..100 scale."""
    path = owner.at(key)
    items = owner.get_list(key)
    if not items:
        required(path, "at least one point must be specified")
    points: list[tuple[ArgsReader, int, int]] = []
    for i, raw in enumerate(items):
        point = ArgsReader(raw, f"{path}[{i}]", fold=owner.fold)
        point.check_keys(("utilization", "score"))
        points.append((point, point.get_int("utilization", 0, "int32"),
                       point.get_int("score", 0, "int32")))
    found = Checks()
    for (_, previous, _), (point, utilization, _) in zip(points, points[1:]):
        if previous >= utilization:  # the first only, as upstream (it breaks out of the loop)
            found.check(lambda: invalid(point.at("utilization"), utilization, "values must be sorted in increasing order"))
            break
    for point, utilization, score in points:
        if not 0 <= utilization <= 100:
            found.check(lambda: invalid(point.at("utilization"), utilization, "not in valid range [0, 100]"))
        if not 0 <= score <= max_score:
            found.check(lambda: invalid(point.at("score"), score, f"not in valid range [0, {max_score}]"))
    found.raise_errors()
    return tuple(ShapePoint(utilization=u, score=s * scale) for _, u, s in points)


def parse_legacy_args(args: ArgsReader) -> ScoringStrategy:
    """Kubernetes 1.17 RequestedToCapacityRatioArgs: scores already 0..100, weights >= 1."""
    args.check_keys(("functionShape", "resourceToWeightMap"))
    shape = _shape(args, "functionShape", max_score=100, scale=1)
    path = args.at("resourceToWeightMap")
    weights = args.raw("resourceToWeightMap")
    if not weights:
        required(path, "at least one resource must be specified")
    if not isinstance(weights, dict):
        invalid(path, weights, f"must be a mapping, not {type_name(weights)}")
    resources: list[ResourceWeight] = []
    for name, weight in weights.items():
        item = f"{path}[{name}]"
        if not isinstance(name, str) or not name:
            invalid(item, name, "resource names must be non-empty strings")
        weight = go_int(item, weight, "int64")  # 1.17's map[string]int64
        if weight < 1:
            invalid(item, weight, f"resource weight of {name} must not be less than 1")
        resources.append(ResourceWeight(name=name, weight=weight))
    return ScoringStrategy(type="RequestedToCapacityRatio", resources=tuple(resources), shape=shape)


def resolve_legacy(alias: str, configured: BaseModel | None) -> ScoringStrategy:
    """The strategy a v1alpha1 profile asked for by enabling `alias` (and its pluginConfig args)."""
    strategy = LEGACY_STRATEGIES[alias]
    if strategy != "RequestedToCapacityRatio":
        return ScoringStrategy(type=strategy)
    if not isinstance(configured, ScoringStrategy):
        required("pluginConfig", "RequestedToCapacityRatio args (functionshape, resourcetoweightmap) are needed "
                 "when that plugin is enabled")
    return configured

