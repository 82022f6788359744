"""``netd lab up`` / ``down`` / ``status``: the lab's life cycle.

``up`` records every step in ``lab.json`` *before* taking it (namespaces, then each process id), so
``down`` can always undo a lab — complete, half built, or left behind by a crash. ``down`` also sweeps
by name: every namespace starting with ``ndl-<lab>-`` (deleting a namespace takes its veths, qdiscs
and tc programs with it, after every process inside has been killed) and the lab daemon found by its
command line, so even a lost state file leaves nothing behind.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from netd.errors import LabError
from netd.lab.agent_build import agent_binary
from netd.lab.control import LabClient
from netd.lab.fabric import build_fabric, remove_namespaces
from netd.lab.layout import NS_PREFIX, LabLayout
from netd.lab.lldp import configure_lldpd, remove_sockets, start_lldpd, write_host_topology
from netd.lab.netns import kill_pids, list_netns, pid_alive, reap, spawn
from netd.lab.params import lab_params
from netd.lab.shm import HostShm
from netd.lab.state import LabState, lab_dir, lab_lock, pick_qdisc_major
from netd.lab.status import unhealthy

__all__ = ["AGENT_DEFAULTS", "down", "up"]

# ACK every 16 packets (or 10 ms); the requester's ACK timeout is an RC QP's with timeout 15
# (4.096 µs x 2^15 = 134 ms); XOFF every 100 ms while a host is stuck; mlx5-like storm warning.
AGENT_DEFAULTS = {
    "ack_every": 16,
    "ack_timeout_us": 134_000,
    "storm_refresh_us": 100_000,
    "storm_warn_ms": 100,
}
READY_TIMEOUT_S = 60.0
log = logging.getLogger(__name__)  # compiling the data plane takes 1-2 s alone, much more on a loaded machine


def _require_root() -> None:
    if os.geteuid() != 0:
        raise LabError("netd lab needs root (network namespaces, tc, BPF); run it with sudo")


def up(
    root: Path,
    layout: LabLayout,
    *,
    pfc: bool = True,
    buffer_bytes: int = 2_000_000,
    overrides: dict[str, Any] | None = None,
    lldp: bool = True,
) -> tuple[LabState, str]:
    """Build the lab (or find it already up). Returns the state and what happened, for the user."""
    _require_root()
    directory = lab_dir(root, layout.name)
    params = lab_params(layout.link_mbps, overrides)
    if pfc and params.xoff_bytes >= buffer_bytes:
        raise LabError(
            f"xoff_bytes={params.xoff_bytes} must be below the queue buffer ({buffer_bytes} bytes)"
        )
    with lab_lock(root, layout.name):
        existing = LabState.load(directory)
        if existing is not None:
            if existing.layout.describe() != layout.describe():
                raise LabError(
                    f"lab {layout.name} is up with a different shape {existing.layout.describe()}; "
                    "run `netd lab down` first"
                )
            if existing.complete and not unhealthy(existing):
                return existing, "already up"
            _down_locked(root, layout.name)
            note = "was broken (a process or namespace was missing): rebuilt"
        else:
            if list_netns(layout.prefix):
                _down_locked(root, layout.name)  # leftovers of a crash before the state file existed
            note = "up"
        state = LabState(
            name=layout.name,
            hosts=layout.hosts,
            tors=layout.tors,
            link_mbps=layout.link_mbps,
            oversubscription=layout.oversubscription,
            qdisc_major=pick_qdisc_major(root, layout.name),
            buffer_bytes=buffer_bytes,
            pfc=pfc,
            switch={
                k: getattr(params, k) for k in ("kmin_bytes", "kmax_bytes", "pmax", "xoff_bytes", "xon_bytes")
            },
            namespaces=[n.netns for n in layout.nodes],
        )
        if directory.exists():
            shutil.rmtree(directory)
        state.save(directory)
        try:
            state.agent_binary = str(agent_binary(root))
            build_fabric(layout, state.qdisc_major, buffer_bytes)
            _start_processes(state, layout, directory, params.np_min_time_between_cnps, lldp)
            state.complete = True
            state.save(directory)
        except BaseException:
            _down_locked(root, layout.name)
            raise
    return state, note


def _start_processes(state: LabState, layout: LabLayout, directory: Path, np_us: int, lldp: bool) -> None:
    shms = []
    for i, node in enumerate(layout.host_nodes):
        shm = HostShm(directory / f"host{i}.shm", create=True)
        for key, value in {**AGENT_DEFAULTS, "np_interval_us": np_us}.items():
            setattr(shm.s.ctl, key, value)
        shm.s.ctl.link_bps = int(layout.link_mbps * 1e6)
        shms.append(shm)
        argv = [state.agent_binary, str(directory / f"host{i}.shm"), "eth0", layout.host_address(i)]
        state.pids[f"agent:{node.name}"] = spawn(
            argv, directory / "log" / f"agent-{node.name}.log", node.netns
        )
        state.save(directory)
    if lldp:
        for node in layout.nodes:
            state.pids[f"lldpd:{node.name}"] = start_lldpd(layout, node, directory)
            state.save(directory)
    argv = [sys.executable, "-m", "netd.lab.labd", "--state-dir", str(directory)]
    state.pids["labd"] = spawn(argv, directory / "log" / "labd.log")
    state.save(directory)
    deadline = time.monotonic() + READY_TIMEOUT_S
    for shm, node in zip(shms, layout.host_nodes, strict=True):
        while not shm.ready:
            if time.monotonic() > deadline or not pid_alive(state.pids[f"agent:{node.name}"]):
                raise LabError(
                    f"the host agent in {node.netns} did not start:\n"
                    + _log_tail(directory / "log" / f"agent-{node.name}.log")
                )
            time.sleep(0.01)
        shm.close()
    with LabClient(directory) as client:
        while True:
            try:
                client.wait_ready(1.0)
                break
            except LabError:
                if time.monotonic() > deadline or not pid_alive(state.pids["labd"]):
                    raise LabError(
                        "the lab daemon did not start:\n" + _log_tail(directory / "log" / "labd.log")
                    ) from None
    if lldp:
        for node in layout.nodes:
            configure_lldpd(layout, node)
        late = write_host_topology(layout, directory)
        if late:
            log.warning(
                "LLDP neighbours of %s did not appear in time; their lldp.json is incomplete", ", ".join(late)
            )


def _log_tail(path: Path, lines: int = 15) -> str:
    """The end of a process's log, for an error message (``down`` removes the file afterwards)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"(no log at {path})"


def _labd_pids(directory: Path) -> list[int]:
    """Lab daemons of this lab, found by command line (the state file may be gone)."""
    wanted = ["-m", "netd.lab.labd", "--state-dir", str(directory)]
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if argv[1 : 1 + len(wanted)] == wanted:
            found.append(int(entry))
    return found


def down(root: Path, name: str) -> dict[str, Any]:
    _require_root()
    with lab_lock(root, name):
        return _down_locked(root, name)


def _down_locked(root: Path, name: str) -> dict[str, Any]:
    directory = lab_dir(root, name)
    try:
        state = LabState.load(directory)
    except LabError:
        state = None
    # The lab daemon first: its sockets hold references to the switch namespaces.
    recorded = [state.pids["labd"]] if state and "labd" in state.pids else []
    labd = sorted({p for p in recorded if _is_labd(p, directory)} | set(_labd_pids(directory)))
    kill_pids(labd)
    removed = remove_namespaces(state.namespaces if state else [], f"{NS_PREFIX}{name}-")
    if state is not None:  # agents and lldpd died with their namespaces; make sure of it
        kill_pids(
            [p for k, p in state.pids.items() if k != "labd" and pid_alive(p) and _cmd_matches(p, state)]
        )
        reap(state.pids.values())  # those that were our children (this process ran `up`)
    remove_sockets(f"{NS_PREFIX}{name}-")
    if directory.exists():
        shutil.rmtree(directory, ignore_errors=True)
    return {
        "lab": name,
        "namespaces_removed": removed,
        "processes_stopped": len(labd),
        "state_dir": str(directory),
    }


def _is_labd(pid: int, directory: Path) -> bool:
    return pid in _labd_pids(directory)


def _cmd_matches(pid: int, state: LabState) -> bool:
    """Only kill a recorded pid if it is still the program we started (pids get reused)."""
    try:
        exe = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return False
    return exe in (state.agent_binary, "lldpd") or exe.endswith("/lldpd")
