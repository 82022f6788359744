"""A process's ``/proc/<pid>/stat``: its state, CPU time and start time.

Several parts of netd ask another process (or netd itself) the same three questions: is it still
running (lab processes, a BPF owner), is it the same process as before (a pid is reused; its start
time is not), and how much CPU has it used (the benchmarks). One parser answers them all. The second
field, the command name in parentheses, may itself hold spaces and parentheses, so the fields are
split after its *last* closing parenthesis.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ProcStat", "proc_stat"]

_HZ = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class ProcStat:
    state: str  # R, S, D, Z, ... (proc(5), field 3)
    user_s: float  # utime (field 14), seconds
    system_s: float  # stime (field 15), seconds
    start: str  # starttime (field 22), clock ticks after boot as printed: with the pid, a process's identity

    @property
    def cpu_s(self) -> float:
        return self.user_s + self.system_s


def proc_stat(pid: int | str = "self", proc: Path = Path("/proc")) -> ProcStat | None:
    """The process's stat, or None when it is gone (or its stat cannot be read or parsed)."""
    try:
        with open(proc / str(pid) / "stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return ProcStat(
            state=fields[0].decode(),
            user_s=int(fields[11]) / _HZ,
            system_s=int(fields[12]) / _HZ,
            start=fields[19].decode(),
        )
    except (OSError, IndexError, ValueError):
        return None
