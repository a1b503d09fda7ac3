"""`kubectl tessera what-if` without `--config`: the installed configuration, as `nodes` and `explain`.

A new user's trial: `kubectl tessera what-if` exited 2 (`the following arguments are required:
--config`) where `nodes` and `explain` fall back to the installed (else the built-in)
configuration. Without a file it answers "what if these pods came now", with the configuration
the running scheduler has (its ConfigMap), else the built-in one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from scheduler.kube.http import Response
from scheduler.kubectl import cli
from scheduler.kubectl.target import Target
from scheduler.sim import builders as b
from tests.helpers import BINPACK, fake_listing

CONFIG_MAP = "/api/v1/namespaces/tessera-system/configmaps/tessera-scheduler-config"


class _Api:
    """Answers GETs by path (404 for any other), recording the paths asked."""

    def __init__(self, answers: dict[str, tuple[int, Any]]) -> None:
        self.answers, self.paths = answers, list[str]()

    async def request(self, method: str, path: str, **_: Any) -> Response:
        assert method == "GET"
        self.paths.append(path)
        status, body = self.answers.get(path, (404, {"kind": "Status", "code": 404}))
        return Response(status, orjson.dumps(body))


def test_what_if_needs_no_config_argument() -> None:
    args = cli.build_parser().parse_args(["what-if"])
    assert args.config is None


@pytest.mark.parametrize("installed", [True, False])
async def test_what_if_without_config_replays_with_the_installed_configuration(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], installed: bool) -> None:
    text = Path(BINPACK).read_text().replace("schedulerName: tessera", "schedulerName: gpu-batch")
    api = _Api({CONFIG_MAP: (200, {"kind": "ConfigMap", "data": {"config.yaml": text}})} if installed else {})
    objs = [b.node("n1", gpus=2), b.pod("p", scheduler="gpu-batch", limits={"nvidia.com/gpu": 1})]
    monkeypatch.setattr(cli, "_listing", fake_listing(api, objs))
    args = cli.build_parser().parse_args(["what-if", "-o", "json"])
    assert await cli._what_if(args, Target(None, None, "default")) == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert api.paths.count(CONFIG_MAP) == 1  # read once, for the replay and its Leader line alike
    if installed:  # the running scheduler's profile places its pod
        assert doc["config"] == "tessera-system/tessera-scheduler-config"
        assert [(o["pod"], o["node"]) for o in doc["outcomes"]] == [("default/p", "n1")]
    else:  # the built-in profile (schedulerName tessera) has no pod to place: it says whose it is
        assert doc["config"] != "tessera-system/tessera-scheduler-config"
        assert doc["outcomes"] == [] and doc["other_schedulers"] == {"gpu-batch": 1}
