"""`netd check`: probe every source once and say what was found, what is missing and why.

Absence is reported, not failed: a host without RDMA NICs, a driver without
`hw_counters`, pyverbs without devices are normal states. The exit status is
non-zero only when a configured source *fails* (an error other than absence),
when `fabric = "hardware"` was asked for and there is no device, or when a DCQCN
change set is left open in the tuning journal (recovery needed: `netd tune --recover`).
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from netd.commands.bpf_check import bpf_check
from netd.config.settings import Config
from netd.errors import TuningError
from netd.qos.checks import qos_check
from netd.sources.collect import Sampler
from netd.sources.verbs import VerbsSource
from netd.tuning.journal import Journal, recovery_message
from netd.tuning.locks import flock

__all__ = ["CheckLine", "run_checks", "tuning_lines"]


@dataclass(frozen=True)
class CheckLine:
    status: str  # "ok", "absent", "FAIL", "info"
    what: str
    detail: str

    def render(self) -> str:
        return f"[{self.status:>6}] {self.what}: {self.detail}"

    def to_dict(self) -> dict[str, str]:
        return {"status": self.status, "what": self.what, "detail": self.detail}


def _rdma_lines(collector: Sampler, cfg: Config) -> tuple[list[CheckLine], bool]:
    snap = collector.collect()
    failed = False
    lines: list[CheckLine] = []
    for s in snap.sources:
        if not s.ok:
            failed = True
            lines.append(CheckLine("FAIL", f"source {s.source}", s.error or "failed"))
    where = f"{collector.sysfs_root}/class/infiniband"
    if not snap.ports:
        status = "FAIL" if cfg.fabric == "hardware" else "absent"
        failed |= status == "FAIL"
        lines.append(
            CheckLine(status, "rdma", f"no RDMA ports in {where} (no RDMA NIC, or its driver is not loaded)")
        )
    for p in snap.ports:
        groups = {c.group.value for c in p.counters.values()}
        detail = (
            f"{p.driver or 'unknown driver'}, {p.link_layer or '?'}, {p.state or '?'}, "
            f"{p.rate_gbps or '?'} Gb/s, netdev {p.netdev or 'unknown'}, {len(p.counters)} counters "
            f"({', '.join(sorted(groups)) or 'none'})"
        )
        lines.append(CheckLine("ok", f"rdma {p.device}/{p.port}", detail))
        if "hw_counters" not in groups:
            lines.append(
                CheckLine("absent", f"rdma {p.device}/{p.port}", "no hw_counters: no ECN/CNP/retransmit data")
            )
        for err in p.read_errors:
            # "N/A (no PMA)" is the driver saying the counter does not exist; anything else (empty,
            # negative, garbage, out of range) is a counter that lies: a failure, not an absence
            if "not available" in err:
                lines.append(CheckLine("absent", f"rdma {p.device}/{p.port}", f"unreadable counter {err}"))
            else:
                failed = True
                lines.append(CheckLine("FAIL", f"rdma {p.device}/{p.port}", f"corrupt counter {err}"))
    if cfg.ethtool.enabled:
        for netdev, sample in sorted(snap.ethtool.items()):
            lines.append(CheckLine("ok", f"ethtool {netdev}", f"{len(sample.stats)} statistics netd uses"))
        for netdev, reason in sorted(collector.ethtool_absent.items()):
            lines.append(CheckLine("absent", f"ethtool {netdev}", reason))
    else:
        lines.append(CheckLine("info", "ethtool", "disabled in configuration"))
    return lines, failed


def _environment_lines(cfg: Config) -> list[CheckLine]:
    lines = []
    if cfg.verbs.enabled:
        ok, reason = VerbsSource().available()
        lines.append(CheckLine("ok" if ok else "absent", "verbs (pyverbs)", reason))
    bcc = importlib.util.find_spec("bcc") is not None
    lines.append(
        CheckLine("ok" if bcc else "absent", "bcc", "importable" if bcc else "python3-bpfcc not importable")
    )
    build = Path(f"/lib/modules/{os.uname().release}/build")
    where = f"{build} -> {os.path.realpath(build)}" if build.exists() else f"{build} missing: make setup"
    lines.append(CheckLine("ok" if build.exists() else "absent", "kernel headers for bcc", where))
    return lines


def tuning_lines(cfg: Config) -> tuple[list[CheckLine], bool]:
    """The DCQCN journal: a change set left open (recovery needed) or a damaged record fails."""
    directory = cfg.tuning.journal_dir()
    if not any((directory / name).exists() for name in ("history.log", "pending.rec")):
        return [CheckLine("info", "tuning journal", f"{directory}: no DCQCN change recorded")], False
    try:
        journal = Journal(directory)
        history = journal.read_history()
        pending = journal.pending()
        if pending is not None:
            with flock(directory, "the tuning journal"):  # held: a change is being made right now
                if journal.committed(pending["txid"]):  # only its cleanup was cut short
                    pending = None
    except TuningError as exc:
        busy = "locked" in str(exc)
        return [CheckLine("info" if busy else "FAIL", "tuning journal", str(exc))], not busy
    lines = [CheckLine("FAIL", "tuning journal", problem) for problem in history.problems]
    if pending is not None:
        lines.append(CheckLine("FAIL", "tuning", recovery_message(pending)))
    detail = f"{directory}: {len(history.records)} change sets recorded, none open"
    return lines or [CheckLine("ok", "tuning journal", detail)], bool(lines)


def run_checks(cfg: Config, sysfs_root: Path, fabric_reason: str) -> tuple[list[CheckLine], bool]:
    """All check lines and whether any configured source failed."""
    lines = [CheckLine("info", "fabric", fabric_reason)]
    collector = Sampler.from_config(cfg, sysfs_root)
    try:
        rdma, failed = _rdma_lines(collector, cfg)
    finally:
        collector.close()
    bpf, bpf_failed = bpf_check(cfg)
    tuning, tuning_failed = tuning_lines(cfg)
    qos, qos_failed = qos_check(cfg, sysfs_root)  # docs/qos.md
    lines += rdma + _environment_lines(cfg) + [CheckLine(*b) for b in bpf] + tuning
    lines += [CheckLine(*q) for q in qos]
    return lines, failed or bpf_failed or tuning_failed or qos_failed
