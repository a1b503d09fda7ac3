"""`-o json|yaml` as kubectl prints them: the whole document, indented, keys in schema order."""

from __future__ import annotations

from typing import Any

import orjson
import yaml

FORMATS = ("table", "json", "yaml")


def dump(doc: Any, fmt: str) -> str:
    """`doc` (plain dicts, lists, strings and numbers) as JSON or YAML text, ending in a newline."""
    if fmt == "json":
        return orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n"
    if fmt == "yaml":
        return str(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=1 << 16))
    raise ValueError(f"unknown output format {fmt!r}")
