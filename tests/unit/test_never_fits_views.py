"""A gang the cluster as it is can never hold says so in every view, not only in `kubectl tessera
explain` and its PodGroup's Event (a new user's trial: five 8-GPU members on 32 GPUs); the
members' FailedScheduling messages stay upstream's words."""

from __future__ import annotations

from typing import Any

from scheduler.core.scheduler import Scheduler
from scheduler.kubectl import whatif
from scheduler.sim import builders as b
from scheduler.sim.snapshot import load
from scheduler.view.cluster import WaitReason, build_view
from tests.helpers import BINPACK, config

NEVER = ("Its gang can never fit as the cluster is: its 5 members ask for 40 nvidia.com/gpu together, "
         "and the schedulable nodes have 32 in all.")


def _cluster(members: int = 5) -> list[dict[str, Any]]:
    """Four 8-GPU nodes and a gang of `members` 8-GPU pods (minMember `members`)."""
    return [*(b.node(f"n{i}", gpus=8) for i in range(4)),
            *(b.pod(f"w-{i}", limits={"nvidia.com/gpu": 8}, labels=b.gang_labels("w", members))
              for i in range(members))]


def test_what_if_says_a_gang_can_never_fit_the_cluster() -> None:
    result = whatif.what_if(_cluster(), config(BINPACK), 0.0)
    assert [o.node for o in result.outcomes] == [""] * 5
    for outcome in result.outcomes:
        assert outcome.message.endswith(NEVER), outcome.message
        assert outcome.message.count("can never fit") == 1
    assert NEVER in whatif.render(result)
    fits = whatif.what_if(_cluster(4), config(BINPACK), 0.0)  # 32 GPUs on 32: placed, no such words
    assert fits.placed == 4 and "can never fit" not in whatif.render(fits)


def test_the_gpu_maps_waiting_gang_says_it_can_never_fit_the_cluster() -> None:
    core = Scheduler(config(BINPACK))
    load(core, _cluster(), 0.0)
    attempts = core.schedule_next(0.0)
    assert attempts is not None and all(a.node is None for a in attempts)
    upstream = attempts[0].message
    assert "can never fit" not in upstream  # the pods' FailedScheduling message: upstream's words
    reasons = {a.pod.key: a.message for a in attempts}
    view = build_view(core, source="live", now=0.0,
                      reasons={key: WaitReason("Unschedulable", message) for key, message in reasons.items()})
    [gang] = view.gangs
    assert gang.message == f"{upstream}{'' if upstream.endswith('.') else '.'} {NEVER}"
    assert all("can never fit" not in p.message for p in view.pending)  # each pod's own reason is its condition's
    # never tried yet (a standby, a fresh listing): the gang still says it
    fresh = Scheduler(config(BINPACK))
    load(fresh, _cluster(), 0.0)
    [untried] = build_view(fresh, source="cluster", now=0.0).gangs
    assert untried.message == NEVER


def test_a_gangs_slices_count_on_no_more_gpus_than_the_nodes_count_lets_busy() -> None:
    """Three members of one 32Gi V100's 4 slices of 8Gi each, on a node of 3 V100s allocating 2
    `nvidia.com/gpu`: the planner puts slices on 2 GPUs at most (a third would be one more busy
    than the count has), so 8 slices in all, and the gang can never fit. The check summed the 3
    GPUs' 12 and said nothing."""
    sliced = "class.tessera.dev/v100-8g"
    objects = [b.resource_class("v100-8g", {"model": "V100"}, sharing={"dimension": "memory", "unit": "8Gi"}),
               b.node("n", gpus=2), *(b.device("n", i) for i in range(3)),
               *(b.pod(f"w-{i}", limits={sliced: 4}, labels=b.gang_labels("w", 3)) for i in range(3))]
    result = whatif.what_if(objects, config(BINPACK), 0.0)
    assert [o.node for o in result.outcomes] == [""] * 3
    never = (f"Its gang can never fit as the cluster is: its 3 members ask for 12 {sliced} together, and the "
             "schedulable nodes' devices of ResourceClass v100-8g hold 8 in all.")
    assert all(outcome.message.endswith(never) for outcome in result.outcomes), result.outcomes[0].message
