"""What `kubectl tessera explain`'s argument names: a pod (NAME, kubectl's `pod/NAME`, or
NAMESPACE/NAME) or, in kubectl's TYPE/NAME, a workload whose pods it explains (a trial's
`explain job/ft8` and `explain deploy/infer` read `pods "ft8" not found`) or a PodGroup whose gang
it explains (a Kubeflow user's `explain pg/pt` read `pods "pt" not found in namespace "pg"`).

A workload's pods are the pods its selector matches in its namespace, as kubectl finds them for
`kubectl logs job/NAME` (k8s.io/kubectl polymorphichelpers: the object's selector, then its
pods); the one explained is the first pending one (oldest first, then by name), the others are
named. Pure: the caller GETs the object (`WorkloadKind.path`) and hands over the listed pods.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from scheduler.api.names import DNS_LABEL
from scheduler.core.disruption import parse_label_selector
from scheduler.core.objects import PLUGINS_API, PODGROUP_API_VERSIONS, WORKLOAD_API, ObjectError
from scheduler.first_few import first_few

POD_TYPES = ("pod", "pods", "po")  # kubectl's TYPE/NAME for a pod


@dataclass(frozen=True, slots=True)
class WorkloadKind:
    resource: str  # kubectl's name for it in errors: `jobs.batch "ft8" not found`
    group_version: str
    plural: str
    word: str  # how a TYPE/NAME is written back: job/ft8

    def path(self, namespace: str, name: str) -> str:
        return (f"/apis/{self.group_version}/namespaces/{quote(namespace, safe='')}/{self.plural}/"
                f"{quote(name, safe='')}")


JOB = WorkloadKind("jobs.batch", "batch/v1", "jobs", "job")
_DEPLOYMENT = WorkloadKind("deployments.apps", "apps/v1", "deployments", "deployment")
_REPLICASET = WorkloadKind("replicasets.apps", "apps/v1", "replicasets", "replicaset")
_STATEFULSET = WorkloadKind("statefulsets.apps", "apps/v1", "statefulsets", "statefulset")
# kubectl's names of each (singular, plural, short name, the group-qualified forms)
WORKLOAD_TYPES: Mapping[str, WorkloadKind] = {
    alias: kind for kind, aliases in (
        (JOB, ("job", "jobs")),
        (_DEPLOYMENT, ("deployment", "deployments", "deploy")),
        (_REPLICASET, ("replicaset", "replicasets", "rs")),
        (_STATEFULSET, ("statefulset", "statefulsets", "sts")),
    ) for name in aliases for alias in (name, f"{name}.{kind.resource.split('.', 1)[1]}")
}
# a PodGroup's TYPE, by the APIs it is looked in: kubectl's short names (the scheduler-plugins CRD's
# pg, pgs), singular and plural in both APIs, or one API's group-qualified forms (with its version too)
PODGROUP_TYPES: Mapping[str, tuple[str, ...]] = {
    **{name: (PLUGINS_API, WORKLOAD_API) for name in ("pg", "pgs", "podgroup", "podgroups")},
    **{f"{name}.{qualifier}": (api,) for api, version in PODGROUP_API_VERSIONS.items()
       for name in ("podgroup", "podgroups")
       for qualifier in (api, f"{version.rpartition('/')[2]}.{api}")},
}
ACCEPTED = ("the argument is a pod (NAME, pod/NAME or NAMESPACE/NAME), a workload whose pending pods are "
            "explained (job/NAME, deployment/NAME, replicaset/NAME, statefulset/NAME; kubectl's short names "
            "deploy, rs, sts too) or a PodGroup whose gang is explained (pg/NAME or podgroup/NAME, in either "
            "PodGroup API; podgroups.scheduling.x-k8s.io/NAME or podgroups.scheduling.k8s.io/NAME for one)")


class BadReference(Exception):
    """The argument, or the workload it names, cannot be explained: why, in one line."""


@dataclass(frozen=True, slots=True)
class Reference:
    namespace: str
    name: str
    kind: WorkloadKind | None = None  # None: a pod (or a PodGroup)
    podgroup_apis: tuple[str, ...] = ()  # a PodGroup's: the API groups it is looked in, in this order


def reference(text: str, flag: str | None, default: str) -> Reference:
    """The pod or workload `explain`'s argument names; a NAMESPACE/NAME that contradicts -n is an
    error rather than one of the two silently winning. A known TYPE is read as one (kubectl has no
    NAMESPACE/NAME form, so a namespace named "job" is given with -n)."""
    prefix, _, name = text.rpartition("/")
    if not name:
        raise BadReference(f"{text!r} names nothing: {ACCEPTED}")
    if not prefix or prefix.lower() in POD_TYPES:
        return Reference(flag or default, name)
    kind = WORKLOAD_TYPES.get(prefix.lower())
    if kind is not None:
        return Reference(flag or default, name, kind)
    apis = PODGROUP_TYPES.get(prefix.lower())
    if apis is not None:
        return Reference(flag or default, name, podgroup_apis=apis)
    if "/" in prefix:
        raise BadReference(f"{text!r} is not one of the forms explain takes: {ACCEPTED}")
    if not DNS_LABEL.fullmatch(prefix) or len(prefix) > 63:  # no namespace's name: a TYPE explain does not take
        raise BadReference(f"unknown TYPE {prefix!r} in {text!r}: {ACCEPTED}")
    if flag is not None and flag != prefix:
        raise BadReference(f"{text} names namespace {prefix!r} but -n gives {flag!r}: use one of the two")
    return Reference(prefix, name)


def not_found(ref: Reference) -> str:
    """kubectl's words for a missing object (`pods "x" not found`), with the namespace looked in
    (`not_found_hint` adds what explain takes when a prefix was read as that namespace); a
    PodGroup's names the first API it was looked in (`podgroups.scheduling.x-k8s.io "x" not found`)."""
    resource = (ref.kind.resource if ref.kind is not None
                else podgroup_resource(ref.podgroup_apis[0]) if ref.podgroup_apis else "pods")
    return f'{resource} "{ref.name}" not found in namespace "{ref.namespace}"'


def podgroup_resource(api: str) -> str:
    """kubectl's name of the PodGroups of API group `api`: `podgroups.scheduling.x-k8s.io`."""
    return f"podgroups.{api}"


def read_as_namespace(text: str) -> str:
    """The argument's prefix when it is no TYPE and so was read as a namespace (`svc/x`,
    `cronjob/x`, `kube-system/x`); "" for `x`, `pod/x` or `job/x`, read as what they say."""
    prefix = text.rpartition("/")[0]
    if not prefix or prefix.lower() in POD_TYPES or prefix.lower() in WORKLOAD_TYPES \
            or prefix.lower() in PODGROUP_TYPES:
        return ""
    return prefix


def not_found_hint(text: str, namespace_exists: bool) -> str:
    """What explain takes, said after `not_found` when the argument's prefix was read as a
    namespace that does not exist (or could not be read): `svc/x` is likely no namespace, while
    `kube-system/x` was read right and gets kubectl's words alone."""
    prefix = read_as_namespace(text)
    if not prefix or namespace_exists:
        return ""
    return f" ({prefix!r} was read as a namespace; {ACCEPTED})"


def workload_pods(ref: Reference, workload: Mapping[str, Any], objects: Iterable[Mapping[str, Any]],
                  events: Sequence[Mapping[str, Any]] = ()) -> list[tuple[str, bool]]:
    """The workload's pods by name, each with whether it is pending: pending ones first (oldest
    first, then by name), then the others in the same order; raises `BadReference` when it has
    no selector or no pod, saying why a Job has none (`missing_note`; `events`: the Job's, oldest
    first)."""
    assert ref.kind is not None
    what = f"{ref.kind.word}/{ref.name}"
    pods = [(str(meta.get("name")), str(meta.get("creationTimestamp") or ""), _pending(obj))
            for obj in _selected(ref, workload, objects) for meta in (obj.get("metadata") or {},)]
    if not pods:
        raise BadReference(f"{what} has no pods in namespace {ref.namespace!r} (none matches its selector)"
                           + missing_note(ref, workload, objects, events, "them"))
    return [(name, pending) for name, _, pending in sorted(pods, key=lambda pod: (not pod[2], pod[1], pod[0]))]


def _selected(ref: Reference, workload: Mapping[str, Any],
              objects: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The pods the workload's selector matches in its namespace; raises `BadReference` when it
    has no selector (or one that cannot be read)."""
    assert ref.kind is not None
    what = f"{ref.kind.word}/{ref.name}"
    raw = (workload.get("spec") or {}).get("selector")
    try:
        selector = parse_label_selector(raw, f"{what}: spec.selector") if raw is not None else None
    except ObjectError as err:
        raise BadReference(f"{err}: cannot tell its pods") from None
    if selector is None or selector.empty:
        raise BadReference(f"{what} has no pod selector: cannot tell its pods; explain one by name")
    return [obj for obj in objects if obj.get("kind") == "Pod"
            for meta in (obj.get("metadata") or {},)
            if meta.get("namespace") == ref.namespace and selector.matches(meta.get("labels") or {})]


def missing_note(ref: Reference, workload: Mapping[str, Any], objects: Iterable[Mapping[str, Any]],
                 events: Sequence[Mapping[str, Any]], which: str) -> str:
    """Why a Job has fewer pods than it runs at once ("" when it has them, or is no Job): it is
    suspended (Kueue keeps a Job so until it is admitted: the Job controller creates none), or
    its controller's latest FailedCreate Event (`events`, oldest first: a ResourceQuota's
    "exceeded quota" is said only there). `which` names the pods not created ("them", "the rest")."""
    if ref.kind is not JOB:
        return ""
    spec, status = workload.get("spec") or {}, workload.get("status") or {}
    if spec.get("suspend") is True:
        return (f"; Job {ref.namespace}/{ref.name} is suspended (spec.suspend: true): its controller creates no pods "
                "until it is resumed")
    if any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in status.get("conditions") or ()):
        return ""
    parallelism = spec.get("parallelism", 1)
    completions = spec.get("completions")
    wanted = parallelism if completions is None else min(parallelism, completions - status.get("succeeded", 0))
    live = sum(1 for obj in _selected(ref, workload, objects) if not (obj.get("metadata") or {}).get("deletionTimestamp")
               and (obj.get("status") or {}).get("phase", "Pending") not in ("Succeeded", "Failed"))
    failed = [event for event in events if event.get("reason") == "FailedCreate"]
    if live >= wanted or not failed:
        return ""
    return f"; its controller could not create {which}, latest FailedCreate Event: {failed[-1].get('note') or ''}"


def _pending(pod: Mapping[str, Any]) -> bool:
    """Waiting for a node: none assigned, not finished, not being deleted."""
    return (not (pod.get("spec") or {}).get("nodeName")
            and (pod.get("status") or {}).get("phase", "Pending") == "Pending"
            and not (pod.get("metadata") or {}).get("deletionTimestamp"))


def chosen_note(ref: Reference, pods: Sequence[tuple[str, bool]], missing: str = "") -> str:
    """The line on stderr saying which of the workload's pods (`workload_pods`) is explained, the
    first, and which others wait; then `missing` (`missing_note`: why a Job has fewer pods)."""
    assert ref.kind is not None
    what = f"{ref.kind.word}/{ref.name}"
    count = f"{len(pods)} pod{'' if len(pods) == 1 else 's'}"
    pending = [name for name, waits in pods if waits]
    if not pending:
        return (f"{what}: none of its {count} is pending; explaining {pods[0][0]} (explain the others by name)"
                + missing)
    others = pending[1:]
    rest = f"; also pending: {first_few(others, 5)}" if others else ""
    return f"{what}: {len(pending)} of its {count} pending; explaining {pending[0]}{rest}{missing}"
