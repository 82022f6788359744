"""netd.api.client: the URL for a listen address, and how each failed GET reads in the CLI."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from netd.api.client import daemon_get, daemon_url
from netd.errors import DaemonUnreachable, NetdError


@pytest.mark.parametrize(
    ("listen", "url"),
    [
        ("127.0.0.1:9469", "http://127.0.0.1:9469/v1/ports"),
        ("[::1]:9469", "http://[::1]:9469/v1/ports"),
        ("localhost:80", "http://localhost:80/v1/ports"),
    ],
)
def test_url_brackets_ipv6_hosts(listen: str, url: str) -> None:
    assert daemon_url(listen, "/v1/ports") == url


def answer(monkeypatch: pytest.MonkeyPatch, response: httpx.Response | Exception) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    def fake_get(url: str, params: Any = None, timeout: float | None = None) -> httpx.Response:
        calls.append({"url": url, "params": params, "timeout": timeout})
        if isinstance(response, Exception):
            raise response
        return response

    monkeypatch.setattr(httpx, "get", fake_get)
    return calls


def test_a_200_answer_comes_back_with_params_and_timeout_passed_on(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = answer(monkeypatch, httpx.Response(200, json={"ok": True}))
    got = daemon_get("[::1]:9555", "/v1/flows", params={"top": 3}, timeout_s=5.0)
    assert got.json() == {"ok": True}
    assert calls == [{"url": "http://[::1]:9555/v1/flows", "params": {"top": 3}, "timeout": 5.0}]


def test_nobody_answering_is_unreachable_with_the_callers_advice(monkeypatch: pytest.MonkeyPatch) -> None:
    answer(monkeypatch, httpx.ConnectError("refused"))
    with pytest.raises(DaemonUnreachable) as err:
        daemon_get("127.0.0.1:9555", "/v1/anomalies", hint="start it with `netd run`")
    assert str(err.value) == "no netd daemon at 127.0.0.1:9555 (ConnectError); start it with `netd run`"
    with pytest.raises(DaemonUnreachable, match=r"\(ConnectError\)$"):
        daemon_get("127.0.0.1:9555", "/v1/ports")  # no advice: nothing appended


def test_an_error_answer_carries_the_problem_detail_and_status_advice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    problem = {"type": "about:blank", "title": "Service Unavailable", "status": 503, "detail": "no tick"}
    answer(monkeypatch, httpx.Response(503, json=problem))
    with pytest.raises(NetdError) as err:
        daemon_get("127.0.0.1:1", "/v1/ports", status_hints={503: "try again in a second", 404: "unused"})
    assert not isinstance(err.value, DaemonUnreachable)  # the daemon is there; it said no
    assert (
        str(err.value) == "netd at 127.0.0.1:1 answered HTTP 503 to /v1/ports: no tick; try again in a second"
    )
    with pytest.raises(DaemonUnreachable, match="no tick"):  # what `netd status` asks for
        daemon_get("127.0.0.1:1", "/v1/ports", status_error=DaemonUnreachable)


@pytest.mark.parametrize(
    ("response", "said"),
    [
        (httpx.Response(404, json={"title": "Not Found", "status": 404}), "Not Found"),
        (httpx.Response(502, text="<h1>bad gateway</h1>"), "<h1>bad gateway</h1>"),
        (httpx.Response(500, text=""), "Internal Server Error"),
    ],
)
def test_without_a_detail_the_title_body_or_reason_is_said(
    monkeypatch: pytest.MonkeyPatch, response: httpx.Response, said: str
) -> None:
    answer(monkeypatch, response)
    with pytest.raises(NetdError) as err:
        daemon_get("127.0.0.1:1", "/v1/nccl/table")
    assert str(err.value).endswith(f"to /v1/nccl/table: {said}")
