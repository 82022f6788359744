"""Decoding the probes' maps (raw bytes from BPF_MAP_LOOKUP_BATCH) into netd's values.

Pure functions of bytes, so the decoding is tested without a kernel. Per-CPU values arrive as one
copy per possible CPU and are summed here; the flow table is merged from its two halves (the per-CPU
cache slots and the LRU hash of written-back records) with numpy, since a busy table holds tens of
thousands of records.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping

import numpy as np

from netd.model.bpf import FlowRecord, PfcCounts, RoceClassCount, TcpEndpoint
from netd.sources.bpf_layout import (
    DIRECTIONS,
    FLOW_COUNTERS,
    RDMA_CM_EVENT_NAMES,
    ClassVal,
    FlowKey,
    FlowSlot,
    FlowVal,
    PfcVal,
    TcpKey,
    TcpVal,
)

__all__ = [
    "decode_classes",
    "decode_events",
    "decode_flows",
    "decode_pfc",
    "decode_rdma_cm",
    "decode_tcp",
    "gid_text",
    "percpu",
]

ToWall = Callable[[int], float | None]
TCP_STATES = (
    "",
    "ESTABLISHED",
    "SYN_SENT",
    "SYN_RECV",
    "FIN_WAIT1",
    "FIN_WAIT2",
    "TIME_WAIT",
    "CLOSE",
    "CLOSE_WAIT",
    "LAST_ACK",
    "LISTEN",
    "CLOSING",
    "NEW_SYN_RECV",
)


def percpu(values: bytes, dtype: np.dtype, ncpu: int) -> np.ndarray:
    """Per-CPU map values → array of shape (entries, ncpu). The kernel pads each CPU's copy to 8 bytes;
    netd_bpf.h keeps every value a multiple of 8, so copies are packed back to back."""
    if dtype.itemsize % 8:
        raise ValueError(f"per-CPU value of {dtype.itemsize} bytes is not a multiple of 8")
    return np.frombuffer(values, dtype=dtype).reshape(-1, ncpu)


def decode_classes(values: bytes, ncpu: int) -> tuple[RoceClassCount, ...]:
    """netd_roce_class (index = dir << 8 | dscp << 2 | ecn) → non-zero classes."""
    arr = percpu(values, np.dtype(ClassVal), ncpu)
    packets = arr["packets"].sum(axis=1, dtype=np.uint64)
    nbytes = arr["bytes"].sum(axis=1, dtype=np.uint64)
    out = []
    for idx in np.flatnonzero(packets):
        d = int(idx) >> 8
        if d < len(DIRECTIONS):
            out.append(
                RoceClassCount(
                    DIRECTIONS[d], (int(idx) >> 2) & 0x3F, int(idx) & 3, int(packets[idx]), int(nbytes[idx])
                )
            )
    return tuple(out)


def decode_events(values: bytes, ncpu: int, names: tuple[str, ...], per_direction: bool) -> dict:
    """A per-CPU u64 array → {name: total} or {(direction, name): total}."""
    totals = percpu(values, np.dtype(np.uint64), ncpu).sum(axis=1, dtype=np.uint64)
    out: dict = {}
    for idx, value in enumerate(totals.tolist()):
        if per_direction:
            d, e = divmod(idx, len(names))
            if d < len(DIRECTIONS):
                out[(DIRECTIONS[d], names[e])] = int(value)
        elif idx < len(names):
            out[names[idx]] = int(value)
    return out


def decode_rdma_cm(values: bytes, ncpu: int) -> dict[str, int]:
    totals = percpu(values, np.dtype(np.uint64), ncpu).sum(axis=1, dtype=np.uint64).tolist()
    out = {}
    for idx, value in enumerate(totals):
        if value:
            name = RDMA_CM_EVENT_NAMES[idx] if idx < len(RDMA_CM_EVENT_NAMES) else f"event_{idx}"
            out[name] = int(value)
    return out


def gid_text(raw: bytes) -> str:
    """16 bytes → GID text (IPv6 notation; ::ffff:a.b.c.d for IPv4, as RoCEv2 GIDs are written)."""
    addr = ipaddress.IPv6Address(bytes(raw))
    mapped = addr.ipv4_mapped  # written out by hand: Python < 3.13 prints ::ffff:a00:1
    return f"::ffff:{mapped}" if mapped else str(addr)


def decode_flows(
    cache_values: bytes, ncpu: int, hash_keys: bytes, hash_values: bytes, to_wall: ToWall
) -> tuple[FlowRecord, ...]:
    """Adds each flow's cache slots (every CPU) and its LRU record into one FlowRecord."""
    slots = percpu(cache_values, np.dtype(FlowSlot), ncpu).reshape(-1) if cache_values else None
    keys = [np.frombuffer(hash_keys, dtype=np.dtype(FlowKey))]
    vals = [np.frombuffer(hash_values, dtype=np.dtype(FlowVal))]
    if slots is not None:
        used = slots[slots["key"]["used"] == 1]
        keys.append(used["key"])
        vals.append(used["val"])
    key = np.concatenate(keys)
    val = np.concatenate(vals)
    if not len(key):
        return ()
    as_void = np.ascontiguousarray(key).view(np.dtype((np.void, key.dtype.itemsize)))
    uniq, first_idx, inverse = np.unique(as_void, return_index=True, return_inverse=True)
    n = len(uniq)
    sums = {}
    for name in FLOW_COUNTERS:
        acc = np.zeros(n, dtype=np.uint64)
        np.add.at(acc, inverse, val[name])
        sums[name] = acc.tolist()
    first = np.full(n, np.iinfo(np.uint64).max, dtype=np.uint64)
    np.minimum.at(first, inverse, val["first_jiffies"])
    last = np.zeros(n, dtype=np.uint64)
    np.maximum.at(last, inverse, val["last_jiffies"])
    # dscp and opcode of the newest packet: the entry with the largest last_jiffies per flow
    newest = np.zeros(n, dtype=np.int64)
    order = np.argsort(val["last_jiffies"], kind="stable")
    newest[inverse[order]] = order
    out = []
    for i in range(n):
        k = key[first_idx[i]]
        v = val[newest[i]]
        out.append(
            FlowRecord(
                src=gid_text(k["src"].tobytes()),
                dst=gid_text(k["dst"].tobytes()),
                dest_qp=int(k["dest_qp"]),
                direction=DIRECTIONS[int(k["dir"]) & 1],
                **{name: int(sums[name][i]) for name in FLOW_COUNTERS},
                dscp=int(v["dscp"]),
                last_opcode=int(v["opcode"]),
                first_seen=to_wall(int(first[i])),
                last_seen=to_wall(int(last[i])),
            )
        )
    return tuple(out)


def decode_pfc(values: bytes, ncpu: int, ifnames: Mapping[int, str]) -> tuple[PfcCounts, ...]:
    """netd_pfc_stats (per-CPU array, one slot per interface) → the slots that counted frames."""
    arr = percpu(values, np.dtype(PfcVal), ncpu)
    out = []
    for row in range(arr.shape[0]):
        ifindex = int(arr["ifindex"][row].max())
        if not ifindex:  # never saw a MAC control frame on any CPU
            continue
        total = {name: arr[name][row].sum(axis=0, dtype=np.uint64) for name in arr.dtype.names or ()}
        out.append(
            PfcCounts(
                netdev=ifnames.get(ifindex, f"ifindex {ifindex}"),
                ifindex=ifindex,
                pause_frames=int(total["pause_frames"]),
                pause_quanta=int(total["pause_quanta"]),
                pause_resumes=int(total["pause_xon"]),
                pfc_frames=int(total["pfc_frames"]),
                other_opcode=int(total["other_opcode"]),
                malformed=int(total["malformed"]),
                prio_frames=tuple(int(x) for x in total["prio_frames"]),
                prio_quanta=tuple(int(x) for x in total["prio_quanta"]),
                prio_resumes=tuple(int(x) for x in total["prio_xon"]),
            )
        )
    return tuple(sorted(out, key=lambda p: p.netdev))


def decode_tcp(keys: bytes, values: bytes, to_wall: ToWall) -> tuple[TcpEndpoint, ...]:
    k = np.frombuffer(keys, dtype=np.dtype(TcpKey))
    v = np.frombuffer(values, dtype=np.dtype(TcpVal))
    out = []
    for i in range(len(k)):
        addr = ipaddress.IPv6Address(k[i]["daddr"].tobytes())
        mapped = addr.ipv4_mapped
        state = int(v[i]["state"])
        out.append(
            TcpEndpoint(
                address=str(mapped or addr),
                port=int(k[i]["dport"]),
                family="ipv4" if mapped else "ipv6",
                retransmits=int(v[i]["retransmits"]),
                state=TCP_STATES[state] if state < len(TCP_STATES) else str(state),
                first_seen=to_wall(int(v[i]["first_jiffies"])),
                last_seen=to_wall(int(v[i]["last_jiffies"])),
            )
        )
    return tuple(sorted(out, key=lambda e: (-e.retransmits, e.address, e.port)))
