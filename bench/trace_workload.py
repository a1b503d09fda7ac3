"""The Alibaba GPU trace (2023, "openb") as Kubernetes objects, in the FGD paper's arrival order.

Why it looks like this: the point of `bench.trace` is to compare with the numbers published in
"Beware of Fragmentation" (USENIX ATC'23), so the workload is built the way that paper's simulator
(hkust-adsl/kubernetes-scheduler-simulator) builds it — see bench/README.md for the file
references — while every object is an ordinary Node / Pod / ExtendedResource / ResourceClass that
goes through the same parsing as production input:

- order (`SortClusterPods`): pods sorted by name, then one seeded shuffle;
- inflation (`tuneUpPods`): random clones of the *name-ordered* trace pods, drawn with the same
  RNG after the shuffle, are appended until the next clone's GPU request would push the total past
  ratio × cluster GPUs (a too-large trace is trimmed by random removal, `tuneDownPods`);
- a whole-GPU pod with no model constraint asks for plain `nvidia.com/gpu: N`; with a constraint,
  N devices of an exclusive ResourceClass selecting those models; a GPU-sharing pod
  (`num_gpu == 1`, `gpu_milli < 1000`) asks for `gpu_milli` units of a sharing class over the
  devices' `gpu-milli` capacity (1000 each), so it takes that slice of ONE device.

Only the seeds match FGD's, not the permutations: FGD uses Go's math/rand, we use Python's.
"""

from __future__ import annotations

import csv
import hashlib
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scheduler.sim import builders as b

Obj = dict[str, Any]

MILLI = 1000
GPU_RESOURCE = "nvidia.com/gpu"
SHARE_DIMENSION = "gpu-milli"
MODEL_KEY = "model"
NAMESPACE = "trace"
SCHEDULER_NAME = "tessera"
NODE_PODS = 1000
# Device memory is not in the trace and nothing here selects on it; it is set so the devices look
# like what a node agent publishes. G2/G3 are undisclosed models.
MODEL_MEMORY = {"A10": "24Gi", "P100": "16Gi", "T4": "16Gi", "V100M16": "16Gi", "V100M32": "32Gi"}
DEFAULT_MEMORY = "16Gi"


class TraceError(ValueError):
    """A CSV row the benchmark cannot turn into objects (file, line and column in the message)."""


@dataclass(frozen=True, slots=True)
class TraceNode:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


@dataclass(frozen=True, slots=True)
class TracePod:
    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int  # per GPU, 1..1000 when num_gpu > 0
    gpu_spec: tuple[str, ...]  # allowed models, sorted; empty = any

    @property
    def total_gpu_milli(self) -> int:
        """FGD's TotalMilliGpu: what this pod adds to arrived (and, if placed, allocated) demand."""
        return self.num_gpu * self.gpu_milli

    @property
    def shared(self) -> bool:
        return self.num_gpu == 1 and self.gpu_milli < MILLI

    def clone(self, name: str) -> TracePod:
        return TracePod(name, self.cpu_milli, self.memory_mib, self.num_gpu, self.gpu_milli, self.gpu_spec)


# --- CSV -------------------------------------------------------------------------------------


# The columns read, and the Alibaba pod list's columns this benchmark does not need (`bench.churn`
# reads the times): any other column is not read at all, which `unread_columns` tells.
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec")
POD_COLUMNS_NOT_NEEDED = ("qos", "pod_phase", "creation_time", "deletion_time", "scheduled_time")


def _int(row: dict[str, str], column: str, where: str) -> int:
    """A required non-negative integer: an empty field or `4000.5` is refused, not read as 0 or
    cut to 4000 (a capacity planner's trial got both without a word)."""
    raw = (row.get(column) or "").strip()
    if not raw:
        raise TraceError(f"{where}: column {column}: empty (an integer is required)")
    try:
        value = int(raw)
    except ValueError:
        raise TraceError(f"{where}: column {column}: {raw!r} is not an integer") from None
    if value < 0:
        raise TraceError(f"{where}: column {column}: {value} is negative")
    return value


def _rows(path: Path, required: Sequence[str]) -> Iterable[tuple[str, dict[str, str]]]:
    """Each row with its `file:line`; a row with more or fewer fields than the header is refused
    (a short row would otherwise read its missing fields as empty: a GPU pod turned CPU-only)."""
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames or ()
        missing = [c for c in required if c not in header]
        if missing:
            raise TraceError(f"{path}: missing column(s) {', '.join(missing)}")
        for row in reader:
            where = f"{path}:{reader.line_num}"
            fields = sum(value is not None for key, value in row.items() if key is not None) + len(row.get(None) or ())
            if fields != len(header):
                raise TraceError(f"{where}: {fields} fields, the header has {len(header)}")
            yield where, row


def _unique_name(row: dict[str, str], column: str, kind: str, where: str, lines: dict[str, str]) -> str:
    """The row's name in `column`, refused when empty or already on an earlier line (`lines`: name
    -> its line, filled here): the core keys objects by name, so a repeat is silently one object."""
    name = (row[column] or "").strip()
    if not name:
        raise TraceError(f"{where}: column {column}: empty {kind} name")
    if name in lines:
        raise TraceError(f"{where}: column {column}: {name} is already on line {lines[name]}; {kind} names must be unique")
    lines[name] = where.rsplit(":", 1)[1]
    return name


def read_nodes(path: Path) -> list[TraceNode]:
    """GPU nodes in name order (the order the FGD simulator adds them, see bench/README.md)."""
    nodes = []
    lines: dict[str, str] = {}  # a second row of a name is one Node to the core, two to the GPU total
    for where, row in _rows(path, NODE_COLUMNS):
        name = _unique_name(row, "sn", "node", where, lines)
        nodes.append(TraceNode(name, _int(row, "cpu_milli", where), _int(row, "memory_mib", where),
                               _int(row, "gpu", where), (row["model"] or "").strip()))
    return sorted(nodes, key=lambda n: n.name)


def read_lifetimes(path: Path) -> dict[str, tuple[int, int]]:
    """Trace pod name -> (creation_time, deletion_time) in seconds, for the churn replay."""
    lifetimes = {}
    for where, row in _rows(path, ("name", "creation_time", "deletion_time")):
        created, deleted = _int(row, "creation_time", where), _int(row, "deletion_time", where)
        if deleted < created:
            raise TraceError(f"{where}: deletion_time {deleted} is before creation_time {created}")
        lifetimes[(row["name"] or "").strip()] = (created, deleted)
    return lifetimes


def unread_columns(path: Path, read: Sequence[str], not_needed: Sequence[str] = ()) -> list[str]:
    """The header's columns that are neither read nor known to be unneeded: a custom CSV's
    `model` where `gpu_spec` was meant is otherwise dropped without a word."""
    with path.open(newline="", encoding="utf-8") as handle:
        header = next(csv.reader(handle), [])
    return [column for column in header if column not in read and column not in not_needed]


def unknown_models(nodes: Iterable[TraceNode], pods: Iterable[TracePod]) -> dict[str, int]:
    """Pods per `gpu_spec` model that no node has, by model name: a typo (`V1OO`) that would
    otherwise only show as pods that never fit."""
    known = {node.model for node in nodes}
    counts: dict[str, int] = {}
    for pod in pods:
        for model in pod.gpu_spec:
            if model not in known:
                counts[model] = counts.get(model, 0) + 1
    return dict(sorted(counts.items()))


def unplaceable(nodes: Sequence[TraceNode], pods: Iterable[TracePod]) -> list[TracePod]:
    """Pods no node can ever hold: none has their GPU count (of a model they allow), CPU and
    memory at once, so they only show as failures. A pod whose every `gpu_spec` model no node
    has is left to `unknown_models`, which names the models."""
    known = {node.model for node in nodes}

    def holds(node: TraceNode, pod: TracePod) -> bool:
        return (node.gpus >= pod.num_gpu and node.cpu_milli >= pod.cpu_milli and node.memory_mib >= pod.memory_mib
                and not (pod.num_gpu and pod.gpu_spec and node.model not in pod.gpu_spec))

    return [pod for pod in pods if (not pod.gpu_spec or known & set(pod.gpu_spec))
            and not any(holds(node, pod) for node in nodes)]


def pod_lines(path: Path) -> dict[str, str]:
    """Pod name -> `file:line` of its row (names are unique: `read_pods` refuses a repeat)."""
    return {(row["name"] or "").strip(): where for where, row in _rows(path, ("name",))}


def parse_spec(raw: str) -> tuple[str, ...]:
    return tuple(sorted({m.strip() for m in raw.split("|") if m.strip()}))


def read_pods(path: Path) -> list[TracePod]:
    """Trace pods in name order. gpu_milli above 1000 is refused, not clamped as FGD's
    pod_csv_to_yaml.py does: the trace's README defines it per GPU, 1000 for a whole one."""
    pods = []
    lines: dict[str, str] = {}  # a second row of a name is one pod to the core, two to the ledger
    for where, row in _rows(path, POD_COLUMNS[:-1]):  # gpu_spec may be left out: any model
        name = _unique_name(row, "name", "pod", where, lines)
        num_gpu, gpu_milli = _int(row, "num_gpu", where), _int(row, "gpu_milli", where)
        if gpu_milli > MILLI:
            raise TraceError(f"{where}: column gpu_milli: {gpu_milli} is above {MILLI} (thousandths of one GPU: "
                             f"{MILLI} is a whole GPU)")
        gpu_milli = gpu_milli if num_gpu else 0
        if num_gpu and gpu_milli == 0:
            raise TraceError(f"{where}: num_gpu={num_gpu} but gpu_milli is 0")
        if num_gpu > 1 and gpu_milli < MILLI:
            raise TraceError(f"{where}: gpu_milli={gpu_milli} < 1000 is only valid with num_gpu == 1 "
                             f"(got num_gpu={num_gpu})")
        pods.append(TracePod(name, _int(row, "cpu_milli", where),
                             _int(row, "memory_mib", where), num_gpu, gpu_milli,
                             parse_spec(row.get("gpu_spec") or "")))
    return sorted(pods, key=lambda p: p.name)


# --- arrival order ---------------------------------------------------------------------------


def arrival_sequence(pods: Sequence[TracePod], total_gpus: int, seed: int, ratio: float = 1.3) -> list[TracePod]:
    """FGD's order: name order, seeded shuffle, then inflate (or trim) to `ratio` × GPU capacity.

    One RNG does both, shuffle first, as FGD's `rand.Seed(seed)` → `SortClusterPods` →
    `TunePodsByNodeTotalResource`. The stop rule is FGD's own: a clone is appended while
    `total + clone.gpu_milli <= target` — per-GPU milli, so an 8-GPU clone can overshoot by up to
    7 GPUs, exactly as there.
    """
    rng = random.Random(seed)
    by_name = sorted(pods, key=lambda p: p.name)
    order = list(by_name)
    rng.shuffle(order)
    if ratio <= 0 or not by_name:
        return order
    target = ratio * total_gpus * MILLI
    total = sum(p.total_gpu_milli for p in order)
    if total > target:
        while total > target and order:
            removed = order.pop(rng.randrange(len(order)))
            total -= removed.total_gpu_milli
        return order
    i = 0
    while True:
        source = by_name[rng.randrange(len(by_name))]
        if total + source.gpu_milli > target:
            return order
        total += source.total_gpu_milli
        order.append(source.clone(f"{source.name}-tuned-{i}"))
        i += 1


# --- Kubernetes objects ----------------------------------------------------------------------


def _slug(models: tuple[str, ...]) -> str:
    text = "-".join(models).lower()
    text = re.sub(r"[^a-z0-9-]+", "-", text).strip("-")
    if not text or len(text) > 40:
        text = hashlib.sha1("|".join(models).encode()).hexdigest()[:12]
    return text


def exclusive_class_name(spec: tuple[str, ...]) -> str:
    return f"trace-gpu-{_slug(spec)}"


def sharing_class_name(spec: tuple[str, ...]) -> str:
    return f"trace-share-{_slug(spec)}" if spec else "trace-share-any"


def class_resource(name: str) -> str:
    return f"class.tessera.dev/{name}"


def _model_selector(spec: tuple[str, ...]) -> list[Obj]:
    if spec:
        return [{"key": MODEL_KEY, "operator": "In", "values": list(spec)}]
    return [{"key": MODEL_KEY, "operator": "Exists"}]


def resource_classes(pods: Iterable[TracePod]) -> list[Obj]:
    """One exclusive class per distinct non-empty gpu_spec of whole-GPU pods, one sharing class
    per distinct gpu_spec (empty included) of GPU-sharing pods; sorted by name."""
    exclusive: set[tuple[str, ...]] = set()
    sharing: set[tuple[str, ...]] = set()
    for pod in pods:
        if pod.shared:
            sharing.add(pod.gpu_spec)
        elif pod.num_gpu and pod.gpu_spec:
            exclusive.add(pod.gpu_spec)
    classes = [b.resource_class(exclusive_class_name(s), expressions=_model_selector(s)) for s in exclusive]
    classes += [b.resource_class(sharing_class_name(s), expressions=_model_selector(s),
                                 sharing={"dimension": SHARE_DIMENSION, "unit": "1"}) for s in sharing]
    return sorted(classes, key=lambda c: str(c["metadata"]["name"]))


def node_object(node: TraceNode) -> Obj:
    return b.node(node.name, cpu=f"{node.cpu_milli}m", memory=f"{node.memory_mib}Mi", gpus=node.gpus,
                  pods=NODE_PODS, labels={"tessera.dev/gpu-model": node.model} if node.model else None)


def device_objects(node: TraceNode) -> list[Obj]:
    """One ExtendedResource per GPU, with a `gpu-milli: 1000` capacity for the sharing classes."""
    devices = []
    for index in range(node.gpus):
        device = b.device(node.name, index, model=node.model, memory=MODEL_MEMORY.get(node.model, DEFAULT_MEMORY),
                          resource_name=GPU_RESOURCE)
        device["spec"]["capacity"][SHARE_DIMENSION] = str(MILLI)
        devices.append(device)
    return devices


def pod_requests(pod: TracePod) -> dict[str, str | int]:
    """CPU and memory always (an explicit 0 stays 0, as in FGD's pod YAML), plus the GPU ask."""
    requests: dict[str, str | int] = {"cpu": f"{pod.cpu_milli}m", "memory": f"{pod.memory_mib}Mi"}
    if pod.shared:
        requests[class_resource(sharing_class_name(pod.gpu_spec))] = pod.gpu_milli
    elif pod.num_gpu and pod.gpu_spec:
        requests[class_resource(exclusive_class_name(pod.gpu_spec))] = pod.num_gpu
    elif pod.num_gpu:
        requests[GPU_RESOURCE] = pod.num_gpu
    return requests


def pod_object(pod: TracePod) -> Obj:
    requests = pod_requests(pod)
    return b.pod(pod.name, namespace=NAMESPACE, scheduler=SCHEDULER_NAME, requests=requests, limits=requests)


def cluster_objects(nodes: Sequence[TraceNode], pods: Iterable[TracePod]) -> list[Obj]:
    """Everything that exists before the first pod: classes, then each node and its devices."""
    objects = resource_classes(pods)
    for node in nodes:
        objects.append(node_object(node))
        objects.extend(device_objects(node))
    return objects


def subsample(items: Sequence[Any], step: int) -> list[Any]:
    """Every `step`-th item (at least one): the `--quick` smoke-test workload."""
    return list(items[::step]) or list(items[:1])


def offline_order(sequence: Sequence[TracePod], total_gpus: int) -> list[TracePod]:
    """The pods that have arrived when 100 % of the cluster's GPU capacity has, largest first.

    The offline reference: the same arrived pods, known in advance and placed by a classic
    bin-packing heuristic — decreasing size (GPUs, then GPU milli, CPU, memory; CPU-only pods
    last), each to the best-fitting node. What it leaves unallocated bounds how much an online
    policy, which must place each pod as it comes, could still gain.
    """
    return sorted(arrived_prefix(sequence, total_gpus),
                  key=lambda p: (-p.total_gpu_milli, -p.num_gpu, -p.cpu_milli, -p.memory_mib, p.name))


def arrived_prefix(sequence: Sequence[TracePod], total_gpus: int) -> list[TracePod]:
    """The pods that have arrived when their GPU demand first reaches 100 % of the cluster's
    GPU capacity: the population the headline metric is measured on."""
    target = total_gpus * MILLI
    arrived = 0
    prefix: list[TracePod] = []
    for pod in sequence:
        if arrived >= target:
            break
        prefix.append(pod)
        arrived += pod.total_gpu_milli
    return prefix

