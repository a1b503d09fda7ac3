"""The Grafana dashboard (deploy/grafana/tessera-dashboard.json) and what its PromQL asks of /metrics.

Why a PromQL reader here: a dashboard panel whose metric or label does not exist shows "No data"
rather than an error, so a renamed metric would go unnoticed. `problems` lists every metric,
label and label value the dashboard's queries name that a set of scraped samples does not have;
the unit test checks it against the Metrics registry, the end-to-end test against a running
scheduler's /metrics.

The reader tokenises PromQL fully (strings, numbers, durations, Grafana variables, operators)
and classifies every identifier: a function or aggregation (only those PromQL defines; an
unknown one is an error, not a metric), a keyword, a grouping label (`by`, `without`, `on`,
`ignoring`, `group_left`, `group_right`), or else a metric name. So a metric cannot hide behind
an unusual construct: anything the reader does not understand fails the test. Histogram series
are named with their suffix (`_bucket`, `_sum`, `_count`) in PromQL and in the exposition alike,
so they are compared as sample names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DASHBOARD = REPO / "deploy" / "grafana" / "tessera-dashboard.json"

# Labels Prometheus attaches at scrape time; no exporter serves them. `namespace` is the one
# Prometheus Operator gives a ServiceMonitor's targets (the Service's namespace).
TARGET_LABELS = frozenset({"job", "instance", "namespace"})
# Series Prometheus writes for every target itself (`up`: 1 when the scrape succeeded).
SCRAPE_SERIES = frozenset({"up"})

AGGREGATIONS = frozenset({"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
                          "bottomk", "topk", "quantile", "limitk", "limit_ratio"})
FUNCTIONS = frozenset({
    "abs", "absent", "absent_over_time", "acos", "acosh", "asin", "asinh", "atan", "atanh", "avg_over_time",
    "ceil", "changes", "clamp", "clamp_max", "clamp_min", "cos", "cosh", "count_over_time", "day_of_month",
    "day_of_week", "day_of_year", "days_in_month", "deg", "delta", "deriv", "exp", "floor", "histogram_avg",
    "histogram_count", "histogram_fraction", "histogram_quantile", "histogram_stddev", "histogram_stdvar",
    "histogram_sum", "hour", "idelta", "increase", "irate", "label_join", "label_replace", "last_over_time",
    "ln", "log10", "log2", "mad_over_time", "max_over_time", "min_over_time", "minute", "month", "pi",
    "predict_linear", "present_over_time", "quantile_over_time", "rad", "rate", "resets", "round", "scalar",
    "sgn", "sin", "sinh", "sort", "sort_by_label", "sort_by_label_desc", "sort_desc", "sqrt",
    "stddev_over_time", "stdvar_over_time", "sum_over_time", "tan", "tanh", "time", "timestamp", "vector",
    "year",
})
GROUPING = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "atan2", "start", "end", "inf", "nan"})

_TOKEN = re.compile(r"""
    (?P<space>\s+|\#[^\n]*)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<number>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?(?:(?:ms|[smhdwy])\d*)*|0x[0-9a-fA-F]+)
  | (?P<variable>\$\{[^}]+\}|\$[A-Za-z_]\w*|\[\[[^\]]+\]\])
  | (?P<ident>[A-Za-z_:][\w:]*)
  | (?P<op>==|!=|=~|!~|<=|>=|[-+*/%^<>=@,(){}\[\]])
""", re.VERBOSE)


@dataclass
class Selector:
    """One vector selector: its metric and label matchers as (label, operator, value)."""

    metric: str
    matchers: list[tuple[str, str, str]] = field(default_factory=list)


@dataclass
class Query:
    selectors: list[Selector]
    grouping: set[str]


def tokens(expr: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    position = 0
    while position < len(expr):
        match = _TOKEN.match(expr, position)
        if match is None:
            raise ValueError(f"cannot read PromQL at {expr[position:position + 30]!r} in {expr!r}")
        kind = match.lastgroup
        assert kind is not None
        if kind != "space":
            out.append((kind, match.group()))
        position = match.end()
    return out


def _unquote(text: str) -> str:
    return text[1:-1] if text.startswith("`") else str(json.loads(text)) if text.startswith('"') else text[1:-1]


def parse(expr: str) -> Query:
    """Every selector and grouping label of one PromQL expression."""
    toks = tokens(expr)
    selectors: list[Selector] = []
    grouping: set[str] = set()
    i = 0

    def at(index: int) -> tuple[str, str]:
        return toks[index] if index < len(toks) else ("end", "")

    while i < len(toks):
        kind, text = toks[i]
        if kind == "op" and text == "[":  # a range or subquery: durations and variables only
            while at(i)[1] != "]":
                if at(i)[0] == "end":
                    raise ValueError(f"unclosed [ in {expr!r}")
                i += 1
        elif kind == "op" and text == "{":  # a selector without a metric name before it
            selector = Selector("")
            i = _matchers(toks, i, selector, expr)
            names = [value for label, op, value in selector.matchers if label == "__name__" and op == "="]
            if not names:
                raise ValueError(f"a selector without a metric name in {expr!r}")
            selector.metric = names[0]
            selectors.append(selector)
        elif kind == "ident":
            lower = text.lower()
            if lower in GROUPING:
                if at(i + 1)[1] == "(":
                    i += 2
                    while at(i)[1] != ")":
                        label_kind, label = at(i)
                        if label_kind in ("ident", "string"):
                            grouping.add(_unquote(label) if label_kind == "string" else label)
                        elif label != ",":
                            raise ValueError(f"unexpected {label!r} in a label list of {expr!r}")
                        i += 1
            elif lower in AGGREGATIONS or lower in KEYWORDS:
                pass
            elif at(i + 1)[1] == "(":
                if text not in FUNCTIONS:
                    raise ValueError(f"unknown PromQL function {text!r} in {expr!r}")
            else:
                selector = Selector(text)
                if at(i + 1)[1] == "{":
                    i = _matchers(toks, i + 1, selector, expr)
                selectors.append(selector)
        i += 1
    return Query(selectors, grouping)


def _matchers(toks: list[tuple[str, str]], i: int, selector: Selector, expr: str) -> int:
    """Read `{label op "value", ...}` starting at the `{`; return the index of its `}`."""
    i += 1
    while toks[i][1] != "}":
        if toks[i][1] == ",":
            i += 1
            continue
        (label_kind, label), (_, op), (value_kind, value) = toks[i:i + 3]
        if label_kind not in ("ident", "string") or op not in ("=", "!=", "=~", "!~") or value_kind != "string":
            raise ValueError(f"cannot read the matcher {label}{op}{value} in {expr!r}")
        selector.matchers.append((_unquote(label) if label_kind == "string" else label, op, _unquote(value)))
        i += 3
    return i


# --- the dashboard -------------------------------------------------------------------------------


def load() -> dict[str, Any]:
    return dict(json.loads(DASHBOARD.read_text()))


def panels(dashboard: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, those inside collapsed rows too."""
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def queries(dashboard: Mapping[str, Any]) -> list[str]:
    """Every PromQL expression: the panels' targets and the query variables (`label_values(m, l)`
    is Grafana's, read as the selector `m` grouped by `l`)."""
    found = [target["expr"] for panel in panels(dashboard) for target in panel.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"]
            match = re.fullmatch(r"label_values\((.+),\s*([A-Za-z_]\w*)\)", query.strip())
            if match is None:
                raise ValueError(f"variable {variable['name']}: cannot read {query!r}")
            found.append(f"group by ({match.group(2)}) ({match.group(1)})")
    return found


_VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)|\[\[(\w+)\]\]")


def interpolate(expr: str, values: Mapping[str, str]) -> str:
    """`expr` as Grafana sends it to Prometheus: each variable (`$name`, `${name}`, `[[name]]`)
    replaced by its value in `values`, given already formatted (job's "All" is its allValue
    `.+`; namespace, one value and no "All", is sent as it is). A variable not in `values` is a
    KeyError, so a new one cannot be sent to Prometheus unreplaced."""
    return _VARIABLE.sub(lambda match: values[next(name for name in match.groups() if name)], expr)


Samples = dict[str, list[dict[str, str]]]


def problems(dashboard: Mapping[str, Any], samples: Samples) -> list[str]:
    """What the dashboard queries and `samples` (sample name -> the label sets of its samples) lacks."""
    return problems_in(queries(dashboard), samples)


def problems_in(exprs: Iterable[str], samples: Samples) -> list[str]:
    """What PromQL `exprs` (the dashboard's, the chart's alert rules) ask and `samples` lacks:
    a metric, a label (matchers and grouping), or a value an `=` or `=~` matcher wants."""
    found: list[str] = []
    for expr in exprs:
        query = parse(expr)
        labels_here = set(TARGET_LABELS)
        for selector in query.selectors:
            if selector.metric in SCRAPE_SERIES:
                if any(label not in TARGET_LABELS for label, _, _ in selector.matchers):
                    found.append(f"{selector.metric}: only target labels (job, instance, namespace) label it (in {expr})")
                continue
            series = samples.get(selector.metric)
            if not series:
                found.append(f"{selector.metric}: no such series (in {expr})")
                continue
            names = {name for labels in series for name in labels}
            labels_here |= names
            for label, op, value in selector.matchers:
                if label in TARGET_LABELS:
                    continue
                if label not in names:
                    found.append(f"{selector.metric}: no label {label!r} (in {expr})")
                elif op in ("=", "=~") and "$" not in value:
                    values = {labels.get(label, "") for labels in series}
                    if not any(re.fullmatch(value, v) if op == "=~" else v == value for v in values):
                        found.append(f"{selector.metric}: no {label}{op}{value!r} among {sorted(values)} (in {expr})")
        for label in sorted(query.grouping - labels_here):
            found.append(f"grouping label {label!r} is on none of the series of {expr}")
    return found
