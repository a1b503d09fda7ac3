"""TesseraFragmentation: place each pod where it fragments the cluster's GPUs least (after FGD, ATC'23).

The measure (`measure.py`) counts, for the task types the cluster runs (learned from the pods it
sees, `scheduler/core/workload.py`), the free GPU a node would strand after the placement; the
score is FGD's sigmoid of the change. The plugin also chooses which GPU of a node a slice goes to
(it is the device planner's `SliceChooser`), so the plan that is scored is the plan that is bound.
Batch form: scores are reused across cycles and across equal nodes (`cache.py`).
"""

from __future__ import annotations

from scheduler.api.quantity import Amount
from scheduler.core.framework.cycle_state import PodContext
from scheduler.core.framework.handle import Handle
from scheduler.core.framework.interface import Ints, ScorePlugin
from scheduler.core.framework.nodetable import NodeTable
from scheduler.core.objects import Device, Pod
from scheduler.core.plugins.fragmentation.args import FragmentationArgs
from scheduler.core.plugins.fragmentation.cache import FragmentationCache
from scheduler.core.plugins.fragmentation.measure import FragmentationScore, sigmoid_score
from scheduler.core.state import NodeInfo

__all__ = ["NAME", "TesseraFragmentation", "FragmentationScore", "sigmoid_score"]

NAME = "TesseraFragmentation"


class TesseraFragmentation(ScorePlugin):
    name = NAME

    def __init__(self, handle: Handle, args: FragmentationArgs) -> None:
        self.state = handle.state
        self.measure = FragmentationScore(self.state, args.resource_name, args.max_task_types,
                                          args.multi_gpu_prior, args.scarcity_exponent)
        self.cache = FragmentationCache(self.measure)

    @property
    def epoch(self) -> int:
        """Moves when the learned workload does: scores and slice choices may change."""
        return self.measure.epoch

    @property
    def generation(self) -> int:
        """What cached scores depend on beyond the node: the class registry and the workload."""
        return self.state.classes.generation * 1_000_000 + self.measure.epoch

    def observe(self, pod: Pod) -> None:
        self.measure.observe(pod)

    def score(self, ctx: PodContext, info: NodeInfo) -> int:
        return self.measure.score(ctx, info)

    def score_rows(self, table: NodeTable, ctx: PodContext, rows: Ints) -> Ints:
        return self.cache.score_rows(table, ctx, rows, self.generation)

    def choose_slice(self, info: NodeInfo, dimension: str, amount: Amount, options: list[Device]) -> Device:
        return self.measure.choose_slice(info, dimension, amount, options)
