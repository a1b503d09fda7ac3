"""NodeAffinityArgs.addedAffinity: node affinity every pod of a profile gets, as kube-scheduler
v1.36 applies it (pkg/scheduler/framework/plugins/nodeaffinity): its required terms filter with
their own reason, "node(s) didn't match scheduler-enforced node affinity", before the pod's own;
its preferred terms add to the score; PreFilter's node-name shortcut reads the pod's terms only.
The usual way to keep a GPU profile on GPU nodes. A user's trial: Tessera refused the args as an
unsupported pluginConfig name (each test failed before the args were read)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.api.config import ConfigError, SchedulerConfig, parse_config
from scheduler.api.config_effective import configz
from scheduler.sim import builders as b
from tests.helpers import Run

V1 = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
GPU_NODES = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "accelerator", "operator": "Exists"}]}]}


def _config(added: dict[str, Any]) -> SchedulerConfig:
    return parse_config({**V1, "profiles": [{"schedulerName": "gpu", "pluginConfig": [
        {"name": "NodeAffinity", "args": {"addedAffinity": added}}]}]}, "cfg.yaml")


def _pod(name: str, **kw: Any) -> dict[str, Any]:
    return b.pod(name, scheduler="gpu", requests={"cpu": "1"}, **kw)


def _nodes() -> list[dict[str, Any]]:
    return [b.node("cpu-1", cpu="64"), b.node("gpu-1", cpu="8", labels={"accelerator": "h100"}),
            b.node("gpu-2", cpu="8", labels={"accelerator": "a100", "zone": "b"})]


def test_the_required_terms_keep_every_pod_of_the_profile_on_matching_nodes() -> None:
    run = Run(_config({"requiredDuringSchedulingIgnoredDuringExecution": GPU_NODES}))
    run.add(*_nodes())
    run.add(*(_pod(f"p{i}") for i in range(4)))
    assert {run.node_of(f"p{i}") for i in range(4)} <= {"gpu-1", "gpu-2"}


def test_a_node_outside_them_reads_upstreams_reason_before_the_pods_own() -> None:
    run = Run(_config({"requiredDuringSchedulingIgnoredDuringExecution": GPU_NODES}))
    run.add(b.node("cpu-1"), b.node("cpu-2", labels={"zone": "b"}), b.node("gpu-1", labels={"accelerator": "x"}))
    run.add(_pod("p", spec_extra={"nodeSelector": {"zone": "b"}}))
    assert run.last("p").message.split(" preemption: ")[0] == (
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "2 node(s) didn't match scheduler-enforced node affinity.")


def test_the_node_name_shortcut_reads_only_the_pods_terms() -> None:
    """A pod naming a node the added terms exclude: PreFilter narrows to it (the others read
    "didn't satisfy plugin(s)"), and the Filter refuses it with the enforced reason."""
    run = Run(_config({"requiredDuringSchedulingIgnoredDuringExecution": GPU_NODES}))
    run.add(*_nodes())
    named = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["cpu-1"]}]}]}}}}
    run.add(_pod("p", spec_extra=named))
    assert run.last("p").message.split(" preemption: ")[0] == (
        "0/3 nodes are available: 1 node(s) didn't match scheduler-enforced node affinity, "
        "2 node(s) didn't satisfy plugin(s) [NodeAffinity].")


def test_the_preferred_terms_add_to_the_score() -> None:
    prefer_b = [{"weight": 50, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}}]
    run = Run(_config({"requiredDuringSchedulingIgnoredDuringExecution": GPU_NODES,
                       "preferredDuringSchedulingIgnoredDuringExecution": prefer_b}))
    run.add(*_nodes())
    run.add(_pod("p"))
    assert run.node_of("p") == "gpu-2"


def test_other_profiles_are_not_touched() -> None:
    config = parse_config({**V1, "profiles": [
        {"schedulerName": "gpu", "pluginConfig": [{"name": "NodeAffinity", "args": {"addedAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": GPU_NODES}}}]},
        {"schedulerName": "any"}]}, "cfg.yaml")
    run = Run(config)
    run.add(b.node("cpu-1"))
    run.add(b.pod("p", scheduler="any", requests={"cpu": "1"}))
    assert run.node_of("p") == "cpu-1"


def test_configz_shows_the_added_affinity() -> None:
    config = _config({"requiredDuringSchedulingIgnoredDuringExecution": GPU_NODES})
    [profile] = configz(config)["componentconfig"]["configuration"]["profiles"]
    assert profile["pluginArgs"]["NodeAffinity"] == {"addedAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "accelerator", "operator": "Exists", "values": []}], "matchFields": []}]},
        "preferredDuringSchedulingIgnoredDuringExecution": []}}


ARGS = "profiles[0].pluginConfig[0].args.addedAffinity."
REQUIRED = ARGS + "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]."
NAME_PART = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
             "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
             "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")


def test_validation_reports_every_term_error_in_upstreams_words() -> None:
    """ValidateNodeAffinityArgs: component-helpers' NewNodeSelector and NewPreferredSchedulingTerms
    with the args' path; the text is kube-scheduler v1.36.3's for this file (the preferred terms'
    path skips `.preference`, as upstream's does)."""
    with pytest.raises(ConfigError) as info:
        _config({
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
                "matchExpressions": [{"key": "a/b/c", "operator": "In", "values": []},
                                     {"key": "gpu", "operator": "Foo", "values": ["x"]},
                                     {"key": "gpu", "operator": "Gt", "values": ["x", "y"]},
                                     {"key": "gpu", "operator": "Exists", "values": ["bad value!"]}],
                "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]},
                                {"key": "metadata.name", "operator": "Exists"}]}]},
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 5, "preference": {"matchExpressions": [{"key": "", "operator": "In", "values": ["x"]}]}},
                # weight 0 and empty terms are skipped unparsed, as upstream's
                {"weight": 0, "preference": {"matchExpressions": [{"key": "", "operator": "In"}]}},
                {"weight": 3, "preference": {}}]})
    upstream = "cfg.yaml: [" + ", ".join([
        f'{REQUIRED}matchExpressions[0].key: Invalid value: "a/b/c": a valid label key {NAME_PART} with an optional '
        "DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
        f"{REQUIRED}matchExpressions[0].values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty",
        f'{REQUIRED}matchExpressions[1].operator: Unsupported value: "Foo": supported values: "In", "NotIn", "Exists", '
        '"DoesNotExist", "Gt", "Lt"',
        f"{REQUIRED}matchExpressions[2].values: Invalid value: [\"x\",\"y\"]: for 'Gt', 'Lt' operators, exactly one "
        "value is required",
        f"{REQUIRED}matchExpressions[2].values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, the value must be "
        "an integer",
        f"{REQUIRED}matchExpressions[2].values[1]: Invalid value: \"y\": for 'Gt', 'Lt' operators, the value must be "
        "an integer",
        f"{REQUIRED}matchExpressions[3].values: Invalid value: [\"bad value!\"]: values set must be empty for exists "
        "and does not exist",
        f"{REQUIRED}matchExpressions[3].values[0][gpu]: Invalid value: \"bad value!\": a valid label must be an empty "
        "string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
        "character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
        "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        f'{REQUIRED}matchFields[0].values: Invalid value: ["a","b"]: must have one element',
        f'{REQUIRED}matchFields[1].operator: Unsupported value: "Exists": supported values: "In", "NotIn"',
        f'{ARGS}preferredDuringSchedulingIgnoredDuringExecution[0].matchExpressions[0].key: Invalid value: "": '
        f"name part must be non-empty; name part {NAME_PART}",
    ]) + "]"
    assert str(info.value) == " ".join(upstream.split())  # a ConfigError is one line, its spaces single


@pytest.mark.parametrize(("requirement", "field", "words"), [
    ({"key": "gpu", "operator": "NotIn", "values": []}, "matchExpressions[0].values",
     "Invalid value: []: for 'in', 'notin' operators, values set can't be empty"),
    ({"key": "gpu", "operator": "Lt", "values": []}, "matchExpressions[0].values",
     "Invalid value: []: for 'Gt', 'Lt' operators, exactly one value is required"),
    ({"key": "metadata.name", "operator": "In", "values": []}, "matchFields[0].values",
     "Invalid value: []: must have one element"),
])
def test_an_empty_values_list_is_refused_where_upstream_refuses_it(requirement: dict[str, Any], field: str,
                                                                  words: str) -> None:
    """NotIn as In, Lt with no value as with two, a field selector with no value as with two."""
    kind = "matchFields" if field.startswith("matchFields") else "matchExpressions"
    with pytest.raises(ConfigError) as info:
        _config({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{kind: [requirement]}]}})
    assert f"{REQUIRED}{field}: {words}" in str(info.value), str(info.value)
