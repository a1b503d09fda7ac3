"""`kubectl tessera nodes` counts the room the leader keeps for a nominated preemptor.

A preemptor nominated to a node (`status.nominatedNodeName`) whose victims still terminate holds
room there in the leader's core (`ClusterState.holds`): no pod of its priority or lower gets it,
and the leader's /metrics counts those GPUs in use. docs/kubectl-tessera.md promises such rows are
marked `nominated`, "not free". The listed view fed the objects to a fresh core but never gave the
nominated pods their room (`nominations.hold_nominated`, which explain's dry run runs through
`Scheduler.schedule_next`): a day-2 trial saw GPUs 2 and 3 `free` on a 4-GPU node while the
leader refused a 2-GPU pod there.
"""

from __future__ import annotations

from typing import Any

from scheduler.kubectl import explain as explaining
from scheduler.sim import builders as b
from scheduler.view import model as m
from scheduler.view.listed import listed_view
from tests.helpers import BINPACK, config

MARK = [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
         "message": "tessera: preempting to accommodate a higher priority pod",
         "lastTransitionTime": "2026-01-01T00:00:10Z"}]


def _victim() -> dict[str, Any]:
    """Holds 2 of n's 4 GPUs, evicted for `boss`, still terminating (kwok frozen)."""
    pod = b.pod("low", limits={"nvidia.com/gpu": 2}, priority=100, node_name="n", phase="Running")
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:10Z"
    pod["status"]["conditions"] = MARK
    return pod


def _boss() -> dict[str, Any]:
    pod = b.pod("boss", limits={"nvidia.com/gpu": 4}, priority=1000)
    pod["status"]["nominatedNodeName"] = "n"
    return pod


def _states(view: m.ClusterView) -> list[tuple[str, tuple[tuple[str, str], ...]]]:
    [node] = view.nodes
    return [(gpu.state, tuple((h.pod, h.status) for h in gpu.holders)) for gpu in node.gpus]


def test_a_nominated_preemptors_room_is_shown_nominated_not_free() -> None:
    view = listed_view(config(BINPACK), [b.node("n", gpus=4), _victim(), _boss()], 0.0)
    states = _states(view)
    assert not any(state == m.FREE for state, _ in states), states
    assert [holders for _, holders in states][2:] == [(("default/boss", m.NOMINATED),)] * 2, states
    assert view.summary.free == 0, view.summary.line()
    # its other 2 are the victim's until it is gone: kept beside it, not an over-commit
    assert view.nodes[0].notes == ("default/boss: 2 more nvidia.com/gpu kept for it (nominated here), shown on "
                                   "none: they are held by pods being deleted here until those are gone",)


def test_a_devices_nominated_room_is_shown_nominated_not_free() -> None:
    """The same with GPUs handed out by class: the room kept names devices."""
    from scheduler.core.annotations import DEVICES, DeviceGrant, encode_devices
    v100 = "class.tessera.dev/v100"
    devices = [b.device("n", i) for i in range(4)]
    grants = tuple(DeviceGrant(d["spec"]["deviceID"], d["metadata"]["name"], None) for d in devices[:2])
    victim = _victim()
    victim["spec"]["containers"][0]["resources"]["limits"] = {v100: 2}
    victim["metadata"]["annotations"] = {DEVICES: encode_devices({"main": {v100: grants}})}
    boss = _boss()
    boss["spec"]["containers"][0]["resources"]["limits"] = {v100: 4}
    view = listed_view(config(BINPACK), [b.node("n", gpus=4), *devices,
                                         b.resource_class("v100", match_labels={"model": "V100"}), victim, boss], 0.0)
    states = _states(view)
    assert not any(state == m.FREE for state, _ in states), states
    assert all(("default/boss", m.NOMINATED) in holders for _, holders in states), states
    assert view.summary.free == 0, view.summary.line()


def _small(priority: int = 10) -> dict[str, Any]:
    """A lower-priority 2-GPU pod pinned to n, refused there as the trial saw: upstream's
    FailedScheduling text, which names no nominated pod."""
    pod = b.pod("small", limits={"nvidia.com/gpu": 2}, priority=priority, spec_extra={"nodeSelector": {"pin": "n"}})
    pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                    "message": "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: "
                                               "0/1 nodes are available: 1 No preemption victims found for "
                                               "incoming pod."}]
    return pod


def _pinned_node() -> dict[str, Any]:
    node = b.node("n", gpus=4)
    node["metadata"].setdefault("labels", {})["pin"] = "n"
    return node


def test_explain_names_the_nominated_pod_the_room_is_kept_for() -> None:
    """Upstream filters a pod with the pods nominated to a node at its priority or higher added
    (framework.go addGENominatedPods) and says only `Insufficient nvidia.com/gpu`: the message
    stays; explain adds which pod the room is kept for."""
    result = explaining.explain([_pinned_node(), _victim(), _boss(), _small()], "default/small", config(BINPACK),
                                [], 0.0)
    assert result is not None and result.dry_run is not None and not result.dry_run.node
    assert "Insufficient nvidia.com/gpu" in result.message  # upstream's text, unchanged
    assert result.room_kept == ("Room on n is kept for default/boss (priority 1000, nominated there: preemption "
                                "made room for it); this pod (priority 10) would fit n without it, and no pod of "
                                "priority 1000 or lower gets that room.",)
    assert result.room_kept[0] in explaining.render(result, 0.0)


def test_explain_names_no_nominated_pod_where_the_pod_would_not_fit_anyway() -> None:
    """6 GPUs on a 4-GPU node: refused whatever is kept there, so no pod is blamed."""
    small = _small()
    small["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": 6}
    result = explaining.explain([_pinned_node(), _victim(), _boss(), small], "default/small", config(BINPACK), [], 0.0)
    assert result is not None and result.dry_run is not None and not result.dry_run.node
    assert result.room_kept == ()


def test_explain_names_no_nominated_pod_of_a_lower_priority() -> None:
    """A pod above the nominated one's priority is not kept out by it (it may even preempt it)."""
    result = explaining.explain([_pinned_node(), _victim(), _boss(), _small(priority=2000)], "default/small",
                                config(BINPACK), [], 0.0)
    assert result is not None and result.room_kept == ()


def test_what_ifs_summary_now_is_the_one_kubectl_tessera_nodes_shows() -> None:
    """`kubectl tessera what-if` prints the GPU summary now beside the one after its replay: now
    is the listed cluster as `nodes` reads it, the room kept for the nominated preemptor included."""
    from scheduler.kubectl.whatif import what_if

    listed = [_pinned_node(), _victim(), _boss()]
    now = listed_view(config(BINPACK), listed, 0.0).summary.line()
    assert what_if(listed, config(BINPACK), 0.0).before == now
    assert " 0 free" in now, now
