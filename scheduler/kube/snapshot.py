"""Read the cluster once: the objects the scheduler watches, listed as they are now.

`kubectl tessera` needs one consistent picture, not a stream: the same kinds the scheduler
watches (`informers.SCHEDULER_KINDS`), each listed page by page, fed to a fresh core in replay
order (`scheduler.sim.snapshot`). Nodes and Pods must be readable cluster-wide: a GPU another
namespace's pod holds is not free, so a picture of one namespace's pods would be a false one.
The other kinds may be missing (a CRD not installed: there are none) or denied (a researcher
with `edit` in one namespace): a namespaced kind denied cluster-wide is listed in the namespaces
the command is about (`namespaces`: the explained pod's, -n's), and a kind that still cannot be
read is recorded in `ClusterListing.unread` and said in a warning naming the permission and the
shipped role that grants it (`GRANTS`), so no verdict reads "there is none" where it is "cannot
be read" (`kubectl.unread`). A denial of Nodes or Pods is a `ListError` saying the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

import aiohttp
import anyio

from scheduler.kube.http import KubeHttp, Response, rejected
from scheduler.kube.informers import (CLAIMS, DISRUPTION_BUDGETS, EXTENDED_RESOURCES, NODES, POD_GROUPS, PODS,
                                     PRIORITY_CLASSES, RESOURCE_CLASSES, SCHEDULER_KINDS, STORAGE_CLASSES, VOLUMES,
                                     WORKLOAD_POD_GROUPS, ResourceKind)
from scheduler.logs import describe_error

PAGE = 500
EXPIRED_RESTARTS = 3  # lists started again after a continue token expired, before giving up
LIST_TIMEOUT = 30.0  # seconds for one page
EVENTS = "/apis/events.k8s.io/v1/namespaces/{namespace}/events"
CORE_EVENTS = "/api/v1/namespaces/{namespace}/events"


class ListError(Exception):
    """A kind the picture cannot do without could not be listed; the message says why, in one line."""


# The shipped roles (deploy/rbac/user-roles.yaml, the Helm chart's templates/user-roles.yaml) a
# `kubectl tessera` user needs, and what grants each kind's list, as a 403 says it.
EXPLAINER = "tessera-explainer"
INVENTORY_READER = "tessera-inventory-reader"
CONFIG_READER = "tessera-config-reader"
ROLES_FILE = "deploy/rbac/user-roles.yaml"
BIND = f"bound with a ClusterRoleBinding; {ROLES_FILE}"


def grant(kind: ResourceKind) -> str:
    """The permission a list of `kind` needs and the shipped ClusterRole that grants it."""
    scope = "in all namespaces" if kind.namespaced else "(cluster-scoped)"
    roles = f"{INVENTORY_READER} or {EXPLAINER}" if kind in (EXTENDED_RESOURCES, RESOURCE_CLASSES) else EXPLAINER
    return f"needs list on {kind.resource} {scope}: ask for the ClusterRole {roles} ({BIND})"


@dataclass(frozen=True, slots=True)
class Unread:
    """A kind the listing could not read whole: why (one line), and the namespaces it was read in
    instead (a namespaced kind denied cluster-wide)."""

    kind: ResourceKind
    why: str
    namespaces: frozenset[str] = frozenset()

    def read_in(self, namespace: str) -> bool:
        return namespace in self.namespaces

    @property
    def name(self) -> str:
        return self.kind.resource


@dataclass(slots=True)
class ClusterListing:
    objects: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # kinds left out, and why
    unread: dict[str, Unread] = field(default_factory=dict)  # by ResourceKind.label: kinds not read whole


def namespaced_path(kind: ResourceKind, namespace: str) -> str:
    """The list path of a namespaced kind in one namespace."""
    prefix = kind.path.rpartition("/")[0]
    return f"{prefix}/namespaces/{quote(namespace, safe='')}/{kind.plural}"


async def list_kind(http: KubeHttp, kind: ResourceKind, path: str = "",
                    selector: str = "") -> list[dict[str, Any]] | Response:
    """Every object of `kind` (with kind and apiVersion set, as a watch event has them), or the
    apiserver's answer when it did not list them. A continue token that expired (410 on a later
    page) restarts the list from the start, a few times, as client-go's pager does. `selector`: a
    label selector the apiserver parses and applies (`kubectl get -l`'s), its errors its own."""
    restarts = 0
    items: list[dict[str, Any]] = []
    token = ""
    while True:
        query = [("limit", str(PAGE))] + ([("labelSelector", selector)] if selector else []) + \
            ([("continue", token)] if token else [])
        response = await http.request("GET", path or kind.path, query=query, timeout=LIST_TIMEOUT, limited=False)
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


async def list_cluster(http: KubeHttp, kinds: tuple[ResourceKind, ...] = SCHEDULER_KINDS,
                       namespaces: Iterable[str] = ()) -> ClusterListing:
    """All `kinds`, listed concurrently; a namespaced kind (but Pods) denied cluster-wide is listed
    in each of `namespaces` instead. Raises `ListError` when Nodes or Pods cannot be read."""
    results: dict[str, list[dict[str, Any]] | Response | str] = {}  # str: the request failed, why
    wanted = sorted(set(namespaces))

    async def one(kind: ResourceKind, path: str = "") -> list[dict[str, Any]] | Response | str:
        try:
            return await list_kind(http, kind, path)
        except TimeoutError:  # a bare class name ("TimeoutError") would not say which server, or how long
            return f"no answer from the apiserver at {http.api.configuration.host} within {LIST_TIMEOUT:g} s"
        except (aiohttp.ClientError, OSError, ValueError) as err:  # said below, in one line
            return describe_error(err)

    async def each(kind: ResourceKind) -> None:
        results[kind.label] = await one(kind)

    async with anyio.create_task_group() as group:
        for kind in kinds:
            group.start_soon(each, kind)
    fallback: dict[tuple[str, str], list[dict[str, Any]] | Response | str] = {}

    async def in_namespace(kind: ResourceKind, namespace: str) -> None:
        fallback[kind.label, namespace] = await one(kind, namespaced_path(kind, namespace))

    async with anyio.create_task_group() as group:
        for kind in kinds:
            result = results[kind.label]
            if kind.namespaced and kind is not PODS and isinstance(result, Response) \
                    and result.status == 403:
                for namespace in wanted:
                    group.start_soon(in_namespace, kind, namespace)
    listing = ClusterListing()
    for kind in kinds:
        result = results[kind.label]
        if isinstance(result, list):
            listing.objects += result
            continue
        if kind in (NODES, PODS):
            if isinstance(result, str):
                reason = result
            elif result.status in (401, 403):
                reason = rejected(http, result) + (f"; {_NEEDED}: {grant(kind)}" if result.status == 403 else "")
            else:
                reason = f"HTTP {result.status}: {result.message()}"
            raise ListError(f"cannot list {kind.plural}: {reason}")
        if isinstance(result, Response) and result.status == 404 and not kind.builtin:
            continue  # not served: an alpha API off, a CRD not installed: there are none
        denied = isinstance(result, Response) and result.status == 403
        why = result if isinstance(result, str) else f"denied (HTTP 403): {grant(kind)}" if denied \
            else "our credentials were rejected (HTTP 401)" if result.status == 401 else f"HTTP {result.status}"
        read: list[str] = []
        for namespace in wanted if denied else ():
            found = fallback.get((kind.label, namespace))
            if isinstance(found, list):
                listing.objects += found
                read.append(namespace)
        unread = Unread(kind, why, frozenset(read))
        listing.unread[kind.label] = unread
        listing.warnings.append(_warning(unread))
    return listing


_NEEDED = "kubectl tessera reads every node and every namespace's pods (a GPU another namespace's pod holds " \
          "is not free)"
# What the picture lacks without the kind (the dry runs say it per pod, `kubectl.unread`). Of a
# namespaced kind read in some namespaces only, it is said of the objects of the others: `{their}`
# and `{them}` stand for the words that name the objects (`_OF_ALL`, `_OF_THE_OTHERS`).
_WITHOUT = {
    EXTENDED_RESOURCES.label: ("GPUs show by the nodes' count, without their devices, health or slices; a GPU "
                               "a pod's annotations name shows in use as they say, its model and memory unknown; "
                               "a node that counts no nvidia.com/gpu (the node agent's) shows only the GPUs pods "
                               "hold"),
    RESOURCE_CLASSES.label: "requests of ResourceClasses cannot be judged",
    POD_GROUPS.label: "{their}gangs cannot be judged",
    WORKLOAD_POD_GROUPS.label: "{their}gangs cannot be judged",
    DISRUPTION_BUDGETS.label: "the dry runs' preemption does not see {them}",
    PRIORITY_CLASSES.label: "the dry runs' gang priorities and preemption do not see {them}",
    CLAIMS.label: "{their}pods with claims get no dry run (VolumeBinding cannot be judged)",
    VOLUMES.label: "pods with claims get no dry run (VolumeBinding cannot be judged)",
    STORAGE_CLASSES.label: "pods with claims get no dry run (VolumeBinding cannot be judged)",
}
_WITHOUT_ANY = "shown without {them}"
_OF_ALL = {"their": "their ", "them": "them"}  # none read: "their gangs cannot be judged"
_OF_THE_OTHERS = {"their": "", "them": "those"}  # "...; in the others gangs cannot be judged"


def _warning(unread: Unread) -> str:
    """`resourceclasses.tessera.dev: cannot be read: denied (HTTP 403): needs ...; <what that leaves out>`;
    a kind read in some namespaces: `...; read in namespace a, b only; in the others <what that leaves out>`."""
    lacks = _WITHOUT.get(unread.kind.label, _WITHOUT_ANY)
    if unread.namespaces:
        read = ", ".join(sorted(unread.namespaces))
        without = f"read in namespace {read} only; in the others {lacks.format(**_OF_THE_OTHERS)}"
    else:
        without = lacks.format(**_OF_ALL)
    return f"{unread.name}: cannot be read: {unread.why}; {without}"


async def object_events(http: KubeHttp, namespace: str, name: str, uid: str = "",
                        kind: str = "Pod") -> list[dict[str, Any]] | str:
    """The Events (events.k8s.io/v1) of the `kind` object (a pod, or the Job `explain job/NAME`
    reads), oldest first; or why they cannot be read (one line). Denied there (the built-in
    `view`/`edit` roles grant only the core API's Events), the core API's Events of the object
    are read instead, in events.k8s.io's field names."""
    path = EVENTS.format(namespace=quote(namespace, safe=""))
    items: list[Any]
    try:
        response = await http.request("GET", path, query=[("fieldSelector", f"regarding.name={name}")], limited=False)
        if response.status == 403:
            core = await http.request("GET", CORE_EVENTS.format(namespace=quote(namespace, safe="")),
                                      query=[("fieldSelector", f"involvedObject.name={name}")], limited=False)
            if core.status == 403:
                return (f"denied (HTTP 403): needs list on events.events.k8s.io or events in namespace {namespace} "
                        "(the built-in view, edit and admin roles grant events)")
            response = core
            items = [_from_core(event) for event in core.json().get("items") or () if isinstance(event, dict)] \
                if core.ok else []
        else:
            items = list(response.json().get("items") or ()) if response.ok else []
        if not response.ok:
            return f"HTTP {response.status}"
    except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as err:  # the explanation is shown without them
        return describe_error(err) if not isinstance(err, TimeoutError) else "no answer in time"
    events = [event for event in items
              if (event.get("regarding") or {}).get("kind") == kind
              and (not uid or (event.get("regarding") or {}).get("uid") in (uid, None, ""))]
    return sorted(events, key=lambda event: seen_at(last_seen(event)))


def _from_core(event: dict[str, Any]) -> dict[str, Any]:
    """A core v1 Event in events.k8s.io/v1's field names (as the apiserver converts them)."""
    return {"metadata": event.get("metadata") or {}, "regarding": event.get("involvedObject") or {},
            "reason": event.get("reason"), "note": event.get("message"), "type": event.get("type"),
            "eventTime": event.get("eventTime"), "series": event.get("series"),
            "reportingController": event.get("reportingComponent"), "reportingInstance": event.get("reportingInstance"),
            "deprecatedSource": event.get("source"),
            "deprecatedCount": event.get("count"), "deprecatedLastTimestamp": event.get("lastTimestamp"),
            "deprecatedFirstTimestamp": event.get("firstTimestamp")}


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
