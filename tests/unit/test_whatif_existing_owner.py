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
from scheduler.kubectl import cli, probe_pods
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


GANG_FILE = """apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: g}
spec: {minMember: 2}
---
apiVersion: batch/v1
kind: Job
metadata: {name: train}
spec:
  parallelism: 2
  template:
    metadata: {labels: {scheduling.x-k8s.io/pod-group: g}}
    spec:
      schedulerName: tessera
      restartPolicy: Never
      containers:
      - {name: main, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
"""


async def test_rename_dry_runs_a_resubmitted_gang_under_new_names(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """"What if I re-submitted this job?": the file's Job and PodGroup exist (its gang runs, on 2 of
    the node's 4 GPUs). Refused, the message names --rename; with it, copies named -what-if, the
    copies' pods in the copied PodGroup (not the running one, which would count them among its own)."""
    (tmp_path / "job.yaml").write_text(GANG_FILE)
    running = [b.pod(f"train-{i}", namespace="ml", node_name="n", phase="Running", limits={"nvidia.com/gpu": 1},
                     labels={"scheduling.x-k8s.io/pod-group": "g"}) for i in range(2)]
    objs = [b.node("n", gpus=4), *(b.device("n", i) for i in range(4)), b.podgroup("g", 2, namespace="ml"), *running]
    monkeypatch.setattr(cli, "_listing", fake_listing(_Api("/apis/batch/v1/namespaces/ml/jobs/train"), objs))
    argv = ["what-if", "-n", "ml", "-f", str(tmp_path / "job.yaml"), "-o", "json"]
    with pytest.raises(cli.CommandError, match="already in the cluster: PodGroup ml/g, .*, Job ml/train; .* or pass "
                                               "--rename to place copies of them named NAME-what-if"):
        await cli._what_if(cli.build_parser().parse_args(argv), Target(None, None, "ml"))
    assert await cli._what_if(cli.build_parser().parse_args([*argv, "--rename"]), Target(None, None, "ml")) == 0
    doc = orjson.loads(capsys.readouterr().out)
    with pytest.raises(cli.CommandError, match="--rename renames the objects of -f FILE"):
        await cli._what_if(cli.build_parser().parse_args(["what-if", "--rename"]), Target(None, None, "ml"))
    assert [(o["pod"], o["node"]) for o in doc["outcomes"]] == [("ml/train-what-if-0", "n"), ("ml/train-what-if-1", "n")]


def test_rename_keeps_gang_membership_among_the_copies() -> None:
    """Every reference that binds the file's pods into a gang follows the rename: the PodGroup label
    and spec.schedulingGroup.podGroupName of a PodGroup in the file, a label gang's name (no object:
    the copies' own gang); a PodGroup the file does not hold is kept (the copies would join it)."""
    text = GANG_FILE + """---
apiVersion: scheduling.k8s.io/v1alpha2
kind: PodGroup
metadata: {name: wg}
spec: {schedulingPolicy: {gang: {minCount: 1}}}
---
apiVersion: v1
kind: Pod
metadata: {name: w}
spec: {schedulerName: tessera, schedulingGroup: {podGroupName: wg}, containers: [{name: main, image: x}]}
---
apiVersion: v1
kind: Pod
metadata:
  name: l
  labels: {pod-group.scheduling.sigs.k8s.io/name: lg, pod-group.scheduling.sigs.k8s.io/min-available: "1"}
spec: {schedulerName: tessera, containers: [{name: main, image: x}]}
---
apiVersion: v1
kind: Pod
metadata:
  generateName: gen-
  labels: {scheduling.x-k8s.io/pod-group: elsewhere}
spec: {schedulerName: tessera, containers: [{name: main, image: x}]}
"""
    objs = probe_pods.read_files([("f.yaml", text)], "ml", None, 0.0, rename=True)
    named = {(obj["kind"], obj["metadata"]["name"]): obj for obj in objs}
    assert sorted(named) == [("Pod", "gen-what-if"), ("Pod", "l-what-if"), ("Pod", "train-what-if-0"),
                             ("Pod", "train-what-if-1"), ("Pod", "w-what-if"), ("PodGroup", "g-what-if"),
                             ("PodGroup", "wg-what-if")]
    labels = {name: obj["metadata"].get("labels", {}) for (_, name), obj in named.items()}
    assert labels["train-what-if-0"]["scheduling.x-k8s.io/pod-group"] == "g-what-if"
    assert labels["train-what-if-0"]["batch.kubernetes.io/job-name"] == "train-what-if"
    assert named[("Pod", "w-what-if")]["spec"]["schedulingGroup"] == {"podGroupName": "wg-what-if"}
    assert labels["l-what-if"]["pod-group.scheduling.sigs.k8s.io/name"] == "lg-what-if"
    assert labels["gen-what-if"]["scheduling.x-k8s.io/pod-group"] == "elsewhere"
    # without --rename, as before
    assert {obj["metadata"]["name"] for obj in probe_pods.read_files([("f.yaml", text)], "ml", None, 0.0)} == \
        {"g", "wg", "train-0", "train-1", "w", "l", "gen-what-if"}


def test_rename_points_a_copys_selectors_on_its_own_labels_at_the_copies() -> None:
    """A selector that names the pod's own job (anti-affinity one per node, a spread, affinity with
    its gang) selects the copies too, as a re-submitted job's selects its own pods: left on `train`
    alone, two copies could share a node their anti-affinity keeps them off. The running originals
    stay selected (the copies count the running pods, as by their other labels); a selector on
    another value (`other`) is the file's own and stays."""
    text = """apiVersion: batch/v1
kind: Job
metadata: {name: train}
spec:
  parallelism: 2
  template:
    metadata: {labels: {scheduling.x-k8s.io/pod-group: g}}
    spec:
      schedulerName: tessera
      restartPolicy: Never
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - labelSelector: {matchLabels: {batch.kubernetes.io/job-name: train}}
            topologyKey: kubernetes.io/hostname
        podAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
          - weight: 5
            podAffinityTerm:
              labelSelector:
                matchExpressions:
                - {key: scheduling.x-k8s.io/pod-group, operator: In, values: [g, other]}
              topologyKey: rack
      topologySpreadConstraints:
      - {maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule,
         labelSelector: {matchLabels: {batch.kubernetes.io/job-name: train, app: x}}}
      containers:
      - {name: main, image: x}
---
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: g}
spec: {minMember: 2}
"""
    objs = probe_pods.read_files([("f.yaml", text)], "ml", None, 0.0, rename=True)
    pod = next(obj for obj in objs if obj["metadata"]["name"] == "train-what-if-1")
    affinity = pod["spec"]["affinity"]
    both = {"key": "batch.kubernetes.io/job-name", "operator": "In", "values": ["train", "train-what-if"]}
    assert affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["labelSelector"] == \
        {"matchLabels": {}, "matchExpressions": [both]}
    assert affinity["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"][
        "labelSelector"]["matchExpressions"][0]["values"] == ["g", "g-what-if", "other"]
    assert pod["spec"]["topologySpreadConstraints"][0]["labelSelector"] == \
        {"matchLabels": {"app": "x"}, "matchExpressions": [both]}
