"""What `tessera dev-cluster` hands kwok: only annotated nodes, Tessera's own Stages, nothing that
changes what the fake GPU nodes advertise."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from scheduler.kube.controlplane import components
from scheduler.kube.controlplane.binaries import _from_dir
from scheduler.kube.controlplane.fakenodes import FakeGpuNodeSpec, _node_objects


def test_kwok_manages_only_annotated_nodes_with_our_stages(tmp_path: Path) -> None:
    argv = components.kwok_argv(Path("/bin/kwok"), tmp_path / "kc", tmp_path / "kwok.yaml", 40123)
    assert argv == ["/bin/kwok", f"--kubeconfig={tmp_path / 'kc'}", f"--config={tmp_path / 'kwok.yaml'}"]
    options, *stages = yaml.safe_load_all((tmp_path / "kwok.yaml").read_text())
    assert options["kind"] == "KwokConfiguration"
    assert options["options"]["manageNodesWithAnnotationSelector"] == "kwok.x-k8s.io/node=fake"
    assert options["options"]["manageAllNodes"] is False and options["options"]["serverAddress"] == "127.0.0.1:40123"
    assert options["options"]["nodeLeaseParallelism"] > 0  # not defaulted when read from a file
    assert [s["metadata"]["name"] for s in stages] == ["node-ready", "pod-running", "pod-complete",
                                                       "pod-complete-job", "pod-terminate", "pod-delete"]
    by_name = {s["metadata"]["name"]: s["spec"] for s in stages}
    # no default jitter: kwok replaces a delay by any jitter at or below it
    complete = by_name["pod-complete"]["delay"]
    assert "jitterDurationMilliseconds" not in complete
    assert complete["durationFrom"]["expressionFrom"] == '.metadata.annotations["pod-complete.stage.kwok.x-k8s.io/delay"]'
    assert by_name["pod-delete"]["next"] == {"delete": True}
    # the node stage only ever writes conditions: never capacity, allocatable or taints
    assert "allocatable" not in by_name["node-ready"]["next"]["statusTemplate"]


def test_fake_nodes_carry_kwoks_annotation_and_no_taint() -> None:
    node, status = _node_objects("gpu-0", FakeGpuNodeSpec(gpus_per_node=4, gpu_model="A100"))
    assert node["metadata"]["annotations"] == {"kwok.x-k8s.io/node": "fake"}
    assert "taints" not in node.get("spec", {})
    assert status["status"]["allocatable"]["nvidia.com/gpu"] == "4"


@pytest.mark.parametrize("tool", ["kwok", "helm"])
def test_optional_tools_are_found_next_to_the_control_plane_binaries(tmp_path: Path, tool: str) -> None:
    for name in ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok", "helm"):
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    found = _from_dir(tmp_path, need_all=True)
    assert found is not None and getattr(found, tool) == tmp_path / tool
    (tmp_path / tool).unlink()
    assert _from_dir(tmp_path, need_all=True) is None  # a cache without it is rebuilt (CI builds it)
    partial = _from_dir(tmp_path, need_all=False)
    assert partial is not None and getattr(partial, tool) is None