"""Which version and configuration a replica runs (a day-2 trial, finding A): `tessera --version`
printed `0.1.0` for builds 100 commits apart, there was no `/configz`, no build-info metric, and
`tessera.starting`'s `version` was the apiserver's."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import aiohttp
import pytest
import structlog.testing
from prometheus_client.parser import text_string_to_metric_families

from scheduler import __version__
from scheduler.api.config import load_config, parse_config_text
from scheduler.api.config_effective import config_digest, configz
from scheduler.build_info import BuildInfo, build_info, read_build_info
from scheduler.cli import main
from scheduler.kube.metrics import Metrics
from scheduler.kube.run_cli import log_starting
from scheduler.kube.serving import PING, configz_route, serve

REPO = Path(__file__).resolve().parents[2]
SHA = "0123456789abcdef0123456789abcdef01234567"
CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: tessera
  plugins:
    score:
      enabled:
      - name: TesseraDevices
        weight: {weight}
"""


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], check=True, capture_output=True, text=True).stdout.strip()


def test_a_source_checkout_reports_its_commit_and_tree_state() -> None:
    info = read_build_info(REPO / "scheduler")
    assert info.version == __version__
    assert info.git_commit == _git("rev-parse", "HEAD")
    assert info.git_tree_state == ("dirty" if _git("status", "--porcelain", "--untracked-files=no") else "clean")


def test_an_installed_package_reports_the_commit_the_image_build_recorded(tmp_path: Path) -> None:
    package = tmp_path / "site-packages" / "scheduler"
    (package / "data").mkdir(parents=True)
    assert read_build_info(package) == BuildInfo(__version__, "unknown", "unknown")  # nothing recorded
    (package / "data" / "build-commit").write_text(f"{SHA.upper()}\nclean\n")
    assert read_build_info(package) == BuildInfo(__version__, SHA, "clean")
    (package / "data" / "build-commit").write_text("$(git rev-parse HEAD)\n")  # an unexpanded build arg
    assert read_build_info(package) == BuildInfo(__version__, "unknown", "unknown")


def test_a_checkout_without_git_falls_back_to_the_recorded_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "scheduler"
    (package / "data").mkdir(parents=True)
    (package / "data" / "build-commit").write_text(f"{SHA}\ndirty\n")
    (tmp_path / ".git").mkdir()  # a .git git cannot read (or no git at all): not a crash
    monkeypatch.setenv("PATH", str(tmp_path / "no-git-here"))
    assert shutil.which("git") is None
    assert read_build_info(package) == BuildInfo(__version__, SHA, "dirty")


def test_version_prints_the_version_and_the_commit(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    info = build_info()
    dirty = ", uncommitted changes" if info.git_tree_state == "dirty" else ""
    assert capsys.readouterr().out == f"tessera {__version__} (commit {info.git_commit}{dirty})\n"
    assert info.git_commit == _git("rev-parse", "HEAD")


def test_kubectl_tessera_version_names_the_commit_too(capsys: pytest.CaptureFixture[str]) -> None:
    from scheduler.kubectl.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["--version"])
    assert capsys.readouterr().out == f"kubectl-tessera {build_info().describe()}\n"


def test_the_digest_tells_a_changed_weight_apart_and_ignores_where_the_file_was() -> None:
    two = parse_config_text(CONFIG.format(weight=2), "/etc/tessera/config.yaml")
    five = parse_config_text(CONFIG.format(weight=5), "/etc/tessera/config.yaml")
    elsewhere = parse_config_text(CONFIG.format(weight=2), "config.yaml")
    assert len(config_digest(two)) == 12 and int(config_digest(two), 16) >= 0
    assert config_digest(two) != config_digest(five)
    assert config_digest(two) == config_digest(elsewhere)


async def test_configz_serves_the_effective_configuration_as_kube_scheduler_shapes_it() -> None:
    config = parse_config_text(CONFIG.format(weight=5), "/etc/tessera/config.yaml")
    async with serve("127.0.0.1", 0, healthz=[PING], readyz=[PING], registry=Metrics().registry,
                     routes=[configz_route(configz(config))]) as server:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{server.url}/configz") as response:
                assert response.status == 200
                assert response.headers["Content-Type"] == "application/json"
                body = await response.json()
    served = body["componentconfig"]
    assert served["source"] == "/etc/tessera/config.yaml" and served["digest"] == config_digest(config)
    [profile] = served["configuration"]["profiles"]
    assert profile["schedulerName"] == "tessera" and profile["scoreWeights"]["TesseraDevices"] == 5
    assert served["configuration"]["leaderElection"]["leaseDurationSeconds"] == 15
    assert profile["pluginArgs"]["DefaultPreemption"] == {"minCandidateNodesPercentage": 10,
                                                          "minCandidateNodesAbsolute": 100}  # defaults, served too


def test_configz_camel_cases_the_configurations_field_names_not_the_users_data() -> None:
    """/configz converts snake_case keys to camelCase; a review asked whether user data with
    underscores (a profile's scheduler name, resource names, topology labels and level names)
    gets renamed too. It does not: these are values, and the only keys that are not field names
    are plugin names (score weights, plugin args), which have no underscores."""
    config = parse_config_text("""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: tessera_gpu
  pluginConfig:
  - name: TopologyPlacement
    args:
      levels:
      - nodeLabel: example.com/rack_id
        name: rack_level
      maxDomainTrials: 16
  - name: TesseraGpuPacking
    args:
      resourceName: example.com/gpu_mem
""", "config.yaml")
    [profile] = configz(config)["componentconfig"]["configuration"]["profiles"]
    assert profile["schedulerName"] == "tessera_gpu"
    assert profile["pluginArgs"]["TopologyPlacement"]["levels"] == [{"nodeLabel": "example.com/rack_id",
                                                                     "name": "rack_level"}]
    assert profile["pluginArgs"]["TesseraGpuPacking"] == {"resourceName": "example.com/gpu_mem"}


def test_build_and_config_info_metrics() -> None:
    info = BuildInfo("0.1.0", SHA, "clean")
    metrics = Metrics(build=info, config_digest="abcdef012345")
    from prometheus_client import generate_latest
    samples = {s.name: s for family in text_string_to_metric_families(generate_latest(metrics.registry).decode())
               for s in family.samples}
    build = samples["tessera_build_info"]
    assert build.value == 1
    assert {k: build.labels[k] for k in ("git_version", "git_commit", "git_tree_state")} == {
        "git_version": "0.1.0", "git_commit": SHA, "git_tree_state": "clean"}
    assert build.labels["python_version"] and build.labels["platform"]
    assert samples["tessera_config_info"].value == 1
    assert samples["tessera_config_info"].labels == {"digest": "abcdef012345"}


def test_the_starting_line_names_both_versions_and_the_config_digest() -> None:
    config = parse_config_text(CONFIG.format(weight=2), "/etc/tessera/config.yaml")
    with structlog.testing.capture_logs() as logs:
        log_starting("https://10.0.0.1:6443", "v1.36.3", config)
    [line] = logs
    assert line["event"] == "tessera.starting" and "version" not in line
    assert line["apiserver"] == "https://10.0.0.1:6443" and line["apiserver_version"] == "v1.36.3"
    assert line["tessera_version"] == __version__ and line["git_commit"] == build_info().git_commit
    assert line["config_digest"] == config_digest(config) and line["config"] == "/etc/tessera/config.yaml"
    assert line["profiles"] == ["tessera"]


def test_configz_shows_every_enabled_plugins_args_defaults_included() -> None:
    """A day-2 trial: `/configz` listed only the args that differ from a plugin's defaults, while
    deploy/README said it serves the whole effective configuration, and kube-scheduler's serves
    the defaulted configuration, where `setDefaults_KubeSchedulerProfile` appends a pluginConfig
    entry with the defaults for every enabled plugin that has args (pkg/scheduler/apis/config/v1
    defaults.go). Tessera's now does the same per profile, in its own args' shape."""
    builtin = load_config(None)
    [profile] = configz(builtin)["componentconfig"]["configuration"]["profiles"]
    args = profile["pluginArgs"]
    # every plugin the built-in profile runs that has args; TesseraGpuPacking is not enabled
    assert sorted(args) == ["Coscheduling", "DefaultPreemption", "InterPodAffinity", "NodeAffinity", "NodeResourcesFit",
                            "PodTopologySpread", "TesseraDevices", "TesseraFragmentation", "TopologyPlacement",
                            "VolumeBinding"]
    assert args["VolumeBinding"] == {"bindTimeoutSeconds": 600}
    assert args["InterPodAffinity"] == {"hardPodAffinityWeight": 1, "ignorePreferredTermsOfExistingPods": False}
    assert args["NodeResourcesFit"] == {"type": "LeastAllocated", "shape": [],
                                        "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}],
                                        "ignoredResources": [], "ignoredResourceGroups": []}
    assert args["DefaultPreemption"] == {"minCandidateNodesPercentage": 10, "minCandidateNodesAbsolute": 100}
    assert args["TesseraDevices"]["agentHeartbeatTimeoutSeconds"] == 90
    assert args["TesseraFragmentation"]["resourceName"] == "nvidia.com/gpu"
    assert args["TopologyPlacement"] == {"levels": [], "maxDomainTrials": 16}
    assert args["PodTopologySpread"] == {"defaultConstraints": [], "defaultingType": "System"}
    # the model keeps only what differs from the defaults (equal configurations are equal)
    assert len(builtin.profiles[0].plugin_args) == 0


def test_configz_leaves_out_the_args_of_plugins_a_profile_does_not_run() -> None:
    config = parse_config_text("""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: packs
  plugins:
    score:
      enabled:
      - name: TesseraGpuPacking
        weight: 2
  pluginConfig:
  - name: Coscheduling
    args:
      podGroupBackoffSeconds: 30
- schedulerName: never-preempts
  plugins:
    postFilter:
      disabled:
      - name: DefaultPreemption
""", "config.yaml")
    packs, never = configz(config)["componentconfig"]["configuration"]["profiles"]
    assert packs["pluginArgs"]["TesseraGpuPacking"] == {"resourceName": "nvidia.com/gpu"}
    assert packs["pluginArgs"]["Coscheduling"] == {"permitWaitingTimeSeconds": 60, "podGroupBackoffSeconds": 30}
    assert "TesseraFragmentation" not in packs["pluginArgs"]  # a --config file starts without it
    assert "DefaultPreemption" in packs["pluginArgs"]
    assert "DefaultPreemption" not in never["pluginArgs"] and "TesseraGpuPacking" not in never["pluginArgs"]
    assert never["pluginArgs"]["Coscheduling"] == {"permitWaitingTimeSeconds": 60, "podGroupBackoffSeconds": 0}


def test_the_digest_is_the_same_whether_default_args_are_written_or_left_out() -> None:
    omitted = parse_config_text(CONFIG.format(weight=2), "config.yaml")
    written = parse_config_text(CONFIG.format(weight=2) + """  pluginConfig:
  - name: DefaultPreemption
    args:
      minCandidateNodesPercentage: 10
      minCandidateNodesAbsolute: 100
""", "config.yaml")
    changed = parse_config_text(CONFIG.format(weight=2) + """  pluginConfig:
  - name: DefaultPreemption
    args:
      minCandidateNodesPercentage: 20
""", "config.yaml")
    assert written == omitted and config_digest(written) == config_digest(omitted)
    assert configz(written) == configz(omitted)
    assert config_digest(changed) != config_digest(omitted)


def test_configz_shows_each_profiles_queue_sort() -> None:
    """kube-scheduler's /configz shows the whole effective configuration, its profiles' queueSort
    included; Tessera's showed no queue sort at all, while validateCommonQueueSort makes it one
    setting every profile must share. `queueSort` lists the plugins the point expands to as
    upstream's framework builds it (multiPoint's PrioritySort unless the point or multiPoint
    disables it), as `preScore` lists its own point's."""
    [builtin] = configz(load_config(None))["componentconfig"]["configuration"]["profiles"]
    assert builtin["queueSort"] == ["PrioritySort"]  # v1's default profile: PrioritySort, from multiPoint
    gangs = parse_config_text("""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: a
  plugins:
    queueSort:
      enabled: [{name: Coscheduling}]
      disabled: [{name: "*"}]
- schedulerName: b
  plugins:
    queueSort:
      enabled: [{name: Coscheduling}]
      disabled: [{name: "*"}]
""", "config.yaml")
    assert [p["queueSort"] for p in configz(gangs)["componentconfig"]["configuration"]["profiles"]] == [
        ["Coscheduling"], ["Coscheduling"]]
    legacy = parse_config_text("apiVersion: kubescheduler.config.k8s.io/v1alpha1\n"
                               "kind: KubeSchedulerConfiguration\n", "config.yaml")
    assert configz(legacy)["componentconfig"]["configuration"]["profiles"][0]["queueSort"] == ["PrioritySort"]
