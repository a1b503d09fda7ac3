"""VolumeBinding's writes before a Binding: upstream's PreBind (volumebinding BindPodVolumes'
bindAPIUpdate), for the claims a placed pod's decision gave something (`Attempt.claims`).

- a claim given a static volume: the volume's spec.claimRef names the claim (kind, apiVersion,
  namespace, name, uid, resourceVersion: reference.GetReference of the claim) and, when it did not
  name it already, `pv.kubernetes.io/bound-by-controller: "yes"` (component-helpers
  GetBindVolumeToClaim); the PV controller then binds the claim to it;
- a claim to be provisioned: its `volume.kubernetes.io/selected-node` is the node, which the
  provisioner waits for.

Each write is a merge patch conditional on the object's resourceVersion as the decision read it
(`ClaimBinding.version`; upstream's Update of the object assumed at AssumePodVolumes is conditional
the same way), not as the core holds it when the Binding is built — the allocation gate may hold
it meanwhile: a volume taken since, or a claim changed, is refused with 409 and nothing is
overwritten. One the watch already shows taken (the volume naming another claim, the claim
selected for another node) is refused without a request, in the apiserver's 409 words. A write
refused, or failed, or one whose object is gone from the core's view, keeps the Binding from
being sent: the pod is decided again (`Binder`). There is no rollback of a write that landed, as
upstream has none: a volume naming the claim is the claim's (FindMatchingVolume's pre-bound
case), so the next decision goes the same way.

Then, as upstream's BindPodVolumes, the Binding waits (`Binder`, up to VolumeBindingArgs'
bindTimeoutSeconds) until the watch shows every claim bound by the PV controller or the
provisioner (`volume_binding.check_bindings`, from the versions the writes left).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from scheduler.core.state import ClusterState
from scheduler.core.volumes import BOUND_BY_CONTROLLER, CLAIM_KIND, SELECTED_NODE, ClaimBinding
from scheduler.kube.http import MERGE_PATCH, TRANSPORT_ERRORS, KubeHttp
from scheduler.logs import describe_error
from scheduler.quoted import go_quote

# upstream's PreBind failure as handleSchedulingFailure words it (RunPreBindPlugins' wrapping)
PRE_BIND = 'running PreBind plugin "VolumeBinding"'
# the apiserver's 409 to a write conditional on a stale resourceVersion (apierrors.NewConflict
# wrapping registry's OptimisticLockErrorMsg), `what` being `<resource> "<name>"`
CONFLICT = ("Operation cannot be fulfilled on {what}: the object has been modified; please apply your changes to "
            "the latest version and try again")


@dataclass(frozen=True, slots=True)
class VolumeWrite:
    """One conditional merge patch: of `path`, named `what` in messages; or, with `refused`, why
    it fails without a request (the object gone from the core's view, or taken since the
    decision), and an empty `body`. `key` is how `check_bindings` names the object (the volume's
    name, the claim's namespace/name)."""

    path: str
    body: dict[str, Any]
    what: str
    key: str
    refused: str = ""


def planned(state: ClusterState, claims: tuple[ClaimBinding, ...], node: str) -> tuple[VolumeWrite, ...]:
    """The writes the decision's claims need, conditional on the versions it read: none for a
    volume already naming the claim with its uid, or a claim already selected for the node; a
    refused one for an object gone, or one the watch shows taken since (a volume naming another
    claim, a claim selected for another node): it is never taken back from another."""
    writes: list[VolumeWrite] = []
    for given in claims:
        namespace, name = given.claim.split("/", 1)
        claim = state.claims.get(given.claim)
        volume = state.volumes.get(given.volume) if given.volume else None
        if given.volume:
            path, what = f"/api/v1/persistentvolumes/{given.volume}", f"persistentvolumes {go_quote(given.volume)}"
        else:
            path = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}"
            what = f"persistentvolumeclaims {go_quote(name)}"
        key = given.volume or given.claim
        if claim is None or (given.volume and volume is None):  # gone since the decision: nothing to write to
            writes.append(VolumeWrite(path, {}, what, key, refused=f"{what} not found"))
        elif volume is not None:
            ref = volume.claim_ref
            if ref == (namespace, name, claim.meta.uid):
                continue
            if ref is not None and not volume.bound_to(claim):  # another claim's since
                writes.append(VolumeWrite(path, {}, what, key, refused=CONFLICT.format(what=what)))
                continue
            metadata: dict[str, Any] = {"resourceVersion": given.version}
            if not volume.bound_to(claim):  # GetBindVolumeToClaim's shouldSetBoundByController
                metadata["annotations"] = {BOUND_BY_CONTROLLER: "yes"}
            claim_ref = {"kind": CLAIM_KIND, "apiVersion": "v1", "namespace": namespace, "name": name,
                         "uid": claim.meta.uid, "resourceVersion": claim.meta.resource_version}
            writes.append(VolumeWrite(path, {"metadata": metadata, "spec": {"claimRef": claim_ref}}, what, key))
        elif claim.selected_node is not None and claim.selected_node != node:  # selected elsewhere since
            writes.append(VolumeWrite(path, {}, what, key, refused=CONFLICT.format(what=what)))
        elif claim.selected_node is None:
            writes.append(VolumeWrite(path, {"metadata": {"resourceVersion": given.version,
                                                          "annotations": {SELECTED_NODE: node}}}, what, key))
    return tuple(writes)


@dataclass(frozen=True, slots=True)
class Written:
    """A write's answer: `failed` says why it did not land ("" when it did), `version` is the
    resourceVersion it left ("" when the answer named none): what the wait compares the watch's
    objects with."""

    failed: str = ""
    version: str = ""


async def write(http: KubeHttp, change: VolumeWrite, timeout: float) -> Written:
    """Send one write."""
    if change.refused:
        return Written(f"{PRE_BIND}: {change.refused}")
    try:
        response = await http.request("PATCH", change.path, body=change.body, content_type=MERGE_PATCH,
                                      timeout=timeout, limited=False)
    except TRANSPORT_ERRORS as err:
        return Written(f"{PRE_BIND}: updating {change.what}: {describe_error(err)}")
    if not response.ok:
        return Written(f"{PRE_BIND}: {response.message()}")  # the apiserver's Status message, as client-go's error reads
    try:
        version = orjson.loads(response.body)["metadata"]["resourceVersion"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        version = ""
    return Written(version=version if isinstance(version, str) else "")
