"""A class pod's FailedScheduling names the class it asked for, not the device count behind it.

Class devices share the node's `nvidia.com/gpu` count with plain pods (docs/api.md). A new user's
trial: a `class.tessera.dev/v100-32g: 4` pod, V100 nodes full of plain `nvidia.com/gpu` pods and
two T4 nodes, read `0/4 nodes are available: 2 Insufficient class.tessera.dev/v100-32g, 2
Insufficient nvidia.com/gpu` — a resource the pod never asked for. The reason keeps
kube-scheduler's `Insufficient <resource>` shape with the pod's own resource name; where the pod
asks for `nvidia.com/gpu` itself, that name stays. Placements are unchanged.
"""

from __future__ import annotations

from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, config



def _trial_cluster(run: Run) -> None:
    """Two 4-GPU V100 nodes and two 4-GPU T4 nodes, each GPU an ExtendedResource."""
    for node, model in (("v0", "V100"), ("v1", "V100"), ("t0", "T4"), ("t1", "T4")):
        run.add(b.node(node, gpus=4))
        run.add(*[b.device(node, i, model=model, memory="32Gi" if model == "V100" else "16Gi") for i in range(4)])
    run.add(b.resource_class("v100-32g", match_labels={"model": "V100"}))


def test_a_class_pod_short_of_the_node_count_is_told_its_class() -> None:
    run = Run(config(BINPACK))
    _trial_cluster(run)
    run.add(*[b.pod(f"plain-{node}", limits={"nvidia.com/gpu": 4},
                    spec_extra={"nodeSelector": {"kubernetes.io/hostname": node}}) for node in ("v0", "v1")])
    assert run.node_of("plain-v0") == "v0" and run.node_of("plain-v1") == "v1"
    run.add(b.pod("trainer", limits={"class.tessera.dev/v100-32g": 4}))
    assert run.node_of("trainer") is None
    assert run.last("trainer").message == (
        "0/4 nodes are available: 4 Insufficient class.tessera.dev/v100-32g. preemption: 0/4 nodes are available: "
        "2 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling.")


def test_a_pod_asking_for_the_count_itself_is_told_the_count() -> None:
    """The pod's own `nvidia.com/gpu` request with its class request: the count is its own term."""
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=2), b.device("n", 0), b.device("n", 1))
    run.add(b.resource_class("v100", match_labels={"model": "V100"}))
    run.add(b.pod("both", limits={"class.tessera.dev/v100": 1, "nvidia.com/gpu": 2}))
    assert run.node_of("both") is None
    assert run.last("both").message.startswith("0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")
