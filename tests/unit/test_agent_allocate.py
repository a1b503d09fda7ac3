"""Allocate matching: which pod and container a kubelet call is for, or a refusal — never a guess."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from scheduler.agent.allocate import (
    AllocationError,
    ServedLedger,
    check_local_devices,
    check_shared_capacity,
    container_env,
    find_allocation,
    grant_units,
    held_grants,
    held_names,
    pending_entries,
)
from scheduler.core.annotations import DeviceGrant, encode_devices
from scheduler.sim import builders as b

V100 = "class.tessera.dev/v100"
SLICE = "class.tessera.dev/p100-slice"
GI = Fraction(2**30)


def _grants(*ids: str, amount: Fraction | None = None) -> tuple[DeviceGrant, ...]:
    return tuple(DeviceGrant(f"GPU-{i}", f"n.gpu-{i}".lower(), amount) for i in ids)


def _pod(name: str, assignment: dict[str, dict[str, tuple[DeviceGrant, ...]]], *, phase: str = "Allocating",
         containers: list[str] | None = None, init: list[str] | None = None, node: str = "n",
         status: str = "Pending", raw: str | None = None, namespace: str = "ns") -> dict[str, Any]:
    annotations = {"tessera.dev/devices": raw if raw is not None else encode_devices(assignment)}
    if phase:
        annotations["tessera.dev/phase"] = phase
    pod = b.pod(name, namespace=namespace, node_name=node, phase=status, annotations=annotations,
                containers=[b.container(c) for c in (containers or ["main"])],
                init_containers=[b.container(c) for c in init] if init else None)
    return pod


def _uid(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["uid"])


def test_unique_pod_gets_its_devices() -> None:
    pod = _pod("a", {"main": {V100: _grants("1", "2")}})
    other = _pod("b", {"main": {"class.tessera.dev/t4": _grants("9")}})
    done = _pod("c", {"main": {V100: _grants("3", "4")}}, phase="Allocated")
    elsewhere = _pod("d", {"main": {V100: _grants("5", "6")}}, node="m")
    finished = _pod("e", {"main": {V100: _grants("7", "8")}}, status="Failed")
    found = find_allocation([other, done, pod, elsewhere, finished], "n", V100, 2, None, set())
    assert (found.pod_key, found.container, found.device_ids) == ("ns/a", "main", ["GPU-1", "GPU-2"])
    assert found.key == (_uid(pod), "main", V100)


def test_no_match_is_an_error_with_reasons() -> None:
    pod = _pod("a", {"main": {V100: _grants("1", "2")}})
    with pytest.raises(AllocationError, match=r"no pod on node n is waiting for 1 class.tessera.dev/v100.*"
                                              r"ns/a \(main wants 2\).*Refusing to guess"):
        find_allocation([pod], "n", V100, 1, None, set())
    with pytest.raises(AllocationError, match="no pod on node n is waiting"):
        find_allocation([], "n", V100, 1, None, set())
    broken = _pod("x", {}, raw="{not json")
    with pytest.raises(AllocationError, match="ns/x has an unreadable tessera.dev/devices"):
        find_allocation([broken], "n", V100, 1, None, set())


def test_served_containers_are_not_served_twice() -> None:
    pod = _pod("a", {"main": {V100: _grants("1")}})
    served = {(_uid(pod), "main", V100)}
    with pytest.raises(AllocationError):
        find_allocation([pod], "n", V100, 1, None, served)


def test_ambiguous_pods_are_refused() -> None:
    # The scheduler's gate never allows this; forged annotations could.
    a = _pod("a", {"main": {V100: _grants("1")}})
    forged = _pod("forged", {"main": {V100: _grants("1")}})
    with pytest.raises(AllocationError, match=r"2 pods on node n match a request for 1 class.tessera.dev/v100: "
                                              r"ns/a container main, ns/forged container main. Refusing to guess"):
        find_allocation([a, forged], "n", V100, 1, None, set())
    # a different size tells them apart
    big = _pod("big", {"main": {V100: _grants("2", "3")}})
    assert find_allocation([a, big], "n", V100, 2, None, set()).pod_key == "ns/big"


def test_a_running_pod_still_marked_allocating_is_no_candidate() -> None:
    """A review found the agent still answering for a pod whose containers had started (so every
    Allocate call for it had been made) but whose `Allocated` patch never came (a ledger lost with
    an agent restart): the scheduler's gate lets the next pod in once a pod leaves Pending, and that
    pod's Allocate was then answered with the running pod's GPUs — or, with both seen, refused."""
    running = _pod("running", {"main": {V100: _grants("1")}}, status="Running")
    new = _pod("new", {"main": {V100: _grants("2")}})
    with pytest.raises(AllocationError, match="no pod on node n is waiting"):
        find_allocation([running], "n", V100, 1, None, set())
    assert find_allocation([running, new], "n", V100, 1, None, set()).pod_key == "ns/new"
    unset = _pod("unset", {"main": {V100: _grants("3")}})
    del unset["status"]["phase"]  # as a pod may be read before the apiserver's defaulting is seen
    assert find_allocation([unset], "n", V100, 1, None, set()).pod_key == "ns/unset"


def test_a_pending_pod_tessera_did_not_place_that_asks_the_same_makes_the_call_ambiguous() -> None:
    """A pod bound without Tessera (created with `spec.nodeName`, or by another scheduler) asking
    for a class resource: its Allocate call was answered with the devices of the Tessera pod waiting
    for the same amount, which then failed admission, and the scheduler gave those devices (still in
    the stray pod's hands) to the next pod. Either call may be the stray's: refuse rather than guess."""
    waiting = _pod("waiting", {"main": {V100: _grants("1")}})
    stray = b.pod("stray", namespace="ns", node_name="n", limits={V100: 1})
    with pytest.raises(AllocationError, match=r"ns/stray \(container main\) also asks for 1 "
                                              r"class.tessera.dev/v100 but Tessera did not set up its devices here"):
        find_allocation([waiting, stray], "n", V100, 1, None, set())
    with pytest.raises(AllocationError, match="ns/stray"):
        find_allocation([stray], "n", V100, 1, None, set())
    # a stray of another size, already running, or in an init container of another size is no rival
    other_size = b.pod("two", namespace="ns", node_name="n", limits={V100: 2})
    started = b.pod("started", namespace="ns", node_name="n", limits={V100: 1}, phase="Running")
    assert find_allocation([waiting, other_size, started], "n", V100, 1, None, set()).pod_key == "ns/waiting"
    # a Tessera pod whose Allocate calls are all made (Allocated; the ledger has them) is none either
    allocated = _pod("allocated", {"main": {V100: _grants("4")}}, phase="Allocated")
    allocated["spec"]["containers"][0]["resources"] = {"limits": {V100: "1"}}
    served = {(_uid(allocated), "main", V100)}
    assert find_allocation([waiting, allocated], "n", V100, 1, None, served).pod_key == "ns/waiting"


def test_a_pending_pod_with_copied_annotations_makes_the_call_ambiguous() -> None:
    """A pod whose `tessera.dev/*` annotations were copied from a bound Tessera pod (its YAML reused,
    a template carrying them) and that got on the node without Tessera (`spec.nodeName`, another
    scheduler) reads as a Tessera pod whose calls were all made (`Allocated`). Its Allocate call was
    answered with the devices of the Tessera pod waiting for the same amount: that pod then failed
    admission (its entry served) and the scheduler freed the devices still in the copy's hands. An
    annotation the agent never served for this pod's uid proves nothing: the copy is a rival."""
    waiting = _pod("waiting", {"main": {V100: _grants("1")}})
    copied = _pod("copied", {"main": {V100: _grants("0")}}, phase="Allocated")  # the original's GPU-0
    copied["spec"]["containers"][0]["resources"] = {"limits": {V100: "1"}}
    with pytest.raises(AllocationError, match=r"ns/copied \(container main\) also asks for 1 class.tessera.dev/v100 "
                                              r"but Tessera did not set up its devices here"):
        find_allocation([waiting, copied], "n", V100, 1, None, set())
    with pytest.raises(AllocationError, match="ns/copied"):
        find_allocation([copied], "n", V100, 1, None, set())
    # the same in a pod still Allocating whose entries name another container: that one is a rival
    renamed = _pod("renamed", {"other": {V100: _grants("0")}}, containers=["main", "other"])
    renamed["spec"]["containers"][0]["resources"] = {"limits": {V100: "1"}}
    with pytest.raises(AllocationError, match=r"ns/renamed \(container main\) also asks"):
        find_allocation([waiting, renamed], "n", V100, 1, None, set())


def test_a_device_another_live_pod_holds_is_not_handed_out() -> None:
    """The last line of defence for whatever the scheduler side gets wrong (a deposed leader's
    Binding landing after its successor gave the same GPU away; one GPU under two names): a GPU
    whose UUID another pod on the node still holds exclusively, or a whole GPU another pod has a
    slice of, is refused. Slices of one GPU for two pods are fine."""
    holder = _pod("holder", {"main": {V100: _grants("1", "2")}}, phase="Allocated", status="Running")
    late = _pod("late", {"main": {V100: _grants("2")}})
    with pytest.raises(AllocationError, match=r"GPU-2 .*also assigned to ns/holder"):
        find_allocation([holder, late], "n", V100, 1, None, set())
    gone = _pod("gone", {"main": {V100: _grants("2")}}, phase="Allocated", status="Succeeded")
    assert find_allocation([gone, late], "n", V100, 1, None, set()).pod_key == "ns/late"
    slice_a = _pod("slice-a", {"main": {SLICE: _grants("3", amount=8 * GI)}}, phase="Allocated", status="Running")
    slice_b = _pod("slice-b", {"main": {SLICE: _grants("3", amount=8 * GI)}})
    assert find_allocation([slice_a, slice_b], "n", SLICE, 8, GI, set()).pod_key == "ns/slice-b"
    whole = _pod("whole", {"main": {V100: _grants("3")}})
    with pytest.raises(AllocationError, match=r"GPU-3 .*also assigned to ns/slice-a"):
        find_allocation([slice_a, whole], "n", V100, 1, None, set())


def test_a_live_pod_with_an_unreadable_annotation_blocks_every_allocation_on_its_node() -> None:
    """Fail closed (review): a pod still on the node whose devices annotation cannot be read may
    hold any GPU there; handing one out could give it to two pods. Once it is gone, it is fine."""
    late = _pod("late", {"main": {V100: _grants("2")}})
    unreadable = _pod("unreadable", {"main": {V100: _grants("1")}}, phase="Allocated", status="Running")
    unreadable["metadata"]["annotations"]["tessera.dev/devices"] = '{"containers":{},"version":2}'
    with pytest.raises(AllocationError, match=r"ns/unreadable, still on node n, has an unreadable"):
        find_allocation([unreadable, late], "n", V100, 1, None, set())
    unreadable["status"]["phase"] = "Succeeded"
    assert find_allocation([unreadable, late], "n", V100, 1, None, set()).pod_key == "ns/late"


def test_shared_grants_count_units() -> None:
    pod = _pod("s", {"main": {SLICE: _grants("1", amount=8 * GI)}})
    assert grant_units(_grants("1", amount=8 * GI), GI) == 8
    assert grant_units(_grants("1", amount=GI / 2), GI) is None
    assert grant_units(_grants("1", amount=GI), None) is None
    found = find_allocation([pod], "n", SLICE, 8, GI, set())
    assert found.device_ids == ["GPU-1"]
    with pytest.raises(AllocationError, match="main wants 8"):
        find_allocation([pod], "n", SLICE, 1, GI, set())
    env, _, _ = container_env(found, dimensions={SLICE: "memory"})
    assert env["NVIDIA_VISIBLE_DEVICES"] == "GPU-1" and env["TESSERA_SHARED_MEMORY"] == "8Gi"


def test_multi_container_and_init_containers_follow_kubelet_order() -> None:
    pod = _pod("m", {"setup": {V100: _grants("1")}, "trainer": {V100: _grants("2")}, "sidecar": {V100: _grants("3")},
                     "eval": {V100: _grants("4", "5")}},
               init=["setup"], containers=["trainer", "sidecar", "eval"])
    uid = _uid(pod)
    served: set[tuple[str, str, str]] = set()
    order = []
    for count in (1, 1, 1, 2):
        found = find_allocation([pod], "n", V100, count, None, served)
        served.add(found.key)
        order.append((found.container, found.device_ids))
        remaining = pending_entries(pod, served)
        assert (uid, found.container, V100) not in remaining
    assert order == [("setup", ["GPU-1"]), ("trainer", ["GPU-2"]), ("sidecar", ["GPU-3"]), ("eval", ["GPU-4", "GPU-5"])]
    assert pending_entries(pod, served) == []


def test_a_call_for_a_later_container_skips_a_different_size() -> None:
    pod = _pod("m", {"a": {V100: _grants("1", "2")}, "b": {V100: _grants("3")}}, containers=["a", "b"])
    assert find_allocation([pod], "n", V100, 1, None, set()).container == "b"


def test_pending_entries_cover_every_resource_and_ignore_unknown_containers() -> None:
    pod = _pod("m", {"main": {V100: _grants("1"), SLICE: _grants("2", amount=GI)}, "ghost": {V100: _grants("3")}})
    uid = _uid(pod)
    assert sorted(pending_entries(pod, set())) == [(uid, "main", SLICE), (uid, "main", V100)]
    assert pending_entries(pod, {(uid, "main", V100)}) == [(uid, "main", SLICE)]


def test_container_env_and_cdi() -> None:
    pod = _pod("a", {"main": {V100: _grants("1", "2")}})
    found = find_allocation([pod], "n", V100, 2, None, set())
    env, annotations, cdi = container_env(found, cdi=True)
    assert env == {"NVIDIA_VISIBLE_DEVICES": "GPU-1,GPU-2", "TESSERA_DEVICES": "n.gpu-1,n.gpu-2",
                   "TESSERA_POD": "ns/a", "TESSERA_CONTAINER": "main"}
    assert annotations == {"tessera.dev/devices": "GPU-1,GPU-2"}
    assert cdi == ["nvidia.com/gpu=GPU-1", "nvidia.com/gpu=GPU-2"]
    assert container_env(found)[2] == []


def test_ledger_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    ledger = ServedLedger(path)
    ledger.add(("uid-1", "a", V100), ["v100-3"])
    ledger.add(("uid-2", "b", V100), ["v100-0", "v100-1"])
    ledger.add(("uid-2", "b", SLICE), ["slice-7"])
    again = ServedLedger(path)
    assert ("uid-1", "a", V100) in again and len(again) == 3 and again.pods() == {"uid-1", "uid-2"}
    assert again.slots_in_use(V100, {"uid-1", "uid-2"}) == {"v100-0", "v100-1", "v100-3"}
    assert again.slots_in_use(V100, {"uid-2"}) == {"v100-0", "v100-1"}
    again.forget("uid-1")
    assert ServedLedger(path).pods() == {"uid-2"}
    again.retain({"uid-2"})
    assert ServedLedger(path).pods() == {"uid-2"}
    path.write_text('{"version": 1, "served": [["uid-3", "a", "%s"]]}' % V100)  # before slots were kept
    assert ("uid-3", "a", V100) in ServedLedger(path) and ServedLedger(path).slots_in_use(V100, {"uid-3"}) == set()
    path.write_text("garbage")
    assert len(ServedLedger(path)) == 0  # unreadable: start empty, do not crash
    memory_only = ServedLedger(None)
    memory_only.add(("u", "c", V100))
    assert ("u", "c", V100) in memory_only
    unwritable = ServedLedger(tmp_path / "missing-dir" / "state.json")
    unwritable.add(("u", "c", V100))  # logged once, kept in memory
    assert ("u", "c", V100) in unwritable


def test_held_devices_come_from_non_terminal_pods() -> None:
    running = _pod("a", {"main": {V100: _grants("1", "2")}}, phase="Allocated", status="Running")
    waiting = _pod("b", {"main": {SLICE: _grants("3", amount=GI)}})
    done = _pod("c", {"main": {V100: _grants("4")}}, phase="Allocated", status="Succeeded")
    broken = _pod("d", {}, raw="{")
    assert held_names(held_grants([running, waiting, done, broken])) == {"n.gpu-1", "n.gpu-2", "n.gpu-3"}


def test_a_device_another_live_pod_holds_only_by_its_held_devices_is_not_handed_out() -> None:
    """`holder` was given GPU-2 (its Binding recorded it in `tessera.dev/held-devices`); its
    `tessera.dev/devices` was edited to name GPU-1 since. Its container still uses GPU-2 (the
    kubelet keeps a container's devices), so a late Binding naming GPU-2 for another pod (a deposed
    leader's) must be refused here as well: the agent read only the devices annotation and handed
    GPU-2 out a second time. An unreadable held-devices fails closed, as an unreadable devices does."""
    holder = _pod("holder", {"main": {V100: _grants("1")}}, phase="Allocated", status="Running")
    holder["metadata"]["annotations"]["tessera.dev/held-devices"] = encode_devices({"main": {V100: _grants("2")}})
    late = _pod("late", {"main": {V100: _grants("2")}})
    with pytest.raises(AllocationError, match=r"GPU-2 .*also assigned to ns/holder"):
        find_allocation([holder, late], "n", V100, 1, None, set())
    holder["metadata"]["annotations"]["tessera.dev/held-devices"] = "{not json"
    with pytest.raises(AllocationError, match=r"ns/holder, still on node n, has an unreadable tessera.dev/held-devices"):
        find_allocation([holder, late], "n", V100, 1, None, set())


# --- slices beyond a GPU's capacity --------------------------------------------------------------

T4_CAPACITY = {"GPU-3": {"memory": 16 * GI}}  # device id -> its published capacity


def _slice(amount: Fraction, dimension: str = "memory", device: str = "3") -> tuple[DeviceGrant, ...]:
    return (DeviceGrant(f"GPU-{device}", f"n.gpu-{device}", amount, dimension),)


def _running(name: str, assignment: dict[str, dict[str, tuple[DeviceGrant, ...]]], **kw: Any) -> dict[str, Any]:
    return _pod(name, assignment, phase="Allocated", status="Running", **kw)


def _dimension_of(resource: str) -> str:
    return {SLICE: "memory"}.get(resource, "")


def _admit_slice(pods: list[dict[str, Any]], count: int = 5, *, dimension_of: Any = _dimension_of) -> str:
    """find_allocation, then the capacity check the agent runs after it: the pod admitted."""
    found = find_allocation(pods, "n", SLICE, count, GI, set())
    check_shared_capacity(pods, "n", found, T4_CAPACITY, dimension_of)
    return found.pod_key


def test_a_slice_beyond_the_gpus_capacity_is_refused_and_the_holders_admitted_first_keep_it() -> None:
    """Two Tessera installs (or a deposed leader's late Binding) gave a 16Gi T4 to four 5Gi slice
    holders: the three admitted first fit (15Gi) and keep running; the fourth would use 20Gi of
    it and is refused (its admission fails, as for a whole GPU given twice). Exactly full fits."""
    holders = [_running(f"slice-{i}", {"main": {SLICE: _slice(5 * GI)}}) for i in range(3)]
    late = _pod("late", {"main": {SLICE: _slice(5 * GI)}})
    with pytest.raises(AllocationError, match=r"device GPU-3 is shared beyond its capacity: ns/late, and ns/slice-0, "
                                              r"ns/slice-1, ns/slice-2.* use 20Gi of its 16Gi memory"):
        _admit_slice([*holders, late])
    assert _admit_slice([*holders[:2], late]) == "ns/late"  # 15Gi of 16Gi
    exact = _pod("exact", {"main": {SLICE: _slice(6 * GI)}})
    assert _admit_slice([*holders[:2], exact], 6) == "ns/exact"  # 16Gi of 16Gi: full, not over
    # gone holders (terminal, on another node) hold nothing here
    holders[0]["status"]["phase"] = "Succeeded"
    elsewhere = _running("elsewhere", {"main": {SLICE: _slice(5 * GI)}}, node="m")
    assert _admit_slice([*holders, elsewhere, late]) == "ns/late"


def test_a_slice_held_only_by_held_devices_counts_against_the_capacity() -> None:
    """A holder whose devices annotation was edited to name another GPU still uses its slice of
    GPU-3 (what its Binding recorded in held-devices): it counts."""
    moved = _running("moved", {"main": {SLICE: _slice(8 * GI, device="4")}})
    moved["metadata"]["annotations"]["tessera.dev/held-devices"] = encode_devices({"main": {SLICE: _slice(12 * GI)}})
    late = _pod("late", {"main": {SLICE: _slice(5 * GI)}})
    with pytest.raises(AllocationError, match=r"shared beyond its capacity: .*use 17Gi of its 16Gi memory"):
        _admit_slice([moved, late])


def test_slices_of_another_dimension_do_not_count_and_unknown_ones_count_as_placing_does() -> None:
    """Each dimension fills up to its own capacity: 12 cores (a dimension the agent publishes no
    capacity of) take nothing of the memory. A grant without a dimension (written before the field)
    counts in its class's dimension as it is now; one whose class is gone (or no longer shares) may
    be of any dimension and counts against each, as the scheduler counts it placing — so what a
    scheduler places beside it is never refused, and what goes beyond it is."""
    cores = _running("cores", {"main": {"class.tessera.dev/cores": _slice(Fraction(12), "cores")}})
    late = _pod("late", {"main": {SLICE: _slice(12 * GI)}})
    assert _admit_slice([cores, late], 12) == "ns/late"
    old = _running("old", {"main": {SLICE: _slice(8 * GI, dimension="")}})
    with pytest.raises(AllocationError, match=r"use 20Gi of its 16Gi memory"):
        _admit_slice([old, late], 12)
    orphan = _running("orphan", {"main": {"class.tessera.dev/gone": _slice(8 * GI, dimension="")}})
    with pytest.raises(AllocationError, match=r"use 20Gi of its 16Gi memory"):
        _admit_slice([orphan, late], 12)
    fits = _pod("fits", {"main": {SLICE: _slice(8 * GI)}})
    assert _admit_slice([orphan, fits], 8) == "ns/fits"
    # the allocation's own grant without a dimension is of its class's (the endpoint's)
    own_old = _pod("own-old", {"main": {SLICE: _slice(12 * GI, dimension="")}})
    with pytest.raises(AllocationError, match=r"use 20Gi of its 16Gi memory"):
        _admit_slice([old, own_old], 12)


def test_a_slice_handed_on_from_a_finished_init_container_counts_once() -> None:
    """As the scheduler charges a pod (lifecycle.device_holds): an init container's slice, handed
    on to the app container after it finished, is held once; a sidecar's runs beside the app's."""
    handed = _running("handed", {"setup": {SLICE: _slice(8 * GI)}, "main": {SLICE: _slice(8 * GI)}}, init=["setup"])
    late = _pod("late", {"main": {SLICE: _slice(8 * GI)}})
    assert _admit_slice([handed, late], 8) == "ns/late"
    sidecar = _running("sidecar", {"side": {SLICE: _slice(4 * GI)}, "main": {SLICE: _slice(8 * GI)}})
    sidecar["spec"]["initContainers"] = [b.container("side", restart_policy="Always")]
    with pytest.raises(AllocationError, match=r"use 20Gi of its 16Gi memory"):
        _admit_slice([sidecar, late], 8)


def test_the_whole_pod_being_admitted_counts_and_one_gpu_under_two_names_is_one() -> None:
    """The allocating pod's own slices of the GPU in all its containers count (its later container
    would go over: refused at the first), and a holder's slice of the same GPU under another
    ExtendedResource name (one GPU published twice) is the same GPU."""
    holder = _running("holder", {"main": {SLICE: (DeviceGrant("GPU-3", "n.gpu-3-alias", 6 * GI, "memory"),)}})
    two = _pod("two", {"a": {SLICE: _slice(5 * GI)}, "b": {SLICE: _slice(6 * GI)}}, containers=["a", "b"])
    with pytest.raises(AllocationError, match=r"use 17Gi of its 16Gi memory"):
        _admit_slice([holder, two], 5)


def test_a_holder_with_an_unreadable_annotation_fails_the_capacity_check_closed() -> None:
    unreadable = _running("unreadable", {"main": {SLICE: _slice(GI)}})
    unreadable["metadata"]["annotations"]["tessera.dev/held-devices"] = "{not json"
    late = _pod("late", {"main": {SLICE: _slice(5 * GI)}})
    found = find_allocation([late], "n", SLICE, 5, GI, set())
    with pytest.raises(AllocationError, match=r"ns/unreadable, still on node n, has an unreadable tessera.dev/held-devices"):
        check_shared_capacity([unreadable, late], "n", found, T4_CAPACITY, _dimension_of)


# --- gaps found by mutation (round 3) --------------------------------------------------------------


def test_a_failed_pod_holds_no_gpu_any_more() -> None:
    """A Failed pod is terminal like a Succeeded one: the kubelet has freed its devices, so neither
    its whole GPU nor its slice blocks the pod now admitted on them, and it holds nothing."""
    failed = _pod("failed", {"main": {V100: _grants("2")}}, phase="Allocated", status="Failed")
    late = _pod("late", {"main": {V100: _grants("2")}})
    assert find_allocation([failed, late], "n", V100, 1, None, set()).pod_key == "ns/late"
    sliced = _pod("sliced", {"main": {SLICE: _slice(12 * GI)}}, phase="Allocated", status="Failed")
    assert _admit_slice([sliced, _pod("fits", {"main": {SLICE: _slice(8 * GI)}})], 8) == "ns/fits"
    assert held_grants([failed, sliced]) == {}


def test_the_allocations_own_slice_of_no_dimension_is_checked_against_every_capacity() -> None:
    """The allocating pod's own grant names no dimension and its class no longer shares: it may be
    of any dimension, so it counts against each capacity the device publishes — beside a holder's
    8Gi of memory, its 12 units are over the 16Gi, as the scheduler would count it."""
    holder = _running("holder", {"main": {SLICE: _slice(8 * GI)}})
    own = _pod("own", {"main": {SLICE: _slice(12 * GI, dimension="")}})
    with pytest.raises(AllocationError, match=r"use 20Gi of its 16Gi memory"):
        _admit_slice([holder, own], 12, dimension_of=lambda resource: "")


def test_every_grant_of_the_container_must_be_a_local_healthy_device() -> None:
    """The answer's NVIDIA_VISIBLE_DEVICES names all of the container's devices, of every resource:
    a grant of its other resource naming a device this node does not have (or under another id,
    or unhealthy) fails this call too, not only the grants of the resource called for."""
    pod = _pod("a", {"main": {V100: _grants("1"), "class.tessera.dev/t4": _grants("9")}})
    found = find_allocation([pod], "n", V100, 1, None, set())
    local = {"n.gpu-1": ("GPU-1", None), "n.gpu-9": ("GPU-9", None)}
    check_local_devices(found, "n", local)
    with pytest.raises(AllocationError, match=r"assigned device n.gpu-9, which is not a device of node n"):
        check_local_devices(found, "n", {"n.gpu-1": ("GPU-1", None)})
    with pytest.raises(AllocationError, match=r"gives id GPU-9 for device n.gpu-9, but n.gpu-9 has device id GPU-8"):
        check_local_devices(found, "n", {**local, "n.gpu-9": ("GPU-8", None)})
    with pytest.raises(AllocationError, match=r"device n.gpu-9 is unhealthy \(XidError\)"):
        check_local_devices(found, "n", {**local, "n.gpu-9": ("GPU-9", "XidError")})


# The kubelet turns a refusal (`told`) into the refused pod's UnexpectedAdmissionError Event and
# status message, read by that pod's tenant: it names no pod of another namespace, and where the
# agent cannot tell which pod the call is for (find_allocation's refusals) it names none; the
# agent's log line (str) names every pod (scheduler.core.tenants.pods_named).


def test_a_rival_of_another_namespace_is_only_counted_to_the_pod_refused() -> None:
    waiting = _pod("waiting", {"main": {V100: _grants("1")}})
    stray = b.pod("stray", namespace="team-b", node_name="n", limits={V100: 1})
    with pytest.raises(AllocationError) as err:
        find_allocation([waiting, stray], "n", V100, 1, None, set())
    assert err.value.told.startswith("1 pod also asks for 1 class.tessera.dev/v100 but Tessera did not set up")
    assert "; the call may be for 1 pod. Refusing to guess" in err.value.told
    assert "team-b" not in err.value.told and "ns/waiting" not in err.value.told
    assert str(err.value).startswith("team-b/stray (container main) also asks for 1 class.tessera.dev/v100")
    assert "the call may be for ns/waiting container main" in str(err.value)


def test_pods_waiting_for_another_size_in_another_namespace_are_only_counted_to_the_pod_refused() -> None:
    two = _pod("two", {"main": {V100: _grants("1", "2")}}, namespace="team-b")
    answered = _pod("answered", {"main": {V100: _grants("3")}}, namespace="team-b")
    with pytest.raises(AllocationError) as err:
        find_allocation([two, answered], "n", V100, 1, None, {(_uid(answered), "main", V100)})
    assert "; other pods here waiting for class.tessera.dev/v100: 1 pod. An earlier call of this size was " \
           "answered for 1 pod, which is still waiting" in err.value.told
    assert "team-b" not in err.value.told
    assert "waiting for class.tessera.dev/v100: team-b/two (main wants 2). An earlier call of this size was " \
           "answered for team-b/answered container main" in str(err.value)


def test_several_candidates_are_only_counted_to_the_pod_refused() -> None:
    a = _pod("a", {"main": {V100: _grants("1")}})
    forged = _pod("forged", {"main": {V100: _grants("2")}}, namespace="team-b")
    with pytest.raises(AllocationError) as err:
        find_allocation([a, forged], "n", V100, 1, None, set())
    assert err.value.told.startswith("2 pods on node n match a request for 1 class.tessera.dev/v100: 2 pods. ")
    assert "team-b" not in err.value.told
    assert "ns/a container main, team-b/forged container main" in str(err.value)


def test_a_holder_of_another_namespace_is_only_counted_to_the_pod_refused() -> None:
    holder = _running("holder", {"main": {V100: _grants("2")}}, namespace="team-b")
    late = _pod("late", {"main": {V100: _grants("2")}})
    with pytest.raises(AllocationError) as err:
        find_allocation([holder, late], "n", V100, 1, None, set())
    assert err.value.told.startswith("device GPU-2 is also assigned to 1 pod in another namespace, which is still "
                                     "on node n: refusing to hand it to ns/late as well")
    assert "team-b" not in err.value.told
    assert "device GPU-2 is also assigned to team-b/holder, which is still on node n" in str(err.value)


def test_an_unreadable_holder_of_another_namespace_is_only_counted_to_the_pod_refused() -> None:
    holder = _running("holder", {"main": {V100: _grants("1")}}, namespace="team-b")
    holder["metadata"]["annotations"]["tessera.dev/devices"] = '{"containers":{},"version":2}'
    late = _pod("late", {"main": {V100: _grants("2")}})
    with pytest.raises(AllocationError) as err:
        find_allocation([holder, late], "n", V100, 1, None, set())
    assert err.value.told.startswith("1 pod in another namespace, still on node n, has an unreadable "
                                     "tessera.dev/devices annotation")
    assert "team-b" not in err.value.told
    assert str(err.value).startswith("team-b/holder, still on node n, has an unreadable tessera.dev/devices")


def test_an_unreadable_holder_of_another_namespace_keeps_its_container_names_from_the_pod_refused() -> None:
    """The parse error quotes the holder's container names (`containers.<name>...`): the refused pod's
    tenant is told what is wrong (an unreadable annotation) but not another namespace's names; the
    log line (`str`) keeps the whole error. A holder of the refused pod's own namespace is quoted."""
    broken = '{"containers":{"secret-trainer":{"class.tessera.dev/v100":[]}},"version":1}'
    holder = _running("holder", {"main": {V100: _grants("1")}}, namespace="team-b")
    holder["metadata"]["annotations"]["tessera.dev/devices"] = broken
    late = _pod("late", {"main": {V100: _grants("2")}})
    with pytest.raises(AllocationError) as err:
        find_allocation([holder, late], "n", V100, 1, None, set())
    assert err.value.told.startswith("1 pod in another namespace, still on node n, has an unreadable "
                                     "tessera.dev/devices annotation: which GPUs it holds is unknown")
    assert "secret-trainer" not in err.value.told
    assert "team-b/holder, still on node n, has an unreadable tessera.dev/devices annotation (containers." \
           "secret-trainer.class.tessera.dev/v100: must be a non-empty list)" in str(err.value)
    holder["metadata"]["namespace"] = "ns"
    with pytest.raises(AllocationError) as err:
        find_allocation([holder, late], "n", V100, 1, None, set())
    assert "ns/holder, still on node n, has an unreadable tessera.dev/devices annotation (containers." \
           "secret-trainer" in err.value.told


def test_slice_holders_of_other_namespaces_are_only_counted_to_the_pod_refused() -> None:
    holders = [_running(f"slice-{i}", {"main": {SLICE: _slice(5 * GI)}}, namespace=namespace)
               for i, namespace in enumerate(("ns", "team-b", "team-c"))]
    late = _pod("late", {"main": {SLICE: _slice(5 * GI)}})
    with pytest.raises(AllocationError) as err:
        _admit_slice([*holders, late])
    assert err.value.told.startswith("device GPU-3 is shared beyond its capacity: ns/late, and ns/slice-0 and 2 pods "
                                     "in other namespaces that hold slices of it, still on node n, would use 20Gi")
    assert "team-" not in err.value.told
    assert "ns/late, and ns/slice-0, team-b/slice-1, team-c/slice-2 that hold slices of it" in str(err.value)
