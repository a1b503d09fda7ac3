"""Stopping quietly when the reader of our output goes away (`| head`, `| grep -q`), as kubectl does.

Every command that prints (`tessera simulate`, `tessera record`, `kubectl tessera`) catches
`BrokenPipeError` and calls this: without it, the interpreter's flush of stdout at exit raises the
same error again and prints a traceback after the command has already stopped.
"""

from __future__ import annotations

import os
import sys
from typing import IO, Any

__all__ = ["reader_gone"]


def reader_gone(stream: IO[Any] | None = None) -> int:
    """Point `stream` (stdout by default) at /dev/null; the exit status to return (0)."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), (stream or sys.stdout).fileno())
    return 0
