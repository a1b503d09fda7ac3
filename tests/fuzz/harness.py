"""The fuzz driver: feed events through `Replay` (the simulator's driver around `Scheduler`) and check
every decision, every notice and the final state.

Checks (each one is an assertion, so Hypothesis minimises any input that breaks it):
- nothing raises out of `Replay.run` / `Scheduler.apply` / `Scheduler.schedule_next`; the drain
  after each event terminates (a bounded number of cycles);
- every notice is a `Notice` with a known reason and a message; every failed attempt carries an
  upstream-style message (`0/N nodes are available: ...` or "no nodes available ...");
- each decision of Tessera's: the node exists; for every resource the pod requests, the node's use
  (Tessera's own ledger) stays within allocatable, and so does the pod count; on the tracked nodes,
  whose foreign pods are modelled here independently of the code under test, the modelled load
  plus Tessera's placements stays within allocatable too; every granted device exists on that
  node, is healthy, and is held exclusively by this pod alone, or shared within its capacity;
- the ledger is consistent: node totals equal the sum of placements, device use equals the grants
  of the placements, busy counts equal the busy devices (tests/busy_model.py, with the GPUs held
  by a name the ledger keeps elsewhere);
- the good node/device/class/pods added at the end are scheduled ("the rest of the cluster keeps
  being scheduled");
- deleting every object that was ever sent (with the last object sent for it, as the apiserver
  does) leaves the cache empty: nothing leaks.
"""

from __future__ import annotations

import copy
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from hypothesis import strategies as st

from scheduler.api.config import SchedulerConfig, load_config, parse_config
from scheduler.core import annotations as ann
from scheduler.core.cycle import NO_NODES
from scheduler.core.framework.attempt import Attempt
from scheduler.core.objects import GANG_MIN_LABEL, GANG_NAME_LABEL, podgroup_api
from scheduler.core.state import ClusterState, Notice
from scheduler.sim import builders as b
from scheduler.sim.replay import Replay, WatchEvent
from tests.busy_model import busy_of
from tests.fuzz import strategies as S

REPO = __import__("pathlib").Path(__file__).resolve().parents[2]

NOTICE_REASONS = frozenset({"InvalidEvent", "UnknownKind", "InvalidObject", "BrokenDeviceAnnotation",
                            "DeviceConflict", "InvalidResourceClass", "GangTopologyMismatch",
                            "DevicesAnnotationIgnored", "HeldDevicesAnnotationIgnored", "UnknownDeviceAttribute",
                            "DeviceIDOnTwoNodes", "GPUsOvercommitted"})
MAX_CYCLES_PER_EVENT = 5_000

CONFIGS: dict[str, SchedulerConfig] = {
    "binpack": load_config(str(REPO / "config" / "binpack.yaml")),
    "spread": load_config(str(REPO / "config" / "spread.yaml")),
    "default": load_config(None),
    "fragmentation": parse_config({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "tessera",
                      "plugins": {"score": {"enabled": [{"name": "TesseraFragmentation", "weight": 2}]}},
                      "pluginConfig": [{"name": "Coscheduling", "args": {"podGroupBackoffSeconds": 3}}]}],
    }, "fuzz-fragmentation"),
    "topology": parse_config({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "tessera", "pluginConfig": [{"name": "TopologyPlacement", "args": {
            "levels": [{"nodeLabel": S.BLOCK_LABEL}, {"nodeLabel": S.RACK_LABEL}], "maxDomainTrials": 2}}]}],
    }, "fuzz-topology"),
}
configs = st.sampled_from(sorted(CONFIGS))

# --- the good objects added at the end of every stream ----------------------------------------

GOOD_NODE = "fuzz-good-node"
GOOD_CLASS_RESOURCE = "fuzzgood.example.com/class"
_GOOD_TOLERATION = [{"key": S.GOOD_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]
_GOOD_SELECTOR = {"kubernetes.io/hostname": GOOD_NODE}


def good_objects() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(cluster objects, pods): a tainted node only the good pods tolerate, its devices and class."""
    node = b.node(GOOD_NODE, cpu="8", memory="16Gi", gpus=4,
                  taints=[{"key": S.GOOD_TAINT_KEY, "value": "only", "effect": "NoSchedule"}])
    devices = [b.device(GOOD_NODE, i, model="FuzzGood", resource_name="fuzzgood.example.com/gpu") for i in range(2)]
    cls = b.resource_class("fuzz-good", match_labels={"model": "FuzzGood", "vendor": "nvidia"},
                           resource_name=GOOD_CLASS_RESOURCE, created="2000-01-01T00:00:00Z")
    extra = {"nodeSelector": _GOOD_SELECTOR, "tolerations": _GOOD_TOLERATION}
    pods = [
        b.pod("good", namespace=S.GOOD_NS, requests={"cpu": "1"}, limits={GOOD_CLASS_RESOURCE: 1}, spec_extra=extra),
        b.pod("good-gpu", namespace=S.GOOD_NS, requests={"cpu": "1"}, limits={"nvidia.com/gpu": 1}, spec_extra=extra),
    ]
    return [cls, *devices, node], pods


# --- tracked foreign pods (bound by someone else; their load is modelled here) -----------------

TRACKED_ALLOCATABLE = {"cpu": 4000, "memory": 8 * 2**30, "nvidia.com/gpu": 2, "pods": 10}


def tracked_nodes() -> list[dict[str, Any]]:
    """Valid nodes in two blocks with the same rack name (rack r0 of block b0 and of b1)."""
    return [b.node(name, cpu="4", memory="8Gi", gpus=2, pods=10, labels={S.BLOCK_LABEL: f"b{i}", S.RACK_LABEL: "r0"})
            for i, name in enumerate(S.TRACKED_NODES)]


@dataclass
class Foreign:
    obj: dict[str, Any]
    node: str
    load: Counter[str]


@st.composite
def foreign_pods(draw: st.DrawFn, max_size: int = 4) -> list[Foreign]:
    """Apiserver-valid pods bound by another scheduler to the tracked nodes, with odd labels and
    annotations (anything the apiserver lets through in a label or annotation value)."""
    out = []
    for i in range(draw(st.integers(0, max_size))):
        node = draw(st.sampled_from(S.TRACKED_NODES))
        cpu, memory, gpus = draw(st.integers(0, 3000)), draw(st.integers(0, 4096)), draw(st.integers(0, 2))
        labels: dict[str, str] = {}
        if draw(st.booleans()):
            minimum = st.text(max_size=4) | S.min_available if S.generate_known("F2") else \
                st.integers(-2, 5).map(str)
            labels = {GANG_NAME_LABEL: draw(st.sampled_from(S.GROUP_POOL)), GANG_MIN_LABEL: draw(minimum)}
        annotations = draw(st.fixed_dictionaries({}, optional={ann.DEVICES: S.device_annotations,
                                                               "example.com/note": st.text(max_size=10)}))
        obj = b.pod(f"f{i}", namespace=S.FOREIGN_NS, scheduler="default-scheduler", node_name=node, phase="Running",
                    requests={"cpu": f"{cpu}m", "memory": f"{memory}Mi"},
                    limits={"nvidia.com/gpu": gpus} if gpus else None, labels=labels, annotations=annotations)
        obj["metadata"]["uid"] = f"foreign-{i}"
        load = Counter({"cpu": cpu, "memory": memory * 2**20, "nvidia.com/gpu": gpus, "pods": 1})
        out.append(Foreign(obj, node, load))
    return out


# --- identities, for the delete-everything pass --------------------------------------------------


def identity(obj: Any) -> tuple[str, ...] | None:
    """What the apiserver would send one DELETED for; None for objects nothing could hold."""
    if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
        return None
    kind, meta = obj.get("kind"), obj["metadata"]
    if kind not in ("Pod", "Node", "ExtendedResource", "ResourceClass", "PodGroup"):
        return None
    name, namespace, uid = repr(meta.get("name")), repr(meta.get("namespace")), repr(meta.get("uid"))
    if kind in ("Pod", "Node"):
        return kind, name, namespace, uid
    if kind == "PodGroup":  # one name in each PodGroup API is two objects
        return kind, podgroup_api(obj), name, namespace
    return kind, name


def _pod_uid(obj: Any) -> str | None:
    """The raw metadata.uid Replay keys its remembered pods by."""
    if isinstance(obj, dict) and obj.get("kind") == "Pod" and isinstance(obj.get("metadata"), dict):
        uid = obj["metadata"].get("uid")
        return uid if isinstance(uid, str) else None
    return None


def check_notice(notice: Any) -> None:
    assert isinstance(notice, Notice), notice
    assert notice.reason in NOTICE_REASONS, notice
    assert isinstance(notice.message, str) and notice.message.strip(), notice


# --- the harness ---------------------------------------------------------------------------------


@dataclass
class Harness:
    config: SchedulerConfig = field(default_factory=lambda: CONFIGS["binpack"])
    replay: Replay = field(init=False)
    attempts: list[Attempt] = field(default_factory=list)
    last_sent: dict[tuple[str, ...], Any] = field(default_factory=dict)
    last_accepted: dict[tuple[str, ...], Any] = field(default_factory=dict)
    foreign: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    foreign_uids: set[str] = field(default_factory=set)
    cycles: int = 0

    def __post_init__(self) -> None:
        self.replay = Replay(self.config)
        scheduler = self.replay.scheduler
        inner = scheduler.schedule_next

        def schedule_next(now: float) -> list[Attempt] | None:
            self.cycles += 1
            assert self.cycles <= MAX_CYCLES_PER_EVENT, "the drain after one event does not terminate"
            attempts = inner(now)
            if attempts:
                self.check_attempts(attempts)
            return attempts

        scheduler.schedule_next = schedule_next  # type: ignore[method-assign]

    @property
    def state(self) -> ClusterState:
        return self.replay.scheduler.state

    # --- feeding ------------------------------------------------------------------------------

    def send(self, event_type: Any, obj: Any) -> list[Notice]:
        """One watch event through Replay.run (apply + drain + simulated Bindings)."""
        self.cycles = 0
        stats = self.replay.stats
        start = len(stats.notices)
        self.attempts += self.replay.run([WatchEvent(event_type, obj)])
        notices = stats.notices[start:]
        for notice in notices:
            check_notice(notice)
        ident = identity(obj)
        if ident is not None and event_type in ("ADDED", "MODIFIED", "DELETED"):
            self.last_sent[ident] = obj
            if not any(n.reason == "InvalidObject" for n in notices):
                self.last_accepted[ident] = obj
        return notices

    def add(self, *objects: dict[str, Any]) -> list[Notice]:
        notices = []
        for obj in objects:
            notices += self.send("ADDED", obj)
        return notices

    def base_cluster(self) -> None:
        self.add(*tracked_nodes())

    def add_foreign(self, foreign: Foreign) -> None:
        uid = foreign.obj["metadata"]["uid"]
        if uid not in self.foreign_uids:
            self.foreign_uids.add(uid)
            self.foreign[foreign.node] += foreign.load
        self.send("ADDED", copy.deepcopy(foreign.obj))

    # --- per-decision checks ------------------------------------------------------------------

    def check_attempts(self, attempts: list[Attempt]) -> None:
        state = self.state
        for attempt in attempts:
            if attempt.node is None:
                message = attempt.message
                assert message and (message.startswith("0/") or message == NO_NODES or (
                    attempt.pod.gang is not None and message.startswith("pod group "))), attempt
                continue
            pod = attempt.pod
            info = state.nodes.get(attempt.node)
            assert info is not None and info.node is not None and attempt.node in state.node_order, attempt
            placement = state.placements.get(pod.uid)
            assert placement is not None and placement.node == attempt.node
            alloc = info.node.allocatable
            assert len(info.pods) <= alloc.get("pods", 0), (attempt.node, len(info.pods), alloc)
            requested = [(r, a) for r, a in pod.requests.items()
                         if a > 0 and r != "pods" and not state.classes.is_class_resource(r)]
            if not S.generate_known("F9"):  # F9: plain + class requests for one device resource
                device_resources = {state.devices[d].resource_name for d in placement.devices if d in state.devices}
                requested = [(r, a) for r, a in requested if r not in device_resources]
            for resource, _ in requested:
                assert info.used(resource) <= alloc.get(resource, 0), \
                    f"{pod.key} on {attempt.node}: {resource} used {info.used(resource)} > allocatable {alloc.get(resource, 0)}"
            if attempt.node in S.TRACKED_NODES:
                model = self.foreign[attempt.node]
                ours = [uid for uid in info.pods if uid not in self.foreign_uids]
                assert model["pods"] + len(ours) <= alloc.get("pods", 0)
                for resource, _ in requested:
                    load = model[resource] + info.busy.get(resource, 0) + sum(
                        state.placements[uid].requests.get(resource, 0) for uid in ours)
                    assert load <= alloc.get(resource, 0), (
                        f"{pod.key} on {attempt.node}: {resource} would total {load} > allocatable "
                        f"{alloc.get(resource, 0)} counting the foreign pods bound there ({dict(model)})")
            raw = attempt.annotations.get(ann.DEVICES)
            if raw is not None:
                self._check_grants(attempt, ann.decode_devices(raw))
        self._check_topology(attempts)

    def _check_topology(self, attempts: list[Attempt]) -> None:
        """A gang with a required topology key is placed inside one domain: on nodes that all carry
        the key with one value and, when the key is a configured level, the same values of its
        ancestors (rack r0 of block b0 is not rack r0 of block b1) — a member on a node deleted
        since by the labels that node had."""
        state = self.state
        args = self.config.profiles[0].plugin_args.get("TopologyPlacement")
        levels = [level.node_label for level in getattr(args, "levels", ())]
        for attempt in attempts:
            pod = attempt.pod
            if attempt.node is None or pod.gang is None:
                continue
            topology = state.gangs.topology(pod.gang.key, pod)
            if topology is None or not topology.required:
                continue
            key = topology.required
            chain = levels[: levels.index(key) + 1] if key in levels else [key]
            domains = set()
            for uid in state.gangs.members.get(pod.gang.key, ()):
                member = state.pods.get(uid)
                node = state.node_of(uid)
                if member is None or member.gang is None or member.gang.api != pod.gang.api or node is None:
                    continue
                info = state.nodes.get(node)
                labels = info.labels if info is not None else {}  # a deleted node's: the last known
                domains.add(tuple(labels.get(label) for label in chain))
            assert len(domains) == 1 and None not in next(iter(domains)), (pod.gang.key, topology, domains)

    def _check_grants(self, attempt: Attempt, assignment: dict[str, dict[str, tuple[ann.DeviceGrant, ...]]]) -> None:
        state = self.state
        for by_resource in assignment.values():
            for resource, grants in by_resource.items():
                cls = state.classes.resource_class(resource)
                assert cls is not None, resource
                for grant in grants:
                    device = state.devices.get(grant.device)
                    assert device is not None and device.node_name == attempt.node and device.schedulable, grant
                    assert cls.matches(device), (cls.name, grant)
                    use = state.ledger.use[grant.device]
                    if grant.amount is None:
                        assert use.exclusive == {attempt.pod.uid} and not use.shared, (grant, use)
                    else:
                        assert cls.sharing is not None and not use.exclusive, (grant, use)
                        dimension = cls.sharing.dimension  # each dimension within its own capacity
                        assert grant.dimension == dimension, grant  # what the slice is of, in its annotation
                        used = sum((amount for held in use.shared.values()
                                    for (resource, granted), amount in held.items()
                                    if (granted or state.classes.sharing_dimension(resource)) in (dimension, "")),
                                   Fraction(0))
                        assert used <= device.capacity[dimension], (grant, use)

    # --- whole-state checks -------------------------------------------------------------------

    def check_ledger(self) -> None:
        state = self.state
        requested: dict[str, Counter[str]] = defaultdict(Counter)
        pods: dict[str, set[str]] = defaultdict(set)
        exclusive: dict[str, set[str]] = defaultdict(set)
        # device -> uid -> (resource, dimension its grant names) -> amount
        shared: dict[str, dict[str, dict[tuple[str, str], Fraction]]] = defaultdict(dict)
        holds = [(uid, hold.placement) for uid, hold in state.holds.items()]  # nominated pods' room: charged
        for uid, placement in [*state.placements.items(), *holds]:
            requested[placement.node].update(placement.requests)
            if uid in state.placements:
                pods[placement.node].add(uid)
            for device, amount, resource, dimension in placement.grants:
                if amount is None:
                    exclusive[device].add(uid)
                else:
                    held = shared[device].setdefault(uid, {})
                    held[resource, dimension] = held.get((resource, dimension), Fraction(0)) + amount
        in_use = {device for device, use in state.ledger.use.items() if use.busy}
        for name, info in state.nodes.items():
            assert {k: v for k, v in info.requested.items() if v} == {k: v for k, v in requested[name].items() if v}, name
            assert info.pods == pods[name], name
            busy = busy_of(state, name, info.devices.values(), in_use)
            assert info.busy == busy, (name, info.busy, busy)
            ids: dict[str, set[str]] = defaultdict(set)
            taken: dict[str, set[str]] = defaultdict(set)
            for dev_name, dev in info.devices.items():  # what DeviceLedger.refresh keeps for count_room
                ids[dev.resource_name].add(dev.device_id or dev_name)
                if not dev.schedulable or (dev_name in state.ledger.use and state.ledger.use[dev_name].busy):
                    taken[dev.resource_name].add(dev.device_id or dev_name)
            assert info.described_ids == {r: len(k) for r, k in ids.items()}, (name, info.described_ids)
            assert info.free_ids == {r: len(k - taken[r]) for r, k in ids.items()}, (name, info.free_ids)
            for on_node in info.devices.values():
                assert state.devices.get(on_node.name) is on_node, on_node.name
        for known in state.devices.values():
            assert state.nodes[known.node_name].devices.get(known.name) is known, known.name
        used = set(exclusive) | set(shared)
        assert set(state.ledger.use) == used, (set(state.ledger.use), used)
        for name, use in state.ledger.use.items():
            assert use.exclusive == exclusive.get(name, set()), name
            assert use.shared == shared.get(name, {}), name
            totals: dict[tuple[str, str], Fraction] = defaultdict(Fraction)
            for slices in use.shared.values():
                for kind, amount in slices.items():
                    totals[kind] += amount
            assert use.by_kind == totals, name
        assert not (state.pending & set(state.placements))
        assert set(state.holds) <= state.pending, "a hold of a pod that is not pending"

    def check_good_pair(self) -> None:
        """The good node, devices, class and pods, added last, are still scheduled."""
        cluster, pods = good_objects()
        for obj in cluster + pods:
            self.send("ADDED", obj)
        state = self.state
        info = state.nodes[GOOD_NODE]
        for pod in pods:
            key = f"{S.GOOD_NS}/{pod['metadata']['name']}"
            uid = state.by_key.get(key)
            assert uid is not None, f"{key} is not in the cache"
            last = self.replay.stats.final.get(key)
            assert state.node_of(uid) == GOOD_NODE, f"{key} was not scheduled: {last.message if last else 'no attempt'}"
        uid = state.by_key[f"{S.GOOD_NS}/good"]
        grants = state.placements[uid].grants
        assert len(grants) == 1 and grants[0][0] in info.devices, grants

    def delete_everything(self, accepted_only: bool = False) -> None:
        """DELETED for every object ever sent, carrying its last version; the cache must be empty."""
        last = self.last_accepted if accepted_only else self.last_sent
        for obj in reversed(list(last.values())):
            self.send("DELETED", obj)
        state = self.state
        leftovers = {
            "pods": sorted(p.key for p in state.pods.values()),
            "placements": sorted(state.placements),
            "nodes": list(state.node_order),
            "devices": sorted(state.devices),
            "device_use": sorted(state.ledger.use),
            "classes": sorted(state.classes.classes),
            "podgroups": sorted(state.gangs.podgroups),
            "pending": sorted(state.pending),
            "groups": sorted(state.gangs.members),
            "queue": sorted(self.replay.scheduler.queue.entries),
            "deferred bindings": sorted({a.node or "" for a in self.replay.scheduler.held()}),
        }
        assert not any(leftovers.values()), f"objects left in the cache after deleting everything: " \
            f"{ {k: v for k, v in leftovers.items() if v} }"
        for info in state.nodes.values():
            assert not info.requested and not info.pods and not info.busy and not info.broken, info.name
            assert not getattr(info, "allocating", None), (info.name, "allocation gate still held")

    def finish(self) -> None:
        """The end of every fuzz case: ledger, good pair, ledger again, delete everything."""
        self.check_ledger()
        self.check_good_pair()
        self.check_ledger()
        self.delete_everything(accepted_only=not S.generate_known("F3"))
