"""A class's resourceName is judged again when a ghost's coming or going changes whether a node
has devices (`ClusterState._recount_foreign`), as on every other device change.

A node's allocatable names count against classes only while it has no ExtendedResource (a
device plugin's count, not the agent's). A held device deleted (a ghost) keeps the node
agent-served until its last holder leaves; its drop then leaves the node with none. Found in
review: nothing recounted the node there, so a class that took the device plugin's name while
the ghost was held stayed valid, a plain count pod for that name was told the class "matches no
device in the cluster", and a restart on the same objects judged the class invalid and bound the
pod by count (it healed only at the node's next MODIFIED).
"""

from __future__ import annotations

import copy
from typing import Any

from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, config

PLUGIN = "example.com/gpu"  # the node's device plugin count, and its one device's resourceName
CLASS = "class.tessera.dev/v100"
TAKEN = ('spec.resourceName: Invalid value: "example.com/gpu": nodes already advertise this resource '
         "through a device plugin; use a name of its own")


def _finished(run: Run, name: str) -> dict[str, Any]:
    pod = copy.deepcopy(run.replay.pods[run.state.pod_by_key(f"default/{name}").uid])
    pod["status"]["phase"] = "Succeeded"
    return pod


def test_a_ghosts_drop_judges_the_class_taking_the_nodes_count_again_as_a_restart_does() -> None:
    run = Run(config(BINPACK))
    device = b.device("n", 0, resource_name=PLUGIN)
    node = b.node("n", extra={PLUGIN: "1"})
    v100 = b.resource_class("v100", match_labels={"model": "V100"})
    run.add(node, device, v100, b.pod("p", limits={CLASS: 1}))
    assert run.node_of("p") == "n"
    run.feed(b.event("DELETED", device))  # held: a ghost, the node still has a device
    mine = b.resource_class("mine", match_labels={"model": "V100"}, resource_name=PLUGIN)
    run.add(mine)
    assert run.state.classes.error_of("mine") is None  # the node is agent-served while the ghost is held
    done = _finished(run, "p")
    run.feed(b.event("MODIFIED", done))
    assert not run.state.ledger.ghosts  # dropped: the node has no device, its count is a device plugin's
    assert run.state.classes.error_of("mine") == TAKEN

    fresh = Run(config(BINPACK))  # the same objects, a restarted process
    fresh.add(node, v100, mine, done)
    assert fresh.state.classes.error_of("mine") == TAKEN

    for each in (run, fresh):  # a plain count pod for the name is bound by count
        each.add(b.pod("q", limits={PLUGIN: 1}))
        assert each.node_of("q") == "n", each.last("q").message


def test_a_ghost_held_on_a_node_without_devices_judges_the_class_as_a_live_process_does() -> None:
    """The other way: a pod bound with a device the cache does not have (`hold_unseen`, as when
    a restart lists the pod and not the deleted object) gives a node without ExtendedResources a
    device, as the process that saw the device deleted while held still has it: the class is
    valid while it is held, whichever came first, and judged invalid again once it is dropped."""
    first = Run(config(BINPACK))
    device = b.device("n", 0, resource_name=PLUGIN)
    node = b.node("n", extra={PLUGIN: "1"})
    v100 = b.resource_class("v100", match_labels={"model": "V100"})
    mine = b.resource_class("mine", match_labels={"model": "V100"}, resource_name=PLUGIN)
    first.add(node, device, v100, b.pod("p", limits={CLASS: 1}))
    bound = copy.deepcopy(first.replay.pods[first.state.pod_by_key("default/p").uid])
    first.feed(b.event("DELETED", device))
    first.add(mine)
    assert first.state.classes.error_of("mine") is None  # the live process: the ghost's node is agent-served

    for order in ((node, v100, mine, bound), (node, v100, bound, mine)):
        restarted = Run(config(BINPACK))
        restarted.add(*order)
        assert restarted.state.ledger.ghosts
        assert restarted.state.classes.error_of("mine") is None, [o["metadata"]["name"] for o in order]
        restarted.feed(b.event("MODIFIED", _finished(restarted, "p")))
        assert not restarted.state.ledger.ghosts
        assert restarted.state.classes.error_of("mine") == TAKEN
