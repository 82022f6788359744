"""This host's inter-node links as the NCCL cost model sees them: line rate, and what congestion takes.

Pure: an :class:`~netd.series.tracker.Observation` in, a frozen :class:`LinkConditions` out. The inputs
are the same measured signals the congestion score is built from (netd.series.port_signals), kept in physical
units because the α–β model needs a bandwidth and a latency, not a score:

* **pause fraction** — the larger of the receive direction (the peer paused this port: it could
  not send) and the transmit direction (this port paused the peer: it could not receive), over
  PFC priorities. The port carries no traffic for that share of the time.
* **DCQCN rate cuts** — every CNP the NIC handled cut one flow's rate by ``cut`` (α/2 with α
  near 1 under sustained marking, bounded by ``rp_min_dec_fac``) and the flow needs about one
  rate-increase timer period (``rp_time_reset``) to win it back, so the share of capacity lost is
  ``min(0.9, cnp_handled_per_s × cut × rp_time_reset)``. Port-level CNP counts sum over all the
  port's QPs, so this is an upper bound for any one flow. The NIC knobs are cc.model.params'
  (the mlx5 firmware defaults) unless the caller passes the ones in force.
* **queueing delay** — ECN marking means a queue between the switch's Kmin and Kmax; inverting
  RED, the CE fraction p gives ``q = Kmin + min(p / Pmax, 1) × (Kmax − Kmin)`` bytes, and
  ``q / line rate`` of extra latency on every inter-node step. Kmin/Kmax/Pmax are the switch
  profile of ``[tuning]`` (given for 200 Gb/s and scaled with port speed, so the delay is the same
  at any speed).

``effective = line × (1 − pause) × (1 − cut share)``, summed over the host's up ports.
"""

from __future__ import annotations

from dataclasses import dataclass

from cc.model.params import DcqcnParams
from netd.series.port_signals import port_signals
from netd.series.tracker import Observation

__all__ = ["LinkConditions", "PortCondition", "link_conditions"]

MAX_CUT_SHARE = 0.9
REFERENCE_GBPS = 200.0  # the port speed the switch's Kmin/Kmax are given for ([tuning] switch_*)


@dataclass(frozen=True, slots=True)
class PortCondition:
    device: str
    port: int
    line_gbps: float
    pause_fraction: float = 0.0
    cnp_handled_per_s: float = 0.0
    ce_fraction: float = 0.0
    cut_share: float = 0.0
    queue_delay_us: float = 0.0

    @property
    def effective_gbps(self) -> float:
        return self.line_gbps * (1.0 - self.pause_fraction) * (1.0 - self.cut_share)


@dataclass(frozen=True, slots=True)
class LinkConditions:
    """The host's up RDMA ports, measured over the last tick (``measured`` False before any rate)."""

    host: str
    ports: tuple[PortCondition, ...] = ()
    measured: bool = False
    emulated: bool = False

    @property
    def nominal_gbps(self) -> float:
        return sum(p.line_gbps for p in self.ports)

    @property
    def effective_gbps(self) -> float:
        return sum(p.effective_gbps for p in self.ports)

    @property
    def queue_delay_us(self) -> float:
        return max((p.queue_delay_us for p in self.ports), default=0.0)

    def as_dict(self) -> dict[str, object]:
        return {
            "host": self.host,
            "measured": self.measured,
            "emulated": self.emulated,
            "nominal_gbps": round(self.nominal_gbps, 3),
            "effective_gbps": round(self.effective_gbps, 3),
            "queue_delay_us": round(self.queue_delay_us, 3),
            "ports": [
                {
                    "device": p.device,
                    "port": p.port,
                    "line_gbps": p.line_gbps,
                    "pause_fraction": round(p.pause_fraction, 6),
                    "cnp_handled_per_s": round(p.cnp_handled_per_s, 3),
                    "ce_fraction": round(p.ce_fraction, 6),
                    "cut_share": round(p.cut_share, 6),
                    "queue_delay_us": round(p.queue_delay_us, 3),
                    "effective_gbps": round(p.effective_gbps, 3),
                }
                for p in self.ports
            ],
        }


def cut_share(cnp_handled_per_s: float, params: DcqcnParams) -> float:
    alpha = params.rp_initial_alpha_value / 1024
    cut = min(alpha / 2 ** (params.rp_gd - 10), 1.0 - params.rp_min_dec_fac / 100)
    return min(MAX_CUT_SHARE, max(cnp_handled_per_s, 0.0) * cut * params.rp_time_reset * 1e-6)


def queue_delay_us(ce_fraction: float, line_gbps: float, params: DcqcnParams) -> float:
    """Kmin/Kmax are for a 200 Gb/s port and scale with port speed, so the delay does not depend on it."""
    if ce_fraction <= 0 or line_gbps <= 0:
        return 0.0
    share = min(ce_fraction / params.pmax, 1.0) if params.pmax > 0 else 1.0
    depth_at_200g = params.kmin_bytes + share * (params.kmax_bytes - params.kmin_bytes)
    return depth_at_200g * 8 / (REFERENCE_GBPS * 1e3)  # bytes / (Gb/s) -> µs


def link_conditions(obs: Observation, params: DcqcnParams | None = None) -> LinkConditions:
    params = params or DcqcnParams()
    ports = []
    for view in obs.ports:
        sample = view.sample
        if not (sample.state is None or sample.up) or not sample.rate_gbps:
            continue
        sig = port_signals(view, obs.netdevs.get(sample.netdev) if sample.netdev else None)
        pauses = [f for pp in sig.pfc for f in (pp.rx_pause_fraction, pp.tx_pause_fraction) if f is not None]
        cnp = sig.cnp_handled_per_s or 0.0
        ce = sig.ce_fraction or 0.0
        ports.append(
            PortCondition(
                device=sample.device,
                port=sample.port,
                line_gbps=sample.rate_gbps,
                pause_fraction=min(max(pauses, default=0.0), 1.0),
                cnp_handled_per_s=cnp,
                ce_fraction=ce,
                cut_share=cut_share(cnp, params),
                queue_delay_us=queue_delay_us(ce, sample.rate_gbps, params),
            )
        )
    return LinkConditions(
        host=obs.snapshot.host,
        ports=tuple(ports),
        measured=any(v.rates for v in obs.ports),
        emulated=obs.snapshot.emulated,
    )
