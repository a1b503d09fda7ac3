"""Whose Binding bound a pod that a newer leader's term fence re-stamped (real apiserver).

Session 50's closing note: a newer leader's fence (`tessera.dev/term`, a merge patch through
pods/status whose only precondition is the uid) written from a cache that still showed the pod
unbound can land just after a late Binding of ours did, and writes its token over our Binding's.
When our Binding's answer was lost, the read-back shows our node, our devices and the newer
term's token — the same pod as after the fence and that leader's own Binding — and the Binding
was taken for the newer term's: no "Successfully assigned" Event, no success, although nobody
else bound the pod. The pod's history tells them apart: our Binding is conditional on the
resourceVersion we decided at, so it bound the pod exactly when the first change after that
version is a Binding under our token. What is real here: etcd + kube-apiserver, the Binding, the
fence's PATCH, the other leader's Binding and the watch that replays the pod's history; only the
answer to our Binding is dropped on our side (as a broken connection drops it).
"""

from __future__ import annotations

from typing import Any

import anyio

from scheduler.core import annotations as ann
from scheduler.kube.binder import Binder, Binding, BindResult, Outcome
from scheduler.kube.controlplane import LocalControlPlane
from scheduler.kube.http import KubeHttp, Response, connect
from scheduler.kube.term_write import write_term
from scheduler.sim import builders as b
from tests.e2e.live import Kube

DEVICES = '{"version":1,"containers":{"main":{"class.tessera.dev/v100":[{"id":"GPU-1","device":"n.gpu-1"}]}}}'
OURS = "kube-system/tessera-history/rep-a/4/2026-01-01T00:01:00.000000Z"
NEWER = "kube-system/tessera-history/rep-b/5/2026-01-01T00:02:00.000000Z"
NODE = "history-node"  # a Binding names a node; the apiserver does not look it up


class _AnswerLost(KubeHttp):
    """Our transport, with `before_answer` run after the apiserver applied our first Binding POST
    and before its answer reaches us, which then never does (a broken connection: TimeoutError)."""

    def __init__(self, http: KubeHttp, before_answer: Any) -> None:
        super().__init__(http.api)
        self.before_answer = before_answer
        self.lost = 0

    async def request(self, method: str, path: str, **kwargs: Any) -> Response:
        response = await super().request(method, path, **kwargs)
        if method == "POST" and path.endswith("/binding") and not self.lost:
            self.lost += 1
            await self.before_answer(response)
            raise TimeoutError()
        return response


async def _bind_once(http: KubeHttp, binding: Binding) -> BindResult:
    results: list[BindResult] = []
    binder = Binder(http, results.append, term=lambda: 1, timeout=10.0)
    async with anyio.create_task_group() as group:
        await group.start(binder.run)
        binder.submit(binding)
        assert await binder.drain(30)
        group.cancel_scope.cancel()
    [result] = results
    return result


async def _pending_pod(kubectl: Kube, namespace: str) -> tuple[dict[str, Any], Binding]:
    pod = await kubectl.create_pod(namespace, b.pod("p", limits={"nvidia.com/gpu": 1}))
    meta = pod["metadata"]
    binding = Binding(meta["uid"], namespace, "p", NODE, {ann.DEVICES: DEVICES, ann.TERM: OURS},
                      resource_version=meta["resourceVersion"])
    return pod, binding


async def test_our_binding_a_newer_fence_stamped_after_it_landed_is_ours(
        control_plane: LocalControlPlane, kubectl: Kube, namespace: str) -> None:
    pod, binding = await _pending_pod(kubectl, namespace)
    client = await connect(str(control_plane.kubeconfig))
    try:
        async def fence(answer: Response) -> None:
            assert answer.status == 201  # our Binding bound the pod ...
            written = await write_term(kubectl.http, namespace, "p", pod["metadata"]["uid"], NEWER)
            assert written.pod is not None  # ... and the newer leader's fence wrote over its token

        result = await _bind_once(_AnswerLost(KubeHttp(client), fence), binding)
    finally:
        await client.close()
    now = (await kubectl.pods(namespace))["p"]
    assert now["spec"]["nodeName"] == NODE and now["metadata"]["annotations"][ann.TERM] == NEWER
    assert (result.outcome, result.bound_by_other) == (Outcome.BOUND, False), result


async def test_the_newer_leaders_own_binding_after_its_fence_stays_its_own(
        control_plane: LocalControlPlane, kubectl: Kube, namespace: str) -> None:
    """The contrast: the fence came first and the newer leader bound the pod the same way; our
    Binding, conditional on the version before the fence, is refused (409) and the read-back shows
    the same pod as above. Its history starts with the fence: not ours."""
    pod, binding = await _pending_pod(kubectl, namespace)
    uid = pod["metadata"]["uid"]
    written = await write_term(kubectl.http, namespace, "p", uid, NEWER)
    assert written.pod is not None
    theirs = {"apiVersion": "v1", "kind": "Binding",
              "metadata": {"name": "p", "namespace": namespace, "uid": uid,
                           "resourceVersion": written.pod["metadata"]["resourceVersion"],
                           "annotations": {ann.DEVICES: DEVICES, ann.TERM: NEWER}},
              "target": {"apiVersion": "v1", "kind": "Node", "name": NODE}}
    await kubectl.call("POST", f"/api/v1/namespaces/{namespace}/pods/p/binding", theirs, ok=(201,))
    client = await connect(str(control_plane.kubeconfig))
    try:
        result = await _bind_once(KubeHttp(client), binding)
    finally:
        await client.close()
    assert (result.outcome, result.bound_by_other, result.bound_by) == (Outcome.CONFLICT, True, NEWER), result
