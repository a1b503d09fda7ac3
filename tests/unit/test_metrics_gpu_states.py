"""`tessera_devices{state}` counts the GPUs `kubectl tessera nodes` shows, in the view's states.

A new user's trial, with one ExtendedResource patched `spec.unschedulable: true` and a node
cordoned: `kubectl tessera nodes` said `32 total, 19 in use (1 shared), 5 free, 8 unavailable`
while /metrics said free 12 (the cordoned node's GPUs), unhealthy 1 (the healthy cordoned
device), and had no series at all for a GPU two pods claim or a fenced node's GPUs. The metric
is now the view's count: one set of states, the summary's numbers.

The cluster is built the way the scheduler builds it: watch events replayed through the core.
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from scheduler.core import annotations as ann
from scheduler.kube.metrics import Metrics
from scheduler.sim import builders as b
from scheduler.sim.replay import Replay, WatchEvent
from scheduler.view import model as m
from scheduler.view.cluster import build_view, gpu_counts
from tests.helpers import config
from tests.unit.test_view_fences_and_conflicts import CLASS, _bound, _grant

SHARED = "class.tessera.dev/v100-shared"


def _pinned(name: str, node: str, limits: dict[str, str | int]) -> dict[str, Any]:
    return b.pod(name, limits=limits, spec_extra={"nodeSelector": {"kubernetes.io/hostname": node}})


def _cluster() -> Replay:
    """A cordoned node (2 free GPUs), a node with a GPU two pods claim, one held whole, one an
    admin cordoned (`spec.unschedulable`, healthy) and one unhealthy; a node fenced by a pod
    whose device annotation was made unreadable (the GPU it held stays held); a node with a sliced GPU, one counted GPU and a free one."""
    n = [b.device("n", i, healthy=i != 3, unschedulable=i == 2) for i in range(4)]
    objs: list[dict[str, Any]] = [
        b.node("cordoned", gpus=2, unschedulable=True), *(b.device("cordoned", i) for i in range(2)),
        b.node("n", gpus=4), *n,
        b.node("f", gpus=2), *(b.device("f", i) for i in range(2)),
        b.node("s", gpus=3), *(b.device("s", i) for i in range(3)),
        b.resource_class("v100", match_labels={"model": "V100"}),
        b.resource_class("v100-shared", match_labels={"model": "V100"}, sharing={"dimension": "memory", "unit": "1Gi"}),
        _pinned("bad", "f", {CLASS: 1}),
        _pinned("sliced", "s", {SHARED: 8}), _bound("plain", "s", {"nvidia.com/gpu": 1}),
    ]
    objs += [_bound(name, "n", {CLASS: 1}, {ann.DEVICES: _grant(n[i]), ann.PHASE: ann.PHASE_ALLOCATED})
             for name, i in (("a", 0), ("b", 1), ("c", 0))]
    replay = Replay(config(), agent=False)
    list(replay.run(WatchEvent("ADDED", obj) for obj in objs))
    bad = copy.deepcopy(replay.pods[b.uid_for("Pod", "default", "bad")])
    assert bad["spec"]["nodeName"] == "f"
    bad["metadata"]["annotations"][ann.DEVICES] = "{not json"
    list(replay.run([WatchEvent("MODIFIED", bad)]))
    return replay


def _samples(metrics: Metrics, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    text = generate_latest(metrics.registry).decode()
    return {tuple(sorted(s.labels.items())): s.value for f in text_string_to_metric_families(text)
            for s in f.samples if s.name == name}


def test_the_metric_counts_the_views_gpu_states_and_agrees_with_its_summary() -> None:
    replay = _cluster()
    view = build_view(replay.scheduler, source="simulate", now=replay.now)
    metrics = Metrics()
    metrics.set_gpus(gpu_counts(replay.scheduler, now=replay.now))
    states = {dict(labels)["state"]: value for labels, value in _samples(metrics, "tessera_devices").items()}

    assert set(states) == set(m.STATES)  # every state the views name, 0 included, and no other
    # the fenced node's pod held one GPU before its annotation was made unreadable: that GPU stays
    # held (whole) while the pod lives (an edit moves no hold), the node's other GPU is fenced
    assert states == {"free": 1, "whole": 2, "slices": 1, "counted": 1, "gated": 0, "conflict": 1,
                      "fenced": 1, "unhealthy": 1, "cordoned": 3, "ghost": 0}
    summary = view.summary
    assert sum(states.values()) == summary.gpus
    assert sum(states[s] for s in m.IN_USE) == summary.used
    assert states[m.SLICES] == summary.shared
    assert states[m.FREE] == summary.free
    assert sum(states[s] for s in m.UNAVAILABLE) == summary.unavailable
    assert states[m.CONFLICT] == summary.conflicts
    assert summary.line().startswith("GPUs: 11 total, 5 in use (1 shared), 1 free, 5 unavailable, "
                                     "1 GPU claimed by more than one pod")
    # per GPU: the state `kubectl tessera nodes` lists, but a free GPU of a cordoned node is cordoned
    per_gpu = Counter(m.counted_as(gpu.state, node.cordoned) for node in view.nodes for gpu in node.gpus)
    assert {s: int(v) for s, v in states.items() if v} == dict(per_gpu)

    by_model = _samples(metrics, "tessera_devices_by_model")
    assert {dict(labels)["model"] for labels in by_model} == {"V100"}
    assert {dict(labels)["state"]: v for labels, v in by_model.items()} == states


def test_a_state_that_empties_reads_zero_and_a_model_that_leaves_goes() -> None:
    """A full snapshot each scrape: a conflict resolved reads 0 (an alert on it clears), not its last value."""
    replay = _cluster()
    metrics = Metrics()
    metrics.set_gpus(gpu_counts(replay.scheduler, now=replay.now))
    list(replay.run([WatchEvent("DELETED", _bound("c", "n", {CLASS: 1}))]))
    metrics.set_gpus(gpu_counts(replay.scheduler, now=replay.now))
    states = {dict(labels)["state"]: value for labels, value in _samples(metrics, "tessera_devices").items()}
    assert (states["conflict"], states["whole"]) == (0, 3)
    metrics.set_gpus(gpu_counts(Replay(config(), agent=False).scheduler, now=0.0))
    assert _samples(metrics, "tessera_devices_by_model") == {}
    assert set(_samples(metrics, "tessera_devices").values()) == {0}


def test_gpus_held_beyond_a_nodes_capacity_are_counted() -> None:
    """Pods of another scheduler hold 3 GPUs of a 1-GPU node: the view notes it per node
    ("nvidia.com/gpu overcommitted: 3 in use, 1 allocatable"), and /metrics had nothing for it."""
    replay = Replay(config(), agent=False)
    objs = [b.node("o", gpus=1), b.device("o", 0), b.node("ok", gpus=1), b.device("ok", 0),
            _bound("x", "o", {"nvidia.com/gpu": 2}), _bound("y", "o", {"nvidia.com/gpu": 1})]
    list(replay.run(WatchEvent("ADDED", obj) for obj in objs))
    view = build_view(replay.scheduler, source="simulate", now=replay.now)
    node = next(node for node in view.nodes if node.name == "o")
    assert node.over_capacity == (m.OverCapacity("nvidia.com/gpu", 3, 1),)
    assert any("nvidia.com/gpu overcommitted: 3 in use, 1 allocatable" in note for note in node.notes)
    metrics = Metrics()
    assert _samples(metrics, "tessera_gpus_overcommitted") == {(): 0}
    metrics.set_gpus(gpu_counts(replay.scheduler, now=replay.now))
    assert _samples(metrics, "tessera_gpus_overcommitted") == {(): 2}


def test_a_gpu_under_two_names_counts_once_and_rows_beyond_a_nodes_count_not_at_all() -> None:
    """The summary counts a node's GPUs (`NodeView.gpus_total`): one deviceID under two
    ExtendedResource names once, and rows beyond the node's allocatable count not at all. The
    metric counted rows: its states summed to more GPUs than the summary's total (5 against 4
    here: the second name's row cordoned, the third ExtendedResource of a 2-GPU node fenced)."""
    d0 = b.device("dup", 0)
    renamed = copy.deepcopy(d0)
    renamed["metadata"].update(name="dup.renamed", uid="dup.renamed-uid")
    objs = [b.node("dup", gpus=2), d0, renamed, b.device("dup", 1),
            b.node("over", gpus=2), *(b.device("over", i) for i in range(3))]
    replay = Replay(config(), agent=False)
    list(replay.run(WatchEvent("ADDED", obj) for obj in objs))
    view = build_view(replay.scheduler, source="simulate", now=replay.now)
    assert len([gpu for node in view.nodes for gpu in node.gpus]) == 6  # rows
    summary = view.summary
    assert (summary.gpus, summary.free, summary.unavailable) == (4, 3, 1)
    metrics = Metrics()
    metrics.set_gpus(gpu_counts(replay.scheduler, now=replay.now))
    states = {dict(labels)["state"]: int(value) for labels, value in _samples(metrics, "tessera_devices").items()}
    assert sum(states.values()) == summary.gpus
    assert states[m.FREE] == summary.free
    assert sum(states[s] for s in m.UNAVAILABLE) == summary.unavailable
    # the duplicate is one GPU (cordoned: neither name is given out); the surplus row is no GPU
    assert {s: v for s, v in states.items() if v} == {"free": 3, "cordoned": 1}


def test_the_nodes_table_shows_a_cordoned_nodes_free_gpus_as_the_metric_counts_them() -> None:
    """A day-2 trial: after a cordon the `nodes` table said `free` on 5 rows while its summary said
    "2 free, 5 unavailable" and `tessera_devices` counted them `cordoned`. The table's STATE is now
    the state the summary and the metric count: `cordoned`, REASON `node cordoned`."""
    from scheduler.view.text import render_nodes

    replay = _cluster()
    view = build_view(replay.scheduler, source="simulate", now=replay.now)
    metrics = Metrics()
    metrics.set_gpus(gpu_counts(replay.scheduler, now=replay.now))
    states = {dict(labels)["state"]: int(v) for labels, v in _samples(metrics, "tessera_devices").items() if v}
    lines = render_nodes(view).splitlines()
    header = lines[0]
    start = header.index("STATE")
    rows = [line for line in lines[1:lines.index("")] if line[start:].split()]
    shown = Counter(line[start:].split()[0] for line in rows)
    assert dict(shown) == states
    [cordoned_node] = [line for line in rows if line.startswith("cordoned (cordoned)")]
    assert cordoned_node[start:].split()[0] == "cordoned" and cordoned_node.rstrip().endswith("node cordoned")


def test_gpus_held_beyond_the_count_of_a_node_without_devices_are_counted() -> None:
    """A day-2 trial: an 8-GPU node with no ExtendedResources, 10 GPUs held by its pods; and a node
    whose count was cut from 4 to 1 under 3 in use: the gauge said 0 for both (it read only nodes
    with devices), so TesseraGPUOvercommitted never fired."""
    replay = Replay(config(), agent=False)
    objs = [b.node("plain", gpus=8), _bound("x", "plain", {"nvidia.com/gpu": 6}), _bound("y", "plain", {"nvidia.com/gpu": 4}),
            b.node("cut", gpus=4), _bound("z", "cut", {"nvidia.com/gpu": 3}), b.node("cpu"), _bound("c", "cpu", {"cpu": 1})]
    list(replay.run(WatchEvent("ADDED", obj) for obj in objs))
    list(replay.run([WatchEvent("MODIFIED", b.node("cut", gpus=1))]))
    metrics = Metrics()
    metrics.set_gpus(gpu_counts(replay.scheduler, now=replay.now))
    assert _samples(metrics, "tessera_gpus_overcommitted") == {(): 2 + 2}
