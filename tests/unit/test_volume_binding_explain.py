"""`kubectl tessera explain` on pods with claims: its dry run reads the claims and volumes as the
scheduler does (each node's VolumeBinding reason), and a listing that could not read one of the
three kinds gives no verdict for such a pod, saying which kind and why, rather than a dry run
that takes the claims for missing."""

from __future__ import annotations

from scheduler.kube.informers import CLAIMS
from scheduler.kube.snapshot import Unread
from scheduler.kubectl import explain as explaining
from tests.helpers import config
from tests.replay.test_volume_binding import WFFC, claim, claimer, nodes, storage_class, volume

OBJECTS = [*nodes("a", "b"), volume("nvme-b", "b"), claim("data", "nvme-b"), claimer("train", "data"),
           claimer("lost", "nope")]


def test_the_dry_run_names_volume_bindings_reason_per_node() -> None:
    result = explaining.explain(OBJECTS, "default/train", config(), [], 0.0)
    assert result is not None and result.dry_run is not None and result.dry_run.node == "b"
    text = explaining.render(result, 0.0)
    assert "a      node(s) didn't satisfy plugin(s) [VolumeBinding]" in text, text
    lost = explaining.explain(OBJECTS, "default/lost", config(), [], 0.0)
    assert lost is not None
    assert 'persistentvolumeclaim "nope" not found' in explaining.render(lost, 0.0)


def test_claims_that_cannot_be_read_give_no_verdict_and_say_why() -> None:
    why = "denied (HTTP 403): needs list on persistentvolumeclaims"
    listed = [obj for obj in OBJECTS if obj["kind"] != "PersistentVolumeClaim"]
    result = explaining.explain(listed, "default/lost", config(), [], 0.0, unread={CLAIMS.label: Unread(CLAIMS, why)})
    assert result is not None and result.dry_run is not None and result.dry_run.unknown
    text = explaining.render(result, 0.0)
    assert ("it names PersistentVolumeClaims and persistentvolumeclaims cannot be read, so whether VolumeBinding "
            f"lets it on a node is not known (persistentvolumeclaims: {why})") in text, text
    assert "not found" not in text


def test_a_nodes_volume_reasons_are_in_upstreams_order() -> None:
    """FindPodVolumes appends the bound claims' node conflict before the unbound claims' bind
    conflict, and a node's row names its first reason (the summary line sorts them)."""
    objects = [*nodes("a", zone=True), storage_class("local", WFFC), volume("pv-z", "z-b", key="zone"),
               claim("first", "pv-z"), claim("u", storage_class="local"), claimer("train", "first", "u")]
    result = explaining.explain(objects, "default/train", config(), [], 0.0)
    assert result is not None
    text = explaining.render(result, 0.0)
    assert "a      node(s) had volume node affinity conflict\n" in text, text
