"""The faults the labelled traces inject (see netd.emulated.faults for the layer that applies them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from netd.emulated.fabric_host import EmulatedFabric
from netd.emulated.faults import Fault, Label, SliceDeltas
from netd.model.snapshot import CounterGroup
from netd.sources.counter_specs import describe

__all__ = [
    "CnpShift",
    "CounterSaturation",
    "CounterStall",
    "DriverReset",
    "LinkFlap",
    "LossBurst",
    "RateGlitch",
    "ReadGlitch",
    "SpreadingVictim",
    "StuckReceiver",
]

HostPort = tuple[int, int]
PRIORITY = 3  # the emulator's lossless priority
_TRAFFIC = ("rx_bytes", "rx_packets", "tx_bytes", "tx_packets", "ecn_marked_rx", "cnp_sent", "cnp_handled")
_Q32 = 1 << 32


def _blend(d: SliceDeltas, name: str, hp: HostPort, ov: float, value: float) -> None:
    """Replace the ``ov`` part of the slice's count with what the fault makes it."""
    arr = d[name]
    arr[hp] = arr[hp] * (1 - ov) + value


@dataclass
class StuckReceiver(Fault):
    feeders: tuple[HostPort, ...] = ()

    def edit_deltas(self, d: SliceDeltas, ov: float, slice_s: tuple[float, float], refresh_us: float) -> None:
        sim_us = d.deltas.sim_us
        r = (self.host, self.port)
        for name in _TRAFFIC:
            _blend(d, name, r, ov, 0.0)
        _blend(d, "tx_pause_duration_us", r, ov, ov * sim_us)
        _blend(d, "tx_pause_frames", r, ov, ov * sim_us / refresh_us)
        for f in self.feeders:
            _blend(d, "rx_pause_duration_us", f, ov, ov * sim_us)
            _blend(d, "rx_pause_frames", f, ov, ov * sim_us / refresh_us)
            for name in ("tx_bytes", "tx_packets", "cnp_handled"):
                _blend(d, name, f, ov, 0.0)

    def labels(self) -> list[Label]:
        out = [Label("pause_storm", self.host, self.port, self.start_s, self.end_s)]
        out += [
            Label("pfc_storm", h, p, self.start_s, self.end_s, priority=PRIORITY) for h, p in self.feeders
        ]
        return out


@dataclass
class SpreadingVictim(Fault):
    pause_fraction: float = 0.4

    def edit_deltas(self, d: SliceDeltas, ov: float, slice_s: tuple[float, float], refresh_us: float) -> None:
        sim_us, hp, paused = d.deltas.sim_us, (self.host, self.port), ov * self.pause_fraction
        _blend(d, "rx_pause_duration_us", hp, ov, paused * sim_us)
        _blend(d, "rx_pause_frames", hp, ov, paused * sim_us / refresh_us)
        _blend(d, "rx_pause_transitions", hp, ov, ov * sim_us / 1000.0)  # ~1 pause episode per ms
        for name in ("tx_bytes", "tx_packets"):
            d[name][hp] *= 1 - paused

    def labels(self) -> list[Label]:
        return [
            Label("congestion_spreading", self.host, self.port, self.start_s, self.end_s, priority=PRIORITY)
        ]


@dataclass
class _CountingFault(Fault):
    """Adds events at a rate to raw counters, carrying fractions between slices."""

    _carry: dict[str, float] = field(default_factory=dict)

    def _add(
        self, fabric: EmulatedFabric, name: str, per_s: float, seconds: float, wrap: bool = False
    ) -> None:
        hw, _ = fabric.counters(self.host, self.port)
        exact = per_s * seconds + self._carry.get(name, 0.0)
        whole = int(exact)
        self._carry[name] = exact - whole
        value = hw.get(name, 0) + whole
        hw[name] = value % _Q32 if wrap else value


@dataclass
class LossBurst(_CountingFault):
    events_per_s: float = 200.0
    # share of each loss counter (mlx5 hw_counters names), and whether it is a 32-bit q-counter
    mix: tuple[tuple[str, float, bool], ...] = (
        ("out_of_sequence", 0.5, True),
        ("packet_seq_err", 0.2, True),
        ("roce_adp_retrans", 0.25, False),
        ("local_ack_timeout_err", 0.05, True),
    )

    def edit_counters(self, fabric: EmulatedFabric, start_s: float, wall_s: float, ov: float) -> None:
        for name, share, wrap in self.mix:
            self._add(fabric, name, self.events_per_s * share, ov * wall_s, wrap)

    def labels(self) -> list[Label]:
        return [Label("loss", self.host, self.port, self.start_s, self.end_s)]


@dataclass
class CnpShift(_CountingFault):
    cnp_per_s: float = 3000.0
    marks_per_cnp: float = 1.5

    def edit_counters(self, fabric: EmulatedFabric, start_s: float, wall_s: float, ov: float) -> None:
        self._add(fabric, "np_cnp_sent", self.cnp_per_s, ov * wall_s)
        self._add(fabric, "np_ecn_marked_roce_packets", self.cnp_per_s * self.marks_per_cnp, ov * wall_s)

    def labels(self) -> list[Label]:
        return [Label("baseline_shift", self.host, self.port, self.start_s, self.end_s)]


@dataclass
class LinkFlap(Fault):
    downs: tuple[tuple[float, float], ...] = ()  # (carrier lost, carrier back), inside [start_s, end_s]
    _down_now: bool = False

    def down_fraction(self, start_s: float, wall_s: float) -> float:
        end = start_s + wall_s
        return sum(max(0.0, min(b, end) - max(a, start_s)) for a, b in self.downs) / wall_s if wall_s else 0.0

    def edit_deltas(self, d: SliceDeltas, ov: float, slice_s: tuple[float, float], refresh_us: float) -> None:
        down = self.down_fraction(*slice_s)
        if down:
            for name in (*_TRAFFIC, "rx_pause_duration_us", "rx_pause_frames"):
                d[name][self.host, self.port] *= 1 - down

    def edit_counters(self, fabric: EmulatedFabric, start_s: float, wall_s: float, ov: float) -> None:
        hw, eth = fabric.counters(self.host, self.port)
        for a, _ in self.downs:
            if start_s <= a < start_s + wall_s:
                hw["link_downed"] = min(hw.get("link_downed", 0) + 1, 255)  # 8 bits, saturating
                eth["link_down_events_phy"] = eth.get("link_down_events_phy", 0) + 1
        at = start_s + wall_s
        down = any(a <= at < b for a, b in self.downs)
        if down != self._down_now:
            self._down_now = down
            state = ("1: DOWN", "2: Polling") if down else ("4: ACTIVE", "5: LinkUp")
            fabric.set_port_state(self.host, self.port, *state)

    def labels(self) -> list[Label]:
        return [Label("link_flap", self.host, self.port, self.start_s, self.end_s)]


@dataclass
class CounterSaturation(Fault):
    counter: str = "symbol_error"

    def touches(self, start_s: float, wall_s: float) -> bool:
        return start_s + wall_s > self.start_s and start_s < self.end_s + wall_s  # the reset comes after

    def edit_counters(self, fabric: EmulatedFabric, start_s: float, wall_s: float, ov: float) -> None:
        hw, _ = fabric.counters(self.host, self.port)
        at = start_s + wall_s
        if self.start_s <= at < self.end_s:
            hw[self.counter] = describe("mlx5", CounterGroup.PMA, self.counter).raw_max
        elif at >= self.end_s and hw.get(self.counter):
            hw[self.counter] = 0  # reset (perfquery -R)

    def labels(self) -> list[Label]:
        return [
            Label("counter_saturated", self.host, self.port, self.start_s, self.end_s, subject=self.counter)
        ]


@dataclass
class CounterStall(Fault):
    counters: tuple[tuple[str, str], ...] = (("port_rcv_data", "rx_bytes"), ("port_xmit_data", "tx_bytes"))
    _frozen: dict[str, int] = field(default_factory=dict)

    def edit_counters(self, fabric: EmulatedFabric, start_s: float, wall_s: float, ov: float) -> None:
        hw, _ = fabric.counters(self.host, self.port)
        at = start_s + wall_s
        if self.start_s <= at < self.end_s:
            for raw, _ in self.counters:
                hw[raw] = self._frozen.setdefault(raw, hw.get(raw, 0))

    def labels(self) -> list[Label]:
        return [
            Label("counter_stalled", self.host, self.port, self.start_s, self.end_s, subject=vocab)
            for _, vocab in self.counters
        ]


# -- bad reads: nothing to detect -----------------------------------------------------------------
# Each of these misleads one read of one counter (or the port's `rate`) the way a firmware hiccup or
# a driver reload does. The counter model must absorb it (docs/metrics.md, Counter rules): the
# traces carry no label for them, so any finding they cause is a false alarm, except the read error
# an unparsable `rate` truthfully raises.


@dataclass
class ReadGlitch(Fault):
    """One read of ``counter`` shows a wrong value; the counter keeps counting underneath.

    ``mode``: ``back`` (half the true value: a step backwards), ``spike`` (2^40 too high) or
    ``over32`` (a 32-bit q-counter reading 2^32 too high, beyond its width). The window should cover
    exactly one read (a slice ending at a tick)."""

    counter: str = "np_ecn_marked_roce_packets"
    ethtool: bool = False
    mode: str = "spike"
    _true: int | None = None
    _bad: int = 0

    def touches(self, start_s: float, wall_s: float) -> bool:
        return self.start_s <= start_s + wall_s < self.end_s or self._true is not None

    def edit_counters(self, fabric: EmulatedFabric, start_s: float, wall_s: float, ov: float) -> None:
        hw, eth = fabric.counters(self.host, self.port)
        values = eth if self.ethtool else hw
        if self.start_s <= start_s + wall_s < self.end_s:
            if self._true is None:
                self._true = true = values.get(self.counter, 0)
                bad = {"back": true // 2, "spike": true + (1 << 40), "over32": true + _Q32}[self.mode]
                values[self.counter] = self._bad = bad
        elif self._true is not None:
            # What was counted since the bad read, on top of the true value (a 32-bit counter is
            # already back in its width: the emulator wraps it).
            if self.mode == "over32":
                values[self.counter] %= _Q32
            else:
                values[self.counter] = self._true + values[self.counter] - self._bad
            self._true = None

    def labels(self) -> list[Label]:
        return []


@dataclass
class DriverReset(Fault):
    """A driver reload: every counter of the port (RDMA and ethtool) restarts from zero and counts on."""

    _done: bool = False

    def touches(self, start_s: float, wall_s: float) -> bool:
        return not self._done and start_s + wall_s >= self.start_s

    def edit_counters(self, fabric: EmulatedFabric, start_s: float, wall_s: float, ov: float) -> None:
        for values in fabric.counters(self.host, self.port):
            for name in values:
                values[name] = 0
        self._done = True

    def labels(self) -> list[Label]:
        return []


@dataclass
class RateGlitch(Fault):
    """The port's ``rate`` attribute reads ``text`` (``inf``, ``nan``, a negative number) for one read:
    absent with a reason, so the one finding it may raise is ``counter_read_error``."""

    text: str = "inf Gb/sec (4X HDR)"
    _saved: str | None = None

    def touches(self, start_s: float, wall_s: float) -> bool:
        return self.start_s <= start_s + wall_s < self.end_s or self._saved is not None

    def edit_counters(self, fabric: EmulatedFabric, start_s: float, wall_s: float, ov: float) -> None:
        path = (
            fabric.host_root(self.host)
            / "class"
            / "infiniband"
            / f"mlx5_{self.port}"
            / "ports"
            / "1"
            / "rate"
        )
        if self.start_s <= start_s + wall_s < self.end_s:
            if self._saved is None:
                self._saved = path.read_text()
                path.write_text(self.text + "\n")
        elif self._saved is not None:
            path.write_text(self._saved)
            self._saved = None

    def labels(self) -> list[Label]:
        return [Label("counter_read_error", self.host, self.port, self.start_s, self.end_s)]
