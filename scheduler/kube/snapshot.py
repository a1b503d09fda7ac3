"""Read the cluster once: the objects the scheduler watches, listed as they are now.

`kubectl tessera` needs one consistent picture, not a stream: the same kinds the scheduler
watches (`informers.SCHEDULER_KINDS`), each listed page by page, fed to a fresh core in replay
order (`scheduler.sim.snapshot`). Nodes and Pods must be readable. Tessera's own kinds may be
missing (a CRD not installed) or denied (a user without `tessera-inventory-reader`): the listing
goes on without them and says so, because GPUs by count and pods without gangs are still worth
showing. The scheduler's optional kinds are left out silently where they are not served or not
readable: PodDisruptionBudgets and PriorityClasses only steer preemption and gang priority. The
alpha Workload API's PodGroups define gangs, so a refusal to list them (the API is on, the user
may not read them) is said: without them their members show as `podgroup ... not found`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

import aiohttp
import anyio

from scheduler.kube.http import KubeHttp, Response, rejected
from scheduler.kube.informers import NODES, PODS, SCHEDULER_KINDS, WORKLOAD_POD_GROUPS, ResourceKind
from scheduler.logs import describe_error

PAGE = 500
EXPIRED_RESTARTS = 3  # lists started again after a continue token expired, before giving up
LIST_TIMEOUT = 30.0  # seconds for one page
EVENTS = "/apis/events.k8s.io/v1/namespaces/{namespace}/events"


class ListError(Exception):
    """A kind the picture cannot do without could not be listed; the message says why, in one line."""


@dataclass(slots=True)
class ClusterListing:
    objects: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # kinds left out, and why


async def list_kind(http: KubeHttp, kind: ResourceKind) -> list[dict[str, Any]] | Response:
    """Every object of `kind` (with kind and apiVersion set, as a watch event has them), or the
    apiserver's answer when it did not list them. A continue token that expired (410 on a later
    page) restarts the list from the start, a few times, as client-go's pager does."""
    restarts = 0
    items: list[dict[str, Any]] = []
    token = ""
    while True:
        query = [("limit", str(PAGE))] + ([("continue", token)] if token else [])
        response = await http.request("GET", kind.path, query=query, timeout=LIST_TIMEOUT, limited=False)
        if response.status == 410 and token and restarts < EXPIRED_RESTARTS:
            restarts += 1
            items, token = [], ""
            continue
        if not response.ok:
            return response
        doc = response.json()
        for item in doc.get("items") or ():
            if isinstance(item, dict):
                item["kind"], item["apiVersion"] = kind.kind, kind.api_version
                items.append(item)
        token = (doc.get("metadata") or {}).get("continue") or ""
        if not token:
            return items


async def list_cluster(http: KubeHttp, kinds: tuple[ResourceKind, ...] = SCHEDULER_KINDS) -> ClusterListing:
    """All `kinds`, listed concurrently; raises `ListError` when Nodes or Pods cannot be read."""
    results: dict[str, list[dict[str, Any]] | Response | str] = {}  # str: the request failed, why

    async def one(kind: ResourceKind) -> None:
        try:
            results[kind.label] = await list_kind(http, kind)
        except TimeoutError:  # a bare class name ("TimeoutError") would not say which server, or how long
            results[kind.label] = f"no answer from the apiserver at {http.api.configuration.host} within " \
                                  f"{LIST_TIMEOUT:g} s"
        except (aiohttp.ClientError, OSError, ValueError) as err:  # said below, in one line
            results[kind.label] = describe_error(err)

    async with anyio.create_task_group() as group:
        for kind in kinds:
            group.start_soon(one, kind)
    listing = ClusterListing()
    for kind in kinds:
        result = results[kind.label]
        if isinstance(result, list):
            listing.objects += result
            continue
        if kind.optional:
            if isinstance(result, str):
                listing.warnings.append(f"{kind.path.rsplit('/', 1)[-1]}: {result}; shown without them")
            elif kind is WORKLOAD_POD_GROUPS and result.status in (401, 403):
                listing.warnings.append(f"podgroups.scheduling.k8s.io: denied (HTTP {result.status}); members of "
                                        "upstream PodGroups show as waiting for their podgroup")
            continue
        if kind in (NODES, PODS):
            reason = result if isinstance(result, str) else rejected(http, result) \
                if result.status in (401, 403) else f"HTTP {result.status}: {result.message()}"
            raise ListError(f"cannot list {kind.path.rsplit('/', 1)[-1]}: {reason}")
        plural = kind.path.rsplit("/", 1)[-1]
        why = result if isinstance(result, str) else "not served (CRD not installed?)" if result.status == 404 \
            else f"denied (HTTP {result.status})" if result.status in (401, 403) else f"HTTP {result.status}"
        listing.warnings.append(f"{plural}: {why}; shown without them")
    return listing


async def pod_events(http: KubeHttp, namespace: str, name: str, uid: str = "") -> list[dict[str, Any]]:
    """The pod's Events (events.k8s.io/v1), oldest first; [] when they cannot be read."""
    path = EVENTS.format(namespace=quote(namespace, safe=""))
    try:
        response = await http.request("GET", path, query=[("fieldSelector", f"regarding.name={name}")], limited=False)
        if not response.ok:
            return []
        items = response.json().get("items") or ()
    except (aiohttp.ClientError, TimeoutError, OSError, ValueError):  # the listing is shown without them
        return []
    events = [event for event in items
              if (event.get("regarding") or {}).get("kind") == "Pod"
              and (not uid or (event.get("regarding") or {}).get("uid") in (uid, None, ""))]
    return sorted(events, key=lambda event: seen_at(last_seen(event)))


def last_seen(event: Mapping[str, Any]) -> str:
    """When an Event last happened (RFC 3339): its series' last observation, else its time."""
    series = event.get("series") or {}
    return str(series.get("lastObservedTime") or event.get("eventTime") or event.get("deprecatedLastTimestamp")
               or (event.get("metadata") or {}).get("creationTimestamp") or "")


def seen_at(stamp: str) -> float:
    """An RFC 3339 time (`last_seen`'s, a Lease's acquireTime) as seconds since the epoch, to
    compare as times: an eventTime has microseconds, a deprecatedLastTimestamp whole seconds, and
    as text `...:05Z` sorts after `...:05.100000Z`. No offset reads as UTC (as the apiserver
    writes them); an unreadable or missing one as the oldest."""
    try:
        when = datetime.fromisoformat(stamp)
    except ValueError:
        return float("-inf")
    return (when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)).timestamp()
