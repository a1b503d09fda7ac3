"""A device annotation written on a pending pod — `tessera.dev/devices` (an admin hoping to choose
its GPUs, a manifest copied from a bound pod) or `tessera.dev/held-devices` (the record of what a
bound pod holds: a copied manifest, a bad mutating webhook) — is never trusted: Tessera chooses
the devices and its Binding replaces both annotations. Nor is it replaced in silence: a Warning on
the pod (`DevicesAnnotationIgnored`, `HeldDevicesAnnotationIgnored`) names what it said, once per
pod (and again only if someone writes another value while it still waits). Neither moves a
placement: an unreadable one does not fence the node while the pod's Binding is in flight."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from scheduler.core import annotations as ann
from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, config

CLASS = "class.tessera.dev/v100"

# the annotation, the Warning's reason, why it is ignored (the message after "is ignored: ")
IGNORED = [
    pytest.param(ann.DEVICES, "DevicesAnnotationIgnored",
                 "Tessera chooses a pod's devices and its Binding replaces the annotation", id="devices"),
    pytest.param(ann.HELD_DEVICES, "HeldDevicesAnnotationIgnored",
                 "it is the scheduler's record of the devices a bound pod holds, not a request; Tessera "
                 "chooses a pod's devices and its Binding replaces the annotation with the devices it gives "
                 "(none for a pod that asks for no class device)", id="held-devices"),
]
KEYS = pytest.mark.parametrize(("key", "reason", "why"), IGNORED)


def _cluster() -> tuple[Run, list[dict[str, Any]]]:
    run = Run(config(BINPACK))
    gpus = [b.device("n", i) for i in range(2)]
    run.add(b.node("n", gpus=2), *gpus, b.resource_class("v100", match_labels={"model": "V100"}))
    return run, gpus


def _naming(gpu: dict[str, Any]) -> str:
    return orjson.dumps({"containers": {"main": {CLASS: [
        {"device": gpu["metadata"]["name"], "id": gpu["spec"]["deviceID"]}]}}, "version": 1}).decode()


def _ignored(run: Run, reason: str) -> list[str]:
    return [notice for notice in run.notices() if notice.startswith(f"{reason}: ")]


@KEYS
def test_an_admins_annotation_on_a_pending_pod_is_ignored_and_said_so(key: str, reason: str, why: str) -> None:
    run, gpus = _cluster()
    wanted = _naming(gpus[1])
    [attempt] = run.add(b.pod("p", limits={CLASS: 1}, annotations={key: wanted}))
    # the placement is Tessera's own: the same as the same pod's without the annotation
    twin, _ = _cluster()
    [plain] = twin.add(b.pod("p", limits={CLASS: 1}))
    assert attempt.node == plain.node == "n"
    for written in (ann.DEVICES, ann.HELD_DEVICES):
        assert attempt.annotations[written] == plain.annotations[written] != wanted
    assert _ignored(run, reason) == [
        f"{reason}: the {key} annotation on pending pod default/p is ignored: {why} (it said {wanted})"]
    assert [notice for notice in run.notices() if "Ignored: " in notice] == _ignored(run, reason)
    assert _ignored(twin, reason) == []


@KEYS
def test_the_warning_comes_once_per_pod_while_it_waits(key: str, reason: str, why: str) -> None:
    """A pod that waits is seen again and again (its status written, labels edited): one Warning;
    a new value written by hand is a new word to answer."""
    run, gpus = _cluster()
    run.add(*(b.pod(f"r{i}", limits={CLASS: 1}) for i in range(2)))  # every GPU taken: p waits
    pod = b.pod("p", limits={CLASS: 1}, annotations={key: _naming(gpus[0])})
    run.add(pod)
    for version, labels in ((2, {"edited": "1"}), (3, {"edited": "2"})):
        pod["metadata"]["resourceVersion"] = str(version)
        pod["metadata"]["labels"] = labels
        run.feed(b.event("MODIFIED", pod))
    assert len(_ignored(run, reason)) == 1
    assert run.node_of("p") is None
    pod["metadata"]["resourceVersion"] = "4"
    pod["metadata"]["annotations"] = {key: _naming(gpus[1])}
    run.feed(b.event("MODIFIED", pod))
    assert len(_ignored(run, reason)) == 2 and _naming(gpus[1]) in _ignored(run, reason)[1]


@KEYS
def test_another_schedulers_pending_pod_is_none_of_tesseras_business(key: str, reason: str, why: str) -> None:
    run, gpus = _cluster()
    run.add(b.pod("p", scheduler="default-scheduler", limits={CLASS: 1}, annotations={key: _naming(gpus[0])}))
    assert _ignored(run, reason) == []


@KEYS
def test_a_long_value_is_cut_in_the_message(key: str, reason: str, why: str) -> None:
    run, _ = _cluster()
    run.add(b.pod("p", limits={CLASS: 1}, annotations={key: "x" * 5000}))
    [told] = _ignored(run, reason)
    assert "x" * 200 + "…" in told and "x" * 201 not in told


@KEYS
def test_a_pending_pods_unreadable_annotation_fences_no_node_while_its_binding_is_in_flight(
        key: str, reason: str, why: str) -> None:
    """The pod is assumed on its node with the devices Tessera chose, its Binding not yet
    confirmed (the core alone: nothing binds it): what its own annotation said is no record of
    anything, so the node stays open to the next pod, as for the same pod without it."""
    run, _ = _cluster()
    core = run.scheduler
    core.apply("ADDED", b.pod("p", limits={CLASS: 1}, annotations={key: "not json"}), 0.0)
    [first] = core.schedule_next(0.0)
    core.apply("ADDED", b.pod("q", limits={CLASS: 1}), 0.0)
    [second] = core.schedule_next(0.0)
    assert (first.node, second.node) == ("n", "n"), second.message
    assert first.annotations[ann.DEVICES] != second.annotations[ann.DEVICES]
    assert run.state.nodes["n"].broken == set()


def test_a_held_devices_annotation_naming_anothers_gpu_gives_it_to_no_one_twice() -> None:
    """A pending pod whose held-devices names the GPU a bound pod holds is given the other GPU;
    once both are bound the node is full: a third pod waits, and the bound pods' records name
    one GPU each, no GPU twice."""
    run, gpus = _cluster()
    [first] = run.add(b.pod("r", limits={CLASS: 1}))
    taken = next(gpu for gpu in gpus if gpu["metadata"]["name"] in first.annotations[ann.DEVICES])
    [attempt] = run.add(b.pod("p", limits={CLASS: 1}, annotations={ann.HELD_DEVICES: _naming(taken)}))
    assert attempt.node == "n" and taken["metadata"]["name"] not in attempt.annotations[ann.HELD_DEVICES]
    assert attempt.annotations[ann.HELD_DEVICES] == attempt.annotations[ann.DEVICES]
    run.add(b.pod("q", limits={CLASS: 1}))
    assert run.node_of("q") is None
    holders = {uid: run.state.placements[uid].devices for uid in run.state.nodes["n"].pods}
    held = [device for devices in holders.values() for device in devices]
    assert len(holders) == 2 and sorted(held) == sorted(gpu["metadata"]["name"] for gpu in gpus)
