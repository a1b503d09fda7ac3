"""Kubernetes name rules (apimachinery `validation.IsDNS1123Label`, `IsDNS1123Subdomain`,
`IsQualifiedName`), one home for every reader that checks a name before the apiserver would
refuse it: config (Lease names), ResourceClass resource names, Event names, topology label keys."""

from __future__ import annotations

import re

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")  # at most 63
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")  # at most 253
QUALIFIED_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")  # the name part, at most 63


def label_key_problem(key: str) -> str | None:
    """Why `key` is not a Kubernetes label key ([prefix/]name), or None."""
    prefix, _, name = key.rpartition("/")
    if "/" in key and (not DNS_SUBDOMAIN.fullmatch(prefix) or len(prefix) > 253):
        return "prefix part must be a lowercase DNS subdomain (a label key such as topology.kubernetes.io/zone)"
    if not QUALIFIED_NAME.fullmatch(name) or len(name) > 63:
        return ("name part must be at most 63 characters of alphanumerics, '-', '_' or '.', starting and "
                "ending with an alphanumeric (a label key such as topology.kubernetes.io/zone)")
    return None
