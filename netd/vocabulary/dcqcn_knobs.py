"""One vocabulary for the DCQCN parameters of mlx5 NICs, whichever tree exposes them.

The vocabulary name is the upstream debugfs name (``/sys/kernel/debug/mlx5/<pci>/cc_params/<name>``,
drivers/infiniband/hw/mlx5/cong.c), which is also the field name in :class:`cc.model.params.DcqcnParams`.
MLNX_OFED/DOCA drivers expose most of the same firmware fields under
``/sys/class/net/<netdev>/ecn/roce_rp/`` and ``.../roce_np/`` with other names (``rpg_*``), listed
here beside each knob. Units and ranges are the firmware's, as documented by NVIDIA (DCQCN
parameters, ECN pages of MLNX_OFED 5.x/DOCA; see shared/reference/rdma-counters-dcqcn.md §5).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from cc.model.params import MAX_RATE_MBPS, RANGES, DcqcnParams

__all__ = ["KNOBS", "OFED_ENABLE_DIRS", "Knob", "by_name", "tunable_names"]

_U32 = 2**32 - 1
_DEFAULTS = DcqcnParams()


@dataclass(frozen=True, slots=True)
class Knob:
    name: str  # debugfs cc_params name
    ofed: tuple[str, str] | None  # (roce_rp | roce_np, file) under /sys/class/net/<if>/ecn/
    unit: str
    lo: int
    hi: int
    default: int | None
    description: str

    @property
    def tunable(self) -> bool:
        """The tuner may recommend it (a :class:`cc.model.params.DcqcnParams` NIC field)."""
        return self.name in _TUNABLE

    def check(self, value: int) -> None:
        if not self.lo <= value <= self.hi:
            raise ValueError(
                f"{self.name}={value} outside the device range [{self.lo}, {self.hi}] {self.unit}"
            )


def _range(name: str, fallback: tuple[int, int]) -> tuple[int, int]:
    lo, hi = RANGES.get(name, fallback)
    return int(lo), int(hi)


def _knob(
    name: str,
    ofed: tuple[str, str] | None,
    unit: str,
    description: str,
    fallback: tuple[int, int] = (0, _U32),
    default: int | None = None,
) -> Knob:
    lo, hi = _range(name, fallback)
    if default is None and hasattr(_DEFAULTS, name):
        default = int(getattr(_DEFAULTS, name))
    return Knob(name, ofed, unit, lo, hi, default, description)


KNOBS: tuple[Knob, ...] = (
    _knob(
        "rp_clamp_tgt_rate",
        ("roce_rp", "clamp_tgt_rate"),
        "bool",
        "1: every cut sets the target rate to the current rate",
    ),
    _knob(
        "rp_clamp_tgt_rate_ati",
        ("roce_rp", "clamp_tgt_rate_after_time_inc"),
        "bool",
        "1: a timer increase also re-arms target-rate clamping",
    ),
    _knob("rp_time_reset", ("roce_rp", "rpg_time_reset"), "us", "rate-increase timer period"),
    _knob("rp_byte_reset", ("roce_rp", "rpg_byte_reset"), "bytes", "bytes sent between rate increases"),
    _knob("rp_threshold", ("roce_rp", "rpg_threshold"), "events", "increase events per recovery stage"),
    _knob("rp_ai_rate", ("roce_rp", "rpg_ai_rate"), "Mb/s", "additive-increase step"),
    _knob(
        "rp_max_rate",
        ("roce_rp", "rpg_max_rate"),
        "Mb/s",
        "rate ceiling (0 = line rate)",
        (0, MAX_RATE_MBPS),
        0,
    ),
    _knob("rp_hai_rate", ("roce_rp", "rpg_hai_rate"), "Mb/s", "hyper-increase step"),
    _knob("rp_min_dec_fac", ("roce_rp", "rpg_min_dec_fac"), "%", "smallest share of the rate a cut keeps"),
    _knob("rp_min_rate", ("roce_rp", "rpg_min_rate"), "Mb/s", "rate floor"),
    _knob(
        "rp_rate_to_set_on_first_cnp",
        ("roce_rp", "rate_to_set_on_first_cnp"),
        "Mb/s",
        "rate after a flow's first CNP (0 = cut normally)",
    ),
    _knob("rp_dce_tcp_g", ("roce_rp", "dce_tcp_g"), "1/1024", "alpha gain, stored as (1 - g) x 1024"),
    _knob("rp_dce_tcp_rtt", ("roce_rp", "dce_tcp_rtt"), "us", "alpha update period"),
    _knob(
        "rp_rate_reduce_monitor_period",
        ("roce_rp", "rate_reduce_monitor_period"),
        "us",
        "shortest time between two cuts",
    ),
    _knob("rp_initial_alpha_value", ("roce_rp", "initial_alpha_value"), "1/1024", "alpha on the first CNP"),
    _knob("rp_gd", ("roce_rp", "rpg_gd"), "shift", "cut = alpha / 2^(gd - 10); 11 is the paper's alpha/2"),
    _knob(
        "np_min_time_between_cnps",
        ("roce_np", "min_time_between_cnps"),
        "us",
        "NP sends at most one CNP per flow per this interval",
    ),
    _knob("np_cnp_dscp", ("roce_np", "cnp_dscp"), "dscp", "DSCP of CNPs", (0, 63), 48),
    _knob("np_cnp_prio_mode", None, "bool", "1: CNP priority follows the data packet", (0, 1), 1),
    _knob("np_cnp_prio", ("roce_np", "cnp_802p_prio"), "pcp", "802.1p priority of CNPs", (0, 7), 6),
    _knob("rtt_resp_dscp_valid", None, "bool", "1: rtt_resp_dscp applies", (0, 1), 0),
    _knob("rtt_resp_dscp", None, "dscp", "DSCP of RTT response packets", (0, 63), 0),
)
"""Every knob of the upstream cc_params directory, in the driver's order."""

_TUNABLE = frozenset(
    f.name for f in DcqcnParams.__dataclass_fields__.values() if f.name.startswith(("rp_", "np_"))
)
_BY_NAME = MappingProxyType({k.name: k for k in KNOBS})

OFED_ENABLE_DIRS = ("roce_rp", "roce_np")
"""OFED trees with a per-priority ``enable/<0..7>`` directory (DCQCN is enabled per priority)."""


def by_name(name: str) -> Knob:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown DCQCN parameter {name!r}; known: {', '.join(_BY_NAME)}") from None


def tunable_names() -> tuple[str, ...]:
    return tuple(k.name for k in KNOBS if k.tunable)
