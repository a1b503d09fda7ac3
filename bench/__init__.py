"""Benchmarks: packing quality on a real GPU trace (`bench.trace`) and, later, core and live speed.

Benchmarks drive the same `scheduler.core` the live loop and the simulator use; they report
ratios and side-by-side numbers, never timed assertions (docs/design.md §7).
"""
