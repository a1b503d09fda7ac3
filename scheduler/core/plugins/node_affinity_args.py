"""NodeAffinityArgs: `addedAffinity`, node affinity every pod of the profile gets.

Why: it is how a kube-scheduler profile is kept on some nodes (a GPU profile on GPU nodes)
without touching every workload's pod spec; a ported configuration that sets it must keep it.

The model holds the affinity as the file writes it (upstream's v1.NodeAffinity shape), so
`/configz` shows it as written; `required_terms`/`preferred_terms` give the plugin the parsed
terms (`objects.SelectorTerm`, the type a pod's own terms have). Validation is upstream's
ValidateNodeAffinityArgs: component-helpers' NewNodeSelector and NewPreferredSchedulingTerms with
the args' path, i.e. labels.NewRequirement's checks for matchExpressions (a label key, values
by operator, Gt/Lt integers, label values) and nodeSelectorRequirementsAsFieldSelector's for
matchFields (In/NotIn with one value). Empty terms, and preferred terms of weight 0, are skipped
unparsed, as upstream's; a preferred term's errors are named under the term's index without
`.preference`, as upstream's path is. The file is not a pod: the apiserver checked none of it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from scheduler.api.config_reader import ArgsReader, Checks, FieldError, go_json, invalid
from scheduler.api.names import label_key_errors
from scheduler.core.objects import PreferredTerm, SelectorTerm, label_value_errors
from scheduler.quoted import quoted
from scheduler.core.selectors import Requirement, go_int64

FIELDS = ("addedAffinity",)
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")  # upstream's validSelectorOperators
_FIELD_OPERATORS = ("In", "NotIn")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SelectorRequirement(_Frozen):
    key: str
    operator: str
    values: tuple[str, ...] = ()


class SelectorTermArgs(_Frozen):
    match_expressions: tuple[SelectorRequirement, ...] = ()
    match_fields: tuple[SelectorRequirement, ...] = ()

    def parsed(self) -> SelectorTerm:
        return SelectorTerm(tuple(Requirement(r.key, r.operator, r.values) for r in self.match_expressions),
                            tuple(Requirement(r.key, r.operator, r.values) for r in self.match_fields))


class NodeSelectorArgs(_Frozen):
    node_selector_terms: tuple[SelectorTermArgs, ...] = ()


class PreferredTermArgs(_Frozen):
    weight: int
    preference: SelectorTermArgs


class AddedAffinity(_Frozen):
    required_during_scheduling_ignored_during_execution: NodeSelectorArgs | None = None
    preferred_during_scheduling_ignored_during_execution: tuple[PreferredTermArgs, ...] = ()


class NodeAffinityArgs(_Frozen):
    added_affinity: AddedAffinity | None = None

    @property
    def required_terms(self) -> tuple[SelectorTerm, ...] | None:
        """The added required terms (ORed; an empty term matches nothing, so a selector of empty
        terms matches no node, as upstream's), or None when the args add none."""
        added = self.added_affinity
        required = added.required_during_scheduling_ignored_during_execution if added else None
        return None if required is None else tuple(term.parsed() for term in required.node_selector_terms)

    @property
    def preferred_terms(self) -> tuple[PreferredTerm, ...]:
        added = self.added_affinity
        return tuple(PreferredTerm(term.weight, term.preference.parsed())
                     for term in (added.preferred_during_scheduling_ignored_during_execution if added else ()))


def parse_args(args: ArgsReader) -> NodeAffinityArgs:
    """NodeAffinityArgs, every error of ValidateNodeAffinityArgs in its order (required, then
    preferred)."""
    added = args.get_obj("addedAffinity")
    if added is None:
        return NodeAffinityArgs()
    added.check_keys((_REQUIRED, _PREFERRED))
    found = Checks()
    required = found.read(lambda: _node_selector(added), None)
    no_terms: tuple[PreferredTermArgs, ...] = ()
    preferred = found.read(lambda: _preferred_terms(added), no_terms)
    found.raise_errors()
    return NodeAffinityArgs(added_affinity=AddedAffinity(
        required_during_scheduling_ignored_during_execution=required,
        preferred_during_scheduling_ignored_during_execution=preferred))


def _node_selector(added: ArgsReader) -> NodeSelectorArgs | None:
    selector = added.get_obj(_REQUIRED)
    if selector is None:
        return None
    selector.check_keys(("nodeSelectorTerms",))
    path = selector.at("nodeSelectorTerms")
    found = Checks()
    terms = [found.read(lambda: _term(ArgsReader(raw, f"{path}[{i}]"), f"{path}[{i}]"), None)
             for i, raw in enumerate(selector.get_list("nodeSelectorTerms"))]
    found.raise_errors()
    return NodeSelectorArgs(node_selector_terms=tuple(term for term in terms if term is not None))


def _preferred_terms(added: ArgsReader) -> tuple[PreferredTermArgs, ...]:
    path = added.at(_PREFERRED)
    found = Checks()
    terms: list[PreferredTermArgs] = []
    for i, raw in enumerate(added.get_list(_PREFERRED)):
        def read(item: ArgsReader = ArgsReader(raw, f"{path}[{i}]"), where: str = f"{path}[{i}]") -> PreferredTermArgs:
            item.check_keys(("weight", "preference"))
            weight = item.get_int("weight", 0, "int32")
            preference = item.get_obj("preference") or ArgsReader({}, item.at("preference"))
            # upstream skips a term of weight 0 unparsed, and names the others' errors without `.preference`
            return PreferredTermArgs(weight=weight, preference=_term(preference, where, check=weight != 0))
        term = found.read(read, None)
        if term is not None:
            terms.append(term)
    found.raise_errors()
    return tuple(terms)


def _term(term: ArgsReader, path: str, *, check: bool = True) -> SelectorTermArgs:
    """A NodeSelectorTerm; `path` is where upstream names its errors. An empty term is skipped
    unparsed, as upstream's."""
    term.check_keys(("matchExpressions", "matchFields"))
    found = Checks()
    none: tuple[SelectorRequirement, ...] = ()
    expressions = found.read(lambda: _requirements(term, "matchExpressions", f"{path}.matchExpressions", check), none)
    fields = found.read(lambda: _requirements(term, "matchFields", f"{path}.matchFields", check), none)
    found.raise_errors()
    return SelectorTermArgs(match_expressions=expressions, match_fields=fields)


def _requirements(term: ArgsReader, key: str, path: str, check: bool) -> tuple[SelectorRequirement, ...]:
    found = Checks()
    out: list[SelectorRequirement] = []
    for i, raw in enumerate(term.get_list(key)):
        item = ArgsReader(raw, f"{term.at(key)}[{i}]")
        item.check_keys(("key", "operator", "values"))
        requirement = SelectorRequirement(key=item.get_str("key", ""), operator=item.get_str("operator", ""),
                                          values=tuple(_values(item)))
        out.append(requirement)
        if check:
            errors = (_field_errors if key == "matchFields" else _label_errors)(requirement, f"{path}[{i}]")
            for field, message in errors:
                found.record(FieldError(field, message))
    found.raise_errors()
    return tuple(out)


def _values(item: ArgsReader) -> list[str]:
    values = item.get_list("values")
    for j, value in enumerate(values):
        if not isinstance(value, str):
            invalid(f"{item.at('values')}[{j}]", value, "must be a string")
    return [str(value) for value in values]


def _label_errors(r: SelectorRequirement, path: str) -> list[tuple[str, str]]:
    """nodeSelectorRequirementsAsSelector: the operator, then labels.NewRequirement's checks."""
    if r.operator not in _OPERATORS:
        return [(f"{path}.operator", f"Unsupported value: {quoted(r.operator)}: supported values: "
                                     + ", ".join(quoted(op) for op in _OPERATORS))]
    errors = [(f"{path}.key", f"Invalid value: {quoted(r.key)}: {'; '.join(messages)}")
              for messages in [label_key_errors(r.key)] if messages]
    values = f"{path}.values"
    if r.operator in ("In", "NotIn") and not r.values:
        errors.append((values, f"Invalid value: {go_json(list(r.values))}: for 'in', 'notin' operators, values set "
                               "can't be empty"))
    if r.operator in ("Exists", "DoesNotExist") and r.values:
        errors.append((values, f"Invalid value: {go_json(list(r.values))}: values set must be empty for exists and "
                               "does not exist"))
    if r.operator in ("Gt", "Lt"):
        if len(r.values) != 1:
            errors.append((values, f"Invalid value: {go_json(list(r.values))}: for 'Gt', 'Lt' operators, exactly one "
                                   "value is required"))
        errors += [(f"{values}[{j}]", f"Invalid value: {quoted(value)}: for 'Gt', 'Lt' operators, the value must be "
                                      "an integer") for j, value in enumerate(r.values) if go_int64(value) is None]
    errors += [(f"{values}[{j}][{r.key}]", f"Invalid value: {quoted(value)}: {'; '.join(messages)}")
               for j, value in enumerate(r.values) for messages in [label_value_errors(value)] if messages]
    return errors


def _field_errors(r: SelectorRequirement, path: str) -> list[tuple[str, str]]:
    """nodeSelectorRequirementsAsFieldSelector: In or NotIn, with one value."""
    if r.operator not in _FIELD_OPERATORS:
        return [(f"{path}.operator", f"Unsupported value: {quoted(r.operator)}: supported values: "
                                     + ", ".join(quoted(op) for op in _FIELD_OPERATORS))]
    if len(r.values) != 1:
        return [(f"{path}.values", f"Invalid value: {go_json(list(r.values))}: must have one element")]
    return []

