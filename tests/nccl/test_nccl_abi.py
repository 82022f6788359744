"""The plugin's view of NCCL's tuner ABI against NCCL's own declarations (`make check-abi`).

nccl_plugin/tests/upstream/nccl_tuner_decls.h is copied from NVIDIA/nccl (tags in its header and in
docs/nccl.md). The check compiles plugin.c against it and compares src/nccl_abi.h's layout with it;
the two drift tests show that the check catches a signature and a member order that NCCL does not
have, while the normal build still passes.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.nccl.plugin_harness import PLUGIN_DIR


def _check_abi(root: Path, build: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "-s", "-C", str(root), f"BUILD={build}", "check-abi"],
        capture_output=True,
        text=True,
        timeout=300,
    )


def _copy_plugin(tmp_path: Path) -> Path:
    root = tmp_path / "nccl_plugin"
    shutil.copytree(PLUGIN_DIR, root, ignore=shutil.ignore_patterns("build"))
    return root


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"{path.name}: {old!r} not found once (the test is out of date)"
    path.write_text(text.replace(old, new))


def _builds(root: Path, build: Path) -> bool:
    lib = build / "libnccl-tuner-netd.so"
    done = subprocess.run(
        ["make", "-s", "-C", str(root), f"BUILD={build}", str(lib)], capture_output=True, text=True
    )
    return done.returncode == 0


def test_the_plugin_matches_ncclS_declarations(tmp_path):
    done = _check_abi(PLUGIN_DIR, tmp_path)
    assert done.returncode == 0, done.stderr
    # both descriptions were produced and name every struct of API v2..v6
    text = (tmp_path / "abi_upstream.json").read_text()
    for name in ("ncclTuner_v2_t", "ncclTuner_v3_t", "ncclTuner_v4_t", "ncclTuner_v5_t", "ncclTuner_v6_t"):
        assert f'"{name}"' in text
    assert text == (tmp_path / "abi_netd.json").read_text()


@pytest.mark.slow
def test_a_signature_NCCL_does_not_have_fails_the_check(tmp_path):
    # v4..v6 getCollInfo without `int regBuff`, changed consistently in netd's header and plugin.c:
    # netd's own build cannot notice, NCCL's declarations do.
    root = _copy_plugin(tmp_path)
    _edit(
        root / "src" / "nccl_abi.h",
        "int numProto, int regBuff, int *nChannels",
        "int numProto, int *nChannels",
    )
    plugin = root / "src" / "plugin.c"
    _edit(plugin, "int num_proto, int reg_buff,\n", "int num_proto,\n")
    _edit(plugin, "    (void)reg_buff;\n", "")
    _edit(plugin, "num_algo, num_proto, 0,\n", "num_algo, num_proto,\n")
    assert _builds(root, tmp_path / "b1")
    done = _check_abi(root, tmp_path / "b2")
    assert done.returncode != 0
    assert "incompatible-pointer-types" in done.stderr


@pytest.mark.slow
def test_a_member_order_NCCL_does_not_have_fails_the_check(tmp_path):
    # finalize and getChunkSize swapped in netd's ncclTuner_v6_t: plugin.c (designated initialisers)
    # still builds, but NCCL would call getChunkSize where finalize is.
    root = _copy_plugin(tmp_path)
    header = root / "src" / "nccl_abi.h"
    text = header.read_text()
    v6 = text[text.index("typedef struct {", text.index("ncclTuner_v5_t;")) :]
    fin = "    ncclResult_t (*finalize)(void *context);\n"
    chunk = v6[v6.index("    ncclResult_t (*getChunkSize)") : v6.index("} ncclTuner_v6_t;")]
    swapped = v6.replace(fin, "@@").replace(chunk, fin).replace("@@", chunk)
    header.write_text(text.replace(v6, swapped))
    assert _builds(root, tmp_path / "b1")
    done = _check_abi(root, tmp_path / "b2")
    assert done.returncode != 0
    assert "differs from NCCL's declarations" in done.stderr and '"getChunkSize": 24' in done.stderr
