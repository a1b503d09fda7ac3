"""Child processes of the local control plane: start, wait until ready, stop.

Why a wrapper around ``subprocess.Popen``: every component (etcd, kube-apiserver, ...) needs the
same care — its output in a log file we can quote when it dies at start-up, its own session so a
signal to the test runner's terminal does not hit it half-way through teardown, SIGTERM then
SIGKILL on stop, and a port clash detected so the caller can retry on fresh ports.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

__all__ = ["ManagedProcess", "ProcessStartError", "free_port"]

_PORT_CLASH_MARKERS = ("address already in use", "bind: address", "failed to listen")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


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
            log.write(f"\n=== {time.strftime('%H:%M:%S')} starting {' '.join(self.argv)}\n".encode())
            log.flush()
            self._popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self._env,
                start_new_session=True,
            )

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
