"""TesseraUnhonouredTerms in a profile: on by default and listed by /configz; a profile may turn it
off by name (then a pod (anti-)affinity term's namespaceSelector is taken as every namespace);
"*" keeps it on (test_filter_disable_config.py: the other filters)."""

from __future__ import annotations

import pytest

from scheduler.api.config import ConfigError, load_config, parse_config_text
from scheduler.api.config_effective import configz
from scheduler.core.plugins.registry import enabled_in

NAME = "TesseraUnhonouredTerms"
PROFILE = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: tessera
  plugins:
    {point}:
      disabled:
      - name: {name}
"""


def test_on_by_default_and_listed_by_configz() -> None:
    builtin = load_config(None)
    assert NAME in [spec.name for spec in enabled_in(builtin.profiles[0])]
    [profile] = configz(builtin)["componentconfig"]["configuration"]["profiles"]
    assert NAME in profile["plugins"] and profile["disabledPreFilters"] == []
    assert profile["plugins"].index("TesseraDevices") < profile["plugins"].index(NAME)


@pytest.mark.parametrize("point", ["preFilter", "filter", "multiPoint"])
def test_a_profile_may_turn_it_off_by_name(point: str) -> None:
    config = parse_config_text(PROFILE.format(point=point, name=NAME), "test")
    assert config.profiles[0].disabled_pre_filters == (NAME,) and config.profiles[0].disabled_filters == ()
    assert NAME not in [spec.name for spec in enabled_in(config.profiles[0])]
    [profile] = configz(config)["componentconfig"]["configuration"]["profiles"]
    assert NAME not in profile["plugins"] and profile["disabledPreFilters"] == [NAME]


def test_turned_off_at_multi_point_and_enabled_again_under_pre_filter_it_stays_on() -> None:
    """A `preFilter.enabled` entry naming it wins over `multiPoint.disabled`, as upstream's
    point-level enabled list brings back a plugin its multiPoint set disabled; under `filter`,
    a point it does not implement, the entry is refused as upstream's framework build does."""
    off = PROFILE.format(point="multiPoint", name=NAME)
    profile = parse_config_text(off + f"    preFilter:\n      enabled:\n      - name: {NAME}\n", "test").profiles[0]
    assert NAME not in profile.disabled_pre_filters
    assert NAME in [spec.name for spec in enabled_in(profile)]
    with pytest.raises(ConfigError, match=f'plugin "{NAME}" does not extend FilterPlugin plugin'):
        parse_config_text(off + f"    filter:\n      enabled:\n      - name: {NAME}\n", "test")


@pytest.mark.parametrize("point", ["preFilter", "filter", "multiPoint"])
def test_star_keeps_it(point: str) -> None:
    # PrioritySort and DefaultBinder enabled again: a profile with no queue sort or bind plugin is
    # refused (upstream's NewFramework)
    again = "    queueSort:\n      enabled:\n      - name: PrioritySort\n    bind:\n      enabled:\n      - name: DefaultBinder\n"
    profile = parse_config_text(PROFILE.format(point=point, name='"*"') + again, "test").profiles[0]
    assert NAME not in profile.disabled_pre_filters
    assert NAME in [spec.name for spec in enabled_in(profile)]


def test_the_filters_keeping_tesseras_promises_stay_fixed() -> None:
    with pytest.raises(ConfigError, match="TesseraDevices's filter always runs"):
        parse_config_text(PROFILE.format(point="preFilter", name="TesseraDevices"), "test")
