"""Analogues of the FGD artifact's trace variants that the variants/ folder does not hold.

Why: the artifact evaluates seventeen pod lists (`experiments/run_scripts/generate_run_scripts.py`
in hkust-adsl/kubernetes-scheduler-simulator); the folder holds eight of them (plus seven the paper
did not run). The other eight — cpu200, cpu250, gpushare60, gpushare100, gpuspec25, gpuspec33,
multigpu40, multigpu50 — have published results (the artifact's
`experiments/analysis/expected_results/analysis_allo_discrete.csv`), and a default tuned without
them may lose there. We cannot have their files, so this module rebuilds each one by the rule its
family follows in the files we do have (checked against them):

- `cpuXXX`: the default trace's 7,064 GPU pods unchanged, plus CPU-only pods drawn (with
  replacement) from the default's 1,088 until they are XX.X % of all pods (cpu235: 2,176 of 9,240,
  every shape one of the default's; cpu300: 30.0 %).
- `multigpuXX`: the default trace plus multi-GPU pods drawn from its 75 until they add
  1,000 × (XX / 10 − 1) GPUs of demand (multigpu20 adds exactly 1,000 GPUs in 172 pods, multigpu30
  exactly 2,000; the multi-GPU share of demand is then 20.4 and 30.2 %, not the name's figure).
- `gpushareXX`: the default trace with random non-sharing GPU pods replaced by sharing pods drawn
  from its 3,078 until sharing pods carry XX % of the GPU demand (gpushare40: 40.1 %; the pod
  count stays 8,152).
- `gpuspecXX`: gpuspec20 with more random GPU pods given a `gpu_spec` drawn from gpuspec20's own
  specs until XX % of GPU pods have one (gpuspec10/20: the default's pods, 10.4 / 20.4 % with a
  spec).

Each analogue is drawn with its own fixed seed, so every run sees the same pods. The comparison
with the published figures is indicative — same rule, not the same draw.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import replace

from bench.trace_workload import MILLI, TracePod

# (FGD, BestFit) unallocated GPU % at 100 % arrived, median of seeds 42-51, from the artifact's
# expected_results/analysis_allo_discrete.csv (column "100", 100 minus the allocation).
PUBLISHED: dict[str, dict[str, float]] = {
    "cpu200": {"FGD": 5.18, "BestFit": 7.855},
    "cpu250": {"FGD": 6.80, "BestFit": 8.705},
    "gpushare60": {"FGD": 8.705, "BestFit": 10.915},
    "gpushare100": {"FGD": 13.36, "BestFit": 15.40},
    "gpuspec25": {"FGD": 6.08, "BestFit": 14.30},
    "gpuspec33": {"FGD": 12.12, "BestFit": 19.585},
    "multigpu40": {"FGD": 3.105, "BestFit": 4.91},
    "multigpu50": {"FGD": 2.905, "BestFit": 4.425},
}


def _gpu(pod: TracePod) -> int:
    return pod.total_gpu_milli


def _renamed(pods: Sequence[TracePod]) -> list[TracePod]:
    return [pod.clone(f"openb-pod-{i:04d}") for i, pod in enumerate(pods)]


def cpu_variant(default: Sequence[TracePod], percent: float, rng: random.Random) -> list[TracePod]:
    gpu_pods = [p for p in default if p.num_gpu]
    cpu_pods = [p for p in default if not p.num_gpu]
    wanted = round(len(gpu_pods) * percent / (100 - percent))
    return _renamed([rng.choice(cpu_pods) for _ in range(wanted)] + gpu_pods)


def multigpu_variant(default: Sequence[TracePod], percent: float, rng: random.Random) -> list[TracePod]:
    pods = list(default)
    multi = [p for p in default if p.num_gpu > 1]
    wanted, added = round(MILLI * MILLI * (percent / 10 - 1)), 0  # 1,000 GPUs per 10 points above 10
    while added < wanted:
        pod = rng.choice(multi)
        pods.append(pod)
        added += _gpu(pod)
    return _renamed(pods)


def gpushare_variant(default: Sequence[TracePod], percent: float, rng: random.Random) -> list[TracePod]:
    pods = list(default)
    shares = [p for p in default if p.shared]
    others = [i for i, p in enumerate(pods) if p.num_gpu and not p.shared]
    rng.shuffle(others)
    total = sum(_gpu(p) for p in pods)
    shared = sum(_gpu(p) for p in pods if p.shared)
    while others and shared < percent / 100 * total:
        index = others.pop()
        replacement = rng.choice(shares)
        total += _gpu(replacement) - _gpu(pods[index])
        shared += _gpu(replacement)
        pods[index] = replacement
    return _renamed(pods)


def gpuspec_variant(gpuspec20: Sequence[TracePod], percent: float, rng: random.Random) -> list[TracePod]:
    pods = list(gpuspec20)
    specs = [p.gpu_spec for p in gpuspec20 if p.gpu_spec]
    plain = [i for i, p in enumerate(pods) if p.num_gpu and not p.gpu_spec]
    rng.shuffle(plain)
    gpu_pods = sum(1 for p in pods if p.num_gpu)
    with_spec = len(specs)
    while plain and with_spec < percent / 100 * gpu_pods:
        index = plain.pop()
        pods[index] = replace(pods[index], gpu_spec=rng.choice(specs))
        with_spec += 1
    return _renamed(pods)


BUILDERS: dict[str, Callable[[Sequence[TracePod], float, random.Random], list[TracePod]]] = {
    "cpu": cpu_variant, "gpushare": gpushare_variant, "gpuspec": gpuspec_variant, "multigpu": multigpu_variant}


def family(name: str) -> tuple[str, float]:
    """"gpushare60" -> ("gpushare", 60.0); cpu levels are tenths of a per cent ("cpu250": 25 %)."""
    kind = name.rstrip("0123456789")
    level = float(name[len(kind):])
    return kind, level / 10 if kind == "cpu" else level


def analogue(name: str) -> str:
    """The suite's name for the analogue of the artifact's `name` (told apart from a real file)."""
    return f"{name}x"


def build(default: Sequence[TracePod], gpuspec20: Sequence[TracePod]) -> dict[str, list[TracePod]]:
    """Every analogue of `PUBLISHED`, in its order, each from its own seeded draw (the seed is the
    level); gpuspec analogues start from gpuspec20, the others from the default trace."""
    out: dict[str, list[TracePod]] = {}
    for name in PUBLISHED:
        kind, level = family(name)
        source = gpuspec20 if kind == "gpuspec" else default
        out[analogue(name)] = BUILDERS[kind](source, level, random.Random(int(name[len(kind):])))
    return out
