"""VolumeBinding, as kube-scheduler v1.36's (volumebinding/volume_binding.go, binder.go): a pod's
claims must exist and be bound (or wait for their first consumer), the volumes of the bound ones
must allow the node, and an unbound WaitForFirstConsumer claim gets a static volume on the node
or is provisioned there (FindPodVolumes), held for it until the watch shows it done."""

from __future__ import annotations

from typing import Any

from scheduler.core.volumes import CLAIM_KIND, STORAGE_CLASS_KIND, VOLUME_KIND, ClaimBinding
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b
from tests.helpers import Run, config

HOSTNAME = "kubernetes.io/hostname"


def claimer(name: str, *claims: str, ephemeral: tuple[str, ...] = (), **kw: Any) -> dict[str, Any]:
    """A pod of Tessera's whose volumes name these claims (and generic ephemeral volumes)."""
    volumes: list[dict[str, Any]] = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": claim}}
                                     for i, claim in enumerate(claims)]
    volumes += [{"name": volume, "ephemeral": {"volumeClaimTemplate": {"spec": {}}}} for volume in ephemeral]
    return b.pod(name, requests={"cpu": "1"}, spec_extra={"volumes": volumes}, **kw)


def claim(name: str, volume: str = "", storage_class: str | None = None, bound: bool = True,
          namespace: str = "default", **meta: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    if volume:
        spec["volumeName"] = volume
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    annotations = {"pv.kubernetes.io/bind-completed": "yes"} if volume and bound else {}
    return {"apiVersion": "v1", "kind": CLAIM_KIND,
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}",
                         "resourceVersion": "1", "annotations": annotations, **meta},
            "spec": spec, "status": {"phase": "Bound" if volume and bound else "Pending"}}


def volume(name: str, *hosts: str, key: str = HOSTNAME, size: str = "1Gi", storage_class: str = "",
           **spec_extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                            "local": {"path": "/mnt/nvme0"}, "storageClassName": storage_class, **spec_extra}
    if hosts:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": key, "operator": "In", "values": list(hosts)}]}]}}
    return {"apiVersion": "v1", "kind": VOLUME_KIND,
            "metadata": {"name": name, "uid": f"uid-pv-{name}", "resourceVersion": "1"}, "spec": spec,
            "status": {"phase": "Available"}}


def storage_class(name: str, mode: str, provisioner: str = "kubernetes.io/no-provisioner",
                  **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": STORAGE_CLASS_KIND, "provisioner": provisioner,
            "metadata": {"name": name, "uid": f"uid-sc-{name}", "resourceVersion": "1"}, "volumeBindingMode": mode,
            **extra}


def nodes(*names: str, zone: bool = False) -> list[dict[str, Any]]:
    return [b.node(name, labels={HOSTNAME: name, **({"zone": f"z-{name}"} if zone else {})}) for name in names]


def test_a_pod_goes_to_the_node_its_local_volume_is_on() -> None:
    run = Run()
    run.add(*nodes("a", "b", "c"), volume("nvme-b", "b"), claim("data", "nvme-b"), claimer("train", "data"))
    assert run.node_of("train") == "b"


def test_the_other_nodes_read_upstreams_prefilter_narrowing() -> None:
    """GetEligibleNodes: a local volume's hostnames are the only nodes filtered; a node named
    there whose labels do not match reads the node affinity conflict."""
    run = Run()
    run.add(b.node("a", labels={HOSTNAME: "a"}), b.node("b", labels={HOSTNAME: "other"}),
            volume("nvme-b", "b"), claim("data", "nvme-b"), claimer("train", "data"))
    assert run.node_of("train") is None
    message = run.last("train").message
    assert "1 node(s) had volume node affinity conflict" in message, message
    assert "1 node(s) didn't satisfy plugin(s) [VolumeBinding]" in message, message


def test_a_volume_affinity_on_another_label_is_matched_per_node() -> None:
    run = Run()
    run.add(*nodes("a", "b", zone=True), volume("disk", "z-a", key="zone"), claim("data", "disk"),
            claimer("train", "data"))
    assert run.node_of("train") == "a"


def test_a_missing_claim_is_upstreams_unresolvable_prefilter_rejection() -> None:
    run = Run()
    run.add(*nodes("a"), claimer("train", "nope"))
    assert run.node_of("train") is None
    assert 'persistentvolumeclaim "nope" not found' in run.last("train").message


def test_a_claim_being_deleted() -> None:
    run = Run()
    run.add(*nodes("a"), claim("data", "pv", deletionTimestamp="2026-01-01T00:00:00Z"), volume("pv"),
            claimer("train", "data"))
    assert 'persistentvolumeclaim "data" is being deleted' in run.last("train").message


def test_a_bound_claim_whose_volume_is_missing() -> None:
    run = Run()
    run.add(*nodes("a", "b"), claim("data", "gone"), claimer("train", "data"))
    assert run.node_of("train") is None
    assert "2 node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)" in run.last("train").message
    run.add(volume("gone", "b"))  # the volume appears: the pod is tried again
    assert run.node_of("train") == "b"


def test_unbound_immediate_claims_wait_and_a_bind_wakes_the_pod() -> None:
    run = Run()
    run.add(*nodes("a"), storage_class("fast", "Immediate"), volume("pv"), claim("data", storage_class="fast"),
            claimer("train", "data"))
    assert run.node_of("train") is None
    assert "pod has unbound immediate PersistentVolumeClaims" in run.last("train").message
    run.feed(b.event("MODIFIED", claim("data", "pv", storage_class="fast") | {
        "metadata": {**claim("data", "pv")["metadata"], "resourceVersion": "2"}}))
    assert run.node_of("train") == "a"


def test_a_claim_without_class_or_of_an_unknown_class_or_prebound_binds_immediately() -> None:
    run = Run()
    run.add(*nodes("a"), claim("none"), claim("unknown", storage_class="nope"), claim("pre", "pv", bound=False),
            claimer("p1", "none"), claimer("p2", "unknown"), claimer("p3", "pre"))
    for name in ("p1", "p2", "p3"):
        assert run.node_of(name) is None
        assert "pod has unbound immediate PersistentVolumeClaims" in run.last(name).message


WFFC = "WaitForFirstConsumer"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"


def test_an_unbound_local_claim_goes_where_a_free_local_volume_is() -> None:
    """A no-provisioner class: the pod goes to the one node with a volume that fits, and the
    decision names it (the shell writes its claimRef before the Binding)."""
    run = Run()
    run.add(*nodes("a", "b", "c"), storage_class("local", WFFC), volume("nvme-b", "b", storage_class="local"),
            claim("data", storage_class="local"), claimer("train", "data"))
    assert run.node_of("train") == "b"
    assert run.last("train").claims == (ClaimBinding("default/data", "nvme-b", "1"),)


def test_without_a_volume_nor_a_provisioner_it_is_upstreams_bind_conflict() -> None:
    run = Run()
    run.add(*nodes("a", "b"), storage_class("local", WFFC), claim("data", storage_class="local"),
            claimer("train", "data"))
    assert run.node_of("train") is None
    assert f"0/2 nodes are available: 2 {BIND_CONFLICT}." in run.last("train").message


def test_two_pods_never_get_the_one_local_volume_of_a_node() -> None:
    """AssumePodVolumes: the first pod's volume is held for it (its claimRef not written yet), so
    the second, needing one too, finds none; once the watch shows the volume bound the hold is
    done, and the volume is the first claim's only."""
    run = Run()
    run.add(*nodes("a", "b"), storage_class("local", WFFC), volume("nvme-a", "a", storage_class="local"),
            claim("one", storage_class="local"), claim("two", storage_class="local"),
            claimer("first", "one"), claimer("second", "two"))
    assert run.node_of("first") == "a"
    assert run.node_of("second") is None
    assert f"2 {BIND_CONFLICT}" in run.last("second").message
    assert run.state.volumes_given == {"nvme-a": "default/one"}
    bound = volume("nvme-a", "a", storage_class="local",
                   claimRef={"namespace": "default", "name": "one", "uid": "uid-default-one"})
    bound["metadata"]["resourceVersion"] = "2"
    run.feed(b.event("MODIFIED", bound))
    assert run.state.volumes_given == {}
    assert run.node_of("second") is None  # the volume names "one" now: never "two"'s


def test_a_placement_given_up_frees_its_volume() -> None:
    """The assumption ends with the placement: a Binding refused (forget) or the pod deleted."""
    run = Run()
    run.add(*nodes("a"), storage_class("local", WFFC), volume("nvme-a", "a", storage_class="local"),
            claim("one", storage_class="local"), claimer("first", "one"))
    first = run.state.pod_by_key("default/first")
    assert run.state.claim_bindings == {first.uid: (ClaimBinding("default/one", "nvme-a", "1"),)}
    run.feed(b.event("DELETED", run.replay.pods[first.uid]))
    assert run.state.volumes_given == {} and run.state.claim_bindings == {}


def test_a_shared_claims_volume_stays_held_while_another_of_its_pods_holds_it() -> None:
    """Two pods share claim "one", both given nvme-a (upstream's assumed PV cache holds it for the
    claim, not the pod); the first deleted, the second still relies on it: a third pod's claim
    "two" must not get it. The same for a claim to be provisioned: the node stays its own."""
    run = Run()
    run.add(*nodes("a", "b"), storage_class("local", WFFC), volume("nvme-a", "a", storage_class="local"),
            storage_class("csi", WFFC, provisioner="csi.example.com"), claim("data", storage_class="csi"),
            claim("one", storage_class="local"), claim("two", storage_class="local"),
            claimer("p1", "one", "data"), claimer("p2", "one", "data"))
    assert run.node_of("p1") == run.node_of("p2") == "a"
    assert run.last("p1").claims == run.last("p2").claims
    run.feed(b.event("DELETED", run.replay.pods[run.state.pod_by_key("default/p1").uid]))
    assert run.state.volumes_given == {"nvme-a": "default/one"}
    assert run.state.claims_provisioned == {"default/data": "a"}
    run.add(claimer("p3", "two"))
    assert run.node_of("p3") is None, run.last("p3").claims
    run.feed(b.event("DELETED", run.replay.pods[run.state.pod_by_key("default/p2").uid]))
    assert run.state.volumes_given == {} and run.state.claims_provisioned == {}


def test_a_pod_bound_elsewhere_by_another_frees_what_it_was_given() -> None:
    """p1 is assumed on a with nvme-a; before our Binding goes (held at the allocation gate, say)
    the watch shows it bound to b by someone else: nvme-a is free for claim "two" at once, not held
    until p1 is deleted."""
    scheduler = Scheduler(config())
    p1 = claimer("p1", "one")
    for obj in (*nodes("a", "b"), storage_class("local", WFFC), volume("nvme-a", "a", storage_class="local"),
                claim("one", storage_class="local"), claim("two", storage_class="local"), p1):
        scheduler.apply("ADDED", obj, 0.0)
    [first] = scheduler.schedule_next(0.0) or []
    assert first.node == "a" and scheduler.state.volumes_given == {"nvme-a": "default/one"}
    bound = {**p1, "metadata": {**p1["metadata"], "resourceVersion": "9"}, "spec": {**p1["spec"], "nodeName": "b"}}
    scheduler.apply("MODIFIED", bound, 0.0)
    assert scheduler.state.node_of(first.pod.uid) == "b"
    assert scheduler.state.volumes_given == {} and scheduler.state.claim_bindings == {}


def test_the_smallest_fitting_volume_of_the_claims_class_and_modes() -> None:
    run = Run()
    run.add(*nodes("a"), storage_class("local", WFFC),
            volume("small", "a", size="500Mi", storage_class="local"),
            volume("big", "a", size="10Gi", storage_class="local"),
            volume("fit", "a", size="2Gi", storage_class="local"),
            volume("other-class", "a", size="1Gi", storage_class="slow"),
            volume("block", "a", size="1Gi", storage_class="local", volumeMode="Block"),
            volume("rox", "a", size="1Gi", storage_class="local", accessModes=["ReadOnlyMany"]),
            claim("data", storage_class="local"), claimer("train", "data"))
    assert run.last("train").claims == (ClaimBinding("default/data", "fit", "1"),)


def test_a_pods_two_claims_never_share_a_volume() -> None:
    run = Run()
    run.add(*nodes("a", "b"), storage_class("local", WFFC),
            volume("a-1", "a", storage_class="local"), volume("b-1", "b", storage_class="local"),
            volume("b-2", "b", storage_class="local"),
            claim("x", storage_class="local"), claim("y", storage_class="local"), claimer("train", "x", "y"))
    assert run.node_of("train") == "b"
    assert {c.volume for c in run.last("train").claims} == {"b-1", "b-2"}


def test_a_provisioner_class_provisions_where_its_topology_allows() -> None:
    topology = [{"matchLabelExpressions": [{"key": "zone", "values": ["z-b"]}]}]
    run = Run()
    run.add(*nodes("a", "b", zone=True), storage_class("ebs", WFFC, "example.com/fake", allowedTopologies=topology),
            claim("data", storage_class="ebs"), claimer("train", "data"))
    assert run.node_of("train") == "b"
    assert run.last("train").claims == (ClaimBinding("default/data", "", "1"),)
    assert f"1 {BIND_CONFLICT}" not in run.last("train").message


def test_a_claim_selected_for_a_node_goes_there_only() -> None:
    run = Run()
    run.add(*nodes("a", "b"), storage_class("ebs", WFFC, "example.com/fake"),
            claim("data", storage_class="ebs", annotations={"volume.kubernetes.io/selected-node": "b"}),
            claimer("train", "data"))
    assert run.node_of("train") == "b"
    assert run.last("train").claims == (ClaimBinding("default/data", "", "1"),)


def test_a_malformed_topology_expression_is_read_not_a_crash() -> None:
    """allowedTopologies[].matchLabelExpressions: a null entry is Go's zero value (no key, no
    values: it admits no node), anything else not an object is the StorageClass refused."""
    run = Run()
    run.add(*nodes("a"), storage_class("s", WFFC, provisioner="p", allowedTopologies=[{"matchLabelExpressions": [None]}]),
            claim("data", storage_class="s"), claimer("train", "data"))
    assert run.node_of("train") is None and not run.notices()
    run.add(storage_class("t", WFFC, provisioner="p", allowedTopologies=[{"matchLabelExpressions": ["zone"]}]))
    assert run.notices() == ['InvalidObject: StorageClass t: StorageClass.allowedTopologies[0].matchLabelExpressions'
                             '[0]: expected an object, got str']


def test_a_freed_volume_wakes_the_waiting_pod() -> None:
    run = Run()
    run.add(*nodes("a"), storage_class("local", WFFC), claim("data", storage_class="local"),
            claimer("train", "data"))
    assert run.node_of("train") is None
    run.add(volume("nvme-a", "a", storage_class="local"))
    assert run.node_of("train") == "a"


def test_an_ephemeral_volumes_claim_must_exist_and_be_the_pods() -> None:
    run = Run()
    run.add(*nodes("a"), claimer("train", ephemeral=("scratch",)))
    assert 'waiting for ephemeral volume controller to create the persistentvolumeclaim "train-scratch"' \
        in run.last("train").message
    run.add(claim("train-scratch", "pv"), volume("pv"))
    assert "PVC default/train-scratch was not created for pod default/train (pod is not owner)" \
        in run.last("train").message


def test_unread_kinds_pass_what_they_cannot_tell() -> None:
    """An old deploy's role may not read claims: the shell marks the kind unread, and the pod is
    placed as before (a claim not found would otherwise be a rejection)."""
    run = Run()
    run.state.unread[CLAIM_KIND] = "forbidden"
    run.add(*nodes("a"), claimer("train", "nope"))
    assert run.node_of("train") == "a"


def test_unread_volumes_leave_bound_claims_unchecked() -> None:
    run = Run()
    run.state.unread[VOLUME_KIND] = "forbidden"
    run.add(*nodes("a"), claim("data", "gone"), claimer("train", "data"))
    assert run.node_of("train") == "a"


def test_unread_storage_classes_take_an_unbound_claim_for_a_waiting_one() -> None:
    run = Run()
    run.state.unread[STORAGE_CLASS_KIND] = "forbidden"
    run.add(*nodes("a"), claim("data", storage_class="fast"), claimer("train", "data"))
    assert run.node_of("train") == "a"



def test_a_gangs_members_never_share_a_local_volume_and_a_failed_gang_holds_none() -> None:
    """The gang's transaction assumes each member where it lands: a later member sees the volume
    an earlier one was given. One volume for two members: the gang does not fit, and undoing the
    transaction gives the volume back."""
    def member(name: str, claim_name: str) -> dict[str, Any]:
        return claimer(name, claim_name, labels={"scheduling.x-k8s.io/pod-group": "g"})

    run = Run()
    run.add(*nodes("a", "b"), storage_class("local", WFFC), volume("nvme-a", "a", storage_class="local"),
            claim("one", storage_class="local"), claim("two", storage_class="local"), b.podgroup("g", 2),
            member("m1", "one"), member("m2", "two"))
    assert run.node_of("m1") is None and run.node_of("m2") is None
    assert run.state.volumes_given == {} and run.state.claim_bindings == {}
    run.add(volume("nvme-b", "b", storage_class="local"))
    assert {run.node_of("m1"), run.node_of("m2")} == {"a", "b"}
    assert {c.volume for name in ("m1", "m2") for c in run.last(name).claims} == {"nvme-a", "nvme-b"}


def test_a_claims_own_volume_decides_even_on_another_node() -> None:
    """FindMatchingVolume: a volume naming the claim (here given to it by a placed pod's
    assumption) is the claim's match wherever it is; on a node it does not allow there is no
    match, never another volume: a second pod sharing the claim fits only the first one's node."""
    run = Run()
    run.add(b.node("a", cpu="1", labels={HOSTNAME: "a"}), b.node("b", labels={HOSTNAME: "b"}),
            storage_class("local", WFFC), volume("nvme-a", "a", storage_class="local"),
            claim("shared", storage_class="local"), claimer("first", "shared"))
    assert run.node_of("first") == "a"
    run.add(volume("nvme-b", "b", storage_class="local"), claimer("second", "shared"))
    assert run.node_of("second") is None
    message = run.last("second").message
    assert "1 Insufficient cpu" in message and f"1 {BIND_CONFLICT}" in message, message


def test_a_volume_pinned_by_one_term_only_is_found_by_its_other_term() -> None:
    """The search narrows to a node's own local volumes only for a volume whose every term names
    hostnames: one that also allows a zone is tried on every node of the zone."""
    either = volume("either", "a", storage_class="local")
    either["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"].append(
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z-b"]}]})
    run = Run()
    run.add(*nodes("b", zone=True), storage_class("local", WFFC), either, claim("data", storage_class="local"),
            claimer("train", "data"))
    assert run.last("train").claims == (ClaimBinding("default/data", "either", "1"),)


# --- pinned by the mutation round (each kills a mutant the tests above let live) ---------------

def _sized(obj: dict[str, Any], size: str) -> dict[str, Any]:
    obj["spec"]["resources"]["requests"]["storage"] = size
    return obj


def test_claims_are_matched_smallest_request_first() -> None:
    """findMatchingVolumes sorts the claims byPVCSize: the 3Gi claim takes the 5Gi volume before
    the 4Gi one is tried, which then gets the 10Gi (largest first would swap them)."""
    run = Run()
    run.add(*nodes("a"), storage_class("local", WFFC), volume("v5", "a", size="5Gi", storage_class="local"),
            volume("v10", "a", size="10Gi", storage_class="local"),
            _sized(claim("big", storage_class="local"), "4Gi"), _sized(claim("small", storage_class="local"), "3Gi"),
            claimer("train", "big", "small"))
    assert set(run.last("train").claims) == {ClaimBinding("default/small", "v5", "1"),
                                             ClaimBinding("default/big", "v10", "1")}


def test_equally_sized_volumes_go_by_name() -> None:
    """Among the smallest fitting volumes, the first by name: the same choice every time (the
    property test finds the tie only when its draw makes one)."""
    run = Run()
    run.add(*nodes("a"), storage_class("local", WFFC), volume("zz", "a", storage_class="local"),
            volume("aa", "a", storage_class="local"), claim("data", storage_class="local"), claimer("train", "data"))
    assert run.last("train").claims == (ClaimBinding("default/data", "aa", "1"),)


def test_a_volume_being_deleted_or_not_selected_or_naming_an_old_claim_is_not_matched() -> None:
    """FindMatchingVolume skips a volume with a deletionTimestamp, one the claim's selector does
    not select, and one whose claimRef names the claim under another uid (IsVolumeBoundToClaim)."""
    deleting = volume("deleting", "a", storage_class="local")
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    old = volume("old", "a", storage_class="local", claimRef={"namespace": "default", "name": "data", "uid": "gone"})
    run = Run()
    run.add(*nodes("a"), storage_class("local", WFFC), deleting, old, claim("data", storage_class="local"),
            claimer("train", "data"))
    assert run.node_of("train") is None
    assert f"1 {BIND_CONFLICT}" in run.last("train").message

    picked = claim("picked", storage_class="local")
    picked["spec"]["selector"] = {"matchLabels": {"tier": "fast"}}
    fast = volume("fast", "a", size="2Gi", storage_class="local")
    fast["metadata"]["labels"] = {"tier": "fast"}
    run = Run()
    run.add(*nodes("a"), storage_class("local", WFFC), volume("plain", "a", storage_class="local"), fast, picked,
            claimer("chooser", "picked"))
    assert run.last("chooser").claims == (ClaimBinding("default/picked", "fast", "1"),)


def test_a_claim_selected_for_another_node_fails_here_even_with_a_volume_here() -> None:
    """FindPodVolumes' fast path: selected-node naming another node is a bind conflict at once."""
    run = Run()
    run.add(*nodes("a", "b"), storage_class("local", WFFC), volume("nvme-a", "a", storage_class="local"),
            claim("data", storage_class="local", annotations={"volume.kubernetes.io/selected-node": "b"}),
            claimer("train", "data"))
    assert run.node_of("train") is None
    assert f"2 {BIND_CONFLICT}" in run.last("train").message


def test_the_first_bound_claim_that_fails_decides_the_reason() -> None:
    """checkBoundClaims returns at the first volume missing or not allowing the node: a conflict
    first, then a missing volume, reads as the conflict alone."""
    run = Run()
    run.add(*nodes("a"), volume("pv-b", "b"), claim("first", "pv-b"), claim("second", "gone"),
            claimer("train", "first", "second"))
    message = run.last("train").message
    assert "1 node(s) had volume node affinity conflict" in message and "non-existent" not in message, message


def test_a_prebound_claim_of_a_waiting_class_is_an_unbound_immediate_one() -> None:
    """GetPodVolumeClaims: a claim naming a volume without bind-completed is unbound immediate
    whatever its class."""
    run = Run()
    run.add(*nodes("a"), storage_class("local", WFFC), volume("pv", storage_class="local"),
            claim("pre", "pv", storage_class="local", bound=False), claimer("train", "pre"))
    assert "pod has unbound immediate PersistentVolumeClaims" in run.last("train").message


def test_bound_claims_on_local_volumes_of_different_nodes_leave_no_node() -> None:
    """GetEligibleNodes intersects the volumes' hostnames; an empty result rejects the pod in
    PreFilter (no node is filtered, so none reads a node affinity conflict)."""
    run = Run()
    run.add(*nodes("a", "b"), volume("pv-a", "a"), volume("pv-b", "b"), claim("x", "pv-a"), claim("y", "pv-b"),
            claimer("train", "x", "y"))
    assert run.node_of("train") is None
    message = run.last("train").message
    assert message.startswith("0/2 nodes are available: node(s) didn't satisfy plugin VolumeBinding."), message


def test_a_terms_hostname_expressions_are_intersected() -> None:
    """GetLocalPersistentVolumeNodeNames: within a term the hostname In sets intersect, so only b
    is eligible and the other nodes are not filtered at all."""
    pinned = volume("pv", "a", "b")
    pinned["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"].append(
        {"key": HOSTNAME, "operator": "In", "values": ["b", "c"]})
    run = Run()
    run.add(*nodes("a", "c"), pinned, claim("data", "pv"), claimer("train", "data"))
    message = run.last("train").message
    assert "2 node(s) didn't satisfy plugin(s) [VolumeBinding]" in message and "conflict" not in message, message


def test_an_empty_topology_term_admits_no_node() -> None:
    """MatchTopologySelectorTerms: a term without matchLabelExpressions selects nothing."""
    run = Run()
    run.add(*nodes("a"), storage_class("s", WFFC, provisioner="p", allowedTopologies=[{"matchLabelExpressions": []}]),
            claim("data", storage_class="s"), claimer("train", "data"))
    assert run.node_of("train") is None
    assert f"1 {BIND_CONFLICT}" in run.last("train").message


def test_the_beta_class_annotation_comes_before_spec_storage_class_name() -> None:
    """GetPersistentVolumeClaimClass and GetPersistentVolumeClass read the beta annotation first."""
    beta = {"volume.beta.kubernetes.io/storage-class": "local"}
    pv = volume("nvme-a", "a", storage_class="slow")
    pv["metadata"]["annotations"] = beta
    run = Run()
    run.add(*nodes("a"), storage_class("local", WFFC), pv, claim("data", storage_class="other", annotations=beta),
            claimer("train", "data"))
    assert run.last("train").claims == (ClaimBinding("default/data", "nvme-a", "1"),)


def test_an_ephemeral_claim_owned_but_not_controlled_by_the_pod_is_not_its() -> None:
    """VolumeIsForPod: metav1.IsControlledBy, an owner reference with controller: true."""
    run = Run()
    run.add(*nodes("a"), volume("pv"), claimer("train", ephemeral=("scratch",)))
    uid = run.state.pod_by_key("default/train").uid
    owner = {"apiVersion": "v1", "kind": "Pod", "name": "train", "uid": uid}
    run.add(claim("train-scratch", "pv", ownerReferences=[{**owner, "controller": False}]))
    assert "(pod is not owner)" in run.last("train").message
    run.feed(b.event("MODIFIED", claim("train-scratch", "pv", ownerReferences=[{**owner, "controller": True}],
                                       resourceVersion="2")))
    assert run.node_of("train") == "a"


def test_a_lost_claim_is_rejected_in_prefilter() -> None:
    lost = claim("data", "pv")
    lost["status"]["phase"] = "Lost"
    run = Run()
    run.add(*nodes("a"), volume("pv"), lost, claimer("train", "data"))
    assert 'persistentvolumeclaim "data" bound to non-existent persistentvolume "pv"' in run.last("train").message


def test_a_class_without_a_binding_mode_binds_immediately() -> None:
    """The apiserver defaults an unset volumeBindingMode to Immediate."""
    unset = storage_class("fast", WFFC, provisioner="p")
    del unset["volumeBindingMode"]
    run = Run()
    run.add(*nodes("a"), unset, claim("data", storage_class="fast"), claimer("train", "data"))
    assert "pod has unbound immediate PersistentVolumeClaims" in run.last("train").message


def test_an_unreadable_deleted_claim_or_volume_ends_its_assumption() -> None:
    """A DELETED event whose object does not parse still drops what was assumed for it."""
    run = Run()
    run.add(*nodes("a"), storage_class("local", WFFC), storage_class("csi", WFFC, provisioner="csi.example.com"),
            volume("nvme-a", "a", storage_class="local"), claim("one", storage_class="local"),
            claim("data", storage_class="csi"), claimer("train", "one", "data"))
    assert run.state.volumes_given == {"nvme-a": "default/one"} and run.state.claims_provisioned == {"default/data": "a"}
    bad_volume = volume("nvme-a", "a", storage_class="local", capacity={"storage": "lots"})
    bad_claim = _sized(claim("data", storage_class="csi"), "lots")
    run.feed(b.event("DELETED", bad_volume), b.event("DELETED", bad_claim))
    assert run.state.volumes_given == {} and run.state.claims_provisioned == {}


def test_the_watch_showing_the_claim_selected_ends_the_provisioning_assumption() -> None:
    """Once the watch shows our selected-node (or a deleted volume), the assumption is done: the
    state's object speaks for itself, and a later reset of the annotation is not overridden."""
    run = Run()
    run.add(*nodes("a"), storage_class("csi", WFFC, provisioner="csi.example.com"),
            storage_class("local", WFFC), volume("nvme-a", "a", storage_class="local"),
            claim("data", storage_class="csi"), claim("one", storage_class="local"), claimer("train", "data", "one"))
    assert run.state.claims_provisioned == {"default/data": "a"} and run.state.volumes_given == {"nvme-a": "default/one"}
    run.feed(b.event("MODIFIED", claim("data", storage_class="csi", resourceVersion="2",
                                       annotations={"volume.kubernetes.io/selected-node": "a"})),
             b.event("DELETED", volume("nvme-a", "a", storage_class="local")))
    assert run.state.claims_provisioned == {} and run.state.volumes_given == {}
    run.feed(b.event("DELETED", run.replay.pods[run.state.pod_by_key("default/train").uid]))
    assert run.state.claim_bindings == {}


def test_a_shared_claims_other_binding_does_not_keep_a_volume_held() -> None:
    """Two pods share a claim of a provisioner class: the first is given the static volume on a,
    the second (a full) has the claim provisioned on b (FindMatchingVolume's pre-bound volume
    does not allow b: no match). The first deleted, the volume is free: only the same binding
    held by another pod keeps an entry, not any binding of the claim."""
    run = Run()
    run.add(b.node("a", cpu="1", labels={HOSTNAME: "a"}), b.node("b", labels={HOSTNAME: "b"}),
            storage_class("csi", WFFC, provisioner="csi.example.com"), volume("v1", "a", storage_class="csi"),
            claim("shared", storage_class="csi"), claimer("p1", "shared"))
    assert run.last("p1").claims == (ClaimBinding("default/shared", "v1", "1"),)
    run.add(claimer("p2", "shared"))
    assert run.node_of("p2") == "b" and run.last("p2").claims == (ClaimBinding("default/shared", "", "1"),)
    run.feed(b.event("DELETED", run.replay.pods[run.state.pod_by_key("default/p1").uid]))
    assert run.state.volumes_given == {} and run.state.claims_provisioned == {"default/shared": "b"}
