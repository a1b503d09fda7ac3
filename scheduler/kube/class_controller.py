"""Default ResourceClasses: one per distinct device model (seed 2; docs/design.md §2).

Optional (the device plugin arg `defaultClassController: true`), and running inside the scheduler process:
it reads the devices and classes the scheduler's own informers already keep in the core state
(callbacks, so no second watch), and creates what is missing:

    ResourceClass <sanitised model>   (e.g. Tesla-V100-SXM2-32GB -> tesla-v100-sxm2-32gb)
      labels:   tessera.dev/managed-by: class-controller
      spec:     selector.matchLabels {model: <model>}; resourceName defaults to
                class.tessera.dev/<name>

Rules, and why:
- create-only. A class that exists under the name is never modified or deleted — whether an admin
  made it (the admin's definition wins, even with a different selector) or this controller did
  (an admin may have tuned it since). Nothing is deleted when a model disappears either: pods and
  quotas may refer to the class, a node that is down for maintenance comes back, and a class
  matching nothing costs nothing. A class deleted while devices of its model remain is created
  again (the controller keeps no memory of what it made, so it cannot tell an admin's delete from
  a missing class); retiring one means turning the controller off (docs/node-agent.md);
- one default class per model, ever: a model that has one (this controller's label, the model in
  its annotation), under whatever name, gets no other. Names come from the existing classes too,
  since classes are never renamed: a model arriving later whose name a class made for another
  model holds (a case twin: `TESLA-V100` after `Tesla V100`) takes the hash-suffixed name; an
  admin's class under the name keeps it, and a model that class does not select gets no default
  class (logged once);
- idempotent: what to create is a pure function of the devices and the existing classes
  (`default_classes`), so names stay the same across reconciles and restarts, and a create that
  races with another replica or a lagging cache gets 409 AlreadyExists, which is fine;
- only the leader writes (standby replicas keep their caches warm, as for scheduling), asked after
  each write token, right before the POST.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import structlog

from scheduler.core.classes import ResourceClass
from scheduler.core.objects import Device
from scheduler.kube.concurrency import Wakeup
from scheduler.kube.http import TRANSPORT_ERRORS, KubeHttp
from scheduler.logs import describe_error

__all__ = ["MANAGED_BY", "MANAGED_BY_LABEL", "MODEL_ANNOTATION", "DefaultClassController", "DefaultClasses",
           "class_name_for", "default_classes"]

log = structlog.get_logger("tessera.class_controller")

RESOURCE_CLASSES = "/apis/tessera.dev/v1alpha1/resourceclasses"
MANAGED_BY_LABEL = "tessera.dev/managed-by"
MANAGED_BY = "class-controller"
MODEL_ANNOTATION = "tessera.dev/model"
# The name is also the name part of the default resourceName class.tessera.dev/<name>, which
# Kubernetes limits to 63 characters.
MAX_NAME = 63
_NOT_ALNUM = re.compile(r"[^a-z0-9]+")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def class_name_for(model: str) -> str:
    """The model lowercased, with every run of other characters as one `-` (a DNS label)."""
    name = _NOT_ALNUM.sub("-", model.lower()).strip("-")
    if not name:
        return f"model-{_digest(model)}"
    if len(name) > MAX_NAME:
        name = f"{name[:MAX_NAME - 9].rstrip('-')}-{_digest(model)}"
    return name


class DefaultClasses(NamedTuple):
    create: list[dict[str, Any]]  # the classes to create, sorted by name
    blocked: dict[str, str]  # model -> the class (not one for it) holding the name it would get


def default_classes(devices: Iterable[Device], existing: Iterable[ResourceClass]) -> DefaultClasses:
    """One ResourceClass per distinct `model` attribute that has none yet.

    Two models that sanitise to the same name (they differ only in case or punctuation) each get
    a hash suffix, so neither takes the other's devices; so does a model whose name a default class
    of another model already holds (that twin came first, alone). A name held by any other class
    blocks the model, unless that class selects some of the model's devices (then it is theirs).
    """
    devices = list(devices)
    by_name = {cls.name: cls for cls in existing}
    served = {cls.meta.annotations.get(MODEL_ANNOTATION) for cls in by_name.values() if _made_here(cls)}
    models = sorted({d.attributes["model"] for d in devices if d.attributes.get("model")})
    names: dict[str, list[str]] = {}
    for model in models:
        names.setdefault(class_name_for(model), []).append(model)
    out = DefaultClasses([], {})
    for base, same in names.items():
        for model in same:
            if model in served:
                continue
            name = base if len(same) == 1 else _suffixed(base, model)
            holder = by_name.get(name)
            if holder is not None and name == base and _made_here(holder):
                name = _suffixed(base, model)
                holder = by_name.get(name)
            if holder is None:
                out.create.append({
                    "apiVersion": "tessera.dev/v1alpha1",
                    "kind": "ResourceClass",
                    "metadata": {"name": name, "labels": {MANAGED_BY_LABEL: MANAGED_BY},
                                 "annotations": {MODEL_ANNOTATION: model}},
                    "spec": {"selector": {"matchLabels": {"model": model}}},
                })
            elif not any(holder.matches(d) for d in devices if d.attributes.get("model") == model):
                out.blocked[model] = name
    out.create.sort(key=lambda obj: str(obj["metadata"]["name"]))
    return out


def _made_here(cls: ResourceClass) -> bool:
    return cls.meta.labels.get(MANAGED_BY_LABEL) == MANAGED_BY


def _suffixed(base: str, model: str) -> str:
    return f"{base[:MAX_NAME - 9].rstrip('-')}-{_digest(model)}"


class DefaultClassController:
    def __init__(self, http: KubeHttp, devices: Callable[[], Iterable[Device]],
                 classes: Callable[[], Iterable[ResourceClass]], *, is_leader: Callable[[], bool] = lambda: True,
                 ready: Callable[[], bool] = lambda: True, interval: float = 30.0) -> None:
        """`devices`: the ExtendedResources the scheduler knows (`state.devices.values()`);
        `classes`: all existing ResourceClasses (`state.classes.classes.values()`), valid or not;
        `ready`: whether those caches are synced (creating from an empty cache would be harmless
        but noisy)."""
        self.http = http
        self.devices = devices
        self.classes = classes
        self.is_leader = is_leader
        self.ready = ready
        self.interval = interval
        self.created: list[str] = []
        self._blocked: set[tuple[str, str]] = set()  # (model, name) already logged as without a class
        self._wake = Wakeup()

    def wake(self) -> None:
        """Reconcile soon (call on ExtendedResource events)."""
        self._wake.set()

    async def reconcile(self) -> bool:
        """Create the missing classes; True when nothing is left to retry."""
        if not self.ready() or not self.is_leader():
            return True
        plan = default_classes(self.devices(), self.classes())
        for model, name in sorted(plan.blocked.items()):
            if (model, name) not in self._blocked:
                self._blocked.add((model, name))
                log.warning("class_controller.name_taken", model=model, resource_class=name,
                            reason="a class that selects none of this model's devices holds the name: "
                                   "the model gets no default class")
        ok = True
        for obj in plan.create:
            name = obj["metadata"]["name"]
            await self.http.acquire()
            if not self.is_leader():
                return True  # deposed while waiting for the token: the new leader creates
            try:
                response = await self.http.request("POST", RESOURCE_CLASSES, body=obj, limited=False,
                                                   resend=self.is_leader)
            except TRANSPORT_ERRORS as err:
                log.warning("class_controller.create_failed", resource_class=name, reason=describe_error(err))
                ok = False
                continue
            if response.ok:
                self.created.append(name)
                log.info("class_controller.created", resource_class=name,
                         model=obj["spec"]["selector"]["matchLabels"]["model"])
            elif response.status == 409:  # made meanwhile (by an admin, another replica, or us)
                continue
            else:
                log.warning("class_controller.create_failed", resource_class=name, status=response.status,
                            reason=response.message())
                ok = False
        return ok

    async def run(self) -> None:
        """Reconcile on wake-ups and every `interval` seconds until cancelled; never raises."""
        failures = 0
        while True:
            try:
                ok = await self.reconcile()
            except Exception:  # a bug must not take the scheduler down with it
                log.exception("class_controller.failed")
                ok = False
            failures = 0 if ok else failures + 1
            delay = self.interval if ok else min(self.interval, 0.5 * 2 ** min(failures, 6))
            await self._wake.wait(delay)
