"""The lab's DCQCN operating point, as a :class:`cc.model.params.DcqcnParams` (valid mlx5 knob values).

The mlx5 defaults and the SIGCOMM'15 profile are tuned for 40-200 Gb/s links with microsecond RTTs.
The lab's links run at 100 Mb/s, its packets are 2 KB (0.17 ms on the wire) and its feedback loop
takes milliseconds (queueing, 1 ms controller steps), so the same *rules* need longer timers, gentler
cuts and a more sensitive marking curve. Measured on the lab (8-flow incast, docs/lab.md): the
paper's ratios scaled in time alone oscillate between an empty queue and XOFF.

* timers: rate increase T = 20 ms, alpha period K = 10 ms, CNP interval N = cut window = 4 ms
  (each a few lab RTTs, as the paper's 50-55 µs are a few fabric RTTs);
* cuts: alpha starts at 0.2 (``rp_initial_alpha_value`` 200/1024, an mlx5 knob) with gain 1/64,
  so a single CNP cuts ~10 % instead of 50 %; the first incast is then absorbed by PFC, as in
  fabrics that start flows at line rate;
* marking: Kmin 5 KB, Kmax 100 KB, Pmax 0.5 — a flow sends well under one packet per millisecond
  at its fair share, so marks must be likely for a CNP to arrive within a few RTTs;
* PFC XOFF 300 KB / XON 200 KB, far above where DCQCN holds the queue.

Byte- and rate-valued fields scale with the link rate (the values below are for 100 Mb/s); every
field can be overridden (``--param rp_ai_rate=2``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from cc.model.params import DcqcnParams
from netd.errors import LabError

__all__ = ["LAB_BASE_MBPS", "lab_params", "parse_overrides"]

LAB_BASE_MBPS = 100.0

_TIMES = dict(
    rp_time_reset=20_000,  # µs, increase timer T
    rp_dce_tcp_rtt=10_000,  # µs, alpha period K
    np_min_time_between_cnps=4_000,  # µs, CNP interval N
    rp_rate_reduce_monitor_period=4_000,  # µs, at most one cut per CNP interval
)
_FIXED = dict(
    rp_threshold=5,
    rp_gd=11,
    rp_dce_tcp_g=1008,
    rp_initial_alpha_value=200,
    rp_min_dec_fac=50,
    rp_clamp_tgt_rate=1,
)
# scaled by link_mbps / LAB_BASE_MBPS
_RATES = dict(rp_ai_rate=1, rp_hai_rate=5, rp_min_rate=1)  # Mb/s
_BYTES = dict(
    rp_byte_reset=150_000, kmin_bytes=5_000, kmax_bytes=100_000, xoff_bytes=300_000, xon_bytes=200_000
)


def lab_params(link_mbps: float = LAB_BASE_MBPS, overrides: Mapping[str, Any] | None = None) -> DcqcnParams:
    scale = link_mbps / LAB_BASE_MBPS
    values: dict[str, Any] = {**_TIMES, **_FIXED, "pmax": 0.5}
    values.update({k: max(1, round(v * scale)) for k, v in _RATES.items()})
    values.update({k: max(1, round(v * scale)) for k, v in _BYTES.items()})
    values.update(overrides or {})
    try:
        return DcqcnParams(**values)
    except (TypeError, ValueError) as exc:
        raise LabError(f"invalid DCQCN parameter: {exc}") from None


def parse_overrides(items: Iterable[str]) -> dict[str, Any]:
    """``["rp_ai_rate=2", "pmax=0.1"]`` -> typed values (ints, or a float for pmax)."""
    known = {f.name for f in dataclasses.fields(DcqcnParams)}
    out: dict[str, Any] = {}
    for item in items:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or name not in known:
            raise LabError(
                f"--param {item!r}: expected NAME=VALUE with NAME one of {', '.join(sorted(known))}"
            )
        try:
            out[name] = float(text) if name == "pmax" else int(text, 0)
        except ValueError:
            raise LabError(f"--param {item!r}: {text!r} is not a number") from None
    return out
