"""Configuration bounds a one-character slip would move (mutation round 3): each value on the edge
of what upstream (or Tessera's own rule) accepts is accepted, and the one past it refused with
the upstream message. Each test fails with its slip."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.api.config import ConfigError, parse_config
from scheduler.core.plugins.fit.args import ScoringStrategy

V1 = "kubescheduler.config.k8s.io/v1"


def _v1(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": V1, "kind": "KubeSchedulerConfiguration", **fields}


def _error(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(raw, "cfg.yaml")
    return str(info.value)


def test_a_resource_weight_of_100_is_the_largest_accepted() -> None:
    def fit(weight: int) -> dict[str, Any]:
        return _v1(profiles=[{"pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {
            "type": "MostAllocated", "resources": [{"name": "cpu", "weight": weight}]}}}]}])

    [args] = [a for a in parse_config(fit(100), "cfg.yaml").profiles[0].plugin_args.values()
              if isinstance(a, ScoringStrategy)]
    assert [(r.name, r.weight) for r in args.resources] == [("cpu", 100)]
    assert "resource weight of cpu not in valid range (0, 100]" in _error(fit(101))


def test_a_max_backoff_equal_to_the_initial_one_is_accepted() -> None:
    cfg = parse_config(_v1(podInitialBackoffSeconds=5, podMaxBackoffSeconds=5), "cfg.yaml")
    assert (cfg.pod_initial_backoff_seconds, cfg.pod_max_backoff_seconds) == (5, 5)
    assert "must be greater than or equal to PodInitialBackoffSeconds" in _error(
        _v1(podInitialBackoffSeconds=5, podMaxBackoffSeconds=4))


def test_a_lease_of_exactly_one_second_is_accepted() -> None:
    cfg = parse_config(_v1(leaderElection={"leaseDuration": "1s", "renewDeadline": "500ms",
                                           "retryPeriod": "100ms"}), "cfg.yaml")
    assert cfg.leader_election.lease_duration_seconds == 1


def test_a_lease_equal_to_the_renew_deadline_is_upstreams_error_reported_with_the_others() -> None:
    """Upstream's check (leaseDuration > renewDeadline) is among those reported together; Tessera's
    whole-seconds rule, which would also refuse it, is not the one that speaks."""
    assert _error(_v1(leaderElection={"leaseDuration": "10s", "renewDeadline": "10s", "retryPeriod": "0s"})) == (
        "cfg.yaml: [leaderElection.retryPeriod: Invalid value: 0s: must be greater than zero, "
        "leaderElection.leaseDuration: Invalid value: 10s: must be greater than `RenewDeadline` (10s)]")
