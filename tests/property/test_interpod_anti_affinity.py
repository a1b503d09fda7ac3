"""Property: pods with mutual required anti-affinity never share a domain.

Random nodes (some zones, some without a zone label), random pods of a few apps, each app's pods
with required podAntiAffinity against the app itself by hostname or by zone, some existing
(bound by another scheduler) and some gangs of two: after the replay, no two pods of an app whose
term keys on a topology label are placed in one domain of it (InterPodAffinity, filtering.go)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.sim import builders as b
from tests.helpers import Run

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
KEYS = {"a": HOST, "b": ZONE, "c": HOST}


def _pod(name: str, app: str, gang: str | None) -> dict[str, Any]:
    labels = {"app": app, **({"scheduling.x-k8s.io/pod-group": gang} if gang else {})}
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": KEYS[app]}
    return b.pod(name, labels=labels, limits={"nvidia.com/gpu": 1},
                 spec_extra={"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}})


@settings(max_examples=40, deadline=None)
@given(zones=st.lists(st.sampled_from(["z1", "z2", "z3", None]), min_size=1, max_size=5),
       apps=st.lists(st.sampled_from(sorted(KEYS)), min_size=1, max_size=8),
       gang=st.booleans(),
       existing=st.lists(st.tuples(st.sampled_from(sorted(KEYS)), st.integers(0, 4)), max_size=3))
def test_mutually_anti_affine_pods_never_share_a_domain(zones: list[str | None], apps: list[str], gang: bool,
                                                        existing: list[tuple[str, int]]) -> None:
    run = Run()
    nodes = [b.node(f"n{i}", gpus=2, labels={ZONE: z} if z else None) for i, z in enumerate(zones)]
    labels = {f"n{i}": {HOST: f"n{i}", **({ZONE: z} if z else {})} for i, z in enumerate(zones)}
    objects: list[dict[str, Any]] = [*nodes]
    if gang:
        objects.append(b.podgroup("pg", 2))
    bound: list[tuple[str, str, str]] = []  # (name, app, node): placed by another scheduler
    for i, (app, at) in enumerate(existing):
        node_name = f"n{at % len(zones)}"
        bound.append((f"e{i}", app, node_name))
        objects.append(b.pod(f"e{i}", labels={"app": app}, node_name=node_name, phase="Running",
                             scheduler="default-scheduler", spec_extra={"affinity": _pod("x", app, None)["spec"]["affinity"]}))
    names = []
    for i, app in enumerate(apps):
        names.append((f"p{i}", app))
        objects.append(_pod(f"p{i}", app, "pg" if gang and i < 2 else None))
    run.add(*objects)
    seen: dict[tuple[str, str], str] = {}
    for name, app, node_name in bound:  # another scheduler's pods may share a domain among themselves
        if (value := labels[node_name].get(KEYS[app])) is not None:
            seen.setdefault((app, value), name)
    for name, app in names:
        node = run.node_of(name)
        if node is None:
            continue
        value = labels[node].get(KEYS[app])
        if value is None:
            continue  # a node without the key: the term names no domain there
        assert (app, value) not in seen, f"{name} and {seen[(app, value)]} share {KEYS[app]}={value}"
        seen[(app, value)] = name
