"""A flood of requests that are not HTTP is counted in a metric and logged once a minute at most,
instead of one uvicorn warning per request."""

from __future__ import annotations

import logging
import socket

from prometheus_client import CollectorRegistry, generate_latest

from netd.api.app import create_app
from netd.api.connections import INVALID, ConnectionStats, InvalidRequestLog
from netd.api.guard import GuardLimits
from netd.api.http_metrics import HttpCollector
from tests.api.conftest import serving


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _logger(name: str) -> tuple[logging.Logger, Lines]:
    logger, lines = logging.getLogger(name), Lines()
    logger.addHandler(lines)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return logger, lines


def test_one_line_per_interval_with_the_count_and_other_warnings_untouched():
    now = [0.0]
    logger, lines = _logger("test.invalid.unit")
    stats = ConnectionStats()
    log = InvalidRequestLog(stats, 60.0, logger, clock=lambda: now[0])
    for _ in range(100):
        log.warning(INVALID)
    log.warning("Unsupported upgrade request.")
    now[0] = 59.0
    log.warning(INVALID)
    now[0] = 61.0
    log.warning(INVALID)
    messages = [r.getMessage() for r in lines.records]
    assert stats.invalid == 102
    assert messages[0].startswith("1 invalid HTTP requests")
    assert messages[1] == "Unsupported upgrade request."
    assert messages[2].startswith("101 invalid HTTP requests")  # 99 + 1 + 1 since the first line
    assert len(messages) == 3
    assert log.level == logger.level  # everything else is uvicorn's logger's own


def test_a_garbage_flood_over_real_sockets_is_counted_not_logged_per_request(free_port):
    app = create_app(lambda: None, lambda: None, 1.0)
    with serving(app, free_port):
        _, lines = _logger("uvicorn.error")  # after uvicorn configured its logging
        try:
            for _ in range(50):
                with socket.create_connection(("127.0.0.1", free_port), timeout=5) as s:
                    s.sendall(b"\x16\x03\x01 not http at all\r\n\r\n")  # e.g. TLS to a plain port
                    assert s.recv(4096).startswith(b"HTTP/1.1 400")
        finally:
            logging.getLogger("uvicorn.error").removeHandler(lines)
    stats = app.state.connection_stats
    assert stats.invalid == 50
    invalid_lines = [r for r in lines.records if "invalid http" in r.getMessage().lower()]
    assert len(invalid_lines) == 1 and invalid_lines[0].getMessage().startswith("1 invalid")
    registry = CollectorRegistry()
    registry.register(HttpCollector(stats, GuardLimits()))
    assert b"netd_http_requests_invalid_total 50.0" in generate_latest(registry)
