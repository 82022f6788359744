"""`netd status` table rendering from a status document."""

from __future__ import annotations

import pytest

from netd.commands.status_table import render_status, si


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "-"),
        (0, "0"),
        (0.0, "0"),
        (3.25, "3.2"),
        (12, "12"),
        (999, "999"),
        (1234, "1.2k"),
        (5.6e6, "5.6M"),
        (7.8e9, "7.8G"),
    ],
)
def test_si(value, text):
    assert si(value) == text


def _doc(**signals):
    base = {
        "rx_gbps": 150.25,
        "tx_gbps": 80.0,
        "ecn_marked_per_s": 0.0,
        "cnp_sent_per_s": 0.0,
        "cnp_handled_per_s": 0.0,
        "retransmits_per_s": 0.0,
        "errors_per_s": 0.0,
        "pfc": [
            {
                "priority": 3,
                "rx_pauses_per_s": 1200.0,
                "rx_pause_fraction": 0.045,
                "tx_pauses_per_s": 0.0,
                "tx_pause_fraction": 0.0,
            }
        ],
    }
    base.update(signals)
    port = {
        "device": "mlx5_0",
        "port": 1,
        "netdev": "ens1f0np0",
        "state": "ACTIVE",
        "signals": base,
        "saturated": [],
    }
    return {"host": "h1", "emulated": True, "interval_s": 1.0, "ports": [port], "sources": []}


def test_table_has_header_row_and_values():
    out = render_status(_doc())
    lines = out.splitlines()
    assert "EMULATED FABRIC" in lines[0]
    assert lines[1].split()[:3] == ["PORT", "NETDEV", "LINK"]
    row = lines[2]
    for cell in ("mlx5_0/1", "ens1f0np0", "ACTIVE", "150.2", "80.0", "p3:1.2k", "p3:4.5"):
        assert cell in row
    assert "\x1b[" not in out


def test_colour_marks_values_past_thresholds():
    out = render_status(_doc(errors_per_s=50.0, ecn_marked_per_s=10.0), colour=True)
    assert "\x1b[31;1m" in out  # errors and 4.5 % pause are past the alert/warn thresholds
    assert "\x1b[33m" in out
    quiet = render_status(
        _doc(pfc=[{"priority": 3, "rx_pauses_per_s": 0.0, "rx_pause_fraction": 0.0}]), colour=True
    )
    assert "\x1b[3" not in quiet


def test_first_sample_and_no_ports_and_failing_sources():
    doc = _doc()
    doc["interval_s"] = None
    assert "first sample" in render_status(doc)
    doc["ports"] = []
    doc["sources"] = [{"source": "ethtool", "ok": False, "error": "boom"}]
    out = render_status(doc)
    assert "no RDMA ports found" in out
    assert "source ethtool failed: boom" in out


def test_saturated_counter_is_flagged():
    doc = _doc()
    doc["ports"][0]["saturated"] = ["symbol_error"]
    assert "SAT" in render_status(doc)
