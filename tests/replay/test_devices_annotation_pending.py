"""A `tessera.dev/devices` annotation written on a pending pod (an admin hoping to choose its GPUs,
a manifest copied from a bound pod) is never trusted — Tessera chooses the devices and its
Binding replaces the annotation — and is not replaced in silence: a `DevicesAnnotationIgnored`
Warning on the pod names what it said, once per pod (and again only if someone writes another
value while it still waits)."""

from __future__ import annotations

from typing import Any

import orjson

from scheduler.core import annotations as ann
from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, config

CLASS = "class.tessera.dev/v100"


def _cluster() -> tuple[Run, list[dict[str, Any]]]:
    run = Run(config(BINPACK))
    gpus = [b.device("n", i) for i in range(2)]
    run.add(b.node("n", gpus=2), *gpus, b.resource_class("v100", match_labels={"model": "V100"}))
    return run, gpus


def _naming(gpu: dict[str, Any]) -> str:
    return orjson.dumps({"containers": {"main": {CLASS: [
        {"device": gpu["metadata"]["name"], "id": gpu["spec"]["deviceID"]}]}}, "version": 1}).decode()


def _ignored(run: Run) -> list[str]:
    return [notice for notice in run.notices() if notice.startswith("DevicesAnnotationIgnored: ")]


def test_an_admins_devices_annotation_on_a_pending_pod_is_ignored_and_said_so() -> None:
    run, gpus = _cluster()
    wanted = _naming(gpus[1])
    [attempt] = run.add(b.pod("p", limits={CLASS: 1}, annotations={ann.DEVICES: wanted}))
    # the placement is Tessera's own: the same as the same pod's without the annotation
    twin, _ = _cluster()
    [plain] = twin.add(b.pod("p", limits={CLASS: 1}))
    assert attempt.node == plain.node == "n"
    assert attempt.annotations[ann.DEVICES] == plain.annotations[ann.DEVICES] != wanted
    assert _ignored(run) == [
        f"DevicesAnnotationIgnored: the tessera.dev/devices annotation on pending pod default/p is ignored: "
        f"Tessera chooses a pod's devices and its Binding replaces the annotation (it said {wanted})"]
    assert _ignored(twin) == []


def test_the_warning_comes_once_per_pod_while_it_waits() -> None:
    """A pod that waits is seen again and again (its status written, labels edited): one Warning;
    a new value written by hand is a new word to answer."""
    run, gpus = _cluster()
    run.add(*(b.pod(f"r{i}", limits={CLASS: 1}) for i in range(2)))  # every GPU taken: p waits
    pod = b.pod("p", limits={CLASS: 1}, annotations={ann.DEVICES: _naming(gpus[0])})
    run.add(pod)
    for version, labels in ((2, {"edited": "1"}), (3, {"edited": "2"})):
        pod["metadata"]["resourceVersion"] = str(version)
        pod["metadata"]["labels"] = labels
        run.feed(b.event("MODIFIED", pod))
    assert len(_ignored(run)) == 1
    assert run.node_of("p") is None
    pod["metadata"]["resourceVersion"] = "4"
    pod["metadata"]["annotations"] = {ann.DEVICES: _naming(gpus[1])}
    run.feed(b.event("MODIFIED", pod))
    assert len(_ignored(run)) == 2 and _naming(gpus[1]) in _ignored(run)[1]


def test_another_schedulers_pending_pod_is_none_of_tesseras_business() -> None:
    run, gpus = _cluster()
    run.add(b.pod("p", scheduler="default-scheduler", limits={CLASS: 1}, annotations={ann.DEVICES: _naming(gpus[0])}))
    assert _ignored(run) == []


def test_a_long_value_is_cut_in_the_message() -> None:
    run, _ = _cluster()
    run.add(b.pod("p", limits={CLASS: 1}, annotations={ann.DEVICES: "x" * 5000}))
    [told] = _ignored(run)
    assert "x" * 200 + "…" in told and "x" * 201 not in told
