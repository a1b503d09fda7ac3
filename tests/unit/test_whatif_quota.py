"""`kubectl tessera what-if -f` and the namespace's ResourceQuotas (a multi-tenant trial): a Job
asking 4 GPUs in team-c, whose quota allows requests.nvidia.com/gpu 3, was "placed", while the
apiserver refused its pods ("exceeded quota"). A pod the quota refuses is now said refused, in the
apiserver's words, and not placed; a gang it cuts short is said to be unable to be whole; a quota
that cannot be read is one warning line, the file placed as before."""

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

QUOTAS = "/api/v1/namespaces/team-c/resourcequotas"
LIMIT_RANGES = "/api/v1/namespaces/team-c/limitranges"


def _quota(name: str, hard: dict[str, str], used: dict[str, str] | None = None,
           spec: dict[str, Any] | None = None) -> dict[str, Any]:
    """A ResourceQuota the resourcequota controller has synced: status.hard as spec.hard."""
    return {"metadata": {"name": name, "namespace": "team-c"}, "spec": {"hard": hard, **(spec or {})},
            "status": {"hard": hard, "used": {name: "0" for name in hard} if used is None else used}}


class _Api:
    """The follow-up reads: team-c's ResourceQuotas answer `status` with `quotas`, its LimitRanges
    `limits_status` with `limit_ranges` (none given: 404, as an API without the list), the rest 404."""

    def __init__(self, quotas: list[dict[str, Any]], status: int = 200,
                 limit_ranges: list[dict[str, Any]] | None = None, limits_status: int = 200) -> None:
        self.quotas, self.status = quotas, status
        self.lists = {QUOTAS: ("ResourceQuotaList", quotas, status)}
        if limit_ranges is not None:
            self.lists[LIMIT_RANGES] = ("LimitRangeList", limit_ranges, limits_status)
        self.paths: list[str] = []

    async def request(self, method: str, path: str, **_: Any) -> Response:
        self.paths.append(path)
        if path in self.lists:
            kind, items, status = self.lists[path]
            return Response(status, orjson.dumps({"kind": kind, "metadata": {}, "items": items} if status == 200 else
                                                 {"kind": "Status", "code": status}))
        return Response(404, orjson.dumps({"kind": "Status", "code": 404}))


def _job(name: str, parallelism: int, gpus: int, labels: str = "{}") -> str:
    return (f"apiVersion: batch/v1\nkind: Job\nmetadata: {{name: {name}}}\nspec:\n  parallelism: {parallelism}\n"
            f"  template:\n    metadata: {{labels: {labels}}}\n    spec:\n      schedulerName: tessera\n"
            "      restartPolicy: Never\n"
            f"      containers:\n      - {{name: main, image: x, resources: {{limits: {{nvidia.com/gpu: {gpus}}}}}}}\n")


async def _what_if(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str,
                   api: _Api, *argv: str) -> tuple[str, str]:
    (tmp_path / "file.yaml").write_text(text)
    monkeypatch.setattr(cli, "_listing", fake_listing(api, [b.node("big", gpus=8)]))
    args = cli.build_parser().parse_args(["what-if", "--config", BINPACK, "-f", str(tmp_path / "file.yaml"),
                                          "-n", "team-c", *argv])
    assert await cli._what_if(args, Target(None, None, "team-c")) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


REFUSED = "refused by the apiserver (ResourceQuota admission): "


async def test_a_pod_the_quota_refuses_is_said_refused_and_not_placed(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    api = _Api([_quota("gpus", {"requests.nvidia.com/gpu": "3"})])
    out, err = await _what_if(monkeypatch, capsys, tmp_path, _job("toobig", 1, 4), api, "-o", "json")
    assert QUOTAS in api.paths and err == ""
    doc = orjson.loads(out)
    [outcome] = doc["outcomes"]
    assert (outcome["pod"], outcome["node"], outcome["refused"]) == ("team-c/toobig-0", "", True)
    assert outcome["message"] == (REFUSED + "exceeded quota: gpus, requested: requests.nvidia.com/gpu=4, used: "
                                  "requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=3")
    assert (doc["placed"], doc["refused"]) == (0, 1)
    out, _ = await _what_if(monkeypatch, capsys, tmp_path, _job("toobig", 1, 4), api)
    assert "team-c/toobig-0" in out and "exceeded quota: gpus, requested: requests.nvidia.com/gpu=4" in out
    assert ": 0 would be placed, 0 would stay pending, 1 would be refused by a ResourceQuota (configuration" in out
    # within the quota: placed, as before
    out, _ = await _what_if(monkeypatch, capsys, tmp_path, _job("fits", 1, 3), api, "-o", "json")
    assert [(o["node"], o["refused"]) for o in orjson.loads(out)["outcomes"]] == [("big", False)]


async def test_the_files_earlier_pods_count_and_a_refused_one_takes_no_gpus(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """3 pods of 2 GPUs under a quota of 5 with 2 used: the first is admitted (used 4), the second
    is refused (4 + 2 > 5), and so is the third (the second added nothing); only the first holds GPUs."""
    api = _Api([_quota("gpus", {"requests.nvidia.com/gpu": "5"}, {"requests.nvidia.com/gpu": "2"})])
    out, _ = await _what_if(monkeypatch, capsys, tmp_path, _job("train", 3, 2), api, "-o", "json")
    outcomes = orjson.loads(out)["outcomes"]
    assert [(o["pod"], o["node"], o["refused"]) for o in outcomes] == [
        ("team-c/train-0", "big", False), ("team-c/train-1", "", True), ("team-c/train-2", "", True)]
    assert outcomes[1]["message"] == (REFUSED + "exceeded quota: gpus, requested: requests.nvidia.com/gpu=2, used: "
                                      "requests.nvidia.com/gpu=4, limited: requests.nvidia.com/gpu=5")
    assert outcomes[2]["message"] == outcomes[1]["message"]
    assert "After:  GPUs: 8 total, 2 in use, 6 free" in (await _what_if(monkeypatch, capsys, tmp_path,
                                                                          _job("train", 3, 2), api))[0]


async def test_a_gang_with_a_refused_member_cannot_be_whole(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    api = _Api([_quota("pods", {"pods": "1"})])
    group = "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: g}\nspec: {minMember: 2}\n"
    text = f"{group}---\n{_job('gang', 2, 1, '{scheduling.x-k8s.io/pod-group: g}')}"
    out, _ = await _what_if(monkeypatch, capsys, tmp_path, text, api, "-o", "json")
    first, second = orjson.loads(out)["outcomes"]
    assert second["refused"] and second["message"] == (
        REFUSED + "exceeded quota: pods, requested: pods=1, used: pods=1, limited: pods=1; its gang team-c/g cannot be "
        "whole without it")
    assert first["node"] == "" and not first["refused"]
    assert first["message"].endswith("; gang team-c/g cannot be whole: the apiserver would refuse 1 of its pods for "
                                     "quota (team-c/gang-1)"), first["message"]


async def test_quotas_that_cannot_be_read_are_one_warning_and_the_file_is_placed(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out, err = await _what_if(monkeypatch, capsys, tmp_path, _job("toobig", 2, 4), _Api([], 403), "-o", "json")
    assert err == ("warning: cannot tell whether the ResourceQuotas of namespace team-c admit the file's pods: denied "
                   "(HTTP 403): needs list on resourcequotas in namespace team-c (the built-in view, edit and admin "
                   "roles grant it); placed as if they do\n")
    assert [o["node"] for o in orjson.loads(out)["outcomes"]] == ["big", "big"]
    # a scope it does not read: that quota is set aside, said once
    api = _Api([_quota("x", {"pods": "0"}, spec={"scopes": ["CrossNamespacePodAffinity"]})])
    out, err = await _what_if(monkeypatch, capsys, tmp_path, _job("toobig", 2, 4), api, "-o", "json")
    assert err == ("warning: ResourceQuota team-c/x: scope CrossNamespacePodAffinity is not read: taken as not "
                   "applying to the file's pods\n")
    assert [o["node"] for o in orjson.loads(out)["outcomes"]] == ["big", "big"]


def _limit_range(name: str, item: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "team-c"}, "spec": {"limits": [{"type": "Container", **item}]}}


def _bare_job(name: str, parallelism: int) -> str:
    """A Job whose container states no resources: the LimitRange's defaults are all it asks."""
    return (f"apiVersion: batch/v1\nkind: Job\nmetadata: {{name: {name}}}\nspec:\n  parallelism: {parallelism}\n"
            "  template:\n    spec:\n      schedulerName: tessera\n      restartPolicy: Never\n"
            "      containers:\n      - {name: main, image: x}\n")


async def test_a_limit_ranges_default_gpu_is_asked_and_counted_against_the_quota(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A re-trial: team-c's LimitRange gives a container that states none `nvidia.com/gpu: 1`, its
    quota allows 2; a Job of 3 bare pods was "3 would be placed", no GPU taken. LimitRanger gives
    each pod 1 GPU before ResourceQuota admits it: 2 placed holding 2 GPUs, the third refused."""
    api = _Api([_quota("gpus", {"requests.nvidia.com/gpu": "2"})],
               limit_ranges=[_limit_range("gpu-default", {"default": {"nvidia.com/gpu": "1"}})])
    out, err = await _what_if(monkeypatch, capsys, tmp_path, _bare_job("bare", 3), api, "-o", "json")
    assert err == "" and LIMIT_RANGES in api.paths
    outcomes = orjson.loads(out)["outcomes"]
    assert [(o["pod"], o["node"], o["refused"]) for o in outcomes] == [
        ("team-c/bare-0", "big", False), ("team-c/bare-1", "big", False), ("team-c/bare-2", "", True)]
    assert outcomes[2]["message"] == (REFUSED + "exceeded quota: gpus, requested: requests.nvidia.com/gpu=1, used: "
                                      "requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2")
    out, _ = await _what_if(monkeypatch, capsys, tmp_path, _bare_job("bare", 3), api)
    assert "After:  GPUs: 8 total, 2 in use, 6 free" in out


async def test_limit_ranges_that_cannot_be_read_are_one_warning_and_the_file_is_placed_as_written(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    api = _Api([_quota("gpus", {"requests.nvidia.com/gpu": "2"})], limit_ranges=[], limits_status=403)
    out, err = await _what_if(monkeypatch, capsys, tmp_path, _bare_job("bare", 3), api, "-o", "json")
    assert err == ("warning: cannot tell which requests and limits the LimitRanges of namespace team-c give the "
                   "file's pods, or whether they admit them: denied (HTTP 403): needs list on limitranges in namespace team-c (the built-in "
                   "view, edit and admin roles grant it); placed with those the file states\n")
    assert [(o["node"], o["refused"]) for o in orjson.loads(out)["outcomes"]] == [("big", False)] * 3


LIMIT_REFUSED = "refused by the apiserver (LimitRanger admission): "


async def test_a_pod_a_limit_range_refuses_is_said_refused_and_takes_no_quota(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """team-c's LimitRange caps a container at 2 GPUs: a Job asking 4 per pod was "placed", while the
    apiserver refused its pods ("maximum nvidia.com/gpu usage per Container is 2, but limit is 4").
    They are said refused by LimitRanger, and, never created, take none of the quota's one pod."""
    api = _Api([_quota("pods", {"pods": "1"})],
               limit_ranges=[_limit_range("gpu-cap", {"max": {"nvidia.com/gpu": "2"}})])
    text = f"{_job('big', 2, 4)}---\n{_job('small', 1, 1)}"
    out, err = await _what_if(monkeypatch, capsys, tmp_path, text, api, "-o", "json")
    doc = orjson.loads(out)
    assert err == "" and (doc["placed"], doc["refused"]) == (1, 2)
    assert [(o["pod"], o["node"], o["refused"], o["message"]) for o in doc["outcomes"]] == [
        ("team-c/big-0", "", True, LIMIT_REFUSED + "maximum nvidia.com/gpu usage per Container is 2, but limit is 4"),
        ("team-c/big-1", "", True, LIMIT_REFUSED + "maximum nvidia.com/gpu usage per Container is 2, but limit is 4"),
        ("team-c/small-0", "big", False, "")]
    out, _ = await _what_if(monkeypatch, capsys, tmp_path, text, api)
    assert ": 1 would be placed, 0 would stay pending, 2 would be refused by a LimitRange (configuration" in out


async def test_a_gang_with_a_member_a_limit_range_refuses_cannot_be_whole(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    api = _Api([], limit_ranges=[_limit_range("gpu-cap", {"max": {"nvidia.com/gpu": "2"}})])
    group = "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: g}\nspec: {minMember: 2}\n"
    pods = [f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, labels: {{scheduling.x-k8s.io/pod-group: g}}}}\n"
            f"spec: {{schedulerName: tessera, containers: [{{name: main, image: x, resources: {{limits: "
            f"{{nvidia.com/gpu: {gpus}}}}}}}]}}\n" for name, gpus in (("a", 1), ("b", 4))]
    out, _ = await _what_if(monkeypatch, capsys, tmp_path, "---\n".join([group, *pods]), api, "-o", "json")
    first, second = orjson.loads(out)["outcomes"]
    assert second["refused"] and second["message"] == (
        LIMIT_REFUSED + "maximum nvidia.com/gpu usage per Container is 2, but limit is 4; its gang team-c/g cannot be "
        "whole without it")
    assert first["message"].endswith("; gang team-c/g cannot be whole: the apiserver would refuse 1 of its pods for "
                                     "a LimitRange (team-c/b)"), first["message"]
