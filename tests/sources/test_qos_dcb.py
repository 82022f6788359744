"""The `dcb -j` reader and writer: the captured formats, the real `dcb` command's failure answers, and
a `dcb` executable in a real subprocess for the success path."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from netd.errors import SourceError
from netd.sources.qos import port_qos_from_dcb
from netd.sources.qos_dcb import (
    DCB_OBJECTS,
    CapturedDcbReader,
    CommandDcbReader,
    dcb_json,
    make_dcb_reader,
    write_capture,
)

FIXTURES = Path(__file__).parents[1] / "fixtures" / "dcb"


def _profile_json(obj: str) -> str:
    return dcb_json(
        obj,
        pfc=(3,),
        pfc_delay=32768,
        prio_tc=(0, 0, 0, 1, 0, 0, 2, 0),
        tc_bw=(50, 50, 0, 0, 0, 0, 0, 0),
        tc_tsa=("ets", "ets", "strict", "strict", "strict", "strict", "strict", "strict"),
        dscp_prio={48: 6, 26: 3},
        prio_buffer=(0, 0, 0, 1, 0, 0, 0, 0),
        buffer_size=(262144, 262144, 0, 0, 0, 0, 0, 0),
        total_size=1048576,
    )


@pytest.mark.parametrize("obj", DCB_OBJECTS)
def test_writer_reproduces_the_captured_format_byte_for_byte(obj: str) -> None:
    assert _profile_json(obj) == (FIXTURES / f"{obj}.json").read_text()


def test_captures_parse_into_the_port_settings() -> None:
    parsed = port_qos_from_dcb(
        {o: json.loads((FIXTURES / f"{o}.json").read_text()) for o in DCB_OBJECTS}, "x"
    )
    assert parsed == {
        "pfc": (3,),
        "pfc_delay": 32768,
        "prio_tc": (0, 0, 0, 1, 0, 0, 2, 0),
        "tc_bw": (50, 50, 0, 0, 0, 0, 0, 0),
        "tc_tsa": ("ets", "ets", "strict", "strict", "strict", "strict", "strict", "strict"),
        "dscp_prio": ((26, 3), (48, 6)),
        "trust": "dscp",
        "prio_buffer": (0, 0, 0, 1, 0, 0, 0, 0),
        "buffer_size": (262144, 262144, 0, 0, 0, 0, 0, 0),
    }


def test_an_empty_app_table_is_pcp_trust() -> None:
    assert dcb_json("app", dscp_prio={}) == "{}\n"
    assert port_qos_from_dcb({"app": {}}, "x") == {"dscp_prio": (), "trust": "pcp"}


def test_captured_reader_reads_written_captures_and_names_the_missing(tmp_path: Path) -> None:
    write_capture(tmp_path, "eth0", "pfc", _profile_json("pfc"))
    read = CapturedDcbReader(tmp_path).read("eth0")
    assert set(read.objects) == {"pfc"}
    assert read.objects["pfc"]["prio_pfc"][3] is True
    assert set(read.missing) == {"ets", "app", "buffer"}
    assert str(tmp_path / "dcb" / "eth0" / "ets.json") in read.missing["ets"]


def test_a_corrupt_capture_is_a_source_error_naming_the_file(tmp_path: Path) -> None:
    write_capture(tmp_path, "eth0", "ets", '{"tc_bw": [1, 2')
    with pytest.raises(SourceError, match="ets.json"):
        CapturedDcbReader(tmp_path).read("eth0")


def test_a_hostile_interface_name_never_leaves_the_capture_directory(tmp_path: Path) -> None:
    (tmp_path / "pfc.json").write_text(_profile_json("pfc"))
    read = CapturedDcbReader(tmp_path / "dcb" / "x").read("..")
    assert read.objects == {} and set(read.missing) == set(DCB_OBJECTS)


def test_the_real_dcb_on_loopback_reports_no_dcb_support() -> None:
    """The kernel's dcbnl answers EOPNOTSUPP for a device without DCB ops; that is absence with a reason."""
    read = CommandDcbReader().read("lo")
    assert read.objects == {}
    assert set(read.missing.values()) == {"no DCB support on the interface (EOPNOTSUPP)"}


def test_the_real_dcb_on_a_missing_interface_says_so() -> None:
    read = CommandDcbReader().read("netdqos-nodev")
    assert set(read.missing.values()) == {"no such interface"}


def test_a_missing_dcb_binary_is_reported_not_raised(tmp_path: Path) -> None:
    read = CommandDcbReader(str(tmp_path / "no-dcb")).read("eth0")
    assert read.objects == {} and "not found" in read.missing["pfc"]


def _fake_dcb(tmp_path: Path, body: str) -> str:
    path = tmp_path / "dcb"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_command_reader_parses_what_a_dcb_process_prints(tmp_path: Path) -> None:
    """A `dcb` stand-in run as a real process: argv as iproute2 takes it, the capture on stdout."""
    script = _fake_dcb(
        tmp_path, f'[ "$1 $3 $4 $5" = "-j show dev eth7" ] || exit 9\ncat "{FIXTURES}/$2.json"'
    )
    read = CommandDcbReader(script).read("eth7")
    assert read.missing == {}
    assert port_qos_from_dcb(read.objects, "eth7")["pfc"] == (3,)


def test_an_unexplained_dcb_failure_is_a_source_error(tmp_path: Path) -> None:
    script = _fake_dcb(tmp_path, 'echo "Attribute read: Input/output error" >&2; exit 1')
    with pytest.raises(SourceError, match="Input/output error"):
        CommandDcbReader(script).read("eth0")


def test_permission_denied_is_absence_with_its_reason(tmp_path: Path) -> None:
    script = _fake_dcb(tmp_path, 'echo "Attribute read: Operation not permitted" >&2; exit 1')
    assert "no permission" in CommandDcbReader(script).read("eth0").missing["ets"]


def test_auto_backend_runs_the_command_only_on_the_real_sys(tmp_path: Path) -> None:
    assert isinstance(make_dcb_reader("auto", Path("/sys")), CommandDcbReader)
    assert isinstance(make_dcb_reader("auto", tmp_path), CapturedDcbReader)
    with pytest.raises(ValueError):
        make_dcb_reader("netlink", tmp_path)
    assert os.path.isabs(CommandDcbReader().path)
