"""`kubectl tessera explain pg/NAME`: a gang explained as a whole, from its PodGroup.

A gang user thinks in PodGroups (a Kubeflow job's is named after the job), not in the member
that happens to wait: the PodGroup's minMember (and minResources), the members that exist and
where they are, how many are missing, and why the gang waits. The why is the pod form's, never a
second text: the first waiting member is explained as `explain POD` explains it (`explain_loaded`:
its dry run is its gang's, every pending sibling tried with it) and its gang sentences (too few
members, a minResources gap, can never fit) are said once for the gang; each waiting member then
gets its own one-line reason (`pending_line`). A PodGroup none of whose pods exist, or whose only
waiting members are another scheduler's, has no member to explain: the too-few and minResources
sentences are asked of the group itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from scheduler.api.config_model import SchedulerConfig
from scheduler.core.capacity import gang_too_few, min_resources_beyond
from scheduler.core.objects import PODGROUP_API_VERSIONS, WORKLOAD_API, GangRef, gang_key
from scheduler.core.plugins.coscheduling import group_status
from scheduler.core.scheduler import Scheduler
from scheduler.kube.snapshot import Unread
from scheduler.kubectl.explain import Explanation, dry_run_verdict, explain_loaded, pending_line
from scheduler.kubectl.installed import DEFAULT_NAMESPACE
from scheduler.kubectl.other_profile import hint, lacks, term_writers
from scheduler.sim.snapshot import load
from scheduler.view.model import plain
from scheduler.view.text import columns


@dataclass(frozen=True, slots=True)
class MemberLine:
    pod: str  # its name (the PodGroup's namespace)
    phase: str
    node: str  # "" while it has none
    waiting: bool  # pending (or held by its scheduling gates): no node yet
    reason: str  # a waiting member's one line (`pending_line`); "" for the others
    # of the waiting, held by spec.schedulingGates: never tried, counted apart as `explain POD` counts them
    gated: bool


@dataclass(frozen=True, slots=True)
class GroupExplanation:
    podgroup: str  # namespace/name
    api_version: str
    # its minMember (the Workload API's minCount); None: the PodGroup cannot be read as one (`invalid` says why)
    min_member: int | None
    # scheduler-plugins' spec.minResources, as written ({} when it has none); None for the Workload
    # API's PodGroup, which has no such field (JSON null; the text leaves the line out)
    min_resources: dict[str, str] | None
    phase: str  # its status phase as the scheduler counts it ("" when it has none)
    members: tuple[MemberLine, ...]  # its pods that have not finished, by name
    missing: int  # how many more must exist to reach minMember
    waits: tuple[str, ...]  # why the gang waits, each said once (the member explanation's words)
    explained: str = ""  # the waiting member whose dry run speaks for the gang ("" when none waits)
    member: Explanation | None = None  # its explanation, as `explain POD` gives it
    invalid: str = ""  # why the scheduler cannot read the PodGroup ("" when it can)
    failed: tuple[str, ...] = ()  # its pods in phase Failed, by name (finished: not among `members`)


def podgroup_object(objects: Sequence[Mapping[str, Any]], namespace: str, name: str,
                    api: str) -> Mapping[str, Any] | None:
    """The listed PodGroup `namespace/name` of API group `api`, or None."""
    version = PODGROUP_API_VERSIONS[api]
    return next((obj for obj in objects if obj.get("kind") == "PodGroup" and obj.get("apiVersion") == version
                 and (meta := obj.get("metadata") or {}).get("namespace") == namespace
                 and meta.get("name") == name), None)


def group_names(objects: Sequence[Mapping[str, Any]], namespace: str, apis: Sequence[str]) -> list[str]:
    """The names of the listed PodGroups of `apis` in `namespace` (for a "did you mean")."""
    versions = {PODGROUP_API_VERSIONS[api] for api in apis}
    return sorted({str(meta.get("name")) for obj in objects if obj.get("kind") == "PodGroup"
                   and obj.get("apiVersion") in versions
                   and (meta := obj.get("metadata") or {}).get("namespace") == namespace})


def explain_group(objects: Sequence[dict[str, Any]], namespace: str, name: str, api: str, config: SchedulerConfig,
                  now: float, unread: Mapping[str, Unread] | None = None,
                  scheduler_namespace: str = DEFAULT_NAMESPACE) -> GroupExplanation | None:
    """The gang of PodGroup `namespace/name` (API group `api`) in the listed cluster; None when the
    listing has no such PodGroup. Members Tessera schedules under a profile `config` does not have
    (`other_profile`) get no dry run and no Leader line: the reason says so, and how to give it
    (the ConfigMap looked for in `scheduler_namespace`)."""
    raw_group = podgroup_object(objects, namespace, name, api)
    if raw_group is None:
        return None
    core = Scheduler(config)
    notices = load(core, objects, now)
    state = core.state
    key = gang_key(namespace, name, api)
    group = state.gangs.podgroups.get(key)
    members = sorted((pod for uid in state.gangs.members.get(key, ()) if (pod := state.pods.get(uid)) is not None),
                     key=lambda pod: pod.meta.name)
    raws = {f"{(obj.get('metadata') or {}).get('namespace')}/{(obj.get('metadata') or {}).get('name')}": obj
            for obj in objects if obj.get("kind") == "Pod"}
    waiting = [pod for pod in members if pod.uid in state.pending or pod.uid in state.gated]
    # a member another scheduler is to place waits too (Tessera never will: the gang cannot form),
    # though there is nothing for Tessera to try: its line says whose it is
    elsewhere = [pod for pod in members if not state.is_ours(pod) and not pod.node_name and not pod.terminal
                 and not pod.meta.deleting]
    waits = {pod.uid for pod in (*waiting, *elsewhere)}
    lacking = lacks(config.source)
    writers = term_writers(elsewhere, state.scheduler_names)  # their profiles, a running Tessera's
    lines = tuple(MemberLine(pod.meta.name, pod.phase, pod.node_name, pod.uid in waits,
                             pending_line(core, raws[pod.key], pod,
                                          f"Tessera's under profile {pod.scheduler_name}, {lacking} "
                                          "(see Why it waits)" if pod.scheduler_name in writers else "")
                             if pod.uid in waits else "", pod.uid in state.gated)
                  for pod in members)
    others = tuple(f"its members are Tessera's under profile {profile} (they carry tessera.dev/term, written by "
                   f"Tessera replica {replica}), {lacking}: no dry run and no Leader line (its "
                   f"Lease is not known); {hint(scheduler_namespace, 'explain')}"
                   for profile, replica in writers.items())
    ref = GangRef(key, None, True, api)
    minimum = state.gangs.minimum_of(ref)
    spec = raw_group.get("spec")
    written = spec.get("minResources") if isinstance(spec, Mapping) else None
    status = group_status(state, key)
    result = GroupExplanation(
        podgroup=f"{namespace}/{name}", api_version=PODGROUP_API_VERSIONS[api], min_member=minimum,
        min_resources=None if api == WORKLOAD_API
        else {str(k): str(v) for k, v in sorted(written.items())} if isinstance(written, Mapping) else {},
        phase=status.phase if status is not None else "", members=lines,
        missing=max(0, minimum - len(members)) if minimum is not None else 0, waits=(),
        invalid=state.unreadable_podgroups.get(key, ""),
        failed=tuple(sorted(pod.meta.name for uid in state.gangs.history.get(key, ())
                            if (pod := state.pods.get(uid)) is not None and pod.phase == "Failed")))
    # the member tried first speaks for the gang: one its gates do not keep out, if any
    speaker = min(waiting, key=lambda pod: (pod.gated, pod.meta.name), default=None)
    if speaker is not None:
        member = explain_loaded(core, notices, objects, raws[speaker.key], config, (), now, unread,
                                events_unread=f"not read for the PodGroup: kubectl tessera explain {speaker.meta.name}",
                                scheduler_namespace=scheduler_namespace)
        return _with_member(result, member)
    if (members and not elsewhere) or group is None:
        return _replace_waits(result, others)
    return _replace_waits(result, (*others, gang_too_few(state, ref), min_resources_beyond(state, group)))


def _with_member(result: GroupExplanation, member: Explanation) -> GroupExplanation:
    """The explanation with the waiting member's: its dry run's verdict (which carries its gang's
    PreFilter message, when that stops it) and its gang sentences are the gang's reasons to wait;
    without a dry run (a member not Tessera's), its gang's own message."""
    gang = member.gang.message if member.gang is not None else ""
    verdict = f"Dry run: {dry_run_verdict(member.dry_run)}" if member.dry_run is not None else gang
    waits = (verdict, member.too_few_members, member.beyond_min_resources, member.beyond_the_cluster)
    return _replace_waits(replace(result, explained=member.pod.partition("/")[2], member=member), waits)


def _replace_waits(result: GroupExplanation, waits: Sequence[str]) -> GroupExplanation:
    """`result` with `waits`, the empty ones and repeats dropped (a gang message may be a sentence
    the member also says)."""
    return replace(result, waits=tuple(dict.fromkeys(line for line in waits if line)))


def as_dict(result: GroupExplanation) -> dict[str, Any]:
    out: dict[str, Any] = plain(result)
    return out


def _failed(x: GroupExplanation) -> str:
    """Its failed members, which the member table (pods not finished) leaves out; in phase Failed,
    that the phase stays: a re-trial read a Failed PodGroup listing only Running members, as a
    Volcano user reads a dead job, while its job had replaced the failed pod."""
    names = f"{', '.join(x.failed)} (phase Failed)" if x.failed else "no member in phase Failed is left"
    if x.phase != "Failed":
        return names
    return (f"{names}: scheduler-plugins' Failed phase stays once a member failed, also while its job replaces the "
            "pod; judge the job by its controller's status (docs/migrating.md, \"Reading a gang's state\")")


def render(x: GroupExplanation) -> str:
    """The gang for a terminal: `describe`-style fields, why it waits, then its members."""
    placed = sum(1 for line in x.members if line.node and not line.waiting)
    waiting = sum(1 for line in x.members if line.waiting)
    gated = sum(1 for line in x.members if line.gated)
    minimum = "-" if x.min_member is None else str(x.min_member)
    # the minimum by the PodGroup API's own field: the Workload API's is gang.minCount
    field = "minCount" if x.api_version == PODGROUP_API_VERSIONS[WORKLOAD_API] else "minMember"
    count = (f"{len(x.members)} exist" + (f", {x.missing} missing" if x.missing else "")
             + (f" ({field} {minimum})" if x.min_member is not None else "")
             + (f"; {placed} placed, {waiting - gated} waiting" + (f", {gated} gated" if gated else "")
                if x.members else ""))
    fields = [("PodGroup:", f"{x.podgroup} ({x.api_version})"), (f"{field[0].upper()}{field[1:]}:", minimum)]
    if x.min_resources is not None:
        fields.append(("MinResources:", ", ".join(f"{k}: {v}" for k, v in x.min_resources.items()) or "-"))
    fields.append(("Phase:", x.phase or "-"))
    if x.failed or x.phase == "Failed":
        fields.append(("Failed:", _failed(x)))
    fields.append(("Members:", count))
    if x.invalid:
        fields.insert(1, ("Invalid:", f"the scheduler cannot read it: {x.invalid}"))
    if x.member is not None and x.member.leader is not None:
        fields.append(("Leader:", x.member.leader.message))
        if x.member.leader.drift:
            fields.append(("Warning:", x.member.leader.drift))
    width = max(len(label) for label, _ in fields)
    lines = [f"{label.ljust(width)}  {value}".rstrip() for label, value in fields]
    if x.waits:
        through = f" (explained through {x.explained}: kubectl tessera explain {x.explained} for its nodes)" \
            if x.explained else ""
        lines += ["", f"Why it waits{through}:"] + [f"  {line}" for line in x.waits]
    elif x.members and not any(line.waiting for line in x.members):
        lines += ["", "No member waits."]
    if x.members:
        table = columns([["MEMBER", "PHASE", "NODE", "REASON"]]
                        + [[line.pod, line.phase, line.node, line.reason] for line in x.members])
        lines += [""] + table.splitlines()
    return "\n".join(lines)
