"""The chart's alert rules run by Prometheus' own rule engine (`promtool check rules` and
`promtool test rules`), through failovers as a platform engineer's trial saw them.

Why promtool: an alerting rule with `for` fires only if its expression returns the alert's
series at every evaluation for that long; one empty evaluation drops the pending alert and its
timer starts over. Whether a rule survives the 30-70 s of a failover (the killed leader's series
go stale at once, the standby reports `tessera_leader 1` only after it took the Lease and was
scraped) is a property of PromQL evaluation, so it is checked by the engine that evaluates it,
not by reading the expression. promtool is built by hack/build-control-plane.sh into the same
cache as helm.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.kube.controlplane.binaries import build_script, default_bin_dir
from tests.deploy_manifests import NAMESPACE, find, helm_binary, helm_template

JOB = "tessera-scheduler-metrics"
STEP = 30  # seconds: the scrape interval and the rule evaluation interval
Timeline = Sequence[float | str]  # one value per step; "stale": the target is down (staleness marker)


def promtool_binary() -> Path:
    """promtool from the control-plane cache; skips (fails in CI) when it is missing."""
    path = default_bin_dir() / "promtool"
    if path.is_file() and os.access(path, os.X_OK):
        return path
    message = f"promtool unavailable in {path.parent}; build it with 'bash {build_script()}'"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and {message}", pytrace=False)
    pytest.skip(message)


def _groups(values: dict[str, Any] | None = None, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    rule = find(helm_template(helm_binary(), {"monitoring": {"prometheusRule": {"enabled": True}}, **(values or {})},
                              namespace=namespace),
                "PrometheusRule", "tessera-scheduler")
    groups: list[dict[str, Any]] = rule["spec"]["groups"]
    return groups


def _promtool(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(promtool_binary()), *args], capture_output=True, text=True, cwd=tmp_path,
                          timeout=120, check=False)


def _series(name: str, instance: str, timeline: Timeline, **labels: str) -> dict[str, str]:
    selector = ", ".join(f'{k}="{v}"' for k, v in {"job": JOB, "instance": instance, **labels}.items())
    return {"series": f"{name}{{{selector}}}", "values": " ".join(str(v) for v in timeline)}


def _replica(instance: str, leads: Timeline, **gauges: Timeline) -> list[dict[str, str]]:
    """One scheduler pod's scrapes: `up`, `tessera_leader`, a synced Pod informer and the gauges
    given, each stale wherever `leads` is (the target was down)."""
    down = [v == "stale" for v in leads]
    series = [_series("up", instance, ["stale" if d else 1 for d in down]),
              _series("tessera_leader", instance, leads),
              _series("tessera_informer_synced", instance, ["stale" if d else 1 for d in down], kind="Pod")]
    for name, timeline in gauges.items():
        metric, _, label = name.partition("__")
        extra = dict([label.split("_", 1)]) if label else {}
        series.append(_series(metric, instance, ["stale" if d else v for d, v in zip(down, timeline)], **extra))
    return series


def _failovers(steps: int, every: int, gap: int) -> tuple[list[float | str], list[float | str]]:
    """Two replicas' `tessera_leader` when the leader is killed every `every` steps: it is down
    for `gap` steps (its pod restarts) while no one leads, then the other leads and the killed one
    comes back as its standby."""
    a: list[float | str] = []
    b: list[float | str] = []
    leader = "a"
    for step in range(steps):
        phase = step % every
        killed = phase >= every - gap
        if step and phase == 0:
            leader = "b" if leader == "a" else "a"
        a.append("stale" if killed and leader == "a" else (1 if leader == "a" and not killed else 0))
        b.append("stale" if killed and leader == "b" else (1 if leader == "b" and not killed else 0))
    return a, b


def _annotations(rule: dict[str, Any], value: float, labels: dict[str, str]) -> dict[str, str]:
    """The rule's annotations as Prometheus expands them, for the `{{ $value }}` and
    `{{ $labels.x }}` forms the alerts under test use."""
    def expand(text: str) -> str:
        text = text.replace("{{ $value }}", f"{value:g}")
        return re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m.group(1), ""), text)
    return {key: expand(text) for key, text in rule["annotations"].items()}


def _run_test(tmp_path: Path, groups: list[dict[str, Any]] | list[list[dict[str, Any]]], series: list[dict[str, str]],
              checks: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    """promtool's unit test of `series` against the rule groups (one rule file), or against each
    list of groups as a rule file of its own (one per install)."""
    files = groups if groups and isinstance(groups[0], list) else [groups]
    names = [f"rules-{i}.yaml" if len(files) > 1 else "rules.yaml" for i in range(len(files))]
    for name, file_groups in zip(names, files):
        (tmp_path / name).write_text(yaml.safe_dump({"groups": file_groups}))
    (tmp_path / "test.yaml").write_text(yaml.safe_dump({
        "rule_files": names, "evaluation_interval": f"{STEP}s",
        "tests": [{"interval": f"{STEP}s", "input_series": series, "alert_rule_test": checks}]}))
    return _promtool(tmp_path, "test", "rules", "test.yaml")


def _alert(groups: list[dict[str, Any]], name: str) -> dict[str, Any]:
    [rule] = [r for g in groups for r in g["rules"] if r.get("alert") == name]
    found: dict[str, Any] = rule
    return found


def test_promtool_accepts_the_rules(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": _groups({"scheduler": {"replicas": 3}})}))
    done = _promtool(tmp_path, "check", "rules", "rules.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 17 rules found" in done.stdout, done.stdout


STEPS = 26  # 13 minutes
A, B = _failovers(STEPS, every=6, gap=2)  # the leader killed every 3 minutes, a minute without a leader


def test_gpu_and_pending_pod_alerts_fire_under_a_leader_killed_more_often_than_their_for(tmp_path: Path) -> None:
    """A GPU in conflict for 13 minutes and pods unschedulable throughout, while the leader is
    killed every 3 minutes: the chart's GPUConflict (for 5m) and PodsUnschedulable (for 10m
    here) fire, once each (one series per job, not per replica)."""
    groups = _groups({"monitoring": {"prometheusRule": {"enabled": True, "unschedulableFor": "10m"}}})
    standby_pending = [0] * STEPS
    series = (_replica("a:10259", A, tessera_devices__state_conflict=[1] * STEPS,
                       scheduler_pending_pods__queue_unschedulable=[3 if v == 1 else 0 for v in A])
              + _replica("b:10259", B, tessera_devices__state_conflict=[1] * STEPS,
                         scheduler_pending_pods__queue_unschedulable=[3 if v == 1 else s for v, s in
                                                                       zip(B, standby_pending)]))
    conflict, pending = _alert(groups, "TesseraGPUConflict"), _alert(groups, "TesseraPodsUnschedulable")
    checks: list[dict[str, Any]] = [
        {"eval_time": "4m", "alertname": "TesseraGPUConflict", "exp_alerts": []},  # pending still
        {"eval_time": "12m", "alertname": "TesseraGPUConflict", "exp_alerts": [
            {"exp_labels": {"job": JOB, "severity": "critical"},
             "exp_annotations": _annotations(conflict, 1, {"job": JOB})}]},
        {"eval_time": "12m", "alertname": "TesseraPodsUnschedulable", "exp_alerts": [
            {"exp_labels": {"job": JOB, "severity": "warning"},
             "exp_annotations": _annotations(pending, 3, {"job": JOB})}]},
        # the leader's gap is a minute at most: a minute without a leader is no TesseraNoLeader
        {"eval_time": "12m", "alertname": "TesseraNoLeader", "exp_alerts": []},
    ]
    done = _run_test(tmp_path, groups, series, checks)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_leader_filter_the_trial_saw_never_fires_under_the_same_failovers(tmp_path: Path) -> None:
    """The premise, shown on the engine: the rule as it was (`... and on (job, instance)
    (tessera_leader == 1)`) returns nothing while no replica leads, so the same conflict never
    fires: each failover starts its `for` over."""
    groups = _groups()
    rule = _alert(groups, "TesseraGPUConflict")
    rule["expr"] = (f'sum by (job) (tessera_devices{{job="{JOB}", state="conflict"}} '
                    f'and on (job, instance) (tessera_leader{{job="{JOB}"}} == 1)) > 0')
    series = (_replica("a:10259", A, tessera_devices__state_conflict=[1] * STEPS)
              + _replica("b:10259", B, tessera_devices__state_conflict=[1] * STEPS))
    checks: list[dict[str, Any]] = [{"eval_time": f"{m}m", "alertname": "TesseraGPUConflict", "exp_alerts": []} for m in range(1, 13)]
    done = _run_test(tmp_path, groups, series, checks)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_stuck_term_fence_pages_through_a_failover_and_a_short_one_does_not(tmp_path: Path) -> None:
    """An on-call trial: an admission policy refused writes of tessera.dev/term, the leader was
    SIGTERMed, and the new leader fenced nothing: /readyz failed term-fence,
    tessera_leader_fence_pending_pods was 2 and scheduler_pending_pods 0 in every queue, and no
    alert fired. Here the fence fails for 12 minutes across a failover (the killed leader's series
    stale for a minute, the next leader's fence failing from its first scrape): TesseraTermFenceStuck
    fires once per job, and resolves a failoverWindow after the fence succeeds. A fence that failed
    for a minute (a webhook's brief outage) is no page."""
    groups = _groups()
    rule = _alert(groups, "TesseraTermFenceStuck")
    steps = 40  # 20 minutes
    a: Timeline = [1] * 8 + ["stale"] * 2 + [0] * 30  # killed at minute 4, back as the standby
    b: Timeline = [0] * 10 + [1] * 30  # leads from minute 5
    a_fence: Timeline = [0, 0] + [2] * 6 + [0] * 32
    b_fence: Timeline = [0] * 10 + [2] * 16 + [0] * 14  # fenced at minute 13
    series = (_replica("a:10259", a, tessera_leader_fence_pending_pods=a_fence,
                       scheduler_pending_pods__queue_active=[0] * steps)
              + _replica("b:10259", b, tessera_leader_fence_pending_pods=b_fence,
                         scheduler_pending_pods__queue_active=[0] * steps))
    labels = {"job": JOB, "severity": "critical"}
    checks: list[dict[str, Any]] = [
        {"eval_time": "5m", "alertname": "TesseraTermFenceStuck", "exp_alerts": []},  # pending still
        {"eval_time": "7m", "alertname": "TesseraTermFenceStuck", "exp_alerts": [
            {"exp_labels": labels, "exp_annotations": _annotations(rule, 2, labels)}]},
        {"eval_time": "12m", "alertname": "TesseraTermFenceStuck", "exp_alerts": [
            {"exp_labels": labels, "exp_annotations": _annotations(rule, 2, labels)}]},
        {"eval_time": "17m", "alertname": "TesseraTermFenceStuck", "exp_alerts": []},
        # nothing else said so: the trial's snapshot
        {"eval_time": "12m", "alertname": "TesseraNoLeader", "exp_alerts": []},
        {"eval_time": "12m", "alertname": "TesseraPodsUnschedulable", "exp_alerts": []},
    ]
    done = _run_test(tmp_path, groups, series, checks)
    assert done.returncode == 0, done.stdout + done.stderr

    brief: Timeline = [0] * 4 + [2] * 2 + [0] * 34
    series = _replica("a:10259", [1] * steps, tessera_leader_fence_pending_pods=brief)
    checks = [{"eval_time": f"{m}m", "alertname": "TesseraTermFenceStuck", "exp_alerts": []} for m in range(1, 20)]
    (tmp_path / "brief").mkdir()
    done = _run_test(tmp_path / "brief", groups, series, checks)
    assert done.returncode == 0, done.stdout + done.stderr


def test_no_replica_up_and_no_leader_are_told_apart(tmp_path: Path) -> None:
    """Both replicas up and standing by for 7 minutes: TesseraNoLeader, not TesseraSchedulerDown;
    then both down: TesseraSchedulerDown, and TesseraNoLeader resolves (nothing is up to lead).
    A second standby is missing meanwhile with three replicas configured. (The series have no
    `namespace` label, as a scrape config that does not set it gives: the install's rules read them.)"""
    groups = _groups({"scheduler": {"replicas": 3}})
    standing_by: Timeline = [0] * 14 + ["stale"] * 14
    series = _replica("a:10259", standing_by) + _replica("b:10259", standing_by)
    no_leader, down = _alert(groups, "TesseraNoLeader"), _alert(groups, "TesseraSchedulerDown")
    standby = _alert(groups, "TesseraStandbyMissing")
    checks: list[dict[str, Any]] = [
        {"eval_time": "6m", "alertname": "TesseraNoLeader", "exp_alerts": [
            {"exp_labels": {"namespace": NAMESPACE, "severity": "critical"},
             "exp_annotations": _annotations(no_leader, 0, {})}]},
        {"eval_time": "6m", "alertname": "TesseraSchedulerDown", "exp_alerts": []},
        {"eval_time": "13m", "alertname": "TesseraNoLeader", "exp_alerts": []},
        {"eval_time": "13m", "alertname": "TesseraSchedulerDown", "exp_alerts": [
            # absent() of a comparison has no labels to carry (as kubernetes-mixin's KubeSchedulerDown):
            # the rule names the install's namespace itself
            {"exp_labels": {"namespace": NAMESPACE, "severity": "critical"},
             "exp_annotations": _annotations(down, 1, {})}]},
        {"eval_time": "6m", "alertname": "TesseraStandbyMissing", "exp_alerts": []},  # two standbys: enough
        {"eval_time": "13m", "alertname": "TesseraStandbyMissing", "exp_alerts": []},  # pending (15m)
    ]
    done = _run_test(tmp_path, groups, series, checks)
    assert done.returncode == 0, done.stdout + done.stderr
    assert standby["expr"].endswith("< 2")


def test_a_conflicting_scheduler_pages_from_its_first_write_seen_and_resolves_half_an_hour_after_the_last(
        tmp_path: Path) -> None:
    """A counter whose series appears at 1 shows no `increase` (Prometheus has no sample before
    it), yet the first write of another install is the one that matters: the rule also fires on a
    series new within its window. Seen at minute 2, again at minute 10; quiet 30 minutes after."""
    steps = 90  # 45 minutes
    leads: list[float | str] = [1] * steps
    writes: Timeline = ["_"] * 4 + [1] * 16 + [3] * (steps - 20)
    series = _replica("a:10259", leads) + [_series("tessera_conflicting_scheduler_writes_total", "a:10259", writes,
                                                   lease="tessera-system/tessera")]
    groups = _groups()
    rule = _alert(groups, "TesseraConflictingScheduler")
    labels = {"job": JOB, "lease": "tessera-system/tessera", "severity": "critical"}
    firing = [{"exp_labels": labels, "exp_annotations": _annotations(rule, 1, labels)}]
    checks: list[dict[str, Any]] = [
        {"eval_time": "1m", "alertname": "TesseraConflictingScheduler", "exp_alerts": []},
        {"eval_time": "3m", "alertname": "TesseraConflictingScheduler", "exp_alerts": firing},
        {"eval_time": "20m", "alertname": "TesseraConflictingScheduler", "exp_alerts": firing},
        {"eval_time": "41m", "alertname": "TesseraConflictingScheduler", "exp_alerts": []},
    ]
    done = _run_test(tmp_path, groups, series, checks)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_kind_read_as_empty_alerts_when_forbidden_or_when_tesseras_own_crd_is_missing(tmp_path: Path) -> None:
    """An on-call trial: with the PDB rule taken out of the ClusterRole (and on a cluster without
    Tessera's CRDs) a replica stayed ready and synced, and nothing fired. TesseraInformerUnavailable
    fires for a forbidden kind, for any kind left empty by a 401 (unauthorized) and for Tessera's own
    CRDs not served, not for scheduler-plugins' PodGroup nor the alpha upstream PodGroup API not
    served (absent from most clusters by design), and
    resolves once the kind is read again; TesseraInformerNotSynced stays quiet (the replica is
    synced: its text no longer promises the missing-CRD case)."""
    steps = 30  # 15 minutes; the role is fixed and the CRD installed at minute 12
    fixed_at = 24
    leads: list[float | str] = [1] * steps
    on, off = [1] * fixed_at + [0] * (steps - fixed_at), [0] * steps
    unavailable = {("PodDisruptionBudget", "forbidden"): on, ("ExtendedResource", "not_served"): on,
                   ("ResourceClass", "not_served"): [0] * 6 + [1] * (steps - 6),  # missing from minute 3
                   # not served (no alert), then the apiserver rejects the replica's credentials
                   # from minute 3 (a 401: the reason follows the latest answer), for any kind
                   ("PodGroup", "not_served"): [1] * 6 + [0] * (steps - 6),
                   ("PodGroup", "unauthorized"): [0] * 6 + [1] * (steps - 6),
                   ("PodGroup.scheduling.k8s.io", "not_served"): [1] * steps,
                   ("PriorityClass", "forbidden"): off, ("Pod", "forbidden"): off}
    series = _replica("a:10259", leads) + [
        _series("tessera_informer_unavailable", "a:10259", timeline, kind=kind, reason=reason)
        for (kind, reason), timeline in unavailable.items()]
    groups = _groups()
    rule = _alert(groups, "TesseraInformerUnavailable")

    def firing(*kinds: tuple[str, str]) -> list[dict[str, Any]]:
        alerts = []
        for kind, reason in kinds:
            labels = {"job": JOB, "instance": "a:10259", "kind": kind, "reason": reason, "severity": "warning"}
            alerts.append({"exp_labels": labels, "exp_annotations": _annotations(rule, 1, labels)})
        return alerts

    checks: list[dict[str, Any]] = [
        {"eval_time": "9m", "alertname": "TesseraInformerUnavailable", "exp_alerts": []},  # pending (10m)
        {"eval_time": "11m", "alertname": "TesseraInformerUnavailable",
         "exp_alerts": firing(("PodDisruptionBudget", "forbidden"), ("ExtendedResource", "not_served"))},
        {"eval_time": "14m", "alertname": "TesseraInformerUnavailable",
         "exp_alerts": firing(("ResourceClass", "not_served"), ("PodGroup", "unauthorized"))},
        {"eval_time": "14m", "alertname": "TesseraInformerNotSynced", "exp_alerts": []},
    ]
    done = _run_test(tmp_path, groups, series, checks)
    assert done.returncode == 0, done.stdout + done.stderr
    text = " ".join(_alert(groups, "TesseraInformerNotSynced")["annotations"]["description"].split())
    assert "TesseraInformerUnavailable" in text and "RBAC, a CRD not installed" not in text


STEPS = 34  # 17 minutes of 30-second scrapes


def _warns_once_through_failovers(tmp_path: Path, alert: str, metric: str, timeline: Timeline, count: int,
                                  pending: str, firing_at: str, resolved: str) -> dict[str, Any]:
    """Both replicas export `metric` along `timeline` while the leader is killed every 3 minutes:
    `alert` is still pending at `pending`, fires once (one series per job, `count` in its text) at
    `firing_at`, and is gone at `resolved`. The rule, for the caller's own checks."""
    a, b = _failovers(STEPS, every=6, gap=2)
    groups = _groups()
    series = _replica("a:10259", a, **{metric: timeline}) + _replica("b:10259", b, **{metric: timeline})
    rule = _alert(groups, alert)
    firing = [{"exp_labels": {"job": JOB, "severity": "warning"},
               "exp_annotations": _annotations(rule, count, {"job": JOB})}]
    checks: list[dict[str, Any]] = [
        {"eval_time": pending, "alertname": alert, "exp_alerts": []},
        {"eval_time": firing_at, "alertname": alert, "exp_alerts": firing},
        {"eval_time": resolved, "alertname": alert, "exp_alerts": []},
    ]
    done = _run_test(tmp_path, groups, series, checks)
    assert done.returncode == 0, done.stdout + done.stderr
    return rule


def test_a_silent_node_agent_warns_after_its_for_through_failovers_and_resolves_when_it_heartbeats_again(
        tmp_path: Path) -> None:
    """An on-call trial: a node agent SIGKILLed left its GPUs `Healthy=True` with a stale heartbeat
    and no alert said so. `tessera_node_agents_silent` (every replica's own cache, as the GPU
    states) at 1 from minute 1 to 12 while the leader is killed every 3 minutes: the warning fires
    once (one series per job) after `agentSilentFor` (10m), and is gone once the agent is back."""
    silent: Timeline = [0] * 2 + [1] * 22 + [0] * (STEPS - 24)
    rule = _warns_once_through_failovers(tmp_path, "TesseraNodeAgentSilent", "tessera_node_agents_silent", silent,
                                         1, pending="9m", firing_at="11m30s", resolved="13m")
    assert "kubectl tessera nodes" in rule["annotations"]["description"]


def test_unhealthy_gpus_warn_after_their_for_through_failovers_and_resolve_when_healthy_again(
        tmp_path: Path) -> None:
    """An on-call trial: GPUs the node agent published `Healthy=False` (an Xid, fallen off the bus)
    showed as `unhealthy` in `kubectl tessera nodes` and `tessera_devices{state="unhealthy"}`, and
    no shipped alert said so. Two GPUs unhealthy from minute 1 to 13 while the leader is killed
    every 3 minutes: the warning fires once (one series per job) after `gpuUnhealthyFor` (10m),
    with the count, and is gone once they are healthy (or replaced) again; one unhealthy for 4
    minutes (a flap) does not fire."""
    unhealthy: Timeline = [0] * 2 + [2] * 24 + [0] * (STEPS - 26)
    rule = _warns_once_through_failovers(tmp_path, "TesseraGPUUnhealthy", "tessera_devices__state_unhealthy",
                                         unhealthy, 2, pending="9m", firing_at="12m", resolved="14m")
    assert rule["for"] == "10m" and rule["labels"]["severity"] == "warning"
    description = " ".join(rule["annotations"]["description"].split())
    assert "kubectl tessera nodes" in description and "Healthy=False" in description
    a, b = _failovers(STEPS, every=6, gap=2)
    flap: Timeline = [0] * 2 + [1] * 8 + [0] * (STEPS - 10)
    series = (_replica("a:10259", a, tessera_devices__state_unhealthy=flap)
              + _replica("b:10259", b, tessera_devices__state_unhealthy=flap))
    checks = [{"eval_time": f"{m}m", "alertname": "TesseraGPUUnhealthy", "exp_alerts": []} for m in range(1, 17)]
    done = _run_test(tmp_path, _groups(), series, checks)
    assert done.returncode == 0, done.stdout + done.stderr


OTHER = "tessera-b"  # a second install's release namespace


def _in_namespace(namespace: str, series: list[dict[str, str]]) -> list[dict[str, str]]:
    """Series as the install's ServiceMonitor scrapes them: Prometheus Operator gives every target
    the `namespace` label of the Service it found the endpoints through (the release's)."""
    return [{**s, "series": s["series"].replace("{", f'{{namespace="{namespace}", ', 1)} for s in series]


def test_two_installs_in_two_namespaces_scraped_under_one_job_are_alerted_on_apart(tmp_path: Path) -> None:
    """Two releases in two namespaces are scraped as the one job the Service's name gives
    (`tessera-scheduler-metrics`); the rules summed them, so two healthy installs (one leader
    each) fired TesseraMultipleLeaders, and one install's standby hid the other's missing one.
    Each install's rules read the series of its own namespace: two healthy installs fire nothing,
    two leaders in one namespace still fire (once, for that install), and the install without a
    standby is told."""
    steps = 40  # 20 minutes; in tessera-system a second replica also says it leads from minute 10
    values = {"scheduler": {"replicas": 2}}
    rules = [_groups(values), _groups(values, namespace=OTHER)]
    a2: Timeline = [0] * 20 + [1] * 20
    series = (_in_namespace(NAMESPACE, _replica("10.0.0.1:10259", [1] * steps) + _replica("10.0.0.2:10259", a2))
              + _in_namespace(OTHER, _replica("10.0.1.1:10259", [1] * steps)))  # its standby is missing
    leaders = _alert(rules[0], "TesseraMultipleLeaders")
    labels = {"job": JOB, "namespace": NAMESPACE, "severity": "critical"}
    checks: list[dict[str, Any]] = [
        {"eval_time": "9m", "alertname": "TesseraMultipleLeaders", "exp_alerts": []},
        {"eval_time": "16m", "alertname": "TesseraMultipleLeaders", "exp_alerts": [
            {"exp_labels": labels, "exp_annotations": _annotations(leaders, 2, labels)}]},
        {"eval_time": "16m", "alertname": "TesseraStandbyMissing", "exp_alerts": [
            {"exp_labels": {"namespace": OTHER, "severity": "warning"},
             "exp_annotations": _annotations(_alert(rules[1], "TesseraStandbyMissing"), 0, {})}]},
        {"eval_time": "16m", "alertname": "TesseraNoLeader", "exp_alerts": []},
        {"eval_time": "16m", "alertname": "TesseraSchedulerDown", "exp_alerts": []},
    ]
    done = _run_test(tmp_path, rules, series, checks)
    assert done.returncode == 0, done.stdout + done.stderr


def test_an_install_without_a_leader_or_without_a_replica_up_is_told_beside_a_healthy_one(tmp_path: Path) -> None:
    """The other sums: for 7 minutes tessera-system's two replicas both stand by while the other
    install leads (TesseraNoLeader for tessera-system); then it leads again and the other install's
    only replica is gone (TesseraSchedulerDown for that install, though a replica of the job is up)."""
    steps = 28  # 14 minutes
    rules = [_groups(), _groups(namespace=OTHER)]
    own: Timeline = [0] * 14 + [1] * 14
    other: Timeline = [1] * 14 + ["stale"] * 14
    series = (_in_namespace(NAMESPACE, _replica("10.0.0.1:10259", own) + _replica("10.0.0.2:10259", [0] * steps))
              + _in_namespace(OTHER, _replica("10.0.1.1:10259", other)))
    checks: list[dict[str, Any]] = [
        {"eval_time": "6m", "alertname": "TesseraNoLeader", "exp_alerts": [
            {"exp_labels": {"namespace": NAMESPACE, "severity": "critical"},
             "exp_annotations": _annotations(_alert(rules[0], "TesseraNoLeader"), 0, {})}]},
        {"eval_time": "6m", "alertname": "TesseraSchedulerDown", "exp_alerts": []},
        {"eval_time": "13m", "alertname": "TesseraNoLeader", "exp_alerts": []},
        {"eval_time": "13m", "alertname": "TesseraSchedulerDown", "exp_alerts": [
            {"exp_labels": {"namespace": OTHER, "severity": "critical"},
             "exp_annotations": _annotations(_alert(rules[1], "TesseraSchedulerDown"), 1, {})}]},
        {"eval_time": "13m", "alertname": "TesseraMultipleLeaders", "exp_alerts": []},
    ]
    done = _run_test(tmp_path, rules, series, checks)
    assert done.returncode == 0, done.stdout + done.stderr


def test_bindings_decided_again_at_once_do_not_raise_the_binding_errors_alert(tmp_path: Path) -> None:
    """A controller labelling each new pod once refuses some Bindings (the pod changed since its
    decision); those are decided again at once and count `result="outdated"`, no error: hours of
    them leave TesseraBindingErrors quiet, while `error` (refused and backed off) fires it."""
    steps = 40  # 20 minutes
    groups = _groups()
    ones: Timeline = [1] * steps
    outdated = _series("tessera_bindings_total", "a:10259", [3 * i for i in range(steps)], result="outdated")
    quiet = _series("tessera_bindings_total", "a:10259", [0] * steps, result="error")
    done = _run_test(tmp_path, groups, _replica("a:10259", ones) + [outdated, quiet], [
        {"eval_time": "19m", "alertname": "TesseraBindingErrors", "exp_alerts": []}])
    assert done.returncode == 0, done.stdout + done.stderr

    # the contrast: one refusal every scrape (30 s) that is an error fires it after its `for`
    failing = _series("tessera_bindings_total", "a:10259", list(range(steps)), result="error")
    rule = _alert(groups, "TesseraBindingErrors")
    assert 'result="outdated"' in rule["annotations"]["description"]
    annotations = {key: text.replace("{{ $value | humanize }}", "33.33m") for key, text in rule["annotations"].items()}
    done = _run_test(tmp_path, groups, _replica("a:10259", ones) + [outdated, failing], [
        {"eval_time": "19m", "alertname": "TesseraBindingErrors",
         "exp_alerts": [{"exp_labels": {"job": JOB, "severity": "warning"}, "exp_annotations": annotations}]}])
    assert done.returncode == 0, done.stdout + done.stderr


_PROMQL_WORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool",
                 "offset", "inf", "nan"}


def _metric_names(expr: str) -> set[str]:
    """The series names a PromQL expression reads, by reading it (not the recipe's way): its
    strings, label matchers, grouping clauses and ranges dropped, then every identifier that is
    neither a function (followed by a parenthesis) nor a keyword."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)
    expr = re.sub(r"\{[^}]*\}", " ", expr)
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    expr = re.sub(r"\[[^\]]*\]", " ", expr)
    expr = re.sub(r"\boffset\s+\w+", " ", expr)
    names = {m.group(1) for m in re.finditer(r"(?<![\w.:])([a-zA-Z_:][a-zA-Z0-9_:]*)(?![\w:])(?!\s*\()", expr)}
    return {name for name in names if name.lower() not in _PROMQL_WORDS}


def _exported_names() -> set[str]:
    """Every sample name Tessera's /metrics can serve (a counter's `_total`, a histogram's
    `_bucket`, `_sum`, `_count`), whether or not a series of it exists yet."""
    from scheduler.kube.metrics import Metrics
    names: set[str] = set()
    for family in Metrics(profiles=["tessera"]).registry.collect():
        suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}.get(family.type, [""])
        names.update(family.name + suffix for suffix in suffixes)
    return names


def test_the_live_scrape_recipe_feeds_promtool_every_metric_the_rules_read(tmp_path: Path) -> None:
    """An on-call trial: docs/operations.md's recipe for testing the rules against live scrapes
    kept samples by a hand-written grep that left out tessera_node_agents_silent,
    tessera_informer_unavailable and tessera_conflicting_scheduler_writes_total, so their alerts
    could not fire in it. The recipe takes the names from the rendered rules; every name the rules
    read is one Tessera exports (or `up`, Prometheus' own) and passes the recipe's filter."""
    groups = _groups({"scheduler": {"replicas": 3}})
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    used = set().union(*(_metric_names(rule["expr"]) for group in groups for rule in group["rules"]))
    assert {"tessera_node_agents_silent", "tessera_informer_unavailable",
            "tessera_conflicting_scheduler_writes_total", "tessera_leader"} <= used, used
    assert used - {"up"} <= _exported_names(), sorted(used - {"up"} - _exported_names())
    text = (Path(__file__).parents[2] / "docs" / "operations.md").read_text()
    recipe = text.split("## Test the alert rules against live scrapes", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    [line] = [line.strip() for line in recipe.splitlines() if line.strip().startswith("METRICS=")]
    [grep] = [line.strip() for line in recipe.splitlines() if "grep -E" in line and "$METRICS" in line]
    scrape = "".join(f"# HELP {name} x\n{name}{{a=\"1\"}} 1\n{name} 2\n" for name in sorted(used))
    (tmp_path / "scrape.txt").write_text(scrape + "other_metric 3\n")
    pipe = grep.rstrip(" \\")  # `| grep -E ... \` of the recipe's pipeline
    done = subprocess.run(["bash", "-c", f"{line}\ncat scrape.txt {pipe}"], capture_output=True,
                          text=True, cwd=tmp_path, timeout=30, check=False)
    kept = {re.split(r"[{ ]", sample, maxsplit=1)[0] for sample in done.stdout.splitlines()}
    assert kept == used - {"up"}, (done.stderr, sorted(kept ^ (used - {"up"})))
    assert len(done.stdout.splitlines()) == 2 * len(used - {"up"})  # both samples of each, no HELP line


def test_scheduler_down_names_the_secure_ports_scrape_failures() -> None:
    """Since daa24b3 a scrape needs a token, RBAC and the scheduler's own TokenReviews: a trial's
    Prometheus got 403s while both pods were Ready and scheduling, and the alert's description said
    only "check the ServiceMonitor's job"."""
    description = " ".join(_alert(_groups(), "TesseraSchedulerDown")["annotations"]["description"].split())
    for cause in ("401", "403", "500", "Ready", "system:auth-delegator", "tessera-metrics-reader",
                  "NetworkPolicy", "TLS", "/readyz"):
        assert cause in description, (cause, description)


def test_the_readmes_plain_prometheus_scrape_config_is_valid_and_scrapes_the_secure_port(tmp_path: Path) -> None:
    """deploy/README.md's Plain Prometheus said `role: pod` with port `metrics`, a port the
    scheduler pods no longer have (daa24b3: `https`, HTTPS, a bearer token)."""
    readme = (Path(__file__).parents[2] / "deploy" / "README.md").read_text()
    section = readme.split("- **Plain Prometheus**", 1)[1].split("\n## ", 1)[0]
    config = section.split("```yaml", 1)[1].split("```", 1)[0]
    [job] = yaml.safe_load(config)["scrape_configs"]
    assert job["scheme"] == "https" and job["authorization"]["credentials_file"] and "tls_config" in job, job
    keep = [r for r in job["relabel_configs"] if r.get("action") == "keep"]
    assert any(r.get("regex") == "https" and "port_name" in "".join(r["source_labels"]) for r in keep), keep
    (tmp_path / "prometheus.yml").write_text(config)
    done = _promtool(tmp_path, "check", "config", "--syntax-only", "prometheus.yml")
    assert done.returncode == 0, done.stdout + done.stderr
