"""`tessera agent` start-up: bad arguments and environments are one line and a non-zero exit."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler import cli
from scheduler.agent import cli as agent_cli


@pytest.fixture(autouse=True)
def _keep_logging(monkeypatch: pytest.MonkeyPatch) -> None:
    # configure_logging binds structlog to the current stderr, which capsys closes after the test
    monkeypatch.setattr(agent_cli, "configure_logging", lambda: None)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = cli.main(["agent", "--node-name", "n", *argv])
    return code, capsys.readouterr().err.strip()


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert _run(capsys, "--backend", "fake") == (2, "tessera agent: --backend fake needs --fake-devices FILE")
    code, err = _run(capsys, "--resource-name", "gpu", "--backend", "fake", "--fake-devices", "x")
    assert code == 2 and err.startswith("tessera agent: --resource-name:") and "fully qualified" in err
    assert _run(capsys, "--heartbeat-seconds", "0")[0] == 2


def test_environment_errors_exit_1(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, err = _run(capsys, "--device-plugin-dir", str(tmp_path / "missing"), "--backend", "fake",
                     "--fake-devices", "x")
    assert code == 1 and "is not a directory" in err
    code, err = _run(capsys, "--device-plugin-dir", str(tmp_path), "--backend", "fake",
                     "--fake-devices", str(tmp_path / "nope.yaml"))
    assert code == 1 and err.startswith("tessera agent: cannot read") and "\n" not in err
    bad = tmp_path / "bad.yaml"
    bad.write_text("- {uuid: GPU-1, model: T4}\n")
    code, err = _run(capsys, "--device-plugin-dir", str(tmp_path), "--backend", "fake", "--fake-devices", str(bad))
    assert code == 1 and "memory: Required value" in err
    code, err = _run(capsys, "--device-plugin-dir", str(tmp_path))  # nvml: no driver here (credentials on a GPU host)
    assert code == 1 and ("NVML initialisation failed" in err or "credentials" in err)


def test_missing_credentials_are_reported(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    devices = tmp_path / "devices.yaml"
    devices.write_text("[]")
    code, err = _run(capsys, "--device-plugin-dir", str(tmp_path), "--backend", "fake", "--fake-devices", str(devices),
                     "--kubeconfig", str(tmp_path / "no-kubeconfig"))
    assert (code, err) == (2, f"tessera agent: cannot read kubeconfig {tmp_path / 'no-kubeconfig'}: no such file")


def test_kubeconfig_from_the_environment(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """As `tessera run`, `record` and `kubectl tessera`: $KUBECONFIG (what `tessera dev-cluster`
    tells you to export) before the in-cluster service account (a new user's trial)."""
    devices = tmp_path / "devices.yaml"
    devices.write_text("[]")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "exported"))
    code, err = _run(capsys, "--device-plugin-dir", str(tmp_path), "--backend", "fake", "--fake-devices", str(devices))
    assert (code, err) == (2, f"tessera agent: cannot read kubeconfig {tmp_path / 'exported'}: no such file")
