"""The DCQCN fluid model (Zhu et al., "ECN or Delay: Lessons Learnt from Analysis of DCQCN and
TIMELY", CoNEXT 2016, Eq. 1-5; the same model as SIGCOMM'15 Sec. 4), written from the paper's
equations for the tests to hold the simulator against. Nothing here is taken from ``cc``.

Units: rates in packets/µs, times in µs, queue and thresholds in bytes, ``B`` in packets. For N
flows through capacity C:

    dq/dt     = sum Rc - C                                   p = RED(q)
    dalpha/dt = g/tau' [(1 - (1 - p)^(tau' Rc)) - alpha]
    dRt/dt    = -(Rt - Rc)/tau (1 - (1 - p)^(tau Rc))
                + R_AI Rc p (1 - p)^(F B) / ((1 - p)^-B - 1)
                + R_AI Rc p (1 - p)^(F T Rc) / ((1 - p)^(-T Rc) - 1)
    dRc/dt    = -Rc alpha/(2 tau) (1 - (1 - p)^(tau Rc))
                + (Rt - Rc)/2 Rc p / ((1 - p)^-B - 1)
                + (Rt - Rc)/2 Rc p / ((1 - p)^(-T Rc) - 1)

with p and Rc on the right taken one feedback delay tau* earlier.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cc.model import DcqcnParams


@dataclass(frozen=True)
class Fluid:
    capacity: float  # C, packets/µs
    tau: float  # CNP interval, µs
    tau_alpha: float  # alpha period tau', µs
    timer: float  # T, µs
    byte_packets: float  # B, packets
    f: int
    r_ai: float  # packets/µs
    g: float
    kmin: float  # bytes
    kmax: float
    pmax: float
    mtu: float

    @classmethod
    def of(cls, params: DcqcnParams, gbps: float, mtu: float) -> Fluid:
        per_us = 1 / (8 * mtu)  # Mb/s is a bit per µs -> packets/µs
        return cls(
            capacity=gbps * 1e3 * per_us,
            tau=params.np_min_time_between_cnps,
            tau_alpha=params.rp_dce_tcp_rtt,
            timer=params.rp_time_reset,
            byte_packets=params.rp_byte_reset / mtu,
            f=params.rp_threshold,
            r_ai=params.rp_ai_rate * per_us,
            g=params.g,
            kmin=params.kmin_bytes,
            kmax=params.kmax_bytes,
            pmax=params.pmax,
            mtu=mtu,
        )

    def mark(self, q: np.ndarray) -> np.ndarray:
        ramp = (q - self.kmin) / (self.kmax - self.kmin) * self.pmax
        return np.where(q <= self.kmin, 0.0, np.where(q > self.kmax, 1.0, ramp))

    def _events(self, p: np.ndarray, rc: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Byte- and timer-event rates and the chance each is past fast recovery (no mark in F periods)."""
        keep = np.log1p(-np.minimum(p, 1 - 1e-15))  # log(1 - p)
        with np.errstate(over="ignore"):  # (1 - p)^-B beyond a double: no event gets through, rate 0
            byte_rate = rc * p / np.expm1(-self.byte_packets * keep)
            timer_rate = rc * p / np.expm1(-self.timer * rc * keep)
        byte_ai = np.exp(self.f * self.byte_packets * keep)
        timer_ai = np.exp(self.f * self.timer * rc * keep)
        return byte_rate, timer_rate, byte_ai, timer_ai

    def equilibrium_queue(self, n: int) -> float:
        """The fixed point's queue: every derivative 0 gives Rc = C/N, alpha = 1 - (1 - p)^(tau' Rc),
        Rt - Rc from the dRt/dt balance, and p from the dRc/dt balance (bisection on log p)."""
        rc = np.array(self.capacity / n)

        def excess_cut(p: float) -> float:
            pp = np.array(p)
            cnp = -np.expm1(self.tau * rc * np.log1p(-pp))  # 1 - (1 - p)^(tau Rc)
            alpha = -np.expm1(self.tau_alpha * rc * np.log1p(-pp))
            byte_rate, timer_rate, byte_ai, timer_ai = self._events(pp, rc)
            gap = self.tau * self.r_ai * (byte_rate * byte_ai + timer_rate * timer_ai) / cnp
            return float(rc * alpha * cnp / self.tau - gap * (byte_rate + timer_rate))

        lo, hi = math.log(1e-12), math.log(self.pmax)
        for _ in range(200):  # cuts grow with p, increases shrink: one sign change
            mid = (lo + hi) / 2
            if excess_cut(math.exp(mid)) > 0:
                hi = mid
            else:
                lo = mid
        p = math.exp((lo + hi) / 2)
        return self.kmin + p / self.pmax * (self.kmax - self.kmin)

    def rates_after_a_join(
        self, join_us: float, until_us: float, delay_us: float, dt: float = 1.0
    ) -> np.ndarray:
        """Euler-integrate two flows, the second starting at line rate at ``join_us`` (alpha 1, as
        on a first CNP), each with its own Rc, Rt and alpha and one shared queue; feedback arrives
        ``delay_us`` late. Returns Rc per step, ``(steps, 2)``, packets/µs."""
        steps, lag = int(until_us / dt), max(1, int(round(delay_us / dt)))
        rc = np.array([self.capacity, 0.0])
        rt, alpha = rc.copy(), np.ones(2)
        q, history = 0.0, [(0.0, rc.copy())] * lag  # (p, Rc) as the senders learn them
        out = np.zeros((steps, 2))
        for k in range(steps):
            if k * dt >= join_us and rt[1] == 0.0:
                rc[1] = rt[1] = self.capacity
            live = rt > 0
            p_late, rc_late = history[k % lag]
            history[k % lag] = (float(self.mark(np.array(q))), rc.copy())
            if p_late > 0:
                log_keep = math.log1p(-min(p_late, 1 - 1e-15))
                cnp = -np.expm1(self.tau * rc_late * log_keep)
                mark_in_period = -np.expm1(self.tau_alpha * rc_late * log_keep)
                byte_rate, timer_rate, byte_ai, timer_ai = self._events(np.array(p_late), rc_late)
            else:  # no marks: one event per T µs and per B packets, all past fast recovery
                cnp = mark_in_period = np.zeros(2)
                byte_rate, timer_rate = rc_late / self.byte_packets, np.full(2, 1 / self.timer)
                byte_ai = timer_ai = np.ones(2)
            d_alpha = self.g / self.tau_alpha * (mark_in_period - alpha)
            d_rt = -(rt - rc) / self.tau * cnp + self.r_ai * (byte_rate * byte_ai + timer_rate * timer_ai)
            d_rc = -rc * alpha / (2 * self.tau) * cnp + (rt - rc) / 2 * (byte_rate + timer_rate)
            alpha = np.where(live, alpha + dt * d_alpha, alpha)
            rt = np.where(live, np.minimum(rt + dt * d_rt, self.capacity), 0.0)
            rc = np.where(live, np.clip(rc + dt * d_rc, 0.0, rt), 0.0)
            q = max(0.0, q + dt * (rc.sum() - self.capacity) * self.mtu)
            out[k] = rc
        return out
