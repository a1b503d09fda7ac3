"""Device choice and the device ledger: cases a second review found; each test failed before its fix."""

from __future__ import annotations

import copy
from collections import defaultdict
from typing import Any

from scheduler.api.config import load_config
from scheduler.api.quantity import Amount, parse_quantity
from scheduler.core import annotations as ann
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b


def _cores_device(capacity: str) -> dict[str, Any]:
    device = b.device("n", 0, model="A100")
    device["spec"]["capacity"]["cores"] = capacity
    return device


def _bound(objects: list[dict[str, Any]], pods: list[dict[str, Any]]) -> tuple[Scheduler, list[dict[str, Any]], list[str]]:
    """Schedule the pods; the bound pods as the apiserver returns them (Binding annotations
    applied), and the messages of the pods left pending."""
    scheduler = Scheduler(load_config(None), seed=7)
    for obj in objects:
        scheduler.apply("ADDED", obj, 0.0)
    by_name = {pod["metadata"]["name"]: pod for pod in pods}
    bound: list[dict[str, Any]] = []
    pending: list[str] = []
    for pod in pods:
        scheduler.apply("ADDED", pod, 0.0)
        while (attempts := scheduler.schedule_next(0.0)) is not None:
            for attempt in attempts:
                if attempt.node is None:
                    pending.append(attempt.message)
                    continue
                obj = copy.deepcopy(by_name[attempt.pod.meta.name])
                obj["spec"]["nodeName"] = attempt.node
                obj["metadata"]["annotations"] = dict(attempt.annotations)
                obj["metadata"]["resourceVersion"] = "2"
                bound.append(obj)
    return scheduler, bound, pending


def test_slices_finer_than_a_nano_unit_never_overflow_the_device_as_their_annotations_read() -> None:
    """A sharing class with `unit: 1e-10` on a GPU whose `cores` capacity is `1n`: the planner
    charges each slice exactly 1e-10, so ten pods fit; but the Binding annotation writes the
    amount with `format_quantity`, which rounds up to whole nanos — each pod's
    `tessera.dev/devices` says `1n`. The ledger rebuilt from those annotations (the single source
    of truth: the next event, a restart, the node agent) holds 10n on a GPU of 1n: ten times its
    capacity, and the allocation gate's re-check (`amount == unit × count`) fails for every held
    Binding. Kubernetes quantities carry at most nano precision, so such a unit cannot be
    written: the class must be refused (its pods told why), never placed beyond what the
    annotations can say."""
    objects = [b.node("n", gpus=1), _cores_device("1n"),
               b.resource_class("c", match_labels={"model": "A100"}, sharing={"dimension": "cores", "unit": "1e-10"})]
    pods = [b.pod(f"p{i}", limits={"class.tessera.dev/c": 1}) for i in range(12)]
    _, bound, pending = _bound(objects, pods)
    written: dict[str, Amount] = defaultdict(int)
    for pod in bound:
        for by_resource in ann.decode_devices(pod["metadata"]["annotations"][ann.DEVICES]).values():
            for grants in by_resource.values():
                for grant in grants:
                    assert grant.amount is not None
                    written[grant.device] += grant.amount
    capacity = parse_quantity("1n")
    assert all(total <= capacity for total in written.values()), \
        {device: str(total) for device, total in written.items()}
    assert pending and all("spec.sharing.unit" in message for message in pending), pending[:1]

