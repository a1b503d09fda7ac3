"""A GPU assumed for a Binding that has not settled counts as in use on the live views.

The leader's GPU map (`GpuMap.view`) and `tessera_devices` (`gpu_counts`) are built from the core
the binder works against: a pod whose Binding is out — sent, answered ambiguously (a 500), its
read-back not answered yet — is assumed there, and its GPU is the pod's (`whole`, holder
`binding`), never free, as long as a send of ours may still bind it. Driven through the real
loop and binder against the fake HTTP layer. (`kubectl tessera nodes` and a standby's page list
the apiserver, which holds no trace of a Binding before it lands: docs/kubectl-tessera.md.)
"""

from __future__ import annotations

import anyio

from scheduler.api.config import load_config
from scheduler.kube.gpu_map import GpuMap
from scheduler.kube.http import KubeHttp
from scheduler.kube.loop import SchedulerLoop
from scheduler.sim import builders as b
from scheduler.view import model as m
from scheduler.view.cluster import gpu_counts
from tests.fakeapi import FakeApi

V100 = "class.tessera.dev/v100"


async def test_a_gpu_whose_binding_is_unsettled_is_the_pods_on_the_live_views() -> None:
    api = FakeApi()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="A")  # type: ignore[arg-type]
    for obj in (b.node("n", gpus=2), b.device("n", 0), b.device("n", 1),
                b.resource_class("v100", match_labels={"model": "V100"})):
        loop._apply("ADDED", obj)
    pod = b.pod("p", limits={V100: 1})
    pod["metadata"]["resourceVersion"] = "100"
    api.add_pod(pod)
    loop._apply("ADDED", pod)
    [placed] = loop.core.schedule_next(0.0) or []
    api.fail_next("POST", "/binding", status=500)  # ambiguous: the request may have landed
    api.fail_next("GET", "/pods/p", stall=True)  # and the read-back that would settle it hangs
    page = GpuMap(loop, clock=lambda: 0.0)
    async with anyio.create_task_group() as group:
        await group.start(loop.binder.run)
        loop._handle(placed, 0.0)
        with anyio.fail_after(5):
            while api.stalled == 0:
                await anyio.sleep(0)
        assert loop.binder.in_flight == 1 and api.of("POST", "/binding")
        view = page.view()
        [node] = view.nodes
        states = sorted((gpu.state, tuple((h.pod, h.status) for h in gpu.holders)) for gpu in node.gpus)
        assert states == [(m.FREE, ()), (m.WHOLE, (("default/p", m.BINDING),))]
        assert (view.summary.used, view.summary.free) == (1, 1)
        assert gpu_counts(loop.core, now=0.0, held=loop.core.held()).states == {("V100", m.WHOLE): 1,
                                                                               ("V100", m.FREE): 1}
        group.cancel_scope.cancel()
