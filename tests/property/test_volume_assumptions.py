"""Property: a local volume is never given to two claims (upstream's AssumePodVolumes).

Random nodes, each with zero to two local volumes of a WaitForFirstConsumer class without a
provisioner; random pods, each naming a claim of its own (some two, some sharing one with an
earlier pod), gangs of two among them; volumes that come later, the watch showing a given volume
bound, and placed pods deleted, in random order. Whatever the order, no volume is given to two claims, a pod's claims get volumes
of its own node only, and every pod placed got a volume for each of its claims."""

from __future__ import annotations

import os
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.sim import builders as b
from tests.helpers import Run
from tests.replay.test_volume_binding import claim, claimer, nodes, storage_class, volume

CLASS = "local"


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[str], list[tuple[str, str]], list[dict[str, Any]], list[tuple[str, int]]]:
    node_names = [f"n{i}" for i in range(draw(st.integers(1, 3)))]
    volumes = [(f"pv-{node}-{j}", node) for node in node_names for j in range(draw(st.integers(0, 2)))]
    pods: list[dict[str, Any]] = []
    for i in range(draw(st.integers(1, 6))):
        claims = [f"c{i}-{j}" for j in range(draw(st.integers(1, 2)))]
        if i and draw(st.booleans()):  # shares its first claim with an earlier pod
            claims[0] = pods[draw(st.integers(0, i - 1))]["claims"][0]
        gang = draw(st.sampled_from(["", "", "g"]))
        pods.append({"name": f"p{i}", "claims": claims, "gang": gang})
    steps = draw(st.lists(st.tuples(st.sampled_from(["volume", "bound", "delete"]), st.integers(0, 20)),
                          max_size=6))
    return node_names, volumes, pods, steps


@settings(max_examples=int(os.environ.get("TESSERA_HYPOTHESIS_EXAMPLES", "0") or 0) or 100, deadline=None)
@given(scenarios())
def test_no_volume_is_given_twice(scenario: tuple[list[str], list[tuple[str, str]], list[dict[str, Any]],
                                                  list[tuple[str, int]]]) -> None:
    node_names, volumes, pods, steps = scenario
    run = Run()
    later = volumes[len(volumes) // 2:]
    run.add(*nodes(*node_names), storage_class(CLASS, "WaitForFirstConsumer"),
            *(volume(name, node, storage_class=CLASS) for name, node in volumes[:len(volumes) // 2]))
    if any(pod["gang"] for pod in pods):
        run.add(b.podgroup("g", 2))
    made: set[str] = set()
    for pod in pods:
        labels = {"scheduling.x-k8s.io/pod-group": pod["gang"]} if pod["gang"] else None
        run.add(*(claim(name, storage_class=CLASS) for name in pod["claims"] if name not in made),
                claimer(pod["name"], *pod["claims"], labels=labels))
        made.update(pod["claims"])
    node_of_volume = dict(volumes)
    for kind, pick in steps:
        if kind == "volume" and later:
            name, node = later.pop(0)
            run.add(volume(name, node, storage_class=CLASS))
        elif kind == "bound" and run.state.volumes_given:
            name, key = sorted(run.state.volumes_given.items())[pick % len(run.state.volumes_given)]
            namespace, claim_name = key.split("/")
            shown = volume(name, node_of_volume[name], storage_class=CLASS, claimRef={
                "namespace": namespace, "name": claim_name, "uid": f"uid-{namespace}-{claim_name}"})
            shown["metadata"]["resourceVersion"] = "2"
            run.feed(b.event("MODIFIED", shown))
        elif kind == "delete":
            placed = [uid for uid in sorted(run.state.placements) if uid in run.replay.pods]
            if placed:
                run.feed(b.event("DELETED", run.replay.pods[placed[pick % len(placed)]]))
    given_to: dict[str, str] = {}
    for pod in pods:
        found = run.state.pod_by_key(f"default/{pod['name']}")
        if found is None or run.state.node_of(found.uid) is None:
            continue
        node = run.state.node_of(found.uid)
        claims = run.last(pod["name"]).claims
        assert sorted(c.claim for c in claims) == sorted(f"default/{name}" for name in pod["claims"])
        for binding in claims:
            assert node_of_volume[binding.volume] == node
            assert given_to.setdefault(binding.volume, binding.claim) == binding.claim, (binding, given_to)


@settings(max_examples=int(os.environ.get("TESSERA_HYPOTHESIS_EXAMPLES", "0") or 0) or 100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.booleans(), st.integers(1, 4), st.booleans()), max_size=8),
       st.integers(1, 4), st.lists(st.integers(0, 2), max_size=3))
def test_a_claim_gets_the_smallest_fitting_volume_of_its_node(
        drawn: list[tuple[int, bool, int, bool]], requested: int, taken: list[int]) -> None:
    """FindMatchingVolume: of the volumes pinned by hostname or by zone (tried smallest first,
    not all of them), the claim gets the smallest that fits and allows the node, a tie by name;
    one naming another claim, or not Available, is never it."""
    run = Run()
    run.add(*nodes("n0", "n1", zone=True), storage_class(CLASS, "WaitForFirstConsumer"))
    pvs = []
    for i, (on, by_zone, size, available) in enumerate(drawn):
        pv = volume(f"pv{i}", *([f"z-n{on % 2}"] if by_zone else [f"n{on % 2}"]), key="zone" if by_zone
                    else "kubernetes.io/hostname", size=f"{size}Gi", storage_class=CLASS)
        if not available:
            pv["status"]["phase"] = "Released"
        if i in taken:
            pv["spec"]["claimRef"] = {"namespace": "default", "name": "other", "uid": "uid-default-other"}
        pvs.append((pv, on % 2, size, available and i not in taken))
    data = claim("data", storage_class=CLASS)
    data["spec"]["resources"]["requests"]["storage"] = f"{requested}Gi"
    run.add(*(pv for pv, *_ in pvs), data, claimer("train", "data"))
    placed = run.node_of("train")
    fitting = {n: sorted((size, pv["metadata"]["name"]) for pv, at, size, free in pvs if at == n and free
                         and size >= requested) for n in (0, 1)}
    if placed is None:
        assert not fitting[0] and not fitting[1]
        return
    assert run.last("train").claims[0].volume == fitting[int(placed[1])][0][1]
