"""The validated, defaulted configuration Tessera runs with (the output of `config_parse`).

Why a second set of types instead of mirroring `KubeSchedulerConfiguration`: the file format has
three dialects (v1, v1beta2/3, the seed's v1alpha1), pointer-or-zero defaulting rules and a plugin
merge algorithm. The scheduler core should see none of that. These frozen models hold only the
resolved answer (which score plugins run with which weight, one scoring strategy, ...) so every
consumer reads plain values and nobody can change them after start-up.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, GetCoreSchemaHandler, model_validator
from pydantic_core import core_schema

__all__ = [
    "ConfigError",
    "ScoreWeights",
    "ShapePoint",
    "ResourceWeight",
    "ScoringStrategy",
    "CoschedulingArgs",
    "DeviceArgs",
    "FragmentationArgs",
    "Profile",
    "LeaderElectionConfig",
    "ClientConnectionConfig",
    "SchedulerConfig",
    "FILTER_PLUGINS",
    "SCORE_PLUGINS",
    "ALL_PLUGINS",
    "DEFAULT_SCORE_WEIGHTS",
    "DEFAULT_SCHEDULER_NAME",
]

DEFAULT_SCHEDULER_NAME = "tessera"

# Always-on filter plugins (they also implement PreFilter/Permit where relevant).
FILTER_PLUGINS: tuple[str, ...] = (
    "NodeUnschedulable",
    "NodeName",
    "TaintToleration",
    "NodeAffinity",
    "NodeResourcesFit",
    "Coscheduling",
    "TesseraDevices",
)
# Score plugins and the weight each gets in the default multiPoint set, in upstream order
# (k/k pkg/scheduler/apis/config/v1/default_plugins.go), Tessera's own plugins last.
# TesseraFragmentation is not in the default set: a configuration enables it (the built-in
# scheduler/data/default-config.yaml does, with weight 10).
SCORE_PLUGINS: Mapping[str, int] = {
    "TaintToleration": 3,
    "NodeAffinity": 2,
    "NodeResourcesFit": 1,
    "TesseraDevices": 1,
    "TesseraFragmentation": 1,
}
ALL_PLUGINS: tuple[str, ...] = FILTER_PLUGINS + ("TesseraFragmentation",)


class ConfigError(Exception):
    """A configuration file Tessera cannot run with. `str()` is one line:
    `<source>: <field path>: <message>` (the field part is left out for whole-file problems)."""

    def __init__(self, source: str, field: str, message: str) -> None:
        self.source = source
        self.field = field
        self.message = " ".join(message.split())  # one line, whatever the message contained
        super().__init__(f"{source}: {field}: {self.message}" if field else f"{source}: {self.message}")


class ScoreWeights(Mapping[str, int]):
    """Enabled score plugins -> weight, immutable and hashable, iterating in run order."""

    __slots__ = ("_pairs", "_index")

    def __init__(self, pairs: Iterable[tuple[str, int]] | Mapping[str, int] = ()) -> None:
        items = tuple(pairs.items() if isinstance(pairs, Mapping) else pairs)
        self._pairs: tuple[tuple[str, int], ...] = tuple((str(n), int(w)) for n, w in items)
        self._index: dict[str, int] = dict(self._pairs)
        if len(self._index) != len(self._pairs):
            raise ValueError("duplicate score plugin name")

    def __getitem__(self, name: str) -> int:
        return self._index[name]

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self._pairs)

    def __len__(self) -> int:
        return len(self._pairs)

    def __hash__(self) -> int:
        return hash(self._pairs)

    def __repr__(self) -> str:
        return f"ScoreWeights({dict(self._pairs)!r})"

    def weight(self, name: str) -> int:
        """The plugin's weight, 0 when it is not enabled."""
        return self._index.get(name, 0)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        def validate(value: Any) -> ScoreWeights:
            if isinstance(value, ScoreWeights):
                return value
            if isinstance(value, Mapping) or isinstance(value, (list, tuple)):
                weights = cls(value)
                if any(w < 1 for w in weights.values()):
                    raise ValueError("score plugin weights must be >= 1")
                return weights
            raise ValueError("expected a mapping of plugin name to weight")

        return core_schema.no_info_plain_validator_function(
            validate, serialization=core_schema.plain_serializer_function_ser_schema(dict)
        )


DEFAULT_SCORE_WEIGHTS = ScoreWeights(
    (name, weight) for name, weight in SCORE_PLUGINS.items() if name != "TesseraFragmentation"
)


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


ScoringType = Literal["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"]


class ScoringStrategy(_Frozen):
    """NodeResourcesFit's scoring strategy (upstream `NodeResourcesFitArgs.scoringStrategy`)."""

    type: ScoringType = "LeastAllocated"
    resources: tuple[ResourceWeight, ...] = (
        ResourceWeight(name="cpu", weight=1),
        ResourceWeight(name="memory", weight=1),
    )
    shape: tuple[ShapePoint, ...] = ()

    @model_validator(mode="after")
    def _shape_matches_type(self) -> ScoringStrategy:
        if (self.type == "RequestedToCapacityRatio") != bool(self.shape):
            raise ValueError("shape is required for RequestedToCapacityRatio and only for it")
        return self


class CoschedulingArgs(_Frozen):
    permit_waiting_time_seconds: int = Field(default=60, ge=0)
    pod_group_backoff_seconds: int = Field(default=0, ge=0)


class DeviceArgs(_Frozen):
    allocation_gate: bool = True
    # the gate holds only on nodes whose agent heartbeat (ExtendedResource
    # status.lastHeartbeatTime) is at most this old: without an agent nothing would ever open it
    agent_heartbeat_timeout_seconds: int = Field(default=90, ge=1)
    default_class_controller: bool = False


class FragmentationArgs(_Frozen):
    resource_name: str = "nvidia.com/gpu"  # the device resource whose fragmentation is measured
    max_task_types: int = Field(default=256, ge=1, le=10_000)  # most popular request shapes kept


class Profile(_Frozen):
    scheduler_name: str = Field(default=DEFAULT_SCHEDULER_NAME, min_length=1)
    score_weights: ScoreWeights = DEFAULT_SCORE_WEIGHTS
    fit: ScoringStrategy = ScoringStrategy()
    coscheduling: CoschedulingArgs = CoschedulingArgs()
    devices: DeviceArgs = DeviceArgs()
    fragmentation: FragmentationArgs = FragmentationArgs()
    # None: use SchedulerConfig.percentage_of_nodes_to_score.
    percentage_of_nodes_to_score: int | None = Field(default=None, ge=0, le=100)


class LeaderElectionConfig(_Frozen):
    leader_elect: bool = True
    lease_duration_seconds: float = 15
    renew_deadline_seconds: float = 10
    retry_period_seconds: float = 2
    resource_namespace: str = "kube-system"
    resource_name: str = "tessera"


class ClientConnectionConfig(_Frozen):
    kubeconfig: str | None = None
    qps: float = Field(default=50, ge=0)
    burst: int = Field(default=100, ge=0)


class SchedulerConfig(_Frozen):
    profiles: tuple[Profile, ...] = (Profile(),)
    # 0 = adaptive (50% - nodes/125, at least 5%), as upstream.
    percentage_of_nodes_to_score: int = Field(default=0, ge=0, le=100)
    pod_initial_backoff_seconds: int = Field(default=1, gt=0)
    pod_max_backoff_seconds: int = Field(default=10, gt=0)
    leader_election: LeaderElectionConfig = LeaderElectionConfig()
    client_connection: ClientConnectionConfig = ClientConnectionConfig()
    source: str = "<defaults>"

    @model_validator(mode="after")
    def _consistent(self) -> SchedulerConfig:
        names = [p.scheduler_name for p in self.profiles]
        if not names or len(set(names)) != len(names):
            raise ValueError("profiles must be non-empty with unique scheduler names")
        if self.pod_max_backoff_seconds < self.pod_initial_backoff_seconds:
            raise ValueError("pod_max_backoff_seconds must be >= pod_initial_backoff_seconds")
        return self

    def profile_for(self, scheduler_name: str) -> Profile | None:
        """The profile a pod with `spec.schedulerName == scheduler_name` is scheduled with."""
        for profile in self.profiles:
            if profile.scheduler_name == scheduler_name:
                return profile
        return None

    @property
    def scheduler_names(self) -> frozenset[str]:
        return frozenset(p.scheduler_name for p in self.profiles)
