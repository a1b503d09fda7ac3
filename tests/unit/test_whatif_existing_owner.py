"""`what-if -f` refuses a file whose objects exist already: a Pod or PodGroup did, a Job did not
(a capacity planner's trial: an existing Job's pods were reported as would-be-placed, though
`kubectl apply` of the file would create none). Every owner kind what-if expands is looked up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from scheduler.kube.http import Response
from scheduler.kubectl import cli
from scheduler.kubectl.target import Target
from scheduler.sim import builders as b
from tests.helpers import fake_listing

TEMPLATE = """  template:
    spec:
      schedulerName: tessera
      restartPolicy: Never
      containers:
      - {name: main, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
"""
WORKLOADS = {
    "/apis/batch/v1/namespaces/ml/jobs/train": "apiVersion: batch/v1\nkind: Job\nmetadata: {name: train}\n"
                                               "spec:\n  parallelism: 2\n" + TEMPLATE,
    "/apis/apps/v1/namespaces/ml/deployments/web": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"
                                                   "spec:\n  replicas: 2\n  selector: {matchLabels: {a: b}}\n"
                                                   + TEMPLATE.replace("    spec:", "    metadata: {labels: {a: b}}\n"
                                                                      "    spec:"),
    "/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs/pt": (
        "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: pt}\nspec:\n  pytorchReplicaSpecs:\n"
        "    Master:\n      replicas: 1\n" + "\n".join("    " + line for line in TEMPLATE.splitlines()) + "\n"),
}
KINDS = {"/apis/batch/v1/namespaces/ml/jobs/train": "Job ml/train",
         "/apis/apps/v1/namespaces/ml/deployments/web": "Deployment ml/web",
         "/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs/pt": "PyTorchJob ml/pt"}


class _Api:
    def __init__(self, existing: str) -> None:
        self.existing = existing

    async def request(self, method: str, path: str, **_: Any) -> Response:
        if path == self.existing:
            return Response(200, orjson.dumps({"kind": "Object"}))
        return Response(404, orjson.dumps({"kind": "Status", "code": 404}))


@pytest.mark.parametrize("path", sorted(WORKLOADS))
async def test_an_existing_workload_in_the_file_is_an_error(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, path: str) -> None:
    (tmp_path / "w.yaml").write_text(WORKLOADS[path])
    monkeypatch.setattr(cli, "_listing", fake_listing(_Api(path), [b.node("n", gpus=8)]))
    args = cli.build_parser().parse_args(["what-if", "-n", "ml", "-f", str(tmp_path / "w.yaml")])
    with pytest.raises(cli.CommandError, match=f"already in the cluster: {KINDS[path]}; what-if -f asks what "
                                               "creating them would do"):
        await cli._what_if(args, Target(None, None, "ml"))
    # not there: placed as before
    monkeypatch.setattr(cli, "_listing", fake_listing(_Api(""), [b.node("n", gpus=8)]))
    assert await cli._what_if(args, Target(None, None, "ml")) == 0
    assert "would be placed" in capsys.readouterr().out


async def test_the_table_sorts_names_naturally(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """team-b-train-2 before team-b-train-10 (a trial's table read 0, 1, 10, 11, 2, ...)."""
    (tmp_path / "pods.yaml").write_text("\n---\n".join(
        f"apiVersion: v1\nkind: Pod\nmetadata: {{name: team-b-train-{i}}}\nspec:\n  schedulerName: tessera\n"
        "  containers: [{name: main, image: x}]" for i in (10, 2, 1)))
    monkeypatch.setattr(cli, "_listing", fake_listing(_Api(""), [b.node("n", gpus=8)]))
    args = cli.build_parser().parse_args(["what-if", "-f", str(tmp_path / "pods.yaml")])
    assert await cli._what_if(args, Target(None, None, "default")) == 0
    rows = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.startswith("default/")]
    assert rows == ["default/team-b-train-1", "default/team-b-train-2", "default/team-b-train-10"]


class _Slow:
    """Every workload GET answers `status` after a pause; counts the GETs in flight at once."""

    def __init__(self, status: int) -> None:
        self.status, self.flying, self.most, self.asked = status, 0, 0, 0

    async def request(self, method: str, path: str, **_: Any) -> Response:
        if "/jobs/" not in path:
            return Response(404, orjson.dumps({"kind": "Status", "code": 404}))
        self.asked += 1
        self.flying += 1
        self.most = max(self.most, self.flying)
        await anyio.sleep(0.01)
        self.flying -= 1
        return Response(self.status, orjson.dumps({"kind": "Status", "code": self.status}))


def _jobs(n: int) -> str:
    return "\n---\n".join(f"apiVersion: batch/v1\nkind: Job\nmetadata: {{name: j-{i}}}\nspec:\n  parallelism: 1\n"
                          + TEMPLATE for i in range(n))


async def test_many_workloads_are_looked_up_together_and_one_refusal_is_said_once(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A review: a file of 200 Jobs made 200 GETs one after another (each up to 30 s when the
    apiserver is slow), and a user without `get jobs` read 200 warning lines. The GETs go out a few
    at a time; the workloads one answer could not tell of are named in one line, how many and the
    first few."""
    (tmp_path / "jobs.yaml").write_text(_jobs(40))
    api = _Slow(403)
    monkeypatch.setattr(cli, "_listing", fake_listing(api, [b.node("n", gpus=64)]))
    args = cli.build_parser().parse_args(["what-if", "-n", "ml", "-f", str(tmp_path / "jobs.yaml")])
    assert await cli._what_if(args, Target(None, None, "ml")) == 0
    assert api.asked == 40 and api.most > 1
    told = [line for line in capsys.readouterr().err.splitlines() if "cannot tell" in line]
    assert told == ["warning: cannot tell whether 40 of the file's workloads exist (Job ml/j-0, Job ml/j-1, "
                    "Job ml/j-2 and 37 more): HTTP 403; taken as absent"], told
