"""The lab hosts' QoS state, one host misconfigured on purpose (docs/qos.md, docs/lab.md).

Every lab host's tree (``<lab>/host<i>/``, see :mod:`netd.lab.publish`) gets the fabric's RoCE QoS
profile as ``dcb -j`` captures, MLNX_OFED ECN/DCQCN switches and configfs, written by the emulated
fabric's renderer; the last host is left in PCP trust with PFC on priority 4, the two faults the audit
must catch. `netd qos --sysfs-root <lab>/host<i>` reads them through netd's ordinary QoS source.

The lab's ToRs hold two hosts each by default, where a majority per ToR cannot exist; audit the lab
with ``[qos] scope = "fabric"`` (or a declared ``expected`` profile).
"""

from __future__ import annotations

from pathlib import Path

from netd.emulated.qos_state import render_qos
from netd.lab.publish import DEVICE, NETDEV

__all__ = ["LAB_DRIFTS", "misconfigured_host", "render_lab_qos"]

LAB_DRIFTS = ("trust_pcp", "pfc_priority")


def misconfigured_host(n_hosts: int) -> int:
    return n_hosts - 1


def render_lab_qos(root: Path, host: int, n_hosts: int) -> None:
    """Write host ``host``'s QoS trees under its lab root."""
    drifts = LAB_DRIFTS if host == misconfigured_host(n_hosts) else ()
    render_qos(root, [(DEVICE, NETDEV)], drifts)
