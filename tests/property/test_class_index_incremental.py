"""Property: a ResourceClass change matches again only the classes whose standing moved, yet the
ClassRegistry ends exactly as one rebuilt from scratch would.

Random sequences of class upserts and removals (resourceName clashes, creationTimestamp ties,
invalid classes, names taken by a device plugin, sharing classes that fit or not, same-meaning
refreshes) and device changes (new or edited, deleted, deleted while held: left among the devices
the cluster passes, objects replaced without telling the registry as the ledger does). After every
step the registry's public state (and the indexes it answers from) equals that of a fresh registry
given the same classes, then the devices it should index now: every device told of and not
removed since (a deleted one still held, a ghost, is none), each the object the cluster passed
at the last class change or a newer one told of since (`ClassRegistry._reindex`).
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.core.classes import ClassRegistry, ResourceClass, parse_resource_class
from scheduler.core.objects import Device, parse_device
from scheduler.sim import builders as b

CLASSES = ("a", "b", "c")
DEVICES = ("d0", "d1", "d2")
STAMPS = ("2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z")
RESOURCE_NAMES = (None, "x.dev/gpu", "x.dev/gpu", "nvidia.com/gpu", "bad name")
SELECTORS: tuple[tuple[dict[str, str] | None, list[dict[str, Any]] | None], ...] = (
    (None, None),
    ({"model": "V100"}, None),
    ({"model": "A100"}, None),
    (None, [{"key": "nvlink", "operator": "Exists"}]),
    (None, [{"key": "nvlink", "operator": "DoesNotExist"}]),
    (None, [{"key": "model", "operator": "NotIn", "values": ["V100"]}]),
    (None, [{"key": "nvlink", "operator": "NotIn", "values": ["g1"]}]),  # also devices without the key
    (None, [{"key": "memory", "operator": "Gt", "values": ["20Gi"]}]),
    (None, [{"key": "memory", "operator": "In", "values": ["32Gi"]}]),
    ({"model": "V100"}, [{"key": "cores", "operator": "Exists"}]),
    (None, [{"key": "memory", "operator": "Lt", "values": ["20GB"]}]),  # invalid: not a quantity
    (None, [{"key": "modle", "operator": "In", "values": ["V100"]}]),  # a key no device has
)
SHARINGS = (None, None, {"dimension": "memory", "unit": "8Gi"}, {"dimension": "memory", "unit": "64Gi"},
            {"dimension": "cores", "unit": "10"})


@st.composite
def classes(draw: st.DrawFn) -> ResourceClass:
    name = draw(st.sampled_from(CLASSES))
    labels, expressions = draw(st.sampled_from(SELECTORS))
    obj = b.resource_class(name, labels, expressions, resource_name=draw(st.sampled_from(RESOURCE_NAMES)),
                           sharing=draw(st.sampled_from(SHARINGS)), created=draw(st.sampled_from(STAMPS)))
    cls = parse_resource_class(obj)
    if draw(st.booleans()) and draw(st.booleans()):  # as ClusterState._admitted leaves a plugin's name
        cls = replace(cls, error=cls.error or "taken", name_taken=True)
    return cls


@st.composite
def devices(draw: st.DrawFn) -> Device:
    name = draw(st.sampled_from(DEVICES))
    attributes = {"nvlink": "g0"} if draw(st.booleans()) else {}
    obj = b.device("n", 0, model=draw(st.sampled_from(("V100", "A100"))),
                   memory=draw(st.sampled_from(("16Gi", "32Gi"))),
                   resource_name=draw(st.sampled_from(("nvidia.com/gpu", "x.dev/gpu"))), attributes=attributes)
    obj["metadata"]["name"] = name
    if draw(st.booleans()):
        obj["spec"]["capacity"]["cores"] = draw(st.sampled_from(("4", "20")))
    return parse_device(obj)


STEPS = st.one_of(
    st.tuples(st.just("upsert"), classes()),
    st.tuples(st.just("device"), devices()),
    st.tuples(st.just("upsert"), classes()),
    st.tuples(st.just("remove"), st.sampled_from(CLASSES)),
    st.tuples(st.just("refresh"), st.sampled_from(CLASSES)),
    st.tuples(st.just("device"), devices()),
    st.tuples(st.just("delete"), st.sampled_from(DEVICES)),  # gone from the cluster too
    st.tuples(st.just("held"), st.sampled_from(DEVICES)),  # deleted while held: still passed
    st.tuples(st.just("replaced"), st.sampled_from(DEVICES)),  # a new object the registry is not told of
)


def public(reg: ClassRegistry) -> dict[str, Any]:
    assert +reg.matching == Counter(name for names in reg.device_classes.values() for name in names)
    assert all(count >= 0 for count in reg.matching.values())
    slices = reg._slices
    names = set(reg.classes) | set(CLASSES)
    resources = {cls.resource_name for cls in reg.classes.values()} | {"x.dev/gpu", "nvidia.com/gpu"}
    return {
        "classes": reg.classes,
        "by_resource": list(reg.by_resource.items()),  # in the owners' order, as the columns read it
        "claimed": reg.claimed,
        "clash": reg.clash,
        "device_classes": reg.device_classes,
        "matching": +reg.matching,
        "slices": (slices._classes, slices._fits, slices._fitting, slices._capacities, slices._sharing_of),
        "resources": (+reg._device_resources, reg._resource_of),
        "keys": (reg._keys_of, reg._with_key),
        "errors": {name: reg.error_of(name) for name in names},
        "usable": {name: reg.resource_class(name) for name in resources},
        "class_resource": {name: (reg.is_class_resource(name), reg.carried(name)) for name in resources},
        "unknown": {name: reg.unknown_keys_note(cls) for name, cls in reg.classes.items()},
    }


def rebuilt(reg: ClassRegistry, indexed: dict[str, Device]) -> ClassRegistry:
    fresh = ClassRegistry()
    for cls in reg.classes.values():
        fresh.upsert(cls, ())
    for device in indexed.values():
        fresh.device_changed(device)
    # the brute-force verdict device_changed itself gives, for every usable class
    for name, device in indexed.items():
        assert fresh.device_classes[name] == {c.name for c in fresh.by_resource.values() if c.matches(device)}
    return fresh


@settings(max_examples=int(os.environ.get("TESSERA_HYPOTHESIS_EXAMPLES", "0") or 0) or 400, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(STEPS, min_size=6, max_size=40))
def test_a_class_change_leaves_the_registry_as_a_rebuild_would(steps: list[tuple[str, Any]]) -> None:
    reg = ClassRegistry()
    passed: dict[str, Device] = {}  # what ClusterState.devices holds (deleted ones still held too)
    indexed: dict[str, Device] = {}  # what the registry should have judged
    epochs = 0
    for kind, arg in steps:
        generation, moved = reg.generation, kind in ("upsert", "device", "delete", "held")
        if kind == "upsert":
            reg.upsert(arg, list(passed.values()))
            indexed, epochs = {name: passed[name] for name in indexed}, epochs + 1
        elif kind == "remove":
            if arg in reg.classes:
                epochs, moved = epochs + 1, True
                indexed = {name: passed[name] for name in indexed}
            reg.remove(arg, list(passed.values()))
        elif kind == "refresh":
            cls = reg.classes.get(arg)
            if cls is None:
                continue
            reg.refresh(replace(cls, meta=replace(cls.meta, generation=cls.meta.generation + 1)))
        elif kind == "device":
            passed[arg.name] = indexed[arg.name] = arg
            reg.device_changed(arg)
        elif kind in ("delete", "held"):
            if arg not in passed:
                continue
            reg.device_removed(arg)
            indexed.pop(arg, None)
            if kind == "delete":
                del passed[arg]
        else:  # "replaced": a new object the ledger makes (a duplicate, a held GPU's resourceName)
            if arg not in passed:
                continue
            old = passed[arg]
            passed[arg] = replace(old, duplicate=not old.duplicate,
                                  resource_name="x.dev/gpu" if old.resource_name != "x.dev/gpu" else "nvidia.com/gpu")
        assert public(reg) == public(rebuilt(reg, indexed)), (kind, arg)
        assert reg.epoch == epochs
        assert reg.generation > generation if moved else reg.generation == generation


def test_one_class_among_many_is_matched_against_the_devices_with_its_keys_only() -> None:
    """The shape of the cost, not a timing: adding one class matches it against the devices that
    have every key it needs (here the 3 of 300 with `nvlink`), and no other class is matched again."""
    reg = ClassRegistry()
    for i in range(20):
        reg.upsert(parse_resource_class(b.resource_class(f"k{i}", {"model": "V100" if i % 2 else "A100"})), ())
    devs = []
    for i in range(300):
        obj = b.device(f"n{i // 8}", i % 8, attributes={"nvlink": "g0"} if i < 3 else None)
        devs.append(parse_device(obj))
        reg.device_changed(devs[-1])
    calls: Counter[str] = Counter()
    real = ResourceClass.matches

    def counting(self: ResourceClass, device: Device) -> bool:
        calls[self.name] += 1
        return real(self, device)

    ResourceClass.matches = counting  # type: ignore[method-assign]
    try:
        reg.upsert(parse_resource_class(b.resource_class("linked", expressions=[
            {"key": "nvlink", "operator": "Exists"}])), devs)
    finally:
        ResourceClass.matches = real  # type: ignore[method-assign]
    assert calls == {"linked": 3}
    assert reg.matching["linked"] == 3 and reg.matching["k1"] == 300
