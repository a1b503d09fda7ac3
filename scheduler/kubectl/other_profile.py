"""Pods Tessera schedules under a profile the configuration a command was given does not have.

`nodes`, `explain` and `what-if` know Tessera's profiles from the configuration they use (--config,
else the installed ConfigMap, else the built-in one). A running Tessera may have more (a second
profile on `tessera dev-cluster`, started with a file nobody gave the command): its pods then read
as another scheduler's, though Tessera wrote on them. What shows a pod is Tessera's: its
`tessera.dev/term` (only a Tessera leader writes it, onto the pods of its own profiles), or an Event
about it whose reportingInstance is a Tessera replica's identity (one a term on some pod names;
kube-scheduler's identities have the same `<hostname>_<uuid>` shape, so the identity alone tells
nothing). The command cannot evaluate such a pod without that profile: it says so, and how to
give it (`hint`). The replica the evidence names may no longer lead (Tessera restarted with a
configuration lacking the profile, a re-trial found): when the Lease's holder is another replica,
the commands say so (`no_longer_leads`), as then perhaps no one schedules the pod.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from scheduler.api.config import BUILTIN_SOURCE
from scheduler.core.annotations import TERM
from scheduler.core.objects import ObjectError, Pod, parse_pod
from scheduler.kube.term_token import TermToken, parse_term_token
from scheduler.kubectl.installed import CONFIG_KEY, CONFIG_MAP


def replicas(pods: Iterable[Pod]) -> frozenset[str]:
    """The Tessera replicas' identities the pods' tessera.dev/term name."""
    return frozenset(token.identity for pod in pods
                     if (token := parse_term_token(pod.meta.annotations.get(TERM, ""))) is not None)


def term_writers(pods: Iterable[Pod], profiles: Iterable[str]) -> dict[str, str]:
    """Per scheduler name not in `profiles` whose pods carry a tessera.dev/term: the replica the
    latest of them names (`terms`)."""
    return {name: token.identity for name, token in terms(pods, profiles).items()}


def terms(pods: Iterable[Pod], profiles: Iterable[str]) -> dict[str, TermToken]:
    """Per scheduler name not in `profiles` whose pods carry a tessera.dev/term: the latest term
    among them (the most Lease transitions, then the latest acquireTime; a tie, the first pod's by
    namespace/name), which names the replica and its Lease. Why the latest: a pod keeps the term
    of the leader that last wrote it (a pod bound long ago, its old leader's), and the replica
    that took the Lease over with the profile writes its own onto the pods it schedules: the
    first pod's term named a replica that no longer led, and `no_longer_leads` said perhaps no one
    schedules the profile's pods while the leader did."""
    known = set(profiles)
    found: dict[str, TermToken] = {}
    for pod in sorted(pods, key=lambda pod: pod.key):
        token = parse_term_token(pod.meta.annotations.get(TERM, ""))
        if token is None or pod.scheduler_name in known:
            continue
        kept = found.get(pod.scheduler_name)
        if kept is None or (token.transitions, token.acquire_time) > (kept.transitions, kept.acquire_time):
            found[pod.scheduler_name] = token
    return found


def evidence(pod: Pod, events: Sequence[Mapping[str, Any]], known: frozenset[str]) -> str:
    """What shows `pod` is Tessera's: its tessera.dev/term, else an Event from its scheduler name
    reported by one of the `known` replicas (`replicas`); "" when nothing does."""
    token = parse_term_token(pod.meta.annotations.get(TERM, ""))
    if token is not None:
        return f"it carries tessera.dev/term, written by Tessera replica {token.identity}"
    event = _replicas_event(pod, events, known)
    if event is None:
        return ""
    reason = str(event.get("reason") or "")
    return (f"its {reason + ' ' if reason else ''}Event from {pod.scheduler_name} was reported by "
            f"{event['reportingInstance']}, a Tessera replica")


def evidence_writer(pod: Pod, pods: Iterable[Pod], events: Sequence[Mapping[str, Any]], known: frozenset[str]) -> str:
    """The replica that last ran `pod`'s profile as far as the listing shows: the one the latest
    term on the profile's `pods` names (`terms`: the pod may still carry an older leader's term
    while the new one schedules the profile's other pods), else the one that reported the pod's
    Event; "" when nothing shows the pod is Tessera's."""
    latest = terms((other for other in pods if other.scheduler_name == pod.scheduler_name), ()).get(pod.scheduler_name)
    if latest is not None:
        return latest.identity
    event = _replicas_event(pod, events, known)
    return "" if event is None else str(event["reportingInstance"])


def _replicas_event(pod: Pod, events: Sequence[Mapping[str, Any]], known: frozenset[str]) -> Mapping[str, Any] | None:
    """The first Event from the pod's own scheduler name reported by one of the `known` replicas."""
    return next((event for event in events if event.get("reportingController") == pod.scheduler_name
                 and str(event.get("reportingInstance") or "") in known), None)


def no_longer_leads(writer: str, holder: str, profile: str, what: str = "it") -> str:
    """What follows the evidence when the replica it names (`writer`) is not the Lease's current
    `holder`: that one may run without the profile; "" when the writer leads or no one is known to."""
    if not writer or not holder or writer == holder:
        return ""
    return (f"but {writer} no longer leads: the Lease's holder is {holder}, whose configuration may not have "
            f"profile {profile} (then no replica schedules {what} now)")


def configuration(source: str) -> str:
    """The configuration a command used, as its sentences name it."""
    return "the built-in configuration" if source in ("", BUILTIN_SOURCE) else f"the configuration {source}"


def lacks(source: str, stale: str = "") -> str:
    """How a sentence about a profile the configuration (`source`) does not have ends: `which
    <configuration> does not have`, or after `stale` (`no_longer_leads`: the replica that ran the
    profile may no longer run it) `<stale>; <configuration> does not have the profile either`."""
    if stale:
        return f"{stale}; {configuration(source)} does not have the profile either"
    return f"which {configuration(source)} does not have"


def hint(namespace: str, command: str, what: str = "it") -> str:
    """How to let `command` evaluate `what` (pods of a profile its configuration does not have);
    `namespace`: where it looks for the installed ConfigMap (--scheduler-namespace)."""
    return (f"pass --config FILE with the running scheduler's configuration, or install it as the ConfigMap "
            f"{namespace}/{CONFIG_MAP} (key {CONFIG_KEY}), so {command} can evaluate {what}")


def pending_left_out(objects: Iterable[Mapping[str, Any]], profiles: Iterable[str], source: str,
                     namespace: str) -> str:
    """`nodes`' warning for the listed pending pods of profiles `profiles` lacks that a running
    Tessera schedules (pods of them carry its tessera.dev/term), which its view leaves out of the
    pending ones (only -o json|yaml lists pending pods: the warning says so, the table has none);
    "" when there are none."""
    pods = []
    for obj in objects:
        if obj.get("kind") != "Pod":
            continue
        try:
            pods.append(parse_pod(dict(obj)))
        except ObjectError:  # the view says nothing of it either
            continue
    writers = term_writers(pods, profiles)
    waiting = Counter(pod.scheduler_name for pod in pods if pod.scheduler_name in writers and not pod.node_name
                      and not pod.terminal and not pod.meta.deleting)
    if not waiting:
        return ""
    total = sum(waiting.values())
    names = ", ".join(f"{name}: {n}" for name, n in sorted(waiting.items()))
    replicas_named = ", ".join(sorted({writers[name] for name in waiting}))
    return (f"{total} pending pod{'' if total == 1 else 's'} {'is' if total == 1 else 'are'} Tessera's under a "
            f"profile {configuration(source)} does not have ({names}; {'it carries' if total == 1 else 'they carry'} "
            f"tessera.dev/term, written by Tessera replica {replicas_named}): left out of the pending pods "
            f"-o json|yaml lists (`pending`); "
            f"{hint(namespace, 'nodes', 'it' if total == 1 else 'them')}")
