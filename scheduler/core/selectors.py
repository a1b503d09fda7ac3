"""Label requirements and selectors: the one home of how a `key op values` requirement matches
a label set (upstream's apimachinery labels.Requirement.Matches).

Why a module of its own: node selector terms (`objects.SelectorTerm`) and metav1.LabelSelectors
(pod (anti-)affinity terms in `pod_terms`, PodDisruptionBudgets, the probe's workloads) match
labels by the same rule, and `objects` imports `pod_terms`, so the rule lives below both.
Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

_INT64 = re.compile(r"[+-]?[0-9]+")


def go_int64(text: str) -> int | None:
    """Go's strconv.ParseInt(text, 10, 64): decimal digits with an optional sign, in range."""
    if not _INT64.fullmatch(text):
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


@dataclass(frozen=True, slots=True)
class Requirement:
    """One `key op values` requirement, of a node selector term or of a metav1.LabelSelector's
    matchExpressions: both match labels by this one rule (upstream's labels.Requirement), so a
    fix to it (a Gt/Lt parse, a missing key) holds for node affinity, pod terms and budgets alike."""

    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist; Gt, Lt in node selector terms only
    values: tuple[str, ...]
    # what upstream's labels.NewRequirement refuses in it (a value that is no label value, a Gt/Lt
    # value that is no int64), as its field errors below the requirement's path ("values[0]: ...").
    # The apiserver accepts such a pod: a required term with one matches nothing (upstream's
    # LazyErrorNodeSelector); a preferred one fails NodeAffinity's PreScore
    errors: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.errors:
            return False
        op = self.operator
        if op == "In":
            return labels.get(self.key) in self.values
        if op == "NotIn":
            return labels.get(self.key) not in self.values
        if op == "Exists":
            return self.key in labels
        if op == "DoesNotExist":
            return self.key not in labels
        value = labels.get(self.key)
        left, right = (go_int64(value) if value is not None else None), go_int64(self.values[0])
        if left is None or right is None:
            return False  # labels/selector.go: a label strconv.ParseInt cannot read never matches
        return left > right if op == "Gt" else left < right


def set_requirement(key: str, operator: str, values: object) -> Requirement:
    """A metav1.LabelSelectorRequirement (no Gt/Lt there) as a `Requirement`: its string values as
    a set (sorted, repeats dropped), so selectors listing the same values compare equal."""
    return Requirement(key, operator, tuple(sorted({v for v in values if isinstance(v, str)}))
                       if isinstance(values, list) else ())


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """metav1.LabelSelectorAsSelector: matchLabels and matchExpressions ANDed; `{}` matches every
    pod; an unreadable one (`valid` False: an operator the apiserver refuses) matches none. The
    one selector of the core: pod terms read theirs leniently (`pod_terms.label_selector`),
    budgets and the probe's workloads strictly (`disruption.parse_label_selector`)."""

    match_labels: tuple[tuple[str, str], ...] = ()
    expressions: tuple[Requirement, ...] = ()
    valid: bool = True

    @property
    def empty(self) -> bool:
        return not self.match_labels and not self.expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        if not self.valid:
            return False
        if any(labels.get(k) != v for k, v in self.match_labels):
            return False
        return all(req.matches(labels) for req in self.expressions)
