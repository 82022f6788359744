"""Bearer-token guard for mutating endpoints."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from fastapi import Depends, FastAPI
from fastapi.testclient import TestClient

from netd.api.auth import load_token, token_guard
from netd.errors import ConfigError
from tests.blocking import within


def _client(token: str | None) -> TestClient:
    app = FastAPI()

    @app.post("/mutate", dependencies=[Depends(token_guard(token))])
    def mutate() -> dict[str, bool]:
        return {"done": True}

    return TestClient(app)


@pytest.mark.parametrize(
    ("configured", "header", "status"),
    [
        ("s3cret", "Bearer s3cret", 200),
        ("s3cret", "bearer s3cret", 200),
        ("s3cret", "Bearer wrong", 401),
        ("s3cret", "Basic s3cret", 401),
        ("s3cret", None, 401),
        (None, "Bearer anything", 403),
    ],
)
def test_guard(configured, header, status):
    headers = {"Authorization": header} if header else {}
    response = _client(configured).post("/mutate", headers=headers)
    assert response.status_code == status
    assert "s3cret" not in response.text  # never echoed


def test_load_token(tmp_path: Path):
    f = tmp_path / "token"
    f.write_text("abc\n")
    assert load_token(f, environ={}) == "abc"
    assert load_token(None, environ={"NETD_API_TOKEN": "xyz"}) == "xyz"
    assert load_token(None, environ={}) is None
    f.write_text("\n")
    with pytest.raises(ConfigError, match="is empty"):
        load_token(f, environ={})
    with pytest.raises(ConfigError, match="api.token_file"):
        load_token(tmp_path / "missing", environ={})


def test_load_token_takes_the_first_line(tmp_path: Path):
    # A header cannot carry a newline: a second line would make the token impossible to present.
    f = tmp_path / "token"
    f.write_text("  abc  \nleft over by an editor\n")
    assert load_token(f, environ={}) == "abc"


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_load_token_refuses_what_is_not_a_regular_file(tmp_path: Path, kind: str):
    # A FIFO planted at the token path would block netd's start in open() with no writer, forever.
    f = tmp_path / "token"
    if kind == "fifo":
        os.mkfifo(f)
    else:
        f.mkdir()
    why = "not a regular file" if kind == "fifo" else "a directory"
    with pytest.raises(ConfigError, match=rf"api.token_file .*token: {why}$"):
        within(10, lambda: load_token(f, environ={}))


def test_a_world_readable_token_file_is_warned_about_once(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    private, group, world = (tmp_path / n for n in ("private", "group", "world"))
    for f, mode in ((private, 0o600), (group, 0o640), (world, 0o644)):
        f.write_text("abc\n")
        f.chmod(mode)
    with caplog.at_level(logging.WARNING, logger="netd.api"):
        for f in (private, group, world, world):
            assert load_token(f, environ={}) == "abc"
    warned = [r.getMessage() for r in caplog.records if "readable by every user" in r.getMessage()]
    assert warned == [
        f"api.token_file {world} is readable by every user on this host (mode 644): "
        "anyone here can use netd's mutating endpoints; chmod o-r it"
    ]
