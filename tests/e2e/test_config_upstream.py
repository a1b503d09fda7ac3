"""Configuration files that kube-scheduler (the pinned binary) refuses are refused by Tessera too,
at the field upstream names (review of the configuration; see tests/unit/test_config_review.py).

kube-scheduler is run on each file with a kubeconfig pointing nowhere: every case here fails
while the configuration is decoded, validated or its profiles built, before any connection.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from scheduler.api.config import ConfigError, load_config
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
    "negative-weight": ("profiles:\n- plugins:\n    score:\n      enabled: [{name: TaintToleration, weight: -3}]\n",
                        V1, "total score of Score plugins could overflow", "profiles[0].plugins.score.enabled[0].weight"),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", sorted(CASES))
def test_kube_scheduler_and_tessera_both_refuse(case: str, control_plane_binaries: ControlPlaneBinaries,
                                                tmp_path: Path) -> None:
    binary = control_plane_binaries.kube_scheduler
    if binary is None:
        pytest.skip("kube-scheduler binary not available (KUBEBUILDER_ASSETS without it)")
    body, api_version, upstream, field = CASES[case]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    path = tmp_path / "config.yaml"
    path.write_text(f"apiVersion: {api_version}\nkind: KubeSchedulerConfiguration\n"
                    f"clientConnection: {{kubeconfig: {kubeconfig}}}\nleaderElection: {{leaderElect: false}}\n{body}")

    proc = subprocess.run([str(binary), f"--config={path}", "--secure-port=0"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode != 0
    failed = [line for line in proc.stderr.splitlines() if "command failed" in line]
    assert failed and upstream in failed[0], proc.stderr[-2000:]

    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.field == field, str(info.value)
