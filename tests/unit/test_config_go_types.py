"""Numbers and field names of a configuration file, decoded as kube-scheduler decodes them.

kube-scheduler reads the file strictly into its Go types (k8s.io/kube-scheduler/config/v1
types.go, types_pluginargs.go; component-base config/v1alpha1 for leaderElection and
clientConnection) before validating it: a number outside its field's Go type (`int32`, `int64`,
`float32`) is a decoding error (`json: cannot unmarshal number ... of type int32`), a whole number
written as a float (`20.0`, `1e3`) decodes as that integer, and a field v1 does not have
(`healthzBindAddress`, `metricsBindAddress`, `percentageOfPlacementsToScore`) is `strict decoding
error: unknown field`. The pinned binary's verdict on the same files is checked in
tests/e2e/test_config_upstream.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scheduler.api.config import ConfigError, load_config, parse_config
from scheduler.core.plugins.coscheduling import CoschedulingArgs
from scheduler.core.plugins.fit.args import ScoringStrategy
from scheduler.core.plugins.preemption.args import PreemptionArgs
from scheduler.core.plugins.registry import args_of

V1 = "kubescheduler.config.k8s.io/v1"
LEGACY = "kubescheduler.config.k8s.io/v1alpha1"
KIND = "KubeSchedulerConfiguration"
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


def v1(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": V1, "kind": KIND, **fields}


def plugin_config(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return v1(profiles=[{"pluginConfig": [{"name": name, "args": args}]}])


def fit_weight(weight: object) -> dict[str, Any]:
    return plugin_config("NodeResourcesFit", {"scoringStrategy": {
        "type": "LeastAllocated", "resources": [{"name": "cpu", "weight": weight}]}})


def error(raw: object) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_config(raw, "cfg.yaml")
    assert "\n" not in str(info.value)
    return info.value


ARGS = "profiles[0].pluginConfig[0].args"

# (document, the field named, the Go type it overflows)
OUT_OF_RANGE = {
    "podMaxBackoffSeconds": (v1(podMaxBackoffSeconds=INT64_MAX + 1), "podMaxBackoffSeconds", "int64"),
    # (podMaxBackoffSeconds is not compared with a podInitialBackoffSeconds that is no int64)
    "podInitialBackoffSeconds": (v1(podInitialBackoffSeconds=INT64_MAX + 1), "podInitialBackoffSeconds", "int64"),
    "parallelism": (v1(parallelism=INT32_MAX + 1), "parallelism", "int32"),
    "burst": (v1(clientConnection={"burst": INT32_MAX + 1}), "clientConnection.burst", "int32"),
    "minCandidateNodesAbsolute": (plugin_config("DefaultPreemption", {"minCandidateNodesAbsolute": INT32_MAX + 1}),
                                  f"{ARGS}.minCandidateNodesAbsolute", "int32"),
    # scheduler-plugins CoschedulingArgs: PodGroupBackoffSeconds, PermitWaitingTimeSeconds *int64
    "podGroupBackoffSeconds": (plugin_config("Coscheduling", {"podGroupBackoffSeconds": INT64_MAX + 1}),
                               f"{ARGS}.podGroupBackoffSeconds", "int64"),
    "permitWaitingTimeSeconds": (plugin_config("Coscheduling", {"permitWaitingTimeSeconds": 10**20}),
                                 f"{ARGS}.permitWaitingTimeSeconds", "int64"),
    # Tessera's own args are decoded as Go int64 too: a heartbeat timeout of 10^20 s is no timeout
    "agentHeartbeatTimeoutSeconds": (plugin_config("TesseraDevices", {"agentHeartbeatTimeoutSeconds": 10**20}),
                                     f"{ARGS}.agentHeartbeatTimeoutSeconds", "int64"),
    "maxDomainTrials": (plugin_config("TopologyPlacement", {"maxDomainTrials": 10**20}),
                        f"{ARGS}.maxDomainTrials", "int64"),
}


@pytest.mark.parametrize("case", sorted(OUT_OF_RANGE))
def test_a_number_outside_its_go_type_is_refused_at_its_field(case: str) -> None:
    raw, field, go_type = OUT_OF_RANGE[case]
    err = error(raw)
    assert err.field == field
    assert go_type in err.message and "out of range" in err.message, err.message


def test_the_largest_int64_backoff_is_accepted_as_kube_scheduler_accepts_it() -> None:
    assert parse_config(v1(podMaxBackoffSeconds=INT64_MAX), "t").pod_max_backoff_seconds == INT64_MAX


def test_the_largest_int32_is_accepted() -> None:
    raw = plugin_config("DefaultPreemption", {"minCandidateNodesAbsolute": INT32_MAX})
    assert args_of(parse_config(raw, "t").profiles[0], PreemptionArgs).min_candidate_nodes_absolute == INT32_MAX


def test_a_qps_beyond_float32_is_refused() -> None:
    """ClientConnectionConfiguration.QPS is a float32: 1e39 does not decode."""
    err = error(v1(clientConnection={"qps": 1e39}))
    assert err.field == "clientConnection.qps"
    assert "float32" in err.message


def test_the_largest_float32_qps_is_accepted() -> None:
    assert parse_config(v1(clientConnection={"qps": 3.4e38}), "t").client_connection.qps == 3.4e38


# --- whole numbers written as floats ------------------------------------------------------------


@pytest.mark.parametrize("text,expected", [("20.0", 20), ("1e3", 1000), ("1.5e1", 15)])
def test_a_whole_float_decodes_as_its_integer(tmp_path: Path, text: str, expected: int) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_text(f"apiVersion: {V1}\nkind: {KIND}\npodMaxBackoffSeconds: {text}\n", encoding="utf-8")
    assert load_config(path).pod_max_backoff_seconds == expected


def test_whole_floats_in_plugin_args() -> None:
    assert args_of(parse_config(fit_weight(2.0), "t").profiles[0], ScoringStrategy).resources[0].weight == 2
    raw = plugin_config("DefaultPreemption", {"minCandidateNodesPercentage": 5.0})
    assert args_of(parse_config(raw, "t").profiles[0], PreemptionArgs).min_candidate_nodes_percentage == 5
    raw = plugin_config("Coscheduling", {"podGroupBackoffSeconds": 30.0})
    assert args_of(parse_config(raw, "t").profiles[0], CoschedulingArgs).pod_group_backoff_seconds == 30


@pytest.mark.parametrize("value", [2.5, float("inf"), float("nan"), 1e20])
def test_a_fraction_or_an_unbounded_float_is_still_refused(value: float) -> None:
    err = error(v1(podMaxBackoffSeconds=value))
    assert err.field == "podMaxBackoffSeconds"


# --- fields v1 does not have -----------------------------------------------------------------------


@pytest.mark.parametrize("key", ["healthzBindAddress", "metricsBindAddress", "percentageOfPlacementsToScore"])
def test_fields_v1_removed_or_never_had_are_unknown(key: str) -> None:
    err = error(v1(**{key: "0.0.0.0:10251" if "Address" in key else 50}))
    assert err.field == key
    assert err.message.startswith("unknown field")


def test_bind_address_fields_say_what_replaces_them() -> None:
    err = error(v1(metricsBindAddress="0.0.0.0:10251"))
    assert "--bind-address" in err.message and "--port" in err.message


def test_profile_percentage_of_placements_to_score_is_unknown() -> None:
    err = error(v1(profiles=[{"percentageOfPlacementsToScore": 50}]))
    assert err.field == "profiles[0].percentageOfPlacementsToScore"
    assert err.message.startswith("unknown field")


def test_v1alpha1_files_keep_their_bind_addresses() -> None:
    """The v1alpha1 types (Kubernetes 1.17) had both fields; Tessera reads those files and ignores them."""
    raw = {"apiVersion": LEGACY, "kind": KIND, "healthzBindAddress": "0.0.0.0:10251",
           "metricsBindAddress": "0.0.0.0:10251"}
    assert parse_config(raw, "t").profiles[0].scheduler_name == "tessera"
