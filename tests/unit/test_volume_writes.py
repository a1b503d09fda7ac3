"""VolumeBinding's writes before a Binding (upstream's PreBind, bindAPIUpdate), against the fake
HTTP layer: a static volume gets the claim's claimRef and bound-by-controller, a provisioned claim
its selected-node, each conditional on the version the core holds; a write refused keeps the
Binding from being sent (the pod is decided again), and a replica not leading writes nothing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import orjson

from scheduler.api.config import load_config
from scheduler.core import annotations as ann
from scheduler.core.volumes import ClaimBinding
from scheduler.kube.binder import Binding, BindResult, Outcome
from scheduler.kube.http import MERGE_PATCH, KubeHttp, Response
from scheduler.kube.loop import SchedulerLoop
from scheduler.kube.volume_writes import VolumeWrite, planned
from scheduler.sim import builders as b
from tests.fakeapi import Call, FakeApi
from tests.helpers import Run
from tests.replay.test_allocation_gate import HEARTBEAT
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
    (write,) = planned(run.state, (ClaimBinding("default/data", "nvme-a", "1"),), "a")
    assert write == VolumeWrite(PV, {
        "metadata": {"resourceVersion": "1", "annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}},
        "spec": {"claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": "default",
                              "name": "data", "uid": "uid-default-data", "resourceVersion": "1"}}},
        'persistentvolumes "nvme-a"', "nvme-a")


def test_a_volume_already_naming_the_claim_needs_nothing_or_only_its_uid() -> None:
    ref = {"namespace": "default", "name": "data"}
    run = _state_with(volume("nvme-a", "a", storage_class="local", claimRef={**ref, "uid": "uid-default-data"}),
                      volume("pre", "a", storage_class="local", claimRef=ref), claim("data", storage_class="local"))
    assert planned(run.state, (ClaimBinding("default/data", "nvme-a", "1"),), "a") == ()
    (write,) = planned(run.state, (ClaimBinding("default/data", "pre", "1"),), "a")
    assert "annotations" not in write.body["metadata"]  # pre-bound by its user: not the controller's
    assert write.body["spec"]["claimRef"]["uid"] == "uid-default-data"


def test_a_provisioned_claim_gets_the_node_unless_it_has_it() -> None:
    run = _state_with(claim("data", storage_class="local"),
                      claim("done", storage_class="local", annotations={"volume.kubernetes.io/selected-node": "a"}))
    assert planned(run.state, (ClaimBinding("default/data", "", "1"), ClaimBinding("default/done", "", "1")), "a") == (
        VolumeWrite(PVC, {"metadata": {"resourceVersion": "1",
                                       "annotations": {"volume.kubernetes.io/selected-node": "a"}}},
                    'persistentvolumeclaims "data"', "default/data"),)


def test_an_object_gone_since_the_decision_fails_without_a_request() -> None:
    run = _state_with(claim("data", storage_class="local"))
    (write,) = planned(run.state, (ClaimBinding("default/data", "nvme-a", "1"),), "a")
    assert write == VolumeWrite(PV, {}, 'persistentvolumes "nvme-a"', "nvme-a",
                                refused='persistentvolumes "nvme-a" not found')


def _loop(*objects: dict[str, Any], config: str | None = None) -> SchedulerLoop:
    api = FakeApi()
    loop = SchedulerLoop(load_config(config), KubeHttp(api), KubeHttp(api), identity="test")  # type: ignore[arg-type]
    for obj in objects:
        loop._on_event("ADDED", obj)
    return loop


def _at(obj: dict[str, Any], version: str) -> dict[str, Any]:
    obj["metadata"]["resourceVersion"] = version
    return obj


CONFLICT = ("Operation cannot be fulfilled on {}: the object has been modified; please apply your changes to the "
            "latest version and try again")


async def test_a_volume_given_to_another_claim_after_the_decision_is_refused_without_a_request() -> None:
    """upstream's bindAPIUpdate updates the volume as assumed at the decision: the write is
    conditional on the version decided on, not on a later one the watch brought (the allocation
    gate held the Binding meanwhile), and a volume the watch shows naming another claim is refused
    at once with the apiserver's 409 words (the pod is decided again): never taken from that claim."""
    loop = _loop(*nodes("a"), storage_class("local", "WaitForFirstConsumer"), volume("nvme-a", "a", storage_class="local"),
                 claim("data", storage_class="local"), claim("other", storage_class="local"), claimer("train", "data"))
    [attempt] = loop.core.schedule_next(0.0) or []
    assert attempt.claims == (ClaimBinding("default/data", "nvme-a", "1"),)
    relabelled = _at(volume("nvme-a", "a", storage_class="local"), "2")
    relabelled["metadata"]["labels"] = {"edited": "yes"}
    loop._on_event("MODIFIED", relabelled)
    (write,) = loop._binding(attempt).volume_writes
    assert write.body["metadata"]["resourceVersion"] == "1"  # the apiserver refuses it: 409
    loop._on_event("MODIFIED", _at(volume("nvme-a", "a", storage_class="local", claimRef={
        "namespace": "default", "name": "other", "uid": "uid-default-other"}), "3"))
    (write,) = loop._binding(attempt).volume_writes
    assert write == VolumeWrite(PV, {}, 'persistentvolumes "nvme-a"', "nvme-a",
                                refused=CONFLICT.format('persistentvolumes "nvme-a"'))
    api, binder, results, _ = _setup()
    await _bind(binder, replace(_binding(), volume_writes=(write,)))
    assert results[0].outcome is Outcome.RETRY and results[0].refusal == (
        'running PreBind plugin "VolumeBinding": ' + CONFLICT.format('persistentvolumes "nvme-a"'))
    assert not api.calls


def test_a_claim_selected_for_another_node_after_the_decision_is_refused() -> None:
    """The provisioning twin: the selected-node write is conditional on the claim as decided on,
    and a claim the watch shows selected for another node (another scheduler) is not moved back."""
    loop = _loop(*nodes("a", "b"), storage_class("csi", "WaitForFirstConsumer", provisioner="csi.example.com"),
                 claim("data", storage_class="csi"), claimer("train", "data"))
    [attempt] = loop.core.schedule_next(0.0) or []
    assert attempt.claims == (ClaimBinding("default/data", "", "1"),) and attempt.node is not None
    other = "b" if attempt.node == "a" else "a"
    loop._on_event("MODIFIED", _at(claim("data", storage_class="csi", annotations={"edited": "yes"}), "2"))
    (write,) = loop._binding(attempt).volume_writes
    assert write.body["metadata"]["resourceVersion"] == "1"
    loop._on_event("MODIFIED", _at(claim("data", storage_class="csi", annotations={
        "volume.kubernetes.io/selected-node": other}), "3"))
    (write,) = loop._binding(attempt).volume_writes
    assert write == VolumeWrite(PVC, {}, 'persistentvolumeclaims "data"', "default/data",
                                refused=CONFLICT.format('persistentvolumeclaims "data"'))


def test_a_binding_the_allocation_gate_held_does_not_take_a_volume_given_meanwhile() -> None:
    """End to end in the core and loop: p1 (a GPU and claim "data") is placed on n with nvme-n
    while p0 holds n's allocation gate; meanwhile another scheduler binds nvme-n to claim
    "theirs"; when the gate lets p1 go, its Binding's write is refused, not sent."""
    node = b.node("n", gpus=4)
    node["metadata"]["labels"]["kubernetes.io/hostname"] = "n"
    p0 = b.pod("p0", limits={"class.tessera.dev/v100": 1})
    p1 = b.pod("p1", limits={"class.tessera.dev/v100": 1},
               spec_extra={"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]})
    loop = _loop(node, *(b.device("n", i, heartbeat=HEARTBEAT) for i in range(4)),
                 b.resource_class("v100", match_labels={"model": "V100"}), storage_class("local", "WaitForFirstConsumer"),
                 volume("nvme-n", "n", storage_class="local"), claim("data", storage_class="local"),
                 claim("theirs", storage_class="local"), p0, p1, config="config/binpack.yaml")
    placed = [a for _ in range(4) for a in (loop.core.schedule_next(0.0) or [])]
    held = next(a for a in placed if a.pod.meta.name == "p1")
    assert held.node == "n" and held.deferred and held.claims == (ClaimBinding("default/data", "nvme-n", "1"),)
    loop._on_event("MODIFIED", _at(volume("nvme-n", "n", storage_class="local", claimRef={
        "namespace": "default", "name": "theirs", "uid": "uid-default-theirs"}), "2"))
    first = next(a for a in placed if a.pod.meta.name == "p0")
    bound = {**p0, "metadata": {**p0["metadata"], "resourceVersion": "5",
                                "annotations": {**p0["metadata"].get("annotations", {}), **first.annotations,
                                                ann.PHASE: ann.PHASE_ALLOCATED}},
             "spec": {**p0["spec"], "nodeName": "n"}}
    sent: list[Binding] = []
    loop.binder.submit = sent.append  # type: ignore[method-assign, assignment]
    loop._on_event("MODIFIED", bound)  # the gate opens: the loop sends p1's Binding
    assert [s.name for s in sent] == ["p1"]
    (write,) = sent[0].volume_writes
    assert write.refused == CONFLICT.format('persistentvolumes "nvme-n"') and not write.body


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
