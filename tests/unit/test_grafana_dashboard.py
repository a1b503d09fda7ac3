"""The Grafana dashboard is a well-formed, importable JSON model on a templated Prometheus data
source, covers what issue 16 lists, and queries only metrics, labels and label values that
Tessera's Metrics registry exports (the live /metrics check is tests/e2e/test_observability.py)."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from scheduler.kube.informers import SCHEDULER_KINDS
from scheduler.kube.metrics import Metrics
from scheduler.sim import builders as b
from tests.helpers import gpu_counts_of
from tests import dashboard as dash

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def exported_samples() -> dash.Samples:
    """Every series a scheduler exports once it has done each kind of thing once."""
    m = Metrics(profiles=["tessera"])
    m.observe_attempt("scheduled", "tessera", 0.01)
    m.observe_algorithm(0.005)
    m.observe_pod_scheduled(1, 0.5)
    m.observe_binding("success", 0.01)
    m.set_gpus(gpu_counts_of(b.node("n", gpus=4), *(b.device("n", i, "A100") for i in range(4)),
                        b.pod("p", node_name="n", phase="Running", limits={"nvidia.com/gpu": 1})))
    m.set_unschedulable_pods({("NodeResourcesFit", "tessera"): 1})
    m.set_leader(True)
    m.set_informer_synced("Pod", True)
    for kind in SCHEDULER_KINDS:  # both reasons of every kind the scheduler watches, 0 while read
        m.set_informer_unavailable(kind.label, None)
    m.count_conflicting_writes("tessera-system/tessera", 1)
    samples: dash.Samples = {}
    for family in text_string_to_metric_families(generate_latest(m.registry).decode()):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append(dict(sample.labels))
    return samples


def test_every_query_names_exported_metrics_labels_and_values() -> None:
    assert dash.problems(dash.load(), exported_samples()) == []


def test_a_renamed_metric_label_or_value_is_caught() -> None:
    samples = exported_samples()
    board = dash.load()
    broken = {**samples, "tessera_devices_by_model": [{"gpu_model": "A100", "state": "free"}]}
    assert any("no label 'model'" in p or "grouping label 'model'" in p for p in dash.problems(board, broken))
    assert any("tessera_bindings_total: no such series" in p
               for p in dash.problems(board, {k: v for k, v in samples.items() if k != "tessera_bindings_total"}))
    board["panels"][1]["targets"][0]["expr"] = 'sum(rate(scheduler_schedule_attempts_total{result="placed"}[5m]))'
    assert any("no result='placed'" in p for p in dash.problems(board, samples))


def test_the_dashboard_covers_issue_16() -> None:
    queried = {s.metric for expr in dash.queries(dash.load()) for s in dash.parse(expr).selectors}
    assert {
        "scheduler_schedule_attempts_total",  # scheduling rate
        "scheduler_scheduling_attempt_duration_seconds_bucket",  # and latency
        "scheduler_pod_scheduling_sli_duration_seconds_bucket",
        "scheduler_scheduling_algorithm_duration_seconds_bucket",
        "scheduler_pending_pods",  # pending pods by queue
        "tessera_devices_by_model",  # GPU allocation by model
        "tessera_devices",  # devices by state
        "scheduler_podgroup_schedule_attempts_total",  # gang outcomes, as kube-scheduler's pod group cycle
        "tessera_bindings_total",  # bind errors
        "tessera_leader",  # leader
        "scheduler_unschedulable_pods",  # why pods wait
        "tessera_pods_waiting_for_allocation",  # placed, Binding held by the allocation gate
    } <= queried


def test_panels_use_the_templated_prometheus_datasource_and_fit_the_grid() -> None:
    board = dash.load()
    assert board["uid"] and board["title"] and board["schemaVersion"] >= 36
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert variables["job"]["datasource"] == DATASOURCE
    ids = [panel["id"] for panel in dash.panels(board)]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in dash.panels(board):
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["w"] > 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        mine = {(x, y) for x in range(grid["x"], grid["x"] + grid["w"]) for y in range(grid["y"], grid["y"] + grid["h"])}
        assert not mine & cells, f"{panel['title']} overlaps another panel"
        cells |= mine
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == DATASOURCE and panel.get("description"), panel["title"]
        assert panel["targets"] and len({t["refId"] for t in panel["targets"]}) == len(panel["targets"])
        assert all(t["datasource"] == DATASOURCE for t in panel["targets"]), panel["title"]


@pytest.mark.parametrize(("expr", "metrics", "grouping"), [
    ('sum by (le) (rate(a_bucket{x="1"}[$__rate_interval]))', ["a_bucket"], {"le"}),
    ("sum(rate(a[5m])) by (instance) / on (job) group_left (pod) b offset 1h", ["a", "b"], {"instance", "job", "pod"}),
    ('max_over_time(a{s=~"x|y", t!="{}"}[1h30m:1m]) > bool 0.5e3', ["a"], set()),
    ('{__name__="a", l="v"} # a comment with b_total', ["a"], set()),
    ('topk(3, sum without ("l") (a)) and ignoring(i) c', ["a", "c"], {"l", "i"}),
])
def test_promql_reader(expr: str, metrics: list[str], grouping: set[str]) -> None:
    query = dash.parse(expr)
    assert [s.metric for s in query.selectors] == metrics
    assert query.grouping == grouping


def test_promql_reader_refuses_what_it_does_not_know() -> None:
    with pytest.raises(ValueError, match="unknown PromQL function"):
        dash.parse("rates(a[5m])")
    with pytest.raises(ValueError, match="without a metric name"):
        dash.parse('{l="v"}')
    with pytest.raises(ValueError, match="cannot read PromQL"):
        dash.parse("a ? b")


def test_the_binding_errors_panel_shows_each_failed_outcome_under_its_own_name() -> None:
    """The panel read result="error" only, under the legend "refused" (which an error is not
    always: a pod changed since the decision is one too): a Binding answered 409 (the pod bound
    elsewhere: `conflict`, dropped) no longer showed, and a pod deleted while its
    Binding was out (`not_found`, dropped) never did. It shows every outcome of
    tessera_bindings_total but success, one series each under a legend that says what it is, and
    the one TesseraBindingErrors alerts on (`error`, refused and retried) says so."""
    from scheduler.kube.metrics import BINDING_RESULTS

    [panel] = [p for p in dash.panels(dash.load()) if p.get("title") == "Binding errors"]
    shown: dict[str, str] = {}
    for target in panel["targets"]:
        [selector] = dash.parse(target["expr"]).selectors
        assert selector.metric == "tessera_bindings_total"
        [(label, op, value)] = [m for m in selector.matchers if m[0] == "result"]
        assert op == "=", target["expr"]
        shown[value] = target["legendFormat"]
    assert set(shown) == set(BINDING_RESULTS) - {"success"}
    assert "bound elsewhere" in shown["conflict"] and "deleted" in shown["not_found"]
    assert "TesseraBindingErrors" in shown["error"] and "retried" in shown["error"]
    assert len(set(shown.values())) == len(shown)
    description = panel["description"]
    assert all(result in description for result in shown), description


def test_silent_node_agents_have_a_panel_beside_the_gpu_states() -> None:
    """TesseraNodeAgentSilent had no panel: tessera_node_agents_silent (the leader's count, as the
    GPU states) is shown in the GPUs row, beside GPUs by state."""
    board = dash.load()
    rows = [p for p in board["panels"] if p["type"] == "row"]
    gpus_row = next(r for r in rows if r["title"] == "GPUs")
    after = min((r["gridPos"]["y"] for r in rows if r["gridPos"]["y"] > gpus_row["gridPos"]["y"]), default=10**6)
    [panel] = [p for p in dash.panels(board)
               if any("tessera_node_agents_silent" in t["expr"] for t in p.get("targets", []))]
    [by_state] = [p for p in dash.panels(board) if p.get("title") == "GPUs by state"]
    assert gpus_row["gridPos"]["y"] < panel["gridPos"]["y"] < after, panel["gridPos"]
    assert panel["gridPos"]["y"] == by_state["gridPos"]["y"], (panel["gridPos"], by_state["gridPos"])
    [target] = panel["targets"]
    assert "tessera_leader" in target["expr"] and "== 1" in target["expr"], target["expr"]
    assert "TesseraNodeAgentSilent" in panel["description"] and "kubectl tessera nodes" in panel["description"]


def test_the_dashboard_shows_what_holds_a_leader_that_schedules_nothing() -> None:
    """A stuck term fence reads 0 pending pods in every queue, and an unsynced informer keeps a
    replica from leading: each has a panel, as each has an alert."""
    queried = {s.metric for expr in dash.queries(dash.load()) for s in dash.parse(expr).selectors}
    assert {"tessera_leader_fence_pending_pods", "tessera_informer_synced"} <= queried
