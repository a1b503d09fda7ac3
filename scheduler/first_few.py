"""`a, b, c and 4 more`: the first few of a list named, and how many are left unnamed.

One wording for every message that names some of many (the classes a resource name could
mean, a gang's members that disagree, a label's values, a workload's other pending pods).
"""

from __future__ import annotations

from collections.abc import Sequence


def first_few(names: Sequence[str], most: int) -> str:
    """The first `most` of `names` joined by commas, then ` and N more` when any are left out
    ("" for none). The caller orders them (sorted, as a rule, so that the text is stable)."""
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")
