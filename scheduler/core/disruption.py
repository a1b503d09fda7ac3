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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from scheduler.core.objects import (
    JSON,
    ObjectError,
    ObjectMeta,
    Pod,
    Requirement,
    _list,
    _mapping,
    _str,
    _str_map,
    parse_meta,
)

_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A metav1.LabelSelector: every matchLabels pair and every expression must hold."""

    match_labels: Mapping[str, str]
    expressions: tuple[Requirement, ...]

    @property
    def empty(self) -> bool:
        return not self.match_labels and not self.expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        return (all(labels.get(key) == value for key, value in self.match_labels.items())
                and all(req.matches(labels) for req in self.expressions))


def parse_label_selector(value: object, where: str) -> LabelSelector:
    raw = _mapping(value, where)
    expressions = []
    for i, item_raw in enumerate(_list(raw.get("matchExpressions"), f"{where}.matchExpressions")):
        item = _mapping(item_raw, f"{where}.matchExpressions[{i}]")
        key = _str(item.get("key"), f"{where}.matchExpressions[{i}].key")
        op = _str(item.get("operator"), f"{where}.matchExpressions[{i}].operator")
        values = tuple(str(v) for v in _list(item.get("values"), f"{where}.matchExpressions[{i}].values"))
        if op not in _OPERATORS:
            raise ObjectError(f'{where}.matchExpressions[{i}].operator: Unsupported value: "{op}"')
        if op in ("In", "NotIn") and not values:
            raise ObjectError(f"{where}.matchExpressions[{i}].values: Required value: must be specified "
                              "when `operator` is 'In' or 'NotIn'")
        if op in ("Exists", "DoesNotExist") and values:
            raise ObjectError(f"{where}.matchExpressions[{i}].values: Forbidden: may not be specified "
                              "when `operator` is 'Exists' or 'DoesNotExist'")
        expressions.append(Requirement(key, op, values))
    return LabelSelector(_str_map(raw.get("matchLabels"), f"{where}.matchLabels"), tuple(expressions))


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
        raise ObjectError(f"PodDisruptionBudget.status.disruptionsAllowed: Invalid value: {allowed!r}")
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
