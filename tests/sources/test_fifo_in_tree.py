"""A FIFO planted in a replayed tree blocks nobody: every sysfs-rooted read opens non-blocking.

Without O_NONBLOCK, open(2) of a FIFO waits for a writer: one FIFO named like a counter file, a port
attribute or an ethtool capture stopped the tick for good (measured: the RDMA read never returned).
Each case reads in a thread that must finish within seconds, and only the planted file is bad. The
topology inputs a background refresh re-reads (the static file, lldpcli's JSON) must be regular files.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from netd.bench.static_tree import StaticHost
from netd.config.service import TopologyConfig
from netd.errors import SourceError
from netd.sources.ethtool import CapturedStatsReader, EthtoolSource
from netd.sources.gids import read_gids
from netd.sources.lldpcli import read_lldp_file
from netd.sources.rdma import RdmaSysfs
from netd.sources.sysfs_io import read_regular_file, read_text
from netd.sources.topology_file import read_topology_file
from netd.topology.service import TopologyService
from tests.blocking import within


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


@pytest.fixture
def host(tmp_path: Path) -> StaticHost:
    h = StaticHost(tmp_path / "sys", 1)
    yield h
    h.close()


PORT = Path("class/infiniband/mlx5_0/ports/1")


@pytest.mark.parametrize("name", ["hw_counters/out_of_sequence", "counters/port_xmit_data", "rate"])
def test_a_fifo_counter_or_attribute_is_one_bad_file(host: StaticHost, name: str) -> None:
    clean = RdmaSysfs(host.root).read()
    _fifo(host.root / PORT / name)
    source = RdmaSysfs(host.root)
    for _ in range(2):  # the first read scans the layout, the second is a tick's
        got = within(10, source.read)
        assert [(s.device, s.port) for s in got] == [(s.device, s.port) for s in clean]
        bad, good = got[0], got[1]
        assert good.counters == clean[1].counters and not good.read_errors
        if name == "rate":
            assert bad.rate_gbps is None and bad.counters == clean[0].counters
        else:
            assert [e.split(":")[0] for e in bad.read_errors] == [name]
            assert set(bad.counters) == set(clean[0].counters) - {name.split("/")[1]}
    source.close()


def test_fifo_gid_and_attribute_files_read_as_nothing(host: StaticHost) -> None:
    port = host.root / PORT
    gid = sorted(p.name for p in (port / "gids").iterdir())[0]
    _fifo(port / "gids" / gid)
    assert within(10, lambda: read_text(port / "gids" / gid)) == ""
    within(10, lambda: read_gids(host.root, "mlx5_0", 1))


def test_a_fifo_capture_is_an_error_first_and_after_a_replacement(host: StaticHost) -> None:
    capture = host.root / "ethtool" / host.devices[0][1]
    other = host.devices[1][1]
    reader = CapturedStatsReader(host.root)
    source = EthtoolSource(reader)
    assert reader.read(capture.name).stats is not None
    host.advance(1.0)  # captures are replaced by rename: the reader stops keeping them open
    assert reader.read(capture.name).stats is not None
    _fifo(capture)
    with pytest.raises(SourceError, match="Illegal seek"):
        within(10, lambda: reader.read(capture.name))
    samples, reasons = within(10, lambda: source.read([capture.name, other]))
    assert other in samples and capture.name not in samples and reasons[capture.name].startswith("error:")
    fresh = CapturedStatsReader(host.root)  # never read before: the kept-descriptor path
    with pytest.raises(SourceError, match="Illegal seek"):
        within(10, lambda: fresh.read(capture.name))
    source.close()
    fresh.close()


@pytest.mark.parametrize("read", [read_topology_file, read_lldp_file])
def test_a_topology_input_that_is_no_regular_file_is_an_error(
    tmp_path: Path, read: Callable[[Path], object]
) -> None:
    """The static topology file and lldpcli's JSON are re-read by the topology thread: a FIFO, a
    directory or a device there is an error at once, and bytes that are not UTF-8 say so."""
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    (tmp_path / "latin1").write_bytes("spine: caf\xe9\n".encode("latin-1"))
    for name, why in [("fifo", "not a regular file"), ("dir", "a directory"), ("latin1", "not UTF-8")]:
        with pytest.raises(SourceError, match=why):
            within(10, lambda name=name: read(tmp_path / name))
    with pytest.raises(SourceError, match="not a regular file"):
        read_regular_file(Path("/dev/zero"), "test")  # would read for ever


def test_fifo_topology_inputs_in_a_replayed_tree_fail_the_refresh_not_the_thread(host: StaticHost) -> None:
    """<root>/lldp.json and <root>/topology.yaml are a replayed tree's default topology inputs: FIFOs
    there are failed sources of a refresh that returns (and releases its lock for the next one)."""
    for name in ("lldp.json", "topology.yaml"):
        os.mkfifo(host.root / name)
    service = TopologyService(TopologyConfig(), host.root, "h1")
    try:
        for _ in range(2):
            inputs = within(10, service.refresh)
            failed = {n.source: n.detail for n in inputs.notes if not n.ok}
            assert set(failed) == {"lldp:file", "topology-file"}
            assert failed["lldp:file"].endswith(f"cannot read {host.root / 'lldp.json'}: not a regular file")
            assert failed["topology-file"].endswith(f"{host.root / 'topology.yaml'}: not a regular file")
    finally:
        service.close()
