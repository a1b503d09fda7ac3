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


_LABEL_KEY_NAME = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                   "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation "
                   "is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
_SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
              "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
              "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")


def label_key_errors(key: str) -> list[str]:
    """apimachinery's content.IsLabelKey (IsQualifiedName) messages, verbatim (empty when `key` is
    a label key): for configuration fields kube-scheduler validates with it (a node selector
    requirement's key, NodeResourcesFit's ignored resources), whose errors Tessera repeats."""
    parts = key.split("/")
    if len(parts) > 2:
        return [f"a valid label key {_LABEL_KEY_NAME} with an optional DNS subdomain prefix and '/' "
                "(e.g. 'example.com/MyName')"]
    errors = []
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                errors.append("prefix part must be no more than 253 bytes")
            if not DNS_SUBDOMAIN.fullmatch(prefix):
                errors.append(f"prefix part {_SUBDOMAIN}")
    name = parts[-1]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 bytes")
    if not QUALIFIED_NAME.fullmatch(name):
        errors.append(f"name part {_LABEL_KEY_NAME}")
    return errors
