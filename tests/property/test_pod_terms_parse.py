"""Property: reading a pod's pod (anti-)affinity and topology spread terms never crashes.

`pod_terms` names the terms Tessera does not read (required ones refused by
TesseraUnhonouredTerms, preferred ones told once); `spread_constraints` reads the DoNotSchedule
spread constraints PodTopologySpread honours. Any JSON shape — the apiserver validates these
fields, but a replayed or hand-written object need not — gives a result, never an exception, and
`parse_pod` on a pod carrying it either parses or refuses the object as invalid in its own way.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core.objects import ObjectError, parse_pod
from scheduler.core.pod_terms import pod_terms, spread_constraints
from scheduler.sim import builders as b

_KEYS = ("podAffinity", "podAntiAffinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
         "preferredDuringSchedulingIgnoredDuringExecution", "whenUnsatisfiable", "topologyKey", "maxSkew",
         "podAffinityTerm", "weight", "namespaceSelector", "matchLabels")
_json: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3)
    | st.sampled_from(["DoNotSchedule", "ScheduleAnyway", ""]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(_KEYS) | st.text(max_size=2),
                                                                 inner, max_size=4),
    max_leaves=12)
_spec = st.fixed_dictionaries({}, optional={"affinity": _json, "topologySpreadConstraints": _json})


@settings(max_examples=400, deadline=None)
@given(_json | _spec)
def test_any_shape_gives_fields_never_an_exception(spec: Any) -> None:
    required, preferred = pod_terms(spec)
    assert all(isinstance(f, str) and f.startswith("spec.") for f in (*required, *preferred))
    assert len(set(required)) == len(required) and len(set(preferred)) == len(preferred)


@settings(max_examples=200, deadline=None)
@given(_spec)
def test_parse_pod_never_crashes_on_these_fields(extra: dict[str, Any]) -> None:
    try:
        pod = parse_pod(b.pod("p", spec_extra=extra))
    except ObjectError:
        return
    assert (pod.unhonoured, pod.unread) == pod_terms({**extra})
    assert pod.spread == spread_constraints({**extra}, pod.meta.labels)
    assert pod.soft_spread == spread_constraints({**extra}, pod.meta.labels, "ScheduleAnyway")


@given(st.lists(st.sampled_from(["DoNotSchedule", "ScheduleAnyway", None, "Bogus"]), min_size=1, max_size=4))
def test_do_not_schedule_spread_is_filtered_and_schedule_anyway_scored(whens: list[str | None]) -> None:
    """Upstream's filter reads the constraints saying DoNotSchedule, its score those saying
    ScheduleAnyway (filterTopologySpreadConstraints with that action); none is refused or told."""
    constraints = [{"maxSkew": 1, "topologyKey": "zone"} | ({} if w is None else {"whenUnsatisfiable": w})
                   for w in whens]
    assert pod_terms({"topologySpreadConstraints": constraints}) == ((), ())
    spec = {"topologySpreadConstraints": constraints}
    assert len(spread_constraints(spec, {})) == whens.count("DoNotSchedule")
    assert len(spread_constraints(spec, {}, "ScheduleAnyway")) == whens.count("ScheduleAnyway")


def test_empty_lists_and_node_affinity_are_not_pod_terms() -> None:
    assert pod_terms({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []},
                                   "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}},
                      "topologySpreadConstraints": []}) == ((), ())
    # a term is honoured (InterPodAffinity's filter, or its score), unless its namespaceSelector is not `{}`
    assert pod_terms({"affinity": {"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{}, {"namespaceSelector": {}}],
        "preferredDuringSchedulingIgnoredDuringExecution": [{}, {"podAffinityTerm": {"namespaceSelector": {}}}]}}}) \
        == ((), ())
    assert pod_terms({"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "podAffinityTerm": {"namespaceSelector": {"matchLabels": {"team": "a"}}}}]}}}) == (
        (), ("spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[].namespaceSelector",))
    assert pod_terms({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"namespaceSelector": {"matchLabels": {"team": "a"}}}]}}}) == (
        ("spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[].namespaceSelector",), ())


def test_an_empty_preferred_list_is_no_term_and_a_namespace_selector_by_expressions_is_one() -> None:
    """Preferred terms are told only when some are listed; a namespaceSelector is non-empty (not
    honoured) with matchExpressions alone, as with matchLabels."""
    assert pod_terms({"affinity": {"podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": []}}}) == ((), ())
    assert pod_terms({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "Exists"}]}}]}}}) == (
        ("spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[].namespaceSelector",), ())
