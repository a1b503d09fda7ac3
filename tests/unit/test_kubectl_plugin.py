"""`kubectl tessera` without a cluster: its terminal output, -o json|yaml, explain's dry run and
reasons, what-if's replay, and the kubectl-style flags and kubeconfig resolution."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
import yaml

from scheduler.core import annotations as ann
from scheduler.kube.http import Response
from scheduler.kube.informers import EXTENDED_RESOURCES, NODES, PODS, PRIORITY_CLASSES, WORKLOAD_POD_GROUPS
from scheduler.kube.snapshot import ListError, list_cluster
from scheduler.kubectl import explain as explaining
from scheduler.kubectl import whatif
from scheduler.sim.replay import Replay, WatchEvent
from scheduler.sim.report import render_table
from scheduler.sim.snapshot import replay_order
from scheduler.api.config import BUILTIN_SOURCE
from scheduler.kubectl.cli import build_parser
from scheduler.kubectl.reference import (ACCEPTED, WORKLOAD_TYPES, BadReference, Reference, chosen_note,
                                         not_found, not_found_hint, reference, workload_pods)
from scheduler.kubectl.installed import DEFAULT_NAMESPACE, installed_config
from scheduler.kubectl.output import dump
from scheduler.view.reasons import wait_reason, wait_reasons
from scheduler.kubectl.target import resolve
from scheduler.sim import builders as b
from scheduler.view import model as m
from scheduler.view.text import COUNTED_FOOTNOTE, age, columns, render_nodes

from tests.helpers import BINPACK, SPREAD, TOO_FEW_WHY, budget_protected_cluster, config


def test_columns_align_like_kubectl() -> None:
    assert columns([["NAME", "GPU", "PODS"], ["a-long-name", "", "x, y"], [None, "3", ""]]) == (
        "NAME          GPU   PODS\n"
        "a-long-name   -     x, y\n"
        "              3     -")


def _view() -> m.ClusterView:
    gpus = (m.GpuView(0, "n.gpu-0", "GPU-0", "nvidia.com/gpu", "A100", "80Gi", m.SLICES, 0.25, "20Gi/80Gi",
                      (m.Holder("ns/a", "10Gi"), m.Holder("ns/b", "10Gi", m.BINDING))),
            m.GpuView(1, "n.gpu-1", "GPU-1", "nvidia.com/gpu", "A100", "80Gi", m.WHOLE, 1.0,
                      holders=(m.Holder("ns/c", status=m.ALLOCATING),)),
            m.GpuView(2, "n.gpu-2", "GPU-2", "nvidia.com/gpu", "A100", "80Gi", m.FREE, 0.0))
    nodes = (m.NodeView("gpu-node-1", False, gpus, 2, "2/64", 3, notes=("ns/d waits for the allocation gate",)),
             m.NodeView("cpu-node", True, (), 0, "0/8", 0))
    summary = m.Summary(gpus=3, used=2, shared=1, free=1, unavailable=0, free_on_partial=1, largest_free=1,
                        largest_free_node="gpu-node-1")
    return m.ClusterView("cluster", 0.0, nodes, (), (), summary)


def test_nodes_table_one_row_per_gpu_then_notes_and_the_summary() -> None:
    assert render_nodes(_view()) == """\
NODE                  GPU   MODEL   MEMORY   STATE    USE         PODS                                REASON
gpu-node-1            0     A100    80Gi     slices   20Gi/80Gi   ns/a (10Gi), ns/b (10Gi, binding)   -
                      1     A100    80Gi     whole    all         ns/c (allocating)                   -
                      2     A100    80Gi     free     -           -                                   -
cpu-node (cordoned)   -     -       -        -        -           -                                   -

gpu-node-1: ns/d waits for the allocation gate

GPUs: 3 total, 2 in use (1 shared), 1 free, 0 unavailable; of the 1 free, 1 (100 %) sits on nodes with GPUs in use, \
0 on nodes with none in use; most free on one node: 1, gpu-node-1"""


def test_a_tainted_node_is_noted_under_the_table() -> None:
    """New-user trial: a tainted node's GPUs read as plainly free; the page notes the taints, the
    text view now too (they are free only to pods that tolerate them)."""
    view = _view()
    tainted = replace(view.nodes[0], taints=("dedicated=team-a:NoSchedule",))
    text = render_nodes(replace(view, nodes=(tainted, view.nodes[1])))
    assert "gpu-node-1: taints: dedicated=team-a:NoSchedule" in text.split("\n\n")[1].splitlines()


def test_counted_rows_get_a_footnote_under_the_table_that_the_device_plugin_picks() -> None:
    """A new user's trial: a plain `nvidia.com/gpu` pod's name on `counted` GPU rows read as a
    device assignment; the rows are only the count, the device plugin on the node picks the GPUs."""
    view = _view()
    counted = m.GpuView(3, "n.gpu-3", "GPU-3", "nvidia.com/gpu", "A100", "80Gi", m.COUNTED, 1.0,
                        holders=(m.Holder("ns/plain"),))
    node = replace(view.nodes[0], gpus=(*view.nodes[0].gpus, counted))
    parts = render_nodes(replace(view, nodes=(node, view.nodes[1]))).split("\n\n")
    assert "ns/plain" in parts[0] and parts[1] == COUNTED_FOOTNOTE
    assert COUNTED_FOOTNOTE not in render_nodes(view)  # no counted row, no footnote


def test_json_and_yaml_carry_the_whole_view_with_the_derived_summary() -> None:
    doc = m.as_dict(_view())
    assert orjson.loads(dump(doc, "json")) == yaml.safe_load(dump(doc, "yaml")) == doc
    assert doc["summary"]["fragmentation"] == 1.0 and doc["summary"]["line"].startswith("GPUs: 3 total")
    assert doc["nodes"][0]["gpus"][0]["holders"][1] == {"pod": "ns/b", "amount": "10Gi", "status": "binding"}
    assert dump(doc, "json").endswith("}\n")


def test_ages_read_like_kubectl() -> None:
    now = 1_000_000.0
    stamp = "1970-01-12T13:46:40+00:00"  # = now
    assert [age(stamp, now + s) for s in (5, 150, 1800, 4 * 3600 + 60, 30 * 3600, 3 * 86400)] == \
        ["5s", "2m30s", "30m", "4h1m", "30h", "3d"]
    assert age("not a time", now) == "not a time"


# --- reasons, explain, what-if ----------------------------------------------------------------


def _condition(reason: str, message: str) -> dict[str, Any]:
    pod = b.pod("p")
    pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": reason, "message": message}]
    return pod


def test_wait_reasons_come_from_the_pods_condition_and_name_the_gate_node() -> None:
    held = _condition("WaitingForAllocation", "assigned to gpu-3; the Binding waits until the node agent ...")
    assert wait_reason(held) is not None and wait_reason(held).node == "gpu-3"  # type: ignore[union-attr]
    assert wait_reason(_condition("Unschedulable", "0/1 nodes are available")).node == ""  # type: ignore[union-attr]
    bound = _condition("Unschedulable", "stale")
    bound["spec"]["nodeName"] = "n"
    assert wait_reasons([held, bound, b.node("n")]) == {"default/p": wait_reason(held)}


def _cluster() -> list[dict[str, Any]]:
    """Two 4-GPU nodes; n1 runs a 1-GPU pod; `next` (1 GPU) and `huge` (8 GPUs) are pending."""
    return [b.node("n1", gpus=4), b.node("n2", gpus=4),
            b.pod("running", node_name="n1", limits={"nvidia.com/gpu": 1}, phase="Running"),
            b.pod("next", limits={"nvidia.com/gpu": 1}), b.pod("huge", limits={"nvidia.com/gpu": 8})]


def test_explain_dry_runs_the_pod_with_per_node_reasons() -> None:
    objs = _cluster()
    objs[-1]["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                         "message": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}]
    events = [{"type": "Warning", "reason": "FailedScheduling", "note": "0/2 nodes ...", "reportingController": "tessera",
               "eventTime": "2026-01-01T00:00:00.000000Z", "series": {"count": 3}, "regarding": {"kind": "Pod"}}]
    result = explaining.explain(objs, "default/huge", config(BINPACK), events, 0.0)
    assert result is not None and result.dry_run is not None
    assert (result.status, result.reason, result.ours) == ("pending: Unschedulable", "Unschedulable", True)
    assert result.dry_run.node == "" and result.dry_run.nodes == (
        explaining.NodeVerdict("n1", False, "Insufficient nvidia.com/gpu"),
        explaining.NodeVerdict("n2", False, "Insufficient nvidia.com/gpu"))
    assert result.events == (explaining.EventLine("2026-01-01T00:00:00.000000Z", "Warning", "FailedScheduling", 3,
                                                  "tessera", "0/2 nodes ..."),)
    text = explaining.render(result, 0.0)
    assert "Status:     pending: Unschedulable\n" in text
    assert "  NODE   RESULT\n  n1     Insufficient nvidia.com/gpu\n  n2     Insufficient nvidia.com/gpu" in text
    assert "FailedScheduling   3       tessera" in text
    fits = explaining.explain(objs, "default/next", config(BINPACK), [], 0.0)
    assert fits is not None and fits.dry_run is not None and fits.dry_run.node == "n1"  # binpack: the used node
    assert [v.node for v in fits.dry_run.nodes if v.fits] == ["n1", "n2"]  # best score first
    assert orjson.loads(dump(explaining.as_dict(fits), "json"))["dry_run"]["node"] == "n1"


def test_explain_says_when_a_pod_asks_for_more_than_any_node_has() -> None:
    """New-user trial: an 8-GPU pod on 4-GPU nodes read "2 Insufficient nvidia.com/gpu" and
    "Preemption is not helpful", and nothing said it can never fit as it is."""
    result = explaining.explain(_cluster(), "default/huge", config(BINPACK), [], 0.0)
    assert result is not None and result.beyond_every_node == ("8 nvidia.com/gpu (the most any node offers: 4)",)
    assert ("  It asks for more than any node has, so it cannot fit anywhere as it is: 8 nvidia.com/gpu "
            "(the most any node offers: 4)") in explaining.render(result, 0.0)
    fits = explaining.explain(_cluster(), "default/next", config(BINPACK), [], 0.0)
    assert fits is not None and fits.beyond_every_node == ()


def test_explain_shows_a_finished_gang_with_its_podgroup_phase() -> None:
    """New-user trial: a Completed member of a finished gang showed `Gang: -` (only live members
    were counted); its PodGroup's final phase is what there is to say."""
    members = [b.pod(f"w-{i}", node_name="n1", phase="Succeeded", limits={"nvidia.com/gpu": 1},
                     labels={"scheduling.x-k8s.io/pod-group": "train"}) for i in range(2)]
    objs = [b.node("n1", gpus=4), b.podgroup("train", 2), *members]
    result = explaining.explain(objs, "default/w-0", config(BINPACK), [], 0.0)
    assert result is not None and result.gang is not None
    assert (result.gang.gang, result.gang.members, result.gang.phase) == ("default/train", 2, "Finished")


def test_explain_says_why_a_gated_workload_gang_member_waits() -> None:
    """A Workload API gang member still gathering its siblings is gated at PreEnqueue, as
    kube-scheduler's GangScheduling gates it: the scheduler writes it no condition and no Event,
    so explain must say why it waits itself (it read "pending: not tried yet" and had no dry run)."""
    member = b.pod("w-0", limits={"nvidia.com/gpu": 1}, spec_extra={"schedulingGroup": {"podGroupName": "train"}})
    objs = [b.node("n1", gpus=4), b.workload_podgroup("train", 2), member]
    result = explaining.explain(objs, "default/w-0", config(BINPACK), [], 0.0)
    why = "waiting for minCount pods from a gang to appear in scheduling queue"
    assert result is not None and result.dry_run is not None
    assert result.status == f"pending, not tried: gated by Coscheduling: {why}"
    assert (result.dry_run.node, result.dry_run.message) == ("", f"gated by Coscheduling: {why}")
    text = explaining.render(result, 0.0)
    assert f"would stay pending: gated by Coscheduling: {why}" in text
    assert result.gang is not None and (result.gang.members, result.gang.minimum) == (1, 2)


def test_what_if_and_simulate_list_a_gated_workload_gang_member_with_its_reason() -> None:
    """A gated member is never attempted, so it has no attempt to list: what-if and simulate's
    table left it out as if it were not pending at all."""
    member = b.pod("w-0", limits={"nvidia.com/gpu": 1}, spec_extra={"schedulingGroup": {"podGroupName": "train"}})
    objs = [b.node("n1", gpus=4), b.workload_podgroup("train", 2), member, b.pod("solo", limits={"nvidia.com/gpu": 1})]
    why = "gated by Coscheduling: waiting for minCount pods from a gang to appear in scheduling queue"
    result = whatif.what_if(objs, config(BINPACK), 0.0)
    # what-if adds that too few pods exist at all (capacity.too_few_members), after the gate's words
    few = ("Only 1 pod of PodGroup default/scheduling.k8s.io/train exists and its minCount is 2: no member is tried "
           "until 1 more is created (" + TOO_FEW_WHY.format(field="minCount") + ").")
    assert [(o.pod, o.node, o.message) for o in result.outcomes] == [
        ("default/solo", "n1", ""), ("default/w-0", "", f"{why}. {few}")]
    replay = Replay(config(BINPACK))
    list(replay.run(WatchEvent("ADDED", obj) for obj in objs))
    table = render_table(replay.scheduler, replay.stats)
    assert "1 pod placed, 1 unschedulable" in table and f"  default/w-0: {why}" in table


def test_explain_names_the_pods_being_deleted_that_still_hold_gpus() -> None:
    """A new user's trial: a pod kept by a finalizer held all GPUs and the waiting pod read only
    "Insufficient nvidia.com/gpu"."""
    keeper = b.pod("keeper", node_name="n1", limits={"nvidia.com/gpu": 4}, phase="Running")
    keeper["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z", finalizers=["example.com/keep"])
    objs = [b.node("n1", gpus=4), keeper, b.pod("waiter", limits={"nvidia.com/gpu": 4}),
            b.pod("cpu-only", requests={"cpu": "64"})]
    result = explaining.explain(objs, "default/waiter", config(BINPACK), [], 0.0)
    assert result is not None and result.dry_run is not None and result.dry_run.node == ""
    assert result.terminating == ("default/keeper on n1 (4 nvidia.com/gpu)",)
    assert ("  Pods being deleted still hold devices (freed when they are gone): default/keeper on n1 "
            "(4 nvidia.com/gpu)") in explaining.render(result, 0.0)
    cpu = explaining.explain(objs, "default/cpu-only", config(BINPACK), [], 0.0)
    assert cpu is not None and cpu.terminating == ()  # it waits for CPU, not for the GPUs


def test_explain_a_bound_pod_shows_its_devices_and_no_dry_run() -> None:
    grant = ann.DeviceGrant("GPU-1", "n1.gpu-1", None)
    pod = b.pod("trainer", node_name="n1", limits={"class.tessera.dev/v100": 1},
                annotations={ann.DEVICES: ann.encode_devices({"main": {"class.tessera.dev/v100": (grant,)}})})
    result = explaining.explain([b.node("n1", gpus=1), pod], "default/trainer", config(BINPACK), [], 0.0)
    assert result is not None
    assert (result.status, result.dry_run, result.gate) == ("bound to n1", None, "")
    assert result.devices == (explaining.DeviceLine("main", "class.tessera.dev/v100", "n1.gpu-1", "GPU-1", ""),)
    assert explaining.explain([], "default/missing", config(BINPACK), [], 0.0) is None


def test_explain_a_bound_pod_of_plain_gpus_says_they_are_counted_not_dash() -> None:
    """A plain `nvidia.com/gpu: 4` pod holds no device objects (the device plugin picks its GPUs):
    `Devices: -` read as if it held nothing."""
    pod = b.pod("plain", node_name="n1", limits={"nvidia.com/gpu": 4})
    result = explaining.explain([b.node("n1", gpus=4), pod], "default/plain", config(BINPACK), [], 0.0)
    assert result is not None and result.devices == ()
    [line] = [line for line in explaining.render(result, 0.0).splitlines() if line.startswith("Devices:")]
    assert line.split(None, 1)[1] == "4 nvidia.com/gpu counted, no device objects (the device plugin picks the GPUs)"


def test_explain_a_pod_of_another_scheduler() -> None:
    objs = [b.node("n1"), b.pod("theirs", scheduler="default-scheduler")]
    result = explaining.explain(objs, "default/theirs", config(BINPACK), [], 0.0)
    assert result is not None and not result.ours and result.dry_run is None
    assert result.status == "not scheduled by Tessera: spec.schedulerName is default-scheduler (Tessera's profiles: tessera)"


def test_what_if_replays_the_pending_pods_under_the_other_configuration() -> None:
    packed = whatif.what_if(_cluster(), config(BINPACK), 0.0)
    spread = whatif.what_if(_cluster(), config(SPREAD), 0.0)
    assert [(o.pod, o.node) for o in packed.outcomes] == [("default/huge", ""), ("default/next", "n1")]
    assert [(o.pod, o.node) for o in spread.outcomes] == [("default/huge", ""), ("default/next", "n2")]
    assert spread.before.startswith("GPUs: 8 total, 1 in use") and spread.after.startswith("GPUs: 8 total, 2 in use")
    text = whatif.render(spread)
    assert text.splitlines()[:3] == [
        "POD            NODE   DEVICES   RESULT",
        "default/huge   -      -         0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: 0/2 nodes "
        "are available: 2 Preemption is not helpful for scheduling.",
        "default/next   n2     -         placed"]
    assert "2 pending pods: 1 would be placed, 1 would stay pending (configuration config/spread.yaml" in text
    elsewhere = whatif.what_if(_cluster(), config(SPREAD), 0.0, "other")
    assert [o["pod"] for o in whatif.as_dict(elsewhere)["outcomes"]] == []
    # a new user's trial: "No pending pods" with -n, while pods waited in another namespace
    assert whatif.render(elsewhere).startswith(
        "No pending pods to place (configuration config/spread.yaml; nothing was written; 2 pending in other "
        "namespaces, replayed but not listed: -A lists them).")


# --- flags and kubeconfig -----------------------------------------------------------------------


def test_connection_flags_go_before_or_after_the_command() -> None:
    parser = build_parser()
    before = parser.parse_args(["--context", "c", "-n", "ns", "explain", "p", "-o", "yaml"])
    after = parser.parse_args(["explain", "p", "--context", "c", "--namespace", "ns", "-o", "yaml"])
    assert (before.context, before.namespace, before.output) == (after.context, after.namespace, after.output) == \
        ("c", "ns", "yaml")
    assert parser.parse_args(["nodes"]).namespace is None
    assert parser.parse_args(["what-if"]).config is None  # the installed configuration (test_whatif_installed_config)


def test_o_wide_elsewhere_is_refused_naming_the_formats(capsys: pytest.CaptureFixture[str]) -> None:
    """A user's `what-if -o wide` (as `nodes -o wide`) read argparse's "invalid choice": kubectl's
    words instead, the formats the command takes, and which command has -o wide; nodes still takes it."""
    for command in (["what-if"], ["explain", "p"], ["rollback-check"]):
        with pytest.raises(SystemExit) as exited:
            build_parser().parse_args([*command, "-o", "wide"])
        assert exited.value.code == 2
        err = capsys.readouterr().err.splitlines()[-1]
        assert err == (f"kubectl tessera {command[0]}: error: argument -o/--output: unable to match a printer "
                       'suitable for the output format "wide", allowed formats are: table,json,yaml (-o wide is '
                       "kubectl tessera nodes': each GPU's NUMA node and NVLink group)")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["nodes", "-o", "name"])
    assert capsys.readouterr().err.splitlines()[-1].endswith(
        'unable to match a printer suitable for the output format "name", allowed formats are: table,wide,json,yaml')
    assert build_parser().parse_args(["what-if", "-o", "yaml"]).output == "yaml"
    assert build_parser().parse_args(["nodes", "-o", "wide"]).output == "wide"


def test_kubeconfig_context_and_namespace_resolve_as_kubectl_does(tmp_path: Path) -> None:
    config_file = tmp_path / "config"
    config_file.write_text(yaml.safe_dump({
        "current-context": "dev", "contexts": [
            {"name": "dev", "context": {"cluster": "c", "user": "u", "namespace": "team-a"}},
            {"name": "prod", "context": {"cluster": "c", "user": "u"}}]}))
    env = {"KUBECONFIG": str(config_file)}
    assert resolve(None, None, None, env).namespace == "team-a"
    assert resolve(None, "prod", None, env).namespace == "default"
    assert resolve(None, None, "x", env).namespace == "x"
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text(config_file.read_text())
    assert resolve(None, None, None, {}, home).kubeconfig == str(home / ".kube" / "config")
    assert resolve("/given", None, "n", env, home).kubeconfig == "/given"


# --- reading the cluster once -------------------------------------------------------------------


class _Lists:
    """Answers LISTs two items a page; paths in `status` answer that HTTP status instead."""

    def __init__(self, items: dict[str, list[dict[str, Any]]], status: dict[str, int]) -> None:
        self.items, self.status = items, status
        self.api = SimpleNamespace(configuration=SimpleNamespace(host="https://apiserver"))

    async def request(self, method: str, path: str, *, query: Any = (), timeout: float = 30.0,
                      limited: bool = True) -> Response:
        if path in self.status:
            return Response(self.status[path], orjson.dumps({"message": "no"}))
        start = int(dict(query).get("continue", "0"))
        items = self.items.get(path, [])
        token = str(start + 2) if start + 2 < len(items) else ""
        return Response(200, orjson.dumps({"items": items[start:start + 2], "metadata": {"continue": token}}))


async def test_the_cluster_is_listed_page_by_page_and_what_cannot_be_read_is_said() -> None:
    nodes = [{"metadata": {"name": f"n{i}"}} for i in range(5)]
    lists = _Lists({NODES.path: nodes}, {EXTENDED_RESOURCES.path: 403, WORKLOAD_POD_GROUPS.path: 404,
                                         PRIORITY_CLASSES.path: 403})
    listing = await list_cluster(lists)  # type: ignore[arg-type]
    assert [(o["kind"], o["apiVersion"], o["metadata"]["name"]) for o in listing.objects] == \
        [("Node", "v1", f"n{i}") for i in range(5)]
    # a kind denied is said, with what grants it (test_kubectl_namespace_user); one not served is not
    assert [w.split(": ")[0] for w in listing.warnings] == ["extendedresources.tessera.dev",
                                                           "priorityclasses.scheduling.k8s.io"]
    assert listing.warnings[0].startswith("extendedresources.tessera.dev: cannot be read: denied (HTTP 403): needs ")
    with pytest.raises(ListError, match="^cannot list pods: the apiserver at https://apiserver denied access"):
        await list_cluster(_Lists({}, {PODS.path: 403}))  # type: ignore[arg-type]


def test_explain_dry_runs_a_gang_member_with_its_pending_siblings() -> None:
    gang = [b.pod(f"w-{i}", limits={"nvidia.com/gpu": 2}, labels=b.gang_labels("w", 2)) for i in range(2)]
    objs = [b.node("n1", gpus=4), *gang, b.pod("other", limits={"nvidia.com/gpu": 4})]
    result = explaining.explain(objs, "default/w-1", config(BINPACK), [], 0.0)
    assert result is not None and result.dry_run is not None and result.gang is not None
    assert result.dry_run.node == "n1"  # placed with w-0 as one transaction; `other` is not in the dry run
    assert (result.gang.members, result.gang.minimum, result.gang.pending) == (2, 2, 2)


def test_explain_says_a_gang_member_that_fits_alone_waits_for_its_gang() -> None:
    gang = [b.pod(f"w-{i}", limits={"nvidia.com/gpu": 2}, labels=b.gang_labels("w", 3)) for i in range(3)]
    result = explaining.explain([b.node("n1", gpus=4), b.node("n2", gpus=1), *gang], "default/w-1",
                                config(BINPACK), [], 0.0)
    assert result is not None
    text = explaining.render(result, 0.0)
    assert "would stay pending: pod group default/w: only 2 of the 3 members it needs fit; default/w-2: " in text
    assert ("Tried in its gang's dry run (any members tried before it in place), it would fit 1 of 2 nodes "
            "(below), but a gang is placed whole or not at all.") in text
    # the member that found no node gets no such line
    last = explaining.explain([b.node("n1", gpus=4), b.node("n2", gpus=1), *gang], "default/w-2", config(BINPACK),
                              [], 0.0)
    assert last is not None and last.dry_run is not None and not any(v.fits for v in last.dry_run.nodes)
    assert "it would fit" not in explaining.render(last, 0.0)


def test_explain_counts_a_deleted_gang_member_as_leaving_not_placed() -> None:
    gang = [b.pod(f"w-{i}", node_name="n1", phase="Running", limits={"nvidia.com/gpu": 1},
                  labels=b.gang_labels("w", 3)) for i in range(3)]
    gang[0]["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z", finalizers=["example.com/keep"])
    late = b.pod("w-3", limits={"nvidia.com/gpu": 1}, labels=b.gang_labels("w", 3))
    result = explaining.explain([b.node("n1", gpus=4), *gang, late], "default/w-3", config(BINPACK), [], 0.0)
    assert result is not None
    assert "default/w: 4 members (min 3), 2 placed, 1 leaving, 1 waiting;" in explaining.render(result, 0.0)


def test_what_if_knows_the_disruption_budgets_before_it_preempts() -> None:
    """A new user's trial: `tessera record` listed PodDisruptionBudgets (and PriorityClasses) after
    the pending pods, so the replay preempted the pod a budget protects; the live scheduler took the
    other one. Listings come kind by kind, budgets last: the replay must read them first."""
    high_class = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
                  "value": 1000}
    listing = [*budget_protected_cluster(), high_class]
    result = whatif.what_if(listing, config(BINPACK), 0.0)
    # without the budget the lower-priority a-kept would go (upstream's victim order); with it, b-other
    assert [(o.pod, o.node) for o in result.outcomes] == [("default/high", "n2")]
    assert result.evicted == ("default/b-other",)
    assert [o["kind"] for o in replay_order(listing)[2:4]] == ["PriorityClass", "PodDisruptionBudget"]


def test_explain_a_pod_the_scheduler_cannot_read() -> None:
    bad = b.pod("bad", spec_extra={"priority": "high"})
    result = explaining.explain([b.node("n1"), bad], "default/bad", config(BINPACK), [], 0.0)
    assert result is not None
    # regression (review): the core's own reason, and the pod is still one of Tessera's profiles'
    assert result.status == ("the scheduler cannot read this pod: Pod default/bad: Pod.spec.priority: "
                             'Invalid value: "high": must be an integer')
    assert result.scheduler == "tessera" and result.ours


def test_explain_takes_kubectls_pod_slash_name_and_refuses_two_namespaces() -> None:
    """A new user's trial: `explain pod/too-big -n research` looked in namespace "pod", and
    `explain default/too-big -n research` silently ignored -n."""
    assert reference("pod/too-big", "research", "default") == Reference("research", "too-big")
    assert reference("pods/too-big", None, "team") == Reference("team", "too-big")
    assert reference("too-big", None, "team") == Reference("team", "too-big")
    assert reference("research/too-big", None, "default") == Reference("research", "too-big")
    assert reference("research/too-big", "research", "default") == Reference("research", "too-big")
    with pytest.raises(BadReference, match="^default/too-big names namespace 'default' but -n gives 'research'"):
        reference("default/too-big", "research", "default")


def test_explain_takes_a_workloads_type_slash_name() -> None:
    """A trial: `explain job/ft8` and `explain deploy/infer` read `pods "ft8" not found`: kubectl's
    TYPE/NAME (its short and group-qualified names too) names the workload, in -n's namespace."""
    for text, resource in (("job/ft8", "jobs.batch"), ("jobs.batch/ft8", "jobs.batch"),
                           ("deploy/ft8", "deployments.apps"), ("Deployment/ft8", "deployments.apps"),
                           ("deployments.apps/ft8", "deployments.apps"), ("rs/ft8", "replicasets.apps"),
                           ("replicaset/ft8", "replicasets.apps"), ("sts/ft8", "statefulsets.apps"),
                           ("statefulsets/ft8", "statefulsets.apps")):
        ref = reference(text, "research", "default")
        assert (ref.namespace, ref.name, ref.kind and ref.kind.resource) == ("research", "ft8", resource), text
        assert not_found(ref) == f'{resource} "ft8" not found in namespace "research"'
    assert WORKLOAD_TYPES["job"].path("ns", "ft8") == "/apis/batch/v1/namespaces/ns/jobs/ft8"
    with pytest.raises(BadReference, match="^'ns/job/ft8' is not one of the forms explain takes: the argument is"):
        reference("ns/job/ft8", None, "default")
    # a prefix that is no TYPE is a namespace, and a miss says so with what explain takes
    svc = reference("svc/infer", None, "default")
    assert not_found(svc) + not_found_hint("svc/infer", namespace_exists=False) == (
        f'pods "infer" not found in namespace "svc" (\'svc\' was read as a namespace; {ACCEPTED})')
    assert not_found_hint("infer", namespace_exists=False) == ""
    # a prefix that names a namespace that exists (kube-system/x) was read right: no hint
    assert not_found_hint("kube-system/x", namespace_exists=True) == ""
    # a pod or workload TYPE was read as one, not as a namespace: a miss says only kubectl's words
    for text in ("pod/missing", "po/missing", "pods/missing", "Pod/missing", "job/missing", "deploy/missing"):
        assert not_found_hint(text, namespace_exists=False) == "", text


def test_a_workloads_pods_are_its_selectors_pending_ones_first() -> None:
    """The pods the workload's selector matches in its namespace (as `kubectl logs job/NAME` finds
    them), pending ones first, oldest first; the note on stderr names the one explained and the
    others that wait."""
    ref = reference("job/ft8", None, "default")
    job = {"spec": {"selector": {"matchLabels": {"app": "ft8"}}}}
    labels = {"app": "ft8"}
    pods = [b.pod("ft8-0", labels=labels, node_name="n1", phase="Running"),
            b.pod("ft8-9", labels=labels, created="2026-01-01T00:00:09Z"),
            b.pod("ft8-1", labels=labels, created="2026-01-01T00:00:01Z"),
            b.pod("ft8-2", labels=labels, phase="Succeeded"),
            b.pod("ft8-x", "elsewhere", labels=labels), b.pod("other", labels={"app": "else"})]
    found = workload_pods(ref, job, pods)
    assert found == [("ft8-1", True), ("ft8-9", True), ("ft8-0", False), ("ft8-2", False)]
    assert chosen_note(ref, found) == "job/ft8: 2 of its 4 pods pending; explaining ft8-1; also pending: ft8-9"
    assert chosen_note(ref, found[2:]) == ("job/ft8: none of its 2 pods is pending; explaining ft8-0 (explain the "
                                           "others by name)")
    with pytest.raises(BadReference, match=r"^job/ft8 has no pods in namespace 'default' \(none matches"):
        workload_pods(ref, {"spec": {"selector": {"matchLabels": {"app": "nope"}}}}, pods)
    with pytest.raises(BadReference, match="^job/ft8 has no pod selector"):
        workload_pods(ref, {"spec": {}}, pods)


def test_explain_says_a_gang_that_asks_for_more_than_the_whole_cluster_can_never_fit() -> None:
    """A new user's trial: five 8-GPU members of a minMember-5 gang on 4 nodes of 8 GPUs read "only 4
    of the 5 members it needs fit", and the dry run showed every node "fits" — nothing said the gang
    can never fit as the cluster is (it asks for 40 GPUs, the cluster has 32)."""
    gang = [b.pod(f"w-{i}", limits={"nvidia.com/gpu": 8}, labels=b.gang_labels("w", 5)) for i in range(5)]
    nodes = [b.node(f"n{i}", gpus=8) for i in range(4)]
    result = explaining.explain([*nodes, *gang], "default/w-0", config(BINPACK), [], 0.0)
    assert result is not None
    text = explaining.render(result, 0.0)
    assert ("Its gang can never fit as the cluster is: its 5 members ask for 40 nvidia.com/gpu together, "
            "and the schedulable nodes have 32 in all.") in text
    # a gang that fits the cluster's total gets no such line
    small = [b.pod(f"s-{i}", limits={"nvidia.com/gpu": 8}, labels=b.gang_labels("s", 4)) for i in range(4)]
    fits = explaining.explain([*nodes, *small], "default/s-0", config(BINPACK), [], 0.0)
    assert fits is not None and "can never fit" not in explaining.render(fits, 0.0)


def test_explain_says_the_nodes_a_pod_is_pinned_to_do_not_exist() -> None:
    """A new user's trial: a pod pinned by `matchFields metadata.name` to `v100-node-09`, which does
    not exist, read "4 node(s) didn't satisfy plugin(s) [NodeAffinity]" (upstream's words) and
    explain gave no hint that the named node is not there."""
    pinned = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n9", "n1"]}]}]}}}}
    objs = [b.node("n1", gpus=1), b.node("n2", gpus=8), b.pod("full", limits={"nvidia.com/gpu": 1}, node_name="n1"),
            b.pod("p", limits={"nvidia.com/gpu": 1}, spec_extra=pinned)]
    result = explaining.explain(objs, "default/p", config(BINPACK), [], 0.0)
    assert result is not None
    assert "It may only go to nodes it names by metadata.name, and n9 does not exist." in explaining.render(result, 0.0)


# --- the installed configuration --------------------------------------------------------------


class _ConfigMaps:
    """Answers the GET of one ConfigMap path with `status` and `body`; records the paths asked."""

    def __init__(self, status: int, body: Any) -> None:
        self.status, self.body, self.paths = status, body, list[str]()

    async def request(self, method: str, path: str, **_: Any) -> Response:
        assert method == "GET"
        self.paths.append(path)
        return Response(self.status, self.body if isinstance(self.body, bytes) else orjson.dumps(self.body))


def _config_map(text: str) -> dict[str, Any]:
    return {"kind": "ConfigMap", "data": {"config.yaml": text}}


async def test_explain_and_nodes_use_the_installed_configuration_when_there_is_one() -> None:
    """A new user's dry run used the built-in profile where the installed scheduler ran another
    (its weights, its schedulerName): `explain` explained a decision the scheduler would not make."""
    text = Path(BINPACK).read_text().replace("schedulerName: tessera", "schedulerName: gpu-batch")
    http = _ConfigMaps(200, _config_map(text))
    chosen = await installed_config(http, "ops")  # type: ignore[arg-type]
    assert http.paths == ["/api/v1/namespaces/ops/configmaps/tessera-scheduler-config"]
    assert chosen.warning is None and chosen.config.source == "ops/tessera-scheduler-config"
    assert chosen.config.scheduler_names == {"gpu-batch"}
    objs = [b.node("n1", gpus=2), b.pod("p", scheduler="gpu-batch", limits={"nvidia.com/gpu": 1})]
    result = explaining.explain(objs, "default/p", chosen.config, [], 0.0)
    assert result is not None and result.ours and result.config == "ops/tessera-scheduler-config"
    assert "Dry run through the core with the configuration ops/tessera-scheduler-config, now" in \
        explaining.render(result, 0.0)


@pytest.mark.parametrize(("status", "body", "warning"), [
    (404, {"kind": "Status"}, None),  # no installed scheduler (a dev-cluster, a hand-run one): quietly built-in
    (403, {"kind": "Status"}, "configmap tessera-system/tessera-scheduler-config: denied (HTTP 403): needs get on "
                              "it: ask for the Role tessera-config-reader in tessera-system (bound with a "
                              "RoleBinding there; deploy/rbac/user-roles.yaml); the dry run uses the built-in "
                              "configuration (give --config FILE for another)"),
    (500, b"<html>", "configmap tessera-system/tessera-scheduler-config: cannot be read (HTTP 500); the dry run "
                     "uses the built-in configuration (give --config FILE for another)"),
    (200, b"<html>", "configmap tessera-system/tessera-scheduler-config has no config.yaml; the dry run uses the "
                     "built-in configuration (give --config FILE for another)"),
    (200, {"kind": "ConfigMap", "data": {"other.yaml": "x"}}, "configmap tessera-system/tessera-scheduler-config "
                                                              "has no config.yaml; the dry run uses the built-in "
                                                              "configuration (give --config FILE for another)"),
    (200, _config_map("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nnope: 1\n"),
     "invalid configuration: tessera-system/tessera-scheduler-config: nope: unknown field; known fields: "
     "apiVersion, clientConnection, extenders, kind, leaderElection, parallelism, percentageOfNodesToScore, "
     "podInitialBackoffSeconds, podMaxBackoffSeconds, profiles; the dry run uses the built-in configuration "
     "(give --config FILE for another)"),
])
async def test_without_an_installed_configuration_the_built_in_one_is_used(status: int, body: Any,
                                                                          warning: str | None) -> None:
    chosen = await installed_config(_ConfigMaps(status, body), DEFAULT_NAMESPACE)  # type: ignore[arg-type]
    assert chosen.config.source == BUILTIN_SOURCE and chosen.warning == warning


def test_nodes_help_explains_every_gpu_state(capsys: pytest.CaptureFixture[str]) -> None:
    """A new user's trial: `counted` GPUs read as if those exact GPUs were the pod's, and
    `kubectl tessera nodes --help` said nothing about the states."""
    with pytest.raises(SystemExit):
        build_parser().parse_args(["nodes", "--help"])
    legend = capsys.readouterr().out.split("GPU states", 1)[1]
    for state in m.STATES:
        assert f"\n  {state} " in legend, state
    for holder in (m.ALLOCATING, m.TERMINATING, m.NOMINATED):
        assert holder in legend
