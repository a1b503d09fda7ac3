"""DefaultBinder: kube-scheduler's default bind plugin, by name only.

Why a name with no code: Tessera binds every pod it places itself (scheduler/kube/binder.py POSTs
the pod's `binding` subresource, as DefaultBinder does, with the device annotations), so a
configuration copied from kube-scheduler that names DefaultBinder at `bind` (or `multiPoint`)
loads as a no-op. It is a plugin name all the same because upstream's framework
counts it: a profile whose bind point, as `expandMultiPointPlugins` builds it, holds none is
refused (`at least one bind plugin is needed`), and the only form of `multiPoint: {disabled:
["*"]}` kube-scheduler accepts enables DefaultBinder again.
"""

from __future__ import annotations

from typing import ClassVar

from scheduler.core.framework.interface import Plugin

NAME = "DefaultBinder"


class DefaultBinder(Plugin):
    name = NAME
    also_extends: ClassVar[frozenset[str]] = frozenset({"bind"})
