"""Run a scenario on an up lab: start its flows, run the DCQCN controller, record ground truth.

The runner owns the reaction points (netd/lab/controller.py) and the scenario's timeline (flow
starts and stops, a host getting stuck). Every ``trace_s`` it records the flows' rates and delivered
bytes and the focus ports' counters (from the lab daemon); at the start and end of the measurement
window it records the full port statistics including the queue histograms. Whatever happens, flows
are stopped, stuck hosts released and switch settings restored before it returns.
"""

from __future__ import annotations

import ipaddress
import random
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cc.model.params import DcqcnParams
from netd.errors import LabError
from netd.lab.control import LabClient
from netd.lab.controller import DcqcnController, FlowSlot
from netd.lab.labd import switch_config
from netd.lab.realtime import CONTROLLER_PRIORITY, frozen_gc, realtime
from netd.lab.scenarios import FlowSpec, Scenario
from netd.lab.shm import LAB_MAX_RQPS, HostShm
from netd.lab.state import LabState, lab_dir, lab_lock

__all__ = ["RunResult", "Sample", "run_scenario"]


@dataclass
class Sample:
    t: float  # seconds since the run started
    rc_mbps: list[float]  # per flow, the reaction point's current rate
    delivered: list[int]  # per flow, in-order payload bytes at the receiver
    ports: dict[str, dict[str, Any]]  # focus ports' counters (no histograms)


@dataclass
class RunResult:
    scenario: Scenario
    state: LabState
    params: DcqcnParams
    flows: list[FlowSpec]
    qpns: list[int]
    samples: list[Sample] = field(default_factory=list)
    window: tuple[float, float] = (0.0, 0.0)  # measurement window, seconds since start
    start_stats: dict[str, Any] = field(default_factory=dict)  # labd stats (with histograms)
    end_stats: dict[str, Any] = field(default_factory=dict)
    host_start: list[dict[str, int]] = field(default_factory=list)  # agent counters per host
    host_end: list[dict[str, int]] = field(default_factory=list)
    # the reaction points' timing: steps, steps later than the cut period, the longest gap (s)
    controller: dict[str, float] = field(default_factory=dict)


def _ip(address: str) -> int:
    return struct.unpack("=I", socket.inet_aton(str(ipaddress.IPv4Address(address))))[0]


def run_scenario(
    root: Path,
    name: str,
    scenario: Scenario,
    params: DcqcnParams,
    *,
    payload: int = 2048,
    step_s: float = 0.001,
    trace_s: float = 0.05,
    on_sample: Callable[[Sample], None] | None = None,
    stop: threading.Event | None = None,
) -> RunResult:
    """Run ``scenario`` on the lab ``name`` for its duration, or until ``stop`` is set (a caller that
    has seen what it waited for ends the traffic early; the switch is restored either way)."""
    directory = lab_dir(root, name)
    with lab_lock(root, name, wait=False):
        state = LabState.load(directory)
        if state is None or not state.complete:
            raise LabError(f"lab {name} is not up (run `netd lab up --name {name}`)")
        layout = state.layout
        for f in scenario.flows:
            if not (0 <= f.src < layout.hosts and 0 <= f.dst < layout.hosts) or f.src == f.dst:
                raise LabError(f"scenario flow h{f.src}->h{f.dst} does not fit a {layout.hosts}-host lab")
        shms = {h: HostShm(directory / f"host{h}.shm") for h in range(layout.hosts)}
        client = LabClient(directory)
        result = RunResult(scenario, state, params, list(scenario.flows), [])
        ctl = DcqcnController(shms, params, layout.link_mbps)
        restore_switch = False
        try:
            for shm in shms.values():
                if not shm.ready:
                    raise LabError(
                        f"a host agent of lab {name} is not running; `netd lab down` and `up` again"
                    )
                shm.s.ctl.np_interval_us = params.np_min_time_between_cnps
            ctl.stop_all()
            slots = [ctl.add(f.src) for f in scenario.flows]
            base = random.randrange(1, 0xFFFF) * LAB_MAX_RQPS  # new QP numbers every run
            result.qpns = [(base + i) & 0xFFFFFF for i in range(len(slots))]
            if scenario.switch:
                restore_switch = True
                client.request("configure", **scenario.switch)
            for pid, mbps in scenario.shape.items():
                restore_switch = True
                client.request("shape", ports=[pid], mbps=mbps)
            with realtime(CONTROLLER_PRIORITY), frozen_gc():
                _timeline(
                    scenario, result, ctl, slots, shms, client, step_s, trace_s, payload, on_sample, stop
                )
        finally:
            result.controller = {
                "steps": ctl.steps,
                "late_steps": ctl.late_steps,
                "max_gap_ms": round(ctl.max_gap_s * 1e3, 2),
            }
            ctl.stop_all()
            for shm in shms.values():
                shm.s.ctl.stuck = 0
            if restore_switch:
                client.request("shape", ports=list(scenario.shape), mbps=None)
                for p in layout.ports:
                    if p.is_switch:
                        c = switch_config(state, p)
                        client.request(
                            "configure",
                            ports=[p.id],
                            kmin=c.kmin,
                            kmax=c.kmax,
                            pmax=c.pmax,
                            xoff=c.xoff,
                            xon=c.xon,
                            mark=c.mark,
                        )
            client.close()
            del ctl
            for shm in shms.values():
                shm.close()
    return result


def _timeline(
    sc: Scenario,
    result: RunResult,
    ctl: DcqcnController,
    slots: list[FlowSlot],
    shms: dict[int, HostShm],
    client: LabClient,
    step_s: float,
    trace_s: float,
    payload: int,
    on_sample: Callable[[Sample], None] | None,
    stop: threading.Event | None = None,
) -> None:
    layout = result.state.layout
    focus = list(sc.focus)
    started = [False] * len(slots)
    stopped = [False] * len(slots)
    stuck_on = [False] * len(sc.stuck)
    t0 = time.monotonic()
    next_trace = 0.0
    window_open = False
    while True:
        t = time.monotonic() - t0
        if t >= sc.duration_s or (stop is not None and stop.is_set()):
            break
        for i, (spec, fs) in enumerate(zip(result.flows, slots, strict=True)):
            if not started[i] and t >= spec.start_s:
                started[i] = True
                ctl.start(fs, result.qpns[i], _ip(layout.host_address(spec.dst)), payload)
            if started[i] and not stopped[i] and spec.stop_s is not None and t >= spec.stop_s:
                stopped[i] = True
                ctl.stop(fs)
        for k, (host, t_on, t_off) in enumerate(sc.stuck):
            want = t_on <= t < t_off
            if want != stuck_on[k]:
                stuck_on[k] = want
                shms[host].s.ctl.stuck = 1 if want else 0
        ctl.step()
        if not window_open and t >= sc.warmup_s:
            window_open = True
            result.start_stats = client.request("stats", hist=True, qdisc=True)
            result.host_start = [shms[h].counters() for h in range(layout.hosts)]
            result.window = (t, result.window[1])
        if t >= next_trace:
            next_trace += trace_s
            sample = Sample(
                t,
                ctl.state.rc.tolist(),
                _delivered(result, shms),
                client.request("stats", ports=focus)["ports"],
            )
            result.samples.append(sample)
            if on_sample is not None:
                on_sample(sample)
        time.sleep(max(step_s - (time.monotonic() - t0 - t), 0.0))
    result.end_stats = client.request("stats", hist=True, qdisc=True)
    result.host_end = [shms[h].counters() for h in range(layout.hosts)]
    result.window = (result.window[0], time.monotonic() - t0)
    result.samples.append(
        Sample(
            result.window[1],
            ctl.state.rc.tolist(),
            _delivered(result, shms),
            {k: v for k, v in result.end_stats["ports"].items() if int(k) in focus},
        )
    )


def _delivered(result: RunResult, shms: dict[int, HostShm]) -> list[int]:
    out = []
    for spec, qpn in zip(result.flows, result.qpns, strict=True):
        q = shms[spec.dst].s.rqps[qpn % LAB_MAX_RQPS]
        out.append(int(q.rx_payload_bytes) if q.qpn == qpn else 0)
    return out
