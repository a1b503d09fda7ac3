"""Gangs of upstream Workload API PodGroups (scheduling.k8s.io/v1alpha2) inside one rack, live.

The local control plane serves the alpha API (runtime-config + feature gates); pods join with
`spec.schedulingGroup.podGroupName`, the PodGroup carries `schedulingConstraints.topology`, and
Tessera writes the PodGroupScheduled condition as kube-scheduler does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from scheduler.sim import builders as b
from tests.e2e.live import Kube, bound_nodes, eventually

NODES = "/api/v1/nodes"
BLOCK, RACK = "example.com/block", "example.com/rack"


def _config(tmp_path: Path) -> str:
    raw = yaml.safe_load(Path("config/binpack.yaml").read_text())
    raw["profiles"][0]["pluginConfig"].append({"name": "TopologyPlacement", "args": {
        "levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": "kubernetes.io/hostname"}]}})
    path = tmp_path / "topology.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


async def _node(kubectl: Kube, name: str, block: str, rack: str) -> None:
    node = b.node(name, gpus=4, labels={BLOCK: block, RACK: rack})
    await kubectl.create(NODES, node)
    await kubectl.call("PATCH", f"{NODES}/{name}/status", {"status": node["status"]},
                       content_type="application/merge-patch+json")


async def _condition(kubectl: Kube, namespace: str, group: str) -> dict[str, Any] | None:
    obj = (await kubectl.call("GET", f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{namespace}/podgroups/{group}")).json()
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == "PodGroupScheduled"), None)


async def test_upstream_podgroup_gang_lands_in_one_rack_and_reports_its_condition(
        tessera: Any, kubectl: Kube, namespace: str, tmp_path: Path) -> None:
    await tessera(_config(tmp_path))
    # rack "r1" exists in both blocks: a/r1 has 2 nodes, b/r1 has 3; the values alone would be one rack of 5
    for name, block in (("topo-a1", "a"), ("topo-a2", "a"), ("topo-b1", "b"), ("topo-b2", "b"), ("topo-b3", "b")):
        await _node(kubectl, name, block, "r1")
    groups = f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{namespace}/podgroups"
    await kubectl.create(groups, b.workload_podgroup("fits", 3, namespace, topology_key=RACK))
    await kubectl.create(groups, b.workload_podgroup("too-big", 6, namespace, topology_key=RACK))
    for group, size in (("fits", 3), ("too-big", 6)):
        for i in range(size):
            await kubectl.create_pod(namespace, b.pod(f"{group}-{i}", limits={"nvidia.com/gpu": 4},
                                                      spec_extra={"schedulingGroup": {"podGroupName": group}}))

    async def fits_bound() -> dict[str, str] | None:
        nodes = await bound_nodes(kubectl, namespace)
        placed = {p: n for p, n in nodes.items() if p.startswith("fits-")}
        return placed if len(placed) == 3 and all(placed.values()) else None

    placed = await eventually(fits_bound)
    assert set(placed.values()) == {"topo-b1", "topo-b2", "topo-b3"}  # the one rack with room for 3
    scheduled = await eventually(lambda: _condition(kubectl, namespace, "fits"))
    assert (scheduled["status"], scheduled["reason"]) == ("True", "Scheduled")

    async def refused() -> dict[str, Any] | None:  # (none while members are still being created)
        return await _condition(kubectl, namespace, "too-big")

    cond = await eventually(refused)
    # the group's status in kube-scheduler's words (one placement per value of the rack label: "r1"
    # in both blocks is one value to it); the reason is each member's (PodScheduled)
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "False", "Unschedulable", "0/1 placements are available, first placement status: pod group is unschedulable")
    expected = (f"0/5 nodes are available: no rack has room for 6 pods of gang "
                f"{namespace}/scheduling.k8s.io/too-big (largest: 2).")  # b/r1 is taken

    async def member_says() -> str | None:  # its own status write may land after the group's
        member = (await kubectl.call("GET", f"/api/v1/namespaces/{namespace}/pods/too-big-0")).json()
        said = [c["message"] for c in member["status"].get("conditions", []) if c["type"] == "PodScheduled"]
        return said[0] if said else None

    message = await eventually(member_says)
    assert message.startswith(expected), message
