"""Device classes: selection by selector, exclusive vs shared allocation, the annotation ledger."""

from __future__ import annotations

from collections import Counter

import orjson

from scheduler.core import annotations as ann
from scheduler.sim import builders as b
from scheduler.view import model as m
from scheduler.view.cluster import build_view
from tests.helpers import BINPACK, Run, config


def _devices_of(run: Run, name: str) -> dict:  # type: ignore[type-arg]
    attempt = run.last(name)
    assert attempt.node is not None, attempt.message
    doc = orjson.loads(attempt.annotations[ann.DEVICES])
    assert doc["version"] == 1
    assert attempt.annotations[ann.PHASE] == "Allocating"
    assert ann.ASSUME_TIME in attempt.annotations
    return doc["containers"]  # type: ignore[no-any-return]


def _cluster(run: Run) -> None:
    run.add(b.node("a", gpus=2), b.node("b", gpus=2))
    run.add(b.device("a", 0, model="K80", memory="12Gi"), b.device("a", 1, model="P100", memory="16Gi"),
            b.device("b", 0, model="V100", memory="16Gi"), b.device("b", 1, model="V100", memory="32Gi"))


def test_match_labels_selects_the_model_and_writes_the_device_annotation() -> None:
    run = Run(config(BINPACK))
    _cluster(run)
    run.add(b.resource_class("k80", match_labels={"model": "K80"}))
    run.add(b.pod("p", limits={"class.tessera.dev/k80": 1}))
    containers = _devices_of(run, "p")
    grant = containers["main"]["class.tessera.dev/k80"]
    k80 = next(d for d in run.state.devices.values() if d.attributes["model"] == "K80")
    assert grant == [{"id": k80.device_id, "device": k80.name, "resourceName": k80.resource_name}]
    assert run.node_of("p") == "a"


def test_gt_quantity_selects_large_memory_and_refuses_when_taken() -> None:
    run = Run(config(BINPACK))
    _cluster(run)
    run.add(b.resource_class("big", expressions=[{"key": "memory", "operator": "Gt", "values": ["12Gi"]}]))
    run.add(*[b.pod(f"p{i}", limits={"class.tessera.dev/big": 1}) for i in range(4)])
    placed = sorted(str(run.node_of(f"p{i}")) for i in range(4))
    assert placed == ["None", "a", "b", "b"]  # P100 16Gi, V100 16Gi, V100 32Gi match; K80 12Gi does not
    failed = next(run.last(f"p{i}") for i in range(4) if run.node_of(f"p{i}") is None)
    assert failed.message == ("0/2 nodes are available: 2 Insufficient class.tessera.dev/big."
                              " preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.")


def test_custom_resource_name_and_scarce_devices_are_kept_for_narrow_classes() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=2))
    run.add(b.device("n", 0, model="V100", memory="16Gi"), b.device("n", 1, model="V100", memory="32Gi"))
    run.add(b.resource_class("any-v100", match_labels={"model": "V100"}, resource_name="gpu.example.com/v100"),
            b.resource_class("v100-32g", expressions=[{"key": "memory", "operator": "Gt", "values": ["16Gi"]}]))
    run.add(b.pod("broad", limits={"gpu.example.com/v100": 1}))
    grant = _devices_of(run, "broad")["main"]["gpu.example.com/v100"][0]
    assert run.state.devices[grant["device"]].capacity["memory"] == 16 * 2**30  # left the 32Gi one free
    run.add(b.pod("narrow", limits={"class.tessera.dev/v100-32g": 1}))
    assert run.node_of("narrow") == "n"


def test_two_8gi_slices_pack_onto_one_16gi_device() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=2))
    run.add(b.device("n", 0, memory="16Gi"), b.device("n", 1, memory="16Gi"))
    run.add(b.resource_class("slice", match_labels={"model": "V100"}, sharing={"dimension": "memory", "unit": "1Gi"}))
    run.add(b.pod("s1", limits={"class.tessera.dev/slice": 8}), b.pod("s2", limits={"class.tessera.dev/slice": 8}))
    g1 = _devices_of(run, "s1")["main"]["class.tessera.dev/slice"]
    g2 = _devices_of(run, "s2")["main"]["class.tessera.dev/slice"]
    assert g1[0]["device"] == g2[0]["device"]
    assert g1[0]["amount"] == g2[0]["amount"] == "8Gi"
    # the other device is still free for exclusive use; the shared one is not
    run.add(b.resource_class("whole", match_labels={"model": "V100"}))
    run.add(b.pod("x1", limits={"class.tessera.dev/whole": 1}), b.pod("x2", limits={"class.tessera.dev/whole": 1}))
    assert run.node_of("x1") == "n" and run.node_of("x2") is None
    # and a third slice does not fit anywhere now
    run.add(b.pod("s3", limits={"class.tessera.dev/slice": 1}))
    assert run.node_of("s3") is None


def test_plain_gpu_count_and_class_devices_share_the_node_count() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=2))
    run.add(b.device("n", 0), b.device("n", 1))
    run.add(b.resource_class("v100", match_labels={"model": "V100"}))
    run.add(b.pod("plain", limits={"nvidia.com/gpu": 1}))
    run.add(b.pod("c1", limits={"class.tessera.dev/v100": 1}), b.pod("c2", limits={"class.tessera.dev/v100": 1}))
    assert run.node_of("plain") == "n" and run.node_of("c1") == "n"
    assert run.node_of("c2") is None
    # the count is short, but c2 asked for its class: the reason names that (its own request)
    assert run.last("c2").message == ("0/1 nodes are available: 1 Insufficient class.tessera.dev/v100."
                                       " preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")


def test_unhealthy_and_cordoned_devices_are_not_used() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=3))
    run.add(b.device("n", 0, healthy=False), b.device("n", 1, unschedulable=True), b.device("n", 2))
    run.add(b.resource_class("v100", match_labels={"model": "V100"}))
    run.add(b.pod("p1", limits={"class.tessera.dev/v100": 1}), b.pod("p2", limits={"class.tessera.dev/v100": 1}))
    assert run.node_of("p1") == "n" and run.node_of("p2") is None


def test_ledger_is_rebuilt_from_annotations_of_bound_pods() -> None:
    """A restart: the stream starts with a pod already bound with devices; they stay taken."""
    first = Run(config(BINPACK))
    first.add(b.node("n", gpus=2), b.device("n", 0), b.device("n", 1), b.resource_class("v100", match_labels={"model": "V100"}))
    first.add(b.pod("p", limits={"class.tessera.dev/v100": 1}))
    annotations = first.last("p").annotations

    second = Run(config(BINPACK))
    second.add(b.pod("p", limits={"class.tessera.dev/v100": 1}, node_name="n", annotations=annotations, phase="Running"))
    second.add(b.node("n", gpus=2), b.device("n", 0), b.device("n", 1), b.resource_class("v100", match_labels={"model": "V100"}))
    second.add(b.pod("q", limits={"class.tessera.dev/v100": 1}))
    taken = orjson.loads(annotations[ann.DEVICES])["containers"]["main"]["class.tessera.dev/v100"][0]["device"]
    got = orjson.loads(second.last("q").annotations[ann.DEVICES])["containers"]["main"]["class.tessera.dev/v100"][0]["device"]
    assert got != taken
    second.add(b.pod("r", limits={"class.tessera.dev/v100": 1}))
    assert second.node_of("r") is None


def test_broken_annotation_fails_closed_for_that_node_only() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("bad", gpus=2), b.node("good", gpus=2))
    run.add(b.device("bad", 0), b.device("bad", 1), b.device("good", 0), b.device("good", 1))
    run.add(b.resource_class("v100", match_labels={"model": "V100"}))
    run.add(b.pod("old", node_name="bad", phase="Running", annotations={ann.DEVICES: "{not json"}))
    assert any(n.startswith("BrokenDeviceAnnotation") for n in run.notices())
    run.add(*[b.pod(f"p{i}", limits={"class.tessera.dev/v100": 1}) for i in range(3)])
    assert [run.node_of(f"p{i}") for i in range(3)] == ["good", "good", None]
    assert run.last("p2").message == ("0/2 nodes are available: 1 Insufficient class.tessera.dev/v100, "
                                      "1 node(s) had unreadable device assignments."
                                      " preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.")
    # which GPUs "old" holds is unknown: plain count requests of the node's devices are kept off
    # it too (they would land on a device the agent picks, maybe the one "old" holds); pods
    # asking for no GPU still use the node
    run.add(b.pod("plain", limits={"nvidia.com/gpu": 1}))
    assert run.node_of("plain") is None
    assert "2 Insufficient nvidia.com/gpu" in run.last("plain").message
    run.add(b.pod("cpu-only", requests={"cpu": "1"},
                  spec_extra={"nodeSelector": {"kubernetes.io/hostname": "bad"}}))
    assert run.node_of("cpu-only") == "bad"


def test_invalid_and_clashing_classes_give_messages() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=1), b.device("n", 0))
    run.add(b.resource_class("bad", expressions=[{"key": "memory", "operator": "Gt", "values": ["10GiB"]}]))
    run.add(b.resource_class("one", match_labels={"model": "V100"}, resource_name="x.io/gpu", created="2026-01-01T00:00:00Z"),
            b.resource_class("two", match_labels={"model": "V100"}, resource_name="x.io/gpu", created="2026-01-02T00:00:00Z"))
    notes = run.notices()
    assert any('"10GiB": not a Kubernetes quantity (did you mean "10Gi"?)' in n for n in notes)
    assert any("Duplicate value" in n and "ResourceClass one" in n for n in notes)
    run.add(b.pod("p", limits={"class.tessera.dev/bad": 1}), b.pod("q", limits={"class.tessera.dev/none": 1}))
    assert run.last("p").message.startswith("0/1 nodes are available: ResourceClass bad is not valid: ")
    assert run.last("q").message == ('0/1 nodes are available: no ResourceClass provides "class.tessera.dev/none" '
                                     "(the ResourceClasses provide x.io/gpu). "
                                     "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")
    run.add(b.pod("r", limits={"x.io/gpu": 1}))
    assert run.node_of("r") == "n"  # "one" is older, it owns x.io/gpu
    valid, _, matching, _ = run.state.class_status("one")
    assert valid and matching == 1
    assert run.state.class_status("two")[0] is False


def test_a_class_warning_names_the_class_by_uid_so_kubectl_describe_shows_it() -> None:
    """kubectl describe lists the Events whose `regarding.uid` is the object's: an Event without
    the uid shows in `kubectl get events` only (new-user trial finding)."""
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=1), b.device("n", 0))
    bad = b.resource_class("bad", expressions=[{"key": "memory", "operator": "Gt", "values": ["10GiB"]}])
    one = b.resource_class("one", match_labels={"model": "V100"}, resource_name="x.io/gpu", created="2026-01-01T00:00:00Z")
    two = b.resource_class("two", match_labels={"model": "V100"}, resource_name="x.io/gpu", created="2026-01-02T00:00:00Z")
    run.add(bad, one, two)
    uids = {(n.key, n.uid) for n in run.replay.stats.notices if n.reason == "InvalidResourceClass"}
    assert uids == {(o["metadata"]["name"], o["metadata"]["uid"]) for o in (bad, two)}


def test_class_added_after_pod_wakes_the_pod() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=1), b.device("n", 0))
    run.add(b.pod("p", limits={"class.tessera.dev/v100": 1}))
    assert run.node_of("p") is None
    run.add(b.resource_class("v100", match_labels={"model": "V100"}))
    assert run.node_of("p") == "n"


def test_a_deleted_extended_resource_still_counts_while_a_pod_holds_it() -> None:
    """Devices are released when their pods are gone, not when their object is (fault test finding)."""
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=2), b.device("n", 0), b.device("n", 1), b.resource_class("v100", match_labels={"model": "V100"}))
    run.add(b.pod("holder", limits={"class.tessera.dev/v100": 1}))
    held = orjson.loads(run.last("holder").annotations[ann.DEVICES])["containers"]["main"]["class.tessera.dev/v100"][0]["device"]
    obj = next(b.device("n", i) for i in range(2) if b.device("n", i)["metadata"]["name"] == held)
    run.feed(b.event("DELETED", obj))
    run.add(b.pod("plain-1", limits={"nvidia.com/gpu": 1}), b.pod("plain-2", limits={"nvidia.com/gpu": 1}))
    assert run.node_of("plain-1") == "n" and run.node_of("plain-2") is None
    assert run.state.nodes["n"].used("nvidia.com/gpu") == 2
    # once the holder is gone the ghost goes too, and the GPU count is free again
    holder = run.state.pod_by_key("default/holder")
    assert holder is not None
    run.feed(b.event("DELETED", b.pod("holder", limits={"class.tessera.dev/v100": 1})))
    assert held not in run.state.devices
    assert run.node_of("plain-2") == "n"


def test_device_counts_show_gpus_held_by_plain_count_requests_as_allocated() -> None:
    """A new user's trial: 12 GPUs held by `nvidia.com/gpu: 4` pods, yet the metrics said all 32
    free. A count request takes the GPUs a node counts beyond its devices first, then its devices."""
    run = Run(config(BINPACK))
    run.add(b.node("a", gpus=4), b.node("b", gpus=5))  # b counts one GPU it has no device for
    run.add(*[b.device(node, i) for node in ("a", "b") for i in range(4)])
    run.add(b.pod("three", node_name="a", phase="Running", limits={"nvidia.com/gpu": 3}),
            b.pod("two", node_name="b", phase="Running", limits={"nvidia.com/gpu": 2}))
    view = build_view(run.scheduler, source="simulate", now=0.0)
    assert Counter(m.counted_as(gpu.state, node.cordoned) for node in view.nodes for gpu in node.gpus) == {
        m.FREE: 4, m.COUNTED: 5}  # b's GPU without a device first: one of b's devices is counted
    assert (view.summary.used, view.summary.free) == (5, 4)


def test_a_class_that_matches_no_device_says_so_and_is_retried_when_one_appears() -> None:
    """A new user's trial: a class for A100s on a V100-only cluster read "4 Insufficient
    class.tessera.dev/a100-80g", as if the A100s were busy."""
    run = Run(config(BINPACK))
    _cluster(run)
    run.add(b.resource_class("a100-80g", match_labels={"model": "A100"}))
    run.add(b.pod("wants-a100", limits={"class.tessera.dev/a100-80g": 1}))
    assert run.last("wants-a100").message == (
        "0/2 nodes are available: ResourceClass a100-80g matches no device in the cluster. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.")
    run.add(b.node("c", gpus=1), b.device("c", 0, model="A100", memory="80Gi"))
    assert run.node_of("wants-a100") == "c"


def _overcommit_message(node: str, used: int, capacity: int) -> str:
    return (f"GPUsOvercommitted: node {node} has {used} nvidia.com/gpu in use but only {capacity} allocatable "
            "(pods of other schedulers count plain nvidia.com/gpu requests; the GPUs Tessera's classes hand out "
            "are the same GPUs): schedule every GPU pod on this node with Tessera")


def _theirs(name: str, gpus: int, node: str = "n") -> dict:  # type: ignore[type-arg]
    return b.pod(name, node_name=node, phase="Running", limits={"nvidia.com/gpu": gpus},
                 spec_extra={"schedulerName": "default-scheduler"})


def test_gpus_overcommitted_by_another_scheduler_are_reported_once_per_crossing() -> None:
    """A new user's trial: kube-scheduler put a `nvidia.com/gpu: 2` pod on a 4-GPU node where
    Tessera had given three GPUs by class (kube-scheduler does not count class requests), and
    nothing said the node now claimed five GPUs. Tessera cannot stop another scheduler, but it says
    so on the pod that took the node over, once per crossing."""
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=4), *[b.device("n", i) for i in range(4)])
    run.add(b.resource_class("v100", match_labels={"model": "V100"}))
    run.add(b.pod("cls", limits={"class.tessera.dev/v100": 3}))
    assert run.node_of("cls") == "n" and not run.notices()
    run.add(_theirs("one", 1))
    assert not run.notices()  # exactly full: 4 of 4
    run.add(_theirs("plain", 2))
    assert run.notices() == [_overcommit_message("n", 6, 4)]
    assert run.replay.stats.notices[-1].key == "default/plain"
    run.add(_theirs("more", 1))  # still over: said already
    assert len(run.notices()) == 1
    for name in ("plain", "more"):
        run.feed(b.event("DELETED", run.replay.pods[run.state.pod_by_key(f"default/{name}").uid]))
    run.add(_theirs("again", 2))  # back to 4 of 4, then over again: a new crossing
    assert run.notices()[1:] == [_overcommit_message("n", 6, 4)]


def test_an_overcommit_by_tessera_pods_alone_does_not_blame_other_schedulers() -> None:
    """Adversary round 4: every pod on the over-full node was Tessera's (a deposed leader's late
    Binding beside the new leader's), yet the Warning said pods of other schedulers count plain
    requests and told the user to schedule every GPU pod with Tessera, which they did. With only
    Tessera's pods on the node it says a Binding Tessera did not decide took GPUs already given, or
    a count cut it did not see (a review: a listing after a restart cannot tell the two apart)."""
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=2), *[b.device("n", i) for i in range(2)])
    for name in ("a", "b", "c"):  # bound by hand (or by an earlier leader), all named tessera
        run.add(b.pod(name, node_name="n", phase="Running", limits={"nvidia.com/gpu": 1}))
    [notice] = run.notices()
    assert notice == ("GPUsOvercommitted: node n has 3 nvidia.com/gpu in use but only 2 allocatable, every pod "
                      "on it Tessera's: its count was cut below what its pods use (the Node's allocatable edited, "
                      "or its device plugin reporting fewer GPUs), or a Binding Tessera did not decide (a pod bound "
                      "by hand, or an earlier leader's late Binding) took GPUs already given out")
    assert "other schedulers" not in notice


def test_the_class_pod_that_crosses_is_named_whatever_the_order() -> None:
    """Review: the class pod's own devices were not counted yet when the check ran, so plain pods
    first (a restart lists pods in any order) and then the class pod said nothing."""
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=4), *[b.device("n", i) for i in range(4)])
    run.add(b.resource_class("v100", match_labels={"model": "V100"}))
    first = Run(config(BINPACK))
    first.add(b.node("n", gpus=4), *[b.device("n", i) for i in range(4)])
    first.add(b.resource_class("v100", match_labels={"model": "V100"}))
    first.add(b.pod("cls", limits={"class.tessera.dev/v100": 3}))
    bound = b.pod("cls", limits={"class.tessera.dev/v100": 3}, node_name="n", phase="Running",
                  annotations=first.last("cls").annotations)
    run.add(_theirs("plain", 2))
    run.add(bound)
    assert run.notices() == [_overcommit_message("n", 5, 4)]
    assert run.replay.stats.notices[-1].key == "default/cls"


def test_a_node_found_overcommitted_when_it_arrives_after_its_pods_is_named() -> None:
    """Review: pods listed before their Node (informers run side by side at start-up) were never
    checked again; the Node gets the Warning then."""
    run = Run(config(BINPACK))
    run.add(_theirs("plain", 3), _theirs("more", 2))
    run.add(*[b.device("n", i) for i in range(4)])
    assert not run.notices()  # no Node yet: no capacity to compare with
    run.add(b.node("n", gpus=4))
    assert run.notices() == [_overcommit_message("n", 5, 4)]
    assert (run.replay.stats.notices[-1].kind, run.replay.stats.notices[-1].key) == ("Node", "n")


def _class_error(objects: list[dict[str, object]]) -> str | None:
    from scheduler.core.scheduler import Scheduler
    core = Scheduler(config(BINPACK))
    for obj in objects:
        core.apply("ADDED", obj, 0.0)
    return core.state.classes.error_of("gpu")


def test_the_class_names_tesseras_agent_advertises_never_refuse_the_class_whatever_the_order() -> None:
    """Regression: Tessera's agent advertises each class's resourceName on its Node (the device
    plugin's count); a replica that listed the Nodes before the ResourceClasses (a restart: the
    informers list concurrently) refused every such class as 'advertised by a device plugin'."""
    name = "class.tessera.dev/gpu"
    cls = b.resource_class("gpu", match_labels={"model": "V100"})
    node, device = b.node("n", extra={name: "4"}), b.device("n", 0)
    for order in ((node, device, cls), (cls, node, device), (node, cls, device), (device, node, cls)):
        assert _class_error(list(order)) is None, order


def test_a_class_taking_a_name_another_device_plugin_advertises_is_refused_whichever_came_first() -> None:
    """A node no Tessera agent serves (no ExtendedResource) advertising the name: refused, in any
    order (the verdict used to depend on whether the class or the node came first), and valid
    again once no such node advertises it."""
    name = "example.com/gpu"
    cls = b.resource_class("gpu", match_labels={"model": "V100"}, resource_name=name)
    foreign, served = b.node("plain", extra={name: "4"}), b.node("n")
    device = b.device("n", 0)
    for order in ((foreign, served, device, cls), (cls, served, device, foreign)):
        assert _class_error(list(order)) is not None, order
    run = Run(config(BINPACK))
    run.add(cls, foreign, served, device)
    assert run.state.classes.error_of("gpu") is not None
    run.feed(b.event("MODIFIED", b.node("plain")))  # that device plugin is gone
    assert run.state.classes.error_of("gpu") is None
    run.add(b.pod("ours", limits={name: 1}))
    assert run.node_of("ours") == "n"


def test_a_selector_key_that_is_no_label_key_makes_the_class_invalid() -> None:
    """`selector.matchLabels: {"Not A/Valid Label!!": x}` got Valid=True (and selected nothing, silently):
    the apiserver refuses such a key in any label selector (apimachinery ValidateLabelName, one
    `Invalid value` per key), so the class is Valid=False with the apiserver's field path, the key
    and why (names.py `label_key_problem`), with the InvalidResourceClass Warning; the same for a
    matchExpressions key. A valid class beside them is untouched."""
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=1), b.device("n", 0))
    run.add(b.resource_class("labels", match_labels={"Not A/Valid Label!!": "x"}),
            b.resource_class("expr", expressions=[{"key": "model/", "operator": "Exists"}]),
            b.resource_class("fine", match_labels={"model": "V100"}))
    statuses = {s.name: s for s in run.scheduler.class_statuses()}
    assert statuses["labels"].valid is False
    assert statuses["labels"].message == (
        'spec.selector.matchLabels: Invalid value: "Not A/Valid Label!!": prefix part must be a lowercase DNS '
        "subdomain (a label key such as topology.kubernetes.io/zone)")
    assert statuses["expr"].valid is False
    assert statuses["expr"].message.startswith('spec.selector.matchExpressions[0].key: Invalid value: "model/": '
                                               "name part must be")
    assert statuses["fine"].valid is True
    notes = run.notices()
    assert f"InvalidResourceClass: ResourceClass labels is not valid: {statuses['labels'].message}" in notes
    assert f"InvalidResourceClass: ResourceClass expr is not valid: {statuses['expr'].message}" in notes
    assert not any("ResourceClass fine" in n for n in notes)
    run.add(b.pod("p", limits={"class.tessera.dev/labels": 1}))
    assert run.last("p").message.startswith("0/1 nodes are available: ResourceClass labels is not valid: spec.selector")
