"""VolumeBinding, the part that writes nothing: a pod's PersistentVolumeClaims must exist, and the
volumes they are bound to must be attachable on the node (kube-scheduler v1.36
pkg/scheduler/framework/plugins/volumebinding, volume_binding.go and binder.go).

PreFilter, as upstream's podHasPVCs and GetPodVolumeClaims, both UnschedulableAndUnresolvable:
a claim that does not exist (`persistentvolumeclaim "NAME" not found`; an ephemeral volume's:
waiting for the ephemeral volume controller), one whose volume is Lost, one being deleted, an
ephemeral volume's claim the pod does not control, and a claim not bound yet that should have
been (an Immediate StorageClass, no class, an unknown class, or pre-bound by spec.volumeName:
"pod has unbound immediate PersistentVolumeClaims"). The nodes the bound claims' volumes name by
`kubernetes.io/hostname In` are the only ones filtered (upstream's GetEligibleNodes, a
PreFilterResult): the others read "node(s) didn't satisfy plugin(s) [VolumeBinding]".

Filter, as FindPodVolumes for bound claims: a node the volume's required node affinity does not
select reads "node(s) had volume node affinity conflict"; a volume that does not exist
"node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)". Unresolvable both:
no eviction attaches a volume.

Not done (docs/not-supported.md, Volumes): an unbound claim of a WaitForFirstConsumer class
passes, as before: upstream finds it a volume or has it provisioned and writes
`volume.kubernetes.io/selected-node`, which Tessera does not (it writes nothing but Bindings).

Cannot tell, so passes: the shell marks a kind its role may not read (`ClusterState.unread`, an
old deploy without this plugin's RBAC): without claims nothing is checked, without volumes the
bound claims' nodes are not, without StorageClasses an unbound claim is taken for a
WaitForFirstConsumer one. A pod without claims skips the plugin (upstream's PreFilter Skip): it
costs such pods one tuple test.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping
from typing import ClassVar

from scheduler.core.framework.cycle_state import PodContext
from scheduler.core.framework.handle import Handle
from scheduler.core.framework.interface import FilterPlugin, PreFilterPlugin, QueueingHint, Reasons, always
from scheduler.core.objects import Pod
from scheduler.core.state import ClusterEvent, ClusterState, EventKind, NodeInfo
from scheduler.core.volumes import CLAIM_KIND, STORAGE_CLASS_KIND, VOLUME_KIND, Claim
from scheduler.quoted import go_quote

NAME = "VolumeBinding"
NODE_CONFLICT = "node(s) had volume node affinity conflict"  # ErrReasonNodeConflict
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"  # ErrReasonPVNotExist
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"


class VolumeBinding(PreFilterPlugin, FilterPlugin):
    name = NAME
    # upstream's Reserve and PreBind bind unbound claims (not done here, see the module); its
    # PreScore skips a pod without static bindings, which Tessera never makes
    also_extends: ClassVar[frozenset[str]] = frozenset({"reserve", "preBind", "preScore"})

    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    def queueing_hints(self) -> Mapping[EventKind, QueueingHint]:
        """upstream's EventsToRegister: StorageClass Add|Update; a claim's Add|Update (here: one the
        pod names); a volume's Add|Update (upstream: any, for a pod with claims; here: one a claim
        of the pod names); Node Add and label or taint updates (its node affinity)."""
        node = self.handle.node_hint(self.name)
        return {EventKind.STORAGE_CLASS_CHANGED: always, EventKind.CLAIM_CHANGED: self._claim_named,
                EventKind.VOLUME_CHANGED: self._volume_named, EventKind.NODE_ADDED: node,
                EventKind.NODE_UPDATED: node}

    def _claim_named(self, uid: str, event: ClusterEvent) -> bool:
        pod = self.handle.state.pods.get(uid)
        return pod is None or event.name in _claim_keys(pod)

    def _volume_named(self, uid: str, event: ClusterEvent) -> bool:
        state = self.handle.state
        pod = state.pods.get(uid)
        return pod is None or any(claim.volume_name == event.name for claim in _claims_of(state, pod))

    def filter_applies(self, ctx: PodContext) -> bool:
        return bool(ctx.pod.claims) and CLAIM_KIND not in self.handle.state.unread

    def pre_filter(self, ctx: PodContext) -> str | None:
        pod = ctx.pod
        state = self.handle.state
        if not pod.claims or CLAIM_KIND in state.unread:
            return None
        claims: list[Claim] = []
        for ref in pod.claims:  # upstream's podHasPVCs
            claim = state.claims.get(f"{pod.meta.namespace}/{ref.name}")
            if claim is None:
                return (f"waiting for ephemeral volume controller to create the persistentvolumeclaim {go_quote(ref.name)}"
                        if ref.ephemeral else f"persistentvolumeclaim {go_quote(ref.name)} not found")
            if claim.lost:
                return (f"persistentvolumeclaim {go_quote(claim.meta.name)} bound to non-existent persistentvolume "
                        f"{go_quote(claim.volume_name)}")
            if claim.meta.deleting:
                return f"persistentvolumeclaim {go_quote(claim.meta.name)} is being deleted"
            if ref.ephemeral and claim.controller_uid != pod.uid:
                return (f"PVC {claim.key} was not created for pod {pod.key} (pod is not owner)")
            claims.append(claim)
        if any(self._immediate(claim) for claim in claims if not claim.bound):  # GetPodVolumeClaims
            return UNBOUND_IMMEDIATE
        if self.node_names(ctx) == frozenset():
            # upstream's framework: a PreFilterResult naming no node rejects the pod outright
            return f"node(s) didn't satisfy plugin {NAME}"
        return None

    def _immediate(self, claim: Claim) -> bool:
        """An unbound claim that should have been bound by now: pre-bound (spec.volumeName without
        bind-completed), or of no class, of an unknown class, or of one that binds at once
        (upstream's IsDelayBindingMode). Without StorageClasses read, none is."""
        state = self.handle.state
        if claim.volume_name:
            return True
        if STORAGE_CLASS_KIND in state.unread:
            return False
        cls = state.storage_classes.get(claim.storage_class) if claim.storage_class else None
        return cls is None or not cls.wait_for_first_consumer

    def node_names(self, ctx: PodContext) -> frozenset[str] | None:
        """upstream's GetEligibleNodes: the nodes every bound claim's volume names by hostname
        (intersected), None when none names any, or a volume is missing (or volumes unread)."""
        state = self.handle.state
        if not ctx.pod.claims or VOLUME_KIND in state.unread or CLAIM_KIND in state.unread:
            return None
        eligible: frozenset[str] | None = None
        for claim in _claims_of(state, ctx.pod):
            if not claim.bound:
                continue
            volume = state.volumes.get(claim.volume_name)
            if volume is None:
                return None
            if volume.hostnames:
                eligible = volume.hostnames if eligible is None else eligible & volume.hostnames
        return eligible

    def pod_form(self, ctx: PodContext) -> Hashable:
        """Its namespace and claim names: what the bound claims' volumes are looked up by."""
        return ctx.pod.meta.namespace, tuple(ref.name for ref in ctx.pod.claims)

    def filter(self, ctx: PodContext, info: NodeInfo) -> Reasons | None:
        """upstream's checkBoundClaims, for each bound claim in order: the first volume missing,
        or not allowing the node, decides."""
        state = self.handle.state
        if VOLUME_KIND in state.unread:
            return None
        node = info.node
        assert node is not None
        for claim in _claims_of(state, ctx.pod):
            if not claim.bound:
                continue
            volume = state.volumes.get(claim.volume_name)
            if volume is None:
                return (PV_NOT_EXIST,)
            if not volume.allows(node.meta.labels):
                return (NODE_CONFLICT,)
        return None


def _claim_keys(pod: Pod) -> Iterator[str]:
    return (f"{pod.meta.namespace}/{ref.name}" for ref in pod.claims)


def _claims_of(state: ClusterState, pod: Pod) -> Iterator[Claim]:
    """The pod's claims that exist, in its volumes' order."""
    for key in _claim_keys(pod):
        claim = state.claims.get(key)
        if claim is not None:
            yield claim
