"""Property: what the other promise tests hold still: how LISTs arrive, one informer relisting
alone, pods whose containers take GPUs in phases, node and device swaps, class edits and edits of
a bound pod's devices annotation — with Bindings in flight — never give one GPU (or more of a
shared GPU's memory than it has) to two live pods, and lose none for good.

`test_bindings_in_flight` drives the pure core the way the live loop does (Bindings in flight,
lagging and relisting watches, restarts, handovers). Its restart lists nodes first, then each kind
whole in one of six orders; its relist diffs every kind at once, a re-created pod coming as
MODIFIED. This file reuses its world and adds the dimensions it keeps fixed:

- `mixrestart`: a restart whose four LISTs (Nodes included) arrive as the informers' first lists
  deliver them — each kind's pages in key order, the kinds' pages interleaved at random (a page is
  emitted to the core as it comes, before the other kinds have synced);
- `kindrelist`: one informer's watch breaks (410 Gone): its queued events are lost, the others'
  are not, and its LIST is diffed as `Informer._replace` does (every deletion first — an object
  gone, or the old incarnation of one created again under its name — then what was added or
  changed);
- `initpod`: pods whose init containers, sidecars and app containers take whole GPUs, slices of
  a shared one and plain `nvidia.com/gpu` counts (a finished init container's GPU may be handed
  on to a later container of the pod, never to another pod);
- `nodeswap`: a Node and its ExtendedResources deleted (its bound pods stay) and created again
  with other GPUs: the same object names naming new deviceIDs, new names, or new names for the
  same deviceIDs;
- `devmove`: an ExtendedResource's `nodeName`, `deviceID` or `resourceName` edited in place;
- `classedit`: a ResourceClass edited in place (selector widened or narrowed, sharing unit,
  resourceName) rather than deleted and created again;
- `edit` / `heldwrite`: someone edits a bound pod's `tessera.dev/devices` to name another GPU;
  the core's `DevicesAnnotationChanged` asks the leader to record the union in
  `tessera.dev/held-devices` (`kube/held.py`), which lands later, or never when a restart comes
  first.

The model (`holders` here) is independent of the core: it reads only the apiserver's pods, the
Bindings in flight and the history of each pod's annotation. A live bound pod holds every GPU
(node, deviceID) any version of its devices annotation named while it was bound (its containers
keep what they were given; the node agent serves the rest from the annotation as it is); per pod a
GPU is held whole if any of its containers has it whole, else by the largest sum of slices its
containers running at once hold (`container_phases`). After every step: no GPU has two whole
holders, a whole holder beside another pod's slice, or slices over its memory; every Binding about
to go out fits beside every holder. Once everything has settled, the core's ledger equals the
pods' annotations (`check_settled_ledger`).

Scale with TESSERA_HYPOTHESIS_EXAMPLES=N (examples per property; default keeps the file short).
"""

from __future__ import annotations

import copy
import os
import random
from collections import defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import orjson
from hypothesis import HealthCheck, Phase, event, example, given, settings
from hypothesis import strategies as st

from scheduler.core import annotations as ann
from scheduler.core.framework.attempt import Attempt
from scheduler.core.state import Notice
from scheduler.sim import builders as b
from tests.property import test_bindings_in_flight as flights
from tests.property.gpu_holders import Gpu, check_grants
from tests.property.gpu_holders import check_holders as check_holders_of
from tests.property.test_bindings_in_flight import EXCLUSIVE, NODES, SHARED, Binding, Step, World
from tests.property.test_invariants import container_phases, grants_of

Obj = dict[str, Any]

# (init containers, sidecars, app containers): each a tuple of its containers' limits
INIT_KINDS: tuple[tuple[tuple[dict[str, int], ...], tuple[dict[str, int], ...], tuple[dict[str, int], ...]], ...] = (
    (({EXCLUSIVE: 1},), (), ({EXCLUSIVE: 1},)),
    (({EXCLUSIVE: 1},), ({EXCLUSIVE: 1},), ({EXCLUSIVE: 1},)),
    (({EXCLUSIVE: 2},), (), ({EXCLUSIVE: 1},)),
    ((), ({SHARED: 12},), ({SHARED: 12},)),
    (({EXCLUSIVE: 1},), (), ({SHARED: 20},)),
    (({"nvidia.com/gpu": 1},), (), ({EXCLUSIVE: 1},)),
    ((), ({EXCLUSIVE: 1},), ({"nvidia.com/gpu": 1},)),
    (({SHARED: 20}, {EXCLUSIVE: 1}), (), ({SHARED: 20},)),
)
NEW_STEPS = ("mixrestart", "mixrestart", "kindrelist", "kindrelist", "initpod", "initpod", "nodeswap",
             "devmove", "classedit", "edit", "heldwrite")
STEPS = (*flights.STEPS, *NEW_STEPS, *NEW_STEPS)
KINDS = ("Node", "ExtendedResource", "ResourceClass", "Pod")


@dataclass(frozen=True)
class Seeded(Step):
    seed: int = 0  # a restart's interleaving of the LISTs' pages


steps = st.builds(Seeded, st.sampled_from(STEPS), st.integers(0, 7), st.integers(0, 7), st.integers(0, 2**16))


@dataclass
class ListingWorld(World):
    # pod uid -> every GPU (and slice) its devices annotation named while bound (the kubelet and
    # the node agent keep what they handed out), written down as the apiserver's pod changes
    ever: dict[str, list[Obj]] = field(default_factory=dict)
    held_writes: dict[str, tuple[str, str]] = field(default_factory=dict)  # uid -> (pod key, HELD_DEVICES value)

    # --- the model: who holds which GPU ----------------------------------------------------------

    def _put_pod(self, pod: Obj, event_type: str = "MODIFIED") -> None:
        super()._put_pod(pod, event_type)
        if pod["spec"].get("nodeName"):
            self.ever.setdefault(pod["metadata"]["uid"], []).append(copy.deepcopy(pod))

    def _noticed(self, notices: list[Notice]) -> None:
        """A replica's wishes to write HELD_DEVICES (`kube/held.py`: every replica queues them, only
        the leader writes them: `heldwrite`)."""
        for notice in notices:
            if notice.reason == "DevicesAnnotationChanged" and notice.held_devices:
                self.held_writes[notice.uid] = (notice.key, notice.held_devices)

    def holders(self) -> tuple[dict[Gpu, set[str]], dict[Gpu, dict[str, Fraction]]]:
        return holders(self)

    def step(self, step: Step) -> None:
        self.now += 0.5
        self.log.append(f"{step}")
        getattr(self, "_step_" + step.kind)(step)
        check_holders(self)

    def _send(self, attempt: Attempt) -> None:
        assert attempt.node is not None
        check_decision(self, attempt)
        self.flights.append(Binding(attempt.pod.uid, attempt.pod.key, attempt.node, dict(attempt.annotations),
                                    self.term))
        self.log.append(f"  decided {attempt.pod.key} ({attempt.pod.uid}) -> {attempt.node} "
                        f"{attempt.annotations.get(ann.DEVICES, '')}")

    # --- new steps ---------------------------------------------------------------------------------

    def _step_foreign(self, step: Step) -> None:
        """As the base, the standby's watch caught up too: a catch-up reads Tessera's pods
        only (`SchedulerLoop._catch_up`), so another scheduler's pod bound while the standby's
        watch lags stays unseen by it until its watch shows it — the race any cache-based
        scheduler has with another actor, not a decision of the core's."""
        self.standby_deliver(len(self.standby_watch))
        super()._step_foreign(step)
        self.standby_deliver(len(self.standby_watch))

    def _step_restart(self, step: Step) -> None:
        self._write_held()
        super()._step_restart(step)

    def _step_handover(self, step: Step) -> None:
        self._write_held()  # the gap `_step_edit` names: the old leader wrote before it stopped
        super()._step_handover(step)

    def settle(self) -> None:
        """As the base world's, with the held-devices writes a leader owes sent first."""
        self.leading = True
        self.deliver(len(self.watch))
        self.step(Step("heldwrite", 0, 0))
        super().settle()

    def _step_mixrestart(self, step: Step) -> None:
        """The process dies (each Binding landed or not); a new core's informers list every kind at
        once, pages of one to three objects in key order, the kinds' pages interleaved."""
        assert isinstance(step, Seeded)
        self._write_held()
        self._die(step.b)
        rng = random.Random(step.seed)
        lists = {kind: sorted((obj for obj in self._objects() if obj["kind"] == kind), key=flights._key)
                 for kind in KINDS}
        order: list[str] = []
        while any(lists.values()):
            kind = rng.choice([kind for kind in KINDS if lists[kind]])
            size = rng.randint(1, 3)
            page, lists[kind] = lists[kind][:size], lists[kind][size:]
            order.append(f"{kind}x{len(page)}")
            for obj in page:
                self._on_event("ADDED", obj)
        self.log.append(f"  listed {' '.join(order)}")
        if any(pod["spec"].get("nodeName") for pod in self.pods.values()):
            event("interleaved LISTs with bound pods")

    def _step_kindrelist(self, step: Step) -> None:
        """One informer's watch ends in 410 Gone: what it had queued is lost (the other kinds' is
        not) and its LIST is diffed as `Informer._replace` does."""
        kind = KINDS[step.a % len(KINDS)]
        self.watch = [(t, obj) for t, obj in self.watch if obj["kind"] != kind]
        listed = {flights._key(obj): obj for obj in self._objects() if obj["kind"] == kind}
        stored = {store[1]: obj for store, obj in self.seen.items() if store[0] == kind}
        for key, gone in sorted(stored.items()):
            if key not in listed or listed[key]["metadata"]["uid"] != gone["metadata"]["uid"]:
                event(f"{kind} relist synthesised a deletion")
                self._on_event("DELETED", gone, listed=True)
        for key, obj in sorted(listed.items()):
            old = stored.get(key)
            if old is None or old["metadata"]["uid"] != obj["metadata"]["uid"]:
                self._on_event("ADDED", obj, listed=True)
            elif old["metadata"].get("resourceVersion") != obj["metadata"].get("resourceVersion") or old != obj:
                self._on_event("MODIFIED", obj, listed=True)

    def _step_initpod(self, step: Step) -> None:
        inits, sidecars, apps = INIT_KINDS[step.a % len(INIT_KINDS)]
        self.serial += 1
        name = f"i{self.serial}"
        init_containers = [b.container(f"init{i}", limits=limits) for i, limits in enumerate(inits)]
        init_containers += [b.container(f"side{i}", limits=limits, restart_policy="Always")
                            for i, limits in enumerate(sidecars)]
        if step.b % 2 and len(init_containers) > 1:  # a sidecar started before the plain init container
            init_containers.reverse()
        pod = b.pod(name, containers=[b.container(f"app{i}", limits=limits) for i, limits in enumerate(apps)],
                    init_containers=init_containers, priority=100 * (step.b % 3 == 2))
        pod["metadata"]["uid"] = f"{name}-{self.serial}"
        self._put_pod(pod, "ADDED")
        if step.b < 6:
            self._step_cycle(Step("cycle", 1, 0))

    def _step_nodeswap(self, step: Step) -> None:
        """A node and its ExtendedResources deleted (its pods stay bound), created again with other
        GPUs: 0 the same names naming new deviceIDs, 1 new names and deviceIDs, 2 new names for
        the same deviceIDs, 3 not created again."""
        name = NODES[step.a % len(NODES)]
        mode = step.b % 4
        if any(gpu[0] == name for gpu in (*self.holders()[0], *self.holders()[1])):
            event(f"node swapped (mode {mode}) while its GPUs are held")
        old_devices = sorted((d for d in self.devices.values() if d["spec"]["nodeName"] == name),
                             key=flights._key)
        for device in old_devices:
            del self.devices[device["metadata"]["name"]]
            self._emit("DELETED", self._stamp(device))
        node = self.nodes.pop(name, None)
        if node is not None:
            self._emit("DELETED", self._stamp(node))
        if mode == 3:
            return
        self.serial += 1
        again = b.node(name, gpus=flights.GPUS_PER_NODE)
        again["metadata"]["uid"] = f"node-{name}-{self.serial}"
        self.nodes[name] = self._stamp(again)
        self._emit("ADDED", self.nodes[name])
        for i, old in enumerate(old_devices or [b.device(name, j) for j in range(flights.GPUS_PER_NODE)]):
            device = copy.deepcopy(old)
            if mode in (0, 1):
                device["spec"]["deviceID"] = f"GPU-{name}-{self.serial}-{i}"
            if mode in (1, 2) or device["metadata"]["name"] in self.devices:  # (a name taken elsewhere: new)
                device["metadata"]["name"] = f"{name}.n{self.serial}-{i}"
            device["metadata"]["uid"] = f"er-{device['metadata']['name']}-{self.serial}"
            device["status"]["lastHeartbeatTime"] = flights.HEARTBEAT
            device = self._stamp(device)
            self.devices[device["metadata"]["name"]] = device
            self._emit("ADDED", device)

    def _step_devmove(self, step: Step) -> None:
        """An ExtendedResource edited in place: to the other node (a GPU no other object names
        there), to a new deviceID, or to another resourceName and back."""
        device = self._device(step.a)
        if device is None:
            return
        device = copy.deepcopy(device)
        spec = device["spec"]
        self.serial += 1
        mode = step.b % 3
        if mode == 0:
            spec["nodeName"] = NODES[(NODES.index(spec["nodeName"]) + 1) % len(NODES)] \
                if spec["nodeName"] in NODES else NODES[0]
            spec["deviceID"] = f"GPU-moved-{self.serial}"
            device["metadata"]["labels"] = {"tessera.dev/node": spec["nodeName"]}
        elif mode == 1:
            spec["deviceID"] = f"GPU-{spec['nodeName']}-re{self.serial}"
        else:
            spec["resourceName"] = "example.com/gpu" if spec["resourceName"] == "nvidia.com/gpu" else "nvidia.com/gpu"
        device = self._stamp(device)
        self.devices[device["metadata"]["name"]] = device
        self._emit("MODIFIED", device)

    def _step_classedit(self, step: Step) -> None:
        """A ResourceClass changed in place (same uid): what it selects, its unit, its resourceName."""
        name = ("v100", "a100", "s")[step.a % 3]
        present = [i for i, cls in enumerate(self.classes) if cls["metadata"]["name"] == name]
        if not present:
            return
        cls = copy.deepcopy(self.classes[present[0]])
        spec = cls["spec"]
        mode = step.b % 3
        if mode == 0:  # widened to both models, or back
            if "matchExpressions" in spec["selector"]:
                spec["selector"] = {"matchLabels": {"model": "A100" if name == "a100" else "V100"}}
            else:
                spec["selector"] = {"matchExpressions": [{"key": "model", "operator": "In",
                                                          "values": ["A100", "V100"]}]}
        elif mode == 1 and "sharing" in spec:
            spec["sharing"]["unit"] = "2Gi" if spec["sharing"]["unit"] == "1Gi" else "1Gi"
        else:  # another resourceName, or back to the default
            if spec.get("resourceName"):
                del spec["resourceName"]
            else:
                spec["resourceName"] = f"example.com/{name}"
        cls = self._stamp(cls)
        self.classes[present[0]] = cls
        self._emit("MODIFIED", cls)

    def _step_edit(self, step: Step) -> None:
        """Someone points a bound pod's devices annotation at another GPU of its node that no
        holder has (by the model): its containers keep the old one, the node agent may serve the
        new one. Only on pods our Bindings bound (they carry HELD_DEVICES): another actor's pod
        edited while no scheduler watched leaves nothing on the apiserver naming its old GPU. The
        core sees the edit at once; its HELD_DEVICES write lands at `heldwrite`, or before a
        restart or a handover: a leader that dies or stops leading between seeing an edit and
        writing the union takes the union with it (nothing on the apiserver names the devices the
        edit dropped; a successor whose watch lags catches up to a second edit directly and never
        sees the first), a gap not modelled here."""
        self.deliver(len(self.watch))  # the core sees the pod before and after the edit
        pods = [pod for _, pod in sorted(self.pods.items()) if pod["spec"].get("nodeName")
                and pod["status"].get("phase") not in ("Succeeded", "Failed")
                and ann.HELD_DEVICES in (pod["metadata"].get("annotations") or {})]
        if not pods:
            return
        pod = copy.deepcopy(pods[step.a % len(pods)])
        node = pod["spec"]["nodeName"]
        whole, sliced = self.holders()
        free = [d for d in sorted(self.devices.values(), key=flights._key) if d["spec"]["nodeName"] == node
                and (node, d["spec"]["deviceID"]) not in whole and (node, d["spec"]["deviceID"]) not in sliced]
        if not free:
            return
        device = free[step.b % len(free)]
        doc = orjson.loads(pod["metadata"]["annotations"][ann.DEVICES])
        for by_resource in doc.get("containers", {}).values():
            for entries in by_resource.values():
                for entry in entries[:1]:
                    entry["device"], entry["id"] = device["metadata"]["name"], device["spec"]["deviceID"]
                    entry.pop("resourceName", None)
                break
            break
        pod["metadata"]["annotations"][ann.DEVICES] = orjson.dumps(doc).decode()
        event("a bound pod's devices annotation edited")
        self._put_pod(pod)
        self.deliver(len(self.watch))

    def _step_heldwrite(self, step: Step) -> None:
        """The leader's HELD_DEVICES writer catches up (uid precondition: a pod created again under
        the name is not written)."""
        if self.leading:
            self._write_held()

    def _write_held(self) -> None:
        for uid, (key, value) in sorted(self.held_writes.items()):
            pod = self.pods.get(key)
            if pod is not None and pod["metadata"]["uid"] == uid:
                pod = copy.deepcopy(pod)
                pod["metadata"]["annotations"][ann.HELD_DEVICES] = value
                self._put_pod(pod)
        self.held_writes.clear()


def _pod_holds(pods: list[Obj], node: str) -> tuple[set[Gpu], dict[Gpu, Fraction]]:
    """What one pod holds, from every version of it that was bound: a GPU whole if any container
    of any version had it whole; else, per GPU, the largest sum of slices of the containers that
    run at once (a finished init container's slice is handed on, not added)."""
    whole: set[Gpu] = set()
    sliced: dict[Gpu, Fraction] = {}
    for pod in pods:
        phases = container_phases(pod)
        annotations = pod["metadata"].get("annotations") or {}
        for key in (ann.DEVICES, ann.HELD_DEVICES):
            per_phase: dict[tuple[Gpu, int], Fraction] = defaultdict(Fraction)
            value = annotations.get(key)
            if value is None or "version" not in orjson.loads(value):
                continue
            for container, _, device_id, _, amount in grants_of({ann.DEVICES: value}):
                gpu = (node, device_id)
                if amount is None:
                    whole.add(gpu)
                    continue
                for phase in phases.get(container, frozenset(range(len(phases) + 1))):
                    per_phase[gpu, phase] += Fraction(amount)
            for (gpu, _), amount in per_phase.items():
                sliced[gpu] = max(sliced.get(gpu, Fraction(0)), amount)
    return whole, {gpu: amount for gpu, amount in sliced.items() if gpu not in whole}


def holders(world: ListingWorld) -> tuple[dict[Gpu, set[str]], dict[Gpu, dict[str, Fraction]]]:
    """Whole holders and slices of each GPU: every live bound pod (with every version of its
    annotations since it was bound), and every Binding in flight that can still land."""
    whole: dict[Gpu, set[str]] = defaultdict(set)
    sliced: dict[Gpu, dict[str, Fraction]] = defaultdict(dict)

    def count(who: str, node: str, versions: list[Obj]) -> None:
        held, slices = _pod_holds(versions, node)
        for gpu in held:
            whole[gpu].add(who)
        for gpu, amount in slices.items():
            sliced[gpu][who] = amount

    for pod in world.pods.values():
        node = pod["spec"].get("nodeName")
        if node and pod["status"].get("phase") not in ("Succeeded", "Failed"):
            count(pod["metadata"]["uid"], node, world.ever.get(pod["metadata"]["uid"], [pod]))
    for flight in world.flights:
        target = world.pods.get(flight.key)
        if target is not None and target["metadata"]["uid"] == flight.uid and not target["spec"].get("nodeName") \
                and not target["metadata"].get("deletionTimestamp"):
            landed = copy.deepcopy(target)
            landed["metadata"]["annotations"] = {**(target["metadata"].get("annotations") or {}), **flight.annotations}
            count(f"{flight.uid} (Binding in flight, term {flight.term})", flight.node, [landed])
    return whole, sliced


def check_holders(world: ListingWorld) -> None:
    check_holders_of(*holders(world), world.log)


def check_decision(world: ListingWorld, attempt: Attempt) -> None:
    """A Binding about to go out: its GPUs fit beside every holder (the pod itself excepted)."""
    assert attempt.node is not None
    mine_whole, mine_sliced = _pod_holds([{"spec": {"containers": [{"name": c.name} for c in attempt.pod.containers
                                                                    if c.kind == "app"],
                                                    "initContainers": [
                                                        {"name": c.name, **({"restartPolicy": "Always"}
                                                                            if c.kind == "sidecar" else {})}
                                                        for c in attempt.pod.containers if c.kind != "app"]},
                                           "metadata": {"annotations": dict(attempt.annotations)}}], attempt.node)
    check_grants(attempt.pod.key, attempt.pod.uid,
                 [(gpu, None if gpu in mine_whole else mine_sliced[gpu]) for gpu in mine_whole | mine_sliced.keys()],
                 *holders(world), world.log)


def check_settled_ledger(world: ListingWorld) -> None:
    """Settled: the core charges every device a live bound pod's annotations name (DEVICES and
    HELD_DEVICES), and charges nothing no live pod names but its assumptions and holds."""
    state = world.core.state
    charged = {(device, uid) for device, use in state.ledger.use.items() for uid in (*use.exclusive, *use.shared)}
    truth: set[tuple[str, str]] = set()
    for pod in world.pods.values():
        if not pod["spec"].get("nodeName") or pod["status"].get("phase") in ("Succeeded", "Failed"):
            continue
        for key in (ann.DEVICES, ann.HELD_DEVICES):
            value = (pod["metadata"].get("annotations") or {}).get(key)
            if value is None or "version" not in orjson.loads(value):
                continue
            truth |= {(device, pod["metadata"]["uid"]) for _, _, _, device, _ in grants_of({ann.DEVICES: value})}
    missing = truth - charged
    assert not missing, f"held by live pods but not charged: {sorted(missing)}\n" + "\n".join(world.log)
    placed = {uid for uid, placement in state.placements.items() if placement.assumed} | set(state.holds)
    # an edit a scheduler saw keeps the earlier devices held though no annotation names them yet
    edited = set(state.held_assignments)
    stray = {(device, uid) for device, uid in charged - truth if uid not in placed and uid not in edited}
    assert not stray, f"charged, but no live pod holds them: {sorted(stray)}\n" + "\n".join(world.log)


EXAMPLES = int(os.environ.get("TESSERA_HYPOTHESIS_EXAMPLES", "0") or 0) or 400


@settings(max_examples=EXAMPLES, deadline=None, database=None, print_blob=True,
          phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(steps, min_size=5, max_size=60))
# found by this test before the fix: another actor's pod on a holds GPU a/0 by name; its object is
# moved to node b (another deviceID) while held; another actor binds a pod on b to it as it reads
# now; node b is created again with its GPUs under new names: the moved GPU's new name was free
@example([Seeded("foreign", 0, 0), Seeded("devmove", 0, 0), Seeded("foreign", 1, 0), Seeded("nodeswap", 1, 2),
          Seeded("initpod", 1, 0)])
def test_listing_orders_relists_and_swaps_never_give_a_gpu_twice(stream: list[Step]) -> None:
    world = ListingWorld()
    for step in stream:
        world.step(step)
    world.settle()
    if not world.flights:
        event("ledger checked settled")
        check_settled_ledger(world)
