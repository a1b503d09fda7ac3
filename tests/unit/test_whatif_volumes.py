"""`what-if -f` makes the claims the controllers would make (a user's trial, files in /tmp/tv/y):
a StatefulSet's volumeClaimTemplates were ignored ("2 would be placed" where the cluster said
`didn't find available persistent volumes to bind`, and a pod put on a node without a volume); a
pod's generic ephemeral volume waited for the ephemeral volume controller, whose claim exists a
second later on the cluster; a PersistentVolume of the file without a status (one about to be
created, which the PV controller makes Available) was never matched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from scheduler.kubectl.probe_pods import ProbeError, read_files, read_probes
from scheduler.sim import builders as b
from tests.helpers import what_if_cli

LOCAL_CLASS = """apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local-nvme}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
"""
PROVISIONED_CLASS = """apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local-nvme}
provisioner: csi.example.com
volumeBindingMode: WaitForFirstConsumer
"""
STS = """apiVersion: apps/v1
kind: StatefulSet
metadata: {name: infer2}
spec:
  replicas: 2
  serviceName: infer
  selector: {matchLabels: {app: infer2}}
  template:
    metadata: {labels: {app: infer2}}
    spec:
      schedulerName: tessera
      containers:
      - name: s
        image: triton
        resources: {limits: {nvidia.com/gpu: 1}}
        volumeMounts: [{name: cache, mountPath: /cache}]
      volumes: [{name: cache, emptyDir: {}}, {name: cfg, configMap: {name: c}}]
  volumeClaimTemplates:
  - metadata: {name: cache, labels: {tier: fast}}
    spec:
      storageClassName: local-nvme
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 100Gi}}
"""
JOB = """apiVersion: batch/v1
kind: Job
metadata: {name: train4}
spec:
  completions: 2
  parallelism: 2
  template:
    spec:
      schedulerName: tessera
      restartPolicy: Never
      containers:
      - name: t
        image: pytorch
        resources: {limits: {nvidia.com/gpu: 2}}
      volumes:
      - name: scratch
        ephemeral:
          volumeClaimTemplate:
            metadata: {labels: {use: scratch}}
            spec:
              storageClassName: local-nvme
              accessModes: [ReadWriteOnce]
              resources: {requests: {storage: 50Gi}}
"""


def _volume(name: str, node: str, status: str | None = "Available") -> str:
    """A local PersistentVolume of class local-nvme on `node`; `status` its phase (None: no status)."""
    phase = f"status: {{phase: {status}}}\n" if status else ""
    return (f"apiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: {name}}}\nspec:\n"
            "  capacity: {storage: 200Gi}\n  accessModes: [ReadWriteOnce]\n  storageClassName: local-nvme\n"
            "  local: {path: /mnt/nvme}\n  nodeAffinity:\n    required:\n      nodeSelectorTerms:\n"
            f"      - matchExpressions: [{{key: kubernetes.io/hostname, operator: In, values: [{node}]}}]\n{phase}")


def _nodes() -> list[dict[str, Any]]:
    return [b.node(f"n{i}", gpus=8, labels={"kubernetes.io/hostname": f"n{i}"}) for i in range(3)]


async def _outcomes(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path,
                    cluster: list[dict[str, Any]], *documents: str) -> dict[str, tuple[str, str]]:
    (tmp_path / "f.yaml").write_text("---\n".join(documents))
    status, out, err = await what_if_cli(monkeypatch, capsys, cluster, "-f", str(tmp_path / "f.yaml"), "-o", "json")
    assert status == 0, err
    return {o["pod"]: (o["node"], o["message"]) for o in orjson.loads(out)["outcomes"]}


def test_a_statefulsets_claims_are_made_from_its_templates_as_its_controller_makes_them() -> None:
    """getPersistentVolumeClaims/updateStorage: claim `<template>-<sts>-<ordinal>` in the set's
    namespace, the template's labels with the selector's, and the pod's volume of the template's
    name (replacing the template's own volume of that name) naming it."""
    objects = read_probes(STS, "f", "team", None, 0)
    claims = {obj["metadata"]["name"]: obj for obj in objects if obj["kind"] == "PersistentVolumeClaim"}
    assert sorted(claims) == ["cache-infer2-0", "cache-infer2-1"]
    claim = claims["cache-infer2-1"]
    assert claim["metadata"]["namespace"] == "team"
    assert claim["metadata"]["labels"] == {"tier": "fast", "app": "infer2"}
    assert claim["spec"] == {"storageClassName": "local-nvme", "accessModes": ["ReadWriteOnce"],
                             "resources": {"requests": {"storage": "100Gi"}}}
    pod = next(obj for obj in objects if obj["kind"] == "Pod" and obj["metadata"]["name"] == "infer2-1")
    assert pod["spec"]["volumes"] == [{"name": "cache", "persistentVolumeClaim": {"claimName": "cache-infer2-1"}},
                                      {"name": "cfg", "configMap": {"name": "c"}}]
    # what the apiserver would refuse is an error, not a claim guessed at
    with pytest.raises(ProbeError, match=r"spec.volumeClaimTemplates\[0\].metadata.name: Required value"):
        read_probes(STS.replace("metadata: {name: cache, labels: {tier: fast}}", "metadata: {}"), "f", "team", None, 0)
    with pytest.raises(ProbeError, match="spec.volumeClaimTemplates: expected a list, got dict"):
        read_probes(STS.replace("  volumeClaimTemplates:\n  -", "  volumeClaimTemplates:\n   "), "f", "team", None, 0)


async def test_a_statefulsets_pods_wait_for_volumes_for_their_claims(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The trial's sts2.yaml: no free local volume, both pods stay pending as on the cluster; with
    one Available volume in the file, one pod goes to its node, the other waits."""
    found = await _outcomes(monkeypatch, capsys, tmp_path, _nodes(), LOCAL_CLASS, STS)
    assert [node for node, _ in found.values()] == ["", ""]
    assert all("didn't find available persistent volumes to bind" in message for _, message in found.values()), found
    found = await _outcomes(monkeypatch, capsys, tmp_path, _nodes(), LOCAL_CLASS, STS, _volume("v1", "n1"))
    assert sorted(node for node, _ in found.values()) == ["", "n1"]


async def test_a_statefulsets_claim_that_exists_is_used_as_is(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The controller makes no claim whose name is in use (a scaled-down set's kept claim): the
    cluster's is the pod's, not a name clash; so is the file's own claim of that name."""
    bound = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
             "metadata": {"name": "cache-infer2-0", "namespace": "default",
                          "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
             "spec": {"storageClassName": "local-nvme", "volumeName": "kept", "accessModes": ["ReadWriteOnce"],
                      "resources": {"requests": {"storage": "100Gi"}}}, "status": {"phase": "Bound"}}
    volume: dict[str, Any] = {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "kept"},
        "spec": {"capacity": {"storage": "200Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "local-nvme",
                 "claimRef": {"namespace": "default", "name": "cache-infer2-0"},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n2"]}]}]}}},
        "status": {"phase": "Bound"}}
    found = await _outcomes(monkeypatch, capsys, tmp_path, [*_nodes(), bound, volume], LOCAL_CLASS, STS)
    assert found["default/infer2-0"][0] == "n2" and found["default/infer2-1"][0] == "", found
    claim = ("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: cache-infer2-1}\n"
             "spec: {storageClassName: local-nvme, volumeName: v0, accessModes: [ReadWriteOnce], "
             "resources: {requests: {storage: 1Gi}}}\n")
    found = await _outcomes(monkeypatch, capsys, tmp_path, _nodes(), LOCAL_CLASS, STS, claim, _volume("v0", "n0"))
    # the file's claim names its volume (pre-bound: an unbound claim of immediate binding), the made one has none
    assert found["default/infer2-1"] == ("", "0/3 nodes are available: pod has unbound immediate "
                                             "PersistentVolumeClaims. preemption: 0/3 nodes are available: 3 "
                                             "Preemption is not helpful for scheduling."), found


def test_an_ephemeral_volumes_claim_is_made_controlled_by_its_pod() -> None:
    """The ephemeral volume controller's claim: `<pod>-<volume>`, the template's labels,
    annotations and spec, controlled by the pod (its uid)."""
    objects = read_probes(JOB, "f", "default", None, 0)
    pod = next(obj for obj in objects if obj["kind"] == "Pod" and obj["metadata"]["name"] == "train4-1")
    claim = next(obj for obj in objects if obj["kind"] == "PersistentVolumeClaim"
                 and obj["metadata"]["name"] == "train4-1-scratch")
    assert claim["metadata"]["namespace"] == "default" and claim["metadata"]["labels"] == {"use": "scratch"}
    assert claim["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "train4-1",
                                                     "uid": pod["metadata"]["uid"], "controller": True,
                                                     "blockOwnerDeletion": True}]
    assert claim["spec"]["resources"] == {"requests": {"storage": "50Gi"}}


async def test_an_ephemeral_volume_does_not_wait_for_the_controller(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The trial's job4.yaml: its pods waited "for ephemeral volume controller to create the
    persistentvolumeclaim"; their claims are provisioned on the node. A claim of that name that
    exists already is left as it is: not the pod's, as the controller leaves it."""
    found = await _outcomes(monkeypatch, capsys, tmp_path, _nodes(), PROVISIONED_CLASS, JOB)
    assert all(node for node, _ in found.values()), found
    other = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
             "metadata": {"name": "train4-0-scratch", "namespace": "default"},
             "spec": {"storageClassName": "local-nvme", "accessModes": ["ReadWriteOnce"],
                      "resources": {"requests": {"storage": "1Gi"}}}}
    found = await _outcomes(monkeypatch, capsys, tmp_path, [*_nodes(), other], PROVISIONED_CLASS, JOB)
    assert "PVC default/train4-0-scratch was not created for pod default/train4-0 (pod is not owner)" in \
        found["default/train4-0"][1], found
    assert found["default/train4-1"][0], found


async def test_a_file_volume_without_a_status_is_available(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The PV controller makes a new volume Available: the file's volume without status.phase is."""
    found = await _outcomes(monkeypatch, capsys, tmp_path, _nodes(), LOCAL_CLASS, STS,
                            _volume("v0", "n0", None), _volume("v1", "n1", None))
    assert sorted(node for node, _ in found.values()) == ["n0", "n1"], found


@pytest.mark.parametrize(("text", "said"), [
    (JOB.replace("      - name: scratch\n        ephemeral", "      - ephemeral"),
     r"object 1: Pod default/train4-0: spec.volumes\[0\].name: Required value: the apiserver would refuse it"),
    (JOB.replace("metadata: {labels: {use: scratch}}", "metadata: {labels: [scratch]}"),
     r"Pod default/train4-0: spec.volumes\[0\].ephemeral.volumeClaimTemplate.metadata.labels: expected an object, "
     "got list: the apiserver"),
    (JOB.replace("            spec:\n              storageClassName: local-nvme\n"
                 "              accessModes: [ReadWriteOnce]\n              resources: {requests: {storage: 50Gi}}",
                 "            spec: [local-nvme]"),
     r"Pod default/train4-0: spec.volumes\[0\].ephemeral.volumeClaimTemplate.spec: expected an object, got list"),
    (STS.replace("labels: {tier: fast}", "labels: [1]"),
     r"StatefulSet default/infer2: spec.volumeClaimTemplates\[0\].metadata.labels: expected an object, got list"),
    (STS.replace("labels: {tier: fast}", "annotations: {a: 1}"),
     r"StatefulSet default/infer2: spec.volumeClaimTemplates\[0\].metadata.annotations: keys and values must be "
     "strings"),
    (STS.replace("    spec:\n      storageClassName: local-nvme\n      accessModes: [ReadWriteOnce]\n"
                 "      resources: {requests: {storage: 100Gi}}", "    spec: local-nvme"),
     r"StatefulSet default/infer2: spec.volumeClaimTemplates\[0\].spec: expected an object, got str"),
], ids=["ephemeral-volume-without-name", "ephemeral-labels-a-list", "ephemeral-spec-a-list", "template-labels-a-list",
        "template-annotation-a-number", "template-spec-a-string"])
def test_a_claim_template_the_apiserver_refuses_is_an_error_not_a_crash(text: str, said: str) -> None:
    """A review's probes: an ephemeral volume without a name crashed what-if -f (KeyError), a
    volumeClaimTemplate's labels that are a list too (TypeError), and a claim spec that is no
    object was made into the claim as it was. The apiserver refuses each (ValidateVolumes'
    "Required value"; decoding an ObjectMeta or a PersistentVolumeClaimSpec): so does what-if."""
    with pytest.raises(ProbeError, match=said):
        read_probes(text, "f", "default", None, 0)


def test_a_statefulsets_start_ordinal_names_its_pods_and_claims() -> None:
    """StatefulSetStartOrdinal (GA in 1.31): spec.ordinals.start numbers the pods from it,
    `<set>-<start+i>`, and their claims `<template>-<set>-<start+i>` (getOrdinal): named from 0,
    a set's existing claims were missed and new ones made beside them. apps/v1 validation refuses
    a negative start."""
    text = STS.replace("  replicas: 2\n", "  replicas: 2\n  ordinals: {start: 5}\n")
    made: list[tuple[str, str]] = []
    objects = read_files([("f", text)], "default", None, 0, made=made)
    pods = {obj["metadata"]["name"]: obj for obj in objects if obj["kind"] == "Pod"}
    assert sorted(pods) == ["infer2-5", "infer2-6"]
    assert pods["infer2-6"]["metadata"]["labels"]["apps.kubernetes.io/pod-index"] == "6"
    assert pods["infer2-6"]["spec"]["volumes"][0] == {"name": "cache",
                                                      "persistentVolumeClaim": {"claimName": "cache-infer2-6"}}
    assert made == [("default", "cache-infer2-5"), ("default", "cache-infer2-6")]
    with pytest.raises(ProbeError, match=r"StatefulSet default/infer2: spec.ordinals.start: Invalid value: -1: must "
                                         "be greater than or equal to 0: the apiserver would refuse it"):
        read_probes(text.replace("start: 5", "start: -1"), "f", "default", None, 0)
    with pytest.raises(ProbeError, match="spec.ordinals: expected an object, got list"):
        read_probes(text.replace("{start: 5}", "[5]"), "f", "default", None, 0)
