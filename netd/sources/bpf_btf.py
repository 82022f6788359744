"""A small reader of the kernel's BTF (``/sys/kernel/btf/vmlinux``): struct member offsets, functions
and tracepoints of the *running* kernel.

bcc compiles against whatever headers are installed (on this project's hosts, an older Debian tree),
so the offset of a field in a kernel struct must never come from those headers: netd reads it here and
passes it to the C program as a ``-D`` flag. The same index answers "does this kernel have function F
(for fentry/fexit)" and "does it have tracepoint T" (``btf_trace_T`` typedefs exist for every
tracepoint, with or without tracefs).

Format: include/uapi/linux/btf.h (a header, then types, then strings; type ids start at 1).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from netd.errors import SourceError

__all__ = ["VMLINUX_BTF", "Btf", "load_btf"]

VMLINUX_BTF = Path("/sys/kernel/btf/vmlinux")
BTF_MAGIC = 0xEB9F

KIND_INT, KIND_ARRAY, KIND_STRUCT, KIND_UNION, KIND_ENUM = 1, 3, 4, 5, 6
KIND_TYPEDEF, KIND_FUNC, KIND_FUNC_PROTO, KIND_VAR, KIND_DATASEC = 8, 12, 13, 14, 15
KIND_DECL_TAG, KIND_ENUM64 = 17, 19
_NAMED = (KIND_STRUCT, KIND_UNION, KIND_TYPEDEF, KIND_FUNC)


def _extra(kind: int, vlen: int) -> int:
    """Bytes that follow the 12-byte btf_type for this kind."""
    if kind in (KIND_INT, KIND_VAR, KIND_DECL_TAG):
        return 4
    if kind == KIND_ARRAY:
        return 12
    if kind in (KIND_STRUCT, KIND_UNION, KIND_DATASEC, KIND_ENUM64):
        return 12 * vlen
    if kind in (KIND_ENUM, KIND_FUNC_PROTO):
        return 8 * vlen
    return 0


@dataclass(frozen=True)
class _Type:
    kind: int
    name: str
    vlen: int
    kind_flag: bool
    offset: int  # of the btf_type in the type section


class Btf:
    """An index of one BTF blob; lookups by name for structs, unions, typedefs and functions."""

    def __init__(self, blob: bytes, origin: str = "BTF") -> None:
        if len(blob) < 24:
            raise SourceError("bpf", f"{origin}: too short for a BTF header")
        magic, _version, _flags, hdr_len = struct.unpack_from("<HBBI", blob, 0)
        if magic != BTF_MAGIC:
            raise SourceError("bpf", f"{origin}: not BTF (magic {magic:#x})")
        type_off, type_len, str_off, str_len = struct.unpack_from("<IIII", blob, 8)
        self._types = memoryview(blob)[hdr_len + type_off : hdr_len + type_off + type_len]
        self._strings = bytes(blob[hdr_len + str_off : hdr_len + str_off + str_len])
        if len(self._types) != type_len or len(self._strings) != str_len:
            raise SourceError("bpf", f"{origin}: sections run past the end of the blob")
        self._by_id: list[int] = [0]  # type id -> offset in the type section (id 0 is void)
        self._by_name: dict[tuple[int, str], int] = {}
        self._index()

    def _name(self, off: int) -> str:
        end = self._strings.find(b"\0", off)
        return self._strings[off : end if end >= 0 else None].decode("ascii", "replace")

    def _index(self) -> None:
        types, pos, size = self._types, 0, len(self._types)
        unpack = struct.Struct("<III").unpack_from
        while pos + 12 <= size:
            name_off, info, _ = unpack(types, pos)
            kind, vlen = (info >> 24) & 0x1F, info & 0xFFFF
            self._by_id.append(pos)
            if kind in _NAMED and name_off:
                self._by_name.setdefault((kind, self._name(name_off)), len(self._by_id) - 1)
            pos += 12 + _extra(kind, vlen)
        if pos != size:
            raise SourceError("bpf", "BTF type section does not end on a type boundary")

    def _type(self, type_id: int) -> _Type:
        pos = self._by_id[type_id]
        name_off, info, _ = struct.unpack_from("<III", self._types, pos)
        return _Type((info >> 24) & 0x1F, self._name(name_off), info & 0xFFFF, bool(info >> 31), pos)

    def has_func(self, name: str) -> bool:
        return (KIND_FUNC, name) in self._by_name

    def has_tracepoint(self, name: str) -> bool:
        """Every tracepoint ``T`` has a ``btf_trace_T`` typedef (kernel >= 5.5)."""
        return (KIND_TYPEDEF, f"btf_trace_{name}") in self._by_name

    def tracepoint_args(self, name: str) -> int | None:
        """How many arguments tracepoint ``name`` passes (its TP_PROTO), or None if it has none here:
        ``btf_trace_T`` is a pointer to a prototype whose first parameter is the probe's data."""
        type_id = self._by_name.get((KIND_TYPEDEF, f"btf_trace_{name}"))
        if type_id is None:
            return None
        ptr = struct.unpack_from("<I", self._types, self._type(type_id).offset + 8)[0]
        proto = struct.unpack_from("<I", self._types, self._type(ptr).offset + 8)[0]
        t = self._type(proto)
        return t.vlen - 1 if t.kind == KIND_FUNC_PROTO else None

    def member_offset(self, struct_name: str, member: str) -> int | None:
        """Byte offset of ``member`` in ``struct struct_name``, looking through anonymous struct and
        union members as C does; None when the struct or the member does not exist."""
        type_id = self._by_name.get((KIND_STRUCT, struct_name))
        if type_id is None:
            return None
        bits = self._find(type_id, member)
        return None if bits is None else bits // 8

    def _find(self, type_id: int, member: str) -> int | None:
        t = self._type(type_id)
        if t.kind not in (KIND_STRUCT, KIND_UNION):
            return None
        for i in range(t.vlen):
            name_off, mtype, moff = struct.unpack_from("<III", self._types, t.offset + 12 + 12 * i)
            bit_off = moff & 0xFFFFFF if t.kind_flag else moff
            if name_off:
                if self._name(name_off) == member:
                    return bit_off
                continue
            inner = self._find(self._resolve(mtype), member)  # an anonymous struct or union
            if inner is not None:
                return bit_off + inner
        return None

    def _resolve(self, type_id: int) -> int:
        """Follow typedef/const/volatile to the underlying type (anonymous members are rarely either)."""
        for _ in range(16):
            if type_id == 0:
                return 0
            t = self._type(type_id)
            if t.kind not in (KIND_TYPEDEF, 9, 10, 11):  # typedef, volatile, const, restrict
                return type_id
            type_id = struct.unpack_from("<I", self._types, t.offset + 8)[0]
        return type_id


_cache: dict[Path, Btf] = {}


def load_btf(path: Path = VMLINUX_BTF) -> Btf | None:
    """The kernel's BTF, parsed once per process; None when the kernel has none (CONFIG_DEBUG_INFO_BTF)."""
    if path in _cache:
        return _cache[path]
    try:
        blob = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SourceError("bpf", f"cannot read {path}: {exc.strerror or exc}") from exc
    btf = _cache[path] = Btf(blob, str(path))
    return btf
