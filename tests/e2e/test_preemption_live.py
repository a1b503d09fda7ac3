"""Preemption on the real control plane, with kwok finishing the victims' deletion as a kubelet
would: a high-priority gang evicting a low-priority gang whole, a PodDisruptionBudget steering the
choice (and the default scheduler's pods as victims by their priority alone) and a gang's, a device-class
preemptor evicting the pod on the right GPU model.

Priorities come from PriorityClasses (the Priority admission plugin refuses a bare spec.priority).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from scheduler.kube.controlplane import LocalControlPlane
from scheduler.kube.http import STRATEGIC_PATCH
from scheduler.kube.recorder import micro_time
from scheduler.sim import builders as b
from scheduler.view.cluster import build_view
from tests.e2e.kwok_cluster import cluster, kwok_plane, namespace_named, phase  # noqa: F401
from tests.e2e.live import REPO, Kube, eventually

LOW, HIGH = "tessera-e2e-low", "tessera-e2e-high"


async def _priority_classes(kube: Kube) -> None:
    for name, value in ((LOW, 100), (HIGH, 10000)):
        await kube.call("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
                        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                         "metadata": {"name": name}, "value": value}, ok=(201, 409))


def _pod(name: str, priority: str, limits: dict[str, Any], **extra: Any) -> dict[str, Any]:
    pod = b.pod(name, limits=limits, **extra)
    pod["spec"]["priorityClassName"] = priority
    return pod


async def _gone(kube: Kube, namespace: str, names: list[str]) -> bool:
    return all([await phase(kube, namespace, name) == "Gone" for name in names])


async def _bound(kube: Kube, namespace: str, names: list[str]) -> dict[str, str] | None:
    pods = await kube.pods(namespace)
    nodes = {name: pods[name]["spec"].get("nodeName") for name in names if name in pods}
    return nodes if len(nodes) == len(names) and all(nodes.values()) else None


async def _preempted_events(kube: Kube, namespace: str, expected: Iterable[str]) -> dict[str, str]:
    """Every `Preempted` Event of the namespace, once there is one for each of `expected` (empty
    until then): the recorder writes them after the DELETEs, so the first ones can be listed
    before the last one is written."""
    events = {e["regarding"]["name"]: e["note"] for e in await kube.events(namespace) if e["reason"] == "Preempted"}
    return events if set(expected) <= events.keys() else {}


async def test_a_high_priority_gang_evicts_a_low_priority_gang_whole(cluster: Any) -> None:
    kube, nodes = cluster
    await _priority_classes(kube)
    names = await nodes(2, 4)
    ns = await namespace_named(kube, "preempt-gangs")
    low = [_pod(f"low-{i}", LOW, {"nvidia.com/gpu": 2}, labels=b.gang_labels("train", 4)) for i in range(4)]
    for pod in low:
        await kube.create_pod(ns, pod)
    low_nodes = await eventually(lambda: _bound(kube, ns, [f"low-{i}" for i in range(4)]), timeout=30)
    high = [_pod(f"high-{i}", HIGH, {"nvidia.com/gpu": 4}, labels=b.gang_labels("serve", 2)) for i in range(2)]
    for pod in high:
        await kube.create_pod(ns, pod)
    placed = await eventually(lambda: _bound(kube, ns, ["high-0", "high-1"]), timeout=60)
    assert sorted(placed.values()) == sorted(names)
    assert await eventually(lambda: _gone(kube, ns, [f"low-{i}" for i in range(4)]), timeout=30)
    events = await eventually(lambda: _preempted_events(kube, ns, [f"low-{i}" for i in range(4)]), timeout=10)
    uids = {(await kube.pods(ns))[name]["metadata"]["uid"] for name in ("high-0", "high-1")}
    assert set(events) == {f"low-{i}" for i in range(4)}  # the whole gang: never 0 < running < 4
    # each victim's Event names the node it ran on (upstream's candidate node), whichever member took its room
    assert all(any(note == f"Preempted by pod {uid} on node {low_nodes[name]}" for uid in uids)
               for name, note in events.items())


async def test_one_pod_evicting_a_gang_whole_names_its_own_node_and_says_why_on_itself(cluster: Any) -> None:
    """A 1-GPU high-priority pod and a low-priority gang of 4 filling both nodes: the gang goes
    whole (one member fewer would leave it below its minimum). Every victim's `Preempted` Event
    names the node the preemptor is nominated to, upstream's candidate node, also the members on
    the other node (a trial read each victim's own node); the preemptor gets Tessera's own
    `Preempting` Event naming the victims and why."""
    kube, nodes = cluster
    await _priority_classes(kube)
    await nodes(2, 4)
    ns = await namespace_named(kube, "preempt-one-for-gang")
    low = [f"lowg-{i}" for i in range(4)]
    for name in low:
        await kube.create_pod(ns, _pod(name, LOW, {"nvidia.com/gpu": 2}, labels=b.gang_labels("lowg", 4)))
    low_nodes = await eventually(lambda: _bound(kube, ns, low), timeout=30)
    assert len(set(low_nodes.values())) == 2
    await kube.create_pod(ns, _pod("hi1", HIGH, {"nvidia.com/gpu": 1}))
    assert await eventually(lambda: _bound(kube, ns, ["hi1"]), timeout=60)
    assert await eventually(lambda: _gone(kube, ns, low), timeout=30)
    events = await eventually(lambda: _preempted_events(kube, ns, low), timeout=10)
    uid = (await kube.pods(ns))["hi1"]["metadata"]["uid"]
    # the node it was nominated to (it may bind on the other one, freed first, as upstream may)
    nominated = {note.rpartition(" on node ")[2] for note in events.values()}
    assert len(nominated) == 1 and nominated <= set(low_nodes.values()), events
    (node,) = nominated
    assert events == {name: f"Preempted by pod {uid} on node {node}" for name in low}
    (preempting,) = [e for e in await kube.events(ns) if e["reason"] == "Preempting"]
    assert (preempting["regarding"]["name"], preempting["type"], preempting["action"]) == ("hi1", "Normal", "Preempting")
    listed = ", ".join(f"{ns}/{name} on {low_nodes[name]}" for name in low)
    assert preempting["note"] == (f"Preempting 4 lower-priority pods to make room on {node}: {listed} "
                                  f"(gang {ns}/lowg: would fall below minMember 4)")


async def test_a_gang_eviction_that_a_dead_leader_left_half_done_is_finished(cluster: Any) -> None:
    """As a leader leaves it when it dies between two DELETEs: every victim of gang `train`
    (minimum 4) marked, one deleted. The leader now running finds the gang below its minimum and
    evicts the three marked members left. Gang `keep` was marked too but nothing of it was
    deleted (a leader that died before its first DELETE): it stays whole and running."""
    kube, nodes = cluster
    await _priority_classes(kube)
    await nodes(3, 4)
    ns = await namespace_named(kube, "preempt-unfinished")
    train, keep = [f"train-{i}" for i in range(4)], ["keep-0", "keep-1"]
    for name in train:
        await kube.create_pod(ns, _pod(name, LOW, {"nvidia.com/gpu": 2}, labels=b.gang_labels("train", 4)))
    for name in keep:
        await kube.create_pod(ns, _pod(name, LOW, {"nvidia.com/gpu": 2}, labels=b.gang_labels("keep", 2)))
    assert await eventually(lambda: _bound(kube, ns, train + keep), timeout=30)
    condition = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                 "message": "tessera: preempting to accommodate a higher priority pod",
                 "lastTransitionTime": micro_time().split(".")[0] + "Z"}
    for name in train + keep:
        await kube.call("PATCH", f"/api/v1/namespaces/{ns}/pods/{name}/status", {"status": {"conditions": [condition]}},
                        content_type=STRATEGIC_PATCH)
    await kube.call("DELETE", f"/api/v1/namespaces/{ns}/pods/train-0")
    assert await eventually(lambda: _gone(kube, ns, train), timeout=30)
    events = await eventually(lambda: _preempted_events(kube, ns, train[1:]), timeout=10)
    assert events == {name: "Preempted to finish the eviction of gang " + ns + "/train, which an earlier leader "
                      "began: the gang was below its minimum" for name in train[1:]}
    pods = await kube.pods(ns)
    assert sorted(pods) == keep and all(not pod["metadata"].get("deletionTimestamp") for pod in pods.values())


async def test_a_pdb_steers_the_victims_and_another_schedulers_pod_is_a_victim_by_priority(cluster: Any) -> None:
    kube, nodes = cluster
    await _priority_classes(kube)
    first, second = await nodes(2, 2)
    ns = await namespace_named(kube, "preempt-pdb")
    guarded = _pod("guarded", LOW, {"nvidia.com/gpu": 2}, labels={"app": "db"}, node_name=first)
    theirs = _pod("theirs", LOW, {"nvidia.com/gpu": 2}, scheduler="default-scheduler", node_name=second)
    await kube.create_pod(ns, guarded)
    await kube.create_pod(ns, theirs)
    await kube.call("POST", f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
                    {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "db"},
                     "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}})

    async def budget_counted() -> bool:  # the disruption controller has looked at the budget
        pdb = (await kube.call("GET", f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/db")).json()
        return bool(pdb.get("status", {}).get("observedGeneration") == pdb["metadata"]["generation"])

    await eventually(budget_counted, timeout=30)
    await kube.create_pod(ns, _pod("urgent", HIGH, {"nvidia.com/gpu": 2}))
    placed = await eventually(lambda: _bound(kube, ns, ["urgent"]), timeout=60)
    assert placed == {"urgent": second}
    assert await eventually(lambda: _gone(kube, ns, ["theirs"]), timeout=30)
    assert await phase(kube, ns, "guarded") == "Running"


async def test_a_gang_preemptor_leaves_a_budgeted_pod_when_other_nodes_would_do(cluster: Any) -> None:
    """The dev-cluster trial: `precious` (budget: none may go) and a filler on the first V100
    node, two fillers on each other node; a gang of 2 x 8 GPUs that prefers the first V100 node
    evicted `precious` there. Other nodes of unprotected fillers do: `precious` stays."""
    kube, nodes = cluster
    await _priority_classes(kube)
    v100 = await nodes(2, 8, "V100")
    t4 = await nodes(2, 8, "T4")
    ns = await namespace_named(kube, "preempt-gang-pdb")
    gpu = {"nvidia.com/gpu": 4}
    await kube.create_pod(ns, _pod("precious", LOW, gpu, labels={"app": "precious"}, node_name=v100[0]))
    fillers = [f"filler-{i}" for i in range(7)]
    for name, node in zip(fillers, [v100[0], v100[1], v100[1], t4[0], t4[0], t4[1], t4[1]]):
        await kube.create_pod(ns, _pod(name, LOW, gpu, node_name=node))
    await kube.call("POST", f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
                    {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "precious"},
                     "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "precious"}}}})

    async def budget_counted() -> bool:  # the disruption controller counts `precious` healthy: 0 allowed
        pdb = (await kube.call("GET", f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/precious")).json()
        status = pdb.get("status", {})
        return bool(status.get("observedGeneration") == pdb["metadata"]["generation"]
                    and status.get("currentHealthy") == 1)

    await eventually(budget_counted, timeout=30)
    await kube.call("POST", f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups",
                    b.podgroup("urgent", 2, namespace=ns))
    prefer = {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "preference": {"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [v100[0]]}]}}]}}}
    urgent = ["urgent-0", "urgent-1"]
    for name in urgent:
        await kube.create_pod(ns, _pod(name, HIGH, {"nvidia.com/gpu": 8}, spec_extra=prefer,
                                       labels={"scheduling.x-k8s.io/pod-group": "urgent"}))
    placed = await eventually(lambda: _bound(kube, ns, urgent), timeout=60)
    assert v100[0] not in placed.values() and len(set(placed.values())) == 2
    async def four_events() -> dict[str, str]:  # the recorder may not have written the last ones yet
        events = await _preempted_events(kube, ns, ())
        return events if len(events) >= 4 else {}

    events = await eventually(four_events, timeout=10)
    assert "precious" not in events and len(events) == 4 and set(events) <= set(fillers)
    assert await phase(kube, ns, "precious") == "Running"


async def test_a_class_preemptor_evicts_the_pod_on_the_model_it_needs(cluster: Any) -> None:
    kube, nodes = cluster
    await _priority_classes(kube)
    (a100,) = await nodes(1, 1, "A100")
    (t4,) = await nodes(1, 1, "T4")
    ns = await namespace_named(kube, "preempt-class")
    for name, model in (("a100", "A100"), ("t4", "T4")):
        await kube.call("POST", "/apis/tessera.dev/v1alpha1/resourceclasses",
                        b.resource_class(f"e2e-{name}", match_labels={"model": model}), ok=(201, 409))
    # the A100 holder has the higher of the two low priorities: a count-only choice would evict the T4 pod
    await kube.create_pod(ns, _pod("on-a100", LOW, {"class.tessera.dev/e2e-a100": 1}))
    cheap = _pod("on-t4", LOW, {"class.tessera.dev/e2e-t4": 1})
    await kube.create_pod(ns, cheap)
    assert await eventually(lambda: _bound(kube, ns, ["on-a100", "on-t4"]), timeout=30)
    await kube.create_pod(ns, _pod("needs-a100", HIGH, {"class.tessera.dev/e2e-a100": 1}))
    placed = await eventually(lambda: _bound(kube, ns, ["needs-a100"]), timeout=60)
    assert placed == {"needs-a100": a100}
    assert await eventually(lambda: _gone(kube, ns, ["on-a100"]), timeout=30)
    pods = await kube.pods(ns)
    assert pods["on-t4"]["spec"]["nodeName"] == t4 and pods["on-t4"]["status"]["phase"] == "Running"


async def test_a_nominated_preemptor_waits_for_its_terminating_victim_without_a_second_wave(
        tessera: Any, kubectl: Kube, namespace: str, clean_cluster: LocalControlPlane) -> None:
    """On the shared plane there is no kubelet (and no kwok): a deleted bound pod stays
    Terminating. The preemptor is nominated, keeps its room, evicts nothing more, and is bound the
    moment its victim is finally gone. Meanwhile `kubectl tessera nodes` shows the room kept for
    it `nominated`, not free, as the leader counts it, and `explain` on a lower pod it keeps out
    names it."""
    loop = await tessera("config/binpack.yaml")
    await _priority_classes(kubectl)
    node = b.node("preempt-node", gpus=4)
    await kubectl.create("/api/v1/nodes", node)
    try:
        await _nominated_then_bound(loop, kubectl, namespace, node, clean_cluster)
    finally:  # the shared plane: later tests (test_record.py) record every node there is
        await kubectl.call("DELETE", "/api/v1/nodes/preempt-node", ok=(200, 404))


async def _nominated_then_bound(loop: Any, kubectl: Kube, namespace: str, node: dict[str, Any],
                                plane: LocalControlPlane) -> None:
    """On a 4-GPU node: the victim holds 2, the preemptor needs all 4."""
    await kubectl.call("PATCH", "/api/v1/nodes/preempt-node/status", {"status": node["status"]},
                       content_type="application/merge-patch+json")
    await kubectl.create_pod(namespace, _pod("victim", LOW, {"nvidia.com/gpu": 2}, node_name="preempt-node"))
    await kubectl.create_pod(namespace, _pod("urgent", HIGH, {"nvidia.com/gpu": 4}))

    async def nominated() -> dict[str, Any] | None:
        pods = await kubectl.pods(namespace)
        urgent, victim = pods["urgent"], pods["victim"]
        terminating = victim["metadata"].get("deletionTimestamp")
        if urgent["status"].get("nominatedNodeName") == "preempt-node" and terminating:
            return victim
        return None

    victim = await eventually(nominated, timeout=30)
    target = {c["type"]: c for c in victim["status"]["conditions"]}["DisruptionTarget"]
    assert (target["status"], target["reason"], target["message"]) == (
        "True", "PreemptionByScheduler", "tessera: preempting to accommodate a higher priority pod")
    await asyncio.sleep(3)  # the preemptor's retries meanwhile must not evict anything more
    assert not (await kubectl.pods(namespace))["urgent"]["spec"].get("nodeName")
    assert list((await _preempted_events(kubectl, namespace, ["victim"]))) == ["victim"]
    assert loop.evictor.evicted == 1
    await _room_kept_shown(loop, kubectl, namespace, plane)
    await kubectl.call("DELETE", f"/api/v1/namespaces/{namespace}/pods/victim",
                       {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
    placed = await eventually(lambda: _bound(kubectl, namespace, ["urgent"]), timeout=30)
    assert placed == {"urgent": "preempt-node"}


async def _room_kept_shown(loop: Any, kubectl: Kube, namespace: str, plane: LocalControlPlane) -> None:
    """The listed view counts the room the leader keeps for `urgent` as the leader does; a
    lower pod it keeps out reads upstream's message, and explain names `urgent`."""
    view = orjson.loads(await _kubectl_tessera(plane, "nodes", "--config", "config/binpack.yaml", "-o", "json"))
    [gpus] = [n["gpus"] for n in view["nodes"] if n["name"] == "preempt-node"]
    assert [(g["state"], [(h["pod"], h["status"]) for h in g["holders"]]) for g in gpus] == \
        [("counted", [(f"{namespace}/victim", "terminating")])] * 2 + [("counted", [(f"{namespace}/urgent", "nominated")])] * 2
    leader = build_view(loop.core, source="live", now=time.time(), held=loop.core.held())
    assert (view["summary"]["used"], view["summary"]["free"]) == (leader.summary.used, leader.summary.free) == (4, 0)
    await kubectl.create_pod(namespace, _pod("small", LOW, {"nvidia.com/gpu": 2}))

    async def refused() -> str | None:
        scheduled = {c["type"]: c for c in (await kubectl.pods(namespace))["small"]["status"].get("conditions", [])}
        return scheduled["PodScheduled"]["message"] if "PodScheduled" in scheduled else None

    assert await eventually(refused, timeout=30) == (
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available: "
        "1 No preemption victims found for incoming pod.")
    explained = orjson.loads(await _kubectl_tessera(plane, "explain", "small", "-n", namespace, "--config",
                                                    "config/binpack.yaml", "-o", "json"))
    assert explained["room_kept"] == [
        f"Room on preempt-node is kept for {namespace}/urgent (priority 10000, nominated there: preemption made room "
        "for it); this pod (priority 100) would fit preempt-node without it, and no pod of priority 10000 or lower "
        "gets that room."]


async def _kubectl_tessera(plane: LocalControlPlane, *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "kubectl-tessera"), *args, "--kubeconfig", str(plane.kubeconfig), cwd=REPO,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_a_gang_with_a_podgroup_preempts_as_the_podgroup(cluster: Any) -> None:
    """A scheduler-plugins PodGroup's gang preempting as one: each victim's Event names the
    PodGroup, `Preempted by podgroup <uid> on node <node>` related to it, as kube-scheduler v1.36
    writes a pod group's preemption (framework/preemption/executor.go); the apiserver takes an
    Event related to a custom resource."""
    kube, nodes = cluster
    await _priority_classes(kube)
    names = await nodes(2, 4)
    ns = await namespace_named(kube, "preempt-podgroup")
    for i in range(2):
        await kube.create_pod(ns, _pod(f"low-{i}", LOW, {"nvidia.com/gpu": 4}))
    low_nodes = await eventually(lambda: _bound(kube, ns, ["low-0", "low-1"]), timeout=30)
    group = await kube.create(f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups",
                              b.podgroup("serve", 2, ns))
    for i in range(2):
        await kube.create_pod(ns, _pod(f"serve-{i}", HIGH, {"nvidia.com/gpu": 4},
                                       labels={"scheduling.x-k8s.io/pod-group": "serve"}))
    placed = await eventually(lambda: _bound(kube, ns, ["serve-0", "serve-1"]), timeout=60)
    assert sorted(placed.values()) == sorted(names)
    uid = group["metadata"]["uid"]
    events = await eventually(lambda: _preempted_events(kube, ns, ["low-0", "low-1"]), timeout=10)
    assert events == {name: f"Preempted by podgroup {uid} on node {node}" for name, node in low_nodes.items()}
    related = [e["related"] for e in await kube.events(ns) if e["reason"] == "Preempted"]
    assert all((r["kind"], r["apiVersion"], r["name"], r["uid"]) ==
               ("PodGroup", "scheduling.x-k8s.io/v1alpha1", "serve", uid) for r in related)
