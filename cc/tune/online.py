"""A scenario with the tuner in the loop, as a daemon would run it against real NICs.

Every ``epoch_us`` of simulated time the host ports' counters are turned into
:class:`~cc.model.observed.HostSignals` (what netd reads from a NIC), combined over the fabric's ports,
and handed to :meth:`cc.tune.tuner.Tuner.observe` with the parameters in force; a ``change`` or
``rollback`` is applied from the next step, as netd's applier would write it. The run is measured
exactly like :func:`cc.sim.scenario.run`, so the two can be compared.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from cc.model import DcqcnParams, HostSignals, combine
from cc.sim import MTU_BYTES, RunMetrics, Scenario, run_metrics
from cc.tune.recommendation import Recommendation
from cc.tune.tuner import Tuner

__all__ = ["OnlineRun", "run_online", "signals_from_ports"]


@dataclass
class OnlineRun:
    metrics: RunMetrics
    final: DcqcnParams
    actions: list[tuple[float, Recommendation]] = field(default_factory=list)  # (time µs, change/rollback)
    decisions: int = 0


def run_online(
    scenario: Scenario, tuner: Tuner, params: DcqcnParams | None = None, epoch_us: float = 1_000.0
) -> OnlineRun:
    in_force = params or DcqcnParams()
    engine = scenario.engine(in_force)
    topo = scenario.topology
    gbps = [topo.port_gbps(p) for p in range(topo.n_ports)]
    before, paused_before = engine.port_counters(), engine.nic_pause_us()
    actions: list[tuple[float, Recommendation]] = []
    decisions = 0
    while engine.now_us < scenario.end_us - 1e-9:
        start = engine.now_us
        engine.run(min(start + epoch_us, scenario.end_us))
        after, paused_after = engine.port_counters(), engine.nic_pause_us()
        interval = engine.now_us - start
        per_port = signals_from_ports(before, after, (paused_after - paused_before)[0], interval, gbps)
        signals = (
            combine(per_port) if per_port else HostSignals(interval / 1e6, max(gbps), 0.0, 0.0, 0.0, 0.0, 0.0)
        )
        before, paused_before = after, paused_after
        rec = tuner.observe(signals, in_force)
        decisions += 1
        if rec.action != "hold":
            in_force = rec.params
            engine.set_params(in_force)
            actions.append((engine.now_us, rec))
    engine.recorder.stop_us = engine.now_us
    engine.drain(scenario.end_us + scenario.drain_us)
    return OnlineRun(run_metrics(engine), in_force, actions, decisions)


def signals_from_ports(
    before: dict[str, np.ndarray],
    after: dict[str, np.ndarray],
    pause_us: np.ndarray,
    interval_us: float,
    port_gbps: Sequence[float],
    row: int = 0,
) -> list[HostSignals]:
    """Per host port signals over an interval, from cumulative port counters taken at its ends and
    the µs each port's NIC was paused in it. Ports that neither sent nor received are left out."""
    delta = {name: after[name][row] - before[name][row] for name in after}
    seconds = interval_us / 1e6
    out: list[HostSignals] = []
    for port, gbps in enumerate(port_gbps):
        tx, rx = delta["tx_bytes"][port], delta["rx_bytes"][port]
        if tx <= 0 and rx <= 0:
            continue
        packets = rx / MTU_BYTES
        out.append(
            HostSignals(
                interval_s=seconds,
                link_gbps=gbps,
                utilization=float(max(tx, rx) * 8 / (gbps * 1e9 * seconds)),
                ce_fraction=float(min(delta["ecn_marked"][port] / packets, 1.0)) if packets > 0 else 0.0,
                cnp_sent_per_s=float(delta["cnp_sent"][port] / seconds),
                cnp_handled_per_s=float(delta["cnp_handled"][port] / seconds),
                pause_fraction=float(min(pause_us[port] / interval_us, 1.0)),
                retransmits_per_s=float((delta["nak"][port] + delta["timeouts"][port]) / seconds),
            )
        )
    return out
