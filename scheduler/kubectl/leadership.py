"""Who schedules now: the Lease of the scheduler's configuration, read by `kubectl tessera explain`
and `what-if`.

A new user's trial: after the leader was killed (the chart's lease is 30 s) a pending pod read
"pending: not tried yet" beside a dry run that placed it and no Events, and bound ~40 s later
when a standby took over. Nothing said that no replica led. So `explain` reads the Lease that
the configuration's `leaderElection` names (the installed ConfigMap's, as for its dry run) and
says who leads, or that nobody does and when a standby should take over. With `leaderElect:
false` there is no Lease to read and nothing is said.

Whether a holder still renews is judged as the scheduler judges it where it can
(`scheduler/kube/leader.py`, `lone_replica.py`): by watching the record change on this process's
monotonic clock, not by trusting the Lease's `renewTime` against this machine's wall clock. A
one-shot command cannot wait a whole lease duration, so the wall clock only picks the easy case:
a `renewTime` within `retryPeriod` (+ `SKEW`) of now reads as a leader that renews (said as
"about", since the clocks may differ); any other record is watched for `retryPeriod + SKEW`
seconds (a leader renews every `retryPeriod`), and a holder that renewed meanwhile leads — the
clocks differ — while one that did not has stopped.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

import aiohttp
import anyio

from scheduler import __version__
from scheduler.api.config import BUILTIN_SOURCE
from scheduler.api.config_effective import config_digest
from scheduler.api.config_model import LeaderElectionConfig, SchedulerConfig
from scheduler.kube.http import KubeHttp
from scheduler.kube.leader import JITTER_FACTOR, LEASES, lease_config_digest, lease_config_version
from scheduler.kube.term_token import term_token
from scheduler.kubectl.installed import CONFIG_KEY, CONFIG_MAP, DEFAULT_NAMESPACE, lease_grant

__all__ = ["LEADING", "MISSING", "RELEASED", "SKEW", "STOPPED", "UNKNOWN", "Leadership", "config_drift",
           "leadership"]

SKEW = 2.0  # seconds of clock difference (and apiserver latency) a renewTime is allowed
POLL = 1.0  # seconds between two reads of a watched Lease

LEADING = "leading"  # a holder renews the Lease
STOPPED = "stopped"  # a holder is named but does not renew: no replica schedules until a standby takes over
RELEASED = "released"  # emptied by a holder that stopped gracefully; nobody has taken it yet
MISSING = "missing"  # no Lease: no replica with leader election has run (or it was deleted)
UNKNOWN = "unknown"  # the Lease cannot be read


@dataclass(frozen=True, slots=True)
class Leadership:
    lease: str  # namespace/name
    state: str  # LEADING, STOPPED, RELEASED, MISSING or UNKNOWN
    message: str  # the sentence explain prints
    holder: str = ""
    age: float | None = None  # seconds since the record's renewTime by this machine's clock (approximate)
    duration: int = 0  # the record's leaseDurationSeconds
    # the holder's term as its tessera.dev/term token (`term_token`: the Lease, holder,
    # leaseTransitions, acquireTime), "" when no holder is named: a pod carrying it was fenced by it
    term: str = ""
    # the digest of the configuration the holder runs, as it records it on the Lease
    # (`lease_config_digest`), "" when not known, and the Tessera version that computed it; and the
    # warning when the dry run uses another (`config_drift`)
    config_digest: str = ""
    config_version: str = ""
    drift: str = ""


async def leadership(http: KubeHttp, election: LeaderElectionConfig, *,
                     role_namespace: str = DEFAULT_NAMESPACE,
                     now: Callable[[], float] = time.time, clock: Callable[[], float] = time.monotonic,
                     sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
                     progress: Callable[[str], None] = lambda _: None) -> Leadership | None:
    """Who leads through the configuration's Lease; None without leader election. `progress`
    is told before a watch makes the caller wait; `role_namespace` is where the shipped Role that
    reads the Lease is (a 403 says which Role to ask for: `lease_grant`)."""
    if not election.leader_elect:
        return None
    namespace, name = election.resource_namespace, election.resource_name
    lease = f"{namespace}/{name}"
    path = f"{LEASES.format(namespace=quote(namespace, safe=''))}/{quote(name, safe='')}"
    retry = election.retry_period_seconds
    read = await _read(http, path)
    if read == DENIED:
        read = f"{DENIED}: {lease_grant(lease, role_namespace)}"
    if isinstance(read, str):
        return Leadership(lease, UNKNOWN, f"unknown: the Lease {lease} cannot be read ({read})")
    if read is None:
        return Leadership(lease, MISSING, f"none: there is no Lease {lease} (leaderElection in the configuration: a "
                                          f"running replica creates it): is Tessera running? "
                                          f"(kubectl -n {namespace} get pods)")
    seen, age = read["spec"], _age(read["spec"], now())
    holder = _holder(seen)
    duration = _duration(seen, election)
    if not holder:
        return _released(lease, namespace, age, retry)
    if age is not None and -SKEW <= age <= retry + SKEW:
        return Leadership(lease, LEADING, f"{holder} (the Lease {lease} was renewed about {round(age)} s ago)",
                          holder, age, duration, _term(namespace, name, seen), lease_config_digest(read),
                          lease_config_version(read))
    window = retry + SKEW
    progress(f"watching the Lease {lease} for up to {window:g} s: "
             + (f"{holder} last renewed it about {round(age)} s ago by this machine's clock" if age is not None
                else f"its renewTime does not say when {holder} last renewed it"))
    since = clock()
    looked, failed = False, ""
    while clock() - since < window:
        await sleep(POLL)
        current = await _read(http, path)
        if isinstance(current, str):
            failed = current  # one look fewer
            continue
        looked = True
        if current is not None and current["spec"] == seen:
            continue  # the record as it was: no renewal yet
        if current is None:
            return Leadership(lease, MISSING, f"none: the Lease {lease} was deleted while this command watched it")
        renewed = _holder(current["spec"])
        if not renewed:
            return _released(lease, namespace, _age(current["spec"], now()), retry)
        if renewed != holder:
            said = f"{renewed} (it took the Lease {lease} over from {holder} while this command watched)"
        else:
            said = f"{renewed} (it renewed the Lease {lease} while this command watched" + (
                f"; its renewTime read about {round(age)} s old by this machine's clock: the clocks differ, or a "
                "renewal came late)" if age is not None else ")")
        return Leadership(lease, LEADING, said, renewed, _age(current["spec"], now()),
                          _duration(current["spec"], election), _term(namespace, name, current["spec"]),
                          lease_config_digest(current), lease_config_version(current))
    if not looked:  # the apiserver, not the holder, may be the trouble: nothing says it stopped
        when = f", renewed about {round(age)} s ago by this machine's clock" if age is not None else ""
        return Leadership(lease, UNKNOWN, f"unknown: the Lease {lease} (held by {holder}{when}) could not be read "
                                          f"again to see whether it is renewed ({failed})", holder, age, duration,
                          _term(namespace, name, seen))
    age = _age(seen, now())
    return Leadership(lease, STOPPED, _stopped(lease, namespace, holder, age, duration, retry, window),
                      holder, age, duration, _term(namespace, name, seen))


DEPLOYMENT = "tessera-scheduler"  # deploy/scheduler/deployment.yaml, the chart's scheduler-deployment.yaml


def config_drift(leader: Leadership, config: SchedulerConfig, namespace: str = DEFAULT_NAMESPACE) -> str:
    """Why the dry run may explain decisions nobody makes: the leader runs another configuration
    than `config`, the installed one the dry run uses (the ConfigMap in `namespace`, or the
    built-in one when there is none); "" when they agree or the leader's is not known. Nothing
    reloads a configuration: a ConfigMap changed by `helm upgrade` or `kubectl edit` is run only
    by replicas started since, and a bad upgrade's new pods that never start leave the old leader
    running the old one. Both digests are `config_digest`, so equal settings compare equal; a
    digest another version of Tessera computed is not compared (two versions may digest the same
    settings differently: this command's release not being the leader's is no drift a restart
    would end). The restart advised names both ways a replica runs: the Deployment, and a scheduler
    run by hand (deploy/README's dev-cluster path, the Deployment at 0 replicas), where a rollout
    restart does nothing; the command reads no Deployment to tell which."""
    if leader.state != LEADING or not leader.config_digest or leader.config_version != __version__:
        return ""
    ours = config_digest(config)
    if ours == leader.config_digest:
        return ""
    runs = f"the leader {leader.holder} runs the configuration with digest {leader.config_digest}"
    if config.source == BUILTIN_SOURCE:
        return (f"{runs}, but the built-in configuration this dry run uses (there is no ConfigMap "
                f"{namespace}/{CONFIG_MAP}) is {ours}: it was started with another configuration file; "
                "give that file with --config FILE")
    key = CONFIG_KEY.replace(".", "\\.")  # jsonpath escapes the dot of a key
    return (f"{runs}, but the ConfigMap {config.source} holds {ours}, which this dry run uses: a replica reads its "
            f"configuration only when it starts; restart the scheduler (kubectl -n {namespace} rollout restart "
            f"deploy/{DEPLOYMENT}; or, for a scheduler run by hand, run it again with the ConfigMap's {CONFIG_KEY} as "
            f"--config (kubectl -n {namespace} get configmap {CONFIG_MAP} -o 'jsonpath={{.data.{key}}}')), "
            f"or, if new replicas were started and do not become ready, see why (kubectl -n {namespace} get pods)")


def _standby_try(retry: float) -> float:
    """The longest a standby waits between two reads of the Lease: client-go's acquire loop runs
    every `retryPeriod` jittered by `JitterFactor` (wait.JitterUntil: period + rand * 1.2 * period)."""
    return retry * (1 + JITTER_FACTOR)


def _stopped(lease: str, namespace: str, holder: str, age: float | None, duration: int, retry: float,
             watched: float) -> str:
    """No replica schedules: the holder stopped renewing. A standby takes over at its first try
    `duration` after it saw the record last change (client-go isLeaseValid: observedTime +
    leaseDuration), and it saw that change at its first try after the renewal. When that try came
    is the standby's alone (its phase and jitter), so explain says a range, not a time: not before
    `duration - age` (the lease must run out even for a standby that saw the renewal at once), and
    no later than two of its longest waits between tries after that (one to see the renewal, one
    to try after expiry). Saying only the upper end read as a forecast: a trial saw takeovers 13 s
    and 1 s after "within about 26 s" and "within about 14 s"; a single time (one wait late) would
    be wrong either side."""
    head = "none: no Tessera replica is scheduling. The Lease"
    if age is None:
        return (f"{head} {lease} held by {holder} did not change in {watched:g} s (lease {duration} s): its holder "
                f"stopped renewing. A standby takes over about {duration} s after the last renewal it saw; until "
                "then no pod is scheduled.")
    said = f"{head} {lease} was last renewed by {holder} about {round(age)} s ago (lease {duration} s)"
    if age >= duration + 2 * _standby_try(retry) + SKEW:
        # a replica started after the holder stopped judges it from its own first sight of the
        # record (client-go's observedTime): it stands by a whole lease from its start
        return (f"{said} and no standby has taken it over yet. A replica started since waits about {duration} s "
                "from its start before it takes the Lease (it judges the holder from its own first sight); if none "
                f"was started, is a replica running? (kubectl -n {namespace} get pods)")
    longest = _standby_try(retry)
    earliest = max(0, duration - round(age))
    latest = max(1, math.ceil(duration - age + 2 * longest))
    when = f"in about {earliest} to {latest} s" if earliest > 0 else f"any moment now, within about {latest} s"
    return (f"{said} and not since: its holder stopped renewing. A standby takes over once it has seen no renewal for "
            f"{duration} s: {when} (it sees a renewal, and looks again, up to {longest:g} s late); until then no pod "
            "is scheduled.")


def _released(lease: str, namespace: str, age: float | None, retry: float) -> Leadership:
    """An emptied Lease (a graceful stop, client-go's ReleaseOnCancel): a standby takes it at
    its next try (`_standby_try`)."""
    when = f" about {round(age)} s ago" if age is not None else ""
    if age is not None and age > _standby_try(retry) + SKEW:
        message = (f"none: the Lease {lease} was released{when} (its holder stopped) and no replica has taken it: "
                   f"is a replica running? (kubectl -n {namespace} get pods)")
    else:
        message = (f"none: the Lease {lease} was released{when} (its holder stopped); a standby takes it at its "
                   f"next try, within about {round(_standby_try(retry))} s")
    return Leadership(lease, RELEASED, message, "", age)


DENIED = "denied, HTTP 403"


async def _read(http: KubeHttp, path: str) -> dict[str, Any] | str | None:
    """The Lease (its spec a dict); None when there is no Lease; why, when it cannot be read."""
    try:
        response = await http.request("GET", path, timeout=10.0, limited=False)
    except (aiohttp.ClientError, TimeoutError, OSError) as err:
        return str(err) or type(err).__name__
    if response.status == 404:
        return None
    if response.status == 403:
        return DENIED
    if not response.ok:
        return f"{'denied, ' if response.status == 401 else ''}HTTP {response.status}"
    try:
        body = response.json()
    except ValueError:
        body = None
    spec = body.get("spec") if isinstance(body, dict) else None
    return body if isinstance(body, dict) and isinstance(spec, dict) else "not a Lease"


def _holder(spec: dict[str, Any]) -> str:
    holder = spec.get("holderIdentity")
    return holder if isinstance(holder, str) else ""


def _term(namespace: str, name: str, spec: dict[str, Any]) -> str:
    """The term of the record's holder as its leader writes it onto pods (scheduler/kube/leader.py
    `_start_leading`: the record's leaseTransitions and acquireTime as the apiserver returns them)."""
    transitions = spec.get("leaseTransitions")
    acquired = spec.get("acquireTime")
    return term_token(namespace, name, _holder(spec),
                      transitions if isinstance(transitions, int) and not isinstance(transitions, bool) else 0,
                      acquired if isinstance(acquired, str) else "")


def _duration(spec: dict[str, Any], election: LeaderElectionConfig) -> int:
    """The record's leaseDurationSeconds (what a standby waits), else the configuration's."""
    duration = spec.get("leaseDurationSeconds")
    return duration if isinstance(duration, int) and duration > 0 else int(election.lease_duration_seconds)


def _age(spec: dict[str, Any], now: float) -> float | None:
    """Seconds since the record's renewTime by this machine's clock; None when it has none."""
    stamp = spec.get("renewTime")
    try:
        return now - datetime.fromisoformat(stamp).timestamp() if isinstance(stamp, str) else None
    except ValueError:
        return None
