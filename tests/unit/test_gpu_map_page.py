"""The GPU map page: self-contained, locked down by its CSP, data that cannot break out of its
script block; served read-only behind `--gpu-map`; written by `tessera simulate --output html`."""

from __future__ import annotations

import base64
import gzip
import hashlib
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aiohttp
import orjson
import pytest

from scheduler import cli
from scheduler.core.framework.attempt import Attempt
from scheduler.core.scheduler import Scheduler
from scheduler.kube.binder import Binding, BindResult, Outcome
from scheduler.kube.gpu_map import GpuMap
from scheduler.kube.serving import GPU_MAP_DATA, GPU_MAP_PAGE
from scheduler.kube.loop import LoopHooks
from scheduler.kube.metrics import Metrics
from scheduler.kube.serving import PING, serve
from scheduler.sim import builders as b
from scheduler.sim.snapshot import load
from scheduler.view import model as m
from scheduler.view.page import embed_json, render_page
from tests.helpers import config, overruled_recording

REPO = Path(__file__).resolve().parents[2]
_DATA = re.compile(r'<script id="gpu-map-data" type="application/json">(.*?)</script>', re.S)


def _core() -> Scheduler:
    core = Scheduler(config())
    load(core, [b.node("gpu-1", gpus=2), b.device("gpu-1", 0), b.device("gpu-1", 1),
                b.pod("evil</script><script>alert(1)</script>", node_name="gpu-1", limits={"nvidia.com/gpu": 1}),
                b.pod("waiting", limits={"nvidia.com/gpu": 4})], 0.0)
    return core


def _view() -> m.ClusterView:
    from scheduler.view.cluster import build_view

    return build_view(_core(), source="simulate", now=0.0)


def _inline(page: str, tag: str) -> str:
    found: list[str] = re.findall(rf"<{tag}>(.*?)</{tag}>", page, re.S)
    return found[-1]


def test_the_static_page_embeds_the_view_and_nothing_from_outside() -> None:
    view = _view()
    page = render_page(view, title="Tessera <GPU> map")
    data = _DATA.search(page.html)
    assert data is not None and orjson.loads(data.group(1)) == m.as_dict(view)
    assert "</script><script>alert" not in page.html  # the pod name stays inside the JSON string
    assert "<title>Tessera &lt;GPU&gt; map</title>" in page.html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page.html)  # no CDN, no remote asset
    assert 'data-source=""' in page.html  # a static file fetches nothing


def test_the_content_security_policy_allows_exactly_the_inline_script_and_style() -> None:
    page = render_page(source_url="gpu-map.json")
    for tag, directive in (("script", "script-src"), ("style", "style-src")):
        digest = base64.b64encode(hashlib.sha256(_inline(page.html, tag).encode()).digest()).decode()
        assert f"{directive} 'sha256-{digest}';" in page.content_security_policy
    assert page.content_security_policy.startswith("default-src 'none';")
    assert "connect-src 'self'" in page.content_security_policy and "unsafe" not in page.content_security_policy
    assert 'data-source="gpu-map.json"' in page.html and _DATA.search(page.html).group(1) == ""  # type: ignore[union-attr]


def test_embedded_json_escapes_what_could_close_its_script_block() -> None:
    text = embed_json({"message": "</script> & <b>"})
    assert "<" not in text and ">" not in text and "&" not in text
    assert orjson.loads(text) == {"message": "</script> & <b>"}


def test_simulate_writes_the_page_of_the_end_state(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["simulate", str(REPO / "examples/device-classes.jsonl"), "--output", "html"]) == 0
    out = capsys.readouterr()
    data = _DATA.search(out.out)
    assert data is not None and out.out.startswith("<!doctype html>")
    view = orjson.loads(data.group(1))
    assert view["source"] == "simulate" and [n["name"] for n in view["nodes"]] == ["node-a", "node-b"]
    assert {d["outcome"] for d in view["decisions"]} == {"placed"}
    assert "4 pods placed" in out.err  # the summary table goes to stderr, as with the JSON lines


class _Inner(LoopHooks):
    def __init__(self) -> None:
        self.calls: list[str] = []

    def on_attempt(self, result: str, profile: str, seconds: float, attempt: Attempt) -> None:
        self.calls.append(result)

    def on_bind(self, result: BindResult, redecided: bool = False) -> None:
        self.calls.append(result.outcome.value)


async def test_the_live_page_and_its_data_are_get_only_and_locked_down() -> None:
    core = _core()
    leading = [True]
    loop: Any = SimpleNamespace(core=core, is_leader=lambda: leading[0], informers=SimpleNamespace(listed=lambda kind: []))
    gpu_map = GpuMap(loop, clock=lambda: 42.0)
    inner = _Inner()
    hooks = gpu_map.hooks(inner)
    waiting = core.state.pod_by_key("default/waiting")
    assert waiting is not None
    hooks.on_attempt("unschedulable", "tessera", 0.1, Attempt(waiting, None, message="0/1 nodes are available"))
    hooks.on_bind(BindResult(Binding("uid", "default", "other", "gpu-1", {}), Outcome.RETRY, "denied", 0.1))
    assert inner.calls == ["unschedulable", "error"]  # the metrics still see everything
    metrics = Metrics(profiles=["tessera"])
    async with serve("127.0.0.1", 0, healthz=[PING], readyz=[PING], registry=metrics.registry,
                     routes=gpu_map.routes()) as server, aiohttp.ClientSession() as session:
        async with session.get(server.url + GPU_MAP_PAGE) as response:
            assert response.status == 200 and response.content_type == "text/html"
            assert response.headers["Content-Security-Policy"] == render_page(source_url="gpu-map.json").content_security_policy
            assert response.headers["X-Frame-Options"] == "DENY"
        async with session.get(server.url + GPU_MAP_DATA) as response:
            view = await response.json()
        async with session.post(server.url + GPU_MAP_DATA) as response:
            assert response.status == 405
    assert view["source"] == "live" and view["generated"] == 42.0
    assert [(p["pod"], p["reason"], p["message"]) for p in view["pending"]] == \
        [("default/waiting", "Unschedulable", "0/1 nodes are available")]
    assert [(d["pod"], d["outcome"]) for d in view["decisions"]] == \
        [("default/other", "binding error"), ("default/waiting", "unschedulable")]
    gpus = view["nodes"][0]["gpus"]
    assert [g["state"] for g in gpus] == ["counted", "free"]
    # a new user's trial: a standby's page looked like the leader's, its pending pods "not tried yet"
    leading[0] = False
    assert gpu_map.view().source == "standby"


def test_reasons_of_pods_deleted_while_waiting_are_dropped_without_a_viewer() -> None:
    """Regression: the wait reasons were pruned only when the page was fetched, so with nobody
    looking they grew with every pod that ever waited."""
    core = _core()
    now = [0.0]
    gpu_map = GpuMap(SimpleNamespace(core=core, is_leader=lambda: True), clock=lambda: now[0])  # type: ignore[arg-type]
    hooks = gpu_map.hooks(_Inner())
    waiting = core.state.pod_by_key("default/waiting")
    assert waiting is not None
    hooks.on_attempt("unschedulable", "tessera", 0.1, Attempt(waiting, None, message="0/1 nodes are available"))
    core.apply("DELETED", b.pod("waiting", limits={"nvidia.com/gpu": 8}), 1.0)
    hooks.on_queue({}, {})
    assert "default/waiting" in gpu_map.log.reasons()  # not yet: pruning is periodic
    now[0] = 31.0
    hooks.on_queue({}, {})
    assert gpu_map.log.reasons() == {}


async def test_the_data_is_built_once_per_second_for_all_viewers() -> None:
    core = _core()
    now = [0.0]
    gpu_map = GpuMap(SimpleNamespace(core=core, is_leader=lambda: True), clock=lambda: now[0])  # type: ignore[arg-type]
    builds: list[int] = []
    original = gpu_map.view

    def counted_view() -> m.ClusterView:
        builds.append(1)
        return original()

    gpu_map.view = counted_view  # type: ignore[method-assign]
    request: Any = SimpleNamespace(headers={})
    first = await gpu_map._serve_data(request)
    second = await gpu_map._serve_data(request)
    now[0] = 1.5
    await gpu_map._serve_data(request)
    assert first.body == second.body and len(builds) == 2


async def test_the_data_is_gzipped_for_viewers_that_accept_it() -> None:
    """Regression: `/gpu-map.json` went out uncompressed — 2.2 MB every 3 s per viewer at 1,000
    8-GPU nodes, through a `kubectl port-forward`; gzipped it is about an eighth. Compressed once
    per build, whatever the number of viewers; a client that does not ask for gzip gets the JSON."""
    core = _core()
    gpu_map = GpuMap(SimpleNamespace(core=core, is_leader=lambda: True), clock=lambda: 42.0)  # type: ignore[arg-type]
    metrics = Metrics(profiles=["tessera"])
    async with serve("127.0.0.1", 0, healthz=[PING], readyz=[PING], registry=metrics.registry,
                     routes=gpu_map.routes()) as server, aiohttp.ClientSession(auto_decompress=False) as session:
        async with session.get(server.url + GPU_MAP_DATA, headers={"Accept-Encoding": "identity"}) as response:
            plain = await response.read()
            assert "Content-Encoding" not in response.headers
            assert response.headers["Vary"] == "Accept-Encoding"
        for accept in ("gzip", "deflate, gzip;q=0.5", "br;q=1.0, *"):
            async with session.get(server.url + GPU_MAP_DATA, headers={"Accept-Encoding": accept}) as response:
                assert response.headers["Content-Encoding"] == "gzip", accept
                assert response.headers["Vary"] == "Accept-Encoding"
                assert gzip.decompress(await response.read()) == plain
        for refused in ("gzip;q=0", "br", "*;q=0"):
            async with session.get(server.url + GPU_MAP_DATA, headers={"Accept-Encoding": refused}) as response:
                assert "Content-Encoding" not in response.headers, refused
                assert await response.read() == plain
    assert orjson.loads(plain)["source"] == "live"


def test_simulate_shows_pods_a_recorded_binding_overruled_on_the_page(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A recorded Binding put `g` on n2 where the replay (binpack: the fuller n1) had placed it:
    stderr warned, the page did not — its nodes showed `g` on n2 and its decisions "placed on n1",
    a contradiction the reader of the file alone could not explain. The page's data carries the
    overruled pods, and the page has a section for them."""
    path, said = overruled_recording(tmp_path / "events.jsonl")
    assert cli.main(["simulate", str(path), "--output", "html"]) == 0
    out = capsys.readouterr()
    assert f"tessera: warning: pod default/g: {said} (" in out.err
    data = _DATA.search(out.out)
    assert data is not None
    view = orjson.loads(data.group(1))
    assert view["overruled"] == [{"pod": "default/g", "message": said}]
    assert [(d["pod"], d["outcome"], d["node"]) for d in view["decisions"]] == [("default/g", "placed", "n1")]
    assert '<section id="overruled-section" hidden><h2>Overruled by the recording</h2>' in out.out
    assert 'getElementById("overruled-section").hidden = !view.overruled.length' in out.out


def test_a_view_without_a_replay_overrules_nothing() -> None:
    assert m.as_dict(_view())["overruled"] == []


def _input_warnings_recording(path: Path) -> Path:
    """A pending pod with a `tessera.dev/devices` annotation of its own (DevicesAnnotationIgnored)
    and a line that is not JSON, both with markup in them."""
    events = [b.event("ADDED", b.node("n1", gpus=4)),
              b.event("ADDED", b.pod("p", limits={"nvidia.com/gpu": 1},
                                     annotations={"tessera.dev/devices": "<i>mine</i>"}))]
    path.write_bytes(b"\n".join(orjson.dumps(event) for event in events) + b"\nnot json <script>alert(1)</script>\n")
    return path


def test_simulate_shows_the_inputs_warnings_and_unreadable_lines_on_the_page(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A reader of the page saw nothing of what stderr said of the input: a pod's own device
    annotation ignored (DevicesAnnotationIgnored), a line that is not JSON. The page's data holds
    the same lines as stderr, and the page has a section for them (shown only when there are)."""
    path = _input_warnings_recording(tmp_path / "events.jsonl")
    assert cli.main(["simulate", str(path), "--output", "html"]) == 0
    out = capsys.readouterr()
    data = _DATA.search(out.out)
    assert data is not None
    view = orjson.loads(data.group(1))
    reasons = [warning["reason"] for warning in view["input_warnings"]]
    assert reasons == ["UnreadableLine", "DevicesAnnotationIgnored"], view["input_warnings"]
    for warning in view["input_warnings"]:  # the very lines stderr has
        said = (f"tessera: {path}: {warning['message']}" if warning["reason"] == "UnreadableLine"
                else f"tessera: warning: {warning['reason']}: {warning['message']}")
        assert said in out.err.splitlines()
    assert view["input_warnings"][0]["message"].startswith("line 3: not JSON")
    assert "<i>mine</i>" in view["input_warnings"][1]["message"]
    assert "<script>alert(1)" not in out.out and "<i>mine</i>" not in out.out  # escaped in the embedded JSON
    assert '<section id="input-section" hidden><h2>Input warnings</h2>' in out.out
    assert 'getElementById("input-section").hidden = !view.input_warnings.length' in out.out


def test_simulate_lists_ten_unreadable_lines_and_counts_the_rest_on_the_page(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """As stderr does: the first ten one by one, then how many more."""
    path = tmp_path / "events.jsonl"
    path.write_bytes(orjson.dumps(b.event("ADDED", b.node("n1", gpus=4))) + b"\n" + b"nope\n" * 13)
    assert cli.main(["simulate", str(path), "--output", "html"]) == 0
    out = capsys.readouterr()
    data = _DATA.search(out.out)
    assert data is not None
    messages = [warning["message"] for warning in orjson.loads(data.group(1))["input_warnings"]]
    assert len(messages) == 11 and messages[-1] == "3 more unreadable lines", messages
    assert f"tessera: {path}: 3 more unreadable lines" in out.err


def test_a_view_without_a_replay_has_no_input_warnings() -> None:
    assert m.as_dict(_view())["input_warnings"] == []
