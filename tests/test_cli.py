"""The command line, in process: help, errors, check, status and bench over fake trees."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from netd.cli import build_parser, main
from tests.conftest import write_ethtool


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["run", "--help"],
        ["status", "--help"],
        ["check", "--help"],
        ["bench", "collect", "--help"],
    ],
)
def test_help_explains_every_command(argv, capsys):
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "usage: netd" in out
    if argv == ["--help"]:
        for word in ("run", "status", "check", "bench", "examples:", "NETD_"):
            assert word in out


def test_every_option_has_help_text():
    def walk(parser):
        for action in parser._actions:
            if action.dest not in ("help", "command", "bench", "version") and action.option_strings:
                assert action.help, f"{parser.prog} {action.option_strings} has no help"
            if isinstance(action.choices, dict):  # a subparsers action
                for sub in action.choices.values():
                    walk(sub)

    walk(build_parser())


def test_check_reports_ports_and_missing_things(mlx5_host, capsys):
    root, tree = mlx5_host
    (root / "ethtool" / "ens1f1np1").unlink()
    tree.set_raw("mlx5_0", 1, "hw_counters", "np_cnp_sent", "N/A (no PMA)\n")
    assert main(["check", "--sysfs-root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "[    ok] rdma mlx5_0/1: mlx5, Ethernet, ACTIVE, 200.0 Gb/s, netdev ens1f0np0" in out
    assert "[    ok] ethtool ens1f0np0:" in out
    assert "[absent] ethtool ens1f1np1: absent: no capture" in out
    assert "unreadable counter hw_counters/np_cnp_sent" in out


def test_check_fails_when_hardware_was_asked_for_and_there_is_none(tmp_path: Path, capsys):
    (tmp_path / "netd.toml").write_text('fabric = "hardware"\n')
    assert main(["check", "--config", str(tmp_path / "netd.toml"), "--sysfs-root", str(tmp_path)]) == 1
    assert "[  FAIL] rdma: no RDMA ports" in capsys.readouterr().out


def test_status_json_from_a_tree_has_raw_values_and_rates(mlx5_host, capsys):
    root, tree = mlx5_host
    tree.set_counters("mlx5_0", 1, {"port_xmit_data": 250, "np_ecn_marked_roce_packets": 7})
    write_ethtool(root, "ens1f0np0", {"rx_prio3_pause": 3, "rx_prio3_pause_duration": 40})
    assert main(["status", "--sysfs-root", str(root), "--json", "--interval", "0.05"]) == 0
    doc = json.loads(capsys.readouterr().out)
    port = doc["ports"][0]
    assert port["counters"]["port_xmit_data"]["value"] == 1000  # bytes
    assert port["counters"]["port_xmit_data"]["rate"] == 0.0  # a frozen tree: nothing moved
    assert port["signals"]["tx_gbps"] == 0.0
    assert port["signals"]["pfc"][0]["priority"] == 3
    assert doc["interval_s"] > 0


def test_status_table_from_a_tree(mlx5_host, capsys):
    root, _ = mlx5_host
    assert main(["status", "--sysfs-root", str(root), "--interval", "0.05", "--no-color"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[2].split()[:2] == ["mlx5_0/1", "up"]
    assert "EMULATED" not in out


def test_status_without_daemon_or_devices_says_what_to_do(tmp_path: Path, free_port, capsys):
    (tmp_path / "netd.toml").write_text(f'sysfs_root = "{tmp_path}"\nlisten = "127.0.0.1:{free_port}"\n')
    assert main(["status", "--config", str(tmp_path / "netd.toml")]) == 2
    err = capsys.readouterr().err
    assert f"no netd daemon at 127.0.0.1:{free_port}" in err
    assert "netd run" in err


def test_bad_config_is_exit_2_with_the_key(tmp_path: Path, capsys):
    (tmp_path / "netd.toml").write_text("interval = -1\n")
    assert main(["check", "--config", str(tmp_path / "netd.toml")]) == 2
    assert "`interval`" in capsys.readouterr().err


def test_bench_collect_prints_the_promised_fields(capsys):
    assert main(["bench", "collect", "--devices", "1", "--ticks", "3", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    promised = {"devices", "files_per_tick", "cpu_us_per_tick", "naive_cpu_us_per_tick", "speedup_vs_naive"}
    assert promised <= set(result)
    assert result["devices"] == 2  # one dual-port NIC = two mlx5 devices
    assert result["files_per_tick"] == 2 * 52 + 2  # 21 PMA + 31 hw counters per device, 2 ethtool captures


def test_bench_on_a_given_tree(mlx5_host, capsys):
    root, _ = mlx5_host
    assert main(["bench", "collect", "--sysfs-root", str(root), "--ticks", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["devices"] == 2
