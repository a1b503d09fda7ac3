"""A pod Tessera schedules under a profile the configuration `kubectl tessera` was given does not
have (a capacity planner's trial: two profiles on `tessera dev-cluster`, no --config, no ConfigMap).
explain said `Scheduler: tessera-spread (not a Tessera profile)` and "not scheduled by Tessera"
beside the pod's tessera.dev/term and a FailedScheduling Event from tessera-spread; what-if -f
called the file's pods "pending pods ... for other schedulers"; explain pg/NAME printed no reason
and no Leader line; nodes left the pods out without a word."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from scheduler.api.config import load_config
from scheduler.core.annotations import TERM
from scheduler.core.objects import PODGROUP_LABEL, parse_pod
from scheduler.kube.http import Response
from scheduler.kubectl import cli
from scheduler.kubectl import explain as explaining
from scheduler.kubectl import explain_group as explaining_group
from scheduler.kubectl import other_profile
from scheduler.kubectl.target import Target
from scheduler.sim import builders as b
from tests.helpers import fake_listing

TOKEN = "kube-system/tessera/host-a_1f/1/2026-12-07T09:00:00.000000Z"
HINT = ("pass --config FILE with the running scheduler's configuration, or install it as the ConfigMap "
        "tessera-system/tessera-scheduler-config (key config.yaml)")


class _Api:
    """The client after the listing: no ConfigMap (the built-in configuration), no Lease, no Events."""

    async def request(self, method: str, path: str, **_: Any) -> Response:
        return Response(404, orjson.dumps({"kind": "Status", "code": 404}))


def _spread(name: str, term: bool = True, **kwargs: Any) -> dict[str, Any]:
    return b.pod(name, scheduler="tessera-spread", limits={"nvidia.com/gpu": 1},
                 annotations={TERM: TOKEN} if term else None, **kwargs)


def _failed(controller: str, instance: str) -> dict[str, Any]:
    return {"reason": "FailedScheduling", "type": "Warning", "note": "0/1 nodes are available: 1 Insufficient "
            "nvidia.com/gpu.", "eventTime": "2026-12-07T09:01:00.000000Z", "reportingController": controller,
            "reportingInstance": instance, "regarding": {"kind": "Pod"}}


def test_explain_says_a_pod_with_tessera_term_is_tesseras_under_a_profile_it_was_not_given() -> None:
    objs = [b.node("n1", gpus=1), _spread("w")]
    x = explaining.explain(objs, "default/w", load_config(None), [_failed("tessera-spread", "host-a_1f")], time.time())
    assert x is not None
    text = explaining.render(x, time.time())
    assert "not a Tessera profile" not in text and "not scheduled by Tessera" not in text
    assert "Scheduler:  tessera-spread (a Tessera profile the configuration does not have)" in text
    assert ("Status:     not evaluated: Tessera schedules it under profile tessera-spread (it carries "
            "tessera.dev/term, written by Tessera replica host-a_1f), which the built-in configuration does "
            f"not have: {HINT}, so explain can evaluate it") in text


def test_an_event_from_a_tessera_replica_is_evidence_too() -> None:
    """No term on the pod yet: its FailedScheduling Event's reportingInstance is a replica whose term
    is on another pod (kube-scheduler's Events carry an identity of the same shape: only a known
    Tessera identity counts)."""
    objs = [b.node("n1", gpus=1), _spread("w", term=False), _spread("other", node_name="n1", phase="Running")]
    x = explaining.explain(objs, "default/w", load_config(None), [_failed("tessera-spread", "host-a_1f")], time.time())
    assert x is not None and x.other_profile
    assert ("its FailedScheduling Event from tessera-spread was reported by host-a_1f, a Tessera replica"
            in x.status)
    stranger = explaining.explain(objs, "default/w", load_config(None),
                                  [_failed("tessera-spread", "host-b_2e")], time.time())
    assert stranger is not None and not stranger.other_profile
    assert stranger.status.startswith("not scheduled by Tessera")


def test_a_pod_of_another_scheduler_stays_not_tesseras() -> None:
    objs = [b.node("n1", gpus=1), b.pod("k", scheduler="default-scheduler")]
    x = explaining.explain(objs, "default/k", load_config(None), [_failed("default-scheduler", "host-a_1f")],
                           time.time())
    assert x is not None and not x.other_profile
    assert "default-scheduler (not a Tessera profile)" in explaining.render(x, time.time())


def test_explain_pg_says_why_it_has_no_reason_and_no_leader() -> None:
    labels = {PODGROUP_LABEL: "g"}
    objs = [b.node("n1", gpus=1), b.podgroup("g", 2), _spread("g-0", labels=labels), _spread("g-1", labels=labels)]
    result = explaining_group.explain_group(objs, "default", "g", "scheduling.x-k8s.io", load_config(None),
                                            time.time())
    assert result is not None
    text = explaining_group.render(result)
    assert "Why it waits:" in text
    assert ("its members are Tessera's under profile tessera-spread (they carry tessera.dev/term, written by "
            "Tessera replica host-a_1f), which the built-in configuration does not have: no dry run and no "
            f"Leader line (its Lease is not known); {HINT}, so explain can evaluate it") in text


async def test_what_if_calls_a_files_pods_the_files_and_gives_the_hint(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    job = tmp_path / "b-job.yaml"
    job.write_text("""
apiVersion: batch/v1
kind: Job
metadata: {name: b}
spec:
  parallelism: 3
  template:
    spec:
      schedulerName: tessera-spread
      restartPolicy: Never
      containers:
      - {name: main, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
""")
    monkeypatch.setattr(cli, "_listing", fake_listing(_Api(), [b.node("n1", gpus=4),
                                                               _spread("a", node_name="n1", phase="Running")]))
    args = cli.build_parser().parse_args(["what-if", "-f", str(job)])
    assert await cli._what_if(args, Target(None, None, "default")) == 0
    out = capsys.readouterr().out
    assert "for other schedulers" not in out
    assert (f"3 pods from {job} are for tessera-spread, a profile of a running Tessera (pods of it carry "
            "tessera.dev/term, written by Tessera replica host-a_1f), which the built-in configuration does not "
            f"have: {HINT}, so what-if can evaluate them") in out


async def test_nodes_says_which_pending_pods_it_leaves_out(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cli, "_listing", fake_listing(_Api(), [b.node("n1", gpus=4), _spread("w"), _spread("v")]))
    args = cli.build_parser().parse_args(["nodes", "-o", "json"])
    assert await cli._nodes(args, Target(None, None, "default")) == 0
    err = capsys.readouterr().err
    assert ("warning: 2 pending pods are Tessera's under a profile the built-in configuration does not have "
            "(tessera-spread: 2; they carry tessera.dev/term, written by Tessera replica host-a_1f): left out of "
            f"the pending pods -o json|yaml lists (`pending`); {HINT}, so nodes can evaluate them") in err


async def test_nodes_warning_names_where_pending_pods_are_listed(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A re-trial: the text output lists no pending pods at all (only -o json|yaml does), and the
    warning said "not listed as pending" as if it did."""
    monkeypatch.setattr(cli, "_listing", fake_listing(_Api(), [b.node("n1", gpus=4), _spread("w")]))
    assert await cli._nodes(cli.build_parser().parse_args(["nodes"]), Target(None, None, "default")) == 0
    captured = capsys.readouterr()
    assert "not listed as pending" not in captured.err
    assert "left out of the pending pods -o json|yaml lists (`pending`)" in captured.err
    assert "pending" not in captured.out.lower()  # the table itself lists none


def test_a_core_api_event_keeps_its_reporting_instance() -> None:
    """Events read from the core API (events.k8s.io denied) carry the reporting replica too, which
    tells a Tessera Event from kube-scheduler's."""
    from scheduler.kube.snapshot import _from_core
    event = _from_core({"involvedObject": {"kind": "Pod"}, "reason": "FailedScheduling",
                        "reportingComponent": "tessera-spread", "reportingInstance": "host-a_1f"})
    assert event["reportingController"] == "tessera-spread" and event["reportingInstance"] == "host-a_1f"


def test_the_evidence_and_the_nodes_warning_read_only_what_names_the_profile() -> None:
    """A term names a replica only for pods of profiles the configuration lacks; an Event is
    evidence only from the pod's own scheduler name; `nodes` warns of pending pods only (not
    bound, finished or deleting ones)."""
    pods = [parse_pod(_spread("w")), parse_pod(b.pod("t", scheduler="tessera", annotations={TERM: TOKEN}))]
    assert other_profile.term_writers(pods, ["tessera"]) == {"tessera-spread": "host-a_1f"}
    bare = parse_pod(_spread("w", term=False))
    assert other_profile.evidence(bare, [_failed("default-scheduler", "host-a_1f")], frozenset({"host-a_1f"})) == ""
    assert other_profile.evidence(bare, [_failed("tessera-spread", "host-a_1f")], frozenset({"host-a_1f"}))
    gone = _spread("gone")
    gone["metadata"]["deletionTimestamp"] = "2026-12-07T09:00:00Z"
    objs = [_spread("w"), _spread("bound", node_name="n1", phase="Running"), _spread("done", phase="Succeeded"), gone]
    warning = other_profile.pending_left_out(objs, ["tessera"], "", "tessera-system")
    assert warning.startswith("1 pending pod is Tessera's under a profile the built-in configuration does not have "
                              "(tessera-spread: 1; it carries tessera.dev/term"), warning


def _leading(holder: str) -> Any:
    from scheduler.kubectl.leadership import LEADING, Leadership
    return Leadership("kube-system/tessera", LEADING, f"{holder} (the Lease kube-system/tessera was renewed about "
                      "1 s ago)", holder, 1.0, 15)


STALE = ("but host-a_1f no longer leads: the Lease's holder is host-b_2e, whose configuration may not have "
         "profile tessera-spread (then no replica schedules {what} now)")


class _Leased(_Api):
    """The client after the listing: as `_Api`, and the Lease held (renewed now) by host-b_2e."""

    async def request(self, method: str, path: str, **_: Any) -> Response:
        if "/leases/" in path:
            return Response(200, orjson.dumps({"kind": "Lease", "metadata": {"name": "tessera"}, "spec": {
                "holderIdentity": "host-b_2e", "leaseDurationSeconds": 15,
                "renewTime": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())}}))
        return await super().request(method, path)


async def test_explain_reads_the_leader_for_a_pod_of_a_profile_it_lacks(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cli, "_listing", fake_listing(_Leased(), [b.node("n1", gpus=1), _spread("w")]))
    args = cli.build_parser().parse_args(["explain", "w"])
    assert await cli._explain(args, Target(None, None, "default")) == 0
    out = capsys.readouterr().out
    assert "Leader:" in out and STALE.format(what="it") in out


def test_explain_says_the_replica_that_wrote_the_term_no_longer_leads() -> None:
    """A re-trial: Tessera restarted without the second profile; explain still said "Tessera schedules
    it under profile tessera-spread (... written by Tessera replica A)" while the Leader line named B."""
    objs = [b.node("n1", gpus=1), _spread("w")]
    x = explaining.explain(objs, "default/w", load_config(None), [], time.time())
    assert x is not None
    stale = explaining.with_leader(x, _leading("host-b_2e"))
    assert stale.status == (
        "not evaluated: Tessera replica host-a_1f ran profile tessera-spread (it carries "
        f"tessera.dev/term, written by Tessera replica host-a_1f), {STALE.format(what='it')}; the built-in "
        f"configuration does not have the profile either: {HINT}, so explain can evaluate it")
    # the writer still leads: the sentence is as before
    assert explaining.with_leader(x, _leading("host-a_1f")).status == x.status
    assert x.status.startswith("not evaluated: Tessera schedules it under profile tessera-spread")


async def test_what_if_says_the_replica_that_wrote_the_term_no_longer_leads_and_counts_no_other_scheduler(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The same re-trial's what-if said "1 pending pod is for other schedulers (tessera-spread: 1)", then
    that tessera-spread is a profile of a running Tessera: such pods are not another scheduler's."""
    monkeypatch.setattr(cli, "_listing", fake_listing(_Leased(), [b.node("n1", gpus=4), _spread("w")]))
    args = cli.build_parser().parse_args(["what-if"])
    assert await cli._what_if(args, Target(None, None, "default")) == 0
    out = capsys.readouterr().out
    assert "for other schedulers" not in out
    assert ("1 pending pod is for tessera-spread, a profile Tessera replica host-a_1f ran (pods of it carry its "
            f"tessera.dev/term), {STALE.format(what='it')}; the built-in configuration does not have the profile "
            f"either: {HINT}, so what-if can evaluate it") in out


NEW_TOKEN = "kube-system/tessera/host-b_2e/2/2026-12-07T10:00:00.000000Z"


async def test_what_if_reads_the_profiles_latest_term_not_its_first_pods(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A review: the term what-if compared with the Lease's holder was the first pod's by name, a
    pod bound long ago by replica A, while the waiting pod carries the term of B, which took the
    Lease over (one more transition) with the profile and leads now: what-if said A no longer leads
    and perhaps no replica schedules the pod. The latest term of the profile's pods names its
    replica (B: no such sentence); nodes' warning names it too."""
    objs = [b.node("n1", gpus=4), _spread("a-old", node_name="n1", phase="Running"),
            b.pod("z-new", scheduler="tessera-spread", limits={"nvidia.com/gpu": 1},
                  annotations={TERM: NEW_TOKEN})]
    monkeypatch.setattr(cli, "_listing", fake_listing(_Leased(), objs))
    assert await cli._what_if(cli.build_parser().parse_args(["what-if"]), Target(None, None, "default")) == 0
    out = capsys.readouterr().out
    assert "no longer leads" not in out, out
    assert "written by Tessera replica host-b_2e" in out
    warning = other_profile.pending_left_out(objs, ["tessera"], "", "tessera-system")
    assert "written by Tessera replica host-b_2e" in warning, warning


def test_explain_reads_the_profiles_latest_term_for_whether_its_replica_leads() -> None:
    """The same for explain: the waiting pod still carries A's term (B took the Lease over with the
    profile and has not tried it yet), but B's term is on another pod of the profile: B runs the
    profile, so explain says nothing of A no longer leading."""
    objs = [b.node("n1", gpus=1), _spread("w"),
            b.pod("placed", scheduler="tessera-spread", limits={"nvidia.com/gpu": 1}, node_name="n1",
                  phase="Running", annotations={TERM: NEW_TOKEN})]
    x = explaining.explain(objs, "default/w", load_config(None), [], time.time())
    assert x is not None
    assert explaining.with_leader(x, _leading("host-b_2e")).status == x.status
    assert "written by Tessera replica host-a_1f" in x.status  # the pod's own term, as it is


def test_a_hand_written_term_with_no_replica_name_is_no_evidence() -> None:
    """`tessera.dev/term: /1/x` (a user's value: no replica writes an empty identity) made explain
    say the pod "carries tessera.dev/term, written by Tessera replica " with no name."""
    objs = [b.node("n1", gpus=1), b.pod("w", scheduler="tessera-spread", annotations={TERM: "/1/x"})]
    x = explaining.explain(objs, "default/w", load_config(None), [], time.time())
    assert x is not None and not x.other_profile
    assert "written by Tessera replica" not in explaining.render(x, time.time())
