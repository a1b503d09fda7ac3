"""`what-if -f`'s pods get the priority the apiserver's Priority admission plugin would give them
(plugin/pkg/admission/priority): a trial finding — a pod of `priorityClassName: prod-high` was
replayed at priority 0, its class's preemptionPolicy unread, so an 8-GPU prod-high pod read "would
stay pending ... No preemption victims found" where creating it would have preempted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from scheduler.kube.http import Response
from scheduler.kube.informers import PRIORITY_CLASSES
from scheduler.kube.snapshot import ClusterListing, Unread
from scheduler.kubectl import cli
from scheduler.kubectl.target import Target
from scheduler.sim import builders as b
from tests.helpers import BINPACK

POD = """
apiVersion: v1
kind: Pod
metadata: {name: probe8}
spec:
  schedulerName: tessera
  containers:
  - name: main
    image: x
    resources: {limits: {nvidia.com/gpu: 8}}
"""


class _Api:
    async def request(self, method: str, path: str, **_: Any) -> Response:
        return Response(404, orjson.dumps({"kind": "Status", "code": 404}))


def _class(name: str, value: int, policy: str | None = "PreemptLowerPriority",
           default: bool = False) -> dict[str, Any]:
    pc: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                          "metadata": {"name": name, "uid": f"uid-{name}"}, "value": value}
    if policy is not None:
        pc["preemptionPolicy"] = policy
    if default:
        pc["globalDefault"] = True
    return pc


def _cluster(*classes: dict[str, Any]) -> list[dict[str, Any]]:
    """One 8-GPU node, all 8 held by a running pod of priority 0."""
    return [b.node("big", gpus=8),
            b.pod("batch", node_name="big", limits={"nvidia.com/gpu": 8}, phase="Running", priority=0), *classes]


async def _what_if(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path,
                   objs: list[dict[str, Any]], text: str, unread: dict[str, Unread] | None = None,
                   ) -> tuple[dict[str, Any], str]:
    async def listing(target: Target, namespaces: Any = ()) -> tuple[Any, ClusterListing]:
        async def close() -> None:
            return None
        api = _Api()
        api.api = type("A", (), {"close": staticmethod(close)})()  # type: ignore[attr-defined]
        return api, ClusterListing(objs, [], dict(unread or {}))
    monkeypatch.setattr(cli, "_listing", listing)
    (tmp_path / "probe.yaml").write_text(text)
    args = cli.build_parser().parse_args(["what-if", "--config", BINPACK, "-f", str(tmp_path / "probe.yaml"),
                                          "-o", "json"])
    await cli._what_if(args, Target(None, None, "default"))
    captured = capsys.readouterr()
    return orjson.loads(captured.out), captured.err


def _with(line: str) -> str:
    return POD.replace("  schedulerName: tessera\n", f"  schedulerName: tessera\n  {line}\n")


async def test_a_file_pod_gets_its_priority_class_value_and_preempts(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    doc, _ = await _what_if(monkeypatch, capsys, tmp_path, _cluster(_class("prod-high", 1000)),
                            _with("priorityClassName: prod-high"))
    [outcome] = doc["outcomes"]
    assert (outcome["pod"], outcome["node"]) == ("default/probe8", "big"), outcome
    assert outcome["preempts"] == ["default/batch"], outcome
    assert doc["evicted"] == ["default/batch"]


async def test_a_class_of_preemption_policy_never_does_not_preempt(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    doc, _ = await _what_if(monkeypatch, capsys, tmp_path, _cluster(_class("prod-wait", 1000, "Never")),
                            _with("priorityClassName: prod-wait"))
    [outcome] = doc["outcomes"]
    assert outcome["node"] == "" and "preemptionPolicy=Never" in outcome["message"], outcome
    assert doc["evicted"] == []


async def test_a_pod_naming_no_class_gets_the_global_default(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    doc, _ = await _what_if(monkeypatch, capsys, tmp_path,
                            _cluster(_class("everyday", 500, default=True), _class("other", 2)), POD)
    assert doc["outcomes"][0]["preempts"] == ["default/batch"], doc
    # none: priority 0, no preemption of an equal-priority pod
    doc, _ = await _what_if(monkeypatch, capsys, tmp_path, _cluster(_class("other", 2)), POD)
    assert doc["outcomes"][0]["node"] == "" and doc["evicted"] == [], doc


async def test_the_system_critical_classes_are_built_in(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    doc, _ = await _what_if(monkeypatch, capsys, tmp_path, _cluster(), _with("priorityClassName: system-node-critical"))
    assert doc["outcomes"][0]["preempts"] == ["default/batch"], doc


async def test_what_the_priority_plugin_refuses_is_an_error_in_its_words(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(cli.CommandError, match='Pod default/probe8: pods "probe8" is forbidden: no PriorityClass '
                                               'with name prod-high was found: the apiserver would refuse it'):
        await _what_if(monkeypatch, capsys, tmp_path, _cluster(), _with("priorityClassName: prod-high"))
    # a spec.priority other than its class's (or the default's) value: the trial's `priority: 1000`
    with pytest.raises(cli.CommandError, match=r'pods "probe8" is forbidden: the integer value of priority \(1000\) '
                                               'must not be provided in pod spec; priority admission controller '
                                               'computed 0 from the given PriorityClass name'):
        await _what_if(monkeypatch, capsys, tmp_path, _cluster(), _with("priority: 1000"))
    with pytest.raises(cli.CommandError, match=r'the string value of PreemptionPolicy \(PreemptLowerPriority\) must '
                                               'not be provided in pod spec; priority admission controller computed '
                                               'Never from the given PriorityClass name'):
        await _what_if(monkeypatch, capsys, tmp_path, _cluster(_class("prod-wait", 1000, "Never")),
                       _with("priorityClassName: prod-wait\n  preemptionPolicy: PreemptLowerPriority"))
    # the values the plugin would compute are taken as they are
    doc, _ = await _what_if(monkeypatch, capsys, tmp_path, _cluster(_class("prod-high", 1000)),
                            _with("priorityClassName: prod-high\n  priority: 1000"))
    assert doc["outcomes"][0]["preempts"] == ["default/batch"], doc


async def test_unread_priority_classes_are_said_not_read_as_none(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    unread = {PRIORITY_CLASSES.label: Unread(PRIORITY_CLASSES, "denied (HTTP 403): needs list on priorityclasses")}
    with pytest.raises(cli.CommandError, match=r"Pod default/probe8 names priorityClassName prod-high, but "
                                               r"PriorityClasses cannot be read \(denied \(HTTP 403\): needs list on "
                                               r"priorityclasses\): its priority and preemptionPolicy are unknown"):
        await _what_if(monkeypatch, capsys, tmp_path, _cluster(), _with("priorityClassName: prod-high"), unread)
    # the built-in classes need no read
    doc, _ = await _what_if(monkeypatch, capsys, tmp_path, _cluster(),
                            _with("priorityClassName: system-cluster-critical"), unread)
    assert doc["outcomes"][0]["preempts"] == ["default/batch"], doc
    # no class named: a globalDefault class may exist: said, and replayed at the file's priority (else 0)
    doc, err = await _what_if(monkeypatch, capsys, tmp_path, _cluster(), POD, unread)
    assert doc["outcomes"][0]["node"] == "", doc
    assert ("warning: Pod default/probe8 names no priorityClassName, and PriorityClasses cannot be read (denied "
            "(HTTP 403): needs list on priorityclasses): a globalDefault PriorityClass would give it its priority; "
            "replayed at priority 0") in err, err


@pytest.mark.parametrize(("line", "json_type"), [("priorityClassName: [a]", "array"), ("priorityClassName: {a: 1}", "object"),
                                                 ("priorityClassName: 7", "number"), ("priorityClassName: true", "bool")])
async def test_a_priority_class_name_not_a_string_is_refused_in_the_apiservers_words(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, line: str,
        json_type: str) -> None:
    """Review: a list crashed what-if with a TypeError traceback, a number was looked up as a
    class name; the apiserver's decoder refuses any non-string (encoding/json's UnmarshalTypeError)."""
    with pytest.raises(cli.CommandError, match=r'Pod default/probe8: Pod in version "v1" cannot be handled as a Pod: '
                                               f'json: cannot unmarshal {json_type} into Go struct field '
                                               r'PodSpec.spec.priorityClassName of type string: the apiserver would '
                                               'refuse it') as refused:
        await _what_if(monkeypatch, capsys, tmp_path, _cluster(_class("a", 1000)), _with(line))
    assert refused.value.status == 2  # a file the apiserver would not decode: as any unreadable file


def _resolved(text: str, classes: list[dict[str, Any]]) -> dict[str, Any]:
    from scheduler.kubectl import probe_pods
    [pod] = probe_pods.read_probes(text, "probe.yaml", "default", None, 0.0)
    assert probe_pods.resolve_priorities([pod], classes, None, "probe.yaml") == []
    spec: dict[str, Any] = pod["spec"]
    return spec


def test_of_several_global_defaults_the_lowest_value_is_given_and_named() -> None:
    """The Priority admission plugin's getDefaultPriorityClass: more than one globalDefault class (a
    race it allows for) gives the one of the lowest value; admitPod sets the pod's
    priorityClassName to it, with its value and preemptionPolicy."""
    spec = _resolved(POD, [_class("high-default", 500, default=True), _class("low-default", 100, "Never", default=True),
                           _class("other", 7)])
    assert (spec["priorityClassName"], spec["priority"], spec["preemptionPolicy"]) == ("low-default", 100, "Never")
    spec = _resolved(POD, [_class("other", 7)])  # no default: 0, the API's default policy, no class named
    assert ("priorityClassName" not in spec, spec["priority"], spec["preemptionPolicy"]) == (
        True, 0, "PreemptLowerPriority")


@pytest.mark.parametrize(("name", "value"), [("system-node-critical", 2_000_001_000),
                                             ("system-cluster-critical", 2_000_000_000)])
def test_the_built_in_classes_have_upstreams_values(name: str, value: int) -> None:
    """pkg/apis/scheduling: SystemCriticalPriority = 2000000000, system-node-critical 1000 above it."""
    spec = _resolved(_with(f"priorityClassName: {name}"), [])
    assert (spec["priority"], spec["preemptionPolicy"]) == (value, "PreemptLowerPriority")


def test_a_class_is_read_as_the_scheduler_reads_it() -> None:
    """One reader of a PriorityClass (the core's parse_priority_class): what-if gives a pod the
    preemptionPolicy the API defaults a class to, and a class named that the scheduler cannot read
    is refused saying why, not given a value of 0."""
    from scheduler.kubectl import probe_pods
    unpolicied = _class("plain", 300, policy=None)
    assert (spec := _resolved(_with("priorityClassName: plain"), [unpolicied]))["preemptionPolicy"] == (
        "PreemptLowerPriority") and spec["priority"] == 300
    [pod] = probe_pods.read_probes(_with("priorityClassName: odd"), "probe.yaml", "default", None, 0.0)
    with pytest.raises(probe_pods.ProbeError, match=r"names priorityClassName odd, which cannot be read "
                                                    r'\(PriorityClass.value: Invalid value: "high": must be an '
                                                    r"integer\): its priority and preemptionPolicy are unknown"):
        probe_pods.resolve_priorities([pod], [{**_class("odd", 0), "value": "high"}], None, "probe.yaml")
