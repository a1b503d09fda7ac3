"""TesseraGpuPacking: GPUs packed while CPU and memory are spread (two strategies in one profile)."""

from __future__ import annotations

import collections

import pytest

from examples.generate import fragmentation, tfjob_demo
from scheduler.api.config import ConfigError, SchedulerConfig, parse_config
from scheduler.sim import builders as b
from tests.helpers import Run


def _config(**args: str) -> SchedulerConfig:
    return parse_config({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "tessera",
                      "plugins": {"score": {"enabled": [{"name": "TesseraGpuPacking", "weight": 2}]}},
                      "pluginConfig": [{"name": "TesseraGpuPacking", "args": args}] if args else []}],
    }, "test")  # NodeResourcesFit keeps upstream's default: LeastAllocated on cpu and memory


def test_the_seed_examples_pack_gpus_with_cpu_spread() -> None:
    for seed in range(5):
        run = Run(_config(), seed=seed)
        run.feed(*fragmentation())
        assert run.node_of("two-gpu") is not None
        assert sorted(collections.Counter(run.node_of(f"one-gpu-{i}") for i in range(6)).values()) == [2, 4]
        tfjob = Run(_config(), seed=seed)
        tfjob.feed(*tfjob_demo())
        assert len({tfjob.node_of(f"tf-smoke-gpu-worker-{i}") for i in range(4)}) == 1


def test_cpu_only_pods_are_still_spread() -> None:
    run = Run(_config(), explain=True)
    run.add(b.node("a", gpus=4), b.node("b", gpus=4), b.pod("gpu", requests={"cpu": "16"}, limits={"nvidia.com/gpu": 1}))
    run.add(b.pod("cpu", requests={"cpu": "4"}))
    scores = run.last("cpu").scores
    assert scores is not None and {s["TesseraGpuPacking"] for s in scores.values()} == {0}
    assert run.node_of("cpu") != run.node_of("gpu")  # LeastAllocated: the node without the GPU pod


def test_class_devices_count_like_plain_gpus() -> None:
    run = Run(_config(), explain=True)
    run.add(b.node("a", gpus=2), b.node("b", gpus=2), *(b.device(n, i) for n in ("a", "b") for i in range(2)),
            b.resource_class("v100", match_labels={"model": "V100"}))
    run.add(b.pod("first", limits={"class.tessera.dev/v100": 1}))
    run.add(b.pod("second", limits={"class.tessera.dev/v100": 1}))
    assert run.node_of("second") == run.node_of("first")
    scores = run.last("second").scores
    assert scores is not None
    assert scores[str(run.node_of("first"))]["TesseraGpuPacking"] == 100
    assert {s["TesseraGpuPacking"] for s in scores.values()} == {100, 50}


def test_resource_name_must_be_an_extended_resource() -> None:
    with pytest.raises(ConfigError, match=r"pluginConfig\[0\]\.args\.resourceName: Invalid value: \"gpu\""):
        _config(resourceName="gpu")
    assert _config(resourceName="amd.com/gpu")
