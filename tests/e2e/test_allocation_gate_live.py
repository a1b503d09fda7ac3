"""The allocation gate on the real apiserver: only where an agent heartbeats, and never silent.

What a new user hit: on dev-cluster (no node agent) the second class pod on a node stayed Pending
for ever with no Event and no condition, holding its GPUs. Now the gate holds only on nodes whose
ExtendedResources carry a fresh agent heartbeat; a held pod says what it waits for (Event and
PodScheduled=False, reason WaitingForAllocation) and counts as `gated`; when the agent stops
heartbeating, held Bindings go out — and a pod bound after a PodScheduled=False write never keeps
that stale condition.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from scheduler.sim import builders as b
from tests.e2e.live import FakeAgent, Kube, bound_nodes, eventually
from tests.e2e.test_live_scheduling import CLASSES, ERS, _create_nodes

REPO = Path(__file__).resolve().parents[2]
CLASS = "class.tessera.dev/v100"


def _config(tmp_path: Path, timeout: int) -> str:
    raw = yaml.safe_load((REPO / "config/binpack.yaml").read_text())
    profile = raw["profiles"][0]
    profile.setdefault("pluginConfig", []).append(
        {"name": "TesseraDevices", "args": {"allocationGate": True, "agentHeartbeatTimeoutSeconds": timeout}})
    path = tmp_path / "gate.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


async def _cluster(kubectl: Kube) -> None:
    await _create_nodes(kubectl, None, [b.node("gate-n", gpus=2)])
    for i in range(2):
        await kubectl.create(ERS, b.device("gate-n", i))
    await kubectl.create(CLASSES, b.resource_class("v100", match_labels={"model": "V100"}))


def _pod_scheduled(pod: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in pod["status"].get("conditions", []) if c["type"] == "PodScheduled"), None)


async def test_without_an_agent_class_pods_bind_at_once(tessera: Any, kubectl: Kube, namespace: str,
                                                        tmp_path: Path) -> None:
    loop = await tessera(_config(tmp_path, timeout=90))
    await _cluster(kubectl)
    for name in ("p0", "p1"):
        await kubectl.create_pod(namespace, b.pod(name, limits={CLASS: 1}))

    async def both_bound() -> dict[str, str] | None:
        nodes = await bound_nodes(kubectl, namespace)
        return nodes if all(nodes.get(p) == "gate-n" for p in ("p0", "p1")) else None

    await eventually(both_bound, timeout=20)
    assert loop.core.held() == []


async def test_a_held_binding_is_visible_and_goes_out_when_the_agent_goes_quiet(
        tessera: Any, kubectl: Kube, namespace: str, tmp_path: Path) -> None:
    loop = await tessera(_config(tmp_path, timeout=4))
    await _cluster(kubectl)
    async with FakeAgent(kubectl, namespace, allocate=False):
        await kubectl.create_pod(namespace, b.pod("p0", limits={CLASS: 1}))
        await eventually(lambda: _bound(kubectl, namespace, "p0"), timeout=20)
        await kubectl.create_pod(namespace, b.pod("p1", limits={CLASS: 1}))

        async def waiting_event() -> list[dict[str, Any]]:
            return [e for e in await kubectl.events(namespace)
                    if e["reason"] == "WaitingForAllocation" and e["regarding"]["name"] == "p1"]

        [event] = await eventually(waiting_event, timeout=20)
        assert event["type"] == "Normal"
        assert event["note"] == ("assigned to gate-n; the Binding waits until the node agent has allocated "
                                 f"{CLASS} to {namespace}/p0 (allocation gate)")

        async def waiting_condition() -> dict[str, Any] | None:
            condition = _pod_scheduled((await kubectl.pods(namespace))["p1"])
            return condition if condition is not None and condition["reason"] == "WaitingForAllocation" else None

        condition = await eventually(waiting_condition, timeout=20)
        assert condition["status"] == "False"
        assert len(loop.core.held()) == 1
        assert (await bound_nodes(kubectl, namespace))["p1"] == ""
    # the agent is gone: no heartbeat for 4 s -> the held Binding goes out
    await eventually(lambda: _bound(kubectl, namespace, "p1"), timeout=30)
    assert loop.core.held() == []

    async def scheduled_true() -> dict[str, Any] | None:
        condition = _pod_scheduled((await kubectl.pods(namespace))["p1"])
        return condition if condition is not None and condition["status"] == "True" else None

    await eventually(scheduled_true, timeout=10)


async def _bound(kubectl: Kube, namespace: str, name: str) -> bool:
    return (await bound_nodes(kubectl, namespace)).get(name) == "gate-n"
