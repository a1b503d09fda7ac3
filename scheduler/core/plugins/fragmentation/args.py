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

from scheduler.api.config_reader import ArgsReader, Checks, invalid
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
    found = Checks()

    def read_resource() -> str:
        resource = args.get_str("resourceName", default.resource_name)
        if (problem := validate_resource_name(resource)) is not None:
            invalid(args.at("resourceName"), resource, problem)
        return resource

    def read_limit() -> int:
        limit = args.get_int("maxTaskTypes", default.max_task_types)
        if not 1 <= limit <= 10_000:
            invalid(args.at("maxTaskTypes"), limit, "not in valid range [1-10000]")
        return limit

    def read_ranged(key: str, default_value: float, maximum: float) -> float:
        value = args.get_float(key, default_value)
        if not 0 <= value <= maximum:
            invalid(args.at(key), args.raw(key), f"not in valid range [0-{maximum:g}]")
        return value

    resource = found.read(read_resource, default.resource_name)
    limit = found.read(read_limit, default.max_task_types)
    prior = found.read(lambda: read_ranged("multiGpuPrior", default.multi_gpu_prior, MAX_PRIOR), 0.0)
    exponent = found.read(lambda: read_ranged("scarcityExponent", default.scarcity_exponent, MAX_EXPONENT), 0.0)
    found.raise_errors()
    return FragmentationArgs(resource_name=resource, max_task_types=limit, multi_gpu_prior=prior,
                             scarcity_exponent=exponent)
