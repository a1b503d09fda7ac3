"""Every exported metric against its rulebook: the `scheduler_*` ones against kube-scheduler
v1.36.3's definitions (transcribed from k/k pkg/scheduler/metrics/metrics.go, so a drift in type,
label names, stability or buckets fails here), Tessera's own against Prometheus' naming
conventions (https://prometheus.io/docs/practices/naming/: base units, the unit as suffix,
`_total` only on counters), and the documented metrics list (docs/running.md, "Probes and metrics")
against what is exported."""

from __future__ import annotations

import math
import re
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from scheduler.kube.metrics import Metrics, exponential_buckets
from scheduler.sim import builders as b
from tests.helpers import gpu_counts_of

METRICS_DOC = Path(__file__).resolve().parents[2] / "docs" / "running.md"

# name: (type, label names, stability, buckets or None) as metrics.go InitMetrics defines them
UPSTREAM = {
    "scheduler_schedule_attempts": ("counter", ("result", "profile"), "STABLE", None),
    "scheduler_scheduling_attempt_duration_seconds": ("histogram", ("result", "profile"), "STABLE",
                                                      exponential_buckets(0.001, 2, 15)),
    "scheduler_scheduling_algorithm_duration_seconds": ("histogram", (), "ALPHA", exponential_buckets(0.001, 2, 15)),
    "scheduler_pending_pods": ("gauge", ("queue",), "STABLE", None),
    "scheduler_pod_scheduling_sli_duration_seconds": ("histogram", ("attempts",), "BETA",
                                                      exponential_buckets(0.01, 2, 20)),
    "scheduler_pod_scheduling_attempts": ("histogram", (), "STABLE", exponential_buckets(1, 2, 5)),
    "scheduler_queue_incoming_pods": ("counter", ("queue", "event"), "STABLE", None),
    "scheduler_preemption_attempts": ("counter", (), "STABLE", None),
    "scheduler_preemption_victims": ("histogram", (), "STABLE", exponential_buckets(1, 2, 7)),
    "scheduler_unschedulable_pods": ("gauge", ("plugin", "profile"), "BETA", None),
    "scheduler_permit_wait_duration_seconds": ("histogram", ("result",), "BETA", exponential_buckets(0.001, 2, 15)),
    "scheduler_goroutines": ("gauge", ("operation",), "BETA", None),
    "scheduler_cache_size": ("gauge", ("type",), "ALPHA", None),
    "scheduler_framework_extension_point_duration_seconds": ("histogram", ("extension_point", "status", "profile"),
                                                             "STABLE", exponential_buckets(0.0001, 2, 12)),
    "scheduler_plugin_execution_duration_seconds": ("histogram", ("plugin", "extension_point", "status"), "ALPHA",
                                                    exponential_buckets(0.00001, 1.5, 20)),
    # the pod group cycle's (metrics.go, "only available when the GenericWorkload feature gate is enabled")
    "scheduler_podgroup_schedule_attempts": ("counter", ("result", "profile"), "ALPHA", None),
    "scheduler_podgroup_scheduling_attempt_duration_seconds": ("histogram", ("result", "profile"), "ALPHA",
                                                               exponential_buckets(0.001, 2, 15)),
    "scheduler_podgroup_scheduling_algorithm_duration_seconds": ("histogram", (), "ALPHA",
                                                                 exponential_buckets(0.001, 2, 15)),
    # client-go's REST client, component-base metrics/prometheus/restclient
    "rest_client_requests": ("counter", ("code", "method", "host"), "ALPHA", None),
    # client-go leader election, component-base metrics/prometheus/clientgo/leaderelection
    "leader_election_master_status": ("gauge", ("name",), "ALPHA", None),
    "leader_election_slowpath": ("counter", ("name",), "ALPHA", None),
}


def _exercised() -> Metrics:
    """A registry in which every metric has at least one series."""
    m = Metrics(profiles=["tessera"])
    m.observe_attempt("scheduled", "tessera", 0.01)
    m.observe_algorithm(0.005)
    m.observe_pod_scheduled(1, 0.5)
    m.observe_preemption(2)
    m.pod_incoming("active", "UnschedulablePodAdd")
    m.set_unschedulable_pods({("NodeResourcesFit", "tessera"): 1})
    m.observe_binding("success", 0.01)
    m.count_relists("Pod", 0)
    m.set_informer_synced("Pod", True)
    m.set_informer_relist_pending("Pod", False)
    m.set_informer_unavailable("PodDisruptionBudget", "forbidden")
    m.set_gpus(gpu_counts_of(b.node("n", gpus=1), b.device("n", 0, "A100")))
    m.observe_pod_group_attempt("scheduled", "tessera", 0.01)
    m.observe_pod_group_algorithm(0.005)
    m.count_slow_renewals(1)
    m.count_conflicting_writes("tessera-system/tessera", 1)
    m.observe_permit_wait("Success", 0.2)
    m.observe_extension_point("Filter", "Success", "tessera", 0.001)
    m.observe_plugin("NodeResourcesFit", "Filter", "Unschedulable", 0.0001)
    m.count_request("200", "GET", "10.0.0.1:6443")
    return m


def _families(m: Metrics) -> dict[str, Metric]:
    return {f.name: f for f in text_string_to_metric_families(generate_latest(m.registry).decode())}


def test_the_upstream_metrics_are_defined_as_kube_scheduler_defines_them() -> None:
    families = _families(_exercised())
    # process_* and python_info: prometheus-client's process and platform collectors (client_golang's
    # process collector's names), not kube-scheduler's definitions
    exported_upstream = {name for name in families if not name.startswith(("tessera_", "process_", "python_"))}
    assert exported_upstream == set(UPSTREAM), "a scheduler_* metric with no transcribed upstream definition"
    for name, (kind, labels, stability, buckets) in UPSTREAM.items():
        family = families[name]
        assert family.type == kind, name
        assert family.documentation.startswith(f"[{stability}] "), name
        samples = family.samples
        names = {label for s in samples for label in s.labels if label != "le"}
        assert names == set(labels), (name, names)
        if buckets is not None:
            bounds = sorted({float(s.labels["le"]) for s in samples if s.name.endswith("_bucket")})
            assert bounds[:-1] == list(buckets) and math.isinf(bounds[-1]), name


def test_tessera_metrics_follow_the_prometheus_naming_conventions() -> None:
    families = _families(_exercised())
    own = {name: f for name, f in families.items() if name.startswith("tessera_")}
    assert own
    for name, family in own.items():
        kind = family.type
        sample_names = {s.name for s in family.samples}
        assert re.fullmatch(r"tessera_[a-z][a-z0-9_]*", name), name
        if kind == "counter":
            assert sample_names == {f"{name}_total"}, (name, sample_names)
        else:
            assert not any(n.endswith("_total") for n in sample_names), f"{name}: _total on a {kind}"
        # base units, spelled out as the suffix: seconds (not ms), bytes
        assert not re.search(r"_(ms|milliseconds|minutes|hours|kb|mb|gb|kib|mib|gib)(_|$)", name), name
        if re.search(r"duration|latency|time", name):
            assert name.endswith("_seconds"), f"{name}: a time without its unit"
        assert family.documentation and not family.documentation.startswith("["), name


def test_the_docs_list_every_exported_metric() -> None:
    text = METRICS_DOC.read_text()
    listed = set(re.findall(r"`((?:scheduler|tessera|leader_election|rest_client|process|python)_[a-z_]+)(?:\{[^}`]*\})?`", text))
    families = _families(_exercised())
    exposed = {f"{name}_total" if f.type == "counter" else name for name, f in families.items()}
    assert exposed - listed == set(), "exported but not in docs/running.md"
