"""Requests to the running netd daemon, for the commands that show what it sees or ask it to act
(`netd status`, `netd anomalies`, `netd flows`, `netd nccl-env`, `netd nccl-table`, `netd tune`).

One place knows how to reach the daemon at ``--listen`` (``HOST:PORT``, IPv6 as ``[::1]:9469``) and
how to turn the ways that fails into the errors the CLI prints: nobody answering is
:class:`DaemonUnreachable` (with the caller's advice on how to start the right daemon), an answer
other than 200 is a :class:`NetdError` carrying the daemon's own explanation (the ``detail`` of its
RFC 9457 problem document).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import httpx

from netd.config.settings import split_listen
from netd.errors import DaemonUnreachable, NetdError

__all__ = ["daemon_get", "daemon_post", "daemon_url"]


def daemon_url(listen: str, path: str) -> str:
    """``http://HOST:PORT/path`` for a listen address (an IPv6 host goes in brackets)."""
    host, port = split_listen(listen)
    url_host = f"[{host}]" if ":" in host else host
    return f"http://{url_host}:{port}{path}"


def _problem_detail(response: httpx.Response) -> str:
    """What the daemon said went wrong: the problem document's detail (or title), else the body."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        said = body.get("detail") or body.get("title")
        if isinstance(said, str) and said:
            return said
    return response.text[:200] or response.reason_phrase


def daemon_get(
    listen: str,
    path: str,
    *,
    params: Mapping[str, Any] | None = None,
    timeout_s: float = 2.0,
    hint: str = "",
    status_hints: Mapping[int, str] | None = None,
    status_error: type[NetdError] = NetdError,
    accept: Collection[int] = (200,),
) -> httpx.Response:
    """The daemon's answer to ``GET path`` (one of the ``accept`` statuses, 200 by default).

    ``hint`` follows "no netd daemon at ..." when nothing answers (how to start one that serves
    ``path``); ``status_hints`` adds advice for particular HTTP statuses; ``status_error`` is the
    error another status raises (``netd status`` treats a daemon that cannot answer yet like an
    absent one, so it asks for :class:`DaemonUnreachable`).
    """
    try:
        response = httpx.get(daemon_url(listen, path), params=params, timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise _unreachable(listen, hint, exc) from exc
    return _accepted(response, listen, path, accept, status_hints, status_error)


def daemon_post(
    listen: str,
    path: str,
    *,
    token: str | None = None,
    timeout_s: float = 30.0,
    hint: str = "",
    status_hints: Mapping[int, str] | None = None,
    accept: Collection[int] = (200,),
) -> httpx.Response:
    """The daemon's answer to ``POST path`` with the API bearer token (when one is configured)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        response = httpx.post(daemon_url(listen, path), headers=headers, timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise _unreachable(listen, hint, exc) from exc
    return _accepted(response, listen, path, accept, status_hints, NetdError)


def _unreachable(listen: str, hint: str, exc: httpx.HTTPError) -> DaemonUnreachable:
    advice = f"; {hint}" if hint else ""
    return DaemonUnreachable(f"no netd daemon at {listen} ({type(exc).__name__}){advice}")


def _accepted(
    response: httpx.Response,
    listen: str,
    path: str,
    accept: Collection[int],
    status_hints: Mapping[int, str] | None,
    status_error: type[NetdError],
) -> httpx.Response:
    if response.status_code not in accept:
        extra = (status_hints or {}).get(response.status_code)
        advice = f"; {extra}" if extra else ""
        raise status_error(
            f"netd at {listen} answered HTTP {response.status_code} to {path}: "
            f"{_problem_detail(response)}{advice}"
        )
    return response
