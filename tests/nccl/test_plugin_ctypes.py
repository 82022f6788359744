"""libnccl-tuner-netd.so loaded as NCCL loads it, fed NCCL-shaped cost tables, against a real netd socket."""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from netd.nccl.layout import F_PIN, NODE_BUCKETS, node_bucket, size_bucket
from netd.nccl.pin_wire import PinStatus
from netd.nccl.pins import PinAuthority, PinKey, PinVerdict
from netd.nccl.socket_server import PinResolver, PinSocketServer
from netd.nccl.table import HintEntry, HintTable, pack_table
from tests.nccl.hosts import CONGESTED, HostDaemon, host_state
from tests.nccl.plugin_harness import (
    ALLGATHER,
    ALLREDUCE,
    LOG_INFO,
    LOG_WARN,
    NCCL_INVALID_USAGE,
    NCCL_SUCCESS,
    NCCL_TUNING,
    PAT,
    RING,
    TREE,
    Plugin,
    build_plugin,
    decisions,
    default_decisions,
    nccl_cost_table,
    nccl_pick,
)


@pytest.fixture(scope="module")
def plugin() -> Plugin:
    return Plugin(build_plugin())


def _table(
    hints: dict[tuple[int, int, int], HintEntry], generated_at_ns: int = 0, valid_ms: int = 0
) -> bytes:
    rows = [[[HintEntry()] * 32 for _ in range(5)] for _ in range(NODE_BUCKETS)]
    for (nb, coll, sb), e in hints.items():
        rows[nb][coll][sb] = e
    return pack_table(HintTable(tuple(tuple(tuple(c) for c in n) for n in rows), generated_at_ns, valid_ms))


# 4 nodes, AllReduce 64 KiB: prefer TREE over RING; AllGather 16 KiB: prefer PAT over RING.
SOFT = {
    (node_bucket(4), ALLREDUCE, size_bucket(64 << 10)): HintEntry.prefer(TREE, (RING,)),
    (node_bucket(4), ALLGATHER, size_bucket(16 << 10)): HintEntry.prefer(PAT, (RING,)),
}


def _static(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, data: bytes, sha: str | None = None) -> None:
    path = tmp_path / "job.ndht"
    path.write_bytes(data)
    monkeypatch.setenv("NETD_TUNER_TABLE", str(path))
    monkeypatch.setenv("NETD_TUNER_TABLE_SHA256", sha or hashlib.sha256(data).hexdigest())
    monkeypatch.setenv("NETD_TUNER_SOCKET", str(tmp_path / "no-netd-here.sock"))  # the file alone decides


def test_exports_only_the_plugin_symbols():
    so = build_plugin()
    nm = shutil.which("nm")
    assert nm, "binutils' nm is needed (make setup installs it with gcc)"
    defined = subprocess.run(
        [nm, "-D", "--defined-only", str(so)], capture_output=True, text=True, check=True
    )
    names = sorted(line.split()[-1] for line in defined.stdout.splitlines() if line.strip())
    assert names == [f"ncclTunerPlugin_v{v}" for v in (2, 3, 4, 5, 6)]
    undefined = subprocess.run(
        [nm, "-D", "--undefined-only", str(so)], capture_output=True, text=True, check=True
    )
    for line in undefined.stdout.splitlines():
        symbol = line.split()[-1].lower()
        assert "nccl" not in symbol and "cuda" not in symbol and not symbol.startswith("cu"), line


def test_symbol_lookup_v6_then_v5(plugin):
    assert plugin.version == 6
    assert plugin.tuner.name == b"netd"
    assert plugin.tuner.getChunkSize is None  # optional in v6: NCCL keeps its chunk sizes


def test_off_switch(plugin, monkeypatch):
    monkeypatch.setenv("NETD_TUNER", "off")
    rc, ctx = plugin.init(0x1234, 16, 4)
    assert (rc, ctx) == (NCCL_SUCCESS, None)
    level, flags, text = plugin.logs[-1]
    assert (level, flags) == (LOG_INFO, NCCL_TUNING) and "disabled by NETD_TUNER" in text
    assert decisions(plugin, ctx, 4, 1) == default_decisions(4, 1)


@pytest.mark.parametrize("n_algo", [7, 6])
def test_static_table_biases_only_its_buckets(plugin, monkeypatch, tmp_path, n_algo):
    _static(monkeypatch, tmp_path, _table(SOFT))
    rc, ctx = plugin.init(0x77, 4, 4)
    assert rc == NCCL_SUCCESS and ctx is not None
    got, want = decisions(plugin, ctx, 4, 1, n_algo), default_decisions(4, 1, n_algo)
    plugin.finalize(ctx)
    changed = {(c, n): (w[2], g[2]) for (c, n, *_), g, w in zip(got, got, want, strict=True) if g != w}
    # the AllReduce bucket moves from RING to TREE; PAT exists only in the 7-algorithm table
    assert changed[(ALLREDUCE, 64 << 10)][1][0] == TREE
    if n_algo == 7:
        assert changed[(ALLGATHER, 16 << 10)][1] == (PAT, 2)
        assert set(changed) == {(ALLREDUCE, 64 << 10), (ALLGATHER, 16 << 10)}
    else:
        assert set(changed) == {(ALLREDUCE, 64 << 10)}


def test_never_raises_an_ignore_entry_nor_empties_the_table(plugin, monkeypatch, tmp_path):
    every = (1 << 21) - 1
    hints = {
        (node_bucket(4), ALLREDUCE, size_bucket(1 << 20)): HintEntry(forbid=every),  # would empty: skipped
        (node_bucket(4), ALLREDUCE, size_bucket(1 << 22)): HintEntry(
            algo=4, proto=2, flags=F_PIN, n_channels=8
        ),
        (node_bucket(4), ALLREDUCE, size_bucket(1 << 24)): HintEntry(
            algo=RING, proto=0, flags=F_PIN, n_channels=6
        ),
    }
    _static(monkeypatch, tmp_path, _table(hints))
    rc, ctx = plugin.init(0x78, 4, 4)
    for n_bytes, want_channels in ((1 << 20, 0), (1 << 22, 0), (1 << 24, 6)):
        table = nccl_cost_table(ALLREDUCE, n_bytes, 4, 1)
        table[TREE * 3 + 1] = -1.0  # an extra ignore entry, as NCCL_PROTO=^LL128 would leave
        rc, after, channels = plugin.get_coll_info(ctx, ALLREDUCE, n_bytes, table, 7)
        assert rc == NCCL_SUCCESS
        assert all(
            a == -1.0 for a, b in zip(after, table, strict=True) if b == -1.0
        )  # NVLS/SIMPLE not raised
        assert any(a >= 0 for a in after)
        assert channels == want_channels
    assert nccl_pick(after) == (RING, 0)  # the pinned pair wins at cost 0.0
    plugin.finalize(ctx)


def test_static_table_digest_mismatch_fails_init(plugin, monkeypatch, tmp_path):
    _static(monkeypatch, tmp_path, _table(SOFT), sha="0" * 64)
    rc, ctx = plugin.init(0x79, 4, 4)
    assert (rc, ctx) == (NCCL_INVALID_USAGE, None)
    level, _, text = plugin.logs[-1]
    assert level == LOG_WARN and "every rank must load the same table" in text


class ScriptedResolver(PinResolver):
    """Answers every request with one verdict (or raises), to drive the plugin's failure modes."""

    def __init__(self, verdict: PinVerdict | None, delay_s: float = 0.0) -> None:
        super().__init__(PinAuthority(), None, lambda: None, "scripted")
        self.verdict, self.delay_s = verdict, delay_s

    def refusal(self, key: PinKey) -> str | None:
        return None  # every request reaches the script

    async def resolve(
        self, key: PinKey, member: int, digest: int = 0, budget_s: float | None = None
    ) -> PinVerdict:
        await asyncio.sleep(self.delay_s)
        if self.verdict is None:
            raise RuntimeError("lost the pin service mid-request")
        return self.verdict


def _serve(tmp_path: Path, resolver: PinResolver) -> PinSocketServer:
    server = PinSocketServer(tmp_path / "nccl.sock", resolver)
    server.start()
    return server


def _apply(table: bytes, pinned_at_ns: int) -> PinVerdict:
    return PinVerdict(PinStatus.APPLY, "scripted", table, pinned_at_ns, "scripted")


NOW = 1_800_000_000 * 10**9


@pytest.mark.parametrize(
    ("name", "verdict", "delay_s", "rc", "has_ctx", "log"),
    [
        (
            "applied",
            _apply(_table(SOFT, NOW, 30_000), NOW + 10**9),
            0,
            NCCL_SUCCESS,
            True,
            "latched, 2 hints",
        ),
        ("stale", _apply(_table(SOFT, NOW, 30_000), NOW + 31 * 10**9), 0, NCCL_SUCCESS, False, "is stale"),
        ("corrupt", _apply(bytes([0x55]) + _table(SOFT)[1:], NOW), 0, NCCL_SUCCESS, False, "bad magic"),
        ("truncated", _apply(_table(SOFT)[:4000], NOW), 0, NCCL_SUCCESS, False, "expected 15424"),
        (
            "neutral",
            PinVerdict.neutral("only 3 of 4 ranks asked within 3 s"),
            0,
            NCCL_SUCCESS,
            False,
            "only 3 of 4",
        ),
        # a protocol-1 FAIL status is read as NEUTRAL; nothing a daemon does fails init
        (
            "fail",
            PinVerdict(PinStatus.FAIL, "comm id collides"),
            0,
            NCCL_SUCCESS,
            False,
            "comm id collides",
        ),
        ("daemon error", None, 0, NCCL_SUCCESS, False, "failed while pinning"),
        (
            "timeout",
            PinVerdict.neutral("too late"),
            1.5,
            NCCL_SUCCESS,
            False,
            "no answer within the timeout",
        ),
    ],
)
def test_every_hint_failure_mode(plugin, monkeypatch, tmp_path, name, verdict, delay_s, rc, has_ctx, log):
    server = _serve(tmp_path, ScriptedResolver(verdict, delay_s))
    monkeypatch.setenv("NETD_TUNER_SOCKET", str(server.path))
    monkeypatch.setenv("NETD_TUNER_TIMEOUT_MS", "500")
    try:
        got_rc, ctx = plugin.init(0xABC, 16, 4)
    finally:
        server.close()
    assert got_rc == rc, plugin.logs[-1]
    assert (ctx is not None) == has_ctx
    assert log in plugin.logs[-1][2]
    if has_ctx:
        assert decisions(plugin, ctx, 4, 4) != default_decisions(4, 4)
        plugin.finalize(ctx)
    else:  # an untouched (or failed) communicator: NCCL's choices everywhere
        assert decisions(plugin, ctx, 4, 4) == default_decisions(4, 4)


def test_absent_daemon_leaves_nccl_untouched(plugin, monkeypatch, tmp_path):
    monkeypatch.setenv("NETD_TUNER_SOCKET", str(tmp_path / "nobody-here.sock"))
    rc, ctx = plugin.init(0xABD, 16, 4)
    assert (rc, ctx) == (NCCL_SUCCESS, None)
    assert "never registered" in plugin.logs[-1][2]


def test_concurrent_communicators_on_threads(plugin, monkeypatch, tmp_path):
    """8 single-node communicators x 2 ranks each, all initialising and launching at once, each rank on
    its own thread, through one daemon (local pins): every rank of a communicator decides alike."""
    state = host_state(tmp_path / "host", "hostA", **CONGESTED)
    with HostDaemon(tmp_path / "nccl.sock", state, "hostA", window_s=10.0) as daemon:
        monkeypatch.setenv("NETD_TUNER_SOCKET", str(daemon.server.path))
        results: dict[tuple[int, int], object] = {}
        barrier = threading.Barrier(16)

        def rank(comm: int, r: int) -> None:
            barrier.wait()
            rc, ctx = plugin.init(0x5000 + comm, 2, 1)
            results[(comm, r)] = (rc, decisions(plugin, ctx, 1, 2))
            plugin.finalize(ctx)

        threads = [threading.Thread(target=rank, args=(c, r)) for c in range(8) for r in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    assert len(results) == 16
    for comm in range(8):
        assert results[(comm, 0)] == results[(comm, 1)]
        assert results[(comm, 0)][0] == NCCL_SUCCESS  # type: ignore[index]
    pinned = [text for _, _, text in plugin.logs if "latched" in text and "(2 ranks, 1 nodes)" in text]
    assert len(pinned) >= 16  # every rank got the daemon's table (whose 1-node slice has no hints)


def test_falls_back_to_v5_when_v6_is_absent(tmp_path, monkeypatch):
    """What NCCL 2.28/2.29 sees: the same sources linked with v6 made local by a version script."""
    script = tmp_path / "v5.map"
    script.write_text("{ global: ncclTunerPlugin_v5; ncclTunerPlugin_v4; ncclTunerPlugin_v3; local: *; };\n")
    so = tmp_path / "libnccl-tuner-netd-v5.so"
    src = build_plugin().parents[1]
    sources = [
        str(src / "src" / f)
        for f in ("plugin.c", "apply.c", "table.c", "source.c", "pin_client.c", "sha256.c")
    ]
    flags = ["-std=c11", "-O2", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wextra", "-Werror", "-shared"]
    includes = [f"-I{src / 'include'}", f"-I{src / 'src'}"]
    link = ["-o", str(so), f"-Wl,--version-script={script}"]
    subprocess.run(["gcc", *flags, *includes, *sources, *link], check=True, capture_output=True)
    v5 = Plugin(so)
    assert v5.version == 5 and v5.tuner.name == b"netd"
    _static(monkeypatch, tmp_path, _table(SOFT))
    rc, ctx = v5.init(0x99, 4, 4)
    assert rc == NCCL_SUCCESS and ctx is not None
    assert decisions(v5, ctx, 4, 1) != default_decisions(4, 1)
    v5.finalize(ctx)
