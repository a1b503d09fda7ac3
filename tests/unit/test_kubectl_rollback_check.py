"""`kubectl tessera rollback-check` against the fake apiserver HTTP layer (tests/fakeapi.py): an
SRE trial rolled back to a version from before `tessera.dev/held-devices`, and it gave a GPU a
bound pod's containers still used to a second pod (the pod's `tessera.dev/devices` had been
edited; the old version reads only that). The check lists those pods before a rollback and
exits 1; a cluster without them is "safe to roll back", exit 0."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import orjson
import pytest

from scheduler.core import annotations as ann
from scheduler.kube.http import Response
from scheduler.kube.informers import PODS
from scheduler.kubectl import cli, rollback
from scheduler.sim import builders as b
from tests.fakeapi import Call, FakeApi, _status

GiB = 2**30


def _grants(*grants: tuple[str, int | None]) -> str:
    """A devices annotation of container main: (device, slice bytes or None for whole)."""
    return ann.encode_devices({"main": {"nvidia.com/gpu": tuple(
        ann.DeviceGrant(f"GPU-{device}", device, None if amount is None else Fraction(amount)) for device, amount
        in grants)}})


def _bound(name: str, held: str | None, devices: str | None, phase: str = "Running",
           namespace: str = "team-a") -> dict[str, Any]:
    annotations = {key: value for key, value in ((ann.HELD_DEVICES, held), (ann.DEVICES, devices)) if value is not None}
    return b.pod(name, namespace, limits={"nvidia.com/gpu": 1}, annotations=annotations, node_name="n1", phase=phase)


class _Api(FakeApi):
    """The fake apiserver behind a real KubeHttp, as `connect` returns it to the plugin."""

    async def close(self) -> None:
        """`ApiClient.close`: nothing to close."""


def _api(*pods: dict[str, Any]) -> _Api:
    api = _Api()
    api.handlers.append(lambda call: Response(200, b'{"gitVersion": "v1.36.3"}') if call.path == "/version" else None)
    for pod in pods:
        api.add_pod(pod)
    return api


def _run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], api: _Api,
         *flags: str) -> tuple[int, str, str]:
    async def connect(*_: Any, **__: Any) -> _Api:
        return api

    monkeypatch.setattr(cli, "connect", connect)
    monkeypatch.setenv("KUBECONFIG", "/nonexistent")
    status = cli.main(["rollback-check", *flags])
    out, err = capsys.readouterr()
    return status, out, err


EDITED = (_grants(("gpu-0", None)), _grants(("gpu-1", None)))  # held-devices, devices after the trial's edit


def test_a_pod_whose_edit_dropped_a_held_gpu_makes_the_rollback_unsafe(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    union = _grants(("gpu-0", None), ("gpu-1", None))  # what the new version writes back after the edit
    api = _api(_bound("edited", union, EDITED[1]),
               _bound("untouched", _grants(("gpu-2", None)), _grants(("gpu-2", None))),
               _bound("old-pod", None, _grants(("gpu-3", None))),  # bound by an older version: nothing to lose
               _bound("done", union, EDITED[1], phase="Succeeded"))
    status, out, err = _run(monkeypatch, capsys, api)
    assert (status, err) == (1, "")
    assert out == ("POD             NODE   DEVICES AN OLDER VERSION WOULD SEE FREE\n"
                   "team-a/edited   n1     gpu-0\n\n"
                   "1 pod holds devices an older version cannot see (it reads tessera.dev/devices alone and would "
                   "give them to another pod): not safe to roll back to a build without tessera.dev/held-devices "
                   "(before 6ba0c29) until they end; a build from 6ba0c29 on reads both, and this check does not "
                   "apply to it\n")
    assert [c.path for c in api.of("GET")] == ["/version", PODS.path]  # every namespace's pods, read only


def test_a_cluster_without_such_pods_is_safe_to_roll_back(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    api = _api(_bound("same", _grants(("gpu-0", None)), _grants(("gpu-0", None))), b.pod("pending", "team-a"))
    status, out, _ = _run(monkeypatch, capsys, api, "-o", "json")
    assert status == 0
    doc = orjson.loads(out)
    assert doc["safe"] is True and doc["pods"] == [] and doc["verdict"].startswith("safe to roll back")


def test_slices_a_removed_annotation_and_an_unreadable_record() -> None:
    pods = [
        _bound("grown", _grants(("gpu-0", 8 * GiB)), _grants(("gpu-0", 4 * GiB)), namespace="b"),
        _bound("wider", _grants(("gpu-1", 4 * GiB)), _grants(("gpu-1", None)), namespace="b"),  # named whole: seen
        _bound("whole", _grants(("gpu-2", None)), _grants(("gpu-2", 4 * GiB)), namespace="b"),
        _bound("removed", _grants(("gpu-3", None)), None, namespace="b"),  # an older version reads no devices
        _bound("garbled", "{", _grants(("gpu-4", None)), namespace="b"),
        _bound("broken", _grants(("gpu-5", None)), "{", namespace="b"),  # an older version fences the node
        _bound("dropped", _grants(("gpu-6", 8 * GiB), ("gpu-7", None)), _grants(("gpu-7", None)), namespace="b"),
    ]
    result = rollback.check(pods)
    assert [(u.pod, u.devices) for u in result.pods] == [
        ("b/dropped", ("gpu-6 (8Gi)",)),  # a slice no longer named at all: the part held is shown
        ("b/garbled", ()), ("b/grown", ("gpu-0 (8Gi held, 4Gi named)",)), ("b/removed", ("gpu-3",)),
        ("b/whole", ("gpu-2 (whole held, 4Gi named)",))]
    assert result.pods[1].why.startswith("tessera.dev/held-devices cannot be read (not valid JSON")
    assert rollback.as_dict(result)["pods"][1]["reason"] == result.pods[1].why
    assert "5 pods hold devices an older version cannot see" in rollback.render(result)


def test_pods_unreadable_cluster_wide_is_an_error_not_a_verdict(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    api = _api(_bound("edited", EDITED[0], EDITED[1]))

    def deny(call: Call) -> Response | None:
        return _status(403, 'pods is forbidden: User "alice" cannot list resource "pods" in API group "" at the '
                            'cluster scope', "Forbidden") if call.path == PODS.path else None

    api.handlers.insert(0, deny)
    status, out, err = _run(monkeypatch, capsys, api, "--as", "alice")
    assert (status, out) == (1, "")
    assert err.startswith("error: cannot list pods: the apiserver at https://fake-apiserver denied access (HTTP 403)")
    assert "safe" not in err


def _containers(*containers: tuple[str, tuple[tuple[str, int | None], ...]]) -> str:
    """A devices annotation of several containers: (container, its (device, slice bytes or None) grants)."""
    return ann.encode_devices({name: {"nvidia.com/gpu": tuple(
        ann.DeviceGrant(f"GPU-{device}", device, None if amount is None else Fraction(amount))
        for device, amount in grants)} for name, grants in containers})


def test_the_verdict_reads_every_container_and_each_devices_whole_hold() -> None:
    """What the pod holds of a device is what its grants over all its containers hold (whole
    beats any slice; slices add up), and a hold the devices annotation names as large is seen: the
    verdict turns on each. A pod not bound, whatever it carries, holds nothing; an unreadable
    record alone makes the rollback unsafe."""
    whole_then_slice = _containers(("a", (("gpu-0", None),)), ("b", (("gpu-0", 4 * GiB),)))
    large_then_small = _containers(("a", (("gpu-1", 8 * GiB),)), ("b", (("gpu-1", 4 * GiB),)))
    second_container = _containers(("a", (("gpu-2", None),)), ("b", (("gpu-3", None),)))
    result = rollback.check([
        _bound("whole", whole_then_slice, _grants(("gpu-0", 4 * GiB))),
        _bound("large", large_then_small, _grants(("gpu-1", 4 * GiB))),
        _bound("second", second_container, _containers(("a", (("gpu-2", None),)))),
        _bound("equal", _grants(("gpu-4", 4 * GiB)), _grants(("gpu-4", 4 * GiB))),
        {**_bound("pending", _grants(("gpu-5", None)), None), "spec": {"containers": []}},
    ])
    assert [(unseen.pod, unseen.devices) for unseen in result.pods] == [
        ("team-a/large", ("gpu-1 (12Gi held, 4Gi named)",)),
        ("team-a/second", ("gpu-3",)),
        ("team-a/whole", ("gpu-0 (whole held, 4Gi named)",)),
    ]
    assert not result.safe
    unreadable = rollback.check([_bound("garbled", "{not json", _grants(("gpu-0", None)))])
    assert [unseen.pod for unseen in unreadable.pods] == ["team-a/garbled"] and unreadable.pods[0].devices == ()
    assert not unreadable.safe and rollback.as_dict(unreadable)["safe"] is False


def test_slices_of_one_device_that_run_together_add_up_as_both_versions_charge_them() -> None:
    """Two app containers each given 4Gi of gpu-0 hold 8Gi of it at once (both versions charge
    a pod's slices of a device that run together summed, `lifecycle.device_holds`); an edit
    leaving one grant names 4Gi, and an older version gives the other 4Gi away. An init
    container's slice, finished before the app containers start, is handed on: held once."""
    def pod(name: str, held: str, devices: str, init: bool = False) -> dict[str, Any]:
        obj = _bound(name, held, devices)
        obj["spec"]["containers"] = [b.container("a"), b.container("b")]
        if init:
            obj["spec"]["initContainers"] = [obj["spec"]["containers"].pop(0)]
        return obj

    both = _containers(("a", (("gpu-0", 4 * GiB),)), ("b", (("gpu-0", 4 * GiB),)))
    edited = _containers(("a", (("gpu-0", 4 * GiB),)))
    result = rollback.check([pod("together", both, edited), pod("handed-on", both, _containers(
        ("b", (("gpu-0", 4 * GiB),))), init=True)])
    assert [(unseen.pod, unseen.devices) for unseen in result.pods] == [
        ("team-a/together", ("gpu-0 (8Gi held, 4Gi named)",))]


def test_slices_under_two_resource_names_add_up_and_a_pod_that_cannot_be_read_is_listed() -> None:
    """One container's 4Gi of gpu-0 under each of two resource names hold 8Gi (`slice_peak`);
    an edit leaving one names 4Gi. A pod whose spec Tessera cannot read is listed: what its
    containers hold cannot be told."""
    def two_names(*resources: str) -> str:
        return ann.encode_devices({"main": {resource: (ann.DeviceGrant("GPU-gpu-0", "gpu-0", Fraction(4 * GiB)),)
                                            for resource in resources}})

    unreadable = _bound("odd", _grants(("gpu-1", None)), _grants(("gpu-1", None)))
    unreadable["spec"]["containers"] = "not a list"
    result = rollback.check([_bound("two-names", two_names("nvidia.com/gpu", "example.com/gpu"),
                                    two_names("nvidia.com/gpu")), unreadable])
    assert [(unseen.pod, unseen.devices, unseen.why.split(" (")[0]) for unseen in result.pods] == [
        ("team-a/odd", (), "the pod cannot be read"),
        ("team-a/two-names", ("gpu-0 (8Gi held, 4Gi named)",), "")]


def test_slices_of_two_dimensions_of_one_device_are_compared_each_in_its_own() -> None:
    """A pod held 8Gi of gpu-0's memory and 2 of its cores (two sharing classes, one per
    dimension); an edit names 16Gi of its memory and no cores. Each slice uses its own capacity
    of the device: an older version sees the 2 cores free, though 16Gi is more than 8Gi + 2 added
    up as one number. A slice named at its size in every dimension is seen."""
    def sliced(*grants: tuple[str, str, int]) -> str:
        return ann.encode_devices({"main": {resource: (ann.DeviceGrant("GPU-gpu-0", "gpu-0", Fraction(amount),
                                                                       dimension),)
                                            for resource, dimension, amount in grants}})

    memory, cores = ("class.tessera.dev/v100-8g", "memory"), ("class.tessera.dev/v100-cores", "cores")
    held = sliced((*memory, 8 * GiB), (*cores, 2))
    result = rollback.check([_bound("cores-dropped", held, sliced((*memory, 16 * GiB))),
                             _bound("both-named", held, sliced((*memory, 8 * GiB), (*cores, 2)))])
    assert [(unseen.pod, unseen.devices) for unseen in result.pods] == [
        ("team-a/cores-dropped", ("gpu-0 (2 cores held, 0 named)",))]
