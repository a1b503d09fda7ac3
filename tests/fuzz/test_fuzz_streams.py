"""Fuzzing of event streams: the core's `apply`/`schedule_next`, `Replay.run`, and `tessera simulate`.

Streams mix every kind of odd object (strategies.py) with apiserver-valid foreign pods whose load is
modelled independently (harness.py), and are then disordered the ways watch streams are:
duplicates, reordering, DELETED before ADDED, relists, unknown kinds and event types, objects that
are not JSON objects. After every stream the good node/pods must still schedule and deleting
everything must leave nothing behind.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from scheduler.cli import main as cli_main
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b
from tests.fuzz import strategies as S
from tests.fuzz.harness import CONFIGS, GOOD_NODE, REPO, Harness, check_notice, configs, foreign_pods, good_objects
from tests.fuzz.tally import tried

Event = tuple[Any, Any]


@st.composite
def disordered(draw: st.DrawFn, events: list[Event]) -> list[Event]:
    """Duplicates, swaps, early DELETEDs and a relist-like replay of a prefix."""
    out = list(events)
    for _ in range(draw(st.integers(0, 4))):
        if not out:
            break
        action = draw(st.sampled_from(("duplicate", "swap", "delete-early", "relist")))
        i = draw(st.integers(0, len(out) - 1))
        if action == "duplicate":
            out.insert(draw(st.integers(i, len(out))), out[i])
        elif action == "swap" and i + 1 < len(out):
            out[i], out[i + 1] = out[i + 1], out[i]
        elif action == "delete-early":
            out.insert(draw(st.integers(0, i)), ("DELETED", out[i][1]))
        elif action == "relist":
            out.extend(("ADDED", obj) for _, obj in out[: i + 1])
    return out


@st.composite
def streams(draw: st.DrawFn, max_size: int = 14) -> list[Event]:
    events = draw(st.lists(st.tuples(S.event_types, S.any_objects()), max_size=max_size))
    return draw(disordered(events))


@S.fuzz_settings(60)
@S.known_example("F1", config="binpack", foreign=[], stream=[("ADDED", [1])], positions=[])
@given(config=configs, foreign=foreign_pods(), stream=streams(), positions=st.lists(st.integers(0, 30), max_size=4))
def test_event_streams(config: str, foreign: list[Any], stream: list[Event], positions: list[int]) -> None:
    """Nothing raises out of Replay.run; decisions respect capacity (also against the modelled
    foreign pods) and device exclusivity; the ledger stays consistent; the good pair schedules;
    deleting everything leaves an empty cache."""
    tried()
    h = Harness(CONFIGS[config])
    h.base_cluster()
    inserts = {min(p, len(stream)): f for p, f in zip(positions, foreign)}
    extra = foreign[len(positions):]
    for f in extra:
        h.add_foreign(f)
    for i, (event_type, obj) in enumerate(stream):
        if i in inserts:
            h.add_foreign(inserts.pop(i))
        h.send(event_type, obj)
    for f in inserts.values():
        h.add_foreign(f)
    h.finish()


@S.fuzz_settings(60)
@S.known_example("F1", events=[("ADDED", [1])], times=[0.0] * 10)
@example(events=[("ERROR", {"kind": "Status", "code": 410}), ("BOOKMARK", {"kind": "Pod", "metadata": {"resourceVersion": "9"}})],
         times=[0.0] * 10)
@given(events=st.lists(st.tuples(S.event_types | S.odd_values, S.any_objects()), max_size=10),
       times=st.lists(st.floats(0, 1e6), min_size=10, max_size=10))
def test_scheduler_apply_and_schedule_next_directly(events: list[Event], times: list[float]) -> None:
    """The live loop's contract: `apply(event_type, obj, now)` for any event type and any object,
    then `schedule_next(now)` until None — nothing raises, every notice is well formed."""
    tried()
    scheduler = Scheduler(CONFIGS["binpack"])
    now = 0.0
    for (event_type, obj), step in zip(events, sorted(times)):
        now = max(now, step)
        for notice in scheduler.apply(event_type, obj, now):
            check_notice(notice)
        for _ in range(1000):
            attempts = scheduler.schedule_next(now)
            if attempts is None:
                break
        else:
            raise AssertionError("schedule_next never returns None")


# --- tessera simulate on random JSONL ------------------------------------------------------------


def _encode(value: Any) -> bytes:
    return json.dumps(S.clean(value), allow_nan=True).encode()


@st.composite
def jsonl_lines(draw: st.DrawFn) -> tuple[bytes, str]:
    """(line, what it is): an event, a non-event JSON value, partial JSON or bytes garbage."""
    kind = draw(st.sampled_from(("event", "event", "event", "non-event", "partial", "bytes")))
    if kind == "event":
        obj = draw(S.cluster_objects)
        return _encode({"type": draw(st.sampled_from(("ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"))),
                        "object": obj}), "event"
    if kind == "non-event":
        value = draw(S.json_values | st.fixed_dictionaries({"type": S.odd_values, "object": S.odd_values}))
        if isinstance(value, dict) and isinstance(value.get("type"), str) and isinstance(value.get("object"), dict):
            return _encode(value), "event"
        return _encode(value), "non-event"
    if kind == "partial":
        text = _encode({"type": "ADDED", "object": draw(S.cluster_objects)})
        return text[: draw(st.integers(1, max(1, len(text) - 1)))], "partial"
    return draw(st.binary(min_size=1, max_size=40).filter(lambda raw: b"\n" not in raw)), "bytes"


def _run_cli(args: list[str]) -> tuple[int, str, str]:
    out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(args)
        sys.stdout.flush()
        sys.stderr.flush()
    return code, out.buffer.getvalue().decode(), err.buffer.getvalue().decode()


def _is_json(line: bytes) -> bool:
    try:
        orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return True


_F6_LINES = [(orjson.dumps(b.event("ADDED", b.node("n"))), "event"),
             (orjson.dumps(b.event("ADDED", {**b.pod("p", requests={"cpu": "1"}), "status": {"conditions": "x"}})), "event")]


@S.fuzz_settings(40)
@S.known_example("F6", lines=_F6_LINES, good_last=False)
@given(lines=st.lists(jsonl_lines(), max_size=12), good_last=st.booleans())
def test_simulate_on_random_jsonl(lines: list[tuple[bytes, str]], good_last: bool) -> None:
    """`tessera simulate` (in process): exit 0 with the first unreadable lines reported on stderr
    by number (the rest counted), or — when no line is a watch event, or there is none — exit 2
    with one line; one
    JSON decision per stdout line, and the good pod at the end is placed."""
    tried()
    body = [line for line, _ in lines]
    cluster, good = good_objects()
    if good_last:
        body += [orjson.dumps(b.event("ADDED", obj)) for obj in cluster + good]
    with tempfile.NamedTemporaryFile("wb", suffix=".jsonl", delete=False) as handle:
        handle.write(b"\n".join(body) + b"\n")
    try:
        code, stdout, stderr = _run_cli(["simulate", handle.name])
    finally:
        os.unlink(handle.name)
    assert "Traceback" not in stderr
    unreadable: list[str] = []
    events = 0
    for number, line in enumerate(body, start=1):
        if number == 1:
            line = line.removeprefix(b"\xef\xbb\xbf")
        if not line.strip():
            continue
        if not _is_json(line):
            unreadable.append(f"line {number}: not JSON")
            continue
        doc = orjson.loads(line)
        if isinstance(doc, dict) and isinstance(doc.get("type"), str) and isinstance(doc.get("object"), dict):
            events += 1
        else:
            unreadable.append(f"line {number}: not a watch event")
    if not events:  # nothing to replay: unreadable lines, or none at all
        assert code == 2 and stdout == "", stderr
        assert stderr.count("\n") == 1 and "contains no watch events" in stderr, stderr
        assert (unreadable[0] if unreadable else "(it is empty)") in stderr, stderr
        return
    assert code == 0, stderr
    for said in unreadable[:10]:
        assert said in stderr, (said, stderr)
    if len(unreadable) > 10:
        assert f"{len(unreadable) - 10} more unreadable lines" in stderr
    decisions = [orjson.loads(line) for line in stdout.splitlines()]
    assert all(set(d) == {"pod", "node", "annotations", "message"} for d in decisions)
    if good_last:
        for pod in good:
            key = f"{S.GOOD_NS}/{pod['metadata']['name']}"
            assert any(d["pod"] == key and d["node"] == GOOD_NODE for d in decisions), (key, stdout[-2000:])


_CLI_FILES: dict[str, list[bytes]] = {
    "bytes-and-partial-json": [b"\xff\xfe\x00garbage", b'{"type": "ADDED", "object": {"kind": "Po', b"[1, 2",
                               b"\x1b[31mred\x1b[0m", b"null"],
    "non-events": [b"[]", b"42", b'"ADDED"', b'{"type": 1, "object": {}}', b'{"type": "ADDED", "object": []}',
                   b'{"object": {"kind": "Pod"}}', b"{}"],
    "unknown-kinds-and-types": [
        orjson.dumps({"type": "ADDED", "object": {"kind": "Widget", "metadata": {"name": "w"}}}),
        orjson.dumps({"type": "EXPLODED", "object": b.pod("x")}),
        orjson.dumps({"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "7"}}}),
        orjson.dumps({"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}),
        orjson.dumps({"type": "DELETED", "object": b.pod("never-added")}),
    ],
    "odd-objects": [
        orjson.dumps(b.event("ADDED", {**b.node("n"), "status": {"allocatable": {"cpu": "1e309", "pods": "-1"}}})),
        orjson.dumps(b.event("ADDED", b.pod("huge", limits={"nvidia.com/gpu": "9999999999999999999"}))),
        b'{"type": "ADDED", "object": {"kind": "Pod", "metadata": {"name": "big", "uid": "u"}, "spec": '
        b'{"priority": 123456789012345678901234567890, "containers": []}}}',
        orjson.dumps(b.event("ADDED", b.resource_class("rc", expressions=[{"key": "m", "operator": "Gt", "values": ["16GB"]}]))),
        orjson.dumps(b.event("ADDED", {**b.podgroup("pg", 1), "spec": {"minMember": "three"}})),
    ],
}
if S.generate_known("F6"):
    _CLI_FILES["pod-with-odd-status"] = [
        orjson.dumps(b.event("ADDED", b.node("n"))),
        orjson.dumps(b.event("ADDED", {**b.pod("p", requests={"cpu": "1"}), "status": {"conditions": "x"}})),
    ]


@pytest.mark.parametrize("name", sorted(_CLI_FILES))
def test_simulate_cli_subprocess(name: str, tmp_path: Path) -> None:
    """The real `python -m scheduler simulate`: exit 0, messages on stderr, no traceback, and a good
    pod appended to the garbage is placed."""
    tried()
    events = tmp_path / "events.jsonl"
    good = [orjson.dumps(b.event("ADDED", b.node("good-node"))),
            orjson.dumps(b.event("ADDED", b.pod("good", namespace="good", requests={"cpu": "1"})))]
    events.write_bytes(b"\n".join(_CLI_FILES[name] + good) + b"\n")
    out = subprocess.run([sys.executable, "-m", "scheduler", "simulate", str(events)], capture_output=True, text=True,
                         cwd=REPO, timeout=60)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    if name != "pod-with-odd-status":  # odd status fields do not matter to scheduling: nothing to report
        assert "tessera:" in out.stderr
    nodes = ("good-node", "n") if name == "pod-with-odd-status" else ("good-node",)  # there node n is healthy
    assert any(orjson.loads(line) in ({"pod": "good/good", "node": node, "annotations": {}, "message": ""} for node in nodes)
               for line in out.stdout.splitlines()), out.stdout[-2000:]
