"""The ownerReference that makes a Node own an object: kube-controller-manager's garbage collector
deletes the object with the Node.

Why one home: the node agent's ExtendedResources (scheduler/agent/publish.py) and dev-cluster's
fake ones (scheduler/kube/controlplane/fakenodes.py) must carry the same reference, or a Node
deleted on dev-cluster leaves its GPUs behind, fenced "no Node object", where a real cluster's go.
"""

from __future__ import annotations


def node_owner_reference(node_name: str, node_uid: str) -> dict[str, str]:
    return {"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node_uid}
