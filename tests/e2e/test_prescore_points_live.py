"""PreScore and Score disabled apart, side by side with the real kube-scheduler v1.36.3: a profile
with NodeAffinity off under `plugins.score` still fails a pod with an unparsable preferred term
in PreScore, and one with it off under `plugins.preScore` fails it in Score, with the same words
from both schedulers. The rules are in tests/unit/test_prescore_extension_points.py; this shows
them against the binary. kube-scheduler runs here with a configuration of its own (two profiles
under other names than the cluster's default scheduler, no leader election)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.kube.controlplane import LocalControlPlane
from scheduler.sim import builders as b
from tests.e2e.live import Kube, eventually

NODES = "/api/v1/nodes"
PREFERRED = {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 1, "preference": {"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["abc"]}]}}]}}}
PARSE_ERROR = "[0].matchExpressions[0].values[0]: Invalid value: \"abc\": for 'Gt', 'Lt' operators, the value must be an integer"
CASES = {  # profile suffix -> (its plugins, the note both schedulers give)
    "score-off": ({"score": {"disabled": [{"name": "NodeAffinity"}]}},
                  f'running PreScore plugin "NodeAffinity": {PARSE_ERROR}'),
    "prescore-off": ({"preScore": {"disabled": [{"name": "NodeAffinity"}]}},
                     f'running Score plugins: plugin "NodeAffinity" failed with: {PARSE_ERROR}'),
}


def _profiles(prefix: str) -> list[dict[str, Any]]:
    return [{"schedulerName": f"{prefix}-{case}", "plugins": plugins} for case, (plugins, _) in CASES.items()]


@pytest.fixture
def upstream(clean_cluster: LocalControlPlane, tmp_path: Path) -> Iterator[None]:
    """kube-scheduler with the `upstream-*` profiles, stopped after the test."""
    binary = clean_cluster.binaries.kube_scheduler
    if binary is None:
        pytest.skip("kube-scheduler binary not available (KUBEBUILDER_ASSETS without it)")
    config = tmp_path / "upstream.yaml"
    config.write_text(yaml.safe_dump({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(clean_cluster.kubeconfig)},
        "leaderElection": {"leaderElect": False}, "profiles": _profiles("upstream")}))
    with (tmp_path / "upstream.log").open("w") as log:
        proc = subprocess.Popen([str(binary), f"--config={config}", "--secure-port=0"], stdout=log, stderr=log)
        try:
            yield
        finally:
            proc.terminate()
            proc.wait(10)


async def _note(kubectl: Kube, namespace: str, pod: str) -> str | None:
    events = [e for e in await kubectl.events(namespace)
              if e["regarding"]["name"] == pod and e["reason"] == "FailedScheduling"]
    return events[0]["note"] if events else None


@pytest.mark.usefixtures("upstream")
async def test_prescore_and_score_are_disabled_apart_as_in_kube_scheduler(tessera: Any, kubectl: Kube, namespace: str,
                                                                          tmp_path: Path) -> None:
    config = tmp_path / "tessera.yaml"
    config.write_text(yaml.safe_dump({"apiVersion": "kubescheduler.config.k8s.io/v1",
                                      "kind": "KubeSchedulerConfiguration", "leaderElection": {"leaderElect": False},
                                      "profiles": _profiles("tessera")}))
    await tessera(str(config))
    for name in ("points-1", "points-2"):
        node = b.node(name)
        await kubectl.create(NODES, node)
        await kubectl.call("PATCH", f"{NODES}/{name}/status", {"status": node["status"]},
                           content_type="application/merge-patch+json")
    for case in CASES:
        for scheduler in ("tessera", "upstream"):
            await kubectl.create_pod(namespace, b.pod(f"{scheduler}-{case}", scheduler=f"{scheduler}-{case}",
                                                      requests={"cpu": "100m"}, spec_extra=PREFERRED))
    for case, (_, note) in CASES.items():
        upstream = await eventually(lambda: _note(kubectl, namespace, f"upstream-{case}"))
        ours = await eventually(lambda: _note(kubectl, namespace, f"tessera-{case}"))
        assert (case, ours) == (case, upstream) == (case, note)
    pods = await kubectl.pods(namespace)
    assert not any(pod["spec"].get("nodeName") for pod in pods.values())
