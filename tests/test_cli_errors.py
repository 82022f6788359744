"""An operator in a hurry gets one line and an exit status, never a traceback or a silent fallback."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest

from netd.cli import main


def _loop(tmp_path: Path) -> Path:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    return tmp_path / "a"


def _file(tmp_path: Path) -> Path:
    (tmp_path / "f").write_text("x")
    return tmp_path / "f"


@pytest.mark.parametrize(
    ("make_root", "says"),
    [
        (lambda p: p / "nonexistent", "no such directory"),
        (_loop, "symlink loop"),
        (_file, "not a directory"),
    ],
)
@pytest.mark.parametrize("command", [["status"], ["check"], ["run", "--listen", "127.0.0.1:1"]])
def test_a_tree_that_is_not_there_is_an_error_not_an_empty_host(tmp_path, capsys, make_root, says, command):
    root = make_root(tmp_path)
    assert main([*command, "--sysfs-root", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("netd: --sysfs-root") and says in err and "Traceback" not in err


def test_a_missing_tree_in_the_config_file_is_named_as_such(tmp_path, capsys):
    config = tmp_path / "netd.toml"
    config.write_text(f'sysfs_root = "{tmp_path / "gone"}"\n')
    assert main(["check", "--config", str(config)]) == 2
    assert "sysfs_root" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf", "soon"])
def test_intervals_must_be_positive_seconds(tmp_path, capsys, value):
    with pytest.raises(SystemExit) as done:
        main(["status", "--sysfs-root", str(tmp_path), "--interval", value])
    assert done.value.code == 2
    assert "--interval" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "later"])
def test_a_calm_interval_must_be_zero_or_positive_seconds(tmp_path, capsys, value):
    with pytest.raises(SystemExit) as done:
        main(["run", "--sysfs-root", str(tmp_path), "--calm-interval", value])
    assert done.value.code == 2
    assert "--calm-interval" in capsys.readouterr().err


def test_a_calm_interval_from_the_command_line_reaches_the_configuration(tmp_path):
    from netd.cli import _config, build_parser

    args = build_parser().parse_args(["run", "--sysfs-root", str(tmp_path), "--calm-interval", "0"])
    assert _config(args).calm_interval == 0.0
    args = build_parser().parse_args(["run", "--sysfs-root", str(tmp_path)])
    assert _config(args).calm_interval == 5.0  # the default when neither flag nor file says


def test_a_config_file_in_utf16_is_a_one_line_error(tmp_path, capsys):
    config = tmp_path / "netd.toml"
    config.write_bytes("interval = 2\n".encode("utf-16"))
    assert main(["check", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "not UTF-8" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "environ", "origin"),
    [
        (["--interval", "0.01"], {}, "from the command line"),
        ([], {"NETD_INTERVAL": "0.01"}, "from NETD_* environment"),
        ([], {}, "from "),  # the config file's own path
    ],
)
def test_an_invalid_value_names_where_it_came_from(tmp_path, capsys, monkeypatch, argv, environ, origin):
    config = tmp_path / "netd.toml"
    config.write_text("interval = 0.01\n" if not argv and not environ else "")
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    assert main(["run", "--config", str(config), "--sysfs-root", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err
    assert "`interval`" in err and origin in err
    if origin == "from ":
        assert str(config) in err


def test_a_misspelt_variable_is_reported_with_a_guess(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("NETD_INTERVL", "3")
    monkeypatch.setenv("NETD_TUNER_TIMEOUT_MS", "500")  # the NCCL plugin's: not a netd setting, not a typo
    monkeypatch.setenv("NETD_CACHE_DIR", str(tmp_path))  # the simulator's kernel cache (cc/sim/jit.py)
    with caplog.at_level(logging.WARNING):
        assert main(["check", "--sysfs-root", str(tmp_path)]) in (0, 1)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("NETD_INTERVL" in m and "NETD_INTERVAL" in m for m in warned)
    assert not any("NETD_TUNER" in m or "NETD_CACHE_DIR" in m for m in warned)


@pytest.mark.parametrize("command", [["anomalies"], ["flows"], ["nccl-table", "show"]])
def test_commands_that_only_ask_the_daemon_take_no_sysfs_root(tmp_path, capsys, command):
    with pytest.raises(SystemExit) as done:
        main([*command, "--sysfs-root", str(tmp_path)])
    assert done.value.code == 2
    assert "unrecognized arguments: --sysfs-root" in capsys.readouterr().err


def test_ctrl_c_at_start_up_is_a_clean_exit(monkeypatch, capsys):
    def interrupted(*_args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("netd.cli.build_parser", interrupted)
    assert main(["status"]) == 130
    assert capsys.readouterr().err.strip() == "netd: interrupted"


def test_check_fails_on_a_corrupt_counter_and_speaks_json(mlx5_host, capsys):
    root, tree = mlx5_host
    tree.set_raw("mlx5_0", 1, "hw_counters", "np_cnp_sent", "N/A (no PMA)\n")  # the driver: no such counter
    assert main(["check", "--sysfs-root", str(root), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["failed"] is False
    assert any(c["status"] == "absent" and "np_cnp_sent" in c["detail"] for c in doc["checks"])
    tree.set_raw("mlx5_0", 1, "hw_counters", "np_cnp_sent", "-12\n")  # a counter that lies
    assert main(["check", "--sysfs-root", str(root)]) == 1
    assert (
        "[  FAIL] rdma mlx5_0/1: corrupt counter hw_counters/np_cnp_sent: negative" in capsys.readouterr().out
    )


def test_status_filters_and_raw_options(mlx5_host, capsys):
    root, _ = mlx5_host
    base = ["status", "--sysfs-root", str(root), "--interval", "0.05"]
    assert main([*base, "--device", "mlx5_9"]) == 2  # nothing matches: nothing to show
    assert "no port matches the filter" in capsys.readouterr().out
    assert main([*base, "--device", "mlx5_1", "--json"]) == 0
    assert [p["device"] for p in json.loads(capsys.readouterr().out)["ports"]] == ["mlx5_1"]
    assert main([*base, "--nonzero"]) == 2
    assert "add --raw" in capsys.readouterr().err
    assert main([*base, "--raw", "--grep", "("]) == 2
    assert "--grep" in capsys.readouterr().err
    assert main([*base, "--raw", "--grep", "cnp", "--device", "mlx5_0"]) == 0
    out = capsys.readouterr().out
    assert "np_cnp_sent" in out and "port_rcv_data" not in out


def _subcommands(parser) -> list[list[str]]:
    out = []
    for action in parser._actions:
        if isinstance(action.choices, dict):
            for name, sub in action.choices.items():
                out.append([name])
                out += [[name, *rest] for rest in _subcommands(sub)]
    return out


def test_every_subcommand_has_help_and_every_example_of_the_epilog_parses(capsys):
    from netd.cli import EPILOG, build_parser

    parser = build_parser()
    commands = _subcommands(parser)
    assert len(commands) >= 20
    for argv in commands:
        with pytest.raises(SystemExit) as done:
            main([*argv, "--help"])
        assert done.value.code == 0, argv
        assert "usage: netd" in capsys.readouterr().out
    examples = [
        re.split(r"\s{2,}", line.strip())[0] for line in EPILOG.splitlines() if line.startswith("  netd ")
    ]
    assert len(examples) >= 5
    for example in examples:
        parser.parse_args(example.replace("URL", "http://127.0.0.1:9090").split()[1:])  # no SystemExit
