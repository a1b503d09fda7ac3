"""A PodGroup whose pods all went while Tessera was down is written `Pending` when Tessera starts.

A user trial: `kubectl delete job train` with Tessera stopped left its PodGroup `Running,
running: 4` over three restarts. A new process has never seen the pods that made the group
Tessera's, so it wrote nothing; scheduler-plugins' PodGroup controller, which reconciles every
PodGroup once its caches synced, writes such a group `Pending` with every count 0. Now Tessera
does too (`coscheduling.reports_status`), and leaves a group without pods alone when its status
says nothing of pods (Pending) or is final.

Here a real kube-apiserver: the groups' statuses are written before Tessera starts, no pod
names them; the stale one goes Pending, the others stand (read after that write, so Tessera
had seen them all).
"""

from __future__ import annotations

from typing import Any

from scheduler.sim import builders as b
from tests.e2e.live import Kube, eventually

PODGROUPS = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups"
MERGE = "application/merge-patch+json"


async def _status(kubectl: Kube, namespace: str, name: str) -> dict[str, Any]:
    group = (await kubectl.call("GET", f"{PODGROUPS.format(ns=namespace)}/{name}")).json()
    status: dict[str, Any] = group.get("status") or {}
    return status


async def test_a_podgroup_left_running_while_tessera_was_down_goes_pending_when_it_starts(
        tessera: Any, kubectl: Kube, namespace: str) -> None:
    groups = PODGROUPS.format(ns=namespace)
    statuses = {"train": {"phase": "Running", "running": 4},  # its Job deleted while Tessera was down
                "waiting": {"phase": "Pending", "running": 2},  # the controller keeps a Pending group's counts
                "done": {"phase": "Finished", "succeeded": 4}}  # final: nobody writes it again
    for name, status in statuses.items():
        await kubectl.create(groups, b.podgroup(name, 4, namespace))
        await kubectl.call("PATCH", f"{groups}/{name}/status", {"status": status}, content_type=MERGE)
    await tessera("config/binpack.yaml")

    async def train_pending() -> bool:
        return await _status(kubectl, namespace, "train") == {"phase": "Pending", "running": 0, "succeeded": 0,
                                                               "failed": 0}

    assert await eventually(train_pending)
    for name in ("waiting", "done"):
        assert await _status(kubectl, namespace, name) == statuses[name]
