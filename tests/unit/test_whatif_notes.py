"""What what-if and explain tell of what the core does not read (a new user's trial at aee3c70):
a pod with a WaitForFirstConsumer claim was bound in silence; what-if said nothing of preferred pod
terms explain and the Event tell; `-f a -f b` used only b; a bundle with a StorageClass, claim,
Service or ConfigMap was refused; DEVICES printed slice amounts in bytes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from scheduler.kubectl import cli, explain as explaining
from scheduler.kubectl.probe_pods import ProbeError, read_probes
from scheduler.sim import builders as b
from tests.helpers import config, what_if_cli

PVC_BUNDLE = """
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local-wffc}
provisioner: example.com/fake
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  storageClassName: local-wffc
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: pvc-pod}
spec:
  schedulerName: tessera
  volumes: [{name: d, persistentVolumeClaim: {claimName: data}}]
  containers:
  - name: c
    image: busybox
    volumeMounts: [{name: d, mountPath: /data}]
    resources: {limits: {nvidia.com/gpu: 1}}
"""
PREFERRED = """
apiVersion: v1
kind: Pod
metadata: {name: pref, labels: {app: infer}}
spec:
  schedulerName: tessera
  affinity:
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector: {matchLabels: {app: infer}}
          namespaceSelector: {matchLabels: {team: infer}}
  containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]
"""


def _pod(name: str) -> str:
    return (f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  schedulerName: tessera\n"
            "  containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]\n")


def test_explain_says_a_pods_claims_are_not_checked() -> None:
    """Finding 1: a pod with a persistentVolumeClaim (or an ephemeral volume) gets a Volumes: line."""
    pod = b.pod("pvc-pod", limits={"nvidia.com/gpu": 1})
    pod["spec"]["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}},
                              {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                              {"name": "cfg", "configMap": {"name": "c"}}]
    plain = b.pod("plain", limits={"nvidia.com/gpu": 1})
    objs = [b.node("n", gpus=8), pod, plain]
    result = explaining.explain(objs, "default/pvc-pod", config(), [], 0.0)
    assert result is not None
    text = explaining.render(result, 0.0)
    line = next(line for line in text.splitlines() if line.startswith("Volumes:"))
    assert ("claim data, ephemeral scratch: Tessera checks that the claims exist and are bound and that a bound "
            "volume's node affinity allows the node (VolumeBinding)") in line
    assert "WaitForFirstConsumer" in line and "docs/not-supported.md (Volumes)" in line
    assert explaining.as_dict(result)["volumes"] == result.volumes
    other = explaining.explain(objs, "default/plain", config(), [], 0.0)
    assert other is not None and other.volumes == ""
    assert "Volumes:" not in explaining.render(other, 0.0)


async def test_what_if_notes_a_file_pods_claims_and_takes_the_files_claims_and_classes(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Findings 1 and 4: the trial's bundle (StorageClass, claim, pod) was refused; then the
    StorageClass and the claim were skipped with one note. VolumeBinding reads them now: they join
    the dry run (the claim waits for its first consumer, and its class provisions, so the pod is
    placed; skipped, it would be "not found"), and the pod's claim is noted."""
    (tmp_path / "pvc.yaml").write_text(PVC_BUNDLE)
    status, out, err = await what_if_cli(monkeypatch, capsys, [b.node("n", gpus=8)], "-f", str(tmp_path / "pvc.yaml"))
    assert status == 0
    assert out.splitlines()[1].split() == ["default/pvc-pod", "n", "-", "placed"]
    assert "skipped" not in err, err
    assert "Not read: default/pvc-pod: claim data: Tessera checks that the claims exist and are bound" in out
    _, out, _ = await what_if_cli(monkeypatch, capsys, [b.node("n", gpus=8)], "-f", str(tmp_path / "pvc.yaml"),
                               "-o", "json")
    doc = orjson.loads(out)
    assert [note["pod"] for note in doc["notes"]] == ["default/pvc-pod"]
    assert "WaitForFirstConsumer" in doc["notes"][0]["note"]


def test_kinds_that_may_make_pods_stay_an_error() -> None:
    """Finding 4: a kind what-if cannot expand but that may create pods (a DaemonSet, a CronJob, a
    CRD's) is still refused: skipping it would place the rest as if it took nothing."""
    bundle = PVC_BUNDLE + "---\napiVersion: example.com/v1\nkind: RayJob\nmetadata: {name: r}\n"
    with pytest.raises(ProbeError, match="object 4 is a RayJob: what-if -f takes Pods"):
        read_probes(bundle, "f", "default", None, 0)
    notes: list[str] = []
    only = ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\n"
            "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n")
    with pytest.raises(ProbeError, match="f: no Pod or workload in it"):
        read_probes(only, "f", "default", None, 0, notes)


async def test_what_if_notes_preferred_terms_it_does_not_score(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Finding 2: explain and the Event say preferred pod terms are not read; what-if said nothing.
    (Preferred pod terms are scored now, but for those with a namespaceSelector.)"""
    (tmp_path / "pref.yaml").write_text(PREFERRED)
    (tmp_path / "two.yaml").write_text(PREFERRED.replace("name: pref", "name: pref2"))
    _, out, _ = await what_if_cli(monkeypatch, capsys, [b.node("n", gpus=8)], "-f", str(tmp_path / "pref.yaml"),
                               "-f", str(tmp_path / "two.yaml"))
    # pods with the same note share one line (a workload's replicas)
    assert ("Not read: default/pref, default/pref2: spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution"
            "[].namespaceSelector: Tessera does not score these") in out
    # the cluster's own pending pods too (no -f)
    pending = b.pod("waits", limits={"nvidia.com/gpu": 1})
    pending["spec"]["affinity"] = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "podAffinityTerm": {"topologyKey": "zone", "labelSelector": {},
                                          "namespaceSelector": {"matchLabels": {"team": "a"}}}}]}}
    _, out, _ = await what_if_cli(monkeypatch, capsys, [b.node("n", gpus=8), pending])
    assert "Not read: default/waits: spec.affinity.podAffinity.preferred" in out


async def test_what_if_takes_f_more_than_once(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Finding 3: `-f a.yaml -f b.yaml` placed only b's pods; kubectl takes -f repeatedly."""
    (tmp_path / "a.yaml").write_text(_pod("a"))
    (tmp_path / "b.yaml").write_text(_pod("b"))
    _, out, _ = await what_if_cli(monkeypatch, capsys, [b.node("n", gpus=8)], "-f", str(tmp_path / "a.yaml"),
                               "-f", str(tmp_path / "b.yaml"), "-o", "json")
    doc = orjson.loads(out)
    assert [o["pod"] for o in doc["outcomes"]] == ["default/a", "default/b"]
    assert doc["from_file"] == f"{tmp_path / 'a.yaml'}, {tmp_path / 'b.yaml'}"
    # the same pod in both files: the second create would be refused
    (tmp_path / "c.yaml").write_text(_pod("a"))
    with pytest.raises(cli.CommandError, match="named more than once: Pod default/a"):
        await what_if_cli(monkeypatch, capsys, [b.node("n", gpus=8)], "-f", str(tmp_path / "a.yaml"),
                       "-f", str(tmp_path / "c.yaml"))


async def test_what_if_devices_show_slice_amounts_as_explain_does(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Finding 5: DEVICES read `(4294967296)` where explain reads 4Gi."""
    objs: list[dict[str, Any]] = [b.resource_class("v100-1g", match_labels={"model": "V100"},
                                                   sharing={"dimension": "memory", "unit": "1Gi"}),
                                  b.node("n", gpus=8), b.device("n", 0)]
    (tmp_path / "s.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: s}\nspec:\n  schedulerName: tessera\n"
        "  containers: [{name: c, image: x, resources: {limits: {class.tessera.dev/v100-1g: 4}}}]\n")
    _, out, _ = await what_if_cli(monkeypatch, capsys, objs, "-f", str(tmp_path / "s.yaml"))
    row = out.splitlines()[1]
    assert "(4Gi)" in row and "4294967296" not in row, out
