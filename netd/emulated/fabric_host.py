"""The embedded default: an emulated two-tier RoCE fabric rendered as sysfs trees.

With no RDMA device on the host, `netd run` starts this emulator. Its traffic
comes from cc/'s DCQCN fabric model (incast and all-reduce phases, RED/ECN at
the switches, CNPs, rate cuts, PFC); every tick it renders each emulated host's
counters into ``<state_dir>/host<i>/`` as an mlx5-shaped sysfs tree plus
``ethtool -S`` captures, and netd's *real* sources read them. There is no
special path in the pipeline.

Time: the model simulates ``sim_ms_per_tick`` of fabric time per tick (50 ms
by default, a few percent of a core) and the counts are scaled to the tick's
wall time, so rates look like a real 200G port's. Fractions carry over between
ticks so scaling never drifts.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Protocol

import numpy as np

from cc.model.params import DcqcnParams
from cc.sim.fabric import Fabric, FabricConfig, PortDeltas
from cc.sim.workload import PhaseSource
from netd.config.files import per_user_dir
from netd.emulated.cc_params import cc_params_dir, read_params
from netd.emulated.cc_params import render as render_cc_params
from netd.emulated.fabric_topology import render_topology
from netd.emulated.mlx5_ethtool import mlx5_ethtool_names
from netd.emulated.qos_state import default_drifts, drifted_params, render_qos
from netd.emulated.sysfs_tree import DeviceSpec, SysfsTree
from netd.errors import NetdError
from netd.sources.ethtool import format_ethtool_text

__all__ = [
    "MARKER_FILE",
    "EmulatedFabric",
    "FabricHook",
    "default_state_dir",
    "emulated_host_of",
    "host_name",
    "host_root",
    "rate_text",
]

MARKER_FILE = ".netd-emulated"
LOSSLESS_PRIORITY = 3
MTU_BYTES = 4096


class FabricHook(Protocol):
    """Sees each slice: may replace the model's deltas (before scaling) and edit raw counters/states."""

    def on_deltas(self, deltas: PortDeltas, start_s: float, wall_s: float) -> PortDeltas: ...

    def on_counters(self, fabric: EmulatedFabric, start_s: float, wall_s: float) -> None: ...


def default_state_dir() -> Path:
    if os.geteuid() == 0:
        return Path("/run/netd/emulated")
    return per_user_dir("XDG_RUNTIME_DIR") / "emulated"


def host_root(state_dir: Path, host: int, n_hosts: int) -> Path:
    """Where emulated host ``host`` of ``n_hosts`` keeps its trees."""
    if not 0 <= host < n_hosts:
        raise NetdError(f"emulated host index {host} out of range 0..{n_hosts - 1}")
    return state_dir / f"host{host}"


def host_name(host: int) -> str:
    return f"emu-host{host}"


def emulated_host_of(root: Path) -> str | None:
    """The emulated host whose tree ``root`` is (``<state_dir>/host<N>`` beside the marker the emulator
    writes), else None. What a tree *is* decides "emulated", not how netd was started: a daemon pointed
    at ``/run/netd/emulated/host4`` still reads synthetic counters and must say so."""
    name = root.name
    if not (name.startswith("host") and name[4:].isdigit()):
        return None
    return host_name(int(name[4:])) if (root.parent / MARKER_FILE).is_file() else None


def rate_text(gbps: float) -> str:
    """The `rate` file an mlx5 port of this speed shows (Ethernet speeds map to IB names)."""
    known = {400: "4X NDR", 200: "2X NDR", 100: "4X EDR", 50: "2X EDR", 25: "1X EDR"}
    return f"{gbps:g} Gb/sec ({known.get(int(gbps), '4X')})"


class EmulatedFabric:
    def __init__(
        self,
        state_dir: Path,
        *,
        tors: int = 2,
        hosts_per_tor: int = 4,
        ports_per_host: int = 2,
        link_gbps: float = 200.0,
        seed: int = 0,
        sim_ms_per_tick: float = 50.0,
        workload: PhaseSource | None = None,
        hiccup_period_s: float = 15.0,
    ) -> None:
        self.state_dir = state_dir
        self.sim_ms_per_tick = sim_ms_per_tick
        self.n_hosts = tors * hosts_per_tor
        self.ports_per_host = ports_per_host
        self._lock_fd = self._claim(state_dir)
        self.fabric = Fabric(
            FabricConfig(
                tors=tors,
                hosts_per_tor=hosts_per_tor,
                ports_per_host=ports_per_host,
                link_gbps=link_gbps,
                seed=seed,
                lossless_priority=LOSSLESS_PRIORITY,
            ),
            params=DcqcnParams(),
            workload=workload,
        )
        # Called on every slice before rendering (netd.emulated.faults injects labelled faults); the
        # elapsed wall time of the emulation (the sum of ``wall_s``) is its clock. By default, brief
        # receiver stalls every hiccup_period_s (0: none) so that PFC shows in the first minute.
        self.hook: FabricHook | None = None
        if hiccup_period_s > 0:
            # imported here: hiccups builds on the fault layer, which builds on this module
            from netd.emulated.hiccups import ReceiverHiccups

            self.hook = ReceiverHiccups(
                self.n_hosts, ports_per_host, period_s=hiccup_period_s, link_gbps=link_gbps
            )
        self.elapsed_s = 0.0
        self._names = mlx5_ethtool_names((LOSSLESS_PRIORITY,))
        self._trees: list[SysfsTree] = []
        self._hw: dict[tuple[int, int], dict[str, int]] = {}
        self._eth: dict[tuple[int, int], dict[str, int]] = {}
        self._carry: dict[str, np.ndarray] = {}
        self.last_phases: tuple[str, ...] = ()
        self.qos_drifts = default_drifts(self.n_hosts)  # misconfigured hosts (docs/qos.md)
        for h in range(self.n_hosts):
            tree = SysfsTree(self.host_root(h))
            (self.host_root(h) / "ethtool").mkdir(parents=True, exist_ok=True)
            for p in range(ports_per_host):
                pci = f"0000:{0x41 + p // 2:02x}:00.{p % 2}"
                tree.add_device(
                    DeviceSpec(
                        name=f"mlx5_{p}",
                        driver="mlx5",
                        netdev=self.netdev(p),
                        pci=pci,
                        rate=rate_text(link_gbps),
                    )
                )
                params = drifted_params(self.qos_drifts.get(h, ()), self.fabric.params)
                render_cc_params(self.host_root(h), pci, params)  # debugfs cc_params/
                self._hw[(h, p)] = {}
                self._eth[(h, p)] = dict.fromkeys(self._names, 0)
            self._trees.append(tree)
            render_topology(
                self.host_root(h),
                h,
                tors=tors,
                hosts_per_tor=hosts_per_tor,
                ports_per_host=ports_per_host,
                host_name=self.host_name(h),
                netdevs=[self.netdev(p) for p in range(ports_per_host)],
            )
        # QoS as each NIC applies it, with a few hosts misconfigured on purpose (docs/qos.md).
        for h in range(self.n_hosts):
            ports = [(f"mlx5_{p}", self.netdev(p)) for p in range(ports_per_host)]
            render_qos(self.host_root(h), ports, self.qos_drifts.get(h, ()))
        # The fabric runs with the DCQCN parameters in force on host 0's first device (netd tune and
        # the daemon's tuner write there): see netd.emulated.cc_params.
        self.params_dir = cc_params_dir(self.host_root(0), "0000:41:00.0")
        self._render(range(self.n_hosts))

    # -- layout -------------------------------------------------------------------------------
    def host_root(self, host: int) -> Path:
        return host_root(self.state_dir, host, self.n_hosts)

    @staticmethod
    def host_name(host: int) -> str:
        return host_name(host)

    @staticmethod
    def netdev(port: int) -> str:
        return f"ens1f{port}np{port}"

    def _ethtool_path(self, h: int, p: int) -> Path:
        return self.host_root(h) / "ethtool" / self.netdev(p)

    # -- dynamics -----------------------------------------------------------------------------
    def advance(
        self, wall_s: float, sim_ms: float | None = None, render: Sequence[int] | None = None
    ) -> PortDeltas:
        """Simulate one tick's slice of fabric time (``sim_ms``, default ``sim_ms_per_tick``; less for a
        sub-tick step of the PFC fast path) and render counts scaled to ``wall_s``.

        ``render`` limits which hosts' trees are rewritten (default: all). The fast path renders only the
        host its daemon reads; every host's counters still advance, and the next full render catches
        the others up (their files are at most one tick old).
        """
        sim_ms = self.sim_ms_per_tick if sim_ms is None else sim_ms
        params = read_params(self.params_dir, self.fabric.params)
        if params != self.fabric.params:
            self.fabric.params = params
        deltas = self.fabric.advance(sim_ms * 1000.0)
        if self.hook is not None:
            deltas = self.hook.on_deltas(deltas, self.elapsed_s, wall_s)
        self.last_phases = deltas.phases
        scale = wall_s * 1000.0 / sim_ms if sim_ms > 0 else 0.0
        counts = {f.name: getattr(deltas, f.name) for f in fields(deltas)}
        scaled = {
            name: self._scaled(name, v, scale)
            for name, v in counts.items()
            if isinstance(v, np.ndarray) and v.dtype == np.int64
        }
        for h in range(self.n_hosts):
            for p in range(self.ports_per_host):
                self._accumulate(h, p, {k: int(v[h, p]) for k, v in scaled.items()})
        if self.hook is not None:
            self.hook.on_counters(self, self.elapsed_s, wall_s)
        self.elapsed_s += wall_s
        self._render(range(self.n_hosts) if render is None else render)
        return deltas

    def counters(self, host: int, port: int) -> tuple[dict[str, int], dict[str, int]]:
        """The live raw values of one host port (hw/PMA files, ethtool stats) that the next render
        writes; a hook may edit them."""
        return self._hw[(host, port)], self._eth[(host, port)]

    def set_port_state(self, host: int, port: int, state: str, phys_state: str) -> None:
        self._trees[host].set_port_state(f"mlx5_{port}", 1, state, phys_state)

    def _scaled(self, name: str, counts: np.ndarray, scale: float) -> np.ndarray:
        exact = counts.astype(np.float64) * scale + self._carry.get(name, 0.0)
        whole = np.floor(exact)
        self._carry[name] = exact - whole
        return whole.astype(np.int64)

    def _accumulate(self, h: int, p: int, d: dict[str, int]) -> None:
        hw, eth = self._hw[(h, p)], self._eth[(h, p)]

        def add(target: dict[str, int], name: str, value: int, wrap_bits: int = 64) -> None:
            target[name] = (target.get(name, 0) + value) % (1 << wrap_bits)

        add(hw, "port_xmit_data", d["tx_bytes"] // 4)  # PMA counts 4-byte words
        add(hw, "port_rcv_data", d["rx_bytes"] // 4)
        for pma, key in (
            ("port_xmit_packets", "tx_packets"),
            ("port_rcv_packets", "rx_packets"),
            ("unicast_xmit_packets", "tx_packets"),
            ("unicast_rcv_packets", "rx_packets"),
        ):
            add(hw, pma, d[key])
        add(hw, "np_ecn_marked_roce_packets", d["ecn_marked_rx"])
        add(hw, "np_cnp_sent", d["cnp_sent"])
        add(hw, "rp_cnp_handled", d["cnp_handled"])
        for q in ("out_of_sequence", "packet_seq_err", "local_ack_timeout_err"):
            add(hw, q, d[q], wrap_bits=32)  # 32-bit q-counters wrap
        add(hw, "rx_write_requests", d["rx_packets"], wrap_bits=32)
        pr = LOSSLESS_PRIORITY
        for direction in ("rx", "tx"):
            add(eth, f"{direction}_prio{pr}_bytes", d[f"{direction}_bytes"])
            add(eth, f"{direction}_prio{pr}_packets", d[f"{direction}_packets"])
            add(eth, f"{direction}_vport_rdma_unicast_bytes", d[f"{direction}_bytes"])
            add(eth, f"{direction}_vport_rdma_unicast_packets", d[f"{direction}_packets"])
            add(eth, f"{direction}_bytes_phy", d[f"{direction}_bytes"])
            add(eth, f"{direction}_packets_phy", d[f"{direction}_packets"])
            add(eth, f"{direction}_prio{pr}_pause", d[f"{direction}_pause_frames"])
            add(eth, f"{direction}_prio{pr}_pause_duration", d[f"{direction}_pause_duration_us"])
            add(eth, f"{direction}_pause_ctrl_phy", d[f"{direction}_pause_frames"])
        add(eth, f"rx_prio{pr}_pause_transition", d["rx_pause_transitions"])

    # -- rendering ----------------------------------------------------------------------------
    def _render(self, hosts: Iterable[int]) -> None:
        for h in hosts:
            tree = self._trees[h]
            for p in range(self.ports_per_host):
                tree.set_counters(f"mlx5_{p}", 1, self._hw[(h, p)])
                # Captures are replaced atomically (the capture reader notices the new inode), so a
                # netd in another process never parses a half-written one. sysfs-shaped counter
                # files, by contrast, are rewritten in place: readers keep their descriptors.
                path = self._ethtool_path(h, p)
                tmp = path.with_name(f".{path.name}.tmp")
                tmp.write_text(format_ethtool_text(self._eth[(h, p)]))
                os.replace(tmp, path)

    # -- ownership ----------------------------------------------------------------------------
    @staticmethod
    def _claim(state_dir: Path) -> int:
        state_dir.mkdir(parents=True, exist_ok=True)
        if any(state_dir.iterdir()) and not (state_dir / MARKER_FILE).exists():
            raise NetdError(
                f"{state_dir} is not empty and was not made by netd's emulator; choose another "
                "emulator.state_dir"
            )
        fd = os.open(state_dir / MARKER_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise NetdError(
                f"another netd is running the emulated fabric in {state_dir}; read its hosts with "
                f"`netd status --sysfs-root {state_dir}/host0`, or set emulator.state_dir"
            ) from None
        # Ours now: start from a clean tree so a crashed run's leftovers don't mix in.
        for child in state_dir.iterdir():
            if child.name != MARKER_FILE:
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return fd

    def close(self) -> None:
        for tree in self._trees:
            tree.close()
        os.close(self._lock_fd)
