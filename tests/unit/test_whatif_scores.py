"""`kubectl tessera what-if` shows how the score of the node it names adds up, as `explain` does
(a known item: what-if printed a total only, and only on a tie, so "why there?" took an explain
per pod). The breakdown is explain's own (`score N = PLUGIN SCORExWEIGHT + ...`), on an indented
line under the pod's row, naming the nodes it would pick among: its node and those tied with it."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from scheduler.kubectl import explain as explaining
from scheduler.sim import builders as b
from scheduler.sim.replay import Replay, WatchEvent
from scheduler.sim.snapshot import replay_order
from tests.helpers import BINPACK, config, what_if_cli


async def _what_if(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], objs: list[dict[str, Any]],
                   *argv: str) -> str:
    status, out, _ = await what_if_cli(monkeypatch, capsys, objs, *argv)
    assert status == 0
    return out


def _explained(objs: list[dict[str, Any]], node: str) -> explaining.NodeVerdict:
    """explain's verdict on `node` in the dry run of default/p: the breakdown what-if must repeat."""
    result = explaining.explain(objs, "default/p", config(BINPACK), [], 0.0)
    assert result is not None and result.dry_run is not None
    [verdict] = [v for v in result.dry_run.nodes if v.node == node]
    assert verdict.detail.startswith("score ") and " = " in verdict.detail
    return verdict


async def test_what_if_prints_the_breakdown_of_its_nodes_score(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    objs = [b.node("n1", gpus=4), b.node("n2", gpus=4),
            b.pod("running", node_name="n1", limits={"nvidia.com/gpu": 1}, phase="Running"),
            b.pod("p", limits={"nvidia.com/gpu": 1})]
    lines = (await _what_if(monkeypatch, capsys, objs)).splitlines()
    assert lines[1].split()[:2] == ["default/p", "n1"]
    verdict = _explained(objs, "n1")
    assert lines[2] == f"  n1: {verdict.detail}"
    doc = orjson.loads(await _what_if(monkeypatch, capsys, objs, "-o", "json"))["outcomes"][0]
    [scored] = doc["scored"]
    assert scored["node"] == "n1" and scored["total"] == doc["score"]
    assert scored["scores"] == [{"plugin": p.plugin, "score": p.score, "weight": p.weight} for p in verdict.scores]


async def test_what_if_names_the_tied_nodes_that_add_up_alike_on_one_line(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    objs = [b.node("n1", gpus=4), b.node("n2", gpus=4), b.node("n3", gpus=4), b.pod("p", limits={"nvidia.com/gpu": 1})]
    lines = (await _what_if(monkeypatch, capsys, objs)).splitlines()
    node = lines[1].split()[1]
    assert "tied with 2 other nodes" in lines[1]
    others = sorted({"n1", "n2", "n3"} - {node})
    assert lines[2] == f"  {', '.join([node, *others])}: {_explained(objs, node).detail}"


async def test_what_if_prints_no_breakdown_where_one_node_was_scored_or_none(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """One feasible node is no choice (upstream scores only when more than one fits); a pod left
    pending has no node: neither gets a breakdown line, and `score` stays null."""
    objs = [b.node("n1", gpus=4), b.pod("p", limits={"nvidia.com/gpu": 1}),
            b.pod("big", limits={"nvidia.com/gpu": 8})]
    out = await _what_if(monkeypatch, capsys, objs)
    assert "score" not in out
    docs = orjson.loads(await _what_if(monkeypatch, capsys, objs, "-o", "json"))["outcomes"]
    assert [(d["score"], d["scored"]) for d in docs] == [(None, []), (None, [])]


def test_the_breakdown_keeps_the_picked_nodes_scores_alone_and_the_same_decisions() -> None:
    """what-if's replay keeps each plugin's part for the nodes a pick was among only (its node and
    the tied ones named), not explain's table of every scored node per pod: that doubled a large
    what-if's time and took 18 times its memory (2,000 nodes, 3,000 pods). Its decisions, ties
    and totals are a plain run's."""
    objs = [b.node(f"n{i}", gpus=4) for i in range(12)] + [b.node(f"big{i}", gpus=8) for i in range(3)]
    objs += [b.pod(f"r{i}", node_name=f"n{i}", limits={"nvidia.com/gpu": 1 + i % 3}, phase="Running")
             for i in range(6)]
    objs += [b.pod(f"p{i}", limits={"nvidia.com/gpu": 1 + i % 4}) for i in range(20)]
    runs = {}
    for breakdown in (False, True):
        replay = Replay(config(BINPACK), breakdown=breakdown)
        for _ in replay.run_listing(WatchEvent("ADDED", obj) for obj in replay_order(objs)):
            pass
        runs[breakdown] = replay.stats.final
    assert ({key: (a.node, a.tied, a.tied_count, a.score) for key, a in runs[False].items()}
            == {key: (a.node, a.tied, a.tied_count, a.score) for key, a in runs[True].items()})
    assert all(a.scores is None for a in runs[False].values())
    picked = [a for a in runs[True].values() if a.node and a.score is not None]
    assert picked and any(a.tied for a in picked)
    for attempt in picked:
        assert attempt.scores is not None and set(attempt.scores) == {attempt.node, *attempt.tied}
