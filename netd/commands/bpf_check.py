"""`netd check` lines for the eBPF probes: what this host allows, and what each probe would do.

Nothing is compiled or attached (that costs seconds and changes the host); the checks are the ones
the daemon makes before loading: privileges, BTF, tracefs, each probe's attach point, the configured
interfaces. bcc and the kernel headers have their own lines in netd.commands.check. When [bpf] is enabled, a
missing prerequisite or interface is a failure (exit 1); otherwise the lines are informational.
"""

from __future__ import annotations

from netd.config.settings import Config
from netd.errors import SourceError
from netd.sources.bpf_layout import EBPF_DIR, MAPS
from netd.sources.bpf_probes import Environment, plan_rdma, plan_tcp, probe_environment
from netd.sources.bpf_tc import Interface, read_owner, resolve

__all__ = ["bpf_check"]

Line = tuple[str, str, str]  # (status, what, detail) as netd.commands.check.CheckLine takes them


def _packet_lines(cfg: Config, env: Environment) -> tuple[list[Line], bool]:
    b, lines, failed = cfg.bpf, [], False
    hooks = {"roce": "+".join(b.directions), "pfc": "ingress"}
    for probe, wanted in (("roce", b.roce), ("pfc", b.pfc)):
        if not wanted:
            lines.append(("info", f"bpf {probe}", "disabled in configuration"))
        elif not b.interfaces:
            lines.append(("absent", f"bpf {probe}", "no interfaces configured ([bpf] interfaces)"))
    if not (b.interfaces and (b.roce or b.pfc)):
        return lines, failed
    plan = "; ".join(f"{p} on tc {hooks[p]}" for p, w in (("roce", b.roce), ("pfc", b.pfc)) if w)
    for spec in b.interfaces:
        iface = Interface.parse(spec)
        if not env.privileged:
            lines.append(("absent", f"bpf interface {iface}", "cannot look it up without privileges"))
            continue
        try:
            ifindex = resolve(iface)
        except SourceError as exc:
            failed |= b.enabled
            lines.append(
                ("FAIL" if b.enabled else "absent", f"bpf interface {iface}", str(exc).removeprefix("bpf: "))
            )
            continue
        lines.append(("ok", f"bpf interface {iface}", f"ifindex {ifindex}; {plan}"))
    return lines, failed


def bpf_check(cfg: Config) -> tuple[list[Line], bool]:
    """Check lines, and whether a configured probe cannot run."""
    b = cfg.bpf
    env = probe_environment()
    lines: list[Line] = [
        (
            "info",
            "bpf",
            "enabled: `netd run` loads the probes"
            if b.enabled
            else "disabled ([bpf] enabled = true loads the probes; docs/ebpf.md)",
        )
    ]
    failed = b.enabled and not env.can_load
    bad = "FAIL" if b.enabled else "absent"
    lines.append(("ok" if env.privileged else bad, "bpf privileges", env.privilege_detail))
    lines.append(
        (
            "ok" if env.btf else "absent",
            "bpf BTF",
            "/sys/kernel/btf/vmlinux (kernel struct offsets, fexit)"
            if env.btf
            else "no /sys/kernel/btf/vmlinux: no fexit fallback",
        )
    )
    # bcc compiles the programs from their C at start: an install without them has nothing to load
    missing = [name for name in (*MAPS, "netd_bpf.h") if not (EBPF_DIR / name).is_file()]
    failed |= b.enabled and bool(missing)
    lines.append(
        (bad, "bpf sources", f"{EBPF_DIR}: no {', '.join(missing)} (make install puts them there)")
        if missing
        else ("ok", "bpf sources", str(EBPF_DIR))
    )
    no_tracefs = "not mounted: no tracepoints (mount -t tracefs tracefs /sys/kernel/tracing)"
    lines.append(("ok" if env.tracefs else "absent", "bpf tracefs", str(env.tracefs or no_tracefs)))
    packet, packet_failed = _packet_lines(cfg, env)
    lines += packet
    failed |= packet_failed
    if b.tcp_retransmits:
        plans = plan_tcp(env, b.tcp_attach)
        detail = plans.detail + (f" (else: {plans.candidates[1].mode})" if len(plans.candidates) > 1 else "")
        lines.append(("ok" if plans.candidates else "absent", "bpf tcp_retransmits", detail))
    else:
        lines.append(("info", "bpf tcp_retransmits", "disabled in configuration"))
    if b.rdma_events:
        rdma = plan_rdma(env)
        lines.append(("ok" if rdma.present else "absent", "bpf rdma_cm", rdma.detail))
    else:
        lines.append(("info", "bpf rdma_cm", "disabled in configuration"))
    owner = read_owner(b.state_file)
    if owner is not None:
        lines.append(("info", "bpf attachments", f"held by the running netd (pid {owner}; {b.state_file})"))
    return lines, failed
