"""A replay whose input over-commits a node says so, once per node, on stderr (issue 10, part 3.4):
pods that arrive bound count wherever they are, so a file listing a pending pod before the bound
pods of a full node (or bound pods beyond allocatable) cannot show the cluster as it was."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from scheduler.sim import builders as b
from scheduler.sim.replay import Replay, WatchEvent
from scheduler.sim.report import run_simulation
from scheduler.view.cluster import build_view
from tests.helpers import Run, config


def _events() -> list[dict[str, object]]:
    objects = [b.node("n", gpus=4), b.node("m", gpus=2, cpu="2"),
               b.pod("aa-pending", limits={"nvidia.com/gpu": 2},  # placed on n before n's bound pods arrive
                     spec_extra={"nodeSelector": {"kubernetes.io/hostname": "n"}})]
    objects += [b.pod(f"on-n-{i}", limits={"nvidia.com/gpu": 1}, node_name="n", phase="Running") for i in range(4)]
    objects += [b.pod(f"on-m-{i}", requests={"cpu": "1"}, limits={"nvidia.com/gpu": 1}, node_name="m", phase="Running")
                for i in range(3)]  # hand-written: three bound pods on a 2-GPU, 2-CPU node
    return [b.event("ADDED", obj) for obj in objects]


def test_over_capacity_is_noted_once_per_node() -> None:
    run = Run(config())
    run.feed(*_events())
    assert run.node_of("aa-pending") == "n"
    assert run.replay.stats.over_capacity == {
        "n": "nvidia.com/gpu 6 used > 4 allocatable",
        "m": "cpu 3 used > 2 allocatable, nvidia.com/gpu 3 used > 2 allocatable",
    }


def test_simulate_prints_one_clear_line_per_over_committed_node(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in _events()))
    assert run_simulation(str(path), config(), explain=False, output="json", seed=0) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if "over its capacity" in line]
    assert lines == [
        "tessera: warning: node n is over its capacity: nvidia.com/gpu 6 used > 4 allocatable (pods in the input "
        "are bound beyond what the node offers, so this replay does not match the cluster; record bound pods "
        "before pending ones)",
        "tessera: warning: node m is over its capacity: cpu 3 used > 2 allocatable, nvidia.com/gpu 3 used > 2 "
        "allocatable (pods in the input are bound beyond what the node offers, so this replay does not match "
        "the cluster; record bound pods before pending ones)",
    ]


def test_a_node_within_capacity_is_not_reported() -> None:
    run = Run(config())
    run.add(b.node("n", gpus=4), b.node("m", gpus=2), b.pod("pending", limits={"nvidia.com/gpu": 2}))
    run.add(*(b.pod(f"on-n-{i}", limits={"nvidia.com/gpu": 1}, node_name="n", phase="Running") for i in range(2)))
    assert run.state.nodes["n"].used("nvidia.com/gpu") + run.state.nodes["m"].used("nvidia.com/gpu") == 4
    assert run.replay.stats.over_capacity == {}


def _diverging_recording() -> list[dict[str, object]]:
    """A new user's trial: recorded while the live scheduler worked. big-0 is deleted, the live
    scheduler binds wants-8 to the freed node; the replay, trying wants-3 first, had put it there."""
    big = b.pod("big-0", limits={"nvidia.com/gpu": 8}, node_name="n", phase="Running")
    wants3 = b.pod("wants-3", limits={"nvidia.com/gpu": 3}, created="2026-01-01T00:00:01Z")
    wants8 = b.pod("wants-8", limits={"nvidia.com/gpu": 8}, created="2026-01-01T00:00:02Z")
    bound8 = b.pod("wants-8", limits={"nvidia.com/gpu": 8}, created="2026-01-01T00:00:02Z", node_name="n", phase="Running")
    devices = [b.event("ADDED", b.device("n", i)) for i in range(8)]  # a node agent's: the core checks overcommit
    return [b.event("ADDED", b.node("n", gpus=8)), *devices, b.event("ADDED", big), b.event("ADDED", wants3),
            b.event("ADDED", wants8), b.event("DELETED", big), b.event("MODIFIED", bound8)]


def test_a_recording_that_binds_where_the_replay_placed_another_pod_says_the_replay_diverged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in _diverging_recording()))
    assert run_simulation(str(path), config(), explain=False, output="json", seed=0) == 0
    err = capsys.readouterr().err
    assert "tessera: warning: node n is over its capacity: nvidia.com/gpu 11 used > 8 allocatable (the recording " \
           "binds default/wants-8 there, where this replay had placed default/wants-3: the live scheduler decided " \
           "otherwise, and from here on the replay does not match the cluster)" in err.splitlines()
    # every pod is Tessera's: the live warning that blames other schedulers would mislead here
    assert "GPUsOvercommitted" not in err and "record bound pods before pending ones" not in err


def _simulate(tmp_path: Path, events: list[dict[str, object]], capsys: pytest.CaptureFixture[str]) -> list[str]:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    assert run_simulation(str(path), config(), explain=False, output="json", seed=0) == 0
    return capsys.readouterr().err.splitlines()


def test_a_recorded_binding_to_another_node_than_the_replays_is_the_replay_diverging(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The usual divergence (a review): the replay had bound both pods, to the other nodes."""
    nodes = [b.event("ADDED", obj) for name in ("n1", "n2")
             for obj in (b.node(name, gpus=4), *(b.device(name, i) for i in range(4)))]
    p = b.pod("p", limits={"nvidia.com/gpu": 4})
    q = b.pod("q", limits={"nvidia.com/gpu": 4})
    run = Run(config())
    run.feed(*nodes, b.event("ADDED", p), b.event("ADDED", q))
    live = {"p": run.node_of("q"), "q": run.node_of("p")}  # the live scheduler chose the other way round
    assert set(live.values()) == {"n1", "n2"}
    recorded = [b.event("MODIFIED", b.pod(name, limits={"nvidia.com/gpu": 4}, node_name=str(live[name]), phase="Running"))
                for name in ("p", "q")]
    err = _simulate(tmp_path, [*nodes, b.event("ADDED", p), b.event("ADDED", q), *recorded], capsys)
    over = [line for line in err if "over its capacity" in line]
    assert over and all("where this replay had placed" in line for line in over), err
    assert not any("GPUsOvercommitted" in line or "record bound pods" in line for line in err), err


def test_another_schedulers_binding_keeps_the_overcommit_warning(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Not a divergence (a review): kube-scheduler binds a plain-GPU pod where Tessera's class
    pod holds every GPU; the warning that names other schedulers is the right one."""
    events = [b.event("ADDED", b.node("n", gpus=8)), *(b.event("ADDED", b.device("n", i)) for i in range(8)),
              b.event("ADDED", b.resource_class("v100", match_labels={"model": "V100"})),
              b.event("ADDED", b.pod("t", limits={"class.tessera.dev/v100": 8})),
              b.event("ADDED", b.pod("o", scheduler="default-scheduler", limits={"nvidia.com/gpu": 1})),
              b.event("MODIFIED", b.pod("o", scheduler="default-scheduler", limits={"nvidia.com/gpu": 1},
                                        node_name="n", phase="Running"))]
    err = _simulate(tmp_path, events, capsys)
    assert any("GPUsOvercommitted" in line and "pods of other schedulers" in line for line in err), err
    assert not any("where this replay had placed" in line for line in err), err


def test_the_gpu_map_of_a_diverged_replay_says_so_on_the_node() -> None:
    """A review: stderr said the replay diverged while the page's node note still blamed other schedulers."""
    replay = Replay(config())
    list(replay.run(WatchEvent(str(e["type"]), e["object"]) for e in _diverging_recording()))  # type: ignore[arg-type]
    [node] = build_view(replay.scheduler, source="simulate", now=replay.now, diverged=replay.stats.diverged).nodes
    assert node.notes == ("nvidia.com/gpu overcommitted: 11 in use, 8 allocatable (the recording binds "
                          "default/wants-8 there, where this replay had placed default/wants-3: the replay "
                          "diverged from the cluster here)",
                          # the views' own note on the plain-count pod shown on no GPU (58b7935)
                          "default/wants-8: 3 nvidia.com/gpu counted beyond the node's GPUs (shown on none)")


@pytest.mark.parametrize("devices", [False, True])
def test_a_replay_says_an_over_committed_node_once_in_a_replays_words(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], devices: bool) -> None:
    """A capacity planner's trial: next to `node n is over its capacity: nvidia.com/gpu 10 used > 8
    allocatable (...)` the replay printed the live scheduler's `GPUsOvercommitted: node n has 9 ...`,
    which blames a cut device-plugin count or an earlier leader's late Binding — neither exists in a
    replay, where the input's bound pods are the cause (as the first line says)."""
    objects = [b.node("n", gpus=8), *(b.device("n", i) for i in range(8) if devices),
               b.pod("aa", limits={"nvidia.com/gpu": 2}, spec_extra={"nodeSelector": {"kubernetes.io/hostname": "n"}})]
    objects += [b.pod(f"on-n-{i}", limits={"nvidia.com/gpu": 1}, node_name="n", phase="Running") for i in range(8)]
    err = _simulate(tmp_path, [b.event("ADDED", obj) for obj in objects], capsys)
    assert [line for line in err if "node n" in line] == [
        "tessera: warning: node n is over its capacity: nvidia.com/gpu 10 used > 8 allocatable (pods in the input "
        "are bound beyond what the node offers, so this replay does not match the cluster; record bound pods "
        "before pending ones)"]
