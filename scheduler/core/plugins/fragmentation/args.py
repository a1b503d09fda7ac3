"""TesseraFragmentationArgs: which device resource is measured, and how many task types count."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from scheduler.api.config_reader import ArgsReader, invalid

FIELDS = ("resourceName", "maxTaskTypes")


class FragmentationArgs(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    resource_name: str = "nvidia.com/gpu"  # the device resource whose fragmentation is measured
    max_task_types: int = Field(default=256, ge=1, le=10_000)  # most popular request shapes kept


def parse_args(args: ArgsReader) -> FragmentationArgs:
    default = FragmentationArgs()
    resource = args.get_str("resourceName", default.resource_name)
    if not resource.strip():
        invalid(args.at("resourceName"), resource, "must be a resource name such as nvidia.com/gpu")
    limit = args.get_int("maxTaskTypes", default.max_task_types)
    if not 1 <= limit <= 10_000:
        invalid(args.at("maxTaskTypes"), limit, "not in valid range [1-10000]")
    return FragmentationArgs(resource_name=resource, max_task_types=limit)
