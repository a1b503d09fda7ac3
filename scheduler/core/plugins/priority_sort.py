"""PrioritySort: kube-scheduler's default queue sort plugin, by name only.

Why a name with no code: Tessera has one queue order, `SchedulingQueue._order` in
scheduler/core/queue.py, and a configuration copied from kube-scheduler names PrioritySort at
`queueSort` (or `multiPoint`); it loads as a no-op. For a pod outside a gang the order is
PrioritySort's Less (the higher `spec.priority`, then the older queueing timestamp). Where it
differs: a gang's members sort by their gang's last failure (else the member's first queueing)
and then by the gang, so a gang's members come out together, where upstream's PrioritySort sorts
each pod by its own timestamp and scheduler-plugins' Coscheduling Less by its PodGroup's
creation time, then the group's name.
"""

from __future__ import annotations

from typing import ClassVar

from scheduler.core.framework.interface import Plugin

NAME = "PrioritySort"


class PrioritySort(Plugin):
    name = NAME
    also_extends: ClassVar[frozenset[str]] = frozenset({"queueSort"})
