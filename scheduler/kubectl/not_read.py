"""What a pod of Tessera's carries that Tessera does not read, as `explain` and `what-if` say it.

One home for both commands: other schedulers' keys and the preferred terms it does not score (the core's own notes,
`foreign.ignored_note` and `pod_terms.preferred_note`, which the Warning Events say too), and the
pod's claims (`volume_note`), of which the core checks only part.

Volumes:
Tessera runs kube-scheduler's VolumeBinding (docs/not-supported.md, "Volumes"): a pod's claims
must exist and be bound unless their StorageClass waits for the first consumer, a bound claim's
volume must allow the node, and a claim still waiting for its first consumer gets a free static
volume on the node or is provisioned there. Volume zones, attach limits, access-mode conflicts and
CSI storage capacity are not checked, so a pod with claims is told what is and is not. Pure: reads the pod's spec as the apiserver stores it, any shape
without raising.
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
    return (f"{', '.join(claims)}: Tessera checks that the claims exist and are bound and that a bound volume's "
            "node affinity allows the node (VolumeBinding), and gives a claim of a WaitForFirstConsumer "
            "StorageClass a free volume on the node or has it provisioned there; volume zones, attach limits, "
            f"access-mode conflicts and CSI storage capacity are not checked. See {DOC}.")


def not_read(pod: Pod, gpu: bool) -> str:
    """What `pod` is told of the other schedulers' keys and preferred terms it carries; "" for none.
    `gpu`: it asks GPUs (`ClusterState.asks_gpus`), and is not told to leave Tessera."""
    return " ".join(filter(None, (ignored_note(pod.ignored), preferred_note(pod.unread, gpu))))
