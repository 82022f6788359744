"""Bearer-token authentication for mutating endpoints (docs/architecture.md, Safety rules).

The token comes from ``api.token_file`` (first line, stripped) or ``NETD_API_TOKEN``; it is compared in
constant time (``hmac.compare_digest``) and never logged or echoed. With no token configured, mutating
endpoints refuse every request (403): netd never mutates a NIC on an unauthenticated request.
Read endpoints stay open on the bind address the operator chose.

The guard is declared to OpenAPI as an HTTP bearer security scheme, so the schema says which routes
need the token. It is also checked *before the request body is read* (netd.api.guard finds the
route's guard through :data:`CHECK_ATTR`): an unauthenticated client cannot make netd buffer or parse
a body.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from fastapi import HTTPException, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from netd.errors import ConfigError

__all__ = ["CHECK_ATTR", "header_check", "load_token", "token_guard"]

# The attribute of a guard dependency holding its header check: (Authorization value) -> error or None.
CHECK_ATTR = "netd_token_check"
_BEARER = HTTPBearer(auto_error=False, scheme_name="bearerToken", description="api.token_file")
_PRESENTED = Security(_BEARER)


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


def header_check(token: str | None) -> Callable[[str | None], HTTPException | None]:
    """(Authorization header value) -> the error to answer, or None: for routes outside FastAPI's
    dependency machinery (the NCCL pin route) and for the pre-body guard."""
    expected = token.encode() if token else None

    def check(authorization: str | None) -> HTTPException | None:
        if expected is None:
            return HTTPException(
                status_code=403, detail="mutating endpoints are disabled: no API token configured"
            )
        scheme, _, presented = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(presented.strip().encode(), expected):
            return HTTPException(
                status_code=401,
                detail="a valid bearer token is required",
                headers={"WWW-Authenticate": "Bearer"},
            )
        return None

    return check


def token_guard(token: str | None) -> Callable[[HTTPAuthorizationCredentials | None], None]:
    """A FastAPI dependency: ``Depends(token_guard(token))`` on every mutating route."""
    check = header_check(token)

    def require_token(credentials: HTTPAuthorizationCredentials | None = _PRESENTED) -> None:
        presented = f"{credentials.scheme} {credentials.credentials}" if credentials else None
        error = check(presented)
        if error is not None:
            raise error

    setattr(require_token, CHECK_ATTR, check)
    return require_token
