"""Pod terms Tessera cannot honour are refused (required) or told (preferred), never silently broken.

Tessera reads no namespaceSelector of a pod (anti-)affinity term (it watches no Namespaces); pod
affinity and anti-affinity are otherwise honoured (InterPodAffinity: tests/replay/test_interpod_affinity.py,
test_interpod_affinity_score.py), and DoNotSchedule topology spread too (PodTopologySpread,
tests/replay/test_pod_topology_spread.py). A pod with a required term it cannot honour stays pending
with a FailedScheduling message naming the field (TesseraUnhonouredTerms' PreFilter, no eviction for
it), and a pod with preferred terms Tessera does not score is placed as without them and told once.
"""

from __future__ import annotations

from typing import Any

from scheduler.api.config_parse import parse_config
from scheduler.core.plugins.registry import BY_NAME
from scheduler.core.pod_terms import IGNORED_PREFERRED_TERMS
from scheduler.kubectl import explain as explaining
from scheduler.kubectl import whatif
from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, config

HOST = "kubernetes.io/hostname"
ANTI = "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[].namespaceSelector"
PREFERRED_ANTI = "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[].namespaceSelector"


def _term(app: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": HOST}


def _ns_term(app: str) -> dict[str, Any]:
    return {**_term(app), "namespaceSelector": {"matchLabels": {"team": "inference"}}}


def _replica(name: str, **affinity: Any) -> dict[str, Any]:
    return b.pod(name, labels={"app": "infer"}, limits={"nvidia.com/gpu": 1},
                 spec_extra={"affinity": affinity} if affinity else None)


def _anti(name: str) -> dict[str, Any]:
    return _replica(name, podAntiAffinity={"requiredDuringSchedulingIgnoredDuringExecution": [_ns_term("infer")]})


def _told(run: Run) -> list[str]:
    return [n for n in run.notices() if n.startswith(f"{IGNORED_PREFERRED_TERMS}: ")]


def test_required_anti_affinity_pod_stays_pending_with_the_message() -> None:
    run = Run()
    run.add(b.node("n0", gpus=8), b.node("n1", gpus=8), _anti("infer-0"), _anti("infer-1"))
    assert run.node_of("infer-0") is None and run.node_of("infer-1") is None  # not two on one node
    attempt = run.last("infer-0")
    assert attempt.message == (
        f"0/2 nodes are available: pod has {ANTI}, which Tessera does not honour: list the namespaces in the "
        "term's `namespaces` instead of a namespaceSelector (Tessera watches no Namespaces); a pod asking GPUs "
        "must stay with Tessera (the GPU pod policy refuses class GPU pods naming another scheduler, and "
        "kube-scheduler could give out GPUs Tessera gave) (see docs/not-supported.md). "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.")
    assert attempt.preempted == []


def test_required_terms_are_not_evicted_for() -> None:
    run = Run()
    low = b.pod("low", limits={"nvidia.com/gpu": 8}, priority=0)
    high = b.pod("high", limits={"nvidia.com/gpu": 8}, priority=1000,
                 spec_extra={"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                                          [_ns_term("x")]}}})
    run.add(b.node("n0", gpus=8), low, high)
    assert run.node_of("low") == "n0" and run.node_of("high") is None
    attempt = run.last("high")
    assert attempt.preempted == []
    assert "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[].namespaceSelector" \
        in attempt.message


def test_do_not_schedule_spread_is_no_longer_refused() -> None:
    """PodTopologySpread honours it (tests/replay/test_pod_topology_spread.py); before, this pod
    stayed pending with the refusal."""
    run = Run()
    spread = [{"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "infer"}}}]
    run.add(b.node("n0", gpus=8), b.pod("spread", labels={"app": "infer"}, requests={"cpu": "1"},
                                         spec_extra={"topologySpreadConstraints": spread}))
    assert run.node_of("spread") == "n0"


def test_a_gang_member_with_exclusive_placement_terms_is_honoured() -> None:
    """A JobSet with alpha.jobset.sigs.k8s.io/exclusive-topology: its webhook gives every pod
    required affinity to its own job and anti-affinity to the others, by the topology key. Here
    the members are no pods of job-a (nothing matches, nor do they): InterPodAffinity keeps them
    pending, as kube-scheduler does."""
    run = Run()
    exclusive = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term("job-a")]},
                 "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term("job-b")]}}
    run.add(b.node("n0", gpus=8), b.podgroup("pg", 2),
            *(b.pod(f"m{i}", labels={"scheduling.x-k8s.io/pod-group": "pg"}, limits={"nvidia.com/gpu": 1},
                    spec_extra={"affinity": exclusive}) for i in range(2)))
    assert run.node_of("m0") is None and run.node_of("m1") is None
    message = run.last("m0").message
    assert "node(s) didn't match pod affinity rules" in message


def test_preferred_terms_place_the_pod_and_are_told_once() -> None:
    run = Run()
    preferred = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": _ns_term("infer")}]}}
    pod = _replica("soft", **preferred)
    run.add(b.node("n0", gpus=8), pod)
    assert run.node_of("soft") == "n0"
    [told] = _told(run)
    assert told.startswith(f"{IGNORED_PREFERRED_TERMS}: Pod default/soft ")
    assert PREFERRED_ANTI in told and "they change nothing about where the pod goes" in told and "docs/not-supported.md" in told
    assert "list the namespaces in the term's `namespaces` instead of a namespaceSelector" in told
    run.feed(b.event("MODIFIED", pod), b.event("MODIFIED", pod))
    assert len(_told(run)) == 1


def test_preferred_told_once_while_pending_and_schedule_anyway_is_scored_not_told() -> None:
    run = Run()
    spread = [{"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "ScheduleAnyway",
               "labelSelector": {"matchLabels": {"app": "infer"}}}]
    preferred = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": _ns_term("infer")}]}}
    pod = b.pod("big", limits={"nvidia.com/gpu": 8},
                spec_extra={"topologySpreadConstraints": spread, "affinity": preferred})
    run.add(b.node("n0", gpus=4), pod)  # does not fit: tried again on every event
    run.feed(b.event("ADDED", b.node("n1", gpus=4)), b.event("MODIFIED", pod))
    [told] = _told(run)
    assert PREFERRED_ANTI in told
    assert "topologySpreadConstraints" not in told  # PodTopologySpread scores it
    assert "Insufficient nvidia.com/gpu" in run.last("big").message  # scores, not a refusal


def test_plain_pods_and_other_schedulers_pods_are_untouched() -> None:
    run = Run()
    theirs = b.pod("theirs", scheduler="default-scheduler",
                   spec_extra={"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                       {"weight": 1, "podAffinityTerm": _term("x")}]}}})
    run.add(b.node("n0", gpus=8), _replica("plain"), theirs,
            _replica("empty", podAntiAffinity={"requiredDuringSchedulingIgnoredDuringExecution": []}))
    assert run.node_of("plain") == "n0" and run.node_of("empty") == "n0"
    assert _told(run) == []


def test_disabled_in_a_profile_places_ignoring_the_terms() -> None:
    assert "TesseraUnhonouredTerms" in BY_NAME
    raw = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
           "profiles": [{"schedulerName": "tessera",
                         "plugins": {"preFilter": {"disabled": [{"name": "TesseraUnhonouredTerms"}]}}}]}
    run = Run(parse_config(raw, "test"))
    run.add(b.node("n0", gpus=8), _anti("infer-0"), _anti("infer-1"))
    # as documented: a namespaceSelector Tessera cannot read is taken to select every namespace
    # (never beside a pod it might have meant), so the second replica waits
    assert run.node_of("infer-0") == "n0" and run.node_of("infer-1") is None
    assert "1 node(s) didn't match pod anti-affinity rules" in run.last("infer-1").message
    spread = [{"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "infer"}}}]
    run.add(b.pod("spread", labels={"app": "web"}, requests={"cpu": "1"},
                  spec_extra={"topologySpreadConstraints": spread}))
    assert run.node_of("spread") == "n0"  # PodTopologySpread's: no infer pod it counts would skew n0


def test_explain_says_preferred_terms_are_not_read() -> None:
    preferred = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 5, "podAffinityTerm": _ns_term("db")}]}}
    result = explaining.explain([b.node("n0", gpus=8), _replica("soft", **preferred)], "default/soft",
                                config(BINPACK), [], 0.0)
    assert result is not None
    line = next(line for line in explaining.render(result, 0.0).splitlines() if line.startswith("Not read:"))
    assert "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[].namespaceSelector" in line


def test_what_if_and_the_replay_give_the_same_answer() -> None:
    """`kubectl tessera what-if` and `tessera simulate` drive the same core: the required pods
    pend with the same message, the preferred one is placed."""
    preferred = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": _term("infer")}]}}
    objs = [b.node("n0", gpus=8), _anti("infer-0"), _anti("infer-1"), _replica("soft", **preferred)]
    run = Run()
    run.add(*objs)
    found = {o.pod: o for o in whatif.what_if(objs, config(BINPACK), 0.0).outcomes}
    for name in ("infer-0", "infer-1"):
        assert found[f"default/{name}"].node == "" and run.node_of(name) is None
        assert found[f"default/{name}"].message == run.last(name).message
    assert found["default/soft"].node == run.node_of("soft") == "n0"


def test_a_pod_asking_a_gpu_class_is_not_told_to_leave_tessera() -> None:
    """A GPU asked through a ResourceClass (a device request, no "gpu" in the resource name) is a
    GPU pod too: the GPU pod policy refuses class GPU pods naming another scheduler."""
    run = Run()
    run.add(b.node("n0", gpus=4), *(b.device("n0", i) for i in range(4)),
            b.resource_class("v100", match_labels={"model": "V100"}))
    run.add(b.pod("classy", labels={"app": "infer"}, limits={"class.tessera.dev/v100": 1},
                  spec_extra={"affinity": {"podAntiAffinity": {
                      "requiredDuringSchedulingIgnoredDuringExecution": [_ns_term("infer")]}}}))
    message = run.last("classy").message
    assert ANTI in message and "a pod asking GPUs must stay with Tessera" in message
    assert "default-scheduler" not in message


def test_a_gpu_pod_with_preferred_terms_is_not_told_to_leave_tessera() -> None:
    """The IgnoredPreferredTerms Event and what-if's Not read: line give a GPU pod (a ResourceClass
    request, or nvidia.com/gpu) the refusal's advice, not "run the pod with schedulerName:
    default-scheduler": the GPU pod policy refuses class GPU pods naming another scheduler. A pod
    asking no GPUs is still told it may leave."""
    # a preferred term with a namespaceSelector: still told (a ScheduleAnyway constraint is scored now)
    told_term = {"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "podAffinityTerm": _ns_term("infer")}]}}}
    objs = [b.node("n0", gpus=4), *(b.device("n0", i) for i in range(4)),
            b.resource_class("v100-32g", match_labels={"model": "V100"}),
            b.pod("classy", labels={"app": "infer"}, limits={"class.tessera.dev/v100-32g": 1}, spec_extra=told_term),
            b.pod("plain-gpu", labels={"app": "infer"}, limits={"nvidia.com/gpu": 1}, spec_extra=told_term),
            b.pod("cpu", labels={"app": "infer"}, requests={"cpu": "1"}, spec_extra=told_term)]
    run = Run()
    run.add(*objs)
    told = {n.split(" ")[2]: n for n in _told(run)}
    notes = {n.pod: n.note for n in whatif.what_if(objs, config(BINPACK), 0.0).notes}
    for name in ("classy", "plain-gpu"):
        for said in (told[f"default/{name}"], notes[f"default/{name}"]):
            assert "a pod asking GPUs must stay with Tessera" in said and "default-scheduler" not in said
    for said in (told["default/cpu"], notes["default/cpu"]):
        assert "run the pod with schedulerName: default-scheduler" in said
