"""The ASGI layer in front of every netd app: Host allow-list, in-flight limit, auth and body limits
*before* the body is read.

Order per request, each step answering problem+json (docs/service.md, Errors) without reading on:

1. **Host** (421): a dotted name in the ``Host`` header must be the listen host or in
   ``api.allowed_hosts``. A web page the host's browser loads can make it send requests to
   127.0.0.1 under the page's own name (DNS rebinding), and such names are always dotted (a domain
   the attacker registered). IP literals, single-label names (``localhost``, a short host name) and
   ``*.localhost`` cannot be rebound from the internet and pass.
2. **In flight** (503 + ``Retry-After``): past ``max_requests`` concurrent requests new ones are
   turned away at once, instead of queueing until every client times out. /healthz and /readyz
   are exempt: a probe must see the process alive while it sheds load.
3. **Auth** (401/403): a route guarded by :func:`netd.api.auth.token_guard` checks the token here,
   from the headers, so an unauthenticated client cannot make netd buffer or parse a body.
4. **Body size** (413): ``Content-Length`` over the route's limit is refused before a byte of body is
   read; a body without one (chunked) is read up to the limit and refused the moment it passes it.
   The extender routes take kube-scheduler's full NodeLists (5000 nodes are ~25 MB); every other
   route is small.
5. **Depth** (400): small JSON bodies nested deeper than :data:`~netd.api.problems.MAX_DEPTH` are
   refused before the JSON parser recurses into them (the extender's parser has its own limit).

A refusal that leaves body bytes unread closes the connection (``connection: close``).
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.routing import Route, compile_path

from netd.api.auth import CHECK_ATTR
from netd.api.problems import MAX_DEPTH, PROBLEM_JSON, problem_body

__all__ = ["GuardLimits", "RequestGuard", "guard_limits", "json_depth"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MiB = 1 << 20
LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")
EXEMPT = ("/healthz", "/readyz")
REASONS = {400: "too_deep", 401: "auth", 403: "auth", 413: "too_large", 421: "host", 503: "busy"}


@dataclass(frozen=True)
class GuardLimits:
    max_body_bytes: int = MiB
    # path prefix -> body limit; kube-scheduler sends every candidate Node (~5 KB each) when the
    # extender is not nodeCacheCapable: 5000 nodes measured 23.6 MB
    route_body_bytes: tuple[tuple[str, int], ...] = (("/scheduler/", 64 * MiB),)
    # as many as connections by default: a pin join waits up to its window (netd.nccl), and every rank
    # of a big job waits at once
    max_requests: int = 1024
    retry_after_s: int = 1
    # extra Host names ("*": any); loopback names and IP literals are always allowed
    allowed_hosts: tuple[str, ...] = ()
    listen_host: str = ""
    # refusals by reason (netd_http_requests_rejected_total{reason})
    stats: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REASONS.values(), 0), compare=False)

    def body_limit(self, path: str) -> int:
        for prefix, limit in self.route_body_bytes:
            if path.startswith(prefix):
                return limit
        return self.max_body_bytes

    def host_allowed(self, host_header: str) -> bool:
        host = host_header.strip().lower()
        if host.startswith("["):  # [::1]:9469
            host = host[1 : host.find("]")] if "]" in host else host
        elif host.count(":") == 1:
            host = host.rpartition(":")[0]
        host = host.rstrip(".")
        if not host or "*" in self.allowed_hosts or host in LOOPBACK_NAMES:
            return True
        if host == self.listen_host.lower() or host in (h.lower() for h in self.allowed_hosts):
            return True
        if "." not in host or host.endswith(".localhost"):
            return True  # a single-label name (public DNS serves none) or RFC 6761 localhost
        try:
            ipaddress.ip_address(host)
            return True  # an IP literal: not a name anyone can rebind
        except ValueError:
            return False


def guard_limits(listen_host: str, allowed_hosts: Iterable[str] = ()) -> GuardLimits:
    """The limits of a listener on ``listen_host`` with ``api.allowed_hosts``."""
    return GuardLimits(listen_host=listen_host.strip("[]"), allowed_hosts=tuple(allowed_hosts))


def json_depth(body: bytes) -> int:
    """The deepest nesting of ``[``/``{`` outside strings (vectorised: a 1 MiB body takes a few ms)."""
    a = np.frombuffer(body, dtype=np.uint8)
    if not a.size:
        return 0
    positions = np.arange(a.size)
    quotes = np.flatnonzero(a == ord('"'))
    if quotes.size:
        # a quote after an odd run of backslashes is escaped: measure the run before each quote
        last_plain = np.maximum.accumulate(np.where(a != ord("\\"), positions, -1))
        before = np.where(quotes > 0, quotes - 1 - last_plain[np.maximum(quotes - 1, 0)], 0)
        marks = np.zeros(a.size, dtype=np.int64)
        marks[quotes[before % 2 == 0]] = 1
        in_string = (np.cumsum(marks) % 2).astype(bool)  # from an opening quote up to its closing one
    else:
        in_string = np.zeros(a.size, dtype=bool)
    step = ((a == ord("[")) | (a == ord("{"))).astype(np.int64)
    step -= ((a == ord("]")) | (a == ord("}"))).astype(np.int64)
    step[in_string] = 0
    return int(np.cumsum(step).max())


Check = Callable[[str | None], Any]


def _dependant_checks(route: APIRoute) -> list[Check]:
    out, todo = [], list(route.dependant.dependencies)
    while todo:
        dep = todo.pop()
        check = getattr(dep.call, CHECK_ATTR, None)
        if check is not None:
            out.append(check)
        todo.extend(dep.dependencies)
    return out


def guarded_routes(
    routes: Iterable[Any], prefix: str = "", outer: tuple[Check, ...] = ()
) -> Iterator[tuple[re.Pattern[str], frozenset[str], list[Check]]]:
    """(path regex, methods, token checks) of every route that needs a token. Routers included into
    an app are walked through (FastAPI >= 0.120 keeps them as included-router nodes that carry
    their prefix and dependencies rather than copying their routes)."""
    for route in routes:
        if isinstance(route, APIRoute):
            checks = [*outer, *_dependant_checks(route)]
            if checks:
                yield compile_path(prefix + route.path)[0], frozenset(route.methods or ()), checks
        elif isinstance(route, Route) and (check := getattr(route.endpoint, CHECK_ATTR, None)) is not None:
            # a plain route (the NCCL pin route) declares its token check on its endpoint
            yield compile_path(prefix + route.path)[0], frozenset(route.methods or ()), [*outer, check]
        elif hasattr(route, "original_router"):
            ctx = getattr(route, "include_context", None)
            deps = getattr(ctx, "dependencies", ()) or ()
            more = tuple(c for d in deps if (c := getattr(d.dependency, CHECK_ATTR, None)) is not None)
            yield from guarded_routes(
                route.original_router.routes, prefix + getattr(ctx, "prefix", ""), outer + more
            )


class RequestGuard:
    """Pure ASGI middleware (``app.add_middleware(RequestGuard, routes=app, limits=...)``)."""

    def __init__(self, app: ASGIApp, routes: FastAPI, limits: GuardLimits) -> None:
        self.app, self.routes, self.limits = app, routes, limits
        self.in_flight = 0
        self._guarded: list[tuple[re.Pattern[str], frozenset[str], list[Check]]] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope["headers"])
        path = scope["path"]
        lim = self.limits
        if not lim.host_allowed(headers.get("host", "")):
            await self._refuse(send, scope, 421, "this Host is not served here (api.allowed_hosts)", headers)
            return
        if self.in_flight >= lim.max_requests and path not in EXEMPT:
            retry = {"retry-after": str(lim.retry_after_s)}
            await self._refuse(send, scope, 503, "too many requests in flight; retry later", headers, retry)
            return
        for check in self._route_checks(scope):
            error = check(headers.get("authorization"))
            if error is not None:
                await self._refuse(send, scope, error.status_code, error.detail, headers, error.headers)
                return
        limit = lim.body_limit(path)
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            await self._refuse(send, scope, 413, f"request body over {limit} bytes", headers)
            return
        self.in_flight += 1
        try:
            if _has_body(scope, headers) and (length is None or limit <= lim.max_body_bytes):
                body = await _read_body(receive, limit)
                if body is None:
                    await self._refuse(send, scope, 413, f"request body over {limit} bytes", headers)
                    return
                if limit <= lim.max_body_bytes and json_depth(body) > MAX_DEPTH:
                    await self._refuse(send, scope, 400, f"JSON nested deeper than {MAX_DEPTH} levels", {})
                    return
                receive = _replay(body, receive)
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1

    def _route_checks(self, scope: Scope) -> list[Check]:
        if self._guarded is None:  # routes are all included before the first request
            self._guarded = list(guarded_routes(self.routes.router.routes))
        for regex, methods, checks in self._guarded:
            if scope["method"] in methods and regex.match(scope["path"]):
                return checks
        return []

    async def _refuse(
        self,
        send: Send,
        scope: Scope,
        status: int,
        detail: str,
        headers: dict[str, str],
        extra: dict[str, str] | None = None,
    ) -> None:
        reason = REASONS.get(status, "auth")
        self.limits.stats[reason] = self.limits.stats.get(reason, 0) + 1
        body = json.dumps(problem_body(status, detail, scope["path"])).encode()
        out = [(b"content-type", PROBLEM_JSON.encode()), (b"content-length", str(len(body)).encode())]
        out += [(k.lower().encode(), v.encode()) for k, v in (extra or {}).items()]
        if _has_body(scope, headers):  # unread body bytes would be parsed as the next request
            out.append((b"connection", b"close"))
        await send({"type": "http.response.start", "status": status, "headers": out})
        await send({"type": "http.response.body", "body": body})


def _headers(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    wanted = (b"host", b"authorization", b"content-length", b"transfer-encoding")
    return {k.decode("latin-1"): v.decode("latin-1") for k, v in raw if k in wanted}


def _has_body(scope: Scope, headers: dict[str, str]) -> bool:
    if "transfer-encoding" in headers:
        return True
    length = headers.get("content-length")
    return length is not None and length != "0"


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(parts)  # disconnected: the app will see an empty body and the client is gone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)


def _replay(body: bytes, receive: Receive) -> Receive:
    """The buffered body as one message, then the connection's own messages (a disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
