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
import logging
import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path

from fastapi import HTTPException, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from netd.config.files import read_regular
from netd.errors import ConfigError

__all__ = ["CHECK_ATTR", "header_check", "load_token", "token_guard"]

# The attribute of a guard dependency holding its header check: (Authorization value) -> error or None.
CHECK_ATTR = "netd_token_check"
_BEARER = HTTPBearer(auto_error=False, scheme_name="bearerToken", description="api.token_file")
_PRESENTED = Security(_BEARER)
log = logging.getLogger("netd.api")
_WARNED: set[Path] = set()  # token files already warned about: the daemon loads the token in several places


def load_token(token_file: Path | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The configured token, or None. A token file that exists but is unreadable, not a regular file,
    or empty is an error; its first line is the token (an HTTP header cannot carry a newline, so a
    second line could never be presented)."""
    environ = os.environ if environ is None else environ
    if token_file is not None:
        try:
            # Refused unless a regular file: a FIFO there would block netd's start in open() for good.
            text = read_regular(token_file).decode("utf-8", "replace")
        except OSError as exc:
            raise ConfigError(f"api.token_file {token_file}: {exc.strerror or exc}") from exc
        token = text.strip().split("\n", 1)[0].strip()
        if not token:
            raise ConfigError(f"api.token_file {token_file} is empty")
        _warn_if_world_readable(token_file)
        return token
    return environ.get("NETD_API_TOKEN") or None


def _warn_if_world_readable(token_file: Path) -> None:
    """The token lets its holder change DCQCN parameters on the NIC: say so once when any local user can
    read it (group access may be deliberate: an operators' group)."""
    try:
        mode = os.stat(token_file).st_mode
    except OSError:
        return
    if mode & stat.S_IROTH and token_file not in _WARNED:
        _WARNED.add(token_file)
        log.warning(
            "api.token_file %s is readable by every user on this host (mode %o): anyone here can use "
            "netd's mutating endpoints; chmod o-r it",
            token_file,
            stat.S_IMODE(mode),
        )


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
