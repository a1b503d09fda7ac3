"""kube-scheduler's DefaultBinder, by name: Tessera binds every pod itself (its binder is the
DefaultBinder's equivalent), so a file copied from kube-scheduler that names DefaultBinder at
`bind` or `multiPoint` loads, and a profile whose bind point, as upstream's framework expands it,
holds no plugin is refused as kube-scheduler v1.36's NewFramework refuses it.

A review: Tessera refused `DefaultBinder` ("Unsupported value"), so the only form of a
`multiPoint: {disabled: ["*"]}` file kube-scheduler accepts (DefaultBinder and PrioritySort
enabled again) could not be loaded, and it loaded the form kube-scheduler refuses (no binder)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.api.config import ConfigError, parse_config

V1 = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
LEGACY = {"apiVersion": "kubescheduler.config.k8s.io/v1alpha1", "kind": "KubeSchedulerConfiguration"}
BINDER = {"name": "DefaultBinder"}
SORT = {"name": "PrioritySort"}
ALL = {"name": "*"}


def _error(*profiles: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config({**V1, "profiles": list(profiles)}, "cfg.yaml")
    return str(info.value)


def _no_binder(name: str, i: int = 0) -> str:
    """NewFramework's `len(f.bindPlugins) == 0`, as the pinned binary words it (the wrapping
    prefixes dropped, as for the queue sort count)."""
    return f'cfg.yaml: profiles[{i}].plugins.bind: at least one bind plugin is needed for profile with scheduler name "{name}"'


@pytest.mark.parametrize("plugins", [
    {"bind": {"enabled": [BINDER]}},                          # overrides multiPoint's: one, as upstream
    {"bind": {"enabled": [BINDER], "disabled": [ALL]}},
    {"multiPoint": {"enabled": [BINDER]}},
    {"multiPoint": {"disabled": [ALL], "enabled": [BINDER, SORT]}},  # the form kube-scheduler accepts
    {"multiPoint": {"disabled": [ALL], "enabled": [SORT]}, "bind": {"enabled": [BINDER]}},
    {"multiPoint": {"disabled": [BINDER]}, "bind": {"enabled": [BINDER]}},
])
def test_default_binder_loads_at_bind_and_multi_point(plugins: dict[str, Any]) -> None:
    config = parse_config({**V1, "profiles": [{"plugins": plugins}]}, "t")
    assert config.profiles[0].queue_sort == ("PrioritySort",)


def test_default_binder_changes_nothing_tessera_runs() -> None:
    """A name only: the profile is the default one, /configz and its digest alike."""
    from scheduler.api.config_effective import config_digest

    plain = parse_config({**V1, "profiles": [{}]}, "t")
    named = parse_config({**V1, "profiles": [{"plugins": {"bind": {"enabled": [BINDER]}}}]}, "t")
    assert named.profiles == plain.profiles
    assert config_digest(named) == config_digest(plain)


@pytest.mark.parametrize("plugins", [
    {"multiPoint": {"disabled": [ALL], "enabled": [SORT]}},
    {"bind": {"disabled": [ALL]}},
    {"bind": {"disabled": [BINDER]}},
    {"multiPoint": {"disabled": [BINDER]}},
    {"multiPoint": {"enabled": [BINDER]}, "bind": {"disabled": [ALL]}},
])
def test_a_profile_with_no_bind_plugin_is_refused_as_upstreams_framework(plugins: dict[str, Any]) -> None:
    assert _error({"schedulerName": "a", "plugins": plugins}) == _no_binder("a")


def test_the_queue_sort_count_comes_before_the_bind_count() -> None:
    """NewFramework checks the queue sort count first: `multiPoint: {disabled: ["*"]}` gets it alone."""
    assert _error({"schedulerName": "a", "plugins": {"multiPoint": {"disabled": [ALL]}}}) == (
        'cfg.yaml: profiles[0].plugins.queueSort: only one queue sort plugin required for profile with '
        'scheduler name "a", but got 0; (the point holds none: enable PrioritySort (or Coscheduling) again at '
        'queueSort, e.g. enabled: [{name: PrioritySort}])')


def test_profiles_are_built_in_order_and_the_first_failure_alone_is_reported() -> None:
    no_bind = {"bind": {"disabled": [ALL]}}
    assert _error({"schedulerName": "a"}, {"schedulerName": "b", "plugins": no_bind}) == _no_binder("b", 1)
    assert _error({"schedulerName": "a", "plugins": no_bind},
                  {"schedulerName": "b", "plugins": {"multiPoint": {"disabled": [ALL]}}}) == _no_binder("a")


def test_a_validation_error_is_reported_without_the_bind_count() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({**V1, "percentageOfNodesToScore": 101,
                      "profiles": [{"plugins": {"bind": {"disabled": [ALL]}}}]}, "cfg.yaml")
    assert str(info.value) == "cfg.yaml: percentageOfNodesToScore: Invalid value: 101: not in valid range [0-100]"


def test_default_binder_at_a_point_it_does_not_extend_gets_upstreams_framework_error() -> None:
    assert _error({"plugins": {"preBind": {"enabled": [BINDER]}}}) == (
        'cfg.yaml: profiles[0].plugins.preBind.enabled[0].name: Invalid value: "DefaultBinder": '
        'plugin "DefaultBinder" does not extend PreBindPlugin plugin')
    assert _error({"plugins": {"bind": {"enabled": [{"name": "NodeName"}]}}}).endswith(
        'plugin "NodeName" does not extend BindPlugin plugin')
    assert _error({"plugins": {"bind": {"enabled": [{"name": "Binder"}]}}}) == (
        'cfg.yaml: profiles[0].plugins.bind.enabled[0].name: Unsupported value: "Binder": '
        'supported values: "DefaultBinder"')


def test_a_v1alpha1_file_names_default_binder_and_keeps_one_too() -> None:
    parse_config({**LEGACY, "plugins": {"bind": {"enabled": [BINDER], "disabled": [ALL]}}}, "cfg.yaml")
    with pytest.raises(ConfigError) as info:
        parse_config({**LEGACY, "plugins": {"bind": {"disabled": [ALL]}}}, "cfg.yaml")
    assert (info.value.field, str(info.value)) == ("plugins.bind", (
        'cfg.yaml: plugins.bind: at least one bind plugin is needed for profile with scheduler name "tessera"'))
