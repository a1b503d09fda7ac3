"""Live fuzz on the real control plane: odd objects the apiserver accepts, then a good pod.

About thirty objects are drawn at random (seeded; `TESSERA_FUZZ_SEED` replays a run) from
templates the apiserver and the CRDs accept but Tessera must refuse, explain or survive: absurd
quantities, classes nobody provides, gang labels that are not numbers, PodGroups that can never be
complete, pods created already bound with broken `tessera.dev/devices` annotations, ResourceClasses
with out-of-range Gt values or clashing resourceNames, ExtendedResources with unusable capacities.
The in-process loop must stay alive, write a Warning Event (or a Valid=False condition) for each bad
object, and still bind a good pod created afterwards.
"""

from __future__ import annotations

import os
import random
import secrets
from dataclasses import dataclass
from typing import Any

import orjson
import pytest

from scheduler.core import annotations as ann
from scheduler.core.objects import GANG_MIN_LABEL, GANG_NAME_LABEL, PODGROUP_LABEL
from scheduler.sim import builders as b
from tests.e2e.live import Kube, eventually
from tests.fuzz.tally import tried

pytestmark = pytest.mark.e2e

NODES = "/api/v1/nodes"
ERS = "/apis/tessera.dev/v1alpha1/extendedresources"
CLASSES = "/apis/tessera.dev/v1alpha1/resourceclasses"
GOOD_TAINT = {"key": "fuzz.example.com/good", "value": "only", "effect": "NoSchedule"}

BROKEN_ANNOTATIONS = (
    "", "[]", "{oops", '{"version": 2, "containers": {}}', '{"version": 1, "containers": []}',
    '{"version": 1, "containers": {"main": {"class.tessera.dev/x": []}}}',
    '{"version": 1, "containers": {"main": {"class.tessera.dev/x": [{"id": 1}]}}}',
    '{"version": 1, "containers": {"main": {"r": [{"id": "a", "device": "d", "amount": "-1"}]}}}',
    '{"version": 1, "containers": {"main": {"r": [{"id": "a", "device": "d", "amount": "1e999"}]}}}',
    "\u00e9\u6f22" * 50,
)


@dataclass
class Odd:
    """One object to create, and what Tessera must say about it (reason and a note fragment)."""

    kind: str  # Pod, ResourceClass, ExtendedResource, PodGroup
    obj: dict[str, Any]
    reason: str  # expected Warning reason: FailedScheduling, InvalidObject, BrokenDeviceAnnotation, InvalidResourceClass, "" (none)
    fragment: str | tuple[str, ...] = ""  # one of these is in the note
    may_bind: bool = False  # a pod Tessera may still bind (a bad gang label: scheduled as a single pod)

    def said_by(self, event: dict[str, Any]) -> bool:
        fragments = (self.fragment,) if isinstance(self.fragment, str) else self.fragment
        return (event.get("type") == "Warning" and event["regarding"]["name"] == self.obj["metadata"]["name"]
                and event["reason"] == self.reason and any(f in event.get("note", "") for f in fragments))


def odd_objects(rng: random.Random, tag: str) -> list[Odd]:
    """About thirty random objects, each one the apiserver accepts."""
    out: list[Odd] = []
    templates = ["huge-gpus", "huge-cpu", "huge-memory", "no-class", "gang-label", "gang-huge", "podgroup-missing",
                 "podgroup-huge", "bound-broken", "selector-nowhere", "affinity-gt", "bound-unknown-device"]
    for i in range(24):
        template = rng.choice(templates)
        name = f"odd-{i}-{template}"
        if template == "huge-gpus":
            count = rng.choice((1000, 10**6, 2**40))
            out.append(Odd("Pod", b.pod(name, limits={"nvidia.com/gpu": count}), "FailedScheduling", "Insufficient nvidia.com/gpu"))
        elif template == "huge-cpu":
            out.append(Odd("Pod", b.pod(name, requests={"cpu": rng.choice(("1Ei", "9e18", "100P"))}), "InvalidObject",
                           "Pod.spec.containers[0].resources.requests[cpu]"))
        elif template == "huge-memory":
            out.append(Odd("Pod", b.pod(name, requests={"memory": rng.choice(("8Ei", "1e19"))}), "InvalidObject",
                           "Pod.spec.containers[0].resources.requests[memory]"))
        elif template == "no-class":
            resource = f"class.tessera.dev/nobody-{tag}-{i}"
            out.append(Odd("Pod", b.pod(name, limits={resource: rng.randint(1, 4)}), "FailedScheduling",
                           f'no ResourceClass provides "{resource}"'))
        elif template == "gang-label":
            value = rng.choice(("x", "1.5", "", "two", "0x2"))
            out.append(Odd("Pod", b.pod(name, labels={GANG_NAME_LABEL: f"g{i}", GANG_MIN_LABEL: value}), "InvalidObject",
                           GANG_MIN_LABEL, may_bind=True))
        elif template == "gang-huge":
            out.append(Odd("Pod", b.pod(name, labels={GANG_NAME_LABEL: f"g{i}", GANG_MIN_LABEL: str(rng.choice((5, 10**6)))}),
                           "FailedScheduling", "cannot find enough sibling pods"))
        elif template == "podgroup-missing":
            out.append(Odd("Pod", b.pod(name, labels={PODGROUP_LABEL: f"missing-{i}"}), "FailedScheduling", "not found"))
        elif template == "podgroup-huge":
            group = b.podgroup(f"pg-{i}", rng.choice((50, 2**31 - 1)))
            out.append(Odd("PodGroup", group, ""))
            # the PodGroup and the pod arrive through different watches: either message is right
            out.append(Odd("Pod", b.pod(name, labels={PODGROUP_LABEL: f"pg-{i}"}), "FailedScheduling",
                           ("cannot find enough sibling pods", "not found")))
        elif template == "bound-broken":
            out.append(Odd("Pod", b.pod(name, node_name="fz-odd", phase="Running",
                                        annotations={ann.DEVICES: rng.choice(BROKEN_ANNOTATIONS)}),
                           "BrokenDeviceAnnotation", ann.DEVICES))
        elif template == "selector-nowhere":
            out.append(Odd("Pod", b.pod(name, spec_extra={"nodeSelector": {"zone": f"nowhere-{i}"}}), "FailedScheduling",
                           "didn't match Pod's node affinity/selector"))
        elif template == "affinity-gt":
            affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "rank", "operator": "Gt", "values": [str(rng.randint(10, 10**9))]}]}]}}}
            out.append(Odd("Pod", b.pod(name, spec_extra={"affinity": affinity}), "FailedScheduling",
                           "didn't match Pod's node affinity/selector"))
        else:  # valid JSON naming devices nobody has: charged (fail safe), no warning
            value = ann.encode_devices({"main": {"class.tessera.dev/x": (ann.DeviceGrant("GPU-x", f"ghost-{i}", None),)}})
            out.append(Odd("Pod", b.pod(name, node_name="fz-odd", phase="Running", annotations={ann.DEVICES: value}), ""))
    # Cluster-scoped objects: classes and devices.
    exponent = rng.choice(("1e100", "1e61", "1e999"))
    out.append(Odd("ResourceClass", b.resource_class(f"fz-gt-{tag}", expressions=[
        {"key": "memory", "operator": "Gt", "values": [exponent]}]), "InvalidResourceClass", "values[0]"))
    shared = f"fuzz.example.com/dup-{tag}"
    out.append(Odd("ResourceClass", b.resource_class(f"fz-dup-a-{tag}", match_labels={"model": "X"}, resource_name=shared,
                                                     created="2020-01-01T00:00:00Z"), ""))
    out.append(Odd("ResourceClass", b.resource_class(f"fz-dup-b-{tag}", match_labels={"model": "Y"}, resource_name=shared),
                   "InvalidResourceClass", "Duplicate value"))
    out.append(Odd("ResourceClass", b.resource_class(f"fz-odd-{tag}", expressions=[
        {"key": "vendor", "operator": "DoesNotExist"}, {"key": "model", "operator": "In", "values": ["\u00e9\u6f22", "K80"]},
        {"key": "memory", "operator": "Lt", "values": [rng.choice(("0", "1n", "16Gi"))]}]), ""))
    bad_device = b.device("fz-odd", 0)
    bad_device["spec"]["capacity"] = {"memory": rng.choice(("1e100", "1e1.5", "1e999"))}
    out.append(Odd("ExtendedResource", bad_device, "InvalidObject", "ExtendedResource.spec.capacity[memory]"))
    odd_device = b.device(f"nowhere-{tag}", 1, attributes={"model": "\u00e9" * 200})
    odd_device["spec"]["capacity"] = {"memory": "-1Gi"}
    out.append(Odd("ExtendedResource", odd_device, ""))
    return out


async def _create_node(kubectl: Kube, node: dict[str, Any]) -> None:
    await kubectl.create(NODES, node)
    await kubectl.call("PATCH", f"{NODES}/{node['metadata']['name']}/status", {"status": node["status"]},
                       content_type="application/merge-patch+json")


async def _create(kubectl: Kube, namespace: str, odd: Odd) -> bool:
    """Create the object; False when the apiserver refuses it (then it is no test input)."""
    obj = odd.obj
    if odd.kind == "Pod":
        path, body = f"/api/v1/namespaces/{namespace}/pods", {**obj, "metadata": {**obj["metadata"], "namespace": namespace}}
    elif odd.kind == "PodGroup":
        path = f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups"
        body = {**obj, "metadata": {**obj["metadata"], "namespace": namespace}}
    else:
        path, body = (CLASSES if odd.kind == "ResourceClass" else ERS), obj
    from tests.e2e.live import creatable

    response = await kubectl.call("POST", path, creatable(body), ok=(200, 201, 400, 403, 422))
    return response.status in (200, 201)


async def test_live_fuzz_odd_objects_then_a_good_pod(tessera: Any, kubectl: Kube, namespace: str) -> None:
    seed = int(os.environ.get("TESSERA_FUZZ_SEED", "0") or 0) or secrets.randbits(32)
    rng = random.Random(seed)
    tag = f"{seed % 100000}"
    loop = await tessera("config/binpack.yaml")
    await _create_node(kubectl, b.node("fz-odd", gpus=2, labels={"rank": "3"}))
    objects = odd_objects(rng, tag)
    created = [odd for odd in objects if await _create(kubectl, namespace, odd)]
    tried(len(created))
    assert len(created) >= 24, f"seed {seed}: the apiserver refused {len(objects) - len(created)} objects"

    await _create_node(kubectl, b.node("fz-good", gpus=2, taints=[GOOD_TAINT]))
    good = b.pod("good", limits={"nvidia.com/gpu": 1},
                 spec_extra={"tolerations": [{"key": GOOD_TAINT["key"], "operator": "Exists"}],
                             "nodeSelector": {"kubernetes.io/hostname": "fz-good"}})
    await kubectl.create_pod(namespace, good)

    async def good_bound() -> str:
        return str((await kubectl.pods(namespace))["good"]["spec"].get("nodeName", ""))

    assert await eventually(good_bound, timeout=30) == "fz-good", f"seed {seed}"
    assert loop.healthy and loop.informers.synced and loop.stats.cycles > 0, f"seed {seed}: the loop is not alive"

    expected = [odd for odd in created if odd.reason]

    async def missing_warnings() -> list[str]:
        events = await kubectl.events(namespace) + await kubectl.events("default")
        return [f"{odd.kind} {odd.obj['metadata']['name']}: {odd.reason} {odd.fragment!r}"
                for odd in expected if not any(odd.said_by(e) for e in events)]

    async def all_warned() -> bool:
        return not await missing_warnings()

    try:
        await eventually(all_warned, timeout=30)
    except AssertionError:
        events = await kubectl.events(namespace) + await kubectl.events("default")
        seen = sorted({f"{e['regarding']['name']}: {e['reason']}: {e.get('note', '')[:120]}" for e in events})
        raise AssertionError(f"seed {seed}: no Warning Event for {await missing_warnings()}\n"
                             f"events: {orjson.dumps(seen).decode()[:4000]}") from None

    # Invalid classes also carry Valid=False.
    for odd in expected:
        if odd.kind == "ResourceClass":
            name = odd.obj["metadata"]["name"]

            async def invalid(name: str = name) -> bool:
                status = (await kubectl.call("GET", f"{CLASSES}/{name}")).json().get("status") or {}
                return any(c["type"] == "Valid" and c["status"] == "False" for c in status.get("conditions", []))

            await eventually(invalid, timeout=15)
    # Pods that cannot fit or cannot be read were not bound.
    pods = await kubectl.pods(namespace)
    for odd in created:
        if odd.kind == "Pod" and odd.reason in ("FailedScheduling", "InvalidObject") and not odd.may_bind:
            assert not pods[odd.obj["metadata"]["name"]]["spec"].get("nodeName"), odd.obj["metadata"]["name"]
