"""``/proc/<pid>/stat`` read by one parser (netd.sources.procfs), against a real process and a fake tree."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from netd.sources.procfs import proc_stat

_HZ = os.sysconf("SC_CLK_TCK")
_SPIN_THEN_SLEEP = """
import time
end = time.process_time() + 0.5
while time.process_time() < end:
    pass
time.sleep(30)
"""


def test_a_running_child_its_cpu_and_its_end() -> None:
    child = subprocess.Popen([sys.executable, "-c", _SPIN_THEN_SLEEP])
    try:
        first = proc_stat(child.pid)
        assert first is not None and first.state in "RS"
        deadline = time.monotonic() + 20
        while (st := proc_stat(child.pid)) is not None and st.cpu_s < 0.4 and time.monotonic() < deadline:
            time.sleep(0.05)
        # the kernel's own account through another file: the task's time on CPU in ns (schedstat)
        assert st is not None and st.cpu_s >= 0.4
        assert st.start == first.start  # the same process
        run_ns = int(Path(f"/proc/{child.pid}/schedstat").read_text().split()[0])
        assert abs(st.cpu_s - run_ns / 1e9) < 0.1
    finally:
        child.kill()
        child.wait()
    assert proc_stat(child.pid) is None  # reaped: gone


def test_own_stat_and_a_zombie() -> None:
    me = proc_stat()
    assert me is not None and me.state == "R" and me.start == proc_stat(os.getpid()).start  # type: ignore[union-attr]
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 20
    while (st := proc_stat(child.pid)) is not None and st.state != "Z" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert st is not None and st.state == "Z"  # exited, not yet reaped
    child.wait()


@pytest.mark.parametrize(
    ("comm", "expected_state"),
    [("python3", "S"), ("a b) (c", "S"), (")", "D"), ("x\nR", "S")],
)
def test_a_command_name_with_spaces_and_parentheses(tmp_path: Path, comm: str, expected_state: str) -> None:
    # proc(5): comm is printed as is inside parentheses; only the last ")" ends it.
    rest = [expected_state] + ["0"] * 10 + [str(3 * _HZ), str(_HZ)] + ["0"] * 6 + ["12345"] + ["0"] * 30
    (tmp_path / "42").mkdir()
    (tmp_path / "42" / "stat").write_text(f"42 ({comm}) " + " ".join(rest) + "\n")
    st = proc_stat(42, tmp_path)
    assert st is not None
    assert (st.state, st.user_s, st.system_s, st.cpu_s, st.start) == (expected_state, 3.0, 1.0, 4.0, "12345")


@pytest.mark.parametrize("text", ["", "42 (x)", "42 (x) S 1 2", "42 (x) S " + " ".join(["z"] * 30)])
def test_a_stat_that_cannot_be_parsed_is_none(tmp_path: Path, text: str) -> None:
    (tmp_path / "42").mkdir()
    (tmp_path / "42" / "stat").write_text(text)
    assert proc_stat(42, tmp_path) is None
    assert proc_stat(43, tmp_path) is None  # no such process
