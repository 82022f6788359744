"""PFC frames as 802.1Qbb lays them out; the lab state file and its lock."""

from __future__ import annotations

from pathlib import Path

import pytest

from netd.errors import LabError
from netd.lab.pfc import parse_pfc, pfc_frame
from netd.lab.state import LabState, lab_lock, pick_qdisc_major

MAC = bytes.fromhex("026c00000001")


def test_pfc_frame_layout() -> None:
    f = pfc_frame(MAC, 0xFFFF)
    assert len(f) == 60
    assert f[:6] == bytes.fromhex("0180c2000001") and f[6:12] == MAC
    assert f[12:14] == b"\x88\x08" and f[14:16] == b"\x01\x01"  # MAC control, PFC opcode
    assert f[16:18] == b"\x00\x08"  # class-enable vector: priority 3
    assert f[18 + 2 * 3 : 20 + 2 * 3] == b"\xff\xff"
    assert parse_pfc(f) == 0xFFFF and parse_pfc(pfc_frame(MAC, 0)) == 0


def test_parse_ignores_other_priorities_pause_and_junk() -> None:
    assert parse_pfc(pfc_frame(MAC, 100, priority=5)) is None
    classic_pause = bytes.fromhex("0180c2000001") + MAC + b"\x88\x08\x00\x01\x01\x00" + bytes(40)
    assert parse_pfc(classic_pause) is None
    assert parse_pfc(b"\x00" * 10) is None
    assert parse_pfc(pfc_frame(MAC, 7, priority=5), priority=5) == 7


def _state(name: str, major: int = 0x200) -> LabState:
    return LabState(
        name=name,
        hosts=4,
        tors=2,
        link_mbps=100.0,
        oversubscription=1.0,
        qdisc_major=major,
        buffer_bytes=1_000_000,
        pfc=True,
        switch={"kmin_bytes": 5000},
    )


def test_state_round_trip_and_damaged_file(tmp_path: Path) -> None:
    st = _state("a")
    st.pids["labd"] = 123
    st.save(tmp_path / "a")
    back = LabState.load(tmp_path / "a")
    assert back == st and back.layout.hosts == 4
    assert LabState.load(tmp_path / "missing") is None
    (tmp_path / "a" / "lab.json").write_text("{not json")
    with pytest.raises(LabError, match="unreadable"):
        LabState.load(tmp_path / "a")


def test_qdisc_majors_differ_between_labs(tmp_path: Path) -> None:
    first = pick_qdisc_major(tmp_path, "one")
    _state("one", first).save(tmp_path / "one")
    assert pick_qdisc_major(tmp_path, "one") == first  # its own lab does not count
    _state("two", first).save(tmp_path / "two")  # a lab that already took the same number
    assert pick_qdisc_major(tmp_path, "one") != first
    assert 0x100 <= pick_qdisc_major(tmp_path, "three") < 0xE100


def test_lock_refuses_a_second_holder_without_waiting(tmp_path: Path) -> None:
    with lab_lock(tmp_path, "x"):
        with pytest.raises(LabError, match="busy"), lab_lock(tmp_path, "x", wait=False):
            pass
    with lab_lock(tmp_path, "x", wait=False):
        pass
