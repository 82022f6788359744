"""``[nccl]``: defaults, environment overrides and clear errors."""

from __future__ import annotations

import os

import pytest

from netd.config.nccl import ROOT_SOCKET, default_socket_path
from netd.config.settings import load_config
from netd.errors import ConfigError


def test_defaults():
    n = load_config(environ={}).nccl
    assert n.enabled and n.pin_service == "" and n.socket_mode == 0o666
    assert n.pin_window < n.pin_timeout < 10.0  # nested under the plugin's default 10 s timeout
    assert n.socket_path() == default_socket_path()


def test_root_default_socket_is_the_plugins_default(monkeypatch, tmp_path):
    monkeypatch.setattr("os.geteuid", lambda: 0)
    assert default_socket_path() == ROOT_SOCKET
    mine = tmp_path / "netd-1000"  # as user 1000's session would hold it: theirs, private
    mine.mkdir(mode=0o700)
    try:
        os.chown(mine, 1000, 1000)
    except PermissionError:
        pytest.skip("only root can give a directory to user 1000")
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    monkeypatch.setattr("os.getuid", lambda: 1000)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert default_socket_path() == mine / "nccl.sock"


def test_environment_overrides():
    env = {
        "NETD_NCCL_PIN_SERVICE": "https://fabric-01:9469/",
        "NETD_NCCL_SOCKET_MODE": "660",
        "NETD_NCCL_SOCKET": "/tmp/x.sock",
        "NETD_NCCL_MIN_GAIN": "0.3",
    }
    n = load_config(environ=env).nccl
    assert n.pin_service == "https://fabric-01:9469" and n.socket_mode == 0o660
    assert str(n.socket_path()) == "/tmp/x.sock" and n.min_gain == 0.3


@pytest.mark.parametrize(
    ("var", "value", "words"),
    [
        ("NETD_NCCL_PIN_SERVICE", "fabric-01:9469", "http:// or https:// URL"),
        ("NETD_NCCL_PIN_WINDOW", "0", "nccl.pin_window"),
        ("NETD_NCCL_SOCKET_MODE", "999", "nccl.socket_mode"),
    ],
)
def test_errors_name_the_key(var, value, words):
    with pytest.raises(ConfigError, match=words.replace("/", ".")):
        load_config(environ={var: value})
