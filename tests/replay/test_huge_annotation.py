"""A tenant's huge annotation value is quoted into messages cut to a bound.

A security review: one pod's 200 KB `tessera.dev/topology-required` value was repeated in full
in the `input.invalid` log line of every change (the core's notice), in the PodScheduled
condition message written back into the pod's status, and in /gpu-map.json (1.6 MB): one tenant
filled logs, etcd writes and every page load. Each message quotes at most QUOTE_LIMIT characters
of the value, an ellipsis and the value's length in bytes (`scheduler.quoted.quoted`)."""

from __future__ import annotations

import orjson

from scheduler.quoted import QUOTE_LIMIT, quoted
from scheduler.sim import builders as b
from scheduler.view.cluster import build_view
from scheduler.view.decisions import DecisionLog
from scheduler.view.model import as_dict
from tests.helpers import Run
from tests.replay.test_topology import rack_nodes, topology_config

HUGE = "a" * 204800
BOUND = 4 * QUOTE_LIMIT  # a message around one quoted value


def test_quoted_cuts_a_long_value_and_says_its_length() -> None:
    assert quoted("two") == '"two"'
    assert quoted(7) == "7"
    assert quoted(HUGE) == '"' + "a" * QUOTE_LIMIT + '…" (204800 bytes)'
    assert quoted("é" * (QUOTE_LIMIT + 1)).endswith(f'…" ({2 * (QUOTE_LIMIT + 1)} bytes)')


def test_quoted_keeps_a_value_of_the_limit_whole_and_a_long_non_string_unquoted() -> None:
    """QUOTE_LIMIT characters are still quoted whole (the limit is the most kept, not the first
    cut); a long value that is no string (a list an object holds where a string belongs) is cut
    as its repr, without Go's quotes around it, as a short one is written."""
    assert quoted("a" * QUOTE_LIMIT) == '"' + "a" * QUOTE_LIMIT + '"'
    assert quoted("a" * (QUOTE_LIMIT + 1)) == '"' + "a" * QUOTE_LIMIT + f'…" ({QUOTE_LIMIT + 1} bytes)'
    many = list(range(200))
    assert quoted(many) == repr(many)[:QUOTE_LIMIT] + f"… ({len(repr(many))} bytes)"


def test_a_huge_topology_value_stays_out_of_notices_conditions_and_the_gpu_map() -> None:
    run = Run(topology_config())
    run.add(*rack_nodes({("a", "r1"): 2}))
    run.add(b.podgroup("g", 1, annotations={"tessera.dev/topology-required": HUGE}),
            b.pod("m", limits={"nvidia.com/gpu": 1}, labels={"scheduling.x-k8s.io/pod-group": "g"}),
            b.pod("g-0", labels=b.gang_labels("lg", 1), annotations={"tessera.dev/topology-required": HUGE},
                  limits={"nvidia.com/gpu": 1}))
    invalid = [n for n in run.notices() if n.startswith("InvalidObject:")]
    assert len(invalid) == 2 and all(len(n) < BOUND and "(204800 bytes)" in n for n in invalid), invalid
    for pod in ("m", "g-0"):
        message = run.last(pod).message
        assert len(message) < BOUND and "(204800 bytes)" in message, message[:300]
    log = DecisionLog()
    for attempt in run.attempts:
        log.attempt(attempt, 0.0)
    view = build_view(run.scheduler, source="simulate", now=0.0, reasons=log.reasons(), decisions=log.recent())
    assert len(orjson.dumps(as_dict(view))) < 50_000


def test_quoted_counts_a_lone_surrogate_instead_of_raising() -> None:
    """A file what-if -f reads through PyYAML may hold a lone surrogate ("\\ud800" in a
    double-quoted scalar; the apiserver's JSON never does): its length in bytes counts it as
    UTF-8 would encode it (3 bytes) instead of raising UnicodeEncodeError out of the message."""
    assert quoted("a" * QUOTE_LIMIT + "\ud800") == '"' + "a" * QUOTE_LIMIT + '…" (323 bytes)'
