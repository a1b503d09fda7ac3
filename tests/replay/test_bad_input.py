"""Bad input never stops the stream: each gets a message, the rest is scheduled."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson

from scheduler.core import annotations as ann
from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, config


def test_malformed_objects_and_quantities_are_reported_and_skipped() -> None:
    run = Run(config(BINPACK))
    bad_node = b.node("bad-node")
    bad_node["status"]["allocatable"]["cpu"] = "lots"
    bad_pod = b.pod("bad-qty", limits={"nvidia.com/gpu": 1})
    bad_pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1.5.2"
    weird = b.pod("weird")
    weird["spec"]["containers"] = "not-a-list"
    run.add(bad_node, b.node("good", gpus=1), bad_pod, weird, b.pod("fine", limits={"nvidia.com/gpu": 1}))
    run.feed({"type": "ADDED", "object": {"kind": "Widget", "metadata": {"name": "w"}}},
             {"type": "EXPLODED", "object": b.pod("x")},
             {"type": "ADDED", "object": {"kind": "Pod"}})
    notes = run.notices()
    assert any("Node bad-node: Node.status.allocatable[cpu]" in n for n in notes)
    assert any("Pod default/bad-qty: Pod.spec.containers[0].resources.limits[nvidia.com/gpu]" in n for n in notes)
    assert any("Pod default/weird: Pod.spec.containers: expected a list" in n for n in notes)
    assert any("unknown kind 'Widget'" in n for n in notes)
    assert any("unknown event type 'EXPLODED'" in n for n in notes)
    assert any("Pod.metadata.name: Required value" in n for n in notes)
    assert run.node_of("fine") == "good"


def test_an_object_without_a_name_is_named_so_in_its_notice() -> None:
    """A new user's trial read `InvalidObject: Pod : Pod.metadata.name: Required value`: the
    object's key, empty, left a stray space before the colon (and a namespaced one `Pod team-a/:`)."""
    run = Run(config(BINPACK))
    run.feed({"type": "ADDED", "object": {"kind": "Pod"}},
             {"type": "ADDED", "object": {"kind": "Pod", "metadata": {"namespace": "team-a"}}})
    assert run.notices() == [
        "InvalidObject: Pod without a name: Pod.metadata.name: Required value",
        "InvalidObject: Pod without a name in namespace team-a: Pod.metadata.name: Required value"]


def test_absurd_quantities_do_not_overflow_or_overcommit() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=4))
    run.add(b.pod("huge", limits={"nvidia.com/gpu": "9999999999999"}), b.pod("neg", requests={"cpu": "-1"}),
            b.pod("exp", requests={"cpu": "1e999999"}))
    assert run.node_of("huge") is None
    assert run.last("huge").message == ("0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
                                        " preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")
    assert any("must be greater than or equal to 0" in n for n in run.notices())
    assert any("exponent out of range" in n for n in run.notices())


def test_a_quantity_beyond_what_is_counted_says_the_limit() -> None:
    """A researcher's trial read `'9223372036854775807' is too large` and could not tell what is."""
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=4))
    run.add(b.pod("max", limits={"nvidia.com/gpu": "9223372036854775807"}),
            b.pod("cores", requests={"cpu": "9223372036854775807"}))
    notes = run.notices()
    assert any('"9223372036854775807" is too large: at most 2^62 (4611686018427387904) are counted' in n
               for n in notes), notes
    assert any("is too large: at most 2^62 millicores (4611686018427387 cores) are counted" in n for n in notes), notes


def test_a_tiny_sharing_unit_or_a_huge_device_capacity_does_not_crash_the_cycle() -> None:
    """A review found both raising OverflowError in every cycle of every device pod (the free
    slices of a class were written into an int64 column as ceil(free / unit)), which ended the live
    loop — again after every restart, until the object was fixed."""
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=1), b.device("n", 0),
            b.resource_class("slice", match_labels={"model": "V100"}, sharing={"dimension": "memory", "unit": "1n"}),
            b.resource_class("v100", match_labels={"model": "V100"}))
    run.add(b.pod("p", limits={"class.tessera.dev/v100": 1}))  # another class's pod: crashed as well
    assert run.node_of("p") == "n"

    huge = Run(config(BINPACK))
    device = b.device("n", 0)
    device["spec"]["capacity"] = {"memory": "100Ei"}
    huge.add(b.node("n", gpus=1), device,
             b.resource_class("slice", match_labels={"model": "V100"}, sharing={"dimension": "memory", "unit": "1"}))
    huge.add(b.pod("p", limits={"class.tessera.dev/slice": 1}))
    assert huge.node_of("p") == "n"


def test_repeated_and_out_of_order_events_are_idempotent() -> None:
    run = Run(config(BINPACK))
    node = b.node("n", gpus=2)
    bound = b.pod("bound", limits={"nvidia.com/gpu": 1}, node_name="n", phase="Running")
    bound["metadata"]["resourceVersion"] = "10"
    run.feed(b.event("MODIFIED", bound), b.event("ADDED", bound), b.event("ADDED", bound))  # MODIFIED before ADDED
    run.feed(b.event("ADDED", node), b.event("MODIFIED", node), b.event("ADDED", node))
    assert run.state.nodes["n"].used("nvidia.com/gpu") == 1
    assert len(run.state.nodes["n"].pods) == 1
    stale = b.pod("bound", limits={"nvidia.com/gpu": 2}, node_name="n", phase="Running")
    stale["metadata"]["resourceVersion"] = "9"
    run.feed(b.event("MODIFIED", stale))  # older resourceVersion: ignored
    assert run.state.nodes["n"].used("nvidia.com/gpu") == 1
    run.feed(b.event("DELETED", bound), b.event("DELETED", bound))
    late = b.pod("bound", limits={"nvidia.com/gpu": 1}, node_name="n", phase="Running")
    late["metadata"]["resourceVersion"] = "11"
    run.feed(b.event("MODIFIED", late))  # an event for a deleted uid is ignored
    assert run.state.nodes["n"].used("nvidia.com/gpu") == 0
    run.feed(b.event("DELETED", b.pod("never-seen")))
    run.add(b.pod("p", limits={"nvidia.com/gpu": 2}))
    assert run.node_of("p") == "n"


def test_corrupt_annotations_of_every_shape() -> None:
    shapes = ["", "[]", '{"version": 2, "containers": {}}', '{"version": 1, "containers": []}',
              '{"version": 1, "containers": {"c": {"r": []}}}', '{"version": 1, "containers": {"c": {"r": [{"id": 1}]}}}',
              '{"version": 1, "containers": {"c": {"r": [{"id": "a", "device": "d", "amount": "-1"}]}}}']
    for raw in shapes:
        run = Run(config(BINPACK))
        run.add(b.node("n", gpus=1), b.pod("old", node_name="n", phase="Running", annotations={ann.DEVICES: raw}))
        assert any("BrokenDeviceAnnotation" in n for n in run.notices()), raw
        assert run.state.nodes["n"].broken


def test_double_exclusive_assignment_is_reported_and_counted() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=2), b.device("n", 0), b.device("n", 1), b.resource_class("v", match_labels={"model": "V100"}))
    device = next(iter(run.state.devices.values()))
    value = ann.encode_devices({"main": {"class.tessera.dev/v": (ann.DeviceGrant(device.device_id, device.name, None),)}})
    run.add(b.pod("a", node_name="n", phase="Running", annotations={ann.DEVICES: value}),
            b.pod("b", node_name="n", phase="Running", annotations={ann.DEVICES: value}))
    # a platform engineer's trial: the notice (the log line input.invalid and the Event) named only
    # the pod charged second; it names the one that held the device too
    [conflict] = [n for n in run.notices() if n.startswith("DeviceConflict")]
    assert conflict == (f"DeviceConflict: device {device.name} is assigned to more than one pod exclusively: "
                        "default/b, and default/a that holds it"), conflict
    run.add(b.pod("c", limits={"class.tessera.dev/v": 1}), b.pod("d", limits={"class.tessera.dev/v": 1}))
    assert run.node_of("c") == "n" and run.node_of("d") is None


def test_simulate_cli_reports_bad_lines_and_bad_config(tmp_path: Path) -> None:
    events = tmp_path / "e.jsonl"
    lines = [orjson.dumps(b.event("ADDED", b.node("n", gpus=1))), b"{oops", b'{"type": "ADDED"}',
             orjson.dumps(b.event("ADDED", b.pod("p", limits={"nvidia.com/gpu": 1})))]
    events.write_bytes(b"\n".join(lines) + b"\n")
    out = subprocess.run([sys.executable, "-m", "scheduler", "simulate", str(events)], capture_output=True, text=True)
    assert out.returncode == 0
    assert orjson.loads(out.stdout.splitlines()[0]) == {"pod": "default/p", "node": "n", "annotations": {}, "message": ""}
    assert "line 2: not JSON" in out.stderr and "line 3: not a watch event" in out.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\npercentageOfNodesToScore: 120\n")
    out = subprocess.run([sys.executable, "-m", "scheduler", "simulate", str(events), "--config", str(bad)],
                         capture_output=True, text=True)
    assert out.returncode != 0
    assert "percentageOfNodesToScore" in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_an_unreadable_podgroup_deleted_without_api_version_removes_the_one_held_under_its_name() -> None:
    """Found by the fuzz harness: the DELETED event's last state (minMember 0, no apiVersion) does
    not parse; what is held under that name (a scheduler-plugins PodGroup) must still go."""
    run = Run(config(BINPACK))
    run.add(b.podgroup("g1", 1, namespace="team-a"))
    broken = b.podgroup("g1", 0, namespace="team-a")
    broken["apiVersion"] = None
    run.feed(b.event("DELETED", broken))
    assert run.state.gangs.podgroups == {}


def _simulate(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "scheduler", "simulate", *argv], capture_output=True, text=True)


def test_simulate_of_a_file_without_watch_events_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """Regression (review): a YAML manifest or pretty-printed JSON gave one error per line (228 for
    the demo, pretty-printed), an empty table and exit 0."""
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps([b.event("ADDED", b.node("n", gpus=1))], indent=2))
    for path in (pretty, Path("deploy/examples/gang-job.yaml")):
        out = _simulate(str(path))
        assert out.returncode == 2
        assert out.stderr.count("\n") == 1 and "contains no watch events" in out.stderr, out.stderr


def test_simulate_lists_the_first_unreadable_lines_and_counts_the_rest(tmp_path: Path) -> None:
    events = tmp_path / "e.jsonl"
    events.write_bytes(b"\n".join([orjson.dumps(b.event("ADDED", b.node("n", gpus=1)))] + [b"{oops"] * 25) + b"\n")
    out = _simulate(str(events))
    assert out.returncode == 0
    assert out.stderr.count("not JSON") == 10 and "15 more unreadable lines" in out.stderr


def test_simulate_reads_past_a_byte_order_mark(tmp_path: Path) -> None:
    events = tmp_path / "e.jsonl"
    events.write_bytes(b"\xef\xbb\xbf" + orjson.dumps(b.event("ADDED", b.node("n", gpus=1))) + b"\n"
                       + orjson.dumps(b.event("ADDED", b.pod("p", limits={"nvidia.com/gpu": 1}))) + b"\n")
    out = _simulate(str(events))
    assert out.returncode == 0 and orjson.loads(out.stdout.splitlines()[0])["node"] == "n", out.stderr


def test_simulate_into_a_closed_pipe_ends_quietly() -> None:
    """Regression (review): `simulate X | head -1` said `cannot read X: Broken pipe`."""
    out = subprocess.run(["bash", "-c", f"set -o pipefail; {sys.executable} -m scheduler simulate "
                          "examples/preemption.jsonl | true"],  # the reader is gone before the first line
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "cannot read" not in out.stderr and "Traceback" not in out.stderr and "Exception" not in out.stderr


def test_a_bound_pod_whose_scheduler_name_is_not_a_string_does_not_crash_the_replay() -> None:
    """Found by the property tests (corrupted input): the replay's check for the live scheduler's
    Bindings looked schedulerName up in a set and raised on a list."""
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=1), b.pod("p", limits={"nvidia.com/gpu": 1}))
    bound = copy.deepcopy(run.replay.pods[run.state.pod_by_key("default/p").uid])
    bound["spec"]["schedulerName"] = []
    run.feed(b.event("MODIFIED", bound))
    assert any("InvalidObject" in notice for notice in run.notices())


def _bound_then_stripped(*removed: str) -> tuple[Run, dict[str, Any]]:
    """`p` is bound by Tessera to the node's one GPU and runs; then its devices annotation is
    removed (a hand edit, a tool that rewrites annotations). Returns the run and p as it is now."""
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=1), b.device("n", 0), b.resource_class("whole", match_labels={"model": "V100"}))
    run.add(b.pod("p", limits={"class.tessera.dev/whole": 1}))
    assert run.node_of("p") == "n"
    stripped = copy.deepcopy(run.replay.pods[run.state.pod_by_key("default/p").uid])
    for name in removed:
        stripped["metadata"]["annotations"].pop(name)
    stripped["status"]["phase"] = "Running"
    run.feed(b.event("MODIFIED", stripped))
    return run, stripped


def test_a_bound_pod_whose_devices_annotation_is_removed_keeps_its_node_out_of_device_scheduling() -> None:
    """The pod still has the GPU it was given, but which one is no longer written anywhere: the
    node is taken out of device scheduling (fail closed, as for an unreadable annotation) with a
    Warning saying why, until the annotation is back or the pod is gone — never given twice."""
    run, stripped = _bound_then_stripped(ann.DEVICES)
    assert run.state.nodes["n"].broken
    assert any(n.startswith("BrokenDeviceAnnotation: ") and ann.DEVICES in n and "is missing" in n
               for n in run.notices()), run.notices()
    run.add(b.pod("q", limits={"class.tessera.dev/whole": 1}))
    assert run.node_of("q") is None
    stripped["status"]["phase"] = "Succeeded"
    run.feed(b.event("MODIFIED", stripped))
    assert run.node_of("q") == "n"


def test_a_restart_reads_a_stripped_annotation_the_same_way() -> None:
    """A fresh core listing the stripped pod fails closed the same way: the verdict comes from the
    pod object alone, whatever order the listing has."""
    _, stripped = _bound_then_stripped(ann.DEVICES)
    for order in (1, -1):
        run = Run(config(BINPACK))
        objects = [b.node("n", gpus=1), b.device("n", 0), b.resource_class("whole", match_labels={"model": "V100"}),
                   stripped][::order]
        run.add(*objects)
        assert run.state.nodes["n"].broken
        run.add(b.pod("q", limits={"class.tessera.dev/whole": 1}))
        assert run.node_of("q") is None


def test_a_devices_annotation_copied_onto_a_pending_pod_is_overwritten_by_a_binding_that_grants_none() -> None:
    """Found by tests/property/test_bindings_in_flight.py: a pod created with a `tessera.dev/devices`
    annotation (a manifest copied from a bound pod's YAML) that asks for no class device — a plain
    `nvidia.com/gpu: 1` — was bound with that annotation left as it was (a Binding adds annotations,
    it removes none): bound, the pod held the GPU it names, which the core had given another pod."""
    run = Run(config(BINPACK))
    gpus = [b.device("n", i) for i in range(2)]
    run.add(b.node("n", gpus=2), *gpus, b.resource_class("v100", match_labels={"model": "V100"}))
    copied = orjson.dumps({"containers": {"main": {"class.tessera.dev/v100": [
        {"device": gpus[0]["metadata"]["name"], "id": gpus[0]["spec"]["deviceID"]}]}}, "version": 1}).decode()
    [plain] = run.add(b.pod("plain", limits={"nvidia.com/gpu": 1}, annotations={ann.DEVICES: copied}))
    assert plain.node == "n" and ann.decode_devices(plain.annotations[ann.DEVICES]) == {}
    [whole, other] = run.add(*(b.pod(f"whole{i}", limits={"class.tessera.dev/v100": 1}) for i in range(2)))
    given = {grant.device for attempt in (whole, other) if attempt.node
             for grant in ann.decode_devices(attempt.annotations[ann.DEVICES])["main"]["class.tessera.dev/v100"]}
    assert len(given) == 1  # one GPU left beside the plain pod's (its count, not the copied name)
    assert not [notice for notice in run.notices() if "DeviceConflict" in notice]
    bound = run.state.pod_by_key("default/plain")
    assert bound is not None and bound.devices == {}


def test_a_resource_class_deleted_with_an_unreadable_last_state_does_not_come_back() -> None:
    """A ResourceClass DELETED event whose last state does not parse removed the class but kept
    its spec among those judged again when nodes advertising its resourceName come and go: the
    deleted class came back (as invalid while such a node existed, valid once it left)."""
    run = Run(config(BINPACK))
    run.add(b.resource_class("ex", match_labels={"model": "X"}, resource_name="example.com/gpu"))
    assert "ex" in run.state.classes.classes
    broken = b.resource_class("ex", match_labels={"model": "X"}, resource_name="example.com/gpu")
    broken["spec"] = "garbage"
    run.feed(b.event("DELETED", broken))
    assert "ex" not in run.state.classes.classes
    advertising = b.node("other", extra={"example.com/gpu": "1"})
    run.add(advertising)
    run.feed(b.event("DELETED", advertising))
    assert "ex" not in run.state.classes.classes


def test_a_fractional_extended_resource_is_refused_as_the_apiserver_does() -> None:
    """A capacity planner's trial: `nvidia.com/gpu: "0.5"` and `"500m"` were each given a whole
    GPU by `tessera simulate`. The apiserver refuses a non-integer quantity of an extended
    resource (validateResourceQuantityValue: "must be an integer"), in a pod or a node's status,
    so a replay must not schedule one. An integer quantity written with a suffix (a slice class's
    `8Gi`, `1k`) is fine, and CPU and memory may be fractional."""
    run = Run(config(BINPACK))
    half_node = b.node("half-node", gpus=1)
    half_node["status"]["allocatable"]["example.com/fpga"] = "1.5"
    node = b.node("n", gpus=1)
    node["status"]["allocatable"]["example.com/mem"] = "16Gi"
    run.add(node, half_node)
    run.add(b.pod("half-a", limits={"nvidia.com/gpu": "0.5"}),
            b.pod("half-b", requests={"nvidia.com/gpu": "500m"}),
            b.pod("fine", requests={"cpu": "0.5", "memory": "1.5Gi", "example.com/mem": "8Gi"},
                  limits={"nvidia.com/gpu": "1"}))
    notes = run.notices()
    assert ('InvalidObject: Pod default/half-a: Pod.spec.containers[0].resources.limits[nvidia.com/gpu]: '
            'Invalid value: "0.5": must be an integer') in notes, notes
    assert ('InvalidObject: Pod default/half-b: Pod.spec.containers[0].resources.requests[nvidia.com/gpu]: '
            'Invalid value: "500m": must be an integer') in notes, notes
    assert ('InvalidObject: Node half-node: Node.status.allocatable[example.com/fpga]: '
            'Invalid value: "1.5": must be an integer') in notes, notes
    assert run.state.pod_by_key("default/half-a") is None and run.state.pod_by_key("default/half-b") is None
    assert "half-node" not in run.state.nodes
    assert run.node_of("fine") == "n"
