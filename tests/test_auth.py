"""Bearer-token guard for mutating endpoints."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi import Depends, FastAPI
from fastapi.testclient import TestClient

from netd.api.auth import load_token, token_guard
from netd.errors import ConfigError


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
