"""Instant queries against a Prometheus server's HTTP API (``GET /api/v1/query``).

The cluster view (``netd fabric``) reads every host's netd series through this client: Prometheus is
the distributed engine (scraping, federation, Thanos/Mimir behind the same API); netd does not gossip.
Each answer is a list of ``(labels, value)`` for an instant vector; anything else (an HTTP error, a
PromQL error, a timeout, a non-vector result) raises :class:`SourceError` naming the query.

A Prometheus that answers too late is not one that cannot be reached: with 8000 ports one query
took 4.1 s against a 5 s timeout, and the log said "unreachable". The client tells them apart in
its message and in :attr:`PrometheusClient.last_failure` (``slow``, ``unreachable``, ``error``).
"""

from __future__ import annotations

import math
from typing import Any

import httpx

from netd.errors import SourceError

__all__ = ["PrometheusClient", "Sample", "promql_string"]

_SOURCE = "prometheus"
Sample = tuple[dict[str, str], float]


def promql_string(value: str) -> str:
    """A PromQL double-quoted string literal holding ``value``."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class PrometheusClient:
    def __init__(
        self, url: str, timeout_s: float = 5.0, transport: httpx.BaseTransport | None = None
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self._client = httpx.Client(base_url=self.url, timeout=timeout_s, transport=transport)
        self.last_failure: str | None = None  # of the last query: slow | unreachable | error | None

    def query(self, promql: str, timeout_s: float | None = None, at: float | None = None) -> list[Sample]:
        """An instant query, evaluated at ``at`` (Unix seconds) if given, else at Prometheus' now."""
        params = {"query": promql}
        if at is not None:
            params["time"] = f"{at:.3f}"
        self.last_failure = "error"
        try:
            kwargs: dict[str, Any] = {} if timeout_s is None else {"timeout": timeout_s}
            resp = self._client.get("/api/v1/query", params=params, **kwargs)
        except httpx.TimeoutException as exc:
            self.last_failure = "slow"
            limit = self.timeout_s if timeout_s is None else timeout_s
            raise SourceError(
                _SOURCE, f"{self.url} slow: no answer within {limit:g} s to {promql[:80]!r}"
            ) from exc
        except httpx.HTTPError as exc:
            self.last_failure = "unreachable"
            raise SourceError(_SOURCE, f"{self.url} unreachable: {exc}") from exc
        try:
            doc = resp.json()
        except ValueError as exc:
            raise SourceError(_SOURCE, f"{self.url} answered HTTP {resp.status_code} without JSON") from exc
        if not isinstance(doc, dict):  # a proxy's page, or another API at this address
            raise SourceError(
                _SOURCE, f"{self.url} answered HTTP {resp.status_code} with JSON that is not an object"
            )
        if resp.status_code != 200 or doc.get("status") != "success":
            why = doc.get("error") or f"HTTP {resp.status_code}"
            raise SourceError(_SOURCE, f"query {promql!r} failed: {why}")
        data = doc.get("data")
        kind = data.get("resultType") if isinstance(data, dict) else None
        result = data.get("result") if isinstance(data, dict) else None
        if kind != "vector" or not isinstance(result, list):
            raise SourceError(_SOURCE, f"query {promql!r} returned {kind}, not a vector")
        out: list[Sample] = []
        for item in result:  # a malformed sample is skipped, as one with a non-finite value is
            try:
                value = float(item["value"][1])
                metric = item.get("metric") or {}
                labels = {str(k): str(v) for k, v in metric.items()}
            except (AttributeError, KeyError, IndexError, TypeError, ValueError):
                continue
            if math.isfinite(value):
                out.append((labels, value))
        self.last_failure = None
        return out

    def close(self) -> None:
        self._client.close()
