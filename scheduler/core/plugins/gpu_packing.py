"""TesseraGpuPacking: prefer nodes whose GPUs are fuller after the placement.

Why a plugin of its own: a profile has one NodeResourcesFit strategy for every resource it scores.
Spreading CPU and memory (LeastAllocated, so GPU nodes keep the CPU their GPUs need) and packing
GPUs (so a 2-GPU pod is not refused while two nodes have one GPU idle each) need two strategies.
This one is upstream's MostAllocated on one device resource only: `used * 100 / capacity` after
the pod, where `used` counts plain requests and devices handed out by class alike. It scores only
pods that ask for the resource (plain, or through a class whose devices belong to it); a node
without the resource scores 0.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict

from scheduler.api.config_reader import ArgsReader, invalid
from scheduler.core.classes import validate_resource_name
from scheduler.core.framework.cycle_state import MAX_NODE_SCORE, PodContext
from scheduler.core.framework.handle import Handle
from scheduler.core.framework.interface import Ints, ScorePlugin
from scheduler.core.framework.nodetable import NodeTable
from scheduler.core.framework.resources import ResourceColumns
from scheduler.core.state import NodeInfo

NAME = "TesseraGpuPacking"
FIELDS = ("resourceName",)


class GpuPackingArgs(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    resource_name: str = "nvidia.com/gpu"


def parse_args(args: ArgsReader) -> GpuPackingArgs:
    resource = args.get_str("resourceName", GpuPackingArgs().resource_name)
    if (problem := validate_resource_name(resource)) is not None:
        invalid(args.at("resourceName"), resource, problem)
    return GpuPackingArgs(resource_name=resource)


class TesseraGpuPacking(ScorePlugin):
    name = NAME

    def __init__(self, handle: Handle, args: GpuPackingArgs) -> None:
        self.resource = args.resource_name

    def score_applies(self, ctx: PodContext) -> bool:
        return ctx.plain_request(self.resource) > 0 or bool(ctx.device_requests)

    def score(self, ctx: PodContext, info: NodeInfo) -> int:
        capacity = info.device_capacity(self.resource)
        plan = ctx.plans.get(info.name)
        added = ctx.plain_request(self.resource) + (plan.newly_busy.get(self.resource, 0) if plan else 0)
        if capacity <= 0 or (not added and (plan is None or self.resource not in plan.resources)):
            return 0
        return min(info.used(self.resource) + added, capacity) * MAX_NODE_SCORE // capacity

    def score_rows(self, table: NodeTable, ctx: PodContext, rows: Ints) -> Ints:
        column = table.group(ResourceColumns).of(self.resource)
        capacity = column.score_alloc[rows]
        added: Ints = np.full(len(rows), ctx.plain_request(self.resource), np.int64)
        asks = added > 0
        demand = ctx.device_demand(rows).get(self.resource) if ctx.device_demand is not None else None
        if demand is not None:
            added = added + demand.amount
            asks = asks | demand.uses
        used = np.minimum(column.used[rows] + added, capacity)
        score = used * MAX_NODE_SCORE // np.where(capacity > 0, capacity, 1)
        return np.where((capacity > 0) & asks, score, 0)
