"""`tessera run` started before its apiserver can be reached waits for it, then schedules.

In production a scheduler pod often starts before the apiserver answers (a control-plane restart,
a network not ready yet). kube-scheduler keeps retrying (its reflectors' backoff); `tessera run`
exited at once with "cannot reach the apiserver … connection refused". Here the replica's
kubeconfig points at a local port where nothing listens; once it has logged its retries, a TCP
relay to the real apiserver opens on that port, and the same process becomes ready and binds a
GPU pod — no restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import orjson
import yaml

from scheduler.kube.controlplane import LocalControlPlane
from scheduler.kube.controlplane.processes import free_port
from scheduler.sim import builders as b
from tests.e2e.live import Kube, TesseraProcess, bound_nodes, eventually, fast_lease_config


def _kubeconfig_via(plane: LocalControlPlane, port: int, path: Path) -> Path:
    """The admin kubeconfig with its server moved to 127.0.0.1:`port` (the certificate names
    127.0.0.1, whatever the port)."""
    raw = yaml.safe_load(plane.kubeconfig.read_text())
    for cluster in raw["clusters"]:
        cluster["cluster"]["server"] = f"https://127.0.0.1:{port}"
    path.write_text(yaml.safe_dump(raw))
    return path


@contextlib.asynccontextmanager
async def _relay(port: int, upstream_port: int) -> AsyncIterator[None]:
    """A plain TCP relay from 127.0.0.1:`port` to the apiserver (TLS passes through untouched)."""
    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    tasks: set[asyncio.Task[None]] = set()

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", upstream_port)
        for task in (asyncio.create_task(pipe(reader, up_writer)), asyncio.create_task(pipe(up_reader, writer))):
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    server = await asyncio.start_server(accept, "127.0.0.1", port)
    try:
        yield
    finally:
        server.close()
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _status(url: str) -> int:
    async with aiohttp.ClientSession(trust_env=False) as session:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=5)) as response:
            return response.status


async def test_a_replica_started_before_the_apiserver_answers_waits_then_binds(
        clean_cluster: LocalControlPlane, kubectl: Kube, namespace: str, tmp_path: Path) -> None:
    lease = f"wait-{secrets.token_hex(3)}"
    port = free_port()
    nodes = clean_cluster.add_fake_gpu_nodes(1, 2, "V100", prefix=lease)
    proc = TesseraProcess(_kubeconfig_via(clean_cluster, port, tmp_path / "kubeconfig"), fast_lease_config(tmp_path, lease),
                          tmp_path)
    proc.start()
    try:
        def retries() -> list[dict[str, object]]:
            lines = proc.log_path.read_text(errors="replace").splitlines()
            return [line for line in map(orjson.loads, (text for text in lines if text.startswith("{")))
                    if line.get("event") == "apiserver.unreachable"]

        async def retried_twice() -> list[dict[str, object]] | None:
            assert proc.alive(), proc.log()
            seen = retries()
            return seen if len(seen) >= 2 else None

        waited = await eventually(retried_twice, timeout=30)
        assert [(w["server"], w["error"], w["attempt"]) for w in waited[:2]] == [
            (f"https://127.0.0.1:{port}", "connection refused", 1), (f"https://127.0.0.1:{port}", "connection refused", 2)]
        base = f"http://127.0.0.1:{proc.port}"
        assert await _status(f"{base}/healthz") == 200
        assert await _status(f"{base}/readyz") == 500
        async with _relay(port, clean_cluster.apiserver_port):
            await proc.wait_ready(timeout=90)  # the last pause is at most 2 × 3.2 s; then the informers list
            assert proc.alive()
            await kubectl.create_pod(namespace, b.pod("gpu", limits={"nvidia.com/gpu": 1}))

            async def bound() -> dict[str, str] | None:
                placed = await bound_nodes(kubectl, namespace)
                return placed if placed.get("gpu") else None

            assert (await eventually(bound))["gpu"] == nodes[0]
            assert proc.terminate() == 0, proc.log()
        log = proc.log_path.read_text(errors="replace")
        assert "tessera.starting" in log and "Traceback" not in log, log
    finally:
        proc.kill()
        clean_cluster.remove_fake_gpu_nodes(nodes)
