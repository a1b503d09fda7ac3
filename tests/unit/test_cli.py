"""The command line loads only the module of the command it runs, and says the same either way."""

from __future__ import annotations

import argparse
import ast
import gc
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from scheduler import cli
from scheduler.cli import _MOUNTED, build_parser


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, str | None]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    return {choice.dest: choice.help for choice in action._choices_actions}  # noqa: SLF001


def test_help_lists_the_same_commands_and_summaries_with_or_without_the_modules() -> None:
    full = _subcommands(build_parser())
    light = _subcommands(build_parser("simulate"))
    assert full == light
    assert set(_MOUNTED) <= set(full)


def test_simulate_does_not_import_the_kubernetes_client_or_grpc() -> None:
    code = ("import sys; from scheduler.cli import main; "
            "main(['simulate', 'examples/tfjob-demo.jsonl', '--output', 'table']); "
            "print(sorted(m for m in ('kubernetes_asyncio', 'grpc', 'aiohttp') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2]).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_a_subcommand_whose_module_does_not_import_fails_in_one_line(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before, the ImportError was swallowed and the command left out: argparse then answered
    "invalid choice: 'broken'" (exit 2) for a command that `tessera --help` lists."""
    (tmp_path / "tessera_broken_command.py").write_text("import a_module_that_is_not_installed\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(cli._MOUNTED, "broken", ("tessera_broken_command", "a command that cannot load"))
    assert cli.main(["broken", "--flag"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == ("tessera: cannot load the broken command (tessera_broken_command): "
                            "ModuleNotFoundError: No module named 'a_module_that_is_not_installed'\n")
    demo = Path(__file__).resolve().parents[2] / "examples" / "tfjob-demo.jsonl"
    assert cli.main(["simulate", str(demo), "--output", "table"]) == 0  # the other commands still work


def test_a_commands_module_is_imported_with_the_collector_off_and_then_frozen(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The imports of `tessera run` build ~10^5 long-lived objects; collector passes over them
    cost a large share of the start-up's import time (scheduler/paused_import.py)."""
    (tmp_path / "tessera_probe_command.py").write_text(
        "import gc\n"
        "collector_on_at_import = gc.isenabled()\n"
        "kept = [{'object': i} for i in range(1000)]\n"
        "def add_parser(sub):\n"
        "    sub.add_parser('probe').set_defaults(func=lambda args: 0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(cli._MOUNTED, "probe", ("tessera_probe_command", "a command that records the collector"))
    gc.unfreeze()
    try:
        assert cli.main(["probe"]) == 0
        probe = sys.modules["tessera_probe_command"]
        assert probe.collector_on_at_import is False
        assert gc.isenabled()
        assert gc.get_freeze_count() >= len(probe.kept)
    finally:
        gc.unfreeze()
        sys.modules.pop("tessera_probe_command", None)


def test_the_kubectl_plugin_is_imported_with_the_collector_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """`kubectl-tessera` (pyproject's console script) enters through `scheduler.kubectl.main`,
    which imports the plugin's module the same way."""
    import scheduler.kubectl

    seen: list[tuple[str, bool]] = []

    class Plugin:
        @staticmethod
        def main() -> int:
            return 0

    def import_module(name: str) -> Plugin:
        seen.append((name, gc.isenabled()))
        return Plugin()

    monkeypatch.setattr("scheduler.paused_import.importlib.import_module", import_module)
    try:
        assert scheduler.kubectl.main() == 0
    finally:
        gc.unfreeze()
    assert seen == [("scheduler.kubectl.cli", False)]
    assert gc.isenabled()
    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    assert pyproject["project"]["scripts"]["kubectl-tessera"] == "scheduler.kubectl:main"


def test_the_apiserver_layer_does_not_import_the_agent() -> None:
    """The agent builds on scheduler/kube (its HTTP client, informers); the dependency goes one way
    only, so the agent CLI lives in the agent package."""
    kube = Path(__file__).resolve().parents[2] / "scheduler" / "kube"
    importers = []
    for path in kube.rglob("*.py"):
        tree = ast.parse(path.read_text())
        modules = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        modules |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        if any(m == "scheduler.agent" or m.startswith("scheduler.agent.") for m in modules):
            importers.append(path.relative_to(kube).as_posix())
    assert importers == []


def test_run_reads_kubeconfig_from_the_flag_the_configuration_then_the_environment(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A new user exported KUBECONFIG as `tessera dev-cluster` says and `tessera run` answered
    "no kubeconfig given and no in-cluster service account"; `record` and `kubectl tessera` read it."""
    from scheduler.api.config import load_config
    from scheduler.kube.http import kubeconfig_path

    builtin = load_config(None)
    configured = tmp_path / "config.yaml"
    configured.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                          "clientConnection:\n  kubeconfig: /from/config\nprofiles:\n- schedulerName: tessera\n")
    with_path = load_config(configured)
    monkeypatch.setenv("KUBECONFIG", "/from/env")
    assert kubeconfig_path("/from/flag", with_path.client_connection.kubeconfig) == "/from/flag"
    assert kubeconfig_path(None, with_path.client_connection.kubeconfig) == "/from/config"
    assert kubeconfig_path(None, builtin.client_connection.kubeconfig) == "/from/env"
    monkeypatch.setenv("KUBECONFIG", "")
    assert kubeconfig_path(None, builtin.client_connection.kubeconfig) is None  # in-cluster
    monkeypatch.delenv("KUBECONFIG")
    assert kubeconfig_path(None, builtin.client_connection.kubeconfig) is None


@pytest.mark.parametrize("port", ["-5", "99999"])
def test_run_refuses_a_port_out_of_range(port: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`--port 99999` used to be served on 99999 - 65536 and `--port -5` ended in a traceback."""
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["run", "--port", port])
    assert exit_info.value.code == 2
    assert "--port: must be 0-65535" in capsys.readouterr().err


@pytest.mark.parametrize("output", ["table", "html"])
def test_simulate_refuses_explain_where_the_output_cannot_show_it(output: str,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A new user's trial: `--explain -o table` printed the plain table, exit 0, and said nothing."""
    assert cli.main(["simulate", "examples/fragmentation.jsonl", "--explain", "-o", output]) == 2
    assert capsys.readouterr().err == (f"tessera: --explain adds per-node scores to the JSON lines of -o json; "
                                       f"-o {output} does not show them\n")
