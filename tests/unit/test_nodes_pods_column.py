"""`kubectl tessera nodes`' PODS column on a GPU many pods share (a node-maintenance trial): the
table named every holder, ~230 characters on a GPU holding eight slices, and the terminal
wrapped it over the next rows. The table names the first few and counts the rest (`first_few`);
`-o json` keeps every holder."""

from __future__ import annotations

from typing import Any

from scheduler.core import annotations as ann
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b
from scheduler.sim.snapshot import load
from scheduler.view.cluster import build_view
from scheduler.view.model import as_dict
from scheduler.view.text import render_nodes
from tests.helpers import config

SHARED = "class.tessera.dev/t4-shared"


def _slice(name: str, device: dict[str, Any]) -> dict[str, Any]:
    """A running pod holding 2Gi of `device`."""
    spec = device["spec"]
    grant = ann.DeviceGrant(spec["deviceID"], device["metadata"]["name"], 2 << 30, "memory", spec["resourceName"])
    encoded = ann.encode_devices({"main": {SHARED: (grant,)}})
    return b.pod(name, namespace="inference-team", limits={SHARED: 2}, node_name=spec["nodeName"], phase="Running",
                 annotations={ann.DEVICES: encoded, ann.HELD_DEVICES: encoded})


def test_the_pods_column_names_a_few_holders_and_counts_the_rest() -> None:
    device = b.device("t4-node-000", 0, model="T4", memory="16Gi")
    core = Scheduler(config())
    load(core, [b.resource_class("t4-shared", match_labels={"model": "T4"}, sharing={"dimension": "memory", "unit": "1Gi"}),
                b.node("t4-node-000", gpus=1), device, *(_slice(f"llm-replica-{i}", device) for i in range(8))], 0.0)
    view = build_view(core, source="test", now=0.0)
    row = next(line for line in render_nodes(view).splitlines() if line.startswith("t4-node-000"))
    assert ("inference-team/llm-replica-0 (2Gi), inference-team/llm-replica-1 (2Gi), "
            "inference-team/llm-replica-2 (2Gi) and 5 more") in row
    assert "llm-replica-3" not in row
    [gpu] = as_dict(view)["nodes"][0]["gpus"]
    assert [holder["pod"] for holder in gpu["holders"]] == [f"inference-team/llm-replica-{i}" for i in range(8)]
