"""netd/lab/shm.py mirrors netd/lab/csrc/lab_shm.h byte for byte (checked by compiling the header)."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import pytest

from netd.lab.agent_build import CSRC
from netd.lab.shm import (
    LAB_MAX_FLOWS,
    LAB_MAX_RQPS,
    LAB_SHM_MAGIC,
    LAB_SHM_VERSION,
    Control,
    Counters,
    Flow,
    Rqp,
    Shm,
)

STRUCTS = {"lab_control": Control, "lab_counters": Counters, "lab_flow": Flow, "lab_rqp": Rqp, "lab_shm": Shm}


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_every_offset_and_size_matches_the_c_header(tmp_path: Path) -> None:
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "lab_shm.h"', "int main(void) {"]
    for cname, cls in STRUCTS.items():
        lines.append(f'printf("{cname} sizeof %zu\\n", sizeof(struct {cname}));')
        for field, *_ in cls._fields_:
            lines.append(f'printf("{cname} {field} %zu\\n", offsetof(struct {cname}, {field}));')
    for macro in ("LAB_SHM_MAGIC", "LAB_SHM_VERSION", "LAB_MAX_FLOWS", "LAB_MAX_RQPS"):
        lines.append(f'printf("macro {macro} %lu\\n", (unsigned long){macro});')
    lines.append("return 0; }")
    src = tmp_path / "probe.c"
    src.write_text("\n".join(lines))
    subprocess.run(["gcc", "-I", str(CSRC), "-o", str(tmp_path / "probe"), str(src)], check=True)
    out = subprocess.run([str(tmp_path / "probe")], check=True, capture_output=True, text=True).stdout
    c_side = {tuple(line.split()[:2]): int(line.split()[2]) for line in out.splitlines()}
    for cname, cls in STRUCTS.items():
        assert c_side[(cname, "sizeof")] == ctypes.sizeof(cls), cname
        for field, *_ in cls._fields_:
            assert c_side[(cname, field)] == getattr(cls, field).offset, f"{cname}.{field}"
    assert c_side[("macro", "LAB_SHM_MAGIC")] == LAB_SHM_MAGIC
    assert c_side[("macro", "LAB_SHM_VERSION")] == LAB_SHM_VERSION
    assert c_side[("macro", "LAB_MAX_FLOWS")] == LAB_MAX_FLOWS
    assert c_side[("macro", "LAB_MAX_RQPS")] == LAB_MAX_RQPS


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_agent_builds_once_per_source_version(tmp_path: Path) -> None:
    from netd.lab.agent_build import agent_binary

    first = agent_binary(tmp_path)
    assert first.is_file() and first.parent == tmp_path / "bin"
    mtime = first.stat().st_mtime_ns
    assert agent_binary(tmp_path) == first and first.stat().st_mtime_ns == mtime
    usage = subprocess.run([str(first)], capture_output=True, text=True)
    assert usage.returncode == 2 and "usage" in usage.stderr
