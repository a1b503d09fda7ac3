"""A nominated preemptor's hold never makes a GPU look "already counted" to another pod.

The adversarial trial's V1: a node of 4 GPUs full of two plain-count pods (`nvidia.com/gpu: 2`
each, no devices annotation); a higher-priority pod asking for a memory slice of a shared class
preempts one of them and holds a slice of one device while its victim still runs — in the books
with holds the node is then 5 of 4. A lower-priority pod asking for a slice of the same class then
must not share that device: the device is in use only by the hold, and the real holders (bound or
assumed pods) still have all 4 GPUs. Upstream runs a pod's filters with the nominated pods of
equal or higher priority added and without them (RunFilterPluginsWithNominatedPods); the pod must
pass both.
"""

from __future__ import annotations

from typing import Any

from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, assert_real_gpu_counts_within, config, real_gpus_in_use

GPU = "nvidia.com/gpu"
SHARED = "class.tessera.dev/t4-shared"
NODE = "adv-node-0"


def _cluster() -> Run:
    run = Run(config(BINPACK))
    run.add(b.node(NODE, gpus=4))
    run.add(*(b.device(NODE, i, model="T4", memory="16Gi") for i in range(4)))
    run.add(b.resource_class("t4-shared", match_labels={"model": "T4"},
                             sharing={"dimension": "memory", "unit": "1Gi"}))
    for n in range(2):
        run.add(b.pod(f"v-r2-{n}", limits={GPU: 2}, priority=10, node_name=NODE, phase="Running"))
    run.replay._evict = lambda victims, preemptor: None  # type: ignore[method-assign]  # victims terminate slowly: gone only when fed
    assert_real_gpu_counts_within(run)
    return run


def _gone(run: Run, name: str) -> None:
    run.feed(b.event("DELETED", run.replay.pods[run.state.pod_by_key(f"default/{name}").uid]))


def _pod(name: str, priority: int) -> dict[str, Any]:
    return b.pod(name, limits={SHARED: 4}, priority=priority)


def test_a_lower_priority_slice_pod_does_not_share_a_held_device_while_the_victims_run() -> None:
    run = _cluster()
    run.add(_pod("hi-r2", 100))
    preemptor = next(a for a in run.attempts if a.pod.key == "default/hi-r2")
    assert preemptor.nominated_node == NODE and len(preemptor.preempted) == 1
    victim = preemptor.preempted[0].meta.name
    assert run.node_of("hi-r2") is None  # its victim still runs
    assert_real_gpu_counts_within(run)

    run.add(_pod("lo-r2-0", 10))
    assert_real_gpu_counts_within(run)
    assert run.node_of("lo-r2-0") is None
    # the GPU count is what is short, but the pod asked for its class: the reason names the class
    assert run.last("lo-r2-0").message.startswith(f"0/1 nodes are available: 1 Insufficient {SHARED}")

    run.scheduler.queue.flush_unschedulable(1e9)
    list(run.replay.drain())
    assert run.node_of("lo-r2-0") is None and run.node_of("hi-r2") is None
    assert_real_gpu_counts_within(run)

    _gone(run, victim)  # the victim's 2 GPUs are free: the preemptor first, then the slice beside it
    run.scheduler.queue.flush_unschedulable(1e9)
    list(run.replay.drain())
    assert run.node_of("hi-r2") == NODE
    assert run.node_of("lo-r2-0") == NODE
    hi = run.state.placements[run.state.pod_by_key("default/hi-r2").uid]
    lo = run.state.placements[run.state.pod_by_key("default/lo-r2-0").uid]
    assert set(hi.devices) == set(lo.devices)  # packed onto one device: the other one stays free
    assert_real_gpu_counts_within(run)
    assert real_gpus_in_use(run, NODE) == 3


def test_an_equal_priority_plain_count_pod_does_not_take_the_held_room() -> None:
    """The hold still keeps the room from pods of lower priority asking for plain counts."""
    run = _cluster()
    run.add(_pod("hi-r2", 100))
    victim = next(a for a in run.attempts if a.pod.key == "default/hi-r2").preempted[0].meta.name
    _gone(run, victim)
    run.add(b.pod("lo-count", limits={GPU: 2}, priority=10))
    run.scheduler.queue.flush_unschedulable(1e9)
    list(run.replay.drain())
    assert run.node_of("hi-r2") == NODE
    assert run.node_of("lo-count") is None
    assert_real_gpu_counts_within(run)
