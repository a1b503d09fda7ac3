"""`kubectl tessera what-if`'s hypothetical capacity: Nodes (and their ExtendedResources) a file
adds, nodes `--without-node` / `--without-nodes` take away.

Why: a capacity planner asks "what if I add 8 nodes of another GPU model" and "what if I remove a
rack" of the cluster as it is now, without creating or draining anything. The replay takes the
listed cluster changed so: the added objects join it as if created; a removed node's Node and
ExtendedResources leave it, and the pods bound there are replayed as pending again, as the
controllers that own them would re-create them (a DaemonSet's pods go with their node, as its
controller makes none elsewhere; a finished pod holds nothing and is not re-created). Their
outcomes say which node they were on (`Capacity.applied`'s `displaced`). The "Now" summary stays
the cluster's; "After" is the changed one's.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.core import annotations as ann

# what the scheduler and the node agent write on a pod they place: a pod made pending again has none
PLACEMENT_ANNOTATIONS = frozenset({ann.DEVICES, ann.HELD_DEVICES, ann.PHASE, ann.ASSUME_TIME, ann.TERM})
FINISHED = ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class Applied:
    """The listed objects changed by a `Capacity`: what the replay takes, the pods made pending
    again (key -> the node they were on), and the pods that go with their node (DaemonSet pods,
    finished ones), by key."""

    objects: list[dict[str, Any]]
    displaced: dict[str, str] = field(default_factory=dict)
    gone: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Capacity:
    """Nodes and ExtendedResources added (`-f`'s, completed as the apiserver would create them)
    and the names of the nodes taken away."""

    added: tuple[dict[str, Any], ...] = ()
    without: tuple[str, ...] = ()
    # how `without` was chosen, said with it: "--without-nodes rack=r1"
    selected_by: str = ""

    @property
    def added_nodes(self) -> tuple[str, ...]:
        return tuple(str(obj["metadata"]["name"]) for obj in self.added if obj.get("kind") == "Node")

    def applied(self, objects: Iterable[dict[str, Any]]) -> Applied:
        """`objects` without the removed nodes, their ExtendedResources and the pods that go with
        them, their other bound pods pending again, then the added objects."""
        without = frozenset(self.without)
        kept: list[dict[str, Any]] = []
        displaced: dict[str, str] = {}
        gone: list[str] = []
        for obj in objects:
            kind = obj.get("kind")
            meta = obj.get("metadata") or {}
            spec = obj.get("spec")
            node = meta.get("name") if kind == "Node" else spec.get("nodeName") if isinstance(spec, dict) else None
            if not isinstance(node, str) or node not in without:
                kept.append(obj)
                continue
            if kind == "Pod":
                key = f"{meta.get('namespace')}/{meta.get('name')}"
                if _goes_with_node(obj):
                    gone.append(key)
                    continue
                displaced[key] = node
                kept.append(pending_again(obj))
            elif kind not in ("Node", "ExtendedResource"):
                kept.append(obj)  # another kind with a spec.nodeName: not the node's
        return Applied([*kept, *self.added], displaced, tuple(sorted(gone)))


def _goes_with_node(pod: Mapping[str, Any]) -> bool:
    """A pod no controller re-creates on another node: a DaemonSet's (one per node), or one that
    finished (it holds nothing)."""
    status = pod.get("status")
    if isinstance(status, dict) and status.get("phase") in FINISHED:
        return True
    refs = (pod.get("metadata") or {}).get("ownerReferences")
    return isinstance(refs, list) and any(isinstance(ref, dict) and ref.get("kind") == "DaemonSet"
                                          and ref.get("controller") for ref in refs)


def pending_again(pod: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `pod` as its re-created self waits: no node, none of the placement's annotations,
    phase Pending without conditions (its name kept, so its row says which pod it stands for)."""
    again = copy.deepcopy(dict(pod))
    again["spec"].pop("nodeName", None)
    meta = again.setdefault("metadata", {})
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        meta["annotations"] = {k: v for k, v in annotations.items() if k not in PLACEMENT_ANNOTATIONS}
    again["status"] = {"phase": "Pending"}
    return again


def existing(added: Iterable[Mapping[str, Any]], listed: Iterable[Mapping[str, Any]]) -> list[str]:
    """The added Nodes and ExtendedResources whose names the cluster has already (cluster-scoped:
    the apiserver would refuse to create them), as `KIND NAME`."""
    names = {(obj.get("kind"), (obj.get("metadata") or {}).get("name")) for obj in listed}
    return [f"{obj['kind']} {obj['metadata']['name']}" for obj in added
            if (obj["kind"], obj["metadata"]["name"]) in names]


def unknown_nodes(objects: Iterable[Mapping[str, Any]], names: Iterable[str]) -> list[str]:
    """Of `names`, those no listed Node has (`--without-node` of a node that does not exist)."""
    listed = {(obj.get("metadata") or {}).get("name") for obj in objects if obj.get("kind") == "Node"}
    return sorted({name for name in names if name not in listed})
