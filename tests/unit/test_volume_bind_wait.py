"""VolumeBinding's PreBind waits, after its writes, until the watch shows the pod's claims bound
(upstream's BindPodVolumes → checkBindings, bindTimeoutSeconds): the Binding goes only then; a
claim the provisioner gave up on, a volume whose claimRef was reset, or the timeout decide the pod
again with upstream's message; the wait holds no in-flight slot, so other pods' Bindings go on."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import anyio
from structlog.testing import capture_logs
import pytest

from scheduler.api.config import load_config
from scheduler.api.config_model import ConfigError
from scheduler.core.framework.attempt import Attempt
from scheduler.core.plugins.volume_binding import BindingsChecked, check_bindings
from scheduler.core.volumes import ClaimBinding
from scheduler.kube.binder import Binder, Binding, BindResult, Outcome
from scheduler.kube.http import KubeHttp
from scheduler.kube.loop import SchedulerLoop
from scheduler.sim import builders as b
from tests.fakeapi import FakeApi
from tests.replay.test_volume_binding import claim, claimer, nodes, storage_class, volume
from tests.unit.test_volume_writes import PVC, _serve, _state_with

SELECTED = "volume.kubernetes.io/selected-node"
PROVISIONER = "volume.kubernetes.io/storage-provisioner"
BINDING = "/api/v1/namespaces/default/pods/train/binding"
PROVISIONED = (ClaimBinding("default/data", "", "1"),)


def _claim(version: str, **annotations: str) -> dict[str, Any]:
    """Claim default/data of the provisioner class at `version`, with these annotations (bound
    to pv-1 when they say bind-completed)."""
    obj = claim("data", volume="pv-1" if "pv.kubernetes.io/bind-completed" in annotations else "",
                storage_class="fast", bound=False)
    obj["metadata"].update(resourceVersion=version, annotations=dict(annotations))
    return obj


BOUND = {SELECTED: "a", PROVISIONER: "csi.example", "pv.kubernetes.io/bind-completed": "yes"}


def test_check_bindings_reads_upstreams_conditions() -> None:
    """checkBindings: waiting while the state holds the claim from before our write or unbound;
    bound once it is fully bound; the provisioner's reset of selected-node in upstream's two words."""
    run = _state_with(volume("pv-1", "a"), _claim("1"), claimer("train", "data"))
    uid = run.state.pod_by_key("default/train").uid

    def checked(*annotations: tuple[str, str], version: str = "3", written: str = "2") -> BindingsChecked:
        run.feed(b.event("MODIFIED", _claim(version, **dict(annotations))))
        return check_bindings(run.state, uid, PROVISIONED, "a", {"default/data": written})

    assert checked(version="1") == BindingsChecked()  # the watch has not brought our write yet
    assert checked((SELECTED, "a"), version="2") == BindingsChecked()  # provisioning
    assert checked(*BOUND.items()) == BindingsChecked(bound=True)
    assert checked((PROVISIONER, "csi.example")).failure == 'provisioning failed for PVC "data"'
    assert checked().failure == 'selectedNode annotation reset for PVC "data"'
    assert check_bindings(run.state, "gone", PROVISIONED, "a", {}) == BindingsChecked(pod_gone=True)


def test_check_bindings_fails_a_static_volume_whose_claim_ref_was_reset_or_that_is_gone() -> None:
    run = _state_with(volume("nvme-a", "a", storage_class="local"), claim("data", storage_class="local"),
                      claimer("train", "data"))
    uid = run.state.pod_by_key("default/train").uid
    given = (ClaimBinding("default/data", "nvme-a", "1"),)
    assert check_bindings(run.state, uid, given, "a", {"nvme-a": "1"}).failure == \
        'ClaimRef got reset for pv "nvme-a"'
    assert check_bindings(run.state, uid, given, "a", {"nvme-a": "2"}) == BindingsChecked()  # before our write
    assert check_bindings(run.state, uid, (ClaimBinding("default/data", "gone", "1"),), "a", {}).failure == \
        'failed to check binding: could not find v1.PersistentVolume "gone"'


def test_a_negative_bind_timeout_is_refused_in_upstreams_words(tmp_path: Any) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n"
                    "- pluginConfig:\n  - name: VolumeBinding\n    args: {bindTimeoutSeconds: -5}\n")
    with pytest.raises(ConfigError, match="args.bindTimeoutSeconds: Invalid value: -5: invalid BindTimeoutSeconds, "
                                          "should not be a negative value"):
        load_config(str(path))


def _loop(bind_timeout: int | None = None, tmp_path: Any = None) -> tuple[FakeApi, SchedulerLoop, list[BindResult]]:
    """A loop on a fake apiserver with node a, a provisioner class `fast`, claim default/data and
    pod default/train naming it; its Bindings' results are recorded (and handled by the loop)."""
    config = None
    if bind_timeout is not None:
        config = tmp_path / "config.yaml"
        config.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n"
                          "- pluginConfig:\n  - name: VolumeBinding\n"
                          f"    args: {{bindTimeoutSeconds: {bind_timeout}}}\n")
    api = FakeApi()
    api.handlers.append(_serve("1"))
    pod = claimer("train", "data")
    api.add_pod(pod)
    loop = SchedulerLoop(load_config(None if config is None else str(config)), KubeHttp(api),  # type: ignore[arg-type]
                         KubeHttp(api), identity="test")  # type: ignore[arg-type]
    for obj in (*nodes("a"), storage_class("fast", "WaitForFirstConsumer", provisioner="csi.example"),
                _claim("1"), pod):
        loop._on_event("ADDED", obj)
    results: list[BindResult] = []
    handled = loop.binder.on_result

    def record(result: BindResult) -> None:
        results.append(result)
        handled(result)
    loop.binder.on_result = record
    return api, loop, results


@asynccontextmanager
async def _binding_out(loop: SchedulerLoop, binding: Binding) -> AsyncIterator[None]:
    """The loop's binder running with `binding` submitted, for the block; stopped after it."""
    async with anyio.create_task_group() as group:
        await group.start(loop.binder.run)
        loop.binder.submit(binding)
        yield
        group.cancel_scope.cancel()


def _decided(loop: SchedulerLoop) -> Attempt:
    [attempt] = loop.core.schedule_next(0.0) or []
    assert attempt.node == "a" and attempt.claims == PROVISIONED
    return attempt


async def _until(condition: Any) -> None:
    with anyio.fail_after(5):
        while not condition():
            await anyio.sleep(0.01)


async def test_the_binding_is_sent_once_the_watch_shows_the_claim_bound() -> None:
    api, loop, results = _loop()
    binding = loop._binding(_decided(loop))
    async with _binding_out(loop, binding):
        await _until(lambda: api.of("PATCH", PVC))  # selected-node written (the claim at version 2)
        for version, annotations in (("2", {SELECTED: "a"}), ("3", {SELECTED: "a", PROVISIONER: "csi.example"})):
            loop._on_event("MODIFIED", _claim(version, **annotations))
            await anyio.sleep(0.05)
            assert not api.of("POST", "/binding") and not results  # provisioning: still waiting
        loop._on_event("ADDED", volume("pv-1", "a", storage_class="fast"))
        loop._on_event("MODIFIED", _claim("4", **BOUND))
        await _until(lambda: results)
    assert [r.outcome for r in results] == [Outcome.BOUND] and len(api.of("POST", BINDING)) == 1


async def test_the_wait_is_logged_when_it_begins_with_its_claims_node_and_timeout() -> None:
    """A user's trial: a pod waiting for its volumes (up to bindTimeoutSeconds, 600 s by default)
    left no log line, Event or condition until the wait ended; the only trace was a goroutines
    gauge. The wait's start is logged, naming what it waits for and how long it may."""
    api, loop, results = _loop()
    binding = loop._binding(_decided(loop))
    with capture_logs() as logs:
        async with _binding_out(loop, binding):
            await _until(lambda: any(entry["event"] == "binder.volumes_wait" for entry in logs))
    [entry] = [entry for entry in logs if entry["event"] == "binder.volumes_wait"]
    assert (entry["pod"], entry["node"], entry["claims"], entry["timeout_seconds"]) == (
        "default/train", "a", ["default/data"], 600)


async def test_a_claim_the_provisioner_gave_up_on_decides_the_pod_again() -> None:
    """The provisioner removes selected-node (it keeps its own annotation): upstream's "provisioning
    failed", no Binding, and the pod's assumption (its node, the claim's provisioning) released."""
    api, loop, results = _loop()
    binding = loop._binding(_decided(loop))
    async with _binding_out(loop, binding):
        await _until(lambda: api.of("PATCH", PVC))
        loop._on_event("MODIFIED", _claim("2", **{SELECTED: "a"}))
        loop._on_event("MODIFIED", _claim("3", **{PROVISIONER: "csi.example"}))
        await _until(lambda: results)
    (result,) = results
    assert result.outcome is Outcome.RETRY and result.refusal == (
        'running PreBind plugin "VolumeBinding": binding volumes: provisioning failed for PVC "data"')
    assert not api.of("POST", "/binding")
    assert loop.core.state.node_of(binding.uid) is None and loop.core.state.claims_provisioned == {}


async def test_the_timeout_decides_the_pod_again(tmp_path: Any) -> None:
    """bindTimeoutSeconds from the profile's VolumeBindingArgs: upstream's "context deadline exceeded"."""
    api, loop, results = _loop(bind_timeout=30, tmp_path=tmp_path)
    binding = loop._binding(_decided(loop))
    assert binding.bind_timeout == 30
    async with _binding_out(loop, replace(binding, bind_timeout=0.1)):
        await _until(lambda: results)
    assert results[0].refusal == 'running PreBind plugin "VolumeBinding": binding volumes: context deadline exceeded'
    assert not api.of("POST", "/binding") and loop.core.state.node_of(binding.uid) is None


async def test_losing_leadership_ends_the_wait() -> None:
    api, loop, results = _loop()
    leading = [True]
    loop.binder.term = lambda: 0 if leading[0] else None
    binding = loop._binding(_decided(loop))
    async with _binding_out(loop, binding):
        await _until(lambda: api.of("PATCH", PVC))
        await anyio.sleep(0.05)
        leading[0] = False
        loop.lost_leadership()
        await _until(lambda: results)
    assert results[0].not_leading and not api.of("POST", "/binding")


async def test_a_graceful_stop_gives_the_wait_up_so_the_drain_settles() -> None:
    """A Binding waiting for its claims has sent nothing: the drain must not wait bindTimeoutSeconds
    for it (the Lease would be left to expire instead of handed over)."""
    api, loop, results = _loop()
    async with _binding_out(loop, loop._binding(_decided(loop))):
        await _until(lambda: api.of("PATCH", PVC))
        await anyio.sleep(0.05)
        loop.stop()
        assert await loop.drain(2)
    assert results[0].not_leading and results[0].message == "the scheduler is stopping; the Binding was not sent"
    assert not api.of("POST", "/binding")


async def test_another_pods_binding_goes_through_while_one_waits() -> None:
    """One in-flight slot: a Binding waiting for its claims holds none, so the next pod's is sent."""
    api = FakeApi()
    for name in ("waits", "plain"):
        api.add_pod(b.pod(name))
    results: list[BindResult] = []
    bound = [False]

    def check(binding: Binding, written: Mapping[str, str]) -> BindingsChecked:
        return BindingsChecked(bound=bound[0])
    binder = Binder(api, results.append, max_in_flight=1, check_volumes=check)  # type: ignore[arg-type]
    uids = {name: b.pod(name)["metadata"]["uid"] for name in ("waits", "plain")}
    async with anyio.create_task_group() as group:
        await group.start(binder.run)
        binder.submit(Binding(uids["waits"], "default", "waits", "n", claims=PROVISIONED))
        await anyio.sleep(0.05)
        binder.submit(Binding(uids["plain"], "default", "plain", "n"))
        await _until(lambda: results)
        assert [r.binding.name for r in results] == ["plain"] and binder.in_flight == 1
        bound[0] = True
        binder.volumes_changed()
        await _until(lambda: len(results) == 2)
        group.cancel_scope.cancel()
    assert [(r.binding.name, r.outcome) for r in results] == [("plain", Outcome.BOUND), ("waits", Outcome.BOUND)]


# --- pinned by the mutation round ---------------------------------------------------------------

def test_check_bindings_of_a_static_volume_waits_for_the_claim_and_reads_its_affinity_and_uid() -> None:
    """checkBindings for a static volume: a claimRef without its uid is reset too; a volume that
    no longer admits the node fails in CheckNodeAffinity's words; a volume naming the claim whose
    claim is not yet bound is waited for."""
    ref = {"namespace": "default", "name": "data", "uid": "uid-default-data"}
    run = _state_with(volume("nvme-a", "a", storage_class="local", claimRef={**ref, "uid": ""}),
                      volume("nvme-b", "b", storage_class="local", claimRef=ref),
                      volume("nvme-c", "a", storage_class="local", claimRef=ref),
                      claim("data", storage_class="local"), claimer("train", "data"))
    uid = run.state.pod_by_key("default/train").uid

    def checked(name: str) -> BindingsChecked:
        return check_bindings(run.state, uid, (ClaimBinding("default/data", name, "1"),), "a", {name: "1"})

    assert checked("nvme-a").failure == 'ClaimRef got reset for pv "nvme-a"'
    assert checked("nvme-b").failure == \
        'pv "nvme-b" node affinity doesn\'t match node "a": no matching NodeSelectorTerms'
    assert checked("nvme-c") == BindingsChecked()  # the PV controller has not bound the claim yet


def test_check_bindings_waits_for_a_provisioned_claims_volume_not_seen_yet() -> None:
    """checkBindings tolerates the provisioned volume's NotFound (API delay): wait, not bound."""
    run = _state_with(_claim("3", **BOUND), claimer("train", "data"))
    uid = run.state.pod_by_key("default/train").uid
    assert check_bindings(run.state, uid, PROVISIONED, "a", {"default/data": "2"}) == BindingsChecked()


async def test_a_zero_timeout_fails_without_a_look_even_when_the_claims_are_bound(tmp_path: Any) -> None:
    """upstream's PollUntilContextTimeout(..., 0, immediate=false): the deadline has passed before
    the first condition check, so even claims bound already fail the PreBind."""
    api, loop, results = _loop(bind_timeout=0, tmp_path=tmp_path)
    loop.binder.check_volumes = lambda binding, written: BindingsChecked(bound=True)
    async with _binding_out(loop, loop._binding(_decided(loop))):
        await _until(lambda: results)
    assert results[0].refusal.endswith("binding volumes: context deadline exceeded") and not api.of("POST", "/binding")


async def test_a_pod_deleted_while_its_volumes_are_bound_ends_the_wait() -> None:
    api, loop, results = _loop()
    binding = loop._binding(_decided(loop))
    async with _binding_out(loop, binding):
        await _until(lambda: api.of("PATCH", PVC))
        loop._on_event("DELETED", api.pods[("default", "train")])
        await _until(lambda: results)
    assert results[0].outcome is Outcome.NOT_FOUND and not api.of("POST", "/binding")


async def test_a_node_deleted_while_its_pod_waits_ends_the_wait() -> None:
    """A review: the wait was woken by claim, volume and pod events only, so a pod whose node was
    deleted (or relabelled out of its volume's affinity) kept its devices and volumes for the whole
    bindTimeoutSeconds; upstream's checkBindings polls each second and fails at once ("failed to
    get node"). Node events wake the wait too."""
    api, loop, results = _loop()
    binding = loop._binding(_decided(loop))
    async with _binding_out(loop, binding):
        await _until(lambda: api.of("PATCH", PVC))
        await anyio.sleep(0.05)
        [node] = [obj for obj in nodes("a") if obj.get("kind") == "Node"]
        loop._on_event("DELETED", node)
        await _until(lambda: results)
    assert results[0].outcome is Outcome.RETRY and "failed to get node" in results[0].message
    assert not api.of("POST", BINDING)


async def test_a_binding_not_yet_started_at_a_graceful_stop_writes_no_volume() -> None:
    """A review: after stop() (SIGTERM) a Binding that had not written yet still wrote its claim's
    selected-node, then gave up unsent: the claim stayed pinned to a node for a pod this replica
    would not bind. The writes check the stop as they check the term."""
    api, loop, results = _loop()
    async with _binding_out(loop, loop._binding(_decided(loop))):
        loop.stop()
        assert await loop.drain(2)
    assert results and not api.of("PATCH", PVC)

