"""Turn a `KubeSchedulerConfiguration` (already YAML-decoded) into a `SchedulerConfig`.

Why hand-written instead of pydantic models of the file: the interesting part of this format is
not its shape but upstream's *rules* — pointer-vs-zero defaulting (`weight: 0` means "default"),
the multiPoint/score plugin merge, and validation messages that name the exact field
(`profiles[0].pluginConfig[0].args.scoringStrategy.resources[1].weight`). Each rule below cites
the upstream function it follows, so it can be checked line by line:

- defaulting: k/k `pkg/scheduler/apis/config/v1/defaults.go`;
- the plugin merge: `mergePluginSet` in `v1/default_plugins.go`, then `expandMultiPointPlugins`
  and `getScoreWeights` in `pkg/scheduler/framework/runtime/framework.go`;
- validation: `validation/validation.go`, `validation/validation_pluginargs.go`, component-base
  `config/validation` and client-go `NewLeaderElector` (the retryPeriod jitter rule).

Tessera-specific decisions (upstream defines nothing here, or Tessera deliberately differs):

- Only the first error is reported (upstream aggregates them), so the message stays one line.
- Unknown keys are errors at every level, like upstream's strict decoding of v1. Known upstream
  keys Tessera has no use for are accepted and ignored: `parallelism` (still validated > 0),
  `healthzBindAddress`, `metricsBindAddress`, `enableProfiling`, `enableContentionProfiling`,
  `delayCacheUntilActive`, `percentageOfPlacementsToScore`, `clientConnection.contentType` /
  `acceptContentTypes`, Coscheduling's `podGroupRejectPercentage`. A non-empty `extenders` list is
  rejected: ignoring it would silently change placement decisions.
- Tessera's filter chain is fixed. Only `multiPoint` and `score` change anything; `enabled`
  entries at other extension points must name a Tessera plugin (they are no-ops, so
  scheduler-plugins style configs that enable Coscheduling at queueSort/permit still load) and
  `disabled` entries there are ignored. Disabling a plugin through `multiPoint` removes its score
  only; its filter keeps running.
- Score plugin weights must be >= 0 (upstream does not check); 0 or absent means 1, as upstream.
- `pluginConfig` may only name NodeResourcesFit, Coscheduling and TesseraDevices; resource names
  in a scoring strategy must be non-empty and unique; `clientConnection.qps` must be >= 0
  (client-go treats a negative QPS as "no rate limit", which Tessera does not offer).
- The lease defaults to `kube-system/tessera`, not `kube-scheduler`: Tessera runs beside the
  default scheduler and must not compete for its lease.
- v1beta2 and v1beta3 are read with v1 rules. v1alpha1 is the seed's legacy form: top-level
  `plugins`/`pluginConfig` for one profile, `RequestedToCapacityRatio` args
  `functionshape`/`resourcetoweightmap` with scores on 0..100 and keys matched case-insensitively
  (Go's encoding/json decoded these args), legacy names mapped onto today's plugins.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import NoReturn

import pydantic

from scheduler.api.config_model import (
    ALL_PLUGINS,
    DEFAULT_SCHEDULER_NAME,
    SCORE_PLUGINS,
    ClientConnectionConfig,
    ConfigError,
    CoschedulingArgs,
    DeviceArgs,
    FragmentationArgs,
    LeaderElectionConfig,
    Profile,
    ResourceWeight,
    SchedulerConfig,
    ScoreWeights,
    ScoringStrategy,
    ScoringType,
    ShapePoint,
)

__all__ = ["parse_config", "SUPPORTED_API_VERSIONS"]

_GROUP = "kubescheduler.config.k8s.io"
V1_API_VERSIONS = (f"{_GROUP}/v1", f"{_GROUP}/v1beta3", f"{_GROUP}/v1beta2")
LEGACY_API_VERSION = f"{_GROUP}/v1alpha1"
SUPPORTED_API_VERSIONS = V1_API_VERSIONS + (LEGACY_API_VERSION,)
KIND = "KubeSchedulerConfiguration"

_COMMON_TOP = ("apiVersion", "kind", "percentageOfNodesToScore", "podInitialBackoffSeconds",
               "podMaxBackoffSeconds", "leaderElection", "clientConnection")
_IGNORED_TOP = ("healthzBindAddress", "metricsBindAddress", "enableProfiling",
                "enableContentionProfiling")
_V1_TOP = _COMMON_TOP + ("profiles", "parallelism", "extenders")
_V1_IGNORED_TOP = _IGNORED_TOP + ("delayCacheUntilActive", "percentageOfPlacementsToScore")
_LEGACY_TOP = _COMMON_TOP + ("schedulerName", "plugins", "pluginConfig", "algorithmSource")
_LEGACY_IGNORED_TOP = _IGNORED_TOP + ("hardPodAffinitySymmetricWeight", "disablePreemption",
                                      "bindTimeoutSeconds")
_V1_HINTS = {
    "plugins": "in v1 plugins belong to profiles[].plugins (top-level plugins is the v1alpha1 form)",
    "pluginConfig": "in v1 pluginConfig belongs to profiles[].pluginConfig",
    "schedulerName": "in v1 the scheduler name is profiles[].schedulerName",
}
_LEGACY_HINTS = {"profiles": f"profiles need apiVersion {V1_API_VERSIONS[0]}"}

_EXTENSION_POINTS = ("preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore",
                     "score", "reserve", "permit", "preBind", "bind", "postBind")
_LEGACY_EXTENSION_POINTS = tuple(p for p in _EXTENSION_POINTS if p != "preEnqueue") + ("unreserve",)

# v1alpha1 (Kubernetes 1.17) names -> today's plugin. Only the first three are plugins one can
# enable; the *Priority names are the old algorithm-provider priorities, seen in `disabled`.
_LEGACY_ENABLE_ALIASES = {
    "RequestedToCapacityRatio": "NodeResourcesFit",
    "NodeResourcesLeastAllocated": "NodeResourcesFit",
    "NodeResourcesMostAllocated": "NodeResourcesFit",
}
_LEGACY_DISABLE_ALIASES = {
    **_LEGACY_ENABLE_ALIASES,
    "LeastRequestedPriority": "NodeResourcesFit",
    "MostRequestedPriority": "NodeResourcesFit",
    "RequestedToCapacityRatioPriority": "NodeResourcesFit",
    "NodeAffinityPriority": "NodeAffinity",
    "TaintTolerationPriority": "TaintToleration",
}
_LEGACY_STRATEGY: dict[str, ScoringType] = {
    "NodeResourcesFit": "LeastAllocated",
    "NodeResourcesLeastAllocated": "LeastAllocated",
    "NodeResourcesMostAllocated": "MostAllocated",
    "RequestedToCapacityRatio": "RequestedToCapacityRatio",
}

_SCORING_TYPES: tuple[ScoringType, ...] = ("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio")
_DEFAULT_FIT = ScoringStrategy()  # v1 SetDefaults_NodeResourcesFitArgs: LeastAllocated cpu:1 memory:1
_MAX_INT32 = 2**31 - 1
_SECOND = 10**9
_JITTER_FACTOR = 1.2  # client-go leaderelection.JitterFactor


def parse_config(raw: object, source: str) -> SchedulerConfig:
    """Validate and default `raw` (the result of `yaml.safe_load`); `source` names it in errors."""
    try:
        return _parse(raw, source)
    except _FieldError as err:
        raise ConfigError(source, err.field, err.message) from None
    except pydantic.ValidationError as err:  # a rule the parser missed; still no traceback
        first = err.errors()[0]
        raise ConfigError(source, ".".join(map(str, first["loc"])), first["msg"]) from None


# --- errors in upstream's field.Error wording ------------------------------------------------


class _FieldError(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class _Verbatim(str):
    """A value printed as is in messages (Go prints durations unquoted)."""


def _fmt(value: object) -> str:
    if isinstance(value, _Verbatim):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return repr(value)
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):  # e.g. a mapping with date or other non-string keys
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _invalid(path: str, value: object, detail: str) -> NoReturn:
    raise _FieldError(path, f"Invalid value: {_fmt(value)}: {detail}")


def _required(path: str, detail: str = "") -> NoReturn:
    raise _FieldError(path, f"Required value: {detail}" if detail else "Required value")


def _unsupported(path: str, value: object, supported: Iterable[str]) -> NoReturn:
    listed = ", ".join(json.dumps(s) for s in supported)
    raise _FieldError(path, f"Unsupported value: {_fmt(value)}: supported values: {listed}")


def _duplicate(path: str, value: object, detail: str = "") -> NoReturn:
    raise _FieldError(path, f"Duplicate value: {_fmt(value)}" + (f": {detail}" if detail else ""))


def _forbidden(path: str, detail: str) -> NoReturn:
    raise _FieldError(path, f"Forbidden: {detail}")


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _type_name(value: object) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return "a string" if isinstance(value, str) else f"{_fmt(value)}"


# --- typed access to one YAML mapping ---------------------------------------------------------


class _Obj:
    """A YAML mapping at a field path; getters fail naming that path. With `fold`, keys match
    case-insensitively (last one wins), as Go's encoding/json does."""

    def __init__(self, raw: object, path: str, *, fold: bool = False) -> None:
        if not isinstance(raw, dict):
            _invalid(path, raw, f"must be a mapping, not {_type_name(raw)}")
        self.path = path
        self.fold = fold
        self._data: dict[str, tuple[str, object]] = {}
        for key, value in raw.items():
            if not isinstance(key, str):
                _invalid(_child(path, str(key)), key, "field names must be strings")
            self._data[key.lower() if fold else key] = (key, value)

    def _key(self, key: str) -> str:
        return key.lower() if self.fold else key

    def at(self, key: str) -> str:
        """The field path of `key`, spelled as in the file when present."""
        entry = self._data.get(self._key(key))
        return _child(self.path, entry[0] if entry else key)

    def raw(self, key: str) -> object:
        """The value, None when absent or null (Go decodes both to the zero value / nil)."""
        entry = self._data.get(self._key(key))
        return None if entry is None else entry[1]

    def check_keys(self, known: Collection[str], ignored: Collection[str] = (),
                   hints: Mapping[str, str] | None = None) -> None:
        allowed = {self._key(k) for k in (*known, *ignored)}
        for key, (original, _) in self._data.items():
            if key not in allowed:
                hint = (hints or {}).get(original)
                raise _FieldError(_child(self.path, original), f"unknown field ({hint})" if hint else
                                  f"unknown field; known fields: {', '.join(sorted(known))}")

    def get_int(self, key: str, default: int) -> int:
        value = self.raw(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            _invalid(self.at(key), value, "must be an integer")
        return value

    def get_float(self, key: str, default: float) -> float:
        value = self.raw(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)) or abs(value) > 1e300 \
                or not math.isfinite(value):
            _invalid(self.at(key), value, "must be a number")
        return float(value)

    def get_bool(self, key: str, default: bool) -> bool:
        value = self.raw(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            _invalid(self.at(key), value, "must be true or false")
        return value

    def get_str(self, key: str, default: str) -> str:
        value = self.raw(key)
        if value is None:
            return default
        if not isinstance(value, str):
            _invalid(self.at(key), value, "must be a string")
        return value

    def get_list(self, key: str) -> list[object]:
        value = self.raw(key)
        if value is None:
            return []
        if not isinstance(value, list):
            _invalid(self.at(key), value, f"must be a list, not {_type_name(value)}")
        return value

    def get_obj(self, key: str) -> _Obj | None:
        value = self.raw(key)
        return None if value is None else _Obj(value, self.at(key), fold=self.fold)


# --- top level --------------------------------------------------------------------------------


def _parse(raw: object, source: str) -> SchedulerConfig:
    if raw is None:
        raise _FieldError("", f"the file is empty; expected a {KIND}")
    if not isinstance(raw, dict):
        raise _FieldError("", f"expected a {KIND} mapping, not {_type_name(raw)}")
    root = _Obj(raw, "")
    api_version = root.raw("apiVersion")
    if api_version is None:
        _required("apiVersion", f"use {V1_API_VERSIONS[0]}")
    if api_version not in SUPPORTED_API_VERSIONS:
        _unsupported("apiVersion", api_version, SUPPORTED_API_VERSIONS)
    kind = root.raw("kind")
    if kind is None:
        _required("kind", f"use {KIND}")
    if kind != KIND:
        _unsupported("kind", kind, [KIND])
    legacy = api_version == LEGACY_API_VERSION

    if legacy:
        root.check_keys(_LEGACY_TOP, _LEGACY_IGNORED_TOP, _LEGACY_HINTS)
        algorithm = root.get_obj("algorithmSource")
        if algorithm is not None and algorithm.raw("policy") is not None:
            _forbidden(algorithm.at("policy"), "Tessera does not read scheduling Policy files")
        profiles: tuple[Profile, ...] = (_legacy_profile(root),)
    else:
        root.check_keys(_V1_TOP, _V1_IGNORED_TOP, _V1_HINTS)
        if root.get_int("parallelism", 16) <= 0:
            _invalid("parallelism", root.raw("parallelism"), "should be an integer value greater than zero")
        profiles = _v1_profiles(root)

    percentage = _percentage(root, "percentageOfNodesToScore", 0)
    initial = root.get_int("podInitialBackoffSeconds", 1)
    if initial <= 0:
        _invalid("podInitialBackoffSeconds", initial, "must be greater than 0")
    maximum = root.get_int("podMaxBackoffSeconds", 10)
    if maximum < initial:
        _invalid("podMaxBackoffSeconds", maximum, "must be greater than or equal to PodInitialBackoffSeconds")
    if not legacy and root.get_list("extenders"):
        _forbidden("extenders", "Tessera does not call scheduler extenders")

    return SchedulerConfig(
        profiles=profiles,
        percentage_of_nodes_to_score=percentage,
        pod_initial_backoff_seconds=initial,
        pod_max_backoff_seconds=maximum,
        leader_election=_leader_election(root.get_obj("leaderElection") or _Obj({}, "leaderElection"), legacy),
        client_connection=_client_connection(root.get_obj("clientConnection") or _Obj({}, "clientConnection")),
        source=source,
    )


def _percentage(obj: _Obj, key: str, default: int) -> int:
    value = obj.get_int(key, default)
    if not 0 <= value <= 100:
        _invalid(obj.at(key), value, "not in valid range [0-100]")
    return value


# --- profiles ---------------------------------------------------------------------------------


def _v1_profiles(root: _Obj) -> tuple[Profile, ...]:
    raw_profiles = root.get_list("profiles") or [{}]  # defaults.go: no profiles -> one default profile
    profiles: list[Profile] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(raw_profiles):
        obj = _Obj(raw, f"profiles[{i}]")
        obj.check_keys(("schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig"),
                       ("percentageOfPlacementsToScore",))
        # Only a lone profile gets the default name; validation requires a non-empty one.
        name = obj.get_str("schedulerName", DEFAULT_SCHEDULER_NAME if len(raw_profiles) == 1 else "")
        if not name:
            _required(obj.at("schedulerName"))
        if name in seen:
            _duplicate(obj.at("schedulerName"), name, f"already used by profiles[{seen[name]}].schedulerName")
        seen[name] = i
        percentage: int | None = None
        if obj.raw("percentageOfNodesToScore") is not None:
            percentage = _percentage(obj, "percentageOfNodesToScore", 0)
        multi_point, score = _plugins(obj.get_obj("plugins"), legacy=False)
        args = _plugin_config(obj, legacy=False)
        profiles.append(Profile(
            scheduler_name=name,
            score_weights=_score_weights(multi_point, score),
            fit=args.fit or _DEFAULT_FIT,
            coscheduling=args.coscheduling,
            devices=args.devices,
            fragmentation=args.fragmentation,
            percentage_of_nodes_to_score=percentage,
        ))
    return tuple(profiles)


def _legacy_profile(root: _Obj) -> Profile:
    name = root.get_str("schedulerName", "") or DEFAULT_SCHEDULER_NAME  # v1alpha1: empty -> default
    multi_point, score = _plugins(root.get_obj("plugins"), legacy=True)
    args = _plugin_config(root, legacy=True)
    fit = _DEFAULT_FIT
    fit_entry = next((p for p in score.enabled if p.name == "NodeResourcesFit"), None)
    if fit_entry is not None:
        strategy = _LEGACY_STRATEGY[fit_entry.alias]
        if strategy == "RequestedToCapacityRatio":
            if args.fit is None:
                _required("pluginConfig", "RequestedToCapacityRatio args (functionshape, "
                          "resourcetoweightmap) are needed when that plugin is enabled")
            fit = args.fit
        else:
            fit = ScoringStrategy(type=strategy)
    return Profile(
        scheduler_name=name,
        score_weights=_score_weights(multi_point, score),
        fit=fit,
        coscheduling=args.coscheduling,
        devices=args.devices,
        fragmentation=args.fragmentation,
    )


# --- plugins: enabled/disabled sets and upstream's merge ---------------------------------------


@dataclass(frozen=True)
class _Plugin:
    name: str       # Tessera's plugin name
    weight: int     # 0 = unset
    alias: str = ""  # the name as written (legacy aliases)


@dataclass(frozen=True)
class _PluginSet:
    enabled: tuple[_Plugin, ...] = ()
    disabled: frozenset[str] = frozenset()


# The default multiPoint set (v1 getDefaultPlugins), restricted to what Tessera implements.
_DEFAULT_MULTI_POINT = tuple(
    _Plugin(name, SCORE_PLUGINS.get(name, 0)) for name in (
        "NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodeResourcesFit",
        "Coscheduling", "TesseraDevices",
    )
)


def _plugins(obj: _Obj | None, *, legacy: bool) -> tuple[_PluginSet, _PluginSet]:
    """The profile's (multiPoint, score) plugin sets; other extension points are only checked."""
    if obj is None:
        return _PluginSet(), _PluginSet()
    points = _LEGACY_EXTENSION_POINTS if legacy else _EXTENSION_POINTS + ("multiPoint",)
    obj.check_keys(points)
    sets = {point: _plugin_set(obj.get_obj(point), point, legacy) for point in points}
    return sets.get("multiPoint", _PluginSet()), sets["score"]


def _plugin_set(obj: _Obj | None, point: str, legacy: bool) -> _PluginSet:
    if obj is None:
        return _PluginSet()
    obj.check_keys(("enabled", "disabled"))
    supported: tuple[str, ...] = tuple(SCORE_PLUGINS) if point == "score" else ALL_PLUGINS
    if legacy and point == "score":
        supported += tuple(_LEGACY_ENABLE_ALIASES)
    enabled: list[_Plugin] = []
    for j, raw in enumerate(obj.get_list("enabled")):
        item = _Obj(raw, f"{obj.at('enabled')}[{j}]")
        item.check_keys(("name", "weight"))
        written = _plugin_name(item)
        name = _LEGACY_ENABLE_ALIASES.get(written, written) if legacy else written
        if written not in supported:
            _unsupported(item.at("name"), written, supported)
        weight = item.get_int("weight", 0)
        if not 0 <= weight <= _MAX_INT32:
            _invalid(item.at("weight"), weight, f"must be in the range [0, {_MAX_INT32}]")
        if any(p.name == name for p in enabled):
            _duplicate(item.at("name"), written, "a plugin can be enabled once per extension point")
        enabled.append(_Plugin(name, weight, written))
    disabled: set[str] = set()
    for j, raw in enumerate(obj.get_list("disabled")):
        item = _Obj(raw, f"{obj.at('disabled')}[{j}]")
        item.check_keys(("name", "weight"))
        written = _plugin_name(item)
        disabled.add(_LEGACY_DISABLE_ALIASES.get(written, written) if legacy else written)
    return _PluginSet(tuple(enabled), frozenset(disabled))


def _plugin_name(item: _Obj) -> str:
    name = item.get_str("name", "")
    if not name:
        _required(item.at("name"))
    return name


def _merge(defaults: tuple[_Plugin, ...], custom: _PluginSet) -> list[_Plugin]:
    """`mergePluginSet`: drop disabled defaults ("*" drops all), replace re-enabled defaults in
    place with the custom entry, append the remaining custom entries."""
    custom_index = {p.name: i for i, p in enumerate(custom.enabled)}
    replaced: set[int] = set()
    merged: list[_Plugin] = []
    if "*" not in custom.disabled:
        for plugin in defaults:
            if plugin.name in custom.disabled:
                continue
            if plugin.name in custom_index:
                replaced.add(custom_index[plugin.name])
                plugin = custom.enabled[custom_index[plugin.name]]
            merged.append(plugin)
    merged.extend(p for i, p in enumerate(custom.enabled) if i not in replaced)
    return merged


def _score_weights(multi_point: _PluginSet, score: _PluginSet) -> ScoreWeights:
    """The enabled score plugins in run order with their weights, as the framework builds them:
    `expandMultiPointPlugins` orders score plugins as (score.enabled entries that override a
    multiPoint one) + (multiPoint-only ones) + (the other score.enabled entries), skipping
    multiPoint entirely when score disables "*"; `getScoreWeights` takes the score.enabled
    weight first, then multiPoint's, and turns 0 into 1."""
    multi = [p for p in _merge(_DEFAULT_MULTI_POINT, multi_point) if p.name in SCORE_PLUGINS]
    explicit = [p.name for p in score.enabled]
    if "*" in score.disabled:
        order = explicit
    else:
        expanded = [p.name for p in multi if p.name not in score.disabled]
        overrides = {name for name in expanded if name in explicit}
        order = ([n for n in explicit if n in overrides] + [n for n in expanded if n not in overrides]
                 + [n for n in explicit if n not in overrides])
    weights: dict[str, int] = {}
    for plugin in (*score.enabled, *multi):
        weights.setdefault(plugin.name, plugin.weight or 1)
    return ScoreWeights((name, weights[name]) for name in order)


# --- pluginConfig -----------------------------------------------------------------------------


@dataclass
class _Args:
    fit: ScoringStrategy | None = None
    coscheduling: CoschedulingArgs = CoschedulingArgs()
    devices: DeviceArgs = DeviceArgs()
    fragmentation: FragmentationArgs = FragmentationArgs()


def _plugin_config(owner: _Obj, *, legacy: bool) -> _Args:
    supported = ("RequestedToCapacityRatio" if legacy else "NodeResourcesFit", "Coscheduling", "TesseraDevices",
                 "TesseraFragmentation")
    result = _Args()
    seen: set[str] = set()
    for i, raw in enumerate(owner.get_list("pluginConfig")):
        path = f"{owner.at('pluginConfig')}[{i}]"
        item = _Obj(raw, path)
        item.check_keys(("name", "args"))
        name = _plugin_name(item)
        if name in seen:
            _duplicate(path, name)
        seen.add(name)
        if name not in supported:
            _unsupported(item.at("name"), name, supported)
        raw_args = item.raw("args")
        args = _Obj({} if raw_args is None else raw_args, item.at("args"), fold=name == "RequestedToCapacityRatio")
        if name == "RequestedToCapacityRatio":
            result.fit = _legacy_rtcr_args(args)
            continue
        args.check_keys(_ARGS_FIELDS[name], _ARGS_IGNORED.get(name, ()), _ARGS_HINTS.get(name))
        kind = args.raw("kind")
        if kind is not None and kind != f"{name}Args":
            _invalid(args.at("kind"), kind, f"has to match plugin args ({name}Args)")
        if name == "NodeResourcesFit":
            result.fit = _fit_args(args)
        elif name == "Coscheduling":
            result.coscheduling = CoschedulingArgs(
                permit_waiting_time_seconds=_non_negative(args, "permitWaitingTimeSeconds", 60),
                pod_group_backoff_seconds=_non_negative(args, "podGroupBackoffSeconds", 0),
            )
        elif name == "TesseraDevices":
            result.devices = DeviceArgs(
                allocation_gate=args.get_bool("allocationGate", True),
                agent_heartbeat_timeout_seconds=_positive(args, "agentHeartbeatTimeoutSeconds", 90),
                default_class_controller=args.get_bool("defaultClassController", False),
            )
        else:
            result.fragmentation = _fragmentation_args(args)
    return result


def _fragmentation_args(args: _Obj) -> FragmentationArgs:
    default = FragmentationArgs()
    resource = args.get_str("resourceName", default.resource_name)
    if not resource.strip():
        _invalid(args.at("resourceName"), resource, "must be a resource name such as nvidia.com/gpu")
    limit = args.get_int("maxTaskTypes", default.max_task_types)
    if not 1 <= limit <= 10_000:
        _invalid(args.at("maxTaskTypes"), limit, "not in valid range [1-10000]")
    return FragmentationArgs(resource_name=resource, max_task_types=limit)


_ARGS_FIELDS = {
    "NodeResourcesFit": ("apiVersion", "kind", "scoringStrategy"),
    "Coscheduling": ("apiVersion", "kind", "permitWaitingTimeSeconds", "podGroupBackoffSeconds"),
    "TesseraDevices": ("apiVersion", "kind", "allocationGate", "agentHeartbeatTimeoutSeconds",
                       "defaultClassController"),
    "TesseraFragmentation": ("apiVersion", "kind", "resourceName", "maxTaskTypes"),
}
_ARGS_IGNORED = {"Coscheduling": ("podGroupRejectPercentage",)}
_ARGS_HINTS = {"NodeResourcesFit": {
    "ignoredResources": "Tessera does not support ignoredResources",
    "ignoredResourceGroups": "Tessera does not support ignoredResourceGroups",
}}


def _non_negative(obj: _Obj, key: str, default: int) -> int:
    value = obj.get_int(key, default)
    if value < 0:
        _invalid(obj.at(key), value, "must be greater than or equal to 0")
    return value


def _positive(obj: _Obj, key: str, default: int) -> int:
    value = obj.get_int(key, default)
    if value < 1:
        _invalid(obj.at(key), value, "must be greater than 0")
    return value


def _fit_args(args: _Obj) -> ScoringStrategy:
    """NodeResourcesFitArgs: v1 defaulting, then ValidateNodeResourcesFitArgs."""
    strategy = args.get_obj("scoringStrategy")
    if strategy is None:
        return _DEFAULT_FIT
    strategy.check_keys(("type", "resources", "requestedToCapacityRatio"))
    written = strategy.raw("type")
    kind = next((t for t in _SCORING_TYPES if t == written), None)
    if kind is None:
        _unsupported(strategy.at("type"), "" if written is None else written, _SCORING_TYPES)
    resources = _fit_resources(strategy)
    ratio = strategy.get_obj("requestedToCapacityRatio")
    shape: tuple[ShapePoint, ...] = ()
    if kind == "RequestedToCapacityRatio":
        if ratio is None:
            _required(strategy.at("requestedToCapacityRatio"), "must be specified when type is RequestedToCapacityRatio")
        ratio.check_keys(("shape",))
        shape = _shape(ratio, "shape", max_score=10, scale=10)
    elif ratio is not None:
        _forbidden(strategy.at("requestedToCapacityRatio"), "must be nil when type is not RequestedToCapacityRatio")
    return ScoringStrategy(type=kind, resources=resources, shape=shape)


def _fit_resources(strategy: _Obj) -> tuple[ResourceWeight, ...]:
    items = strategy.get_list("resources")
    if not items:
        return _DEFAULT_FIT.resources
    resources: list[ResourceWeight] = []
    for i, raw in enumerate(items):
        item = _Obj(raw, f"{strategy.at('resources')}[{i}]")
        item.check_keys(("name", "weight"))
        name = item.get_str("name", "")
        if not name:
            _required(item.at("name"))
        weight = item.get_int("weight", 0) or 1  # v1 defaulting: unset or 0 -> 1
        if not 0 < weight <= 100:
            _invalid(item.at("weight"), weight, f"resource weight of {name} not in valid range (0, 100]")
        if any(r.name == name for r in resources):
            _duplicate(item.at("name"), name)
        resources.append(ResourceWeight(name=name, weight=weight))
    return tuple(resources)


def _shape(owner: _Obj, key: str, *, max_score: int, scale: int) -> tuple[ShapePoint, ...]:
    """validateFunctionShape: non-empty, strictly increasing utilization in [0, 100], score in
    [0, max_score]; scores are then multiplied by `scale` onto the internal 0..100 scale."""
    path = owner.at(key)
    items = owner.get_list(key)
    if not items:
        _required(path, "at least one point must be specified")
    points: list[tuple[_Obj, int, int]] = []
    for i, raw in enumerate(items):
        point = _Obj(raw, f"{path}[{i}]", fold=owner.fold)
        point.check_keys(("utilization", "score"))
        points.append((point, point.get_int("utilization", 0), point.get_int("score", 0)))
    for (_, previous, _), (point, utilization, _) in zip(points, points[1:]):
        if previous >= utilization:
            _invalid(point.at("utilization"), utilization, "values must be sorted in increasing order")
    for point, utilization, score in points:
        if not 0 <= utilization <= 100:
            _invalid(point.at("utilization"), utilization, "not in valid range [0, 100]")
        if not 0 <= score <= max_score:
            _invalid(point.at("score"), score, f"not in valid range [0, {max_score}]")
    return tuple(ShapePoint(utilization=u, score=s * scale) for _, u, s in points)


def _legacy_rtcr_args(args: _Obj) -> ScoringStrategy:
    """Kubernetes 1.17 RequestedToCapacityRatioArgs: scores already 0..100, weights >= 1."""
    args.check_keys(("functionShape", "resourceToWeightMap"))
    shape = _shape(args, "functionShape", max_score=100, scale=1)
    path = args.at("resourceToWeightMap")
    weights = args.raw("resourceToWeightMap")
    if not weights:
        _required(path, "at least one resource must be specified")
    if not isinstance(weights, dict):
        _invalid(path, weights, f"must be a mapping, not {_type_name(weights)}")
    resources: list[ResourceWeight] = []
    for name, weight in weights.items():
        item = f"{path}[{name}]"
        if not isinstance(name, str) or not name:
            _invalid(item, name, "resource names must be non-empty strings")
        if isinstance(weight, bool) or not isinstance(weight, int):
            _invalid(item, weight, "must be an integer")
        if weight < 1:
            _invalid(item, weight, f"resource weight of {name} must not be less than 1")
        resources.append(ResourceWeight(name=name, weight=weight))
    return ScoringStrategy(type="RequestedToCapacityRatio", resources=tuple(resources), shape=shape)


# --- leaderElection and clientConnection --------------------------------------------------------


_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_DURATION_UNITS = {"ns": 1, "us": 10**3, "µs": 10**3, "μs": 10**3, "ms": 10**6, "s": _SECOND,
                   "m": 60 * _SECOND, "h": 3600 * _SECOND}


def _parse_duration(text: str) -> int | None:
    """Go's time.ParseDuration ("15s", "1m30s", "1.5h", "0"), in nanoseconds; None if invalid."""
    sign, rest = (-1, text[1:]) if text[:1] == "-" else (1, text[1:] if text[:1] == "+" else text)
    if rest == "0":
        return 0
    total, pos = Decimal(0), 0
    while pos < len(rest):
        match = _DURATION_PART.match(rest, pos)
        if match is None:
            return None
        try:
            total += Decimal(match.group(1)) * _DURATION_UNITS[match.group(2)]
        except InvalidOperation:
            return None
        pos = match.end()
    if pos == 0 or total > 2**63 - 1:
        return None
    return sign * int(total)


def _format_duration(ns: int) -> _Verbatim:
    """Go's time.Duration.String(), for messages: 10s, 1m30s, 1.5s, 500ms."""
    def frac(value: int, unit: int) -> str:
        whole, rest = divmod(value, unit)
        return str(whole) if rest == 0 else f"{whole}.{str(rest).rjust(len(str(unit)) - 1, '0').rstrip('0')}"

    sign, ns = ("-" if ns < 0 else ""), abs(ns)
    if ns == 0:
        return _Verbatim("0s")
    if ns < _SECOND:
        unit, size = next((u, s) for u, s in (("ms", 10**6), ("µs", 10**3), ("ns", 1)) if ns >= s)
        return _Verbatim(f"{sign}{frac(ns, size)}{unit}")
    hours, rest = divmod(ns, 3600 * _SECOND)
    minutes, rest = divmod(rest, 60 * _SECOND)
    text = f"{frac(rest, _SECOND)}s"
    if hours or minutes:
        text = f"{minutes}m{text}"
    if hours:
        text = f"{hours}h{text}"
    return _Verbatim(sign + text)


def _duration(obj: _Obj, key: str, default_seconds: int) -> int:
    value = obj.raw(key)
    if value is None:
        return default_seconds * _SECOND
    parsed = _parse_duration(value) if isinstance(value, str) else None
    if parsed is None:
        _invalid(obj.at(key), value, 'must be a duration string such as "15s" or "1m30s"')
    return parsed


_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _leader_election(obj: _Obj, legacy: bool) -> LeaderElectionConfig:
    """Defaults: component-base RecommendedDefaultLeaderElectionConfiguration plus the scheduler's
    lease location (Tessera's own name). Checks: ValidateLeaderElectionConfiguration, the
    scheduler's "leases only" rule and client-go's renewDeadline > retryPeriod*JitterFactor."""
    known = ("leaderElect", "leaseDuration", "renewDeadline", "retryPeriod", "resourceLock",
             "resourceName", "resourceNamespace")
    obj.check_keys(known + (("lockObjectName", "lockObjectNamespace") if legacy else ()))
    elect = obj.get_bool("leaderElect", True)
    lease = _duration(obj, "leaseDuration", 15)
    renew = _duration(obj, "renewDeadline", 10)
    retry = _duration(obj, "retryPeriod", 2)
    lock = obj.get_str("resourceLock", "") or "leases"
    namespace = obj.get_str("resourceNamespace", "") or obj.get_str("lockObjectNamespace", "") or "kube-system"
    name = obj.get_str("resourceName", "") or obj.get_str("lockObjectName", "") or "tessera"
    if elect:
        for key, value in (("leaseDuration", lease), ("renewDeadline", renew), ("retryPeriod", retry)):
            if value <= 0:
                _invalid(obj.at(key), _format_duration(value), "must be greater than zero")
        if lease <= renew:
            _invalid(obj.at("leaseDuration"), _format_duration(lease),
                     f"must be greater than `RenewDeadline` ({_format_duration(renew)})")
        if renew <= int(_JITTER_FACTOR * retry):
            _invalid(obj.at("renewDeadline"), _format_duration(renew),
                     f"must be greater than retryPeriod*JitterFactor ({_format_duration(retry)}*{_JITTER_FACTOR})")
        if lock != "leases":
            _invalid(obj.at("resourceLock"), lock, 'resourceLock value must be "leases"')
        # Tessera's own check: the apiserver would refuse the Lease on every retry, forever.
        if not _DNS_SUBDOMAIN.fullmatch(name) or len(name) > 253:
            _invalid(obj.at("resourceName"), name, "must be a lowercase RFC 1123 subdomain (a Lease name)")
        if not _DNS_LABEL.fullmatch(namespace) or len(namespace) > 63:
            _invalid(obj.at("resourceNamespace"), namespace, "must be a lowercase RFC 1123 label (a namespace)")
    return LeaderElectionConfig(
        leader_elect=elect,
        lease_duration_seconds=lease / _SECOND,
        renew_deadline_seconds=renew / _SECOND,
        retry_period_seconds=retry / _SECOND,
        resource_namespace=namespace,
        resource_name=name,
    )


def _client_connection(obj: _Obj) -> ClientConnectionConfig:
    """kube-scheduler's client defaults (qps 0 -> 50, burst 0 -> 100) and component-base checks."""
    obj.check_keys(("kubeconfig", "qps", "burst"), ("contentType", "acceptContentTypes"))
    qps = obj.get_float("qps", 0.0)
    if qps < 0:
        _invalid(obj.at("qps"), obj.raw("qps"), "must be non-negative")
    burst = obj.get_int("burst", 0)
    if burst < 0:
        _invalid(obj.at("burst"), burst, "must be non-negative")
    return ClientConnectionConfig(
        kubeconfig=obj.get_str("kubeconfig", "") or None,
        qps=qps or 50.0,
        burst=burst or 100,
    )
