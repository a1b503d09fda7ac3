"""Binpack on NodeResourcesFit alone packs memory slices onto the partly used GPU — while the
pods' CPU keeps the used node under 1 % (config/binpack.yaml's comment: at 1 % the used node
averages its CPU in and the empty one wins; tests/replay/test_slice_join_fine_units.py).

The rule (docs/semantics.md): a pod whose ResourceClass devices belong to a device resource
(`nvidia.com/gpu`) *requests* that resource on every node where it gets devices, even when its
slice goes onto a GPU that is already busy and so adds no new busy device. Upstream skips an
extended resource only when the pod does not request it; a slice pod does, with an added amount
of 0 — so the node's GPU utilisation stays in its score instead of dropping out of it.
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
import yaml

from scheduler.cli import main
from scheduler.sim import builders as b

SLICE = "class.tessera.dev/slice"
BINPACK_FIT_ONLY = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "profiles": [{
        "schedulerName": "tessera",
        "plugins": {"score": {"disabled": [{"name": "*"}], "enabled": [{"name": "NodeResourcesFit", "weight": 1}]}},
        "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {
            "type": "RequestedToCapacityRatio",
            "resources": [{"name": "cpu", "weight": 1}, {"name": "nvidia.com/gpu", "weight": 1}],
            "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0},
                                                   {"utilization": 100, "score": 10}]}}}}],
    }],
}


def _simulate(tmp_path: Path, capsys: pytest.CaptureFixture[str], *pods: dict) -> list[dict]:  # type: ignore[type-arg]
    objects = [b.node("a", gpus=2), b.node("b", gpus=2),
               *(b.device(n, i, memory="32Gi") for n in ("a", "b") for i in range(2)),
               b.resource_class("slice", match_labels={"model": "V100"}, sharing={"dimension": "memory", "unit": "1Gi"}),
               *pods]
    events = tmp_path / "events.jsonl"
    events.write_bytes(b"".join(orjson.dumps(b.event("ADDED", o)) + b"\n" for o in objects))
    config = tmp_path / "binpack.yaml"
    config.write_text(yaml.safe_dump(BINPACK_FIT_ONLY))
    assert main(["simulate", str(events), "--config", str(config), "--explain"]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def _device(line: dict) -> str:  # type: ignore[type-arg]
    grants = json.loads(line["annotations"]["tessera.dev/devices"])["containers"]["main"][SLICE]
    return str(grants[0]["device"])


def test_a_second_slice_goes_to_the_partly_used_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, second = _simulate(tmp_path, capsys, b.pod("s1", limits={SLICE: 8}), b.pod("s2", limits={SLICE: 8}))
    assert second["node"] == first["node"]
    assert _device(second) == _device(first)
    used, empty = first["node"], ({"a", "b"} - {first["node"]}).pop()
    scores = second["scores"]
    assert scores[used]["NodeResourcesFit"] >= scores[empty]["NodeResourcesFit"]


def test_a_slice_on_a_used_gpu_scores_the_gpu_not_only_the_cpu(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Without the rule the partly used node scored on CPU alone (0: 0.6 % used) and the empty one
    on the GPU it opens (1 of 2 busy: 50)."""
    lines = _simulate(tmp_path, capsys, b.pod("s1", limits={SLICE: 8}),
                      b.pod("s2", limits={SLICE: 8}, requests={"cpu": "100m"}))
    used = lines[0]["node"]
    empty = ({"a", "b"} - {used}).pop()
    scores = lines[1]["scores"]
    assert scores[used]["NodeResourcesFit"] == scores[empty]["NodeResourcesFit"] == 50
