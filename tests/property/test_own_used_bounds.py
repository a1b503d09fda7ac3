"""What a gang's minResources check frees of a node for the group (`capacity.own_used`) is what
the group's placed members use there: never more than the node's real holders use of that
resource (a nominated preemptor's hold is no use the check counts), never less than nothing,
and for a resource no device of the node counts as, nor a GPU kept elsewhere, exactly their
charged requests (scheduler-plugins' getNodeResource takes the group's own pods off the node).

Checked after every event of the invariants' random streams (gangs, classes, shared and whole
GPUs, deletions), for every gang and every node and resource the nodes know."""

from __future__ import annotations

from hypothesis import given

from scheduler.core.capacity import own_used
from tests.property import test_invariants as inv
from tests.property.strategies import Scenario


class _Checked(inv.Harness):
    def quiescent(self) -> None:
        super().quiescent()
        state = self.sched.state
        ledger = state.ledger
        for key, members in state.gangs.members.items():
            own = {uid for uid in members if uid in state.placements}
            for info in state.node_infos():
                resources = set(info.requested) | set(info.busy) | {ledger.counted_as(name) for name in info.devices}
                for resource in resources:
                    freed = own_used(state, info, own, resource)
                    inv.check(0 <= freed <= info.real_used(resource), f"gang {key} frees {freed} of {resource} on "
                                                                      f"{info.name}, which uses {info.real_used(resource)}")
                    if not any(ledger.counted_as(name) == resource for name in info.devices) and not any(
                            counted == resource for counted, _ in ledger.counted_elsewhere(info)):
                        charged = sum(state.placements[uid].requests.get(resource, 0) for uid in info.pods & own)
                        inv.check(freed == charged, f"gang {key} frees {freed} of {resource} on {info.name}, "
                                                    f"its members charged {charged}")


@inv._settings(150)
@given(inv.SCENARIOS)
def test_a_gang_frees_no_more_than_a_node_uses(scenario: Scenario) -> None:
    _Checked(scenario).run()
