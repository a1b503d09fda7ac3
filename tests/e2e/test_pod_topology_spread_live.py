"""Zone spread with `whenUnsatisfiable: DoNotSchedule` on the real apiserver (PodTopologySpread's
filter): six GPU replicas of one app, created at once as a Deployment's ReplicaSet creates them
(`pod-template-hash` label, `matchLabelKeys: [pod-template-hash]`, which the apiserver merges into
the labelSelector since v1.34 and the scheduler merges again), land two per zone on three zones
under the bin-packing profile, which without the constraint would stack them on one node. Their
nodeSelector picks this test's nodes, so (nodeAffinityPolicy Honor) the zones of other tests'
nodes on the shared control plane are no domains of theirs. Before, TesseraUnhonouredTerms refused
every one of them."""

from __future__ import annotations

from typing import Any

from scheduler.sim import builders as b
from tests.e2e.live import Kube, bound_nodes, eventually

NODES = "/api/v1/nodes"
ZONE = "topology.kubernetes.io/zone"
SPREAD = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
          "labelSelector": {"matchLabels": {"app": "spread-web"}}, "matchLabelKeys": ["pod-template-hash"]}


def _replica(name: str, namespace: str) -> dict[str, Any]:
    return b.pod(name, namespace, labels={"app": "spread-web", "pod-template-hash": "7c9d"},
                 limits={"nvidia.com/gpu": 1},
                 spec_extra={"topologySpreadConstraints": [SPREAD], "nodeSelector": {"spread-test": namespace}})


async def test_replicas_spread_two_per_zone(tessera: Any, kubectl: Kube, namespace: str) -> None:
    await tessera("config/binpack.yaml")
    zone_of: dict[str, str] = {}
    for zone in "abc":
        name = f"pts-{namespace}-{zone}"
        node = b.node(name, gpus=8, labels={ZONE: zone, "spread-test": namespace})
        await kubectl.create(NODES, node)
        await kubectl.call("PATCH", f"{NODES}/{name}/status", {"status": node["status"]},
                           content_type="application/merge-patch+json")
        zone_of[name] = zone
    names = [f"web-{i}" for i in range(6)]
    for name in names:
        await kubectl.create_pod(namespace, _replica(name, namespace))

    async def all_bound() -> dict[str, str] | None:
        nodes = await bound_nodes(kubectl, namespace)
        return nodes if all(nodes.get(n) for n in names) else None

    nodes = await eventually(all_bound)
    per_zone: dict[str, int] = {}
    for name in names:
        zone = zone_of[nodes[name]]
        per_zone[zone] = per_zone.get(zone, 0) + 1
    assert per_zone == {"a": 2, "b": 2, "c": 2}, nodes
