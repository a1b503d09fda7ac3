"""bench.live --workload: the pods carry the fields of the kube-scheduler scheduler_perf workload
they copy (test/integration/scheduler_perf/config/performance-config.yaml and its pod templates),
the fake nodes' zones, the profile's score plugin, and the placement check after a round."""

from __future__ import annotations

from pathlib import Path

import yaml

from bench.live_cluster import GROUP_LABEL, WORKLOADS, placement, pod_object, zone_of
from bench.live_procs import scheduler_config


def _pod(workload: str, index: int = 0, scheduler: str = "tessera") -> dict:  # type: ignore[type-arg]
    w = WORKLOADS[workload]
    return pod_object(f"p{index}", "ns", scheduler, w, w.group_of(index))


def test_spread_pods_carry_a_zone_constraint_on_their_own_label() -> None:
    for name, when in (("spread", "DoNotSchedule"), ("spread-soft", "ScheduleAnyway")):
        pod = _pod(name)
        (constraint,) = pod["spec"]["topologySpreadConstraints"]
        assert constraint == {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                              "whenUnsatisfiable": when,
                              "labelSelector": {"matchLabels": {GROUP_LABEL: pod["metadata"]["labels"][GROUP_LABEL]}}}
        assert WORKLOADS[name].zones == 10 and WORKLOADS[name].score == "PodTopologySpread"


def test_anti_affinity_pods_repel_their_group_by_hostname() -> None:
    pod = _pod("anti-affinity", 150)
    (term,) = pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term == {"labelSelector": {"matchLabels": {GROUP_LABEL: "g1"}}, "topologyKey": "kubernetes.io/hostname"}
    assert pod["metadata"]["labels"][GROUP_LABEL] == "g1"
    assert _pod("anti-affinity", 99)["metadata"]["labels"][GROUP_LABEL] == "g0"


def test_preferred_affinity_pods_attract_their_group_by_hostname_with_weight_1() -> None:
    pod = _pod("affinity-soft", 700)
    (term,) = pod["spec"]["affinity"]["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term == {"weight": 1, "podAffinityTerm": {"labelSelector": {"matchLabels": {GROUP_LABEL: "all"}},
                                                     "topologyKey": "kubernetes.io/hostname"}}


def test_both_schedulers_get_the_same_pod_but_for_scheduler_name() -> None:
    for name in WORKLOADS:
        a, b = _pod(name, 3, "tessera"), _pod(name, 3, "default-scheduler")
        assert a["spec"].pop("schedulerName") == "tessera"
        b["spec"].pop("schedulerName")
        assert a == b


def test_plain_gpu_pods_keep_their_shape() -> None:
    spec = _pod("gpu")["spec"]
    assert "affinity" not in spec and "topologySpreadConstraints" not in spec
    assert spec["containers"][0]["resources"]["requests"] == {"cpu": "100m", "nvidia.com/gpu": "1"}


def test_zones_are_round_robin() -> None:
    assert [zone_of(i, 10) for i in (0, 9, 10, 23)] == ["zone-0", "zone-9", "zone-0", "zone-3"]


def test_profile_enables_the_workloads_score_at_upstream_weight(tmp_path: Path) -> None:
    path = scheduler_config(tmp_path / "c.yaml", scheduler_name="s", kubeconfig=tmp_path / "k", qps=1, burst=1,
                            scores=("InterPodAffinity",))
    enabled = yaml.safe_load(path.read_text())["profiles"][0]["plugins"]["score"]["enabled"]
    assert {"name": "InterPodAffinity", "weight": 2} in enabled


def test_placement_checks_each_rule() -> None:
    zones = {"n0": "zone-0", "n1": "zone-1", "n2": "zone-1"}
    assert placement(WORKLOADS["spread"], [("all", "n0"), ("all", "n1")], zones) == {"max_zone_skew": 0, "valid": True}
    assert placement(WORKLOADS["spread"], [("all", "n1"), ("all", "n2")], zones) == {"max_zone_skew": 2, "valid": False}
    assert placement(WORKLOADS["spread-soft"], [("all", "n1"), ("all", "n2")], zones)["valid"] is None
    anti = WORKLOADS["anti-affinity"]
    assert placement(anti, [("g0", "n0"), ("g1", "n0")], {}) == {"max_group_pods_per_node": 1, "valid": True}
    assert placement(anti, [("g0", "n0"), ("g0", "n0")], {})["valid"] is False
    assert placement(WORKLOADS["affinity-soft"], [("all", "n0"), ("all", "n0"), ("all", "n1")], {}) == {
        "pods_with_peer_on_node": 0.667, "valid": None}
