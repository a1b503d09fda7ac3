"""What a dry run cannot tell because a kind could not be read (`ClusterListing.unread`).

A researcher with `edit` in one namespace may not list ResourceClasses, ExtendedResources or
PodGroups cluster-wide. A core fed the listing without them reads their absence as "there is
none": a class request reads `no ResourceClass provides class.tessera.dev/v100-32g`, a gang
member `podgroup not found`. Those are verdicts of absence the listing cannot back. Per pod,
`cannot_tell` says which unread kind its verdict depends on, and the commands print that in
place of the verdict. A class request depends on the classes and on the devices they match; a
plain count a node advertises (`nvidia.com/gpu`) depends on neither and keeps its verdict with
ExtendedResources unread (the nodes' count, without device health: the listing's warnings say
what the picture lacks); a pod in no gang does not depend on PodGroups. The views say what they
cannot read as well (`nodes_view`): a gang whose PodGroup was not read says so, and a GPU a pod's
annotations name is in use as they say, not a ghost, while ExtendedResources are unread.
Pure: the listing's `unread` and the core's parsed pod.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from scheduler.api.config import SchedulerConfig
from scheduler.core.classes import DEFAULT_RESOURCE_PREFIX
from scheduler.core.resources import is_extended
from scheduler.core.objects import WORKLOAD_API, ObjectError, Pod, gang_name, parse_pod
from scheduler.core.state import ClusterState
from scheduler.kube.informers import (EXTENDED_RESOURCES, POD_GROUPS, RESOURCE_CLASSES, STORAGE_KINDS, WORKLOAD_POD_GROUPS,
                                     ResourceKind)
from scheduler.kube.snapshot import Unread
from scheduler.view.listed import listed_view
from scheduler.view.model import ClusterView


def podgroup_kind(api: str) -> ResourceKind:
    """The listed kind of the PodGroups of API group `api`."""
    return WORKLOAD_POD_GROUPS if api == WORKLOAD_API else POD_GROUPS


def podgroup_unread(pod: Pod, unread: Mapping[str, Unread]) -> Unread | None:
    """The unread kind of the pod's gang's PodGroup, when that PodGroup's namespace was not read."""
    gang = pod.gang
    if gang is None or not gang.from_podgroup:
        return None
    missing = unread.get(podgroup_kind(gang.api).label)
    return missing if missing is not None and not missing.read_in(pod.meta.namespace) else None


def podgroup_unread_message(gang: str, missing: Unread) -> str:
    """What every command says of a gang whose PodGroup could not be read (`podgroup_unread`), in
    place of the core's `podgroup "ns/g" not found`: a dry run's "cannot tell", explain's gang,
    `nodes -o json`'s gangs. `gang` as views name it (`gang_name`)."""
    return f"its PodGroup {gang} cannot be read ({missing.name}: {missing.why})"


@dataclass(frozen=True, slots=True)
class Offered:
    """The resource names a cluster offers, as the dry runs judge a request by them: built once
    per listing (`offered`), read for every pod (`cannot_tell`, explain's typo hints)."""
    advertised: frozenset[str]  # in some Node's allocatable
    counted: frozenset[str]  # some device counts under it (`nvidia.com/gpu`): no class may own one
    owned: frozenset[str]  # a ResourceClass's resourceName


def offered(state: ClusterState) -> Offered:
    infos = list(state.node_infos())
    return Offered(frozenset(name for info in infos if info.node is not None for name in info.node.allocatable),
                   frozenset(device.resource_name for info in infos for device in info.devices.values()),
                   frozenset(state.classes.by_resource))


def extended_requests(pod: Pod) -> list[str]:
    """The pod's extended resources of a domain (`nvidia.com/gpu`, a class's name), sorted."""
    return sorted(name for name in pod.requests if "/" in name and is_extended(name))


def cannot_tell(pod: Pod, unread: Mapping[str, Unread], names: Offered) -> str:
    """Why the pod's dry run gives no verdict (one line, each unread kind it depends on), or ""."""
    if not unread:
        return ""
    found = []
    missing = podgroup_unread(pod, unread)
    if missing is not None and pod.gang is not None:
        found.append(podgroup_unread_message(gang_name(pod.gang.key), missing))
    extended = extended_requests(pod)
    classes = unread.get(RESOURCE_CLASSES.label)
    devices = unread.get(EXTENDED_RESOURCES.label)
    # the names devices count under: no class may own one (the core refuses it). With the devices
    # unread too, the nodes' names outside the classes' default prefix are taken for counts: the
    # agent advertises its classes' names as well, so a class of a name of its own then reads as a
    # count of the slots the nodes advertise
    counted = (names.counted if devices is None
               else {name for name in names.advertised if not name.startswith(DEFAULT_RESOURCE_PREFIX)})
    if classes is not None:
        # a class may own any other name, also one the nodes advertise
        asked = [name for name in extended if name not in counted]
        if asked:
            found.append(f"it asks for {', '.join(asked)} and ResourceClasses cannot be read, so whether a class "
                         f"provides {'it' if len(asked) == 1 else 'them'} is not known ({classes.name}: {classes.why})")
    if devices is not None:
        # a class serves only the devices it matches; a name no node advertises may be devices'
        asked = [name for name in extended if name in names.owned or name.startswith(DEFAULT_RESOURCE_PREFIX)
                 or name not in names.advertised]
        if asked:
            found.append(f"it asks for {', '.join(asked)} and ExtendedResources cannot be read, so which devices "
                         f"serve {'it' if len(asked) == 1 else 'them'} is not known ({devices.name}: {devices.why})")
    found += _claims_unread(pod, unread)
    return "; ".join(found)


def _claims_unread(pod: Pod, unread: Mapping[str, Unread]) -> list[str]:
    """Of a pod with PersistentVolumeClaims, the storage kinds VolumeBinding reads that could not
    be (claims read in the pod's namespace are): the dry run would take them for absent."""
    if not pod.claims:
        return []
    missing = [each for kind in STORAGE_KINDS if (each := unread.get(kind.label)) is not None
               and not each.read_in(pod.meta.namespace)]
    return [f"it names PersistentVolumeClaims and {each.name} cannot be read, so whether VolumeBinding lets it on "
            f"a node is not known ({each.name}: {each.why})" for each in missing]


def unread_gangs(objects: Iterable[Mapping[str, Any]], unread: Mapping[str, Unread]) -> dict[str, str]:
    """Per gang (as views name it, `gang_name`) whose PodGroup's namespace was not read: what its
    message says in place of the core's `podgroup "ns/g" not found` (`nodes -o json`'s gangs)."""
    if not any(kind.label in unread for kind in (POD_GROUPS, WORKLOAD_POD_GROUPS)):
        return {}
    found = {}
    for obj in objects:
        if obj.get("kind") != "Pod":
            continue
        try:
            pod = parse_pod(dict(obj))
        except ObjectError:
            continue
        missing = podgroup_unread(pod, unread)
        if missing is not None and pod.gang is not None:
            gang = gang_name(pod.gang.key)
            found[gang] = podgroup_unread_message(gang, missing)
    return found


def devices_unread(unread: Mapping[str, Unread]) -> bool:
    """ExtendedResources could not be read: the core knows each device from its holders'
    annotations alone (the views' `devices_unread`)."""
    return EXTENDED_RESOURCES.label in unread


def nodes_view(config: SchedulerConfig, objects: list[dict[str, Any]], now: float,
               unread: Mapping[str, Unread]) -> ClusterView:
    """`kubectl tessera nodes`' view of a listing that could not read the kinds in `unread`: a
    GPU pods' annotations name in use as they say (`devices_unread`), each gang whose PodGroup
    was not read saying so (`without_absent_podgroups`)."""
    view = listed_view(config, objects, now, devices_unread=devices_unread(unread))
    return without_absent_podgroups(view, objects, unread)


def without_absent_podgroups(view: ClusterView, objects: Iterable[Mapping[str, Any]],
                             unread: Mapping[str, Unread]) -> ClusterView:
    """The view with each gang whose PodGroup could not be read saying so (`unread_gangs`)."""
    told = unread_gangs(objects, unread)
    if not told:
        return view
    return replace(view, gangs=tuple(replace(gang, message=told[gang.gang]) if gang.gang in told else gang
                                     for gang in view.gangs))
