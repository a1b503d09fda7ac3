"""The simulator's replay against the live shell: places where `Replay` (which plays the apiserver,
the node agent and time for the core) decided differently from `SchedulerLoop` for the same watch
events (cases a review found; each failed before its fix, for the reason its docstring gives).
"""

from __future__ import annotations

import copy
from typing import Any

import anyio

from scheduler.api.config import load_config
from scheduler.core import annotations as ann
from scheduler.kube.http import KubeHttp
from scheduler.kube.loop import SchedulerLoop
from scheduler.sim import builders as b
from scheduler.sim.replay import Replay, WatchEvent
from tests.fakeapi import FakeApi
from tests.helpers import BINPACK, Run, config, until

EXTENDED_RESOURCES = "/apis/tessera.dev/v1alpha1/extendedresources"
RESOURCE_CLASSES = "/apis/tessera.dev/v1alpha1/resourceclasses"
V100 = "class.tessera.dev/v100"


def _replay(objects: list[dict[str, Any]], cfg: str = BINPACK) -> tuple[Replay, list[Any]]:
    replay = Replay(config(cfg))
    attempts = list(replay.run(WatchEvent("ADDED", obj) for obj in objects))
    return replay, attempts


def _holding(pod: dict[str, Any], device: dict[str, Any], resource: str = V100) -> dict[str, Any]:
    """`pod` with the device annotation granting it `device` (one exclusive GPU of `resource`)."""
    grant = ann.DeviceGrant(device["spec"]["deviceID"], device["metadata"]["name"], None)
    pod["metadata"].setdefault("annotations", {})[ann.DEVICES] = ann.encode_devices({"main": {resource: (grant,)}})
    return pod


def _live_loop(api: FakeApi) -> SchedulerLoop:
    return SchedulerLoop(load_config(BINPACK), KubeHttp(api), KubeHttp(api), identity="review",  # type: ignore[arg-type]
                         seed=0)


# --- 1. a pod the replay bound loses its node to the next recorded update ----------------------

def test_a_recorded_update_of_a_pod_the_replay_bound_does_not_unbind_it() -> None:
    """A recording made while Tessera is stopped (the case docs/simulate.md recommends) shows p pending,
    then a metadata update of p (a label: a user, a controller). The replay had bound p at its
    ADDED; as the apiserver it must keep p's nodeName (spec.nodeName is immutable once set — the
    live cluster would send the update with the node). The replay instead hands the unbound object
    to the core, which treats it as a fresh pending pod ("a pod cannot lose its node"): p's
    placement is dropped and p is scheduled again — here onto the other node, which binpack
    prefers once a bound pod arrived there. The live loop never moves a bound pod."""
    run = Run()
    run.add(b.node("n1", gpus=4), b.node("n2", gpus=4))
    p = b.pod("p", limits={"nvidia.com/gpu": 1})
    p["metadata"]["resourceVersion"] = "10"
    [first] = run.add(p)
    assert first.node is not None
    elsewhere = "n2" if first.node == "n1" else "n1"
    other = b.pod("other", limits={"nvidia.com/gpu": 2}, node_name=elsewhere, scheduler="default-scheduler",
                  phase="Running")
    other["metadata"]["resourceVersion"] = "11"
    run.add(other)
    labelled = copy.deepcopy(p)
    labelled["metadata"]["resourceVersion"] = "12"
    labelled["metadata"]["labels"] = {"team": "x"}
    again = run.feed(b.event("MODIFIED", labelled))
    assert run.node_of("p") == first.node, f"p moved from {first.node} to {run.node_of('p')}"
    assert [a.pod.key for a in again] == [], "a bound pod was scheduled a second time"


# --- 2. a pod with an unusable gang label is placed but its Binding is never applied ---------------

def _gate_cluster(heartbeat: str) -> list[dict[str, Any]]:
    devices = [b.device("n", i, heartbeat=heartbeat) for i in range(2)]
    return [b.node("n", gpus=2), *devices, b.resource_class("v100", match_labels={"model": "V100"})]


def test_a_pod_with_an_unusable_gang_min_label_is_bound_and_allocated_like_any_other() -> None:
    """A non-integer `min-available` label is reported (Notice InvalidObject) but the core keeps
    the pod and schedules it as a single pod. `Replay._remember` reads any InvalidObject notice as
    "rejected" and never stores the object, so `_bind` finds no raw pod and silently does nothing:
    the pod stays assumed for ever, is never fed back bound nor marked Allocated, and holds the
    node's allocation gate — the next device pod on the node waits behind it for ever. The live
    loop POSTs its Binding (the apiserver accepts the pod), the agent allocates, the gate opens."""
    bad = b.pod("bad", limits={V100: 1}, labels={"pod-group.scheduling.sigs.k8s.io/name": "g",
                                                 "pod-group.scheduling.sigs.k8s.io/min-available": "two"})
    replay, attempts = _replay([*_gate_cluster("2026-01-01T00:00:00Z"), bad, b.pod("next", limits={V100: 1})])
    assert any(n.reason == "InvalidObject" for n in replay.stats.notices)  # reported, and still scheduled
    state = replay.scheduler.state
    placed = state.pod_by_key("default/bad")
    assert placed is not None and placed.node_name == "n", "the replay never applied bad's Binding"
    assert [(a.pod.meta.name, a.deferred) for a in attempts] == [("bad", False), ("next", False)]


# --- 3. an event the core ignored as stale is what the replay binds -------------------------------

def test_a_stale_recorded_update_is_not_what_the_replay_binds() -> None:
    """Out of order events: a-kept is ADDED at resourceVersion 5 (label app=keep, protected by a
    PodDisruptionBudget), then an older MODIFIED (resourceVersion 3, app=other) arrives. The core
    ignores it as stale, but `Replay._remember` keeps it, and when a node arrives the replay binds
    *that* object (resourceVersion stripped, so the core takes it): a-kept is now app=other in the
    replay's state. A later preemptor then evicts a-kept, which the budget protects, instead of
    b-other (what the same cluster without the stale line gives, and what the live loop — whose
    apiserver binds the current object — decides)."""
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
              "metadata": {"name": "keep", "namespace": "default",
                           "uid": b.uid_for("PodDisruptionBudget", "default", "keep")},
              "spec": {"selector": {"matchLabels": {"app": "keep"}}}, "status": {"disruptionsAllowed": 0}}
    run = Run()
    run.add(budget, b.node("n2", gpus=8),
            b.pod("b-other", node_name="n2", phase="Running", limits={"nvidia.com/gpu": 8}, labels={"app": "other"},
                  priority=200))
    kept = b.pod("a-kept", limits={"nvidia.com/gpu": 8}, labels={"app": "keep"}, priority=100)
    kept["metadata"]["resourceVersion"] = "5"
    run.add(kept)
    older = copy.deepcopy(kept)
    older["metadata"]["resourceVersion"] = "3"
    older["metadata"]["labels"] = {"app": "other"}
    run.feed(b.event("MODIFIED", older))  # stale: the core keeps resourceVersion 5
    assert run.state.pod_by_key("default/a-kept").meta.labels == {"app": "keep"}
    run.add(b.node("n1", gpus=8))
    assert run.node_of("a-kept") == "n1"
    assert run.state.pod_by_key("default/a-kept").meta.labels == {"app": "keep"}, \
        "the replay bound the stale object the core had ignored"
    run.add(b.pod("high", limits={"nvidia.com/gpu": 8}, priority=1000))
    assert run.replay.stats.evicted == {"default/b-other": "default/high"}


# --- 5. a nomination the scheduler cleared --------------------------------------------------------

def _nomination_cluster() -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Two 2-GPU nodes; `busy` holds a GPU of n2; `p` asks for class a100 (not created yet) and
    carries status.nominatedNodeName n1 from an earlier preemption; then a100 is created."""
    nodes = [b.node("n1", gpus=2), b.node("n2", gpus=2)]
    devices = [b.device(n, i) for n in ("n1", "n2") for i in range(2)]
    busy = _holding(b.pod("busy", limits={V100: 1}, node_name="n2", phase="Running"), devices[2])
    p = b.pod("p", limits={"class.tessera.dev/a100": 1})
    p["status"]["nominatedNodeName"] = "n1"
    a100 = b.resource_class("a100", match_labels={"model": "V100"})
    return [*nodes, *devices, b.resource_class("v100", match_labels={"model": "V100"}), busy], p, a100, busy


async def test_a_nomination_the_scheduler_cleared_is_not_followed_afterwards() -> None:
    """p's first attempt fails in PreFilter (no class a100): the core clears its nomination
    (`attempt.nominated_node = ""`); the live loop writes status.nominatedNodeName=null and the
    watch echoes it, so when a100 appears p is placed by score — binpack's n2, next to busy. The
    replay never writes the cleared nomination back into the pod it plays the apiserver for, so
    p's stale nominatedNodeName n1 stays in the core and p is sent to n1 ("a nominated pod tries
    its node first")."""
    cluster, p, a100, _ = _nomination_cluster()
    replay = Replay(config(BINPACK))
    first = list(replay.run(WatchEvent("ADDED", obj) for obj in [*cluster, p]))
    assert [(a.pod.meta.name, a.node, a.nominated_node) for a in first] == [("p", None, "")]  # cleared
    [after] = list(replay.run([WatchEvent("ADDED", a100)]))

    api = FakeApi()
    api.lists["/api/v1/nodes"] = [o for o in cluster if o["kind"] == "Node"]
    api.lists[EXTENDED_RESOURCES] = [o for o in cluster if o["kind"] == "ExtendedResource"]
    api.lists[RESOURCE_CLASSES] = [o for o in cluster if o["kind"] == "ResourceClass"]
    for obj in cluster:
        if obj["kind"] == "Pod":
            api.add_pod(obj)
    api.add_pod(p)
    loop = _live_loop(api)
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        await until(lambda: "nominatedNodeName" not in api.pod("default", "p")["status"])  # the loop's write
        loop._on_event("MODIFIED", copy.deepcopy(api.pod("default", "p")))  # ...and its watch echo
        loop._on_event("ADDED", copy.deepcopy(a100))
        await until(lambda: bool(api.pod("default", "p")["spec"].get("nodeName")))
        owner.cancel_scope.cancel()
    live = api.pod("default", "p")["spec"]["nodeName"]
    assert live == "n2"
    assert after.node == live, f"replay placed p on {after.node} (its cleared nomination), live on {live}"


# --- 6. a recorded Binding on the replay's node but on GPUs it gave away is not called divergence --

def test_a_recorded_binding_onto_gpus_the_replay_gave_another_pod_is_reported_as_divergence() -> None:
    """docs/simulate.md: a recording made while the live scheduler worked "can find a recorded Binding
    landing on GPUs it gave to another pod. It then says so" (the recording binds X there, where
    this replay had placed Y: the live scheduler decided otherwise). `_is_live_binding` compares
    nodes only and `_check_capacity` counts only: a live Binding onto the same node but onto the
    GPU the replay gave q leaves no count over capacity, so nothing is recorded in
    `stats.diverged`; the only trace is a DeviceConflict warning that reads like broken input."""
    devices = [b.device("n", i) for i in range(2)]
    p, q = b.pod("p", limits={V100: 1}), b.pod("q", limits={V100: 1})
    replay, attempts = _replay([b.node("n", gpus=2), *devices, b.resource_class("v100", match_labels={"model": "V100"}),
                                p, q])
    by_name = {a.pod.meta.name: a for a in attempts}
    assert by_name["p"].node == by_name["q"].node == "n"
    recorded = copy.deepcopy(p)  # the live scheduler gave p the GPU this replay gave q
    recorded["spec"]["nodeName"] = "n"
    recorded["metadata"]["resourceVersion"] = "50"
    recorded["metadata"]["annotations"] = {ann.DEVICES: by_name["q"].annotations[ann.DEVICES],
                                           ann.PHASE: ann.PHASE_ALLOCATED}
    list(replay.run([WatchEvent("MODIFIED", recorded)]))
    assert any(n.reason == "DeviceConflict" for n in replay.stats.notices)
    assert "n" in replay.stats.diverged, "a recorded Binding onto the replay's GPUs is not reported as divergence"
