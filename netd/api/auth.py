"""Bearer-token authentication for mutating endpoints (docs/architecture.md, Safety rules).

The token comes from ``api.token_file`` (first line, stripped) or ``NETD_API_TOKEN``; it is compared in
constant time (``hmac.compare_digest``) and never logged or echoed. With no token configured, mutating
endpoints refuse every request (403): netd never mutates a NIC on an unauthenticated request.
Read endpoints stay open on the bind address the operator chose.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from fastapi import Header, HTTPException

from netd.errors import ConfigError

__all__ = ["load_token", "token_guard"]


def load_token(token_file: Path | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The configured token, or None. A token file that exists but is unreadable or empty is an error."""
    environ = os.environ if environ is None else environ
    if token_file is not None:
        try:
            token = token_file.read_text().strip()
        except OSError as exc:
            raise ConfigError(f"api.token_file {token_file}: {exc.strerror or exc}") from exc
        if not token:
            raise ConfigError(f"api.token_file {token_file} is empty")
        return token
    return environ.get("NETD_API_TOKEN") or None


def token_guard(token: str | None) -> Callable[[str | None], None]:
    """A FastAPI dependency: ``Depends(token_guard(token))`` on every mutating route."""
    expected = token.encode() if token else None

    def require_token(authorization: str | None = Header(default=None)) -> None:
        if expected is None:
            raise HTTPException(
                status_code=403, detail="mutating endpoints are disabled: no API token configured"
            )
        scheme, _, presented = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(presented.strip().encode(), expected):
            raise HTTPException(
                status_code=401,
                detail="a valid bearer token is required",
                headers={"WWW-Authenticate": "Bearer"},
            )

    return require_token
