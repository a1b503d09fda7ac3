"""PreScore and Score are separate extension points, enabled and disabled each on its own, as in
kube-scheduler v1.36.3.

NewFramework (pkg/scheduler/framework/runtime/framework.go) fills each extension point's plugin
list from that point's `enabled` entries (updatePluginList), then expandMultiPointPlugins adds
every multiPoint plugin that implements the point's interface unless that point's `disabled`
names it (or "*", which skips the expansion for that point only). So `plugins.score.disabled:
NodeAffinity` leaves NodeAffinity in the PreScore list — its PreScore still parses the preferred
terms and still fails the cycle with `running PreScore plugin "NodeAffinity": ...` — and
`plugins.preScore.disabled: NodeAffinity` leaves its Score, whose fallback parses the terms itself
(NodeAffinity.Score: "Fallback to calculate preferredNodeAffinity here when PreScore is disabled")
and fails with RunScorePlugins' wording, `running Score plugins: plugin "NodeAffinity" failed
with: ...`. prioritizeNodes runs neither when the profile has no Score plugin at all
(HasScorePlugins), and then findNodesThatPassFilters stops at the first feasible node.
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.api.config import SchedulerConfig, parse_config
from scheduler.core.scheduler import Scheduler
from scheduler.sim import builders as b

V1 = "kubescheduler.config.k8s.io/v1"
PARSE_ERROR = "[0].matchExpressions[0].values[0]: Invalid value: \"abc\": for 'Gt', 'Lt' operators, the value must be an integer"
PRE_SCORE_ERROR = f'running PreScore plugin "NodeAffinity": {PARSE_ERROR}'
SCORE_ERROR = f'running Score plugins: plugin "NodeAffinity" failed with: {PARSE_ERROR}'
BAD_PREFERENCE = {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 1, "preference": {"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["abc"]}]}}]}}}


def _config(plugins: dict[str, Any]) -> SchedulerConfig:
    return parse_config({"apiVersion": V1, "kind": "KubeSchedulerConfiguration",
                         "profiles": [{"schedulerName": "tessera", "plugins": plugins}]}, "t.yaml")


def _off(*names: str) -> dict[str, Any]:
    return {"disabled": [{"name": name} for name in names]}


def _message(plugins: dict[str, Any]) -> str | None:
    """The error of the one attempt of a pod with an unparsable preferred term on two fitting
    nodes (None when it was placed)."""
    core = Scheduler(_config(plugins))
    for obj in (b.node("n1"), b.node("n2"), b.pod("p", spec_extra=BAD_PREFERENCE)):
        core.apply("ADDED", obj, 0.0)
    (attempt,) = core.schedule_next(0.0) or []
    if attempt.node is not None:
        return None
    assert attempt.error
    return attempt.message


@pytest.mark.parametrize(("plugins", "expected"), [
    pytest.param({}, PRE_SCORE_ERROR, id="defaults"),
    pytest.param({"score": _off("NodeAffinity")}, PRE_SCORE_ERROR, id="score-off-keeps-prescore"),
    pytest.param({"score": {**_off("*"), "enabled": [{"name": "NodeResourcesFit"}]}}, PRE_SCORE_ERROR,
                 id="score-star-off-keeps-prescore"),
    pytest.param({"preScore": _off("NodeAffinity")}, SCORE_ERROR, id="prescore-off-score-parses"),
    pytest.param({"preScore": _off("*")}, SCORE_ERROR, id="prescore-star-off-score-parses"),
    pytest.param({"preScore": _off("NodeAffinity"), "score": _off("NodeAffinity")}, None, id="both-off"),
    pytest.param({"multiPoint": _off("NodeAffinity")}, None, id="multipoint-off"),
    pytest.param({"multiPoint": _off("NodeAffinity"), "preScore": {"enabled": [{"name": "NodeAffinity"}]}},
                 PRE_SCORE_ERROR, id="multipoint-off-prescore-on"),
    pytest.param({"score": _off("*")}, None, id="no-score-plugin-no-prescore"),
])
def test_prescore_and_score_are_enabled_and_disabled_separately(plugins: dict[str, Any], expected: str | None) -> None:
    assert _message(plugins) == expected


def test_the_profile_lists_its_prescore_plugins_apart_from_its_score_plugins() -> None:
    profile = _config({"score": _off("NodeAffinity")}).profiles[0]
    assert "NodeAffinity" not in profile.score_weights and profile.pre_score == ("NodeAffinity",)
    profile = _config({"preScore": _off("NodeAffinity")}).profiles[0]
    assert "NodeAffinity" in profile.score_weights and profile.pre_score == ()
