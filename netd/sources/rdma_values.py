"""The text of ``<sysfs>/class/infiniband`` attributes made into values: counters, port states,
link rates. Pure functions of bytes or text; a value that is not well formed is None with a reason,
never an exception (netd.sources.rdma names the reason in ``PortSample.read_errors``)."""

from __future__ import annotations

import math

__all__ = ["parse_counter", "parse_rate", "parse_state", "rate_problem", "rate_value"]

_U64_MAX = (1 << 64) - 1


def parse_counter(data: bytes) -> tuple[int | None, str | None]:
    """``(value, None)`` for a well-formed ``"%llu\\n"``, else ``(None, reason)``.

    Only the first line counts: a sysfs attribute is one line, and a fake
    tree rewritten in place (pwrite, then ftruncate when shorter) may briefly
    show the new value followed by the old value's tail.
    """
    text = data.split(b"\n", 1)[0].strip()
    if text.isdigit():  # ASCII digits only: rejects "+1", "1_000", "0x10", "-1"
        value = int(text)
        return (value, None) if value <= _U64_MAX else (None, "out of range (> 2**64-1)")
    if not text:
        return None, "empty"
    if text.startswith(b"N/A"):  # drivers without a PMA printed "N/A (no PMA)"
        return None, "not available: " + text.decode("ascii", "replace")
    if text.startswith(b"-") and text[1:].isdigit():
        return None, "negative"
    return None, f"not a number: {text[:40]!r}"


def parse_state(text: str | None) -> str | None:
    """``"4: ACTIVE"`` -> ``"ACTIVE"``, ``"5: LinkUp"`` -> ``"LinkUp"`` (kernel prints ``"%d: %s"``)."""
    if not text:
        return None
    return text.split(":", 1)[-1].strip() or None


def parse_rate(text: str | None) -> float | None:
    """``"200 Gb/sec (2X NDR)"`` -> ``200.0``; ``"2.5 Gb/sec (1X SDR)"`` -> ``2.5``; None for anything
    that is not a finite, non-negative number (see :func:`rate_problem`)."""
    return None if rate_problem(text) else rate_value(text)


def rate_problem(text: str | None) -> str | None:
    """Why a ``rate`` attribute is not a usable speed, or None. ``float()`` accepts ``inf``, ``nan``
    and ``-1``; a speed that is any of those would open (and never close) a speed-change finding and
    poison every ratio to line rate, so they are absent with a reason."""
    if not text:
        return None
    value = rate_value(text)
    if value is None:
        return f"not a number: {text[:40]!r}"
    if not math.isfinite(value):
        return "not finite"
    if value < 0:
        return "negative"
    return None


def rate_value(text: str | None) -> float | None:
    """The number a ``rate`` attribute starts with, unchecked (:func:`rate_problem` says if usable)."""
    try:
        return float(text.split()[0]) if text else None
    except ValueError:
        return None
