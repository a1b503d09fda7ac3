"""Child processes of the local control plane: start, wait until ready, stop.

Why a wrapper around ``subprocess.Popen``: every component (etcd, kube-apiserver, ...) needs the
same care — its output in a log file we can quote when it dies at start-up, its own session so a
signal to the test runner's terminal does not hit it half-way through teardown, SIGTERM then
SIGKILL on stop, a port clash detected so the caller can retry on fresh ports, and, on Linux, death
with the process that started it: its own session ties it to nothing else, so a SIGKILLed
``tessera dev-cluster`` (a crash, an OOM kill; no handler runs) left etcd, kube-apiserver and kwok
running for good, holding their ports.
"""

from __future__ import annotations

import ctypes
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

__all__ = ["ManagedProcess", "ProcessStartError", "free_port", "popen_dying_with_parent"]

_PORT_CLASH_MARKERS = ("address already in use", "bind: address", "failed to listen")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


def _die_with(parent: int) -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the child SIGKILLed when its parent dies (Linux).

    SIGKILL, not SIGTERM: a plane whose owner died is throw-away (the next dev-cluster removes
    etcd's data) and must let go of its ports at once. Runs between fork and exec, so it only
    calls prctl(2) and getppid(2); a parent that died before prctl took effect is caught by the
    getppid check."""
    libc = _LIBC
    if libc is None:
        return None

    def preexec() -> None:
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


class _Spawner:
    """The one thread that forks every component, alive as long as this process.

    Why: the parent-death signal fires when the *thread* that forked the child exits, not the
    process. Components are started from whatever thread calls (``asyncio.to_thread`` in tests
    and benchmarks, whose worker threads end with their event loop); forking there would kill a
    session-long kube-apiserver with the first test's loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: queue.SimpleQueue[tuple[Callable[[], subprocess.Popen[bytes]],
                                                Future[subprocess.Popen[bytes]]]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def popen(self, start: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name="controlplane-spawner", daemon=True)
                self._thread.start()
        result: Future[subprocess.Popen[bytes]] = Future()
        self._requests.put((start, result))
        return result.result()

    def _serve(self) -> None:
        while True:
            start, result = self._requests.get()
            try:
                result.set_result(start())
            except BaseException as err:  # noqa: BLE001 - handed to the caller, which raises it
                result.set_exception(err)


_SPAWNER = _Spawner()


def popen_dying_with_parent(argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(argv, **kwargs)`` in its own session, SIGKILLed when this process dies.

    The one way this project starts a long-running child it owns: the control plane's components
    here, and the test harness's scheduler replicas (``tessera_testing.faultrun``), which a ``make
    test`` stopped by SIGTERM (a CI timeout) otherwise left running under PID 1. Forked from the
    one spawner thread, so a caller on a short-lived thread does not end the child with it."""
    parent = os.getpid()
    return _SPAWNER.popen(lambda: subprocess.Popen(
        argv, start_new_session=True, preexec_fn=_die_with(parent), **kwargs))


class ProcessStartError(RuntimeError):
    """A component exited or never became ready; the message ends with its log tail."""

    def __init__(self, message: str, *, port_clash: bool = False) -> None:
        super().__init__(message)
        self.port_clash = port_clash


class ManagedProcess:
    """One long-running binary with its output appended to ``log_path``."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self._env = dict(env) if env is not None else None
        self._popen: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen is not None else None

    def start(self) -> None:
        if self.running():
            return
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            # the log is appended to across runs: the date tells them apart (ISO 8601, UTC)
            log.write(f"\n=== {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} starting {' '.join(self.argv)}\n"
                      .encode())
            log.flush()
            self._popen = popen_dying_with_parent(
                self.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=self._env)

    def running(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def returncode(self) -> int | None:
        return self._popen.poll() if self._popen is not None else None

    def log_tail(self, lines: int = 30) -> str:
        try:
            data = self.log_path.read_bytes()[-16384:]
        except OSError:
            return "(no log)"
        return "\n".join(data.decode(errors="replace").splitlines()[-lines:])

    def _failure(self, what: str) -> ProcessStartError:
        tail = self.log_tail()
        clash = any(marker in tail.lower() for marker in _PORT_CLASH_MARKERS)
        return ProcessStartError(
            f"{self.name} {what}; last lines of {self.log_path}:\n{tail}", port_clash=clash
        )

    def wait_ready(self, probe: Callable[[], bool], timeout: float, interval: float = 0.1) -> None:
        """Poll ``probe`` until it returns true; raise :class:`ProcessStartError` when the process
        exits or ``timeout`` passes (the process is then stopped)."""
        deadline = time.monotonic() + timeout
        while True:
            if not self.running():
                raise self._failure(f"exited with status {self.returncode()} during start-up")
            try:
                if probe():
                    return
            except Exception:  # noqa: BLE001 - any probe error means "not ready yet"
                pass
            if time.monotonic() > deadline:
                failure = self._failure(f"was not ready within {timeout:.0f} s")
                self.stop(grace=2.0)  # a half-started component must not linger
                raise failure
            time.sleep(interval)

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the process group, then SIGKILL after ``grace`` seconds. Idempotent."""
        popen = self._popen
        if popen is None:
            return
        if popen.poll() is None:
            self._signal(popen, signal.SIGTERM)
            try:
                popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self._signal(popen, signal.SIGKILL)
                popen.wait(timeout=10)
        self._popen = None

    @staticmethod
    def _signal(popen: subprocess.Popen[bytes], sig: signal.Signals) -> None:
        # The child leads its own session (start_new_session=True), so its group id is its pid:
        # this reaches only processes it started itself.
        try:
            os.killpg(popen.pid, sig)
        except ProcessLookupError:
            pass
        except PermissionError:
            popen.send_signal(sig)
