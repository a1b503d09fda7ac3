"""The scheduling framework: plugin interface, cycle state, node table, and the profile runner.

Rules live in plugins (`scheduler/core/plugins/`, one module or package each, listed once in
`scheduler/core/plugins/registry.py`); this package runs whatever plugins a profile enables and
never names one. See docs/architecture.md.
"""

from scheduler.core.framework.cycle_state import (
    MAX_NODE_SCORE,
    DeviceDemand,
    DevicePlan,
    DeviceRequest,
    PodContext,
    prepare,
)

__all__ = ["MAX_NODE_SCORE", "DeviceDemand", "DevicePlan", "DeviceRequest", "PodContext", "prepare"]
