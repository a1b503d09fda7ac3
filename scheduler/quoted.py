"""Tenant values quoted into messages: Go's %q, cut to a bound.

One rule for the core's field errors and the api layer's QuantityError (a PodGroup's
minResources reaches it), so it lives outside both: `scheduler.api` must not import the core.
"""

from __future__ import annotations

_GO_ESCAPES = {"\a": r"\a", "\b": r"\b", "\f": r"\f", "\n": r"\n", "\r": r"\r", "\t": r"\t", "\v": r"\v",
               "\\": "\\\\", '"': '\\"'}


def go_quote(text: str) -> str:
    """Go's %q of a string (strconv.Quote): printable characters as they are, the usual
    backslash escapes, other control characters as \\x and two hex digits, other runes as \\u and
    four hex digits, or \\U and eight."""
    out = ['"']
    for char in text:
        if char in _GO_ESCAPES:
            out.append(_GO_ESCAPES[char])
        elif char == " " or char.isprintable():
            out.append(char)
        elif ord(char) < 0x20 or char == "\x7f":
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) < 0x10000:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    out.append('"')
    return "".join(out)


# Characters of a value from an object quoted into a message: a label key (316) or a name (253)
# whole, at most a screenful of anything else.
QUOTE_LIMIT = 320


def quoted(value: object) -> str:
    """`value` as a message quotes it: a string as Go's %q (as upstream's field errors quote one),
    anything else as its repr. Tenants write these values (an annotation holds up to 256 KiB),
    and a message is repeated in a log line per change, the pod's PodScheduled condition and the
    GPU map: past QUOTE_LIMIT characters it keeps their start, an ellipsis and the whole's length
    in bytes (`"aaaa…" (204800 bytes)`)."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) <= QUOTE_LIMIT:
        return go_quote(text) if isinstance(value, str) else text
    start = text[:QUOTE_LIMIT] + "…"
    # surrogatepass: a lone surrogate (PyYAML reads "\ud800" from a what-if file) counts its 3 bytes
    size = len(text.encode("utf-8", "surrogatepass"))
    return f"{go_quote(start) if isinstance(value, str) else start} ({size} bytes)"
