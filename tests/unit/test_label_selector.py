"""The core's metav1.LabelSelector parser, shared by PodDisruptionBudgets (preemption), `kubectl
tessera explain <workload>` and `what-if -f`'s workloads: it refuses what upstream refuses
(metav1 validation.ValidateLabelSelector; labels.NewRequirement under LabelSelectorAsSelector).

Before: an expression without a key was a requirement on the key "" (a PDB's `DoesNotExist` on
it covered every labelled pod, where upstream's selector fails to convert and covers none), and a
value that is no string was read as its str() (5 as "5")."""

from __future__ import annotations

import pytest

from scheduler.core.disruption import parse_disruption_budget, parse_label_selector
from scheduler.core.objects import ObjectError, parse_pod
from scheduler.sim import builders as b


@pytest.mark.parametrize(("selector", "said"), [
    ({"matchExpressions": [{"operator": "Exists"}]}, "s.matchExpressions[0].key: Required value"),
    ({"matchExpressions": [{"key": "", "operator": "DoesNotExist"}]}, "s.matchExpressions[0].key: Required value"),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["x", 5]}]},
     "s.matchExpressions[0].values[1]: expected a string, got int"),
    ({"matchExpressions": [{"key": "a", "operator": "Has"}]},
     's.matchExpressions[0].operator: Invalid value: "Has": not a valid selector operator'),
])
def test_a_selector_upstream_refuses_is_refused(selector: dict[str, object], said: str) -> None:
    with pytest.raises(ObjectError) as caught:
        parse_label_selector(selector, "s")
    assert str(caught.value) == said


def test_a_budget_whose_expression_has_no_key_covers_no_pod() -> None:
    budget = parse_disruption_budget({"metadata": {"name": "pdb", "namespace": "default"},
                                      "spec": {"selector": {"matchExpressions": [{"key": "",
                                                                                  "operator": "DoesNotExist"}]}},
                                      "status": {"disruptionsAllowed": 0}})
    assert not budget.covers(parse_pod(b.pod("p", labels={"app": "web"})))


def test_a_good_selector_still_selects() -> None:
    selector = parse_label_selector({"matchLabels": {"app": "web"},
                                     "matchExpressions": [{"key": "tier", "operator": "In", "values": ["db"]},
                                                          {"key": "gone", "operator": "DoesNotExist"}]}, "s")
    assert selector.matches({"app": "web", "tier": "db"})
    assert not selector.matches({"app": "web", "tier": "db", "gone": ""})
    assert not selector.matches({"app": "web"}) and not selector.empty
