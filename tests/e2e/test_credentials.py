"""Credentials the real apiserver refuses (issue 10, part 3.5: a bad token made `tessera run` retry
401 forever with nothing but logs).

`tessera run` may stay up and unready, retrying, but it says why once: one error log line (and
/readyz's withheld reason in the log, `probe.failed`); the retries that follow are silent. `record` and `agent` stop at start-up
with one line. A token the apiserver does not know gives 401; a valid user without RBAC gets 403
on every list.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from scheduler.kube.controlplane import LocalControlPlane
from scheduler.kube.controlplane.kubeconfig import write_kubeconfig
from tests.e2e.live import REPO, TesseraProcess, eventually

QUIET_SECONDS = 6.0  # several informer retries (backoff 0.5, 1, 2, 4 s) and leader retries (4 s)


def _bad_token_kubeconfig(plane: LocalControlPlane, path: Path) -> Path:
    return write_kubeconfig(path, server=plane.server, ca_pem=plane.ca_file.read_bytes(), user="stranger",
                            token="not-a-token-the-apiserver-knows")


def _log(proc: TesseraProcess) -> list[dict[str, Any]]:
    lines = proc.log_path.read_text(errors="replace").splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")]


async def _readyz(port: int) -> tuple[int, str]:
    async with aiohttp.ClientSession(trust_env=False) as session:
        async with session.get(f"http://127.0.0.1:{port}/readyz", timeout=aiohttp.ClientTimeout(total=2)) as response:
            return response.status, await response.text()


@pytest.mark.parametrize(("kind", "config", "status", "reason"), [
    ("bad-token", "config/gpu-cluster.yaml", 401,
     "[-]informer-sync failed: the apiserver rejected our credentials (HTTP 401 Unauthorized): check the token or "
     "client certificate in the kubeconfig"),
    ("no-rbac", "config/binpack.yaml", 403, "[-]informer-sync failed: the apiserver denied access to ExtendedResource, "
                                             "Node, Pod, PodGroup, ResourceClass (HTTP 403): "),
])
async def test_run_says_once_why_the_apiserver_refuses_it_and_stays_unready(
        control_plane: LocalControlPlane, tmp_path: Path, kind: str, config: str, status: int, reason: str) -> None:
    if kind == "bad-token":
        kubeconfig = _bad_token_kubeconfig(control_plane, tmp_path / "kubeconfig")
    else:
        kubeconfig = control_plane.kubeconfig_for("tessera-e2e-nobody")
    proc = TesseraProcess(kubeconfig, REPO / config, tmp_path)
    proc.start()
    try:
        async def refused() -> str | None:  # /readyz withholds the reason (as upstream); the log has it
            assert proc.alive(), proc.log()
            try:
                code, body = await _readyz(proc.port)
            except aiohttp.ClientError:
                return None
            assert code in (500, 200), (code, body)
            logged = [e["failures"] for e in _log(proc) if e["event"] == "probe.failed" and e["probe"] == "readyz"]
            return body if logged and logged[-1].startswith(reason) else None

        body = await eventually(refused, timeout=40)
        assert "[-]informer-sync failed: reason withheld\n" in body and "apiserver" not in body
        await asyncio.sleep(QUIET_SECONDS)
        assert proc.alive() and (await _readyz(proc.port))[0] == 500
        entries = _log(proc)
        errors = [e for e in entries if e.get("level") == "error"]
        assert [e["event"] for e in errors] == ["informers.denied"], proc.log()
        assert errors[0]["status"] == status and f"HTTP {status}" in errors[0]["message"]
        assert not [e for e in entries if e["event"] == "informer.error"], proc.log()  # retries are silent
        assert len([e for e in entries if e["event"] == "leader.get_failed"]) <= 1, proc.log()
    finally:
        assert proc.terminate() == 0, proc.log()


@pytest.mark.parametrize("command", ["record", "agent"])
def test_record_and_agent_stop_with_one_line_on_a_rejected_token(control_plane: LocalControlPlane, tmp_path: Path,
                                                                  command: str) -> None:
    kubeconfig = _bad_token_kubeconfig(control_plane, tmp_path / "kubeconfig")
    argv = [sys.executable, "-m", "scheduler", command, "--kubeconfig", str(kubeconfig)]
    if command == "record":
        argv += ["-o", str(tmp_path / "out.jsonl")]
    else:
        (tmp_path / "devices.yaml").write_text("[]")
        argv += ["--node-name", "n", "--backend", "fake", "--fake-devices", str(tmp_path / "devices.yaml"),
                 "--device-plugin-dir", str(tmp_path), "--state-file", ""]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60)
    prefix = "tessera record" if command == "record" else "tessera agent"
    assert (done.returncode, done.stderr.splitlines()) == (1, [
        f"{prefix}: the apiserver at {control_plane.server} rejected our credentials (HTTP 401 Unauthorized): "
        "check the token or client certificate in the kubeconfig"])
