"""Build the host agent (netd/lab/csrc/lab_host.c) with gcc on first use.

The binary goes to ``<lab root>/bin/netd-lab-host-<hash of the sources>``: built once per source
version (about half a second), shared by every lab on the machine, rebuilt when the sources change.
gcc is in the project's Debian package list (.ci/setup-host), so CI and ``make setup`` hosts have it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from netd.errors import LabError

__all__ = ["CSRC", "agent_binary"]

CSRC = Path(__file__).resolve().parent / "csrc"
_SOURCES = ("lab_host.c", "lab_shm.h", "roce_icrc.h")


def agent_binary(lab_root: Path) -> Path:
    digest = hashlib.sha256()
    for name in _SOURCES:
        digest.update((CSRC / name).read_bytes())
    target = lab_root / "bin" / f"netd-lab-host-{digest.hexdigest()[:12]}"
    if target.is_file() and os.access(target, os.X_OK):
        return target
    gcc = shutil.which("gcc")
    if gcc is None:
        raise LabError("gcc is needed to build the lab's host agent (apt-get install gcc, or `make setup`)")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}")
    cmd = [gcc, "-O2", "-Wall", "-Wextra", "-o", str(tmp), str(CSRC / "lab_host.c")]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise LabError(f"building the host agent failed:\n{' '.join(cmd)}\n{proc.stderr.strip()}")
    os.replace(tmp, target)  # atomic: a concurrent `lab up` either sees no binary or a whole one
    return target
