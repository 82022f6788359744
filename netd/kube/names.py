"""Fabric names made into the names Kubernetes accepts.

Switch names come from LLDP System Name TLVs and static files: case, '+' (an MLAG pair joined by
:func:`netd.model.topology.join_names`), '_' and any length are possible. Label values must match
``(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?`` in at most 63 characters; object names (HyperNodes)
must be DNS-1123 subdomains (lower case, ``[a-z0-9.-]``, at most 253). A name that has to be
changed keeps a readable stem and gains a short hash of the original, so two switches never
collapse into one value.
"""

from __future__ import annotations

import hashlib
import re

__all__ = ["LABEL_VALUE", "SUBDOMAIN", "label_value", "object_name"]

LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_HASH_LEN = 8


def _digest(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:_HASH_LEN]


def _fit(stem: str, original: str, limit: int, changed: bool) -> str:
    if not changed and len(stem) <= limit:
        return stem
    room = limit - _HASH_LEN - 1
    return f"{stem[:room].rstrip('-._')}-{_digest(original)}".lstrip("-._")


def label_value(name: str) -> str:
    """``name`` as a label value: kept when valid, else '+' -> '.', other invalid characters -> '-',
    trimmed to 63 characters with a hash of the original."""
    if len(name) <= 63 and LABEL_VALUE.match(name):
        return name
    stem = re.sub(r"[^-A-Za-z0-9_.]", "-", name.replace("+", ".")).strip("-_.")
    return _fit(stem, name, 63, changed=True)


def object_name(prefix: str, name: str) -> str:
    """A DNS-1123 subdomain ``<prefix>-<name>`` for a cluster-scoped object (at most 253)."""
    raw = f"{prefix}-{name}"
    dotted = re.sub(r"[^a-z0-9.-]", "-", raw.lower().replace("+", "."))
    # label by label: each DNS label must start and end alphanumeric, and none may be empty (a
    # single pass of replacements left "a-.-.b" as "a..b")
    labels = (re.sub(r"-{2,}", "-", label).strip("-") for label in dotted.split("."))
    stem = ".".join(label for label in labels if label)
    return _fit(stem, raw, 253, changed=stem != raw)
