"""`netd status` table rendering from a status document."""

from __future__ import annotations

import pytest

from netd.commands.status_raw import render_raw
from netd.commands.status_table import render_status, select_ports, si


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


def _port(device="mlx5_0", pfc_rx=1200.0, pfc_tx=0.0, rx_fraction=0.045, tx_fraction=0.0, **signals):
    base = {
        "rx_gbps": 150.25,
        "tx_gbps": 80.0,
        "ecn_marked_per_s": 0.0,
        "ce_fraction": 0.0,
        "cnp_sent_per_s": 0.0,
        "cnp_handled_per_s": 0.0,
        "retransmits_per_s": 0.0,
        "errors_per_s": 0.0,
        "pfc": [
            {
                "priority": 3,
                "rx_pauses_per_s": pfc_rx,
                "rx_pause_fraction": rx_fraction,
                "tx_pauses_per_s": pfc_tx,
                "tx_pause_fraction": tx_fraction,
            }
        ],
    }
    base.update(signals)
    n = device.rsplit("_", 1)[1]
    return {
        "device": device,
        "port": 1,
        "netdev": f"ens1f{n}np{n}",
        "state": "ACTIVE",
        "rate_gbps": 200.0,
        "signals": base,
        "saturated": [],
    }


def _doc(**signals):
    return {"host": "h1", "emulated": True, "interval_s": 1.0, "ports": [_port(**signals)], "sources": []}


def test_table_has_header_row_and_values():
    out = render_status(_doc())
    lines = out.splitlines()
    assert "EMULATED FABRIC" in lines[0]
    assert lines[1].split() == [
        "PORT",
        "LINK",
        "RX%",
        "TX%",
        "ECN",
        "CNPtx",
        "CNPrx",
        "PFCrx",
        "PFCtx",
        "PAUSE%",
        "RETX",
        "ERR",
    ]
    assert lines[2].split() == ["mlx5_0/1", "up", "75.1", "40.0", "0", "0", "0", "1.2k", "0", "4.5", "0", "0"]
    assert "\x1b[" not in out


def test_the_default_fits_80_columns_with_the_largest_values():
    big = dict(
        ecn_marked_per_s=9.9e9,
        cnp_sent_per_s=9.9e9,
        cnp_handled_per_s=9.9e9,
        retransmits_per_s=9.9e9,
        errors_per_s=9.9e9,
        pfc_rx=9.9e9,
        pfc_tx=9.9e9,
        rx_fraction=1.0,
        tx_fraction=1.0,
    )
    doc = _doc(**big)
    doc["ports"] = [_port("mlx5_10", **big), _port("mlx5_11", **big)]
    doc["ports"][0]["saturated"] = ["symbol_error"]
    assert max(len(line) for line in render_status(doc).splitlines()[1:]) <= 80


def test_pause_sent_shows_the_storm_source_and_wide_shows_each_priority_each_way():
    doc = _doc(pfc_rx=0.0, pfc_tx=52_000.0, rx_fraction=0.0, tx_fraction=0.93)
    row = render_status(doc).splitlines()[2].split()
    assert row[7:10] == ["0", "52.0k", "93.0"]  # PFCrx, PFCtx, PAUSE% (the worse direction)
    wide = render_status(doc, wide=True).splitlines()
    header = wide[1].split("  ")
    assert [h.strip() for h in header if h.strip().startswith("p3")] == [
        "p3 rx/s",
        "p3 tx/s",
        "p3 rx%",
        "p3 tx%",
    ]
    assert "ens1f0np0" in wide[2] and "200G" in wide[2] and "52.0k" in wide[2] and "93.0" in wide[2]


def test_total_row_sums_rates_of_the_ports_shown_and_filters_choose_them():
    doc = _doc()
    doc["ports"] = [_port("mlx5_0", ecn_marked_per_s=1000.0), _port("mlx5_1", ecn_marked_per_s=500.0)]
    total = render_status(doc).splitlines()[-1].split()
    assert total[0] == "TOTAL" and "1.5k" in total and "2.4k" in total  # ECN/s and PFC rx/s summed
    only = select_ports(doc, devices=["ens1f1np1"])
    assert [p["device"] for p in only] == ["mlx5_1"]
    out = render_status(doc, ports=only)
    assert "TOTAL" not in out and "mlx5_0/1" not in out
    assert "no port matches the filter" in render_status(doc, ports=select_ports(doc, ports=[2]))


def test_raw_view_lists_counters_with_rates_and_filters():
    port = _port()
    port["counters"] = {
        "np_cnp_sent": {"name": "cnp_sent", "value": 120, "rate": 40.0},
        "port_rcv_data": {"name": "rx_bytes", "value": 4000, "rate": 0.0},
        "rnr_nak_retry_err": {"name": "rnr", "value": 0, "rate": 0.0},
    }
    port["ethtool"] = {
        "rx_prio3_pause": {"value": 7, "rate": 1.0},
        "rx_prio5_pause": {"value": 0, "rate": 0.0},
    }
    out = render_raw([port], nonzero=True, grep="pause|cnp")
    assert "np_cnp_sent (cnp_sent)" in out and "rx_prio3_pause" in out
    assert "rx_prio5_pause" not in out and "rnr" not in out and "port_rcv_data" not in out
    assert "rnr_nak_retry_err" in render_raw([port])


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


def test_colour_marks_values_past_thresholds():
    out = render_status(_doc(errors_per_s=50.0, ecn_marked_per_s=10.0), colour=True)
    assert "\x1b[31;1m" in out  # errors past the alert threshold
    assert "\x1b[33m" in out  # 4.5 % pause past the warning one
    assert "\x1b[3" not in render_status(_doc(pfc_rx=0.0, rx_fraction=0.0), colour=True)
