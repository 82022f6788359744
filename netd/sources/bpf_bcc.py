"""The bcc-backed :class:`~netd.sources.bpf.BpfSource`: compile, attach, read, detach.

Each probe family starts on its own: a family whose attach point is absent is *skipped*, one that
fails to compile or attach is *failed*, and the others still run. Packet programs are attached with
tc (netd.sources.bpf_tc); kernel-event programs are attached by bcc when they are compiled and
detached when their object is cleaned up (their links die with the process even on a crash).
"""

from __future__ import annotations

import ctypes
import logging
import os
import time
from typing import Any

from pyroute2.netlink.exceptions import NetlinkError

from netd.errors import SourceError
from netd.model.bpf import BpfSample, MapFill, ProbeState, ProgramStats
from netd.sources.bpf import PFC_SLOTS, BpfSettings
from netd.sources.bpf_clock import JiffiesClock
from netd.sources.bpf_layout import (
    EBPF_DIR,
    PROGRAMS,
    RDMA_EVENTS,
    ROCE_EVENTS,
    TCP_EVENTS,
    ClassVal,
    FlowKey,
    FlowSlot,
    FlowVal,
    PfcVal,
    TcpKey,
    TcpVal,
)
from netd.sources.bpf_maps import (
    decode_classes,
    decode_events,
    decode_flows,
    decode_pfc,
    decode_rdma_cm,
    decode_tcp,
)
from netd.sources.bpf_probes import Environment, plan_rdma, plan_tcp, probe_environment
from netd.sources.bpf_syscall import (
    enable_run_stats,
    map_lookup_batch,
    possible_cpus,
    prog_info,
    stats_sysctl_enabled,
)
from netd.sources.bpf_tc import Interface, TcAttacher, resolve

__all__ = ["BccBpfSource", "compile_program"]

log = logging.getLogger(__name__)
PRIO = {"roce_parser.c": 0x4E44, "pfc_counter.c": 0x4E45}  # tc priorities of netd's filters
U32, U64 = ctypes.c_uint32, ctypes.c_uint64


def compile_program(c_file: str, cflags: tuple[str, ...] = ()) -> Any:
    """bcc-compile one file of ebpf/ (kernel-event probes in it attach here)."""
    from bcc import BPF  # imported late: netd runs without bcc

    path = EBPF_DIR / c_file
    try:
        return BPF(src_file=str(path).encode(), cflags=[f"-I{EBPF_DIR}", *cflags])
    except Exception as exc:  # bcc raises bare Exception with the compiler's or verifier's message
        raise SourceError("bpf", f"{c_file}: {exc}") from exc


def _explain(exc: SourceError) -> str:
    """bcc says "Need super-user privileges" for any EPERM at load; netd checked privileges already."""
    text = str(exc).removeprefix("bpf: ")
    if "Need super-user privileges" in text:
        return "the kernel refused to load the program (EPERM; e.g. lockdown forbids this program type)"
    return text


class BccBpfSource:
    def __init__(self, settings: BpfSettings, env: Environment | None = None) -> None:
        self.settings = settings
        self.env = env or probe_environment()
        if not self.env.can_load:
            raise SourceError("bpf", "; ".join(self.env.problems))
        self.states: dict[str, ProbeState] = {}
        self._objs: dict[str, Any] = {}  # C file -> BPF object
        self._ifnames: dict[int, str] = {}
        self._ncpu = possible_cpus()
        self._clock = JiffiesClock()
        self._stats_fd = enable_run_stats() if settings.run_stats else None
        self._next_scan = 0.0
        self._evictions: dict[str, int] = {}  # map -> evictions reported so far (monotonic)
        self._scan: dict[str, Any] = {
            "flows": (),
            "tcp": (),
            "at": None,
            "flow_entries": 0,
            "cache_entries": 0,
            "tcp_entries": 0,
        }
        self.tc = TcAttacher(settings.state_file)
        try:
            ifaces = [Interface.parse(s) for s in settings.interfaces]
            self._start_packet_probe("roce", "roce_parser.c", ifaces, settings.directions)
            self._start_packet_probe("pfc", "pfc_counter.c", ifaces, ("ingress",))
            self._start_tcp()
            self._start_rdma()
        except BaseException:
            self.close()
            raise

    # ---- start -------------------------------------------------------------------------------

    def _set(self, probe: str, state: str, detail: str, attach: str | None = None) -> None:
        self.states[probe] = ProbeState(probe, state, detail, attach)
        (log.info if state in ("attached", "disabled") else log.warning)(
            "bpf probe %s %s: %s", probe, state, detail
        )

    def _start_packet_probe(self, probe: str, c_file: str, ifaces: list[Interface], hooks: tuple) -> None:
        if not self.settings.wanted()[probe]:
            return self._set(probe, "disabled", "disabled in configuration")
        if not ifaces:
            return self._set(probe, "skipped", "no interfaces configured ([bpf] interfaces)")
        try:
            bpf = self._objs[c_file] = compile_program(c_file, self.settings.cflags()[c_file])
            fns = {h: bpf.load_func(PROGRAMS[c_file][h].encode(), bpf.SCHED_CLS) for h in hooks}
        except Exception as exc:
            return self._set(probe, "failed", str(exc))
        done, problems = [], []
        slots: dict[int, Interface] = {}  # the PFC counter keeps one slot per ifindex % PFC_SLOTS
        for iface in ifaces:
            for hook, fn in fns.items():
                try:
                    if probe == "pfc":
                        self._claim_slot(iface, slots)
                    att = self.tc.attach(iface, hook, fn.fd, fn.name.decode(), PRIO[c_file])
                except (SourceError, NetlinkError, OSError) as exc:
                    problems.append(str(exc).removeprefix("bpf: "))
                    continue
                done.append(f"{hook} {iface}")
                self._ifnames[att.ifindex] = str(iface)
        if not done:
            return self._set(probe, "failed", "; ".join(problems), "tc")
        detail = "tc " + ", ".join(done) + (f" (not attached: {'; '.join(problems)})" if problems else "")
        self._set(probe, "attached", detail, "tc")

    @staticmethod
    def _claim_slot(iface: Interface, slots: dict[int, Interface]) -> None:
        slot = resolve(iface) % PFC_SLOTS
        other = slots.setdefault(slot, iface)
        if other != iface:
            raise SourceError(
                "bpf",
                f"{iface} would share the PFC counter's slot with {other} (same ifindex "
                f"modulo {PFC_SLOTS}, e.g. in another namespace): not attached",
            )

    def _start_tcp(self) -> None:
        if not self.settings.tcp_retransmits:
            return self._set("tcp_retransmits", "disabled", "disabled in configuration")
        plans = plan_tcp(self.env, self.settings.tcp_attach)
        if not plans.candidates:
            return self._set("tcp_retransmits", "skipped", plans.detail)
        refused = []
        for plan in plans.candidates:  # the kernel may refuse what it offers (fexit under lockdown)
            try:
                flags = self.settings.cflags()["tcp_retrans.c"] + plan.cflags
                self._objs["tcp_retrans.c"] = compile_program("tcp_retrans.c", flags)
            except SourceError as exc:
                refused.append(f"{plan.mode}: {_explain(exc)}")
                continue
            note = f" ({'; '.join(refused)})" if refused else ""
            return self._set("tcp_retransmits", "attached", plan.detail + note, plan.mode)
        self._set("tcp_retransmits", "failed", "; ".join(refused), plans.candidates[-1].mode)

    def _start_rdma(self) -> None:
        if not self.settings.rdma_events:
            return self._set("rdma_cm", "disabled", "disabled in configuration")
        plan = plan_rdma(self.env)
        if not plan.present:
            return self._set("rdma_cm", "skipped", plan.detail)
        try:
            self._objs["rdma_events.c"] = compile_program("rdma_events.c", plan.cflags)
        except SourceError as exc:
            return self._set("rdma_cm", "failed", str(exc), "tracepoint")
        self._set("rdma_cm", "attached", plan.detail, "tracepoint")

    # ---- read --------------------------------------------------------------------------------

    def _map(self, c_file: str, name: str, key: type, value: type, percpu: bool) -> tuple[bytes, bytes, int]:
        table = self._objs[c_file][name.encode()]
        leaf = getattr(table, "sLeaf", table.Leaf)  # bcc's per-CPU tables keep the one-CPU type there
        if ctypes.sizeof(table.Key) != ctypes.sizeof(key) or ctypes.sizeof(leaf) != ctypes.sizeof(value):
            raise SourceError("bpf", f"{name}: bcc and netd disagree on the layout (ebpf/netd_bpf.h)")
        vsize = ctypes.sizeof(value)
        if percpu:
            vsize = (vsize + 7) // 8 * 8 * self._ncpu
        return map_lookup_batch(table.map_fd, ctypes.sizeof(key), vsize, table.max_entries)

    def read(self) -> BpfSample:
        objs, out = self._objs, dict[str, Any]()
        if "roce_parser.c" in objs:
            _, values, _ = self._map("roce_parser.c", "netd_roce_class", U32, ClassVal, True)
            out["roce_classes"] = decode_classes(values, self._ncpu)
            _, values, _ = self._map("roce_parser.c", "netd_roce_events", U32, U64, True)
            out["roce_events"] = decode_events(values, self._ncpu, ROCE_EVENTS, per_direction=True)
        if "pfc_counter.c" in objs:
            _, values, _ = self._map("pfc_counter.c", "netd_pfc_stats", U32, PfcVal, True)
            out["pfc"] = decode_pfc(values, self._ncpu, self._ifnames)
        tcp_events: dict[str, int] = {}
        if "tcp_retrans.c" in objs:
            _, values, _ = self._map("tcp_retrans.c", "netd_tcp_events", U32, U64, True)
            tcp_events = decode_events(values, self._ncpu, TCP_EVENTS, per_direction=False)
            out["tcp_retransmits"] = tcp_events["retransmits"]
        if "rdma_events.c" in objs:
            _, values, _ = self._map("rdma_events.c", "netd_rdma_cm", U32, U64, True)
            out["rdma_cm_events"] = decode_rdma_cm(values, self._ncpu)
            _, values, _ = self._map("rdma_events.c", "netd_rdma_events", U32, U64, True)
            out["rdma_events"] = decode_events(values, self._ncpu, RDMA_EVENTS, per_direction=False)
        if time.monotonic() >= self._next_scan:
            self.scan()
        out["maps"] = self._fill(out.get("roce_events", {}), tcp_events, len(out.get("pfc", ())))
        run_stats = self._stats_fd is not None or stats_sysctl_enabled()
        return BpfSample(
            probes=tuple(self.states.values()),
            flows=self._scan["flows"],
            flows_scanned_at=self._scan["at"],
            tcp_endpoints=self._scan["tcp"],
            programs=self._programs(run_stats),
            run_stats=run_stats,
            **out,
        )

    def scan(self) -> None:
        """Read the flow and endpoint tables (every flow_scan_interval, or on demand)."""
        to_wall = self._clock.converter()
        if "roce_parser.c" in self._objs and self.settings.flow_table_size:
            _, cache, _ = self._map("roce_parser.c", "netd_flow_cache", U32, FlowSlot, True)
            keys, values, n = self._map("roce_parser.c", "netd_roce_flows", FlowKey, FlowVal, False)
            self._scan["flows"] = decode_flows(cache, self._ncpu, keys, values, to_wall)
            self._scan["flow_entries"] = n
            used = memoryview(cache).cast("B")  # the `used` byte of every slot's key
            self._scan["cache_entries"] = sum(
                used[i + 37] for i in range(0, len(cache), ctypes.sizeof(FlowSlot))
            )
        if "tcp_retrans.c" in self._objs:
            keys, values, n = self._map("tcp_retrans.c", "netd_tcp_retrans", TcpKey, TcpVal, False)
            self._scan["tcp"] = decode_tcp(keys, values, to_wall)
            self._scan["tcp_entries"] = n
        self._scan["at"] = time.time()
        self._next_scan = time.monotonic() + self.settings.flow_scan_interval_s

    def _evicted(self, name: str, estimate: int) -> int:
        """Evictions as a counter: entries created minus entries live, never lower than before. The
        live count comes from the map scan (every flow_scan_interval) and the created count from this
        tick, so the raw difference dips whenever a scan catches up; a counter must not go down."""
        best = max(estimate, self._evictions.get(name, 0))
        self._evictions[name] = best
        return best

    def _fill(self, roce_events: dict, tcp_events: dict, pfc_entries: int) -> tuple[MapFill, ...]:
        s, scan, out = self.settings, self._scan, []
        if "roce_parser.c" in self._objs and s.flow_table_size:
            created = sum(v for (_, e), v in roce_events.items() if e == "flow_new")
            writebacks = sum(v for (_, e), v in roce_events.items() if e == "flow_writeback")
            out.append(
                MapFill(
                    "netd_roce_flows",
                    scan["flow_entries"],
                    s.flow_table_size,
                    self._evicted("netd_roce_flows", created - scan["flow_entries"]),
                )
            )
            out.append(
                MapFill("netd_flow_cache", scan["cache_entries"], s.flow_cache_slots * self._ncpu, writebacks)
            )
        if "pfc_counter.c" in self._objs:
            out.append(MapFill("netd_pfc_stats", pfc_entries, PFC_SLOTS))
        if "tcp_retrans.c" in self._objs:
            created = tcp_events.get("endpoint_new", 0)
            out.append(
                MapFill(
                    "netd_tcp_retrans",
                    scan["tcp_entries"],
                    s.tcp_table_size,
                    self._evicted("netd_tcp_retrans", created - scan["tcp_entries"]),
                )
            )
        return tuple(out)

    def _programs(self, run_stats: bool) -> tuple[ProgramStats, ...]:
        out = []
        for bpf in self._objs.values():
            for fn in bpf.funcs.values():
                info = prog_info(fn.fd)
                name = fn.name.decode()
                out.append(
                    ProgramStats(
                        name, info.run_count if run_stats else None, info.run_time_ns if run_stats else None
                    )
                )
        return tuple(sorted(out, key=lambda p: p.program))

    def program_fd(self, c_file: str, name: str) -> int:
        """The descriptor of a loaded program (tests and the benchmark run it with BPF_PROG_TEST_RUN)."""
        return int(self._objs[c_file].funcs[name.encode()].fd)

    def close(self) -> None:
        problems = self.tc.detach_all() if hasattr(self, "tc") else []
        for problem in problems:
            log.warning("bpf detach: %s", problem)
        for bpf in getattr(self, "_objs", {}).values():
            bpf.cleanup()
        self._objs = {}
        if getattr(self, "_stats_fd", None) is not None:
            os.close(self._stats_fd)  # type: ignore[arg-type]
            self._stats_fd = None
