"""`netd tune` as a user runs it: dry run on the emulated fabric, applying to a tree, rolling back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from netd.cli import main
from netd.sources.cc_params import read_value
from netd.tuning.journal import Journal, Write
from tests.tuning.conftest import build_host, trees_of

pytestmark = pytest.mark.slow  # runs the tuner on the emulated fabric


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, free_port: int) -> Path:
    """No daemon at the listen address, no RDMA device under the sysfs root, a private journal."""
    empty = tmp_path / "sys"
    empty.mkdir()
    monkeypatch.setenv("NETD_SYSFS_ROOT", str(empty))
    monkeypatch.setenv("NETD_LISTEN", f"127.0.0.1:{free_port}")
    monkeypatch.setenv("NETD_TUNING_STATE_DIR", str(tmp_path / "journal"))
    return tmp_path


def test_dry_run_on_the_emulated_fabric_prints_an_explained_recommendation(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["tune", "--dry-run", "--seconds", "3"]) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "temporary emulated fabric" in captured.err and "temporary" not in out
    assert out.count("why: ") >= 2 and ("CHANGE" in out or "HOLD" in out)
    assert "signals: utilisation" in out  # the signals the decision read


def test_json_output_and_apply_needs_something_to_apply_to(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["tune", "--seconds", "2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)  # stdout is the JSON document alone
    assert doc["recommendation"]["action"] in ("hold", "change") and set(doc["in_force"]) == {
        "mlx5_0",
        "mlx5_1",
    }
    assert main(["tune", "--apply"]) == 2
    assert "nothing to apply to" in capsys.readouterr().err


def test_apply_to_a_tree_and_roll_back(isolated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = build_host(isolated / "host", "debugfs")
    try:
        root = isolated / "host"
        # An idle captured tree: no traffic counters move, so the tuner holds and nothing is written.
        assert main(["tune", "--apply", "--sysfs-root", str(root), "--seconds", "1"]) == 0
        out = capsys.readouterr().out
        assert "HOLD" in out and "apply: nothing to write" in out
        assert main(["tune", "--rollback", "--sysfs-root", str(root)]) == 2
        assert "no applied change set" in capsys.readouterr().err
        values = {t.device: t.read()["rp_ai_rate"] for t in trees_of(root)}
        assert values == {"mlx5_0": 5, "mlx5_1": 5}
    finally:
        tree.close()


def test_recovery_needed_exits_3_with_one_line_and_recover_finishes_it(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = build_host(isolated / "host", "debugfs")
    try:
        root = isolated / "host"
        ai = trees_of(root)[0].path / "rp_ai_rate"
        gone = isolated / "unplugged" / "cc_params" / "rp_ai_rate"  # a NIC that vanished mid-change
        Journal(isolated / "journal").begin(
            [
                Write("mlx5_0", "debugfs", str(ai), "rp_ai_rate", 5, 20),
                Write("mlx5_9", "debugfs", str(gone), "rp_ai_rate", 5, 20),
            ],
            source="test",
            reason="interrupted",
        )
        ai.write_text("20\n")  # the first write had landed when netd died
        assert main(["tune", "--recover", "--sysfs-root", str(root)]) == 3
        out, err = capsys.readouterr()
        assert "recovery-needed" in out and err.count("\n") == 1 and "Traceback" not in err
        assert err.startswith("netd: not applied (recovery-needed): ") and "No such file" in err
        assert read_value(ai) == 5  # what could be put back was
        assert main(["tune", "--rollback", "--sysfs-root", str(root)]) == 3  # still open: refused
        capsys.readouterr()
        gone.parent.mkdir(parents=True)
        gone.write_text("20\n")  # the NIC is back
        assert main(["tune", "--recover", "--sysfs-root", str(root)]) == 0
        assert "recover: recovered" in capsys.readouterr().out and read_value(gone) == 5
        assert main(["tune", "--recover", "--sysfs-root", str(root)]) == 0  # idempotent
        assert "no change set is open" in capsys.readouterr().out
    finally:
        tree.close()


def test_a_journal_that_cannot_be_created_is_one_line_exit_2(
    isolated: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = build_host(isolated / "host", "debugfs")
    try:
        (isolated / "plain-file").write_text("")
        monkeypatch.setenv("NETD_TUNING_STATE_DIR", str(isolated / "plain-file" / "journal"))
        assert main(["tune", "--rollback", "--sysfs-root", str(isolated / "host")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("netd: cannot create the tuning journal directory") and err.count("\n") == 1
    finally:
        tree.close()
