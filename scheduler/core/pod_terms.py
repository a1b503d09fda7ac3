"""Pod placement terms: the pod (anti-)affinity terms and spread constraints Tessera honours, and those it does not read.

Pod affinity and anti-affinity terms are read into `PodTerm`s: the required ones
(`requiredDuringSchedulingIgnoredDuringExecution`, `required_pod_terms`) are honoured by the
InterPodAffinity filter, the preferred ones (`preferredDuringSchedulingIgnoredDuringExecution`,
`preferred_pod_terms`, with their weights) by its score (scheduler/core/plugins/interpod_affinity.py),
except a term with a non-empty `namespaceSelector`: Tessera watches no Namespaces, so it cannot tell
which namespaces such a selector picks. Topology spread constraints are read into
`SpreadConstraint`s (`spread_constraints`): those with `whenUnsatisfiable: DoNotSchedule` are
honoured by the PodTopologySpread filter, `ScheduleAnyway` ones by its score
(scheduler/core/plugins/pod_topology_spread.py). A pod of Tessera's that carries what is not honoured is never silently placed against it:
- a REQUIRED term it cannot honour (a pod (anti-)affinity term with a non-empty
  `namespaceSelector`) is refused by the TesseraUnhonouredTerms PreFilter
  (scheduler/core/plugins/unhonoured_terms.py): the pod stays pending,
  UnschedulableAndUnresolvable (no eviction for it), with `refusal` as its reason;
- PREFERRED terms it does not score (a preferred pod (anti-)affinity term with a non-empty
  `namespaceSelector`) are only scores: the pod is placed as without them, and `ClusterState` raises one
  `IGNORED_PREFERRED_TERMS` notice per pod (again only when the set changes), through the same
  path as other schedulers' keys (`foreign`); `kubectl tessera explain` prints `preferred_note`.

`pod_terms` reads any shape without raising: the apiserver validates these fields, and a shape it
would refuse (a term list that is no list, an entry that is no object) counts as no term.
Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scheduler.core.selectors import LabelSelector, Requirement, set_requirement

IGNORED_PREFERRED_TERMS = "IgnoredPreferredTerms"  # the Warning Event's reason
DOC = "docs/not-supported.md"

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
_AFFINITY = ("podAffinity", "podAntiAffinity")
_NAMESPACES_INSTEAD = ("list the namespaces in the term's `namespaces` instead of a namespaceSelector "
                       "(Tessera watches no Namespaces)")


def pod_terms(spec: object) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The pod's (required, preferred) placement terms Tessera does not read, each named by its
    field, in a fixed order: pod (anti-)affinity terms with a non-empty namespaceSelector (every
    spread constraint is read: `spread_constraints`)."""
    required: list[str] = []
    preferred: list[str] = []
    if not isinstance(spec, Mapping):
        return (), ()
    for kind in _AFFINITY:
        for key, into in ((_REQUIRED, required), (_PREFERRED, preferred)):
            if any(_namespace_selector_set(_affinity_term(key, t)) for t in _listed(spec, kind, key)):
                into.append(f"spec.affinity.{kind}.{key}[].namespaceSelector")
    return tuple(required), tuple(preferred)


def _elsewhere(gpu: bool) -> str:
    """Whether the pod may leave Tessera for kube-scheduler. A pod asking GPUs is not told to use
    default-scheduler: Tessera's GPU pod policy refuses a GPU class pod naming another scheduler,
    and a plain nvidia.com/gpu pod under kube-scheduler could be given GPUs Tessera gave out."""
    return ("a pod asking GPUs must stay with Tessera (the GPU pod policy refuses class GPU pods naming another "
            "scheduler, and kube-scheduler could give out GPUs Tessera gave)" if gpu
            else "or run the pod with schedulerName: default-scheduler")


def refusal(required: tuple[str, ...], gpu: bool = False) -> str:
    """The PreFilter's reason for a pod with required terms (one FailedScheduling reason: no
    trailing period, the FitError adds it); `gpu`: the pod asks GPUs (`_elsewhere`)."""
    what = []
    if any(r.endswith("namespaceSelector") for r in required):
        what.append(_NAMESPACES_INSTEAD)
    return (f"pod has {', '.join(required)}, which Tessera does not honour: {'; '.join(what) or 'drop the term'}; "
            f"{_elsewhere(gpu)} (see {DOC})")


def _affinity_term(key: str, entry: object) -> object:
    """The PodAffinityTerm of a required entry (the entry) or a preferred one (its `podAffinityTerm`)."""
    return entry.get("podAffinityTerm") if key == _PREFERRED and isinstance(entry, Mapping) else entry


def _namespace_selector_set(term: object) -> bool:
    """A term whose namespaceSelector is set and not `{}` (which selects every namespace)."""
    if not isinstance(term, Mapping):
        return False
    selector = term.get("namespaceSelector")
    return isinstance(selector, Mapping) and bool(selector.get("matchLabels") or selector.get("matchExpressions"))


def label_selector(raw: object) -> LabelSelector | None:
    """None for no selector (upstream: labels.Nothing(), it matches no pod)."""
    if not isinstance(raw, Mapping):
        return None
    labels = raw.get("matchLabels")
    pairs = tuple(sorted((k, v) for k, v in labels.items() if isinstance(k, str) and isinstance(v, str))) \
        if isinstance(labels, Mapping) else ()
    exprs: list[Requirement] = []
    valid = True
    listed = raw.get("matchExpressions")
    for e in listed if isinstance(listed, list) else ():
        if not isinstance(e, Mapping) or e.get("operator") not in ("In", "NotIn", "Exists", "DoesNotExist"):
            valid = False
            continue
        exprs.append(set_requirement(str(e.get("key")), str(e.get("operator")), e.get("values")))
    return LabelSelector(pairs, tuple(exprs), valid)


@dataclass(frozen=True, slots=True)
class PodTerm:
    """A PodAffinityTerm as upstream's framework.AffinityTerm: the namespaces it looks in
    (`namespaces`; `all_namespaces` for a `{}` namespaceSelector), its selector (None: matches no
    pod) and its topology key. `unknown_namespaces`: a non-empty namespaceSelector Tessera cannot
    evaluate (watching no Namespaces): an incoming pod with a required one is refused by
    TesseraUnhonouredTerms; an existing pod's such anti-affinity term is taken to match every
    namespace, so Tessera never places a pod where that pod's owner may have forbidden it; the
    score counts no such term (`WeightedPodTerm`)."""

    namespaces: frozenset[str]
    all_namespaces: bool
    selector: LabelSelector | None
    topology_key: str
    unknown_namespaces: bool = False

    def matches(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """upstream's AffinityTerm.Matches without namespace labels."""
        if not (self.all_namespaces or self.unknown_namespaces or namespace in self.namespaces):
            return False
        return self.selector is not None and self.selector.matches(labels)


@dataclass(frozen=True, slots=True)
class WeightedPodTerm:
    """A preferred term with its weight (upstream's framework.WeightedAffinityTerm), as
    InterPodAffinity's score counts it."""

    weight: int
    term: PodTerm


def _parsed_term(t: Mapping[str, object], namespace: str) -> PodTerm:
    """Namespaces as upstream's GetNamespacesFromPodAffinityTerm: the term's `namespaces`, the
    pod's own when it lists none and has no namespaceSelector. matchLabelKeys/mismatchLabelKeys
    are not read here: the apiserver merges them into the labelSelector when it creates the pod
    (KEP-3633)."""
    names = t.get("namespaces")
    namespaces = frozenset(n for n in names if isinstance(n, str)) if isinstance(names, list) else frozenset()
    ns_selector = t.get("namespaceSelector")
    if not namespaces and ns_selector is None:
        namespaces = frozenset((namespace,))
    key = t.get("topologyKey")
    unknown = _namespace_selector_set(t)
    return PodTerm(namespaces, isinstance(ns_selector, Mapping) and not unknown,
                   label_selector(t.get("labelSelector")), key if isinstance(key, str) else "", unknown)


def _listed(spec: object, kind: str, key: str) -> list[object]:
    affinity = spec.get("affinity") if isinstance(spec, Mapping) else None
    terms = affinity.get(kind) if isinstance(affinity, Mapping) else None
    listed = terms.get(key) if isinstance(terms, Mapping) else None
    return listed if isinstance(listed, list) else []


def required_pod_terms(spec: object, namespace: str) -> tuple[tuple[PodTerm, ...], tuple[PodTerm, ...]]:
    """The pod's required (affinity, anti-affinity) terms."""
    affinity, anti = (tuple(_parsed_term(t, namespace) for t in _listed(spec, kind, _REQUIRED)
                            if isinstance(t, Mapping)) for kind in _AFFINITY)
    return affinity, anti


def preferred_pod_terms(spec: object,
                        namespace: str) -> tuple[tuple[WeightedPodTerm, ...], tuple[WeightedPodTerm, ...]]:
    """The pod's preferred (affinity, anti-affinity) terms with their weights. An entry the
    apiserver would refuse counts as no term: a weight that is no integer or outside 1..100
    (ValidateWeightedPodAffinityTerm; beyond int64 it would overflow the score), no term object."""
    out: list[tuple[WeightedPodTerm, ...]] = []
    for kind in _AFFINITY:
        parsed: list[WeightedPodTerm] = []
        for entry in _listed(spec, kind, _PREFERRED):
            weight = entry.get("weight") if isinstance(entry, Mapping) else None
            term = _affinity_term(_PREFERRED, entry)
            if isinstance(weight, int) and not isinstance(weight, bool) and 1 <= weight <= 100 \
                    and isinstance(term, Mapping):
                parsed.append(WeightedPodTerm(weight, _parsed_term(term, namespace)))
        out.append(tuple(parsed))
    return out[0], out[1]


def preferred_note(preferred: tuple[str, ...], gpu: bool = False) -> str:
    """What a pod is told of its preferred terms; "" for none. `gpu`: the pod asks GPUs, and is
    told what `refusal` tells it (`_elsewhere`)."""
    if not preferred:
        return ""
    instead = f"{_NAMESPACES_INSTEAD}, " if any(p.endswith("namespaceSelector") for p in preferred) else ""
    return (f"{', '.join(preferred)}: Tessera does not score these: they change nothing about where the pod goes; "
            f"{instead}drop them{'; ' if gpu else ', '}{_elsewhere(gpu)}. See {DOC}.")


def preferred_message(pod_key: str, preferred: tuple[str, ...], gpu: bool = False) -> str:
    """The Warning Event's message for a pod's preferred terms."""
    return (f"Pod {pod_key} has preferred placement terms, which Tessera does not read: "
            f"{preferred_note(preferred, gpu)}")


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A topology spread constraint as upstream's topologySpreadConstraint
    (podtopologyspread/common.go): its selector with `matchLabelKeys` merged in (None: matches
    no pod), `minDomains` (1 when unset; the score reads none, as upstream's), and whether the domains counted are only the nodes
    matching the pod's nodeSelector and required node affinity (`honor_affinity`,
    nodeAffinityPolicy, Honor when unset) and only those whose NoSchedule/NoExecute taints the
    pod tolerates (`honor_taints`, nodeTaintsPolicy, Ignore when unset)."""

    max_skew: int
    topology_key: str
    selector: LabelSelector | None
    min_domains: int = 1
    honor_affinity: bool = True
    honor_taints: bool = False

    def counts(self, namespace: str, labels: Mapping[str, str], pod_namespace: str) -> bool:
        """upstream's countPodsMatchSelector for one pod (its terminating pods aside): a pod of
        the spread pod's namespace its selector matches; an empty selector counts none."""
        return namespace == pod_namespace and self.selector is not None and not self.selector.empty \
            and self.selector.matches(labels)

    def matches(self, labels: Mapping[str, str]) -> bool:
        """The selector matches the labels (the spread pod's own: upstream's selfMatchNum)."""
        return self.selector is not None and self.selector.matches(labels)


def _int(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def spread_constraints(spec: object, labels: Mapping[str, str],
                       action: str = "DoNotSchedule") -> tuple[SpreadConstraint, ...]:
    """The pod's spread constraints whose `whenUnsatisfiable` is `action`: DoNotSchedule (the
    filter's) or ScheduleAnyway (the score's) (upstream's filterTopologySpreadConstraints
    with MatchLabelKeysInPodTopologySpread on, its default): the value of each `matchLabelKeys`
    key the pod's labels have is added to the selector. Since v1.34 the apiserver already merged
    them into `labelSelector` when it created the pod (MatchLabelKeysInPodTopologySpreadSelectorMerge),
    and the scheduler merges again: the same requirement twice, which changes nothing."""
    if not isinstance(spec, Mapping) or not isinstance(spec.get("topologySpreadConstraints"), list):
        return ()
    out: list[SpreadConstraint] = []
    for c in spec["topologySpreadConstraints"]:
        if not isinstance(c, Mapping) or c.get("whenUnsatisfiable") != action:
            continue
        selector = label_selector(c.get("labelSelector"))
        keys = c.get("matchLabelKeys")
        merged = {(k, labels[k]) for k in keys if isinstance(k, str) and k in labels} if isinstance(keys, list) else set()
        if merged and selector is not None:
            selector = LabelSelector(tuple(sorted(merged | set(selector.match_labels))), selector.expressions,
                                     selector.valid)
        key = c.get("topologyKey")
        out.append(SpreadConstraint(_int(c.get("maxSkew"), 1), key if isinstance(key, str) else "", selector,
                                    _int(c.get("minDomains"), 1), c.get("nodeAffinityPolicy") != "Ignore",
                                    c.get("nodeTaintsPolicy") == "Honor"))
    return tuple(out)
