"""VolumeBinding's writes before a Binding (upstream's PreBind, bindAPIUpdate), against the fake
HTTP layer: a static volume gets the claim's claimRef and bound-by-controller, a provisioned claim
its selected-node, each conditional on the version the core holds; a write refused keeps the
Binding from being sent (the pod is decided again), and a replica not leading writes nothing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import orjson

from scheduler.api.config import load_config
from scheduler.core.volumes import ClaimBinding
from scheduler.kube.binder import BindResult, Outcome
from scheduler.kube.http import MERGE_PATCH, KubeHttp, Response
from scheduler.kube.loop import SchedulerLoop
from scheduler.kube.volume_writes import VolumeWrite, planned
from tests.fakeapi import Call, FakeApi
from tests.helpers import Run
from tests.replay.test_volume_binding import claim, claimer, nodes, storage_class, volume
from tests.unit.test_binder import _bind, _binding, _setup

PV = "/api/v1/persistentvolumes/nvme-a"
PVC = "/api/v1/namespaces/default/persistentvolumeclaims/data"


def _state_with(*objects: dict[str, object]) -> Run:
    run = Run()
    run.add(*nodes("a"), storage_class("local", "WaitForFirstConsumer"), *objects)
    return run


def test_a_static_volume_gets_the_claims_reference_conditional_on_its_version() -> None:
    """GetBindVolumeToClaim: claimRef as reference.GetReference of the claim, and the annotation
    saying the controller bound it (the volume named no claim)."""
    run = _state_with(volume("nvme-a", "a", storage_class="local"), claim("data", storage_class="local"))
    (write,) = planned(run.state, (ClaimBinding("default/data", "nvme-a"),), "a")
    assert write == VolumeWrite(PV, {
        "metadata": {"resourceVersion": "1", "annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}},
        "spec": {"claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": "default",
                              "name": "data", "uid": "uid-default-data", "resourceVersion": "1"}}},
        'persistentvolumes "nvme-a"', "nvme-a")


def test_a_volume_already_naming_the_claim_needs_nothing_or_only_its_uid() -> None:
    ref = {"namespace": "default", "name": "data"}
    run = _state_with(volume("nvme-a", "a", storage_class="local", claimRef={**ref, "uid": "uid-default-data"}),
                      volume("pre", "a", storage_class="local", claimRef=ref), claim("data", storage_class="local"))
    assert planned(run.state, (ClaimBinding("default/data", "nvme-a"),), "a") == ()
    (write,) = planned(run.state, (ClaimBinding("default/data", "pre"),), "a")
    assert "annotations" not in write.body["metadata"]  # pre-bound by its user: not the controller's
    assert write.body["spec"]["claimRef"]["uid"] == "uid-default-data"


def test_a_provisioned_claim_gets_the_node_unless_it_has_it() -> None:
    run = _state_with(claim("data", storage_class="local"),
                      claim("done", storage_class="local", annotations={"volume.kubernetes.io/selected-node": "a"}))
    assert planned(run.state, (ClaimBinding("default/data", ""), ClaimBinding("default/done", "")), "a") == (
        VolumeWrite(PVC, {"metadata": {"resourceVersion": "1",
                                       "annotations": {"volume.kubernetes.io/selected-node": "a"}}},
                    'persistentvolumeclaims "data"', "default/data"),)


def test_an_object_gone_since_the_decision_fails_without_a_request() -> None:
    run = _state_with(claim("data", storage_class="local"))
    (write,) = planned(run.state, (ClaimBinding("default/data", "nvme-a"),), "a")
    assert write.body == {}


def _serve(version: str) -> Callable[[Call], Response | None]:
    """The fake apiserver's PV nvme-a and claim default/data, both at `version`: a merge patch
    conditional on another version is refused with 409, as the apiserver's."""
    versions = {"pv": version, "pvc": version}

    def handler(call: Call) -> Response | None:
        kind = "pv" if call.path == PV else "pvc" if call.path == PVC else None
        if kind is None or call.method != "PATCH":
            return None
        assert call.content_type == MERGE_PATCH
        wanted = call.body["metadata"].get("resourceVersion")
        if wanted != versions[kind]:
            name = "persistentvolumes \"nvme-a\"" if kind == "pv" else "persistentvolumeclaims \"data\""
            return Response(409, orjson.dumps({"kind": "Status", "code": 409, "reason": "Conflict", "message": (
                f"Operation cannot be fulfilled on {name}: the object has been modified; please apply your changes "
                "to the latest version and try again")}))
        versions[kind] = str(int(versions[kind]) + 1)
        return Response(200, orjson.dumps({"metadata": {"resourceVersion": versions[kind]}}))
    return handler


WRITES = (VolumeWrite(PV, {"metadata": {"resourceVersion": "5"}, "spec": {"claimRef": {"name": "data"}}},
                      'persistentvolumes "nvme-a"', "nvme-a"),
          VolumeWrite(PVC, {"metadata": {"resourceVersion": "5"}}, 'persistentvolumeclaims "data"', "default/data"))


async def test_the_writes_go_before_the_binding() -> None:
    api, binder, results, _ = _setup()
    api.handlers.append(_serve("5"))
    await _bind(binder, replace(_binding(), volume_writes=WRITES))
    assert [r.outcome for r in results] == [Outcome.BOUND]
    assert [(c.method, c.path) for c in api.calls] == [("PATCH", PV), ("PATCH", PVC),
                                                      ("POST", "/api/v1/namespaces/default/pods/p/binding")]


async def test_a_volume_taken_meanwhile_keeps_the_binding_from_being_sent() -> None:
    """The PV's version moved (another scheduler bound it): 409, no Binding, the pod decided again
    with upstream's PreBind words."""
    api, binder, results, _ = _setup()
    api.handlers.append(_serve("6"))
    await _bind(binder, replace(_binding(), volume_writes=WRITES))
    (result,) = results
    assert result.outcome is Outcome.RETRY and not result.not_leading and result.sends == 0
    assert result.refusal == ('running PreBind plugin "VolumeBinding": Operation cannot be fulfilled on '
                              'persistentvolumes "nvme-a": the object has been modified; please apply your changes '
                              "to the latest version and try again")
    assert not api.of("POST") and len(api.of("PATCH")) == 1


async def test_a_forbidden_write_says_so() -> None:
    """An old deploy's role without patch on persistentvolumes: the apiserver's 403 is the message."""
    api, binder, results, _ = _setup()
    api.fail_next("PATCH", PV, status=403)
    await _bind(binder, replace(_binding(), volume_writes=WRITES))
    assert results[0].outcome is Outcome.RETRY and results[0].refusal == (
        'running PreBind plugin "VolumeBinding": injected HTTP 403') and not api.of("POST")


async def test_a_replica_not_leading_writes_nothing() -> None:
    api, binder, results, _ = _setup(term=lambda: None)
    await _bind(binder, replace(_binding(), volume_writes=WRITES))
    assert results[0].outcome is Outcome.RETRY and results[0].not_leading
    assert not api.calls


def test_the_loop_writes_the_decisions_volumes_first_and_a_refusal_frees_them() -> None:
    """The loop's Binding carries the writes the decision's claims need, from the versions its
    core holds; a refused write makes the core forget the pod, and the volume is free again."""
    api = FakeApi()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="test")  # type: ignore[arg-type]
    for obj in (*nodes("a"), storage_class("local", "WaitForFirstConsumer"),
                volume("nvme-a", "a", storage_class="local"), claim("data", storage_class="local"),
                claimer("train", "data")):
        loop._on_event("ADDED", obj)
    [attempt] = loop.core.schedule_next(0.0) or []
    assert attempt.node == "a" and loop.core.state.volumes_given == {"nvme-a": "default/data"}
    binding = loop._binding(attempt)
    assert [write.path for write in binding.volume_writes] == [PV]
    loop._on_bound(BindResult(binding, Outcome.RETRY, 'running PreBind plugin "VolumeBinding": conflict', 0.01,
                              sends=0, pre_bind=True))
    assert loop.core.state.volumes_given == {} and loop.core.state.node_of(attempt.pod.uid) is None
