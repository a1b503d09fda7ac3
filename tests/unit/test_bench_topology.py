"""bench.topology: the rack layout, gang insertion and a small run per policy (figures are by hand)."""

from __future__ import annotations

from pathlib import Path

from bench import topology
from bench.trace_workload import TraceNode

NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model\n"
POD_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"


def test_racks_are_8_to_16_nodes_and_rack_names_repeat_per_block() -> None:
    nodes = [TraceNode(f"n{i:04d}", 96000, 786432, 8, "V100") for i in range(300)]
    where = topology.racks(nodes)
    sizes: dict[tuple[str, str], int] = {}
    for block_rack in where.values():
        sizes[block_rack] = sizes.get(block_rack, 0) + 1
    assert all(8 <= size <= 16 for size in list(sizes.values())[:-1])  # the last rack takes what is left
    assert {rack for _, rack in sizes} <= {f"r{i}" for i in range(8)}
    assert len({block for block, _ in sizes}) >= 2 and ("b0", "r0") in sizes and ("b1", "r0") in sizes


def test_required_rack_gangs_stay_in_one_rack_and_no_topology_runs(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.csv"
    nodes.write_text(NODE_HEADER + "".join(f"n{i:03d},96000,786432,8,V100\n" for i in range(48)))
    pods = tmp_path / "pods.csv"
    pods.write_text(POD_HEADER + "".join(f"p{i:04d},4000,16384,1,1000,,LS,Running,0,100,0\n" for i in range(200)))
    topology._init(nodes, pods)
    required = topology.run(("required-rack", 42))
    plain = topology.run(("no-topology", 42))
    assert required.gangs_arrived == plain.gangs_arrived > 0
    assert required.gangs_placed > 0 and required.gangs_in_one_rack == required.gangs_placed
    assert required.racks_spanned == required.gangs_placed
    assert plain.gangs_placed >= required.gangs_placed


def test_live_workload_is_whole_gpu_pods_and_upstream_podgroups_cut_at_the_load() -> None:
    from bench import topology_live
    from bench.trace_workload import TracePod

    pods = [TracePod(f"p{i}", 1000, 1024, 1, 1000, ()) for i in range(50)]
    pods += [TracePod("slice", 1000, 1024, 1, 500, ()), TracePod("model", 1000, 1024, 1, 1000, ("V100",))]
    work = topology_live.workload(64, pods, seed=1, load=2.0, gang_every=5)
    demand = sum(u.gpus if isinstance(u, topology.Gang) else u.num_gpu for u in work)
    assert demand <= 128 and all(getattr(u, "name", "") not in ("slice", "model") for u in work)
    gang = next(u for u in work if isinstance(u, topology.Gang))
    group, members = topology_live._objects(gang, 7, "tessera", "ns")
    assert group is not None and group["spec"]["schedulingConstraints"] == {"topology": [{"key": topology.RACK}]}
    assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": gang.members}}
    assert len(members) == gang.members and all(
        m["spec"]["schedulingGroup"] == {"podGroupName": "g7"} and m["spec"]["schedulerName"] == "tessera" for m in members)
