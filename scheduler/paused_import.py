"""Importing a command's module with the cyclic garbage collector paused.

A command's imports (numpy, pydantic and the configuration models, aiohttp, kubernetes-asyncio's
connection parts) create nearly two hundred thousand objects that live as long as the process, and
the collector's passes over that growing heap cost a large share of the import time (`tessera
run`'s imports: bench/README.md, "Start-up, third pass"). About 1 % of them is garbage; it is
frozen with the rest, which costs less than the full collection that would find it. Frozen objects
are left out of later passes, as `scheduler.kube.startup_gc` does with the caches after the first
sync. Used by both executables: `tessera` (each subcommand) and `kubectl-tessera`.
"""

from __future__ import annotations

import gc
import importlib
from types import ModuleType

__all__ = ["import_with_collector_paused"]


def import_with_collector_paused(module: str) -> ModuleType:
    """Import `module` with the collector off, then freeze what exists and restore the collector
    (left off if the caller had it off)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return importlib.import_module(module)
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()
