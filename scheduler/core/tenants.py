"""What an Event may say of other pods: the one rule for every Event message that names them.

An Event lands in the namespace of the object it regards, and whoever may read that namespace's
Events reads it — on a shared cluster, one tenant. An Event on a pod (or a PodGroup, or any
namespaced object) that names another pod must not tell that tenant another's pod names, nodes
or gangs: pods of the Event's own namespace are named, the others are only counted ("and 2 pods in
other namespaces"). Events on cluster-scoped objects (a Node's, an ExtendedResource's) and log
lines are read by operators, who see every namespace anyway: they keep every name (a DeviceConflict
log line is all an audit has once its pods are gone).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable


def pods_named(namespace: str | None, keys: Iterable[str], names: Callable[[list[str]], str] = ", ".join) -> str:
    """The pods `keys` (namespace/name; a key without a namespace counts as another's) as an Event
    regarding an object of `namespace` may say them: those of `namespace` named by `names` (in
    the order given), the others counted after them — "team-a/x, team-a/y and 2 pods in other
    namespaces", "1 pod in another namespace". `namespace` "" — an Event on a cluster-scoped object
    (a Node, an ExtendedResource), which operators read, or a log line — names every pod. None — a
    message for a pod not known (the node agent's refusal of an Allocate call, which names no pod,
    that it could not tie to one): it may be any namespace's, so every pod is counted ("2 pods")."""
    keys = list(keys)
    here = [key for key in keys if named_to(namespace, key)]
    text = names(here) if here else ""
    elsewhere = len(keys) - len(here)
    if elsewhere:
        where = "" if namespace is None else " in another namespace" if elsewhere == 1 else " in other namespaces"
        text += f"{' and ' if text else ''}{elsewhere} pod{'' if elsewhere == 1 else 's'}{where}"
    return text


def named_to(namespace: str | None, key: str) -> bool:
    """Whether a message regarding an object of `namespace` may name the pod `key` (namespace/name),
    or quote what it holds (its container names): `pods_named`'s rule for one pod."""
    return namespace is not None and (not namespace or key.partition("/")[:2] == (namespace, "/"))
