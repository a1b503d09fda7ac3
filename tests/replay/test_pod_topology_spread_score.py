"""`topologySpreadConstraints` with `whenUnsatisfiable: ScheduleAnyway` score nodes as kube-scheduler
v1.36's PodTopologySpread (podtopologyspread/scoring.go), through the pure core.

Before, such constraints were only told (IgnoredPreferredTerms) and changed nothing: a replica
asking to be spread over zones landed wherever the other scores put it, next to its sibling.
"""

from __future__ import annotations

from typing import Any

from scheduler.core.pod_terms import IGNORED_PREFERRED_TERMS
from scheduler.kubectl import explain as explaining
from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, config

ZONE = "topology.kubernetes.io/zone"


def _cluster() -> list[dict[str, Any]]:
    """Two empty, equal nodes in zones a and b, and a full one in b running a web replica: without
    the score the tie-break takes b0."""
    return [b.node("a0", gpus=8, labels={ZONE: "a"}), b.node("b0", gpus=8, labels={ZONE: "b"}),
            b.node("b9", gpus=8, labels={ZONE: "b"}),
            b.pod("web-0", labels={"app": "web"}, node_name="b9", phase="Running", limits={"nvidia.com/gpu": 8})]


def _web(name: str, *constraints: dict[str, Any]) -> dict[str, Any]:
    return b.pod(name, labels={"app": "web"}, limits={"nvidia.com/gpu": 1},
                 spec_extra={"topologySpreadConstraints": list(constraints)} if constraints else None)


def _soft(key: str = ZONE, app: str = "web") -> dict[str, Any]:
    return {"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app": app}}}


def test_a_zone_constraint_splits_two_equal_nodes() -> None:
    run = Run()
    run.add(*_cluster(), _web("web-1", _soft()))
    assert run.node_of("web-1") == "a0"
    assert not [n for n in run.notices() if n.startswith(IGNORED_PREFERRED_TERMS)]  # scored, not told


def test_without_constraints_or_matching_pods_the_tie_break_decides() -> None:
    for pod in (_web("plain"), _web("other", _soft(app="db"))):
        run = Run()
        run.add(*_cluster(), pod)
        assert run.node_of(pod["metadata"]["name"]) == "b0"


def test_a_node_lacking_the_key_scores_zero() -> None:
    """A feasible node without the zone label scores 0 (upstream's IgnoredNodes), below a node in
    the zone already holding a replica (alone among the nodes with the key, it scores 100)."""
    run = Run()
    run.add(*(b.node(f"bare{i}", gpus=8) for i in range(4)), *_cluster()[1:], _web("web-1", _soft()))
    assert run.node_of("web-1") == "b0"


def test_explain_shows_the_score() -> None:
    result = explaining.explain([*_cluster(), _web("web-1", _soft())], "default/web-1", config(BINPACK), [], 0.0)
    assert result is not None
    text = explaining.render(result, 0.0)
    fits = [line.split() for line in text.splitlines() if "fits, score" in line]
    # zone a 0 pods, zone b 1: raw 0 and round(log(4)) = 1 -> 100 and 0, weight 2
    assert [line[0] for line in fits] == ["a0", "b0"]
    totals = [int(line[line.index("score") + 1]) for line in fits]  # "score 512 = TaintToleration 100x3 + ..."
    assert totals[0] - totals[1] == 200
    assert "PodTopologySpread 100x2" in " ".join(fits[0]) and "PodTopologySpread" not in " ".join(fits[1])
    assert not [line for line in text.splitlines() if line.startswith("Not read:")]
