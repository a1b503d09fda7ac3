"""Pod-level requests (`spec.resources`, PodLevelResources: beta and on by default since 1.34):
upstream `resourcehelper.PodRequests` puts them in place of the containers' total for cpu,
memory and hugepages-*, in the filter, in scoring, and in what a bound pod counts on its node.
Regression (review): Tessera ignored them, so a 4-CPU pod fitted a 2-CPU node and a bound pod
with pod-level requests counted as nothing."""

from __future__ import annotations

from scheduler.core.objects import parse_pod
from scheduler.core.resources import DEFAULT_MEMORY_REQUEST
from scheduler.sim import builders as b
from tests.helpers import least_allocated_attempt

FIT = "NodeResourcesFit"
POD_LEVEL = {"resources": {"requests": {"cpu": "4", "memory": "8Gi"}}}
GI = 1024 ** 3


def test_pod_level_requests_are_filtered_on() -> None:
    attempt = least_allocated_attempt(b.node("small", cpu="2", memory="4Gi"), b.pod("p", spec_extra=POD_LEVEL))
    assert attempt.node is None
    assert "Insufficient cpu" in attempt.message and "Insufficient memory" in attempt.message


def test_pod_level_requests_are_scored_on() -> None:
    # LeastAllocated on an empty 32 CPU / 128Gi node: cpu (32000-4000)*100//32000 = 87,
    # memory (128-8)*100//128 = 93, (87 + 93) // 2 = 90 (the 100m/200Mi defaults would give 99)
    attempt = least_allocated_attempt(b.node("n1"), b.node("n2"), b.pod("p", spec_extra=POD_LEVEL))
    assert attempt.scores is not None and attempt.scores["n1"][FIT] == 90


def test_a_bound_pods_pod_level_requests_count_on_its_node() -> None:
    attempt = least_allocated_attempt(b.node("n1"), b.pod("running", node_name="n1", phase="Running",
                                           spec_extra={"resources": {"requests": {"cpu": "16"}}}),
                       b.pod("p", requests={"cpu": "20"}))
    assert attempt.node is None and "Insufficient cpu" in attempt.message


def test_pod_level_values_replace_only_what_they_name_and_limits_stand_in_for_requests() -> None:
    pod = parse_pod(b.pod("p", requests={"memory": "1Gi", "nvidia.com/gpu": 1},
                          spec_extra={"resources": {"limits": {"cpu": "3"}, "requests": {"ephemeral-storage": "9Gi"}},
                                      "overhead": {"cpu": "250m"}}))
    # cpu from the pod level (its limit, as the apiserver defaults the request when no container
    # asks for cpu) plus overhead; memory and the GPU from the container; ephemeral-storage
    # cannot be set at pod level
    assert pod.requests == {"cpu": 3250, "memory": GI, "nvidia.com/gpu": 1}


def test_a_bound_pod_with_pod_level_requests_gets_scoring_defaults_only_for_what_nothing_names() -> None:
    """Upstream getNonMissingContainerRequests: with pod-level requests set, a container's missing
    cpu/memory is defaulted only when neither the pod level nor any container names it."""
    both_missing = parse_pod(b.pod("p", spec_extra={"resources": {"requests": {"cpu": "2"}}}))
    assert both_missing.node_scoring_requests == {"cpu": 2000, "memory": DEFAULT_MEMORY_REQUEST}
    named_elsewhere = parse_pod(b.pod("q", spec_extra={
        "resources": {"requests": {"cpu": "2"}},
        "initContainers": [{"name": "init", "resources": {"requests": {"memory": "64Mi"}}}]}))
    assert named_elsewhere.node_scoring_requests == {"cpu": 2000, "memory": 64 * 1024 * 1024}
    # the pod being placed still gets the per-container defaults (calculatePodResourceRequest)
    assert named_elsewhere.scoring_requests["memory"] == DEFAULT_MEMORY_REQUEST


def test_an_unset_pod_level_request_defaults_to_what_the_containers_request_before_the_limit() -> None:
    """The apiserver defaults a pod-level request that only a pod-level limit names
    (pkg/apis/core/v1/defaults.go defaultPodRequests, v1.36.3): for cpu and memory, to the
    containers' aggregated requests when any container names the resource (an explicit 0
    included), and to the limit only when none does. Tessera took the limit: a pod with a 4-CPU
    pod-level limit whose container asks 1 CPU counted 4 (the simulator and replays see pods the
    apiserver has not defaulted), so a 2-CPU node looked too small for it."""
    limited = b.pod("p", requests={"cpu": "1"}, spec_extra={"resources": {"limits": {"cpu": "4", "memory": "2Gi"}}})
    # cpu from the container (1), memory from the pod-level limit (no container names it)
    assert parse_pod(limited).requests == {"cpu": 1000, "memory": 2 * GI}
    attempt = least_allocated_attempt(b.node("small", cpu="2", memory="4Gi"), limited)
    assert attempt.node == "small", attempt.message
    # an explicit zero is a request: the pod level defaults to 0, not to the limit
    zero = b.pod("z", requests={"cpu": "0"}, spec_extra={"resources": {"limits": {"cpu": "4"}}})
    assert "cpu" not in parse_pod(zero).requests
    # the aggregate follows PodRequests' init-container rule: max(init 3, app 1 + sidecar 500m)
    stepped = b.pod("s", requests={"cpu": "1"}, spec_extra={"resources": {"limits": {"cpu": "8"}}},
                    init_containers=[b.container("side", {"cpu": "500m"}, restart_policy="Always"),
                                     b.container("init", {"cpu": "2500m"})])
    assert parse_pod(stepped).requests == {"cpu": 3000}
    # an explicit pod-level request is kept as written
    explicit = b.pod("e", requests={"cpu": "1"}, spec_extra={"resources": {"requests": {"cpu": "3"}, "limits": {"cpu": "4"}}})
    assert parse_pod(explicit).requests == {"cpu": 3000}
