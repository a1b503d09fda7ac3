"""A profile may turn off upstream's default filters, as kube-scheduler lets it (v1
default_plugins.go mergePluginSet, framework.go expandMultiPointPlugins): by name or `"*"` under
`plugins.filter.disabled`, by name or `"*"` under `plugins.multiPoint.disabled`, enabled again
under `plugins.filter.enabled`. The filters that keep Tessera's promises (a device given once, a
gang whole) stay on: naming them is Forbidden, `"*"` leaves them on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scheduler.api.config import ConfigError, load_config, parse_config
from scheduler.api.config_effective import configz
from scheduler.core.plugins.registry import REGISTRY
from scheduler.core.scheduler import Scheduler
from scheduler.kubectl import explain as explaining
from scheduler.sim import builders as b

DISABLEABLE = ("NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts", "VolumeBinding", "PodTopologySpread",
               "InterPodAffinity")
KEPT = ("TopologyPlacement", "NodeResourcesFit", "Coscheduling", "TesseraDevices")
CHART_SCHEMA = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "tessera" / "values.schema.json"


def _config(plugins: dict[str, Any]) -> dict[str, Any]:
    """Two profiles: `tessera` with `plugins`, `strict` with the defaults."""
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": "tessera", "plugins": plugins}, {"schedulerName": "strict"}]}


def _filters(plugins: dict[str, Any]) -> tuple[list[str], list[str], list[str]]:
    """The filters (Filter point) and PreFilters each profile's runtime runs, and the tessera
    profile's score plugins."""
    engine = Scheduler(parse_config(_config(plugins), "t.yaml"))._engine
    ours, strict = engine.profiles["tessera"], engine.profiles["strict"]
    assert [p.name for p in strict.filters] == [s.name for s in REGISTRY if s.name in (*DISABLEABLE, *KEPT)
                                                and s.name != "Coscheduling"]
    return [p.name for p in ours.filters], [p.name for p in ours.pre_filters], list(ours.scored())


@pytest.mark.parametrize("name", DISABLEABLE)
@pytest.mark.parametrize("point", ["filter", "multiPoint"])
def test_each_default_filter_may_be_disabled_by_name(point: str, name: str) -> None:
    config = parse_config(_config({point: {"disabled": [{"name": name}]}}), "t.yaml")
    assert config.profiles[0].disabled_filters == (name,) and config.profiles[1].disabled_filters == ()
    filters, pre_filters, scored = _filters({point: {"disabled": [{"name": name}]}})
    assert name not in filters
    assert set(filters) == {s.name for s in REGISTRY if s.name in (*DISABLEABLE, *KEPT)} - {name, "Coscheduling"}
    # filter.disabled leaves the plugin's PreFilter and score; multiPoint takes every point
    assert ("NodeAffinity" in pre_filters) == (point == "filter" or name != "NodeAffinity")
    if name in ("TaintToleration", "NodeAffinity", "InterPodAffinity"):
        assert (name in scored) == (point == "filter")


def test_star_under_filter_disables_the_default_filters_and_keeps_the_promises() -> None:
    config = parse_config(_config({"filter": {"disabled": [{"name": "*"}]}}), "t.yaml")
    assert config.profiles[0].disabled_filters == DISABLEABLE
    filters, pre_filters, scored = _filters({"filter": {"disabled": [{"name": "*"}]}})
    assert filters == ["TopologyPlacement", "NodeResourcesFit", "TesseraDevices"]
    assert "NodeAffinity" in pre_filters and "TesseraUnhonouredTerms" in pre_filters  # PreFilters stay
    assert scored == ["TaintToleration", "NodeAffinity", "NodeResourcesFit", "TesseraDevices", "PodTopologySpread",
                      "InterPodAffinity"]


def test_star_under_multi_point_disables_them_too_and_a_filter_entry_enables_one_again() -> None:
    # PrioritySort and DefaultBinder kept: a profile with no queue sort or bind plugin is refused (upstream's NewFramework)
    plugins = {"multiPoint": {"disabled": [{"name": "*"}], "enabled": [{"name": "PrioritySort"}, {"name": "DefaultBinder"}]},
               "filter": {"enabled": [{"name": "NodePorts"}]}}
    config = parse_config(_config(plugins), "t.yaml")
    assert config.profiles[0].disabled_filters == tuple(n for n in DISABLEABLE if n != "NodePorts")
    filters, _, _ = _filters(plugins)
    assert filters == ["NodePorts", "TopologyPlacement", "NodeResourcesFit", "TesseraDevices"]


def test_a_filter_enabled_again_after_star_runs_as_upstream_merges_it() -> None:
    plugins = {"filter": {"disabled": [{"name": "*"}], "enabled": [{"name": "TaintToleration"}]}}
    assert parse_config(_config(plugins), "t.yaml").profiles[0].disabled_filters == tuple(
        n for n in DISABLEABLE if n != "TaintToleration")
    assert _filters(plugins)[0][0] == "TaintToleration"


def test_pre_filter_disabled_turns_off_node_affinitys_pre_filter_only() -> None:
    """Upstream's NodeAffinity Filter computes the required terms itself when its PreFilter is
    off; NodePorts' and InterPodAffinity's PreFilters are part of their filters here: alone,
    disabling them changes nothing (upstream's Filter would then fail every pod with an error)."""
    plugins = {"preFilter": {"disabled": [{"name": "NodeAffinity"}, {"name": "NodePorts"},
                                          {"name": "InterPodAffinity"}]}}
    config = parse_config(_config(plugins), "t.yaml")
    assert config.profiles[0].disabled_filters == () and config.profiles[0].disabled_pre_filters == ("NodeAffinity",)
    filters, pre_filters, _ = _filters(plugins)
    assert "NodeAffinity" in filters and "NodePorts" in filters and "NodeAffinity" not in pre_filters
    star = parse_config(_config({"preFilter": {"disabled": [{"name": "*"}]}}), "t.yaml").profiles[0]
    assert star.disabled_pre_filters == ("NodeAffinity", "VolumeBinding") and star.disabled_filters == ()


def test_node_affinity_disabled_at_both_points_is_built_for_its_score_only() -> None:
    plugins = {"preFilter": {"disabled": [{"name": "NodeAffinity"}]}, "filter": {"disabled": [{"name": "NodeAffinity"}]}}
    filters, pre_filters, scored = _filters(plugins)
    assert "NodeAffinity" not in filters + pre_filters and "NodeAffinity" in scored
    engine = Scheduler(parse_config(_config(plugins), "t.yaml"))._engine
    assert "NodeAffinity" not in engine.profiles["tessera"].hints  # it rejects nothing: no requeue hints
    assert "NodeAffinity" in engine.profiles["strict"].hints


@pytest.mark.parametrize("name", KEPT)
@pytest.mark.parametrize("point", ["filter", "preFilter"])
def test_the_filters_keeping_tesseras_promises_stay_on(point: str, name: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(_config({point: {"disabled": [{"name": name}]}}), "t.yaml")
    err = raised.value
    assert err.field == f"profiles[0].plugins.{point}.disabled[0].name" and "Forbidden" in str(err)
    assert ("twice" in err.message) if name in ("NodeResourcesFit", "TesseraDevices") else ("gang" in err.message)
    # the way to what the file likely wanted is named only for a plugin that has a score to drop
    scores = name in ("NodeResourcesFit", "TesseraDevices")
    assert ("to drop its score, disable it under plugins.score" in err.message) == scores


@pytest.mark.parametrize("name", KEPT)
def test_multi_point_naming_a_kept_filter_drops_its_score_only(name: str) -> None:
    """`multiPoint.disabled` naming one of them is no error: its filter stays, its score goes."""
    plugins = {"multiPoint": {"disabled": [{"name": name}]}}
    assert parse_config(_config(plugins), "t.yaml").profiles[0].disabled_filters == ()
    filters, _, scored = _filters(plugins)
    assert (name in filters) == (name != "Coscheduling") and name not in scored


def test_configz_lists_the_disabled_filters() -> None:
    config = parse_config(_config({"filter": {"disabled": [{"name": "NodePorts"}]}}), "t.yaml")
    ours, strict = configz(config)["componentconfig"]["configuration"]["profiles"]
    assert ours["disabledFilters"] == ["NodePorts"] and strict["disabledFilters"] == []
    assert "NodePorts" not in ours["plugins"] and "NodePorts" in strict["plugins"]
    [builtin] = configz(load_config(None))["componentconfig"]["configuration"]["profiles"]
    assert builtin["disabledFilters"] == [] and builtin["disabledPreFilters"] == []


def test_the_chart_schema_refuses_disabling_the_same_filters_tessera_refuses() -> None:
    schema = json.loads(CHART_SCHEMA.read_text())["definitions"]
    kept = sorted(spec.name for spec in REGISTRY if spec.kind.stays_on)
    assert kept == sorted(KEPT)
    for point in ("filterPlugins", "preFilterPlugins"):
        name = schema[point]["properties"]["disabled"]["items"]["properties"]["name"]
        assert sorted(name["not"]["enum"]) == kept


def test_a_disabled_filter_labels_no_unschedulable_pods_metric() -> None:
    """scheduler_unschedulable_pods{plugin}: with no node, every filter a profile runs rejects the
    pod (upstream's 0/0 nodes), and the one it turned off is not among them."""
    core = Scheduler(parse_config(_config({"filter": {"disabled": [{"name": "NodePorts"}]}}), "t.yaml"))
    for name, scheduler in (("ours", "tessera"), ("theirs", "strict")):
        core.apply("ADDED", b.pod(name, scheduler=scheduler, limits={"nvidia.com/gpu": 1}), 0.0)
        while core.schedule_next(0.0) is not None:
            pass
    labels = core.unschedulable_by_plugin()
    assert ("NodePorts", "strict") in labels and ("NodePorts", "tessera") not in labels
    assert ("NodeResourcesFit", "tessera") in labels


def test_kubectl_explain_dry_runs_with_the_profiles_filters() -> None:
    """explain's dry run runs the configuration it is given (the installed ConfigMap's or
    --config's): a cordoned node is where the pod of a profile without NodeUnschedulable would go,
    and no node for the default profile's pod."""
    config = parse_config(_config({"filter": {"disabled": [{"name": "NodeUnschedulable"}]}}), "t.yaml")
    objects = [b.node("a", gpus=1, unschedulable=True), b.pod("ours", limits={"nvidia.com/gpu": 1}),
               b.pod("theirs", scheduler="strict", limits={"nvidia.com/gpu": 1})]
    ours = explaining.explain(objects, "default/ours", config, [], 0.0)
    theirs = explaining.explain(objects, "default/theirs", config, [], 0.0)
    assert ours is not None and ours.dry_run is not None and ours.dry_run.node == "a"
    assert theirs is not None and theirs.dry_run is not None and theirs.dry_run.node == ""
    assert "unschedulable" in theirs.dry_run.message


def test_v1alpha1_priority_names_under_filter_disable_no_filter() -> None:
    """v1alpha1's disable aliases are priorities (TaintTolerationPriority: the score): under
    `filter` they name no filter, so TaintToleration's keeps running; its own name turns it off."""
    def legacy(name: str) -> tuple[str, ...]:
        raw = {"apiVersion": "kubescheduler.config.k8s.io/v1alpha1", "kind": "KubeSchedulerConfiguration",
               "plugins": {"filter": {"disabled": [{"name": name}]}}}
        return parse_config(raw, "t.yaml").profiles[0].disabled_filters
    assert legacy("TaintTolerationPriority") == () and legacy("TaintToleration") == ("TaintToleration",)


def test_a_pod_is_asked_about_an_event_with_its_own_profiles_hints() -> None:
    """`strict` keeps NodeAffinity, which `tessera` (the first profile) turns off at both points and
    so registers no hint for: a `strict` pod parked by NodeAffinity is moved when its node gains
    the label, by its own profile's hint (a lookup in the first profile's would find none and
    leave it parked)."""
    off = {"disabled": [{"name": "NodeAffinity"}]}
    core = Scheduler(parse_config(_config({"preFilter": off, "filter": off}), "t.yaml"))
    assert "NodeAffinity" not in core._engine.profiles["tessera"].hints
    core.apply("ADDED", b.node("n", cpu="4", memory="8Gi"), 0.0)
    core.apply("ADDED", b.pod("p", scheduler="strict", requests={"cpu": "1"},
                              spec_extra={"nodeSelector": {"zone": "a"}}), 0.0)
    assert core.schedule_next(0.0) is not None and core.pending_counts()["unschedulable"] == 1
    core.take_queue_incoming()
    core.apply("MODIFIED", b.node("n", cpu="4", memory="8Gi", labels={"zone": "a"}), 1.0)
    assert core.take_queue_incoming() == {("backoff", "NodeUpdateNodeLabel"): 1}
