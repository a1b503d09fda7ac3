"""The fault proxy against a tiny local HTTPS server (relaying, streaming, each fault type), and the
invariant checker against hand-made cluster states (it must see every kind of violation)."""

from __future__ import annotations

import asyncio
import gc
import json
import ssl
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web

from scheduler.api.quantity import parse_quantity
from scheduler.core import annotations as ann
from scheduler.kube.controlplane.certs import CertificateAuthority
from scheduler.kube.http import KubeHttp, connect
from tessera_testing.faultproxy import (
    BIND_500_AFTER,
    BIND_500_BEFORE,
    BIND_HANG_AFTER,
    BIND_HELD,
    CUT_CONNECTION,
    CUT_WATCH,
    DELAY_REQUEST,
    DELAY_RESPONSE,
    FAULT_TYPES,
    RESET,
    STALL_WATCH,
    WATCH_410_EVENT,
    WATCH_410_STATUS,
    FaultProxy,
    FaultProxyThread,
    Faults,
)
from scheduler.sim import builders as b
from tessera_testing import invariants as inv
from tessera_testing.faultrun import no_longer_expected

BIND = "/api/v1/namespaces/ns/pods/p/binding"
WATCH = "/api/v1/pods?watch=true&resourceVersion=1"


@dataclass
class Upstream:
    """What the fake apiserver saw."""

    url: str
    ca_pem: bytes
    binds: list[dict[str, Any]] = field(default_factory=list)
    peers: list[Any] = field(default_factory=list)
    auth: list[str] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)


@pytest_asyncio.fixture
async def upstream(tmp_path: Path) -> AsyncIterator[Upstream]:
    ca = CertificateAuthority.generate("echo-ca")
    cert, key = ca.issue_serving("echo", ("127.0.0.1",), ("localhost",)).write(tmp_path, "echo")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    seen = Upstream("", ca.cert_pem)

    async def echo(request: web.Request) -> web.Response:
        seen.peers.append(request.transport.get_extra_info("peername") if request.transport else None)
        seen.auth.append(request.headers.get("Authorization", ""))
        body = await request.read()
        return web.json_response({"method": request.method, "path": request.path_qs, "length": len(body),
                                  "body": body.decode(errors="replace")[:100]})

    async def bind(request: web.Request) -> web.Response:
        seen.binds.append(await request.json())
        return web.json_response({"kind": "Status", "status": "Success", "code": 201}, status=201)

    async def pods(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            return web.json_response({"kind": "PodList", "items": [], "metadata": {"resourceVersion": "1"}})
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        for i in range(int(request.query.get("events", "1000"))):
            event = {"type": "ADDED", "object": {"kind": "Pod", "metadata": {"name": f"p{i}", "resourceVersion": str(i + 2)}}}
            await response.write(json.dumps(event).encode() + b"\n")
            await asyncio.sleep(0.05)
        await response.write_eof()
        return response

    async def delete_pod(request: web.Request) -> web.Response:
        seen.deletes.append(request.path)
        return web.json_response({"kind": "Pod", "metadata": {"name": request.match_info["name"]}})

    async def version(request: web.Request) -> web.Response:
        seen.auth.append(request.headers.get("Authorization", ""))
        return web.json_response({"gitVersion": "v0.0.0-echo"})

    app = web.Application(client_max_size=8 << 20)
    app.router.add_post(BIND, bind)
    app.router.add_get("/api/v1/pods", pods)
    app.router.add_get("/version", version)
    app.router.add_delete("/api/v1/namespaces/{namespace}/pods/{name}", delete_pod)
    app.router.add_route("*", "/echo", echo)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    seen.url = f"https://127.0.0.1:{port}"
    yield seen
    await runner.cleanup()


@pytest_asyncio.fixture
async def proxy(upstream: Upstream) -> AsyncIterator[FaultProxy]:
    async with FaultProxy(upstream.url, upstream.ca_pem, seed=7) as running:
        yield running


def _session(proxy: FaultProxy | FaultProxyThread, *, limit: int = 10, timeout: float = 10) -> aiohttp.ClientSession:
    context = ssl.create_default_context(cadata=proxy.proxy.ca_pem.decode() if isinstance(proxy, FaultProxyThread)
                                         else proxy.ca_pem.decode())
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context, limit=limit),
                                 timeout=aiohttp.ClientTimeout(total=timeout), trust_env=False)


async def test_relays_requests_bodies_and_keeps_connections_alive(proxy: FaultProxy, upstream: Upstream) -> None:
    async with _session(proxy, limit=1) as session:
        for i in range(3):
            async with session.get(f"{proxy.url}/echo?i={i}", headers={"Authorization": "Bearer t0k"}) as response:
                assert response.status == 200
                assert (await response.json())["path"] == f"/echo?i={i}"
        big = b"x" * (1 << 20)
        async with session.post(f"{proxy.url}/echo", data=big) as response:
            assert (await response.json())["length"] == len(big)

        async def chunks() -> AsyncIterator[bytes]:
            for part in (b"hello ", b"chunked ", b"world"):
                yield part

        async with session.put(f"{proxy.url}/echo", data=chunks()) as response:  # Transfer-Encoding: chunked
            got = await response.json()
            assert (got["method"], got["body"]) == ("PUT", "hello chunked world")
    assert upstream.auth[:3] == ["Bearer t0k"] * 3
    assert len(set(map(str, upstream.peers))) == 1  # one client connection -> one upstream connection
    assert proxy.requests == proxy.forwarded == 5
    assert sum(proxy.counts.values()) == 0 and set(proxy.counts) == set(FAULT_TYPES)
    assert proxy.errors == 0, proxy.last_error


async def test_watch_streams_event_by_event(proxy: FaultProxy) -> None:
    async with _session(proxy) as session:
        async with session.get(f"{proxy.url}{WATCH}&events=5") as response:
            first = await response.content.readline()
            got_first = time.monotonic()
            assert json.loads(first)["object"]["metadata"]["name"] == "p0"
            rest = (await response.read()).splitlines()
            # not buffered until the stream ends: the other four events (0.05 s apart upstream)
            # still take time after the first one arrived, however slow the connection was to open
            assert time.monotonic() - got_first >= 0.15
        assert len(rest) == 4
        async with session.get(f"{proxy.url}/echo") as response:  # the connection is reusable after it
            assert response.status == 200


async def test_pod_deletes_fail_after_a_number_forwarded(proxy: FaultProxy, upstream: Upstream) -> None:
    """An evictor whose DELETEs stop part-way: the first goes through, the next ones never reach
    the apiserver; other DELETEs are not touched, and configuring again starts a new count."""
    async with _session(proxy, timeout=5) as session:
        proxy.configure(pod_deletes_before_failing=1)
        statuses = []
        for name in ("a", "b", "c"):
            async with session.delete(f"{proxy.url}/api/v1/namespaces/ns/pods/{name}") as response:
                statuses.append(response.status)
        assert statuses == [200, 500, 500]
        assert upstream.deletes == ["/api/v1/namespaces/ns/pods/a"]
        async with session.delete(f"{proxy.url}/echo") as response:
            assert response.status == 200
        proxy.configure(pod_deletes_before_failing=None)
        async with session.delete(f"{proxy.url}/api/v1/namespaces/ns/pods/b") as response:
            assert response.status == 200
    assert proxy.counts["delete_500_before"] == 2


async def test_binding_failures_before_and_after_forwarding(proxy: FaultProxy, upstream: Upstream) -> None:
    body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"name": "n1"}}
    async with _session(proxy, timeout=5) as session:
        proxy.configure(bind_fail_before=1.0)
        async with session.post(f"{proxy.url}{BIND}", json=body) as response:
            assert response.status == 500
            assert "before forwarding" in (await response.json())["message"]
        assert upstream.binds == []

        proxy.configure(bind_fail_before=0.0, bind_fail_after=1.0)
        async with session.post(f"{proxy.url}{BIND}", json=body) as response:
            assert response.status == 500
            assert "after forwarding" in (await response.json())["message"]
        assert len(upstream.binds) == 1  # the bind happened although the client saw 500

        proxy.configure(bind_fail_after=0.0, bind_hang_after=1.0, hang_seconds=0.5)
        started = time.monotonic()
        with pytest.raises(aiohttp.ClientError):
            async with session.post(f"{proxy.url}{BIND}", json=body) as response:
                await response.read()
        assert 0.4 < time.monotonic() - started < 3
        assert len(upstream.binds) == 2

        proxy.configure(bind_hang_after=0.0)
        async with session.post(f"{proxy.url}{BIND}", json=body) as response:
            assert response.status == 201
        async with session.post(f"{proxy.url}/echo", json=body) as response:  # only Bindings are hit
            assert response.status == 200
    assert len(upstream.binds) == 3
    assert proxy.bindings_forwarded == 3
    counts = proxy.counts
    assert (counts[BIND_500_BEFORE], counts[BIND_500_AFTER], counts[BIND_HANG_AFTER]) == (1, 1, 1)


async def test_held_bindings_reach_the_apiserver_only_when_released_even_after_their_client_gave_up(
        proxy: FaultProxy, upstream: Upstream) -> None:
    """`hold_bindings`: a link that stops passing the client's bytes, then heals. The client
    times out; the Binding still arrives at release (the live break of a leader's late Binding)."""
    body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"name": "n1"}}
    proxy.configure(hold_bindings=True)
    async with _session(proxy, timeout=0.5) as session:
        with pytest.raises(TimeoutError):
            async with session.post(f"{proxy.url}{BIND}", json=body) as response:
                await response.read()
        async with session.get(f"{proxy.url}/echo") as response:  # everything else passes
            assert response.status == 200
    assert proxy.bindings_held == 1 and upstream.binds == [] and proxy.counts[BIND_HELD] == 1
    proxy.configure(hold_bindings=False)
    assert proxy.release_bindings() == 1
    for _ in range(100):
        if upstream.binds:
            break
        await asyncio.sleep(0.02)
    assert upstream.binds == [body] and proxy.bindings_held == 0


async def test_a_delayed_request_of_a_client_that_gave_up_is_in_progress_until_it_reached_the_apiserver(
        proxy: FaultProxy, upstream: Upstream) -> None:
    """What the fault harness waits for before it hands out a device itself: a killed replica's
    delayed Binding is still forwarded, so it counts as in progress until it was; watches never
    count (they stay open)."""
    body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"name": "n1"}}
    proxy.configure(delay_request=1.0, delay_seconds=(0.6, 0.6))
    async with _session(proxy, timeout=0.2) as session:
        with pytest.raises(TimeoutError):
            async with session.post(f"{proxy.url}{BIND}", json=body) as response:
                await response.read()
    assert proxy.requests_in_progress == 1 and upstream.binds == []
    for _ in range(100):
        if proxy.requests_in_progress == 0:
            break
        await asyncio.sleep(0.02)
    assert proxy.requests_in_progress == 0 and upstream.binds == [body]
    proxy.configure(delay_request=0.0)
    async with _session(proxy) as session:
        async with session.get(f"{proxy.url}{WATCH}&events=5") as response:
            await response.content.readline()
            assert proxy.requests_in_progress == 0


async def test_watch_gone_answers_410_as_status_or_error_event(proxy: FaultProxy) -> None:
    proxy.configure(watch_gone=1.0)
    kinds = set()
    async with _session(proxy) as session:
        for _ in range(12):
            async with session.get(f"{proxy.url}{WATCH}") as response:
                if response.status == 410:
                    kinds.add("status")
                    assert (await response.json())["code"] == 410
                else:
                    assert response.status == 200
                    event = json.loads(await response.read())
                    assert (event["type"], event["object"]["code"]) == ("ERROR", 410)
                    kinds.add("event")
        async with session.get(f"{proxy.url}/api/v1/pods") as response:  # a LIST is not a watch
            assert response.status == 200
    assert kinds == {"status", "event"}
    assert proxy.counts[WATCH_410_STATUS] + proxy.counts[WATCH_410_EVENT] == 12
    assert proxy.forwarded == 1


async def test_cut_drops_watch_streams_only_when_asked(proxy: FaultProxy) -> None:
    async with _session(proxy) as session, session.get(f"{proxy.url}{WATCH}") as response:
        await response.content.readline()
        async with _session(proxy) as other:
            async with other.get(f"{proxy.url}/echo") as plain:
                assert plain.status == 200
            assert proxy.cut(watches_only=True) == 1
            with pytest.raises((aiohttp.ClientError, asyncio.TimeoutError)):
                while await asyncio.wait_for(response.content.readline(), 5):
                    pass
            async with other.get(f"{proxy.url}/echo") as plain:  # its idle connection survived
                assert plain.status == 200
            assert proxy.cut(watches_only=False) >= 1  # idle keep-alive connections too
    counts = proxy.counts
    assert counts[CUT_WATCH] == 1 and counts[CUT_CONNECTION] >= 1


async def test_stalled_watches_send_nothing_more_while_other_requests_and_new_watches_pass(proxy: FaultProxy) -> None:
    """A proxy holding watch responses (a live adversary's): the stream stays open and silent."""
    async with _session(proxy) as session, session.get(f"{proxy.url}{WATCH}") as response:
        await response.content.readline()
        assert proxy.stall_watches() == 1
        # what was already on its way may still come; then nothing, though upstream sends every 50 ms
        late = 0
        with pytest.raises(asyncio.TimeoutError):
            while True:
                await asyncio.wait_for(response.content.readline(), 1.0)
                late += 1
        assert late <= 2 and not response.content.at_eof()
        async with _session(proxy) as other:
            async with other.get(f"{proxy.url}/echo") as plain:
                assert plain.status == 200
            async with other.get(f"{proxy.url}{WATCH}&events=2") as fresh:
                assert len([line async for line in fresh.content if line.strip()]) == 2
    assert proxy.counts[STALL_WATCH] == 1


async def test_closing_mid_stream_leaves_no_orphan_relay(upstream: Upstream) -> None:
    """Soak seed 29: "Task exception was never retrieved ... _relay_body ... connection closed".
    A connection's task cancelled while it relayed a response body (proxy closed, or a cut) left
    the body-copying task running on its own; it then failed on the closed upstream, unobserved."""
    loop = asyncio.get_running_loop()
    orphans: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: orphans.append(context))
    try:
        running = FaultProxy(upstream.url, upstream.ca_pem, seed=7)
        await running.start()
        async with _session(running) as session, session.get(f"{running.url}{WATCH}") as response:
            await response.content.readline()
            await running.close()
        for _ in range(5):
            await asyncio.sleep(0.05)
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(previous)
    assert [c.get("message") for c in orphans] == []


async def test_periodic_cuts(proxy: FaultProxy) -> None:
    proxy.configure(cut_every=0.3, cut_watches_only=True)
    async with _session(proxy, timeout=10) as session:
        started = time.monotonic()
        with pytest.raises(aiohttp.ClientError):
            async with session.get(f"{proxy.url}{WATCH}") as response:
                while await response.content.readline():
                    pass
        assert time.monotonic() - started < 2
    assert proxy.counts[CUT_WATCH] >= 1


async def test_reset_and_delays(proxy: FaultProxy) -> None:
    async with _session(proxy) as session:
        proxy.configure(reset=1.0)
        with pytest.raises(aiohttp.ClientError):
            async with session.get(f"{proxy.url}/echo") as response:
                await response.read()
        proxy.configure(reset=0.0, delay_request=1.0, delay_response=1.0, delay_seconds=(0.2, 0.2))
        started = time.monotonic()
        async with session.get(f"{proxy.url}/echo") as response:
            assert response.status == 200
        assert time.monotonic() - started >= 0.4
    counts = proxy.counts
    assert counts[RESET] >= 1  # aiohttp may retry an idempotent request once
    assert (counts[DELAY_REQUEST], counts[DELAY_RESPONSE]) == (1, 1)


async def test_decisions_are_reproducible_with_a_seed(upstream: Upstream) -> None:
    async def pattern(seed: int) -> list[int]:
        async with FaultProxy(upstream.url, upstream.ca_pem, seed=seed, faults=Faults(bind_fail_before=0.5)) as p:
            async with _session(p) as session:
                out = []
                for _ in range(16):
                    async with session.post(f"{p.url}{BIND}", json={"n": 1}) as response:
                        out.append(response.status)
                return out

    first, again, other = await pattern(3), await pattern(3), await pattern(4)
    assert first == again and first != other
    assert {500, 201} <= set(first)


async def test_upstream_down_drops_the_client_instead_of_hanging(tmp_path: Path) -> None:
    ca = CertificateAuthority.generate("nobody")
    async with FaultProxy("https://127.0.0.1:1", ca.cert_pem) as p, _session(p, timeout=5) as session:
        with pytest.raises(aiohttp.ClientError):
            async with session.get(f"{p.url}/echo") as response:
                await response.read()


async def test_thread_proxy_and_kubeconfig_with_token(upstream: Upstream, tmp_path: Path) -> None:
    with FaultProxyThread(upstream.url, upstream.ca_pem, seed=1) as proxy:
        kubeconfig = proxy.write_kubeconfig(tmp_path / "kubeconfig", token="s3cret")
        api = await connect(str(kubeconfig))
        try:
            http = KubeHttp(api)
            response = await http.request("GET", "/version", limited=False)
            assert response.json()["gitVersion"] == "v0.0.0-echo"
            assert upstream.auth[-1] == "Bearer s3cret"
            proxy.configure(bind_fail_before=1.0)
            response = await http.request("POST", BIND, body={"kind": "Binding"})
            assert response.status == 500
            assert proxy.cut() >= 1
        finally:
            await api.close()
        assert proxy.counts[BIND_500_BEFORE] == 1


def test_invalid_fault_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match="bind_fail_after"):
        Faults(bind_fail_after=1.5)
    with pytest.raises(ValueError, match="delay_seconds"):
        Faults(delay_seconds=(1.0, 0.5))


# --- the invariant checker on hand-made cluster states ------------------------------------------
# (Here rather than in a file of its own: the checker is the proxy's other half, and a checker
# that cannot see a violation would make every fault scenario pass.)


def _bound(name: str, node: str, grants: dict[str, list[tuple[str, str | None]]] | None = None,
           **kwargs: Any) -> dict[str, Any]:
    annotations = {}
    if grants:
        annotations[ann.DEVICES] = ann.encode_devices({"main": {
            resource: tuple(ann.DeviceGrant(f"id-{d}", d, None if a is None else parse_quantity(a))
                            for d, a in entries) for resource, entries in grants.items()}})
    return b.pod(name, node_name=node, annotations=annotations, **kwargs)


def _view(pods: list[dict[str, Any]], nodes: list[dict[str, Any]] | None = None,
          devices: list[dict[str, Any]] | None = None, classes: list[dict[str, Any]] | None = None) -> inv.ClusterView:
    view = inv.ClusterView()
    view.pods = {p["metadata"]["uid"]: p for p in pods}
    view.nodes = {n["metadata"]["name"]: n for n in nodes or []}
    view.devices = {d["metadata"]["name"]: d for d in devices or []}
    view.classes = {c["metadata"]["name"]: c for c in classes or []}
    return view


def _device(node: str, i: int, model: str = "V100", memory: str = "32Gi") -> dict[str, Any]:
    device = b.device(node, i, model=model, memory=memory)
    device["metadata"]["name"] = f"{node}.d{i}"
    device["spec"]["deviceID"] = f"id-{node}.d{i}"
    return device


def test_checker_sees_double_allocation_mixing_and_shared_overflow() -> None:
    cls = "class.tessera.dev/v100"
    shared = b.resource_class("slice", match_labels={"model": "T4"}, sharing={"dimension": "memory", "unit": "1Gi"})
    devices = [_device("n1", 0), _device("n1", 1), _device("n1", 2, "T4", "16Gi")]
    pods = [_bound("a", "n1", {cls: [("n1.d0", None)]}), _bound("b", "n1", {cls: [("n1.d0", None)]}),
            _bound("c", "n1", {cls: [("n1.d1", None)]}),
            _bound("d", "n1", {"class.tessera.dev/slice": [("n1.d1", "4Gi")]}),
            _bound("e", "n1", {"class.tessera.dev/slice": [("n1.d2", "10Gi")]}),
            _bound("f", "n1", {"class.tessera.dev/slice": [("n1.d2", "8Gi")]}),
            _bound("g", "n2", {cls: [("n1.d2", None)]}, phase="Succeeded")]  # terminal: holds nothing
    found = inv.check_capacity(_view(pods, [b.node("n1", gpus=8)], devices, [shared]))
    details = sorted((v.subject, v.detail.split(":")[0]) for v in found)
    assert details == [("n1.d0", "exclusively assigned 2 times"), ("n1.d1", "assigned exclusively and shared at once"),
                       ("n1.d2", "shared 18Gi of memory > capacity 16Gi")], found
    assert {v.invariant for v in found} == {inv.DEVICE_CAPACITY}


def test_checker_counts_node_requests_init_containers_and_class_devices() -> None:
    cls = "class.tessera.dev/v100"
    devices = [_device("n1", i) for i in range(3)]
    node = b.node("n1", cpu="8", gpus=2, pods=10)
    fine = [_bound("class-0", "n1", {cls: [("n1.d0", None)]}, limits={cls: 1}),
            _bound("plain", "n1", limits={"nvidia.com/gpu": 1}, requests={"cpu": "2"})]
    assert inv.check_capacity(_view(fine, [node], devices)) == []
    over_gpu = [*fine, _bound("class-1", "n1", {cls: [("n1.d1", None)]}, limits={cls: 1})]
    found = inv.check_capacity(_view(over_gpu, [node], devices))
    assert [(v.invariant, v.detail.split(" (")[0]) for v in found] == [
        (inv.NODE_ALLOCATABLE, "nvidia.com/gpu: 3 used > 2 allocatable")]
    # a deleted ExtendedResource's holder still counts, through the device's last known object
    found = inv.check_capacity(_view(over_gpu, [node], devices[:1]), known_devices={"n1.d1": devices[1]})
    assert [v.invariant for v in found] == [inv.NODE_ALLOCATABLE]
    init = b.pod("init", node_name="n1", containers=[b.container("main", requests={"cpu": "1"})],
                 init_containers=[b.container("setup", requests={"cpu": "7"})])
    found = inv.check_capacity(_view([*fine, init], [node], devices))
    assert [v.detail.split(" (")[0] for v in found] == ["cpu: 9000 used > 8000 allocatable"]


def test_checker_gangs_unbound_pods_and_contradicting_events() -> None:
    labels = b.gang_labels("g", 3)
    pods = [_bound("g0", "n1", labels=labels), _bound("g1", "n1", labels=labels), b.pod("g2", labels=labels),
            b.pod("lonely"), _bound("ok", "n2")]
    pods += [b.pod(f"h{i}", labels=b.gang_labels("h", 2)) for i in range(2)]  # none bound: fine
    view = _view(pods)
    assert [(v.invariant, v.subject) for v in inv.check_gangs(view)] == [(inv.GANG_PARTIAL, "default/g")]
    assert [(v.invariant, v.subject) for v in inv.check_unbound(view, ["default/lonely", "default/ok", "default/x"])] \
        == [(inv.UNBOUND, "default/lonely"), (inv.UNBOUND, "default/x")]
    ok = view.pod_by_key()["default/ok"]
    view.events = [{"reason": "Scheduled", "reportingController": "tessera", "note": f"Successfully assigned default/ok to {n}",
                    "regarding": {"kind": "Pod", "uid": ok["metadata"]["uid"], "namespace": "default", "name": "ok"}}
                   for n in ("n2", "n3")]
    assert [v.invariant for v in inv.check_events(view)] == [inv.BOUND_TWICE]


def test_checker_reads_no_podgroups_scheduled_event_as_a_pod_bound_twice() -> None:
    """A placed gang's PodGroup gets one Normal `Scheduled` naming where its members went
    ("Successfully assigned 2 members of pod group default/pg: 1 to n1, 1 to n2"): no pod's
    Binding, so no bound-twice (the soak read it as one: 'b-pg0: Scheduled events name 2 nodes')."""
    members = {"scheduling.x-k8s.io/pod-group": "pg"}
    view = _view([_bound("w0", "n1", labels=members), _bound("w1", "n2", labels=members)])
    view.events = [{"reason": "Scheduled", "reportingController": "tessera", "note": note,
                    "regarding": {"kind": "PodGroup", "uid": "pg-uid", "namespace": "default", "name": "pg"}}
                   for note in ("Successfully assigned 1 member of pod group default/pg: 1 to n1",
                                "Successfully assigned 1 member of pod group default/pg: 1 to n2")]
    assert inv.check_events(view) == []


def test_checker_finds_a_scheduler_plugins_podgroup_by_the_name_its_members_label() -> None:
    """A member's gang key for a scheduler-plugins PodGroup is "ns/scheduling.x-k8s.io/name" (kept
    apart from a label gang of the same name); the view holds PodGroups as "ns/name". A whole gang
    bound beside its PodGroup is no violation, and a partly bound one is judged by its minMember."""
    members = {"scheduling.x-k8s.io/pod-group": "pg"}
    view = _view([_bound(f"w{i}", "n1", labels=members) for i in range(2)])
    view.podgroups = {"default/pg": b.podgroup("pg", 2)}
    assert inv.check_gangs(view) == []
    view.podgroups = {"default/pg": b.podgroup("pg", 3)}
    assert [v.invariant for v in inv.check_gangs(view)] == [inv.GANG_PARTIAL]


def test_fits_somewhere_tells_a_full_cluster_from_leaked_capacity() -> None:
    cls = b.resource_class("v100", match_labels={"model": "V100"})
    shared = b.resource_class("slice", match_labels={"model": "T4"}, sharing={"dimension": "memory", "unit": "1Gi"})
    devices = [_device("n1", 0), _device("n1", 1), _device("n1", 2, "T4", "16Gi")]
    node = b.node("n1", cpu="8", gpus=3)
    held = [_bound("a", "n1", {"class.tessera.dev/v100": [("n1.d0", None)]}, limits={"class.tessera.dev/v100": 1}),
            _bound("s", "n1", {"class.tessera.dev/slice": [("n1.d2", "10Gi")]}, limits={"class.tessera.dev/slice": 10})]
    view = _view(held, [node], devices, [cls, shared])
    assert inv.fits_somewhere(b.pod("one", limits={"class.tessera.dev/v100": 1}), view) == "n1"
    assert inv.fits_somewhere(b.pod("two", limits={"class.tessera.dev/v100": 2}), view) is None
    assert inv.fits_somewhere(b.pod("slice6", limits={"class.tessera.dev/slice": 6}), view) == "n1"
    assert inv.fits_somewhere(b.pod("slice7", limits={"class.tessera.dev/slice": 7}), view) is None
    assert inv.fits_somewhere(b.pod("gpu1", limits={"nvidia.com/gpu": 1}), view) == "n1"  # 2 of 3 GPUs held
    assert inv.fits_somewhere(b.pod("gpu2", limits={"nvidia.com/gpu": 2}), view) is None
    assert inv.fits_somewhere(b.pod("cpu", requests={"cpu": "9"}), view) is None
    detail = inv.check_unbound(_view([*held, b.pod("one", limits={"class.tessera.dev/v100": 1})], [node], devices,
                                     [cls, shared]), ["default/one"])[0].detail
    assert detail.startswith("still pending (fits on n1 by the apiserver's state)")


def test_fits_somewhere_counts_a_held_device_that_was_deleted() -> None:
    """A pod keeps a GPU whose ExtendedResource is gone (the scheduler counts it as a ghost): the
    harness must not see room there either, or a correct refusal reads as leaked capacity."""
    cls = b.resource_class("v100", match_labels={"model": "V100"})
    devices = [_device("n1", 0), _device("n1", 1)]
    node = b.node("n1", cpu="8", gpus=2)
    held = [_bound("a", "n1", {"class.tessera.dev/v100": [("n1.d0", None)]}, limits={"class.tessera.dev/v100": 1})]
    view = _view(held, [node], devices[1:], [cls])  # n1.d0 deleted, still held by a
    removed = {"n1.d0": devices[0]}
    assert inv.fits_somewhere(b.pod("gpu2", limits={"nvidia.com/gpu": 2}), view, known_devices=removed) is None
    assert inv.fits_somewhere(b.pod("gpu1", limits={"nvidia.com/gpu": 1}), view, known_devices=removed) == "n1"
    pending = _view([*held, b.pod("gpu2", limits={"nvidia.com/gpu": 2})], [node], devices[1:], [cls])
    assert inv.check_unbound(pending, ["default/gpu2"], only_if_room=True, known_devices=removed) == []


def test_gang_members_that_each_fit_alone_in_the_same_device_do_not_count_as_room_for_the_gang() -> None:
    """Soak run seed 83003: three members of a label gang (one V100-class device each) stayed
    pending, Tessera saying "only 1 of the 3 members it needs fit", and the check named the same
    node for all three: each fits alone in its one free device. The gang's members are now placed
    together, each taking its device, so the gang is out of reach, a correct refusal."""
    cls = b.resource_class("v100", match_labels={"model": "V100"})
    devices = [_device("n1", 0), _device("n1", 1)]
    node = b.node("n1", cpu="8", gpus=2)
    busy = b.pod("busy", node_name="n1", phase="Running", limits={"class.tessera.dev/v100": 1},
                 annotations={ann.DEVICES: ann.encode_devices(
                     {"main": {"class.tessera.dev/v100": (ann.DeviceGrant("id-n1.d0", "n1.d0", None),)}})})
    labels = b.gang_labels("g", 3)
    members = [b.pod(f"g-{i}", labels=labels, limits={"class.tessera.dev/v100": 1}) for i in range(3)]
    view = _view([busy, *members], [node], devices, [cls])
    keys = [f"default/g-{i}" for i in range(3)]
    assert all(inv.fits_somewhere(member, view) == "n1" for member in members)  # alone, each fits
    assert inv.check_unbound(view, keys, only_if_room=True) == []
    # with room for all three (two more devices) they count again
    more = [_device("n1", 2), _device("n1", 3)]
    view = _view([busy, *members], [b.node("n1", cpu="8", gpus=4)], devices + more, [cls])
    assert [v.subject for v in inv.check_unbound(view, keys, only_if_room=True)] == keys


def test_a_gang_member_with_room_does_not_count_when_the_gang_cannot_reach_its_minimum() -> None:
    """Only the whole gang can be placed: a pending member that fits alone, beside one that fits
    nowhere, is a correct refusal, not leaked capacity (soak run seed 23009 read it as one)."""
    cls = b.resource_class("v100", match_labels={"model": "V100"})
    devices = [_device("n1", 0)]
    node = b.node("n1", cpu="8", gpus=1)
    labels = b.gang_labels("g", 2)
    small = b.pod("g-ps", labels=labels, requests={"cpu": "1"})
    big = b.pod("g-w0", labels=labels, limits={"class.tessera.dev/v100": 2})
    view = _view([small, big], [node], devices, [cls])
    keys = ["default/g-ps", "default/g-w0"]
    assert inv.fits_somewhere(small, view) == "n1" and inv.fits_somewhere(big, view) is None
    assert inv.check_unbound(view, keys, only_if_room=True) == []
    assert inv.pending_with_room(view, keys) == []
    # without only_if_room every member the caller promised still counts
    assert [v.subject for v in inv.check_unbound(view, keys)] == keys
    # a gang that can reach its minimum keeps its members that fit
    fits = b.pod("g-w0", labels=labels, limits={"class.tessera.dev/v100": 1})
    view = _view([small, fits], [node], devices, [cls])
    assert [v.subject for v in inv.check_unbound(view, keys, only_if_room=True)] == keys
    assert inv.pending_with_room(view, keys) == keys
    # members already bound count toward the minimum
    view = _view([_bound("g-w0", "n1", {"class.tessera.dev/v100": [("n1.d0", None)]}, labels=labels,
                         limits={"class.tessera.dev/v100": 1}), small], [node], devices, [cls])
    assert inv.pending_with_room(view, ["default/g-ps"]) == ["default/g-ps"]


def test_a_pending_gang_member_whose_siblings_are_gone_is_stranded_not_promised() -> None:
    """CI run on a87f847 (test_preemption_after_a_leader_kill): the leader was killed between a
    label gang's Bindings (two of three members bound, one pending); the standby's preemption took
    the gang's two running members as one victim unit. The pending member then stays pending for
    good ("cannot find enough sibling pods, current pods number: 1, minMember of group: 3"), a
    correct refusal: nothing re-creates its siblings. The harness took the two gone members off the
    promised pods but kept the third and called it unbound. A member whose gang has fewer live
    members than its minimum is stranded; one whose gang still has them all is not."""
    cls = b.resource_class("v100", match_labels={"model": "V100"})
    devices = [_device("n1", i) for i in range(4)]
    node = b.node("n1", cpu="8", gpus=4)
    labels = b.gang_labels("g", 3)
    pending = b.pod("g-1", labels=labels, limits={"class.tessera.dev/v100": 1})
    view = _view([pending], [node], devices, [cls])
    assert inv.stranded_gang_members(view) == {"default/g-1"}
    assert [v.subject for v in inv.check_unbound(view, ["default/g-1"])] == ["default/g-1"]  # the checker alone still counts it
    whole = [b.pod(f"g-{i}", labels=labels, limits={"class.tessera.dev/v100": 1}) for i in range(3)]
    assert inv.stranded_gang_members(_view(whole, [node], devices, [cls])) == set()
    bound = _bound("g-0", "n1", {"class.tessera.dev/v100": [("n1.d0", None)]}, labels=labels,
                   limits={"class.tessera.dev/v100": 1})
    assert inv.stranded_gang_members(_view([bound, pending], [node], devices, [cls])) == {"default/g-1"}
    # the fault run's expectation drops the gone pods and the stranded member, keeps the rest
    other = b.pod("solo", limits={"nvidia.com/gpu": 1})
    after = _view([pending, other], [node], devices, [cls])
    assert no_longer_expected({"default/g-0", "default/g-1", "default/g-2", "default/solo"}, after) \
        == {"default/g-0", "default/g-1", "default/g-2"}


def test_a_gang_broken_by_a_node_the_harness_deleted_is_not_partial_when_no_room_is_left() -> None:
    """Soak seed 55 run 3 (run seed 55002): a label gang's three members were placed in one
    decision (two on v100-015, one on v100-012); two Bindings landed, the third was held at the
    allocation gate; the fault harness then deleted v100-015 and its ExtendedResources (the pods
    bound to it stay, as on a real cluster until PodGC). The gate rejected the third member (its
    device is gone) and no V100 device was free anywhere after the urgent wave, so the gang stayed
    2 of 3. Whatever a scheduler does, a node deleted under a gang mid-binding breaks it (upstream
    coscheduling's bound members stay bound too): not gang-partial. It still is when the pending
    member has room (the scheduler should complete the gang), and when no member's node is gone."""
    cls = "class.tessera.dev/v100"
    classes = [b.resource_class("v100", match_labels={"model": "V100"})]
    labels = b.gang_labels("g", 3)
    devices = [_device("n2", 0), _device("n2", 1)]
    node = b.node("n2", cpu="8", gpus=2)
    on_gone = _bound("g-0", "gone", {cls: [("gone.d1", None)]}, labels=labels, limits={cls: 1})
    on_n2 = _bound("g-2", "n2", {cls: [("n2.d0", None)]}, labels=labels, limits={cls: 1})
    pending = b.pod("g-1", labels=labels, limits={cls: 1})
    busy = _bound("busy", "n2", {cls: [("n2.d1", None)]}, limits={cls: 1})
    view = _view([on_gone, on_n2, pending, busy], [node], devices, classes)
    deleted = {"gone": 20.0}  # seen deleted 20 s into the run, after the two Bindings
    at = {p["metadata"]["uid"]: 10.0 for p in (on_gone, on_n2)}
    assert inv.check_gangs(view, deleted_nodes=deleted, bound_at=at) == []
    # only a node the run saw deleted excuses it (a view may simply not list a node)
    assert [(v.invariant, v.subject) for v in inv.check_gangs(view)] == [(inv.GANG_PARTIAL, "default/g")]
    # room for the pending member: the scheduler should have completed the gang
    roomy = _view([on_gone, on_n2, pending], [node], devices, classes)
    assert [(v.invariant, v.subject) for v in inv.check_gangs(roomy, deleted_nodes=deleted, bound_at=at)] == [(inv.GANG_PARTIAL, "default/g")]
    # no member on a gone node: the fault did not break it, the partial gang counts
    on_n2_too = _bound("g-0", "n2", {cls: [("n2.d1", None)]}, labels=labels, limits={cls: 1})
    whole_nodes = _view([on_n2_too, on_n2, pending], [node], devices, classes)
    assert [(v.invariant, v.subject) for v in inv.check_gangs(whole_nodes, deleted_nodes=deleted, bound_at={**at, on_n2_too["metadata"]["uid"]: 10.0})] == [(inv.GANG_PARTIAL, "default/g")]
    # every member bound, one on the gone node: nothing partial either way
    done = _bound("g-1", "n2", {cls: [("n2.d1", None)]}, labels=labels, limits={cls: 1})
    assert inv.check_gangs(_view([on_gone, on_n2, done], [node], devices, classes), deleted_nodes=deleted,
                           bound_at={**at, done["metadata"]["uid"]: 10.0}) == []
    # the Bindings' times unknown: no evidence the deletion broke it
    assert [v.invariant for v in inv.check_gangs(view, deleted_nodes=deleted)] == [inv.GANG_PARTIAL]


def test_a_gang_already_partial_before_its_node_was_deleted_is_not_excused() -> None:
    """The node-loss excuse needs the deletion to come while the gang was binding: a gang bound 2 of
    3 long before (the third member never bound for some other reason) stays gang-partial when
    one of its nodes is deleted later, room or not; so does one whose member on the deleted node
    was bound after the deletion (a stale Binding, not a fault's outcome). Checked as the soak
    does, through the watcher's record of deletions and first Bindings."""
    cls = "class.tessera.dev/v100"
    classes = [b.resource_class("v100", match_labels={"model": "V100"})]
    labels = b.gang_labels("g", 3)
    devices = [_device("n2", 0), _device("n2", 1)]
    node = b.node("n2", cpu="8", gpus=2)
    on_gone = _bound("g-0", "gone", {cls: [("gone.d1", None)]}, labels=labels, limits={cls: 1})
    on_n2 = _bound("g-2", "n2", {cls: [("n2.d0", None)]}, labels=labels, limits={cls: 1})
    pending = b.pod("g-1", labels=labels, limits={cls: 1})
    busy = _bound("busy", "n2", {cls: [("n2.d1", None)]}, limits={cls: 1})
    view = _view([on_gone, on_n2, pending, busy], [node], devices, classes)

    def partial(deleted_at: float, bound: float) -> list[str]:
        watcher = inv.ClusterWatcher(cast(Any, None))
        watcher.started = 0.0
        watcher.removed[("Node", "gone")] = (deleted_at, b.node("gone", cpu="8", gpus=2))
        for p in (on_gone, on_n2, busy):
            watcher.first_bound[p["metadata"]["uid"]] = inv.FirstBinding(p["spec"]["nodeName"], bound, "default/x")
        return [v.subject for v in inv.check(view, watcher=watcher) if v.invariant == inv.GANG_PARTIAL]

    assert partial(deleted_at=20.0, bound=10.0) == []  # mid-binding: excused
    assert partial(deleted_at=10_000.0, bound=10.0) == ["default/g"]
    assert partial(deleted_at=10.0, bound=20.0) == ["default/g"]


def test_a_gang_with_no_member_bound_beside_a_deleted_node_is_judged_without_a_crash() -> None:
    """A gang none of whose members is bound (still pending, whole) while a node was deleted
    during the run: the node-loss excuse has nothing to weigh, and the check judges the gang as
    any other (not partial) — a soak's final check crashed here with `max()` of nothing."""
    cls = "class.tessera.dev/v100"
    classes = [b.resource_class("v100", match_labels={"model": "V100"})]
    labels = b.gang_labels("g", 2)
    node = b.node("n2", cpu="8", gpus=2)
    pods = [b.pod("g-0", labels=labels, limits={cls: 1}), b.pod("g-1", labels=labels, limits={cls: 1})]
    view = _view(pods, [node], [_device("n2", 0)], classes)
    watcher = inv.ClusterWatcher(cast(Any, None))
    watcher.started = 0.0
    watcher.removed[("Node", "gone")] = (20.0, b.node("gone", cpu="8", gpus=2))
    assert [v for v in inv.check(view, watcher=watcher) if v.invariant == inv.GANG_PARTIAL] == []
