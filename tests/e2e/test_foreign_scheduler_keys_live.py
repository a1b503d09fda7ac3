"""A pod of Tessera's that keeps another scheduler's keys gets one Warning Event saying so, on the
real apiserver (a trial of a team moving from Volcano and KAI-Scheduler: a Volcano gang half-bound
and a KAI fraction pod bound with no GPU, and nothing said the keys were not read)."""

from __future__ import annotations

import asyncio
from typing import Any

from scheduler.core.foreign import IGNORED_SCHEDULER_KEY
from scheduler.sim import builders as b
from tests.e2e.live import Kube, bound_nodes, eventually

NODES = "/api/v1/nodes"


async def _events(kubectl: Kube, namespace: str, pod: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in await kubectl.events(namespace) if e["regarding"]["name"] == pod and e["reason"] == reason]


async def test_other_schedulers_keys_are_told_once_per_pod(tessera: Any, kubectl: Kube, namespace: str) -> None:
    await tessera("config/binpack.yaml")
    node = b.node("fk-1", gpus=8)
    await kubectl.create(NODES, node)
    await kubectl.call("PATCH", f"{NODES}/fk-1/status", {"status": node["status"]},
                       content_type="application/merge-patch+json")
    volcano = {"scheduling.k8s.io/group-name": "vtrain", "scheduling.volcano.sh/queue-name": "research"}
    await kubectl.create_pod(namespace, b.pod("vtrain-0", namespace, limits={"nvidia.com/gpu": 8}, annotations=volcano))
    await kubectl.create_pod(namespace, b.pod("vtrain-1", namespace, limits={"nvidia.com/gpu": 8}, annotations=volcano))
    await kubectl.create_pod(namespace, b.pod("kai-frac", namespace, requests={"cpu": "1"},
                                              labels={"kai.scheduler/queue": "team-a"},
                                              annotations={"gpu-fraction": "0.5"}))
    await kubectl.create_pod(namespace, b.pod("plain", namespace, requests={"cpu": "1"}))

    [gang] = await eventually(lambda: _events(kubectl, namespace, "vtrain-1", IGNORED_SCHEDULER_KEY))
    assert gang["type"] == "Warning"
    assert "annotation scheduling.k8s.io/group-name (Volcano's gang)" in gang["note"]
    assert "scheduled alone, not as a gang" in gang["note"] and "docs/not-supported.md" in gang["note"]
    [frac] = await eventually(lambda: _events(kubectl, namespace, "kai-frac", IGNORED_SCHEDULER_KEY))
    assert "annotation gpu-fraction (KAI-Scheduler's GPU sharing)" in frac["note"]
    assert "label kai.scheduler/queue" in frac["note"]

    async def placed() -> dict[str, str] | None:
        nodes = {name: node for name, node in (await bound_nodes(kubectl, namespace)).items() if node}
        return nodes if {"kai-frac", "plain"} <= set(nodes) and len(nodes) == 3 else None

    nodes = await eventually(placed)  # placement unchanged: one vtrain binds alone, the other waits
    assert sum(1 for name in nodes if name.startswith("vtrain-")) == 1
    waiting = next(f"vtrain-{i}" for i in range(2) if f"vtrain-{i}" not in nodes)
    await eventually(lambda: _events(kubectl, namespace, waiting, "FailedScheduling"))
    await asyncio.sleep(1.0)  # further attempts and status writes tell nothing more
    for pod in ("vtrain-0", "vtrain-1", "kai-frac"):
        [told] = await _events(kubectl, namespace, pod, IGNORED_SCHEDULER_KEY)
        assert (told.get("series") or {}).get("count", 1) == 1, pod  # a repeat would count in its series
    assert await _events(kubectl, namespace, "plain", IGNORED_SCHEDULER_KEY) == []
