"""A gang member ungated while a sibling still has spec.schedulingGates (Kueue ungates in
batches): the gated sibling exists but is never tried, so it does not count toward minMember.
The ungated members' reason keeps scheduler-plugins' sentence and names the gated siblings
(they were left unsaid: "current pods number: 2" read as if a pod were missing), and explain's
gang line counts them apart from those waiting for a node."""

from __future__ import annotations

from typing import Any

from scheduler.core.scheduler import Scheduler
from scheduler.kubectl import explain as explaining
from scheduler.sim import builders as b
from tests.helpers import BINPACK, config

LABELS = {"scheduling.x-k8s.io/pod-group": "kg"}
GATE = {"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]}


def _objects(gated: int, members: int = 3) -> list[dict[str, Any]]:
    pods = [b.pod(f"kg-{k}", labels=LABELS, limits={"nvidia.com/gpu": 1},
                  spec_extra=GATE if k >= members - gated else None) for k in range(members)]
    return [b.node("n1", gpus=8), b.podgroup("kg", 3), *pods]


def _reasons(objects: list[dict[str, Any]]) -> dict[str, str]:
    """Each attempted pod's last reason."""
    core = Scheduler(config(BINPACK))
    for obj in objects:
        core.apply("ADDED", obj, 0.0)
    messages: dict[str, str] = {}
    while (attempts := core.schedule_next(0.0)) is not None:
        messages.update((a.pod.key, a.message) for a in attempts)
    return messages


def test_an_ungated_members_reason_names_its_gated_sibling() -> None:
    messages = _reasons(_objects(gated=1))
    assert set(messages) == {"default/kg-0", "default/kg-1"}  # the gated one is never tried
    assert ("pre-filter pod kg-0 cannot find enough sibling pods, current pods number: 2, minMember of group: 3; "
            "1 more is gated (spec.schedulingGates): kg-2") in messages["default/kg-0"]


def test_gated_siblings_named_are_capped() -> None:
    messages = _reasons(_objects(gated=7, members=8))
    assert ("current pods number: 1, minMember of group: 3; 7 more are gated (spec.schedulingGates): "
            "kg-1, kg-2, kg-3 and 4 more") in messages["default/kg-0"]


def test_explain_counts_gated_members_apart() -> None:
    result = explaining.explain(_objects(gated=1), "default/kg-0", config(BINPACK), [], 0.0)
    assert result is not None and result.gang is not None
    text = explaining.render(result, 0.0)
    assert "default/kg: 3 members (min 3), 0 placed, 2 waiting, 1 gated; phase " in text
    assert "1 more is gated (spec.schedulingGates): kg-2" in result.gang.message
    assert result.dry_run is not None and "1 more is gated (spec.schedulingGates): kg-2" in result.dry_run.message


def test_explain_of_a_gated_pod_names_its_scheduling_gates_and_the_gate_line_says_which_gate() -> None:
    """The Status line said "has spec.schedulingGates" without their names, and right under it
    "Gate: -" (Tessera's allocation gate) read as if the pod had none."""
    result = explaining.explain(_objects(gated=1), "default/kg-2", config(BINPACK), [], 0.0)
    assert result is not None
    assert result.status == ("has spec.schedulingGates (kueue.x-k8s.io/admission): no scheduler considers it until "
                             "they are removed")
    lines = explaining.render(result, 0.0).splitlines()
    assert "Gate:       - (Tessera's allocation gate: neither held nor waited for)" in lines
