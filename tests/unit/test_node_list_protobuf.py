"""The protobuf Node LIST decoder, and the lean informer that asks for it (against a fake HTTP
layer; tests/e2e/test_node_list_protobuf.py compares it with the JSON on a real apiserver)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import pytest

from scheduler.kube.http import KubeHttp, Response
from scheduler.kube.informers import NODES, PODS, Informer
from scheduler.kube.kubeproto import nodes_pb2
from scheduler.kube.kubeproto.node_list import ACCEPT, PROTOBUF, decode_node_list
from tests.unit.test_informer_relist import FakeHttp, FakeStream, Recorder, page, pod, run_until


def _node(name: str, **kwargs: Any) -> nodes_pb2.Node:
    node = nodes_pb2.Node()
    node.metadata.name, node.metadata.uid, node.metadata.resourceVersion = name, f"uid-{name}", "7"
    node.metadata.creationTimestamp.seconds = 1_780_000_000
    for key, value in kwargs.get("labels", {}).items():
        node.metadata.labels[key] = value
    for key, value in kwargs.get("allocatable", {}).items():
        node.status.allocatable[key].string = value
    for key, value, effect in kwargs.get("taints", ()):
        node.spec.taints.add(key=key, value=value, effect=effect)
    node.spec.unschedulable = kwargs.get("unschedulable", False)
    if kwargs.get("deleting"):
        node.metadata.deletionTimestamp.seconds = 1_780_000_060
    return node


def _body(*nodes: nodes_pb2.Node, cont: str = "", kind: str = "NodeList", encoding: str = "") -> bytes:
    listed = nodes_pb2.NodeList(items=nodes)
    listed.metadata.resourceVersion = "42"
    setattr(listed.metadata, "continue", cont)
    envelope = nodes_pb2.Unknown(raw=listed.SerializeToString(), contentEncoding=encoding)
    envelope.typeMeta.apiVersion, envelope.typeMeta.kind = "v1", kind
    return b"k8s\x00" + envelope.SerializeToString()


def test_a_page_decodes_to_the_fields_parse_node_reads() -> None:
    doc = decode_node_list(_body(
        _node("a", labels={"model": "V100"}, allocatable={"cpu": "64", "nvidia.com/gpu": "8"},
              taints=[("gpu", "broken", "NoSchedule"), ("spot", "", "PreferNoSchedule")], unschedulable=True),
        _node("b", deleting=True), cont="token-2"))
    assert doc["metadata"] == {"resourceVersion": "42", "continue": "token-2"}
    a, b = doc["items"]
    assert a == {"kind": "Node", "apiVersion": "v1",
                 "metadata": {"name": "a", "uid": "uid-a", "resourceVersion": "7", "labels": {"model": "V100"},
                              "creationTimestamp": "2026-05-28T20:26:40Z"},
                 "spec": {"unschedulable": True, "taints": [{"key": "gpu", "value": "broken", "effect": "NoSchedule"},
                                                            {"key": "spot", "value": "", "effect": "PreferNoSchedule"}]},
                 "status": {"allocatable": {"cpu": "64", "nvidia.com/gpu": "8"}}}
    assert b["metadata"]["deletionTimestamp"] == "2026-05-28T20:27:40Z" and b["spec"] == {}
    assert decode_node_list(_body())["metadata"] == {"resourceVersion": "42"}  # the last page: no continue


@pytest.mark.parametrize(("body", "message"), [
    (b'{"kind":"NodeList"}', "does not start with the k8s envelope"),
    (b"k8s\x00\xff\xff\xff", "protobuf Node list: "),
    (_body(kind="PodList"), "got a PodList"),
    (_body(encoding="gzip"), "unsupported content encoding 'gzip'"),
])
def test_anything_else_is_a_value_error(body: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        decode_node_list(body)


class AcceptRecordingHttp(FakeHttp):
    def __init__(self, lists: Sequence[Response | BaseException]) -> None:
        super().__init__(lists, [FakeStream()])
        self.accepts: list[str] = []

    async def request(self, method: str, path: str, **kwargs: Any) -> Response:
        self.accepts.append(kwargs.get("accept", "application/json"))
        return await super().request(method, path, **kwargs)


def _informer(lists: Sequence[Response | BaseException], lean: bool, kind: Any = NODES) -> tuple[Informer, AcceptRecordingHttp, Recorder]:
    http = AcceptRecordingHttp(lists)
    sink = Recorder()
    return Informer(cast(KubeHttp, http), kind, sink, lean_lists=lean), http, sink


async def test_a_lean_informer_asks_for_protobuf_and_decodes_what_it_gets() -> None:
    informer, http, sink = _informer([Response(200, _body(_node("a"), cont="next"), PROTOBUF),
                                      Response(200, _body(_node("b")), PROTOBUF)], lean=True)
    await run_until(informer, lambda: informer.synced.is_set())
    assert http.accepts == [ACCEPT, ACCEPT]
    assert [(t, o["metadata"]["name"]) for t, o in sink.events] == [("ADDED", "a"), ("ADDED", "b")]
    assert informer.resource_version == "42"


async def test_a_server_that_answers_json_is_read_as_json() -> None:
    json_page = page([{"metadata": {"name": "a", "uid": "uid-a", "resourceVersion": "3"}}], "9")
    informer, http, sink = _informer([json_page], lean=True)
    await run_until(informer, lambda: informer.synced.is_set())
    assert http.accepts == [ACCEPT] and [o["metadata"]["name"] for _, o in sink.events] == ["a"]


async def test_record_and_kinds_without_a_decoder_list_json() -> None:
    informer, http, _ = _informer([page([pod("p", "1")], "2")], lean=True, kind=PODS)
    await run_until(informer, lambda: informer.synced.is_set())
    informer, http2, _ = _informer([page([], "2")], lean=False)
    await run_until(informer, lambda: informer.synced.is_set())
    assert http.accepts == http2.accepts == ["application/json"]


async def test_an_undecodable_protobuf_page_is_retried() -> None:
    informer, http, sink = _informer([Response(200, b"k8s\x00\xff", PROTOBUF),
                                      Response(200, _body(_node("a")), PROTOBUF)], lean=True)
    await run_until(informer, lambda: informer.synced.is_set())
    assert informer.stats.errors == 1 and [o["metadata"]["name"] for _, o in sink.events] == ["a"]
