"""Prometheus metrics: kube-scheduler's names where a metric exists upstream, `tessera_*` otherwise.

Why kube-scheduler's names: dashboards and alerts written for the default scheduler
(`scheduler_schedule_attempts_total`, `scheduler_pending_pods`, the SLI histogram, …) then work
for Tessera unchanged, selected by `job`. Names, label names, label values, buckets and help texts
follow k/k `pkg/scheduler/metrics/metrics.go` and `profile_metrics.go`; help texts carry the
`[STABLE]` / `[BETA]` / `[ALPHA]` prefix that component-base adds to every registered metric,
so `# HELP` lines read the same as kube-scheduler's own.

Why a `Metrics` object rather than module-level globals: one private `CollectorRegistry` per
scheduler instance keeps tests independent (no "Duplicated timeseries" when two loops run in one
process); the loop calls small typed methods and never touches prometheus objects. The registry
has its own process and platform collectors: `process_*` (start time, resident memory, CPU
seconds, open file descriptors), as kube-scheduler's client_golang process collector exports them,
and `python_info` (kube-scheduler's `go_info`'s counterpart).

Why the exposed registry filters `*_created` samples: prometheus-client adds a `_created` series
to every counter and histogram; kube-scheduler (Go client) has none, and we want the same series.
The filter is per registry, unlike prometheus-client's process-wide `disable_created_metrics()`.
"""

from __future__ import annotations

import time
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Mapping
from typing import Literal

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, PlatformCollector, ProcessCollector
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from scheduler.build_info import BuildInfo
from scheduler.core.framework.timing import Code, ExtensionPoint
from scheduler.kube.informers import UNAVAILABLE_REASONS, Unavailable
from scheduler.view import model as view_model


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """component-base `metrics.ExponentialBuckets(start, factor, count)`."""
    return tuple(start * factor**i for i in range(count))


AttemptResult = Literal["scheduled", "unschedulable", "error"]
# a pod group cycle's (metrics.go ScheduledResult, UnschedulableResult, WaitingOnPreemptionResult, ErrorResult)
PodGroupResult = Literal["scheduled", "unschedulable", "waiting_on_preemption", "error"]
Queue = Literal["active", "backoff", "unschedulable", "gated"]
# "outdated": refused because another writer changed the pod since it was decided, and decided
# again at once (not an error; more than REDECIDED_AT_ONCE in a row back off and count "error");
# "given_up": this replica stopped leading, so the Binding was not sent (or was withdrawn): the
# leadership machinery at a failover, not an error
BindingResult = Literal["success", "conflict", "not_found", "error", "outdated", "given_up"]

ATTEMPT_RESULTS: tuple[AttemptResult, ...] = ("scheduled", "unschedulable", "error")
POD_GROUP_RESULTS: tuple[PodGroupResult, ...] = ("scheduled", "unschedulable", "waiting_on_preemption", "error")
PENDING_QUEUES: tuple[Queue, ...] = ("active", "backoff", "unschedulable", "gated")
CACHE_TYPES = ("nodes", "pods", "assumed_pods")
# the GPU states of `kubectl tessera nodes` and the GPU map, one list for the views and the metric
GPU_STATES: tuple[str, ...] = view_model.STATES
BINDING_RESULTS: tuple[BindingResult, ...] = ("success", "conflict", "not_found", "error", "outdated", "given_up")

SCHEDULING_ATTEMPT_BUCKETS = exponential_buckets(0.001, 2, 15)
POD_SCHEDULING_SLI_BUCKETS = exponential_buckets(0.01, 2, 20)
POD_SCHEDULING_ATTEMPTS_BUCKETS = exponential_buckets(1, 2, 5)  # 1, 2, 4, 8, 16
PREEMPTION_VICTIMS_BUCKETS = exponential_buckets(1, 2, 7)  # 1 .. 64, as metrics.go
EXTENSION_POINT_BUCKETS = exponential_buckets(0.0001, 2, 12)  # 0.1 ms .. ~200 ms, as metrics.go
PLUGIN_EXECUTION_BUCKETS = exponential_buckets(0.00001, 1.5, 20)  # 0.01 ms .. ~22 ms, as metrics.go
PLUGIN_METRICS_SAMPLE_PERCENT = 10  # schedule_one.go pluginMetricsSamplePercent


def attempts_label(attempts: int) -> str:
    """k/k `schedule_one.go` `getAttemptsLabel`: the count, capped at "15+" to bound cardinality."""
    return "15+" if attempts >= 15 else str(attempts)


class _WithoutCreated(Collector):
    """Re-exposes a registry's families without prometheus-client's `*_created` samples, after
    running the scrape hook (see `Metrics.on_scrape`)."""

    def __init__(self, inner: CollectorRegistry, before: Callable[[], None]) -> None:
        self._inner = inner
        self._before = before

    def collect(self) -> Iterable[Metric]:
        self._before()
        for family in self._inner.collect():
            family.samples = [s for s in family.samples if not s.name.endswith("_created")]
            yield family

    def describe(self) -> Iterable[Metric]:
        return self.collect()


class Metrics:
    """Every metric Tessera exports, with one method per thing the scheduler observes.

    ``registry`` is what `/metrics` serves. ``profiles`` pre-creates the per-profile series at 0
    so rates and absent-series alerts work from the first scrape; ``lease_name`` is the `name`
    label of client-go's `leader_election_master_status`; ``build`` and ``config_digest`` are
    the constant `tessera_build_info` and `tessera_config_info` series (left out when not given).
    """

    def __init__(self, *, profiles: Iterable[str] = (), lease_name: str = "tessera", build: BuildInfo | None = None,
                 config_digest: str | None = None) -> None:
        self._source = CollectorRegistry()
        self._scrape_hooks: list[Callable[[], None]] = []
        self.registry = CollectorRegistry()
        self.registry.register(_WithoutCreated(self._source, self._before_scrape))
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        self.lease_name = lease_name
        self._relists: dict[str, int] = {}  # kind -> relists counted so far
        self._conflicting: dict[str, int] = {}  # other Lease -> its writes counted so far
        self._unschedulable_seen: set[tuple[str, str]] = set()  # (plugin, profile) series exported
        self._slow_renewals = 0  # slow-path renewals counted so far
        r = self._source

        # --- kube-scheduler (k/k pkg/scheduler/metrics/metrics.go) ---
        self.schedule_attempts = Counter(
            "scheduler_schedule_attempts_total",
            "[STABLE] Number of attempts to schedule pods, by the result. 'unschedulable' means a pod "
            "could not be scheduled, while 'error' means an internal scheduler problem.",
            ["result", "profile"], registry=r)
        self.scheduling_attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "[STABLE] Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ["result", "profile"], buckets=SCHEDULING_ATTEMPT_BUCKETS, registry=r)
        self.scheduling_algorithm_duration = Histogram(
            "scheduler_scheduling_algorithm_duration_seconds",
            "[ALPHA] Scheduling algorithm latency in seconds",
            buckets=SCHEDULING_ATTEMPT_BUCKETS, registry=r)
        self.pending_pods = Gauge(
            "scheduler_pending_pods",
            "[STABLE] Number of pending pods, by the queue type. 'active' means number of pods in activeQ; "
            "'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in "
            "unschedulablePods that the scheduler attempted to schedule and failed; 'gated' is the number "
            "of unschedulable pods that the scheduler never attempted to schedule because they are gated.",
            ["queue"], registry=r)
        self.pod_scheduling_sli_duration = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "[BETA] E2e latency for a pod being scheduled, from the time the pod enters the scheduling "
            "queue and might involve multiple scheduling attempts.",
            ["attempts"], buckets=POD_SCHEDULING_SLI_BUCKETS, registry=r)
        self.pod_scheduling_attempts = Histogram(
            "scheduler_pod_scheduling_attempts",
            "[STABLE] Number of attempts to successfully schedule a pod.",
            buckets=POD_SCHEDULING_ATTEMPTS_BUCKETS, registry=r)
        self.queue_incoming_pods = Counter(
            "scheduler_queue_incoming_pods_total",
            "[STABLE] Number of pods added to scheduling queues by event and queue type.",
            ["queue", "event"], registry=r)
        self.preemption_attempts = Counter(
            "scheduler_preemption_attempts_total",
            "[STABLE] Total preemption attempts in the cluster till now", registry=r)
        self.preemption_victims = Histogram(
            "scheduler_preemption_victims",
            "[STABLE] Number of selected preemption victims",
            buckets=PREEMPTION_VICTIMS_BUCKETS, registry=r)
        self.unschedulable_pods = Gauge(
            "scheduler_unschedulable_pods",
            "[BETA] The number of unschedulable pods broken down by plugin name. A pod will increment the gauge "
            "for all plugins that caused it to not schedule and so this metric have meaning only when broken "
            "down by plugin.",
            ["plugin", "profile"], registry=r)
        self.goroutines = Gauge(
            "scheduler_goroutines",
            "[BETA] Number of running goroutines split by the work they do such as binding.",
            ["operation"], registry=r)
        self.permit_wait_duration = Histogram(
            "scheduler_permit_wait_duration_seconds",
            "[BETA] Duration of waiting on permit.",
            ["result"], buckets=SCHEDULING_ATTEMPT_BUCKETS, registry=r)
        self.framework_extension_point_duration = Histogram(
            "scheduler_framework_extension_point_duration_seconds",
            "[STABLE] Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"], buckets=EXTENSION_POINT_BUCKETS, registry=r)
        self.plugin_execution_duration = Histogram(
            "scheduler_plugin_execution_duration_seconds",
            "[ALPHA] Duration for running a plugin at a specific extension point.",
            ["plugin", "extension_point", "status"], buckets=PLUGIN_EXECUTION_BUCKETS, registry=r)
        self.cache_size = Gauge(
            "scheduler_cache_size",
            "[ALPHA] Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
            ["type"], registry=r)

        # the pod group cycle's (metrics.go podGroupScheduleAttempts, podGroupSchedulingLatency,
        # PodGroupSchedulingAlgorithmLatency; upstream has them with the GenericWorkload gate): every
        # gang cycle, of a Workload API or a scheduler-plugins group
        self.podgroup_schedule_attempts = Counter(
            "scheduler_podgroup_schedule_attempts_total",
            "[ALPHA] Number of attempts to schedule pod group, by the result. 'unschedulable' means a pod group "
            "could not be scheduled, while 'error' means an internal scheduler problem.",
            ["result", "profile"], registry=r)
        self.podgroup_scheduling_attempt_duration = Histogram(
            "scheduler_podgroup_scheduling_attempt_duration_seconds",
            "[ALPHA] Pod group scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ["result", "profile"], buckets=SCHEDULING_ATTEMPT_BUCKETS, registry=r)
        self.podgroup_scheduling_algorithm_duration = Histogram(
            "scheduler_podgroup_scheduling_algorithm_duration_seconds",
            "[ALPHA] Pod group scheduling algorithm latency in seconds",
            buckets=SCHEDULING_ATTEMPT_BUCKETS, registry=r)

        # --- client-go's REST client (component-base metrics/prometheus/restclient) ---
        self.rest_client_requests = Counter(
            "rest_client_requests",
            "[ALPHA] Number of HTTP requests, partitioned by status code, method, and host.",
            ["code", "method", "host"], registry=r)

        # --- client-go leader election (component-base metrics/prometheus/clientgo/leaderelection) ---
        self.leader_election_master_status = Gauge(
            "leader_election_master_status",
            "[ALPHA] Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, "
            "1 indicates master. 'name' is the string used to identify the lease. Please make sure to "
            "group by name.",
            ["name"], registry=r)

        self.leader_election_slowpath = Counter(
            "leader_election_slowpath_total",
            "[ALPHA] Total number of slow path exercised in renewing leader leases. 'name' is the string used to "
            "identify the lease. Please make sure to group by name.",
            ["name"], registry=r)

        # --- Tessera ---
        self.devices = Gauge(
            "tessera_devices",
            "GPUs by the state kubectl tessera nodes shows them in (its summary's counts): in use are "
            "'whole', 'slices' (shared), 'counted' (a plain nvidia.com/gpu request), 'gated' (its Binding "
            "held by the allocation gate) and 'conflict' (claimed by more than one pod); 'free' takes new "
            "pods; unavailable are 'fenced' (an unreadable device annotation or no Node object), "
            "'unhealthy', 'cordoned' (the device's spec.unschedulable, or a free GPU of a cordoned node) "
            "and 'ghost' (its ExtendedResource deleted, still held).",
            ["state"], registry=r)
        self.devices_by_model = Gauge(
            "tessera_devices_by_model",
            "GPUs by their 'model' attribute (empty when they have none) and state, as tessera_devices: "
            "GPU allocation per model.",
            ["model", "state"], registry=r)
        self.gpus_overcommitted = Gauge(
            "tessera_gpus_overcommitted",
            "GPUs held beyond what their nodes have, summed over the nodes (pods of another scheduler "
            "that does not count the GPUs Tessera's classes gave out, a pod bound with spec.nodeName, or "
            "allocatable shrunk under its pods); kubectl tessera nodes notes each node's 'overcommitted: N in use, M allocatable'.",
            registry=r)
        self.waiting_for_allocation = Gauge(
            "tessera_pods_waiting_for_allocation",
            "Pods placed whose Binding the allocation gate holds until the node agent has allocated the devices "
            "of an earlier pod on the node (reason WaitingForAllocation). Not in scheduler_pending_pods: like "
            "kube-scheduler's pods waiting on Permit, they are past the queue.",
            registry=r)
        self.agents_silent = Gauge(
            "tessera_node_agents_silent",
            "Schedulable (uncordoned) nodes whose node agent heartbeated (its ExtendedResources' "
            "status.lastHeartbeatTime) but not within agentHeartbeatTimeoutSeconds: stopped or cut off. Their GPUs' health is what it last published, the "
            "allocation gate no longer holds there, and pods bound there stay tessera.dev/phase: Allocating; "
            "kubectl tessera nodes names them (REASON 'node agent silent').",
            registry=r)
        self.bindings = Counter(
            "tessera_bindings_total",
            "Binding requests by outcome: 'conflict' is bound elsewhere, bound by another leader's Binding or "
            "being deleted (read back after a 409 or an unclear answer), 'not_found' is 404 (pod gone), 'error' is anything retried with backoff, 'outdated' a refusal because another writer "
            "changed the pod since it was decided, decided again at once (not an error; more than 5 such in a "
            "row back off and count as 'error'), 'given_up' a Binding not sent (or withdrawn) because this replica "
            "stopped leading (a failover, not an error).",
            ["result"], registry=r)
        self.binding_duration = Histogram(
            "tessera_binding_duration_seconds",
            "Latency of one Binding request (POST pods/binding), in seconds.",
            buckets=SCHEDULING_ATTEMPT_BUCKETS, registry=r)
        self.leader = Gauge(
            "tessera_leader",
            "1 while this instance holds the leader Lease and schedules, 0 while it is a standby.",
            registry=r)
        self.leader_fence_pending = Gauge(
            "tessera_leader_fence_pending_pods",
            "Pods the leader still has to write its term fence onto before it schedules again (its "
            "writes to them failed; retried with backoff); 0 once fenced, and on a standby.",
            registry=r)
        self.conflicting_writes = Counter(
            "tessera_conflicting_scheduler_writes_total",
            "Pods that the leader watched another Tessera, leading on another Lease ('lease'), bind or fence "
            "(of its scheduler names; of other names, bind): two installs on the same GPU nodes, which can give "
            "one GPU to two pods.",
            ["lease"], registry=r)
        self.informer_relists = Counter(
            "tessera_informer_relists_total",
            "Full re-lists by informer kind (the watch expired with 410 Gone or broke).",
            ["kind"], registry=r)
        self.informer_synced = Gauge(
            "tessera_informer_synced",
            "1 once the informer of this kind has delivered its initial list, else 0.",
            ["kind"], registry=r)
        self.informer_relist_pending = Gauge(
            "tessera_informer_relist_pending",
            "1 while the informer of this kind must list again (its watch ended with 410 Gone, e.g. after an "
            "apiserver restart) and that LIST has not been delivered yet (waiting its backoff, or failing): "
            "its view of the kind is stale meanwhile, though tessera_informer_synced stays 1; else 0.",
            ["kind"], registry=r)
        self.informer_unavailable = Gauge(
            "tessera_informer_unavailable",
            "1 while the informer of this kind treats it as empty (and counts as synced) because the "
            "scheduler's role may not read it (reason 'forbidden', an optional kind: PodDisruptionBudget, "
            "PriorityClass) or the apiserver does not serve it (reason 'not_served': a CRD not installed, "
            "an alpha API off) or, for a kind already empty, rejects the scheduler's credentials (reason "
            "'unauthorized': HTTP 401), else 0; the reason is the latest answer's. Retried every 30 s.",
            ["kind", "reason"], registry=r)

        # --- which code and configuration this process runs (kube-scheduler: kubernetes_build_info) ---
        if build is not None:
            labels = build.labels()
            Gauge("tessera_build_info",
                  "A metric with a constant '1' value labeled by the version, git commit and git tree state "
                  "Tessera was built from, the Python version and the platform it runs on.",
                  list(labels), registry=r).labels(**labels).set(1)
        if config_digest is not None:
            Gauge("tessera_config_info",
                  "A metric with a constant '1' value labeled by the digest of the effective configuration "
                  "(the first 12 hex digits of the SHA-256 of its canonical JSON, as /configz shows it).",
                  ["digest"], registry=r).labels(digest=config_digest).set(1)

        for queue in PENDING_QUEUES:
            self.pending_pods.labels(queue=queue).set(0)
        self.goroutines.labels(operation="binding").set(0)
        for cache_type in CACHE_TYPES:
            self.cache_size.labels(type=cache_type).set(0)
        for state in GPU_STATES:
            self.devices.labels(state=state).set(0)
        for binding_result in BINDING_RESULTS:
            self.bindings.labels(result=binding_result)
        for profile in profiles:
            for result in ATTEMPT_RESULTS:
                self.schedule_attempts.labels(result=result, profile=profile)
            for group_result in POD_GROUP_RESULTS:
                self.podgroup_schedule_attempts.labels(result=group_result, profile=profile)
        self.set_leader(False)

    def on_scrape(self, hook: Callable[[], None]) -> None:
        """Run ``hook`` at the start of every scrape, to set gauges that mirror state (cache size,
        devices, informer sync) from that state as it is now: a periodic refresh would show a
        scraper stale values, e.g. informers unsynced and no nodes after /readyz already said ready."""
        self._scrape_hooks.append(hook)

    def _before_scrape(self) -> None:
        for hook in self._scrape_hooks:
            hook()

    # --- scheduling ----------------------------------------------------------------------------

    def observe_attempt(self, result: AttemptResult, profile: str, seconds: float) -> None:
        """One scheduling attempt (`PodScheduled` / `PodUnschedulable` / `PodScheduleError`)."""
        self.schedule_attempts.labels(result=result, profile=profile).inc()
        self.scheduling_attempt_duration.labels(result=result, profile=profile).observe(seconds)

    def observe_algorithm(self, seconds: float) -> None:
        """One attempt's scheduling cycle up to its decision (schedule_one.go schedulingAlgorithm:
        filter, score and a PostFilter run), without its Binding."""
        self.scheduling_algorithm_duration.observe(seconds)

    def observe_pod_group_attempt(self, result: PodGroupResult, profile: str, seconds: float) -> None:
        """One gang's scheduling cycle (`PodGroupScheduled` / `PodGroupUnschedulable` /
        `PodGroupWaitingOnPreemption` / `PodGroupScheduleError`)."""
        self.podgroup_schedule_attempts.labels(result=result, profile=profile).inc()
        self.podgroup_scheduling_attempt_duration.labels(result=result, profile=profile).observe(seconds)

    def observe_pod_group_algorithm(self, seconds: float) -> None:
        """One gang cycle's algorithm (`PodGroupSchedulingAlgorithmLatency`)."""
        self.podgroup_scheduling_algorithm_duration.observe(seconds)

    def observe_pod_scheduled(self, attempts: int, seconds_since_first_queued: float) -> None:
        """A pod was bound: the SLI duration (from first entering the queue) and its attempt count."""
        self.pod_scheduling_sli_duration.labels(attempts=attempts_label(attempts)).observe(seconds_since_first_queued)
        self.pod_scheduling_attempts.observe(attempts)

    def set_pending(self, counts: Mapping[str, int]) -> None:
        """`scheduler_pending_pods` for the queues given; queues left out keep their value."""
        for queue, count in counts.items():
            self.pending_pods.labels(queue=queue).set(count)

    def pod_incoming(self, queue: str, event: str, count: int = 1) -> None:
        """Pods entering a queue (`active`, `backoff`, `unschedulable`), by the event that moved
        them (`UnschedulablePodAdd`, `NodeAdd`, `AssignedPodAdd`, `ScheduleAttemptFailure`,
        `BackoffComplete`, `UnschedulableTimeout`, …)."""
        self.queue_incoming_pods.labels(queue=queue, event=event).inc(count)

    def set_cache_size(self, *, nodes: int, pods: int, assumed_pods: int) -> None:
        self.cache_size.labels(type="nodes").set(nodes)
        self.cache_size.labels(type="pods").set(pods)
        self.cache_size.labels(type="assumed_pods").set(assumed_pods)

    def set_unschedulable_pods(self, counts: Mapping[tuple[str, str], int]) -> None:
        """Pods waiting by (plugin, profile) of the plugins that rejected them: a full snapshot.
        A pair seen once keeps its series at 0 when no pod waits for it, as upstream's gauge is
        decremented, never deleted (an alert on it sees 0, not an absent series)."""
        for plugin, profile in self._unschedulable_seen - counts.keys():
            self.unschedulable_pods.labels(plugin=plugin, profile=profile).set(0)
        for (plugin, profile), count in counts.items():
            self.unschedulable_pods.labels(plugin=plugin, profile=profile).set(count)
        self._unschedulable_seen |= counts.keys()

    # --- devices ---------------------------------------------------------------------

    def set_gpus(self, counts: view_model.GpuCounts) -> None:
        """`tessera_devices{state}`, `tessera_devices_by_model{model,state}` and
        `tessera_gpus_overcommitted` from the GPU counts of `kubectl tessera nodes`' summary
        (`cluster.gpu_counts`): the metric's states are the view's and they sum to its total. A
        full snapshot: every state of every model present is set (0 included), so a model's
        allocation ratio has all its series and a resolved conflict reads 0; models no longer
        present disappear."""
        self.devices_by_model.clear()
        totals: Tally[str] = Tally()
        for model in sorted({model for model, _ in counts.states}):
            for state in GPU_STATES:
                count = counts.states.get((model, state), 0)
                self.devices_by_model.labels(model=model, state=state).set(count)
                totals[state] += count
        for state in GPU_STATES:
            self.devices.labels(state=state).set(totals[state])
        self.gpus_overcommitted.set(counts.overcommitted)

    def observe_permit_wait(self, result: str, seconds: float) -> None:
        """A Binding held by the allocation gate (a Permit wait) was let go or stopped: `result`
        is WaitOnPermit's status code, "Success", "Unschedulable" or "Error"."""
        self.permit_wait_duration.labels(result=result).observe(seconds)

    def set_waiting_for_allocation(self, count: int) -> None:
        self.waiting_for_allocation.set(count)

    def set_agents_silent(self, count: int) -> None:
        """`tessera_node_agents_silent`: the nodes of `cluster.silent_agents` at the scrape
        (`GpuCounts.agents_silent`, counted in `cluster.gpu_counts`' walk)."""
        self.agents_silent.set(count)

    def set_binding(self, count: int) -> None:
        """`scheduler_goroutines{operation="binding"}`: upstream runs one goroutine per binding
        cycle, from WaitOnPermit to the end of bind (schedule_one.go runBindingCycle); Tessera's
        are the Bindings held by the allocation gate and those sent but not answered."""
        self.goroutines.labels(operation="binding").set(count)

    def observe_extension_point(self, point: ExtensionPoint, status: Code, profile: str, seconds: float) -> None:
        """One run of an extension point's plugins (framework.go's Run*Plugins; Filter over the
        nodes as schedule_one.go findNodesThatPassFilters), `status` its status code."""
        self.framework_extension_point_duration.labels(extension_point=point, status=status, profile=profile) \
            .observe(seconds)

    def observe_plugin(self, plugin: str, point: ExtensionPoint, status: Code, seconds: float) -> None:
        """One plugin's run at an extension point, in a sampled cycle. Filter and Score: Tessera runs
        a plugin once over all the nodes of a search (its batch form, or its per-node checks summed:
        `ProfileRuntime._scan`), so one observation is that whole pass, where upstream observes each
        node's call."""
        self.plugin_execution_duration.labels(plugin=plugin, extension_point=point, status=status).observe(seconds)

    def observe_preemption(self, victims: int) -> None:
        """One PostFilter (preemption) run; `victims` > 0 when it chose some."""
        self.preemption_attempts.inc()
        if victims:
            self.preemption_victims.observe(victims)

    # --- API writes, leadership, informers -----------------------------------------------------

    def count_request(self, code: str, method: str, host: str) -> None:
        """`rest_client_requests_total`: one HTTP request sent (a try), by its status code
        ("<error>" without an answer), method and the apiserver's host[:port] (`KubeHttp.on_result`)."""
        self.rest_client_requests.labels(code=code, method=method, host=host).inc()

    def observe_binding(self, result: BindingResult, seconds: float) -> None:
        self.bindings.labels(result=result).inc()
        self.binding_duration.observe(seconds)

    def set_leader(self, leading: bool) -> None:
        value = 1 if leading else 0
        self.leader.set(value)
        self.leader_election_master_status.labels(name=self.lease_name).set(value)

    def set_fence_pending(self, count: int) -> None:
        self.leader_fence_pending.set(count)

    def count_slow_renewals(self, total: int) -> None:
        """The counter follows the elector's running total; as client-go's, its series appears
        with the first slow-path renewal."""
        if total > self._slow_renewals:
            self.leader_election_slowpath.labels(name=self.lease_name).inc(total - self._slow_renewals)
            self._slow_renewals = total

    def count_conflicting_writes(self, lease: str, total: int) -> None:
        """The counter follows the loop's running total per other Lease; its series appears with
        the first write seen (no install, no series)."""
        counted = self._conflicting.get(lease, 0)
        if total > counted:
            self.conflicting_writes.labels(lease=lease).inc(total - counted)
            self._conflicting[lease] = total

    def count_relists(self, kind: str, total: int) -> None:
        """The counter follows the informer's running total of relists; a kind that never
        relisted is exported at 0, so queries on it find a series from the start."""
        counted = self._relists.get(kind, 0)
        self.informer_relists.labels(kind=kind).inc(max(0, total - counted))
        self._relists[kind] = max(total, counted)

    def set_informer_synced(self, kind: str, synced: bool) -> None:
        self.informer_synced.labels(kind=kind).set(1 if synced else 0)

    def set_informer_relist_pending(self, kind: str, pending: bool) -> None:
        self.informer_relist_pending.labels(kind=kind).set(1 if pending else 0)

    def set_informer_unavailable(self, kind: str, reason: Unavailable | None) -> None:
        """Every reason's series of `kind`: 1 for the one it is treated as empty for, else 0 (a
        kind read again reads 0, not an absent series)."""
        for each in UNAVAILABLE_REASONS:
            self.informer_unavailable.labels(kind=kind, reason=each).set(1 if each == reason else 0)


class MetricsStopwatch:
    """The core's stopwatch in the live scheduler (`scheduler/core/framework/timing.py`): marks
    from `time.perf_counter()`, durations into the two framework histograms, and every cycle in
    `100 / sample_percent` sampled for the per-plugin one — upstream draws 10 % of the cycles at
    random (schedule_one.go `rand.Intn(100) < pluginMetricsSamplePercent`); an even spread gives
    the same share without randomness."""

    def __init__(self, metrics: Metrics, sample_percent: int = PLUGIN_METRICS_SAMPLE_PERCENT) -> None:
        self.metrics = metrics
        self.sample_percent = sample_percent
        self._credit = 0  # percent accrued towards the next sampled cycle

    def now(self) -> float:
        return time.perf_counter()

    def sample(self) -> bool:
        self._credit += self.sample_percent
        if self._credit < 100:
            return False
        self._credit -= 100
        return True

    def extension_point(self, point: ExtensionPoint, status: Code, profile: str, seconds: float) -> None:
        self.metrics.observe_extension_point(point, status, profile, seconds)

    def plugin(self, plugin: str, point: ExtensionPoint, status: Code, seconds: float) -> None:
        self.metrics.observe_plugin(plugin, point, status, seconds)
