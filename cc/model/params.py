"""DCQCN parameters named, scaled and bounded exactly like the mlx5 knobs.

A value in :class:`DcqcnParams` can be written to ``/sys/kernel/debug/mlx5/<pci>/cc_params/<name>``
unchanged: field names are the upstream debugfs names, units are the firmware's (Mb/s, µs, bytes,
1/1024 fixed point). The switch (CP) and PFC fields are not NIC knobs; they describe the fabric the
model runs on and use plain bytes.

Where the mlx5 firmware and the SIGCOMM'15 paper differ, the model follows the *paper's rule* and
reads the mlx5 value as the paper's parameter:

* alpha period: the paper decays alpha once per K µs without a CNP and raises it on every CNP; mlx5
  updates alpha once per ``rp_dce_tcp_rtt`` µs, raising it if any CNP arrived in that period. Here
  ``rp_dce_tcp_rtt`` is the paper's K.
* cut size: the paper cuts ``Rc*(1 - alpha/2)``; mlx5 cuts by ``alpha_int / 2**rp_gd`` with alpha_int
  in 1/1024 units, so ``rp_gd`` = 11 is the paper's alpha/2 and 10 is a cut of alpha.
* ``rp_min_dec_fac`` (a cut never leaves less than this % of the rate), ``rp_rate_reduce_monitor_period``
  (at most one cut per period), ``rp_initial_alpha_value`` / ``rp_rate_to_set_on_first_cnp`` (first-CNP
  behaviour) and ``rp_clamp_tgt_rate`` / ``rp_clamp_tgt_rate_ati`` are mlx5 refinements;
  :meth:`DcqcnParams.paper` sets them so they do not bind. NVIDIA documents the clamp pair as: with
  ``clamp_tgt_rate`` 1 every cut sets Rt <- Rc; with 0 "the target rate is updated to the current
  rate only on the first decrement after the increment event", where ``clamp_tgt_rate_after_time_inc``
  1 (the default) lets a timer increase count as well as a byte-counter one. (HPCC's simulator models
  only the timer case; the documented rule is used here.)
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from numbers import Integral, Real

__all__ = ["MAX_RATE_MBPS", "RANGES", "DcqcnParams"]

MAX_RATE_MBPS = 800_000
"""Upper bound for "1..line" rate knobs: the fastest Ethernet NIC port (800G) in Mb/s."""

_U32 = 2**32 - 1

RANGES: dict[str, tuple[float, float]] = {
    # NIC reaction point (reference rdma-counters-dcqcn.md §5 table)
    "rp_ai_rate": (1, MAX_RATE_MBPS),
    "rp_hai_rate": (1, MAX_RATE_MBPS),
    "rp_time_reset": (1, 131_071),
    # Documented 1..32767 with unverified granularity; the firmware field is 32 bit. The paper's
    # B = 10 MB only fits the field, so validation uses the field width (0 = byte counter off).
    "rp_byte_reset": (0, _U32),
    "rp_threshold": (1, 31),
    "rp_gd": (10, 11),
    "rp_min_dec_fac": (0, 100),
    "rp_min_rate": (1, MAX_RATE_MBPS),
    "rp_rate_reduce_monitor_period": (1, _U32),
    "rp_dce_tcp_g": (0, 1023),
    "rp_dce_tcp_rtt": (1, 131_071),
    "rp_initial_alpha_value": (1, 1023),
    "rp_rate_to_set_on_first_cnp": (0, MAX_RATE_MBPS),
    "rp_clamp_tgt_rate": (0, 1),
    "rp_clamp_tgt_rate_ati": (0, 1),
    # NIC notification point
    "np_min_time_between_cnps": (0, 4095),
    # switch congestion point and PFC (bytes; pmax is a probability)
    "kmin_bytes": (0, _U32),
    "kmax_bytes": (0, _U32),
    "pmax": (0.0, 1.0),
    "xoff_bytes": (1, _U32),
    "xon_bytes": (0, _U32),
}
"""Allowed closed range per field; validation and tuners share it."""


@dataclass(frozen=True, slots=True)
class DcqcnParams:
    """One DCQCN operating point: the mlx5 NIC knobs plus the switch's ECN and PFC thresholds.

    Defaults are the mlx5 firmware defaults (reference §5). Switch defaults are for 200G ports:
    Kmin/Kmax/Pmax are the HPCC simulator's ``dcqcn`` (firmware-like) profile, 100 KB/400 KB x bw/25
    and Pmax 0.2, scaled to 200G (reference §4); PFC XOFF sits above Kmax so ECN acts before PFC,
    with an XON hysteresis of a quarter of XOFF.
    """

    rp_ai_rate: int = 5  # Mb/s added to Rt per additive-increase event
    rp_hai_rate: int = 50  # Mb/s x i added to Rt per hyper-increase event
    rp_time_reset: int = 300  # µs, rate-increase timer T
    rp_byte_reset: int = 32_767  # bytes, rate-increase byte counter B (0 = off)
    rp_threshold: int = 1  # F: increase events per stage before leaving fast recovery
    rp_gd: int = 11  # cut = alpha / 2**(rp_gd - 10)
    rp_min_dec_fac: int = 50  # %, a cut keeps at least this share of Rc
    rp_min_rate: int = 1  # Mb/s floor
    rp_rate_reduce_monitor_period: int = 4  # µs, at most one cut per period
    rp_dce_tcp_g: int = 1019  # g = (1024 - G) / 1024
    rp_dce_tcp_rtt: int = 1  # µs, alpha update period (paper's K)
    rp_initial_alpha_value: int = 1023  # alpha on the first CNP, in 1/1024
    rp_rate_to_set_on_first_cnp: int = 0  # Mb/s, 0 = cut normally
    rp_clamp_tgt_rate: int = 0  # 1 = Rt <- Rc on every cut
    rp_clamp_tgt_rate_ati: int = 1  # 1 = a timer increase also re-arms Rt <- Rc (not only the byte counter)
    np_min_time_between_cnps: int = 4  # µs, NP sends at most one CNP per flow per interval
    kmin_bytes: int = 800_000
    kmax_bytes: int = 3_200_000
    pmax: float = 0.2
    xoff_bytes: int = 4_000_000
    xon_bytes: int = 3_000_000

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            lo, hi = RANGES[f.name]
            if isinstance(value, bool) or not isinstance(value, Real):
                raise ValueError(f"{f.name} must be a number, got {value!r}")
            number: float
            if f.name == "pmax":
                number = float(value)
            elif isinstance(value, Integral):
                number = int(value)
            else:
                raise ValueError(f"{f.name} must be an integer (device units), got {value!r}")
            object.__setattr__(self, f.name, number)  # numpy scalars from a tuner become Python numbers
            if not lo <= number <= hi:
                raise ValueError(f"{f.name}={number} outside the allowed range [{lo}, {hi}]")
        if self.kmin_bytes > self.kmax_bytes:
            raise ValueError(f"kmin_bytes={self.kmin_bytes} must be <= kmax_bytes={self.kmax_bytes}")
        if self.xon_bytes >= self.xoff_bytes:
            raise ValueError(f"xon_bytes={self.xon_bytes} must be < xoff_bytes={self.xoff_bytes}")

    @property
    def g(self) -> float:
        """Alpha EWMA gain as a float: the firmware stores (1 - g) * 1024."""
        return (1024 - self.rp_dce_tcp_g) / 1024

    @property
    def cut_scale(self) -> float:
        """Fraction of alpha removed from Rc per cut (0.5 is the paper's Rc*(1 - alpha/2))."""
        return 2.0 ** (10 - self.rp_gd)

    @property
    def min_keep(self) -> float:
        """Smallest share of Rc one cut may leave (``rp_min_dec_fac`` as a fraction)."""
        return self.rp_min_dec_fac / 100

    @property
    def initial_alpha(self) -> float:
        """Alpha on the first CNP of a flow, as a float."""
        return self.rp_initial_alpha_value / 1024

    @property
    def ecn_enabled(self) -> bool:
        """False when marking can never happen (Pmax 0), i.e. PFC alone controls queues."""
        return self.pmax > 0

    @classmethod
    def paper(cls) -> DcqcnParams:
        """The SIGCOMM'15 DCQCN profile in device fields (reference §4).

        g = 1/256 -> G = 1020; K = 55 µs -> rp_dce_tcp_rtt; N = 50 µs -> np_min_time_between_cnps and
        the cut window (the paper cuts once per CNP, CNPs are paced at N); T = 55 µs; B = 10 MB; F = 5;
        R_AI = 40 Mb/s; R_HAI = 200 Mb/s (the ns3-rdma sample config; the paper's value is unverified);
        Kmin 5 KB, Kmax 200 KB, Pmax 1%. mlx5-only refinements are set so that they never bind: the
        paper always sets Rt <- Rc on a cut (clamp 1), starts alpha at 1 (1023/1024 is the largest
        representable) and never limits a cut below alpha/2 (min_dec_fac 50 with alpha <= 1).
        PFC thresholds keep their defaults: the paper does not fix them.
        """
        return cls(
            rp_ai_rate=40,
            rp_hai_rate=200,
            rp_time_reset=55,
            rp_byte_reset=10_000_000,
            rp_threshold=5,
            rp_gd=11,
            rp_min_dec_fac=50,
            rp_min_rate=1,
            rp_rate_reduce_monitor_period=50,
            rp_dce_tcp_g=1020,
            rp_dce_tcp_rtt=55,
            rp_initial_alpha_value=1023,
            rp_rate_to_set_on_first_cnp=0,
            rp_clamp_tgt_rate=1,
            np_min_time_between_cnps=50,
            kmin_bytes=5_000,
            kmax_bytes=200_000,
            pmax=0.01,
        )
