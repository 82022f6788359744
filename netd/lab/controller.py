"""The lab's DCQCN reaction points: ``cc.model.dcqcn.rp_step`` over every flow of a run, in one vector.

The host agents (C) send and receive; this controller is the rate-control half of the NIC. Each step
it reads, per flow, the CNPs the agent received and the bytes it sent since the last step, advances
the paper's reaction point (cut on CNP, alpha EWMA, fast recovery, additive and hyper increase) by
the real elapsed time, and writes the new current rate Rc back for the agent's pacer. Steps run
every ~1 ms, shorter than every DCQCN timer in the lab's parameters (netd/lab/params.py), so a step
holds at most one event of each kind, where rp_step is exact. A step that comes later than the
shortest of those timers (the cut period) is counted in :attr:`DcqcnController.late_steps`: the
reaction points stood still for that long (the run's summary reports it, so a figure measured while
the controller was starved says so).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from cc.model.dcqcn import RpState, rp_step
from cc.model.params import DcqcnParams
from netd.lab.shm import LAB_MAX_FLOWS, HostShm

__all__ = ["DcqcnController", "FlowSlot"]


@dataclass(frozen=True, slots=True)
class FlowSlot:
    index: int  # position in the controller's vectors
    host: int  # sending host
    slot: int  # entry in that host's flow table


class DcqcnController:
    def __init__(self, shms: dict[int, HostShm], params: DcqcnParams, line_rate_mbps: float) -> None:
        self.shms = shms
        self.params = params
        self.line = float(line_rate_mbps)
        self.flows: list[FlowSlot] = []
        self._used: dict[int, int] = dict.fromkeys(shms, 0)
        self._cnp = {h: s.flow_view("cnp_rx") for h, s in shms.items()}
        self._sent = {h: s.flow_view("tx_bytes") for h, s in shms.items()}
        self._rate = {h: s.flow_view("rate_bps") for h, s in shms.items()}
        self.state = RpState.new(0, self.line, params)
        self.active = np.zeros(0, dtype=bool)
        self._last_cnp = np.zeros(0)
        self._last_sent = np.zeros(0)
        self._last_t = 0.0
        self.steps = 0
        self.late_steps = 0
        self.max_gap_s = 0.0

    def add(self, host: int) -> FlowSlot:
        """Reserve a flow-table slot on ``host``; the flow starts with :meth:`start`."""
        slot = self._used[host]
        if slot >= LAB_MAX_FLOWS:
            raise ValueError(f"host {host} has no free flow slot ({LAB_MAX_FLOWS} per host)")
        self._used[host] += 1
        fs = FlowSlot(len(self.flows), host, slot)
        self.flows.append(fs)
        self.state = RpState.new(len(self.flows), self.line, self.params)
        self.active = np.zeros(len(self.flows), dtype=bool)
        self._last_cnp = np.zeros(len(self.flows))
        self._last_sent = np.zeros(len(self.flows))
        return fs

    def start(self, fs: FlowSlot, qpn: int, dst_ip: int, payload: int) -> None:
        """Publish the flow to its agent at line rate with fresh reaction-point state (as in the paper)."""
        i, p = fs.index, self.params
        for arr, value in (
            (self.state.rc, self.line),
            (self.state.rt, self.line),
            (self.state.alpha, p.initial_alpha),
            (self.state.alpha_timer_us, 0.0),
            (self.state.inc_timer_us, 0.0),
            (self.state.byte_counter, 0.0),
            (self.state.timer_stage, 0.0),
            (self.state.byte_stage, 0.0),
            (self.state.next_cut_us, -np.inf),
        ):
            arr[i] = value
        self.state.seen_cnp[i] = False
        f = self.shms[fs.host].s.flows[fs.slot]
        f.active = 0
        f.qpn, f.dst_ip, f.payload = qpn, dst_ip, payload
        f.rate_bps = int(self.line * 1e6)
        f.generation += 1
        f.active = 1  # last: the agent picks up a complete flow
        self._last_cnp[i] = float(self._cnp[fs.host][fs.slot])
        self._last_sent[i] = float(self._sent[fs.host][fs.slot])
        self.active[i] = True

    def stop(self, fs: FlowSlot) -> None:
        self.shms[fs.host].s.flows[fs.slot].active = 0
        self.active[fs.index] = False

    def stop_all(self) -> None:
        for shm in self.shms.values():
            for f in shm.s.flows:
                f.active = 0
        self.active[:] = False

    def _gather(self, views: dict[int, NDArray[np.uint64]]) -> NDArray[np.float64]:
        return np.array([float(views[f.host][f.slot]) for f in self.flows])

    def step(self, now: float | None = None) -> NDArray[np.float64]:
        """One reaction-point step over the elapsed time; returns Rc (Mb/s) per flow."""
        now = time.monotonic() if now is None else now
        if not self._last_t:
            self._last_t = now
            return self.state.rc
        dt_us = (now - self._last_t) * 1e6
        self._last_t = now
        self.steps += 1
        self.max_gap_s = max(self.max_gap_s, dt_us / 1e6)
        self.late_steps += dt_us > self.params.rp_rate_reduce_monitor_period
        cnp_total, sent_total = self._gather(self._cnp), self._gather(self._sent)
        cnps = np.where(self.active, cnp_total - self._last_cnp, 0.0)
        sent = np.where(self.active, sent_total - self._last_sent, 0.0)
        self._last_cnp, self._last_sent = cnp_total, sent_total
        rp_step(self.state, cnps, sent, dt_us, self.params, self.line)
        for f in self.flows:
            if self.active[f.index]:
                self._rate[f.host][f.slot] = np.uint64(self.state.rc[f.index] * 1e6)
        return self.state.rc
