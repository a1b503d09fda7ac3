"""NodeResourcesFitArgs `ignoredResources` and `ignoredResourceGroups`, as kube-scheduler v1.36:
the Fit filter does not check the extended resources named (or whose name's prefix before "/" is
a group named); native resources are checked whatever the lists say. A user's trial: Tessera
refused both as "unknown field" (each test failed before the fields were read). The GPU
resources Tessera hands out as devices cannot be ignored (the device grants count on the check)
and are refused saying so."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.api.config import ConfigError, SchedulerConfig, parse_config
from scheduler.sim import builders as b
from tests.helpers import Run

V1 = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
ARGS = "profiles[0].pluginConfig[0].args"


def _config(**args: Any) -> SchedulerConfig:
    return parse_config({**V1, "profiles": [{"pluginConfig": [{"name": "NodeResourcesFit", "args": args}]}]},
                        "cfg.yaml")


def _placed(config: SchedulerConfig, requests: dict[str, Any], nodes: int = 1) -> str:
    """Where a pod asking for `requests` goes among `nodes` nodes that have none of the extended
    resources, or the first part of its unschedulable message (one node: the per-node filter;
    several: the batch form over the node table)."""
    run = Run(config)
    run.add(*(b.node(f"n{i}", cpu="8", extra={"example.com/nic": "1"}) for i in range(nodes)))
    run.add(b.pod("p", scheduler=config.profiles[0].scheduler_name, requests=requests))
    return run.node_of("p") or run.last("p").message.split(" preemption: ")[0]


@pytest.mark.parametrize("nodes", [1, 3])
def test_an_ignored_extended_resource_is_not_checked(nodes: int) -> None:
    wants = {"cpu": "1", "example.com/fpga": "2"}
    assert _placed(_config(), wants, nodes) == (
        f"0/{nodes} nodes are available: {nodes} Insufficient example.com/fpga.")
    assert _placed(_config(ignoredResources=["example.com/fpga"]), wants, nodes).startswith("n")


@pytest.mark.parametrize("nodes", [1, 3])
def test_a_group_ignores_every_resource_of_its_prefix_and_no_other(nodes: int) -> None:
    config = _config(ignoredResourceGroups=["example.com"])
    assert _placed(config, {"example.com/fpga": "2", "example.com/nic": "5"}, nodes).startswith("n")
    assert _placed(config, {"example.com/fpga": "2", "other.io/fpga": "1"}, nodes) == (
        f"0/{nodes} nodes are available: {nodes} Insufficient other.io/fpga.")


def test_native_resources_are_checked_whatever_the_lists_say() -> None:
    assert _placed(_config(ignoredResources=["cpu"], ignoredResourceGroups=["cpu"]), {"cpu": "100"}) == (
        "0/1 nodes are available: 1 Insufficient cpu.")


def test_validation_is_upstreams_in_its_words() -> None:
    """ValidateNodeResourcesFitArgs' messages, each of them (kube-scheduler v1.36.3 for this file;
    it names them below the args, where Tessera names the whole path)."""
    with pytest.raises(ConfigError) as info:
        _config(ignoredResources=["example.com/foo", "a/b/c", ""], ignoredResourceGroups=["example.com", "x/y", "bad!"])
    name_part = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                 "alphanumeric character (e.g. 'MyName', or 'my.name', or '123-abc', regex used for validation is "
                 "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
    assert str(info.value) == "cfg.yaml: [" + ", ".join([
        f'{ARGS}.ignoredResources[1]: Invalid value: "a/b/c": a valid label key {name_part} with an optional DNS '
        "subdomain prefix and '/' (e.g. 'example.com/MyName')",
        f'{ARGS}.ignoredResources[2]: Invalid value: "": name part must be non-empty',
        f'{ARGS}.ignoredResources[2]: Invalid value: "": name part {name_part}',
        f"{ARGS}.ignoredResourceGroups[1]: Invalid value: \"x/y\": resource group name can't contain '/'",
        f'{ARGS}.ignoredResourceGroups[2]: Invalid value: "bad!": name part {name_part}',
    ]) + "]"


def test_the_gpus_tessera_hands_out_cannot_be_ignored() -> None:
    for args, field, value in (({"ignoredResources": ["nvidia.com/gpu"]}, "ignoredResources[0]", "nvidia.com/gpu"),
                               ({"ignoredResourceGroups": ["amd.com"]}, "ignoredResourceGroups[0]", "amd.com")):
        with pytest.raises(ConfigError) as info:
            _config(**args)
        assert info.value.field == f"{ARGS}.{field}"
        assert info.value.message.startswith(f'Invalid value: "{value}": Tessera hands out ')


def test_configz_and_equality_keep_the_lists() -> None:
    from scheduler.api.config_effective import configz

    config = _config(ignoredResources=["example.com/fpga"])
    assert config != _config()
    [profile] = configz(config)["componentconfig"]["configuration"]["profiles"]
    assert profile["pluginArgs"]["NodeResourcesFit"]["ignoredResources"] == ["example.com/fpga"]
    assert profile["pluginArgs"]["NodeResourcesFit"]["ignoredResourceGroups"] == []
