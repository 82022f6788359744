"""The listener's warm-up (netd.api.server.warm_up): before the first client, one request no route
answers walks every router of the app, as a client's first request would, without middleware."""

from __future__ import annotations

import asyncio

import httpx
from fastapi import APIRouter, FastAPI, Request
from fastapi.routing import APIRoute
from starlette.types import Scope

from netd.api.server import WARM_UP_PATH, warm_up
from tests.api.conftest import serving


def _app(walked: list[str], seen: list[str]) -> FastAPI:
    class Recording(APIRoute):
        def matches(self, scope: Scope):  # type: ignore[no-untyped-def]
            walked.append(scope["path"])
            return super().matches(scope)

    inner = APIRouter(prefix="/scheduler", route_class=Recording)

    @inner.post("/prioritize")
    def prioritize() -> list[str]:
        return []

    app = FastAPI()
    app.include_router(inner)

    @app.middleware("http")
    async def count(request: Request, call_next):  # type: ignore[no-untyped-def]
        seen.append(request.url.path)
        return await call_next(request)

    return app


def test_the_warm_up_walks_the_included_routers_and_passes_no_middleware():
    walked: list[str] = []
    seen: list[str] = []
    asyncio.run(warm_up(_app(walked, seen)))
    assert WARM_UP_PATH in walked  # the included router's route was built and asked
    assert seen == []  # not a request anyone counts or logs


def test_a_listener_warms_up_before_it_serves(free_port):
    walked: list[str] = []
    seen: list[str] = []
    with serving(_app(walked, seen), free_port) as base:
        assert WARM_UP_PATH in walked
        assert httpx.post(f"{base}/scheduler/prioritize").json() == []
    assert seen == ["/scheduler/prioritize"]


def test_an_app_without_a_router_is_left_alone():
    asyncio.run(warm_up(object()))
