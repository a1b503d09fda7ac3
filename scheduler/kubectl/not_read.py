"""What a pod of Tessera's carries that Tessera does not read, as `explain` and `what-if` say it.

One home for both commands: other schedulers' keys and the preferred terms it does not score (the core's own notes,
`foreign.ignored_note` and `pod_terms.preferred_note`, which the Warning Events say too), and the
pod's claims (`volume_note`), which the core does not parse at all.

Volumes:
Tessera runs none of kube-scheduler's volume plugins and watches no PersistentVolumeClaims
(docs/not-supported.md, "Volumes"): a pod whose claim waits for a node (a WaitForFirstConsumer
StorageClass) is bound, the claim stays Pending and the pod ContainerCreating. Tessera cannot see
that without reading claims; it can say, for a pod that has any, that it did not check them. Pure:
reads the pod's spec as the apiserver stores it, any shape without raising.
"""

from __future__ import annotations

from collections.abc import Mapping

from scheduler.core.foreign import ignored_note
from scheduler.core.objects import Pod
from scheduler.core.pod_terms import preferred_note

DOC = "docs/not-supported.md (Volumes)"


def claimed_volumes(spec: object) -> tuple[str, ...]:
    """The pod's volumes that are claims, in spec order: "claim NAME" for a persistentVolumeClaim,
    "ephemeral VOLUME" for a generic ephemeral volume (its claim is made from a template)."""
    if not isinstance(spec, Mapping) or not isinstance(spec.get("volumes"), list):
        return ()
    out: list[str] = []
    for volume in spec["volumes"]:
        if not isinstance(volume, Mapping):
            continue
        claim = volume.get("persistentVolumeClaim")
        if isinstance(claim, Mapping) and claim.get("claimName"):
            out.append(f"claim {claim['claimName']}")
        elif isinstance(volume.get("ephemeral"), Mapping):
            out.append(f"ephemeral {volume.get('name') or '?'}")
    return tuple(out)


def volume_note(spec: object) -> str:
    """What a pod with claims is told; "" for none."""
    claims = claimed_volumes(spec)
    if not claims:
        return ""
    return (f"{', '.join(claims)}: Tessera does not check volume binding or topology: a claim of a "
            "WaitForFirstConsumer StorageClass is never given a node (it stays Pending, the pod ContainerCreating), "
            "and a volume's node affinity is not matched; pin the pod to the volume's node, or run it with "
            f"schedulerName: default-scheduler. See {DOC}.")


def not_read(pod: Pod, gpu: bool) -> str:
    """What `pod` is told of the other schedulers' keys and preferred terms it carries; "" for none.
    `gpu`: it asks GPUs (`ClusterState.asks_gpus`), and is not told to leave Tessera."""
    return " ".join(filter(None, (ignored_note(pod.ignored), preferred_note(pod.unread, gpu))))
