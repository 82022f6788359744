"""C and Python agree: every struct, field offset, enum value and constant of ebpf/netd_bpf.h against
netd.sources.bpf_layout (gcc compiles a probe generated from the Python side), every map and program
name against the C files, and bpf(2)'s structures against the system's uapi header."""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from netd.sources import bpf_layout as L
from netd.sources.bpf_syscall import BpfProgInfo, ProgTestAttr

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

STRUCTS = {
    "netd_class_val": L.ClassVal,
    "netd_flow_key": L.FlowKey,
    "netd_flow_val": L.FlowVal,
    "netd_flow_slot": L.FlowSlot,
    "netd_pfc_val": L.PfcVal,
    "netd_tcp_key": L.TcpKey,
    "netd_tcp_val": L.TcpVal,
}
ENUMS = {
    **{f"NETD_EV_{n.upper()}": i for i, n in enumerate(L.ROCE_EVENTS)},
    "NETD_EV_COUNT": len(L.ROCE_EVENTS),
    **{f"NETD_TCP_{n.upper()}": i for i, n in enumerate(L.TCP_EVENTS)},
    "NETD_TCP_EV_COUNT": len(L.TCP_EVENTS),
    **{f"NETD_RDMA_{n.upper()}": i for i, n in enumerate(L.RDMA_EVENTS)},
    "NETD_RDMA_EV_COUNT": len(L.RDMA_EVENTS),
    "NETD_DIR_INGRESS": L.DIRECTIONS.index("ingress"),
    "NETD_DIR_EGRESS": L.DIRECTIONS.index("egress"),
    "NETD_CLASS_SLOTS": L.CLASS_SLOTS,
    "NETD_PRIORITIES": L.PRIORITIES,
    "NETD_RDMA_CM_EVENTS": L.RDMA_CM_SLOTS,
    "NETD_PSN_UNKNOWN": L.PSN_UNKNOWN,
}


def _layout(struct: type[ctypes.Structure]) -> list[tuple[str, int, int]]:
    return [(name, getattr(struct, name).offset, getattr(struct, name).size) for name, *_ in struct._fields_]


def _run_probe(tmp_path: Path, includes: str, body: str) -> list[str]:
    src = tmp_path / "probe.c"
    src.write_text(
        f"#include <stddef.h>\n#include <stdio.h>\n{includes}\nint main(void) {{\n{body}return 0;\n}}\n"
    )
    exe = tmp_path / "probe"
    subprocess.run(["gcc", "-Wall", "-Werror", "-o", str(exe), str(src)], check=True, capture_output=True)
    return subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.splitlines()


def test_structs_enums_and_constants_match_the_header(tmp_path: Path) -> None:
    lines = []
    for cname, struct in STRUCTS.items():
        lines.append(f'printf("{cname} sizeof %zu\\n", sizeof(struct {cname}));')
        for field, _, _ in _layout(struct):
            lines.append(
                f'printf("{cname} {field} %zu %zu\\n", offsetof(struct {cname}, {field}), '
                f"sizeof(((struct {cname} *)0)->{field}));"
            )
    lines += [f'printf("{name} %llu\\n", (unsigned long long)({name}));' for name in ENUMS]
    include = f'#include <linux/types.h>\n#include "{L.EBPF_DIR / "netd_bpf.h"}"'
    got = _run_probe(tmp_path, include, "\n".join(lines) + "\n")
    want = []
    for cname, struct in STRUCTS.items():
        want.append(f"{cname} sizeof {ctypes.sizeof(struct)}")
        want += [f"{cname} {f} {off} {size}" for f, off, size in _layout(struct)]
    want += [f"{name} {value}" for name, value in ENUMS.items()]
    assert got == want


def _declared_maps(c_file: str) -> set[str]:
    text = (L.EBPF_DIR / c_file).read_text()
    names = set(re.findall(r"BPF_PERCPU_ARRAY\((\w+)", text))
    names |= set(re.findall(r'BPF_TABLE\("[^"]+",\s*[^,]+,\s*[^,]+,\s*(\w+)', text))
    return names


@pytest.mark.parametrize("c_file", sorted(L.MAPS))
def test_map_names(c_file: str) -> None:
    assert _declared_maps(c_file) == set(L.MAPS[c_file])
    for name in L.MAPS[c_file]:
        assert len(name) <= 16, "bcc names; the kernel keeps 15 characters, so keep them distinct there"


def test_kernel_map_names_stay_distinct() -> None:
    names = [n[:15] for maps in L.MAPS.values() for n in maps]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("c_file", sorted(L.PROGRAMS))
def test_packet_programs_exist(c_file: str) -> None:
    text = (L.EBPF_DIR / c_file).read_text()
    for program in L.PROGRAMS[c_file].values():
        assert re.search(rf"^int {program}\(struct __sk_buff \*skb\)$", text, re.M), program


def test_every_c_file_includes_only_its_header_and_uapi() -> None:
    for path in L.EBPF_DIR.glob("*.c"):
        for inc in re.findall(r'^#include [<"]([^>"]+)[>"]', path.read_text(), re.M):
            assert inc == "netd_bpf.h" or inc.startswith("uapi/"), f"{path.name}: {inc}"


BPF_H = Path("/usr/include/linux/bpf.h")


@pytest.mark.skipif(not BPF_H.exists(), reason="needs the kernel's uapi headers (linux-libc-dev)")
def test_bpf_syscall_structures_match_uapi(tmp_path: Path) -> None:
    info = [f for f, *_ in BpfProgInfo._fields_ if f != "gpl_compatible"]  # a bitfield in C
    test = [f for f, *_ in ProgTestAttr._fields_ if not f.startswith("_")]
    body = [f'printf("%zu\\n", offsetof(struct bpf_prog_info, {f}));' for f in info]
    body += [f'printf("%zu\\n", offsetof(union bpf_attr, test.{f}));' for f in test]
    got = [int(x) for x in _run_probe(tmp_path, "#include <linux/bpf.h>", "\n".join(body) + "\n")]
    want = [getattr(BpfProgInfo, f).offset for f in info] + [getattr(ProgTestAttr, f).offset for f in test]
    assert got == want
