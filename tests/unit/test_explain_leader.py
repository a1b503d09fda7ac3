"""`kubectl tessera explain` says who schedules while a pod waits: the Lease of the installed
configuration. A new user's trial: after SIGKILL of the leader (chart lease 30 s) explain said
"pending: not tried yet", a dry run "would go to v100-node-001" and "Events: <none>"; the pod
bound ~40 s later, and nothing had said that no replica led."""

from __future__ import annotations

import argparse
import asyncio
import math
import re
import time
from functools import partial
from datetime import datetime, timezone
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.api.config_model import LeaderElectionConfig
from scheduler.kube.http import Response
from scheduler.kubectl import cli
from scheduler.kubectl.leadership import LEADING, MISSING, RELEASED, STOPPED, UNKNOWN, leadership
from scheduler.kubectl.target import Target
from scheduler.sim import builders as b
from tests.helpers import fake_listing

LEASE = "/apis/coordination.k8s.io/v1/namespaces/tessera-system/leases/tessera"
ELECTION = LeaderElectionConfig(resource_namespace="tessera-system", resource_name="tessera",
                                lease_duration_seconds=30, renew_deadline_seconds=20, retry_period_seconds=4)
NOW = 1_800_000_000.0


def _lease(holder: str, renewed: float, duration: int = 30, transitions: int = 3) -> dict[str, Any]:
    stamp = datetime.fromtimestamp(renewed, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {"kind": "Lease", "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration,
                                      "acquireTime": stamp, "renewTime": stamp, "leaseTransitions": transitions}}


class _Api:
    """Answers GETs by path: a Lease path pops its next answer (the last one stays); the clock
    moves by the sleeps the watcher takes."""

    def __init__(self, leases: list[tuple[int, Any]], others: dict[str, tuple[int, Any]] | None = None) -> None:
        self.leases, self.others, self.paths = leases, others or {}, list[str]()
        self.t = 0.0

    async def request(self, method: str, path: str, **_: Any) -> Response:
        assert method == "GET"
        self.paths.append(path)
        if path == LEASE or path.endswith("/leases/tessera"):
            status, body = self.leases.pop(0) if len(self.leases) > 1 else self.leases[0]
        else:
            status, body = self.others.get(path, (404, {"kind": "Status", "code": 404}))
        return Response(status, body if isinstance(body, bytes) else orjson.dumps(body))

    def clock(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.t += seconds


async def _judge(api: _Api, election: LeaderElectionConfig = ELECTION, now: float = NOW) -> Any:
    return await leadership(api, election, now=lambda: now + api.t, clock=api.clock, sleep=api.sleep)  # type: ignore[arg-type]


async def test_without_leader_election_nothing_is_said_and_nothing_read() -> None:
    api = _Api([(200, _lease("a", NOW))])
    assert await _judge(api, LeaderElectionConfig(leader_elect=False)) is None
    assert api.paths == []


async def test_a_holder_that_renewed_just_now_leads() -> None:
    api = _Api([(200, _lease("tessera-7c9_1f", NOW - 1.2))])
    found = await _judge(api)
    assert (found.state, found.holder, api.paths) == (LEADING, "tessera-7c9_1f", [LEASE])  # no watching
    assert found.message == "tessera-7c9_1f (the Lease tessera-system/tessera was renewed about 1 s ago)"


async def test_a_holder_that_stopped_renewing_means_no_replica_schedules() -> None:
    api = _Api([(200, _lease("tessera-7c9_1f", NOW - 12))])
    found = await _judge(api)
    assert found.state == STOPPED and api.t >= ELECTION.retry_period_seconds  # watched before saying so
    assert found.message == (
        "none: no Tessera replica is scheduling. The Lease tessera-system/tessera was last renewed by "
        f"tessera-7c9_1f about {12 + round(api.t)} s ago (lease 30 s) and not since: its holder stopped renewing. A "
        "standby takes over once it has seen no renewal for 30 s: in about "
        f"{math.floor(30 - 12 - api.t)} to {math.ceil(30 - 12 - api.t + 17.6)} s (it sees a renewal, and looks "
        "again, up to 8.8 s late); until then no pod is scheduled.")  # a standby reads the Lease every 4-8.8 s
    late = _Api([(200, _lease("tessera-7c9_1f", NOW - 300))])
    gone = await _judge(late)
    # a new user's trial: a replica started after the holder died stood by for a whole lease (it
    # judges the holder from its own first sight of the record), while explain said "no standby"
    assert gone.state == STOPPED and gone.message.endswith(
        "(lease 30 s) and no standby has taken it over yet. A replica started since waits about 30 s from its "
        "start before it takes the Lease (it judges the holder from its own first sight); if none was started, "
        "is a replica running? (kubectl -n tessera-system get pods)")


async def test_clock_skew_does_not_make_a_live_leader_look_stopped() -> None:
    """This machine's clock is 100 s ahead: the renewTime reads 100 s old, but the record changes
    while it is watched, so its holder leads."""
    api = _Api([(200, _lease("a", NOW - 100)), (200, _lease("a", NOW - 100)), (200, _lease("a", NOW - 96))])
    found = await _judge(api)
    assert (found.state, found.holder) == (LEADING, "a")
    assert found.message == ("a (it renewed the Lease tessera-system/tessera while this command watched; its "
                             "renewTime read about 100 s old by this machine's clock: the clocks differ, or a "
                             "renewal came late)")
    ahead = _Api([(200, _lease("a", NOW + 60)), (200, _lease("a", NOW + 64))])  # and behind: a renewTime to come
    assert (await _judge(ahead)).state == LEADING and len(ahead.paths) == 2


async def test_a_new_holder_taking_over_while_watched_leads() -> None:
    api = _Api([(200, _lease("old", NOW - 40)), (200, _lease("new", NOW, transitions=4))])
    found = await _judge(api)
    assert (found.state, found.holder) == (LEADING, "new")


@pytest.mark.parametrize(("answer", "state", "message"), [
    ((404, {"kind": "Status", "code": 404}), MISSING,
     "none: there is no Lease tessera-system/tessera (leaderElection in the configuration: a running replica "
     "creates it): is Tessera running? (kubectl -n tessera-system get pods)"),
    ((403, {"kind": "Status", "code": 403}), UNKNOWN,
     "unknown: the Lease tessera-system/tessera cannot be read (denied, HTTP 403: needs get on "
     "leases.coordination.k8s.io tessera-system/tessera: ask for the Role tessera-config-reader in tessera-system "
     "(bound with a RoleBinding there; deploy/rbac/user-roles.yaml))"),
    ((200, _lease("", NOW - 1, duration=1)), RELEASED,
     "none: the Lease tessera-system/tessera was released about 1 s ago (its holder stopped); a standby "
     "takes it at its next try, within about 9 s"),  # every 4 s jittered up to 2.2x
    ((200, _lease("", NOW - 60, duration=1)), RELEASED,
     "none: the Lease tessera-system/tessera was released about 60 s ago (its holder stopped) and no replica "
     "has taken it: is a replica running? (kubectl -n tessera-system get pods)"),
])
async def test_no_lease_a_released_one_or_one_that_cannot_be_read(answer: tuple[int, Any], state: str,
                                                                   message: str) -> None:
    found = await _judge(_Api([answer]))
    assert (found.state, found.message) == (state, message)


def _args(pod: str) -> argparse.Namespace:
    return argparse.Namespace(pod=pod, namespace=None, config=None, scheduler_namespace="tessera-system",
                              output="table")


def _installed_api(elect: bool) -> _Api:
    """The installed configuration's ConfigMap (its Lease tessera-system/tessera, `leaderElect:
    elect`) and that Lease, its holder's last renewal 12 s ago."""
    return _Api([(200, _lease("tessera-7c9_1f", NOW - 12))], {
        "/api/v1/namespaces/tessera-system/configmaps/tessera-scheduler-config":
            (200, {"kind": "ConfigMap", "data": {"config.yaml": _installed_text(elect)}})})


def _installed_text(elect: bool = True) -> str:
    """A configuration electing (`elect`) on the Lease tessera-system/tessera (30 s)."""
    return (f"apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
            f"leaderElection:\n  leaderElect: {str(elect).lower()}\n  leaseDuration: 30s\n  renewDeadline: 20s\n"
            f"  retryPeriod: 4s\n  resourceNamespace: tessera-system\n  resourceName: tessera\n")


def _serve(monkeypatch: pytest.MonkeyPatch, api: _Api, objs: list[dict[str, Any]]) -> None:
    """The CLI lists `objs` (read at each command: a test may change them between runs) and reads
    the rest through `api`, on `api`'s clock."""
    monkeypatch.setattr(cli, "_listing", fake_listing(api, objs))
    monkeypatch.setattr(time, "time", lambda: NOW + api.t)  # the module cli reads the time through
    monkeypatch.setattr(cli, "leadership", partial(leadership, now=lambda: NOW + api.t, clock=api.clock,
                                                   sleep=api.sleep))


@pytest.mark.parametrize("elect", [True, False])
async def test_explain_says_no_replica_schedules_a_pod_not_tried_yet(monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str],
                                                                     elect: bool) -> None:
    """The trial itself: the installed configuration's Lease, its holder killed 12 s ago."""
    api = _installed_api(elect)
    _serve(monkeypatch, api, [b.node("v100-node-001", gpus=4), b.pod("gap-pod", limits={"nvidia.com/gpu": 1}),
                              b.pod("running", node_name="v100-node-001", limits={"nvidia.com/gpu": 1},
                                    phase="Running")])
    assert await cli._explain(_args("gap-pod"), Target(None, None, "default")) == 0
    out = capsys.readouterr()
    if not elect:
        assert "Leader:" not in out.out and LEASE not in api.paths
        return
    assert "Status:     pending: not tried yet\nLeader:     none: no Tessera replica is scheduling. The Lease " \
           "tessera-system/tessera was last renewed by tessera-7c9_1f about" in out.out
    assert "watching the Lease tessera-system/tessera" in out.err  # the wait is said, on stderr
    # a bound pod: who leads is not its question
    api.paths.clear()
    assert await cli._explain(_args("running"), Target(None, None, "default")) == 0
    assert "Leader:" not in capsys.readouterr().out and LEASE not in api.paths


async def test_a_lease_that_cannot_be_read_again_is_not_called_stopped() -> None:
    """The first read shows an old renewTime; every read while watching fails: nothing says the
    holder stopped, so explain cannot tell (the apiserver, not the leader, may be the trouble)."""
    api = _Api([(200, _lease("a", NOW - 20)), (500, b"<html>")])
    found = await _judge(api)
    assert (found.state, found.message) == (
        UNKNOWN, "unknown: the Lease tessera-system/tessera (held by a, renewed about 20 s ago by this machine's "
                 "clock) could not be read again to see whether it is renewed (HTTP 500)")


def test_the_json_form_carries_who_leads() -> None:
    from dataclasses import replace
    from scheduler.kubectl import explain as explaining
    from scheduler.kubectl.leadership import Leadership
    from tests.helpers import BINPACK, config
    result = explaining.explain([b.node("n", gpus=1), b.pod("p", limits={"nvidia.com/gpu": 1})], "default/p",
                                config(BINPACK), [], NOW)
    assert result is not None and result.dry_run is not None
    doc = explaining.as_dict(replace(result, leader=Leadership("tessera-system/tessera", STOPPED, "none: ...", "a",
                                                               18.0, 30)))
    assert doc["leader"] == {"lease": "tessera-system/tessera", "state": "stopped", "message": "none: ...",
                             "holder": "a", "age": 18.0, "duration": 30, "term": "", "config_digest": "",
                             "config_version": "", "drift": ""}


async def test_the_lease_gives_the_term_its_holder_fences_pods_with() -> None:
    """The holder's term as its leader writes tessera.dev/term (scheduler/kube/leader.py: the
    record's leaseTransitions and acquireTime as read): explain tells a pod fenced by the term
    that leads now from one an earlier term wrote. A released Lease names no term."""
    lease = _lease("tessera-7c9_1f", NOW - 1.2, transitions=7)
    found = await _judge(_Api([(200, lease)]))
    assert found.term == f"tessera-system/tessera/tessera-7c9_1f/7/{lease['spec']['acquireTime']}"
    released = await _judge(_Api([(200, _lease("", NOW - 1.2))]))
    assert (released.state, released.term) == (RELEASED, "")


@pytest.mark.parametrize("elect", [True, False])
async def test_what_if_says_who_schedules_the_pending_pods_now(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str],
                                                              tmp_path: Any, elect: bool) -> None:
    """Known, not fixed until now: `what-if` did not read the Lease, so its "would be placed" beside
    pods that no replica was scheduling (the leader killed) said nothing of it. It says who leads
    as explain does (the same `_leader`): through the Lease of the configuration it dry-runs, here
    the tried file's (`test_with_config_the_leader_is_read_from_the_files_lease`)."""
    tried = tmp_path / "tried.yaml"
    tried.write_text(_installed_text(elect))
    api = _installed_api(elect)
    objs: list[dict[str, Any]] = [b.node("v100-node-001", gpus=4), b.pod("gap-pod", limits={"nvidia.com/gpu": 1})]
    _serve(monkeypatch, api, objs)
    args = argparse.Namespace(config=str(tried), namespace=None, all_namespaces=False, filename=None, rename=False,
                              without_node=None, without_nodes=None,
                              scheduler_namespace="tessera-system", output="table", seed=0)
    assert await cli._what_if(args, Target(None, None, "default")) == 0
    out = capsys.readouterr()
    if not elect:
        assert "Leader:" not in out.out and LEASE not in api.paths
        return
    assert [path for path in api.paths if "/leases/" in path] and {p for p in api.paths if "/leases/" in p} == {LEASE}
    assert "\nLeader: none: no Tessera replica is scheduling. The Lease tessera-system/tessera was last renewed by " \
           "tessera-7c9_1f about" in out.out
    assert "watching the Lease tessera-system/tessera" in out.err  # the wait is said, on stderr
    args.output = "json"
    api.leases = [(200, _lease("tessera-7c9_1f", NOW + api.t - 1))]
    assert await cli._what_if(args, Target(None, None, "default")) == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert doc["leader"]["state"] == LEADING and doc["leader"]["holder"] == "tessera-7c9_1f"
    # nothing pending: who leads is not its question, and the Lease is not read
    objs[1] = b.pod("gap-pod", node_name="v100-node-001", limits={"nvidia.com/gpu": 1}, phase="Running")
    api.paths.clear()
    args.output = "table"
    assert await cli._what_if(args, Target(None, None, "default")) == 0
    assert "Leader:" not in capsys.readouterr().out and LEASE not in api.paths


def _bounds(message: str) -> tuple[int, int]:
    """The takeover range explain says, in seconds from now."""
    found = re.search(r"in about (\d+) to (\d+) s|within about (\d+) s", message)
    assert found, message
    low, high, within = found.groups()
    return (int(low), int(high)) if within is None else (0, int(within))


@pytest.mark.parametrize(("age", "came", "said"), [(23, 13, (7, 25)), (34, 1, (0, 14))])
async def test_the_takeover_the_trial_saw_is_within_the_range_said(age: int, came: int, said: tuple[int, int]) -> None:
    """A platform engineer's trial (lease 30 s, retry 4 s): "last renewed about 23 s ago ... within
    about 26 s" and the takeover came 13 s later; "about 34 s ago ... within about 14 s" and it came
    1 s later. A standby counts the lease from when it saw the last renewal (client-go
    leaderelection.go isLeaseValid: observedTime + leaseDuration), which explain cannot know: so it
    says a range, and both takeovers are in it."""
    api = _Api([(200, _lease("a", NOW - age + 6))])  # watched for retry + SKEW = 6 s
    found = await _judge(api)
    assert found.state == STOPPED and round(found.age) == age
    low, high = _bounds(found.message)
    assert (low, high) == said and low <= came <= high, found.message


@settings(max_examples=300, deadline=None)
@given(phase=st.floats(0, 1), jitters=st.lists(st.floats(0, 1), min_size=40, max_size=40),
       renewed=st.floats(0, 60), asked=st.floats(0, 1))
def test_the_range_holds_for_a_standby_polling_as_client_go_does(phase: float, jitters: list[float],
                                                                 renewed: float, asked: float) -> None:
    """client-go's standby: tries every retryPeriod jittered up to x2.2 (wait.JitterUntil with
    JitterFactor 1.2, sliding), notes when the record last changed (observedTime) and takes the
    Lease at its first try at least leaseDuration later. Whatever its phase and jitters, and
    whenever explain asks after judging the holder stopped, the takeover is in the range said."""
    retry, duration, longest = 4.0, 30, 4.0 * 2.2
    tries, t = [], phase * longest
    for jitter in jitters:
        tries.append(t)
        t += retry * (1 + 1.2 * jitter)
    observed = next(t for t in tries if t >= renewed)
    takeover = next(t for t in tries if t >= observed + duration)
    earliest = renewed + retry + 2.0 + 6.0 + 0.01  # a younger renewal reads as leading; then a 6 s watch
    if takeover <= earliest:
        return  # the takeover came before explain could call the holder stopped
    now = earliest + asked * (takeover - earliest)
    api = _Api([(200, _lease("a", NOW - (now - renewed) + 6))])
    found = asyncio.run(_judge(api))
    assert found.state == STOPPED
    low, high = _bounds(found.message)
    assert low - 0.5 <= takeover - now <= high + 0.5, (found.message, takeover - now)
    assert low == max(0, math.floor(duration - round(now - renewed))), found.message  # not before the lease ends


_MISSPELT = ("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
             "leaderElection:\n  leaseDuration: 30s\n  renewDeadline: 20s\n  retryPeriod: 4s\n"
             "  resourceNamespace: tessera-system\n  resourceName: tessera\n"
             "profiles:\n- schedulerName: tessera\n  pluginConfig:\n  - name: Coscheduling\n"
             "    args:\n      podGroupBackofSeconds: 10\n")
_CONFIG_MAP = "/api/v1/namespaces/tessera-system/configmaps/tessera-scheduler-config"
_BUILT_IN_LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/tessera"


@pytest.mark.parametrize("command", ["explain", "what-if"])
async def test_an_invalid_installed_configuration_still_names_the_running_schedulers_lease(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: str) -> None:
    """An on-call trial: the ConfigMap held a misspelt plugin arg (the restarted replicas
    crash-looped) while a replica led on tessera-system/tessera; explain and what-if fell back to
    the built-in configuration with its Lease kube-system/tessera and printed "Leader: none: there
    is no Lease kube-system/tessera ... is Tessera running?". The Lease is the raw document's."""
    api = _Api([(200, _lease("tessera-7c9_1f", NOW - 1))],
               {_CONFIG_MAP: (200, {"kind": "ConfigMap", "data": {"config.yaml": _MISSPELT}})})
    _serve(monkeypatch, api, [b.node("n1", gpus=4), b.pod("gap-pod", limits={"nvidia.com/gpu": 1})])
    if command == "explain":
        assert await cli._explain(_args("gap-pod"), Target(None, None, "default")) == 0
    else:
        args = argparse.Namespace(config=None, namespace=None, all_namespaces=False, filename=None, rename=False,
                                  without_node=None, without_nodes=None,
                                  scheduler_namespace="tessera-system", output="table", seed=0)
        assert await cli._what_if(args, Target(None, None, "default")) == 0
    out = capsys.readouterr()
    assert LEASE in api.paths and _BUILT_IN_LEASE not in api.paths, api.paths
    assert "tessera-7c9_1f (the Lease tessera-system/tessera was renewed about 1 s ago)" in out.out, out.out
    assert "kube-system/tessera" not in out.out and "is Tessera running" not in out.out
    assert "warning: invalid configuration: tessera-system/tessera-scheduler-config: " \
           "profiles[0].pluginConfig[0].args.podGroupBackofSeconds: unknown field" in out.err, out.err


@pytest.mark.parametrize(("answer", "why"), [
    ((403, {"kind": "Status"}), "configmap tessera-system/tessera-scheduler-config: denied (HTTP 403)"),
    ((200, {"kind": "ConfigMap", "data": {"config.yaml": "leaderElection: [\n"}}), "invalid configuration: "),
    ((200, {"kind": "ConfigMap", "data": {"config.yaml": "profiles: 3\n"}}), "invalid configuration: "),
    ((200, {"kind": "ConfigMap", "data": {"config.yaml": _MISSPELT.replace("retryPeriod: 4s", "retryPeriod: 4")}}),
     "invalid configuration: tessera-system/tessera-scheduler-config: "),
])
async def test_without_the_installed_lease_the_leader_is_unknown_not_none(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], answer: tuple[int, Any],
        why: str) -> None:
    """When the ConfigMap cannot be read, or neither it nor its leaderElection section is valid,
    the Lease the scheduler elects on is not known: the Leader line says so and why, and reads no
    guessed Lease (the built-in kube-system/tessera: "none ... is Tessera running?" was false)."""
    api = _Api([(404, {"kind": "Status", "code": 404})], {_CONFIG_MAP: answer})
    _serve(monkeypatch, api, [b.node("n1", gpus=4), b.pod("gap-pod", limits={"nvidia.com/gpu": 1})])
    assert await cli._explain(_args("gap-pod"), Target(None, None, "default")) == 0
    out = capsys.readouterr()
    assert not [path for path in api.paths if "/leases/" in path], api.paths
    [line] = [line for line in out.out.splitlines() if line.startswith("Leader:")]
    assert line.startswith("Leader:     unknown: which Lease the installed scheduler elects on is not known (") \
        and why in line, line
    assert "none" not in line.split("(")[0] and "is Tessera running" not in out.out


@pytest.mark.parametrize("config_map", [True, False])
async def test_a_pod_written_by_a_leader_on_another_lease_says_so_on_the_leader_line(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], config_map: bool) -> None:
    """A trial: the ConfigMap was installed (its Lease tessera-system/tessera) but the scheduler ran
    as `tessera run` without --config, on the built-in configuration's Lease kube-system/tessera.
    explain read the ConfigMap's Lease and said "none: there is no Lease tessera-system/tessera
    ... is Tessera running?" while it ran and had tried the pod. explain cannot know how the
    scheduler was started; the pod's tessera.dev/term (every status write of a term carries it)
    names the Lease its writer led on, and the Leader line says so when that is not the one read.
    Without the ConfigMap the built-in Lease is the one read: the pod's token agrees, no note."""
    token = "kube-system/tessera/dev-box_7f/1/2026-01-01T00:00:00.000000Z"
    leases = [(404, {"kind": "Status", "code": 404})] if config_map else [(200, _lease("dev-box_7f", NOW - 1))]
    api = _Api(leases, {_CONFIG_MAP: (200, {"kind": "ConfigMap", "data": {"config.yaml": _installed_text()}})}
               if config_map else {})
    _serve(monkeypatch, api, [b.node("n1", gpus=4),
                              b.pod("gap-pod", limits={"nvidia.com/gpu": 8}, annotations={"tessera.dev/term": token})])
    assert await cli._explain(_args("gap-pod"), Target(None, None, "default")) == 0
    out = capsys.readouterr()
    [line] = [line for line in out.out.splitlines() if line.startswith("Leader:")]
    if not config_map:
        assert line == "Leader:     dev-box_7f (the Lease kube-system/tessera was renewed about 1 s ago)", line
        return
    assert line.startswith("Leader:     none: there is no Lease tessera-system/tessera ("), line
    assert line.endswith("; but this pod's tessera.dev/term was written by dev-box_7f leading on the Lease "
                         "kube-system/tessera, not tessera-system/tessera (the installed configuration's): a "
                         "scheduler runs with another configuration (`tessera run` without --config elects on "
                         "kube-system/tessera), and that Lease says who leads: kubectl -n kube-system get lease "
                         "tessera"), line





@pytest.mark.parametrize("command", ["explain", "what-if"])
async def test_with_config_the_leader_is_read_from_the_files_lease(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Any, command: str) -> None:
    """A re-trial: the Helm chart installed (replicas 0, its Lease tessera-system/tessera released)
    and Tessera run by hand on topology.yaml (leaderElection kube-system/tessera). `explain
    --config topology.yaml` named the leader; `what-if --config topology.yaml` read the installed
    ConfigMap's Lease and said "Leader: none: the Lease tessera-system/tessera was released" while
    a leader was renewing. Both read the Lease of the configuration they dry-run."""
    topology = tmp_path / "topology.yaml"
    topology.write_text(_installed_text().replace("tessera-system", "kube-system"))
    api = _Api([(200, _lease("dev-box_7f", NOW - 1))],
               {_CONFIG_MAP: (200, {"kind": "ConfigMap", "data": {"config.yaml": _installed_text()}})})
    _serve(monkeypatch, api, [b.node("n1", gpus=4), b.pod("gap-pod", limits={"nvidia.com/gpu": 8})])
    if command == "explain":
        args = _args("gap-pod")
        args.config = str(topology)
        assert await cli._explain(args, Target(None, None, "default")) == 0
    else:
        args = argparse.Namespace(config=str(topology), namespace=None, all_namespaces=False, filename=None, rename=False,
                                  without_node=None, without_nodes=None,
                                  scheduler_namespace="tessera-system", output="table", seed=0)
        assert await cli._what_if(args, Target(None, None, "default")) == 0
    out = capsys.readouterr()
    assert [path for path in api.paths if "/leases/" in path] == [_BUILT_IN_LEASE], api.paths
    [line] = [line for line in out.out.splitlines() if line.startswith("Leader:")]
    assert re.sub(r"^Leader: +", "", line) == "dev-box_7f (the Lease kube-system/tessera was renewed about 1 s ago)", line
