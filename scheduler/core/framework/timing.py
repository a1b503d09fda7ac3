"""Where the framework tells an observer how long its extension points and plugins took.

kube-scheduler exports `scheduler_framework_extension_point_duration_seconds` (every run of an
extension point, every cycle) and `scheduler_plugin_execution_duration_seconds` (each plugin's
run, in a sample of the cycles: schedule_one.go's `pluginMetricsSamplePercent`). The core may
not read a clock — its decisions must replay exactly — so it reads none: it asks an injected
`Stopwatch` for marks and hands back what it timed. The live shell's stopwatch reads
`time.perf_counter()` and feeds the two histograms (`scheduler/kube/metrics.py`); the simulator,
the replay and the benchmarks use `NO_STOPWATCH`, whose calls do nothing, and whose
`sample()` is never true, so no plugin is ever timed there. Nothing the stopwatch returns
reaches a decision: it only ever flows back into the stopwatch.
"""

from __future__ import annotations

from typing import Literal, Protocol

# framework/runtime/framework.go's extension point labels (metrics.go's constants) Tessera runs
ExtensionPoint = Literal["PreFilter", "Filter", "PostFilter", "PreScore", "Score", "Reserve", "Permit", "Bind"]
# fwk.Code.String() (kube-scheduler framework/interface.go `codes`) of the statuses Tessera's points end with
Code = Literal["Success", "Error", "Unschedulable", "UnschedulableAndUnresolvable", "Wait", "Skip"]


class Stopwatch(Protocol):
    """What the framework runner reports to. `now()` is a mark (seconds on any monotonic scale);
    the durations passed back are differences of two marks."""

    def now(self) -> float: ...

    def sample(self) -> bool:
        """At the start of a scheduling cycle: whether this cycle times each plugin (upstream
        samples 10 % of the cycles; the stopwatch decides, so the core needs no randomness)."""
        ...

    def extension_point(self, point: ExtensionPoint, status: Code, profile: str, seconds: float) -> None: ...

    def plugin(self, plugin: str, point: ExtensionPoint, status: Code, seconds: float) -> None: ...


class _NoStopwatch:
    """Times nothing: the simulator's and the benchmarks' stopwatch."""

    def now(self) -> float:
        return 0.0

    def sample(self) -> bool:
        return False

    def extension_point(self, point: ExtensionPoint, status: Code, profile: str, seconds: float) -> None:
        pass

    def plugin(self, plugin: str, point: ExtensionPoint, status: Code, seconds: float) -> None:
        pass


NO_STOPWATCH: Stopwatch = _NoStopwatch()


class Timing:
    """The engine's stopwatch and what the current cycle does with it, shared by the cycle and
    every profile's runner. `sampled`: this cycle times each plugin (false between cycles, so a
    queueing hint's filter run outside a cycle is never timed). `quiet`: extension points are not
    recorded — inside PostFilter, whose gang dry run runs ordinary attempts that upstream's
    preemption does not (its per-plugin Filter runs are still recorded, as upstream's are)."""

    __slots__ = ("stopwatch", "sampled", "quiet")

    def __init__(self, stopwatch: Stopwatch) -> None:
        self.stopwatch = stopwatch
        self.sampled = False
        self.quiet = 0

    def point(self, point: ExtensionPoint, status: Code, profile: str, started: float) -> None:
        """One run of an extension point, from the mark `started` to now."""
        if not self.quiet:
            watch = self.stopwatch
            watch.extension_point(point, status, profile, watch.now() - started)

    def plugin(self, plugin: str, point: ExtensionPoint, status: Code, started: float) -> None:
        """One plugin's run at an extension point, from the mark `started` to now (sampled cycles only)."""
        watch = self.stopwatch
        watch.plugin(plugin, point, status, watch.now() - started)

    def alone(self, plugin: str, point: ExtensionPoint, status: Code, profile: str, started: float) -> None:
        """An extension point where one plugin ran and decided: the point, and the plugin's run
        in a sampled cycle (PostFilter's preemption; Coscheduling's PreFilter rejecting a gang
        the cycle checks before any other plugin runs)."""
        if self.sampled:
            self.plugin(plugin, point, status, started)
        self.point(point, status, profile, started)


def rejection_code(preemption_helps: bool) -> Code:
    """A filter's rejection status code: Unschedulable where evicting pods may resolve it, else
    UnschedulableAndUnresolvable (as upstream's plugins answer, and Tessera's preemption reads it)."""
    return "Unschedulable" if preemption_helps else "UnschedulableAndUnresolvable"
