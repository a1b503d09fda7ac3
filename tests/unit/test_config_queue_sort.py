"""kube-scheduler refuses profiles whose queue sort differs (validation.go validateCommonQueueSort):
one queue holds every profile's pods, so one order must hold for all. A capacity planner's trial:
Tessera took `queueSort: {enabled: [Coscheduling], disabled: ["*"]}` in one profile beside a
default one, which kube-scheduler v1.36 refuses."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from scheduler.api.config import ConfigError, parse_config

V1 = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
GANG_SORT = {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]}


def _error(*profiles: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config({**V1, "profiles": list(profiles)}, "cfg.yaml")
    return str(info.value)


def test_a_profile_whose_queue_sort_differs_from_the_first_is_refused_with_upstreams_message() -> None:
    assert _error({"schedulerName": "tessera"}, {"schedulerName": "gangs", "plugins": {"queueSort": GANG_SORT}}) == (
        'cfg.yaml: profiles[1].plugins.queueSort: Invalid value: {"Enabled":[{"Name":"Coscheduling","Weight":0}],'
        '"Disabled":[{"Name":"*","Weight":0}]}: must be the same for all profiles')
    # the other way round: the second profile's (empty) set is the one named
    assert _error({"schedulerName": "gangs", "plugins": {"queueSort": GANG_SORT}}, {"schedulerName": "tessera"}) == (
        'cfg.yaml: profiles[1].plugins.queueSort: Invalid value: {"Enabled":null,"Disabled":null}: '
        "must be the same for all profiles")


def test_the_same_queue_sort_in_every_profile_loads() -> None:
    config = parse_config({**V1, "profiles": [{"schedulerName": "a", "plugins": {"queueSort": GANG_SORT}},
                                              {"schedulerName": "b", "plugins": {"queueSort": GANG_SORT}}]}, "t")
    assert config.scheduler_names == frozenset({"a", "b"})


def test_the_queue_sort_plugins_args_must_match_too() -> None:
    tuned = [{"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 10}}]
    message = _error({"schedulerName": "a", "plugins": {"queueSort": GANG_SORT}, "pluginConfig": tuned},
                     {"schedulerName": "b", "plugins": {"queueSort": GANG_SORT}})
    # the args as Go's encoding/json writes the internal type (field names, no json tags)
    assert message == ('cfg.yaml: profiles[1].pluginConfig.args: Invalid value: {"PermitWaitingTimeSeconds":60,'
                       '"PodGroupBackoffSeconds":0}: queueSort must be the same for all profiles')
    parse_config({**V1, "profiles": [{"schedulerName": "a", "plugins": {"queueSort": GANG_SORT}, "pluginConfig": tuned},
                                     {"schedulerName": "b", "plugins": {"queueSort": GANG_SORT},
                                      "pluginConfig": tuned}]}, "t")



def test_the_two_teams_example_keeps_fragmentation_only_where_its_plugins_say() -> None:
    """config/two-teams.yaml: its note that a profile without `plugins` has no TesseraFragmentation
    holds, and both profiles keep one queueSort."""
    from pathlib import Path

    from scheduler.api.config import load_config
    config = load_config(str(Path(__file__).resolve().parents[2] / "config/two-teams.yaml"))
    weights = {profile.scheduler_name: dict(profile.score_weights) for profile in config.profiles}
    assert weights["tessera"]["TesseraFragmentation"] == 10
    assert "TesseraFragmentation" not in weights["tessera-spread"]


def test_every_profile_is_compared_and_the_whole_set_counts() -> None:
    """Each later profile against the first (the third too), and the set as written: its disabled
    list and its plugins' weights as well as their names."""
    same = {"schedulerName": "b", "plugins": {"queueSort": GANG_SORT}}
    third = _error({"schedulerName": "a", "plugins": {"queueSort": GANG_SORT}}, same, {"schedulerName": "c"})
    assert third.startswith("cfg.yaml: profiles[2].plugins.queueSort: Invalid value: ")
    undisabled = {"enabled": [{"name": "Coscheduling"}]}
    assert _error({"schedulerName": "a", "plugins": {"queueSort": GANG_SORT}},
                  {"schedulerName": "b", "plugins": {"queueSort": undisabled}}).startswith(
        'cfg.yaml: profiles[1].plugins.queueSort: Invalid value: {"Enabled":[{"Name":"Coscheduling","Weight":0}],'
        '"Disabled":null}')
    weighted = {"enabled": [{"name": "Coscheduling", "weight": 2}], "disabled": [{"name": "*"}]}
    assert '"Weight":2' in _error({"schedulerName": "a", "plugins": {"queueSort": GANG_SORT}},
                                {"schedulerName": "b", "plugins": {"queueSort": weighted}})


def test_kube_schedulers_own_queue_sort_loads_at_queue_sort_and_multi_point() -> None:
    """PrioritySort, kube-scheduler's default queue sort (priority, then the queueing time), is
    what Tessera's queue does for a pod outside a gang: a config copied from kube-scheduler loads."""
    explicit = {"schedulerName": "a", "plugins": {"queueSort": {"enabled": [{"name": "PrioritySort"}]}}}
    config = parse_config({**V1, "profiles": [explicit, {**explicit, "schedulerName": "b"}]}, "t")
    assert config.scheduler_names == frozenset({"a", "b"})
    parse_config({**V1, "profiles": [{"plugins": {"multiPoint": {"enabled": [{"name": "PrioritySort"}]}}}]}, "t")


def test_the_default_queue_sort_and_an_explicit_priority_sort_differ_as_upstream() -> None:
    """validateCommonQueueSort compares the sets as written (v1's default queueSort set is empty,
    PrioritySort being multiPoint's): kube-scheduler refuses this pair too."""
    assert _error({"schedulerName": "a"},
                  {"schedulerName": "b", "plugins": {"queueSort": {"enabled": [{"name": "PrioritySort"}]}}}) == (
        'cfg.yaml: profiles[1].plugins.queueSort: Invalid value: {"Enabled":[{"Name":"PrioritySort","Weight":0}],'
        '"Disabled":null}: must be the same for all profiles')


def test_an_unknown_name_lists_only_the_names_valid_at_its_point() -> None:
    assert _error({"plugins": {"queueSort": {"enabled": [{"name": "Priority"}]}}}) == (
        'cfg.yaml: profiles[0].plugins.queueSort.enabled[0].name: Unsupported value: "Priority": '
        'supported values: "PrioritySort", "Coscheduling"')
    assert _error({"plugins": {"postFilter": {"enabled": [{"name": "Preemption"}]}}}) == (
        'cfg.yaml: profiles[0].plugins.postFilter.enabled[0].name: Unsupported value: "Preemption": '
        'supported values: "Coscheduling", "DefaultPreemption"')
    # a point no Tessera plugin implements lists none (field.NotSupported with no valid values)
    assert _error({"plugins": {"postBind": {"enabled": [{"name": "MyBinder"}]}}}) == (
        'cfg.yaml: profiles[0].plugins.postBind.enabled[0].name: Unsupported value: "MyBinder"')
    # a known plugin the point does not take: upstream's framework error, as before
    assert _error({"plugins": {"queueSort": {"enabled": [{"name": "NodeName"}]}}}).endswith(
        'plugin "NodeName" does not extend QueueSortPlugin plugin')


def test_two_queue_sort_plugins_in_the_first_profile_are_refused_with_upstreams_message() -> None:
    """A review: Tessera loaded `queueSort: {enabled: [PrioritySort, Coscheduling]}`, which
    kube-scheduler v1.36 refuses (validateCommonQueueSort: one queue, one order; the pinned binary
    says `profiles[0].plugins.queueSort.Enabled: Invalid value: 2: only one queue sort plugin can
    be enabled`). Only the first profile's count is checked, as upstream's: the others must equal it."""
    two = {"enabled": [{"name": "PrioritySort"}, {"name": "Coscheduling"}]}
    assert _error({"schedulerName": "tessera", "plugins": {"queueSort": two}}) == (
        "cfg.yaml: profiles[0].plugins.queueSort.Enabled: Invalid value: 2: only one queue sort plugin can be enabled")
    assert _error({"schedulerName": "a", "plugins": {"queueSort": two}},
                  {"schedulerName": "b", "plugins": {"queueSort": two}}) == (
        "cfg.yaml: profiles[0].plugins.queueSort.Enabled: Invalid value: 2: only one queue sort plugin can be enabled")


def test_the_same_queue_sort_plugin_twice_is_refused_by_the_count_alone() -> None:
    """`queueSort: {enabled: [PrioritySort, PrioritySort]}`: upstream's defaulting keeps both
    (mergePluginSet appends duplicated custom plugins, leaving them to the framework build) and
    validateCommonQueueSort then refuses the count, so the framework that would report the
    duplicate is never built. Tessera reported its duplicate error first, beside the count."""
    twice = {"enabled": [{"name": "PrioritySort"}, {"name": "PrioritySort"}]}
    assert _error({"schedulerName": "a", "plugins": {"queueSort": twice}}) == (
        "cfg.yaml: profiles[0].plugins.queueSort.Enabled: Invalid value: 2: only one queue sort plugin can be enabled")
    # in a later profile: that profile's set differs from the first's (or equals it, and the first's count fails)
    assert _error({"schedulerName": "a"}, {"schedulerName": "b", "plugins": {"queueSort": twice}}) == (
        'cfg.yaml: profiles[1].plugins.queueSort: Invalid value: {"Enabled":[{"Name":"PrioritySort","Weight":0},'
        '{"Name":"PrioritySort","Weight":0}],"Disabled":null}: must be the same for all profiles')
    # a v1alpha1 file has no queue sort count check: its duplicate is still refused
    with pytest.raises(ConfigError, match='Duplicate value: "PrioritySort"'):
        parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1alpha1", "kind": "KubeSchedulerConfiguration",
                      "plugins": {"queueSort": twice}}, "cfg.yaml")


def _count_error(name: str, got: int, fix: str, i: int = 0) -> str:
    """kube-scheduler v1.36's framework build (NewFramework: `len(f.queueSortPlugins) != 1`), as
    the pinned binary words it (upstream's older "only one queue sort plugin can be enabled" and
    "no queue sort plugin is enabled" are gone), then what the point holds and how to fix it."""
    return (f'cfg.yaml: profiles[{i}].plugins.queueSort: only one queue sort plugin required for profile '
            f'with scheduler name "{name}", but got {got}; ({fix})')


_NONE_FIX = "the point holds none: enable PrioritySort (or Coscheduling) again at queueSort, e.g. enabled: [{name: PrioritySort}]"


@pytest.mark.parametrize(("plugins", "fix"), [
    ({"queueSort": {"enabled": [{"name": "Coscheduling"}]}},   # beside multiPoint's PrioritySort
     "the point holds PrioritySort (from multiPoint's defaults) and Coscheduling (enabled at queueSort): disable "
     'PrioritySort at queueSort, e.g. disabled: [{name: PrioritySort}], or disabled: ["*"]'),
    ({"multiPoint": {"enabled": [{"name": "Coscheduling"}]}},  # the same two, from multiPoint: "*" would drop both
     "the point holds PrioritySort (from multiPoint's defaults) and Coscheduling (enabled at multiPoint): disable "
     "PrioritySort at queueSort, e.g. disabled: [{name: PrioritySort}]"),
])
def test_a_profile_whose_queue_sort_expands_to_two_plugins_is_refused_as_upstreams_framework(
        plugins: dict[str, Any], fix: str) -> None:
    """A review: Tessera loaded profiles whose queueSort point expands (expandMultiPointPlugins) to
    [PrioritySort, Coscheduling], which kube-scheduler's framework build refuses; validation's count
    sees one written plugin and passes. A new user read upstream's sentence alone and could not
    tell where the second plugin came from: it now names both and the fix."""
    assert _error({"schedulerName": "gangs", "plugins": plugins}) == _count_error("gangs", 2, fix)


@pytest.mark.parametrize("plugins", [
    {"queueSort": {"disabled": [{"name": "*"}]}},
    {"multiPoint": {"disabled": [{"name": "*"}]}},
    {"multiPoint": {"disabled": [{"name": "*"}], "enabled": [{"name": "TesseraDevices"}]}},
])
def test_a_profile_with_no_queue_sort_is_refused_as_upstreams_framework(plugins: dict[str, Any]) -> None:
    assert _error({"schedulerName": "a", "plugins": plugins}) == _count_error("a", 0, _NONE_FIX)


def test_the_framework_is_built_profile_by_profile_and_stops_at_the_first_that_fails() -> None:
    """Every profile alike passes validateCommonQueueSort; the first profile's framework fails (its
    fix, in one profile of two, must be written in the other too)."""
    off = {"queueSort": {"disabled": [{"name": "*"}]}}
    assert _error({"schedulerName": "a", "plugins": off}, {"schedulerName": "b", "plugins": off}) == \
        _count_error("a", 0, _NONE_FIX + "; every profile's queueSort must be written the same")


def test_a_validation_error_is_reported_without_the_framework_errors_upstream_never_reaches() -> None:
    """`queueSort: [PrioritySort, NodeName]`: validateCommonQueueSort's count alone, as the pinned
    binary says it; the framework build that would say NodeName does not extend QueueSortPlugin
    never runs. Before, Tessera reported both."""
    assert _error({"plugins": {"queueSort": {"enabled": [{"name": "PrioritySort"}, {"name": "NodeName"}]}}}) == (
        "cfg.yaml: profiles[0].plugins.queueSort.Enabled: Invalid value: 2: only one queue sort plugin can be enabled")
    # any validation error anywhere in the file comes first, the framework's count too
    with pytest.raises(ConfigError) as info:
        parse_config({**V1, "percentageOfNodesToScore": 101,
                      "profiles": [{"plugins": {"queueSort": {"disabled": [{"name": "*"}]}}}]}, "cfg.yaml")
    assert str(info.value) == "cfg.yaml: percentageOfNodesToScore: Invalid value: 101: not in valid range [0-100]"


def test_one_queue_sort_plugin_however_written_loads() -> None:
    for plugins in ({}, {"queueSort": {"enabled": [{"name": "PrioritySort"}]}},
                    {"queueSort": GANG_SORT}, {"multiPoint": {"enabled": [{"name": "PrioritySort"}]}},
                    {"queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "PrioritySort"}]}},
                    {"multiPoint": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "PrioritySort"}]}},
                    # DefaultBinder enabled again too: a profile with no bind plugin is refused (NewFramework)
                    {"multiPoint": {"disabled": [{"name": "*"}],
                                    "enabled": [{"name": "PrioritySort"}, {"name": "DefaultBinder"}]}}):
        config = parse_config({**V1, "profiles": [{"plugins": plugins}]}, "t")
        assert len(config.profiles[0].queue_sort) == 1, plugins


def test_a_v1alpha1_file_keeps_one_queue_sort_plugin_too() -> None:
    legacy = {"apiVersion": "kubescheduler.config.k8s.io/v1alpha1", "kind": "KubeSchedulerConfiguration"}
    with pytest.raises(ConfigError) as info:
        parse_config({**legacy, "plugins": {"queueSort": {"enabled": [{"name": "Coscheduling"}]}}}, "cfg.yaml")
    assert (info.value.field, str(info.value)) == ("plugins.queueSort", (
        'cfg.yaml: plugins.queueSort: only one queue sort plugin required for profile with scheduler name '
        '"tessera", but got 2; (the point holds PrioritySort (from the defaults) and Coscheduling (enabled at '
        'queueSort): disable PrioritySort at queueSort, e.g. disabled: [{name: PrioritySort}], or disabled: ["*"])'))
    parse_config({**legacy, "plugins": {"queueSort": GANG_SORT}}, "cfg.yaml")


_P, _C = {"name": "PrioritySort"}, {"name": "Coscheduling"}


@pytest.mark.parametrize("plugins", [
    {"queueSort": {"enabled": [_C]}},
    {"multiPoint": {"enabled": [_C]}},
    {"multiPoint": {"enabled": [_C, _P]}},
    {"multiPoint": {"enabled": [_P]}, "queueSort": {"enabled": [_C]}},
    {"multiPoint": {"enabled": [_C]}, "queueSort": {"enabled": [_P]}},  # PrioritySort written at the point itself
    {"multiPoint": {"enabled": [_C]}, "queueSort": {"disabled": [{"name": "*"}]}},
])
def test_the_count_errors_fix_written_into_the_file_loads(plugins: dict[str, Any]) -> None:
    """A wrong fix is worse than none: each fix the message offers (its example, and `"*"` when
    offered), written into the profile's queueSort, gives a profile that loads. A review: with
    PrioritySort enabled at queueSort beside multiPoint's Coscheduling the message said to disable
    PrioritySort at queueSort, which cannot drop a plugin the point itself enables (upstream's
    mergePluginSet appends the point's enabled plugins whatever its disabled list says): the file
    failed again, now told to disable Coscheduling."""
    message = _error({"schedulerName": "a", "plugins": plugins})
    fixes = []
    if (named := re.search(r"e\.g\. (disabled|enabled): \[([^\]]*)\]", message)) is not None:
        names = re.findall(r"\{name: (\w+)\}", named.group(2))
        fixes.append((named.group(1), [{"name": name} for name in names]))
    if ', or disabled: ["*"]' in message:
        fixes.append(("disabled", [{"name": "*"}]))
    assert fixes, message
    for field, written in fixes:
        fixed = json.loads(json.dumps(plugins))
        point = fixed.setdefault("queueSort", {})
        point[field] = point.get(field, []) + written
        parse_config({**V1, "profiles": [{"schedulerName": "a", "plugins": fixed}]}, "cfg.yaml")


def test_with_several_profiles_the_count_errors_fix_says_every_profile_writes_queue_sort_alike() -> None:
    """Two profiles with `queueSort: {enabled: [Coscheduling]}`: the fix written into the first
    alone fails again (validateCommonQueueSort compares the written queueSort), so the message says
    that every profile must write it alike; written into both, the file loads."""
    plugins = {"queueSort": {"enabled": [_C]}}
    message = _error({"schedulerName": "a", "plugins": plugins}, {"schedulerName": "b", "plugins": plugins})
    assert message.endswith(
        "disable PrioritySort at queueSort, e.g. disabled: [{name: PrioritySort}], or disabled: [\"*\"]; every "
        "profile's queueSort must be written the same)"), message
    fixed = {"queueSort": {"enabled": [_C], "disabled": [_P]}}
    parse_config({**V1, "profiles": [{"schedulerName": "a", "plugins": fixed},
                                     {"schedulerName": "b", "plugins": fixed}]}, "cfg.yaml")
    # one profile: no such clause
    assert _error({"schedulerName": "a", "plugins": plugins}).endswith('or disabled: ["*"])')
