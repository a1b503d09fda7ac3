"""A profile that scores no GPUs is said at start-up (`tessera run`'s log, `tessera simulate`'s
stderr).

Why: a `--config` file starts from upstream kube-scheduler's defaults (no TesseraFragmentation,
NodeResourcesFit on cpu and memory), so a new user who wrote a file only to change the queue order
lost the built-in GPU packing without a word (`make demo` then split its 4-GPU job 3/1).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler import cli
from scheduler.api.config import load_config, parse_config
from scheduler.core.plugins.registry import gpu_scoring_notices
from tests.deploy_manifests import CHART, deploy_documents, find, helm_binary, helm_template

V1 = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "tfjob-demo.jsonl"
GANGS = {"queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "PrioritySort"}]}}


def _notice(name: str) -> str:
    return (f'profile "{name}" scores no GPUs: no plugin in it scores GPU placement (NodeResourcesFit with '
            "a GPU resource (amd.com/gpu, gpu.intel.com/i915, gpu.intel.com/xe, nvidia.com/gpu) in its "
            "scoringStrategy.resources, TesseraFragmentation, TesseraGpuPacking); GPU pods "
            "will be placed as the CPU/memory scores say (a --config file starts from kube-scheduler's defaults, "
            "not the built-in profile): see docs/configuration.md, 'To keep the built-in packing'")


def test_a_profile_that_only_changes_the_queue_order_is_said_to_score_no_gpus() -> None:
    config = parse_config({**V1, "profiles": [{"schedulerName": "tessera", "plugins": GANGS}]}, "qs.yaml")
    assert gpu_scoring_notices(config) == {"tessera": _notice("tessera")}


@pytest.mark.parametrize("plugins", [
    {"score": {"enabled": [{"name": "TesseraFragmentation"}]}},
    {"multiPoint": {"enabled": [{"name": "TesseraGpuPacking"}]}},
])
def test_a_profile_with_a_gpu_score_is_quiet(plugins: dict[str, Any]) -> None:
    config = parse_config({**V1, "profiles": [{"plugins": plugins}]}, "t.yaml")
    assert gpu_scoring_notices(config) == {}


def test_node_resources_fit_counts_when_its_resources_name_gpus_and_each_profile_is_said_alone() -> None:
    fit = {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated", "resources": [
        {"name": "cpu", "weight": 1}, {"name": "nvidia.com/gpu", "weight": 1}]}}}
    config = parse_config({**V1, "profiles": [{"schedulerName": "gpus", "pluginConfig": [fit]},
                                              {"schedulerName": "cpus"}]}, "t.yaml")
    assert gpu_scoring_notices(config) == {"cpus": _notice("cpus")}
    # the args alone do not score: NodeResourcesFit's score disabled, its GPUs go unscored
    off = {"score": {"disabled": [{"name": "NodeResourcesFit"}]}}
    config = parse_config({**V1, "profiles": [{"schedulerName": "gpus", "pluginConfig": [fit], "plugins": off}]}, "t")
    assert gpu_scoring_notices(config) == {"gpus": _notice("gpus")}


def _fit(*resources: str) -> dict[str, Any]:
    return {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated", "resources": [
        {"name": name, "weight": 1} for name in resources]}}}


@pytest.mark.parametrize("gpu", ["amd.com/gpu", "gpu.intel.com/i915", "gpu.intel.com/xe"])
def test_node_resources_fit_on_another_vendors_gpus_scores_gpus(gpu: str) -> None:
    """The well-known GPU resource names of the vendors' device plugins (Kubernetes "Schedule
    GPUs": amd.com/gpu, nvidia.com/gpu; Intel's plugin: gpu.intel.com/i915 and gpu.intel.com/xe).
    A cluster of AMD GPUs packed by NodeResourcesFit was told its profile scores no GPUs."""
    config = parse_config({**V1, "profiles": [{"pluginConfig": [_fit("cpu", gpu)]}]}, "t.yaml")
    assert gpu_scoring_notices(config) == {}


def test_node_resources_fit_on_other_extended_resources_does_not_score_gpus() -> None:
    """A NIC or FPGA resource is no GPU: NodeResourcesFit packing it leaves GPU pods to cpu and memory."""
    config = parse_config({**V1, "profiles": [{"pluginConfig": [_fit("cpu", "rdma/hca", "example.com/fpga")]}]}, "t")
    assert gpu_scoring_notices(config) == {"tessera": _notice("tessera")}


def test_the_device_plugins_score_alone_does_not_score_gpus() -> None:
    """TesseraDevices (weight 1 in every profile that keeps upstream's score list) scores only pods
    asking for a ResourceClass, by how full the class's devices get: a pod asking for nvidia.com/gpu
    itself is left to the other scores. It is in the profile `make demo` split 3/1, so it must not
    quiet the notice — even alone, at a higher weight."""
    only = {"score": {"disabled": [{"name": "*"}], "enabled": [{"name": "TesseraDevices", "weight": 5}]}}
    config = parse_config({**V1, "profiles": [{"plugins": only}]}, "t.yaml")
    assert config.profiles[0].score_weights == {"TesseraDevices": 5}
    assert gpu_scoring_notices(config) == {"tessera": _notice("tessera")}


@pytest.mark.parametrize("path", [None, *sorted(str(p) for p in (ROOT / "config").glob("*.yaml"))])
def test_the_builtin_profile_and_the_shipped_configurations_are_quiet(path: str | None) -> None:
    assert gpu_scoring_notices(load_config(path)) == {}


def test_the_deployed_configurations_are_quiet() -> None:
    """What a cluster runs: the kustomize tree's ConfigMap and the Helm chart's, rendered at its
    default values and with deploy/README.md's one-weight values file (a Tessera profile there that
    lost its GPU score would be warned about on every start)."""
    one_weight = yaml.safe_load((CHART.parent / "values-one-weight.yaml").read_text())
    helm = helm_binary()
    for name, docs in (("kustomize", deploy_documents()), ("helm", helm_template(helm)),
                       ("helm one weight", helm_template(helm, one_weight))):
        text = find(docs, "ConfigMap", "tessera-scheduler-config")["data"]["config.yaml"]
        assert gpu_scoring_notices(parse_config(yaml.safe_load(text), name)) == {}, name


def _file(tmp_path: Path) -> str:
    path = tmp_path / "qs.yaml"
    path.write_text(yaml.safe_dump({**V1, "profiles": [{"schedulerName": "tessera", "plugins": GANGS}]}))
    return str(path)


def test_simulate_says_it_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _file(tmp_path)
    assert cli.main(["simulate", str(DEMO), "--config", path, "-o", "table"]) == 0
    assert capsys.readouterr().err.splitlines() == [f"tessera: warning: {path}: {_notice('tessera')}"]


@pytest.mark.usefixtures("run_offline")
def test_run_logs_it_once_per_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _file(tmp_path)
    assert cli.main(["run", "--config", path]) == 0
    (line,) = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert (line["event"], line["level"], line["config"], line["profile"], line["message"]) == (
        "config.profile_scores_no_gpus", "warning", path, "tessera", _notice("tessera"))
