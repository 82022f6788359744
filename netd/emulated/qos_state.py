"""The emulated hosts' QoS state, rendered where a real host shows it, with misconfigured hosts on purpose.

Every emulated port gets the fabric's RoCE profile: DSCP trust with the APP table mapping RoCE data
(DSCP 26) to priority 3 and CNPs (DSCP 48) to priority 6, PFC on priority 3 only, ETS with priority 3
in its own class, ECN and DCQCN enabled on priority 3, MTU 4200, rdma_cm in RoCE v2. The trees are:

* ``<host>/dcb/<netdev>/{pfc,ets,app,buffer}.json`` — ``dcb -j`` captures
  (:func:`netd.sources.qos_dcb.dcb_json`);
* ``<host>/class/net/<netdev>/ecn/roce_{np,rp}/enable/<0..7>`` — MLNX_OFED's per-priority switches;
* ``<host>/kernel/config/rdma_cm/<dev>/ports/1/default_roce_mode`` — configfs;
* ``<host>/class/net/<netdev>/mtu`` — already written by :mod:`netd.emulated.sysfs_tree`.

A drift is one of the misconfigurations that look like congestion in the field (docs/qos.md):
:data:`DRIFT_KINDS`. :func:`default_drifts` picks the hosts that carry them, so `netd fabric` on the
emulated fabric always has something to find.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cc.model.params import DcqcnParams
from netd.sources.qos_dcb import dcb_json, write_capture

__all__ = ["DRIFT_KINDS", "RoceProfile", "default_drifts", "drifted_params", "render_qos"]

DRIFT_KINDS: Mapping[str, str] = {
    "trust_pcp": "left in PCP trust while the fabric marks DSCP (APP table empty)",
    "pfc_priority": "PFC enabled on priority 4 instead of 3",
    "ecn_off": "ECN (CNP generation) off on priority 3",
    "dcqcn_off": "DCQCN (rate reduction) off on priority 3",
    "dscp_map": "RoCE DSCP 26 mapped to priority 0",
    "mtu": "MTU 1500 instead of 4200",
    "dcqcn_param": "DCQCN rp_ai_rate 20 Mb/s where the fabric runs the firmware default 5",
}
DRIFTED_AI_RATE = 20


@dataclass(frozen=True)
class RoceProfile:
    """The fabric's intended QoS for RoCE (what every well-configured emulated port shows)."""

    roce_priority: int = 3
    cnp_priority: int = 6
    roce_dscp: int = 26
    cnp_dscp: int = 48
    mtu: int = 4200
    buffer_bytes: int = 262_144


def default_drifts(n_hosts: int) -> dict[int, tuple[str, ...]]:
    """Host index -> its drifts: the last host is in PCP trust with PFC on the wrong priority; with six
    or more hosts, the third from last has DCQCN off; with eight or more, the sixth from last runs a
    different DCQCN parameter. Fewer than three hosts have no majority to drift from, so they get none."""
    out: dict[int, tuple[str, ...]] = {}
    if n_hosts >= 3:
        out[n_hosts - 1] = ("trust_pcp", "pfc_priority")
    if n_hosts >= 6:
        out[n_hosts - 3] = ("dcqcn_off",)
    if n_hosts >= 8:
        out[n_hosts - 6] = ("dcqcn_param",)
    return out


def drifted_params(drifts: Iterable[str], base: DcqcnParams) -> DcqcnParams:
    """The DCQCN parameters a host's NIC shows: ``base``, or with ``dcqcn_param`` a different AI rate.
    Only the host's parameter files differ; the emulated fabric's model keeps running ``base``."""
    if "dcqcn_param" in set(drifts):
        return dataclasses.replace(base, rp_ai_rate=DRIFTED_AI_RATE)
    return base


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def render_qos(
    host_root: Path,
    ports: Sequence[tuple[str, str]],
    drifts: Iterable[str] = (),
    profile: RoceProfile = RoceProfile(),
) -> None:
    """Write the QoS trees of one host whose RDMA ports are ``(device, netdev)`` (port 1 of each)."""
    drift = set(drifts)
    unknown = drift - set(DRIFT_KINDS)
    if unknown:
        raise ValueError(f"unknown QoS drift {sorted(unknown)}; one of {', '.join(DRIFT_KINDS)}")
    p = profile
    pfc_prio = 4 if "pfc_priority" in drift else p.roce_priority
    dscp_prio = {p.roce_dscp: 0 if "dscp_map" in drift else p.roce_priority, p.cnp_dscp: p.cnp_priority}
    prio_tc = tuple(1 if q == p.roce_priority else 2 if q == p.cnp_priority else 0 for q in range(8))
    prio_buffer = tuple(1 if q == pfc_prio else 0 for q in range(8))
    captures = {
        "pfc": dcb_json("pfc", pfc=(pfc_prio,), pfc_delay=32_768),
        "ets": dcb_json(
            "ets",
            prio_tc=prio_tc,
            tc_bw=(50, 50, 0, 0, 0, 0, 0, 0),
            tc_tsa=("ets", "ets", "strict", "strict", "strict", "strict", "strict", "strict"),
        ),
        "app": dcb_json("app", dscp_prio={} if "trust_pcp" in drift else dscp_prio),
        "buffer": dcb_json(
            "buffer",
            prio_buffer=prio_buffer,
            buffer_size=(p.buffer_bytes, p.buffer_bytes, 0, 0, 0, 0, 0, 0),
            total_size=4 * p.buffer_bytes,
        ),
    }
    for device, netdev in ports:
        for obj, text in captures.items():
            write_capture(host_root, netdev, obj, text)
        ecn = host_root / "class" / "net" / netdev / "ecn"
        for side, off in (("roce_np", "ecn_off"), ("roce_rp", "dcqcn_off")):
            for q in range(8):
                on = q == p.roce_priority and off not in drift
                _write(ecn / side / "enable" / str(q), "1" if on else "0")
        _write(host_root / "class" / "net" / netdev / "mtu", str(1500 if "mtu" in drift else p.mtu))
        mode = host_root / "kernel" / "config" / "rdma_cm" / device / "ports" / "1" / "default_roce_mode"
        _write(mode, "RoCE v2")
