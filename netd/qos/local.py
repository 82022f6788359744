"""Inconsistencies inside one host's QoS, found without any other host to compare with.

* ``pfc_without_ecn``: PFC is on for a priority where ECN (CNP generation) or DCQCN (rate reduction) is
  off. Congestion there pauses the link instead of slowing the senders: head-of-line blocking and pause
  spreading where DCQCN should have acted first.
* ``roce_on_lossy_priority``: the eBPF probes saw RoCEv2 packets (UDP 4791) whose DSCP maps, under the
  port's DSCP trust, to a priority without PFC: RoCE traffic that a full buffer drops instead of pausing.
  A DSCP the APP table does not list takes mlx5's default map, priority = DSCP >> 3. CNPs (the
  NIC's ``np_cnp_dscp``) are left out: they ride a priority without PFC by design. The probes count
  per host, not per port, so each port whose map sends that DSCP to a lossy priority is named.
* ``mtu_mismatch``: the port's MTU makes frames longer than its LLDP neighbour's Maximum Frame Size
  (:mod:`netd.qos.mtu` says which overhead and why).

Each is a :class:`~netd.model.config_finding.ConfigFinding`, the plain value the daemon also hands the
detector engine (one anomaly finding per value, docs/detection.md).

Values in, findings out: the service feeds the port readings, the latest eBPF sample and LLDP.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from netd.model.bpf import RoceClassCount
from netd.model.config_finding import CONFIG_KINDS, ConfigFinding
from netd.model.topology import LldpNeighbor
from netd.qos.fixes import fix_command
from netd.qos.mtu import mtu_mismatches
from netd.sources.qos import PortQos

__all__ = ["LOCAL_KINDS", "LocalFinding", "local_findings"]

LOCAL_KINDS = CONFIG_KINDS
LocalFinding = ConfigFinding  # the name this module has always used for them


def _pfc_without_ecn(p: PortQos) -> Iterable[ConfigFinding]:
    if p.pfc is None:
        return
    for prio in p.pfc:
        off = [name for name, on in (("ECN", p.ecn), ("DCQCN", p.dcqcn)) if on is not None and prio not in on]
        if not off:
            continue
        sides = [side for name, side in (("ECN", "roce_np"), ("DCQCN", "roce_rp")) if name in off]
        yield ConfigFinding(
            "pfc_without_ecn",
            p.device,
            p.port,
            p.netdev,
            prio,
            f"{p.netdev}: PFC on priority {prio} but {' and '.join(off)} off there; congestion pauses the "
            "link instead of slowing the senders",
            "; ".join(f"echo 1 > /sys/class/net/{p.netdev}/ecn/{side}/enable/{prio}" for side in sides),
        )


def _priority_of(p: PortQos, dscp: int) -> int:
    table = dict(p.dscp_prio or ())
    return table.get(dscp, dscp >> 3)


def _roce_on_lossy(p: PortQos, classes: Sequence[RoceClassCount]) -> Iterable[ConfigFinding]:
    if p.pfc is None or p.trust != "dscp":
        return  # under PCP trust the DSCP does not pick the priority; the VLAN PCP is not probed
    # CNPs are RoCEv2 packets too, but they are sent on their own priority without PFC on purpose
    # (np_cnp_dscp, 48 by default: reference §5); only data traffic must be lossless.
    cnp_dscp = p.dcqcn_params.get("np_cnp_dscp", 48)
    seen: dict[int, int] = {}
    for c in classes:
        if c.packets > 0 and c.dscp != cnp_dscp:
            prio = _priority_of(p, c.dscp)
            if prio not in p.pfc:
                seen[c.dscp] = seen.get(c.dscp, 0) + c.packets
    for dscp, packets in sorted(seen.items()):
        prio = _priority_of(p, dscp)
        pfc = ",".join(str(q) for q in sorted(p.pfc)) or "none"
        yield ConfigFinding(
            "roce_on_lossy_priority",
            p.device,
            p.port,
            p.netdev,
            prio,
            f"{p.netdev}: {packets} RoCEv2 packets with DSCP {dscp} -> priority {prio}, which has no PFC "
            f"(PFC on: {pfc})",
            fix_command("pfc", ",".join(str(q) for q in sorted({*p.pfc, prio})), p.device, p.netdev, p.port),
            subject=f"dscp {dscp}",  # two DSCPs on one lossy priority are two findings
        )


def local_findings(
    ports: Sequence[PortQos],
    roce_classes: Sequence[RoceClassCount] = (),
    neighbors: Mapping[str, Sequence[LldpNeighbor]] | None = None,
) -> list[ConfigFinding]:
    """Every local inconsistency of one host (``roce_classes``: the eBPF probes' RoCEv2 counts, if any;
    ``neighbors``: netdev -> its LLDP neighbours, from the topology)."""
    out: list[ConfigFinding] = []
    for p in ports:
        out.extend(_pfc_without_ecn(p))
        out.extend(_roce_on_lossy(p, roce_classes))
    out.extend(mtu_mismatches(ports, neighbors or {}))
    return out
