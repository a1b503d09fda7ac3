"""NVLink groups and NUMA nodes: set on dev-cluster's fake GPUs, shown by the GPU views.

A new user's trial: dev-cluster's fake GPUs had no `nvlinkGroup`, and neither `kubectl tessera
nodes` (table, -o json) nor the GPU map showed `nvlinkGroup` or `numaNode`, so NVLink placement
could be neither set up nor checked on dev-cluster.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from scheduler.kube.controlplane import cli
from scheduler.kube.controlplane.fakenodes import FakeGpuNodeSpec, _device_objects
from scheduler.sim import builders as b
from scheduler.sim.replay import Replay, WatchEvent
from scheduler.view import model as m
from scheduler.view.cluster import build_view
from scheduler.view.text import render_nodes
from tests.helpers import config


def _groups(spec: FakeGpuNodeSpec) -> list[str | None]:
    return [_device_objects("n", "uid-n", i, spec)[0]["spec"]["attributes"].get("nvlinkGroup")
            for i in range(spec.gpus_per_node)]


def test_fake_gpus_get_nvlink_groups_in_index_order() -> None:
    assert _groups(FakeGpuNodeSpec(8, "V100")) == [None] * 8  # none asked: none, as before
    # the views order a node's GPUs by bus id (no `index` attribute): GPU N there is fake GPU N
    buses = [_device_objects("n", "uid-n", i, FakeGpuNodeSpec(12, "V100"))[0]["spec"]["attributes"]["pciBusID"]
             for i in range(12)]
    assert buses == sorted(buses) and len(set(buses)) == 12
    assert _groups(FakeGpuNodeSpec(8, "V100", nvlink_groups=(4, 4))) == ["0"] * 4 + ["1"] * 4
    # a GPU alone has no NVLink peers: no group (the node agent's rule)
    assert _groups(FakeGpuNodeSpec(8, "V100", nvlink_groups=(2, 2, 1, 3))) == \
        ["0", "0", "1", "1", None, "3", "3", "3"]


def _args(directory: Path, *flags: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers())
    return parser.parse_args(["dev-cluster", "--dir", str(directory), *flags])


class NoPlane:
    def __init__(self, *args: object, **kwargs: object) -> None:
        raise AssertionError("the control plane was started")


@pytest.mark.parametrize(("flags", "said"), [
    (("--nvlink-groups", "4,2"), "--nvlink-groups '4,2' adds up to 6 GPUs, and --gpus-per-node is 8"),
    (("--nvlink-groups", "4,x"), "--nvlink-groups '4,x': expected group sizes such as 4,4 (positive numbers)"),
    (("--nvlink-groups", "8,0"), "--nvlink-groups '8,0': expected group sizes such as 4,4 (positive numbers)"),
    (("--gpus-per-node", "4", "--nvlink-groups", "2,2,4"),
     "--nvlink-groups '2,2,4' adds up to 8 GPUs, and --gpus-per-node is 4"),
])
def test_nvlink_groups_that_do_not_partition_the_gpus_are_refused(flags: tuple[str, ...], said: str, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cli, "LocalControlPlane", NoPlane)
    assert cli.run(_args(tmp_path, *flags)) == 2
    assert said in capsys.readouterr().err


def test_nvlink_groups_reach_the_fake_nodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[dict[str, object]] = []

    class Plane:
        kubeconfig = tmp_path / "kubeconfig"
        binaries = argparse.Namespace(kubectl=tmp_path / "kubectl")

        def __init__(self, *args: object, **kwargs: object) -> None:
            pass

        def start(self) -> None:
            pass

        def add_fake_gpu_nodes(self, *args: object, **kwargs: object) -> list[str]:
            made.append({"args": args, **kwargs})
            raise KeyboardInterrupt  # enough: stop here

        def stop(self) -> None:
            pass

    monkeypatch.setattr(cli, "LocalControlPlane", Plane)
    with pytest.raises(KeyboardInterrupt):
        cli.run(_args(tmp_path, "--nodes", "1", "--nvlink-groups", "4,4"))
    assert made and made[0]["nvlink_groups"] == (4, 4)


def test_the_views_show_each_gpus_nvlink_group_and_numa_node() -> None:
    devices = [b.device("n1", i, attributes={"numaNode": str(i // 2), **({"nvlinkGroup": "g0"} if i < 2 else {})})
               for i in range(4)]
    replay = Replay(config(), agent=False)
    list(replay.run(WatchEvent("ADDED", obj) for obj in [b.node("n1", gpus=4), *devices]))
    view = build_view(replay.scheduler, source="simulate", now=replay.now)
    gpus = m.as_dict(view)["nodes"][0]["gpus"]
    assert [(g["numa_node"], g["nvlink_group"]) for g in gpus] == [("0", "g0"), ("0", "g0"), ("1", ""), ("1", "")]
    assert "NUMA" not in render_nodes(view)  # the table as it was; -o wide adds them, as kubectl's
    header, first, *_, fourth = render_nodes(view, wide=True).split("\n\n")[0].splitlines()
    assert header.split()[:7] == ["NODE", "GPU", "MODEL", "MEMORY", "NUMA", "NVLINK", "STATE"]
    assert first.split()[4:6] == ["0", "g0"] and fourth.split()[3:5] == ["1", "-"]


def test_nodes_takes_o_wide() -> None:
    from scheduler.kubectl.cli import build_parser
    assert build_parser().parse_args(["nodes", "-o", "wide"]).output == "wide"
