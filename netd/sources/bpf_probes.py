"""What this host allows: privileges, bcc, headers, BTF, tracefs, and each probe's attach point.

Nothing here loads a program; `netd check` and the daemon both ask these questions first, so a host
without bcc or privileges runs netd without probes and says exactly why. Tracepoints are preferred
(a stable interface whose layout the kernel describes); where tracefs is not mounted, the same
tracepoint attached raw, then fexit on the function behind it, both reading struct fields at offsets
from BTF; a probe whose attach points are all absent is skipped. A kernel may still refuse a program
it offers an attach point for (fexit under lockdown): the loader then tries the next candidate.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path

from netd.sources.bpf_btf import Btf, load_btf

__all__ = ["Environment", "RdmaPlan", "TcpPlan", "TcpPlans", "plan_rdma", "plan_tcp", "probe_environment"]

TRACEFS_CANDIDATES = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))
CAP_NET_ADMIN, CAP_SYS_ADMIN, CAP_PERFMON, CAP_BPF = 12, 21, 38, 39
TCP_TRACEPOINT = ("tcp", "tcp_retransmit_skb")
TCP_FEXIT_FUNC = "__tcp_retransmit_skb"  # where the tracepoint fires (and RetransSegs is counted)
RDMA_TRACEPOINTS = ("cm_event_handler", "cm_qp_create", "cm_qp_destroy")  # category rdma_cma
SOCK_FIELDS = ("skc_family", "skc_state", "skc_dport", "skc_daddr", "skc_v6_daddr")


def _effective_caps(status: Path = Path("/proc/self/status")) -> int:
    try:
        for line in status.read_text().splitlines():
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    except (OSError, ValueError):
        pass
    return 0


@dataclass(frozen=True)
class Environment:
    privileged: bool
    privilege_detail: str
    bcc: bool
    bcc_detail: str
    headers: bool
    headers_detail: str
    btf: Btf | None
    tracefs: Path | None  # the events directory's parent, when mounted
    kfunc: bool  # fentry/fexit trampolines
    problems: tuple[str, ...] = field(default=())  # why no probe can load at all

    @property
    def can_load(self) -> bool:
        return not self.problems

    def tracepoint_format(self, category: str, event: str) -> str | None:
        if self.tracefs is None:
            return None
        try:
            return (self.tracefs / "events" / category / event / "format").read_text()
        except OSError:
            return None


def probe_environment(caps: int | None = None) -> Environment:
    caps = _effective_caps() if caps is None else caps
    has = lambda bit: bool(caps >> bit & 1)  # noqa: E731
    privileged = has(CAP_SYS_ADMIN) or (has(CAP_BPF) and has(CAP_PERFMON) and has(CAP_NET_ADMIN))
    priv_detail = (
        ("CAP_SYS_ADMIN" if has(CAP_SYS_ADMIN) else "CAP_BPF, CAP_PERFMON, CAP_NET_ADMIN")
        if privileged
        else "needs root (CAP_SYS_ADMIN, or CAP_BPF + CAP_PERFMON + CAP_NET_ADMIN)"
    )
    bcc = importlib.util.find_spec("bcc") is not None
    bcc_detail = "importable" if bcc else "python3-bpfcc is not importable (apt-get install python3-bpfcc)"
    build = Path(f"/lib/modules/{os.uname().release}/build")
    headers = build.exists()
    headers_detail = (
        f"{build} -> {os.path.realpath(build)}" if headers else f"{build} is missing (make setup links one)"
    )
    btf = load_btf()
    tracefs = next((p for p in TRACEFS_CANDIDATES if (p / "events").is_dir()), None)
    kfunc = btf is not None and _kallsyms_has("bpf_trampoline_link_prog")
    problems = [
        d for ok, d in ((privileged, priv_detail), (bcc, bcc_detail), (headers, headers_detail)) if not ok
    ]
    return Environment(
        privileged,
        priv_detail,
        bcc,
        bcc_detail,
        headers,
        headers_detail,
        btf,
        tracefs,
        kfunc,
        tuple(problems),
    )


def _kallsyms_has(symbol: str) -> bool:
    try:
        with open("/proc/kallsyms") as f:
            return any(line.rstrip().endswith(f" {symbol}") for line in f)
    except OSError:
        return False


@dataclass(frozen=True)
class TcpPlan:
    mode: str  # "tracepoint", "raw_tracepoint" or "fexit"
    detail: str
    cflags: tuple[str, ...] = ()


@dataclass(frozen=True)
class TcpPlans:
    """The attach points this kernel offers, in order of preference, and why the others are out."""

    candidates: tuple[TcpPlan, ...]
    unavailable: tuple[str, ...]

    @property
    def detail(self) -> str:
        if self.candidates:
            return self.candidates[0].detail
        return "; ".join(self.unavailable) or "no attach point"


def _sock_flags(btf: Btf) -> tuple[str, ...] | str:
    """-D flags with struct sock_common offsets from BTF, or why they cannot be had."""
    base = btf.member_offset("sock", "__sk_common")
    offsets = {f: btf.member_offset("sock_common", f) for f in SOCK_FIELDS}
    missing = [f for f in SOCK_FIELDS[:4] if offsets[f] is None]
    if base is None or missing:
        return f"struct sock lacks {', '.join(missing) or '__sk_common'} in BTF"
    return tuple(f"-DNETD_{f.upper()}={-1 if off is None else base + off}" for f, off in offsets.items())


def plan_tcp(env: Environment, wanted: str = "auto") -> TcpPlans:
    """tracepoint (tracefs gives the layout) > raw tracepoint > fexit (both with BTF offsets)."""
    out: list[TcpPlan] = []
    why: list[str] = []
    if wanted in ("auto", "tracepoint"):
        fmt = env.tracepoint_format(*TCP_TRACEPOINT)
        if fmt is not None:
            has_err = int("field:int err;" in fmt)
            out.append(
                TcpPlan(
                    "tracepoint",
                    "tracepoint tcp:tcp_retransmit_skb",
                    ("-DNETD_TCP_ATTACH=1", f"-DNETD_TCP_TP_HAS_ERR={has_err}"),
                )
            )
        elif env.tracefs is None:
            why.append("tracepoint: tracefs is not mounted (mount -t tracefs tracefs /sys/kernel/tracing)")
        else:
            why.append("tracepoint: no tcp:tcp_retransmit_skb")
    btf = env.btf
    if wanted in ("auto", "raw_tracepoint", "fexit") and btf is None:
        why.append("raw tracepoint and fexit: no kernel BTF (/sys/kernel/btf/vmlinux) for struct offsets")
        btf_flags: tuple[str, ...] | str = ""
    else:
        btf_flags = _sock_flags(btf) if btf is not None else ""
    if wanted in ("auto", "raw_tracepoint") and btf is not None:
        nargs = btf.tracepoint_args(TCP_TRACEPOINT[1])
        if nargs is None:
            why.append("raw tracepoint: no tcp_retransmit_skb in BTF")
        elif isinstance(btf_flags, str):
            why.append(f"raw tracepoint: {btf_flags}")
        else:
            flags = ("-DNETD_TCP_ATTACH=3", f"-DNETD_TCP_TP_HAS_ERR={int(nargs >= 3)}", *btf_flags)
            detail = "raw tracepoint tcp_retransmit_skb (struct sock offsets from BTF)"
            out.append(TcpPlan("raw_tracepoint", detail, flags))
    if wanted in ("auto", "fexit") and btf is not None:
        if not env.kfunc:
            why.append("fexit: no BPF trampolines in this kernel")
        elif not btf.has_func(TCP_FEXIT_FUNC):
            why.append(f"fexit: no function {TCP_FEXIT_FUNC} in BTF")
        elif isinstance(btf_flags, str):
            why.append(f"fexit: {btf_flags}")
        else:
            out.append(
                TcpPlan(
                    "fexit",
                    f"fexit {TCP_FEXIT_FUNC} (struct sock offsets from BTF)",
                    ("-DNETD_TCP_ATTACH=2", *btf_flags),
                )
            )
    return TcpPlans(tuple(out), tuple(why))


@dataclass(frozen=True)
class RdmaPlan:
    present: tuple[str, ...]  # rdma_cma tracepoints to attach
    detail: str
    cflags: tuple[str, ...] = ()


def plan_rdma(env: Environment) -> RdmaPlan:
    present = tuple(tp for tp in RDMA_TRACEPOINTS if env.tracepoint_format("rdma_cma", tp) is not None)
    if present:
        flags = tuple(f"-DNETD_RDMA_{tp.upper()}=1" for tp in present)
        return RdmaPlan(present, "tracepoints rdma_cma:" + ", ".join(present), flags)
    if env.tracefs is None:
        loaded = Path("/sys/kernel/btf/rdma_cm").exists()  # the module's BTF: it is loaded
        why = "rdma_cm is loaded but tracefs is not mounted" if loaded else "tracefs is not mounted"
        return RdmaPlan((), f"rdma_cma tracepoints not available: {why}")
    return RdmaPlan(
        (), "no rdma_cma tracepoints (no RDMA core in this kernel, or the rdma_cm module is not loaded)"
    )
