"""The leader records the digest of the configuration it runs on the Lease it holds, so a
one-shot command can tell a ConfigMap changed by `helm upgrade` (nothing reloads) from what the
leader still runs. A user trial: `kubectl tessera explain` dry-ran the new ConfigMap while the
leader ran the old one, and nothing said so.

The digest rides on the Lease writes leader election makes anyway (no request more), as an
annotation beside the holder it belongs to: client-go's leaselock reads and writes only the spec
and PUTs back the metadata it read, so a Go program (or an older Tessera) taking the Lease over
keeps a stale annotation; bound to its holder, such a digest reads as unknown, never as a
mismatch."""

from __future__ import annotations

import copy
from typing import Any

from scheduler import __version__
from scheduler.kube.leader import (CONFIG_DIGEST_ANNOTATION, CONFIG_HOLDER_ANNOTATION, CONFIG_VERSION_ANNOTATION,
                                   LeaderElector, lease_config_digest)
from tests.fakelease import Clock, LeaseServer


def _elector(server: LeaseServer, who: str, clock: Clock, digest: str = "") -> LeaderElector:
    return LeaderElector(server.client(who), namespace="tessera-system", name="tessera", identity=who,  # type: ignore[arg-type]
                         clock=clock, lease_duration=15.0, renew_deadline=10.0, retry_period=2.0,
                         config_digest=digest)


def _annotations(server: LeaseServer) -> dict[str, Any]:
    assert server.lease is not None
    return dict(server.lease["metadata"].get("annotations") or {})


def _digest(server: LeaseServer) -> str:
    assert server.lease is not None
    return lease_config_digest(server.lease)


async def test_the_leader_writes_its_digest_with_the_lease_and_no_request_more() -> None:
    clock, server = Clock(), LeaseServer()
    a = _elector(server, "A", clock, "0123456789ab")
    assert await a._try_acquire_or_renew()  # creates the Lease
    assert _annotations(server) == {CONFIG_DIGEST_ANNOTATION: "0123456789ab", CONFIG_HOLDER_ANNOTATION: "A",
                                    CONFIG_VERSION_ANNOTATION: __version__}
    clock.t += 2
    assert await a._try_acquire_or_renew()  # the fast path renews with it
    assert server.calls == [("A", "GET"), ("A", "POST"), ("A", "PUT")]  # as without a digest
    assert _digest(server) == "0123456789ab"


async def test_a_standby_taking_over_rewrites_the_digest() -> None:
    clock, server = Clock(), LeaseServer()
    a, b = _elector(server, "A", clock, "aaaaaaaaaaaa"), _elector(server, "B", clock, "bbbbbbbbbbbb")
    assert await a._try_acquire_or_renew()
    assert not await b._try_acquire_or_renew()
    clock.t += 30  # A stopped renewing
    assert await b._try_acquire_or_renew()
    assert _annotations(server) == {CONFIG_DIGEST_ANNOTATION: "bbbbbbbbbbbb", CONFIG_HOLDER_ANNOTATION: "B",
                                    CONFIG_VERSION_ANNOTATION: __version__}
    assert _digest(server) == "bbbbbbbbbbbb"


async def test_a_release_leaves_no_digest_for_nobody() -> None:
    clock, server = Clock(), LeaseServer()
    a = _elector(server, "A", clock, "aaaaaaaaaaaa")
    assert await a._try_acquire_or_renew()
    assert await a.release()
    assert _digest(server) == ""  # holderIdentity "": nobody runs a configuration


async def test_a_holder_that_records_no_digest_clears_the_one_before_it() -> None:
    """A replica started without one (a test harness, a build that computes none) takes over
    from one that recorded a digest: the digest left on the Lease is not its own."""
    clock, server = Clock(), LeaseServer()
    a, b = _elector(server, "A", clock, "aaaaaaaaaaaa"), _elector(server, "B", clock)
    assert await a._try_acquire_or_renew()
    assert not await b._try_acquire_or_renew()
    clock.t += 30
    assert await b._try_acquire_or_renew()
    assert _annotations(server) == {} and _digest(server) == ""


async def test_a_lease_another_program_took_over_reads_as_unknown() -> None:
    """client-go's leaselock Update replaces the spec of the Lease it read and PUTs its metadata
    back: kube-scheduler-style tooling taking the Lease keeps Tessera's annotations unchanged
    (and reads nothing of them: its record is the spec alone). The digest names another holder:
    unknown, not a mismatch. A Lease without the annotations is unknown too."""
    clock, server = Clock(), LeaseServer()
    a = _elector(server, "A", clock, "aaaaaaaaaaaa")
    assert await a._try_acquire_or_renew()
    assert server.lease is not None
    taken = copy.deepcopy(server.lease)
    taken["spec"]["holderIdentity"] = "kube-scheduler-1_0f"  # what a Go holder's Update sends
    assert lease_config_digest(taken) == ""
    plain = copy.deepcopy(server.lease)
    del plain["metadata"]["annotations"]
    assert lease_config_digest(plain) == ""
    assert lease_config_digest({"kind": "Lease"}) == "" and lease_config_digest({"metadata": None, "spec": 3}) == ""


async def test_a_lease_with_null_annotations_or_others_of_its_own_is_taken_over_keeping_them() -> None:
    """A Lease written by another tool (`annotations: null`, as a client serialising an empty map
    may send; or annotations of its own, a GitOps tool's): the takeover's PUT carries the digest
    beside whatever else the Lease is annotated with, conditional on the version read (no
    conflict of its own)."""
    clock, server = Clock(), LeaseServer()
    a = _elector(server, "A", clock, "aaaaaaaaaaaa")
    assert await a._try_acquire_or_renew()
    assert await a.release()
    assert server.lease is not None
    for annotations, kept in ((None, {}), ({"argocd.argoproj.io/tracking-id": "t"},
                                           {"argocd.argoproj.io/tracking-id": "t"})):
        server.lease["metadata"]["annotations"] = annotations
        b = _elector(server, "B", clock, "bbbbbbbbbbbb")
        assert await b._try_acquire_or_renew()
        assert _annotations(server) == {**kept, CONFIG_DIGEST_ANNOTATION: "bbbbbbbbbbbb", CONFIG_HOLDER_ANNOTATION: "B",
                                        CONFIG_VERSION_ANNOTATION: __version__}
        assert await b.release()
