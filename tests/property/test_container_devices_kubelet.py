"""Property: the GPUs a pod holds are the GPUs the kubelet gives it, for any layout of plain init
containers, sidecars and app containers asking whole devices of one class.

The model is the kubelet's device manager (v1.36.3 pkg/kubelet/cm/devicemanager/manager.go
`Allocate`, `devicesToAllocate`), written here from its code, not from Tessera's: containers are
allocated in order (init containers in spec order, then app containers); each takes devices from
the pod's reusable set first, then fresh ones; a plain init container's devices join the reusable
set, a sidecar's and an app container's leave it; the pod keeps every device any container had
until it ends. Its device count must equal upstream's `PodRequests` (component-helpers
resource/helpers.go, also modelled here), the number of distinct devices the core writes in the
pod's annotation, and the number the core's ledger holds busy. An undercount would give one of
those GPUs to a second pod; an overcount would strand it."""

from __future__ import annotations

import os

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.api.config import load_config
from scheduler.core import annotations as ann
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b

GPU = "class.tessera.dev/v100"
GPUS = 8

# (is a sidecar, GPUs) per init container; GPUs per app container
Layout = tuple[list[tuple[bool, int]], list[int]]
layouts = st.tuples(st.lists(st.tuples(st.booleans(), st.integers(0, 2)), max_size=4),
                    st.lists(st.integers(0, 2), min_size=1, max_size=2))


def kubelet_devices(inits: list[tuple[bool, int]], apps: list[int]) -> int:
    """How many devices the kubelet's device manager ends up giving the pod."""
    reusable: list[int] = []
    given: set[int] = set()
    fresh = iter(range(1000))

    def take(count: int) -> set[int]:
        got = set(reusable[:count])
        while len(got) < count:
            got.add(next(fresh))
        return got

    for sidecar, count in inits:
        got = take(count)
        given |= got
        reusable = [d for d in reusable if d not in got] if sidecar else sorted(set(reusable) | got)
    for count in apps:
        got = take(count)
        given |= got
        reusable = [d for d in reusable if d not in got]
    return len(given)


def pod_requests(inits: list[tuple[bool, int]], apps: list[int]) -> int:
    """Upstream AggregateContainerRequests for one resource."""
    total, sidecars, peak = sum(apps), 0, 0
    for sidecar, count in inits:
        if sidecar:
            total += count
            sidecars += count
            peak = max(peak, sidecars)
        else:
            peak = max(peak, count + sidecars)
    return max(total, peak)


@settings(max_examples=int(os.environ.get("TESSERA_HYPOTHESIS_EXAMPLES", "0") or 0) or 60, deadline=None,
          database=None, suppress_health_check=[HealthCheck.too_slow])
@given(layouts)
def test_a_pod_holds_the_devices_the_kubelet_gives_it(layout: Layout) -> None:
    inits, apps = layout
    want = kubelet_devices(inits, apps)
    assert want == pod_requests(inits, apps)
    pod = b.pod("p", containers=[b.container(f"app{i}", limits={GPU: n} if n else None) for i, n in enumerate(apps)],
                init_containers=[b.container(f"init{i}", limits={GPU: n} if n else None,
                                             restart_policy="Always" if sidecar else None)
                                 for i, (sidecar, n) in enumerate(inits)])
    core = Scheduler(load_config(None), seed=7)
    for obj in (b.node("n", gpus=GPUS), *(b.device("n", i, memory="8Gi") for i in range(GPUS)),
                b.resource_class("v100", match_labels={"model": "V100"}), pod):
        core.apply("ADDED", obj, 0.0)
    attempts = []
    while (batch := core.schedule_next(0.0)) is not None:
        attempts += batch
    if want == 0 or want > GPUS:
        return
    [attempt] = [a for a in attempts if a.node is not None]
    containers = orjson.loads(attempt.annotations[ann.DEVICES])["containers"]
    written = {g["device"] for by_resource in containers.values() for grants in by_resource.values() for g in grants}
    assert len(written) == want, (layout, containers)
    busy = [name for name, use in core.state.ledger.use.items() if use.busy]
    assert sorted(busy) == sorted(written), (layout, busy, written)
