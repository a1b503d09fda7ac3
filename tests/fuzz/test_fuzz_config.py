"""Fuzzing of configuration files: `parse_config`, `load_config` and `tessera simulate --config`.

Documents are random nestings of the real keys (v1 and the seed's v1alpha1) holding valid values,
wrong types, huge numbers, dates, unknown keys; files are their YAML text, sometimes damaged
(duplicate keys, truncation, stray characters, bytes that are not UTF-8). The contract: a
`SchedulerConfig`, or `ConfigError` whose message is one line and names a field (every error
about a mapping names the field it is about) — never another exception, never a traceback.
"""

from __future__ import annotations

import datetime
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from scheduler.api.config import ConfigError, SchedulerConfig, load_config, parse_config
from scheduler.sim import builders as b
from tests.fuzz import strategies as S
from tests.fuzz.harness import REPO
from tests.fuzz.tally import tried

V1 = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
PLUGINS = ("NodeResourcesFit", "TaintToleration", "NodeAffinity", "TesseraDevices", "TesseraFragmentation",
           "Coscheduling", "NodeUnschedulable", "NodeName", "RequestedToCapacityRatio", "NodeResourcesMostAllocated",
           "Bogus", "", "*")

# C1: an integer too large for a float where a number is expected; C2: a mapping with date keys
# where an error message prints the value.
_BIG = 10**400 if S.generate_known("C1") else 10**300
_huge = st.sampled_from((_BIG, -_BIG, 2**63, 2**31, -(2**31) - 1, 10**19))
_keys = st.integers() | st.booleans() | st.none() | (st.dates() | st.datetimes() if S.generate_known("C2") else st.nothing())
garbage = st.one_of(
    st.sampled_from(tuple(g for g in S.GARBAGE if not (isinstance(g, str) and len(g) > 100))),
    _huge, st.dates(), st.datetimes(), st.binary(max_size=4),
    st.dictionaries(_keys, st.integers(), min_size=1, max_size=2),
    st.lists(st.dates(), min_size=1, max_size=2),
)


@st.composite
def _valid_or(draw: st.DrawFn, valid: st.SearchStrategy[Any]) -> Any:
    return draw(garbage) if draw(st.integers(0, 15)) == 15 else draw(valid)


def valid_or(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Usually valid (so that validation gets deep), sometimes garbage."""
    return _valid_or(valid)


def mapping(required: dict[str, Any], optional: dict[str, Any]) -> st.SearchStrategy[dict[Any, Any]]:
    """A mapping of those keys (each value maybe wrong), sometimes with an unknown key."""
    plain = st.fixed_dictionaries({k: valid_or(v) for k, v in required.items()},
                                  optional={k: valid_or(v) for k, v in optional.items()})
    extra = st.fixed_dictionaries({k: valid_or(v) for k, v in required.items()},
                                  optional={**{k: valid_or(v) for k, v in optional.items()},
                                            "unknownField": garbage, "Bogus Key": st.text(max_size=3)})
    return st.integers(0, 9).flatmap(lambda n: extra if n == 9 else plain)


ints = st.integers(-5, 150) | _huge
durations = st.sampled_from(("15s", "1m30s", "0", "-1s", "1e400s", "abc", "10h", "9999999999999999999h", "1.5h", "15",
                             "2s", "100ms", "", "1µs", "3m"))
plugin_entry = mapping({"name": st.sampled_from(PLUGINS)}, {"weight": ints})
plugin_set = mapping({}, {"enabled": st.lists(valid_or(plugin_entry), max_size=3),
                          "disabled": st.lists(valid_or(plugin_entry), max_size=2)})
plugins = mapping({}, {point: plugin_set for point in ("score", "preScore", "filter", "multiPoint", "queueSort", "permit",
                                                        "preEnqueue", "unreserve", "bogusPoint")})
shape = st.lists(valid_or(mapping({}, {"utilization": ints, "score": ints})), max_size=4)
fit_args = mapping({}, {"scoringStrategy": mapping(
    {"type": st.sampled_from(("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio", "leastallocated", ""))},
    {"resources": st.lists(valid_or(mapping({"name": st.sampled_from(("cpu", "memory", "nvidia.com/gpu", ""))},
                                            {"weight": ints})), max_size=3),
     "requestedToCapacityRatio": mapping({}, {"shape": shape})}), "kind": st.sampled_from(("NodeResourcesFitArgs", "X")),
    "ignoredResources": st.lists(st.text(max_size=3), max_size=1)})
plugin_config = st.one_of(
    mapping({"name": st.just("NodeResourcesFit")}, {"args": fit_args}),
    mapping({"name": st.just("Coscheduling")}, {"args": mapping({}, {"permitWaitingTimeSeconds": ints,
                                                                     "podGroupBackoffSeconds": ints,
                                                                     "podGroupRejectPercentage": ints})}),
    mapping({"name": st.just("TesseraDevices")}, {"args": mapping({}, {"allocationGate": st.booleans(),
                                                                       "defaultClassController": st.booleans()})}),
    mapping({"name": st.just("RequestedToCapacityRatio")}, {"args": mapping({}, {
        "functionShape": shape, "FunctionShape": shape,
        "resourceToWeightMap": st.dictionaries(st.sampled_from(("cpu", "memory", "")) | st.integers(), ints, max_size=3)})}),
    mapping({"name": st.sampled_from(PLUGINS)}, {"args": garbage}),
)
leader = mapping({}, {"leaderElect": st.booleans(), "leaseDuration": durations, "renewDeadline": durations,
                      "retryPeriod": durations, "resourceLock": st.sampled_from(("leases", "endpoints", "")),
                      "resourceName": st.sampled_from(("tessera", "Bad_Name", "")), "resourceNamespace":
                      st.sampled_from(("kube-system", "UPPER", "")), "lockObjectName": st.just("x")})
client = mapping({}, {"qps": st.floats(-10, 1e6) | st.integers(-10, 1000) | _huge | st.sampled_from((math.inf, math.nan)),
                      "burst": ints, "kubeconfig": st.text(max_size=5), "contentType": st.just("application/json")})
profile = mapping({}, {"schedulerName": st.sampled_from(("tessera", "other", "")), "percentageOfNodesToScore": ints,
                       "plugins": plugins, "pluginConfig": st.lists(valid_or(plugin_config), max_size=3),
                       "percentageOfPlacementsToScore": ints})
common = {"percentageOfNodesToScore": ints, "podInitialBackoffSeconds": ints, "podMaxBackoffSeconds": ints,
          "leaderElection": leader, "clientConnection": client, "healthzBindAddress": st.just("0.0.0.0:10251")}
v1_documents = mapping({"apiVersion": st.sampled_from((V1,) * 8 + ("kubescheduler.config.k8s.io/v1beta3",
                                                                 "kubescheduler.config.k8s.io/v1beta2", "v1", "")),
                        "kind": st.sampled_from((KIND,) * 12 + ("Other",))},
                       {**common, "profiles": st.lists(valid_or(profile), max_size=3), "parallelism": ints,
                        "extenders": st.lists(st.just({"urlPrefix": "http://x"}), max_size=1)})
legacy_documents = mapping({"apiVersion": st.just("kubescheduler.config.k8s.io/v1alpha1"), "kind": st.just(KIND)},
                           {**common, "schedulerName": st.sampled_from(("tessera", "")), "plugins": plugins,
                            "pluginConfig": st.lists(valid_or(plugin_config), max_size=2),
                            "algorithmSource": mapping({}, {"policy": st.just({"file": {"path": "x"}}),
                                                            "provider": st.just("DefaultProvider")})})
documents = st.integers(0, 9).flatmap(
    lambda n: v1_documents if n < 6 else legacy_documents if n < 8 else garbage if n == 8 else st.none())

# Top-level fields of both dialects: an error may name one the file left out (a default it clashes with).
_FIELD_HEADS = {"apiVersion", "kind", "percentageOfNodesToScore", "podInitialBackoffSeconds", "podMaxBackoffSeconds",
                "leaderElection", "clientConnection", "profiles", "parallelism", "extenders", "schedulerName",
                "plugins", "pluginConfig", "algorithmSource"}


def _check_error(err: ConfigError, doc: Any, source: str) -> None:
    text = str(err)
    assert "\n" not in text and text.startswith(source), text
    assert err.message.strip(), text
    if isinstance(doc, dict) and doc:
        # one field, or several fields' problems aggregated ("[a, b]", `field` empty)
        assert err.fields and err.fields == ((err.field,) if err.field else err.fields), \
            f"error about a mapping names no field: {text}"
        heads = {str(k) for k in doc} | _FIELD_HEADS  # keys may contain "." themselves (a datetime key)
        for field in err.fields:
            assert field and any(field == h or field.startswith((h + ".", h + "[")) for h in heads), \
                f"field {field!r} is not in the document: {text}"


@S.fuzz_settings(300)
@S.known_example("C1", doc={"apiVersion": V1, "kind": KIND, "clientConnection": {"qps": 10**400}})
@S.known_example("C2", doc={"apiVersion": V1, "kind": KIND, "percentageOfNodesToScore": {datetime.date(2020, 1, 1): 1}})
@given(doc=documents)
def test_parse_config_only_raises_config_error_naming_a_field(doc: Any) -> None:
    tried()
    try:
        config = parse_config(doc, "fuzz.yaml")
    except ConfigError as err:
        _check_error(err, doc, "fuzz.yaml")
    else:
        assert isinstance(config, SchedulerConfig)


@st.composite
def yaml_texts(draw: st.DrawFn) -> str:
    """The YAML text of a random document, sometimes damaged."""
    doc = draw(documents)
    text = yaml.safe_dump(doc, allow_unicode=True, sort_keys=False)
    lines = text.splitlines()
    damage = draw(st.sampled_from(("none", "none", "duplicate", "truncate", "insert", "tabs", "anchors")))
    if damage == "duplicate" and lines:
        i = draw(st.integers(0, len(lines) - 1))
        lines.insert(draw(st.integers(i, len(lines))), lines[i])
    elif damage == "truncate":
        return text[: draw(st.integers(0, len(text)))]
    elif damage == "insert":
        pos = draw(st.integers(0, len(text)))
        return text[:pos] + draw(st.sampled_from((":", "- ", "{", "'", "&a ", "*a", "!!python/object:os.system ", "\t",
                                                  "? ", "%YAML 1.1\n---\n", "\x00"))) + text[pos:]
    elif damage == "tabs":
        return text.replace("  ", "\t")
    elif damage == "anchors":
        return "base: &b {percentageOfNodesToScore: 50}\n" + text + "\n<<: *b\n"
    return "\n".join(lines) + "\n"


def _load_text(data: bytes) -> None:
    with tempfile.NamedTemporaryFile("wb", suffix=".yaml", delete=False) as handle:
        handle.write(data)
    try:
        config = load_config(handle.name)
    except ConfigError as err:
        text = str(err)
        assert "\n" not in text and text.startswith(handle.name), text
    else:
        assert isinstance(config, SchedulerConfig)
    finally:
        os.unlink(handle.name)


@S.fuzz_settings(200)
@example(text=f"apiVersion: {V1}\nkind: {KIND}\nkind: {KIND}\n")
@S.known_example("C1", text=f"apiVersion: {V1}\nkind: {KIND}\nclientConnection:\n  qps: 1{'0' * 400}\n")
@S.known_example("C2", text=f"apiVersion: {V1}\nkind: {KIND}\npercentageOfNodesToScore: {{2020-01-01: 1}}\n")
@given(text=yaml_texts())
def test_load_config_random_yaml(text: str) -> None:
    tried()
    _load_text(text.encode("utf-8", "surrogatepass"))


@S.fuzz_settings(100)
@given(data=st.binary(max_size=60))
def test_load_config_random_bytes(data: bytes) -> None:
    tried()
    _load_text(data)


_BAD_CONFIGS: dict[str, str | bytes] = {
    "percentage": f"apiVersion: {V1}\nkind: {KIND}\npercentageOfNodesToScore: 120\n",
    "duplicate-key": f"apiVersion: {V1}\nkind: {KIND}\nkind: {KIND}\n",
    "syntax": f"apiVersion: {V1}\nkind: [{KIND}\n",
    "not-utf8": b"apiVersion: \xff\xfe\n",
    "unknown-field": f"apiVersion: {V1}\nkind: {KIND}\nprofiles:\n- schedulerName: tessera\n  plugns: {{}}\n",
    "huge-qps": f"apiVersion: {V1}\nkind: {KIND}\nclientConnection:\n  qps: 1{'0' * 400}\n",  # C1
    "date-key": f"apiVersion: {V1}\nkind: {KIND}\npercentageOfNodesToScore: {{2020-01-01: 1}}\n",  # C2
    "python-tag": "!!python/object/apply:os.system ['true']\n",
}
if not S.generate_known("C1"):
    del _BAD_CONFIGS["huge-qps"]
if not S.generate_known("C2"):
    del _BAD_CONFIGS["date-key"]


@pytest.mark.parametrize("name", sorted(_BAD_CONFIGS))
def test_simulate_with_a_bad_config_exits_with_one_line(name: str, tmp_path: Path) -> None:
    tried()
    config = tmp_path / "bad.yaml"
    content = _BAD_CONFIGS[name]
    config.write_bytes(content if isinstance(content, bytes) else content.encode())
    events = tmp_path / "events.jsonl"
    events.write_text('{"type": "ADDED", "object": %s}\n' % __import__("json").dumps(b.node("n")))
    out = subprocess.run([sys.executable, "-m", "scheduler", "simulate", str(events), "--config", str(config)],
                         capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.returncode != 0
    assert "Traceback" not in out.stderr, out.stderr[-2000:]
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert str(config) in out.stderr and out.stdout == ""


def test_C1_a_number_too_large_for_a_float_is_a_config_error() -> None:
    """C1: `_Obj.get_float` calls math.isfinite() on a YAML integer; 10**400 raises OverflowError."""
    tried()
    with pytest.raises(ConfigError, match="clientConnection.qps"):
        parse_config({"apiVersion": V1, "kind": KIND, "clientConnection": {"qps": 10**400}}, "c1.yaml")


def test_C2_a_mapping_with_date_keys_is_a_config_error() -> None:
    """C2: the message formatter json.dumps()-es the wrong value with default=str, which does not
    apply to mapping keys; `{2020-01-01: 1}` where an integer belongs raises TypeError."""
    tried()
    with pytest.raises(ConfigError, match="percentageOfNodesToScore"):
        parse_config({"apiVersion": V1, "kind": KIND, "percentageOfNodesToScore": {datetime.date(2020, 1, 1): 1}},
                     "c2.yaml")
