"""The emulated hosts' debugfs cc_params trees, and the fabric following what is written there."""

from __future__ import annotations

from pathlib import Path

import pytest

from netd.emulated.fabric_host import EmulatedFabric
from netd.sources.cc_params import discover
from netd.vocabulary.dcqcn_knobs import KNOBS


@pytest.fixture
def fabric(tmp_path: Path):
    fab = EmulatedFabric(tmp_path / "emu", tors=1, hosts_per_tor=2, ports_per_host=2, sim_ms_per_tick=5)
    yield fab
    fab.close()


def test_every_emulated_nic_has_an_upstream_shaped_cc_params_tree(fabric: EmulatedFabric) -> None:
    for host in range(fabric.n_hosts):
        root = fabric.host_root(host)
        trees, notes = discover(root, root / "kernel" / "debug")
        assert notes == [] and [(t.device, t.kind, t.pci) for t in trees] == [
            ("mlx5_0", "debugfs", "0000:41:00.0"),
            ("mlx5_1", "debugfs", "0000:41:00.1"),
        ]
        assert sorted(p.name for p in trees[0].path.iterdir()) == sorted(k.name for k in KNOBS)
        assert (trees[0].path / "rp_time_reset").stat().st_mode & 0o777 == 0o600
        assert trees[1].read()["rp_ai_rate"] == 5


def test_the_fabric_runs_with_what_is_in_force_on_host_0(fabric: EmulatedFabric) -> None:
    (fabric.params_dir / "rp_ai_rate").write_text("40\n")
    (fabric.params_dir / "np_min_time_between_cnps").write_text("8\n")
    fabric.advance(1.0)
    params = fabric.fabric.params
    assert (params.rp_ai_rate, params.np_min_time_between_cnps) == (40, 8)
    assert params.kmin_bytes == 800_000  # the switch's settings are not the NIC's to change


def test_a_garbage_or_out_of_range_value_leaves_the_fabric_as_it_was(fabric: EmulatedFabric) -> None:
    (fabric.params_dir / "rp_time_reset").write_text("banana\n")
    fabric.advance(1.0)
    assert fabric.fabric.params.rp_time_reset == 300
    (fabric.params_dir / "rp_time_reset").write_text("999999\n")  # above the firmware's 131071 µs
    fabric.advance(1.0)
    assert fabric.fabric.params.rp_time_reset == 300
