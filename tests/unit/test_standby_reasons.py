"""A standby's GPU map shows why pending pods wait as their PodScheduled condition says (the
leader wrote it): a new user's trial found every pending pod with "reason": "", "message": "" on
the standby's /gpu-map.json while `kubectl get pod -o yaml` showed the leader's message."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from scheduler.core.framework.attempt import Attempt
from scheduler.core.scheduler import Scheduler
from scheduler.kube.gpu_map import GpuMap
from scheduler.kube.informers import NODES, PODS
from scheduler.kube.loop import LoopHooks
from scheduler.sim import builders as b
from scheduler.sim.snapshot import load
from tests.helpers import config


def _objects() -> list[dict[str, Any]]:
    said = b.pod("said", limits={"nvidia.com/gpu": 4})
    said["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                     "message": "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."}]
    held = b.pod("held", limits={"nvidia.com/gpu": 1})
    held["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "WaitingForAllocation",
                                     "message": "assigned to n; the Binding waits until the node agent ..."}]
    return [b.node("n", gpus=1), said, held, b.pod("fresh", limits={"nvidia.com/gpu": 1})]


class _Informers:
    """The loop's informers as the GPU map reads them: each kind's listed objects."""

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.objects = objects
        self.asked: list[str] = []

    def listed(self, kind: Any) -> list[dict[str, Any]]:
        self.asked.append(kind.kind)
        return [obj for obj in self.objects if obj["kind"] == kind.kind]


def test_a_standby_shows_the_pods_conditions_and_the_leader_its_own_word() -> None:
    objects = _objects()
    core = Scheduler(config())
    load(core, objects, 0.0)
    leading = [False]
    informers = _Informers(objects)
    gpu_map = GpuMap(SimpleNamespace(core=core, is_leader=lambda: leading[0], informers=informers),  # type: ignore[arg-type]
                     clock=lambda: 0.0)
    view = gpu_map.view()
    assert view.source == "standby"
    assert [(p.pod, p.reason, p.message, p.node) for p in view.pending] == [
        ("default/fresh", "", "", ""),  # no condition yet: the page reads "the leader decides"
        ("default/held", "WaitingForAllocation", "assigned to n; the Binding waits until the node agent ...", "n"),
        ("default/said", "Unschedulable", "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.", ""),
    ]
    assert informers.asked == [PODS.kind] and NODES.kind not in informers.asked
    # leading: its own last word, not the condition (which lags its decisions by a status write)
    leading[0] = True
    said = core.state.pod_by_key("default/said")
    assert said is not None
    gpu_map.hooks(LoopHooks()).on_attempt("unschedulable", "tessera", 0.1, Attempt(said, None, message="newer"))
    assert {p.pod: p.message for p in gpu_map.view().pending}["default/said"] == "newer"
