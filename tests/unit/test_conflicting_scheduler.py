"""A second Tessera leading on another Lease on the same GPU nodes is seen, not silent.

The Lease is what makes replicas one scheduler. Two installs on different Leases (two Helm
releases, or the README's `tessera run` left running beside the chart, `kube-system/tessera`
against `tessera-system/tessera`) both lead and both bind, each unaware of the other's in-flight
decisions: on the same GPU nodes they can give one GPU to two pods, whether they share a
`schedulerName` or not (adversary round 10: `tessera` and `tessera-b`). Every term token names its
Lease, so the leader that watches a pod of its own scheduler names being bound or fenced under
another Lease's token — or a pod of another name bound under it — says so: an error line, a
Warning Event on that pod, and `tessera_conflicting_scheduler_writes_total`, whose alert pages.
The advice: one install per set of GPU nodes, every scheduler name it serves in its profiles.
A token of another Lease is also no evidence that *this* Lease changed hands (its transition count
is another counter), so it no longer makes the leader doubt its own term.
"""

from __future__ import annotations

from typing import Any

import anyio
from structlog.testing import capture_logs

from scheduler.api.config import load_config
from scheduler.core import annotations as ann
from scheduler.kube.conflicting import other_install_note
from scheduler.kube.http import KubeHttp
from scheduler.kube.leader import LeaderElector
from scheduler.kube.loop import SchedulerLoop
from scheduler.kube.metrics import Metrics
from scheduler.kube.run_cli import StateGauges
from scheduler.kube.term_token import TermToken, parse_term_token
from scheduler.sim import builders as b
from tests.fakeapi import FakeApi
from tests.fakelease import Clock, LeaseServer
from tests.helpers import LeaseTimings, until

TIMINGS: LeaseTimings = {"lease_duration": 15.0, "renew_deadline": 10.0, "retry_period": 2.0}
OTHER = "tessera-system/tessera/rep-z/3/2026-01-01T00:02:00.000000Z"


def _elector(server: LeaseServer, who: str, clock: Clock, namespace: str = "kube-system") -> LeaderElector:
    return LeaderElector(server.client(who), namespace=namespace, name="tessera", identity=who,  # type: ignore[arg-type]
                         clock=clock, **TIMINGS)


REP_A_TOKEN = "kube-system/tessera/rep-a/1/2026-01-01T00:01:00.000000Z"


def _rep_a(api: FakeApi) -> tuple[SchedulerLoop, list[Any]]:
    """rep-a's loop on `api`, wired to an elector of Lease kube-system/tessera for `other_lease`;
    its term is the list's one item (None: not leading), its fence token rep-a's first term's."""
    term: list[Any] = [None]
    elector = _elector(LeaseServer(), "rep-a", Clock())
    loop = SchedulerLoop(load_config(None), KubeHttp(api), KubeHttp(api), identity="rep-a",  # type: ignore[arg-type]
                         leader_term=lambda: term[0], term_fence=lambda: REP_A_TOKEN, other_lease=elector.other_lease)
    return loop, term


async def _leading(loop: SchedulerLoop, term: list[Any]) -> None:
    """Once `loop` (running) is synced, its term starts: rep-a leads."""
    await until(lambda: loop.informers.synced)
    term[0] = 1
    loop.leadership_started()


async def test_a_terms_token_names_its_lease() -> None:
    a = _elector(LeaseServer(), "A", Clock())
    await a._acquire()
    a._start_leading()
    token = a.fence_token
    assert token is not None and token.startswith("kube-system/tessera/A/")
    parsed = parse_term_token(token)
    assert parsed is not None and parsed.lease == "kube-system/tessera" and parsed.identity == "A"
    assert a.other_lease(token) is None
    assert a.other_lease(OTHER) == "tessera-system/tessera"
    # the format before the Lease was named, and a withdrawal's token, name no Lease
    assert parse_term_token("B/4/2026-01-01T00:00:00.000000Z") == TermToken(None, "B", 4, "2026-01-01T00:00:00.000000Z")
    assert a.other_lease("B/4/2026-01-01T00:00:00.000000Z") is None
    assert a.other_lease("A/withdrawn/1234") is None and parse_term_token("A/withdrawn/1234") is None
    assert parse_term_token("not a token") is None


async def test_another_leases_token_is_no_newer_term_of_this_one() -> None:
    a = _elector(LeaseServer(), "A", Clock())
    await a._acquire()
    a._start_leading()
    term = a.term
    assert not a.saw_term(OTHER, "default/p")  # 3 transitions of another Lease: not ours
    assert a.term == term and a.is_leader
    # a newer term of its own Lease, in either format, still ends the acting
    assert a.saw_term("kube-system/tessera/B/7/2026-01-01T00:00:00.000000Z", "default/q")


def _bound_by_the_other_install(loop: SchedulerLoop, gpus: int) -> dict[str, Any]:
    """Pending pod `p` asking for `gpus` GPUs (more than node `n` has: this loop leaves it), then
    bound to `n` by the other install, under its Lease's term token; the bound pod."""
    pending = b.pod("p", requests={"nvidia.com/gpu": gpus}, priority=0)
    pending["metadata"]["resourceVersion"] = "40"
    loop._apply("ADDED", pending)
    bound = {**pending, "metadata": {**pending["metadata"], "resourceVersion": "41", "annotations": {ann.TERM: OTHER}},
             "spec": {**pending["spec"], "nodeName": "n"}}
    loop._apply("MODIFIED", bound)
    return bound


async def test_the_leader_reports_a_pod_bound_under_another_leases_token() -> None:
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=8)]
    old = b.pod("old", requests={"nvidia.com/gpu": 1}, node_name="n", annotations={ann.TERM: OTHER})
    api.add_pod(old)
    loop, term = _rep_a(api)
    metrics = Metrics()
    gauges = StateGauges(loop, metrics)
    with capture_logs() as logs:
        async with anyio.create_task_group() as owner:
            owner.start_soon(loop.run)
            await _leading(loop, term)
            # first seen already bound under the other Lease (listed at start): history, not news
            loop._apply("MODIFIED", {**old, "metadata": {**old["metadata"], "resourceVersion": "30"}})
            bound = _bound_by_the_other_install(loop, gpus=9)  # the watch shows its token arrive
            later = {**bound, "metadata": {**bound["metadata"], "resourceVersion": "42"}}
            loop._apply("MODIFIED", later)  # the same write seen again (a status update): counted once
            # its own token on a pod is no other scheduler
            mine = b.pod("m", requests={"nvidia.com/gpu": 9}, priority=0)
            mine["metadata"]["resourceVersion"] = "50"
            loop._apply("ADDED", mine)
            loop._apply("MODIFIED", {**mine, "metadata": {**mine["metadata"], "resourceVersion": "51",
                                                         "annotations": {ann.TERM: REP_A_TOKEN}}})
            await until(lambda: bool(api.of("POST", "/events")))
            owner.cancel_scope.cancel()
    said = [e for e in logs if e["event"] == "leader.conflicting_scheduler"]
    assert len(said) == 1 and said[0]["log_level"] == "error"
    assert said[0]["pod"] == "default/p" and said[0]["other_lease"] == "tessera-system/tessera"
    assert said[0]["lease"] == "kube-system/tessera" and said[0]["other_identity"] == "rep-z"
    events = [call.body for call in api.of("POST", "/events")]
    conflicting = [e for e in events if e["reason"] == "ConflictingScheduler"]
    assert len(conflicting) == 1 and conflicting[0]["type"] == "Warning"
    assert conflicting[0]["regarding"]["name"] == "p"
    assert conflicting[0]["note"] == (
        "another Tessera leading on Lease tessera-system/tessera (identity rep-z) bound this pod of schedulerName "
        "tessera while this scheduler leads on Lease kube-system/tessera: two installs (two Leases) that schedule "
        "onto the same GPU nodes each decide without the other's choices in flight and can give one GPU to two "
        "pods, whatever their scheduler names; run one install per set of GPU nodes, with every scheduler name it "
        "serves in its profiles")
    gauges()
    sample = metrics.registry.get_sample_value("tessera_conflicting_scheduler_writes_total",
                                               {"lease": "tessera-system/tessera"})
    assert sample == 1.0


def test_the_note_names_another_install_only_once_it_was_watched_writing() -> None:
    """A trial's GPUsOvercommitted listed causes (a cut count, a Binding by hand, an earlier
    leader's) but not the second install this process had already reported as a
    ConflictingScheduler: the note names its Lease and its pods on the node, and says nothing of a
    Lease only listed (history: renamed, removed since)."""
    elector = _elector(LeaseServer(), "A", Clock())
    own = "kube-system/tessera/A/1/2026-01-01T00:01:00.000000Z"
    holders = {"default/a": own, "default/b": OTHER, "default/c": OTHER, "default/d": "not a token"}
    assert other_install_note(holders, elector.other_lease, set()) == ""
    assert other_install_note({"default/a": own}, elector.other_lease, {"tessera-system/tessera"}) == ""
    assert other_install_note(holders, elector.other_lease, {"tessera-system/tessera"}) == (
        ". Another Tessera install was seen writing pods of this node (ConflictingScheduler): Lease "
        "tessera-system/tessera (default/b, default/c): two installs (two Leases) on the same GPU nodes give one "
        "GPU to two pods, whatever their scheduler names; run one install per set of GPU nodes, with every "
        "scheduler name in its profiles")
    # on a pod of another namespace (its tenant reads it), the pods are counted; "" (a Node's Event) names them
    assert "Lease tessera-system/tessera (2 pods in other namespaces): " in other_install_note(
        holders, elector.other_lease, {"tessera-system/tessera"}, "team-x")


async def test_gpus_overcommitted_by_another_install_says_so() -> None:
    """The other install binds `p` (2 GPUs) onto a 1-GPU node: the GPUsOvercommitted Warning the
    core raises for that very Binding names the other install's Lease and the pod, as the
    ConflictingScheduler Event reported before it (the term is read before the core's notices)."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=1)]
    api.lists["/apis/tessera.dev/v1alpha1/extendedresources"] = [b.device("n", 0)]
    loop, term = _rep_a(api)
    async with anyio.create_task_group() as owner:
        owner.start_soon(loop.run)
        await _leading(loop, term)
        _bound_by_the_other_install(loop, gpus=2)
        await until(lambda: any(call.body["reason"] == "GPUsOvercommitted" for call in api.of("POST", "/events")))
        owner.cancel_scope.cancel()
    [overcommitted] = [call.body for call in api.of("POST", "/events") if call.body["reason"] == "GPUsOvercommitted"]
    assert overcommitted["regarding"]["name"] == "p"
    assert overcommitted["note"].startswith("node n has 2 nvidia.com/gpu in use but only 1 allocatable")
    assert overcommitted["note"].endswith(
        ". Another Tessera install was seen writing pods of this node (ConflictingScheduler): Lease "
        "tessera-system/tessera (default/p): two installs (two Leases) on the same GPU nodes give one GPU to two "
        "pods, whatever their scheduler names; run one install per set of GPU nodes, with every scheduler name in "
        "its profiles"), overcommitted["note"]


async def test_only_a_binding_counts_another_leases_token_on_another_schedulers_pod() -> None:
    """Adversary round 10 (F3, /tmp/adv-a/dos.py other 0.5): a token naming some Lease, forged onto
    a pod of schedulerName `someone-else`, made a ConflictingScheduler Warning, ten error lines and
    ten counts (the critical alert fires). A pod of another scheduler name counts only in the
    update that binds it — what another Tessera install on other scheduler names does, on this
    install's nodes (round 10's F1, detected so); a user without pods/binding writes no such update."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=8)]
    loop, term = _rep_a(api)
    with capture_logs() as logs:
        async with anyio.create_task_group() as owner:
            owner.start_soon(loop.run)
            await _leading(loop, term)
            bystander = b.pod("bystander", scheduler="someone-else", requests={"cpu": "10m"})
            bystander["metadata"]["resourceVersion"] = "10"
            loop._apply("ADDED", bystander)
            for i in range(1, 4):  # the forger's writes, on the pending pod and on it bound by its scheduler
                loop._apply("MODIFIED", {**bystander, "metadata": {
                    **bystander["metadata"], "resourceVersion": str(10 + i),
                    "annotations": {ann.TERM: f"evil-ns/evil-lease/mallory/{i}/t"}}})
            for version, token in (("14", "evil-ns/evil-lease/mallory/3/t"), ("15", OTHER)):  # bound, forged again
                loop._apply("MODIFIED", {**bystander, "metadata": {**bystander["metadata"], "resourceVersion": version,
                                                                   "annotations": {ann.TERM: token}},
                                         "spec": {**bystander["spec"], "nodeName": "n"}})
            assert not loop.conflicting.writes
            # another install on scheduler name tessera-b binds its pod here, its token in the Binding
            theirs = b.pod("theirs", scheduler="tessera-b", requests={"nvidia.com/gpu": 1})
            theirs["metadata"]["resourceVersion"] = "20"
            loop._apply("ADDED", theirs)
            loop._apply("MODIFIED", {**theirs, "metadata": {**theirs["metadata"], "resourceVersion": "21",
                                                            "annotations": {ann.TERM: OTHER}},
                                     "spec": {**theirs["spec"], "nodeName": "n"}})
            await until(lambda: bool(api.of("POST", "/events")))
            owner.cancel_scope.cancel()
    assert dict(loop.conflicting.writes) == {"tessera-system/tessera": 1}
    assert [e["pod"] for e in logs if e["event"] == "leader.conflicting_scheduler"] == ["default/theirs"]
    [event] = [call.body for call in api.of("POST", "/events") if call.body["reason"] == "ConflictingScheduler"]
    assert event["regarding"]["name"] == "theirs"
    assert "bound this pod of schedulerName tessera-b while this scheduler leads" in event["note"]
    assert event["note"].endswith("run one install per set of GPU nodes, with every scheduler name it serves "
                                  "in its profiles")


async def test_a_token_with_no_replica_name_is_no_term() -> None:
    """A hand-written `tessera.dev/term: /1/x` parsed as a term of the replica "" (and
    `kube-system/tessera//7/x` as one of this Lease): no replica writes one (the elector refuses an
    empty identity, client-go's "Lock identity is empty"), yet a leader doubted its term on it and
    explain named "Tessera replica " with no name. It is no token, as a user's other values."""
    assert parse_term_token("/1/x") is None
    assert parse_term_token("kube-system/tessera//7/2026-01-01T00:00:00.000000Z") is None
    a = _elector(LeaseServer(), "A", Clock())
    await a._acquire()
    a._start_leading()
    assert not a.saw_term("/99/x", "default/p") and a.is_leader
    assert not a.saw_term("kube-system/tessera//99/x", "default/p") and a.is_leader


async def test_the_note_on_a_pod_names_no_pod_of_another_namespace() -> None:
    """The note lands on a tenant's pod: it named every pod of the node the other install wrote,
    whatever its namespace ("(default/p, team-b/q)"). Pods of the pod's namespace are named, the
    others counted; the log line (operators') still names them all."""
    api = FakeApi()
    api.lists["/api/v1/nodes"] = [b.node("n", gpus=1)]
    api.lists["/apis/tessera.dev/v1alpha1/extendedresources"] = [b.device("n", 0)]
    api.add_pod(b.pod("q", "team-b", requests={"nvidia.com/gpu": 1}, node_name="n", phase="Running",
                      annotations={ann.TERM: OTHER}))
    loop, term = _rep_a(api)
    with capture_logs() as logs:
        async with anyio.create_task_group() as owner:
            owner.start_soon(loop.run)
            await _leading(loop, term)
            _bound_by_the_other_install(loop, gpus=1)
            await until(lambda: any(call.body["reason"] == "GPUsOvercommitted" for call in api.of("POST", "/events")))
            owner.cancel_scope.cancel()
    [overcommitted] = [call.body for call in api.of("POST", "/events") if call.body["reason"] == "GPUsOvercommitted"]
    assert overcommitted["regarding"]["namespace"] == "default"
    assert "Lease tessera-system/tessera (default/p and 1 pod in another namespace): " in overcommitted["note"], \
        overcommitted["note"]
    [line] = [line for line in logs if line.get("reason") == "GPUsOvercommitted"]
    assert "Lease tessera-system/tessera (default/p, team-b/q): " in line["message"]
