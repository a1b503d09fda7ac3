"""Ordering two resourceVersions of one resource, as the apiserver defines it.

apimachinery v0.36.3 `pkg/util/resourceversion/resourceversion.go` (`CompareResourceVersion`):
a resourceVersion is a positive decimal integer without leading zeros, of any length; a shorter
one is older, two of one length compare as strings. The order has a meaning only between objects
of the same resource (two Pods, never a Pod and a Lease: a resource may live in an etcd of its
own). Anything else is not well formed and is ordered against nothing.
"""

from __future__ import annotations


def _well_formed(value: str) -> bool:
    return bool(value) and value[0] != "0" and value.isascii() and value.isdigit()


def compare_resource_versions(a: str, b: str) -> int | None:
    """-1, 0 or 1 as `a` is older than, the same as or newer than `b`; None when either is not a
    well-formed resourceVersion (the caller must then not assume any order)."""
    if not _well_formed(a) or not _well_formed(b):
        return None
    if len(a) != len(b):
        return -1 if len(a) < len(b) else 1
    return (a > b) - (a < b)
