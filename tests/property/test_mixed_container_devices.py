"""Property: whole GPUs and slices in a pod's plain init containers, sidecars and app containers
(two exclusive classes and one sharing class selecting the same GPUs) are placed exactly as far as
the GPUs allow, and never given to two containers that run at once beyond what a GPU holds.

The model is what runs at once (the kubelet's order, `lifecycle` and upstream v1.36.3
pkg/kubelet/cm/devicemanager/manager.go `Allocate`): plain init containers one at a time in spec
order, each with the sidecars started before it; then every sidecar with the app containers. In
each such phase a GPU is whole to at most one running container and then to no running slice,
and the running slices of it fit its memory. The kubelet counts slots per class (whole: one per
GPU; slices: one per unit of a GPU's memory), so any assignment meeting those constraints runs;
the core must place the pod on an empty node exactly when one exists (brute force here over the
node's 3 GPUs), write it in `tessera.dev/devices` so that it meets them, and hold busy exactly
the GPUs it names. Before, a slice never went on a GPU its pod had whole, even one a finished
init container had (refused on a 2-GPU node though the kubelet runs it), and a finished init
container's whole GPU went on only to containers of its own class. (Slices of two sharing classes
on one GPU are still held summed, not at their peak: not modelled here.)"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.api.config import load_config
from scheduler.core import annotations as ann
from scheduler.core.lifecycle import APP, INIT, SIDECAR, ContainerKind, container_phases
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b

GPU = "class.tessera.dev/v100"
OTHER = "class.tessera.dev/v100-other"  # a second exclusive class selecting the same GPUs
SLICE = "class.tessera.dev/v100-mem"
GPUS = 3
MEMORY = 8  # Gi per GPU; the slice class's unit is 1Gi

# a request: (resource, amount) — whole GPUs (1-2) of either exclusive class, or a slice of Gi
# (1-8); None asks for nothing
Request = tuple[str, int] | None
requests = st.one_of(st.none(), st.tuples(st.sampled_from([GPU, OTHER]), st.integers(1, 2)),
                     st.tuples(st.just(SLICE), st.integers(1, 8)))
# (is a sidecar, request) per init container; requests of the app containers
Layout = tuple[list[tuple[bool, Request]], list[Request]]
layouts = st.tuples(st.lists(st.tuples(st.booleans(), requests), max_size=3), st.lists(requests, min_size=1, max_size=2))


def _containers(layout: Layout) -> list[tuple[str, ContainerKind, Request]]:
    inits, apps = layout
    return [*((f"init{i}", SIDECAR if sidecar else INIT, req) for i, (sidecar, req) in enumerate(inits)),
            *((f"app{i}", APP, req) for i, req in enumerate(apps))]


# container -> (whole GPUs, or the GPU of its slice and the slice)
Assignment = dict[str, tuple[frozenset[int], int]]


def _fits(layout: Layout, assignment: Assignment) -> bool:
    """Whether no two containers that run at once share a GPU beyond what it holds."""
    containers = _containers(layout)
    phases = container_phases((name, kind) for name, kind, _ in containers)
    for phase in set().union(*phases.values()):
        running = [name for name, _, _ in containers if phase in phases[name] and name in assignment]
        whole: set[int] = set()
        sliced: dict[int, int] = {}
        for name in running:
            gpus, amount = assignment[name]
            if amount:
                [gpu] = gpus
                sliced[gpu] = sliced.get(gpu, 0) + amount
            else:
                if whole & gpus:
                    return False
                whole |= gpus
        if whole & sliced.keys() or any(amount > MEMORY for amount in sliced.values()):
            return False
    return True


def _assignments(layout: Layout) -> Iterator[Assignment]:
    asking = [(name, req) for name, _, req in _containers(layout) if req is not None]
    options = [[(gpus, 0) for gpus in map(frozenset, itertools.combinations(range(GPUS), req[1]))] if req[0] != SLICE
               else [(frozenset((gpu,)), req[1]) for gpu in range(GPUS)] for _, req in asking]
    for choice in itertools.product(*options):
        yield {name: option for (name, _), option in zip(asking, choice, strict=True)}


def _placed(layout: Layout) -> tuple[Assignment | None, Scheduler]:
    """The core's placement of the layout's pod on an empty 3-GPU node, as GPU indexes."""
    def limits(req: Request) -> dict[str, str | int] | None:
        return None if req is None else {req[0]: req[1]}

    inits, apps = layout
    pod = b.pod("p", containers=[b.container(f"app{i}", limits=limits(req)) for i, req in enumerate(apps)],
                init_containers=[b.container(f"init{i}", limits=limits(req), restart_policy="Always" if sidecar else None)
                                 for i, (sidecar, req) in enumerate(inits)])
    core = Scheduler(load_config(None), seed=7)
    for obj in (b.node("n", gpus=GPUS), *(b.device("n", i, memory=f"{MEMORY}Gi") for i in range(GPUS)),
                b.resource_class("v100", match_labels={"model": "V100"}),
                b.resource_class("v100-other", match_labels={"model": "V100"}),
                b.resource_class("v100-mem", match_labels={"model": "V100"}, sharing={"dimension": "memory", "unit": "1Gi"}),
                pod):
        core.apply("ADDED", obj, 0.0)
    attempts = []
    while (batch := core.schedule_next(0.0)) is not None:
        attempts += batch
    placed = [a for a in attempts if a.node is not None]
    if not placed:
        return None, core
    index = {name: i for i, name in enumerate(sorted(core.state.devices))}
    containers = orjson.loads(placed[0].annotations[ann.DEVICES])["containers"]
    assignment: Assignment = {}
    for container, by_resource in containers.items():
        grants = [g for entries in by_resource.values() for g in entries]
        amount = sum(int(g["amount"].removesuffix("Gi")) for g in grants if "amount" in g)
        assignment[container] = (frozenset(index[g["device"]] for g in grants), amount)
    return assignment, core


@settings(max_examples=int(os.environ.get("TESSERA_HYPOTHESIS_EXAMPLES", "0") or 0) or 80, deadline=None,
          database=None, suppress_health_check=[HealthCheck.too_slow])
@given(layouts)
def test_a_pod_of_whole_gpus_and_slices_is_placed_exactly_when_its_containers_fit(layout: Layout) -> None:
    if not any(req is not None for _, _, req in _containers(layout)):
        return
    possible = any(_fits(layout, assignment) for assignment in _assignments(layout))
    assignment, core = _placed(layout)
    assert (assignment is not None) == possible, (layout, assignment)
    if assignment is None:
        return
    assert _fits(layout, assignment), (layout, assignment)
    asking = {name: req for name, _, req in _containers(layout) if req is not None}
    assert assignment.keys() == asking.keys(), (layout, assignment)
    for name, req in asking.items():
        assert req is not None
        gpus, amount = assignment[name]
        assert (len(gpus), amount) == ((req[1], 0) if req[0] != SLICE else (1, req[1])), (layout, assignment)
    index = {name: i for i, name in enumerate(sorted(core.state.devices))}
    busy = {index[name] for name, use in core.state.ledger.use.items() if use.busy}
    assert busy == set().union(*(gpus for gpus, _ in assignment.values())), (layout, busy, assignment)
