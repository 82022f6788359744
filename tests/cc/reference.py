"""The numpy reference of the compiled parts of the simulator's step (cc.sim.kernel): the DCQCN
rules of cc.model.dcqcn, the switch egress, PFC and the NIC, as the engine ran them in numpy. The
tests run the engine on both and compare the bits."""

from __future__ import annotations

import numpy as np

from cc.model import NpState, ParamBatch, RpState, np_step, rp_step
from cc.sim.draws import uniform
from cc.sim.kernel import Egress, PauseLimits, StepKernel
from cc.sim.network import MTU_BYTES
from cc.sim.ring import EmissionRing


class NumpyStep(StepKernel):
    """:class:`cc.sim.kernel.StepKernel`'s parts in numpy (:func:`cc.model.dcqcn.np_step` and
    ``rp_step`` for the rules)."""

    fused = False  # step by step: the compiled loop is what this is compared with

    def __init__(self, params: ParamBatch) -> None:
        super().__init__(params)
        self.params = params
        self._wide = params

    def _widened(self, columns: int) -> ParamBatch:
        if self._wide.rp_ai_rate.shape[1] != columns:
            self._wide = self.params.widened(columns)
        return self._wide

    def np_step(
        self,
        state: NpState,
        marked: np.ndarray,
        seed: int,
        flow_ids: np.ndarray,
        t: int,
        dt_us: float,
        ecn: np.ndarray,
        cnp_sent: np.ndarray,
        cnp_ring: np.ndarray,
        cnp_delay: np.ndarray,
    ) -> bool:
        ce = np.floor(marked / MTU_BYTES + uniform(seed, flow_ids, t))
        ecn += ce
        cnps = np_step(state, ce, dt_us, self._widened(ce.shape[1]))
        if not np.count_nonzero(cnps):
            return False
        cnp_sent += cnps
        rows, flows = cnps.shape
        slot = (t + cnp_delay) % cnp_ring.shape[0]
        cell = np.arange(rows)[:, None] * flows + np.arange(flows)[None, :]
        cnp_ring.reshape(-1)[slot * (rows * flows) + cell] += cnps
        return True

    def arrive(
        self,
        ring: EmissionRing,
        phase: int,
        backlog: np.ndarray,
        marked: np.ndarray,
        delivered: np.ndarray,
        rx: np.ndarray,
    ) -> tuple[np.ndarray, bool]:
        hop_i, rx_i, hop_j, rx_j, (hw, hp), (rw, rp) = ring.gathers(phase)
        hop_b, hop_m = ring.bytes.take(hop_i), ring.marks.take(hop_i)
        rx_b, rx_m = ring.bytes.take(rx_i), ring.marks.take(rx_i)
        if ring.fractional:
            hop_b = ring.bytes.take(hop_j) * hp + hop_b * hw
            hop_m = ring.marks.take(hop_j) * hp + hop_m * hw
            rx_b = ring.bytes.take(rx_j) * rp + rx_b * rw
            rx_m = ring.marks.take(rx_j) * rp + rx_m * rw
        backlog += hop_b
        marked += hop_m
        delivered += rx_b
        rx += rx_b
        return rx_m, bool(np.count_nonzero(rx_m))

    def egress(
        self,
        backlog: np.ndarray,
        marked: np.ndarray,
        queue_flat: np.ndarray,
        ingress_flat: np.ndarray,
        seen: np.ndarray | None,
        egress: Egress,
        emit_b: np.ndarray,
        emit_m: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, bool, np.ndarray, float]:
        standing, departed, marking = self._egress(backlog, marked, queue_flat, seen, egress, emit_b, emit_m)
        held = np.bincount(ingress_flat, backlog.reshape(-1), minlength=standing.size).reshape(standing.shape)
        return standing, departed, marking, held, float(standing.sum())

    def _egress(
        self,
        backlog: np.ndarray,
        marked: np.ndarray,
        queue_flat: np.ndarray,
        seen: np.ndarray | None,
        egress: Egress,
        emit_b: np.ndarray,
        emit_m: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, bool]:
        rows, keys = backlog.shape[0], egress.keys
        qlen = np.bincount(queue_flat, backlog.reshape(-1), minlength=rows * keys).reshape(rows, keys)
        if not np.count_nonzero(qlen):
            emit_b.fill(0.0)
            emit_m.fill(0.0)
            return qlen, np.zeros_like(qlen), False
        queue_index = queue_flat.reshape(backlog.shape)
        departed = _serve(qlen, seen, egress)
        standing = qlen - departed
        share = (departed / np.maximum(qlen, 1e-12)).take(queue_index)
        out = np.multiply(backlog, share, out=emit_b)
        out_m = np.multiply(marked, share, out=emit_m)
        backlog -= out
        marked -= out_m
        seen_queue = standing + 0.5 * departed
        if not float(seen_queue.max()) > egress.kmin_floor:
            return standing, departed, False
        mark = ((seen_queue - egress.kmin) * egress.slope).clip(0.0, egress.pmax)
        mark[seen_queue > egress.kmax] = 1.0
        out_m += (out - out_m) * mark.take(queue_index)
        return standing, departed, True

    def pause(
        self, occupancy: np.ndarray, was: np.ndarray, level: np.ndarray, limits: PauseLimits
    ) -> tuple[np.ndarray, np.ndarray | None]:
        e = limits
        rows = occupancy.shape[0]
        bins = (np.arange(rows)[:, None] * e.n_switches + e.switch_of[None, :]).ravel()
        used = np.bincount(bins, occupancy[:, e.counted].ravel(), minlength=rows * e.n_switches)
        share = np.empty((rows, e.n_switches + 1))
        share[:, :-1] = e.alpha * np.maximum(e.pool - used.reshape(rows, e.n_switches), 0.0)
        share[:, -1] = np.inf
        xoff = np.minimum(e.xoff, share.take(e.ingress_col, axis=1) + e.lossy_inf)
        paused = (occupancy > xoff) | (was & (occupancy > xoff * e.xon_ratio))
        new_level = np.where(was, level, np.maximum(xoff, occupancy - e.key_cap))
        level[:] = np.where(paused, new_level, np.inf)
        beyond = occupancy - (new_level + e.headroom)
        if not beyond.max() > 0:
            return paused, None
        return paused, np.divide(
            np.maximum(beyond, 0.0), occupancy, out=np.zeros_like(beyond), where=beyond > 0
        )

    def send(
        self,
        rc: np.ndarray,
        demand: np.ndarray,
        active: np.ndarray,
        paused: np.ndarray | None,
        ports: np.ndarray | None,
        port_line: np.ndarray,
        dt_us: float,
        owed: np.ndarray,
        sent_total: np.ndarray,
        tx: np.ndarray,
    ) -> np.ndarray:
        rate = np.minimum(rc, demand)
        rate *= active
        if paused is not None:
            rate *= ~paused
        if ports is not None:
            load = np.bincount(ports.reshape(-1), rate.reshape(-1), minlength=port_line.size)
            rate *= np.minimum(1.0, port_line / np.maximum(load, 1e-9)).take(ports)
        sent = np.minimum(rate * (dt_us / 8.0), owed)
        owed -= sent
        sent_total += sent
        tx += sent
        return sent

    def rp_step(
        self, state: RpState, cnps: np.ndarray, sent: np.ndarray, dt_us: float, line: np.ndarray
    ) -> None:
        rp_step(state, cnps, sent, dt_us, self._widened(cnps.shape[1]), line)


def _serve(qlen: np.ndarray, seen: np.ndarray | None, egress: Egress) -> np.ndarray:
    """Bytes each egress queue sends this step: line rate, strict priority, nothing if paused."""
    rows, links, prios = qlen.shape[0], egress.link_cap.size, egress.prios
    if prios == 1:
        departed = np.minimum(qlen, np.append(egress.link_cap, np.inf))
        if seen is not None:
            departed[seen] = 0.0
        return departed
    budget = np.broadcast_to(egress.link_cap, (rows, links)).copy()
    per_prio = qlen[:, :-1].reshape(rows, links, prios)
    blocked = None if seen is None else seen[:, :-1].reshape(rows, links, prios)
    out = np.zeros((rows, links, prios))
    for pi in range(prios):  # priorities are ordered highest first
        take = np.minimum(per_prio[:, :, pi], budget)
        if blocked is not None:
            take[blocked[:, :, pi]] = 0.0
        budget -= take
        out[:, :, pi] = take
    return np.concatenate((out.reshape(rows, links * prios), qlen[:, -1:]), axis=1)
