"""The GPU map page in a real browser (issue 16): `tessera run --gpu-map` on the real apiserver,
loaded by headless Chromium, which runs the page's script and fetches its data; the test reads the
resulting DOM. And the same page from `tessera simulate --output html`, opened as a file.

Set TESSERA_GPU_MAP_SCREENSHOT=PATH to also save the live page as a PNG (docs/gpu-map.png is one).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml

from scheduler.core import annotations as ann
from scheduler.kube.controlplane import LocalControlPlane
from scheduler.sim import builders as b
from scheduler.sim.replay import Replay, WatchEvent
from scheduler.view.cluster import build_view
from scheduler.view.page import render_page
from tests.e2e import gpu_scenario
from tests.e2e.browser import Element, dump_dom, screenshot, table_rows
from tests.e2e.live import REPO, Kube, TesseraProcess, eventually
from tests.helpers import config as scheduler_config
from tests.helpers import overruled_recording

CLASS = "class.tessera.dev/v100"


def _config(tmp_path: Path) -> Path:
    raw = yaml.safe_load((REPO / "config/binpack.yaml").read_text())
    raw["leaderElection"] = {"leaderElect": False}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _states(page: Element, node: str) -> list[str]:
    box = page.find("div", data_node=node)
    return [gpu.attrs["data-state"] for gpu in box.find_all("span") if "data-state" in gpu.attrs]


def _holders(page: Element, node: str, state: str) -> list[str]:
    box = page.find("div", data_node=node)
    return [gpu.attrs["data-holders"] for gpu in box.find_all("span", data_state=state)]


async def test_the_live_page_shows_every_gpu_state_pending_pods_and_gangs(
        clean_cluster: LocalControlPlane, kubectl: Kube, namespace: str, tmp_path: Path, chromium: str) -> None:
    proc = TesseraProcess(clean_cluster.kubeconfig, _config(tmp_path), tmp_path)
    proc.args.append("--gpu-map")
    proc.start()
    try:
        await proc.wait_ready()
        await gpu_scenario.create_cluster(kubectl)
        scenario = await gpu_scenario.create_workload(kubectl, namespace)
        url = f"http://127.0.0.1:{proc.port}/gpu-map"

        async def rendered() -> Element | None:
            page = await dump_dom(chromium, url)
            pending = page.find("div", id="pending")
            rows = table_rows(pending) if pending.find_all("tbody") else []
            done = "data-rendered" in page.find("body").attrs and any(row[0] == scenario.key("alloc-2") for row in rows)
            return page if done else None

        page = await eventually(rendered, timeout=60, interval=1)
        if os.environ.get("TESSERA_GPU_MAP_SCREENSHOT"):
            await screenshot(chromium, url, Path(os.environ["TESSERA_GPU_MAP_SCREENSHOT"]))
    finally:
        assert proc.terminate() == 0, proc.log()

    assert [box.attrs["data-node"] for box in page.find_all("div") if "data-node" in box.attrs] == list(gpu_scenario.NODES)
    assert sorted(_states(page, "map-n0")) == ["free", "slices", "whole", "whole"]
    assert _holders(page, "map-n0", "slices") == [f"{scenario.key('infer-a')} {scenario.key('infer-b')}"]
    sliced = page.find("div", data_node="map-n0").find("span", data_state="slices")
    fill = sliced.children[0]  # 20Gi of 32Gi in use: the fill bar is 63 % high
    assert fill.classes() == {"fill"} and fill.attrs["style"] == "height: 63%;" and "20Gi/32Gi" in sliced.attrs["title"]
    n1 = _states(page, "map-n1")
    assert sorted(n1[:2]) == ["counted", "ghost"] and n1[2:] == ["cordoned", "unhealthy"]  # GPUs 2, 3 by index
    assert _holders(page, "map-n1", "ghost") == [scenario.key("ghostly")]
    assert sorted(_states(page, "map-n2")) == ["free", "free", "gated", "whole"]
    assert _holders(page, "map-n2", "gated") == [scenario.key("alloc-2")]  # its devices held, its Binding not sent
    assert f"{scenario.key('alloc-2')} waits for the allocation gate" in page.find("div", data_node="map-n2").text

    pending = {row[0]: row for row in table_rows(page.find("div", id="pending"))}
    assert set(pending) == {scenario.key(p) for p in ("alloc-2", "too-big", "wave-0", "wave-1")}
    assert pending[scenario.key("too-big")][3] == "Unschedulable"
    assert "3 Insufficient nvidia.com/gpu" in pending[scenario.key("too-big")][5]
    assert pending[scenario.key("alloc-2")][3:5] == ["WaitingForAllocation", "map-n2"]
    gangs = table_rows(page.find("div", id="gangs"))
    assert [row[:7] for row in gangs] == [[scenario.key("wave"), "Pending", "2", "3", "0", "0", "2"]]  # ..., placed, leaving, waiting
    summary = page.find("p", id="summary").text
    assert summary.startswith("GPUs: 12 total, 6 in use (1 shared), 3 free, 3 unavailable")
    decisions = table_rows(page.find("div", id="decisions"))
    assert {row[1] for row in decisions} >= {scenario.key("train"), scenario.key("too-big")}


async def test_the_data_endpoint_is_read_only_and_the_page_locked_down(
        clean_cluster: LocalControlPlane, tmp_path: Path) -> None:
    proc = TesseraProcess(clean_cluster.kubeconfig, _config(tmp_path), tmp_path)
    proc.args.append("--gpu-map")
    proc.start()
    try:
        await proc.wait_ready()
        base = f"http://127.0.0.1:{proc.port}"
        async with aiohttp.ClientSession(trust_env=False) as session:
            async with session.get(base + "/gpu-map") as response:
                assert response.status == 200
                policy = response.headers["Content-Security-Policy"]
            async with session.get(base + "/gpu-map.json") as response:
                view: dict[str, Any] = await response.json()
            for method in ("POST", "PUT", "DELETE", "PATCH"):
                async with session.request(method, base + "/gpu-map.json") as response:
                    assert response.status == 405
    finally:
        assert proc.terminate() == 0, proc.log()
    assert policy.startswith("default-src 'none'; script-src 'sha256-") and "connect-src 'self'" in policy
    assert view["source"] == "live" and set(view) >= {"nodes", "pending", "gangs", "decisions", "summary"}


async def test_without_the_flag_there_is_no_page(clean_cluster: LocalControlPlane, tmp_path: Path) -> None:
    proc = TesseraProcess(clean_cluster.kubeconfig, _config(tmp_path), tmp_path)
    proc.start()
    try:
        await proc.wait_ready()
        async with aiohttp.ClientSession(trust_env=False) as session:
            for path in ("/gpu-map", "/gpu-map.json"):
                async with session.get(f"http://127.0.0.1:{proc.port}{path}") as response:
                    # still a 404, but one that says how to turn the page on (a new user's trial
                    # met a bare "404: Not Found" after the README's command)
                    assert response.status == 404
                    assert "start tessera run with --gpu-map" in await response.text()
    finally:
        assert proc.terminate() == 0, proc.log()


async def _simulated_page(events: Path | str, tmp_path: Path, chromium: str) -> Element:
    """`tessera simulate EVENTS --output html` opened as a file in the browser."""
    page_file = tmp_path / "map.html"
    with page_file.open("wb") as out:
        done = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "scheduler", "simulate",
                                                       str(events), "--output", "html"],
                                       stdout=out, stderr=subprocess.PIPE, cwd=REPO, check=False)
    assert done.returncode == 0, done.stderr.decode()
    return await dump_dom(chromium, page_file.as_uri())


async def test_a_simulate_run_as_a_page_in_the_browser(tmp_path: Path, chromium: str) -> None:
    page = await _simulated_page("examples/device-classes.jsonl", tmp_path, chromium)
    assert page.find("body").attrs.get("data-rendered") is not None
    assert sorted(_states(page, "node-a")) == ["slices", "whole"] and sorted(_states(page, "node-b")) == ["free", "whole"]
    assert _holders(page, "node-a", "slices") == ["default/slice-a default/slice-b"]
    assert "tessera simulate" in page.find("p", id="meta").text
    meta = {name: page.find("div", data_node=name).find("div", **{"class": "node-meta"}).text for name in ("node-a", "node-b")}
    assert meta == {"node-a": "2/2 GPUs · CPU 0/32 · 3 pods", "node-b": "1/2 GPUs · CPU 0/32 · 1 pod"}  # a trial read "1 pods"
    assert [row[1:3] for row in table_rows(page.find("div", id="decisions"))][-1] == ["default/wants-k80", "placed"]
    assert "hidden" in page.find("section", id="overruled-section").attrs  # no recorded Binding overruled it


async def test_a_simulate_page_shows_the_pods_its_recording_overruled(tmp_path: Path, chromium: str) -> None:
    """The nodes show `g` where the recording bound it, the decisions where the replay placed
    it: the page says why, as stderr does."""
    events, said = overruled_recording(tmp_path / "events.jsonl")
    page = await _simulated_page(events, tmp_path, chromium)
    section = page.find("section", id="overruled-section")
    assert "hidden" not in section.attrs and section.find("h2").text == "Overruled by the recording"
    assert table_rows(section) == [["default/g", said]]
    assert _holders(page, "n2", "counted") == ["default/g"]
    assert [row[1:4] for row in table_rows(page.find("div", id="decisions"))] == [["default/g", "placed", "n1"]]


async def test_the_page_shows_a_fenced_node_and_a_conflict_as_such(tmp_path: Path, chromium: str) -> None:
    """A new user's trial: a node fenced by a pod's unreadable `tessera.dev/devices` annotation
    was drawn as green free tiles with "0/2 GPUs", and a GPU two pods held whole as a plain whole
    one. In the browser: `fenced` tiles naming the pod, a `conflict` tile naming both claimants,
    the node lines counting them, the legend explaining both."""
    devices = [b.device("f", 0), b.device("f", 1), b.device("c", 0), b.device("c", 1)]
    grant = ann.encode_devices({"main": {CLASS: (ann.DeviceGrant(devices[2]["spec"]["deviceID"],
                                                                 devices[2]["metadata"]["name"], None),)}})
    objs = [b.node("f", gpus=2), b.node("c", gpus=2), *devices, b.resource_class("v100", match_labels={"model": "V100"}),
            b.pod("bad", node_name="f", phase="Running", limits={CLASS: 1}, annotations={ann.DEVICES: "{not json"}),
            *(b.pod(name, node_name="c", phase="Running", limits={CLASS: 1},
                    annotations={ann.DEVICES: grant, ann.PHASE: ann.PHASE_ALLOCATED}) for name in ("one", "two"))]
    replay = Replay(scheduler_config(), agent=False)
    list(replay.run(WatchEvent("ADDED", obj) for obj in objs))
    page_file = tmp_path / "map.html"
    page_file.write_text(render_page(build_view(replay.scheduler, source="simulate", now=replay.now), title="t").html)
    page = await dump_dom(chromium, page_file.as_uri())

    assert _states(page, "f") == ["fenced", "fenced"] and _states(page, "c") == ["conflict", "free"]
    fenced = page.find("div", data_node="f").find("span", data_state="fenced")
    assert fenced.attrs["data-reason"] == "default/bad: unreadable tessera.dev/devices annotation"
    assert "default/bad: unreadable tessera.dev/devices annotation" in fenced.attrs["title"]
    assert _holders(page, "c", "conflict") == ["default/one default/two"]
    meta = {name: page.find("div", data_node=name).find("div", **{"class": "node-meta"}).text for name in ("f", "c")}
    assert meta == {"f": "0/2 GPUs · 2 unavailable · CPU 0/32 · 1 pod", "c": "1/2 GPUs · 1 conflict · CPU 0/32 · 2 pods"}
    assert "1 GPU claimed by more than one pod" in page.find("p", id="summary").text
    legend = {item.text.strip() for item in page.find("ul", **{"class": "legend"}).find_all("li")}
    assert {"conflict (claimed by more than one pod)", "fenced (given to no pod: an unreadable device annotation on its node, no Node object, or beyond the node's GPU count)"} <= legend


async def test_the_page_counts_a_gpu_under_two_names_once_and_fences_rows_beyond_the_count(
        tmp_path: Path, chromium: str) -> None:
    """A new user's trial: one GPU under two names and an ExtendedResource beyond the node's
    count were each counted as a GPU of their own. The node line counts the node's GPUs, each row
    says why it is given to no pod, as `kubectl tessera nodes` does (one view model)."""
    twice = b.device("d", 0)
    renamed = {**twice, "metadata": {**twice["metadata"], "name": "d.renamed", "uid": "d-renamed"}}
    objs = [b.node("d", gpus=2), twice, renamed, b.device("d", 1), b.node("s", gpus=1), b.device("s", 0),
            b.device("s", 1), b.resource_class("v100", match_labels={"model": "V100"})]
    replay = Replay(scheduler_config(), agent=False)
    list(replay.run(WatchEvent("ADDED", obj) for obj in objs))
    page_file = tmp_path / "map.html"
    page_file.write_text(render_page(build_view(replay.scheduler, source="simulate", now=replay.now), title="t").html)
    page = await dump_dom(chromium, page_file.as_uri())

    meta = {name: page.find("div", data_node=name).find("div", **{"class": "node-meta"}).text for name in ("d", "s")}
    assert meta == {"d": "0/2 GPUs · 1 unavailable · CPU 0/32 · 0 pods", "s": "0/1 GPUs · CPU 0/32 · 0 pods"}  # its fenced row is no GPU of its own
    cordoned = page.find("div", data_node="d").find("span", data_state="cordoned")
    assert "is also named by" in cordoned.attrs["data-reason"]
    fenced = page.find("div", data_node="s").find("span", data_state="fenced")
    assert fenced.attrs["data-reason"] == ("the node counts 1 nvidia.com/gpu but its ExtendedResources describe 2: "
                                           "pods get 1 more, shown free on the others")
    assert page.find("p", id="summary").text.startswith("GPUs: 3 total, 0 in use, 2 free, 1 unavailable")


async def test_a_gpus_tooltip_names_its_numa_node_and_nvlink_group(tmp_path: Path, chromium: str) -> None:
    """A new user's trial: NVLink placement could not be checked on the map, which did not show
    where a GPU sits in its node. Its tile says so (title and data attributes)."""
    devices = [b.device("n", i, attributes={"numaNode": str(i // 2), **({"nvlinkGroup": "0"} if i < 2 else {})})
               for i in range(4)]
    replay = Replay(scheduler_config(), agent=False)
    list(replay.run(WatchEvent("ADDED", obj) for obj in [b.node("n", gpus=4), *devices]))
    page_file = tmp_path / "map.html"
    page_file.write_text(render_page(build_view(replay.scheduler, source="simulate", now=replay.now), title="t").html)
    page = await dump_dom(chromium, page_file.as_uri())
    tiles = [gpu for gpu in page.find("div", data_node="n").find_all("span") if "data-state" in gpu.attrs]
    assert [(t.attrs["data-numa"], t.attrs["data-nvlink"]) for t in tiles] == [("0", "0"), ("0", "0"), ("1", ""), ("1", "")]
    assert "NUMA 0 · NVLink group 0" in tiles[0].attrs["title"]
    assert "NUMA 1" in tiles[3].attrs["title"] and "NVLink" not in tiles[3].attrs["title"]


async def test_a_simulate_page_shows_the_inputs_warnings_as_text(tmp_path: Path, chromium: str) -> None:
    """What stderr says of the input (a pod's own device annotation ignored, a line that is not
    JSON) is on the page too, markup in it shown as text, not run."""
    events = [b.event("ADDED", b.node("n1", gpus=4)),
              b.event("ADDED", b.pod("p", limits={"nvidia.com/gpu": 1}, annotations={ann.DEVICES: "<i>mine</i>"}))]
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(event) for event in events) + b"\nnot json <b>bold</b>\n")
    page = await _simulated_page(path, tmp_path, chromium)
    section = page.find("section", id="input-section")
    assert "hidden" not in section.attrs and section.find("h2").text == "Input warnings"
    rows = table_rows(section)
    assert [row[0] for row in rows] == ["UnreadableLine", "DevicesAnnotationIgnored"], rows
    assert rows[0][1].startswith("line 3: not JSON") and "<i>mine</i>" in rows[1][1]
    assert not section.find_all("b") and not section.find_all("i")  # text, not markup


async def test_a_clean_simulate_page_hides_the_input_warnings(tmp_path: Path, chromium: str) -> None:
    page = await _simulated_page("examples/device-classes.jsonl", tmp_path, chromium)
    assert "hidden" in page.find("section", id="input-section").attrs
