"""A SIGTERM to `tessera run` (leaderElect: false) while it checks the Lease for a live leader.

With leader election off, `tessera run` first reads the Lease it would have used and watches a
holder's record for up to that record's lease duration (a crashed leader leaves its record
behind: scheduler/kube/lone_replica.py). A SIGTERM meanwhile — a Deployment rolled back, a user's
Ctrl-C — waited that check out (here 120 s; any leaseDurationSeconds in general), then started
the informers only to stop. The real process against the real apiserver: the signal ends it at
once, exit 0, `tessera.stopped` its last line, nothing listed. Failed before the fix (the process
was still checking after 10 s).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import secrets
import subprocess
import time
from pathlib import Path

import orjson
import yaml

from scheduler.kube.controlplane import LocalControlPlane
from scheduler.kube.leader import micro_time
from tests.e2e.live import REPO, TesseraProcess, eventually

LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"


def _events(proc: TesseraProcess) -> list[dict[str, object]]:
    lines = proc.log_path.read_text(errors="replace").splitlines()
    return [orjson.loads(text) for text in lines if text.startswith("{")]


async def test_sigterm_during_the_lone_replica_lease_check_stops_at_once(control_plane: LocalControlPlane,
                                                                         tmp_path: Path) -> None:
    lease = f"lone-{secrets.token_hex(3)}"
    now = micro_time(dt.datetime.now(dt.timezone.utc))
    admin = control_plane.admin
    admin.create(LEASES, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                          "metadata": {"name": lease, "namespace": "default"},
                          "spec": {"holderIdentity": "crashed-replica", "leaseDurationSeconds": 120,
                                   "acquireTime": now, "renewTime": now, "leaseTransitions": 0}})
    raw = yaml.safe_load((REPO / "config/binpack.yaml").read_text())
    raw["leaderElection"] = {"leaderElect": False, "leaseDuration": "4s", "renewDeadline": "3s",
                             "retryPeriod": "1s", "resourceNamespace": "default", "resourceName": lease}
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(raw))
    proc = TesseraProcess(control_plane.kubeconfig, config, tmp_path)
    proc.start()
    try:
        async def checking() -> bool | None:
            assert proc.alive(), proc.log()
            return True if any(e.get("event") == "leader_election.disabled" for e in _events(proc)) else None

        await eventually(checking, timeout=60)
        await asyncio.sleep(1.5)  # the check has read the record and watches it now
        assert proc.alive(), proc.log()
        assert proc.proc is not None
        sent = time.monotonic()
        proc.proc.terminate()
        try:
            code = proc.proc.wait(10)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still checking the Lease 10 s after SIGTERM:\n{proc.log()}") from None
        took = time.monotonic() - sent
        assert code == 0 and took < 5.0, (code, took, proc.log())
        events = [e.get("event") for e in _events(proc)]
        assert events[-1] == "tessera.stopped", events
        assert "tessera.starting" in events and "tessera.ready" not in events, events
        assert "Traceback" not in proc.log_path.read_text(errors="replace")
    finally:
        proc.kill()
        admin.delete(f"{LEASES}/{lease}")
