"""The lab daemon: the switches' brain and the hosts' counter publisher, one process per lab.

Started by ``netd lab up`` (``python -m netd.lab.labd --state-dir DIR``) in the root namespace. It
holds the switch data plane (the qdisc tracepoints live only as long as their process), emulates PFC,
renders every host agent's counters into ``<lab>/host<i>/`` every ``PUBLISH_S``, and answers the
control socket (netd/lab/control.py). SIGTERM detaches the programs and exits.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import select
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

from netd.lab.control import SOCKET_NAME
from netd.lab.dataplane import Dataplane, PortConfig
from netd.lab.fabric import TcShell, tbf_cmd
from netd.lab.layout import Port
from netd.lab.pfc import CONTRIB_WINDOW_NS, PfcAgent
from netd.lab.publish import HostPublisher
from netd.lab.qos import render_lab_qos
from netd.lab.realtime import LABD_PRIORITY, realtime
from netd.lab.state import LabState

__all__ = ["LabDaemon", "main", "switch_config"]

PUBLISH_S = 0.05  # netd ticks every >= 0.1 s; `publish` requests render on demand (netd lab bench)
log = logging.getLogger("netd.lab.labd")


def switch_config(state: LabState, port: Port) -> PortConfig:
    """The congestion point of a switch port. ECN thresholds scale with the port's rate (an uplink
    at twice the rate marks at the same queueing delay); PFC thresholds do not, so a faster port keeps
    more headroom above XOFF for the pause to take effect."""
    scale = port.rate_mbps / state.link_mbps
    sw = state.switch
    return PortConfig(
        kmin=int(sw["kmin_bytes"] * scale),
        kmax=int(sw["kmax_bytes"] * scale),
        pmax=float(sw["pmax"]),
        xoff=int(sw["xoff_bytes"]) if state.pfc else 0,
        xon=int(sw["xon_bytes"]) if state.pfc else 0,
    )


class LabDaemon:
    def __init__(self, state_dir: Path) -> None:
        state = LabState.load(state_dir)
        if state is None:
            raise SystemExit(f"labd: no lab.json in {state_dir}")
        self.state, self.dir, self.layout = state, state_dir, state.layout
        self.dp = Dataplane(self.layout, state.qdisc_major)
        for p in self.layout.ports:
            if p.is_switch:
                self.dp.configure(p, switch_config(state, p))
        self.dp.attach()
        from pyroute2 import IPRoute  # statistics only: its TBF *change* encoding is broken (fabric.py)

        self._tc = {n.netns: TcShell(n.netns) for n in self.layout.switches}
        self._ipr = {n.netns: IPRoute(netns=n.netns) for n in self.layout.switches}
        self.rate_bps = {p.id: p.rate_mbps * 1e6 for p in self.layout.ports if p.is_switch}  # `shape`
        self.pfc = PfcAgent(self.layout, self._set_rate, self._contributors, lambda p: self.rate_bps[p.id])
        self.event_lag_max_ns = 0  # how late the PFC agent saw a queue crossing (diagnostics)
        self.dp.open_pfc_events(self._on_crossing)
        self.hosts = [
            HostPublisher(state_dir / f"host{i}", state_dir / f"host{i}.shm", state.link_mbps)
            for i in range(self.layout.hosts)
        ]
        for i in range(self.layout.hosts):  # QoS state, the last host misconfigured on purpose (docs/qos.md)
            render_lab_qos(state_dir / f"host{i}", i, self.layout.hosts)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        (state_dir / SOCKET_NAME).unlink(missing_ok=True)
        self.listener.bind(str(state_dir / SOCKET_NAME))
        self.listener.listen(8)
        self.clients: dict[int, tuple[socket.socket, bytearray]] = {}
        self.stopping = False

    # -- callbacks for the PFC agent -----------------------------------------------------------
    def _on_crossing(self, port: int, xoff: bool, _backlog: int, ts_ns: int) -> None:
        self.event_lag_max_ns = max(self.event_lag_max_ns, time.monotonic_ns() - ts_ns)
        self.pfc.on_queue(port, xoff)

    def _set_rate(self, port: Port, rate_bps: float) -> None:
        self._tc[port.node.netns].send(
            tbf_cmd(port, self.state.qdisc_major, rate_bps, self.state.buffer_bytes)
        )

    def _contributors(self, port: Port) -> list[int]:
        now = time.monotonic_ns()
        contrib = self.dp.stats(port)["contrib_ns"]
        return [j for j, t in enumerate(contrib) if t and now - t < CONTRIB_WINDOW_NS]

    # -- control requests ----------------------------------------------------------------------
    def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        op = req.get("op")
        if op == "ping":
            return {"ok": True, "lab": self.state.name}
        if op == "publish":
            for h in self.hosts:
                h.publish()
            return {"ok": True}
        wanted = req.get("ports")
        ports = [p for p in self.layout.ports if wanted is None or p.id in wanted]
        if op == "stats":
            doc = {str(p.id): self._port_stats(p, req) for p in ports}
            if req.get("qdisc"):
                for pid, q in self._qdiscs(ports).items():
                    doc[str(pid)]["qdisc"] = q
            return {
                "ok": True,
                "t_ns": time.monotonic_ns(),
                "ports": doc,
                "pfc_event_lag_max_ms": round(self.event_lag_max_ns / 1e6, 3),
            }
        if op == "shape":  # a port's egress rate for a while (mbps: null restores the layout's)
            for p in ports:
                if p.is_switch:
                    mbps = req.get("mbps")
                    self.rate_bps[p.id] = float(mbps if mbps else p.rate_mbps) * 1e6
                    if not self.pfc.ports[p.id].paused_until:
                        self._set_rate(p, self.rate_bps[p.id])
            return {"ok": True}
        if op == "configure":
            for p in ports:
                if p.is_switch:
                    old = self.dp.config(p)
                    fields = {k: req[k] for k in ("kmin", "kmax", "pmax", "xoff", "xon", "mark") if k in req}
                    self.dp.configure(p, dataclasses.replace(old, **fields))
            return {"ok": True}
        return {"ok": False, "error": f"unknown op {op!r}"}

    def _qdiscs(self, ports: list[Port]) -> dict[int, dict[str, int]]:
        """The bottleneck TBFs' own statistics (drops are counted only there), one netlink dump per
        switch namespace (~1 ms; forking `tc` would stall the PFC agent for tens of ms)."""
        out: dict[int, dict[str, int]] = {}
        for netns in {p.node.netns for p in ports if p.is_switch}:
            by_ifindex = {}
            for q in self._ipr[netns].get_qdiscs():
                if q.get("parent") == 0xFFFFFFFF:  # TC_H_ROOT
                    st = q.get_nested("TCA_STATS2", "TCA_STATS_QUEUE") or {}
                    basic = q.get_nested("TCA_STATS2", "TCA_STATS_BASIC") or {}
                    by_ifindex[q["index"]] = {
                        "bytes": basic.get("bytes", 0),
                        "packets": basic.get("packets", 0),
                        "drops": st.get("drops", 0),
                        "overlimits": st.get("overlimits", 0),
                        "backlog": st.get("backlog", 0),
                        "qlen": st.get("qlen", 0),
                    }
            for p in ports:
                if p.node.netns == netns and p.ifindex in by_ifindex:
                    out[p.id] = by_ifindex[p.ifindex]
        return out

    def _port_stats(self, port: Port, req: dict[str, Any]) -> dict[str, Any]:
        s = self.dp.stats(port)
        if not req.get("hist"):
            s.pop("qhist")
            s.pop("contrib_ns")
        if port.id in self.pfc.ports:
            s["pfc"] = self.pfc.ports[port.id].as_dict()
        return s

    def _serve_client(self, fd: int) -> None:
        sock, buf = self.clients[fd]
        try:
            chunk = sock.recv(1 << 16)
        except OSError:
            chunk = b""
        if not chunk:
            sock.close()
            del self.clients[fd]
            return
        buf += chunk
        while b"\n" in buf:
            line, _, rest = bytes(buf).partition(b"\n")
            buf[:] = rest
            try:
                answer = self.handle(json.loads(line))
            except Exception as exc:  # a bad request must not take the fabric down
                answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
            sock.sendall(json.dumps(answer).encode() + b"\n")

    # -- main loop -----------------------------------------------------------------------------
    def run(self) -> None:
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        ring_fd = self.dp.bpf[b"pfc_events"].map_fd
        next_publish = time.monotonic()
        log.info("lab %s: data plane attached, %d hosts published", self.state.name, len(self.hosts))
        while not self.stopping:
            pfc_socks = self.pfc.sockets()
            fds = [self.listener.fileno(), ring_fd, *pfc_socks, *self.clients]
            timeout = min(self.pfc.tick(), max(next_publish - time.monotonic(), 0.0))
            readable, _, _ = select.select(fds, [], [], timeout)
            self.dp.poll_events()
            for fd in readable:
                if fd == self.listener.fileno():
                    conn, _ = self.listener.accept()
                    self.clients[conn.fileno()] = (conn, bytearray())
                elif fd in pfc_socks:
                    self.pfc.receive(pfc_socks[fd])
                elif fd in self.clients:
                    self._serve_client(fd)
            if time.monotonic() >= next_publish:
                for h in self.hosts:
                    h.publish()
                next_publish = time.monotonic() + PUBLISH_S

    def _stop(self, *_: object) -> None:
        self.stopping = True

    def close(self) -> None:
        self.dp.detach()
        self.dp.close()
        self.pfc.close()
        for tc in self._tc.values():
            tc.close()
        for ipr in self._ipr.values():
            ipr.close()
        for h in self.hosts:
            h.close()
        self.listener.close()
        (self.dir / SOCKET_NAME).unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m netd.lab.labd", description=__doc__)
    ap.add_argument("--state-dir", type=Path, required=True)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    daemon = LabDaemon(args.state_dir)
    try:
        with realtime(LABD_PRIORITY):  # PFC reactions and stats must not wait for a busy CPU
            daemon.run()
    finally:
        daemon.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
