"""Preemption's evictions against a fake HTTP layer: every victim's condition first, then uid-guarded DELETEs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from scheduler.api.config import load_config
from scheduler.core.framework.attempt import Attempt
from scheduler.core.objects import parse_pod
from scheduler.kube.evictor import Eviction, Evictor
from scheduler.kube.http import KubeHttp, Response
from scheduler.kube.loop import SchedulerLoop
from scheduler.sim import builders as b
from tests.fakeapi import FakeApi
from tests.helpers import run_for_a_while


def _victim(api: FakeApi, name: str = "victim") -> Eviction:
    pod = b.pod(name, node_name="n1", phase="Running")
    api.add_pod(pod)
    return Eviction("default", name, pod["metadata"]["uid"], "preemptor-uid", "tessera", "n1")


def _no_failure(eviction: Eviction, reason: str) -> None:
    raise AssertionError(f"eviction of {eviction.name} given up: {reason}")


async def _run(evictor: Evictor, until: Callable[[], bool], rounds: int = 200) -> None:
    await run_for_a_while(evictor.run, until, rounds)


async def test_the_victim_gets_disruption_target_then_is_deleted_with_its_uid() -> None:
    api = FakeApi()
    eviction = _victim(api)
    done: list[tuple[Eviction, bool]] = []
    evictor = Evictor(api, lambda e, deleted: done.append((e, deleted)), _no_failure)  # type: ignore[arg-type]
    evictor.submit([eviction])
    await _run(evictor, lambda: bool(done))
    assert done == [(eviction, True)]
    calls = [(c.method, c.path) for c in api.calls if c.method in ("PATCH", "DELETE")]
    assert calls == [("PATCH", "/api/v1/namespaces/default/pods/victim/status"),
                     ("DELETE", "/api/v1/namespaces/default/pods/victim")]
    [patch] = api.of("PATCH", "/status")
    assert patch.body["metadata"] == {"uid": eviction.uid}  # a precondition: never mark a new pod
    [condition] = patch.body["status"]["conditions"]
    assert {k: condition[k] for k in ("type", "status", "reason", "message")} == {
        "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
        "message": "tessera: preempting to accommodate a higher priority pod"}
    [delete] = api.of("DELETE")
    assert delete.body["preconditions"] == {"uid": eviction.uid}
    assert ("default", "victim") not in api.pods


async def test_a_victim_already_gone_or_recreated_counts_as_done_and_is_not_deleted_again() -> None:
    api = FakeApi()
    gone = Eviction("default", "gone", "uid-gone", "p", "tessera", "n1")
    recreated = _victim(api, "again")
    api.pods[("default", "again")]["metadata"]["uid"] = "a-new-uid"
    done: list[tuple[Eviction, bool]] = []
    evictor = Evictor(api, lambda e, deleted: done.append((e, deleted)), _no_failure)  # type: ignore[arg-type]
    evictor.submit([gone, recreated])
    await _run(evictor, lambda: len(done) == 2)
    assert sorted((e.name, deleted) for e, deleted in done) == [("again", False), ("gone", False)]
    assert ("default", "again") in api.pods  # the new pod under the old name stays
    assert not [c for c in api.pod("default", "again")["status"].get("conditions", [])
                if c["type"] == "DisruptionTarget"]  # and is not marked as a victim
    assert not api.of("DELETE")


async def test_a_failed_delete_is_retried() -> None:
    api = FakeApi()
    eviction = _victim(api)
    api.fail_next("DELETE", "/pods/victim", status=500)
    done: list[tuple[Eviction, bool]] = []
    evictor = Evictor(api, lambda e, deleted: done.append((e, deleted)), _no_failure,  # type: ignore[arg-type]
                      retry_seconds=0.05)
    evictor.submit([eviction])
    await _run(evictor, lambda: bool(done))
    assert done == [(eviction, True)]
    assert len(api.of("DELETE")) == 2
    assert ("default", "victim") not in api.pods


async def test_an_eviction_refused_for_good_is_given_up_and_reported() -> None:
    api = FakeApi()
    eviction = _victim(api)
    api.fail_next("DELETE", "/pods/victim", status=403)
    failed: list[tuple[Eviction, str]] = []
    evictor = Evictor(api, lambda e, deleted: None, lambda e, reason: failed.append((e, reason)),  # type: ignore[arg-type]
                      retry_seconds=0.01)
    evictor.submit([eviction])
    await _run(evictor, lambda: bool(failed), rounds=30)
    assert [e for e, _ in failed] == [eviction] and "403" in failed[0][1]
    assert len(api.of("DELETE")) == 1  # not retried


async def test_a_replica_that_is_not_the_leader_evicts_nothing() -> None:
    api = FakeApi()
    eviction = _victim(api)
    evictor = Evictor(api, lambda e, deleted: None, _no_failure, term=lambda: None)  # type: ignore[arg-type]
    evictor.submit([eviction])
    await _run(evictor, lambda: False, rounds=10)
    assert not api.of("PATCH") and not api.of("DELETE")
    assert ("default", "victim") in api.pods


async def test_every_victim_of_a_preemption_is_marked_before_any_is_deleted() -> None:
    """The marks are the decision written down: a replica that dies between two DELETEs leaves
    them on every victim still running, and the next leader finishes the gang from them."""
    api = FakeApi()
    evictions = [_victim(api, f"member-{i}") for i in range(12)]  # more than the 8 writes at a time
    done: list[tuple[Eviction, bool]] = []
    evictor = Evictor(api, lambda e, deleted: done.append((e, deleted)), _no_failure)  # type: ignore[arg-type]
    evictor.submit(evictions)
    await _run(evictor, lambda: len(done) == 12)
    methods = [c.method for c in api.calls if c.method in ("PATCH", "DELETE")]
    assert methods == ["PATCH"] * 12 + ["DELETE"] * 12
    assert not [name for _, name in api.pods if name.startswith("member-")]


async def test_a_victim_that_cannot_be_marked_keeps_the_whole_preemption_from_deleting() -> None:
    api = FakeApi()
    evictions = [_victim(api, f"member-{i}") for i in range(3)]
    api.fail_next("PATCH", "/pods/member-1/status", status=403)
    failed: list[tuple[Eviction, str]] = []
    evictor = Evictor(api, lambda e, deleted: None, lambda e, reason: failed.append((e, reason)),  # type: ignore[arg-type]
                      retry_seconds=0.01)
    evictor.submit(evictions)
    # until the preemption has ended, its withdrawals included: `failed` fills before they go out,
    # and stopping the evictor there left member-2's mark in place on a loaded machine
    await _run(evictor, lambda: len(failed) == 3 and evictor.in_flight == 0, rounds=50)
    assert sorted(e.name for e, _ in failed) == ["member-0", "member-1", "member-2"]
    assert all("403" in reason for _, reason in failed)
    assert not api.of("DELETE")  # the gang stays whole
    await _run(evictor, lambda: False, rounds=5)
    assert not api.of("DELETE")

    def disruption(name: str) -> list[str]:
        return [c["status"] for c in api.pod("default", name)["status"].get("conditions", [])
                if c["type"] == "DisruptionTarget"]

    # the marks already written are withdrawn (as the disruption controller would after 2 min):
    # a leader must not finish this gang from them if a member later completes
    assert (disruption("member-0"), disruption("member-1"), disruption("member-2")) == (["False"], [], ["False"])


async def test_a_mark_that_fails_for_now_is_retried_and_the_deletes_wait_for_it() -> None:
    api = FakeApi()
    evictions = [_victim(api, f"member-{i}") for i in range(2)]
    api.fail_next("PATCH", "/pods/member-0/status", status=500)
    done: list[tuple[Eviction, bool]] = []
    evictor = Evictor(api, lambda e, deleted: done.append((e, deleted)), _no_failure,  # type: ignore[arg-type]
                      retry_seconds=0.05)
    evictor.submit(evictions)
    await _run(evictor, lambda: len(done) == 2)
    methods = [(c.method, c.path.rsplit("/pods/", 1)[1]) for c in api.calls if c.method in ("PATCH", "DELETE")]
    first_delete = next(i for i, (method, _) in enumerate(methods) if method == "DELETE")
    assert methods[:first_delete].count(("PATCH", "member-0/status")) == 2  # the retry, before any DELETE
    assert len(api.of("DELETE")) == 2


async def test_a_victim_already_being_evicted_is_not_taken_into_a_second_preemption() -> None:
    api = FakeApi()
    first, second = _victim(api, "shared"), _victim(api, "other")
    done: list[tuple[Eviction, bool]] = []
    evictor = Evictor(api, lambda e, deleted: done.append((e, deleted)), _no_failure)  # type: ignore[arg-type]
    evictor.submit([first])
    evictor.submit([first, second])
    await _run(evictor, lambda: len(done) == 2)
    assert sorted(e.name for e, _ in done) == ["other", "shared"]
    assert len(api.of("DELETE")) == 2


async def test_finishing_a_gangs_eviction_deletes_without_marking_again() -> None:
    """The pod carries the earlier leader's mark; writing it again would restart its 2-minute
    clock, so a DELETE refused for good would be retried forever."""
    api = FakeApi()
    victim = _victim(api)
    finishing = Eviction("default", "victim", victim.uid, "", "tessera", "n1", finishing_gang="default/train")
    done: list[tuple[Eviction, bool]] = []
    evictor = Evictor(api, lambda e, deleted: done.append((e, deleted)), _no_failure)  # type: ignore[arg-type]
    evictor.submit([finishing])
    await _run(evictor, lambda: bool(done))
    assert done == [(finishing, True)]
    assert not api.of("PATCH") and len(api.of("DELETE")) == 1


async def test_marks_written_too_long_before_the_deletes_are_written_again() -> None:
    """One victim's mark kept failing: the others' marks have aged meanwhile (the disruption
    controller turns them False after 2 min, and a successor would not finish from them), so all
    are written again before the first DELETE."""
    api = FakeApi()
    evictions = [_victim(api, f"member-{i}") for i in range(2)]
    api.fail_next("PATCH", "/pods/member-1/status", status=500)
    done: list[tuple[Eviction, bool]] = []
    evictor = Evictor(api, lambda e, deleted: done.append((e, deleted)), _no_failure,  # type: ignore[arg-type]
                      retry_seconds=0.1, remark_after=0.05)
    evictor.submit(evictions)
    await _run(evictor, lambda: len(done) == 2)
    patches = [c.path.rsplit("/pods/", 1)[1] for c in api.of("PATCH")]
    assert patches.count("member-0/status") == 2 and patches.count("member-1/status") == 3
    first_delete = next(i for i, c in enumerate(api.calls) if c.method == "DELETE")
    assert all(c.method != "PATCH" for c in api.calls[first_delete:])


async def test_a_replica_that_lost_the_lease_forgets_its_evictions_and_can_evict_again_later() -> None:
    api = FakeApi()
    eviction = _victim(api)
    leading = [True]
    api.fail_next("DELETE", "/pods/victim", status=500)
    done: list[tuple[Eviction, bool]] = []
    evictor = Evictor(api, lambda e, deleted: done.append((e, deleted)), _no_failure,  # type: ignore[arg-type]
                      term=lambda: 1 if leading[0] else None, retry_seconds=0.05)
    evictor.submit([eviction])
    await _run(evictor, lambda: len(api.of("DELETE")) == 1)
    leading[0] = False
    evictor.abandon()
    await _run(evictor, lambda: False, rounds=15)
    assert len(api.of("DELETE")) == 1 and not done  # the retry was dropped with the lease
    leading[0] = True
    evictor.submit([eviction])  # the next term decides the same victim again: it goes out
    await _run(evictor, lambda: bool(done))
    assert done == [(eviction, True)]


async def test_a_victim_gone_while_the_others_are_marked_does_not_hold_them_back() -> None:
    api = FakeApi()
    evictions = [_victim(api, f"member-{i}") for i in range(3)]
    del api.pods[("default", "member-1")]  # deleted by its owner meanwhile: 404 on its mark
    done: list[tuple[Eviction, bool]] = []
    evictor = Evictor(api, lambda e, deleted: done.append((e, deleted)), _no_failure)  # type: ignore[arg-type]
    evictor.submit(evictions)
    await _run(evictor, lambda: len(done) == 3)
    assert sorted((e.name, deleted) for e, deleted in done) == [("member-0", True), ("member-1", False),
                                                                 ("member-2", True)]
    assert sorted(c.path.rsplit("/", 1)[1] for c in api.of("DELETE")) == ["member-0", "member-2"]


async def test_a_delete_refused_for_good_fails_that_victim_alone() -> None:
    """The others go (the finishing rule then tries the refused member again while its mark is
    fresh and its gang below its minimum)."""
    api = FakeApi()
    evictions = [_victim(api, f"member-{i}") for i in range(3)]
    api.fail_next("DELETE", "/pods/member-1", status=403)
    done: list[tuple[Eviction, bool]] = []
    failed: list[tuple[Eviction, str]] = []
    evictor = Evictor(api, lambda e, deleted: done.append((e, deleted)),  # type: ignore[arg-type]
                      lambda e, reason: failed.append((e, reason)))
    evictor.submit(evictions)
    await _run(evictor, lambda: len(done) + len(failed) == 3)
    assert sorted(e.name for e, _ in done) == ["member-0", "member-2"] and [e.name for e, _ in failed] == ["member-1"]
    assert [c["status"] for c in api.pod("default", "member-1")["status"]["conditions"]
            if c["type"] == "DisruptionTarget"] == ["True"]  # still marked: its gang can be finished


class _HoldFirst(FakeApi):
    """Holds the first request of `method` until `release` is set; records what is sent after `lost`."""

    def __init__(self, method: str) -> None:
        super().__init__()
        self.method = method
        self.release = anyio.Event()
        self.holding = anyio.Event()
        self.held_once = False
        self.lost = False
        self.after_loss: list[tuple[str, str]] = []

    async def request(self, method: str, path: str, **kwargs: Any) -> Response:
        if self.lost:
            self.after_loss.append((method, path))
        if method == self.method and not self.held_once:
            self.held_once = True
            self.holding.set()
            await self.release.wait()
        return await super().request(method, path, **kwargs)


@pytest.mark.parametrize("step", ["PATCH", "DELETE"])
async def test_no_eviction_write_is_sent_after_the_lease_is_lost(step: str) -> None:
    """Leadership was checked once per batch; writes then waited for a slot (and the rate
    limiter) and went out after the lease was lost: a deposed leader deleted victims, or left
    marks a later leader could finish a gang from (found in review)."""
    api = _HoldFirst(step)
    victims = [_victim(api, "v1"), _victim(api, "v2")]
    leading = [True]
    evictor = Evictor(api, lambda e, deleted: None, lambda e, reason: None,  # type: ignore[arg-type]
                      term=lambda: 1 if leading[0] else None,
                      concurrency=1)
    evictor.submit(victims)
    async with anyio.create_task_group() as group:
        group.start_soon(evictor.run)
        with anyio.fail_after(5):
            await api.holding.wait()  # the first write of `step` is out
        leading[0] = False
        evictor.abandon()  # what the loop's lost_leadership() does
        api.lost = True
        api.release.set()
        await anyio.sleep(0.2)
        group.cancel_scope.cancel()
    assert api.after_loss == []


async def test_drain_waits_for_a_preemption_and_one_cut_short_is_never_drained() -> None:
    """The graceful shutdown hands the Lease over only once the evictions are done (client-go's
    `ReleaseOnCancel`: all code the lease guards completes first). A preemption still out is not
    drained; one cancelled mid-request (the loop crashed) may still land, so it never is."""
    api = FakeApi()
    done, cut = _victim(api, "done"), _victim(api, "cut")
    api.fail_next("DELETE", "/pods/cut", stall=True)
    evicted: list[str] = []
    evictor = Evictor(api, lambda e, deleted: evicted.append(e.name), _no_failure)  # type: ignore[arg-type]
    async with anyio.create_task_group() as owner:
        owner.start_soon(evictor.run)
        evictor.submit([done])
        assert await evictor.drain(5) is True and evicted == ["done"]
        evictor.submit([cut])
        assert await evictor.drain(0.2) is False and evictor.in_flight == 1  # its DELETE is still out
        owner.cancel_scope.cancel()  # the loop crashed: its task group cancels the evictor
    assert evictor.in_flight == 0
    assert await evictor.drain(1.0) is False


async def test_the_evicted_log_line_names_the_preemptor_by_name_and_uid() -> None:
    """A new user's trial read `evictor.evicted preemptor=f4e7ea5c-...` and had to look the uid up
    to learn which pod preempted. The line names it as `namespace/name` too (the uid kept, as the
    victim's `Preempted` Event gives only it: upstream's `Preempted by pod <uid> on node <node>`)."""
    api = FakeApi()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t")  # type: ignore[arg-type]
    preemptor = parse_pod(b.pod("urgent", namespace="team-a", limits={"nvidia.com/gpu": 1}, priority=1000))
    victim_pod = b.pod("batch-0", limits={"nvidia.com/gpu": 1}, node_name="n1", phase="Running")
    api.add_pod(victim_pod)
    loop._evict(Attempt(preemptor, None, preempted=[parse_pod(victim_pod)]))
    with capture_logs() as logs:
        await _run(loop.evictor, lambda: loop.evictor.evicted == 1)
    [evicted] = [entry for entry in logs if entry["event"] == "evictor.evicted"]
    assert (evicted["pod"], evicted["node"], evicted["preemptor"], evicted["preemptor_uid"]) == (
        "default/batch-0", "n1", "team-a/urgent", preemptor.uid)


async def test_a_victim_refused_again_and_again_is_logged_once_per_refusal() -> None:
    """SRE trial: an admission policy refused a victim's DELETE, and as upstream activates the
    preemptor after a failed PreemptPod (executor.go prepareCandidateAsync), each new preemption of
    the same victim logged `evictor.refused` again: about 15 warnings in 1.2 s, then one every 5 s.
    The retries stay; the log says each victim's refusal once, again when its refusal changes,
    and once when its eviction finally goes through (with how many refusals came before)."""
    api = FakeApi()
    eviction = _victim(api)
    failed: list[str] = []
    evictor = Evictor(api, lambda e, deleted: None, lambda e, reason: failed.append(reason),  # type: ignore[arg-type]
                      retry_seconds=0.01)
    with capture_logs() as logs:
        for round_, message in enumerate(["denied by policy A"] * 3 + ["denied by policy B"] * 2):
            api.handlers[:] = [lambda call: Response(  # used only within this round
                403, b'{"kind":"Status","status":"Failure","message":"' + message.encode() + b'"}')
                if call.method == "DELETE" else None]
            evictor.submit([eviction])
            await _run(evictor, lambda: len(failed) == round_ + 1, rounds=30)
        api.handlers.clear()
        evictor.submit([eviction])
        await _run(evictor, lambda: evictor.evicted == 1, rounds=30)
    assert len(failed) == 5 and len(api.of("DELETE")) == 6  # every preemption still tries the victim
    refused = [entry for entry in logs if entry["event"] == "evictor.refused"]
    assert [(entry["log_level"], entry["error"], entry.get("refused_before")) for entry in refused] == [
        ("warning", "HTTP 403: denied by policy A", None),
        ("warning", "HTTP 403: denied by policy B", 3)], refused
    [ended] = [entry for entry in logs if entry["event"] == "evictor.refusal_ended"]
    assert (ended["log_level"], ended["pod"], ended["refused"], ended["last_error"]) == (
        "info", "default/victim", 5, "HTTP 403: denied by policy B"), ended
    assert not evictor._refusals  # the refusal is over: a later one of the victim is said again


def test_a_deleted_pod_leaves_no_refusal_behind() -> None:
    """The refusals remembered for the once-per-change line go with the pod's DELETED event, so a
    victim deleted by someone else is not remembered for ever."""
    api = FakeApi()
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="t")  # type: ignore[arg-type]
    pod = b.pod("victim", node_name="n1", phase="Running")
    loop._apply("ADDED", pod)
    loop.evictor._refused(Eviction("default", "victim", pod["metadata"]["uid"], "p-uid", "tessera", "n1"), "HTTP 403: no")
    loop._apply("DELETED", pod)
    assert not loop.evictor._refusals
