"""Load and attach the lab's switch data plane (ebpf/lab_switch.c) and read its maps.

One bcc program object per lab, held by the lab daemon: the qdisc tracepoints that mirror the
bottleneck queues are perf attachments that live only as long as the process that holds them, and
the tc programs' maps are read from the same object. The tc filters themselves are removed with the
namespaces (``netd lab down``) or explicitly by :meth:`Dataplane.detach`.
"""

from __future__ import annotations

import ctypes
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netd.errors import LabError, SourceError
from netd.lab.layout import IFINDEX_BASE, MAX_PORTS, LabLayout, Port
from netd.sources.bpf_btf import load_btf
from netd.sources.bpf_layout import EBPF_DIR
from netd.sources.bpf_tc import add_bpf_filter, ensure_clsact

__all__ = [
    "FILTER_PRIO",
    "QBUCKETS",
    "QBUCKET_BYTES",
    "Dataplane",
    "PortConfig",
    "ebpf_source",
    "qdisc_offsets",
]

QBUCKETS = 256
QBUCKET_SHIFT = 11
QBUCKET_BYTES = 1 << QBUCKET_SHIFT
FILTER_PRIO = 0xC1AB  # our filters' priority on each clsact hook (netd's own probes use others)
_TRACEFS = Path("/sys/kernel/tracing")


def ebpf_source() -> Path:
    path = EBPF_DIR / "lab_switch.c"  # beside the packages: in a checkout, or where make install puts it
    if not path.is_file():
        raise LabError(f"{path} is missing: the lab needs netd's eBPF sources (ebpf/ of a checkout)")
    return path


@dataclass(frozen=True, slots=True)
class PortConfig:
    """A switch port's congestion point and PFC thresholds (bytes)."""

    kmin: int
    kmax: int
    pmax: float
    xoff: int = 0  # 0: no PFC generated for this queue
    xon: int = 0
    mark: bool = True


def qdisc_offsets() -> tuple[int, int]:
    """(``qstats.backlog``, ``q.qlen``) byte offsets in the running kernel's ``struct Qdisc``, from BTF:
    bcc compiles against Debian's headers, whose layout may differ from the running kernel's."""
    try:
        btf = load_btf()
    except SourceError as exc:
        raise LabError(str(exc)) from None
    if btf is None:
        raise LabError("the kernel has no BTF (/sys/kernel/btf/vmlinux): the lab reads qdisc offsets from it")
    parts = [
        btf.member_offset(s, m)
        for s, m in (
            ("Qdisc", "qstats"),
            ("gnet_stats_queue", "backlog"),
            ("Qdisc", "q"),
            ("qdisc_skb_head", "qlen"),
        )
    ]
    if any(p is None for p in parts):
        raise LabError("struct Qdisc's qstats.backlog / q.qlen are not in this kernel's BTF")
    qstats, backlog, q, qlen = (int(p) for p in parts if p is not None)
    return qstats + backlog, q + qlen


def _ensure_tracefs() -> None:
    if (_TRACEFS / "events").is_dir():
        return
    proc = subprocess.run(["mount", "-t", "tracefs", "nodev", str(_TRACEFS)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise LabError(f"tracefs is not mounted and mounting it failed: {proc.stderr.strip()}")


class Dataplane:
    def __init__(self, layout: LabLayout, qdisc_major: int) -> None:
        try:
            from bcc import BPF
        except ImportError:
            raise LabError(
                "bcc is not importable: run netd from .venv (make setup installs python3-bpfcc)"
            ) from None
        _ensure_tracefs()
        backlog_off, qlen_off = qdisc_offsets()
        cflags = [
            f"-DIFINDEX_BASE={IFINDEX_BASE}",
            f"-DMAX_PORTS={MAX_PORTS}",
            f"-DQDISC_MAJOR={qdisc_major}",
            f"-DQDISC_BACKLOG_OFF={backlog_off}",
            f"-DQDISC_QLEN_OFF={qlen_off}",
            f"-DQBUCKETS={QBUCKETS}",
            f"-DQBUCKET_SHIFT={QBUCKET_SHIFT}",
        ]
        self.layout = layout
        try:
            self.bpf = BPF(src_file=str(ebpf_source()).encode(), cflags=cflags)
        except Exception as exc:  # bcc raises bare Exception on compile/load failures
            raise LabError(f"loading ebpf/lab_switch.c failed: {exc}") from exc
        self._ingress = self.bpf.load_func(b"lab_ingress", BPF.SCHED_CLS)
        self._egress = self.bpf.load_func(b"lab_egress", BPF.SCHED_CLS)
        self._stats = self.bpf[b"port_stats"]
        self._cfg = self.bpf[b"port_cfg"]

    # -- attachment ----------------------------------------------------------------------------
    def attach(self) -> None:
        """Tap every port's ingress; congestion point on every switch port's egress."""
        from pyroute2 import IPRoute

        for node in self.layout.nodes:
            with IPRoute(netns=node.netns) as ipr:
                for port in self.layout.ports_of(node):
                    _clsact(ipr, port.ifindex)
                    _filter(ipr, port.ifindex, self._ingress, "ffff:fff2")
                    if port.is_switch:
                        _filter(ipr, port.ifindex, self._egress, "ffff:fff3")

    def detach(self) -> None:
        from pyroute2 import IPRoute

        for node in self.layout.nodes:
            try:
                with IPRoute(netns=node.netns) as ipr:
                    for port in self.layout.ports_of(node):
                        for parent in ("ffff:fff2", "ffff:fff3"):
                            try:
                                ipr.tc("del-filter", "bpf", port.ifindex, parent=parent, prio=FILTER_PRIO)
                            except Exception:  # already gone with its namespace
                                pass
            except Exception:
                continue

    # -- maps ----------------------------------------------------------------------------------
    def configure(self, port: Port, cfg: PortConfig) -> None:
        leaf = self._cfg.Leaf(
            cfg.kmin, cfg.kmax, int(round(cfg.pmax * 2**32)), cfg.xoff, cfg.xon, 1 if cfg.mark else 0
        )
        self._cfg[ctypes.c_int(port.id)] = leaf

    def config(self, port: Port) -> PortConfig:
        c = self._cfg[ctypes.c_int(port.id)]
        return PortConfig(c.kmin, c.kmax, c.pmax_u32 / 2**32, c.xoff, c.xon, bool(c.flags & 1))

    def stats(self, port: Port) -> dict[str, Any]:
        """One port's counters, queue mirror, histogram and contributing ingress ports."""
        raw = self._stats[ctypes.c_int(port.id)]
        out: dict[str, Any] = {
            name: int(getattr(raw, name))
            for name, _ in raw._fields_
            if name not in ("qhist", "contrib_ns", "q_ptr")
        }
        out["qhist"] = list(raw.qhist)
        out["contrib_ns"] = list(raw.contrib_ns)
        return out

    def open_pfc_events(self, callback: Callable[[int, bool, int, int], None]) -> None:
        """``callback(port_id, xoff, backlog, ts_ns)`` for each queue crossing, from :meth:`poll_events`."""

        def on_event(_ctx: Any, data: Any, _size: int) -> None:
            ev = self.bpf[b"pfc_events"].event(data)
            callback(int(ev.port), bool(ev.xoff), int(ev.backlog), int(ev.ts_ns))

        self.bpf[b"pfc_events"].open_ring_buffer(on_event)

    def poll_events(self) -> None:
        self.bpf.ring_buffer_consume()

    def close(self) -> None:
        self.bpf.cleanup()


def _clsact(ipr: Any, ifindex: int) -> None:
    try:
        ensure_clsact(ipr, ifindex)  # already there when netd's own probes added it
    except Exception as exc:
        raise LabError(f"adding clsact to ifindex {ifindex}: {exc}") from exc


def _filter(ipr: Any, ifindex: int, fn: Any, parent: str) -> None:
    try:
        add_bpf_filter(ipr, ifindex, fn.fd, fn.name, parent, FILTER_PRIO)
    except Exception as exc:
        raise LabError(f"attaching {fn.name.decode()} to ifindex {ifindex} ({parent}): {exc}") from exc
