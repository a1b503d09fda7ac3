"""The GPU map page: one self-contained HTML file (style, script and, for a replay, the data inline).

The same page serves two uses. `tessera run --gpu-map` serves it with an empty data block and a
source URL: the script fetches the view model every few seconds. `tessera simulate --output html`
writes it with the end state embedded and no source: a file that opens anywhere, offline. The
machines this runs on have no internet, so nothing comes from a CDN.

The page is read-only (no forms, no write calls) and served with a Content-Security-Policy that
allows exactly its own inline style and script (by hash), requests to its own origin, and nothing
else; the script writes text only through `textContent`. The embedded JSON escapes `<`, `>` and
`&`, so no value from the cluster can close its `<script>` block.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import orjson

from scheduler.view.model import ClusterView, as_dict

REFRESH_SECONDS = 3.0
_MARKER = re.compile(r"\{\{(?:TITLE|SOURCE_URL|REFRESH|DATA|STYLE|SCRIPT)\}\}")


@dataclass(frozen=True, slots=True)
class Page:
    html: str
    content_security_policy: str


def _asset(name: str) -> str:
    return resources.files("scheduler.view").joinpath(f"assets/{name}").read_text(encoding="utf-8")


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def embed_json(doc: Any) -> str:
    """JSON safe inside a `<script>` element: `<`, `>` and `&` as \\u escapes (still the same JSON)."""
    text = orjson.dumps(doc).decode()
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_page(view: ClusterView | None = None, *, source_url: str = "", refresh_seconds: float = REFRESH_SECONDS,
                title: str = "Tessera GPU map") -> Page:
    """The page with `view` embedded (a static file), or fetching `source_url` (a live page)."""
    style, script = _asset("gpu-map.css"), _asset("gpu-map.js")
    replacements = {
        "{{TITLE}}": html.escape(title),
        "{{SOURCE_URL}}": html.escape(source_url),
        "{{REFRESH}}": f"{refresh_seconds:g}",
        "{{DATA}}": embed_json(as_dict(view)) if view is not None else "",
        "{{STYLE}}": style,
        "{{SCRIPT}}": script,
    }
    # one pass: a value (the cluster's data) is never scanned for markers itself
    text = _MARKER.sub(lambda match: replacements[match.group(0)], _asset("gpu-map.html"))
    policy = (f"default-src 'none'; script-src {_sha256(script)}; style-src {_sha256(style)}; "
              "connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
    return Page(text, policy)
