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

- Errors are aggregated as upstream's (`utilerrors.NewAggregate`: one error alone, several as
  "[a, b]", on one line) across the independent top-level fields, in validation.go's order:
  clientConnection, leaderElection, parallelism, profiles, percentageOfNodesToScore, the backoffs,
  extenders; and within each of them too (`Checks`, flattened as upstream's `utilerrors.Flatten`):
  every profile, in validateKubeSchedulerProfile's order (schedulerName, percentageOfNodesToScore,
  the plugin sets, each pluginConfig entry with all of its args' errors, then the duplicate name);
  in leaderElection every ValidateLeaderElectionConfiguration check, then resourceLock. A check
  that reads a value an earlier one vouched for (client-go's jitter rule, Tessera's whole-seconds
  rule, a shape's points after its type) runs only when that one passed. An unknown key ends
  the checks of the mapping holding it (strict decoding stops there). A decoding problem (no or
  another apiVersion or kind, an unknown top-level key) is reported alone, as upstream's strict
  decoding fails before validation runs; a value of the wrong type is one more field's error
  (upstream's decoder would stop at it; Tessera finds it while reading that field). An error about
  a value the file left out (a default that clashes with a written one) says so. Errors of
  upstream's framework build (`BuildError`: a plugin at a point it does not extend, a profile's
  expanded queueSort not holding one plugin) come only from a file with no validation error, the
  first one alone, as kube-scheduler builds the profiles only after validation and stops at the
  first that fails.
- Unknown keys are errors at every level, like upstream's strict decoding of v1 (which has no
  `healthzBindAddress`, `metricsBindAddress` or `percentageOfPlacementsToScore`; v1alpha1 files
  keep their bind addresses, ignored). Known upstream keys Tessera has no use for are accepted
  and ignored: `parallelism` (still validated > 0), `enableProfiling`,
  `enableContentionProfiling`, `delayCacheUntilActive`, `clientConnection.contentType` /
  `acceptContentTypes`, and the plugin args each plugin declares as ignored (its ArgsSpec). A
  non-empty `extenders` list is rejected: ignoring it would silently change placement decisions.
- Numbers are decoded as upstream decodes them into its Go types (`config_reader.go_int`): a
  whole float (`20.0`, `1e3`) is that integer; a fraction, or a number outside the field's
  int32/int64/float32, is refused at the field. Tessera's own integer args are int64.
- `multiPoint`, `preFilter`, `filter`, `preScore` and `score` are each expanded on their own,
  as upstream (a plugin off under `score` keeps its PreScore; off under `filter`, its score and
  PreFilter); `enabled` entries at other extension points must name a Tessera plugin that
  implements the point, in Tessera or upstream (`interface.extends`: upstream's framework build
  fails with `plugin "X" does not extend FilterPlugin plugin` otherwise; the points Tessera runs
  elsewhere are no-ops, so scheduler-plugins style configs that enable Coscheduling at
  queueSort/permit still load) and `disabled` entries there are ignored.
- Which filters a profile may turn off. Upstream's default filters (NodeUnschedulable, NodeName,
  TaintToleration, NodeAffinity, NodePorts, PodTopologySpread, InterPodAffinity: every Filter
  that does not `stays_on`) follow upstream's rules: off by name or `"*"` under `filter.disabled` or
  `multiPoint.disabled`, on again by `filter.enabled` (`_expand`); the runtime then builds no
  part of them but their score (`Profile.disabled_filters`). `preFilter` does the same for the
  PreFilters Tessera runs as upstream's: NodeAffinity's alone (its `node_names` narrowing and
  "conflict" refusal; its Filter then reads the required terms itself, upstream's fallback).
  NodePorts', PodTopologySpread's and InterPodAffinity's PreFilters are part of their filters
  here: disabling one under `preFilter` alone changes nothing, where upstream's Filter would
  fail every pod with an error (its PreFilter state missing). The filters that keep Tessera's promises stay on:
  NodeResourcesFit's, TesseraDevices, Coscheduling, TopologyPlacement (`Plugin.stays_on`: off,
  a device could be given twice or a gang split). `filter`/`preFilter` naming one is a
  Forbidden error saying why (the file expects it off); `"*"` there leaves them on, and
  `multiPoint` disabling one by name or `"*"` removes its PreScore and score only.
  TesseraUnhonouredTerms (a Tessera PreFilter refusing pods with pod (anti-)affinity terms
  Tessera cannot honour, `may_disable`) is turned off when `preFilter`, `filter` or
  `multiPoint` disables it by name; `"*"` keeps it.
- DefaultPreemption runs unless disabled: `postFilter.enabled` naming it wins, else
  `postFilter.disabled` (by name or `"*"`) turns it off, else the multiPoint set decides
  (expandMultiPointPlugins); v1alpha1's `disablePreemption: true` turns it off.
- Score plugin weights must be >= 0 (upstream's validation does not check; its framework's
  overflow check then fails on the plugin after a negative one: "total score of Score plugins
  could overflow"); 0 or absent means 1, as upstream.
- `pluginConfig` may only name plugins that take args; each plugin validates its own (the
  registry's ArgsSpec, parsers in the plugins' modules), and an enabled plugin with no entry
  has its defaults parsed as upstream's defaulting appends them (`_with_default_args`). `clientConnection.qps` must be >= 0
  (client-go treats a negative QPS as "no rate limit", which Tessera does not offer).
- The lease defaults to `kube-system/tessera`, not `kube-scheduler`: Tessera runs beside the
  default scheduler and must not compete for its lease. A file that names kube-scheduler's Lease
  or `default-scheduler` is still valid here (it is for kube-scheduler); `tessera run` refuses it
  (`SchedulerConfig.kube_scheduler_clashes`) unless told Tessera replaces kube-scheduler.
- v1beta2 and v1beta3 are refused, as kube-scheduler has refused them since 1.28 and 1.29, with
  the fix in the message (v1beta2's default score weights differ from v1's, so reading it with v1
  rules would place pods differently from what the file meant). v1alpha1 is the seed's legacy
  form (upstream removed it too; Tessera keeps it for the seed's files): top-level
  `plugins`/`pluginConfig` for one profile; the names and args it used for a plugin are the
  plugin's LegacyForm in the registry (pluginConfig keys matched case-insensitively, as Go's
  encoding/json decoded them). Its `postFilter` is the informational point v1alpha2 renamed
  preScore: a plugin extending either may be enabled there.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import TypeVar

import pydantic
from pydantic import BaseModel

from scheduler.api.config_reader import (
    ArgsReader,
    BuildError,
    Checks,
    FieldError,
    FieldErrors,
    Verbatim,
    child,
    duplicate,
    fmt,
    go_json,
    forbidden,
    invalid,
    required,
    type_name,
    unsupported,
)
from scheduler.api.config_model import (
    DEFAULT_SCHEDULER_NAME,
    ClientConnectionConfig,
    ConfigError,
    LeaderElectionConfig,
    PluginArgs,
    Profile,
    SchedulerConfig,
    ScoreWeights,
)
from scheduler.api.names import DNS_LABEL, DNS_SUBDOMAIN
from scheduler.core.objects import INT32_MAX
from scheduler.core.framework.interface import EXTENSION_POINTS, FilterPlugin, PreFilterPlugin, extends
from scheduler.core.plugins.registry import BY_NAME, REGISTRY, PluginSpec, enabled_in, not_supported_note

__all__ = ["parse_config", "parse_leader_election", "SUPPORTED_API_VERSIONS"]

_GROUP = "kubescheduler.config.k8s.io"
V1_API_VERSION = f"{_GROUP}/v1"
LEGACY_API_VERSION = f"{_GROUP}/v1alpha1"
SUPPORTED_API_VERSIONS = (V1_API_VERSION, LEGACY_API_VERSION)
# Versions kube-scheduler removed (its error: `no kind "KubeSchedulerConfiguration" is registered for
# version ...`): the Kubernetes release that removed each, and what changes when the file says v1.
_REMOVED_API_VERSIONS = {
    f"{_GROUP}/v1beta3": ("1.29", ""),
    f"{_GROUP}/v1beta2": ("1.28", " (its default score weights are TaintToleration 3, NodeAffinity 2 and "
                                  "InterPodAffinity 2; v1beta2's were 1, 1 and 1)"),
}
KIND = "KubeSchedulerConfiguration"

_COMMON_TOP = ("apiVersion", "kind", "percentageOfNodesToScore", "podInitialBackoffSeconds",
               "podMaxBackoffSeconds", "leaderElection", "clientConnection")
_IGNORED_TOP = ("enableProfiling", "enableContentionProfiling")
_V1_TOP = _COMMON_TOP + ("profiles", "parallelism", "extenders")
_V1_IGNORED_TOP = _IGNORED_TOP + ("delayCacheUntilActive",)
_LEGACY_TOP = _COMMON_TOP + ("schedulerName", "plugins", "pluginConfig", "algorithmSource", "disablePreemption")
_LEGACY_IGNORED_TOP = _IGNORED_TOP + ("healthzBindAddress", "metricsBindAddress", "hardPodAffinitySymmetricWeight",
                                      "bindTimeoutSeconds")
_BIND_ADDRESS_HINT = ("v1 has no such field, and kube-scheduler refuses it; Tessera serves healthz and metrics "
                      "on its --bind-address and --port flags")
_V1_HINTS = {
    "healthzBindAddress": _BIND_ADDRESS_HINT,
    "metricsBindAddress": _BIND_ADDRESS_HINT,
    "plugins": "in v1 plugins belong to profiles[].plugins (top-level plugins is the v1alpha1 form)",
    "pluginConfig": "in v1 pluginConfig belongs to profiles[].pluginConfig",
    "schedulerName": "in v1 the scheduler name is profiles[].schedulerName",
}
_LEGACY_HINTS = {"profiles": f"profiles need apiVersion {V1_API_VERSION}"}

# v1's points and v1alpha1's (no preEnqueue; unreserve), in `interface.EXTENSION_POINTS`' order
_EXTENSION_POINTS = tuple(p for p in EXTENSION_POINTS if p != "unreserve")
_LEGACY_EXTENSION_POINTS = tuple(p for p in EXTENSION_POINTS if p != "preEnqueue")
# v1alpha1's `postFilter` is the informational point after filtering that v1alpha2 renamed
# preScore (1.17's InterPodAffinity implements it); v1's postFilter, preemption's, came later:
# a v1alpha1 file may enable a plugin there that extends either.
_LEGACY_POINT_RENAMED = {"postFilter": "preScore"}

# What the registry says about plugins (names, default weights, args, v1alpha1 names): this
# module knows no plugin by name.
_SCORE_PLUGINS = tuple(spec.name for spec in REGISTRY if spec.scores)
_PRE_SCORE_PLUGINS = tuple(spec.name for spec in REGISTRY if spec.pre_scores)
_QUEUE_SORT_PLUGINS = tuple(spec.name for spec in REGISTRY if extends(spec.kind, "queueSort"))
_PRIORITY_SORT = "PrioritySort"  # the queue sort plugin of upstream's default multiPoint set
_BIND_PLUGINS = tuple(spec.name for spec in REGISTRY if extends(spec.kind, "bind"))
# Tessera's own PreFilters a profile turns off by name only (`PreFilterPlugin.may_disable`)
_OPTIONAL_PRE_FILTERS = tuple(spec.name for spec in REGISTRY
                              if issubclass(spec.kind, PreFilterPlugin) and spec.kind.may_disable)
# The Filters and PreFilters a profile may turn off as upstream's per-point rules say (every one
# that does not `stays_on`), in registry order
_DISABLEABLE_FILTERS = tuple(spec.name for spec in REGISTRY
                             if issubclass(spec.kind, FilterPlugin) and not spec.kind.stays_on)
_DISABLEABLE_PRE_FILTERS = tuple(spec.name for spec in REGISTRY if issubclass(spec.kind, PreFilterPlugin)
                                 and not spec.kind.stays_on and not spec.kind.may_disable)
_LEGACY_ENABLE_ALIASES = {alias: spec.name for spec in REGISTRY if spec.legacy for alias in spec.legacy.enable}
_LEGACY_DISABLE_ALIASES = {alias: spec.name for spec in REGISTRY if spec.legacy for alias in spec.legacy.disable}
_SECOND = 10**9
_JITTER_FACTOR = 1.2  # client-go leaderelection.JitterFactor


def parse_config(raw: object, source: str) -> SchedulerConfig:
    """Validate and default `raw` (the result of `yaml.safe_load`); `source` names it in errors."""
    return _reporting(lambda: _parse(raw, source), source)


def parse_leader_election(raw: object, source: str) -> LeaderElectionConfig:
    """The `leaderElection` section alone of a document that may be invalid elsewhere, validated
    and defaulted as `parse_config` does: the Lease its scheduler elects on (kubectl tessera reads
    the running replicas' Lease from an installed configuration that a later edit broke)."""
    def read() -> LeaderElectionConfig:
        if not isinstance(raw, dict):
            raise FieldError("", f"expected a {KIND} mapping, not {type_name(raw)}")
        root = ArgsReader(raw, "")
        if root.raw("kind") != KIND:  # not a scheduler configuration: its defaults would be a guess
            unsupported("kind", root.raw("kind"), [KIND])
        return _leader_election(root.get_obj("leaderElection") or ArgsReader({}, "leaderElection"),
                                root.raw("apiVersion") == LEGACY_API_VERSION)
    return _reporting(read, source)


_T = TypeVar("_T")


def _reporting(parse: Callable[[], _T], source: str) -> _T:
    """`parse()`, its field errors raised as one ConfigError naming `source`."""
    try:
        return parse()
    except FieldError as err:
        raise ConfigError(source, err.field, err.message) from None
    except FieldErrors as err:
        raise ConfigError(source, "", str(err), tuple(found.field for found in err.errors)) from None
    except pydantic.ValidationError as err:  # a rule the parser missed; still no traceback
        first = err.errors()[0]
        raise ConfigError(source, ".".join(map(str, first["loc"])), first["msg"]) from None


# --- top level --------------------------------------------------------------------------------


def _parse(raw: object, source: str) -> SchedulerConfig:
    if raw is None:
        raise FieldError("", f"the file is empty; expected a {KIND}")
    if not isinstance(raw, dict):
        raise FieldError("", f"expected a {KIND} mapping, not {type_name(raw)}")
    root = ArgsReader(raw, "")
    api_version = root.raw("apiVersion")
    if api_version is None:
        required("apiVersion", f"use {V1_API_VERSION}")
    if isinstance(api_version, str) and api_version in _REMOVED_API_VERSIONS:
        release, changes = _REMOVED_API_VERSIONS[api_version]
        raise FieldError("apiVersion", f"Unsupported value: {json.dumps(api_version)}: removed in Kubernetes "
                                       f"{release}, kube-scheduler no longer reads it: use {V1_API_VERSION}{changes}")
    if api_version not in SUPPORTED_API_VERSIONS:
        unsupported("apiVersion", api_version, SUPPORTED_API_VERSIONS)
    kind = root.raw("kind")
    if kind is None:
        required("kind", f"use {KIND}")
    if kind != KIND:
        unsupported("kind", kind, [KIND])
    legacy = api_version == LEGACY_API_VERSION
    # strict decoding: upstream stops at an unknown field, before any validation
    if legacy:
        root.check_keys(_LEGACY_TOP, _LEGACY_IGNORED_TOP, _LEGACY_HINTS)
    else:
        root.check_keys(_V1_TOP, _V1_IGNORED_TOP, _V1_HINTS)

    found = Checks()
    no_profiles: tuple[Profile, ...] = ()
    client_connection = found.read(
        lambda: _client_connection(root.get_obj("clientConnection") or ArgsReader({}, "clientConnection")), None)
    leader_election = found.read(
        lambda: _leader_election(root.get_obj("leaderElection") or ArgsReader({}, "leaderElection"), legacy), None)
    parallelism = 16
    if legacy:
        profiles = found.read(lambda: _legacy_profiles(root), no_profiles)
    else:
        parallelism = found.read(lambda: _parallelism(root), parallelism)
        profiles = found.read(lambda: _v1_profiles(root), no_profiles)
    percentage = found.read(lambda: _percentage(root, "percentageOfNodesToScore", 0), 0)
    initial = found.read(lambda: _initial_backoff(root, found), None)
    maximum = found.read(lambda: _max_backoff(root, initial), 0)
    if not legacy:
        found.read(lambda: _no_extenders(root), None)
    found.raise_validation_first()
    assert client_connection is not None and leader_election is not None and initial is not None

    return SchedulerConfig(
        profiles=profiles,
        percentage_of_nodes_to_score=percentage,
        pod_initial_backoff_seconds=initial,
        pod_max_backoff_seconds=maximum,
        leader_election=leader_election,
        client_connection=client_connection,
        parallelism=parallelism,
        source=source,
        unused_fields=_unused_fields(raw, legacy),
    )


def _parallelism(root: ArgsReader) -> int:
    parallelism = root.get_int("parallelism", 16, "int32")
    if parallelism <= 0:
        invalid("parallelism", root.raw("parallelism"), "should be an integer value greater than zero")
    return parallelism


def _unused_fields(raw: dict[str, object], legacy: bool) -> tuple[str, ...]:
    """The fields a valid file sets that Tessera accepts without using, in file order: the
    ignored top-level ones (and `parallelism`, checked only), clientConnection's content types,
    and each v1 pluginConfig entry's args its plugin declares ignored or unused (ArgsSpec)."""
    top = {"parallelism", *(_LEGACY_IGNORED_TOP if legacy else _V1_IGNORED_TOP)}
    found = [key for key, value in raw.items() if key in top and value is not None]
    connection = raw.get("clientConnection")
    if isinstance(connection, dict):
        found += [child("clientConnection", key) for key, value in connection.items()
                  if key in _CONTENT_TYPES and value is not None]
    profiles = raw.get("profiles") if not legacy else None
    for i, profile in enumerate(profiles if isinstance(profiles, list) else ()):
        entries = profile.get("pluginConfig") if isinstance(profile, dict) else None
        for j, entry in enumerate(entries if isinstance(entries, list) else ()):
            spec = BY_NAME.get(str(entry.get("name"))) if isinstance(entry, dict) else None
            args = entry.get("args") if isinstance(entry, dict) else None
            if spec is not None and spec.args is not None and isinstance(args, dict):
                unused = {*spec.args.ignored, *spec.args.unused}
                found += [f"profiles[{i}].pluginConfig[{j}].args.{key}" for key, value in args.items()
                          if key in unused and value is not None]
    return tuple(found)


def _initial_backoff(root: ArgsReader, found: Checks) -> int:
    """podInitialBackoffSeconds; when it is a number but not positive, the error is kept in `found`
    and the number returned, for podMaxBackoffSeconds to be compared with."""
    initial = root.get_int("podInitialBackoffSeconds", 1)
    if initial <= 0:
        found.check(lambda: invalid("podInitialBackoffSeconds", initial, "must be greater than 0"))
    return initial


def _max_backoff(root: ArgsReader, initial: int | None) -> int:
    """podMaxBackoffSeconds, compared with podInitialBackoffSeconds even when that is invalid itself
    (as validation.go compares them); not when that is not a number."""
    maximum = root.get_int("podMaxBackoffSeconds", 10)
    if initial is not None and maximum < initial:
        invalid("podMaxBackoffSeconds", maximum, "must be greater than or equal to PodInitialBackoffSeconds"
                + _unset_note(root, {"podMaxBackoffSeconds": 10}))
    return maximum


def _no_extenders(root: ArgsReader) -> None:
    if root.get_list("extenders"):
        forbidden("extenders", "Tessera does not call scheduler extenders")


def _legacy_profiles(root: ArgsReader) -> tuple[Profile, ...]:
    """v1alpha1's one profile, from the top-level plugins and pluginConfig."""
    algorithm = root.get_obj("algorithmSource")
    if algorithm is not None and algorithm.raw("policy") is not None:
        forbidden(algorithm.at("policy"), "Tessera does not read scheduling Policy files")
    profile, plugins = _legacy_profile(root)
    _framework_counts(profile, plugins, "", several=False)
    return (profile,)


def _unset_note(obj: ArgsReader, defaults: dict[str, object]) -> str:
    """For a message about values compared with each other: which of them the file left out (the
    default it then clashed with), e.g. " (podMaxBackoffSeconds is not set; its default is 10)"."""
    unset = {key: value for key, value in defaults.items() if obj.raw(key) is None}
    if not unset:
        return ""
    if len(unset) == 1:
        ((key, value),) = unset.items()
        return f" ({key} is not set; its default is {value})"
    return f" ({' and '.join(unset)} are not set; their defaults are {' and '.join(map(str, unset.values()))})"


def _percentage(obj: ArgsReader, key: str, default: int) -> int:
    value = obj.get_int(key, default, "int32")
    if not 0 <= value <= 100:
        invalid(obj.at(key), value, "not in valid range [0-100]")
    return value


# --- profiles ---------------------------------------------------------------------------------


def _v1_profiles(root: ArgsReader) -> tuple[Profile, ...]:
    """Every profile, each with all of its errors, in validation.go's order: the profile's own
    (`validateKubeSchedulerProfile`), then its duplicate name."""
    raw_profiles = root.get_list("profiles") or [{}]  # defaults.go: no profiles -> one default profile
    found = Checks()
    profiles: dict[int, Profile] = {}
    seen: dict[str, int] = {}
    for i, raw in enumerate(raw_profiles):
        built = found.read(lambda: _v1_profile(raw, i, len(raw_profiles) == 1, seen), None)
        if built is not None:
            profiles[i], plugins = built
            found.check(lambda: _framework_counts(profiles[i], plugins, f"profiles[{i}]", several=len(raw_profiles) > 1))
    found.check(lambda: _one_queue_sort(raw_profiles[0]))
    for i in range(1, len(raw_profiles)):
        found.check(lambda: _same_queue_sort(raw_profiles, profiles, i))
    found.raise_errors()
    return tuple(profiles.values())


_SAME_QUEUE_SORT = "must be the same for all profiles"  # the set's; the args' says "queueSort " first
_SAME_QUEUE_SORT_FIX = "; every profile's queueSort must be written the same"


def _framework_counts(profile: Profile, plugins: _ProfilePlugins, path: str, *, several: bool) -> None:
    """NewFramework's counts, in its order and kube-scheduler v1.36's words: the profile's
    queueSort point, as `expandMultiPointPlugins` builds it (`Profile.queue_sort`), holds one
    plugin, and its bind point (`_ProfilePlugins.bind_plugins`) one at least. Validation's count
    (`_one_queue_sort`) sees only what the file writes at queueSort: `enabled: [Coscheduling]`
    beside multiPoint's PrioritySort passes it and fails here, as does a point with none left;
    `multiPoint: {disabled: ["*"]}` must enable DefaultBinder again as well as PrioritySort.
    Upstream's sentence comes first, verbatim; `_queue_sort_fix` then says why and what to write,
    and, with `several` profiles, that each must write queueSort alike (`_same_queue_sort`): the
    fix written into the one named alone fails again."""
    name = json.dumps(profile.scheduler_name)
    if len(profile.queue_sort) != 1:
        raise BuildError(child(path, "plugins.queueSort"), f"only one queue sort plugin required for profile "
                                                           f"with scheduler name {name}, but got {len(profile.queue_sort)}; "
                                                           f"({_queue_sort_fix(profile.queue_sort, plugins, legacy=not path)}"
                                                           f"{_SAME_QUEUE_SORT_FIX if several else ''})")
    if not plugins.bind_plugins():
        raise BuildError(child(path, "plugins.bind"),
                         f"at least one bind plugin is needed for profile with scheduler name {name}")


def _queue_sort_fix(held: tuple[str, ...], plugins: _ProfilePlugins, *, legacy: bool) -> str:
    """What a queueSort point that is not one plugin holds, where each came from and the fix: a
    new user who enabled Coscheduling read upstream's "but got 2" and could not see the other one,
    multiPoint's default PrioritySort. The plugin to keep is the one enabled at queueSort itself
    (disabling it there would not drop it: upstream's mergePluginSet keeps a point's enabled
    plugins whatever its disabled list says), else the last one the file enabled; the others are
    disabled at queueSort, or all of multiPoint's with "*" when the kept one is enabled at queueSort
    itself (for one enabled at multiPoint, "*" would drop it too)."""
    if not held:
        first, *rest = _QUEUE_SORT_PLUGINS
        return (f"the point holds none: enable {first} (or {', '.join(rest)}) again at queueSort, "
                f"e.g. enabled: [{{name: {first}}}]")
    at_point = {p.name for p in plugins.queue_sort.enabled}
    at_multi = {p.name for p in plugins.multi_point.enabled}

    def origin(plugin: str) -> str:
        if plugin in at_point:
            return "enabled at queueSort"
        if plugin in at_multi:
            return "enabled at multiPoint"
        return "from the defaults" if legacy else "from multiPoint's defaults"

    keep = next((p for p in held if p in at_point), None) or next((p for p in reversed(held) if p in at_multi), held[-1])
    drop = [p for p in held if p != keep]
    fix = f"disable {' and '.join(drop)} at queueSort, e.g. disabled: [{', '.join(f'{{name: {p}}}' for p in drop)}]"
    if keep in at_point:
        fix += ', or disabled: ["*"]'
    return f"the point holds {' and '.join(f'{p} ({origin(p)})' for p in held)}: {fix}"


def _one_queue_sort(raw: object) -> None:
    """validateCommonQueueSort's count: the first profile's written queueSort enables one plugin at
    most (Tessera's queue order ignores the name, but kube-scheduler v1.36 refuses two; the other
    profiles must equal the first, `_same_queue_sort`)."""
    written = _queue_sort(raw)
    if written is not None and len(written[0]) > 1:
        invalid("profiles[0].plugins.queueSort.Enabled", len(written[0]), "only one queue sort plugin can be enabled")


def _same_queue_sort(raw_profiles: list[object], profiles: dict[int, Profile], i: int) -> None:
    """validateCommonQueueSort: one queue holds every profile's pods, so profile `i`'s queueSort
    set must be the first profile's, and the args of the first profile's queue sort plugin the
    same in both (after defaulting: `plugin_args` keeps the ones that differ from the defaults).
    The value is printed as upstream's field.Invalid prints the internal type (`go_json`); a set
    this cannot read was already refused by its profile's own checks."""
    canon, curr = _queue_sort(raw_profiles[0]), _queue_sort(raw_profiles[i])
    if canon is None or curr is None:
        return
    if canon != curr:
        invalid(f"profiles[{i}].plugins.queueSort", _go_plugin_set(*curr), _SAME_QUEUE_SORT)
    first, other = profiles.get(0), profiles.get(i)
    name = canon[0][0][0] if canon[0] else ""
    if not name or first is None or other is None or BY_NAME[name].args is None:
        return
    args = other.plugin_args.get(name, BY_NAME[name].default_args())
    if first.plugin_args.get(name, BY_NAME[name].default_args()) != args:
        invalid(f"profiles[{i}].pluginConfig.args", _go_args(args), f"queueSort {_SAME_QUEUE_SORT}")


_QueueSort = tuple[tuple[tuple[str, int], ...], tuple[str, ...]]


def _queue_sort(raw: object) -> _QueueSort | None:
    """A profile's written `plugins.queueSort`: its enabled (name, weight) and disabled names in
    order (upstream compares the lists as written: the default set is empty, every queue sort
    plugin being multiPoint's); None when it cannot be read."""
    plugins = raw.get("plugins") if isinstance(raw, dict) else None
    point = plugins.get("queueSort") if isinstance(plugins, dict) else None
    if point is None:
        return (), ()
    if not isinstance(point, dict):
        return None
    enabled, disabled = point.get("enabled") or [], point.get("disabled") or []
    if not isinstance(enabled, list) or not isinstance(disabled, list) \
            or not all(isinstance(item, dict) and isinstance(item.get("name"), str)
                       and isinstance(item.get("weight", 0), int) for item in (*enabled, *disabled)):
        return None
    return (tuple((item["name"], item.get("weight") or 0) for item in enabled),
            tuple(item["name"] for item in disabled))


def _go_plugin_set(enabled: tuple[tuple[str, int], ...], disabled: tuple[str, ...]) -> Verbatim:
    """A queueSort set as kube-scheduler v1.36's field.Invalid prints the internal config.PluginSet:
    Go's encoding/json of a type without json tags (field names as keys, a nil list as null)."""
    def plugins(entries: list[dict[str, object]]) -> list[dict[str, object]] | None:
        return entries or None
    return go_json({"Enabled": plugins([{"Name": name, "Weight": weight} for name, weight in enabled]),
                     "Disabled": plugins([{"Name": name, "Weight": 0} for name in disabled])})


def _go_args(args: BaseModel) -> Verbatim:
    """A plugin's args as field.Invalid prints its internal config type: Go's encoding/json, its
    fields by their Go names in the model's order (the embedded TypeMeta's kind and apiVersion are
    empty there, and omitempty)."""
    return go_json({"".join(part.capitalize() for part in name.split("_")): value
                     for name, value in args.model_dump(mode="json").items()})


def _v1_profile(raw: object, i: int, lone: bool, seen: dict[str, int]) -> tuple[Profile, _ProfilePlugins]:
    """profiles[i], and its plugin sets for the framework's counts (`_framework_counts`); `seen`
    maps the names of the profiles before it to their index."""
    obj = ArgsReader(raw, f"profiles[{i}]")
    obj.check_keys(("schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig"))
    found = Checks()
    # Only a lone profile gets the default name; validation requires a non-empty one.
    name = found.read(lambda: obj.get_str("schedulerName", DEFAULT_SCHEDULER_NAME if lone else ""), None)
    if name == "":
        found.check(lambda: required(obj.at("schedulerName")))
    percentage: int | None = None
    if obj.raw("percentageOfNodesToScore") is not None:
        percentage = found.read(lambda: _percentage(obj, "percentageOfNodesToScore", 0), None)
    plugins = found.read(lambda: _plugins(obj.get_obj("plugins"), legacy=False), _ProfilePlugins())
    args: dict[str, BaseModel] = found.read(lambda: _plugin_config(obj, legacy=False), {})
    if name and name in seen:
        found.check(lambda: duplicate(obj.at("schedulerName"), name, f"already used by profiles[{seen[name]}].schedulerName"))
    if name:
        seen[name] = i
    found.raise_errors()
    assert name is not None
    return _with_default_args(Profile(
        scheduler_name=name,
        score_weights=plugins.score_weights(),
        pre_score=plugins.pre_score_plugins(),
        queue_sort=plugins.queue_sort_plugins(),
        plugin_args=_plugin_args(args),
        percentage_of_nodes_to_score=percentage,
        preemption=plugins.preemption,
        disabled_filters=plugins.disabled_filters,
        disabled_pre_filters=plugins.disabled_pre_filters,
    ), args, obj), plugins


def _legacy_profile(root: ArgsReader) -> tuple[Profile, _ProfilePlugins]:
    """v1alpha1's profile, and its plugin sets for the framework's counts (`_framework_counts`)."""
    found = Checks()
    name = found.read(lambda: root.get_str("schedulerName", ""), "") or DEFAULT_SCHEDULER_NAME  # empty -> default
    plugins = found.read(lambda: _plugins(root.get_obj("plugins"), legacy=True), _ProfilePlugins())
    configured: dict[str, BaseModel] = found.read(lambda: _plugin_config(root, legacy=True), {})
    found.raise_errors()
    resolved = {spec.name: spec.legacy.resolve for spec in REGISTRY
                if spec.legacy is not None and spec.legacy.resolve is not None}
    args = {name: value for name, value in configured.items() if name not in resolved}
    for entry in plugins.score.enabled:  # a legacy name picks the plugin's args (e.g. a scoring strategy)
        if entry.name in resolved:
            args[entry.name] = resolved[entry.name](entry.alias, configured.get(entry.name))
    return _with_default_args(Profile(
        scheduler_name=name,
        score_weights=plugins.score_weights(),
        pre_score=plugins.pre_score_plugins(),
        queue_sort=plugins.queue_sort_plugins(),
        plugin_args=_plugin_args(args),
        preemption=plugins.preemption and not root.get_bool("disablePreemption", False),
        disabled_filters=plugins.disabled_filters,
        disabled_pre_filters=plugins.disabled_pre_filters,
    ), args, root), plugins


def _plugin_args(args: dict[str, BaseModel]) -> PluginArgs:
    """Only args that differ from the plugin's defaults: equal configurations compare equal."""
    return PluginArgs((name, value) for name, value in args.items() if value != BY_NAME[name].default_args())


def _with_default_args(profile: Profile, configured: dict[str, BaseModel], owner: ArgsReader) -> Profile:
    """Upstream's defaulting gives every enabled plugin that takes args and has no pluginConfig
    entry one, appended after the written entries in name order (v1 defaults.go
    setDefaults_KubeSchedulerProfile), and validation checks those too: each such plugin's
    args are parsed from nothing here, so defaults a plugin does not accept on their own (a
    required key) fail the file, named as upstream names the appended entry. `configured`: the
    written entries' args, by plugin name; `owner`: the mapping holding `pluginConfig`."""
    missing = sorted((spec for spec in enabled_in(profile) if spec.args is not None and spec.name not in configured),
                     key=lambda spec: spec.name)
    if not missing:
        return profile
    written = len(owner.get_list("pluginConfig"))
    found = Checks()
    defaults: dict[str, BaseModel] = {}
    for k, spec in enumerate(missing):
        assert spec.args is not None
        parse = spec.args.parse
        parsed = found.read(lambda: parse(ArgsReader({}, f"{owner.at('pluginConfig')}[{written + k}].args")), None)
        if parsed is not None:
            defaults[spec.name] = parsed
    found.raise_errors()
    args = _plugin_args({**defaults, **configured})
    return profile if args == profile.plugin_args else profile.model_copy(update={"plugin_args": args})


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


# The default multiPoint set (v1 getDefaultPlugins), restricted to what Tessera implements: every
# plugin except score-only ones no default profile scores with.
_DEFAULT_MULTI_POINT = tuple(_Plugin(spec.name, spec.default_weight or 0) for spec in REGISTRY
                             if not spec.scores or spec.default_weight is not None)


@dataclass(frozen=True)
class _ProfilePlugins:
    """The plugin sets of the extension points that change what Tessera does or that upstream's
    framework counts (queueSort, bind), and whether DefaultPreemption runs."""

    multi_point: _PluginSet = _PluginSet()
    pre_score: _PluginSet = _PluginSet()
    score: _PluginSet = _PluginSet()
    preemption: bool = True
    disabled_filters: tuple[str, ...] = ()  # the Filters turned off
    disabled_pre_filters: tuple[str, ...] = ()  # the PreFilters turned off
    queue_sort: _PluginSet = _PluginSet()
    bind: _PluginSet = _PluginSet()

    def queue_sort_plugins(self) -> tuple[str, ...]:
        """The queue sort plugins the queueSort point expands to (`expandMultiPointPlugins`), for
        `/configz`: Tessera's queue has one order whatever they are (queue.py). From multiPoint,
        upstream's default PrioritySort unless written off, and the queue sort plugins the file
        enables there; Tessera's Coscheduling, in its defaults for its gangs' filters, sorts the
        queue only where the file says so, as scheduler-plugins' does."""
        multi = [p for p in _merge(_DEFAULT_MULTI_POINT, self.multi_point)
                 if p.name == _PRIORITY_SORT or any(q.name == p.name for q in self.multi_point.enabled)]
        return tuple(_expand(multi, self.queue_sort, _QUEUE_SORT_PLUGINS))

    def bind_plugins(self) -> tuple[str, ...]:
        """The bind plugins the bind point expands to: multiPoint's DefaultBinder unless written
        off, and the ones the file enables at `bind`. Only counted (NewFramework refuses none):
        Tessera binds every pod itself whatever they are."""
        return tuple(_expand(_merge(_DEFAULT_MULTI_POINT, self.multi_point), self.bind, _BIND_PLUGINS))

    def score_weights(self) -> ScoreWeights:
        """The enabled score plugins in run order with their weights: the order as
        `expandMultiPointPlugins` builds it; `getScoreWeights` takes the score.enabled weight
        first, then multiPoint's, and turns 0 into 1."""
        multi = _merge(_DEFAULT_MULTI_POINT, self.multi_point)
        weights: dict[str, int] = {}
        for plugin in (*self.score.enabled, *multi):
            weights.setdefault(plugin.name, plugin.weight or 1)
        return ScoreWeights((name, weights[name]) for name in _expand(multi, self.score, _SCORE_PLUGINS))

    def pre_score_plugins(self) -> tuple[str, ...]:
        """The plugins whose PreScore runs, in run order: a list of its own, built as the score
        list is, so disabling a plugin under `score` keeps its PreScore and the reverse."""
        return tuple(_expand(_merge(_DEFAULT_MULTI_POINT, self.multi_point), self.pre_score, _PRE_SCORE_PLUGINS))


def _plugins(obj: ArgsReader | None, *, legacy: bool) -> _ProfilePlugins:
    """The profile's multiPoint, preScore and score plugin sets, whether DefaultPreemption runs
    and the Filters and PreFilters it turns off; other extension points are only checked."""
    if obj is None:
        return _ProfilePlugins()
    points = _LEGACY_EXTENSION_POINTS if legacy else _EXTENSION_POINTS + ("multiPoint",)
    obj.check_keys(points)
    found = Checks()
    sets = {point: found.read(lambda: _plugin_set(obj.get_obj(point), point, legacy), _PluginSet())
            for point in points}
    found.raise_errors()
    multi_point = sets.get("multiPoint", _PluginSet())
    post_filter = sets["postFilter"]
    if any(p.name == _PREEMPTION for p in post_filter.enabled):
        preemption = True
    elif _PREEMPTION in post_filter.disabled or "*" in post_filter.disabled:
        preemption = False
    else:
        preemption = _enabled(_PREEMPTION, multi_point)
    empty = _PluginSet()
    pre_filter, filter_ = sets.get("preFilter", empty), sets.get("filter", empty)
    # each point expanded on its own, as the score list: the filters and PreFilters that do not
    # `stays_on` are off unless the point's list keeps them
    multi = _merge(_DEFAULT_MULTI_POINT, multi_point)
    filters = _expand(multi, filter_, _DISABLEABLE_FILTERS)
    pre_filters = _expand(multi, pre_filter, _DISABLEABLE_PRE_FILTERS)
    optional_off = {name for name in _OPTIONAL_PRE_FILTERS  # by name only: "*" keeps them
                    if any(name in s.disabled for s in (multi_point, pre_filter, filter_))
                    and not any(p.name == name for s in (multi_point, pre_filter, filter_) for p in s.enabled)}
    return _ProfilePlugins(
        multi_point, sets["preScore"], sets["score"], preemption, queue_sort=sets["queueSort"], bind=sets["bind"],
        disabled_filters=tuple(name for name in _DISABLEABLE_FILTERS if name not in filters),
        disabled_pre_filters=tuple(spec.name for spec in REGISTRY if spec.name in optional_off
                                   or (spec.name in _DISABLEABLE_PRE_FILTERS and spec.name not in pre_filters)))


_PREEMPTION = "DefaultPreemption"


def _enabled(name: str, plugins: _PluginSet) -> bool:
    """A default plugin stays on unless disabled (by name or "*") and not enabled again."""
    off = name in plugins.disabled or "*" in plugins.disabled
    return not off or any(p.name == name for p in plugins.enabled)


def _plugin_set(obj: ArgsReader | None, point: str, legacy: bool) -> _PluginSet:
    if obj is None:
        return _PluginSet()
    obj.check_keys(("enabled", "disabled"))
    renamed = _LEGACY_POINT_RENAMED.get(point) if legacy else None
    supported = tuple(spec.name for spec in REGISTRY if point == "multiPoint" or extends(spec.kind, point)
                      or (renamed is not None and extends(spec.kind, renamed)))
    if legacy and point == "score":
        supported += tuple(_LEGACY_ENABLE_ALIASES)
    found = Checks()
    enabled: list[_Plugin] = []
    no_entries: list[object] = []
    for j, raw in enumerate(found.read(lambda: obj.get_list("enabled"), no_entries)):
        plugin = found.read(lambda: _enabled_plugin(ArgsReader(raw, f"{obj.at('enabled')}[{j}]"), point, supported,
                                                    legacy, enabled), None)
        if plugin is not None:
            enabled.append(plugin)
    disabled: set[str] = set()
    for j, raw in enumerate(found.read(lambda: obj.get_list("disabled"), no_entries)):
        name = found.read(lambda: _disabled_plugin(ArgsReader(raw, f"{obj.at('disabled')}[{j}]"), point), None)
        if name is not None:  # v1alpha1's disable names are priorities (scores): not a filter's name
            aliased = legacy and point not in ("filter", "preFilter")
            disabled.add(_LEGACY_DISABLE_ALIASES.get(name, name) if aliased else name)
    found.raise_errors()
    return _PluginSet(tuple(enabled), frozenset(disabled))


def _enabled_plugin(item: ArgsReader, point: str, supported: tuple[str, ...], legacy: bool,
                    before: list[_Plugin]) -> _Plugin:
    """One `enabled` entry of `point` (its name and its weight checked on their own); `before`
    holds the entries before it."""
    item.check_keys(("name", "weight"))
    found = Checks()

    def read_name() -> str:
        written = _plugin_name(item)
        if written not in supported and written not in BY_NAME:  # a known one: upstream's framework error below
            unsupported(item.at("name"), written, supported, not_supported_note(written))
        name = _LEGACY_ENABLE_ALIASES.get(written, written) if legacy else written
        renamed = _LEGACY_POINT_RENAMED.get(point) if legacy else None
        kind = BY_NAME[name].kind
        if point != "multiPoint" and not extends(kind, point) and not (renamed and extends(kind, renamed)):
            # upstream's framework build refuses it (updatePluginList); kube-scheduler exits
            raise BuildError(item.at("name"), f"Invalid value: {fmt(written)}: plugin {json.dumps(written)} "
                                              f"does not extend {EXTENSION_POINTS[point][0]} plugin")
        # a v1 duplicate at queueSort is left to validateCommonQueueSort (`_one_queue_sort`, or
        # the set differing from the first's): upstream's framework build, which would report it,
        # never runs after that validation error (v1alpha1 files have no such check here)
        if (legacy or point != "queueSort") and any(p.name == name for p in before):
            duplicate(item.at("name"), written, "a plugin can be enabled once per extension point")
        return written

    def read_weight() -> int:
        weight = item.get_int("weight", 0, "int32")
        if not 0 <= weight <= INT32_MAX:
            invalid(item.at("weight"), weight, f"must be in the range [0, {INT32_MAX}]")
        return weight

    written = found.read(read_name, "")
    weight = found.read(read_weight, 0)
    found.raise_errors()
    return _Plugin(_LEGACY_ENABLE_ALIASES.get(written, written) if legacy else written, weight, written)


def _disabled_plugin(item: ArgsReader, point: str) -> str:
    """One `disabled` entry's name as written."""
    item.check_keys(("name", "weight"))
    written = _plugin_name(item)
    spec = BY_NAME.get(written)
    if point in ("filter", "preFilter") and spec is not None and spec.kind.stays_on:
        forbidden(item.at("name"), f"{written}'s filter always runs in Tessera: {spec.kind.stays_on}"
                                   + ("; to drop its score, disable it under plugins.score" if spec.scores else ""))
    return written


def _plugin_name(item: ArgsReader) -> str:
    name = item.get_str("name", "")
    if not name:
        required(item.at("name"))
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


def _expand(multi: list[_Plugin], point: _PluginSet, implementing: tuple[str, ...]) -> list[str]:
    """One extension point's plugins in run order, as `expandMultiPointPlugins` builds them from
    the point's own set and the merged multiPoint set, each point on its own: (the point's
    enabled entries that override a multiPoint one) + (multiPoint-only ones the point does not
    disable) + (the point's other enabled entries), skipping multiPoint entirely when the point
    disables "*". Only plugins implementing the point (`implementing`) take part: other names are
    no-ops Tessera accepts there."""
    explicit = [p.name for p in point.enabled if p.name in implementing]
    if "*" in point.disabled:
        return explicit
    expanded = [p.name for p in multi if p.name in implementing and p.name not in point.disabled]
    overrides = {name for name in expanded if name in explicit}
    return ([n for n in explicit if n in overrides] + [n for n in expanded if n not in overrides]
            + [n for n in explicit if n not in overrides])


# --- pluginConfig -----------------------------------------------------------------------------


def _plugin_config(owner: ArgsReader, *, legacy: bool) -> dict[str, BaseModel]:
    """`pluginConfig`: each entry's args parsed by its plugin (the registry's ArgsSpec), keyed by
    plugin name. v1alpha1 files name some plugins' args differently (LegacyForm.args_name)."""
    by_entry: dict[str, PluginSpec] = {}
    for spec in REGISTRY:
        if spec.args is None:
            continue
        legacy_name = spec.legacy.args_name if legacy and spec.legacy is not None else None
        by_entry[legacy_name or spec.name] = spec
    found = Checks()
    result: dict[str, BaseModel] = {}
    seen: set[str] = set()
    for i, raw in enumerate(owner.get_list("pluginConfig")):
        entry = found.read(lambda: _plugin_config_entry(ArgsReader(raw, f"{owner.at('pluginConfig')}[{i}]"), by_entry,
                                                        legacy, seen), None)
        if entry is not None:
            result[entry[0].name] = entry[1]
    found.raise_errors()
    return result


def _plugin_config_entry(item: ArgsReader, by_entry: dict[str, PluginSpec], legacy: bool,
                         seen: set[str]) -> tuple[PluginSpec, BaseModel]:
    """One pluginConfig entry, as validatePluginConfig checks it: a repeated name is an error and
    the entry's args are still validated; `seen` holds the names before it."""
    item.check_keys(("name", "args"))
    name = _plugin_name(item)
    found = Checks()
    if name in seen:
        found.check(lambda: duplicate(item.path, name))
    seen.add(name)
    spec = by_entry.get(name)
    args: BaseModel | None = None
    if spec is None:
        found.check(lambda: unsupported(item.at("name"), name, tuple(by_entry), not_supported_note(name)))
    else:
        args = found.read(lambda: _plugin_config_args(item, spec, name, legacy), None)
    found.raise_errors()
    assert spec is not None and args is not None
    return spec, args


def _plugin_config_args(item: ArgsReader, spec: PluginSpec, name: str, legacy: bool) -> BaseModel:
    """An entry's args, parsed and validated by the plugin (`name` as the entry wrote it)."""
    assert spec.args is not None
    raw_args = item.raw("args")
    legacy_args = spec.legacy.parse_args if spec.legacy is not None and name == spec.legacy.args_name else None
    args = ArgsReader({} if raw_args is None else raw_args, item.at("args"), fold=legacy_args is not None)
    if legacy_args is not None:
        return legacy_args(args)
    args.check_keys(("apiVersion", "kind", *spec.args.fields), spec.args.ignored, spec.args.hints)
    # upstream decodes the args with the version they name: any other is not registered
    api_version = args.raw("apiVersion")
    if not legacy and api_version is not None and api_version != V1_API_VERSION:
        unsupported(args.at("apiVersion"), api_version, (V1_API_VERSION,))
    kind = args.raw("kind")
    if kind is not None and kind != f"{name}Args":
        invalid(args.at("kind"), kind, f"has to match plugin args ({name}Args)")
    return spec.args.parse(args)


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


def _format_duration(ns: int) -> Verbatim:
    """Go's time.Duration.String(), for messages: 10s, 1m30s, 1.5s, 500ms."""
    def frac(value: int, unit: int) -> str:
        whole, rest = divmod(value, unit)
        return str(whole) if rest == 0 else f"{whole}.{str(rest).rjust(len(str(unit)) - 1, '0').rstrip('0')}"

    sign, ns = ("-" if ns < 0 else ""), abs(ns)
    if ns == 0:
        return Verbatim("0s")
    if ns < _SECOND:
        unit, size = next((u, s) for u, s in (("ms", 10**6), ("µs", 10**3), ("ns", 1)) if ns >= s)
        return Verbatim(f"{sign}{frac(ns, size)}{unit}")
    hours, rest = divmod(ns, 3600 * _SECOND)
    minutes, rest = divmod(rest, 60 * _SECOND)
    text = f"{frac(rest, _SECOND)}s"
    if hours or minutes:
        text = f"{minutes}m{text}"
    if hours:
        text = f"{hours}h{text}"
    return Verbatim(sign + text)


def _duration(obj: ArgsReader, key: str, default_seconds: int) -> int:
    value = obj.raw(key)
    if value is None:
        return default_seconds * _SECOND
    parsed = _parse_duration(value) if isinstance(value, str) else None
    if parsed is None:
        invalid(obj.at(key), value, 'must be a duration string such as "15s" or "1m30s"')
    return parsed


def _leader_election(obj: ArgsReader, legacy: bool) -> LeaderElectionConfig:
    """Defaults: component-base RecommendedDefaultLeaderElectionConfiguration plus the scheduler's
    lease location (Tessera's own name). Checks: ValidateLeaderElectionConfiguration, the
    scheduler's "leases only" rule and client-go's renewDeadline > retryPeriod*JitterFactor."""
    known = ("leaderElect", "leaseDuration", "renewDeadline", "retryPeriod", "resourceLock",
             "resourceName", "resourceNamespace")
    obj.check_keys(known + (("lockObjectName", "lockObjectNamespace") if legacy else ()))
    found = Checks()
    elect = found.read(lambda: obj.get_bool("leaderElect", True), True)
    lease, renew, retry = (found.read(lambda: _duration(obj, key, default), None)
                           for key, default in (("leaseDuration", 15), ("renewDeadline", 10), ("retryPeriod", 2)))
    lock = found.read(lambda: obj.get_str("resourceLock", ""), "") or "leases"
    namespace = (found.read(lambda: obj.get_str("resourceNamespace", "") or obj.get_str("lockObjectNamespace", ""), "")
                 or "kube-system")
    name = found.read(lambda: obj.get_str("resourceName", "") or obj.get_str("lockObjectName", ""), "") or "tessera"
    if elect and lease is not None and renew is not None and retry is not None:
        found.check(lambda: _lease_timing(obj, lease, renew, retry))
    if elect:
        if lock != "leases":
            found.check(lambda: invalid(obj.at("resourceLock"), lock, 'resourceLock value must be "leases"'))
        # Tessera's own checks: the apiserver would refuse the Lease on every retry, forever.
        if not DNS_SUBDOMAIN.fullmatch(name) or len(name) > 253:
            found.check(lambda: invalid(obj.at("resourceName"), name, "must be a lowercase RFC 1123 subdomain (a Lease name)"))
        if not DNS_LABEL.fullmatch(namespace) or len(namespace) > 63:
            found.check(lambda: invalid(obj.at("resourceNamespace"), namespace,
                                        "must be a lowercase RFC 1123 label (a namespace)"))
    found.raise_errors()
    assert lease is not None and renew is not None and retry is not None
    return LeaderElectionConfig(
        leader_elect=elect,
        lease_duration_seconds=lease / _SECOND,
        renew_deadline_seconds=renew / _SECOND,
        retry_period_seconds=retry / _SECOND,
        resource_namespace=namespace,
        resource_name=name,
    )


def _lease_timing(obj: ArgsReader, lease: int, renew: int, retry: int) -> None:
    """The durations' checks (nanoseconds): every one of ValidateLeaderElectionConfiguration's;
    when they pass, client-go's NewLeaderElector rule and Tessera's own, which read values those
    vouched for (the first that fails is reported)."""
    found = Checks()
    for key, value in (("leaseDuration", lease), ("renewDeadline", renew), ("retryPeriod", retry)):
        if value <= 0:
            found.check(lambda: invalid(obj.at(key), _format_duration(value), "must be greater than zero"))
    lease_renew = _unset_note(obj, {"leaseDuration": "15s", "renewDeadline": "10s"})
    if lease <= renew:
        found.check(lambda: invalid(obj.at("leaseDuration"), _format_duration(lease),
                                    f"must be greater than `RenewDeadline` ({_format_duration(renew)}){lease_renew}"))
    found.raise_errors()
    if renew <= int(_JITTER_FACTOR * retry):
        invalid(obj.at("renewDeadline"), _format_duration(renew),
                f"must be greater than retryPeriod*JitterFactor ({_format_duration(retry)}*{_JITTER_FACTOR})"
                + _unset_note(obj, {"renewDeadline": "10s", "retryPeriod": "2s"}))
    if lease < _SECOND:  # Tessera's own check: the Lease stores whole seconds (0 is refused)
        invalid(obj.at("leaseDuration"), _format_duration(lease), "must be at least 1s (the Lease stores whole seconds)")
    if lease // _SECOND * _SECOND <= renew:  # Tessera's own: what a successor waits
        invalid(obj.at("leaseDuration"), _format_duration(lease),
                f"must be greater than `RenewDeadline` ({_format_duration(renew)}) in whole seconds: "
                f"the Lease stores whole seconds, and a successor waits only those{lease_renew}")


_CONTENT_TYPES = ("contentType", "acceptContentTypes")  # accepted, unused: Tessera's clients speak JSON


def _client_connection(obj: ArgsReader) -> ClientConnectionConfig:
    """kube-scheduler's client defaults (qps 0 -> 50, burst 0 -> 100) and component-base checks."""
    obj.check_keys(("kubeconfig", "qps", "burst"), _CONTENT_TYPES)
    found = Checks()

    def read_qps() -> float:
        qps = obj.get_float("qps", 0.0, "float32")
        if qps < 0:
            invalid(obj.at("qps"), obj.raw("qps"), "must be non-negative")
        return qps

    def read_burst() -> int:
        burst = obj.get_int("burst", 0, "int32")
        if burst < 0:
            invalid(obj.at("burst"), burst, "must be non-negative")
        return burst

    qps = found.read(read_qps, 0.0)
    burst = found.read(read_burst, 0)
    kubeconfig = found.read(lambda: obj.get_str("kubeconfig", ""), "")
    found.raise_errors()
    return ClientConnectionConfig(
        kubeconfig=kubeconfig or None,
        qps=qps or 50.0,
        burst=burst or 100,
    )
