"""The exporter's exact exposition for a known snapshot."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from netd.daemon.health import TickRecorder
from netd.daemon.state import PublishedState
from netd.exporter import NetdCollector
from netd.model.snapshot import (
    Counter,
    CounterGroup,
    EthtoolSample,
    Overflow,
    PortSample,
    Snapshot,
    SourceStatus,
    frozen_map,
)
from netd.series.tracker import SeriesTracker

W32 = 1 << 32


def _port(words: int, cnp: int, ooo: int, symbol: int) -> PortSample:
    counters = [
        Counter("port_rcv_data", "rx_bytes", CounterGroup.PMA, words * 4, 64, Overflow.WRAP, 4),
        Counter("symbol_error", "symbol_error", CounterGroup.PMA, symbol, 16, Overflow.SATURATE),
        Counter("np_cnp_sent", "cnp_sent", CounterGroup.HW, cnp, 64, Overflow.WRAP),
        Counter("out_of_sequence", "out_of_sequence", CounterGroup.HW, ooo, 32, Overflow.WRAP),
        Counter("req_cqe_error", "req_cqe_error", CounterGroup.HW, 2, 32, Overflow.WRAP),
        Counter("rx_dct_connect", "rx_dct_connect", CounterGroup.HW, 9, 32, Overflow.WRAP),
    ]
    return PortSample(
        device="mlx5_0",
        port=1,
        netdev="ens1f0np0",
        link_layer="Ethernet",
        state="ACTIVE",
        phys_state="LinkUp",
        rate_gbps=200.0,
        driver="mlx5",
        counters=frozen_map({c.raw_name: c for c in counters}),
    )


def _snap(t: float, port: PortSample, pause: int) -> Snapshot:
    stats = {"rx_prio3_pause": pause, "rx_prio3_pause_duration": pause * 10, "tx_pause_storm_error_events": 0}
    return Snapshot(
        timestamp=1_700_000_000.0 + t,
        monotonic=t,
        host="h1",
        ports=(port,),
        ethtool=frozen_map({"ens1f0np0": EthtoolSample("ens1f0np0", frozen_map(stats))}),
        sources=(SourceStatus("rdma", True, 0.002, None, 1), SourceStatus("ethtool", False, 0.001, "boom")),
        emulated=True,
        tick_duration_s=0.003,
    )


EXPECTED = """\
# HELP netd_build_info netd build information.
# TYPE netd_build_info gauge
netd_build_info{version="0.1.0"} 1.0
# HELP netd_port_info RDMA port identity; join on device and port. emulated="true" when netd runs its emulated fabric.
# TYPE netd_port_info gauge
netd_port_info{device="mlx5_0",driver="mlx5",emulated="true",host="h1",link_layer="Ethernet",netdev="ens1f0np0",phys_state="LinkUp",port="1",rail="",spine="",state="ACTIVE",tor=""} 1.0
# HELP netd_port_up 1 when the port state is ACTIVE.
# TYPE netd_port_up gauge
netd_port_up{device="mlx5_0",port="1"} 1.0
# HELP netd_port_speed_bytes Port rate as the driver reports it, in bytes per second (as node_network_speed_bytes).
# TYPE netd_port_speed_bytes gauge
netd_port_speed_bytes{device="mlx5_0",port="1"} 2.5e+10
# HELP netd_counter_saturated 1 when a counter is stuck at its width's maximum: its rate is unknown, not zero.
# TYPE netd_counter_saturated gauge
netd_counter_saturated{device="mlx5_0",kind="symbol_error",port="1"} 1.0
# HELP netd_rdma_rx_bytes_total RDMA bytes received (PMA port_rcv_data x 4).
# TYPE netd_rdma_rx_bytes_total counter
netd_rdma_rx_bytes_total{device="mlx5_0",port="1"} 1200.0
# HELP netd_rdma_port_errors_total IB PMA port error counters.
# TYPE netd_rdma_port_errors_total counter
netd_rdma_port_errors_total{device="mlx5_0",kind="symbol_error",port="1"} 65535.0
# HELP netd_rdma_cnp_sent_total Congestion notification packets sent (notification point).
# TYPE netd_rdma_cnp_sent_total counter
netd_rdma_cnp_sent_total{device="mlx5_0",port="1"} 70.0
# HELP netd_rdma_out_of_sequence_total Packets received with an unexpected PSN (loss or reordering).
# TYPE netd_rdma_out_of_sequence_total counter
netd_rdma_out_of_sequence_total{device="mlx5_0",port="1"} 4.294967306e+09
# HELP netd_rdma_cqe_errors_total Completions in error.
# TYPE netd_rdma_cqe_errors_total counter
netd_rdma_cqe_errors_total{device="mlx5_0",kind="requester",port="1"} 2.0
# HELP netd_rdma_driver_stat_total Driver counters without a netd name, by raw file name.
# TYPE netd_rdma_driver_stat_total counter
netd_rdma_driver_stat_total{device="mlx5_0",kind="rx_dct_connect",port="1"} 9.0
# HELP netd_pfc_pause_frames_total PFC pause frames per priority (rx: received from the peer).
# TYPE netd_pfc_pause_frames_total counter
netd_pfc_pause_frames_total{direction="rx",netdev="ens1f0np0",priority="3"} 30.0
# HELP netd_pfc_pause_duration_seconds_total Time paused (rx) or pausing the peer (tx) per priority.
# TYPE netd_pfc_pause_duration_seconds_total counter
netd_pfc_pause_duration_seconds_total{direction="rx",netdev="ens1f0np0",priority="3"} 0.0003
# HELP netd_pfc_pause_transitions_total Xoff to Xon transitions per priority.
# TYPE netd_pfc_pause_transitions_total counter
# HELP netd_priority_bytes_total Bytes per priority at the PHY.
# TYPE netd_priority_bytes_total counter
# HELP netd_priority_packets_total Packets per priority at the PHY.
# TYPE netd_priority_packets_total counter
# HELP netd_priority_discards_total Packets discarded per priority (no buffer).
# TYPE netd_priority_discards_total counter
# HELP netd_pause_frames_total IEEE 802.3x global pause frames.
# TYPE netd_pause_frames_total counter
# HELP netd_pause_duration_seconds_total Time under 802.3x global pause.
# TYPE netd_pause_duration_seconds_total counter
# HELP netd_pause_storm_events_total NIC pause-storm watermark events (warning: minor stall watermark; error: critical, pause stopped).
# TYPE netd_pause_storm_events_total counter
netd_pause_storm_events_total{netdev="ens1f0np0",severity="error"} 0.0
# HELP netd_phy_discards_total Packets discarded at the PHY for lack of buffer.
# TYPE netd_phy_discards_total counter
# HELP netd_link_down_events_total Link down events at the PHY.
# TYPE netd_link_down_events_total counter
# HELP netd_phy_errors_total PHY receive errors.
# TYPE netd_phy_errors_total counter
# HELP netd_tick_duration_seconds Wall time the last tick took to collect.
# TYPE netd_tick_duration_seconds gauge
netd_tick_duration_seconds 0.003
# HELP netd_ticks_total Ticks completed since start.
# TYPE netd_ticks_total counter
netd_ticks_total 2.0
# HELP netd_last_tick_timestamp_seconds Wall-clock time of the last snapshot.
# TYPE netd_last_tick_timestamp_seconds gauge
netd_last_tick_timestamp_seconds 1.700000001e+09
# HELP netd_fabric_emulated 1 when the counters come from netd's emulated fabric.
# TYPE netd_fabric_emulated gauge
netd_fabric_emulated 1.0
# HELP netd_source_up 1 when the source's last read succeeded.
# TYPE netd_source_up gauge
netd_source_up{source="rdma"} 1.0
netd_source_up{source="ethtool"} 0.0
# HELP netd_source_duration_seconds Wall time of the source's last read.
# TYPE netd_source_duration_seconds gauge
netd_source_duration_seconds{source="rdma"} 0.002
netd_source_duration_seconds{source="ethtool"} 0.001
# HELP netd_source_errors_total Failed source reads since start.
# TYPE netd_source_errors_total counter
netd_source_errors_total{source="ethtool"} 2.0
netd_source_errors_total{source="rdma"} 0.0
# HELP netd_ticks_late_total Ticks that started over 10 % of the interval late.
# TYPE netd_ticks_late_total counter
netd_ticks_late_total 1.0
# HELP netd_ticks_skipped_total Tick slots that passed with no tick (loop behind).
# TYPE netd_ticks_skipped_total counter
netd_ticks_skipped_total 2.0
# HELP netd_tick_slots_passed_total Tick slots passed over on purpose while the host was calm (calm_interval).
# TYPE netd_tick_slots_passed_total counter
netd_tick_slots_passed_total 3.0
# HELP netd_tick_calm 1 while the host is calm and ticks are calm_interval apart, else 0.
# TYPE netd_tick_calm gauge
netd_tick_calm 1.0
# HELP netd_tick_processing_seconds Wall time of each tick: collect, series, detection, scoring.
# TYPE netd_tick_processing_seconds histogram
netd_tick_processing_seconds_bucket{le="0.001"} 0.0
netd_tick_processing_seconds_bucket{le="0.0025"} 0.0
netd_tick_processing_seconds_bucket{le="0.005"} 1.0
netd_tick_processing_seconds_bucket{le="0.01"} 1.0
netd_tick_processing_seconds_bucket{le="0.025"} 1.0
netd_tick_processing_seconds_bucket{le="0.05"} 1.0
netd_tick_processing_seconds_bucket{le="0.1"} 1.0
netd_tick_processing_seconds_bucket{le="0.25"} 1.0
netd_tick_processing_seconds_bucket{le="0.5"} 1.0
netd_tick_processing_seconds_bucket{le="1"} 1.0
netd_tick_processing_seconds_bucket{le="2.5"} 1.0
netd_tick_processing_seconds_bucket{le="5"} 1.0
netd_tick_processing_seconds_bucket{le="10"} 2.0
netd_tick_processing_seconds_bucket{le="+Inf"} 2.0
netd_tick_processing_seconds_count 2.0
netd_tick_processing_seconds_sum 6.004
# HELP netd_anomaly_fast_path_achieved_interval_seconds Mean time between PFC samples over the last tick (fast samples and the tick's own).
# TYPE netd_anomaly_fast_path_achieved_interval_seconds gauge
netd_anomaly_fast_path_achieved_interval_seconds 0.125
# HELP netd_series_events_total What the counter model did to readings, by kind.
# TYPE netd_series_events_total counter
netd_series_events_total{kind="wrap"} 1.0
netd_series_events_total{kind="held"} 0.0
netd_series_events_total{kind="discarded"} 0.0
netd_series_events_total{kind="reset"} 0.0
netd_series_events_total{kind="jump"} 0.0
"""


def test_exposition_for_known_snapshots_is_exact():
    tracker = SeriesTracker()
    tracker.update(_snap(0.0, _port(100, 50, W32 - 5, 65535), 10))
    obs = tracker.update(_snap(1.0, _port(300, 70, 10, 65535), 30))
    # one tick of 4 ms, one of 6 s (over the 5 s bucket), one late start, two slots skipped
    recorder = TickRecorder()
    recorder.started(slot=0.0, started=0.5, interval_s=1.0)
    recorder.finished(0.004, at=1.0, fast_samples=0)
    recorder.skipped(2)
    recorder.finished(6.0, at=2.0, fast_samples=7)  # 7 fast samples and the tick: 8 in 1 s
    for _ in range(3):  # three slots passed over, and ticks calm_interval apart from now on
        recorder.passed()
    recorder.cadence(True)
    state = PublishedState(
        observation=obs,
        source_errors={"ethtool": 2},
        ticks=2,
        health=recorder.health(),
        counter_events=dict(tracker.events),
    )
    registry = CollectorRegistry(auto_describe=False)
    registry.register(NetdCollector(lambda: state))
    assert generate_latest(registry).decode() == EXPECTED


def test_before_first_tick_only_build_info():
    registry = CollectorRegistry(auto_describe=False)
    registry.register(NetdCollector(lambda: None))
    text = generate_latest(registry).decode()
    assert [line for line in text.splitlines() if not line.startswith("#")] == [
        'netd_build_info{version="0.1.0"} 1.0'
    ]
