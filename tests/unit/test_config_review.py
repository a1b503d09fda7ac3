"""Configuration review against upstream kube-scheduler (each test failed before its fix).

- v1beta2 / v1beta3 were read with v1's rules; kube-scheduler removed them (1.28 / 1.29: `no kind
  "KubeSchedulerConfiguration" is registered for version ...`), and a v1beta2 file's default score
  weights are not v1's, so reading it as v1 placed pods differently from what the file said.
- `scoringStrategy.requestedToCapacityRatio` with another type was validated and ignored; upstream
  (ValidateNodeResourcesFitArgs) now refuses it: Forbidden, must be nil.
- an error about a value the file never wrote (a default clashing with a written one) said so nowhere.
- a second YAML document: PyYAML's wording, and an empty trailing `---` was refused.
- `pluginConfig[].args.apiVersion` was not checked (upstream decodes args with it: another version
  is an error).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scheduler.api.config import ConfigError, load_config, parse_config
from scheduler.core.plugins.fit.args import ScoringStrategy
from scheduler.core.plugins.registry import args_of

V1 = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
FIT = "profiles[0].pluginConfig[0].args.scoringStrategy"
SHAPE = {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}


def v1(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": V1, "kind": KIND, **fields}


def fit_args(strategy: Any) -> dict[str, Any]:
    return v1(profiles=[{"pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": strategy}}]}])


def error(raw: object) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_config(raw, "cfg.yaml")
    assert "\n" not in str(info.value)
    return info.value


# --- removed beta versions ----------------------------------------------------------------------


@pytest.mark.parametrize("version,release", [("v1beta3", "1.29"), ("v1beta2", "1.28")])
def test_removed_beta_versions_are_refused_with_the_fix(version: str, release: str) -> None:
    err = error(v1(apiVersion=f"kubescheduler.config.k8s.io/{version}"))
    assert err.field == "apiVersion"
    assert err.message.startswith(f'Unsupported value: "kubescheduler.config.k8s.io/{version}": ')
    assert f"removed in Kubernetes {release}" in err.message
    assert f"use {V1}" in err.message


def test_v1beta2_message_names_the_weights_that_change() -> None:
    """v1beta2's defaults weigh TaintToleration and NodeAffinity 1; v1's weigh them 3 and 2."""
    err = error(v1(apiVersion="kubescheduler.config.k8s.io/v1beta2"))
    assert "TaintToleration 3" in err.message and "NodeAffinity 2" in err.message


def test_other_versions_list_only_what_is_read() -> None:
    err = error(v1(apiVersion="kubescheduler.config.k8s.io/v2"))
    assert err.message == ('Unsupported value: "kubescheduler.config.k8s.io/v2": supported values: '
                           '"kubescheduler.config.k8s.io/v1", "kubescheduler.config.k8s.io/v1alpha1"')


# --- NodeResourcesFit: requestedToCapacityRatio only with its type ------------------------------


@pytest.mark.parametrize("kind", ["LeastAllocated", "MostAllocated"])
@pytest.mark.parametrize("ratio", [SHAPE, {}, {"shape": []}])
def test_a_ratio_with_another_type_is_forbidden(kind: str, ratio: dict[str, Any]) -> None:
    err = error(fit_args({"type": kind, "requestedToCapacityRatio": ratio}))
    assert err.field == f"{FIT}.requestedToCapacityRatio"
    assert err.message == "Forbidden: must be nil when type is not RequestedToCapacityRatio"


def test_a_null_ratio_with_another_type_is_no_ratio() -> None:
    raw = fit_args({"type": "MostAllocated", "requestedToCapacityRatio": None})
    assert args_of(parse_config(raw, "t").profiles[0], ScoringStrategy).type == "MostAllocated"


# --- an error about a default says it is one ----------------------------------------------------


def test_max_backoff_left_at_its_default_below_the_initial_one() -> None:
    err = error(v1(podInitialBackoffSeconds=20))
    assert err.field == "podMaxBackoffSeconds"
    assert "Invalid value: 10: must be greater than or equal to PodInitialBackoffSeconds" in err.message
    assert "not set" in err.message and "default" in err.message


def test_lease_duration_left_at_its_default() -> None:
    err = error(v1(leaderElection={"renewDeadline": "20s", "retryPeriod": "4s"}))
    assert err.field == "leaderElection.leaseDuration"
    assert "Invalid value: 15s" in err.message and "not set" in err.message and "default" in err.message


def test_renew_deadline_left_at_its_default() -> None:
    err = error(v1(leaderElection={"retryPeriod": "9s"}))
    assert err.field == "leaderElection.renewDeadline"
    assert "Invalid value: 10s" in err.message and "not set" in err.message


def test_a_written_value_is_not_called_a_default() -> None:
    err = error(v1(podInitialBackoffSeconds=20, podMaxBackoffSeconds=10))
    assert "default" not in err.message


# --- several YAML documents ---------------------------------------------------------------------


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cfg.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_two_documents_are_refused_in_plain_words(tmp_path: Path) -> None:
    path = write(tmp_path, f"apiVersion: {V1}\nkind: {KIND}\n---\napiVersion: v1\nkind: ConfigMap\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == (f"{path}: holds 2 YAML documents (the second at line 4); "
                               f"a configuration file is one {KIND}")


@pytest.mark.parametrize("text", [
    f"apiVersion: {V1}\nkind: {KIND}\n---\n",
    f"---\napiVersion: {V1}\nkind: {KIND}\n---\n# nothing more\n",
    f"---\n---\napiVersion: {V1}\nkind: {KIND}\n",
])
def test_empty_documents_around_the_configuration_are_ignored(tmp_path: Path, text: str) -> None:
    assert load_config(write(tmp_path, text)).profiles[0].scheduler_name == "tessera"


def test_only_empty_documents_is_an_empty_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="the file is empty"):
        load_config(write(tmp_path, "---\n---\n"))


def test_a_yaml_error_in_a_later_document_is_still_reported(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="invalid YAML at line 5"):
        load_config(write(tmp_path, f"apiVersion: {V1}\nkind: {KIND}\n---\na: [\n"))


# --- pluginConfig args: apiVersion ---------------------------------------------------------------


def test_args_api_version_must_be_v1() -> None:
    raw = v1(profiles=[{"pluginConfig": [{"name": "Coscheduling", "args": {"apiVersion": "foo/v9"}}]}])
    err = error(raw)
    assert err.field == "profiles[0].pluginConfig[0].args.apiVersion"
    assert err.message == f'Unsupported value: "foo/v9": supported values: "{V1}"'


def test_args_with_v1_api_version_and_kind_load() -> None:
    raw = v1(profiles=[{"pluginConfig": [{"name": "NodeResourcesFit", "args": {
        "apiVersion": V1, "kind": "NodeResourcesFitArgs", "scoringStrategy": {"type": "MostAllocated"}}}]}])
    assert args_of(parse_config(raw, "t").profiles[0], ScoringStrategy).type == "MostAllocated"
