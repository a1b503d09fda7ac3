"""Regenerate the shipped example event streams: `python -m examples.generate`.

Each example is a recorded-style watch stream (JSONL) built from `scheduler.sim.builders`, so the
files stay byte-identical across runs and match what `tessera record` would capture.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import orjson

from scheduler.sim import builders as b

HERE = Path(__file__).parent


def tfjob_demo() -> list[b.Obj]:
    """Seed 1: two 4-GPU nodes, a TFJob with 1 CPU parameter server and 4 one-GPU workers, gang of 5."""
    events = [b.event("ADDED", b.node(f"gpu-node-{i}", cpu="32", memory="128Gi", gpus=4)) for i in (1, 2)]
    labels = b.gang_labels("tf-smoke-gpu", 5)
    events.append(b.event("ADDED", b.pod("tf-smoke-gpu-ps-0", labels=labels,
                                         containers=[b.container("tensorflow", limits={"cpu": "1"})])))
    for i in range(4):
        events.append(b.event("ADDED", b.pod(f"tf-smoke-gpu-worker-{i}", labels=labels,
                                             containers=[b.container("tensorflow", limits={"nvidia.com/gpu": 1})])))
    return events


def fragmentation() -> list[b.Obj]:
    """Seed 1's fragmentation example: six 1-GPU pods, then a 2-GPU pod, on 2 x 4 GPUs."""
    events = [b.event("ADDED", b.node(f"gpu-node-{i}", gpus=4)) for i in (1, 2)]
    for i in range(6):
        events.append(b.event("ADDED", b.pod(f"one-gpu-{i}", limits={"nvidia.com/gpu": 1})))
    events.append(b.event("ADDED", b.pod("two-gpu", limits={"nvidia.com/gpu": 2})))
    return events


def device_classes() -> list[b.Obj]:
    """Seed 2: a node with a K80 and a P100 plus a 16Gi and a 32Gi V100 node; classes by model and memory, a shared class."""
    events = [b.event("ADDED", b.node("node-a", gpus=2)), b.event("ADDED", b.node("node-b", gpus=2))]
    events.append(b.event("ADDED", b.device("node-a", 0, model="NVIDIA-Tesla-K80", memory="12Gi")))
    events.append(b.event("ADDED", b.device("node-a", 1, model="NVIDIA-Tesla-P100", memory="16Gi")))
    events.append(b.event("ADDED", b.device("node-b", 0, model="Tesla-V100-SXM2-16GB", memory="16Gi")))
    events.append(b.event("ADDED", b.device("node-b", 1, model="Tesla-V100-SXM2-32GB", memory="32Gi")))
    events.append(b.event("ADDED", b.resource_class("k80", match_labels={"model": "NVIDIA-Tesla-K80"})))
    events.append(b.event("ADDED", b.resource_class(
        "high-mem", expressions=[{"key": "memory", "operator": "Gt", "values": ["16Gi"]}])))
    events.append(b.event("ADDED", b.resource_class(
        "shared-16g", match_labels={"model": "NVIDIA-Tesla-P100"}, sharing={"dimension": "memory", "unit": "1Gi"})))
    events.append(b.event("ADDED", b.pod("wants-k80", limits={"class.tessera.dev/k80": 1})))
    events.append(b.event("ADDED", b.pod("wants-32g", limits={"class.tessera.dev/high-mem": 1})))
    events.append(b.event("ADDED", b.pod("slice-a", limits={"class.tessera.dev/shared-16g": 8})))
    events.append(b.event("ADDED", b.pod("slice-b", limits={"class.tessera.dev/shared-16g": 8})))
    return events


def preemption() -> list[b.Obj]:
    """Two 8-GPU nodes full of low-priority batch work (a 4 x 2-GPU training gang of minimum 4 and
    eight 1-GPU jobs), then a high-priority 2 x 4-GPU inference gang: which pods does it evict?"""
    events = [b.event("ADDED", b.node(f"gpu-node-{i}", gpus=8)) for i in (1, 2)]
    labels = b.gang_labels("train", 4)
    for i in range(4):
        events.append(b.event("ADDED", b.pod(f"train-{i}", labels=labels, priority=100,
                                             limits={"nvidia.com/gpu": 2})))
    for i in range(8):
        events.append(b.event("ADDED", b.pod(f"batch-{i}", priority=100 + i % 2, limits={"nvidia.com/gpu": 1})))
    serve = b.gang_labels("serve", 2)
    for i in range(2):
        events.append(b.event("ADDED", b.pod(f"serve-{i}", labels=serve, priority=1000,
                                             limits={"nvidia.com/gpu": 4})))
    return events


EXAMPLES = {"tfjob-demo.jsonl": tfjob_demo, "fragmentation.jsonl": fragmentation, "device-classes.jsonl": device_classes,
            "preemption.jsonl": preemption}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.generate", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="directory to write into (default: examples/)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 naming each file that differs from what would be written")
    args = parser.parse_args(argv)
    stale = []
    for name, build in EXAMPLES.items():
        content = b"".join(orjson.dumps(e) + b"\n" for e in build())
        path = args.out / name
        if not args.check:
            path.write_bytes(content)
        elif not path.is_file() or path.read_bytes() != content:
            stale.append(name)
    for name in stale:
        print(f"{args.out / name}: differs from what `python -m examples.generate` builds", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
