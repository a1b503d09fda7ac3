"""The scheduling policies `bench.trace` compares, each an ordinary Tessera configuration.

Why configurations and not code: the benchmark must measure what a user gets from a config file,
through `parse_config` and the real plugins. Adding a policy is one `Policy(...)` line in
`POLICIES`. The NodeResourcesFit variants change only `pluginConfig` (like config/spread.yaml and
config/binpack.yaml), so the other default score plugins stay on, as they would for a user.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from bench.trace_fgd import POLICY_NAME as FGD_POLICY
from scheduler.api.config import SchedulerConfig, load_config, parse_config

FIT_RESOURCES = ("cpu", "memory", "nvidia.com/gpu")


def _v1(profile: dict[str, Any], name: str) -> SchedulerConfig:
    raw = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
           "profiles": [{"schedulerName": "tessera", **profile}]}
    return parse_config(raw, name)


def _fit(name: str, strategy_type: str, weights: Sequence[int], extra: dict[str, Any] | None = None) -> SchedulerConfig:
    strategy: dict[str, Any] = {
        "type": strategy_type,
        "resources": [{"name": r, "weight": w} for r, w in zip(FIT_RESOURCES, weights, strict=True)],
        **(extra or {}),
    }
    return _v1({"pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": strategy}}]}, name)


@dataclass(frozen=True, slots=True)
class Policy:
    name: str
    summary: str
    build: Callable[[], SchedulerConfig] | None  # None: not Tessera (`fgd`, replayed by bench/trace_fgd.py)
    default: bool = True  # part of a run without --policies
    offline: bool = False  # placed in offline_order (the arrived pods, largest first), not as they arrive
    path: Path | None = None  # a --config file's policy: workers rebuild it from the file


POLICIES: tuple[Policy, ...] = (
    Policy("tessera-default", "the built-in default configuration (no --config)", lambda: load_config(None)),
    Policy("least-allocated", "NodeResourcesFit LeastAllocated, cpu/memory/gpu 1/1/1",
           lambda: _fit("least-allocated", "LeastAllocated", (1, 1, 1))),
    Policy("most-allocated", "NodeResourcesFit MostAllocated, cpu/memory/gpu 1/1/1",
           lambda: _fit("most-allocated", "MostAllocated", (1, 1, 1))),
    Policy("rtcr-binpack", "RequestedToCapacityRatio (0,0)-(100,10), cpu/memory/gpu 1/1/3",
           lambda: _fit("rtcr-binpack", "RequestedToCapacityRatio", (1, 1, 3), {
               "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0},
                                                      {"utilization": 100, "score": 10}]}})),
    Policy("first-fit", "no score plugins: first feasible node from kube-scheduler's rotating start",
           lambda: _v1({"plugins": {"score": {"disabled": [{"name": "*"}]}}}, "first-fit")),
    # Opt-in (--policies): the paper's FGD setup, its fragmentation score alone.
    Policy("fragmentation-only", "TesseraFragmentation as the only score plugin (FGD as in the paper)",
           lambda: _v1({"plugins": {"score": {"disabled": [{"name": "*"}],
                                              "enabled": [{"name": "TesseraFragmentation", "weight": 1}]}}},
                       "fragmentation-only"), default=False),
    Policy("gpu-binpack", "RequestedToCapacityRatio on nvidia.com/gpu only (CPU and memory left out)",
           lambda: _v1({"pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {
               "type": "RequestedToCapacityRatio", "resources": [{"name": "nvidia.com/gpu", "weight": 1}],
               "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0},
                                                      {"utilization": 100, "score": 10}]}}}}]}, "gpu-binpack"),
           default=False),
    Policy("fragmentation-spread", "TesseraFragmentation (weight 5) over NodeResourcesFit LeastAllocated",
           lambda: _v1({"plugins": {"score": {"enabled": [{"name": "TesseraFragmentation", "weight": 5}]}},
                        "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {
                            "type": "LeastAllocated", "resources": [{"name": r, "weight": 1} for r in FIT_RESOURCES]}}}]},
                       "fragmentation-spread"), default=False),
    # Offline references: the pods that arrived by 100 % known in advance, placed largest first.
    Policy("offline", "offline reference: the arrived pods known in advance (the fragmentation model sees them "
           "all first), placed largest first by the built-in default", lambda: load_config(None),
           default=False, offline=True),
    Policy("offline-bfd", "offline best-fit decreasing: the arrived pods largest first, MostAllocated cpu/memory/gpu",
           lambda: _fit("offline-bfd", "MostAllocated", (1, 1, 1)), default=False, offline=True),
    # Not Tessera: FGD itself, for a side-by-side figure on pod lists without a published one.
    Policy(FGD_POLICY, "FGD replayed (bench/trace_fgd.py): the artifact's fragmentation score alone, every pod shape typical",
           None, default=False),
)

BY_NAME = {p.name: p for p in POLICIES}


def from_file(path: Path) -> Policy:
    """A configuration file as a policy (`--config`), named after the file: a candidate default is
    measured exactly as `tessera run --config FILE` would place pods, beside the built-in one."""
    return Policy(path.stem, f"configuration file {path}", partial(load_config, path), path=path)


def select(names: str | None) -> list[Policy]:
    """`--policies a,b` → those policies in the order given; None → the default set."""
    if not names:
        return [p for p in POLICIES if p.default]
    chosen = []
    for name in (n.strip() for n in names.split(",")):
        if not name:
            continue
        if name not in BY_NAME:
            raise ValueError(f"unknown policy {name!r}; known: {', '.join(BY_NAME)}")
        chosen.append(BY_NAME[name])
    if not chosen:
        raise ValueError("--policies selected nothing")
    return chosen


def config_for(policy: Policy, score_all_nodes: bool = True) -> SchedulerConfig:
    """The policy's configuration; by default scoring every feasible node, as FGD's simulator does
    (`percentageOfNodesToScore: 100`), instead of kube-scheduler's adaptive sample."""
    if policy.build is None:
        raise ValueError(f"{policy.name} is not a Tessera configuration")
    config = policy.build()
    if not score_all_nodes:
        return config
    profiles = tuple(p.model_copy(update={"percentage_of_nodes_to_score": None}) for p in config.profiles)
    return config.model_copy(update={"percentage_of_nodes_to_score": 100, "profiles": profiles})


def scoring_fingerprint(config: SchedulerConfig) -> tuple[object, ...]:
    """What decides placements in a profile (not the config's name or source): two policies with
    equal fingerprints must produce identical results."""
    return tuple((p.scheduler_name, tuple(p.score_weights.items()), p.plugin_args,
                  p.percentage_of_nodes_to_score) for p in config.profiles) + (config.percentage_of_nodes_to_score,)


def duplicates(policies: Sequence[Policy], score_all_nodes: bool) -> list[tuple[str, str]]:
    """Pairs of selected policies that resolve to the same scoring (worth a warning)."""
    seen: dict[tuple[object, ...], str] = {}
    pairs = []
    for policy in policies:
        if policy.build is None:
            continue
        key = scoring_fingerprint(config_for(policy, score_all_nodes))
        if key in seen:
            pairs.append((seen[key], policy.name))
        else:
            seen[key] = policy.name
    return pairs
