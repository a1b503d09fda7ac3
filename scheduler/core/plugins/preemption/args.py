"""DefaultPreemptionArgs: how many candidate nodes a preemption dry-runs (upstream's names,
defaults and validation messages: pkg/scheduler/apis/config/v1/defaults.go,
validation_pluginargs.go)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from scheduler.api.config_reader import ArgsReader, Checks, invalid

FIELDS = ("minCandidateNodesPercentage", "minCandidateNodesAbsolute")


class PreemptionArgs(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    min_candidate_nodes_percentage: int = 10
    min_candidate_nodes_absolute: int = 100


def parse_args(args: ArgsReader) -> PreemptionArgs:
    """ValidateDefaultPreemptionArgs, every error in its order."""
    found = Checks()
    percentage = found.read(lambda: args.get_int("minCandidateNodesPercentage", 10, "int32"), None)
    absolute = found.read(lambda: args.get_int("minCandidateNodesAbsolute", 100, "int32"), None)
    if percentage is not None and not 0 <= percentage <= 100:
        found.check(lambda: invalid(args.at("minCandidateNodesPercentage"), percentage, "not in valid range [0, 100]"))
    if absolute is not None and absolute < 0:
        found.check(lambda: invalid(args.at("minCandidateNodesAbsolute"), absolute, "not in valid range [0, inf)"))
    if percentage == 0 and absolute == 0:
        found.check(lambda: invalid(args.at("minCandidateNodesPercentage"), 0,
                                    "cannot be zero at the same time as minCandidateNodesAbsolute"))
        found.check(lambda: invalid(args.at("minCandidateNodesAbsolute"), 0,
                                    "cannot be zero at the same time as minCandidateNodesPercentage"))
    found.raise_errors()
    assert percentage is not None and absolute is not None
    return PreemptionArgs(min_candidate_nodes_percentage=percentage, min_candidate_nodes_absolute=absolute)


def candidates_to_try(args: PreemptionArgs, potential: int) -> int:
    """upstream's calculateNumCandidates: a percentage of the potential nodes, at least the
    absolute number, at most all of them."""
    count = potential * args.min_candidate_nodes_percentage // 100
    count = max(count, args.min_candidate_nodes_absolute)
    return min(count, potential)
