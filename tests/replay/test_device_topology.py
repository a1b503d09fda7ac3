"""Device topology inside a node: a multi-GPU container gets GPUs from one NVLink group (else one
NUMA node) when the node's devices describe them, and nodes where it fits inside one score higher."""

from __future__ import annotations

from typing import Any

import orjson

from scheduler.core import annotations as ann
from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, config

GPU = "class.tessera.dev/gpu"


def _node(run: Run, name: str, groups: list[dict[str, str]]) -> None:
    run.add(b.node(name, gpus=len(groups)))
    run.add(*[b.device(name, i, attributes=attributes) for i, attributes in enumerate(groups)])


def _groups_of(run: Run, pod: str, attribute: str) -> list[str]:
    attempt = run.last(pod)
    assert attempt.node is not None, attempt.message
    grants = orjson.loads(attempt.annotations[ann.DEVICES])["containers"]["main"][GPU]
    return [run.state.devices[grant["device"]].attributes[attribute] for grant in grants]


def _run() -> Run:
    run = Run(config(BINPACK))
    run.add(b.resource_class("gpu", match_labels={"model": "V100"}))
    return run


def test_a_multi_gpu_container_takes_one_nvlink_group_the_tightest_that_holds_it() -> None:
    run = _run()
    # 2 GPUs in NVLink group "x", 4 in "y" (device names are not in group order)
    _node(run, "n", [{"nvlinkGroup": "x"}] * 2 + [{"nvlinkGroup": "y"}] * 4)
    run.add(b.pod("one", limits={GPU: 1}))
    assert _groups_of(run, "one", "nvlinkGroup") == ["x"]  # fills the smaller group, y stays whole
    run.add(b.pod("two", limits={GPU: 2}))
    assert _groups_of(run, "two", "nvlinkGroup") == ["y", "y"]  # x has 1 left: it cannot hold 2
    run.add(b.pod("three", limits={GPU: 3}))  # x 1 + y 2 free: no group holds 3, the pod still fits
    assert sorted(_groups_of(run, "three", "nvlinkGroup")) == ["x", "y", "y"]


def test_numa_nodes_when_no_nvlink_groups_are_described() -> None:
    run = _run()
    _node(run, "n", [{"numaNode": "0"}] * 3 + [{"numaNode": "1"}] * 3)
    run.add(b.pod("one", limits={GPU: 1}))  # leaves NUMA 0 with 2 free, NUMA 1 with 3
    run.add(b.pod("pair", limits={GPU: 2}))
    assert _groups_of(run, "pair", "numaNode") == ["0", "0"]  # the tightest that holds it
    run.add(b.pod("trio", limits={GPU: 3}))
    assert _groups_of(run, "trio", "numaNode") == ["1", "1", "1"]


def test_the_node_where_the_request_fits_inside_one_group_wins() -> None:
    run = _run()
    # equally full nodes: on "split" 2 free GPUs sit in different NVLink groups, on "whole" in one
    split: list[dict[str, Any]] = [{"nvlinkGroup": "a"}, {"nvlinkGroup": "a"}, {"nvlinkGroup": "b"}, {"nvlinkGroup": "b"}]
    whole: list[dict[str, Any]] = [{"nvlinkGroup": "a"}, {"nvlinkGroup": "a"}, {"nvlinkGroup": "b"}, {"nvlinkGroup": "b"}]
    _node(run, "split", split)
    _node(run, "whole", whole)
    for node, devices in (("split", (0, 2)), ("whole", (0, 1))):
        names = [d.name for d in run.state.devices.values() if d.node_name == node]
        names.sort(key=lambda name: run.state.devices[name].attributes["index"])
        grants = tuple(ann.DeviceGrant(run.state.devices[names[i]].device_id, names[i], None) for i in devices)
        value = ann.encode_devices({"main": {GPU: grants}})
        run.add(b.pod(f"load-{node}", node_name=node, phase="Running", limits={GPU: 2},
                      annotations={ann.DEVICES: value}))
    run.add(b.pod("pair", limits={GPU: 2}))
    assert run.node_of("pair") == "whole"
    assert len(set(_groups_of(run, "pair", "nvlinkGroup"))) == 1


def test_a_single_gpu_takes_a_gpu_without_nvlink_peers_before_breaking_a_group() -> None:
    run = _run()
    _node(run, "n", [{"nvlinkGroup": "x"}] * 4 + [{}])
    run.add(b.pod("one", limits={GPU: 1}))
    attempt = run.last("one")
    grant = orjson.loads(attempt.annotations[ann.DEVICES])["containers"]["main"][GPU][0]
    assert "nvlinkGroup" not in run.state.devices[grant["device"]].attributes
    run.add(b.pod("four", limits={GPU: 4}))
    assert _groups_of(run, "four", "nvlinkGroup") == ["x"] * 4
