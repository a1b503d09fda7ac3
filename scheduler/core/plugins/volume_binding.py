"""VolumeBinding: a pod's PersistentVolumeClaims must exist, the volumes they are bound to must be
attachable on the node, and those waiting for their first consumer must find a volume or be
provisionable there (kube-scheduler v1.36 pkg/scheduler/framework/plugins/volumebinding,
volume_binding.go and binder.go).

PreFilter, as upstream's podHasPVCs and GetPodVolumeClaims, both UnschedulableAndUnresolvable:
a claim that does not exist (`persistentvolumeclaim "NAME" not found`; an ephemeral volume's:
waiting for the ephemeral volume controller), one whose volume is Lost, one being deleted, an
ephemeral volume's claim the pod does not control, and a claim not bound yet that should have
been (an Immediate StorageClass, no class, an unknown class, or pre-bound by spec.volumeName:
"pod has unbound immediate PersistentVolumeClaims"). The nodes the bound claims' volumes name by
`kubernetes.io/hostname In` are the only ones filtered (upstream's GetEligibleNodes, a
PreFilterResult): the others read "node(s) didn't satisfy plugin(s) [VolumeBinding]".

Filter, as FindPodVolumes: for bound claims, a node the volume's required node affinity does
not select reads "node(s) had volume node affinity conflict"; a volume that does not exist
"node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)". For unbound claims
of a WaitForFirstConsumer class: one whose selected-node (written, or assumed for a placed pod)
names another node fails at once; the others are matched, smallest request first, each to the
smallest available static volume that fits (FindMatchingVolume: not bound to another claim, nor
given to another claim by a placed pod's assumption, nor to another claim of this pod; size,
volumeMode, class, selector, phase Available, node affinity, access modes); what no volume
matches must be provisionable on the node (its class has a provisioner other than
`kubernetes.io/no-provisioner`, and its allowedTopologies admit the node's labels), else "node(s)
didn't find available persistent volumes to bind". Unresolvable all: no eviction attaches or
provisions a volume. CSI storage capacity (CSIStorageCapacity) is not checked.

Reserve, as AssumePodVolumes: the chosen node's matches (`ClaimBinding`s) go into the placement;
the cluster state holds them until the watch shows them done or the placement is given up, and
the shell writes them (each volume's claimRef, each provisioned claim's selected-node) before
the Binding, which then waits, up to VolumeBindingArgs' bindTimeoutSeconds, until
`check_bindings` (upstream's checkBindings, a rule on the state, so here) finds every claim
bound, or a reason to decide the pod again.

Cannot tell, so passes: the shell marks a kind its role may not read (`ClusterState.unread`, an
old deploy without this plugin's RBAC): without claims nothing is checked, without volumes the
bound claims' nodes are not, without StorageClasses an unbound claim is taken for a
WaitForFirstConsumer one, and without volumes or StorageClasses no unbound claim is matched (it
passes, and nothing is written for it). A pod without claims skips the plugin (upstream's
PreFilter Skip): it costs such pods one tuple test, and its Reserve one more.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from scheduler.api.config_reader import ArgsReader, Checks, invalid
from scheduler.core.framework.cycle_state import PodContext
from scheduler.core.framework.handle import Handle
from scheduler.core.framework.interface import (FilterPlugin, PreFilterPlugin, QueueingHint, Reasons, Reservation,
                                                ReservePlugin, always)
from scheduler.core.objects import Pod
from scheduler.core.state import ClusterEvent, ClusterState, EventKind, NodeInfo
from scheduler.core.volumes import CLAIM_KIND, HOSTNAME, STORAGE_CLASS_KIND, VOLUME_KIND, Claim, ClaimBinding, Volume
from scheduler.quoted import go_quote

NAME = "VolumeBinding"
NODE_CONFLICT = "node(s) had volume node affinity conflict"  # ErrReasonNodeConflict
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"  # ErrReasonPVNotExist
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"  # ErrReasonBindConflict
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
# the error of upstream's wait when bindTimeoutSeconds passes (PollUntilContextTimeout: ctx.Err())
BIND_TIMEOUT = "context deadline exceeded"
# how the assume caches name the kinds in their NotFound errors ("could not find %v %q")
_VOLUME_TYPE, _CLAIM_TYPE = "v1.PersistentVolume", "v1.PersistentVolumeClaim"
FIELDS = ("bindTimeoutSeconds",)
HINTS = {"shape": "Tessera does not score nodes by storage capacity (StorageCapacityScoring), so it has no shape"}


class VolumeBindingArgs(BaseModel):
    """upstream's VolumeBindingArgs (bindTimeoutSeconds, v1's default 600): how long the shell
    waits, after VolumeBinding's writes, for the pod's claims to be bound before the pod is
    decided again. 0 gives no wait at all: a pod with a claim to bind fails its PreBind at once
    (upstream's poll starts with its deadline already passed)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bind_timeout_seconds: int = 600


def parse_args(args: ArgsReader) -> VolumeBindingArgs:
    """ValidateVolumeBindingArgs: bindTimeoutSeconds not negative."""
    found = Checks()
    timeout = found.read(lambda: args.get_int("bindTimeoutSeconds", 600), None)
    if timeout is not None and timeout < 0:
        found.check(lambda: invalid(args.at("bindTimeoutSeconds"), timeout,
                                    "invalid BindTimeoutSeconds, should not be a negative value"))
    found.raise_errors()
    assert timeout is not None
    return VolumeBindingArgs(bind_timeout_seconds=timeout)


@dataclass(frozen=True, slots=True)
class BindingsChecked:
    """What the watch-fed state says of a placed pod's claims after VolumeBinding's writes
    (`check_bindings`): all bound (the Binding goes), failed (the pod is decided again, `failure`
    in upstream's words), the pod gone, or none of these yet (wait for the next change)."""

    bound: bool = False
    failure: str = ""
    pod_gone: bool = False


def check_bindings(state: ClusterState, uid: str, claims: tuple[ClaimBinding, ...], node: str,
                   written: Mapping[str, str]) -> BindingsChecked:
    """upstream's checkBindings, on the watch-fed state instead of the assume caches' API objects.
    `written` is the resourceVersion each write left (by volume name or claim key): an object the
    state holds at an older version is the one before our write, so it is waited for, not read
    as reset. A static volume fails when it is gone or its claimRef was dropped ("ClaimRef got
    reset"), a provisioned claim when it is gone or its selected-node no longer names the node
    (the provisioner gave up: "selectedNode annotation reset" when it has no annotation left,
    else "provisioning failed"); either fails when its volume no longer admits the node. Bound
    when every claim is (isPVCFullyBound)."""
    if uid not in state.pods:
        return BindingsChecked(pod_gone=True)
    info = state.nodes.get(node)
    if info is None or info.node is None:
        return BindingsChecked(failure=f"failed to get node {go_quote(node)}: node {go_quote(node)} not found")
    labels = info.node.meta.labels
    waiting = False
    for given in claims:
        claim = state.claims.get(given.claim)
        if given.volume:
            volume = state.volumes.get(given.volume)
            if volume is None or claim is None:
                missing = (f"{_VOLUME_TYPE} {go_quote(given.volume)}" if volume is None
                           else f"{_CLAIM_TYPE} {go_quote(given.claim)}")
                return BindingsChecked(failure=f"failed to check binding: could not find {missing}")
            if _older(volume.resource_version, written.get(given.volume, "")):
                waiting = True
                continue
            if not volume.allows(labels):
                return BindingsChecked(failure=_affinity(given.volume, node))
            if volume.claim_ref is None or not volume.claim_ref[2]:  # dropped by the PV controller's unbindVolume
                return BindingsChecked(failure=f"ClaimRef got reset for pv {go_quote(given.volume)}")
            waiting = waiting or not claim.bound
            continue
        if claim is None:
            return BindingsChecked(failure=f"failed to check provisioning pvc: could not find {_CLAIM_TYPE} "
                                           f"{go_quote(given.claim)}")
        if _older(claim.meta.resource_version, written.get(given.claim, "")):
            waiting = True
            continue
        if not claim.meta.annotations:
            return BindingsChecked(failure=f"selectedNode annotation reset for PVC {go_quote(claim.meta.name)}")
        if claim.selected_node != node:
            return BindingsChecked(failure=f"provisioning failed for PVC {go_quote(claim.meta.name)}")
        if claim.volume_name:
            volume = state.volumes.get(claim.volume_name)
            if volume is None:  # not seen yet (or deleted: the claim becomes unbound)
                waiting = True
                continue
            if not volume.allows(labels):
                return BindingsChecked(failure=_affinity(claim.volume_name, node))
        waiting = waiting or not claim.bound
    return BindingsChecked(bound=not waiting)


def _older(held: str, written: str) -> bool:
    """upstream's CompareResourceVersion(written, held) > 0: the state holds the object from
    before our write (versions that do not parse compare equal)."""
    return held.isdigit() and written.isdigit() and int(written) > int(held)


def _affinity(volume: str, node: str) -> str:
    """checkBindings' node affinity failure (CheckNodeAffinity's error)."""
    return f"pv {go_quote(volume)} node affinity doesn't match node {go_quote(node)}: no matching NodeSelectorTerms"


class VolumeBinding(PreFilterPlugin, FilterPlugin, ReservePlugin):
    name = NAME
    # upstream's PreBind is the shell's write before the Binding (scheduler/kube/volume_writes.py)
    # and its wait for the claims to be bound (`check_bindings`, kube/binder.py);
    # its PreScore feeds a Score that runs behind an alpha gate (StorageCapacityScoring) only
    also_extends: ClassVar[frozenset[str]] = frozenset({"preBind", "preScore"})

    def __init__(self, handle: Handle) -> None:
        self.handle = handle
        # `_index_of`'s volumes by class, valid while the state's volumes_version is this
        self._index: dict[str, _ClassVolumes] = {}
        self._index_version = -1

    def queueing_hints(self) -> Mapping[EventKind, QueueingHint]:
        """upstream's EventsToRegister: StorageClass Add|Update; a claim's Add|Update (here: one the
        pod names); a volume's Add|Update (upstream: any, for a pod with claims; here: one a claim
        of the pod names, or any while one of its claims is unbound: a volume freed or added may
        be the one it matches); Node Add and label or taint updates (its node affinity)."""
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
        return pod is None or any(claim.volume_name == event.name or not claim.bound for claim in _claims_of(state, pod))

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
        """upstream's FindPodVolumes: its reasons in its order (a bound claim's node conflict, the
        unbound claims' bind conflict, a bound claim's missing volume)."""
        return self._find(ctx.pod, info)[0]

    def reserve(self, ctx: PodContext, info: NodeInfo, now: float) -> Reservation:
        """upstream's AssumePodVolumes: the chosen node's matches, which the state then holds."""
        return Reservation(claims=self._find(ctx.pod, info)[1])

    def _find(self, pod: Pod, info: NodeInfo) -> tuple[Reasons | None, tuple[ClaimBinding, ...]]:
        state = self.handle.state
        node = info.node
        assert node is not None
        if not pod.claims or CLAIM_KIND in state.unread or VOLUME_KIND in state.unread:
            return None, ()
        conflict = missing = False
        unbound: list[Claim] = []
        for claim in _claims_of(state, pod):  # checkBoundClaims: the first volume missing or not allowing decides
            if not claim.bound:
                if not claim.volume_name:  # PreFilter let it through: it waits for its first consumer
                    unbound.append(claim)
                continue
            if conflict or missing:
                continue
            volume = state.volumes.get(claim.volume_name)
            if volume is None:
                missing = True
            elif not volume.allows(node.meta.labels):
                conflict = True
        bindings: tuple[ClaimBinding, ...] = ()
        satisfied = True
        if unbound and STORAGE_CLASS_KIND not in state.unread:
            bindings, satisfied = self._unbound(unbound, node.meta.name, node.meta.labels)
        reasons = ((NODE_CONFLICT,) if conflict else ()) + ((BIND_CONFLICT,) if not satisfied else ()) \
            + ((PV_NOT_EXIST,) if missing else ())
        return reasons or None, bindings if not reasons else ()

    def _unbound(self, claims: list[Claim], node: str, labels: Mapping[str, str]) -> tuple[tuple[ClaimBinding, ...], bool]:
        """FindPodVolumes' part for unbound claims of delayed binding: what each gets on the node,
        and whether all get something."""
        state = self.handle.state
        to_match: list[Claim] = []
        to_provision: list[Claim] = []
        for claim in claims:
            selected = claim.selected_node if claim.selected_node is not None \
                else state.claims_provisioned.get(claim.key)
            if selected is None:
                to_match.append(claim)
            elif selected != node:
                return (), False  # the fast path: provisioning was started for another node
            else:
                to_provision.append(claim)
        bindings: list[ClaimBinding] = []
        chosen: set[str] = set()
        for claim in sorted(to_match, key=lambda c: c.requested):  # byPVCSize
            volume = self._matching_volume(claim, labels, chosen)
            if volume is None:
                to_provision.append(claim)
                continue
            chosen.add(volume.name)
            bindings.append(ClaimBinding(claim.key, volume.name, volume.resource_version))
        for claim in to_provision:  # checkVolumeProvisions
            cls = state.storage_classes.get(claim.storage_class)
            if cls is None or not cls.provisions_on(labels):
                return (), False
            bindings.append(ClaimBinding(claim.key, "", claim.meta.resource_version))
        return tuple(bindings), True

    def _index_of(self, storage_class: str) -> _ClassVolumes:
        """The volumes of one class (upstream's ListPVs), indexed (`_ClassVolumes`); rebuilt when
        the state's volumes changed."""
        state = self.handle.state
        if self._index_version != state.volumes_version:
            self._index.clear()
            for volume in sorted(state.volumes.values(), key=_smallest_first):
                index = self._index.setdefault(volume.storage_class, _ClassVolumes())
                if volume.claim_ref is not None:
                    index.claimed.setdefault(volume.claim_ref[:2], []).append(volume)
                    continue
                if not volume.available:
                    continue
                if volume.required is not None and volume.hostnames and all(
                        any(req.key == HOSTNAME and req.operator == "In" for req in term.expressions)
                        for term in volume.required):
                    for host in volume.hostnames:
                        index.pinned.setdefault(host, []).append(volume)
                else:
                    index.others.append(volume)
            self._index_version = state.volumes_version
        return self._index.get(storage_class, _NO_VOLUMES)

    def _matching_volume(self, claim: Claim, labels: Mapping[str, str], chosen: set[str]) -> Volume | None:
        """upstream's FindMatchingVolume on the scheduler's path (a node given): a volume already
        naming the claim (or given to it by an assumption) decides, whether the node suits it or
        not; else the smallest available one of the claim's class that fits: the first that does,
        the candidates being tried smallest first (a tie by name, so that it goes the same way
        every time)."""
        state = self.handle.state
        index = self._index_of(claim.storage_class)
        given = [state.volumes[name] for name, key in state.volumes_given.items()
                 if key == claim.key and name in state.volumes]
        for volume in sorted([*index.claimed.get((claim.meta.namespace, claim.meta.name), ()),
                              *(v for v in given if v.storage_class == claim.storage_class)],
                             key=lambda volume: volume.name):
            if self._usable(volume, claim, chosen) and (volume.bound_to(claim) or volume in given):
                return volume if volume.allows(labels) else None
        here = index.pinned.get(labels.get(HOSTNAME, ""), [])
        for volume in heapq.merge(here, index.others, key=_smallest_first) if here and index.others \
                else here or index.others:
            if (self._usable(volume, claim, chosen)
                    and (claim.selector is None or claim.selector.matches(volume.labels))
                    and volume.allows(labels) and claim.access_modes <= volume.access_modes):
                return volume
        return None

    def _usable(self, volume: Volume, claim: Claim, chosen: set[str]) -> bool:
        """FindMatchingVolume's first checks: not chosen for another claim of the pod, nor bound
        (or given by an assumption) to another claim, large enough, of the claim's volumeMode,
        not being deleted."""
        given = self.handle.state.volumes_given.get(volume.name)
        return (volume.name not in chosen and (given is None or given == claim.key)
                and (volume.claim_ref is None or volume.bound_to(claim))
                and volume.capacity >= claim.requested and volume.volume_mode == claim.volume_mode
                and not volume.deleting)


@dataclass(slots=True)
class _ClassVolumes:
    """One class's volumes, each list smallest first (`_smallest_first`): those whose claimRef
    names a claim (by its namespace and name), and the Available ones naming none — the only
    ones a claim may be matched to — split so that a node is searched for its own only: the
    local volumes whose every node affinity term names hostnames (`kubernetes.io/hostname In`),
    under each of those hostnames, and the others. A narrowing only (a cluster with a local
    volume per disk of every node is not searched whole for every node tried): whether a volume
    allows the node is still asked of each, until one fits (sorted once per rebuild, so that
    zone-pinned volumes, all in `others`, are not all asked for every node and claim)."""

    claimed: dict[tuple[str, str], list[Volume]] = field(default_factory=dict)
    pinned: dict[str, list[Volume]] = field(default_factory=dict)
    others: list[Volume] = field(default_factory=list)


_NO_VOLUMES = _ClassVolumes()


def _smallest_first(volume: Volume) -> tuple[Fraction, str]:
    """FindMatchingVolume's choice among those that fit: the smallest, a tie by name."""
    return volume.capacity, volume.name


def _claim_keys(pod: Pod) -> Iterator[str]:
    return (f"{pod.meta.namespace}/{ref.name}" for ref in pod.claims)


def _claims_of(state: ClusterState, pod: Pod) -> Iterator[Claim]:
    """The pod's claims that exist, in its volumes' order."""
    for key in _claim_keys(pod):
        claim = state.claims.get(key)
        if claim is not None:
            yield claim
