"""``tessera record`` against the real apiserver, and its output replayed by ``tessera simulate``:
the file must be exactly the simulate input format (every line readable), hold objects that
existed before and appeared during the recording, and stop cleanly on --duration and on SIGINT.
Start-up failures (unreadable kubeconfig, unreachable apiserver) are one line and a non-zero exit."""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import signal
import sys
from pathlib import Path
from typing import Any

import orjson

from scheduler.kube.controlplane import LocalControlPlane
from scheduler.kube.controlplane.processes import free_port
from scheduler.kube.http import KubeHttp, connect

REPO = Path(__file__).resolve().parents[2]


async def start_record(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "scheduler", "record", *args, cwd=REPO,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)


async def wait_for_stderr(proc: asyncio.subprocess.Process, pattern: str, seen: list[str], timeout: float = 30.0) -> None:
    """Read stderr lines until one matches. Match record's own lines (`^tessera record: `): its
    informers log `informer.synced` per kind there too, long before every kind is in."""
    assert proc.stderr is not None
    async with asyncio.timeout(timeout):
        while True:
            line = (await proc.stderr.readline()).decode()
            assert line, f"record exited before printing {pattern!r}: {''.join(seen)}"
            seen.append(line)
            if re.search(pattern, line):
                return


async def finish(proc: asyncio.subprocess.Process, seen: list[str], timeout: float) -> int:
    async with asyncio.timeout(timeout):
        _, rest = await proc.communicate()
    seen.append(rest.decode())
    assert proc.returncode is not None
    return proc.returncode


def gpu_pod(name: str, gpus: int = 1, node: str = "") -> dict[str, Any]:
    pod: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"schedulerName": "tessera",
                 "containers": [{"name": "c", "image": "busybox",
                                 "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}
    if node:
        pod["spec"]["nodeName"] = node
    return pod


async def simulate(recording: Path) -> tuple[dict[str, str | None], str]:
    """`tessera simulate` of a recording, which must succeed: each pod's node (None: not placed)
    from its stdout, and its report (stderr)."""
    sim = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "scheduler", "simulate", str(recording), cwd=REPO,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    async with asyncio.timeout(120):
        stdout, sim_err = await sim.communicate()
    report = sim_err.decode()
    assert sim.returncode == 0, report
    return {line["pod"]: line["node"] for line in map(orjson.loads, stdout.splitlines())}, report


def read_events(path: Path) -> list[dict[str, Any]]:
    events = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    for event in events:
        assert set(event) == {"type", "object"}
        assert event["type"] in ("ADDED", "MODIFIED", "DELETED")
        assert event["object"]["kind"] and event["object"]["apiVersion"]
    return events


async def test_record_then_simulate(control_plane: LocalControlPlane, namespace: str, tmp_path: Path) -> None:
    prefix = f"rec-{secrets.token_hex(3)}"
    api = await connect(str(control_plane.kubeconfig))
    async with api:
        http = KubeHttp(api)
        pods_path = f"/api/v1/namespaces/{namespace}/pods"
        nodes = await asyncio.to_thread(control_plane.add_fake_gpu_nodes, 1, 2, "V100", prefix=f"{prefix}-a")
        try:
            assert (await http.request("POST", pods_path, body=gpu_pod("before"))).status == 201
            # upstream's Workload API PodGroup (served by the test control plane): recorded as its
            # own kind next to scheduler-plugins' PodGroup
            group = {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup", "metadata": {"name": "wl"},
                     "spec": {"schedulingPolicy": {"gang": {"minCount": 1}}}}
            groups_path = f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{namespace}/podgroups"
            assert (await http.request("POST", groups_path, body=group)).status == 201
            out = tmp_path / "events.jsonl"
            proc = await start_record("--kubeconfig", str(control_plane.kubeconfig), "-o", str(out),
                                      "--duration", "12")
            stderr: list[str] = []
            await wait_for_stderr(proc, r"^tessera record: synced", stderr)

            nodes += await asyncio.to_thread(control_plane.add_fake_gpu_nodes, 1, 2, "V100", prefix=f"{prefix}-b")
            assert (await http.request("POST", pods_path, body=gpu_pod("after"))).status == 201

            assert await finish(proc, stderr, timeout=60) == 0, "".join(stderr)
            assert "wrote" in stderr[-1] or "wrote" in "".join(stderr)
        finally:
            await asyncio.to_thread(control_plane.remove_fake_gpu_nodes, nodes)

    events = read_events(out)
    added = {(e["object"]["kind"], e["object"]["metadata"]["name"]) for e in events if e["type"] == "ADDED"}
    assert {("Node", node) for node in nodes} <= added
    assert {("Pod", "before"), ("Pod", "after")} <= added
    assert any(e["object"]["apiVersion"] == "scheduling.k8s.io/v1alpha2" and e["object"]["metadata"]["name"] == "wl"
               for e in events)
    assert "PodGroup.scheduling.k8s.io" in "".join(stderr)  # named in the progress lines
    assert sum(1 for kind, name in added if kind == "ExtendedResource" and name.startswith(prefix)) == 4
    # the initial snapshot lists nodes before pods
    kinds = [e["object"]["kind"] for e in events]
    assert kinds.index("Node") < kinds.index("Pod")

    placed, report = await simulate(out)
    assert f"{out}: line" not in report  # every line was readable
    for pod in ("before", "after"):
        assert placed.get(f"{namespace}/{pod}") is not None, report
    for node in nodes:
        assert node in report  # the node table


async def test_full_cluster_with_pending_pods_replays_as_it_was(clean_cluster: LocalControlPlane, namespace: str,
                                                               tmp_path: Path) -> None:
    """Every GPU bound and pods pending whose names sort before the bound ones (the apiserver lists
    pods by name): the recording starts from the bound state, so the replay keeps every bound pod
    where it is, over-commits nothing and leaves the pending pods pending (issue 10, part 3.4).
    The plane is cleaned first: a node another test left behind would be recorded too, with room."""
    control_plane = clean_cluster
    prefix = f"full-{secrets.token_hex(3)}"
    out = tmp_path / "events.jsonl"
    api = await connect(str(control_plane.kubeconfig))
    async with api:
        http = KubeHttp(api)
        pods_path = f"/api/v1/namespaces/{namespace}/pods"
        nodes = await asyncio.to_thread(control_plane.add_fake_gpu_nodes, 2, 2, "V100", prefix=prefix)
        try:
            bound = {f"b-{node}-{i}": node for node in nodes for i in range(2)}
            for name, node in bound.items():
                assert (await http.request("POST", pods_path, body=gpu_pod(name, node=node))).status == 201
            for name, gpus in (("a-pending-0", 1), ("a-pending-1", 2)):
                assert (await http.request("POST", pods_path, body=gpu_pod(name, gpus))).status == 201
            proc = await start_record("--kubeconfig", str(control_plane.kubeconfig), "-o", str(out))
            stderr: list[str] = []
            await wait_for_stderr(proc, r"^tessera record: synced", stderr)
            proc.send_signal(signal.SIGINT)
            assert await finish(proc, stderr, timeout=30) == 0, "".join(stderr)
        finally:
            await asyncio.to_thread(control_plane.remove_fake_gpu_nodes, nodes)

    ours = [e["object"]["metadata"]["name"] for e in read_events(out)
            if e["object"]["kind"] == "Pod" and e["object"]["metadata"].get("namespace") == namespace]
    assert ours == sorted(bound) + ["a-pending-0", "a-pending-1"]

    final, report = await simulate(out)
    assert "over its capacity" not in report, report
    assert final[f"{namespace}/a-pending-0"] is None and final[f"{namespace}/a-pending-1"] is None, report
    assert not any(key.startswith(f"{namespace}/b-") for key in final)  # bound pods are never re-placed
    rows = {line.split()[0]: line.split() for line in report.splitlines() if line.startswith(prefix)}
    assert {node: rows[node][1] for node in nodes} == {node: "2/2" for node in nodes}, report


async def test_record_stops_on_sigint(control_plane: LocalControlPlane, tmp_path: Path) -> None:
    out = tmp_path / "events.jsonl"
    proc = await start_record("--kubeconfig", str(control_plane.kubeconfig), "-o", str(out),
                              "--kinds", "nodes,podgroups")
    stderr: list[str] = []
    await wait_for_stderr(proc, r"^tessera record: synced", stderr)
    proc.send_signal(signal.SIGINT)
    assert await finish(proc, stderr, timeout=30) == 0, "".join(stderr)
    assert "Traceback" not in "".join(stderr)
    kinds = {e["object"]["kind"] for e in read_events(out)}
    assert kinds <= {"Node", "PodGroup"}


async def test_record_start_up_errors(control_plane: LocalControlPlane, tmp_path: Path) -> None:
    missing = await start_record("--kubeconfig", str(tmp_path / "missing"), "-o", str(tmp_path / "a.jsonl"))
    seen: list[str] = []
    assert await finish(missing, seen, timeout=30) == 2
    assert seen[0].count("\n") == 1 and "cannot read kubeconfig" in seen[0]

    # the real kubeconfig, pointing at a port where nothing listens
    dead = tmp_path / "dead.kubeconfig"
    text = control_plane.kubeconfig.read_text()
    dead.write_text(text.replace(f":{control_plane.apiserver_port}", f":{free_port()}"))
    unreachable = await start_record("--kubeconfig", str(dead), "-o", str(tmp_path / "b.jsonl"))
    seen = []
    assert await finish(unreachable, seen, timeout=30) == 1
    assert seen[0].count("\n") == 1 and "cannot reach the apiserver" in seen[0], seen
    assert not os.path.exists(tmp_path / "b.jsonl")
