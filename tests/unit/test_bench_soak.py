"""bench.soak's overlapping proxy faults: each setting at its strongest, whatever its type."""

from __future__ import annotations

import random

from bench.soak import PROXY_FAULTS, _proxy_faults, combine
from tessera_testing.faultproxy import NO_FAULTS, Faults


def test_overlapping_faults_combine_to_the_strongest_of_each_setting() -> None:
    combined = combine([Faults(delay_request=0.2, cut_every=3.0), Faults(delay_request=0.5, cut_every=1.0,
                                                                          pod_deletes_before_failing=2),
                        Faults(pod_deletes_before_failing=0)])
    assert combined.delay_request == 0.5 and combined.cut_every == 1.0
    assert combined.pod_deletes_before_failing == 0  # the fewest DELETEs let through


def test_every_kind_the_soak_draws_combines_with_every_other() -> None:
    """Regression: a Faults field that is None by default made max() raise in the soak's harness."""
    rng = random.Random(7)
    drawn = [_proxy_faults(kind, rng) for kind in PROXY_FAULTS]
    assert combine(drawn).pod_deletes_before_failing is None
    assert combine([]) == NO_FAULTS
