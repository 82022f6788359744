"""This host's scorer inputs: one :class:`ScoreInput` per RDMA port, from an observation and a topology.

It sits beside :mod:`netd.series.port_signals` (same layer): it reads the per-second signals of each port and
turns them into the four ratios of :mod:`netd.congestion.score`, and labels each port with its ToR, spine and
rail from the topology.
"""

from __future__ import annotations

from collections.abc import Collection

from netd.config.service import CongestionConfig
from netd.congestion.score import Components, Ramp, ScoreModel
from netd.congestion.scorer import CongestionScorer, Levels, ScoreInput
from netd.model.topology import Topology
from netd.series.port_signals import PortSignals, netdev_signals, port_signals
from netd.series.tracker import Observation, PortView

__all__ = ["components", "host_inputs", "scorer_from_config"]


def _ratio(events: float | None, packets: float | None) -> float | None:
    if events is None:
        return None
    if not packets:
        return 1.0 if events > 0 else 0.0  # errors on an idle port are not diluted by traffic
    return events / packets


def components(view: PortView, signals: PortSignals) -> Components:
    if view.resets:
        # A counter went backwards: a device or driver reset, and a 32-bit q-counter that restarted
        # from high up reads as a huge wrap. Nothing of this port is judged this tick (as the
        # detectors' feed does), or a reset would score as a loss burst.
        return Components()
    rx_pkts, tx_pkts = view.rate("rx_packets"), view.rate("tx_packets")
    packets = None if rx_pkts is None and tx_pkts is None else (rx_pkts or 0.0) + (tx_pkts or 0.0)
    pauses = [f for pp in signals.pfc for f in (pp.rx_pause_fraction, pp.tx_pause_fraction) if f is not None]
    loss_events = [x for x in (signals.errors_per_s, signals.retransmits_per_s) if x is not None]
    return Components(
        ce_fraction=signals.ce_fraction,
        cnp_per_packet=None
        if signals.cnp_handled_per_s is None
        else _ratio(signals.cnp_handled_per_s, tx_pkts),
        pause_fraction=max(pauses) if pauses else None,
        loss_per_packet=_ratio(sum(loss_events), packets) if loss_events else None,
        rx_packets_per_s=rx_pkts,
        tx_packets_per_s=tx_pkts,
    )


def host_inputs(
    obs: Observation, topology: Topology | None, stormed: Collection[tuple[str | None, int | None]] = ()
) -> list[ScoreInput]:
    """``stormed``: ports the detectors hold a PFC or pause storm open on
    (:func:`netd.detect.pfc.stormed_ports`); their level counts the storm."""
    host = obs.snapshot.host
    out = []
    for v in obs.ports:
        p = v.sample
        netdev = obs.netdev(p.netdev)
        place = topology.placement(p.device, p.port) if topology is not None else None
        ethtool = netdev_signals(netdev) if netdev is not None and netdev.rates else None
        out.append(
            ScoreInput(
                host=host,
                device=p.device,
                port=p.port,
                components=components(v, port_signals(v, netdev, ethtool)),
                up=p.state is None or p.up,
                netdev=p.netdev,
                tor=place.tor if place else None,
                spine=place.spine if place else None,
                rail=place.rail if place else None,
                storm_events=bool(ethtool and ethtool.pause_storm_error_events)
                or (p.device, p.port) in stormed,
            )
        )
    return out


def scorer_from_config(c: CongestionConfig) -> CongestionScorer:
    """The scorer with the configured ramps and levels (weights are fixed by the documented formula)."""
    ramps = {
        name: Ramp(*getattr(c, name))
        for name in ("ce_fraction", "cnp_per_packet", "pause_fraction", "loss_per_packet")
    }
    levels = Levels(c.busy, c.congested, c.severe, c.margin, c.hold_ticks, c.alpha, c.storm_pause_fraction)
    return CongestionScorer(ScoreModel(ramps=ramps, min_packets_per_s=c.min_packets_per_s), levels)
