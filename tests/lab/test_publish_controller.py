"""Agent memory -> sysfs tree -> netd's real sources; and the DCQCN controller's wiring to cc/."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from netd.config.settings import Config
from netd.lab.controller import DcqcnController
from netd.lab.params import lab_params
from netd.lab.publish import DEVICE, NETDEV, HostPublisher
from netd.lab.shm import LAB_SHM_MAGIC, LAB_SHM_VERSION, HostShm
from netd.sources.collect import Sampler


def _agent(path: Path) -> HostShm:
    """A shared-memory file as a started agent leaves it (no agent process needed)."""
    shm = HostShm(path, create=True)
    shm.s.magic, shm.s.version, shm.s.ready = LAB_SHM_MAGIC, LAB_SHM_VERSION, 1
    return shm


def test_published_counters_read_back_through_netd(tmp_path: Path) -> None:
    shm = _agent(tmp_path / "host0.shm")
    pub = HostPublisher(tmp_path / "host0", tmp_path / "host0.shm", link_mbps=100.0)
    collector = Sampler.from_config(Config(sysfs_root=tmp_path / "host0"), tmp_path / "host0")
    try:
        c = shm.s.c
        c.rx_bytes, c.rx_pkts, c.ecn_marked_rx, c.cnp_sent, c.cnp_handled = 4_000_000, 2000, 123, 45, 6
        c.rx_pause, c.rx_pause_duration_us, c.pause_storm_warning = 7, 250_000, 1
        assert pub.publish() and not pub.publish()  # nothing changed the second time
        snap = collector.collect()
        (port,) = snap.ports
        assert (port.device, port.port, port.netdev, port.rate_gbps) == (DEVICE, 1, NETDEV, 0.1)
        by_name = {cnt.name: cnt.value for cnt in port.counters.values()}
        assert by_name["ecn_marked"] == 123 and by_name["cnp_sent"] == 45 and by_name["cnp_handled"] == 6
        assert by_name["rx_bytes"] == 4_000_000  # netd converts PMA words back to bytes
        stats = snap.ethtool[NETDEV].stats
        assert stats["rx_prio3_pause"] == 7 and stats["rx_prio3_pause_duration"] == 250_000
        assert stats["tx_pause_storm_warning_events"] == 1
    finally:
        collector.close()
        pub.close()
        shm.close()


def test_controller_starts_flows_at_line_rate_and_cuts_on_cnps(tmp_path: Path) -> None:
    shms = {h: _agent(tmp_path / f"host{h}.shm") for h in (1, 2)}
    params = lab_params()
    ctl = DcqcnController(shms, params, line_rate_mbps=100.0)
    a, b = ctl.add(1), ctl.add(2)
    ctl.start(a, qpn=0x101, dst_ip=0x0A4D010A, payload=2048)
    ctl.start(b, qpn=0x102, dst_ip=0x0A4D010A, payload=2048)
    f = shms[1].s.flows[0]
    assert (f.active, f.qpn, f.payload, f.rate_bps, f.generation) == (1, 0x101, 2048, 100_000_000, 1)
    ctl.step(now=10.0)
    shms[1].s.flows[0].cnp_rx = 1  # the agent received one CNP for flow a
    rc = ctl.step(now=10.001)
    assert rc[0] < 100.0 and rc[1] == pytest.approx(100.0)
    assert shms[1].s.flows[0].rate_bps == int(rc[0] * 1e6)
    ctl.stop_all()
    assert not any(s.s.flows[0].active for s in shms.values()) and not ctl.active.any()
    with pytest.raises(ValueError, match="no free flow slot"):
        for _ in range(100):
            ctl.add(1)
    del f
    for s in shms.values():
        s.close()
    assert np.all(np.isfinite(rc))


def test_controller_counts_steps_later_than_the_cut_period(tmp_path: Path) -> None:
    """A step after a gap longer than rp_rate_reduce_monitor_period (4 ms in the lab) is late: the
    reaction points stood still for longer than one cut could take."""
    shm = _agent(tmp_path / "host1.shm")
    ctl = DcqcnController({1: shm}, lab_params(), line_rate_mbps=100.0)
    ctl.start(ctl.add(1), qpn=0x101, dst_ip=0x0A4D010A, payload=2048)
    for now in (10.0, 10.001, 10.002, 10.0059, 10.0161, 10.1461):  # gaps 1, 1, 3.9, 10.2, 130 ms
        ctl.step(now=now)
    assert (ctl.steps, ctl.late_steps) == (5, 2)
    assert ctl.max_gap_s == pytest.approx(0.130)
    shm.close()


def test_frozen_gc_hides_existing_objects_for_the_block_only() -> None:
    import gc

    from netd.lab.realtime import frozen_gc

    gc.unfreeze()  # (another test's daemon may have frozen its state)
    with frozen_gc():
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0
    gc.freeze()  # someone else's frozen state (netd.daemon.loop.freeze_long_lived) ...
    before = gc.get_freeze_count()
    with frozen_gc():
        pass
    assert gc.get_freeze_count() >= before  # ... is not thawed by the run
    gc.unfreeze()


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="SCHED_FIFO needs root")
def test_a_helper_started_from_the_real_time_loop_leaves_real_time() -> None:
    """Threads inherit their creator's policy: netd's tick thread, started from the controller's
    SCHED_FIFO loop, would preempt the host agents unless it leaves (normal_priority)."""
    from concurrent.futures import ThreadPoolExecutor

    from netd.lab.realtime import CONTROLLER_PRIORITY, normal_priority, realtime

    with realtime(CONTROLLER_PRIORITY) as granted:
        assert granted
        with ThreadPoolExecutor(1) as inherits:
            assert inherits.submit(os.sched_getscheduler, 0).result() == os.SCHED_FIFO
        with ThreadPoolExecutor(1, initializer=normal_priority) as helper:
            assert helper.submit(os.sched_getscheduler, 0).result() == os.SCHED_OTHER
    assert os.sched_getscheduler(0) == os.SCHED_OTHER
