"""The validated, defaulted configuration Tessera runs with (the output of `config_parse`).

Why a second set of types instead of mirroring `KubeSchedulerConfiguration`: the file format has
two dialects (v1 and the seed's v1alpha1), pointer-or-zero defaulting rules and a plugin
merge algorithm. The scheduler core should see none of that. These frozen models hold only the
resolved answer (which score plugins run with which weight, one scoring strategy, ...) so every
consumer reads plain values and nobody can change them after start-up.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, GetCoreSchemaHandler, model_validator
from pydantic_core import core_schema

__all__ = [
    "ConfigError",
    "ScoreWeights",
    "PluginArgs",
    "Profile",
    "LeaderElectionConfig",
    "ClientConnectionConfig",
    "SchedulerConfig",
    "DEFAULT_SCHEDULER_NAME",
    "KUBE_SCHEDULER_NAME",
    "KUBE_SCHEDULER_LEASE",
]

V = TypeVar("V")

DEFAULT_SCHEDULER_NAME = "tessera"
# kube-scheduler's own: its profile name (k8s.io/api core/v1 DefaultSchedulerName, what the
# apiserver gives a pod without spec.schedulerName) and its Lease (pkg/scheduler/apis/config/v1
# defaults.go: SchedulerDefaultLockObjectNamespace/Name)
KUBE_SCHEDULER_NAME = "default-scheduler"
KUBE_SCHEDULER_LEASE = ("kube-system", "kube-scheduler")


class ConfigError(Exception):
    """A configuration file Tessera cannot run with. `str()` is one line:
    `<source>: <field path>: <message>` (the field part is left out for whole-file problems), or
    for problems in several fields `<source>: [<field>: <message>, ...]` (`field` is then empty and
    `fields` names them all)."""

    def __init__(self, source: str, field: str, message: str, fields: tuple[str, ...] | None = None) -> None:
        self.source = source
        self.field = field
        self.fields = ((field,) if field else ()) if fields is None else fields
        self.message = " ".join(message.split())  # one line, whatever the message contained
        super().__init__(f"{source}: {field}: {self.message}" if field else f"{source}: {self.message}")


class _FrozenPairs(Mapping[str, V]):
    """Plugin name -> value, immutable and hashable, iterating in the order of `_pairs` (a frozen
    configuration model holds these where a dict would be mutable and unhashable)."""

    __slots__ = ("_pairs", "_index")
    _pairs: tuple[tuple[str, V], ...]
    _index: dict[str, V]

    def _freeze(self, pairs: tuple[tuple[str, V], ...]) -> None:
        self._pairs = pairs
        self._index = dict(pairs)

    def __getitem__(self, name: str) -> V:
        return self._index[name]

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self._pairs)

    def __len__(self) -> int:
        return len(self._pairs)

    def __hash__(self) -> int:
        return hash(self._pairs)


class ScoreWeights(_FrozenPairs[int]):
    """Enabled score plugins -> weight, immutable and hashable, iterating in run order."""

    __slots__ = ()

    def __init__(self, pairs: Iterable[tuple[str, int]] | Mapping[str, int] = ()) -> None:
        items = tuple(pairs.items() if isinstance(pairs, Mapping) else pairs)
        self._freeze(tuple((str(n), int(w)) for n, w in items))
        if len(self._index) != len(self._pairs):
            raise ValueError("duplicate score plugin name")

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


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PluginArgs(_FrozenPairs[BaseModel]):
    """Plugin name -> its validated args (each plugin's own frozen model), immutable and hashable.
    Only args that differ from the plugin's defaults are kept, so equal configurations are equal."""

    __slots__ = ()

    def __init__(self, pairs: Iterable[tuple[str, BaseModel]] | Mapping[str, BaseModel] = ()) -> None:
        items = tuple(pairs.items() if isinstance(pairs, Mapping) else pairs)
        self._freeze(tuple(sorted(items, key=lambda item: item[0])))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PluginArgs) and self._pairs == other._pairs

    __hash__ = _FrozenPairs.__hash__  # a class that defines __eq__ loses the inherited one

    def __repr__(self) -> str:
        return f"PluginArgs({dict(self._pairs)!r})"

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        def validate(value: Any) -> PluginArgs:
            if isinstance(value, PluginArgs):
                return value
            if isinstance(value, Mapping) and all(isinstance(v, BaseModel) for v in value.values()):
                return cls(value)
            raise ValueError("expected a mapping of plugin name to its args model")

        return core_schema.no_info_plain_validator_function(
            validate, serialization=core_schema.plain_serializer_function_ser_schema(dict)
        )


class Profile(_Frozen):
    """One scheduler profile: which score plugins run with which weight, which plugins' PreScore
    runs, and the plugins' args (the registry in scheduler/core/plugins/registry.py gives the rest
    their defaults)."""

    scheduler_name: str = Field(default=DEFAULT_SCHEDULER_NAME, min_length=1)
    score_weights: ScoreWeights = ScoreWeights()
    # the plugins whose PreScore runs, in run order: an extension point of its own, as upstream's
    pre_score: tuple[str, ...] = ()
    # the queue sort plugins the profile names (its queueSort point as upstream's framework builds
    # it): what /configz shows; Tessera's queue order is its own whatever they are (queue.py)
    queue_sort: tuple[str, ...] = ("PrioritySort",)
    plugin_args: PluginArgs = PluginArgs()
    # None: use SchedulerConfig.percentage_of_nodes_to_score.
    percentage_of_nodes_to_score: int | None = Field(default=None, ge=0, le=100)
    # DefaultPreemption (PostFilter) runs unless the profile disables it (postFilter or multiPoint)
    preemption: bool = True
    # the plugins whose Filter the profile turned off (plugins.filter / multiPoint), in registry
    # order: never one that `stays_on`
    disabled_filters: tuple[str, ...] = ()
    # the plugins whose PreFilter the profile turned off (plugins.preFilter / multiPoint; a
    # `may_disable` one by name at filter too), in registry order: never one that `stays_on`
    disabled_pre_filters: tuple[str, ...] = ()


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
    # kube-scheduler's worker count (v1 default 16): validated and shown in /configz as upstream's,
    # unused (Tessera's cycle is one loop)
    parallelism: int = Field(default=16, gt=0)
    source: str = "<defaults>"
    # the fields the file sets that Tessera accepts without using them (paths, in file order), for
    # `tessera run`'s start-up log; like `source`, not part of the configuration (/configz, digest)
    unused_fields: tuple[str, ...] = ()

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

    def kube_scheduler_clashes(self) -> tuple[str, ...]:
        """What this configuration takes of kube-scheduler's own: its scheduler name, its Lease.

        Why: kube-scheduler accepts both (they are its defaults), but Tessera runs beside it,
        where either is a fight — two schedulers binding the same pods, or one keeping the other
        from ever leading. Second schedulers keep out of the way (the scheduler-plugins chart's
        `scheduler-plugins-scheduler` without leader election, Volcano's lock named `volcano`);
        `tessera run` refuses such a file unless Tessera replaces kube-scheduler."""
        clashes: list[str] = []
        if KUBE_SCHEDULER_NAME in self.scheduler_names:
            clashes.append(f'schedulerName "{KUBE_SCHEDULER_NAME}" is kube-scheduler\'s (every pod without '
                           "spec.schedulerName has it): both schedulers would bind those pods; use a name of Tessera's own "
                           f"(default {DEFAULT_SCHEDULER_NAME})")
        election = self.leader_election
        if election.leader_elect and (election.resource_namespace, election.resource_name) == KUBE_SCHEDULER_LEASE:
            clashes.append(f"leaderElection's Lease {'/'.join(KUBE_SCHEDULER_LEASE)} is kube-scheduler's: whichever "
                           "holds it keeps the other from leading, and that one schedules nothing; use a Lease of "
                           f"Tessera's own (default kube-system/{DEFAULT_SCHEDULER_NAME})")
        return tuple(clashes)

    def offline_clash_warnings(self) -> tuple[str, ...]:
        """`kube_scheduler_clashes` as the commands that check a file offline say them (`tessera
        simulate --config`, `kubectl tessera what-if --config`): harmless there, nothing to fight,
        but said because those are how an operator checks a file before `tessera run` refuses it.
        Each line names the file; the command adds its own prefix."""
        return tuple(f"{self.source}: {clash}; `tessera run` refuses this unless --replace-default-scheduler"
                     for clash in self.kube_scheduler_clashes())
