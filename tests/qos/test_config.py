"""`[qos]`: setting names are checked against the vocabulary, with the message naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from netd.config.settings import load_config
from netd.errors import ConfigError


def test_expected_and_ignore_take_setting_names(tmp_path: Path) -> None:
    path = tmp_path / "netd.toml"
    path.write_text('[qos]\nscope = "fabric"\nexpected = { trust = "dscp", "dcqcn.rp_ai_rate" = "5" }\n')
    cfg = load_config(path, environ={})
    assert cfg.qos.scope == "fabric" and cfg.qos.expected == {"trust": "dscp", "dcqcn.rp_ai_rate": "5"}
    assert load_config(environ={"NETD_QOS_IGNORE": "mtu,gid_index"}).qos.ignore == ("mtu", "gid_index")


@pytest.mark.parametrize(
    "toml",
    ['[qos]\nexpected = { pfc_priority = "3" }\n', '[qos]\nignore = ["dcqcn."]\n', '[qos]\nscope = "rack"\n'],
)
def test_an_unknown_setting_or_scope_is_a_config_error(tmp_path: Path, toml: str) -> None:
    path = tmp_path / "netd.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError, match="qos"):
        load_config(path, environ={})
