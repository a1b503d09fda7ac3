"""TesseraFragmentationArgs: which device resource is measured, and how the workload is weighed.

- `resourceName`: the device resource whose fragmentation is measured (default nvidia.com/gpu).
- `maxTaskTypes`: the most popular request shapes kept as task types (default 256).
- `multiGpuPrior`: pseudo-count of pods per whole-GPU shape of 2, 4 and 8 GPUs added to the
  observed mix (default 1; 0 = only what was observed). Why: see `WorkloadModel`.
- `scarcityExponent`: a task type weighs (all GPUs / the GPUs on nodes that could take one of its
  pods: enough CPU, enough GPUs of its class) to this power (default 1; 0 = by pod count alone).
  Why: see `FragmentationScore.scarcity`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from scheduler.api.config_reader import ArgsReader, invalid
from scheduler.core.classes import validate_resource_name

FIELDS = ("resourceName", "maxTaskTypes", "multiGpuPrior", "scarcityExponent")
MAX_PRIOR = 1_000.0
MAX_EXPONENT = 4.0


class FragmentationArgs(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    resource_name: str = "nvidia.com/gpu"  # the device resource whose fragmentation is measured
    max_task_types: int = Field(default=256, ge=1, le=10_000)  # most popular request shapes kept
    multi_gpu_prior: float = Field(default=1.0, ge=0.0, le=MAX_PRIOR)
    scarcity_exponent: float = Field(default=1.0, ge=0.0, le=MAX_EXPONENT)


def parse_args(args: ArgsReader) -> FragmentationArgs:
    default = FragmentationArgs()
    resource = args.get_str("resourceName", default.resource_name)
    if (problem := validate_resource_name(resource)) is not None:
        invalid(args.at("resourceName"), resource, problem)
    limit = args.get_int("maxTaskTypes", default.max_task_types)
    if not 1 <= limit <= 10_000:
        invalid(args.at("maxTaskTypes"), limit, "not in valid range [1-10000]")
    prior = args.get_float("multiGpuPrior", default.multi_gpu_prior)
    if not 0 <= prior <= MAX_PRIOR:
        invalid(args.at("multiGpuPrior"), args.raw("multiGpuPrior"), f"not in valid range [0-{MAX_PRIOR:g}]")
    exponent = args.get_float("scarcityExponent", default.scarcity_exponent)
    if not 0 <= exponent <= MAX_EXPONENT:
        invalid(args.at("scarcityExponent"), args.raw("scarcityExponent"), f"not in valid range [0-{MAX_EXPONENT:g}]")
    return FragmentationArgs(resource_name=resource, max_task_types=limit, multi_gpu_prior=prior,
                             scarcity_exponent=exponent)
