"""The contestants of `bench.live` as child processes: Tessera, kube-scheduler and the raw binder,
plus CPU accounting and the optional py-spy profiler.

Why one configuration file for both schedulers: Tessera reads the `KubeSchedulerConfiguration`
format, so the fairest "equivalent configuration" is the *same file*. It names one profile (the
pods' `schedulerName`), NodeResourcesFit `MostAllocated` on cpu/memory/nvidia.com/gpu, and the
score plugins both schedulers have with kube-scheduler's default weights (NodeResourcesFit 1,
TaintToleration 3, NodeAffinity 2); every other score plugin is disabled, so kube-scheduler does
not pay for BalancedAllocation, ImageLocality, InterPodAffinity or PodTopologySpread scores that
Tessera does not compute. `percentageOfNodesToScore` is left at the adaptive default, which both
implement the same way. Leader election is off and `clientConnection.qps/burst` are the round's.

Why not `LocalControlPlane.start_kube_scheduler()`: it writes its own configuration (qps 200,
burst 400, default profile) and cannot take ours, so kube-scheduler is started here from the same
binary with `--config`, a loopback secure port (for /readyz) and its own cert dir.
"""

from __future__ import annotations

import asyncio
import compileall
import contextlib
import os
import shutil
import signal
import ssl
import subprocess
import tempfile
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from scheduler.kube.controlplane import ControlPlaneBinaries, LocalControlPlane
from scheduler.kube.controlplane.processes import ManagedProcess, free_port

__all__ = ["Contestant", "Profiler", "bench_plane", "control_plane_pids", "cpu_delta", "cpu_seconds", "cpu_times", "find_pid", "poll_ready", "rss_mib", "scheduler_config",
           "start_kube_scheduler", "start_raw_binder", "start_tessera"]

REPO_ROOT = Path(__file__).resolve().parents[1]
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def scheduler_config(path: Path, *, scheduler_name: str, kubeconfig: Path, qps: float, burst: int,
                     scores: Sequence[str] = ()) -> Path:
    config: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": qps, "burst": burst},
        "profiles": [{
            "schedulerName": scheduler_name,
            "plugins": {"score": {
                "disabled": [{"name": "*"}],
                "enabled": [{"name": "NodeResourcesFit", "weight": 1},
                            {"name": "TaintToleration", "weight": 3},
                            {"name": "NodeAffinity", "weight": 2},
                            # a workload's own score (bench.live --workload), at upstream's default weight
                            *({"name": name, "weight": 2} for name in scores)],
            }},
            "pluginConfig": [{
                "name": "NodeResourcesFit",
                "args": {"scoringStrategy": {
                    "type": "MostAllocated",
                    "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1},
                                  {"name": "nvidia.com/gpu", "weight": 1}],
                }},
            }],
        }],
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


async def poll_ready(url: str | None) -> float:
    """Monotonic time at which `url` first answered 200 (polled every 50 ms)."""
    assert url is not None
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # kube-scheduler's self-signed serving cert; only a status code is read
    async with aiohttp.ClientSession(trust_env=False, connector=aiohttp.TCPConnector(ssl=context)) as session:
        while True:
            with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError, OSError):
                async with session.get(url, timeout=aiohttp.ClientTimeout(total=1)) as response:
                    if response.status == 200:
                        return time.monotonic()
            await asyncio.sleep(0.05)


def cpu_times(pid: int | None) -> tuple[float, float] | None:
    """(user, system) CPU seconds of a live process, from /proc (None when unknown or gone).
    System time matters here: on loopback, a socket write also runs the receiver's TCP path."""
    if pid is None:
        return None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[11]) / _CLK_TCK, int(fields[12]) / _CLK_TCK  # utime, stime (fields 14, 15 of stat)


@contextlib.contextmanager
def bench_plane(workdir: Path | None, prefix: str, binaries: ControlPlaneBinaries,
                **options: Any) -> Iterator[tuple[LocalControlPlane, Path]]:
    """A started LocalControlPlane for one benchmark run, in `workdir` (kept) or a temp dir (removed),
    stopped on every way out — also on `kill`: SIGTERM is turned into SystemExit, as Ctrl-C is."""
    signal.signal(signal.SIGTERM, _terminate)
    with contextlib.ExitStack() as stack:
        if workdir is None:
            path = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=prefix)))
        else:
            path = workdir.resolve()
            path.mkdir(parents=True, exist_ok=True)
        plane = LocalControlPlane(path / "control-plane", binaries=binaries, **options)
        stack.callback(plane.stop)
        plane.start()
        yield plane, path


def control_plane_pids(plane: LocalControlPlane) -> dict[str, int | None]:
    """The pids of the plane's kube-apiserver, etcd and kwok (None where absent), for CPU and RSS."""
    binaries = plane.binaries
    return {"apiserver": find_pid(binaries.kube_apiserver, f"--secure-port={plane.apiserver_port}"),
            "etcd": find_pid(binaries.etcd, plane.etcd_url),
            "kwok": find_pid(binaries.kwok, str(plane.directory)) if binaries.kwok is not None else None}


def cpu_delta(before: float | None, after: float | None) -> float | None:
    """CPU seconds between two readings (None when either is unknown)."""
    return None if before is None or after is None else round(after - before, 2)


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def rss_mib(pid: int | None) -> float | None:
    """Resident memory of a live process in MiB, from /proc (None when unknown or gone)."""
    if pid is None:
        return None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU seconds of a live process (None when unknown or gone)."""
    times = cpu_times(pid)
    return None if times is None else times[0] + times[1]


def find_pid(binary: Path, marker: str) -> int | None:
    """The pid of a running `binary` whose command line contains `marker` (read-only /proc scan;
    used for the control plane's kube-apiserver and etcd, which LocalControlPlane does not expose)."""
    target = str(binary)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].decode(errors="replace") == target and any(marker.encode() in a for a in argv):
            return int(entry.name)
    return None


def _child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    no_proxy = ",".join(filter(None, [env.get("NO_PROXY", ""), "127.0.0.1,localhost"]))
    env["NO_PROXY"] = env["no_proxy"] = no_proxy
    env.update(extra or {})
    return env


@dataclass
class Contestant:
    """One scheduler (or the raw binder) process and where to ask whether it is ready."""

    name: str
    process: ManagedProcess
    ready_url: str | None  # None: no readiness endpoint (raw binder)

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def running(self) -> bool:
        return self.process.running()

    def stop(self, grace: float = 10.0) -> None:
        self.process.stop(grace)


def compile_tessera_bytecode(tree: Path = REPO_ROOT) -> None:
    """Compile Tessera's modules once, before any round: a deployed Tessera starts from compiled
    bytecode (the image runs compileall), but a machine with PYTHONDONTWRITEBYTECODE set (this one)
    would compile ~70 modules again at every start, about 0.1 s that lands in "start -> first
    Binding". The .pyc files go where Python looks for them (__pycache__, git-ignored)."""
    compileall.compile_dir(tree / "scheduler", quiet=1)


def start_tessera(workdir: Path, config: Path, kubeconfig: Path, tag: str, cprofile: Path | None = None, *,
                  tree: Path = REPO_ROOT, name: str = "tessera") -> Contestant:
    """`python -m scheduler run` from `tree` (another checkout for a before/after comparison; `-P`
    keeps the current directory off the import path), or under `bench.live_cprofile` when
    `cprofile` names its output."""
    port = free_port()
    wrapper = ["-m", "bench.live_cprofile", str(cprofile)] if cprofile is not None else []
    argv = [sys.executable, "-P", *wrapper, "-m", "scheduler", "run", "--config", str(config),
            "--kubeconfig", str(kubeconfig), "--bind-address", "127.0.0.1", "--port", str(port)]
    env = _child_env({"TESSERA_LOG_FORMAT": "json", "PYTHONPATH": str(tree)})
    process = ManagedProcess(name, argv, workdir / f"{name}-{tag}.log", env)
    process.start()
    return Contestant(name, process, f"http://127.0.0.1:{port}/readyz")


def start_kube_scheduler(binary: Path, workdir: Path, config: Path, tag: str) -> Contestant:
    port = free_port()
    argv = [str(binary), f"--config={config}", "--bind-address=127.0.0.1", f"--secure-port={port}",
            f"--cert-dir={workdir / 'kube-scheduler-certs'}"]
    process = ManagedProcess("kube-scheduler", argv, workdir / f"kube-scheduler-{tag}.log", _child_env())
    process.start()
    return Contestant("kube-scheduler", process, f"https://127.0.0.1:{port}/readyz")


def start_raw_binder(workdir: Path, plan: Path, tag: str, name: str = "raw-binder") -> Contestant:
    argv = [sys.executable, "-m", "bench.live_raw", str(plan)]
    env = _child_env({"PYTHONPATH": str(REPO_ROOT)})
    process = ManagedProcess("raw-binder", argv, workdir / f"raw-binder-{tag}.log", env)
    process.start()
    return Contestant(name, process, None)


def py_spy() -> str | None:
    beside = Path(sys.executable).parent / "py-spy"
    if beside.is_file():
        return str(beside)
    return shutil.which("py-spy")


class Profiler:
    """`py-spy record` attached to a Tessera process for one round (collapsed stacks, idle
    samples included, so the share of time spent waiting in the event loop's selector is visible).
    Stopped with SIGINT, which makes py-spy write its output."""

    def __init__(self, pid: int, output: Path, rate: int = 100) -> None:
        binary = py_spy()
        if binary is None:
            raise FileNotFoundError("py-spy is not installed (.venv/bin/pip install py-spy)")
        self.output = output
        self._log = open(output.with_suffix(".log"), "wb")
        self._popen = subprocess.Popen(
            [binary, "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw", "--idle",
             "--nonblocking", "--output", str(output)],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)

    def stop(self) -> Path | None:
        if self._popen.poll() is None:
            self._popen.send_signal(signal.SIGINT)
            try:
                self._popen.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._popen.kill()
                self._popen.wait(timeout=10)
        self._log.close()
        return self.output if self.output.is_file() else None


def wait_for_exit(contestant: Contestant, timeout: float) -> int | None:
    """For the raw binder: wait until it exits on its own; its return code (None on timeout)."""
    deadline = time.monotonic() + timeout
    while contestant.running() and time.monotonic() < deadline:
        time.sleep(0.05)
    return contestant.process.returncode()
