"""Intake review (how apiserver JSON becomes a Pod's requests and gang), checked against upstream:
in-place resize status (component-helpers PodRequests with UseStatusResources), requests totalled
exactly before rounding up, and the min-available label read as Go's strconv.Atoi.

Each test failed before its fix, for the reason its docstring gives."""

from __future__ import annotations

import copy
from typing import Any

from scheduler.core.objects import GANG_MIN_LABEL, GANG_NAME_LABEL, parse_pod
from scheduler.sim import builders as b
from tests.helpers import least_allocated_attempt

GI = 1024 ** 3


def _resized(spec: dict[str, str], actuated: dict[str, str], allocated: dict[str, str],
             infeasible: bool = False, node: str = "n1") -> dict[str, Any]:
    """A running pod whose `main` container was resized in place: spec, what the kubelet runs
    (`status.containerStatuses[].resources`) and what it admitted (`allocatedResources`)."""
    pod = b.pod("resized", node_name=node, phase="Running", requests=spec)
    pod["status"]["containerStatuses"] = [{"name": "main", "resources": {"requests": actuated},
                                           "allocatedResources": allocated}]
    if infeasible:
        pod["status"]["conditions"] = [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]
    return pod


def test_a_pod_shrinking_in_place_counts_what_its_containers_still_run() -> None:
    """InPlacePodVerticalScaling (GA, locked on since 1.35): a bound pod counts, per container,
    the larger of its spec, its actuated (`status.containerStatuses[].resources.requests`) and its
    allocated requests (component-helpers resource/helpers.go: AggregateContainerRequests with
    UseStatusResources, determineEffectiveRequests; scheduler framework/types.go:
    PodInfo.CalculateResource). Tessera read the spec only: a pod resized from 3 CPUs to 1, still
    running on 3, left 3 of a 4-CPU node apparently free and a 2-CPU pod was placed there (the
    kubelet then refuses it: OutOfcpu). A status it cannot read falls back to the spec; it never
    makes the bound pod unreadable (which would free what it holds)."""
    running = _resized({"cpu": "1", "memory": "1Gi"}, {"cpu": "3", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"})
    assert parse_pod(running).requests == {"cpu": 3000, "memory": GI}
    attempt = least_allocated_attempt(b.node("n1", cpu="4"), running, b.pod("p", requests={"cpu": "2"}))
    assert attempt.node is None and "Insufficient cpu" in attempt.message
    broken = copy.deepcopy(running)
    broken["status"]["containerStatuses"][0]["resources"] = {"requests": {"cpu": "lots"}}
    assert parse_pod(broken).requests == {"cpu": 1000, "memory": GI}


def test_an_infeasible_resize_counts_what_the_kubelet_admitted_not_the_spec() -> None:
    """determineEffectiveRequests: with PodResizePending reason Infeasible the spec is left out
    (max of actuated and allocated only): the kubelet will never run the new size. Tessera
    counted the 8-CPU spec of a pod running on 1 CPU, so an 8-CPU node looked full."""
    running = _resized({"cpu": "8"}, {"cpu": "1"}, {"cpu": "1"}, infeasible=True)
    assert parse_pod(running).requests == {"cpu": 1000}
    attempt = least_allocated_attempt(b.node("n1", cpu="8"), running, b.pod("p", requests={"cpu": "6"}))
    assert attempt.node == "n1"


def test_resize_status_counts_for_sidecars_and_the_pod_level_not_for_plain_init_containers() -> None:
    """AggregateContainerRequests reads the status of app and restartable (sidecar) init
    containers only; PodRequests reads `status.resources` for pod-level requests
    (InPlacePodLevelResourcesVerticalScaling, beta and on in 1.36)."""
    pod = b.pod("p", node_name="n1", phase="Running", requests={"memory": "1Gi"},
                init_containers=[b.container("side", {"cpu": "1"}, restart_policy="Always"),
                                 b.container("init", {"cpu": "500m"})])
    pod["status"]["initContainerStatuses"] = [
        {"name": "side", "resources": {"requests": {"cpu": "2"}}, "allocatedResources": {"cpu": "1"}},
        {"name": "init", "resources": {"requests": {"cpu": "9"}}, "allocatedResources": {"cpu": "9"}}]
    # the sidecar runs 2 CPUs (its spec says 1); the plain init step is its 500m spec (its status
    # is not read) on top of the sidecar: 2.5 CPUs
    assert parse_pod(pod).requests == {"cpu": 2500, "memory": GI}
    pod_level = b.pod("q", node_name="n1", phase="Running",
                      spec_extra={"resources": {"requests": {"cpu": "2", "memory": "2Gi"}}})
    pod_level["status"]["resources"] = {"requests": {"cpu": "4", "memory": "1Gi"}}
    pod_level["status"]["allocatedResources"] = {"cpu": "2", "memory": "2Gi"}
    assert parse_pod(pod_level).requests == {"cpu": 4000, "memory": 2 * GI}


def test_requests_are_totalled_exactly_then_rounded_up_once() -> None:
    """resourcehelper.PodRequests adds the containers' Quantities exactly; the scheduler takes
    MilliValue()/Value() of the pod's total (framework Resource.Add). Tessera rounded every
    container up first: two containers of 500u CPU and 500m (0.5 byte) memory each counted
    2m and 2 bytes instead of 1m and 1 byte, and overhead and init steps the same way."""
    pod = parse_pod(b.pod("p", containers=[b.container("a", {"cpu": "500u", "memory": "500m"}),
                                           b.container("b", {"cpu": "500u", "memory": "500m"})],
                          spec_extra={"overhead": {"cpu": "0.0005"}}))
    assert pod.requests == {"cpu": 2, "memory": 1}
    assert pod.containers[0].requests == {"cpu": 1, "memory": 1}  # one container alone rounds up


def test_a_min_available_label_is_read_as_go_reads_an_integer() -> None:
    """The label gang's `pod-group.scheduling.sigs.k8s.io/min-available` is read with Go's
    strconv.Atoi (coscheduling's label form), which takes no digit separators: "1_0" is a valid
    label value but no integer, so the pod is no gang member. Tessera used Python's int(),
    which reads "1_0" as 10: the pod waited for a gang of ten."""
    pod = parse_pod(b.pod("p", labels={GANG_NAME_LABEL: "g", GANG_MIN_LABEL: "1_0"}))
    assert pod.gang is None
    assert pod.label_error is not None and "must be an integer" in pod.label_error
