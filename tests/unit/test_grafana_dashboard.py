"""The Grafana dashboard is a well-formed, importable JSON model on a templated Prometheus data
source, covers what issue 16 lists, and queries only metrics, labels and label values that
Tessera's Metrics registry exports (the live /metrics check is tests/e2e/test_observability.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from scheduler.kube.informers import SCHEDULER_KINDS
from scheduler.kube.metrics import Metrics
from scheduler.sim import builders as b
from tests.helpers import gpu_counts_of
from tests import dashboard as dash
from tests.unit.test_prometheus_rules import promtool_binary

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
    # a deposed or paused leader's read-back of a pod the new leader bound the same way (the
    # trial's item 5): a conflict, no success of its own
    assert "another leader" in shown["conflict"] and "binder.bound_by_other" in panel["description"]
    assert "TesseraBindingErrors" in shown["error"] and "retried" in shown["error"]
    # a pod another writer changed since its decision, decided again at once: shown, as no error
    assert "not an error" in shown["outdated"] and "pod changed" in shown["outdated"]
    assert "pod changed" not in shown["error"] or "5 times" in shown["error"]
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


def test_every_query_reads_the_one_install_the_namespace_variable_chooses() -> None:
    """Every release scrapes as the one job (the Service's name), so with two installs in two
    namespaces the panels summed both: "Leaders" showed 2, pending pods and GPUs combined the two.
    A `namespace` variable, the namespaces of `tessera_leader` under the chosen job, picks one
    install (one value, no "All": two installs' leaders summed are not one leader), and every
    selector of every panel reads `namespace=~"$namespace|"`: the chosen install, and series
    without a namespace label (a scrape config that sets none), where the variable has no value
    and the matcher is `=~"|"`."""
    board = dash.load()
    variables = board["templating"]["list"]
    names = [v["name"] for v in variables]
    assert "namespace" in names and names.index("job") < names.index("namespace"), names
    namespace = variables[names.index("namespace")]
    assert namespace["type"] == "query" and namespace["datasource"] == DATASOURCE
    assert namespace["query"]["query"] == namespace["definition"] == 'label_values(tessera_leader{job=~"$job"}, namespace)'
    assert not namespace["multi"] and not namespace["includeAll"] and "allValue" not in namespace
    assert namespace["refresh"] == 2  # on time range change, as job: an install added shows up
    defined = {name: "x" for name in names} | {"__rate_interval": "2m"}
    for expr in dash.queries(board):
        dash.interpolate(expr, defined)  # a KeyError: a variable the dashboard does not define
    for panel in dash.panels(board):
        for target in panel.get("targets", []):
            for selector in dash.parse(target["expr"]).selectors:
                assert ("job", "=~", "$job") in selector.matchers, (panel["title"], target["expr"])
                assert ("namespace", "=~", "$namespace|") in selector.matchers, (panel["title"], target["expr"])


OTHER = "tessera-b"  # a second install's namespace


def _dashboard_series(namespace: str | None) -> list[dict[str, str]]:
    """One scrape of an install: in `tessera-system` two replicas (the leader, a standby with its
    own numbers) with 3 pods pending and 2 of 4 GPUs in use; in `tessera-b` one replica, the leader,
    5 pending, 8 of 8 GPUs in use and a silent node agent. `namespace` None: the scrape config sets
    no namespace label (tessera-system's series only)."""
    installs = {"tessera-system": [("10.0.0.1:10259", 1, 3, (2, 2), 0), ("10.0.0.2:10259", 0, 0, (2, 2), 0)],
                OTHER: [("10.0.1.1:10259", 1, 5, (8, 0), 1)]}
    series: list[dict[str, str]] = []
    for ns, replicas in installs.items():
        if namespace is None and ns != "tessera-system":
            continue
        for instance, leads, pending, (whole, free), silent in replicas:
            target = f'job="tessera-scheduler-metrics", instance="{instance}"'
            if namespace is not None:
                target += f', namespace="{ns}"'
            for metric, value in [("tessera_leader", leads), ('scheduler_pending_pods{queue="active"', pending),
                                  ('tessera_devices{state="whole"', whole), ('tessera_devices{state="free"', free),
                                  ("tessera_node_agents_silent", silent)]:
                name, brace, labels = metric.partition("{")
                selector = f"{name}{{{labels}, {target}}}" if brace else f"{name}{{{target}}}"
                series.append({"series": selector, "values": " ".join([str(value)] * 10)})
    return series


@pytest.mark.parametrize(("namespace", "expected"), [
    ("tessera-system", {"Leaders": 1, "Pending pods": 3, "GPUs in use": 0.5, "Silent node agents": 0}),
    (OTHER, {"Leaders": 1, "Pending pods": 5, "GPUs in use": 1, "Silent node agents": 1}),
    (None, {"Leaders": 1, "Pending pods": 3, "GPUs in use": 0.5, "Silent node agents": 0}),
])
def test_two_installs_under_one_job_are_shown_apart_and_series_without_a_namespace_still_show(
        tmp_path: Path, namespace: str | None, expected: dict[str, float]) -> None:
    """The panels' PromQL, as Grafana interpolates it (job "All": its allValue; namespace: the one
    chosen, or no value where no series has the label), evaluated by Prometheus' engine (promtool)
    over two installs scraped under the one job: each install's numbers, not their sum (Leaders
    read 2 before); and over a scrape config without a namespace label: the one install's."""
    board = dash.load()
    values = {"job": ".+", "namespace": namespace or "", "__rate_interval": "2m"}
    tests = []
    for title, value in expected.items():
        [panel] = [p for p in dash.panels(board) if p.get("title") == title]
        [target] = panel["targets"]
        tests.append({"expr": dash.interpolate(target["expr"], values), "eval_time": "2m",
                      "exp_samples": [{"labels": "{}", "value": value}]})
    (tmp_path / "test.yaml").write_text(yaml.safe_dump({"rule_files": [], "evaluation_interval": "30s", "tests": [
        {"interval": "30s", "input_series": _dashboard_series(namespace), "promql_expr_test": tests}]}))
    done = subprocess.run([str(promtool_binary()), "test", "rules", "test.yaml"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_interpolate_replaces_every_variable_form_and_refuses_an_unknown_one() -> None:
    values = {"job": ".+", "namespace": "", "__rate_interval": "2m"}
    assert dash.interpolate('rate(a{job=~"$job", namespace=~"${namespace}|"}[$__rate_interval])', values) == \
        'rate(a{job=~".+", namespace=~"|"}[2m])'
    assert dash.interpolate('a{job=~"[[job]]"}', values) == 'a{job=~".+"}'
    with pytest.raises(KeyError):
        dash.interpolate('a{x="$other"}', values)


def test_every_query_as_grafana_sends_it_is_promql_prometheus_reads(tmp_path: Path) -> None:
    """Prometheus' own parser (`promtool check rules`, each query a recording rule) reads every
    panel's and variable's query once interpolated, with a namespace chosen and with none (the
    matcher `=~"|"`)."""
    exprs = dash.queries(dash.load())
    rules = [{"record": f"dashboard:query{i}:{j}", "expr": dash.interpolate(expr, values)}
             for i, values in enumerate([{"datasource": "p", "job": ".+", "namespace": ns, "__rate_interval": "2m"}
                                         for ns in ("tessera-system", "")])
             for j, expr in enumerate(exprs)]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    done = subprocess.run([str(promtool_binary()), "check", "rules", "rules.yaml"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rules)} rules found" in done.stdout, done.stdout
