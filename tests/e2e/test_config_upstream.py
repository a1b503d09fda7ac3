"""Configuration files that kube-scheduler (the pinned binary) refuses are refused by Tessera too,
at the field upstream names (review of the configuration; see tests/unit/test_config_review.py).

kube-scheduler is run on each file with a kubeconfig pointing nowhere: every refused case fails
while the configuration is decoded, validated or its profiles built, before any connection; an
accepted one gets as far as starting (then retries the unreachable apiserver, and is killed).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from scheduler.api.config import ConfigError, SchedulerConfig, load_config
from scheduler.core.plugins.fit.args import ScoringStrategy
from scheduler.core.plugins.node_affinity_args import NodeAffinityArgs
from scheduler.core.plugins.registry import args_of
from scheduler.kube.controlplane import ControlPlaneBinaries

V1 = "kubescheduler.config.k8s.io/v1"
KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""

FIT_LEAST_WITH_SHAPE = """profiles:
- pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: LeastAllocated
        requestedToCapacityRatio: {shape: [{utilization: 0, score: 0}]}
"""

SPREAD_ARGS = "profiles:\n- pluginConfig:\n  - name: PodTopologySpread\n    args: {{{}}}\n"

# (file body after the header, apiVersion, what kube-scheduler says, the field Tessera names)
CASES = {
    "v1beta3": ("", "kubescheduler.config.k8s.io/v1beta3",
                'no kind \\"KubeSchedulerConfiguration\\" is registered for version '
                '\\"kubescheduler.config.k8s.io/v1beta3\\"', "apiVersion"),
    "v1beta2": ("", "kubescheduler.config.k8s.io/v1beta2",
                'no kind \\"KubeSchedulerConfiguration\\" is registered for version '
                '\\"kubescheduler.config.k8s.io/v1beta2\\"', "apiVersion"),
    "unknown-field": ("foo: 1\n", V1, 'strict decoding error: unknown field \\"foo\\"', "foo"),
    "ratio-with-another-type": (FIT_LEAST_WITH_SHAPE, V1,
                                "scoringStrategy.requestedToCapacityRatio: Forbidden: must be nil when type is not "
                                "RequestedToCapacityRatio",
                                "profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio"),
    "args-api-version": ("profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args: {apiVersion: foo/v9}\n", V1,
                         'no kind \\"NodeResourcesFitArgs\\" is registered for version \\"foo/v9\\"',
                         "profiles[0].pluginConfig[0].args.apiVersion"),
    "duplicate-profile": ("profiles:\n- schedulerName: a\n- schedulerName: a\n", V1,
                          "profiles[1].schedulerName: Duplicate value", "profiles[1].schedulerName"),
    "percentage": ("percentageOfNodesToScore: 101\n", V1,
                   "percentageOfNodesToScore: Invalid value: 101: not in valid range [0-100]", "percentageOfNodesToScore"),
    "max-backoff-default": ("podInitialBackoffSeconds: 20\n", V1,
                            "podMaxBackoffSeconds: Invalid value: 10: must be greater than or equal to "
                            "PodInitialBackoffSeconds", "podMaxBackoffSeconds"),
    # numbers outside the Go type of kube-scheduler's field: a decoding error (review of the numbers)
    "max-backoff-beyond-int64": ("podMaxBackoffSeconds: 9223372036854775808\n", V1,
                                 "cannot unmarshal number 9223372036854775808 into Go struct field "
                                 "KubeSchedulerConfiguration.podMaxBackoffSeconds of type int64", "podMaxBackoffSeconds"),
    "parallelism-beyond-int32": ("parallelism: 2147483648\n", V1, "cannot unmarshal number 2147483648 into Go struct "
                                 "field KubeSchedulerConfiguration.parallelism of type int32", "parallelism"),
    "burst-beyond-int32": ("clientConnection: {kubeconfig: KUBECONFIG, burst: 2147483648}\n", V1,
                           "cannot unmarshal number 2147483648 into Go struct field "
                           "ClientConnectionConfiguration.clientConnection.burst of type int32", "clientConnection.burst"),
    "qps-beyond-float32": ("clientConnection: {kubeconfig: KUBECONFIG, qps: 1e39}\n", V1,
                           "cannot unmarshal number 1e+39 into Go struct field "
                           "ClientConnectionConfiguration.clientConnection.qps of type float32", "clientConnection.qps"),
    "min-candidates-beyond-int32": (
        "profiles:\n- pluginConfig:\n  - name: DefaultPreemption\n    args: {minCandidateNodesAbsolute: 2147483648}\n",
        V1, "cannot unmarshal number 2147483648 into Go struct field DefaultPreemptionArgs.minCandidateNodesAbsolute "
            "of type int32", "profiles[0].pluginConfig[0].args.minCandidateNodesAbsolute"),
    "backoff-fraction": ("podMaxBackoffSeconds: 2.5\n", V1, "cannot unmarshal number 2.5 into Go struct field "
                         "KubeSchedulerConfiguration.podMaxBackoffSeconds of type int64", "podMaxBackoffSeconds"),
    # fields kubescheduler.config.k8s.io/v1 does not have
    "healthz-bind-address": ("healthzBindAddress: 0.0.0.0:10251\n", V1,
                             'strict decoding error: unknown field \\"healthzBindAddress\\"', "healthzBindAddress"),
    "metrics-bind-address": ("metricsBindAddress: 0.0.0.0:10251\n", V1,
                             'strict decoding error: unknown field \\"metricsBindAddress\\"', "metricsBindAddress"),
    "percentage-of-placements": ("profiles:\n- percentageOfPlacementsToScore: 50\n", V1,
                                 'strict decoding error: unknown field \\"profiles[0].percentageOfPlacementsToScore\\"',
                                 "profiles[0].percentageOfPlacementsToScore"),
    # PodTopologySpreadArgs (validation_pluginargs.go ValidatePodTopologySpreadArgs)
    "spread-system-with-constraints": (
        SPREAD_ARGS.format("defaultConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway}]"),
        V1, 'defaultingType: Invalid value: \\"System\\": when .defaultConstraints are not empty',
        "profiles[0].pluginConfig[0].args.defaultingType"),
    "spread-max-skew-zero": (
        SPREAD_ARGS.format("defaultingType: List, defaultConstraints: [{maxSkew: 0, topologyKey: zone, "
                           "whenUnsatisfiable: ScheduleAnyway}]"),
        V1, "defaultConstraints[0].maxSkew: Invalid value: 0: not in valid range (0, inf)",
        "profiles[0].pluginConfig[0].args.defaultConstraints[0].maxSkew"),
    "spread-selector": (
        SPREAD_ARGS.format("defaultingType: List, defaultConstraints: [{maxSkew: 1, topologyKey: zone, "
                           "whenUnsatisfiable: ScheduleAnyway, labelSelector: {}}]"),
        V1, "defaultConstraints[0].labelSelector: Forbidden: constraint must not define a selector, as they "
            "deduced for each pod", "profiles[0].pluginConfig[0].args.defaultConstraints[0].labelSelector"),
    "spread-duplicate": (
        SPREAD_ARGS.format("defaultingType: List, defaultConstraints: [{maxSkew: 1, topologyKey: zone, "
                           "whenUnsatisfiable: ScheduleAnyway}, {maxSkew: 2, topologyKey: zone, "
                           "whenUnsatisfiable: ScheduleAnyway}]"),
        V1, 'defaultConstraints[1]: Duplicate value: \\"{zone, ScheduleAnyway}\\"',
        "profiles[0].pluginConfig[0].args.defaultConstraints[1]"),
    # NodeResourcesFitArgs' lists (kube-scheduler checks them building the plugin, naming them below the args)
    "fit-ignored-group-slash": (
        "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args: {ignoredResourceGroups: [x/y]}\n", V1,
        "ignoredResourceGroups[0]: Invalid value: \\\"x/y\\\": resource group name can't contain '/'",
        "profiles[0].pluginConfig[0].args.ignoredResourceGroups[0]"),
    # NodeAffinityArgs (ValidateNodeAffinityArgs: component-helpers' NewNodeSelector with the args' path)
    "added-affinity-bad-key": (
        "profiles:\n- pluginConfig:\n  - name: NodeAffinity\n    args:\n      addedAffinity:\n"
        "        requiredDuringSchedulingIgnoredDuringExecution:\n          nodeSelectorTerms:\n"
        "          - matchExpressions: [{key: a/b/c, operator: Exists}]\n", V1,
        'requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key: Invalid value: '
        '\\"a/b/c\\": a valid label key', "profiles[0].pluginConfig[0].args.addedAffinity."
        "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key"),
    "added-affinity-field-values": (
        "profiles:\n- pluginConfig:\n  - name: NodeAffinity\n    args:\n      addedAffinity:\n"
        "        preferredDuringSchedulingIgnoredDuringExecution:\n        - weight: 2\n          preference:\n"
        "            matchFields: [{key: metadata.name, operator: In, values: [a, b]}]\n", V1,
        'preferredDuringSchedulingIgnoredDuringExecution[0].matchFields[0].values: Invalid value: [\\"a\\",\\"b\\"]: '
        "must have one element", "profiles[0].pluginConfig[0].args.addedAffinity."
        "preferredDuringSchedulingIgnoredDuringExecution[0].matchFields[0].values"),
    "two-queue-sorts": ("profiles:\n- plugins:\n    queueSort:\n      enabled: [{name: PrioritySort}, {name: Coscheduling}]\n",
                        V1, "profiles[0].plugins.queueSort.Enabled: Invalid value: 2: only one queue sort plugin can "
                            "be enabled", "profiles[0].plugins.queueSort.Enabled"),
    # validation's count comes alone: the framework build that would refuse NodeName never runs
    "two-queue-sorts-one-not-sorting": (
        "profiles:\n- plugins:\n    queueSort:\n      enabled: [{name: PrioritySort}, {name: NodeName}]\n", V1,
        "profiles[0].plugins.queueSort.Enabled: Invalid value: 2: only one queue sort plugin can be enabled",
        "profiles[0].plugins.queueSort.Enabled"),
    # validateCommonQueueSort: the set printed as encoding/json writes the internal PluginSet
    "queue-sort-differs": ('profiles:\n- schedulerName: a\n- schedulerName: b\n  plugins:\n    queueSort:\n'
                           '      enabled: [{name: PrioritySort}]\n      disabled: [{name: "*"}]\n', V1,
                           'profiles[1].plugins.queueSort: Invalid value: {\\"Enabled\\":[{\\"Name\\":\\"PrioritySort'
                           '\\",\\"Weight\\":0}],\\"Disabled\\":[{\\"Name\\":\\"*\\",\\"Weight\\":0}]}: must be the '
                           "same for all profiles", "profiles[1].plugins.queueSort"),
    # NewFramework's count of the expanded queueSort point (the binary has no Coscheduling, so the
    # two-plugin form, e.g. `queueSort: [Coscheduling]` beside multiPoint's PrioritySort, is unit-tested)
    "no-queue-sort": ('profiles:\n- plugins:\n    queueSort:\n      disabled: [{name: "*"}]\n', V1,
                      'only one queue sort plugin required for profile with scheduler name \\"default-scheduler\\", '
                      "but got 0", "profiles[0].plugins.queueSort"),
    "no-multi-point": ('profiles:\n- schedulerName: a\n  plugins:\n    multiPoint:\n      disabled: [{name: "*"}]\n'
                       '- schedulerName: b\n  plugins:\n    multiPoint:\n      disabled: [{name: "*"}]\n', V1,
                       'only one queue sort plugin required for profile with scheduler name \\"a\\", but got 0',
                       "profiles[0].plugins.queueSort"),
    # NewFramework's bind count: multiPoint's DefaultBinder disabled and not enabled again
    "no-binder": ('profiles:\n- plugins:\n    multiPoint:\n      disabled: [{name: "*"}]\n'
                  '      enabled: [{name: PrioritySort}]\n', V1,
                  'at least one bind plugin is needed for profile with scheduler name \\"default-scheduler\\"',
                  "profiles[0].plugins.bind"),
    "negative-weight": ("profiles:\n- plugins:\n    score:\n      enabled: [{name: TaintToleration, weight: -3}]\n",
                        V1, "total score of Score plugins could overflow", "profiles[0].plugins.score.enabled[0].weight"),
}


def _document(api_version: str, kubeconfig: Path, body: str) -> str:
    """The file: `body` after a header that points kube-scheduler at `kubeconfig` (a body that
    sets clientConnection itself writes KUBECONFIG where the path goes)."""
    header = "" if "clientConnection" in body else f"clientConnection: {{kubeconfig: {kubeconfig}}}\n"
    return (f"apiVersion: {api_version}\nkind: KubeSchedulerConfiguration\n{header}"
            f"leaderElection: {{leaderElect: false}}\n{body.replace('KUBECONFIG', str(kubeconfig))}")


def _kube_scheduler(binaries: ControlPlaneBinaries) -> Path:
    """The pinned kube-scheduler binary (CI builds it; only a KUBEBUILDER_ASSETS without it skips)."""
    if binaries.kube_scheduler is None:
        pytest.skip("kube-scheduler binary not available (KUBEBUILDER_ASSETS without it)")
    return binaries.kube_scheduler


def _config_file(tmp_path: Path, api_version: str, body: str) -> Path:
    """`body` written as a configuration file beside a kubeconfig both schedulers can read."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    path = tmp_path / "config.yaml"
    path.write_text(_document(api_version, kubeconfig, body))
    return path


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", sorted(CASES))
def test_kube_scheduler_and_tessera_both_refuse(case: str, control_plane_binaries: ControlPlaneBinaries,
                                                tmp_path: Path) -> None:
    binary = _kube_scheduler(control_plane_binaries)
    body, api_version, upstream, field = CASES[case]
    path = _config_file(tmp_path, api_version, body)

    proc = subprocess.run([str(binary), f"--config={path}", "--secure-port=0"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode != 0
    failed = [line for line in proc.stderr.splitlines() if "command failed" in line]
    assert failed and upstream in failed[0], proc.stderr[-2000:]

    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.field == field, str(info.value)


def _backoff(config: SchedulerConfig) -> object:
    return config.pod_max_backoff_seconds


# Files both read: whole numbers written as floats decode as those integers (sigs.k8s.io/yaml writes
# them as integers for encoding/json), and the one `multiPoint: {disabled: ["*"]}` form upstream's
# framework builds (its queue sort and binder enabled again); (file body, what Tessera then holds).
ACCEPTED: dict[str, tuple[str, Callable[[SchedulerConfig], object], object]] = {
    "backoff-as-float": ("podMaxBackoffSeconds: 20.0\n", _backoff, 20),
    "backoff-in-exponent-form": ("podMaxBackoffSeconds: 1e3\n", _backoff, 1000),
    "largest-int64-backoff": ("podMaxBackoffSeconds: 9223372036854775807\n", _backoff, 2**63 - 1),
    "multi-point-sort-and-binder-again": (
        'profiles:\n- plugins:\n    multiPoint:\n      disabled: [{name: "*"}]\n'
        "      enabled: [{name: DefaultBinder}, {name: PrioritySort}]\n",
        lambda config: (config.profiles[0].queue_sort, dict(config.profiles[0].score_weights)), (("PrioritySort",), {})),
    "fit-ignored-resources": (
        "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n"
        "    args: {ignoredResources: [example.com/fpga], ignoredResourceGroups: [example.org]}\n",
        lambda config: (args_of(config.profiles[0], ScoringStrategy).ignores("example.org/nic"),
                        args_of(config.profiles[0], ScoringStrategy).ignores("example.com/nic")), (True, False)),
    "added-affinity": (
        "profiles:\n- pluginConfig:\n  - name: NodeAffinity\n    args:\n      addedAffinity:\n"
        "        requiredDuringSchedulingIgnoredDuringExecution:\n          nodeSelectorTerms:\n"
        "          - matchExpressions: [{key: nvidia.com/gpu.product, operator: Exists}]\n"
        "        preferredDuringSchedulingIgnoredDuringExecution:\n        - weight: 0\n          preference:\n"
        "            matchExpressions: [{key: '', operator: In}]\n",
        lambda config: [str(term) for term in args_of(config.profiles[0], NodeAffinityArgs).required_terms or ()],
        ["SelectorTerm(expressions=(Requirement(key='nvidia.com/gpu.product', operator='Exists', values=(), errors=()),), "
         "fields=())"]),
}
_STARTED = "Starting Kubernetes Scheduler"  # logged by Run, after the configuration is decoded and validated and the profiles built


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_kube_scheduler_and_tessera_both_accept(case: str, control_plane_binaries: ControlPlaneBinaries,
                                               tmp_path: Path) -> None:
    binary = _kube_scheduler(control_plane_binaries)
    body, read, expected = ACCEPTED[case]
    path = _config_file(tmp_path, V1, body)

    proc = subprocess.Popen([str(binary), f"--config={path}", "--secure-port=0"], stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        lines = []
        for line in proc.stderr:  # it runs on (retrying the unreachable apiserver) once started
            lines.append(line)
            if _STARTED in line or "command failed" in line:
                break
    finally:
        proc.kill()
        proc.wait()
    assert lines and _STARTED in lines[-1], "".join(lines)[-2000:]

    assert read(load_config(path)) == expected
