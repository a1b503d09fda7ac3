"""Fields Tessera accepts, for a kube-scheduler file to load unchanged, and does not use
(`parallelism` beyond its check, `enableProfiling`, `enableContentionProfiling`,
`delayCacheUntilActive`, `clientConnection.contentType`/`acceptContentTypes`, plugin args without
effect such as Coscheduling's `permitWaitingTimeSeconds`): a user's trial could not tell which of
a ported file's settings took effect. `tessera run` logs one start-up line naming those the file
sets, and `/configz` shows `parallelism` as kube-scheduler's echoes it. Each test failed before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from scheduler import cli
from scheduler.api.config import load_config, parse_config
from scheduler.api.config_effective import config_digest, configz

V1 = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
PACKING = {"plugins": {"score": {"enabled": [{"name": "TesseraFragmentation"}]}}}
TRIAL = {**V1, "parallelism": 32, "enableProfiling": True, "delayCacheUntilActive": False,
         "clientConnection": {"contentType": "application/json"},
         "profiles": [{**PACKING, "pluginConfig": [{"name": "Coscheduling", "args": {
             "permitWaitingTimeSeconds": 60, "podGroupBackoffSeconds": 10, "podGroupRejectPercentage": 5}}]}]}
UNUSED = ["parallelism", "enableProfiling", "delayCacheUntilActive", "clientConnection.contentType",
          "profiles[0].pluginConfig[0].args.permitWaitingTimeSeconds",
          "profiles[0].pluginConfig[0].args.podGroupRejectPercentage"]


def test_the_configuration_names_the_accepted_fields_it_does_not_use() -> None:
    assert list(parse_config(TRIAL, "t.yaml").unused_fields) == UNUSED
    assert parse_config({**V1, "profiles": [PACKING]}, "t.yaml").unused_fields == ()
    assert load_config(None).unused_fields == ()


def test_configz_echoes_parallelism_and_the_digest_ignores_the_unused_list() -> None:
    config = parse_config(TRIAL, "t.yaml")
    shown = configz(config)["componentconfig"]["configuration"]
    assert shown["parallelism"] == 32 and "unusedFields" not in shown
    assert configz(load_config(None))["componentconfig"]["configuration"]["parallelism"] == 16  # v1 defaults.go
    trimmed = {key: value for key, value in TRIAL.items() if key not in ("enableProfiling", "delayCacheUntilActive")}
    assert config_digest(parse_config(trimmed, "t.yaml")) == config_digest(config)


def test_run_logs_one_line_naming_them(tmp_path: Path, run_offline: None, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(TRIAL, sort_keys=False))
    assert cli.main(["run", "--config", str(path)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    [line] = [line for line in lines if line["event"] == "config.unused_fields"]
    assert (line["level"], line["config"], line["fields"]) == ("info", str(path), UNUSED)
