"""PodDisruptionBudgets as preemption reads them: which victims a preemption would push a budget
below zero for.

Upstream (`filterPodsWithPDBViolation` in defaultpreemption) is best effort: budgets only sort the
candidate victims into violating and non-violating, and steer which node is chosen; a preemption
that must violate a budget still happens. The rules copied here: a pod without labels matches no
budget, a budget in another namespace or with an empty (or unreadable) selector matches nothing,
a pod already listed in `status.disruptedPods` does not count again, and a pod matching several
budgets takes one disruption from each. The allowance is counted afresh per node tried.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scheduler.core.objects import (
    JSON,
    ObjectError,
    ObjectMeta,
    Pod,
    _list,
    _mapping,
    _str,
    parse_meta,
    str_map,
)
from scheduler.core.selectors import LabelSelector, set_requirement
from scheduler.quoted import quoted

_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})


def parse_label_selector(value: object, where: str) -> LabelSelector:
    """A metav1.LabelSelector at `where`, or the field error upstream gives (metav1 validation's
    ValidateLabelSelector; labels.NewRequirement refuses the same under LabelSelectorAsSelector):
    every expression has a key, a known operator and string values, as many as it takes. Whether
    an empty selector is allowed is the caller's (`LabelSelector.empty`)."""
    raw = _mapping(value, where)
    expressions = []
    for i, item_raw in enumerate(_list(raw.get("matchExpressions"), f"{where}.matchExpressions")):
        path = f"{where}.matchExpressions[{i}]"
        item = _mapping(item_raw, path)
        key = _str(item.get("key"), f"{path}.key")
        if not key:
            raise ObjectError(f"{path}.key: Required value")
        op = _str(item.get("operator"), f"{path}.operator")
        values = _list(item.get("values"), f"{path}.values")
        for at, v in enumerate(values):
            if not isinstance(v, str):
                raise ObjectError(f"{path}.values[{at}]: expected a string, got {type(v).__name__}")
        if op in ("In", "NotIn") and not values:
            raise ObjectError(f"{path}.values: Required value: must be specified when `operator` is 'In' or 'NotIn'")
        if op in ("Exists", "DoesNotExist") and values:
            raise ObjectError(f"{path}.values: Forbidden: may not be specified when `operator` is 'Exists' or "
                              "'DoesNotExist'")
        if op not in _OPERATORS:
            raise ObjectError(f"{path}.operator: Invalid value: {quoted(op)}: not a valid selector operator")
        expressions.append(set_requirement(key, op, values))
    labels = str_map(raw.get("matchLabels"), f"{where}.matchLabels")
    return LabelSelector(tuple(sorted(labels.items())), tuple(expressions))


@dataclass(frozen=True, slots=True)
class DisruptionBudget:
    meta: ObjectMeta
    selector: LabelSelector | None  # None: absent or unreadable (matches nothing, as upstream)
    disruptions_allowed: int
    disrupted_pods: frozenset[str]  # pod names the disruption controller already counts

    @property
    def key(self) -> str:
        return self.meta.key

    def covers(self, pod: Pod) -> bool:
        return (bool(pod.meta.labels) and self.meta.namespace == pod.meta.namespace
                and self.selector is not None and not self.selector.empty
                and self.selector.matches(pod.meta.labels))


def parse_disruption_budget(obj: JSON) -> DisruptionBudget:
    meta = parse_meta(obj, "PodDisruptionBudget")
    spec = _mapping(obj.get("spec"), "PodDisruptionBudget.spec")
    status = _mapping(obj.get("status"), "PodDisruptionBudget.status")
    try:
        selector: LabelSelector | None = (parse_label_selector(spec["selector"], "PodDisruptionBudget.spec.selector")
                                          if spec.get("selector") is not None else None)
    except ObjectError:
        selector = None  # upstream: a selector that does not convert matches nothing
    allowed = status.get("disruptionsAllowed", 0)
    if not isinstance(allowed, int) or isinstance(allowed, bool):
        raise ObjectError(f"PodDisruptionBudget.status.disruptionsAllowed: Invalid value: {quoted(allowed)}")
    disrupted = _mapping(status.get("disruptedPods"), "PodDisruptionBudget.status.disruptedPods")
    return DisruptionBudget(meta, selector, allowed, frozenset(str(name) for name in disrupted))


def split_by_violation(pods: Sequence[Pod], budgets: Iterable[DisruptionBudget]) -> tuple[list[Pod], list[Pod]]:
    """(violating, non-violating), each in the given order: a pod is violating when evicting it,
    after the pods before it, takes some budget it is covered by below zero."""
    covering = list(budgets)
    allowed = [budget.disruptions_allowed for budget in covering]
    violating: list[Pod] = []
    fine: list[Pod] = []
    for pod in pods:
        breaks = False
        for i, budget in enumerate(covering):
            if not budget.covers(pod) or pod.meta.name in budget.disrupted_pods:
                continue
            allowed[i] -= 1
            if allowed[i] < 0:
                breaks = True
        (violating if breaks else fine).append(pod)
    return violating, fine
