"""PodDisruptionBudget accounting as upstream's filterPodsWithPDBViolation reads it
(defaultpreemption): a budget in another namespace, with an empty selector, or a status without
disruptionsAllowed takes no disruption; a matchLabels key the pod lacks does not match.
(Mutation round 4: each of these one-line slips passed every test.)"""

from __future__ import annotations

from typing import Any

from scheduler.core.disruption import parse_disruption_budget, split_by_violation
from scheduler.core.objects import parse_pod
from scheduler.sim import builders as b

FOO = {"app": "foo"}


def _budget(selector: dict[str, Any], allowed: int | None = 0, namespace: str = "default") -> dict[str, Any]:
    status: dict[str, Any] = {} if allowed is None else {"disruptionsAllowed": allowed}
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "pdb", "namespace": namespace, "uid": b.uid_for("PodDisruptionBudget", namespace, "pdb")},
            "spec": {"selector": selector}, "status": status}


def _names(pods: list[Any]) -> list[str]:
    return [pod.meta.name for pod in pods]


def test_a_budget_in_another_namespace_covers_no_pod_here() -> None:
    victim = parse_pod(b.pod("v", labels=FOO))
    budget = parse_disruption_budget(_budget({"matchLabels": FOO}, namespace="other"))
    assert split_by_violation([victim], [budget]) == ([], [victim])
    here = parse_disruption_budget(_budget({"matchLabels": FOO}))
    assert _names(split_by_violation([victim], [here])[0]) == ["v"]


def test_an_empty_selector_matches_nothing() -> None:
    """metav1: an empty LabelSelector would select everything; a PDB's selects nothing."""
    victim = parse_pod(b.pod("v", labels=FOO))
    budget = parse_disruption_budget(_budget({}))
    assert split_by_violation([victim], [budget]) == ([], [victim])


def test_a_status_without_disruptions_allowed_allows_none() -> None:
    """A budget the disruption controller has not counted yet (no status) allows no disruption:
    Go's zero value of DisruptionsAllowed."""
    victim = parse_pod(b.pod("v", labels=FOO))
    budget = parse_disruption_budget(_budget({"matchLabels": FOO}, allowed=None))
    assert budget.disruptions_allowed == 0
    assert _names(split_by_violation([victim], [budget])[0]) == ["v"]


def test_a_match_label_the_pod_lacks_does_not_match() -> None:
    victim = parse_pod(b.pod("v", labels={"team": "a"}))
    budget = parse_disruption_budget(_budget({"matchLabels": {"team": "a", "app": "foo"}}))
    assert split_by_violation([victim], [budget]) == ([], [victim])
