"""Pods that run and finish: kwok plays the kubelet for Tessera's fake GPU nodes.

The kwok control plane (kube-controller-manager with the Job controller, kwok with Tessera's
Stages in scheduler/data/kwok-stages.yaml) is shared with the other kwok test files
(tests/e2e/kwok_cluster.py). The shared plane of the other e2e tests runs no workload controllers
(see TEST_CONTROLLERS) and no kwok, so its bound pods stay Pending for ever.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import yaml

from scheduler.sim import builders as b
from tests.e2e.kwok_cluster import COMPLETE_DELAY, cluster, is_, kwok_plane, namespace_named, phase  # noqa: F401
from tests.e2e.live import eventually

DEPLOY_EXAMPLES = Path(__file__).resolve().parents[2] / "deploy" / "examples"


async def test_a_pod_runs_then_succeeds_after_the_delay_in_its_annotation(cluster: Any) -> None:
    kube, nodes = cluster
    (node,) = await nodes(1, 2)
    ns = await namespace_named(kube, "kwok-complete")
    pod = b.pod("short", limits={"nvidia.com/gpu": 1}, annotations={COMPLETE_DELAY: "3s"})
    await kube.create_pod(ns, pod)
    running = await eventually(lambda: is_(phase(kube, ns, "short"), "Running"), timeout=30)
    assert running
    seen = (await kube.pods(ns))["short"]
    assert seen["spec"]["nodeName"] == node and seen["status"]["podIP"]
    assert {c["type"]: c["status"] for c in seen["status"]["conditions"]}["Ready"] == "True"
    assert await eventually(lambda: is_(phase(kube, ns, "short"), "Succeeded"), timeout=30)
    # a pod without the annotation and without a Job owner keeps running
    await kube.create_pod(ns, b.pod("server", limits={"nvidia.com/gpu": 1}))
    assert await eventually(lambda: is_(phase(kube, ns, "server"), "Running"), timeout=30)
    await asyncio.sleep(3)
    assert await phase(kube, ns, "server") == "Running"


async def test_a_job_runs_in_waves_on_tessera_nodes_and_completes(cluster: Any) -> None:
    """4 one-GPU pods, all created at once, on a node with 2 GPUs: the second wave can only be
    placed on the devices the first wave frees when its pods succeed."""
    kube, nodes = cluster
    (node,) = await nodes(1, 2)
    ns = await namespace_named(kube, "kwok-job")
    template = b.pod("worker", limits={"nvidia.com/gpu": 1}, annotations={COMPLETE_DELAY: "2s"})
    spec = {key: value for key, value in template["spec"].items()}
    spec["restartPolicy"] = "Never"
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "waves"},
           "spec": {"completions": 4, "parallelism": 4, "backoffLimit": 0,
                    "template": {"metadata": {"annotations": {COMPLETE_DELAY: "2s"}}, "spec": spec}}}
    await kube.call("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", job)

    async def complete() -> Any:
        status = (await kube.call("GET", f"/apis/batch/v1/namespaces/{ns}/jobs/waves")).json()["status"]
        done = any(c["type"] == "Complete" and c["status"] == "True" for c in status.get("conditions", []))
        return status if done else None

    status = await eventually(complete, timeout=90, interval=0.5)
    assert status["succeeded"] == 4
    pods = await kube.pods(ns)
    assert len(pods) == 4 and {p["spec"]["nodeName"] for p in pods.values()} == {node}
    assert all(p["status"]["phase"] == "Succeeded" for p in pods.values())


async def test_a_bound_pod_that_is_deleted_goes_away_and_its_gpus_are_reused(cluster: Any) -> None:
    kube, nodes = cluster
    (node,) = await nodes(1, 1)
    ns = await namespace_named(kube, "kwok-delete")
    await kube.create_pod(ns, b.pod("first", limits={"nvidia.com/gpu": 1}))
    assert await eventually(lambda: is_(phase(kube, ns, "first"), "Running"), timeout=30)
    await kube.create_pod(ns, b.pod("second", limits={"nvidia.com/gpu": 1}))
    await asyncio.sleep(2)
    assert not (await kube.pods(ns))["second"]["spec"].get("nodeName")  # the node's only GPU is taken
    # an ordinary delete (30 s grace): kwok confirms it as a kubelet would, the pod disappears
    await kube.call("DELETE", f"/api/v1/namespaces/{ns}/pods/first")
    assert await eventually(lambda: is_(phase(kube, ns, "first"), "Gone"), timeout=30)
    assert await eventually(lambda: is_(phase(kube, ns, "second"), "Running"), timeout=30)
    assert (await kube.pods(ns))["second"]["spec"]["nodeName"] == node


async def test_the_shipped_gang_job_example_starts_together_and_finishes(cluster: Any) -> None:
    """deploy/examples/gang-job.yaml as a user applies it (a new user found no gang example that
    runs without Kubeflow): the four workers are placed together on one node, run, succeed, and
    the PodGroup's status follows scheduler-plugins' to Finished."""
    kube, nodes = cluster
    await nodes(2, 4)
    ns = await namespace_named(kube, "kwok-gang-example")
    group, job = yaml.safe_load_all((DEPLOY_EXAMPLES / "gang-job.yaml").read_text())
    job["spec"]["template"]["metadata"]["annotations"][COMPLETE_DELAY] = "3s"  # the example's 30 s, shortened
    await kube.call("POST", f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups", group)
    await kube.call("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", job)

    async def finished() -> Any:
        group = (await kube.call("GET", f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups/train")).json()
        status = group.get("status", {})
        return status if status.get("phase") == "Finished" else None

    status = await eventually(finished, timeout=90, interval=0.5)
    assert (status["succeeded"], status["failed"]) == (4, 0)
    # as scheduler-plugins' controller fills it (fillOccupiedObj): the members' owner, the Job
    assert status["occupiedBy"] == f"{ns}/{job['metadata']['name']}"
    pods = await kube.pods(ns)
    assert len(pods) == 4 and len({p["spec"]["nodeName"] for p in pods.values()}) == 1
    assert all(p["status"]["phase"] == "Succeeded" for p in pods.values())


async def test_the_shipped_preemption_example_evicts_one_batch_worker_for_the_urgent_pod(cluster: Any) -> None:
    """deploy/examples/preemption-{batch,urgent}.yaml as a user applies them (a new user found no
    live preemption example): the batch workers fill the GPUs, the urgent pod preempts one of them
    (DisruptionTarget, a Preempted Event naming the urgent pod), and takes its GPUs once kwok has
    deleted it; the Job's replacement worker waits."""
    kube, nodes = cluster
    await nodes(2, 8)
    ns = await namespace_named(kube, "kwok-preemption-example")
    *classes, job = yaml.safe_load_all((DEPLOY_EXAMPLES / "preemption-batch.yaml").read_text())
    (urgent,) = yaml.safe_load_all((DEPLOY_EXAMPLES / "preemption-urgent.yaml").read_text())
    for priority_class in classes:  # cluster-scoped: another run on this plane may have made them
        await kube.call("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", priority_class, ok=(201, 409))
    await kube.call("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", job)

    async def workers_running() -> bool:
        pods = (await kube.pods(ns)).values()
        return sum(1 for p in pods if p["status"].get("phase") == "Running") == 2  # 2 nodes x 8 GPUs

    await eventually(workers_running, timeout=60, interval=0.5)
    created = await kube.create_pod(ns, urgent)

    async def urgent_bound() -> str:
        return str((await kube.pods(ns)).get("urgent", {}).get("spec", {}).get("nodeName") or "")

    node = await eventually(urgent_bound, timeout=60, interval=0.5)
    preempted = [e for e in await kube.events(ns) if e["reason"] == "Preempted"]
    assert len(preempted) == 1, preempted
    assert preempted[0]["note"] == f"Preempted by pod {created['metadata']['uid']} on node {node}"
    assert preempted[0]["regarding"]["name"].startswith("batch-")

    async def replacement_waits() -> bool:  # the 2 never placed + the Job's replacement for the victim
        pods = await kube.pods(ns)
        return len([p for name, p in pods.items() if name.startswith("batch-") and not p["spec"].get("nodeName")]) == 3

    await eventually(replacement_waits, timeout=30, interval=0.5)


def _documented_pod_failure_policy() -> dict[str, Any]:
    """docs/preemption.md's Job snippet, as a user copies it."""
    block = (Path(__file__).resolve().parents[2] / "docs" / "preemption.md").read_text().split("```yaml", 1)[1]
    spec: dict[str, Any] = yaml.safe_load(block.split("```", 1)[0])["spec"]
    assert spec["backoffLimit"] == 0 and spec["podFailurePolicy"]
    return spec


async def test_a_preempted_job_pod_fails_its_job_unless_its_pod_failure_policy_ignores_it(cluster: Any) -> None:
    """docs/preemption.md: a victim counts against its Job's backoffLimit (a multi-team trial found
    it said nowhere), unless the Job's podFailurePolicy ignores DisruptionTarget, which Tessera
    sets on every victim as kube-scheduler does. Two Jobs of one 1-GPU worker (backoffLimit 0),
    one with the documented policy, fill two 1-GPU nodes (no 4- or 8-GPU pod an earlier test left
    pending fits there); two urgent pods preempt both workers."""
    kube, nodes = cluster
    await nodes(2, 1)
    ns = await namespace_named(kube, "kwok-preempted-job")
    *classes, _ = yaml.safe_load_all((DEPLOY_EXAMPLES / "preemption-batch.yaml").read_text())
    for priority_class in classes:  # cluster-scoped: another run on this plane may have made them
        await kube.call("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", priority_class, ok=(201, 409))
    documented = _documented_pod_failure_policy()

    def job(name: str, extra: dict[str, Any]) -> dict[str, Any]:
        pod = b.pod("unused", limits={"nvidia.com/gpu": 1}, annotations={COMPLETE_DELAY: "10m"})
        pod["spec"].update(priorityClassName="tessera-batch", restartPolicy="Never")
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
                "spec": {"backoffLimit": 0, **extra,
                         "template": {"metadata": {"annotations": pod["metadata"]["annotations"]},
                                      "spec": pod["spec"]}}}

    await kube.call("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", job("plain", {}))
    await kube.call("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", job("ignoring", documented))

    async def workers_running() -> bool:
        pods = (await kube.pods(ns)).values()
        return sum(1 for p in pods if p["status"].get("phase") == "Running") == 2

    await eventually(workers_running, timeout=60, interval=0.5)
    for name in ("urgent-0", "urgent-1"):
        pod = b.pod(name, limits={"nvidia.com/gpu": 1}, annotations={COMPLETE_DELAY: "10m"})
        pod["spec"]["priorityClassName"] = "tessera-urgent"
        await kube.create_pod(ns, pod)

    async def urgent_bound() -> bool:
        pods = await kube.pods(ns)
        return all(pods.get(name, {}).get("spec", {}).get("nodeName") for name in ("urgent-0", "urgent-1"))

    await eventually(urgent_bound, timeout=60, interval=0.5)

    async def conditions(name: str) -> dict[str, str]:
        status = (await kube.call("GET", f"/apis/batch/v1/namespaces/{ns}/jobs/{name}")).json()["status"]
        return {c["type"]: c.get("reason", "") for c in status.get("conditions", []) if c["status"] == "True"}

    async def plain_failed() -> bool:
        return (await conditions("plain")).get("Failed") == "BackoffLimitExceeded"

    await eventually(plain_failed, timeout=30, interval=0.5)

    async def replacement_waits() -> bool:  # the ignoring Job's new worker, no GPUs left for it
        pods = (await kube.pods(ns)).values()
        return any(p["metadata"].get("labels", {}).get("job-name") == "ignoring" and not p["spec"].get("nodeName")
                   for p in pods)

    await eventually(replacement_waits, timeout=30, interval=0.5)
    ignoring = (await kube.call("GET", f"/apis/batch/v1/namespaces/{ns}/jobs/ignoring")).json()["status"]
    assert "Failed" not in await conditions("ignoring") and not ignoring.get("failed"), ignoring
