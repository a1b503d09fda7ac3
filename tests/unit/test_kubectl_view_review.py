"""`kubectl tessera` (scheduler/kubectl/) and the cluster view / GPU map (scheduler/view/): cases a review found.

Each failed before its fix, for the reason its docstring gives.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest

from scheduler.core import annotations as ann
from scheduler.core.scheduler import Scheduler
from scheduler.kube.snapshot import ClusterListing
from scheduler.kubectl import cli
from scheduler.kubectl import explain as explaining
from scheduler.kubectl import whatif
from scheduler.sim import builders as b
from scheduler.sim.snapshot import load
from scheduler.view import model as m
from scheduler.view.cluster import build_view
from tests.helpers import config

REPO = Path(__file__).resolve().parents[2]
V100 = "class.tessera.dev/v100"


def _drain(core: Scheduler, now: float = 0.0) -> list[Any]:
    out = []
    while (attempts := core.schedule_next(now)) is not None:
        out += attempts
    return out


def _node_gpus(view: m.ClusterView, name: str) -> tuple[m.GpuView, ...]:
    return next(node for node in view.nodes if node.name == name).gpus


# --- the GPU map: what the core holds for a nominated preemptor ------------------------------------


def test_gpu_map_shows_gpus_a_nominated_preemptor_holds_as_free() -> None:
    """The live page (`build_view` over the running core) shows GPUs as free that the core has
    reserved for a nominated preemptor (`ClusterState.holds`: charged into `NodeInfo.requested`),
    and refuses to give to a lower-priority pod. A platform engineer sees "2 free" on n1 next to
    a 1-GPU pod that is "Insufficient nvidia.com/gpu" there. (The view's counted holders once
    walked only `info.pods`, the placements, never the holds.)"""
    core = Scheduler(config())
    load(core, [b.node("n1", gpus=4),
                b.pod("victim", node_name="n1", phase="Running", limits={"nvidia.com/gpu": 2}, priority=0),
                b.pod("boss", limits={"nvidia.com/gpu": 4}, priority=1000)], 0.0)
    [boss] = _drain(core)
    assert boss.node is None and boss.nominated_node == "n1" and [v.key for v in boss.preempted] == ["default/victim"]
    # the victim is still terminating: the core holds the node's room for boss meanwhile
    core.apply("ADDED", b.pod("small", limits={"nvidia.com/gpu": 1}, priority=0), 1.0)
    [small] = _drain(core, 1.0)
    assert small.node is None and "Insufficient nvidia.com/gpu" in small.message  # the core: nothing free on n1

    view = build_view(core, source="live", now=1.0, held=core.held())
    free = [gpu.index for gpu in _node_gpus(view, "n1") if gpu.state == m.FREE]
    assert free == [], (f"the map shows GPUs {free} of n1 free (summary: {view.summary.line()}) while the core "
                        "refuses a 1-GPU pod there: they are held for the nominated default/boss")
    assert view.summary.free == 0


def test_gpu_map_marks_a_nominated_preemptors_held_device_as_bound() -> None:
    """A device the core holds for a nominated (still pending) preemptor is listed with that pod as
    an ordinary *bound* holder (`_status` falls through to `_bound_status`), next to the victim
    that really holds it: "default/boss, default/victim" on one whole GPU, while default/boss is
    also in the pending list. The holder status should say it is not bound (nominated / held
    for preemption), as `binding`, `held` and `terminating` do."""
    d0, d1 = b.device("n1", 0), b.device("n1", 1)
    grant = ann.DeviceGrant(d0["spec"]["deviceID"], d0["metadata"]["name"], None)
    victim = b.pod("victim", node_name="n1", phase="Running", limits={V100: 1}, priority=0,
                   annotations={ann.DEVICES: ann.encode_devices({"main": {V100: (grant,)}})})
    core = Scheduler(config())
    load(core, [b.node("n1", gpus=2), d0, d1, b.resource_class("v100", match_labels={"model": "V100"}), victim,
                b.pod("boss", limits={V100: 2}, priority=1000)], 0.0)
    [boss] = _drain(core)
    assert boss.node is None and boss.nominated_node == "n1"  # pending, nominated

    view = build_view(core, source="live", now=0.0, held=core.held())
    assert "default/boss" in {p.pod for p in view.pending}
    statuses = {h.status for gpu in _node_gpus(view, "n1") for h in gpu.holders if h.pod == "default/boss"}
    assert statuses and m.BOUND not in statuses, \
        f"pending default/boss is shown holding n1's GPUs as {statuses}: it is nominated, not bound"


# --- the GPU map: a counted GPU's holder while its Binding is out ------------------------------------


def test_counted_gpu_holder_is_marked_binding_like_a_device_holder() -> None:
    """docs/kubectl-tessera.md: a holder is marked `binding` on the live page while its Binding is on its way.
    For a device holder `_status` does that; for a plain `nvidia.com/gpu` request
    (`_counted_holders`) only `_bound_status` is asked, so an assumed pod (Binding out, e.g. an
    ambiguous answer being read back for up to 90 s) reads as bound."""
    core = Scheduler(config())
    load(core, [b.node("n1", gpus=2), b.device("n1", 0), b.resource_class("v100", match_labels={"model": "V100"}),
                b.pod("plain", limits={"nvidia.com/gpu": 1}), b.pod("cls", limits={V100: 1})], 0.0)
    _drain(core)
    assert all(placement.assumed for placement in core.state.placements.values())
    holders = {h.pod: h.status for gpu in _node_gpus(build_view(core, source="live", now=0.0), "n1")
               for h in gpu.holders}
    assert holders["default/cls"] == m.BINDING  # a device holder: said
    assert holders["default/plain"] == m.BINDING, f"counted holder shown as {holders['default/plain']!r}"


# --- malformed ExtendedResources -------------------------------------------------------------------


def test_a_device_index_that_isdigit_but_is_no_integer_does_not_crash_the_view() -> None:
    """`_device_order` tests `index.isdigit()` and then calls `int(index)`: a superscript digit
    (`"²"`, isdigit() is True, int() raises) in an ExtendedResource's `attributes.index` — an
    object the core accepts — makes `kubectl tessera nodes` print a traceback and `/gpu-map.json`
    answer 500. `str.isdecimal()` is the test int() agrees with."""
    device = b.device("n1", 0)
    device["spec"]["attributes"]["index"] = "²"
    core = Scheduler(config())
    notices = load(core, [b.node("n1", gpus=1), device], 0.0)
    assert not [n for n in notices if n.reason == "InvalidObject"]  # the core took it
    view = build_view(core, source="cluster", now=0.0)  # ValueError: invalid literal for int()
    assert len(_node_gpus(view, "n1")) == 1


# --- explain vs the core: a gang's preemption ------------------------------------------------------


def test_explain_a_gang_member_says_its_gang_preempts_for_it() -> None:
    """The core's dry run nominates *every* member of a preempting gang to the room the victims
    leave (the first member's attempt carries the victims, each member's attempt has
    `nominated_node`); the GPU map already shows such members as preempting
    (test_view_cluster.test_a_gang_member_nominated_by_its_gangs_preemption_...). `explain` drops
    `nominated_node` (DryRun has no field for it), so for the second member it prints only "would
    stay pending: ... Insufficient nvidia.com/gpu" — no preemption, no node — while the core (and
    `what-if`, which places both) decides the gang preempts default/low and goes to n1."""
    gang = [b.pod(f"w-{i}", limits={"nvidia.com/gpu": 2}, labels=b.gang_labels("w", 2), priority=1000)
            for i in range(2)]
    objs = [b.node("n1", gpus=4),
            b.pod("low", node_name="n1", phase="Running", limits={"nvidia.com/gpu": 4}, priority=0), *gang]
    core = Scheduler(config(), explain=True)
    load(core, objs, 0.0)
    decided = {a.pod.key: a for a in _drain(core)}
    assert decided["default/w-1"].nominated_node == "n1"  # the core: w-1 is nominated to n1
    assert [(o.pod, o.node) for o in whatif.what_if(objs, config(), 0.0).outcomes] == \
        [("default/w-0", "n1"), ("default/w-1", "n1")]

    result = explaining.explain(objs, "default/w-1", config(), [], 0.0)
    assert result is not None and result.dry_run is not None
    lines = explaining.render(result, 0.0).splitlines()
    verdict = lines[next(i for i, line in enumerate(lines) if line.startswith("Dry run through the core")) + 1]
    assert "default/low" in verdict or "n1" in verdict, f"explain w-1 says only: {verdict.strip()}"


# --- what-if vs the core: pending pods are pending together ----------------------------------------


def test_what_if_does_not_evict_a_pending_pod_or_hide_it() -> None:
    """Both pods are pending now. The core, given the listing, tries the higher-priority one first
    (PrioritySort): default/b-high goes to n1 and default/a-low stays pending. `what-if` feeds
    pending pods one at a time and drains the queue after each (Replay.run), so a-low (listed
    first) is placed, then b-high "preempts" it: the output says "Preemption would evict:
    default/a-low" — a pod that never ran — and leaves a-low out of the outcomes ("1 pending
    pod", although two are pending)."""
    objs = [b.node("n1", gpus=4), b.pod("a-low", limits={"nvidia.com/gpu": 4}, priority=0),
            b.pod("b-high", limits={"nvidia.com/gpu": 4}, priority=1000)]
    core = Scheduler(config())
    load(core, objs, 0.0)
    assert {a.pod.key: a.node for a in _drain(core)} == {"default/b-high": "n1", "default/a-low": None}

    result = whatif.what_if(objs, config(), 0.0)
    assert result.evicted == (), f"what-if evicts pending pods: {result.evicted}"
    assert [(o.pod, o.node) for o in result.outcomes] == [("default/a-low", ""), ("default/b-high", "n1")]


# --- the command: a closed stdout, a failed Events read ---------------------------------------------


def _kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(textwrap.dedent("""\
        apiVersion: v1
        kind: Config
        current-context: dev
        contexts: [{name: dev, context: {cluster: c, user: u}}]
        clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
        users: [{name: u, user: {token: t}}]
        """))
    return path


def test_kubectl_tessera_stops_quietly_when_its_reader_goes_away(tmp_path: Path) -> None:
    """`kubectl tessera nodes | grep -q ...` / `| head` on a large cluster: when the reader closes
    the pipe, the plugin dies with a BrokenPipeError traceback (cli._print writes with no
    guard). `tessera simulate` (scheduler/sim/cli.py) and `tessera record` stop quietly in the
    same case, as kubectl does."""
    script = textwrap.dedent(f"""\
        import sys
        from types import SimpleNamespace
        from scheduler.sim import builders as b
        from scheduler.kube.snapshot import ClusterListing
        import scheduler.kubectl.cli as c

        from scheduler.kube.http import Response

        class Api:
            async def close(self):
                pass

        async def no_config_map(method, path, **_):
            return Response(404, b"{{}}")

        async def listing(target, namespaces=()):
            return SimpleNamespace(api=Api(), request=no_config_map), ClusterListing([b.node("n%d" % i, gpus=8) for i in range(50)], [])

        c._listing = listing
        sys.exit(c.main(["nodes", "--kubeconfig", {str(_kubeconfig(tmp_path))!r}]))
        """)
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before anything is written
    stderr = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr


async def _close() -> None:
    return None


class _EventsFail:
    """The client after a good listing: the Events GET breaks (connection reset, timeout)."""

    api = SimpleNamespace(close=_close, configuration=SimpleNamespace(host="https://apiserver"))

    async def request(self, method: str, path: str, **_: Any) -> Any:
        raise aiohttp.ClientConnectionError("Connection reset by peer")


def test_explain_does_not_crash_when_the_events_cannot_be_read(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """`object_events` promises "[] when they cannot be read", but only a non-2xx answer gives [];
    a transport error (aiohttp.ClientError, the 30 s TimeoutError of an unpaged Events list in a
    busy namespace) escapes `_explain` and `main` as a traceback, after the listing succeeded.
    Either the explanation without Events or one `error: ...` line (exit 1) is expected."""
    objs = [b.node("n1", gpus=1), b.pod("p", limits={"nvidia.com/gpu": 1})]

    async def listing(target: Any, namespaces: Any = ()) -> Any:
        return _EventsFail(), ClusterListing(list(objs), [])

    monkeypatch.setattr(cli, "_listing", listing)
    try:
        status = cli.main(["explain", "p", "--kubeconfig", str(_kubeconfig(tmp_path))])
    except (aiohttp.ClientError, TimeoutError) as err:
        pytest.fail(f"kubectl tessera explain crashed with a traceback: {err!r}")
    assert status in (0, 1)


# --- explain / what-if: a new user's trial -------------------------------------------------------


def _v100_nodes(count: int, unhealthy: int = 0) -> list[dict[str, Any]]:
    """`count` nodes of 8 V100s (advertised as nvidia.com/gpu: 8, described by ExtendedResources),
    the first `unhealthy` devices of each node unhealthy; the ResourceClass v100 and its sharing
    twin v100-1g (1Gi slices of the 32Gi devices)."""
    objs: list[dict[str, Any]] = [b.resource_class("v100", match_labels={"model": "V100"}),
                                  b.resource_class("v100-1g", match_labels={"model": "V100"},
                                                   sharing={"dimension": "memory", "unit": "1Gi"})]
    for i in range(count):
        objs.append(b.node(f"n{i}", gpus=8))
        objs += [b.device(f"n{i}", j, healthy=j >= unhealthy) for j in range(8)]
    return objs


def test_explain_says_a_class_request_asks_for_more_devices_than_any_node_has() -> None:
    """A new user's trial: `class.tessera.dev/v100-32g: 9` on 8-GPU nodes read only "Insufficient";
    `_beyond_every_node` looked at plain resources alone. Only the devices a class request may
    take count: schedulable, healthy ones the class matches (one unhealthy GPU per node: 7)."""
    objs = [*_v100_nodes(2, unhealthy=1), b.pod("nine", limits={V100: 8}), b.pod("seven", limits={V100: 7}),
            b.pod("slices", limits={"class.tessera.dev/v100-1g": 33})]
    result = explaining.explain(objs, "default/nine", config(), [], 0.0)
    assert result is not None and result.dry_run is not None and result.dry_run.node == ""
    assert result.beyond_every_node == (f"8 {V100} (the most any node offers: 7)",)
    assert (f"  It asks for more than any node has, so it cannot fit anywhere as it is: 8 {V100} "
            "(the most any node offers: 7)") in explaining.render(result, 0.0)
    fits = explaining.explain(objs, "default/seven", config(), [], 0.0)
    assert fits is not None and fits.dry_run is not None and fits.dry_run.node and fits.beyond_every_node == ()
    # a container's slices go on one device: 33 slices of 1Gi never fit a 32Gi GPU
    sliced = explaining.explain(objs, "default/slices", config(), [], 0.0)
    assert sliced is not None and sliced.beyond_every_node == (
        "33 class.tessera.dev/v100-1g in container main (the most one device holds: 32)",)


def test_explain_says_a_class_gang_that_asks_for_more_devices_than_the_cluster_has_can_never_fit() -> None:
    """A new user's trial: a gang of five `class.tessera.dev/v100: 8` members (40 GPUs) on 32 GPUs
    got no "Its gang can never fit" line: `_beyond_the_cluster` summed plain requests only."""
    gang = [b.pod(f"w-{i}", limits={V100: 8}, labels=b.gang_labels("w", 5)) for i in range(5)]
    objs = [*_v100_nodes(4), *gang]
    line = (f"Its gang can never fit as the cluster is: its 5 members ask for 40 {V100} together, and the "
            "schedulable nodes' devices of ResourceClass v100 hold 32 in all.")
    for member in gang:
        result = explaining.explain(objs, f"default/{member['metadata']['name']}", config(), [], 0.0)
        assert result is not None and result.beyond_the_cluster == line
        assert f"  {line}" in explaining.render(result, 0.0)
    # slices: five members of 8 slices of 1Gi (40Gi) on one node of one healthy 32Gi GPU
    sliced = [b.pod(f"s-{i}", limits={"class.tessera.dev/v100-1g": 8}, labels=b.gang_labels("s", 5))
              for i in range(5)]
    result = explaining.explain([*_v100_nodes(1, unhealthy=7), *sliced], "default/s-0", config(), [], 0.0)
    assert result is not None and result.beyond_the_cluster == (
        "Its gang can never fit as the cluster is: its 5 members ask for 40 class.tessera.dev/v100-1g together, "
        "and the schedulable nodes' devices of ResourceClass v100-1g hold 32 in all.")
    # a class gang the cluster holds gets no such line
    small = [b.pod(f"f-{i}", limits={V100: 8}, labels=b.gang_labels("f", 4)) for i in range(4)]
    fits = explaining.explain([*_v100_nodes(4), *small], "default/f-1", config(), [], 0.0)
    assert fits is not None and fits.beyond_the_cluster == ""


def test_explain_tells_every_member_of_a_gang_that_can_never_fit() -> None:
    """A new user's trial: of five `nvidia.com/gpu: 8` members (minMember 5) on 32 GPUs, only one
    was told its gang can never fit; the line depends on the gang, not on the member asked about."""
    gang = [b.pod(f"w-{i}", limits={"nvidia.com/gpu": 8}, labels={"scheduling.x-k8s.io/pod-group": "w"})
            for i in range(5)]
    objs = [*(b.node(f"n{i}", gpus=8) for i in range(4)), b.podgroup("w", 5), *gang]
    for member in gang:
        result = explaining.explain(objs, f"default/{member['metadata']['name']}", config(), [], 0.0)
        assert result is not None
        assert ("Its gang can never fit as the cluster is: its 5 members ask for 40 nvidia.com/gpu together, "
                "and the schedulable nodes have 32 in all.") in explaining.render(result, 0.0), member["metadata"]


def test_explain_a_finished_preemption_victim_kept_by_a_finalizer_holds_no_devices() -> None:
    """A new user's trial: a preempted victim, Failed (terminal) but kept by a finalizer, read
    `Status: Failed on n1` and listed all 8 of its devices, 4 of which the preemptor is listed
    with: one GPU given to two pods, by the looks of it. The core releases a terminal pod's
    devices; explain says so, and says the deletion, the finalizer and the preemption."""
    devices = [b.device("n1", j) for j in range(8)]
    grants = [ann.DeviceGrant(d["spec"]["deviceID"], d["metadata"]["name"], None) for d in devices]
    victim = b.pod("victim", node_name="n1", phase="Failed", limits={V100: 8}, priority=0,
                   annotations={ann.DEVICES: ann.encode_devices({"main": {V100: tuple(grants)}})})
    victim["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z", finalizers=["example.com/keep"])
    victim["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                                       "message": "tessera: preempting to accommodate a higher priority pod"}]
    boss = b.pod("boss", node_name="n1", phase="Running", limits={V100: 4}, priority=1000,
                 annotations={ann.DEVICES: ann.encode_devices({"main": {V100: tuple(grants[:4])}})})
    objs = [b.node("n1", gpus=8), *devices, b.resource_class("v100", match_labels={"model": "V100"}), victim, boss]
    result = explaining.explain(objs, "default/victim", config(), [], 0.0)
    assert result is not None
    assert result.status == ("Failed on n1, preempted by tessera (being deleted; finalizers: example.com/keep; "
                             "a finished pod holds no devices)")
    assert result.devices == () and result.released == 8
    text = explaining.render(result, 0.0)
    assert "Devices:    released: the pod is Failed; its annotation names 8, which the scheduler counts free" in text
    assert "n1.gpu" not in text and "GPU-" not in text
    held = explaining.explain(objs, "default/boss", config(), [], 0.0)
    assert held is not None and len(held.devices) == 4 and held.released == 0


def test_what_if_says_the_pending_pods_of_other_schedulers() -> None:
    """A new user's trial: `what-if --config config/binpack.yaml` said "No pending pods to place"
    while three pods for another schedulerName were pending: nothing said the profile's name must
    match theirs."""
    objs = [b.node("n1", gpus=4), b.pod("a", scheduler="default-scheduler", limits={"nvidia.com/gpu": 1}),
            b.pod("b", scheduler="default-scheduler"), b.pod("c", scheduler="volcano"),
            b.pod("bound", scheduler="volcano", node_name="n1", phase="Running")]
    result = whatif.what_if(objs, config(), 0.0)
    assert result.outcomes == () and result.other_schedulers == {"default-scheduler": 2, "volcano": 1}
    assert whatif.render(result).splitlines()[:2] == [
        "No pending pods to place (configuration config/binpack.yaml; nothing was written).",
        "3 pending pods are for other schedulers (default-scheduler: 2, volcano: 1): the configuration's profiles "
        "schedule only pods whose spec.schedulerName is tessera."]
    assert whatif.as_dict(result)["other_schedulers"] == {"default-scheduler": 2, "volcano": 1}
    # with pods of its own too, the count follows the summary line; -n counts in that namespace only
    mixed = whatif.what_if([*objs, b.pod("mine", limits={"nvidia.com/gpu": 1})], config(), 0.0)
    assert "3 pending pods are for other schedulers" in whatif.render(mixed)
    assert whatif.what_if(objs, config(), 0.0, "other").other_schedulers == {}


def test_explain_names_the_resource_class_that_owns_or_claims_a_request() -> None:
    """A new user's trial: with a ResourceClass `any-gpu` on `resourceName: nvidia.com/gpu`, a plain
    1-GPU pod waited with `Insufficient nvidia.com/gpu` beside 8 free GPUs, and no view named the
    class. Now such a class is not valid (the devices carry the name) and explain says so, and
    that the request stays a plain count; a valid class that owns a plain-looking name is named
    as what serves the request, with how many devices it matches."""
    gpus = [b.device("n", i, model="T4", memory="16Gi") for i in range(8)]
    taken = b.resource_class("any-gpu", match_labels={"model": "A100"}, resource_name="nvidia.com/gpu")
    objs = [b.node("n", gpus=8), *gpus, taken, b.pod("p1", limits={"nvidia.com/gpu": 1})]
    result = explaining.explain(objs, "default/p1", config(), [], 0.0)
    assert result is not None and result.dry_run is not None and result.dry_run.node == "n"
    assert result.classes == (
        'nvidia.com/gpu: ResourceClass any-gpu names it but is not valid (spec.resourceName: Invalid value: '
        '"nvidia.com/gpu": ExtendedResources carry this resourceName as their own, so a plain request for it '
        "is a count of those devices; use a name of its own (without resourceName the class's is "
        "class.tessera.dev/any-gpu)): the request is a plain count of the node's GPUs",)
    assert f"  ResourceClasses: {result.classes[0]}" in explaining.render(result, 0.0)

    owned = b.resource_class("t4", match_labels={"model": "T4"}, resource_name="example.com/gpu")
    objs = [b.node("n", gpus=8), *gpus, owned, b.pod("p9", limits={"example.com/gpu": 9})]
    result = explaining.explain(objs, "default/p9", config(), [], 0.0)
    assert result is not None and result.dry_run is not None and result.dry_run.node == ""
    assert result.classes == ("example.com/gpu: a request of ResourceClass t4, served only by the 8 devices "
                              "it matches",)


def test_explain_lists_a_terminating_pod_holding_gpus_by_name_under_their_own_resource() -> None:
    """A pod bound with its GPU named under `nvidia.com/gpu` (a class owned the name then) counts
    that GPU once, not again as a request: being deleted, it still holds it, and explain says so."""
    device = b.device("n", 0)
    grant = {"main": {"nvidia.com/gpu": (ann.DeviceGrant(device["spec"]["deviceID"], device["metadata"]["name"],
                                                         None),)}}
    keeper = b.pod("keeper", limits={"nvidia.com/gpu": 1}, node_name="n", phase="Running",
                   annotations={ann.DEVICES: ann.encode_devices(grant), ann.PHASE: ann.PHASE_ALLOCATED})
    keeper["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z", finalizers=["example.com/keep"])
    objs = [b.node("n", gpus=1), device, keeper, b.pod("waiting", limits={"nvidia.com/gpu": 1})]
    result = explaining.explain(objs, "default/waiting", config(), [], 0.0)
    assert result is not None and result.dry_run is not None and result.dry_run.node == ""
    assert result.terminating == ("default/keeper on n (1 nvidia.com/gpu)",)
