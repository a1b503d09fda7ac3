"""The seed articles' scenarios, replayed through the core exactly as `tessera simulate` does."""

from __future__ import annotations

import collections

from examples.generate import fragmentation, tfjob_demo
from tests.helpers import BINPACK, SPREAD, Run, config


def _placements(run: Run, names: list[str]) -> dict[str, str | None]:
    return {n: run.node_of(n) for n in names}


WORKERS = [f"tf-smoke-gpu-worker-{i}" for i in range(4)]


def test_tfjob_binpack_puts_all_four_workers_on_one_node() -> None:
    for seed in range(5):
        run = Run(config(BINPACK), seed=seed)
        run.feed(*tfjob_demo())
        nodes = _placements(run, WORKERS + ["tf-smoke-gpu-ps-0"])
        assert None not in nodes.values()
        assert len({nodes[w] for w in WORKERS}) == 1, nodes
        # the PS packs onto the same (fuller) node, as in the seed's output
        assert nodes["tf-smoke-gpu-ps-0"] == nodes[WORKERS[0]]


def test_tfjob_least_allocated_spreads_workers() -> None:
    run = Run(config(SPREAD))
    run.feed(*tfjob_demo())
    counts = collections.Counter(run.node_of(w) for w in WORKERS)
    assert sorted(counts.values()) == [2, 2], counts


def test_tfjob_gang_waits_for_all_five_members() -> None:
    run = Run(config(BINPACK))
    events = tfjob_demo()
    run.feed(*events[:-1])  # the last worker has not been created yet
    assert all(run.state.node_of(p.uid) is None for p in run.state.pods.values())
    waiting = run.last("tf-smoke-gpu-worker-2")
    assert waiting.node is None
    assert waiting.message == ("0/2 nodes are available: pre-filter pod tf-smoke-gpu-worker-2 cannot find enough "
                               "sibling pods, current pods number: 4, minMember of group: 5. preemption: 0/2 nodes "
                               "are available: 2 Preemption is not helpful for scheduling., PodGroup "
                               "default/tf-smoke-gpu gets rejected due to Pod tf-smoke-gpu-worker-2 is unschedulable "
                               "even after PostFilter")
    run.feed(events[-1])
    assert all(run.node_of(n) is not None for n in WORKERS + ["tf-smoke-gpu-ps-0"])


def test_fragmentation_binpack_places_two_gpu_pod_and_spread_refuses() -> None:
    packed = Run(config(BINPACK))
    packed.feed(*fragmentation())
    assert packed.node_of("two-gpu") is not None

    spread = Run(config(SPREAD))
    spread.feed(*fragmentation())
    assert spread.node_of("two-gpu") is None
    assert spread.last("two-gpu").message == ("0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
                                                " preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.")
    per_node = collections.Counter(spread.node_of(f"one-gpu-{i}") for i in range(6))
    assert sorted(per_node.values()) == [3, 3]


def test_the_built_in_default_packs_the_tfjob_workers_on_one_node() -> None:
    """What `tessera simulate examples/tfjob-demo.jsonl` shows without --config (issue: the old
    default split the workers 2/2 and brought back the seed's fragmentation)."""
    for seed in range(5):
        run = Run(config(None), seed=seed)
        run.feed(*tfjob_demo())
        nodes = _placements(run, WORKERS + ["tf-smoke-gpu-ps-0"])
        assert None not in nodes.values()
        assert len({nodes[w] for w in WORKERS}) == 1, nodes


def test_the_built_in_default_places_the_two_gpu_pod_after_six_one_gpu_pods() -> None:
    for seed in range(5):
        run = Run(config(None), seed=seed)
        run.feed(*fragmentation())
        assert run.node_of("two-gpu") is not None, run.last("two-gpu").message
        per_node = collections.Counter(run.node_of(f"one-gpu-{i}") for i in range(6))
        assert sorted(per_node.values()) == [2, 4]
