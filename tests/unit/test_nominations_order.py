"""hold_nominated gives the most urgent nominated pod its room first (mutation round 4: the order
was unguarded). Two pods an earlier leader nominated to one node whose only free devices
(once the terminating victim is gone) are enough for one: the higher-priority pod's rebuilt hold
names them, the lower one's counts its requests alone, as upstream's nominator counts a nominated
pod whether it fits or not."""

from __future__ import annotations

from scheduler.sim import builders as b
from tests.unit.test_nominations_after_leader_change import V100, _devices_of, _new_leader, _nominated, _terminating


def test_the_higher_priority_nominated_pod_gets_the_devices_of_its_rebuilt_hold() -> None:
    gpus = [b.device("n", i) for i in range(2)]
    low = _terminating(b.pod("low", limits={V100: 2}, priority=0, node_name="n", phase="Running",
                             annotations=_devices_of(*gpus)))
    # listed low priority first, so the order of the pods alone would not decide
    run = _new_leader(b.node("n", gpus=2), *gpus, b.resource_class("v100", match_labels={"model": "V100"}), low,
                      _nominated(b.pod("lo", limits={V100: 2}, priority=100), "n"),
                      _nominated(b.pod("hi", limits={V100: 2}, priority=200), "n"))
    holds = {run.state.pods[uid].meta.name: hold for uid, hold in run.state.holds.items()}
    assert set(holds) == {"hi", "lo"}
    assert sorted(holds["hi"].placement.devices) == sorted(d["metadata"]["name"] for d in gpus)
    assert holds["lo"].placement.devices == []
    assert (holds["hi"].priority, holds["lo"].priority) == (200, 100)
