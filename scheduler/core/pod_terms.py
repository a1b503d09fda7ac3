"""Pod placement terms Tessera does not read: inter-pod affinity and anti-affinity, topology spread.

Tessera has no InterPodAffinity or PodTopologySpread. A pod of Tessera's that carries such terms
is never silently placed against them:
- a REQUIRED term (`requiredDuringSchedulingIgnoredDuringExecution` pod affinity or anti-affinity,
  a topology spread constraint with `whenUnsatisfiable: DoNotSchedule`) is refused by the
  TesseraUnhonouredTerms PreFilter (scheduler/core/plugins/unhonoured_terms.py): the pod stays
  pending, UnschedulableAndUnresolvable (no eviction for it), with `refusal` as its reason;
- PREFERRED terms (`preferredDuringSchedulingIgnoredDuringExecution`, `ScheduleAnyway` spread) are
  only scores: the pod is placed as without them, and `ClusterState` raises one
  `IGNORED_PREFERRED_TERMS` notice per pod (again only when the set changes), through the same
  path as other schedulers' keys (`foreign`); `kubectl tessera explain` prints `preferred_note`.

`pod_terms` reads any shape without raising: the apiserver validates these fields, and a shape it
would refuse (a term list that is no list, an entry that is no object) counts as no term.
Pure.
"""

from __future__ import annotations

from collections.abc import Mapping

IGNORED_PREFERRED_TERMS = "IgnoredPreferredTerms"  # the Warning Event's reason
DOC = "docs/not-supported.md"

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
_AFFINITY = ("podAffinity", "podAntiAffinity")
SPREAD_REQUIRED = "spec.topologySpreadConstraints (whenUnsatisfiable: DoNotSchedule)"
SPREAD_PREFERRED = "spec.topologySpreadConstraints (whenUnsatisfiable: ScheduleAnyway)"


def pod_terms(spec: object) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The pod's (required, preferred) placement terms Tessera does not read, each named by its
    field, in a fixed order. A spread constraint is required unless it says `ScheduleAnyway`
    (the apiserver allows only that and `DoNotSchedule`)."""
    required: list[str] = []
    preferred: list[str] = []
    if not isinstance(spec, Mapping):
        return (), ()
    affinity = spec.get("affinity")
    if isinstance(affinity, Mapping):
        for kind in _AFFINITY:
            terms = affinity.get(kind)
            if not isinstance(terms, Mapping):
                continue
            for key, into in ((_REQUIRED, required), (_PREFERRED, preferred)):
                listed = terms.get(key)
                if isinstance(listed, list) and listed:
                    into.append(f"spec.affinity.{kind}.{key}")
    spread = spec.get("topologySpreadConstraints")
    if isinstance(spread, list):
        wants = [c.get("whenUnsatisfiable") for c in spread if isinstance(c, Mapping)]
        if any(w != "ScheduleAnyway" for w in wants):
            required.append(SPREAD_REQUIRED)
        if "ScheduleAnyway" in wants:
            preferred.append(SPREAD_PREFERRED)
    return tuple(required), tuple(preferred)


def refusal(required: tuple[str, ...]) -> str:
    """The PreFilter's reason for a pod with required terms (one FailedScheduling reason: no
    trailing period, the FitError adds it)."""
    return (f"pod has {', '.join(required)}, which Tessera does not honour (it reads no pod affinity, "
            "anti-affinity or topology spread): drop the term, or run the pod with schedulerName: "
            f"default-scheduler (see {DOC})")


def preferred_note(preferred: tuple[str, ...]) -> str:
    """What a pod is told of its preferred terms; "" for none."""
    if not preferred:
        return ""
    return (f"{', '.join(preferred)}: Tessera does not score these: they change nothing about where the pod goes; "
            f"drop them, or run the pod with schedulerName: default-scheduler. See {DOC}.")


def preferred_message(pod_key: str, preferred: tuple[str, ...]) -> str:
    """The Warning Event's message for a pod's preferred terms."""
    return f"Pod {pod_key} has preferred placement terms, which Tessera does not read: {preferred_note(preferred)}"
