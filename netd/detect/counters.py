"""Counter health: counters stuck at saturation, counters that stopped moving, reads that fail.

* ``counter_saturated`` (per counter): a legacy IB PMA counter at its register maximum. It saturates
  instead of wrapping, so from then on its rate reads 0 while the errors it counts go unseen.
* ``counter_stalled`` (per counter): on an ACTIVE port, a data counter did not move at all during a
  tick in which the *other* source counted at least ``stall_min_link_fraction`` of line rate for the
  same traffic — PMA ``port_rcv_data``/``port_xmit_data`` against ethtool's
  ``rx/tx_vport_rdma_unicast_bytes`` (both RDMA-only on mlx5), in both directions. Intervals shorter
  than ``stall_min_interval`` are not judged: ``hw_counters`` reads within the driver's ``lifespan``
  (10 ms) return the same cached values. It resolves when the counter moves again.
* ``counter_read_error``: counter files that failed to parse on a port, or a whole source that failed
  this tick; resolves after ``read_error_quiet_ticks`` clean ticks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from netd.config.detect import DetectConfig
from netd.detect.base import judgeable, port_scope, prune
from netd.detect.findings import Candidate, Scope, Severity
from netd.detect.inputs import DetectInput, InputPath, PortInput

__all__ = ["KIND_READ_ERROR", "KIND_SATURATED", "KIND_STALLED", "STALL_PAIRS", "CounterHealthDetector"]

KIND_SATURATED = "counter_saturated"
KIND_STALLED = "counter_stalled"
KIND_READ_ERROR = "counter_read_error"
# (vocabulary name of the RDMA counter, ethtool name counting the same traffic)
STALL_PAIRS = (("rx_bytes", "rx_vport_rdma_unicast_bytes"), ("tx_bytes", "tx_vport_rdma_unicast_bytes"))
_SOURCE_SCOPE = "source:"


@dataclass(slots=True)
class _Errors:
    errors: tuple[str, ...] = ()
    clean: int = 0


class CounterHealthDetector:
    kinds: tuple[str, ...] = (KIND_SATURATED, KIND_STALLED, KIND_READ_ERROR)

    def __init__(self, cfg: DetectConfig) -> None:
        self.cfg = cfg
        self._inputs: dict[tuple[str, int], PortInput] = {}
        self._stalled: dict[tuple[str, int, str], dict[str, Any]] = {}  # (device, port, counter)
        self._errors: dict[tuple[str, int], _Errors] = {}  # ports; ("", 0) keys hold nothing
        self._sources: dict[str, _Errors] = {}

    def evaluate(self, inp: DetectInput) -> list[Candidate]:
        if inp.path is InputPath.TICK:
            present = [p.key for p in inp.ports]
            for state in (self._inputs, self._stalled, self._errors):
                prune(state, present)
            dt = inp.interval_s if judgeable(inp, self.cfg) else None
            for p in inp.ports:
                self._inputs[p.key] = p
                if dt is not None and dt >= self.cfg.stall_min_interval:
                    self._stall_step(p, dt)
                self._error_step(self._errors.setdefault(p.key, _Errors()), p.read_errors)
            for source in set(self._sources) | set(inp.source_errors):
                err = inp.source_errors.get(source)
                self._error_step(self._sources.setdefault(source, _Errors()), (err,) if err else ())
        return self._candidates(inp.host)

    def _stall_step(self, p: PortInput, dt: float) -> None:
        if not p.up or not p.rate_gbps:
            return
        floor = self.cfg.stall_min_link_fraction * p.rate_gbps * 1e9 / 8 * dt  # bytes
        for vocab, eth in STALL_PAIRS:
            rdma, netdev = p.counter(vocab), p.netdev_counters.get(eth)
            if rdma is None or netdev is None:
                continue  # one side unknown this tick (first reading, reset, not offered)
            for name, mine, other in ((vocab, rdma, netdev), (eth, netdev, rdma)):
                key = (p.device, p.port, name)
                if mine == 0 and other >= floor:
                    self._stalled[key] = {
                        "interval_s": round(dt, 3),
                        "counter": name,
                        "delta": 0,
                        "other_counter": eth if name == vocab else vocab,
                        "other_delta": other,
                        "other_gbps": round(other * 8 / dt / 1e9, 3),
                    }
                elif mine > 0:
                    self._stalled.pop(key, None)  # moving again; idle ticks (both 0) change nothing

    def _error_step(self, st: _Errors, errors: tuple[str, ...]) -> None:
        if errors:
            st.errors, st.clean = errors, 0
        elif st.errors:
            st.clean += 1
            if st.clean >= self.cfg.read_error_quiet_ticks:
                st.errors, st.clean = (), 0

    def _candidates(self, host: str) -> list[Candidate]:
        out = []
        for key, p in self._inputs.items():
            for raw in sorted(p.saturated):
                text = (
                    f"{p.device}/{p.port} {raw} is stuck at its maximum (it saturates instead of wrapping): "
                    "its rate is unknown and new errors are invisible; first check the errors it counted "
                    "(cable, optics), then reset it (`perfquery -R`)"
                )
                scope = port_scope(host, p, subject=raw)
                out.append(Candidate(KIND_SATURATED, scope, Severity.WARNING, text, {"counter": raw}))
            errs = self._errors.get(key)
            if errs is not None and errs.errors:
                text = (
                    f"{p.device}/{p.port}: {len(errs.errors)} counter file(s) cannot be read "
                    f"({errs.errors[0]}): their rates are unknown; first check the driver's kernel log and "
                    "`netd check`"
                )
                errors = {"read_errors": list(errs.errors), "clean_ticks": errs.clean}
                out.append(Candidate(KIND_READ_ERROR, port_scope(host, p), Severity.WARNING, text, errors))
        for (device, port, name), ev in self._stalled.items():
            p = self._inputs[(device, port)]
            text = (
                f"{device}/{port} {name} stopped moving while {ev['other_counter']} counted "
                f"{ev['other_gbps']:g} Gb/s of the same traffic: a frozen counter source (firmware or "
                "driver), so every rate from it is wrong; first check the kernel log and the NIC firmware"
            )
            out.append(Candidate(KIND_STALLED, port_scope(host, p, subject=name), Severity.WARNING, text, ev))
        for source, st in self._sources.items():
            if st.errors:
                text = (
                    f"source {source} failed: {st.errors[0]}; its counters are missing from this host's "
                    "metrics; first check `netd check`"
                )
                scope = Scope(host=host, subject=_SOURCE_SCOPE + source)
                out.append(Candidate(KIND_READ_ERROR, scope, Severity.WARNING, text, {"error": st.errors[0]}))
        return out
