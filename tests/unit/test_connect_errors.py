"""Kubeconfig and connection problems at start-up: one clear line on stderr, the same in `tessera run`,
`record` and `agent`, and nothing else — no stray library log line, no traceback, no aiohttp
"Unclosed client session" (issue 10, part 3.5). The commands run as processes, as a user runs
them: what they leave on stderr at exit is part of what is tested."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import orjson
import pytest

from scheduler.kube.controlplane.processes import free_port
from tests.helpers import write_kubeconfig

REPO = Path(__file__).resolve().parents[2]
COMMANDS = ("run", "record", "agent")
PREFIX = {"run": "tessera: ", "record": "tessera record: ", "agent": "tessera agent: "}


def _argv(command: str, kubeconfig: Path, tmp_path: Path) -> list[str]:
    base = [sys.executable, "-m", "scheduler", command, "--kubeconfig", str(kubeconfig)]
    if command == "run":
        return [*base, "--port", "0"]
    if command == "record":
        return [*base, "-o", str(tmp_path / "out.jsonl"), "--duration", "5"]
    devices = tmp_path / "devices.yaml"
    devices.write_text("[]")
    return [*base, "--node-name", "n", "--backend", "fake", "--fake-devices", str(devices),
            "--device-plugin-dir", str(tmp_path), "--state-file", ""]


def _stderr_of(command: str, kubeconfig: Path, tmp_path: Path) -> tuple[int, list[str]]:
    done = subprocess.run(_argv(command, kubeconfig, tmp_path), cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    return done.returncode, done.stderr.splitlines()


def _unreachable_kubeconfig(path: Path) -> Path:
    """A well-formed kubeconfig whose server is a local port nothing listens on."""
    return write_kubeconfig(path, f"https://127.0.0.1:{free_port()}", skip_tls_verify=True)


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(("content", "message"), [
    (None, "cannot read kubeconfig {path}: no such file"),
    ("", "kubeconfig {path} is empty"),
    ("clusters: [\n", "kubeconfig {path} is not valid YAML: expected the node content, but found '<stream end>' "
                      "at line 2, column 1"),
    ("- just\n- a list\n", "kubeconfig {path} is not a kubeconfig (expected a mapping with clusters, users, "
                           "contexts and current-context)"),
    ("apiVersion: v1\nkind: Config\n", "kubeconfig {path} has no current-context; choose one with "
                                       "`kubectl config use-context NAME --kubeconfig {path}`"),
    ("apiVersion: v1\nkind: Config\ncurrent-context: gone\ncontexts: []\n",
     "kubeconfig {path}: context was not found for specified context: gone"),  # client-go's words
], ids=["missing", "empty", "garbage", "not-a-mapping", "no-context", "context-not-found"])
def test_unusable_kubeconfig_is_one_line_naming_the_file(command: str, content: str | None, message: str,
                                                         tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    if content is not None:
        path.write_text(content)
    code, lines = _stderr_of(command, path, tmp_path)
    assert (code, lines) == (2, [PREFIX[command] + message.format(path=path)])


def test_record_stops_at_once_on_an_unreachable_apiserver_with_one_line_naming_it(tmp_path: Path) -> None:
    """`record` is a command a user runs by hand, for a bounded time: an apiserver it cannot
    reach is an answer for them now, not a reason to sit silent (run and agent wait, below)."""
    path = _unreachable_kubeconfig(tmp_path / "kubeconfig")
    server = path.read_text().split('server: "')[1].split('"')[0]
    code, lines = _stderr_of("record", path, tmp_path)
    assert (code, lines) == (1, [f"{PREFIX['record']}cannot reach the apiserver at {server} (from {path}): "
                                 "connection refused"])


def _lines(stream: IO[str], into: queue.Queue[str]) -> None:
    for line in stream:
        into.put(line)


def _until(lines: queue.Queue[str], seen: list[dict[str, Any]], wanted: Callable[[list[dict[str, Any]]], bool],
           timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not wanted(seen):
        try:
            line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"not seen in {timeout} s; lines: {seen}") from None
        seen.append(orjson.loads(line))


def _get(url: str) -> int:
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url, timeout=5) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as err:
        return err.code


@pytest.mark.parametrize("command", ["run", "agent"])
def test_run_and_agent_wait_for_an_unreachable_apiserver_and_stop_on_sigterm(command: str, tmp_path: Path) -> None:
    """A scheduler or agent pod often starts before the apiserver answers (a control-plane
    restart, a network not ready yet): as kube-scheduler, it keeps trying with backoff — one
    warning per attempt naming the server, the error, the attempt and the next delay — instead of
    exiting into CrashLoopBackOff; `run`'s /healthz stays alive and /readyz says not ready (and
    why, in the log). A SIGTERM meanwhile ends it cleanly: `run` with the `tessera.stopped` line
    every other shutdown of it prints, `agent` with `agent.stopped` (both exited 0 without one)."""
    path = _unreachable_kubeconfig(tmp_path / "kubeconfig")
    server = path.read_text().split('server: "')[1].split('"')[0]
    child = subprocess.Popen(_argv(command, path, tmp_path), cwd=REPO, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "TESSERA_LOG_FORMAT": "json"})
    try:
        assert child.stderr is not None
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=_lines, args=(child.stderr, lines), daemon=True).start()
        seen: list[dict[str, Any]] = []

        def waits(count: int) -> Callable[[list[dict[str, Any]]], bool]:
            return lambda logged: sum(line["event"] == "apiserver.unreachable" for line in logged) >= count

        _until(lines, seen, waits(2))
        warnings = [line for line in seen if line["event"] == "apiserver.unreachable"]
        assert [(w["level"], w["server"], w["error"], w["attempt"]) for w in warnings] == [
            ("warning", server, "connection refused", 1), ("warning", server, "connection refused", 2)]
        # 0.8 s and 1.6 s stretched by a jitter in [0, 1), logged rounded to 0.01 s: a jitter
        # of 0.994 or more logs the bound itself (1.6, 3.2)
        assert 0.8 <= warnings[0]["retry_in"] <= 1.6 and 1.6 <= warnings[1]["retry_in"] <= 3.2
        assert child.poll() is None
        if command == "run":
            [started] = [line for line in seen if line["event"] == "serving.started"]
            assert _get(started["address"] + "/healthz") == 200
            assert _get(started["address"] + "/readyz") == 500
            _until(lines, seen, lambda logged: any(line["event"] == "probe.failed" for line in logged))
            [failed] = [line for line in seen if line["event"] == "probe.failed"]
            assert f"cannot reach the apiserver at {server}: connection refused" in str(failed), failed
        child.send_signal(signal.SIGTERM)
        assert child.wait(20) == 0
        stopped = {"run": "tessera.stopped", "agent": "agent.stopped"}[command]
        _until(lines, seen, lambda logged: any(line["event"] == stopped for line in logged), timeout=5)
        assert seen[-1]["event"] == stopped and seen[-1]["level"] == "info", seen[-1]
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_a_missing_exec_credential_plugin_is_one_line(tmp_path: Path) -> None:
    """Regression (review): the kubeconfig loader logged the error itself before raising it (a
    stray line for GKE/EKS users whose auth plugin is not installed)."""
    path = tmp_path / "kubeconfig"
    path.write_text(f"""apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {{server: "https://127.0.0.1:{free_port()}", insecure-skip-tls-verify: true}}
users:
- name: u
  user:
    exec: {{apiVersion: client.authentication.k8s.io/v1beta1, command: /nonexistent/gke-gcloud-auth-plugin}}
contexts:
- name: ctx
  context: {{cluster: c, user: u}}
current-context: ctx
""")
    code, lines = _stderr_of("record", path, tmp_path)
    assert len(lines) == 1 and lines[0].startswith(f"tessera record: kubeconfig {path} is not usable: "), lines


def test_the_kubeconfig_is_the_flag_then_the_environment_then_the_users_kube_config(tmp_path: Path) -> None:
    """As kubectl: ~/.kube/config when nothing else names one (record said 'no kubeconfig given')."""
    from scheduler.kube.http import kubeconfig_path
    assert kubeconfig_path(None, environ={}, home=tmp_path) is None
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text("apiVersion: v1\n")
    assert kubeconfig_path(None, environ={}, home=tmp_path) == str(tmp_path / ".kube" / "config")
    assert kubeconfig_path(None, environ={"KUBECONFIG": "/k"}, home=tmp_path) == "/k"
    assert kubeconfig_path("/flag", environ={"KUBECONFIG": "/k"}, home=tmp_path) == "/flag"


@pytest.fixture
def untrusted_tls_server(tmp_path: Path) -> Any:
    """An HTTPS server whose self-signed certificate no kubeconfig here trusts: its URL."""
    import http.server
    import ssl

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@pytest.mark.parametrize("command", ["run", "agent"])
def test_an_untrusted_certificate_ends_run_and_agent_with_one_line(command: str, untrusted_tls_server: str,
                                                                    tmp_path: Path) -> None:
    """A review: the wait for the apiserver raised the certificate error inside a task group, so it
    reached the commands as an exception group their one-line handler did not catch: a traceback
    of several frames. A certificate the kubeconfig does not trust is no reason to wait (it will
    not fix itself), and no reason for a traceback either."""
    path = write_kubeconfig(tmp_path / "kubeconfig", untrusted_tls_server)
    code, lines = _stderr_of(command, path, tmp_path)
    said = [line for line in lines if not line.startswith("{")]  # run's structured log lines before it: serving
    assert code == 1 and len(said) == 1, lines
    assert said[0].startswith(f"{PREFIX[command]}cannot reach the apiserver at {untrusted_tls_server} (from {path}): ")
    assert "certificate verify failed" in said[0], said
