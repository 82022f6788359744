"""Configuration: file, environment, overrides, and precise errors."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from netd.config.settings import Config, load_config
from netd.errors import ConfigError
from tests.blocking import within

DOCS = Path(__file__).resolve().parent.parent / "docs"


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


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_config_path_that_is_not_a_file_is_an_error_at_once(tmp_path: Path, kind: str) -> None:
    # A FIFO would block open() until a writer came: netd's start, or a SIGHUP reload on the thread
    # that serves HTTP, would hang without a word. A directory is what a ConfigMap mounted without
    # subPath leaves at the file's path.
    conf = tmp_path / "netd.toml"
    if kind == "fifo":
        os.mkfifo(conf)
    else:
        conf.mkdir()
    why = "not a regular file" if kind == "fifo" else r"a directory \(a ConfigMap mounted without subPath\?\)"
    with pytest.raises(ConfigError, match=rf"cannot read config file .*netd.toml: {why}$"):
        within(10, lambda: load_config(conf, environ={}))


@pytest.mark.parametrize("kind", ["directory", "dangling link"])
def test_the_default_path_there_but_not_a_file_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    # It used to be skipped as "no configuration file": netd ran on its defaults without a word.
    default = tmp_path / "netd.toml"
    if kind == "directory":
        default.mkdir()
    else:
        default.symlink_to(tmp_path / "gone.toml")
    monkeypatch.setattr("netd.config.settings.DEFAULT_CONFIG_PATH", default)
    with pytest.raises(ConfigError, match=f"cannot read config file {default}: "):
        load_config(environ={})


def test_the_default_path_read_through_a_link_and_absent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A ConfigMap mounted with subPath, or a package's file: a link to a regular file is read; no file
    # at all is the defaults.
    target = tmp_path / "..data" / "netd.toml"
    target.parent.mkdir()
    target.write_text("interval = 2.5\n")
    default = tmp_path / "netd.toml"
    monkeypatch.setattr("netd.config.settings.DEFAULT_CONFIG_PATH", default)
    assert load_config(environ={}).interval == Config().interval
    default.symlink_to(target)
    assert load_config(environ={}).interval == 2.5


def test_dev_null_is_an_empty_configuration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # NETD_CONFIG=/dev/null is how scripts, the benchmarks and tests ask for the defaults, whatever
    # /etc/netd holds; it is a character device, not a regular file, and must stay allowed.
    default = tmp_path / "netd.toml"
    default.write_text("interval = 2.5\n")
    monkeypatch.setattr("netd.config.settings.DEFAULT_CONFIG_PATH", default)
    assert load_config(environ={}).interval == 2.5
    assert load_config(environ={"NETD_CONFIG": os.devnull}).interval == Config().interval
    (tmp_path / "null").symlink_to(os.devnull)
    assert load_config(tmp_path / "null", environ={}).interval == Config().interval


def _path_fields(
    annotation: object, model: type[BaseModel] = Config, at: tuple[str, ...] = ()
) -> Iterator[tuple[str, ...]]:
    """Every path of the configuration of that type, as (section..., key): found by walking the models,
    so a path added later is covered without being listed here."""
    for name, field in model.model_fields.items():
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            yield from _path_fields(annotation, field.annotation, (*at, name))
        elif field.annotation == annotation:
            yield (*at, name)


OPTIONAL_PATHS = list(_path_fields(Path | None))
SET_PATHS = list(_path_fields(Path))


def test_the_walk_finds_the_paths() -> None:
    assert {("api", "token_file"), ("topology", "static_file"), ("nccl", "pin_token_file")} <= set(
        OPTIONAL_PATHS
    )
    assert {("sysfs_root",), ("bpf", "state_file")} <= set(SET_PATHS)


def _load_blank(tmp_path: Path, where: tuple[str, ...], blank: str) -> list[Callable[[], Config]]:
    """Loading ``blank`` for the key from a file and from its NETD_* variable."""
    *section, key = where
    conf = tmp_path / "netd.toml"
    conf.write_text((f"[{'.'.join(section)}]\n" if section else "") + f'{key} = "{blank}"\n')
    from_env = {"NETD_" + "_".join(where).upper(): blank}
    return [lambda: load_config(conf, environ={}), lambda: load_config(environ=from_env)]


@pytest.mark.parametrize("blank", ["", "  "])
@pytest.mark.parametrize("where", OPTIONAL_PATHS, ids=".".join)
def test_a_blank_optional_path_is_unset(tmp_path: Path, where: tuple[str, ...], blank: str) -> None:
    # docs/configuration.md shows `token_file = ""` for an unset path, and operators copy it: as a Path,
    # "" was "." (the working directory), set, and read as a file (netd did not start).
    for load in _load_blank(tmp_path, where, blank):
        value: object = load()
        for part in where:
            value = getattr(value, part)
        assert value is None


@pytest.mark.parametrize("where", SET_PATHS, ids=".".join)
def test_a_blank_path_that_must_be_set_is_an_error(tmp_path: Path, where: tuple[str, ...]) -> None:
    for load in _load_blank(tmp_path, where, ""):
        with pytest.raises(ConfigError, match=rf"`{re.escape('.'.join(where))}`: .*a path cannot be empty"):
            load()


def _keys(model: type[BaseModel], at: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, field in model.model_fields.items():
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            yield from _keys(field.annotation, (*at, name))
        else:
            yield (*at, name)


def _written(doc: dict[str, Any], at: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, value in doc.items():
        if isinstance(value, dict) and (*at, name) in SECTIONS:
            yield from _written(value, (*at, name))
        else:
            yield (*at, name)


SECTIONS = {key[:i] for key in _keys(Config) for i in range(1, len(key))}


def test_the_configuration_reference_lists_every_key() -> None:
    # A key netd reads but the reference does not show is a key no operator finds; the other way round
    # is an unknown key, which the blocks' loading (below) refuses.
    blocks = re.findall(r"```toml\n(.*?)```", (DOCS / "configuration.md").read_text(), flags=re.S)
    written = {key for block in blocks for key in _written(tomllib.loads(block))}
    assert set(_keys(Config)) - written == set()


def test_every_toml_block_of_the_configuration_reference_loads(tmp_path: Path) -> None:
    blocks = re.findall(r"```toml\n(.*?)```", (DOCS / "configuration.md").read_text(), flags=re.S)
    assert len(blocks) >= 5
    for i, block in enumerate(blocks):
        conf = tmp_path / f"block{i}.toml"
        conf.write_text(block)
        cfg = load_config(conf, environ={})
        assert cfg.api.token_file is None and cfg.topology.static_file is None  # shown as ""
