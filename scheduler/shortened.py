"""Text cut to a length limit with a digest of the whole, so two long values stay apart.

One rule for every name the apiserver bounds: a node's label value (63), an Event's
reportingInstance (128).
"""

from __future__ import annotations

import hashlib


def shortened(text: str, limit: int, strip: str = "") -> str:
    """`text` when it fits in `limit`; otherwise its start (without trailing `strip` characters, for
    values that must end in a letter or digit), a dash and a digest of the whole, `limit` at most."""
    if len(text) <= limit:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    return f"{text[: limit - len(digest) - 1].rstrip(strip)}-{digest}"
