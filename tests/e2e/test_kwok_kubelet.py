"""The local control plane, kwok's Stages (scheduler/data/kwok-stages.yaml) and `tessera
dev-cluster`, as a kubelet and upstream do it: a review found these; each test failed before its fix,
except the Lease test, which guards a suspected defect that proved none.

The kwok tests share the kwok plane of tests/e2e/kwok_cluster.py (kube-controller-manager with the
Job controller, kwok with Tessera's Stages) and bind their pods straight to a fake GPU node
(`spec.nodeName`), so no scheduler is involved: what is checked is what kwok, playing the kubelet,
writes. The dev-cluster tests run the command as a user does, in a child process.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest

from scheduler.kube.controlplane import ControlPlaneBinaries, LocalControlPlane
from scheduler.kube.controlplane import cli as devcluster_cli
from scheduler.kube.controlplane.processes import popen_dying_with_parent
from tests.e2e.kwok_cluster import COMPLETE_DELAY, kwok_plane  # noqa: F401 - the shared kwok plane fixture
from tests.e2e.live import REPO

LONG = "1h"  # a delay no test waits for: the pod stays Running
JITTER_DELAY = "pod-complete.stage.kwok.x-k8s.io/jitter-delay"
T = TypeVar("T")


def _wait(check: Callable[[], T], timeout: float, interval: float = 0.25) -> T:
    """The first truthy value of ``check()`` within ``timeout`` seconds, else the last value."""
    deadline = time.monotonic() + timeout
    value = check()
    while not value and time.monotonic() < deadline:
        time.sleep(interval)
        value = check()
    return value


@pytest.fixture
def plane_ns(kwok_plane: LocalControlPlane) -> Iterator[tuple[LocalControlPlane, str, str]]:  # noqa: F811
    """The kwok plane, a fresh namespace and one fake GPU node kwok manages; all removed afterwards."""
    admin = kwok_plane.admin
    ns = f"review-kwok-{secrets.token_hex(3)}"
    admin.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    (node,) = kwok_plane.add_fake_gpu_nodes(1, 2, "A100", prefix=f"rv-{secrets.token_hex(2)}")
    try:
        yield kwok_plane, ns, node
    finally:
        admin.request("DELETE", f"/apis/batch/v1/namespaces/{ns}/jobs?propagationPolicy=Background",
                      ok=(200, 202, 404))
        for pod in admin.get(f"/api/v1/namespaces/{ns}/pods")["items"]:
            name = pod["metadata"]["name"]
            if pod["metadata"].get("finalizers"):
                admin.request("PATCH", f"/api/v1/namespaces/{ns}/pods/{name}", {"metadata": {"finalizers": None}},
                              content_type="application/merge-patch+json", ok=(200, 404))
            admin.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}?gracePeriodSeconds=0", ok=(200, 202, 404))
        admin.delete(f"/api/v1/namespaces/{ns}")
        kwok_plane.remove_fake_gpu_nodes([node])


def _pod(name: str, node: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": {COMPLETE_DELAY: LONG}},
            "spec": {"nodeName": node, "restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}], **spec}}


def _running(plane: LocalControlPlane, ns: str, name: str) -> dict[str, Any]:
    def get() -> dict[str, Any] | None:
        pod = plane.admin.get(f"/api/v1/namespaces/{ns}/pods/{name}")
        return pod if pod.get("status", {}).get("phase") == "Running" else None

    pod = _wait(get, 30)
    assert pod, f"kwok never ran pod {ns}/{name}"
    return pod


# --- kwok's Stages ---------------------------------------------------------------------------


def test_a_deleted_pod_of_a_job_with_a_pod_failure_policy_goes_away(
        plane_ns: tuple[LocalControlPlane, str, str]) -> None:
    """docs/dev-cluster.md: "a deleted pod goes away, so its GPUs are free for the next one"; the Stage file:
    pod-delete removes a pod being deleted "as a kubelet confirms the deletion".

    A kubelet first stops the containers of a pod being deleted and reports a terminal phase
    (Failed), and only then deletes it. The Job controller relies on that: for a Job with a
    `podFailurePolicy` (or `podReplacementPolicy: Failed`) it keeps its
    `batch.kubernetes.io/job-tracking` finalizer on a terminating pod until the pod is Failed
    (k8s v1.36.3 pkg/controller/job/job_controller.go `isPodFailed` / `onlyReplaceFailedPods`).
    Tessera's Stages never move a terminating pod to a terminal phase, and pod-delete waits for
    the finalizers to go: the pod stays Terminating (phase Running) for ever — `kubectl delete`
    hangs, the Job never replaces it, and a preemption victim of such a Job (podFailurePolicy's
    own documented use: `Ignore` on DisruptionTarget) never frees its GPUs.
    """
    plane, ns, node = plane_ns
    template = _pod("unused", node)
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"},
           "spec": {"backoffLimit": 3,
                    "podFailurePolicy": {"rules": [{"action": "Ignore",
                                                    "onPodConditions": [{"type": "DisruptionTarget"}]}]},
                    "template": {"metadata": {"annotations": {COMPLETE_DELAY: LONG}}, "spec": template["spec"]}}}
    plane.admin.create(f"/apis/batch/v1/namespaces/{ns}/jobs", job)

    def job_pod() -> str | None:
        pods = plane.admin.get(f"/api/v1/namespaces/{ns}/pods")["items"]
        return next((p["metadata"]["name"] for p in pods if p["status"].get("phase") == "Running"), None)

    name = _wait(job_pod, 30)
    assert name, "the Job's pod never ran"
    plane.admin.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}?gracePeriodSeconds=1")

    def gone() -> bool:
        status, _ = plane.admin.request_raw("GET", f"/api/v1/namespaces/{ns}/pods/{name}")
        return status == 404

    if not _wait(gone, 30):
        pod = plane.admin.get(f"/api/v1/namespaces/{ns}/pods/{name}")
        pytest.fail(f"pod {name} still there 30 s after its deletion: phase {pod['status'].get('phase')}, "
                    f"finalizers {pod['metadata'].get('finalizers')}, "
                    f"deletionTimestamp {pod['metadata'].get('deletionTimestamp')}")


def test_pod_ips_do_not_overlap_the_service_cluster_ip_range(plane_ns: tuple[LocalControlPlane, str, str]) -> None:
    """kube-apiserver v1.36.3 `--service-cluster-ip-range` help: "This must not overlap with any IP
    ranges assigned to nodes or pods."

    The plane gives kube-apiserver `--service-cluster-ip-range=10.0.0.0/24` (the `kubernetes`
    Service is 10.0.0.1) and kwok `cidr: 10.0.0.0/16` for pod IPs (components.kwok_argv), so kwok
    hands out the Service range itself: the first pod on a fresh plane gets 10.0.0.1, the
    `kubernetes` Service's ClusterIP, and later pods the ClusterIPs of other Services.
    """
    plane, ns, node = plane_ns
    plane.admin.create(f"/api/v1/namespaces/{ns}/pods", _pod("ip", node))
    pod_ip = ipaddress.ip_address(_running(plane, ns, "ip")["status"]["podIP"])
    service_cidrs = plane.admin.get("/apis/networking.k8s.io/v1/servicecidrs/kubernetes")["spec"]["cidrs"]
    kubernetes_ip = plane.admin.get("/api/v1/namespaces/default/services/kubernetes")["spec"]["clusterIP"]
    inside = [cidr for cidr in service_cidrs if pod_ip in ipaddress.ip_network(cidr)]
    assert not inside, (f"pod IP {pod_ip} is inside the Service range {inside} "
                        f"(the kubernetes Service is {kubernetes_ip})")


def test_running_pods_get_a_host_ip_and_host_network_pods_a_pod_ip(
        plane_ns: tuple[LocalControlPlane, str, str]) -> None:
    """A kubelet sets `status.hostIP` (and `hostIPs`) on every pod it runs, and a `hostNetwork` pod's
    `podIP` is the node's IP. Tessera's pod-running Stage means to do the same
    (`hostIP: {{ NodeIPWith .spec.nodeName }}`, `podIP: {{ PodIPWith ... .spec.hostNetwork ... }}`),
    but kwok's NodeIPWith answers the node's InternalIP or else kwok's `nodeIP` option
    (kwok v0.8.0 pkg/kwok/controllers/pod_controller.go `funcNodeIPWith`; upstream's
    node-initialize Stage gives every node an InternalIP): the fake GPU nodes have only a Hostname
    address and kwok_argv sets no nodeIP, so the template renders "" and the apiserver drops it.
    Every pod runs without a hostIP, and a hostNetwork pod (the usual DaemonSet agent) runs,
    Ready, with no IP at all — its Service gets no endpoint.
    """
    plane, ns, node = plane_ns
    plane.admin.create(f"/api/v1/namespaces/{ns}/pods", _pod("plain", node))
    plane.admin.create(f"/api/v1/namespaces/{ns}/pods", _pod("agent", node, hostNetwork=True))
    plain, agent = _running(plane, ns, "plain")["status"], _running(plane, ns, "agent")["status"]
    assert plain.get("hostIP"), f"a Running pod without hostIP: {plain}"
    assert agent.get("podIP") and agent.get("podIP") == agent.get("hostIP"), (
        f"a Running hostNetwork pod has podIP {agent.get('podIP')!r}, hostIP {agent.get('hostIP')!r}")


def test_init_containers_and_sidecars_of_a_running_pod_have_statuses(
        plane_ns: tuple[LocalControlPlane, str, str]) -> None:
    """A kubelet reports every init container of a running pod in `status.initContainerStatuses`:
    a finished one terminated (reason Completed), a sidecar (init container with
    `restartPolicy: Always`) running and ready. kwok's own stages do the same (kwok v0.8.0
    kustomize/stage/pod/fast/pod-ready.yaml writes initContainerStatuses, sidecars running;
    kustomize/stage/pod/general walks the init containers through running and completed).

    Tessera's pod-running Stage writes only `containerStatuses`: a running pod with init containers
    has no initContainerStatuses, so its Ready condition says True while `kubectl get pod` shows the
    sidecar not ready (READY 1/2 here).
    """
    plane, ns, node = plane_ns
    pod = _pod("with-init", node, initContainers=[
        {"name": "fetch", "image": "registry.k8s.io/pause:3.10"},
        {"name": "proxy", "image": "registry.k8s.io/pause:3.10", "restartPolicy": "Always"}])
    plane.admin.create(f"/api/v1/namespaces/{ns}/pods", pod)
    status = _running(plane, ns, "with-init")["status"]
    statuses = {s["name"]: s for s in status.get("initContainerStatuses", [])}
    assert set(statuses) == {"fetch", "proxy"}, f"initContainerStatuses of a Running pod: {list(statuses)}"
    assert statuses["fetch"]["state"].get("terminated", {}).get("reason") == "Completed", statuses["fetch"]
    assert "running" in statuses["proxy"]["state"] and statuses["proxy"]["ready"], statuses["proxy"]


def _phase(plane: LocalControlPlane, ns: str, name: str) -> str:
    return str(plane.admin.get(f"/api/v1/namespaces/{ns}/pods/{name}").get("status", {}).get("phase"))


def _seconds_running(plane: LocalControlPlane, ns: str, names: Sequence[str],
                     touch: Callable[[str, float], object], poll: float) -> dict[str, float]:
    """Seconds from Running to Succeeded of each pod (to 0.1 s), polled every `poll` s for at most
    60 s; each poll that finds a pod Running calls `touch(name, seconds it has run)`. Asserts that
    kwok ran every pod and that every one succeeded."""
    started: dict[str, float] = {}
    finished: dict[str, float] = {}
    deadline = time.monotonic() + 60
    while len(finished) < len(names) and time.monotonic() < deadline:
        for name in names:
            now = time.monotonic()
            if name in finished:
                continue
            phase = _phase(plane, ns, name)
            if phase == "Running":
                touch(name, now - started.setdefault(name, now))
            elif phase != "Pending":
                finished[name] = now
        time.sleep(poll)
    assert set(started) == set(names), f"kwok ran only {sorted(started)}"
    ran = {name: round(finished.get(name, deadline) - started[name], 1) for name in names}
    assert {name: _phase(plane, ns, name) for name in names} == dict.fromkeys(names, "Succeeded"), ran
    return ran


def test_an_empty_delay_annotation_is_no_delay_annotation(plane_ns: tuple[LocalControlPlane, str, str]) -> None:
    """docs/dev-cluster.md: a pod with `pod-complete.stage.kwok.x-k8s.io/delay: 30s` succeeds 30 s later; one
    without it runs until deleted (a Job's pod: after 1 s).

    An empty value — what a chart or kustomize overlay renders for an unset delay — completed the
    pod at once: kwok's `Exists` holds for "" (kwok v0.8.0 pkg/utils/expression/selector.go
    `existsValue` tests only for null) and its durationFrom reads "" as "no delay" (0 s,
    pkg/utils/lifecycle/value_duration_from.go). Empty now means the same as absent.
    """
    plane, ns, node = plane_ns
    plain = _pod("plain", node)
    plain["metadata"]["annotations"] = {COMPLETE_DELAY: ""}
    plane.admin.create(f"/api/v1/namespaces/{ns}/pods", plain)
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "short"},
           "spec": {"backoffLimit": 0, "template": {"metadata": {"annotations": {COMPLETE_DELAY: ""}},
                                                    "spec": _pod("unused", node)["spec"]}}}
    plane.admin.create(f"/apis/batch/v1/namespaces/{ns}/jobs", job)

    def job_pod_succeeded() -> bool:
        pods = plane.admin.get(f"/api/v1/namespaces/{ns}/pods?labelSelector=job-name%3Dshort")["items"]
        return any(p["status"].get("phase") == "Succeeded" for p in pods)

    assert _wait(job_pod_succeeded, 30), "a Job's pod with an empty delay never succeeded"
    assert _wait(lambda: _phase(plane, ns, "plain") != "Pending", 30), "kwok never ran the pod"
    time.sleep(2)  # longer than kwok's 1 s default: a pod that completes at all has done so by now
    assert _phase(plane, ns, "plain") == "Running", "a pod with an empty delay annotation completed"


def test_an_unreadable_delay_is_reported_in_a_warning_event(plane_ns: tuple[LocalControlPlane, str, str]) -> None:
    """A delay kwok cannot read (a bare `30`, `1 minute`) made kwok take its default of 1 s without
    a word (kwok v0.8.0 value_duration_from.go `defaultValue`): the user who meant 30 s saw the pod
    finish at once and nothing saying why. The pod still finishes after 1 s (a Job's pods must not
    hang), with a Warning Event that names the annotation."""
    plane, ns, node = plane_ns
    pod = _pod("bare", node)
    pod["metadata"]["annotations"] = {COMPLETE_DELAY: "30"}
    plane.admin.create(f"/api/v1/namespaces/{ns}/pods", pod)
    assert _wait(lambda: _phase(plane, ns, "bare") == "Succeeded", 30), _phase(plane, ns, "bare")

    def warning() -> dict[str, Any] | None:
        events = plane.admin.get(f"/api/v1/namespaces/{ns}/events?fieldSelector=involvedObject.name%3Dbare")["items"]
        return next((e for e in events if e["type"] == "Warning"), None)

    event = _wait(warning, 10)
    assert event, "no Warning Event for an unreadable delay"
    assert event["reason"] == "InvalidDelay" and COMPLETE_DELAY in event["message"], event


def test_a_pods_delay_counts_from_its_start_however_often_the_pod_changes(
        plane_ns: tuple[LocalControlPlane, str, str]) -> None:
    """docs/dev-cluster.md: a pod with `pod-complete.stage.kwok.x-k8s.io/delay: 30s` succeeds 30 s later — later
    than it started, as a job that runs 30 s.

    kwok computed the delay again, from "now", on every change of the pod: each watch event with a
    new resourceVersion is matched to a Stage again, its delay read afresh and the queued job
    replaced (kwok v0.8.0 pkg/kwok/controllers/pod_controller.go `preprocess` → `addStageJob`
    cancels the pending one; pkg/utils/lifecycle/value_duration_from.go `durationFrom.Get` reads a
    Go duration as that much from now). A label, an annotation or a condition set while the pod
    ran started its clock again: an 8 s job touched every 2 s finished 8 s after the last touch,
    and one touched more often than its delay never finished. The jitter delay is read the same
    way, and must count from the start too: the second pod's `jitter-delay` (below its delay)
    replaces the delay.

    Each pod is changed as users and controllers change a running pod, at 2, 4 and 6 s after it
    was seen Running: `kubectl label`, an annotation patch (what Tessera's node agent does), and a
    status condition (a controller's). From its start it finishes at ~8 s; counted from the last
    touch, at ~14 s. The bounds leave 1.5 s below and 3 s above for polling and a busy machine.
    """
    plane, ns, node = plane_ns
    delays = {"timed": {COMPLETE_DELAY: "8s"}, "jittered": {COMPLETE_DELAY: LONG, JITTER_DELAY: "8s"}}
    for name, annotations in delays.items():
        pod = _pod(name, node)
        pod["metadata"]["annotations"] = annotations
        plane.admin.create(f"/api/v1/namespaces/{ns}/pods", pod)
    touches: list[Callable[[str], object]] = [
        lambda name: plane.admin.merge_patch(f"/api/v1/namespaces/{ns}/pods/{name}",
                                             {"metadata": {"labels": {"touched": "label"}}}),
        lambda name: plane.admin.merge_patch(f"/api/v1/namespaces/{ns}/pods/{name}",
                                             {"metadata": {"annotations": {"example.com/touched": "annotation"}}}),
        lambda name: plane.admin.request("PATCH", f"/api/v1/namespaces/{ns}/pods/{name}/status",
                                         {"status": {"conditions": [{"type": "example.com/Touched",
                                                                     "status": "True"}]}},
                                         content_type="application/strategic-merge-patch+json"),
    ]
    touched: dict[str, int] = dict.fromkeys(delays, 0)

    def touch_at_2_4_6_seconds(name: str, running: float) -> None:
        if touched[name] < len(touches) and running >= 2 * (touched[name] + 1):
            touches[touched[name]](name)
            touched[name] += 1

    ran = _seconds_running(plane, ns, list(delays), touch_at_2_4_6_seconds, poll=0.05)
    assert touched == dict.fromkeys(delays, len(touches)), f"finished before every touch: {ran}"
    assert all(6.5 <= seconds <= 11 for seconds in ran.values()), (
        f"seconds from Running to Succeeded, 8 s wanted (14 s if the last touch restarts the delay): {ran}")


def test_a_jobs_pod_and_an_unreadable_delay_finish_one_second_after_the_start_however_often_touched(
        plane_ns: tuple[LocalControlPlane, str, str]) -> None:
    """docs/dev-cluster.md: a Job's pod without a delay, and a pod whose delay kwok cannot read, succeed after
    1 s. That second, too, was counted again from every change of the pod (kwok v0.8.0
    pod_controller.go `preprocess`): a pod changed more often than once a second — by a
    controller's status updates, an agent's annotations — never finished. Both pods are
    relabelled every 0.3 s for 4 s after they are seen Running: from the start they finish at
    ~1 s; counted from the last touch, at ~5 s."""
    plane, ns, node = plane_ns
    bare = _pod("bare", node)
    bare["metadata"]["annotations"] = {COMPLETE_DELAY: "30"}
    plane.admin.create(f"/api/v1/namespaces/{ns}/pods", bare)
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "short"},
           "spec": {"backoffLimit": 0, "template": {"spec": _pod("unused", node)["spec"]}}}
    plane.admin.create(f"/apis/batch/v1/namespaces/{ns}/jobs", job)

    def job_pod() -> str | None:
        pods = plane.admin.get(f"/api/v1/namespaces/{ns}/pods?labelSelector=job-name%3Dshort")["items"]
        return next((p["metadata"]["name"] for p in pods), None)

    job_pod_name = _wait(job_pod, 30)
    assert job_pod_name, "the Job made no pod"

    def relabel_for_4_seconds(name: str, running: float) -> None:
        if running < 4:
            plane.admin.merge_patch(f"/api/v1/namespaces/{ns}/pods/{name}",
                                    {"metadata": {"labels": {"touched": f"{time.monotonic():.2f}"}}})

    ran = _seconds_running(plane, ns, ["bare", job_pod_name], relabel_for_4_seconds, poll=0.3)
    assert all(seconds <= 2.5 for seconds in ran.values()), (
        f"seconds from Running to Succeeded, 1 s wanted (5 s if every touch restarts it): {ran}")


def test_a_pod_with_a_readiness_gate_is_ready_only_when_its_condition_is_true(
        plane_ns: tuple[LocalControlPlane, str, str]) -> None:
    """A kubelet never sets a readiness gate's condition; a pod's Ready is True only when its
    containers are ready and every gate's condition is True, else False with reason
    ReadinessGatesNotReady and one message per gate (k8s v1.36.3 pkg/kubelet/status/generate.go
    `GeneratePodReadyCondition`); it follows the condition as a controller (a load balancer's)
    sets and changes it. The pod-running Stage set Ready True at once, gates or not: a rollout
    waiting on the load balancer went ahead before it was ready."""
    plane, ns, node = plane_ns
    gate = "example.com/lb-ready"
    plane.admin.create(f"/api/v1/namespaces/{ns}/pods", _pod("gated", node, readinessGates=[{"conditionType": gate}]))
    _running(plane, ns, "gated")

    def ready(wanted: tuple[str, str | None, str | None]) -> Callable[[], dict[str, Any] | None]:
        def check() -> dict[str, Any] | None:
            pod = plane.admin.get(f"/api/v1/namespaces/{ns}/pods/gated")
            condition = next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
            return condition if (condition["status"], condition.get("reason"), condition.get("message")) == wanted else None
        return check

    def gate_condition(status: str) -> None:
        plane.admin.request("PATCH", f"/api/v1/namespaces/{ns}/pods/gated/status",
                            {"status": {"conditions": [{"type": gate, "status": status}]}},
                            content_type="application/strategic-merge-patch+json")

    def current() -> dict[str, Any]:
        status: dict[str, Any] = plane.admin.get(f"/api/v1/namespaces/{ns}/pods/gated")["status"]
        return status

    missing = ("False", "ReadinessGatesNotReady", f'corresponding condition of pod readiness gate "{gate}" does not exist.')
    assert _wait(ready(missing), 10), f"Ready with the gate's condition missing: {current()}"
    gate_condition("False")
    not_true = ("False", "ReadinessGatesNotReady", f'the status of pod readiness gate "{gate}" is not "True", but False')
    assert _wait(ready(not_true), 10), f"Ready with the gate's condition False: {current()}"
    gate_condition("True")
    assert _wait(ready(("True", None, None)), 10), f"not Ready with the gate's condition True: {current()}"
    gate_condition("False")
    assert _wait(ready(not_true), 10), f"still Ready after the gate's condition went False: {current()}"
    assert _phase(plane, ns, "gated") == "Running"
    # the Stage that keeps Ready true to the gates does not stop a gated pod from completing
    short = _pod("gated-short", node, readinessGates=[{"conditionType": gate}])
    short["metadata"]["annotations"] = {COMPLETE_DELAY: "2s"}
    plane.admin.create(f"/api/v1/namespaces/{ns}/pods", short)
    assert _wait(lambda: _phase(plane, ns, "gated-short") == "Succeeded", 30), _phase(plane, ns, "gated-short")


def test_kwoks_lease_keeps_a_node_ready_for_the_node_lifecycle_controller(
        control_plane_binaries: ControlPlaneBinaries, tmp_path: Path) -> None:
    """Known: kwok renews each fake node's Lease but never the Ready condition's lastHeartbeatTime.
    Not a defect: the node lifecycle controller counts a renewed Lease as the node's heartbeat
    (k8s v1.36.3 pkg/controller/nodelifecycle/node_lifecycle_controller.go tryUpdateNodeHealth:
    a newer `spec.renewTime` moves probeTimestamp, the clock its grace period runs on), as a
    kubelet with leases posts its status only every 5 min (nodeStatusReportFrequency); kwok's own
    heartbeat Stages are for kwok before v0.3 or re-send conditions every 10 min
    (kustomize/stage/node/heartbeat*). Nothing in Tessera reads a Node's lastHeartbeatTime.

    dev-cluster leaves that controller out (components.DEFAULT_CONTROLLERS); here it runs with a
    20 s grace period: a node whose Lease stopped would go Unknown, get the unreachable taints and
    have its pods evicted. It stays Ready well past the grace period, and goes Unknown once kwok
    stops — the controller was watching."""
    grace = 20
    with LocalControlPlane(tmp_path / "plane", binaries=control_plane_binaries, with_controller_manager=True,
                           controllers=("node-lifecycle-controller",), with_kwok=True,
                           extra_controller_manager_args=[f"--node-monitor-grace-period={grace}s",
                                                          "--node-monitor-period=2s"]) as plane:
        (node,) = plane.add_fake_gpu_nodes(1, 2, "A100")

        def ready() -> tuple[dict[str, Any], dict[str, Any]]:
            got = plane.admin.get(f"/api/v1/nodes/{node}")
            return next(c for c in got["status"]["conditions"] if c["type"] == "Ready"), got

        first_heartbeat = ready()[0]["lastHeartbeatTime"]
        time.sleep(grace * 1.75)
        condition, seen = ready()
        assert condition["status"] == "True" and not seen["spec"].get("taints"), f"after {grace * 1.75:.0f} s: {seen}"
        assert condition["lastHeartbeatTime"] == first_heartbeat  # as said: never renewed, and no harm
        plane.stop_kwok()
        assert _wait(lambda: ready()[0]["status"] == "Unknown", grace * 3, 1.0), "the node lifecycle controller never acted"


# --- tessera dev-cluster ---------------------------------------------------------------------


def _children(pid: int) -> dict[int, str]:
    """The direct children of ``pid``: pid -> command line."""
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid:
            found[int(entry)] = cmdline
    return found


def _alive(pid: int, marker: str) -> bool:
    """``pid`` still runs (not a zombie) and is still the process whose command line has ``marker``."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    return state != "Z" and marker in cmdline


def _start_dev_cluster(directory: Path, err_path: Path) -> subprocess.Popen[bytes]:
    """`tessera dev-cluster --dir directory` in a child process, once it printed its ready line. In
    its own session, as a user's; killed with the test run (a run stopped by a CI timeout must not
    leave it, and so its plane, running)."""
    with open(err_path, "ab") as err:
        proc = popen_dying_with_parent([sys.executable, "-m", "scheduler", "dev-cluster", "--dir", str(directory)],
                                       cwd=REPO, stdout=subprocess.PIPE, stderr=err)
    assert proc.stdout is not None
    line: list[bytes] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(120)
    if not (line and line[0].startswith(b"ready: ")):
        proc.kill()
        proc.wait(30)
        raise AssertionError(f"dev-cluster did not get ready: {err_path.read_text()}")
    return proc


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGKILL], ids=["SIGHUP-terminal-closed", "SIGKILL-crash"])
def test_a_dev_cluster_that_dies_leaves_no_control_plane_running(
        control_plane_binaries: ControlPlaneBinaries, tmp_path: Path, sig: signal.Signals) -> None:
    """docs/dev-cluster.md: dev-cluster "runs until Ctrl-C" and the module docstring says it "then stops every
    process it started".

    Every component is started in its own session (ManagedProcess, `start_new_session=True`), so
    nothing ties it to the dev-cluster process: when that process dies without running its
    `finally` — SIGHUP when the terminal or SSH session it runs in is closed (dev-cluster handles
    only SIGINT/SIGTERM, and the components, in other sessions, get no SIGHUP of their own), or a
    crash/OOM kill (SIGKILL, which no handler sees) — etcd, kube-apiserver and kwok kept running
    for good, holding their ports and the directory, with nothing left that knows about them.
    The next dev-cluster on the same --dir must start a fresh plane.
    """
    directory = tmp_path / "dev"
    marker = str(directory)
    err_path = tmp_path / "dev-cluster.err"
    proc = _start_dev_cluster(directory, err_path)
    started: dict[int, str] = {}
    again: subprocess.Popen[bytes] | None = None
    try:
        started = {pid: cmd for pid, cmd in _children(proc.pid).items() if marker in cmd}
        assert len(started) >= 2, f"expected etcd and kube-apiserver among the children: {started}"
        proc.send_signal(sig)
        proc.wait(60)
        _wait(lambda: not any(_alive(pid, marker) for pid in started), 20)
        left = {pid: cmd.split()[0] for pid, cmd in started.items() if _alive(pid, marker)}
        assert not left, f"after {sig.name} to dev-cluster these of its processes still run: {left}"
        again = _start_dev_cluster(directory, err_path)
        again.send_signal(signal.SIGINT)
        assert again.wait(60) == 0, err_path.read_text()
    finally:
        for each in (proc, again):
            if each is not None and each.poll() is None:
                each.kill()
                each.wait(30)
        for pid in started:
            if _alive(pid, marker):
                os.kill(pid, signal.SIGKILL)
        _wait(lambda: not any(_alive(pid, marker) for pid in started), 20)


class _NoPlane:
    def __init__(self, *args: object, **kwargs: object) -> None:
        raise AssertionError("the control plane was started")


@pytest.mark.parametrize("model", ["A100 80GB", "RTX 4090"])
def test_a_gpu_model_that_cannot_be_a_label_value_is_refused_before_anything_starts(
        model: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """tests/unit/test_devcluster_cli.py: "A bad --gpu-memory was found only by the apiserver after
    the whole plane had started" — so dev-cluster checks its arguments before starting anything.

    `--gpu-model` goes verbatim into the fake nodes' `nvidia.com/gpu.product` label, but is never
    checked: a model name as a user types it ("A100 80GB", "RTX 4090") is not a label value, and
    dev-cluster starts etcd, kube-apiserver and kwok, then dies on `POST /api/v1/nodes: HTTP 422`.
    """
    monkeypatch.setattr(devcluster_cli, "LocalControlPlane", _NoPlane)
    parser = argparse.ArgumentParser()
    devcluster_cli.add_parser(parser.add_subparsers())
    args = parser.parse_args(["dev-cluster", "--dir", str(tmp_path), "--nodes", "1", "--gpu-model", model])
    try:
        status = devcluster_cli.run(args)
    except AssertionError as err:
        pytest.fail(f"--gpu-model {model!r} was not checked: {err}")
    assert status == 2 and "--gpu-model" in capsys.readouterr().err

