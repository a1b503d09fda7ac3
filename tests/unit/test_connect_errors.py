"""Kubeconfig and connection problems at start-up: one clear line on stderr, the same in `tessera run`,
`record` and `agent`, and nothing else — no stray library log line, no traceback, no aiohttp
"Unclosed client session" (issue 10, part 3.5). The commands run as processes, as a user runs
them: what they leave on stderr at exit is part of what is tested."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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


@pytest.mark.parametrize("command", COMMANDS)
def test_unreachable_apiserver_is_one_line_naming_the_server(command: str, tmp_path: Path) -> None:
    path = _unreachable_kubeconfig(tmp_path / "kubeconfig")
    server = path.read_text().split('server: "')[1].split('"')[0]
    code, lines = _stderr_of(command, path, tmp_path)
    assert (code, lines) == (1, [f"{PREFIX[command]}cannot reach the apiserver at {server} (from {path}): "
                                 "connection refused"])


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
