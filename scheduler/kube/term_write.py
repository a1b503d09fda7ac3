"""One `tessera.dev/term` write onto one pod, and what its answer says.

Writing the annotation changes the pod's resourceVersion, so no Binding conditional on an earlier
version (every Binding Tessera sends is: `Binding.resource_version`) can land afterwards, however
late it arrives. Two writers use it: the term fence (a new leader, onto every pod an earlier term
could have bound) and the Binder (a replica giving up on its own ambiguous Binding withdraws it).

The write goes through pods/status (the scheduler's role has `patch pods/status`, not `patch
pods`; the apiserver keeps metadata.annotations from a status write, podStatusStrategy
.PrepareForUpdate) as a merge patch with the pod's uid as a precondition, outside the client's
rate limiter. Only the apiserver's answers count (scheduler/kube/pod_answers.py): the Pod in a
2xx (written), its NotFound for the pod or its Conflict for the uid precondition (gone);
anything else — a transport error, an error status, a proxy's page — is a failed write that
says nothing about the pod.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scheduler.core.annotations import TERM
from scheduler.kube.http import MERGE_PATCH, TRANSPORT_ERRORS, KubeHttp
from scheduler.kube.pod_answers import pod_in, pod_not_found, uid_conflict
from scheduler.logs import describe_error


@dataclass(frozen=True, slots=True)
class TermWrite:
    """The answer to one write: `pod` the pod as written (its new resourceVersion), or `gone`
    (deleted, or another pod under the name), or `failed` (why; nothing is known of the pod)."""

    pod: dict[str, Any] | None = None
    gone: bool = False
    failed: str = ""


async def write_term(http: KubeHttp, namespace: str, name: str, uid: str, token: str, *, timeout: float = 30.0,
                     resend: Callable[[], bool] | None = None) -> TermWrite:
    """Write `tessera.dev/term: token` onto pod `namespace/name` if it is still the pod `uid`.
    `resend` is asked before a throttled write is sent again after its Retry-After."""
    body = {"metadata": {"uid": uid, "annotations": {TERM: token}}}
    path = f"/api/v1/namespaces/{namespace}/pods/{name}/status"
    try:
        response = await http.request("PATCH", path, body=body, content_type=MERGE_PATCH, timeout=timeout,
                                      limited=False, resend=resend)
    except TRANSPORT_ERRORS as err:
        return TermWrite(failed=describe_error(err))
    written = pod_in(response) if response.ok else None
    if written is not None:
        return TermWrite(pod=written)
    if response.ok:  # a 2xx that is not the Pod (a proxy's page): nothing says the write landed
        return TermWrite(failed=f"HTTP {response.status} without the Pod in it")
    if (response.status == 404 and pod_not_found(response, name)) or (
            response.status == 409 and uid_conflict(response)):  # deleted, or another pod under the name
        return TermWrite(gone=True)
    return TermWrite(failed=f"HTTP {response.status}: {response.message()}")
