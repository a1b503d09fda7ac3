"""`kubectl tessera` for a researcher with rights in one namespace only (`edit`), against the fake
apiserver HTTP layer (tests/fakeapi.py): a list denied cluster-wide falls back to the namespace
the command is about, a kind that cannot be read at all is said with the permission and the
shipped role that grants it, and no dry run reads an unread kind as absent (a trial: explain said
"PodGroup ml-alice/big does not exist" and "no ResourceClass provides class.tessera.dev/v100-32g"
where the admin saw the gang's 40 GPUs against the cluster's 32, and the class)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.api.quantity import parse_quantity
from scheduler.core import annotations as ann

from scheduler.core.objects import PODGROUP_LABEL
from scheduler.kube.http import KubeHttp
from scheduler.kube.informers import (DISRUPTION_BUDGETS, EXTENDED_RESOURCES, NODES, POD_GROUPS, PODS,
                                      PRIORITY_CLASSES, RESOURCE_CLASSES, SCHEDULER_KINDS, WORKLOAD_POD_GROUPS)
from scheduler.kube.snapshot import ClusterListing, ListError, list_cluster, object_events
from scheduler.kubectl import explain as explaining
from scheduler.kubectl import whatif
from scheduler.kubectl.unread import nodes_view, podgroup_unread_message, without_absent_podgroups
from scheduler.view.listed import listed_view
from scheduler.view.model import as_dict
from scheduler.view.text import render_nodes
from scheduler.sim import builders as b
from tests.fakeapi import Call, FakeApi, _status
from tests.helpers import BINPACK, config

NS = "ml-alice"
CLASS = "class.tessera.dev/v100-32g"


def _cluster() -> FakeApi:
    """4 nodes of 8 V100s (32 GPUs), a class over them; in ml-alice the gang `big` (5 members of
    8 GPUs: 40) and a pod asking for the class; in ml-bob a gang of its own."""
    api = FakeApi()
    nodes = [b.node(f"n{i}", gpus=8) for i in range(4)]
    devices = [b.device(f"n{i}", k) for i in range(4) for k in range(8)]
    api.lists = {
        NODES.path: nodes, EXTENDED_RESOURCES.path: devices,
        RESOURCE_CLASSES.path: [b.resource_class("v100-32g", {"model": "V100"})],
        POD_GROUPS.path: [b.podgroup("big", 5, NS), b.podgroup("other", 1, "ml-bob")],
    }
    for i in range(5):
        api.add_pod(b.pod(f"big-{i}", NS, limits={"nvidia.com/gpu": 8}, labels={PODGROUP_LABEL: "big"}))
    api.add_pod(b.pod("classy", NS, limits={CLASS: 1}))
    api.add_pod(b.pod("other-0", "ml-bob", limits={"nvidia.com/gpu": 1}, labels={PODGROUP_LABEL: "other"}))
    return api


def _deny(api: FakeApi, *paths: str) -> None:
    """RBAC for a user with `edit` in NS: the cluster-wide lists of `paths` answer 403 as the
    authorizer does; the same kinds in NS are answered (from the cluster-wide items)."""
    def answer(call: Call) -> object:
        for path in paths:
            kind = next(k for k in SCHEDULER_KINDS if k.path == path)
            prefix, _, plural = path.rpartition("/")
            if call.path == path:
                return _status(403, f'{plural} is forbidden: User "system:serviceaccount:{NS}:alice" cannot list '
                                    f'resource "{plural}" in API group "" at the cluster scope', "Forbidden")
            if call.path == f"{prefix}/namespaces/{NS}/{plural}" and kind.label in ("PodGroup", "Pod"):
                items = [o for o in api.lists.get(path, []) if o["metadata"].get("namespace") == NS]
                return api._list(items)
        return None
    api.handlers.append(answer)  # type: ignore[arg-type]


async def _list(api: FakeApi, namespaces: tuple[str, ...] = (NS,)) -> ClusterListing:
    return await list_cluster(KubeHttp(api), namespaces=namespaces)  # type: ignore[arg-type]


async def test_podgroups_denied_cluster_wide_are_read_in_the_pods_namespace() -> None:
    api = _cluster()
    _deny(api, POD_GROUPS.path)
    listing = await _list(api)
    assert sorted(o["metadata"]["name"] for o in listing.objects if o["kind"] == "PodGroup") == ["big"]
    assert [c.path for c in api.of("GET", "x-k8s.io")] == [POD_GROUPS.path,
                                                           f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{NS}/podgroups"]
    assert listing.warnings == [
        "podgroups.scheduling.x-k8s.io: cannot be read: denied (HTTP 403): needs list on "
        "podgroups.scheduling.x-k8s.io in all namespaces: ask for the ClusterRole tessera-explainer (bound with a "
        "ClusterRoleBinding; deploy/rbac/user-roles.yaml); read in namespace ml-alice only; in the others gangs "
        "cannot be judged"]
    # explain: the gang's real verdict, as the admin sees it
    result = explaining.explain(listing.objects, f"{NS}/big-0", config(BINPACK), [], 0.0, listing.unread)
    assert result is not None and result.dry_run is not None and not result.dry_run.unknown
    assert not result.missing_podgroup
    assert "5 members ask for 40 nvidia.com/gpu" in result.beyond_the_cluster
    # another namespace's gang cannot be judged: said, not "not found"
    other = explaining.explain(listing.objects, "ml-bob/other-0", config(BINPACK), [], 0.0, listing.unread)
    assert other is not None and other.dry_run is not None and other.dry_run.unknown and not other.missing_podgroup
    text = explaining.render(other, 0.0)
    assert ("cannot tell: its PodGroup ml-bob/other cannot be read (podgroups.scheduling.x-k8s.io: denied (HTTP "
            "403): needs list on podgroups.scheduling.x-k8s.io in all namespaces: ask for the ClusterRole "
            "tessera-explainer") in text
    assert "not found" not in text and "does not exist" not in text


async def test_podgroups_unreadable_even_in_the_namespace_give_no_verdict_of_absence() -> None:
    api = _cluster()
    _deny(api, POD_GROUPS.path)
    api.handlers.insert(0, lambda call: _status(403, "forbidden", "Forbidden") if "/namespaces/" in call.path
                        and call.path.endswith("/podgroups") else None)
    listing = await _list(api)
    assert listing.unread[POD_GROUPS.label].namespaces == frozenset()
    assert listing.warnings[0].endswith("ClusterRoleBinding; deploy/rbac/user-roles.yaml); their gangs cannot be judged")
    result = explaining.explain(listing.objects, f"{NS}/big-0", config(BINPACK), [], 0.0, listing.unread)
    assert result is not None
    text = explaining.render(result, 0.0)
    assert "cannot tell: its PodGroup ml-alice/big cannot be read" in text
    assert "does not exist" not in text and "not found" not in text and "would stay pending" not in text
    replayed = whatif.what_if(listing.objects, config(BINPACK), 0.0, NS, unread=listing.unread)
    assert {o.pod: o.unknown for o in replayed.outcomes} == {**{f"{NS}/big-{i}": True for i in range(5)},
                                                            f"{NS}/classy": False}
    table = whatif.render(replayed)
    assert "podgroup" not in table.replace("its PodGroup", "").lower().replace("podgroups.scheduling", "")
    assert "6 pending pods: 1 would be placed, 0 would stay pending, 5 cannot tell (see RESULT)" in table


async def test_resource_classes_denied_say_so_instead_of_no_class_provides_it() -> None:
    api = _cluster()
    _deny(api, RESOURCE_CLASSES.path)
    listing = await _list(api)
    assert listing.warnings == [
        "resourceclasses.tessera.dev: cannot be read: denied (HTTP 403): needs list on resourceclasses.tessera.dev "
        "(cluster-scoped): ask for the ClusterRole tessera-inventory-reader or tessera-explainer (bound with a "
        "ClusterRoleBinding; deploy/rbac/user-roles.yaml); requests of ResourceClasses cannot be judged"]
    result = explaining.explain(listing.objects, f"{NS}/classy", config(BINPACK), [], 0.0, listing.unread)
    assert result is not None
    text = explaining.render(result, 0.0)
    assert (f"cannot tell: it asks for {CLASS} and ResourceClasses cannot be read, so whether a class provides it "
            "is not known (resourceclasses.tessera.dev: denied (HTTP 403)") in text
    assert "no ResourceClass" not in text and "no valid ResourceClass" not in text
    # a plain count keeps its verdict: nothing it depends on is unread
    plain = explaining.explain(listing.objects, f"{NS}/big-0", config(BINPACK), [], 0.0, listing.unread)
    assert plain is not None and plain.dry_run is not None and not plain.dry_run.unknown
    replayed = whatif.what_if(listing.objects, config(BINPACK), 0.0, NS, unread=listing.unread)
    classy = next(o for o in replayed.outcomes if o.pod == f"{NS}/classy")
    assert classy.unknown and "no ResourceClass" not in whatif.render(replayed)
    # the admin, who reads the classes, gets the verdict
    admin = await _list(_cluster())
    assert admin.unread == {} and admin.warnings == []
    placed = explaining.explain(admin.objects, f"{NS}/classy", config(BINPACK), [], 0.0, admin.unread)
    assert placed is not None and placed.dry_run is not None and placed.dry_run.node


async def test_extended_resources_denied_leave_plain_counts_and_say_what_cannot_be_told() -> None:
    api = _cluster()
    api.add_pod(b.pod("sliced", NS, limits={"tessera.dev/gpu-slice": 1}))
    _deny(api, EXTENDED_RESOURCES.path)
    listing = await _list(api)
    assert listing.warnings == [
        "extendedresources.tessera.dev: cannot be read: denied (HTTP 403): needs list on "
        "extendedresources.tessera.dev (cluster-scoped): ask for the ClusterRole tessera-inventory-reader or "
        "tessera-explainer (bound with a ClusterRoleBinding; deploy/rbac/user-roles.yaml); GPUs show by the "
        "nodes' count, without their devices, health or slices; a GPU a pod's annotations name shows in use as they "
        "say, its model and memory unknown; a node that counts no nvidia.com/gpu (the node agent's) shows only the "
        "GPUs pods hold"]
    result = explaining.explain(listing.objects, f"{NS}/sliced", config(BINPACK), [], 0.0, listing.unread)
    assert result is not None and result.dry_run is not None and result.dry_run.unknown
    assert not result.unadvertised  # not "no node advertises it": devices may
    assert "and ExtendedResources cannot be read, so which devices serve it is not known" in result.dry_run.message


async def test_a_class_request_gives_no_verdict_while_extended_resources_cannot_be_read() -> None:
    """A review: with ResourceClasses readable and ExtendedResources not (denied, or an apiserver
    error or timeout on a large cluster), a class pod read 'ResourceClass v100-32g matches no device
    in the cluster' and 'would stay pending': a class serves only the devices it matches."""
    for denied in (True, False):
        api = _cluster()
        if denied:
            _deny(api, EXTENDED_RESOURCES.path)
        else:
            api.handlers.insert(0, lambda call: _status(500, "etcdserver: request timed out", "InternalError")
                                if call.path == EXTENDED_RESOURCES.path else None)
        listing = await _list(api)
        assert EXTENDED_RESOURCES.label in listing.unread
        result = explaining.explain(listing.objects, f"{NS}/classy", config(BINPACK), [], 0.0, listing.unread)
        assert result is not None and result.dry_run is not None and result.dry_run.unknown, result
        text = explaining.render(result, 0.0)
        assert f"cannot tell: it asks for {CLASS} and ExtendedResources cannot be read" in text, text
        assert "matches no device" not in text and "would stay pending" not in text, text
        replayed = whatif.what_if(listing.objects, config(BINPACK), 0.0, NS, unread=listing.unread)
        assert next(o for o in replayed.outcomes if o.pod == f"{NS}/classy").unknown


async def test_a_class_of_its_own_resource_name_gives_no_verdict_while_classes_cannot_be_read() -> None:
    """A review: the agent advertises a class's resourceName on its nodes, so a name the nodes
    advertise may be a class's (`gpu.example.com/v100`): with ResourceClasses unread it was judged
    as a plain count of the nodes' allocatable. Only a name devices count under is known to be no
    class's."""
    api = FakeApi()
    nodes = [b.node(f"n{i}", gpus=2, extra={"gpu.example.com/v100": "2"}) for i in range(2)]
    devices = [b.device(f"n{i}", k, model="V100") for i in range(2) for k in range(2)]
    api.lists = {NODES.path: nodes, EXTENDED_RESOURCES.path: devices,
                 RESOURCE_CLASSES.path: [b.resource_class("v100", {"model": "V100"},
                                                          resource_name="gpu.example.com/v100")]}
    api.add_pod(b.pod("want", NS, limits={"gpu.example.com/v100": 1}))
    api.add_pod(b.pod("plain", NS, limits={"nvidia.com/gpu": 1}))
    _deny(api, RESOURCE_CLASSES.path)
    listing = await _list(api)
    want = explaining.explain(listing.objects, f"{NS}/want", config(BINPACK), [], 0.0, listing.unread)
    assert want is not None and want.dry_run is not None and want.dry_run.unknown, want
    assert "it asks for gpu.example.com/v100 and ResourceClasses cannot be read" in want.dry_run.message
    plain = explaining.explain(listing.objects, f"{NS}/plain", config(BINPACK), [], 0.0, listing.unread)
    assert plain is not None and plain.dry_run is not None and not plain.dry_run.unknown, plain


async def test_preemption_kinds_denied_are_said_not_silently_left_out() -> None:
    api = _cluster()
    _deny(api, PRIORITY_CLASSES.path, DISRUPTION_BUDGETS.path)
    listing = await _list(api)
    assert [w.split(":")[0] for w in listing.warnings] == ["poddisruptionbudgets.policy",
                                                           "priorityclasses.scheduling.k8s.io"]
    assert "needs list on priorityclasses.scheduling.k8s.io (cluster-scoped): ask for the ClusterRole " \
           "tessera-explainer" in listing.warnings[1]


async def test_nodes_or_pods_denied_say_what_to_ask_for() -> None:
    for kind in (NODES, PODS):
        api = _cluster()
        _deny(api, kind.path)
        with pytest.raises(ListError) as caught:
            await _list(api)
        plural = kind.path.rsplit("/", 1)[-1]
        assert str(caught.value).startswith(f"cannot list {plural}: the apiserver at https://fake-apiserver denied "
                                            f"access (HTTP 403): {plural} is forbidden: User ")
        scope = "in all namespaces" if kind is PODS else "(cluster-scoped)"
        assert str(caught.value).endswith(
            "; kubectl tessera reads every node and every namespace's pods (a GPU another namespace's pod holds is "
            f"not free): needs list on {plural} {scope}: ask for the ClusterRole tessera-explainer (bound with a "
            "ClusterRoleBinding; deploy/rbac/user-roles.yaml)")


async def test_a_workload_api_podgroup_kind_not_served_is_no_warning() -> None:
    listing = await _list(_cluster())  # the fake serves no scheduling.k8s.io PodGroups (404)
    assert WORKLOAD_POD_GROUPS.label not in listing.unread and listing.warnings == []


def _core_event(pod: str, reason: str, message: str) -> dict[str, object]:
    return {"metadata": {"name": f"{pod}.1", "namespace": NS}, "involvedObject": {"kind": "Pod", "name": pod},
            "reason": reason, "message": message, "type": "Warning", "count": 3,
            "lastTimestamp": "2026-01-01T00:00:05Z", "source": {"component": "tessera"}}


async def test_events_denied_in_events_k8s_io_are_read_from_the_core_api_or_said_unreadable() -> None:
    """`edit` grants the core API's Events only: explain said `Events: <none>` for a pod with
    FailedScheduling Events."""
    api = _cluster()
    api.handlers.insert(0, lambda call: _status(403, "forbidden", "Forbidden") if "events.k8s.io" in call.path else
                        api._list([_core_event("classy", "FailedScheduling", "0/4 nodes are available")])
                        if call.path == f"/api/v1/namespaces/{NS}/events" else None)
    events = await object_events(KubeHttp(api), NS, "classy")  # type: ignore[arg-type]
    assert isinstance(events, list)
    assert [explaining._event(e) for e in events] == [explaining.EventLine(
        "2026-01-01T00:00:05Z", "Warning", "FailedScheduling", 3, "tessera", "0/4 nodes are available")]
    api.handlers.insert(0, lambda call: _status(403, "forbidden", "Forbidden") if "events" in call.path else None)
    why = await object_events(KubeHttp(api), NS, "classy")  # type: ignore[arg-type]
    assert why == (f"denied (HTTP 403): needs list on events.events.k8s.io or events in namespace {NS} (the "
                   "built-in view, edit and admin roles grant events)")
    listing = await _list(_cluster())
    result = explaining.explain(listing.objects, f"{NS}/classy", config(BINPACK), [], 0.0, listing.unread,
                                events_unread=why)
    assert result is not None
    assert explaining.render(result, 0.0).endswith(f"Events: cannot be read: {why}")


async def test_nodes_json_gangs_of_unread_namespaces_say_their_podgroup_cannot_be_read() -> None:
    """`nodes -o json` listed ml-bob's gang with the core's `podgroup "ml-bob/other" not found`."""
    api = _cluster()
    _deny(api, POD_GROUPS.path)
    listing = await _list(api)
    view = without_absent_podgroups(listed_view(config(BINPACK), listing.objects, 0.0), listing.objects,
                                    listing.unread)
    gangs = {gang.gang: gang.message for gang in view.gangs}
    assert gangs["ml-bob/other"].startswith("its PodGroup ml-bob/other cannot be read (podgroups.scheduling.x-k8s.io: "
                                            "denied (HTTP 403): needs list on podgroups.scheduling.x-k8s.io in all "
                                            "namespaces")
    assert gangs[f"{NS}/big"].startswith("Its gang can never fit as the cluster is: its 5 members ask for 40")


async def test_an_unread_podgroup_is_said_in_one_form_everywhere() -> None:
    """explain's gang line said `its PodGroup cannot be read (podgroups.scheduling.x-k8s.io)`, its
    dry run `its PodGroup ml-bob/other cannot be read (...: why)`, `nodes -o json` a third form:
    one sentence (`podgroup_unread_message`), the same in each."""
    api = _cluster()
    _deny(api, POD_GROUPS.path)
    listing = await _list(api)
    said = podgroup_unread_message("ml-bob/other", listing.unread[POD_GROUPS.label])
    assert said == ("its PodGroup ml-bob/other cannot be read (podgroups.scheduling.x-k8s.io: denied (HTTP 403): "
                    "needs list on podgroups.scheduling.x-k8s.io in all namespaces: ask for the ClusterRole "
                    "tessera-explainer (bound with a ClusterRoleBinding; deploy/rbac/user-roles.yaml))")
    other = explaining.explain(listing.objects, "ml-bob/other-0", config(BINPACK), [], 0.0, listing.unread)
    assert other is not None and other.gang is not None and other.dry_run is not None
    assert other.gang.message == said
    assert other.dry_run.message == said
    text = explaining.render(other, 0.0)
    assert text.count(said) == 2 and "cannot be read (podgroups.scheduling.x-k8s.io)" not in text
    replayed = whatif.what_if(listing.objects, config(BINPACK), 0.0, "ml-bob", unread=listing.unread)
    assert [o.message for o in replayed.outcomes if o.pod == "ml-bob/other-0"] == [said]
    gangs = {gang.gang: gang.message for gang in nodes_view(config(BINPACK), listing.objects, 0.0,
                                                             listing.unread).gangs}
    assert gangs["ml-bob/other"] == said


def _held_by_annotations() -> FakeApi:
    """n0: 4 V100s (nvidia.com/gpu: 4); ml/cls holds two whole by its class, ml/sl a 4Gi slice of
    the third, ml/plain one by plain count; ml/wait asks for one more by count."""
    api = FakeApi()
    devices = [b.device("n0", i) for i in range(4)]

    def grant(device: dict[str, Any], amount: str | None = None) -> ann.DeviceGrant:
        return ann.DeviceGrant(device["spec"]["deviceID"], device["metadata"]["name"],
                               None if amount is None else parse_quantity(amount), "memory" if amount else "",
                               "nvidia.com/gpu")

    def holding(name: str, resource: str, grants: tuple[ann.DeviceGrant, ...]) -> dict[str, Any]:
        return b.pod(name, "ml", node_name="n0", phase="Running", limits={resource: len(grants)},
                     annotations={ann.DEVICES: ann.encode_devices({"main": {resource: grants}})})

    api.lists = {NODES.path: [b.node("n0", gpus=4)], EXTENDED_RESOURCES.path: devices,
                 RESOURCE_CLASSES.path: [b.resource_class("v100", {"model": "V100"}),
                                         b.resource_class("slice", {"model": "V100"},
                                                          sharing={"dimension": "memory", "unit": "4Gi"})]}
    api.add_pod(holding("cls", "class.tessera.dev/v100", (grant(devices[0]), grant(devices[1]))))
    api.add_pod(holding("sl", "class.tessera.dev/slice", (grant(devices[2], "4Gi"),)))
    api.add_pod(b.pod("plain", "ml", node_name="n0", phase="Running", limits={"nvidia.com/gpu": 1}))
    api.add_pod(b.pod("wait", "ml", limits={"nvidia.com/gpu": 1}))
    return api


async def test_gpus_pods_annotations_name_are_in_use_not_ghosts_while_extended_resources_cannot_be_read() -> None:
    """A trial: a user who may list nodes and pods but not ExtendedResources read the class pod's
    GPUs as `ghost ... no ExtendedResource describes it any more, still held by ml/cls` and the
    summary `0 in use ... 2 unavailable (2 of them still held by pods)`: the objects exist, the user
    cannot read them. The GPUs are in use as the annotations say (whole, or slices), their memory
    unknown, their model the one their holders' classes select; the summary counts them as the
    admin's does."""
    admin = await _list(_held_by_annotations())
    assert admin.unread == {}
    seen = listed_view(config(BINPACK), admin.objects, 0.0)
    api = _held_by_annotations()
    _deny(api, EXTENDED_RESOURCES.path)
    listing = await _list(api)
    assert EXTENDED_RESOURCES.label in listing.unread
    assert "ghost" not in listing.warnings[0]
    view = nodes_view(config(BINPACK), listing.objects, 0.0, listing.unread)
    [node] = view.nodes
    assert sorted((gpu.state, tuple(h.pod for h in gpu.holders), gpu.model, gpu.memory, gpu.reason)
                  for gpu in node.gpus) == [
        ("counted", ("ml/plain",), "", "", ""),
        ("slices", ("ml/sl",), "V100", "", ""),
        ("whole", ("ml/cls",), "V100", "", ""),
        ("whole", ("ml/cls",), "V100", "", "")]
    assert next(gpu.used for gpu in node.gpus if gpu.state == "slices") == "4Gi/?"  # its capacity is unknown
    assert (node.gpus_used, node.gpus_free, node.gpus_unavailable, node.gpus_total) == (4, 0, 0, 4)
    assert view.summary == seen.summary
    assert view.summary.line().startswith("GPUs: 4 total, 4 in use (1 shared), 0 free, 0 unavailable")
    for text in (render_nodes(view), str(as_dict(view))):
        assert "ghost" not in text and "no ExtendedResource" not in text and "unavailable (" not in text, text
    # explain's lines and what-if's summaries read the same cluster
    for key in ("ml/cls", "ml/sl", "ml/wait"):
        result = explaining.explain(listing.objects, key, config(BINPACK), [], 0.0, listing.unread)
        assert result is not None
        text = explaining.render(result, 0.0) + str(explaining.as_dict(result))
        assert "ghost" not in text and "no ExtendedResource" not in text and "unhealthy" not in text, text
    replayed = whatif.what_if(listing.objects, config(BINPACK), 0.0, "ml", unread=listing.unread)
    admin_replayed = whatif.what_if(admin.objects, config(BINPACK), 0.0, "ml", unread=admin.unread)
    assert (replayed.before, replayed.after) == (admin_replayed.before, admin_replayed.after)
    assert "ghost" not in whatif.render(replayed)


def test_a_kind_read_in_some_namespaces_says_what_the_others_lack_in_its_own_words() -> None:
    """The namespace-only warning is built from its parts (`_OF_THE_OTHERS`), not by replacing
    "their"/"them" in the whole one: a replacement would also have taken the "their" of "without
    their devices" out of a sentence that does not name the kind's objects."""
    from scheduler.kube.snapshot import Unread, _warning

    def said(kind: Any, namespaces: frozenset[str] = frozenset()) -> str:
        return _warning(Unread(kind, "WHY", namespaces)).partition("WHY; ")[2]

    assert said(DISRUPTION_BUDGETS) == "the dry runs' preemption does not see them"
    assert said(DISRUPTION_BUDGETS, frozenset({"b", "a"})) == (
        "read in namespace a, b only; in the others the dry runs' preemption does not see those")
    assert said(WORKLOAD_POD_GROUPS) == "their gangs cannot be judged"
    assert said(WORKLOAD_POD_GROUPS, frozenset({NS})) == f"read in namespace {NS} only; in the others gangs cannot be judged"
    assert said(PRIORITY_CLASSES) == "the dry runs' gang priorities and preemption do not see them"
    assert said(EXTENDED_RESOURCES).startswith("GPUs show by the nodes' count, without their devices, health or slices")
    assert said(EXTENDED_RESOURCES, frozenset({NS})).startswith(
        f"read in namespace {NS} only; in the others GPUs show by the nodes' count, without their devices, ")
