"""A node whose count of a GPU resource drops below the GPUs its pods already use (an admin edits
the Node's allocatable, the device plugin reports GPUs gone) takes no new work of that resource:
not even a slice on a GPU already in use, which adds no GPU to the count but puts a new pod on
GPUs the node no longer offers. A live adversary saw slice pods bound, and a slice pod preempted
to make room, on a node edited to `nvidia.com/gpu: 0`."""

from __future__ import annotations

from scheduler.sim import builders as b
from scheduler.view.cluster import build_view
from tests.helpers import BINPACK, Run, config

SHARED = "class.tessera.dev/s"


def _cluster(run: Run) -> None:
    run.add(b.node("a", gpus=2), *(b.device("a", i, memory="16Gi") for i in range(2)),
            b.resource_class("s", match_labels={"model": "V100"}, sharing={"dimension": "memory", "unit": "1Gi"}),
            b.pod("first", limits={SHARED: 4}))
    assert run.node_of("first") == "a"


def _count_edited_to(run: Run, count: str) -> None:
    node = b.node("a", extra={"nvidia.com/gpu": count})
    run.feed(b.event("MODIFIED", node))


def test_no_slice_goes_to_a_node_using_more_gpus_than_it_now_counts() -> None:
    run = Run(config(BINPACK))
    _cluster(run)
    _count_edited_to(run, "0")
    run.add(b.pod("second", limits={SHARED: 4}))
    assert run.node_of("second") is None
    assert "Insufficient class.tessera.dev/s" in run.last("second").message


def test_a_slice_still_shares_a_gpu_in_use_on_a_node_at_its_count() -> None:
    """At the count (not over it) a slice on a GPU already in use adds no GPU: it still fits."""
    run = Run(config(BINPACK))
    _cluster(run)
    _count_edited_to(run, "1")
    run.add(b.pod("second", limits={SHARED: 4}))
    assert run.node_of("second") == "a"


def test_no_slice_pod_is_preempted_to_make_room_on_an_over_committed_node() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("a", gpus=2), *(b.device("a", i, memory="16Gi") for i in range(2)),
            b.resource_class("s", match_labels={"model": "V100"}, sharing={"dimension": "memory", "unit": "1Gi"}),
            b.pod("kept", limits={SHARED: 8}, priority=2000))  # outranks the preemptor: its GPU stays in use
    run.add(*(b.pod(f"low-{i}", limits={SHARED: 4}, priority=0) for i in range(6)))  # the rest of the 32Gi
    assert {run.node_of(f"low-{i}") for i in range(6)} == {"a"}
    _count_edited_to(run, "0")
    run.add(b.pod("urgent", limits={SHARED: 8}, priority=1000))
    assert run.node_of("urgent") is None
    assert [a.preempted for a in run.attempts if a.pod.meta.name == "urgent" and a.preempted] == []


def test_a_count_cut_below_the_gpus_in_use_is_named_as_such() -> None:
    """The Warning names the cut, not a Binding Tessera did not decide (every pod on the node is
    Tessera's, so that was the only story told before, and a wrong one here)."""
    run = Run(config(BINPACK))
    _cluster(run)
    run.add(b.pod("whole", limits={"nvidia.com/gpu": 1}))
    assert run.node_of("whole") == "a"
    _count_edited_to(run, "1")
    [notice] = [n for n in run.notices() if n.startswith("GPUsOvercommitted")]
    assert notice == ("GPUsOvercommitted: node a has 2 nvidia.com/gpu in use but only 1 allocatable since its count "
                      "went down from 2 (the Node's allocatable was edited, or its device plugin reports fewer "
                      "GPUs): its pods keep the GPUs they hold, and new pods get none of them here until the count "
                      "covers what is in use")
    view = build_view(run.scheduler, source="simulate", now=0.0)
    [node] = [n for n in view.nodes if n.name == "a"]
    assert any("nvidia.com/gpu overcommitted: 2 in use, 1 allocatable (its count went down from 2)" in note
               for note in node.notes), node.notes


def test_a_slice_still_fits_beside_a_preemptors_hold_and_its_terminating_victim() -> None:
    """Review: 'over its count' is the real holders' use (`real_used`, as GPUsOvercommitted judges
    it): a nominated preemptor's hold beside its still-running victim adds up to more than the node
    has for a while, by design, and must not refuse a slice of a GPU already in use meanwhile."""
    from scheduler.core.scheduler import Scheduler

    core = Scheduler(config(BINPACK))
    for obj in (b.node("a", gpus=2), *(b.device("a", i, memory="16Gi") for i in range(2)),
                b.resource_class("s", match_labels={"model": "V100"}, sharing={"dimension": "memory", "unit": "1Gi"}),
                b.pod("s1", limits={SHARED: 4}, priority=2000)):
        core.apply("ADDED", obj, 0.0)
    [placed] = core.schedule_next(0.0) or []
    assert placed.node == "a"
    victim = b.pod("v", limits={"nvidia.com/gpu": 1}, priority=0, node_name="a", phase="Running")
    core.apply("ADDED", victim, 0.0)
    core.apply("ADDED", b.pod("p", limits={"nvidia.com/gpu": 1}, priority=1000), 0.0)
    [preemptor] = core.schedule_next(0.0) or []
    assert preemptor.nominated_node == "a" and [v.meta.name for v in preemptor.preempted] == ["v"]
    core.apply("ADDED", b.pod("s2", limits={SHARED: 4}, priority=0), 0.0)  # v still terminating
    [second] = core.schedule_next(1.0) or []
    assert second.pod.meta.name == "s2" and second.node == "a", second.message


def test_a_node_recreated_without_the_resource_is_told_against_the_gpus_its_devices_describe() -> None:
    """A Node deleted and created again (a node replaced under its name, a kubelet re-registering)
    has no `nvidia.com/gpu` in allocatable until its device plugin registers: the core then counts
    its ExtendedResources of the resource. The Warning said "only 2 allocatable" of a Node that
    allocates none: it names the numbers it compared, and where the 2 comes from."""
    run = Run(config(BINPACK))
    run.add(b.node("a", gpus=4), *(b.device("a", i) for i in range(2)))  # 2 described, 2 more only counted
    run.add(*(b.pod(f"p{i}", limits={"nvidia.com/gpu": 1}) for i in range(3)))
    assert [run.node_of(f"p{i}") for i in range(3)] == ["a"] * 3
    assert run.notices() == []
    run.feed(b.event("DELETED", b.node("a", gpus=4)), b.event("ADDED", b.node("a")))
    [notice] = [n for n in run.notices() if n.startswith("GPUsOvercommitted")]
    assert notice.startswith("GPUsOvercommitted: node a has 3 nvidia.com/gpu in use but only 2 ExtendedResources "
                             "of it, its Node allocating none, every pod on it Tessera's"), notice
    assert "only 2 allocatable" not in notice
    view = build_view(run.scheduler, source="simulate", now=0.0)
    [node] = [n for n in view.nodes if n.name == "a"]
    assert any(note.startswith("nvidia.com/gpu overcommitted: 3 in use, 2 ExtendedResources of it, its Node "
                               "allocating none (every pod on it Tessera's") for note in node.notes), node.notes
