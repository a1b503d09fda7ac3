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
from scheduler.core.pod_terms import label_selector
from scheduler.core.selectors import Requirement, set_requirement
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


# --- labels.Requirement.Matches corners (the mutation review found no test pinning them) ---------

def test_gt_and_lt_compare_strictly_and_read_labels_as_go_int64_to_its_bounds() -> None:
    """selector.go: Gt is `lsValue > rValue`, Lt `<`; the label is read by strconv.ParseInt(v, 10, 64),
    which takes -2^63 .. 2^63-1 and refuses one past either end (then no match)."""
    gt, lt = Requirement("gen", "Gt", ("5",)), Requirement("gen", "Lt", ("5",))
    assert gt.matches({"gen": "6"}) and not gt.matches({"gen": "5"})
    assert lt.matches({"gen": "4"}) and not lt.matches({"gen": "5"})
    above, below = Requirement("gen", "Gt", ("0",)), Requirement("gen", "Lt", ("0",))
    assert above.matches({"gen": str(2**63 - 1)}) and not above.matches({"gen": str(2**63)})
    assert below.matches({"gen": str(-(2**63))}) and not below.matches({"gen": str(-(2**63) - 1)})


def test_in_and_exists_need_the_key_even_for_an_empty_value() -> None:
    """selector.go: In is `ls.Has(key) && values.Has(ls.Get(key))`, Exists `ls.Has(key)`: a label
    with the empty value is there; a missing one is not the empty value."""
    in_empty = Requirement("tier", "In", ("",))
    assert in_empty.matches({"tier": ""}) and not in_empty.matches({})
    exists = Requirement("tier", "Exists", ())
    assert exists.matches({"tier": ""}) and not exists.matches({})


def test_a_requirements_values_are_a_set() -> None:
    """Selectors listing the same values in another order, or twice, are the same selector."""
    assert set_requirement("k", "In", ["b", "a", "b"]) == set_requirement("k", "In", ["a", "b"])
    assert set_requirement("k", "In", ["b", "a", "b"]).values == ("a", "b")


def test_a_pod_terms_selector_with_an_unknown_operator_matches_no_pod() -> None:
    """The lenient reader of pod terms: an expression the apiserver would refuse makes the whole
    selector match nothing (not the rest of it, nor everything)."""
    selector = label_selector({"matchLabels": {"app": "web"},
                               "matchExpressions": [{"key": "tier", "operator": "Has", "values": ["db"]}]})
    assert selector is not None and not selector.valid
    assert not selector.matches({"app": "web", "tier": "db"}) and not selector.matches({"app": "web"})
