"""Errors as RFC 9457 problem details (``application/problem+json``) on every route.

* HTTP errors raised by a route (``HTTPException``) keep their status, detail and headers
  (``WWW-Authenticate`` on 401) and get the status phrase as ``title``; the ``type`` is one of
  :data:`TYPES` for the statuses netd documents (docs/service.md, Errors), else ``about:blank``.
  A :class:`ProblemError` sets its own ``type`` and adds extension members (RFC 9457 §3.2), e.g. the
  outcome of a DCQCN change that was not applied.
* Request validation errors answer 422 with ``type: urn:netd:problem:invalid-request`` and an
  ``errors`` list naming each bad field (``query.limit``, ``body.NodeNames``) and why. The input is
  never echoed: a 589 KB invalid body once answered 9.28 MB, and deep input broke the encoder.
* Anything unexpected answers 500 without internals in the body; the traceback goes to the log.
  A client that hangs up before its body is complete is not unexpected: it is logged at debug
  level, without a traceback (one ~4 KB traceback per dropped scheduler request once filled the
  log and, under a test harness that did not drain stderr, blocked the listener's next write).

The OpenAPI schema documents the same: every operation's 422 (and the shared 4xx/5xx) response is a
:class:`Problem` with the problem+json media type.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

__all__ = [
    "MAX_DEPTH",
    "PROBLEM_JSON",
    "TYPES",
    "problem_body",
    "Problem",
    "ProblemError",
    "install_problem_handlers",
    "problem_response",
]

log = logging.getLogger(__name__)
PROBLEM_JSON = "application/problem+json"
MAX_DEPTH = 64  # JSON nesting netd accepts; no netd or Kubernetes document comes near it
MAX_FIELD_ERRORS = 20  # a body with 10,000 bad items names the first 20 (and counts the rest)
VALIDATION_TYPE = "urn:netd:problem:invalid-request"
# One problem type per status netd answers on purpose (docs/service.md lists them).
TYPES = {
    400: "urn:netd:problem:malformed-request",  # not JSON, or nested deeper than allowed
    401: "urn:netd:problem:unauthorized",
    403: "urn:netd:problem:forbidden",
    404: "urn:netd:problem:not-found",
    405: "urn:netd:problem:method-not-allowed",
    413: "urn:netd:problem:body-too-large",
    421: "urn:netd:problem:host-not-allowed",
    422: VALIDATION_TYPE,
    503: "urn:netd:problem:unavailable",
}


class FieldProblem(BaseModel):
    location: str = Field(description="where: query.<name>, path.<name>, body.<field>...")
    message: str


class Problem(BaseModel):
    """RFC 9457 problem details."""

    type: str = Field("about:blank", description="a URI naming the problem type")
    title: str
    status: int
    detail: str | None = None
    instance: str | None = Field(None, description="the request path")
    errors: list[FieldProblem] | None = Field(None, description="invalid request fields (422 only)")


class ProblemError(StarletteHTTPException):
    """An HTTP error whose problem document has a ``type`` URI and extension members."""

    def __init__(self, status: int, detail: str, *, type_: str, extensions: dict[str, Any]) -> None:
        super().__init__(status_code=status, detail=detail)
        self.type_ = type_
        self.extensions = extensions


def problem_body(status: int, detail: str | None, instance: str, type_: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": type_ or TYPES.get(status, "about:blank"),
        "title": HTTPStatus(status).phrase,
    }
    body["status"] = status
    if detail:
        body["detail"] = detail
    body["instance"] = instance
    return body


def problem_response(
    status: int,
    detail: str | None,
    instance: str,
    *,
    type_: str | None = None,
    errors: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
    extensions: dict[str, Any] | None = None,
) -> JSONResponse:
    body = problem_body(status, detail, instance, type_)
    if errors is not None:
        body["errors"] = errors
    for key, value in (extensions or {}).items():
        body.setdefault(key, value)  # never shadows a standard member
    return JSONResponse(jsonable_encoder(body), status_code=status, media_type=PROBLEM_JSON, headers=headers)


def _location(loc: tuple[Any, ...] | list[Any]) -> str:
    return ".".join(str(p) for p in loc) or "request"


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    detail = exc.detail if isinstance(exc.detail, str) else None
    if isinstance(exc, ProblemError):
        return problem_response(
            exc.status_code, detail, request.url.path, type_=exc.type_, extensions=exc.extensions
        )
    return problem_response(exc.status_code, detail, request.url.path, headers=getattr(exc, "headers", None))


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [
        {"location": _location(e.get("loc", ())), "message": str(e.get("msg", "invalid"))[:200]}
        for e in exc.errors()[:MAX_FIELD_ERRORS]
    ]
    first = errors[0] if errors else None
    detail = f"{first['location']}: {first['message']}" if first else "invalid request"
    if len(exc.errors()) > 1:
        detail += f" (and {len(exc.errors()) - 1} more)"
    return problem_response(422, detail, request.url.path, type_=VALIDATION_TYPE, errors=errors)


async def _client_gone(request: Request, exc: Exception) -> JSONResponse:
    log.debug("client hung up during %s %s before its body was complete", request.method, request.url.path)
    # no one reads this answer (the server drops what is sent to a closed connection)
    return problem_response(400, "the client hung up before its body was complete", request.url.path)


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, RecursionError):  # a body nested deeper than the parser's stack
        return problem_response(400, f"request nested deeper than {MAX_DEPTH} levels", request.url.path)
    log.exception("unexpected error serving %s %s", request.method, request.url.path, exc_info=exc)
    return problem_response(500, "internal error; see the netd log", request.url.path)


def _problem_openapi(app: FastAPI) -> dict[str, Any]:
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components["Problem"] = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
    defs = components["Problem"].pop("$defs", {})
    components.update(defs)
    ref = {"$ref": "#/components/schemas/Problem"}
    for path in schema.get("paths", {}).values():
        for op in path.values():
            for content in op.get("requestBody", {}).get("content", {}).values():
                components.update(content.get("schema", {}).pop("$defs", {}))  # hand-declared bodies
            responses = op.setdefault("responses", {})
            if "422" in responses:
                responses["422"] = {
                    "description": "Invalid request",
                    "content": {PROBLEM_JSON: {"schema": ref}},
                }
            responses.setdefault(
                "default", {"description": "Error", "content": {PROBLEM_JSON: {"schema": ref}}}
            )
    for unused in ("HTTPValidationError", "ValidationError"):
        components.pop(unused, None)
    app.openapi_schema = schema
    return schema


def install_problem_handlers(app: FastAPI) -> None:
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(ClientDisconnect, _client_gone)
    app.add_exception_handler(Exception, _unexpected)
    app.openapi = lambda: _problem_openapi(app)  # type: ignore[method-assign]
