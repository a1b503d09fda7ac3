"""`kubectl tessera what-if -f` with a file the apiserver would refuse (a review, session 54).

Before: a malformed selector (`matchLabels: [a]`, `matchExpressions: 5`, `values: 5`) crashed the
command with a traceback; a pod the parser refuses (a label value `1`, annotations as a list)
vanished between the file and the outcomes: exit 0, `"outcomes": []`, no word; 20,000 replicas took
43 s (a quadratic duplicate check) and `replicas: 3000000000` tried to build 3e9 pods; an empty
selector, a PyTorchJob replica type the operator refuses, a List of Lists and `items: null` were
taken or misnamed. Now each is one clear error naming the object and the field, in the
apiserver's (or the training operator's webhook's) words."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from scheduler.kubectl import cli, whatif
from scheduler.kubectl.probe_pods import MAX_PODS, ProbeError, read_probes
from scheduler.kubectl.target import Target
from scheduler.sim import builders as b
from tests.helpers import BINPACK, NotFoundApi, config, fake_listing

C = "{name: m, image: x}"
TEMPLATE = "template: {metadata: %s, spec: {schedulerName: tessera, containers: [%s]}}"


def _deployment(selector: str, meta: str = "{labels: {app: w}}", replicas: int | str = 1,
                kind: str = "Deployment") -> str:
    return (f"kind: {kind}\napiVersion: apps/v1\nmetadata: {{name: d}}\nspec: {{replicas: {replicas}, "
            f"selector: {selector}, {TEMPLATE % (meta, C)}}}")


async def _what_if(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, text: str, nodes: int = 1) -> int:
    (tmp_path / "f.yaml").write_text(text)
    monkeypatch.setattr(cli, "_listing", fake_listing(NotFoundApi(), [b.node("big", gpus=8)] +
                                                      [b.node(f"n{i}", gpus=8) for i in range(1, nodes)]))
    args = cli.build_parser().parse_args(["what-if", "--config", BINPACK, "-f", str(tmp_path / "f.yaml"),
                                          "-o", "json"])
    return await cli._what_if(args, Target(None, None, "default"))


WHERE = "f: object 1: Deployment default/d: "


@pytest.mark.parametrize(("selector", "said"), [
    ("{matchLabels: [a]}", "spec.selector.matchLabels: expected an object, got list"),
    ("{matchLabels: {app: 1}}", "spec.selector.matchLabels: keys and values must be strings"),
    ("{matchLabels: 7, matchExpressions: [{key: app, operator: Exists}]}",
     "spec.selector.matchLabels: expected an object, got int"),
    ("{matchExpressions: 5}", "spec.selector.matchExpressions: expected a list, got int"),
    ("{matchExpressions: [5]}", "spec.selector.matchExpressions[0]: expected an object, got int"),
    ("{matchExpressions: [{key: app, operator: In, values: 5}]}",
     "spec.selector.matchExpressions[0].values: expected a list, got int"),
    ("{matchExpressions: [{key: app, operator: In, values: [w, 1]}]}",
     "spec.selector.matchExpressions[0].values[1]: expected a string, got int"),
    ("{matchExpressions: [{key: app, operator: In}]}",
     "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or "
     "'NotIn'"),
    ("{matchExpressions: [{key: app, operator: Exists, values: [w]}]}",
     "spec.selector.matchExpressions[0].values: Forbidden: may not be specified when `operator` is 'Exists' or "
     "'DoesNotExist'"),
    ("{matchExpressions: [{key: app, operator: Has}]}",
     "spec.selector.matchExpressions[0].operator: Invalid value: \"Has\": not a valid selector operator"),
    ("{matchExpressions: [{operator: Exists}]}", "spec.selector.matchExpressions[0].key: Required value"),
    ("5", "spec.selector: expected an object, got int"),
    ("{}", "spec.selector: Invalid value: {}: empty selector is invalid for deployment"),
    ("{matchLabels: {}}", "spec.selector: Invalid value: {}: empty selector is invalid for deployment"),
    ("null", "spec.selector: Required value"),
])
def test_a_malformed_selector_is_a_clear_error_naming_the_field(selector: str, said: str) -> None:
    with pytest.raises(ProbeError) as caught:
        read_probes(_deployment(selector), "f", "default", None, 0)
    assert str(caught.value) == f"{WHERE}{said}: the apiserver would refuse it"


def test_a_statefulset_says_its_own_kind_and_a_good_selector_still_selects() -> None:
    with pytest.raises(ProbeError, match="empty selector is invalid for statefulset"):
        read_probes(_deployment("{}", kind="StatefulSet"), "f", "default", None, 0)
    with pytest.raises(ProbeError, match="does not match the template's labels"):
        read_probes(_deployment("{matchExpressions: [{key: app, operator: NotIn, values: [w]}]}"),
                    "f", "default", None, 0)
    assert len(read_probes(_deployment("{matchExpressions: [{key: app, operator: In, values: [w]}]}", replicas=2),
                           "f", "default", None, 0)) == 2


async def test_a_malformed_selector_is_a_command_error_not_a_traceback(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(cli.CommandError, match="spec.selector.matchLabels: expected an object, got list") as caught:
        await _what_if(monkeypatch, tmp_path, _deployment("{matchLabels: [a]}"))
    assert caught.value.status == 2


@pytest.mark.parametrize(("text", "said"), [
    (_deployment("{matchLabels: {app: w}}", "{labels: {app: w, n: 1}}"),
     f"{WHERE}spec.template.metadata.labels: keys and values must be strings: the apiserver would refuse it"),
    (_deployment("{matchLabels: {app: w}}", "{labels: {app: w}, annotations: [a]}"),
     f"{WHERE}spec.template.metadata.annotations: expected an object, got list: the apiserver would refuse it"),
    (f"kind: Pod\napiVersion: v1\nmetadata: {{name: p, labels: {{app: 1}}}}\nspec: {{containers: [{C}]}}",
     "f: object 1: Pod default/p is not a valid Pod: Pod.metadata.labels: keys and values must be strings"),
    (f"kind: Pod\napiVersion: v1\nmetadata: {{name: p, annotations: [a]}}\nspec: {{containers: [{C}]}}",
     "f: object 1: Pod default/p is not a valid Pod: Pod.metadata.annotations: expected an object, got list"),
    ("kind: Pod\napiVersion: v1\nmetadata: {name: p}\nspec: {schedulerName: tessera, containers: "
     "[{name: m, image: x, resources: {limits: {nvidia.com/gpu: abc}}}]}",
     "f: object 1: Pod default/p is not a valid Pod: Pod.spec.containers[0].resources.limits[nvidia.com/gpu]"),
])
async def test_a_pod_the_parser_refuses_is_said_not_dropped(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, text: str, said: str) -> None:
    with pytest.raises(cli.CommandError) as caught:
        await _what_if(monkeypatch, tmp_path, text)
    assert str(caught.value).startswith(said.replace("f: ", f"{tmp_path / 'f.yaml'}: ", 1)), str(caught.value)
    assert caught.value.status == 2


def test_a_workload_whose_pods_the_parser_refuses_names_them() -> None:
    job = ("apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec: {template: {spec: {containers: "
           "[{name: m, image: x, resources: {limits: {nvidia.com/gpu: abc}}}]}}}")
    with pytest.raises(ProbeError, match=r"^f: object 1: Job default/j: its pod j-0 is not a valid Pod: "
                                         r"Pod.spec.containers\[0\].resources"):
        read_probes(job, "f", "default", None, 0)


def test_a_pod_refused_in_the_replay_gets_an_outcome_that_says_why() -> None:
    """Defence in depth: read_probes refuses what the core's parser refuses, but should the replay
    still refuse a probe, its outcome says so rather than the pod vanishing."""
    bad = b.pod("p", limits={"nvidia.com/gpu": 1})
    bad["metadata"]["labels"] = {"app": 1}
    result = whatif.what_if([b.node("big", gpus=8), bad], config(BINPACK), 0.0, only=frozenset({"default/p"}),
                            from_file="f")
    [outcome] = result.outcomes
    assert (outcome.pod, outcome.node) == ("default/p", "")
    assert outcome.message == "invalid: Pod default/p: Pod.metadata.labels: keys and values must be strings"
    assert "invalid: Pod default/p" in whatif.render(result)


def test_many_replicas_are_read_in_linear_time() -> None:
    start = time.monotonic()
    pods = read_probes(_deployment("{matchLabels: {app: w}}", replicas=20000), "f", "default", None, 0)
    assert len(pods) == 20000 and time.monotonic() - start < 5, time.monotonic() - start


def test_replicas_beyond_int32_and_a_file_beyond_the_cap_are_refused() -> None:
    with pytest.raises(ProbeError, match=r"^f: object 1: spec.replicas: Invalid value: 3000000000: out of range of "
                                         r"int32 \[0, 2147483647\]: the apiserver would refuse it$"):
        read_probes(_deployment("{matchLabels: {app: w}}", replicas=3000000000), "f", "default", None, 0)
    start = time.monotonic()
    with pytest.raises(ProbeError, match=f"^f: object 1: Deployment default/d: its 2000000000 replicas would make "
                                         f"2000000000 pods: what-if -f places at most {MAX_PODS} pods at once$"):
        read_probes(_deployment("{matchLabels: {app: w}}", replicas=2000000000), "f", "default", None, 0)
    two = f"{_deployment('{matchLabels: {app: w}}', replicas=MAX_PODS - 1)}\n---\n" + \
        _deployment("{matchLabels: {app: w}}", replicas=2).replace("name: d", "name: e")
    with pytest.raises(ProbeError, match=f"^f: object 2: Deployment default/e: its 2 replicas would make {MAX_PODS + 1} "
                                         f"pods: what-if -f places at most {MAX_PODS} pods at once$"):
        read_probes(two, "f", "default", None, 0)
    assert time.monotonic() - start < 30


def test_a_null_list_and_a_list_of_lists_are_read_as_kubectl_reads_them() -> None:
    pod = f"{{kind: Pod, apiVersion: v1, metadata: {{name: p}}, spec: {{containers: [{C}]}}}}"
    nested = f"kind: List\nitems:\n- {{kind: List, items: [{pod}]}}\n- {{kind: PodList, items: null}}\n"
    assert [p["metadata"]["name"] for p in read_probes(nested, "f", "default", None, 0)] == ["p"]
    with pytest.raises(ProbeError, match="^f: no Pod or workload in it"):
        read_probes("kind: List\napiVersion: v1\nitems: null\n", "f", "default", None, 0)
    with pytest.raises(ProbeError, match="^f: object 1 is a List whose items are not a list \\(got int\\)$"):
        read_probes("kind: List\napiVersion: v1\nitems: 5\n", "f", "default", None, 0)


TRAINING = """
apiVersion: kubeflow.org/v1
kind: %s
metadata: {name: t}
spec:
  %s:
    %s:
      replicas: 1
      template:
        spec:
          schedulerName: tessera
          containers: [{name: m, image: x}]
"""


@pytest.mark.parametrize(("kind", "field", "rtype", "supported"), [
    ("PyTorchJob", "pytorchReplicaSpecs", "Launcher", '"Master", "Worker"'),
    ("PyTorchJob", "pytorchReplicaSpecs", "worker", '"Master", "Worker"'),
    ("XGBoostJob", "xgbReplicaSpecs", "Chief", '"Master", "Worker"'),
    ("PaddleJob", "paddleReplicaSpecs", "PS", '"Master", "Worker"'),
    ("JAXJob", "jaxReplicaSpecs", "Master", '"Worker"'),
])
def test_a_replica_type_the_training_operator_refuses_is_refused(kind: str, field: str, rtype: str,
                                                                   supported: str) -> None:
    with pytest.raises(ProbeError) as caught:
        read_probes(TRAINING % (kind, field, rtype), "f", "default", None, 0)
    assert str(caught.value) == (f"f: object 1: {kind} default/t: spec.{field}[{rtype}]: Unsupported value: "
                                 f"\"{rtype}\": supported values: {supported}: the training operator's webhook would "
                                 "refuse it")


def test_a_tfjob_takes_any_replica_type_as_its_webhook_does() -> None:
    pods = read_probes(TRAINING % ("TFJob", "tfReplicaSpecs", "Evaluator"), "f", "default", None, 0)
    assert [p["metadata"]["name"] for p in pods] == ["t-evaluator-0"]



async def test_a_lone_surrogate_in_a_selector_value_is_said_not_a_traceback(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """PyYAML reads `"\\ud800"` as a lone surrogate, which `str.encode()` refuses: counting the
    value's bytes raised UnicodeEncodeError out of the command. Now the value is no label value,
    as upstream's parse says: a required term does not match, a preferred one is PreScore's error
    naming the value (PreScore runs with two feasible nodes)."""
    term = '{matchExpressions: [{key: zone, operator: In, values: ["\\ud800"]}]}'
    affinity = {"required": f"requiredDuringSchedulingIgnoredDuringExecution: {{nodeSelectorTerms: [{term}]}}",
                "preferred": f"preferredDuringSchedulingIgnoredDuringExecution: [{{weight: 1, preference: {term}}}]"}
    said = {"required": "2 node(s) didn't match Pod's node affinity/selector",
            "preferred": 'values[0][zone]: Invalid value: "\\ud800": a valid label must be'}
    for kind in ("required", "preferred"):
        pod = ("kind: Pod\napiVersion: v1\nmetadata: {name: p}\nspec: {schedulerName: tessera, containers: "
               f"[{C}], affinity: {{nodeAffinity: {{{affinity[kind]}}}}}}}")
        assert await _what_if(monkeypatch, tmp_path, pod, nodes=2) in (0, 1)
        out = capsys.readouterr().out
        assert said[kind] in json.loads(out)["outcomes"][0]["message"], out
