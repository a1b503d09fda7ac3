"""Default class controller: desired state and create-only reconciliation (no apiserver)."""

from __future__ import annotations

from typing import Any, cast

from scheduler.core.classes import parse_resource_class
from scheduler.core.objects import Device, parse_device
from scheduler.kube.class_controller import DefaultClassController, class_name_for, default_classes
from scheduler.kube.http import KubeHttp, Response
from scheduler.sim import builders as b


def _devices(*models: str) -> list[Device]:
    return [parse_device(b.device(f"n{i}", i, model=model)) for i, model in enumerate(models)]


def test_one_class_per_model() -> None:
    classes = default_classes(_devices("Tesla-V100-SXM2-32GB", "Tesla-V100-SXM2-32GB", "NVIDIA-A100-80GB-PCIe"), ()).create
    assert [c["metadata"]["name"] for c in classes] == ["nvidia-a100-80gb-pcie", "tesla-v100-sxm2-32gb"]
    v100 = classes[1]
    assert v100 == {
        "apiVersion": "tessera.dev/v1alpha1", "kind": "ResourceClass",
        "metadata": {"name": "tesla-v100-sxm2-32gb", "labels": {"tessera.dev/managed-by": "class-controller"},
                     "annotations": {"tessera.dev/model": "Tesla-V100-SXM2-32GB"}},
        "spec": {"selector": {"matchLabels": {"model": "Tesla-V100-SXM2-32GB"}}},
    }
    cls = parse_resource_class({**v100, "metadata": {**v100["metadata"], "uid": "u"}})
    assert cls.error is None and cls.resource_name == "class.tessera.dev/tesla-v100-sxm2-32gb"
    assert [cls.matches(d) for d in _devices("Tesla-V100-SXM2-32GB", "Tesla-V100-SXM2-16GB")] == [True, False]
    assert default_classes([], ()) == ([], {})


def test_an_admin_class_selecting_a_model_does_not_stand_for_its_default_class() -> None:
    """What docs/node-agent.md promises: a default class is per model, beside the admin's classes
    that select its devices under other names (deploy/examples/resourceclasses.yaml's v100-32g and
    a100-80g), so V100 and A100 get `v100` and `a100`; only a default class already made for the
    model (label and annotation), or a class holding the very name, stops one."""
    admin = [parse_resource_class({**b.resource_class(name, expressions=[
        {"key": "model", "operator": "In", "values": models}]), "metadata": {"name": name, "uid": name}})
        for name, models in (("v100-32g", ["V100", "Tesla-V100-SXM2-32GB"]), ("a100-80g", ["A100"]))]
    assert [c["metadata"]["name"] for c in default_classes(_devices("V100", "A100"), admin).create] == ["a100", "v100"]
    made = parse_resource_class({**default_classes(_devices("V100"), ()).create[0], "metadata": {
        "name": "any-name", "uid": "u", "labels": {"tessera.dev/managed-by": "class-controller"},
        "annotations": {"tessera.dev/model": "V100"}}})
    assert [c["metadata"]["name"] for c in default_classes(_devices("V100", "A100"), [*admin, made]).create] == ["a100"]


def test_names_are_valid_and_collisions_are_kept_apart() -> None:
    assert class_name_for("Tesla V100 (SXM2) 32GB") == "tesla-v100-sxm2-32gb"
    assert class_name_for("___") .startswith("model-")
    long = class_name_for("X" * 100)
    assert len(long) <= 63
    classes = default_classes(_devices("Tesla-T4", "TESLA_T4"), ()).create
    names = [c["metadata"]["name"] for c in classes]
    assert len(set(names)) == 2 and all(n.startswith("tesla-t4-") for n in names)
    for obj in classes:
        assert parse_resource_class({**obj, "metadata": {**obj["metadata"], "uid": "u"}}).error is None


class FakeHttp:
    def __init__(self, status: int = 201) -> None:
        self.posts: list[dict[str, Any]] = []
        self.status = status

    async def acquire(self) -> None:
        return None

    async def request(self, method: str, path: str, **kwargs: Any) -> Response:
        assert (method, path) == ("POST", "/apis/tessera.dev/v1alpha1/resourceclasses")
        self.posts.append(kwargs["body"])
        return Response(self.status, b"{}")


async def test_reconcile_creates_only_what_is_missing_and_is_idempotent() -> None:
    http = FakeHttp()
    # e.g. the admin's own class of that name: left alone
    existing = [parse_resource_class(b.resource_class("tesla-v100-sxm2-32gb", {"model": "Tesla-V100-SXM2-32GB"}))]
    devices = _devices("Tesla-V100-SXM2-32GB", "Tesla-T4")
    controller = DefaultClassController(cast(KubeHttp, http), lambda: devices, lambda: existing)
    assert await controller.reconcile()
    assert [p["metadata"]["name"] for p in http.posts] == ["tesla-t4"]
    existing.append(parse_resource_class({**http.posts[0], "metadata": {**http.posts[0]["metadata"], "uid": "u"}}))
    assert await controller.reconcile()
    assert len(http.posts) == 1 and controller.created == ["tesla-t4"]


async def test_conflicts_are_fine_and_errors_are_retried() -> None:
    devices = _devices("Tesla-T4")
    conflict = DefaultClassController(cast(KubeHttp, FakeHttp(409)), lambda: devices, lambda: ())
    assert await conflict.reconcile() and conflict.created == []
    failing = DefaultClassController(cast(KubeHttp, FakeHttp(500)), lambda: devices, lambda: ())
    assert not await failing.reconcile()


async def test_only_the_leader_with_a_synced_cache_writes() -> None:
    http = FakeHttp()
    devices = _devices("Tesla-T4")
    follower = DefaultClassController(cast(KubeHttp, http), lambda: devices, lambda: (), is_leader=lambda: False)
    unsynced = DefaultClassController(cast(KubeHttp, http), lambda: devices, lambda: (), ready=lambda: False)
    assert await follower.reconcile() and await unsynced.reconcile()
    assert http.posts == []
