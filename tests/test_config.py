"""Configuration: file, environment, overrides, and precise errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from netd.config.settings import load_config
from netd.errors import ConfigError


def test_defaults_without_file(tmp_path: Path):
    cfg = load_config(None, environ={})
    assert cfg.interval == 1.0
    assert cfg.listen_address() == ("127.0.0.1", 9469)
    assert cfg.sysfs_root == Path("/sys")
    assert cfg.emulator.tors == 2


def test_file_then_env_then_overrides(tmp_path: Path):
    f = tmp_path / "netd.toml"
    f.write_text('interval = 2.0\nlisten = "[::1]:9000"\n[ethtool]\nbackend = "files"\nexclude = ["ib*"]\n')
    cfg = load_config(f, environ={"NETD_INTERVAL": "3", "NETD_RDMA_EXCLUDE": "mlx5_4, mlx5_5"})
    assert cfg.interval == 3.0
    assert cfg.listen_address() == ("::1", 9000)
    assert cfg.ethtool.backend == "files"
    assert cfg.ethtool.exclude == ("ib*",)
    assert cfg.rdma.exclude == ("mlx5_4", "mlx5_5")
    assert load_config(f, environ={}, overrides={"interval": 5}).interval == 5


def test_netd_config_variable_names_the_file(tmp_path: Path):
    f = tmp_path / "x.toml"
    f.write_text("interval = 4\n")
    assert load_config(None, environ={"NETD_CONFIG": str(f)}).interval == 4


@pytest.mark.parametrize(
    ("text", "environ", "needles"),
    [
        ("interval = 0\n", {}, ["`interval`", "greater than or equal to 0.1", "got 0"]),
        ('listen = "localhost"\n', {}, ["`listen`", "HOST:PORT"]),
        ('[ethtool]\nbackend = "netlink"\n', {}, ["`ethtool.backend`", "'auto', 'ioctl' or 'files'"]),
        ('[rdma]\nincldue = ["x"]\n', {}, ["unknown key `rdma.incldue`"]),
        ("bogus = 1\n", {}, ["unknown key `bogus`"]),
        ("interval = [\n", {}, ["not valid TOML"]),
        ("", {"NETD_EMULATOR_TORS": "many"}, ["`emulator.tors`", "NETD_* environment", "'many'"]),
    ],
)
def test_errors_name_key_value_and_origin(tmp_path: Path, text, environ, needles):
    f = tmp_path / "netd.toml"
    f.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(f, environ=environ)
    for needle in needles:
        assert needle in str(err.value)


def test_missing_file_is_a_clear_error(tmp_path: Path):
    with pytest.raises(ConfigError, match="cannot read config file .*nope.toml"):
        load_config(tmp_path / "nope.toml", environ={})
