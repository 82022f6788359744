"""Reading, writing, journaling and undoing DCQCN parameters on fake debugfs and OFED trees."""

from __future__ import annotations

from pathlib import Path

import pytest

from netd.errors import TuningError
from netd.sources.cc_params import discover, read_value
from netd.tuning.applier import Applier
from netd.tuning.journal import Journal
from netd.vocabulary.dcqcn_knobs import KNOBS, by_name, tunable_names
from tests.tuning.conftest import build_host, trees_of

TARGET = {"rp_ai_rate": 20, "rp_time_reset": 150, "np_min_time_between_cnps": 8}


def values(root: Path) -> dict[str, dict[str, int]]:
    return {t.device: t.read() for t in trees_of(root)}


def applier(root: Path, journal_dir: Path, **kw: object) -> Applier:
    return Applier(trees_of(root), Journal(journal_dir), **kw)  # type: ignore[arg-type]


def test_debugfs_tree_is_found_through_the_pci_function_and_reads_the_vocabulary(debugfs_host: Path) -> None:
    trees = trees_of(debugfs_host)
    assert [(t.device, t.kind, t.pci) for t in trees] == [
        ("mlx5_0", "debugfs", "0000:41:00.0"),
        ("mlx5_1", "debugfs", "0000:41:00.1"),
    ]
    got = trees[0].read()
    assert set(got) == {k.name for k in KNOBS}  # all 22 upstream files
    assert (got["rp_ai_rate"], got["rp_time_reset"], got["np_min_time_between_cnps"]) == (5, 300, 4)
    assert trees[0].enabled_priorities() is None


def test_ofed_tree_maps_rpg_names_to_the_same_vocabulary(ofed_host: Path) -> None:
    trees = trees_of(ofed_host)
    assert [(t.device, t.kind, t.netdev) for t in trees] == [
        ("mlx5_0", "ofed", "ens1f0np0"),
        ("mlx5_1", "ofed", "ens1f1np1"),
    ]
    got = trees[0].read()
    assert (got["rp_ai_rate"], got["rp_time_reset"], got["np_min_time_between_cnps"]) == (5, 300, 4)
    assert "np_cnp_prio_mode" not in got  # no OFED equivalent: absent, not 0
    assert trees[0].file(by_name("rp_ai_rate")) == trees[0].path / "roce_rp" / "rpg_ai_rate"
    assert trees[0].enabled_priorities() == {"roce_rp": (3,), "roce_np": (3,)}


def test_debugfs_wins_over_ofed_and_a_device_without_either_is_reported(tmp_path: Path) -> None:
    both = build_host(tmp_path / "both", "both")
    bare = build_host(tmp_path / "bare", "none", devices=1)
    try:
        assert {t.kind for t in trees_of(tmp_path / "both")} == {"debugfs"}
        trees, notes = discover(tmp_path / "bare", tmp_path / "bare" / "kernel" / "debug")
        assert trees == [] and "mlx5_0: no DCQCN parameters found" in notes[0]
    finally:
        both.close()
        bare.close()


def test_every_tunable_knob_is_a_debugfs_file_with_a_checked_range() -> None:
    assert set(tunable_names()) >= {
        "rp_ai_rate",
        "rp_hai_rate",
        "rp_time_reset",
        "rp_dce_tcp_g",
        "rp_min_rate",
        "np_min_time_between_cnps",
    }
    knob = by_name("rp_time_reset")
    assert (knob.lo, knob.hi, knob.default, knob.unit) == (1, 131_071, 300, "us")
    assert (by_name("np_min_time_between_cnps").hi, by_name("np_min_time_between_cnps").default) == (4095, 4)
    with pytest.raises(ValueError, match="rp_time_reset=200000 outside"):
        knob.check(200_000)
    with pytest.raises(ValueError, match="unknown DCQCN parameter"):
        by_name("rp_nonsense")


@pytest.mark.parametrize("kind", ["debugfs", "ofed"])
def test_apply_then_rollback_round_trips(tmp_path: Path, kind: str) -> None:
    tree = build_host(tmp_path / "host", kind)
    root = tmp_path / "host"
    try:
        before = values(root)
        a = applier(root, tmp_path / "journal")
        plan = a.plan(TARGET)
        assert len(plan) == 2 * len(TARGET)  # every knob on both devices
        outcome = a.apply(plan, source="test", reason="round trip")
        assert outcome.state == "applied" and outcome.error is None
        after = values(root)
        assert all(after[d][name] == v for d in after for name, v in TARGET.items())
        assert a.plan(TARGET) == []  # nothing left to do: idempotent
        journal = Journal(tmp_path / "journal")
        assert journal.pending() is None and journal.history()[-1]["state"] == "applied"

        undo = a.rollback(source="test")
        assert undo.state == "applied" and values(root) == before
        assert a.rollback(source="test").state == "nothing"  # the undo itself is not undone
    finally:
        tree.close()


def test_plan_refuses_values_outside_the_device_range_or_the_safety_bounds(
    debugfs_host: Path, tmp_path: Path
) -> None:
    a = applier(debugfs_host, tmp_path / "j", bounds={"rp_ai_rate": (1, 50)})
    with pytest.raises(ValueError, match="outside the device range"):
        a.plan({"rp_time_reset": 0})
    with pytest.raises(TuningError, match="outside the configured safety bounds"):
        a.plan({"rp_ai_rate": 80})
    assert values(debugfs_host)["mlx5_0"]["rp_ai_rate"] == 5


def test_rollback_leaves_alone_a_file_changed_since(debugfs_host: Path, tmp_path: Path) -> None:
    a = applier(debugfs_host, tmp_path / "journal")
    a.apply(a.plan({"rp_ai_rate": 20, "rp_time_reset": 150}), source="test", reason="first")
    hand = trees_of(debugfs_host)[0].path / "rp_ai_rate"
    hand.write_text("40\n")  # an operator changed it by hand afterwards
    outcome = a.rollback(source="test")
    assert outcome.state == "applied"
    assert read_value(hand) == 40  # theirs, kept
    assert (
        values(debugfs_host)["mlx5_0"]["rp_time_reset"] == 300
        and values(debugfs_host)["mlx5_1"]["rp_ai_rate"] == 5
    )


def test_concurrent_use_of_a_journal_is_refused_clearly(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal")
    with (
        journal.locked(),
        pytest.raises(TuningError, match="locked"),
        Journal(tmp_path / "journal").locked(),
    ):
        pass
