"""What the apiserver's answer to a write on a Pod says, told apart from what a proxy says.

A proxy or a gateway in front of the apiserver can answer with a page of its own (an HTML 200, a
404 for a path it does not route): read as the apiserver's, a 200 would look like a write that
landed and a 404 like a pod that is gone. The Binder, the status writer and the term fence each
act on these answers, so the reading lives here, once.
"""

from __future__ import annotations

from typing import Any

from scheduler.kube.http import Response

_UID_PRECONDITION = "Precondition failed: UID in precondition"


def _status(response: Response) -> dict[str, Any] | None:
    try:
        status = response.json()
    except ValueError:  # orjson.JSONDecodeError is a ValueError
        return None
    return status if isinstance(status, dict) and status.get("kind") == "Status" else None


def pod_in(response: Response) -> dict[str, Any] | None:
    """The Pod a 2xx carries; None when it is not one (a proxy's page, an empty body, a Status)."""
    try:
        pod = response.json()
    except ValueError:
        return None
    if not isinstance(pod, dict) or pod.get("kind", "Pod") != "Pod" or not isinstance(pod.get("metadata"), dict) \
            or not pod["metadata"].get("uid"):
        return None
    return pod


def pod_not_found(response: Response, name: str) -> bool:
    """The apiserver's NotFound Status for pod `name` (a proxy's 404 is not that)."""
    status = _status(response)
    details = status.get("details") if status is not None else None
    return (status is not None and isinstance(details, dict) and status.get("reason") == "NotFound"
            and details.get("name") == name)


def uid_conflict(response: Response) -> bool:
    """The apiserver's Conflict for a uid precondition that failed: the name now holds another
    pod (apiserver pkg/storage/interfaces.go Preconditions.Check, turned into a Conflict by
    pkg/storage/errors/storage.go InterpretUpdateError)."""
    status = _status(response)
    return (status is not None and status.get("reason") == "Conflict"
            and _UID_PRECONDITION in str(status.get("message", "")))
