"""A stopped node agent is visible where an SRE looks (an on-call trial): after the agent of a
node was SIGKILLed its ExtendedResources stayed `Healthy=True` with a stale
`status.lastHeartbeatTime`, and no metric, alert or `kubectl tessera nodes` REASON said so, while
the class pod bound there stayed `tessera.dev/phase: Allocating`.

A node's agent is silent when it heartbeated (some ExtendedResource of the node carried
`status.lastHeartbeatTime`) but not within the `TesseraDevices` arg `agentHeartbeatTimeoutSeconds`
(default 90): the same judgement that decides whether the allocation gate holds there, made at
`now` by the view (the core reads no clock). Nodes without an agent (no heartbeat ever) are not.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from scheduler.api.config import load_config
from scheduler.api.config_parse import parse_config
from scheduler.api.config_model import SchedulerConfig
from scheduler.kube.http import KubeHttp
from scheduler.kube.loop import SchedulerLoop
from scheduler.kube.metrics import Metrics
from scheduler.kube.run_cli import StateGauges
from scheduler.sim import builders as b
from scheduler.sim.replay import Replay, WatchEvent
from scheduler.view import model as m
from scheduler.view.cluster import build_view, gpu_counts, silent_agents
from scheduler.view.text import render_nodes
from tests.fakeapi import FakeApi
from tests.helpers import config
from tests.unit.test_metrics_upstream import _value

WHOLE = "class.tessera.dev/v100"
HEARTBEAT = "2026-01-01T00:00:00Z"  # the stopped agent's last heartbeat on quiet's devices
AT = datetime.fromisoformat(HEARTBEAT).timestamp()
LATER = "2026-01-01T00:02:30Z"  # served's agent heartbeats on


def _cluster() -> list[dict[str, Any]]:
    objs = [b.node(name, gpus=2) for name in ("quiet", "served", "plain")]
    objs += [b.device("quiet", i, heartbeat=HEARTBEAT) for i in range(2)]
    objs += [b.device("served", i, heartbeat=LATER) for i in range(2)]
    objs += [b.device("plain", i) for i in range(2)]  # no agent: no heartbeat, no gate
    objs += [b.resource_class("v100", match_labels={"model": "V100"}),
             b.pod("p", limits={WHOLE: 1}, spec_extra={"nodeSelector": {"kubernetes.io/hostname": "quiet"}})]
    return objs


def _replay(cfg: SchedulerConfig | None = None) -> Replay:
    replay = Replay(cfg or config(), agent=False)  # no agent allocates: p stays Allocating
    list(replay.run(WatchEvent("ADDED", obj) for obj in _cluster()))
    return replay


def _devices_args(**args: Any) -> SchedulerConfig:
    return parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                         "profiles": [{"schedulerName": "tessera",
                                       "pluginConfig": [{"name": "TesseraDevices", "args": args}]}]}, "test")


def _node(view: m.ClusterView, name: str) -> m.NodeView:
    return next(node for node in view.nodes if node.name == name)


def _reasons(table: str, node: str) -> list[str]:
    """The REASON cells of `node`'s GPU rows in `kubectl tessera nodes`' table."""
    lines = table.split("\n\n")[0].splitlines()
    start = lines[0].index("REASON")
    rows: list[str] = []
    current = ""
    for line in lines[1:]:
        if not line.startswith(" "):
            current = line.split()[0]
        if current == node:
            rows.append(line[start:].strip())
    return rows


def test_a_node_whose_agent_stopped_heartbeating_reads_silent_in_the_view_table_and_json() -> None:
    replay = _replay()
    assert replay.scheduler.state.pods[b.uid_for("Pod", "default", "p")].node_name == "quiet"
    now = AT + 200  # 3m20s after quiet's last heartbeat; 50 s after served's
    assert silent_agents(replay.scheduler, now=now) == {"quiet": 200.0}
    view = build_view(replay.scheduler, source="cluster", now=now)
    quiet = _node(view, "quiet")
    assert quiet.agent_silent_for == 200.0
    assert _node(view, "served").agent_silent_for is None and _node(view, "plain").agent_silent_for is None
    [note] = [note for note in quiet.notes if "node agent" in note]
    assert "3m20s" in note and "agentHeartbeatTimeoutSeconds 90" in note
    # the pod the agent never handed its GPU to
    assert "default/p stays tessera.dev/phase: Allocating until an agent hands out its devices" in note
    assert m.as_dict(view)["nodes"][[n.name for n in view.nodes].index("quiet")]["agent_silent_for"] == 200.0
    table = render_nodes(view)
    assert _reasons(table, "quiet") == ["node agent silent 3m20s", "node agent silent 3m20s"], table
    assert all("agent" not in reason for node in ("served", "plain") for reason in _reasons(table, node)), table
    assert "quiet: node agent silent" in table
    # what the GPUs are shown as does not change: the metric's counts and the summary stay
    assert sorted(gpu.state for gpu in quiet.gpus) == [m.FREE, m.WHOLE]


def test_within_the_timeout_no_agent_is_silent() -> None:
    replay = _replay()
    assert silent_agents(replay.scheduler, now=AT + 60) == {}
    view = build_view(replay.scheduler, source="cluster", now=AT + 60)
    assert all(node.agent_silent_for is None for node in view.nodes)
    assert "silent" not in render_nodes(view)


@pytest.mark.parametrize(("args", "silent"), [
    ({"agentHeartbeatTimeoutSeconds": 300}, {}),  # 200 s is within this timeout
    ({"allocationGate": False}, {"quiet": 200.0}),  # no gate: a stale health is still stale
], ids=["longer-timeout", "gate-off"])
def test_the_timeout_is_the_devices_arg(args: dict[str, Any], silent: dict[str, float]) -> None:
    replay = _replay(_devices_args(**args))
    assert silent_agents(replay.scheduler, now=AT + 200) == silent


@pytest.mark.parametrize("at", [AT + 60, AT + 200, AT + 400])
@pytest.mark.parametrize("cordoned", [(), ("quiet",), ("quiet", "served")])
def test_the_scrapes_gpu_counts_count_the_silent_agents_in_the_same_walk(at: float, cordoned: tuple[str, ...]) -> None:
    """The scrape hook counts the silent agents in `gpu_counts`' one walk over the nodes (it walked
    them a second time for `silent_agents`): the same nodes, cordoned ones left out."""
    replay = _replay()
    for obj in _cluster():
        if obj["kind"] == "Node" and obj["metadata"]["name"] in cordoned:
            list(replay.run([WatchEvent("MODIFIED", {**obj, "spec": {**obj["spec"], "unschedulable": True}})]))
    assert gpu_counts(replay.scheduler, now=at).agents_silent == len(silent_agents(replay.scheduler, now=at))


def test_the_gauge_counts_the_silent_agents_at_each_scrape() -> None:
    api = FakeApi()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t")  # type: ignore[arg-type]
    metrics = Metrics(profiles=["tessera"])
    now = [AT + 60]
    metrics.on_scrape(StateGauges(loop, metrics, clock=lambda: now[0]))
    assert _value(metrics, "tessera_node_agents_silent") == 0  # exported from the first scrape
    for obj in _cluster()[:-1]:
        loop.core.apply("ADDED", obj, AT)
    assert _value(metrics, "tessera_node_agents_silent") == 0
    now[0] = AT + 200
    assert _value(metrics, "tessera_node_agents_silent") == 1
    now[0] = AT + 400  # served's agent stopped too (last heartbeat 250 s ago)
    assert _value(metrics, "tessera_node_agents_silent") == 2
    # the runbook's step while an agent is down: cordon its node. Out of service on purpose, it no
    # longer counts (the alert would never clear during maintenance); `kubectl tessera nodes` still says it
    quiet = next(obj for obj in _cluster() if obj["kind"] == "Node" and obj["metadata"]["name"] == "quiet")
    loop.core.apply("MODIFIED", {**quiet, "spec": {**quiet.get("spec", {}), "unschedulable": True}}, AT + 400)
    assert _value(metrics, "tessera_node_agents_silent") == 1


def test_with_the_gate_off_the_note_does_not_speak_of_the_gate() -> None:
    """Review: the note said "the allocation gate no longer holds here" on a cluster running
    without the gate (`allocationGate: false`), where it never held."""
    view = build_view(_replay(_devices_args(allocationGate=False)).scheduler, source="cluster", now=AT + 200)
    [note] = [note for note in _node(view, "quiet").notes if "node agent" in note]
    assert "allocation gate" not in note and "what it last published" in note
    [gated] = [note for note in _node(build_view(_replay().scheduler, source="cluster", now=AT + 200), "quiet").notes
               if "node agent" in note]
    assert "the allocation gate no longer holds here" in gated


@pytest.mark.parametrize("change", ["heartbeat_removed", "devices_deleted"])
def test_a_node_whose_devices_no_longer_carry_a_heartbeat_is_not_silent(change: str) -> None:
    """An on-call trial: after the ExtendedResources of a node lost their
    `status.lastHeartbeatTime` (published again by something that is not a node agent), or were
    deleted (the agent uninstalled), `tessera_node_agents_silent` stayed 1 for ever: the node kept
    the newest heartbeat ever seen. The node's heartbeat is its current devices' newest."""
    replay = _replay()
    assert set(silent_agents(replay.scheduler, now=AT + 200)) == {"quiet"}
    for i in range(2):
        obj = b.device("quiet", i)  # no heartbeat
        list(replay.run([WatchEvent("DELETED" if change == "devices_deleted" else "MODIFIED", obj)]))
    assert silent_agents(replay.scheduler, now=AT + 200) == {}
    assert gpu_counts(replay.scheduler, now=AT + 200).agents_silent == 0


def test_one_device_losing_its_heartbeat_leaves_the_others_newest() -> None:
    """The node's heartbeat is the newest of its devices that carry one: one device published
    without a heartbeat does not hide the other's (still stale: silent), nor does an older
    heartbeat on one device go back behind a newer one on the other."""
    replay = _replay()
    list(replay.run([WatchEvent("MODIFIED", b.device("quiet", 0))]))
    assert silent_agents(replay.scheduler, now=AT + 200) == {"quiet": 200.0}
    list(replay.run([WatchEvent("MODIFIED", b.device("quiet", 0, heartbeat="2026-01-01T00:02:00Z"))]))
    assert silent_agents(replay.scheduler, now=AT + 200) == {}  # 80 s since device 0's heartbeat
    list(replay.run([WatchEvent("MODIFIED", b.device("quiet", 0))]))
    assert silent_agents(replay.scheduler, now=AT + 200) == {"quiet": 200.0}  # device 1's, again
