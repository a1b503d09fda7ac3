"""One fault scenario, end to end, and its report (shared by tests/e2e/test_faults.py and bench.soak).

:class:`FaultRun`: a GPU cluster of fake nodes (V100 nodes for exclusive classes and plain
``nvidia.com/gpu`` pods, T4 nodes for a memory-shared class), a mixed workload (plain, class,
shared, CPU-heavy pods with init containers, label and PodGroup gangs; whole-node pods of a higher
priority that can only land by preempting), a fake node agent that completes device allocations
(``tessera.dev/phase: Allocated``, which opens the scheduler's allocation gate), Tessera replicas
as subprocesses talking through the fault proxy, and the final report with every violation found.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import secrets
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from scheduler.core import annotations as ann
from scheduler.kube.controlplane import LocalControlPlane
from scheduler.kube.controlplane.fakenodes import device_id, extended_resource_name
from scheduler.kube.controlplane.processes import free_port, popen_dying_with_parent
from tessera_testing.faultproxy import FAULT_TYPES, NO_FAULTS, FaultProxyThread
from tessera_testing.invariants import (
    CLASSES_PATH,
    DEVICES_PATH,
    NODES_PATH,
    SCHEDULER_EXITED,
    ApiReader,
    ClusterView,
    ClusterWatcher,
    Violation,
    check,
    check_unbound,
    node_usage,
    pending_with_room,
    read_view,
    stranded_gang_members,
    wait_until_bound,
)

__all__ = [
    "Cluster",
    "FakeNodeAgent",
    "FaultRun",
    "PodPlan",
    "RunReport",
    "SchedulerProcess",
    "URGENT_CLASS",
    "urgent_wave",
    "write_scheduler_config",
]

JSON = dict[str, Any]
SCHEDULER_NAME = "tessera"
LEASE_NAMESPACE = "default"
_REPO = Path(__file__).resolve().parents[1]  # the repository: tessera_testing/ is at its top
_GANG_NAME = "pod-group.scheduling.sigs.k8s.io/name"
_GANG_MIN = "pod-group.scheduling.sigs.k8s.io/min-available"
_PODGROUP = "scheduling.x-k8s.io/pod-group"
_PODGROUPS = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups"
_MERGE = "application/merge-patch+json"
_PRIORITY_CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"
URGENT_CLASS = "tessera-fault-urgent"
"""The PriorityClass of urgent pods (value 1000; every other pod of a run has priority 0)."""
INFORMER_CATCH_UP = 35.0
"""Seconds an informer may still lag after watch trouble ends: its backoff caps at 30 s
(scheduler.kube.informers.BACKOFF_MAX), plus a relist."""


# --- Tessera as a child process ----------------------------------------------------------------


def write_scheduler_config(path: Path, *, leader_elect: bool, lease_name: str, lease_seconds: float = 4,
                           renew_seconds: float = 3, retry_seconds: float = 1) -> Path:
    """A binpack configuration with short leases, so leader handovers fit in a test."""
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": leader_elect, "leaseDuration": f"{lease_seconds:g}s",
                           "renewDeadline": f"{renew_seconds:g}s", "retryPeriod": f"{retry_seconds:g}s",
                           "resourceNamespace": LEASE_NAMESPACE, "resourceName": lease_name},
        "profiles": [{"schedulerName": SCHEDULER_NAME, "pluginConfig": [{"name": "NodeResourcesFit", "args": {
            "scoringStrategy": {"type": "RequestedToCapacityRatio",
                                "resources": [{"name": "cpu", "weight": 1}, {"name": "nvidia.com/gpu", "weight": 3}],
                                "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0},
                                                                       {"utilization": 100, "score": 10}]}}}}]}],
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


class SchedulerProcess:
    """``python -m scheduler run`` in its own session (so kill -9 takes the whole group), SIGKILLed
    when the harness process dies (so a test run stopped by a CI timeout leaves no replica behind)."""

    def __init__(self, kubeconfig: Path, config: Path, log_dir: Path, name: str,
                 proxy: FaultProxyThread | None = None) -> None:
        self.port = free_port()
        self.name = name
        self.proxy = proxy  # the fault proxy this replica talks through
        self.identity = f"{name}-{self.port}"
        self.log_path = log_dir / f"{self.identity}.log"
        self.args = [sys.executable, "-m", "scheduler", "run", "--kubeconfig", str(kubeconfig), "--config",
                     str(config), "--bind-address", "127.0.0.1", "--port", str(self.port), "--identity", self.identity]
        self.proc: subprocess.Popen[bytes] | None = None
        self.killed = False  # by us: its death is not a violation

    def start(self) -> None:
        env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
               "TESSERA_LOG_FORMAT": "json"}
        with open(self.log_path, "ab") as log:
            self.proc = popen_dying_with_parent(self.args, stdout=log, stderr=subprocess.STDOUT, cwd=_REPO, env=env)

    async def wait_ready(self, timeout: float = 40.0) -> None:
        deadline = time.monotonic() + timeout
        async with aiohttp.ClientSession(trust_env=False) as session:
            while time.monotonic() < deadline:
                if not self.alive():
                    raise RuntimeError(f"{self.identity} exited with {self.returncode}:\n{self.log_tail()}")
                with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError):
                    async with session.get(f"http://127.0.0.1:{self.port}/readyz",
                                           timeout=aiohttp.ClientTimeout(total=2)) as response:
                        if response.status == 200:
                            return
                await asyncio.sleep(0.2)
        raise RuntimeError(f"{self.identity} not ready after {timeout}s:\n{self.log_tail()}")

    def kill(self) -> None:
        """kill -9 of the whole process group."""
        self.killed = True
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def terminate(self, timeout: float = 20.0) -> int | None:
        self.killed = True
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.proc.poll() if self.proc is not None else None

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


# --- the cluster and the workload ---------------------------------------------------------------


@dataclass
class Cluster:
    """Fake GPU nodes and classes of one run; names carry the run id so runs never collide."""

    rid: str
    v100_nodes: list[str] = field(default_factory=list)
    t4_nodes: list[str] = field(default_factory=list)
    gpus_per_node: int = 4
    exclusive_class: str = ""  # model V100
    big_class: str = ""  # memory > 20Gi (V100 too: devices matching two classes)
    shared_class: str = ""  # model T4, sharing memory in 1Gi units

    def resource(self, cls: str) -> str:
        return f"class.tessera.dev/{cls}"

    @property
    def nodes(self) -> list[str]:
        return self.v100_nodes + self.t4_nodes

    def devices_of(self, node: str) -> list[str]:
        return [extended_resource_name(node, device_id(node, i)) for i in range(self.gpus_per_node)]


def build_cluster(plane: LocalControlPlane, rid: str, *, v100_nodes: int = 8, t4_nodes: int = 2,
                  gpus: int = 4) -> Cluster:
    """Create the nodes, their ExtendedResources and three classes (synchronous: run in a thread)."""
    cluster = Cluster(rid, gpus_per_node=gpus)
    cluster.v100_nodes = add_nodes(plane, cluster, "v100", v100_nodes)
    cluster.t4_nodes = add_nodes(plane, cluster, "t4", t4_nodes)
    cluster.exclusive_class, cluster.big_class, cluster.shared_class = f"v100-{rid}", f"big-{rid}", f"slice-{rid}"
    for name, selector, sharing in (
            (cluster.exclusive_class, {"matchLabels": {"model": "V100"}}, None),
            (cluster.big_class, {"matchExpressions": [{"key": "memory", "operator": "Gt", "values": ["20Gi"]}]}, None),
            (cluster.shared_class, {"matchLabels": {"model": "T4"}}, {"dimension": "memory", "unit": "1Gi"})):
        spec: JSON = {"selector": selector}
        if sharing is not None:
            spec["sharing"] = sharing
        plane.admin.create(CLASSES_PATH, {"apiVersion": "tessera.dev/v1alpha1", "kind": "ResourceClass",
                                          "metadata": {"name": name, "labels": {"tessera.dev/fault-run": rid}},
                                          "spec": spec})
    return cluster


def add_nodes(plane: LocalControlPlane, cluster: Cluster, model: str, count: int) -> list[str]:
    if count <= 0:
        return []
    memory = "16Gi" if model == "t4" else "32Gi"
    return plane.add_fake_gpu_nodes(count, cluster.gpus_per_node, model.upper(), memory,
                                    prefix=f"{cluster.rid}-{model}", labels={"tessera.dev/fault-run": cluster.rid},
                                    workers=4, agent_heartbeat=True)


def delete_cluster(plane: LocalControlPlane, rid: str) -> None:
    """Remove a run's nodes, devices and classes (pods are the namespace's business)."""
    selector = f"labelSelector=tessera.dev%2Ffault-run%3D{rid}"
    for path in (DEVICES_PATH, CLASSES_PATH):
        plane.admin.request("DELETE", f"{path}?{selector}", ok=(200, 202, 404))
    for item in plane.admin.get(f"{NODES_PATH}?{selector}")["items"]:
        plane.admin.delete(f"{NODES_PATH}/{item['metadata']['name']}")
    for item in plane.admin.get(DEVICES_PATH)["items"]:  # add_fake_gpu_nodes labels devices by node only
        if item["spec"]["nodeName"].startswith(f"{rid}-"):
            plane.admin.delete(f"{DEVICES_PATH}/{item['metadata']['name']}")


@dataclass
class PodPlan:
    obj: JSON
    must_bind: bool  # the workload is sized so that this pod fits once faults stop
    # not waited for: bound at the end unless the apiserver's state has no room for it (an urgent
    # pod's room depends on what preemption could free, which the harness does not predict)
    if_room: bool = False

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])


def pod(name: str, limits: dict[str, str] | None = None, *, cpu: str = "1", labels: dict[str, str] | None = None,
        node_selector: dict[str, str] | None = None, init_cpu: str | None = None,
        priority_class: str | None = None) -> JSON:
    container: JSON = {"name": "main", "image": "busybox",
                       "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}, **({"limits": limits} if limits else {})}}
    spec: JSON = {"schedulerName": SCHEDULER_NAME, "terminationGracePeriodSeconds": 0, "containers": [container]}
    if init_cpu is not None:
        spec["initContainers"] = [{"name": "setup", "image": "busybox", "resources": {"requests": {"cpu": init_cpu}}}]
    if node_selector:
        spec["nodeSelector"] = node_selector
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


_V100 = {"nvidia.com/gpu.product": "V100"}


def wave(cluster: Cluster, tag: str, rng: random.Random, *, plain: int = 2, exclusive: int = 2, big: int = 1,
         shared: int = 3, cpu_heavy: int = 1, label_gangs: int = 1, podgroup_gangs: int = 1,
         impossible_gang: bool = False) -> tuple[list[JSON], list[PodPlan]]:
    """One batch of mixed pods (and the PodGroups its gangs need), names prefixed with ``tag``.

    Plain ``nvidia.com/gpu`` pods are kept on the V100 nodes, where they share the GPU count with
    class pods; the T4 nodes hold the shared-memory class. The impossible gang (three members
    asking for more GPUs than any node has) must end with nobody bound.
    """
    plans: list[PodPlan] = []
    groups: list[JSON] = []
    for i in range(plain):
        plans.append(PodPlan(pod(f"{tag}-plain-{i}", {"nvidia.com/gpu": str(rng.choice((1, 1, 2)))},
                                 node_selector=_V100), True))
    for i in range(exclusive):
        plans.append(PodPlan(pod(f"{tag}-v100-{i}", {cluster.resource(cluster.exclusive_class): "1"}), True))
    for i in range(big):
        plans.append(PodPlan(pod(f"{tag}-big-{i}", {cluster.resource(cluster.big_class): "1"}), True))
    for i in range(shared):
        plans.append(PodPlan(pod(f"{tag}-slice-{i}", {cluster.resource(cluster.shared_class): str(rng.choice((2, 4, 6)))},
                                 cpu="500m"), True))
    for i in range(cpu_heavy):  # an init container dominates: at most one of these per 64-CPU node
        plans.append(PodPlan(pod(f"{tag}-cpu-{i}", cpu="20", init_cpu="40"), True))
    for g in range(label_gangs):
        labels = {_GANG_NAME: f"{tag}-lg{g}", _GANG_MIN: "3"}
        for i in range(3):
            plans.append(PodPlan(pod(f"{tag}-lg{g}-{i}", {cluster.resource(cluster.exclusive_class): "1"},
                                     labels=labels), True))
    for g in range(podgroup_gangs):
        name = f"{tag}-pg{g}"
        groups.append({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                       "metadata": {"name": name}, "spec": {"minMember": 2}})
        plans.append(PodPlan(pod(f"{name}-ps", cpu="2", labels={_PODGROUP: name}), True))  # heterogeneous gang
        for i in range(2):
            plans.append(PodPlan(pod(f"{name}-w{i}", {"nvidia.com/gpu": "1"}, labels={_PODGROUP: name},
                                     node_selector=_V100), True))
    if impossible_gang:
        labels = {_GANG_NAME: f"{tag}-huge", _GANG_MIN: "3"}
        for i in range(3):
            plans.append(PodPlan(pod(f"{tag}-huge-{i}", {"nvidia.com/gpu": str(cluster.gpus_per_node * 2)},
                                     labels=labels), False))
    return groups, plans


def urgent_wave(cluster: Cluster, tag: str, count: int) -> tuple[list[JSON], list[PodPlan]]:
    """``count`` whole-V100-node pods of :data:`URGENT_CLASS`: on a cluster the earlier waves
    have spread over, each lands only by preempting (victims: whole gangs or single pods)."""
    plans = [PodPlan(pod(f"{tag}-urgent-{i}", {"nvidia.com/gpu": str(cluster.gpus_per_node)}, node_selector=_V100,
                         priority_class=URGENT_CLASS), False, if_room=True) for i in range(count)]
    return [], plans


# --- the fake node agent ----------------------------------------------------------------------


HEARTBEAT_EVERY = 5  # sweeps (seconds) between device heartbeats


class FakeNodeAgent:
    """Plays the node agent: marks a bound pod's devices ``Allocated`` shortly after binding.

    Why: Tessera binds at most one ``Allocating`` pod per node and device resource at a time and
    waits for the agent (the allocation gate). With fake nodes nobody would ever answer, so the
    gate would serialise everything forever. Talks to the apiserver directly, not via the proxy.
    """

    def __init__(self, api: ApiReader, watcher: ClusterWatcher, rng: random.Random,
                 delay: tuple[float, float] = (0.05, 0.3)) -> None:
        self.api = api
        self.watcher = watcher
        self.rng = rng
        self.delay = delay
        self.allocated = 0
        self.paused = False
        self._inflight: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._sweeper: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.watcher.on_pod(self._seen)
        self._sweeper = asyncio.create_task(self._sweep(), name="agent-sweep")

    async def stop(self) -> None:
        tasks = [*self._tasks, *([self._sweeper] if self._sweeper is not None else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _seen(self, event_type: str, obj: JSON) -> None:
        if event_type == "DELETED" or self.paused:
            return
        meta = obj.get("metadata") or {}
        if not (obj.get("spec") or {}).get("nodeName") or (meta.get("annotations") or {}).get(ann.PHASE) != ann.PHASE_ALLOCATING:
            return
        uid = str(meta.get("uid"))
        if uid in self._inflight:
            return
        self._inflight.add(uid)
        task = asyncio.get_running_loop().create_task(self._allocate(uid, str(meta["namespace"]), str(meta["name"])))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _allocate(self, uid: str, namespace: str, name: str) -> None:
        try:
            await asyncio.sleep(self.rng.uniform(*self.delay))
            patch = {"metadata": {"uid": uid, "annotations": {ann.PHASE: ann.PHASE_ALLOCATED}}}
            status, _ = await self.api.request("PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}", patch,
                                               content_type=_MERGE, timeout=5)
            if status == 200:
                self.allocated += 1
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
            pass  # apiserver down: the sweep retries
        finally:
            self._inflight.discard(uid)

    async def _sweep(self) -> None:
        sweeps = 0
        while True:
            if sweeps % HEARTBEAT_EVERY == 0:
                await self._heartbeat()
            sweeps += 1
            await asyncio.sleep(1.0)
            for obj in list(self.watcher.view.pods.values()):
                self._seen("MODIFIED", obj)

    async def _heartbeat(self) -> None:
        """Stamp every device's lastHeartbeatTime, as a running agent does: the scheduler holds
        the allocation gate only on nodes an agent serves."""
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        for name in list(self.watcher.view.devices):
            try:
                await self.api.request("PATCH", f"{DEVICES_PATH}/{name}/status",
                                       {"status": {"lastHeartbeatTime": now}}, content_type=_MERGE, timeout=5)
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
                return  # apiserver down: the next sweep tries again


# --- one run ----------------------------------------------------------------------------------


@dataclass
class RunReport:
    name: str
    seed: int
    seconds: float
    pods: int
    bound: int
    must_bind: int
    faults: dict[str, int]
    violations: list[Violation]
    logs: list[str]
    first_bound: dict[str, str] = field(default_factory=dict)  # pod key -> first node, churned pods too
    events: list[str] = field(default_factory=list)  # what the harness did, when
    evicted: int = 0  # pods gone while urgent pods were about: preemption's victims

    @property
    def scheduled(self) -> int:
        """Pods of the run that were bound at some point (those deleted later included)."""
        return len(self.first_bound)

    def as_dict(self) -> JSON:
        return {"name": self.name, "seed": self.seed, "seconds": round(self.seconds, 1), "pods": self.pods,
                "bound": self.bound, "scheduled": self.scheduled, "must_bind": self.must_bind, "faults": self.faults,
                "violations": [v.as_dict() for v in self.violations], "logs": self.logs, "events": self.events,
                "evicted": self.evicted}

    def summary(self) -> str:
        lines = [f"{self.name} (seed {self.seed}): {self.bound}/{self.pods} pods bound in {self.seconds:.0f}s, "
                 f"faults {dict((k, v) for k, v in self.faults.items() if v)}, "
                 f"{self.evicted} evicted by preemption, {len(self.violations)} violation(s)"]
        lines += [f"  {v}" for v in self.violations]
        if self.violations:
            lines += [f"  harness: {', '.join(self.events)}"] if self.events else []
            lines += [f"  log: {path}" for path in self.logs]
        return "\n".join(lines)


class FaultRun:
    """One scenario: ``async with FaultRun(plane, tmp, seed=1) as run: ...; report = await run.finish()``.

    Owns a namespace (unless given one), a cluster with unique names, the watcher, the fake node
    agent, the proxy and the Tessera replicas. Faults the harness itself causes (kills, apiserver
    restarts, deletions, class edits) are counted next to the proxy's in :attr:`faults`.
    """

    def __init__(self, plane: LocalControlPlane, workdir: Path, *, seed: int = 0, replicas: int = 1,
                 leader_elect: bool | None = None, namespace: str | None = None, name: str = "run",
                 agent_delay: tuple[float, float] = (0.05, 0.3), v100_nodes: int = 8, t4_nodes: int = 2,
                 proxy_per_replica: bool = False) -> None:
        self.plane = plane
        self.workdir = workdir
        self.seed = seed
        self.rng = random.Random(seed)
        self.name = name
        self.rid = f"f{secrets.token_hex(3)}"
        self.namespace = namespace or f"{name[:40].strip('-')}-{self.rid}".lower().replace("_", "-")
        self._own_namespace = namespace is None
        self.replica_count = replicas
        self.leader_elect = replicas > 1 if leader_elect is None else leader_elect
        self.lease_name = f"tessera-{self.rid}"
        self.agent_delay = agent_delay
        self.shape = (v100_nodes, t4_nodes)
        self.api = ApiReader(plane.server, plane.ca_file, plane.admin_token)
        self.watcher = ClusterWatcher(self.api)
        self.agent = FakeNodeAgent(self.api, self.watcher, random.Random(seed + 1), agent_delay)
        self.proxy = FaultProxyThread(plane.server, plane.ca_file, seed=seed)
        self.proxies = [self.proxy]
        self.proxy_per_replica = proxy_per_replica
        self.cluster = Cluster(self.rid)
        self.replicas: list[SchedulerProcess] = []
        self.plans: list[PodPlan] = []
        self.harness_faults: Counter[str] = Counter()
        self.blind: list[tuple[float, float]] = []
        self.log: list[str] = []  # what the harness did, with seconds since start (for reports)
        self.started = time.monotonic()
        self.urgent = False  # urgent pods were submitted: lower-priority pods may be preempted
        self.kubeconfig = workdir / f"{self.rid}-proxy.kubeconfig"
        self.config = workdir / f"{self.rid}-config.yaml"
        self._replica_names = (f"{self.rid}-{i}" for i in range(1000))
        self._closed = False

    # --- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> FaultRun:
        try:
            await self.start()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self._own_namespace:
            await self._call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                            "metadata": {"name": self.namespace}})
        self.cluster = await asyncio.to_thread(build_cluster, self.plane, self.rid, v100_nodes=self.shape[0],
                                               t4_nodes=self.shape[1])
        await self.watcher.start()
        self.agent.start()
        self.proxy.start()
        self.proxy.write_kubeconfig(self.kubeconfig, self.plane.admin_token)
        write_scheduler_config(self.config, leader_elect=self.leader_elect, lease_name=self.lease_name)
        for _ in range(self.replica_count):
            self.add_replica()
        await asyncio.gather(*(r.wait_ready() for r in self.replicas))

    async def close(self) -> None:
        """Kill the replicas, stop proxies, agent and watcher, delete the namespace and cluster
        objects. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for replica in self.replicas:
            replica.kill()
        for proxy in self.proxies:
            proxy.stop()
        await self.agent.stop()
        await self.watcher.stop()
        if self._own_namespace:
            with contextlib.suppress(Exception):
                await self.api.request("DELETE", f"/api/v1/namespaces/{self.namespace}/pods",
                                       params={"gracePeriodSeconds": "0"})
                await self.api.request("DELETE", f"/api/v1/namespaces/{self.namespace}")
        with contextlib.suppress(Exception):
            await asyncio.to_thread(delete_cluster, self.plane, self.rid)
        await self.api.close()

    # --- building blocks for scenarios -------------------------------------------------------

    def add_replica(self) -> SchedulerProcess:
        """Start one more Tessera; with ``proxy_per_replica`` (after the first) it gets a proxy of
        its own, so one replica can be cut off while the others are not."""
        name = next(self._replica_names)
        proxy, kubeconfig = self.proxy, self.kubeconfig
        if self.proxy_per_replica and self.replicas:
            proxy = FaultProxyThread(self.plane.server, self.plane.ca_file, seed=self.seed + len(self.proxies)).start()
            self.proxies.append(proxy)
            kubeconfig = proxy.write_kubeconfig(self.workdir / f"{name}-proxy.kubeconfig", self.plane.admin_token)
        replica = SchedulerProcess(kubeconfig, self.config, self.workdir, name, proxy)
        replica.start()
        self.replicas.append(replica)
        return replica

    async def _call(self, method: str, path: str, body: Any = None, ok: Sequence[int] = (200, 201),
                    content_type: str = "application/json") -> Any:
        """An admin request with retries (the apiserver may be restarting under us)."""
        for attempt in range(60):
            try:
                status, doc = await self.api.request(method, path, body, content_type=content_type)
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
                await asyncio.sleep(0.5)
                continue
            if status in ok:
                return doc
            if status == 409 and method == "POST" and attempt:
                return doc  # our earlier attempt landed
            if status >= 500 or status == 429:
                await asyncio.sleep(0.5)
                continue
            raise RuntimeError(f"{method} {path}: HTTP {status}: {doc!r:.300}")
        raise RuntimeError(f"{method} {path}: apiserver unavailable")

    def wave(self, tag: str, **mix: Any) -> tuple[list[JSON], list[PodPlan]]:
        return wave(self.cluster, tag, self.rng, **mix)

    async def submit(self, batch: tuple[list[JSON], list[PodPlan]], *, pause: float = 0.0) -> None:
        """Create the PodGroups, then the pods (in a shuffled order, optionally paced)."""
        groups, plans = batch
        for group in groups:
            await self._call("POST", _PODGROUPS.format(namespace=self.namespace), group)
        plans = list(plans)
        self.rng.shuffle(plans)
        for plan in plans:
            await self._call("POST", f"/api/v1/namespaces/{self.namespace}/pods", plan.obj)
            self.plans.append(plan)
            if pause:
                await asyncio.sleep(pause)

    async def submit_urgent(self, tag: str, count: int) -> None:
        """Create :data:`URGENT_CLASS` (once per control plane) and ``count`` urgent pods."""
        await self._call("POST", _PRIORITY_CLASSES, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                                     "metadata": {"name": URGENT_CLASS}, "value": 1000},
                         ok=(200, 201, 409))
        self.urgent = True
        batch = urgent_wave(self.cluster, tag, count)
        # The Priority admission plugin reads classes from its own informer: a pod naming a class
        # created a moment ago is refused (403) until the class reaches it. A dry run finds out.
        probe = batch[1][0].obj
        for _ in range(50):
            with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError, OSError):
                status, _doc = await self.api.request("POST", f"/api/v1/namespaces/{self.namespace}/pods?dryRun=All",
                                                      probe)
                if status != 403:
                    break
            await asyncio.sleep(0.2)
        await self.submit(batch)
        self.log.append(f"{time.monotonic() - self.started:.1f}s urgent wave of {count} pods")  # workload, not a fault

    def bound_keys(self) -> set[str]:
        return {first.key for first in self.watcher.first_bound.values()
                if first.key.startswith(f"{self.namespace}/")}

    async def wait_for(self, predicate: Any, timeout: float, interval: float = 0.05) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            await asyncio.sleep(interval)
        return False

    async def wait_bound(self, at_least: int, timeout: float = 30.0) -> bool:
        return await self.wait_for(lambda: len(self.bound_keys()) >= at_least, timeout)

    def count(self, fault: str, n: int = 1, subject: str = "") -> None:
        self.harness_faults[fault] += n
        self.log.append(f"{time.monotonic() - self.started:.1f}s {fault} {subject}".rstrip())

    def alive_replicas(self) -> list[SchedulerProcess]:
        return [r for r in self.replicas if r.alive()]

    async def leader(self, timeout: float = 20.0, other_than: SchedulerProcess | None = None) -> SchedulerProcess:
        """The live replica holding the lease (waits for one, other than ``other_than``)."""
        path = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{self.lease_name}"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError, OSError):
                status, doc = await self.api.request("GET", path)
                holder = (doc or {}).get("spec", {}).get("holderIdentity") if status == 200 else None
                for replica in self.replicas:
                    if replica.identity == holder and replica.alive() and replica is not other_than:
                        return replica
            await asyncio.sleep(0.2)
        raise RuntimeError(f"no live leader for lease {self.lease_name} within {timeout}s")

    async def kill(self, replica: SchedulerProcess) -> None:
        await asyncio.to_thread(replica.kill)
        self.count("kill9", subject=replica.identity)

    async def restart_apiserver(self) -> None:
        began = time.monotonic()
        await asyncio.to_thread(self.plane.restart_apiserver, 0)
        self.blind.append((began, time.monotonic() + INFORMER_CATCH_UP))
        self.count("apiserver_restart")

    def blind_windows(self) -> list[tuple[float, float]]:
        """When Tessera's watches were being disrupted (proxy faults that cut, reset or 410 them,
        apiserver restarts), each extended by the informers' longest backoff: a change the
        scheduler missed in such a window is not a stale-view bug (see ``check_history``)."""
        windows = list(self.blind)
        for proxy in self.proxies:
            history = proxy.history
            for i, (when, faults) in enumerate(history):
                if faults.disrupts_watches:
                    end = history[i + 1][0] if i + 1 < len(history) else time.monotonic()
                    windows.append((when, end + INFORMER_CATCH_UP))
        return windows

    async def delete_pod(self, name: str) -> None:
        """Delete one of our pods at once (workload churn frees capacity; it is not a fault)."""
        await self._call("DELETE", f"/api/v1/namespaces/{self.namespace}/pods/{name}?gracePeriodSeconds=0",
                         ok=(200, 202, 404))
        for plan in self.plans:
            if plan.name == name:
                plan.must_bind = plan.if_room = False

    async def delete_node(self, node: str) -> None:
        """Delete a node and its ExtendedResources (pods bound to it stay, as with a real node)."""
        await self._call("DELETE", f"{DEVICES_PATH}?labelSelector=tessera.dev%2Fnode%3D{node}", ok=(200, 202, 404))
        await self._call("DELETE", f"{NODES_PATH}/{node}", ok=(200, 202, 404))
        self.count("node_delete", subject=node)

    async def delete_device(self, device: str) -> None:
        await self._call("DELETE", f"{DEVICES_PATH}/{device}", ok=(200, 202, 404))
        self.count("device_delete", subject=device)

    async def edit_class(self, name: str, spec: JSON) -> None:
        await self._call("PATCH", f"{CLASSES_PATH}/{name}", {"spec": spec}, content_type=_MERGE)
        self.count("class_edit", subject=f"{name} {spec}")

    async def add_nodes(self, model: str, count: int) -> list[str]:
        names = await asyncio.to_thread(add_nodes, self.plane, self.cluster, model, count)
        (self.cluster.v100_nodes if model == "v100" else self.cluster.t4_nodes).extend(names)
        return names

    async def bind_by_hand(self, pod_name: str, resource: str) -> str:
        """Bind a pod ourselves with one free V100 device, as a scheduler that crashed right after
        that member's Binding would have left it; returns the node. The device is picked once
        every Binding already sent has landed and the watcher has seen it (:meth:`_quiet`):
        otherwise the harness itself could hand out a device twice."""
        await self._quiet()
        view = self.watcher.view
        held = {g for p in view.pods.values() for g in _held_devices(p)}
        used = node_usage(view)
        for node in self.cluster.v100_nodes:
            allocatable = ((view.nodes.get(node) or {}).get("status") or {}).get("allocatable") or {}
            for name in self.cluster.devices_of(node):
                device = view.devices.get(name)
                if device is None or name in held:
                    continue
                resource = device["spec"]["resourceName"]
                if used.get(node, Counter())[resource] + 1 > int(allocatable.get(resource, 0)):
                    break  # plain requests use up the node's count: no device here is really free
                grant = ann.DeviceGrant(device["spec"]["deviceID"], name, None)
                annotations = {ann.DEVICES: ann.encode_devices({"main": {resource: (grant,)}}),
                               ann.PHASE: ann.PHASE_ALLOCATING}
                await self._call("POST", f"/api/v1/namespaces/{self.namespace}/pods/{pod_name}/binding", {
                    "apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod_name, "annotations": annotations},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
                return node
        raise RuntimeError("no free V100 device to bind by hand")

    async def _quiet(self, timeout: float = 30.0) -> None:
        """Wait until no replica's request is inside a proxy (a killed replica's delayed Binding
        is still forwarded after the kill) and the watcher shows every pod of the run where a
        consistent LIST has it. A fixed pause was the old way: under load a Binding landed after
        it and was given the device the harness then bound by hand too."""
        deadline = time.monotonic() + timeout
        while any(proxy.requests_in_progress for proxy in self.proxies):
            if time.monotonic() >= deadline:
                raise RuntimeError(f"requests still in the fault proxy after {timeout}s")
            await asyncio.sleep(0.05)
        items, _ = await self.api.list(f"/api/v1/namespaces/{self.namespace}/pods")
        listed = {p["metadata"]["uid"]: (p.get("spec") or {}).get("nodeName") for p in items}

        def seen() -> bool:
            pods = self.watcher.view.pods
            return all(uid in pods and (pods[uid].get("spec") or {}).get("nodeName") == node
                       for uid, node in listed.items())

        if not await self.wait_for(seen, max(0.0, deadline - time.monotonic())):
            raise RuntimeError(f"the watcher did not catch up with the apiserver within {timeout}s")

    # --- the end ------------------------------------------------------------------------------

    @property
    def faults(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for proxy in self.proxies:
            total.update(proxy.counts)
        return {**{name: total[name] for name in FAULT_TYPES}, **self.harness_faults}

    async def finish(self, bind_timeout: float = 60.0, grace: float = 5.0, only_if_room: bool = False) -> RunReport:
        """Stop injecting, let the scheduler converge, and check every invariant (``only_if_room``:
        a pending pod is a violation only if the apiserver's state has room for it)."""
        for proxy in self.proxies:
            proxy.configure(NO_FAULTS)
        self.agent.paused = False
        must = {f"{self.namespace}/{p.name}" for p in self.plans if p.must_bind}
        evicted = await self._wait_bound(must, bind_timeout, only_if_room)
        room = {f"{self.namespace}/{p.name}" for p in self.plans if p.if_room}
        await self._settle(room, timeout=30.0)
        await asyncio.sleep(1.0)  # let stragglers (a gang's last member, events) land
        view = await read_view(self.api)
        evicted |= self._evicted(must, view)  # a preemption that ended while urgent pods settled
        must -= evicted
        violations = check(view, must_bind=must, watcher=self.watcher, grace=grace, blind=self.blind_windows(),
                           only_if_room=only_if_room)
        removed = self.watcher.removed_devices()
        violations = sorted(set(violations) | set(check_unbound(view, room, only_if_room=True, known_devices=removed)))
        for replica in self.replicas:
            if not replica.killed and not replica.alive():
                violations.append(Violation(SCHEDULER_EXITED, replica.identity,
                                            f"exited on its own with {replica.returncode}; log tail:\n"
                                            f"{replica.log_tail(1500)}"))
        ours = [p for p in view.pods.values() if p["metadata"].get("namespace") == self.namespace]
        first = {f.key: f.node for f in self.watcher.first_bound.values() if f.key.startswith(f"{self.namespace}/")}
        return RunReport(self.name, self.seed, time.monotonic() - self.started, len(ours),
                         sum(1 for p in ours if (p.get("spec") or {}).get("nodeName")), len(must), self.faults,
                         sorted(violations), [str(r.log_path) for r in self.replicas], first, list(self.log),
                         evicted=len(evicted))

    async def _wait_bound(self, must: set[str], timeout: float, only_if_room: bool) -> set[str]:
        """Wait until every pod of ``must`` is bound (``only_if_room``: or the apiserver's state
        has room for none of those left, which nothing changes once faults have stopped); returns
        those that are gone while urgent pods were about (the harness deletes only through
        :meth:`delete_pod`, which takes a pod off ``must``, so a gone pod is a preemption's
        victim): they are no longer expected."""
        deadline = time.monotonic() + timeout
        evicted: set[str] = set()
        while True:
            left = await wait_until_bound(self.api, must - evicted, min(5.0, max(0.0, deadline - time.monotonic())))
            if not left:
                return evicted
            view = await read_view(self.api)
            evicted |= self._evicted(left, view)
            left -= evicted
            if not left or time.monotonic() >= deadline:
                return evicted
            if only_if_room and not pending_with_room(view, left, self.watcher.removed_devices()):
                return evicted

    def _evicted(self, keys: set[str], view: ClusterView) -> set[str]:
        """The pods of ``keys`` no longer expected while urgent pods were about
        (:func:`no_longer_expected`; the harness's own deletions go through :meth:`delete_pod`,
        which takes them off ``must``)."""
        return no_longer_expected(keys, view) if self.urgent else set()

    async def _settle(self, keys: set[str], timeout: float, quiet: float = 8.0) -> None:
        """Wait (bounded) until every pod of ``keys`` is bound, or those pending have had neither
        room by the apiserver's state nor a nominated node for ``quiet`` seconds. A preemptor lands
        a moment after its victims are gone; a leader killed between two evictions leaves the rest
        to its successor, which takes over within the lease's duration (4 s here)."""
        deadline = time.monotonic() + timeout
        calm_since: float | None = None
        while keys and time.monotonic() < deadline:
            view = await read_view(self.api)
            pods = view.pod_by_key()
            pending = [p for key in keys if (p := pods.get(key)) is not None and not (p.get("spec") or {}).get("nodeName")]
            if not pending:
                return
            now = time.monotonic()
            if any((p.get("status") or {}).get("nominatedNodeName") for p in pending) \
                    or pending_with_room(view, keys, self.watcher.removed_devices()):
                calm_since = None
            elif calm_since is None:
                calm_since = now
            elif now - calm_since >= quiet:
                return
            await asyncio.sleep(0.5)


def no_longer_expected(keys: set[str], view: ClusterView) -> set[str]:
    """The pods of ``keys`` that are gone (preemption's victims) and the pending members of gangs
    that victims left below their minimum (:func:`stranded_gang_members`): neither can be bound."""
    return (keys - set(view.pod_by_key())) | (keys & stranded_gang_members(view))


def _held_devices(pod: JSON) -> list[str]:
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(ann.DEVICES)
    if raw is None:
        return []
    try:
        assignment = ann.decode_devices(raw)
    except ann.AnnotationError:
        return []
    return [g.device for by_resource in assignment.values() for grants in by_resource.values() for g in grants]

