"""A gang's members are scored one by one: by default a gang may span nodes and GPU models.

A new user's trial (built-in profile, two 8-GPU V100 nodes and two 8-GPU T4 nodes): a 6-GPU pod on
a V100 node left 2 GPUs free there, and a PodGroup of four 2-GPU workers then put one worker on that
V100 node and the rest on a T4 node. That is the documented default (docs/semantics.md, gangs);
these tests pin it and the two remedies the docs give: `tessera.dev/topology-required:
kubernetes.io/hostname` on the PodGroup keeps the gang on one node, a ResourceClass keeps it on one
GPU model.
"""

from __future__ import annotations

from scheduler.sim import builders as b
from tests.helpers import Run, config

WORKERS = [f"w-{i}" for i in range(4)]


def _trial(run: Run, worker_limits: dict[str, int], pg_annotations: dict[str, str] | None = None) -> list[str | None]:
    for node, model in (("v100-0", "V100"), ("v100-1", "V100"), ("t4-0", "T4"), ("t4-1", "T4")):
        run.add(b.node(node, gpus=8, labels={"nvidia.com/gpu.product": model}))
        run.add(*[b.device(node, i, model=model, memory="32Gi" if model == "V100" else "16Gi") for i in range(8)])
    run.add(b.resource_class("t4", match_labels={"model": "T4"}))
    run.add(b.pod("big", limits={"nvidia.com/gpu": 6}, spec_extra={"nodeSelector": {"kubernetes.io/hostname": "v100-0"}}))
    assert run.node_of("big") == "v100-0"
    run.add(b.podgroup("train", 4, annotations=pg_annotations))
    run.add(*[b.pod(name, labels={"scheduling.x-k8s.io/pod-group": "train"}, limits=worker_limits) for name in WORKERS])
    return [run.node_of(name) for name in WORKERS]


def test_by_default_a_gang_can_span_nodes_and_models() -> None:
    nodes = _trial(Run(config(None)), {"nvidia.com/gpu": 2})
    assert None not in nodes
    assert len(set(nodes)) > 1 and "v100-0" in nodes, nodes  # the trial's split: the V100's 2 free GPUs taken


def test_topology_required_hostname_keeps_the_gang_on_one_node() -> None:
    nodes = _trial(Run(config(None)), {"nvidia.com/gpu": 2},
                   {"tessera.dev/topology-required": "kubernetes.io/hostname"})
    assert None not in nodes and len(set(nodes)) == 1, nodes


def test_a_resource_class_keeps_the_gang_on_one_model() -> None:
    nodes = _trial(Run(config(None)), {"class.tessera.dev/t4": 2})
    assert None not in nodes and {str(node)[:2] for node in nodes} == {"t4"}, nodes
