"""The few bpf(2) commands netd calls directly, through ctypes (bcc does not wrap them).

* ``BPF_PROG_TEST_RUN``: run a loaded program on a packet in the kernel, ``repeat`` times; the kernel
  reports the mean run time per packet (the benchmark, and exact parser checks without a network).
* ``BPF_OBJ_GET_INFO_BY_FD``: a program's id, name, and its run count and run time, which the kernel
  accumulates while statistics are enabled.
* ``BPF_ENABLE_STATS``: enable those statistics for as long as the returned descriptor is open, so a
  crashed daemon can never leave them on (unlike the ``kernel.bpf_stats_enabled`` sysctl).
* ``BPF_MAP_LOOKUP_BATCH``: a whole map in a few system calls (bcc reads one key per call).

Structures follow ``include/uapi/linux/bpf.h``; tests compare the offsets with the system header.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
from dataclasses import dataclass

from netd.errors import SourceError

__all__ = [
    "ProgInfo",
    "ProgTestAttr",
    "TestRun",
    "enable_run_stats",
    "map_lookup_batch",
    "possible_cpus",
    "prog_info",
    "prog_test_run",
    "stats_sysctl_enabled",
]

_SYS_BPF = {"x86_64": 321, "aarch64": 280}.get(platform.machine(), 321)
BPF_PROG_TEST_RUN = 10
BPF_OBJ_GET_INFO_BY_FD = 15
BPF_MAP_LOOKUP_BATCH = 24
BPF_ENABLE_STATS = 32
BPF_STATS_RUN_TIME = 0
STATS_SYSCTL = "/proc/sys/kernel/bpf_stats_enabled"

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long

u32, u64 = ctypes.c_uint32, ctypes.c_uint64


class ProgTestAttr(ctypes.Structure):
    """``bpf_attr.test``."""

    _fields_ = [
        ("prog_fd", u32),
        ("retval", u32),
        ("data_size_in", u32),
        ("data_size_out", u32),
        ("data_in", u64),
        ("data_out", u64),
        ("repeat", u32),
        ("duration", u32),
        ("ctx_size_in", u32),
        ("ctx_size_out", u32),
        ("ctx_in", u64),
        ("ctx_out", u64),
        ("flags", u32),
        ("cpu", u32),
        ("batch_size", u32),
        ("_pad", u32),
    ]


class _InfoAttr(ctypes.Structure):
    _fields_ = [("bpf_fd", u32), ("info_len", u32), ("info", u64)]


class BpfProgInfo(ctypes.Structure):
    """``struct bpf_prog_info`` up to ``recursion_misses`` (the kernel fills what both sides know)."""

    _fields_ = [
        ("type", u32),
        ("id", u32),
        ("tag", ctypes.c_uint8 * 8),
        ("jited_prog_len", u32),
        ("xlated_prog_len", u32),
        ("jited_prog_insns", u64),
        ("xlated_prog_insns", u64),
        ("load_time", u64),
        ("created_by_uid", u32),
        ("nr_map_ids", u32),
        ("map_ids", u64),
        ("name", ctypes.c_char * 16),
        ("ifindex", u32),
        ("gpl_compatible", u32),
        ("netns_dev", u64),
        ("netns_ino", u64),
        ("nr_jited_ksyms", u32),
        ("nr_jited_func_lens", u32),
        ("jited_ksyms", u64),
        ("jited_func_lens", u64),
        ("btf_id", u32),
        ("func_info_rec_size", u32),
        ("func_info", u64),
        ("nr_func_info", u32),
        ("nr_line_info", u32),
        ("line_info", u64),
        ("jited_line_info", u64),
        ("nr_jited_line_info", u32),
        ("line_info_rec_size", u32),
        ("jited_line_info_rec_size", u32),
        ("nr_prog_tags", u32),
        ("prog_tags", u64),
        ("run_time_ns", u64),
        ("run_cnt", u64),
        ("recursion_misses", u64),
    ]


def _bpf(cmd: int, attr: ctypes.Structure) -> int:
    ret = _libc.syscall(_SYS_BPF, cmd, ctypes.byref(attr), ctypes.sizeof(attr))
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return int(ret)


@dataclass(frozen=True)
class TestRun:
    retval: int
    ns_per_run: int  # the kernel's mean over ``repeat`` runs
    data_out: bytes


def prog_test_run(prog_fd: int, packet: bytes, repeat: int = 1) -> TestRun:
    """Run a loaded packet program on ``packet``. For skb programs the kernel reuses one skb for all
    repeats, so a program that changes the packet sees its own change from the second run on."""
    if len(packet) < 14:
        raise SourceError("bpf", "BPF_PROG_TEST_RUN needs at least an Ethernet header (14 bytes)")
    inbuf = ctypes.create_string_buffer(packet, len(packet))
    outbuf = ctypes.create_string_buffer(len(packet) + 256)
    attr = ProgTestAttr(
        prog_fd=prog_fd,
        data_size_in=len(packet),
        data_in=ctypes.addressof(inbuf),
        data_size_out=len(outbuf),
        data_out=ctypes.addressof(outbuf),
        repeat=repeat,
    )
    try:
        _bpf(BPF_PROG_TEST_RUN, attr)
    except OSError as exc:
        raise SourceError("bpf", f"BPF_PROG_TEST_RUN failed: {exc.strerror} (errno {exc.errno})") from exc
    return TestRun(attr.retval, attr.duration, outbuf.raw[: attr.data_size_out])


@dataclass(frozen=True)
class ProgInfo:
    id: int
    name: str
    run_count: int
    run_time_ns: int


def prog_info(prog_fd: int) -> ProgInfo:
    info = BpfProgInfo()
    attr = _InfoAttr(bpf_fd=prog_fd, info_len=ctypes.sizeof(info), info=ctypes.addressof(info))
    try:
        _bpf(BPF_OBJ_GET_INFO_BY_FD, attr)
    except OSError as exc:
        raise SourceError("bpf", f"BPF_OBJ_GET_INFO_BY_FD failed: {exc.strerror}") from exc
    return ProgInfo(info.id, info.name.decode(errors="replace"), info.run_cnt, info.run_time_ns)


def enable_run_stats() -> int | None:
    """A descriptor that keeps run statistics on while it is open, or None if the kernel refuses
    (before 5.8, or without CAP_SYS_ADMIN)."""

    class _Attr(ctypes.Structure):
        _fields_ = [("type", u32)]

    try:
        return _bpf(BPF_ENABLE_STATS, _Attr(BPF_STATS_RUN_TIME))
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.EPERM, errno.ENOSYS, errno.EACCES):
            return None
        raise SourceError("bpf", f"BPF_ENABLE_STATS failed: {exc.strerror}") from exc


def stats_sysctl_enabled() -> bool:
    """Whether someone enabled ``kernel.bpf_stats_enabled`` globally (then stats run without us)."""
    try:
        with open(STATS_SYSCTL) as f:
            return f.read().strip() == "1"
    except OSError:
        return False


class _BatchAttr(ctypes.Structure):
    _fields_ = [
        ("in_batch", u64),
        ("out_batch", u64),
        ("keys", u64),
        ("values", u64),
        ("count", u32),
        ("map_fd", u32),
        ("elem_flags", u64),
        ("flags", u64),
    ]


def possible_cpus(path: str = "/sys/devices/system/cpu/possible") -> int:
    """How many per-CPU copies a per-CPU map value has (possible CPUs, not online ones)."""
    with open(path) as f:
        text = f.read().strip()
    count = 0
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        count += int(hi or lo) - int(lo) + 1
    return count


def map_lookup_batch(
    map_fd: int, key_size: int, value_size: int, max_entries: int
) -> tuple[bytes, bytes, int]:
    """Every (key, value) of a map: (keys, values, count), packed back to back. For a per-CPU map pass
    ``value_size`` = round_up(size, 8) * possible_cpus(). Entries inserted or deleted concurrently may
    be missed or seen twice (hash maps), as with any walk of a live map."""
    chunk = max(1, min(max_entries, 4096))
    keys_out, values_out = bytearray(), bytearray()
    keys = ctypes.create_string_buffer(key_size * chunk)
    values = ctypes.create_string_buffer(value_size * chunk)
    token_in, token_out = ctypes.c_uint64(0), ctypes.c_uint64(0)  # u32 bucket/index token, u64 room
    first, total = True, 0
    while True:
        attr = _BatchAttr(
            in_batch=0 if first else ctypes.addressof(token_in),
            out_batch=ctypes.addressof(token_out),
            keys=ctypes.addressof(keys),
            values=ctypes.addressof(values),
            count=chunk,
            map_fd=map_fd,
        )
        done = False
        try:
            _bpf(BPF_MAP_LOOKUP_BATCH, attr)
        except OSError as exc:
            if exc.errno != errno.ENOENT:  # ENOENT: the walk reached the end (count still valid)
                raise SourceError("bpf", f"BPF_MAP_LOOKUP_BATCH failed: {exc.strerror}") from exc
            done = True
        n = attr.count
        keys_out += keys.raw[: n * key_size]
        values_out += values.raw[: n * value_size]
        total += n
        if done or n == 0:
            return bytes(keys_out), bytes(values_out), total
        token_in.value, first = token_out.value, False
