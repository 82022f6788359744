"""The command that puts one QoS setting of one port back to the expected value.

Upstream tools first (iproute2 ``dcb``, ``ip``, ``cma_roce_mode`` from rdma-core's tooling), the
MLNX_OFED sysfs files where upstream has no knob. Values are the canonical texts of
:meth:`netd.sources.qos.PortQos.settings`. netd never runs these (read-only by default): it prints them.
"""

from __future__ import annotations

__all__ = ["fix_command"]


def _indexed(value: str) -> str:
    """'0,0,0,1,...' -> '0:0 1:0 2:0 3:1 ...' (dcb's PRIO:VALUE mapping syntax)."""
    return " ".join(f"{i}:{v}" for i, v in enumerate(value.split(",")))


def _prio_set(value: str) -> set[int]:
    return set() if value == "none" else {int(p) for p in value.split(",") if p.isdigit()}


def _per_priority_files(netdev: str, side: str, value: str) -> str:
    on = _prio_set(value)
    base = f"/sys/class/net/{netdev}/ecn/{side}/enable"
    return "; ".join(f"echo {int(p in on)} > {base}/{p}" for p in range(8))


def fix_command(setting: str, expected: str, device: str, netdev: str | None, port: int = 1) -> str:
    """A shell command (or an instruction, where no command applies) that sets ``setting`` to ``expected``."""
    dev = netdev or "<netdev>"
    if setting == "trust":
        if expected == "pcp":
            return f"dcb app flush dev {dev} dscp-prio   # mlx5 returns to PCP trust with no DSCP entries"
        return f"mlnx_qos -i {dev} --trust dscp   # or: add the fabric's DSCP map with `dcb app replace`"
    if setting == "dscp_prio":
        if expected == "none":
            return f"dcb app flush dev {dev} dscp-prio"
        return f"dcb app replace dev {dev} dscp-prio {expected}"
    if setting == "pfc":
        on = sorted(_prio_set(expected))
        return f"dcb pfc set dev {dev} prio-pfc all:off" + "".join(f" {p}:on" for p in on)
    if setting in ("prio_tc", "tc_bw", "tc_tsa"):
        return f"dcb ets set dev {dev} {setting.replace('_', '-')} {_indexed(expected)}"
    if setting == "prio_buffer":
        return f"dcb buffer set dev {dev} prio-buffer {_indexed(expected)}"
    if setting == "ecn":
        return _per_priority_files(dev, "roce_np", expected)
    if setting in ("dcqcn", "cc_algorithm"):
        if setting == "cc_algorithm":
            return (
                f"enable DCQCN on the RoCE priority: echo 1 > /sys/class/net/{dev}/ecn/roce_rp/enable/<prio>"
            )
        return _per_priority_files(dev, "roce_rp", expected)
    if setting == "mtu":
        return f"ip link set dev {dev} mtu {expected}"
    if setting == "roce_mode":
        mode = "2" if expected == "RoCE v2" else "1"
        return f"cma_roce_mode -d {device} -p {port} -m {mode}"
    if setting == "gid_index":
        return f"use GID index {expected} (NCCL_IB_GID_INDEX={expected}; perftest -x {expected})"
    if setting.startswith("dcqcn."):
        knob = setting.removeprefix("dcqcn.")
        return f"netd tune, or: echo {expected} > /sys/kernel/debug/mlx5/<PCI of {device}>/cc_params/{knob}"
    return f"set {setting} of {dev} to {expected}"
