"""PersistentVolumeClaims, PersistentVolumes and StorageClasses as kube-scheduler's VolumeBinding
reads them (v1.36 pkg/scheduler/framework/plugins/volumebinding, binder.go): which claims a pod
names, whether each is bound, to which volume, and where that volume may be attached; and, for a
claim still waiting for its first consumer, what upstream's FindMatchingVolume compares (size,
access modes, volume mode, class, selector, phase, claimRef) and whether its class provisions
(provisioner, allowedTopologies).

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
  a Node of the labels alone: a `matchFields` term matches no node);
- an unset volumeMode is Filesystem on both sides (CheckVolumeModeMismatches); a volume's class
  is the beta annotation before spec.storageClassName (GetPersistentVolumeClass);
- a class's allowedTopologies: no term allows every node, an empty term none
  (v1helper.MatchTopologySelectorTerms).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction

from scheduler.api.quantity import QuantityError, parse_quantity
from scheduler.core.objects import (JSON, ClaimRef, ObjectError, ObjectMeta, SelectorTerm, _list, _mapping, _str,
                                    parse_meta, parse_selector_term)
from scheduler.core.pod_terms import label_selector
from scheduler.core.selectors import LabelSelector, set_requirement

__all__ = ["ClaimRef", "Claim", "Volume", "StorageClass", "ClaimBinding", "parse_claim", "parse_volume",
           "parse_storage_class"]

BIND_COMPLETED = "pv.kubernetes.io/bind-completed"  # upstream's AnnBindCompleted
SELECTED_NODE = "volume.kubernetes.io/selected-node"  # upstream's AnnSelectedNode
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"  # upstream's AnnBoundByController
NO_PROVISIONER = "kubernetes.io/no-provisioner"  # upstream's NotSupportedProvisioner
FILESYSTEM = "Filesystem"  # v1.PersistentVolumeFilesystem, an unset volumeMode
AVAILABLE = "Available"  # v1.VolumeAvailable
STORAGE = "storage"  # v1.ResourceStorage
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
    requested: Fraction = Fraction(0)  # spec.resources.requests.storage (0 for none)
    access_modes: frozenset[str] = frozenset()
    volume_mode: str = FILESYSTEM
    selector: LabelSelector | None = None  # spec.selector (None: any volume)
    selected_node: str | None = None  # SELECTED_NODE's value, None when it is not set

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
    capacity: Fraction = Fraction(0)  # spec.capacity.storage
    access_modes: frozenset[str] = frozenset()
    volume_mode: str = FILESYSTEM
    storage_class: str = ""  # GetPersistentVolumeClass
    # spec.claimRef's (namespace, name, uid); None when the volume names no claim
    claim_ref: tuple[str, str, str] | None = None
    available: bool = False  # status.phase is Available
    labels: Mapping[str, str] = field(default_factory=dict)
    deleting: bool = False
    # what a conditional write of its claimRef is conditional on (`VolumeBinding`'s shell write);
    # not compared: a change of the version alone changes nothing matching reads
    resource_version: str = field(default="", compare=False)

    def bound_to(self, claim: Claim) -> bool:
        """upstream's IsVolumeBoundToClaim: its claimRef names the claim (and its uid, if it has one)."""
        ref = self.claim_ref
        return (ref is not None and ref[0] == claim.meta.namespace and ref[1] == claim.meta.name
                and (not ref[2] or ref[2] == claim.meta.uid))

    def allows(self, labels: Mapping[str, str]) -> bool:
        """upstream's CheckNodeAffinity: the node's labels satisfy the required terms (ORed)."""
        return self.required is None or any(term.matches("", labels) for term in self.required)


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    wait_for_first_consumer: bool
    provisioner: str = ""
    # allowedTopologies, each term's matchLabelExpressions as `key In values` ANDed (an empty term
    # matches nothing: its selector is not `valid`)
    allowed_topologies: tuple[LabelSelector, ...] = ()

    def provisions_on(self, labels: Mapping[str, str]) -> bool:
        """upstream's checkVolumeProvisions for one claim of the class: a provisioner, and a node
        its allowedTopologies admit (MatchTopologySelectorTerms)."""
        if not self.provisioner or self.provisioner == NO_PROVISIONER:
            return False
        return not self.allowed_topologies or any(term.matches(labels) for term in self.allowed_topologies)


@dataclass(frozen=True, slots=True)
class ClaimBinding:
    """What a placed pod's unbound WaitForFirstConsumer claim gets on the node (upstream's
    PodVolumes): `volume` the static volume it is to be bound to, or "" to be provisioned there
    (the claim's selected-node is set to the node)."""

    claim: str  # namespace/name
    volume: str
    # the resourceVersion of the volume (of the claim, to be provisioned) as the decision read it:
    # what the write is conditional on (upstream's bindAPIUpdate updates the copy AssumePodVolumes
    # assumed), so that one changed since — a Binding the allocation gate held — is refused, 409
    version: str


def _storage(value: object, where: str) -> Fraction:
    raw = _mapping(value, where).get(STORAGE)
    if raw is None:
        return Fraction(0)
    if not isinstance(raw, (str, int, float)):
        raise ObjectError(f"{where}[{STORAGE}]: expected a quantity, got {type(raw).__name__}")
    try:
        return parse_quantity(raw)
    except QuantityError as err:
        raise ObjectError(f"{where}[{STORAGE}]: {err}") from None


def _modes(value: object, where: str) -> frozenset[str]:
    return frozenset(mode for mode in _list(value, where) if isinstance(mode, str))


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
    resources = _mapping(spec.get("resources"), f"{CLAIM_KIND}.spec.resources")
    return Claim(meta, _str(spec.get("volumeName"), f"{CLAIM_KIND}.spec.volumeName"), storage_class,
                 BIND_COMPLETED in meta.annotations, status.get("phase") == "Lost", controller,
                 _storage(resources.get("requests"), f"{CLAIM_KIND}.spec.resources.requests"),
                 _modes(spec.get("accessModes"), f"{CLAIM_KIND}.spec.accessModes"),
                 _str(spec.get("volumeMode"), f"{CLAIM_KIND}.spec.volumeMode", FILESYSTEM),
                 label_selector(spec["selector"]) if spec.get("selector") is not None else None,
                 meta.annotations.get(SELECTED_NODE))


def parse_volume(obj: JSON) -> Volume:
    meta = parse_meta(obj, VOLUME_KIND)
    spec = _mapping(obj.get("spec"), f"{VOLUME_KIND}.spec")
    status = _mapping(obj.get("status"), f"{VOLUME_KIND}.status")
    raw_ref = spec.get("claimRef")
    claim_ref = None
    if raw_ref is not None:
        ref = _mapping(raw_ref, f"{VOLUME_KIND}.spec.claimRef")
        namespace, name, uid = (_str(ref.get(key), f"{VOLUME_KIND}.spec.claimRef.{key}")
                                for key in ("namespace", "name", "uid"))
        claim_ref = (namespace, name, uid)
    storage_class = meta.annotations.get(BETA_STORAGE_CLASS)
    if storage_class is None:
        storage_class = _str(spec.get("storageClassName"), f"{VOLUME_KIND}.spec.storageClassName")
    volume = Volume(meta.name, None, frozenset(), _storage(spec.get("capacity"), f"{VOLUME_KIND}.spec.capacity"),
                    _modes(spec.get("accessModes"), f"{VOLUME_KIND}.spec.accessModes"),
                    _str(spec.get("volumeMode"), f"{VOLUME_KIND}.spec.volumeMode", FILESYSTEM), storage_class,
                    claim_ref, status.get("phase") == AVAILABLE, meta.labels, meta.deleting, meta.resource_version)
    affinity = _mapping(spec.get("nodeAffinity"), f"{VOLUME_KIND}.spec.nodeAffinity")
    if affinity.get("required") is None:
        return volume
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
    return replace(volume, required=terms, hostnames=frozenset(hostnames))


def parse_storage_class(obj: JSON) -> StorageClass:
    meta = parse_meta(obj, STORAGE_CLASS_KIND)
    # the apiserver defaults an unset mode to Immediate
    mode = _str(obj.get("volumeBindingMode"), f"{STORAGE_CLASS_KIND}.volumeBindingMode")
    terms = []
    for i, raw in enumerate(_list(obj.get("allowedTopologies"), f"{STORAGE_CLASS_KIND}.allowedTopologies")):
        where = f"{STORAGE_CLASS_KIND}.allowedTopologies[{i}].matchLabelExpressions"
        expressions = _list(_mapping(raw, f"{STORAGE_CLASS_KIND}.allowedTopologies[{i}]").get("matchLabelExpressions"),
                            where)
        read = [_mapping(e, f"{where}[{j}]") for j, e in enumerate(expressions)]  # null: Go's zero value
        requirements = tuple(set_requirement(_str(e.get("key"), f"{where}[{j}].key"), "In", e.get("values"))
                             for j, e in enumerate(read))
        terms.append(LabelSelector((), requirements, valid=bool(requirements)))
    return StorageClass(meta.name, mode == WAIT_FOR_FIRST_CONSUMER,
                        _str(obj.get("provisioner"), f"{STORAGE_CLASS_KIND}.provisioner"), tuple(terms))
