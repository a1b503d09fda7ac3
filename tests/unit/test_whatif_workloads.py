"""`kubectl tessera what-if -f` with the file a platform user has: a Deployment, ReplicaSet,
StatefulSet or Job, not Pods. Before, only Pods, Lists of them, Jobs and PodGroups were taken: a
Deployment was `object 1 is a Deployment: what-if -f takes Pods, ...`. Now each workload becomes
the pods its controller would create: its pod template times its replicas (a Job: min(parallelism,
completions)), in the namespace of -n, named as the controller names them (a StatefulSet's
`<name>-<ordinal>`) or clearly synthetic (`<name>-what-if-<i>` where the controller adds a random
suffix), the template's gang labels kept so a gang is judged whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from scheduler.kubectl import cli
from scheduler.kubectl.probe_pods import ProbeError, read_probes
from scheduler.kubectl.target import Target
from scheduler.sim import builders as b
from tests.helpers import BINPACK, NotFoundApi, fake_listing


def _workload(kind: str, name: str, replicas: int | None, gpus: int = 1, labels: str = "{app: web}",
              extra: str = "", api: str = "apps/v1", namespace: str = "") -> str:
    count = "" if replicas is None else f"  replicas: {replicas}\n"
    ns = f", namespace: {namespace}" if namespace else ""
    return (f"apiVersion: {api}\nkind: {kind}\nmetadata: {{name: {name}{ns}}}\nspec:\n{count}{extra}"
            "  selector: {matchLabels: {app: web}}\n"
            f"  template:\n    metadata: {{labels: {labels}}}\n    spec:\n      schedulerName: tessera\n"
            f"      containers:\n      - {{name: main, image: x, resources: {{limits: {{nvidia.com/gpu: {gpus}}}}}}}\n")


def _cluster() -> list[dict[str, Any]]:
    """An 8-GPU node with 1 in use and a 4-GPU node: 11 GPUs free."""
    return [b.node("big", gpus=8), b.node("small", gpus=4),
            b.pod("running", node_name="big", limits={"nvidia.com/gpu": 1}, phase="Running")]


async def _what_if(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str,
                   *argv: str) -> dict[str, Any]:
    (tmp_path / "file.yaml").write_text(text)
    monkeypatch.setattr(cli, "_listing", fake_listing(NotFoundApi(), _cluster()))
    args = cli.build_parser().parse_args(["what-if", "--config", BINPACK, "-f", str(tmp_path / "file.yaml"),
                                          "-o", "json", *argv])
    assert await cli._what_if(args, Target(None, None, "team" if "-n" in argv else "default")) == 0
    doc: dict[str, Any] = orjson.loads(capsys.readouterr().out)
    return doc


async def test_a_deployment_becomes_its_replicas_in_the_namespace_given(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    doc = await _what_if(monkeypatch, capsys, tmp_path, _workload("Deployment", "web", 3, gpus=2), "-n", "team")
    assert [o["pod"] for o in doc["outcomes"]] == ["team/web-what-if-0", "team/web-what-if-1", "team/web-what-if-2"]
    assert all(o["node"] in ("big", "small") for o in doc["outcomes"])
    # no replicas: the apiserver's default, 1
    doc = await _what_if(monkeypatch, capsys, tmp_path, _workload("Deployment", "web", None))
    assert [o["pod"] for o in doc["outcomes"]] == ["default/web-what-if-0"]


async def test_a_replicaset_and_a_statefulset_become_their_pods(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    doc = await _what_if(monkeypatch, capsys, tmp_path, _workload("ReplicaSet", "rs", 2))
    assert [o["pod"] for o in doc["outcomes"]] == ["default/rs-what-if-0", "default/rs-what-if-1"]
    # a StatefulSet's pods have the names its controller gives them: <name>-<ordinal>
    doc = await _what_if(monkeypatch, capsys, tmp_path, _workload("StatefulSet", "db", 3, gpus=4))
    outcomes = {o["pod"]: o["node"] for o in doc["outcomes"]}
    assert sorted(outcomes) == ["default/db-0", "default/db-1", "default/db-2"]
    # 11 GPUs free on nodes of 7 and 4: two of the 4-GPU pods fit, one stays pending
    assert sorted(outcomes.values()) == ["", "big", "small"]


def test_workload_pods_are_completed_as_the_controllers_would() -> None:
    [pod0, pod1] = read_probes(_workload("StatefulSet", "db", 2, labels="{app: web, tier: db}"), "f", "team", None, 0)
    assert [p["metadata"]["name"] for p in (pod0, pod1)] == ["db-0", "db-1"]
    assert pod1["metadata"]["namespace"] == "team" and pod1["spec"]["schedulerName"] == "tessera"
    assert pod1["metadata"]["labels"] == {"app": "web", "tier": "db", "statefulset.kubernetes.io/pod-name": "db-1",
                                          "apps.kubernetes.io/pod-index": "1"}
    assert pod0["metadata"]["uid"] != pod1["metadata"]["uid"] and pod1["status"] == {"phase": "Pending"}
    [pod] = read_probes(_workload("Deployment", "web", 1, namespace="ml"), "f", "team", None, 0)
    assert pod["metadata"]["namespace"] == "ml" and pod["metadata"]["labels"] == {"app": "web"}
    # replicas 0: nothing to place
    with pytest.raises(ProbeError, match="f: no pods in it: Deployment default/web has replicas 0"):
        read_probes(_workload("Deployment", "web", 0), "f", "default", None, 0)
    # the apiserver refuses a selector that does not select the template's labels: so does what-if
    with pytest.raises(ProbeError, match=r"f: object 1: Deployment default/web: spec.selector \(app=web\) does "
                                         r"not match the template's labels \(app=other\): the apiserver would "
                                         r"refuse it"):
        read_probes(_workload("Deployment", "web", 1, labels="{app: other}"), "f", "default", None, 0)
    with pytest.raises(ProbeError, match=r"object 1: ReplicaSet default/rs has no spec.template"):
        read_probes("kind: ReplicaSet\nmetadata: {name: rs}\nspec: {replicas: 1}\n", "f", "default", None, 0)
    with pytest.raises(ProbeError, match=r"object 1: spec.replicas: -1 is not a count"):
        read_probes(_workload("StatefulSet", "db", -1), "f", "default", None, 0)


async def test_a_gang_in_a_workload_template_is_judged_whole(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """3 pods of 4 GPUs: 2 fit (big 7 free, small 4), the third does not. Alone, two are placed;
    in a gang of minMember 3 (a PodGroup in the same file, multi-document), none is."""
    alone = await _what_if(monkeypatch, capsys, tmp_path, _workload("StatefulSet", "w", 3, gpus=4))
    assert sum(1 for o in alone["outcomes"] if o["node"]) == 2
    group = "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: g}\nspec: {minMember: 3}\n"
    gang = _workload("StatefulSet", "w", 3, gpus=4, labels="{app: web, scheduling.x-k8s.io/pod-group: g}")
    doc = await _what_if(monkeypatch, capsys, tmp_path, f"{group}---\n{gang}")
    assert [o["pod"] for o in doc["outcomes"]] == ["default/w-0", "default/w-1", "default/w-2"]
    assert [o["node"] for o in doc["outcomes"]] == ["", "", ""], doc["outcomes"]
    assert all(o["message"].startswith("pod group default/g: only 2 of the 3 members it needs fit")
               for o in doc["outcomes"]), doc["outcomes"]
    # the same with a Deployment, and with the label-form gang (min-available in the labels)
    labels = "{app: web, pod-group.scheduling.sigs.k8s.io/name: g, pod-group.scheduling.sigs.k8s.io/min-available: '3'}"
    doc = await _what_if(monkeypatch, capsys, tmp_path, _workload("Deployment", "w", 3, gpus=4, labels=labels))
    assert [o["node"] for o in doc["outcomes"]] == ["", "", ""], doc["outcomes"]
    doc = await _what_if(monkeypatch, capsys, tmp_path, _workload("Deployment", "w", 2, gpus=4, labels=labels.replace(
        "'3'", "'2'")))
    assert all(o["node"] for o in doc["outcomes"]), doc["outcomes"]


async def test_a_list_of_workloads_and_a_job_beside_them(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`kubectl get deploy,sts -o yaml` prints a List; a file may hold several documents."""
    listed = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [
        yaml.safe_load(_workload("Deployment", "a", 1)), yaml.safe_load(_workload("StatefulSet", "b", 2))]})
    job = ("apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    spec:\n"
           "      schedulerName: tessera\n      restartPolicy: Never\n      containers: [{name: m, image: x}]\n")
    doc = await _what_if(monkeypatch, capsys, tmp_path, f"{listed}---\n{job}")
    assert [o["pod"] for o in doc["outcomes"]] == ["default/a-what-if-0", "default/b-0", "default/b-1",
                                                   "default/j-0"]


def test_another_kind_is_an_error_naming_the_kinds_taken() -> None:
    for kind in ("DaemonSet", "CronJob", "JobSet", "MPIJob", "Service"):
        with pytest.raises(ProbeError, match=f"f: object 1 is a {kind}: what-if -f takes Pods, Deployments, "
                                             "ReplicaSets, StatefulSets, Jobs, Kubeflow training jobs \\(kubeflow.org/v1 PyTorchJob, "
                                             "TFJob, XGBoostJob, PaddleJob, JAXJob\\), Nodes and tessera.dev "
                                             "ExtendedResources \\(capacity added\\), Lists of them and PodGroups"):
            read_probes(_workload(kind, "x", 1), "f", "default", None, 0)


async def test_a_statefulset_gang_created_one_pod_at_a_time_is_warned_of(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """podManagementPolicy OrderedReady (the default) creates each pod once the one before it is
    Ready: a gang's first member waits for the others, which are never created. what-if places
    them all (where they would go), and warns that the StatefulSet would never start."""
    gang = _workload("StatefulSet", "w", 3, labels="{app: web, scheduling.x-k8s.io/pod-group: g}")
    notes: list[str] = []
    read_probes(gang, "f", "default", None, 0, notes)
    assert notes == ["f: object 1: StatefulSet default/w: its pods are one gang (PodGroup default/g) and its "
                     "podManagementPolicy is OrderedReady, which creates each pod only once the one before it is "
                     "Running and Ready: w-0 would wait for its gang, and w-1 would never be created; set "
                     "spec.podManagementPolicy: Parallel (placed here as Parallel creates them)"]
    parallel: list[str] = []
    read_probes(_workload("StatefulSet", "w", 3, extra="  podManagementPolicy: Parallel\n",
                          labels="{app: web, scheduling.x-k8s.io/pod-group: g}"), "f", "default", None, 0, parallel)
    alone: list[str] = []
    read_probes(_workload("StatefulSet", "w", 1, labels="{app: web, scheduling.x-k8s.io/pod-group: g}"),
                "f", "default", None, 0, alone)
    labelled: list[str] = []
    read_probes(_workload("StatefulSet", "w", 2, labels="{app: web, pod-group.scheduling.sigs.k8s.io/name: lg, "
                          "pod-group.scheduling.sigs.k8s.io/min-available: '2'}"), "f", "default", None, 0, labelled)
    assert (parallel, alone) == ([], [])
    assert len(labelled) == 1 and "(gang default/lg)" in labelled[0]
    # min-available as the core reads it (Go's strconv.Atoi): "+2" is a gang of 2, "²" (a Unicode
    # digit Python's int() refuses) is no integer, so no gang, and no traceback
    signed: list[str] = []
    read_probes(_workload("StatefulSet", "w", 2, labels="{app: web, pod-group.scheduling.sigs.k8s.io/name: lg, "
                          "pod-group.scheduling.sigs.k8s.io/min-available: '+2'}"), "f", "default", None, 0, signed)
    assert len(signed) == 1 and "(gang default/lg)" in signed[0]
    superscript: list[str] = []
    assert len(read_probes(_workload("StatefulSet", "w", 2, labels="{app: web, pod-group.scheduling.sigs.k8s.io/name: "
                                     "lg, pod-group.scheduling.sigs.k8s.io/min-available: '²'}"),
                           "f", "default", None, 0, superscript)) == 2
    assert superscript == []
    # the command prints it on stderr, and still places the pods
    (tmp_path / "file.yaml").write_text(gang)
    monkeypatch.setattr(cli, "_listing", fake_listing(NotFoundApi(), _cluster()))
    args = cli.build_parser().parse_args(["what-if", "--config", BINPACK, "-f", str(tmp_path / "file.yaml")])
    assert await cli._what_if(args, Target(None, None, "default")) == 0
    out, err = capsys.readouterr()
    assert err.startswith(f"warning: {tmp_path / 'file.yaml'}: object 1: StatefulSet default/w: its pods are one gang")
    assert "default/w-2" in out


PYTORCHJOB = """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: ddp}
spec:
  pytorchReplicaSpecs:
    Worker:
      replicas: 2
      template:
        metadata: {labels: %s}
        spec:
          schedulerName: tessera
          containers: [{name: pytorch, image: x, resources: {limits: {nvidia.com/gpu: 4}}}]
    Master:
      replicas: 1
      template:
        metadata: {labels: %s}
        spec:
          schedulerName: tessera
          containers: [{name: pytorch, image: x, resources: {limits: {nvidia.com/gpu: 4}}}]
"""


def test_a_kubeflow_training_job_becomes_its_replicas_pods() -> None:
    """Kubeflow's training operator (kubeflow.org/v1: PyTorchJob, TFJob, ...) names a job's pods
    `<job>-<replica type>-<index>`; a gang in the templates is kept. Without one the operator's own
    PodGroup (made only when it runs with --gang-scheduler-name) is unknown here: a warning says so."""
    notes: list[str] = []
    pods = read_probes(PYTORCHJOB % ("{a: b}", "{a: b}"), "f", "team", None, 0, notes)
    assert [p["metadata"]["name"] for p in pods] == ["ddp-master-0", "ddp-worker-0", "ddp-worker-1"]
    assert pods[2]["metadata"]["labels"] == {"a": "b", "training.kubeflow.org/job-name": "ddp",
                                             "training.kubeflow.org/replica-type": "worker",
                                             "training.kubeflow.org/replica-index": "1"}
    assert notes == ["f: object 1: PyTorchJob team/ddp: its templates name no gang, so its 3 pods are placed one by "
                     "one; if the training operator runs with --gang-scheduler-name it makes a PodGroup team/ddp "
                     "(minMember 3, or runPolicy.schedulingPolicy.minAvailable) and labels the pods "
                     "scheduling.x-k8s.io/pod-group: ddp: put that PodGroup in the file and the label in the "
                     "templates to judge the job whole"]
    gang = "{scheduling.x-k8s.io/pod-group: ddp}"
    quiet: list[str] = []
    assert len(read_probes(PYTORCHJOB % (gang, gang), "f", "team", None, 0, quiet)) == 3 and quiet == []
    # a label gang the core reads ("+3": strconv.Atoi's sign) names a gang: no note; "²" names none
    signed = "{pod-group.scheduling.sigs.k8s.io/name: ddp, pod-group.scheduling.sigs.k8s.io/min-available: '+3'}"
    assert len(read_probes(PYTORCHJOB % (signed, signed), "f", "team", None, 0, quiet)) == 3 and quiet == []
    odd = "{pod-group.scheduling.sigs.k8s.io/name: ddp, pod-group.scheduling.sigs.k8s.io/min-available: '²'}"
    unread: list[str] = []
    assert len(read_probes(PYTORCHJOB % (odd, odd), "f", "team", None, 0, unread)) == 3
    assert len(unread) == 1 and "its templates name no gang" in unread[0]
    with pytest.raises(ProbeError, match="object 1: PyTorchJob team/ddp has no spec.pytorchReplicaSpecs"):
        read_probes("apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: ddp}\nspec: {}\n",
                    "f", "team", None, 0)
    with pytest.raises(ProbeError, match="object 1: PyTorchJob team/ddp: spec.pytorchReplicaSpecs.Worker has no "
                                         "template"):
        read_probes("apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: ddp}\n"
                    "spec: {pytorchReplicaSpecs: {Worker: {replicas: 2}}}\n", "f", "team", None, 0)


def test_a_priority_class_is_an_error_that_says_to_apply_it_first(capsys: pytest.CaptureFixture[str]) -> None:
    """A new user's trial: `what-if -f deploy/examples/preemption-batch.yaml` (two PriorityClasses
    before the Job) read only that a PriorityClass is not taken, not what to do; `--help` did not
    say so either."""
    text = "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: p}\nvalue: 100\n"
    with pytest.raises(ProbeError) as info:
        read_probes(text, "f", "default", None, 0)
    assert str(info.value).startswith("f: object 1 is a PriorityClass: what-if -f takes Pods, Deployments, ")
    assert str(info.value).endswith(
        "Lists of them and PodGroups; apply the PriorityClasses first (kubectl apply -f ...), then give what-if the "
        "rest, e.g. a file without them (the pods' priorities are read from the cluster's PriorityClasses)")
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["what-if", "--help"])
    assert "PriorityClasses are not taken: apply them first" in " ".join(capsys.readouterr().out.split())
