"""Dry runs that present a tie-break as a prediction (a docs-as-contract trial): `what-if` and
`explain` named one node while the live scheduler picked another in 3 of 3 tries, because several
nodes tied on the total score and the pick among equals is random (kube-scheduler:
pkg/scheduler/schedule_one.go, a `Randomizer` per node breaks equal `TotalScore`s; Tessera's live
loop seeds its tie-break afresh per process, scheduler/kube/loop.py). The output must say so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from scheduler.api.config import load_config
from scheduler.kubectl import explain as explaining
from scheduler.kubectl import whatif
from scheduler.kubectl.output import dump
from scheduler.sim import builders as b
from scheduler.sim import report
from tests.helpers import BINPACK, config


def _tied_cluster() -> list[dict[str, Any]]:
    """Three empty, identical 4-GPU nodes and one pending 1-GPU pod: every node scores the same."""
    return [b.node("n1", gpus=4), b.node("n2", gpus=4), b.node("n3", gpus=4),
            b.pod("p", limits={"nvidia.com/gpu": 1})]


def _untied_cluster() -> list[dict[str, Any]]:
    """n1 already runs a pod: binpack prefers it alone."""
    return [b.node("n1", gpus=4), b.node("n2", gpus=4),
            b.pod("running", node_name="n1", limits={"nvidia.com/gpu": 1}, phase="Running"),
            b.pod("p", limits={"nvidia.com/gpu": 1})]


def test_what_if_says_when_its_node_tied_with_others() -> None:
    result = whatif.what_if(_tied_cluster(), config(BINPACK), 0.0)
    [outcome] = result.outcomes
    others = sorted({"n1", "n2", "n3"} - {outcome.node})
    assert outcome.tied_with == tuple(others) and outcome.score is not None
    text = whatif.render(result)
    assert (f"placed; tied with 2 other nodes on score {outcome.score} ({', '.join(others)}): "
            "the scheduler picks one of them at random") in text
    doc = orjson.loads(dump(whatif.as_dict(result), "json"))["outcomes"][0]
    assert doc["tied_with"] == others and doc["score"] == outcome.score


def test_what_if_without_a_tie_says_nothing_of_one() -> None:
    result = whatif.what_if(_untied_cluster(), config(BINPACK), 0.0)
    [outcome] = result.outcomes
    assert outcome.node == "n1" and outcome.tied_with == ()
    assert "tied" not in whatif.render(result)


def test_explain_says_when_where_it_would_go_is_a_tie() -> None:
    result = explaining.explain(_tied_cluster(), "default/p", config(BINPACK), [], 0.0)
    assert result is not None and result.dry_run is not None
    run = result.dry_run
    others = sorted({"n1", "n2", "n3"} - {run.node})
    assert run.tied_with == tuple(others)
    text = explaining.render(result, 0.0)
    assert (f"  would go to {run.node}; tied with 2 other nodes on score {run.score} ({', '.join(others)}): "
            "the scheduler picks one of them at random\n") in text
    doc = orjson.loads(dump(explaining.as_dict(result), "json"))["dry_run"]
    assert doc["tied_with"] == others
    plain = explaining.explain(_untied_cluster(), "default/p", config(BINPACK), [], 0.0)
    assert plain is not None and plain.dry_run is not None and plain.dry_run.tied_with == ()
    assert "tied" not in explaining.render(plain, 0.0)


def test_simulate_explain_lines_name_the_nodes_the_choice_tied_with(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = tmp_path / "e.jsonl"
    events.write_bytes(b"\n".join(orjson.dumps(b.event("ADDED", obj)) for obj in _tied_cluster()) + b"\n")
    report.run_simulation(str(events), load_config(BINPACK), explain=True, output="json", seed=0)
    [line] = [orjson.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    assert line["tiedWith"] == sorted({"n1", "n2", "n3"} - {line["node"]})


def test_a_tie_among_many_nodes_is_counted_and_names_only_a_few() -> None:
    """The before-stop read: every attempt built the names of all the nodes it tied with — on a
    cluster of identical empty nodes hundreds per decision, in the live loop too, which never shows
    them — and the note would list them all. The count is kept; a few are named (TIED_NAMED)."""
    from scheduler.core.cycle import TIED_NAMED

    nodes = [b.node(f"n{i:02d}", gpus=4) for i in range(TIED_NAMED + 4)]
    result = whatif.what_if([*nodes, b.pod("p", limits={"nvidia.com/gpu": 1})], config(BINPACK), 0.0)
    [outcome] = result.outcomes
    assert outcome.tied_count == TIED_NAMED + 3 and len(outcome.tied_with) == TIED_NAMED
    assert set(outcome.tied_with) < {f"n{i:02d}" for i in range(TIED_NAMED + 4)} - {outcome.node}
    assert (f"placed; tied with {TIED_NAMED + 3} other nodes on score {outcome.score} "
            f"({', '.join(outcome.tied_with)}, …): the scheduler picks one of them at random") in whatif.render(result)
    doc = orjson.loads(dump(whatif.as_dict(result), "json"))["outcomes"][0]
    assert doc["tied_count"] == TIED_NAMED + 3
