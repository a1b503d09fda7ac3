"""How long a bound pod counts on its node, checked against kube-scheduler v1.36.3.

Upstream keeps a pod in its cache from the Binding (assumed) until the pod is gone from its pod
informer, which lists only non-terminal pods (pkg/scheduler/scheduler.go newPodInformer: field
selector `status.phase!=Succeeded,status.phase!=Failed`): a pod turning Succeeded or Failed is a
delete there. A terminating pod (deletionTimestamp set, containers still stopping) stays until it
is deleted. A deleted Node's NodeInfo is kept while pods remain on it (backend/cache/cache.go
RemoveNode), so they still count when a Node of that name comes back. These held before this
review; the tests pin them, for cpu and for class GPUs alike."""

from __future__ import annotations

import copy
from typing import Any

from scheduler.sim import builders as b
from tests.helpers import Run

GPU = "class.tessera.dev/v100"


def _cluster() -> list[dict[str, Any]]:
    return [b.node("n", gpus=1, cpu="4"), b.device("n", 0, memory="8Gi"),
            b.resource_class("v100", match_labels={"model": "V100"})]


def _bound(run: Run, name: str) -> dict[str, Any]:
    """`name` (3 CPUs, one class GPU) placed by the core, then seen bound and running."""
    run.add(b.pod(name, requests={"cpu": "3"}, limits={GPU: 1}))
    placed = run.last(name)
    assert placed.node == "n", placed.message
    obj = b.pod(name, requests={"cpu": "3"}, limits={GPU: 1}, node_name="n", phase="Running",
                annotations=dict(placed.annotations))
    return _modified(run, obj, 10)


def _modified(run: Run, obj: dict[str, Any], version: int) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["metadata"]["resourceVersion"] = str(version)
    run.feed(b.event("MODIFIED", obj))
    return obj


def test_a_terminating_pod_holds_its_cpu_and_gpu_until_it_is_terminal_or_gone() -> None:
    for end in ("Succeeded", "Failed", "DELETED"):
        run = Run(explain=True)
        run.add(*_cluster())
        obj = _bound(run, "a")
        obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
        obj = _modified(run, obj, 11)
        run.add(b.pod("gpu", limits={GPU: 1}), b.pod("cpu", requests={"cpu": "2"}))
        assert run.last("gpu").node is None and f"Insufficient {GPU}" in run.last("gpu").message, end
        assert run.last("cpu").node is None and "Insufficient cpu" in run.last("cpu").message, end
        if end == "DELETED":
            run.feed(b.event("DELETED", obj))
        else:
            obj["status"]["phase"] = end
            _modified(run, obj, 12)
        assert run.last("gpu").node == "n", (end, run.last("gpu").message)
        assert run.last("cpu").node == "n", (end, run.last("cpu").message)


def test_a_terminal_pod_seen_first_counts_for_nothing() -> None:
    """A listing after a restart: a Succeeded pod still bound to the node holds nothing."""
    run = Run(explain=True)
    run.add(*_cluster())
    run.add(b.pod("done", requests={"cpu": "3"}, limits={"nvidia.com/gpu": 1}, node_name="n", phase="Succeeded"))
    run.add(b.pod("p", requests={"cpu": "3"}, limits={GPU: 1}))
    assert run.last("p").node == "n", run.last("p").message


def test_pods_of_a_deleted_node_still_count_when_it_comes_back() -> None:
    run = Run(explain=True)
    run.add(*_cluster())
    _bound(run, "a")
    node = _cluster()[0]
    run.feed(b.event("DELETED", node))
    run.add(b.node("n", gpus=1, cpu="4"))
    run.add(b.pod("gpu", limits={GPU: 1}), b.pod("cpu", requests={"cpu": "2"}))
    assert run.last("gpu").node is None, run.last("gpu").message
    assert run.last("cpu").node is None and "Insufficient cpu" in run.last("cpu").message, run.last("cpu").message
