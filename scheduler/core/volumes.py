"""PersistentVolumeClaims, PersistentVolumes and StorageClasses as kube-scheduler's VolumeBinding
reads them (v1.36 pkg/scheduler/framework/plugins/volumebinding, binder.go), reduced to what
its read-only part needs: which claims a pod names, whether each is bound, to which volume, and
where that volume may be attached.

Why these rules (upstream's, each named where it is used):
- a pod's claims are its `persistentVolumeClaim` volumes' claimName and, for a generic
  `ephemeral` volume, the claim the ephemeral volume controller makes for it, `<pod>-<volume>`
  (component-helpers ephemeral.VolumeClaimName), which must be controlled by the pod;
- a claim is bound when it names a volume *and* carries `pv.kubernetes.io/bind-completed`
  (isPVCFullyBound): one naming a volume without it is pre-bound, which upstream treats as an
  unbound claim of Immediate binding;
- its class is the beta annotation `volume.beta.kubernetes.io/storage-class` before
  spec.storageClassName (GetPersistentVolumeClaimClass); no class, or a class that does not
  exist, binds immediately (IsDelayBindingMode);
- a volume's node affinity is matched against the node's labels only (CheckNodeAffinity builds
  a Node of the labels alone: a `matchFields` term matches no node).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scheduler.core.objects import (JSON, ClaimRef, ObjectMeta, SelectorTerm, _list, _mapping, _str, parse_meta,
                                    parse_selector_term)

__all__ = ["ClaimRef", "Claim", "Volume", "StorageClass", "parse_claim", "parse_volume", "parse_storage_class"]

BIND_COMPLETED = "pv.kubernetes.io/bind-completed"  # upstream's AnnBindCompleted
BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"  # v1.BetaStorageClassAnnotation
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
HOSTNAME = "kubernetes.io/hostname"  # v1.LabelHostname

# the kinds, as the watch names them, and the key ClusterState.unread files them under
CLAIM_KIND = "PersistentVolumeClaim"
VOLUME_KIND = "PersistentVolume"
STORAGE_CLASS_KIND = "StorageClass"


@dataclass(frozen=True, slots=True)
class Claim:
    meta: ObjectMeta
    volume_name: str  # spec.volumeName ("" while unbound)
    storage_class: str  # GetPersistentVolumeClaimClass: "" for none
    bind_completed: bool  # BIND_COMPLETED is set
    lost: bool  # status.phase Lost: its volume is gone
    controller_uid: str  # the uid of its controller owner reference ("" for none)

    @property
    def key(self) -> str:
        return self.meta.key

    @property
    def bound(self) -> bool:
        """upstream's isPVCFullyBound."""
        return bool(self.volume_name) and self.bind_completed


@dataclass(frozen=True, slots=True)
class Volume:
    name: str
    # spec.nodeAffinity.required's terms; None when the volume has no required node affinity
    required: tuple[SelectorTerm, ...] | None
    # upstream's GetLocalPersistentVolumeNodeNames: the node names its `kubernetes.io/hostname In`
    # expressions allow (per term intersected, over terms united); empty when it names none
    hostnames: frozenset[str]

    def allows(self, labels: Mapping[str, str]) -> bool:
        """upstream's CheckNodeAffinity: the node's labels satisfy the required terms (ORed)."""
        return self.required is None or any(term.matches("", labels) for term in self.required)


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    wait_for_first_consumer: bool


def parse_claim(obj: JSON) -> Claim:
    meta = parse_meta(obj, CLAIM_KIND)
    spec = _mapping(obj.get("spec"), f"{CLAIM_KIND}.spec")
    status = _mapping(obj.get("status"), f"{CLAIM_KIND}.status")
    storage_class = meta.annotations.get(BETA_STORAGE_CLASS)
    if storage_class is None:
        storage_class = _str(spec.get("storageClassName"), f"{CLAIM_KIND}.spec.storageClassName")
    controller = ""
    raw_meta = _mapping(obj.get("metadata"), f"{CLAIM_KIND}.metadata")
    for ref in _list(raw_meta.get("ownerReferences"), f"{CLAIM_KIND}.metadata.ownerReferences"):
        if isinstance(ref, dict) and ref.get("controller") is True and isinstance(ref.get("uid"), str):
            controller = ref["uid"]
    return Claim(meta, _str(spec.get("volumeName"), f"{CLAIM_KIND}.spec.volumeName"), storage_class,
                 BIND_COMPLETED in meta.annotations, status.get("phase") == "Lost", controller)


def parse_volume(obj: JSON) -> Volume:
    meta = parse_meta(obj, VOLUME_KIND)
    spec = _mapping(obj.get("spec"), f"{VOLUME_KIND}.spec")
    affinity = _mapping(spec.get("nodeAffinity"), f"{VOLUME_KIND}.spec.nodeAffinity")
    if affinity.get("required") is None:
        return Volume(meta.name, None, frozenset())
    where = f"{VOLUME_KIND}.spec.nodeAffinity.required.nodeSelectorTerms"
    raw_terms = _list(_mapping(affinity["required"], f"{VOLUME_KIND}.spec.nodeAffinity.required")
                      .get("nodeSelectorTerms"), where)
    terms = tuple(parse_selector_term(term, f"{where}[{i}]") for i, term in enumerate(raw_terms))
    hostnames: set[str] = set()
    for term in terms:
        named: frozenset[str] | None = None
        for req in term.expressions:
            if req.key == HOSTNAME and req.operator == "In":
                named = frozenset(req.values) if named is None else named & frozenset(req.values)
        hostnames |= named or frozenset()
    return Volume(meta.name, terms, frozenset(hostnames))


def parse_storage_class(obj: JSON) -> StorageClass:
    meta = parse_meta(obj, STORAGE_CLASS_KIND)
    # the apiserver defaults an unset mode to Immediate
    mode = _str(obj.get("volumeBindingMode"), f"{STORAGE_CLASS_KIND}.volumeBindingMode")
    return StorageClass(meta.name, mode == WAIT_FOR_FIRST_CONSUMER)
