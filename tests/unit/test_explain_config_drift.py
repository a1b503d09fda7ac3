"""explain and what-if warn when the leader runs another configuration than the one they dry-run.

A user trial: after `helm upgrade` changed the ConfigMap tessera-scheduler-config, `kubectl tessera
explain` ran "with the configuration tessera-system/tessera-scheduler-config" while the leader
still ran the old one (nothing reloads; a restart is needed), and nothing said so; likewise when
the new pods crash-looped on a bad upgrade and the old leader kept running. The dry run explained
decisions nobody made. The leader records its configuration digest on its Lease
(scheduler/kube/leader.py); the ConfigMap's is computed as the scheduler computes it."""

from __future__ import annotations

import argparse
from typing import Any

import orjson
import pytest

from scheduler.api.config import load_config, parse_config_text
from scheduler.api.config_effective import config_digest
from scheduler import __version__
from scheduler.kube.leader import CONFIG_DIGEST_ANNOTATION, CONFIG_HOLDER_ANNOTATION, CONFIG_VERSION_ANNOTATION
from scheduler.kubectl import cli
from scheduler.kubectl.target import Target
from scheduler.sim import builders as b
from tests.unit.test_explain_leader import _CONFIG_MAP, NOW, _Api, _args, _installed_text, _lease, _serve

HOLDER = "tessera-7c9_1f"
OLD = _installed_text()  # what the leader started with
NEW = OLD + "profiles:\n- schedulerName: tessera\n  plugins:\n    score:\n      disabled:\n      - name: '*'\n"
WARNING = "Warning:"


def _recorded(digest: str | None, holder: str = HOLDER, version: str = __version__) -> dict[str, Any]:
    """The leader's Lease, renewed 1 s ago, with the digest it records (None: no annotation) and
    the version of Tessera that computed it."""
    lease = _lease(HOLDER, NOW - 1)
    if digest is not None:
        lease["metadata"] = {"annotations": {CONFIG_DIGEST_ANNOTATION: digest, CONFIG_HOLDER_ANNOTATION: holder,
                                             CONFIG_VERSION_ANNOTATION: version}}
    return lease


def _api(installed: str | None, digest: str | None, holder: str = HOLDER, version: str = __version__) -> _Api:
    config_map = {} if installed is None else {
        _CONFIG_MAP: (200, {"kind": "ConfigMap", "data": {"config.yaml": installed}})}
    return _Api([(200, _recorded(digest, holder, version))], config_map)


def _digest(text: str) -> str:
    return config_digest(parse_config_text(text, "x"))


async def _run(command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], api: _Api,
               output: str = "table", config: str | None = None) -> str:
    _serve(monkeypatch, api, [b.node("n1", gpus=4), b.pod("gap-pod", limits={"nvidia.com/gpu": 1})])
    if command == "explain":
        args = _args("gap-pod")
        args.config, args.output = config, output
        assert await cli._explain(args, Target(None, None, "default")) == 0
    else:
        args = argparse.Namespace(config=config, namespace=None, all_namespaces=False, filename=None, rename=False,
                                  without_node=None, without_nodes=None,
                                  scheduler_namespace="tessera-system", output=output, seed=0)
        assert await cli._what_if(args, Target(None, None, "default")) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("command", ["explain", "what-if"])
async def test_a_configmap_the_leader_does_not_run_is_said_beside_the_leader_line(
        command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = _digest(OLD), _digest(NEW)
    assert old != new
    out = await _run(command, monkeypatch, capsys, _api(NEW, old))
    lines = out.splitlines()
    [at] = [i for i, line in enumerate(lines) if line.startswith("Leader:")]
    warning = lines[at + 1]
    assert warning.startswith(WARNING), out
    assert (f"the leader {HOLDER} runs the configuration with digest {old}, but the ConfigMap "
            f"tessera-system/tessera-scheduler-config holds {new}, which this dry run uses") in warning, warning
    assert "kubectl -n tessera-system rollout restart deploy/tessera-scheduler" in warning, warning
    # a re-trial ran the scheduler by hand (deploy/README's dev-cluster path: the Deployment at 0
    # replicas), where a rollout restart does nothing: the warning names that case's restart too
    assert ("or, for a scheduler run by hand, run it again with the ConfigMap's config.yaml as --config "
            "(kubectl -n tessera-system get configmap tessera-scheduler-config -o "
            "'jsonpath={.data.config\\.yaml}')") in warning, warning
    assert "kubectl -n tessera-system get pods" in warning, warning  # new pods that do not start: why
    assert sum(line.startswith(WARNING) for line in lines) == 1


@pytest.mark.parametrize("command", ["explain", "what-if"])
async def test_the_json_form_carries_both_digests(command: str, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    doc = orjson.loads(await _run(command, monkeypatch, capsys, _api(NEW, _digest(OLD)), output="json"))
    leader = doc["member"]["leader"] if "member" in doc else doc["leader"]
    assert leader["config_digest"] == _digest(OLD)
    assert leader["config_version"] == __version__
    assert leader["drift"].startswith(f"the leader {HOLDER} runs the configuration with digest {_digest(OLD)}, "
                                      f"but the ConfigMap")


@pytest.mark.parametrize("command", ["explain", "what-if"])
@pytest.mark.parametrize("case", ["equal", "no-annotation", "another-holder", "another-version"])
async def test_no_warning_when_equal_or_unknown(command: str, case: str, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Equal digests; a Lease without the annotation (another program's holder, a Tessera before
    it wrote one); a digest another holder recorded (a Go holder took the Lease over, keeping
    the metadata it read): unknown, not a mismatch. A digest another version of Tessera computed
    (this kubectl-tessera is not the leader's release): two versions may digest the same settings
    differently (docs/configuration.md), and a restart would not make the warning go."""
    api = {"equal": _api(NEW, _digest(NEW)), "no-annotation": _api(NEW, None),
           "another-holder": _api(NEW, _digest(OLD), holder="someone-else"),
           "another-version": _api(NEW, _digest(OLD), version="0.0.9")}[case]
    out = await _run(command, monkeypatch, capsys, api)
    assert "Leader:" in out and WARNING not in out, out


@pytest.mark.parametrize("command", ["explain", "what-if"])
async def test_without_a_configmap_the_built_in_digest_is_compared(
        command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    built_in = config_digest(load_config(None))
    api = _api(None, built_in)
    api.leases = [(200, _recorded(built_in))]
    _lease_path = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/tessera"
    out = await _run(command, monkeypatch, capsys, api)
    assert _lease_path in api.paths and "Leader:" in out and WARNING not in out, out
    api.leases = [(200, _recorded(_digest(OLD)))]
    out = await _run(command, monkeypatch, capsys, api)
    [warning] = [line for line in out.splitlines() if line.startswith(WARNING)]
    assert (f"the leader {HOLDER} runs the configuration with digest {_digest(OLD)}, but the built-in "
            f"configuration this dry run uses (there is no ConfigMap tessera-system/tessera-scheduler-config) is "
            f"{built_in}") in warning, warning
    assert "--config" in warning


@pytest.mark.parametrize("command", ["explain", "what-if"])
async def test_a_configuration_given_with_config_is_not_compared(
        command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    """--config FILE asks what another configuration would do: that it differs is the point."""
    tried = tmp_path / "tried.yaml"
    tried.write_text(NEW)
    out = await _run(command, monkeypatch, capsys, _api(OLD, _digest(OLD)), config=str(tried))
    assert "Leader:" in out and WARNING not in out, out


@pytest.mark.parametrize("command", ["explain", "what-if"])
async def test_a_configmap_that_could_not_be_used_is_not_compared(
        command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A bad upgrade's ConfigMap (invalid, its leaderElection still read: the Lease is known): the
    dry run falls back to the built-in configuration, which no replica was started with; its
    digest against the leader's would say a drift that is not the one to fix (the ConfigMap's own
    warning says what is)."""
    invalid = OLD + "profiles:\n- schedulerName: tessera\n  plugins:\n    score:\n      enabled:\n      - name: NoSuch\n"
    out = await _run(command, monkeypatch, capsys, _api(invalid, _digest(OLD)))
    assert "Leader:" in out and HOLDER in out and WARNING not in out, out


async def test_a_leader_that_renews_while_watched_has_its_digest_read(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The Lease read first looks late; the holder renews while the command watches: the renewed
    Lease's digest is the one compared."""
    late = _recorded(_digest(OLD))
    late["spec"] = _lease(HOLDER, NOW - 30)["spec"]
    renewed = _recorded(_digest(OLD))
    renewed["spec"] = _lease(HOLDER, NOW + 1)["spec"]
    api = _api(NEW, _digest(OLD))
    api.leases = [(200, late), (200, renewed)]
    out = await _run("explain", monkeypatch, capsys, api)
    assert "while this command watched" in out, out
    [warning] = [line for line in out.splitlines() if line.startswith(WARNING)]
    assert f"runs the configuration with digest {_digest(OLD)}" in warning, warning
