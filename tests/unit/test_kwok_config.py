"""What `tessera dev-cluster` hands kwok: only annotated nodes, Tessera's own Stages, nothing that
changes what the fake GPU nodes advertise."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.kube.controlplane import components
from scheduler.kube.controlplane.binaries import EVERY_TOOL, _from_dir
from scheduler.kube.controlplane.fakenodes import FakeGpuNodeSpec, _node_objects


def test_kwok_manages_only_annotated_nodes_with_our_stages(tmp_path: Path) -> None:
    argv = components.kwok_argv(Path("/bin/kwok"), tmp_path / "kc", tmp_path / "kwok.yaml", 40123)
    assert argv == ["/bin/kwok", f"--kubeconfig={tmp_path / 'kc'}", f"--config={tmp_path / 'kwok.yaml'}"]
    options, *stages = yaml.safe_load_all((tmp_path / "kwok.yaml").read_text())
    assert options["kind"] == "KwokConfiguration"
    assert options["options"]["manageNodesWithAnnotationSelector"] == "kwok.x-k8s.io/node=fake"
    assert options["options"]["manageAllNodes"] is False and options["options"]["serverAddress"] == "127.0.0.1:40123"
    assert options["options"]["nodeLeaseParallelism"] > 0  # not defaulted when read from a file
    assert [s["metadata"]["name"] for s in stages] == ["node-ready", "pod-running", "pod-readiness-gates", "pod-complete",
                                                       "pod-complete-invalid-delay", "pod-complete-job",
                                                       "pod-terminate", "pod-delete"]
    by_name = {s["metadata"]["name"]: s["spec"] for s in stages}
    # no default jitter: kwok replaces a delay by any jitter at or below it
    complete = by_name["pod-complete"]["delay"]
    assert "jitterDurationMilliseconds" not in complete
    assert 'annotations["pod-complete.stage.kwok.x-k8s.io/delay"]' in complete["durationFrom"]["jq"]["expression"]
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
    found = _from_dir(tmp_path, EVERY_TOOL)
    assert found is not None and getattr(found, tool) == tmp_path / tool
    (tmp_path / tool).unlink()
    assert _from_dir(tmp_path, EVERY_TOOL) is None  # a cache without it is rebuilt (CI builds it)
    partial = _from_dir(tmp_path, ())
    assert partial is not None and getattr(partial, tool) is None

# Go's time.ParseDuration on these (go/src/time/time_test.go parseDurationTests and a user's typos)
GO_DURATIONS = ["0", "-0", "+0", "5s", "30s", "-5s", "+5s", "5.0s", "5.s", ".5s", "1.004s", "10ns", "11us",
                "12\u00b5s", "12\u03bcs", "13ms", "15m", "16h", "3h30m", "10.5s4m", "-2m3.4s", "1h2m3s4ms5us6ns",
                "0.3333333333333333333h", "2.000s", "2026-12-05T10:00:00Z", "2026-12-05T10:00:00.5+01:00"]
NOT_GO_DURATIONS = ["", "3", "30", "1.5", "-", "s", ".", "-.", ".s", "+.s", "1d", "30 s", "1 minute", "30sec",
                    "2026-12-05 10:00:00"]


def _delay_patterns(stages: list[dict[str, Any]]) -> dict[str, str]:
    """The regular expression each pod-complete Stage's selector tests the delay annotation with."""
    found = {}
    for stage in stages:
        for expression in stage["spec"]["selector"]["matchExpressions"]:
            match = re.search(r'test\("([^"]*)"\)', expression["key"])
            if match and "pod-complete.stage.kwok.x-k8s.io/delay" in expression["key"]:
                found[stage["metadata"]["name"]] = match.group(1)
    return found


def test_the_delay_stages_tell_a_go_duration_from_anything_else(tmp_path: Path) -> None:
    """kwok reads the delay with Go's time.ParseDuration (or as an RFC 3339 time) and takes 1 s
    for anything else: pod-complete must take exactly those values and pod-complete-invalid-delay
    the rest, with one pattern between them."""
    components.kwok_argv(Path("/bin/kwok"), tmp_path / "kc", tmp_path / "kwok.yaml", 40123)
    _, *stages = yaml.safe_load_all((tmp_path / "kwok.yaml").read_text())
    patterns = _delay_patterns(stages)
    assert set(patterns) == {"pod-complete", "pod-complete-invalid-delay"}
    assert patterns["pod-complete"] == patterns["pod-complete-invalid-delay"]
    pattern = re.compile(patterns["pod-complete"])
    assert [v for v in GO_DURATIONS if not pattern.search(v)] == []
    assert [v for v in NOT_GO_DURATIONS if pattern.search(v)] == []


def _delay_programs(stages: list[dict[str, Any]]) -> dict[str, str]:
    """Every jq program a Stage reads a delay with, by Stage and field."""
    return {f"{stage['metadata']['name']}.{field}": source["jq"]["expression"]
            for stage in stages for field, source in stage["spec"].get("delay", {}).items() if field.endswith("From")}


def test_every_completion_delay_counts_from_the_start_pod_running_records(tmp_path: Path) -> None:
    """kwok reads a delay again, from now, whenever the pod changes: each completion Stage turns
    its delay into the instant start + delay with the same jq helpers (one copy per Stage, as kwok
    has no jq modules: they must not drift apart), and the start they read is the annotation that
    pod-running writes with Running, in the one status write, to the microsecond."""
    components.kwok_argv(Path("/bin/kwok"), tmp_path / "kc", tmp_path / "kwok.yaml", 40123)
    _, *stages = yaml.safe_load_all((tmp_path / "kwok.yaml").read_text())
    programs = _delay_programs(stages)
    assert set(programs) == {"pod-complete.durationFrom", "pod-complete.jitterDurationFrom",
                             "pod-complete-invalid-delay.durationFrom", "pod-complete-job.durationFrom"}
    helpers = {name: program[:program.index("\nstarted ")] for name, program in programs.items()}
    assert len(set(helpers.values())) == 1, "the Stages' jq helpers differ"
    started = 'annotations["pod-running.stage.kwok.x-k8s.io/started-at"], .status.startTime'
    assert started in helpers["pod-complete.durationFrom"]
    delay, jitter = programs["pod-complete.durationFrom"], programs["pod-complete.jitterDurationFrom"]
    assert jitter == delay.replace("kwok.x-k8s.io/delay", "kwok.x-k8s.io/jitter-delay")
    (running,) = [s["spec"]["next"] for s in stages if s["metadata"]["name"] == "pod-running"]
    (write,) = running["patches"]
    assert write["subresource"] == "status" and "root" not in write
    assert re.search(r"^metadata:\n  annotations:\n    pod-running.stage.kwok.x-k8s.io/started-at: "
                     r'\{\{ dateInZone "2006-01-02T15:04:05.000000Z07:00" \$now "UTC" \| Quote \}\}$',
                     write["template"], re.MULTILINE), write["template"]
