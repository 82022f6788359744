"""`make install` into a temporary DESTDIR, then the installed tree as an operator's host would hold
it: FHS places, the package importable from its private directory, units that `systemd-analyze
verify` accepts, configuration never overwritten, a loadable NCCL plugin."""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from netd import __version__

pytestmark = pytest.mark.slow  # builds a wheel and the plugin

REPO = Path(__file__).resolve().parents[2]
MULTIARCH = subprocess.run(["gcc", "-print-multiarch"], capture_output=True, text=True).stdout.strip()


def _install(destdir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            "make",
            "-s",
            "-C",
            str(REPO),
            "install",
            f"DESTDIR={destdir}",
            f"INSTALL_PY={sys.executable}",
            "PIP_INSTALL_ARGS=--no-deps --no-index",  # the test venv already has the dependencies
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )


@pytest.fixture(scope="module")
def destdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("destdir")
    done = _install(root)
    assert done.returncode == 0, done.stderr
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_files_land_in_their_fhs_places(destdir: Path):
    expected = {
        "usr/bin/netd": 0o755,
        "usr/lib/systemd/system/netd.service": 0o644,
        "usr/lib/systemd/system/netd-fabric.service": 0o644,
        "usr/share/netd/systemd/tuning.conf": 0o644,
        "etc/netd/netd.toml": 0o644,
        "etc/netd/fabric.toml": 0o644,
        f"usr/lib/{MULTIARCH}/libnccl-tuner-netd.so": 0o755,
        "usr/share/doc/netd/deploy.md": 0o644,
        "usr/share/netd/dashboards/rules/netd-alerts.rules.yml": 0o644,
        "usr/lib/netd/python/netd/__init__.py": None,
        "usr/lib/netd/python/cc/__init__.py": None,
    }
    for rel, mode in expected.items():
        path = destdir / rel
        assert path.is_file(), rel
        if mode is not None:
            assert path.stat().st_mode & 0o777 == mode, rel
    assert not (destdir / "usr/local").exists()  # a package's files, not a local admin's


def test_the_installed_package_runs_from_its_own_directory(destdir: Path, tmp_path: Path):
    pydir = destdir / "usr/lib/netd/python"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(pydir)}
    code = "import netd, cc; print(netd.__file__); print(cc.__file__)"
    where = subprocess.run(
        [sys.executable, "-P", "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert all(line.startswith(str(pydir)) for line in where.stdout.split())
    version = subprocess.run(
        [sys.executable, "-P", "-m", "netd", "--version"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert version.returncode == 0 and version.stdout.strip() == f"netd {__version__}"


def test_the_installed_package_finds_its_ebpf_sources(destdir: Path, tmp_path: Path):
    # bcc compiles the probes from their C at start ([bpf] enabled), the lab its switch: both look for
    # them beside the packages, where an installed netd has them only if make install put them there.
    pydir = destdir / "usr/lib/netd/python"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(pydir)}
    code = "from netd.sources.bpf_layout import EBPF_DIR; print(EBPF_DIR)"
    where = Path(
        subprocess.run(
            [sys.executable, "-P", "-c", code],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    assert where.is_relative_to(pydir)
    shipped = sorted(p.name for p in (REPO / "ebpf").iterdir() if p.suffix in (".c", ".h"))
    assert "roce_parser.c" in shipped and "lab_switch.c" in shipped
    assert sorted(p.name for p in where.iterdir()) == shipped


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="loading BPF programs needs root")
def test_bcc_compiles_and_loads_the_packet_programs_of_the_installed_tree(destdir: Path, tmp_path: Path):
    # The installed netd's own loader, from the installed directory, through the real compiler and the
    # kernel's verifier: what `[bpf] enabled` does at start on a host that ran make install.
    pytest.importorskip("bcc")
    pydir = destdir / "usr/lib/netd/python"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(pydir)}
    code = (
        "from netd.sources.bpf import BpfSettings\n"
        "from netd.sources.bpf_bcc import compile_program\n"
        "from netd.sources.bpf_layout import EBPF_DIR, PROGRAMS\n"
        "print(EBPF_DIR)\n"
        "for c_file, hooks in PROGRAMS.items():\n"
        "    bpf = compile_program(c_file, BpfSettings().cflags()[c_file])\n"
        "    for name in hooks.values():\n"
        "        bpf.load_func(name.encode(), bpf.SCHED_CLS)\n"
        "    bpf.cleanup()\n"
        "    print(c_file, 'loaded')\n"
    )
    done = subprocess.run(
        [sys.executable, "-P", "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr[-3000:]
    where, *loaded = done.stdout.split("\n")
    assert Path(where).is_relative_to(pydir)
    assert [line for line in loaded if line] == ["roce_parser.c loaded", "pfc_counter.c loaded"]


def _containerfile_copies() -> list[tuple[list[str], str]]:
    """The build stage's ``COPY <source>... <destination>`` lines (none ``--from`` another stage)."""
    text = (REPO / "deploy/Containerfile").read_text()
    build = text.split("\nFROM ", 2)[1]  # the first stage, up to the second FROM
    out = []
    for line in build.splitlines():
        if line.startswith("COPY ") and "--from" not in line:
            *sources, destination = line.split()[1:]
            out.append((sources, destination))
    return out


def test_the_containerfile_copies_all_that_make_install_needs(tmp_path: Path):
    # The image is built from what the Containerfile copies, not from a checkout: install from a
    # directory holding exactly that, as its build stage does.
    copies = _containerfile_copies()
    assert copies and all(d.startswith("/src") for _, d in copies)
    src = tmp_path / "src"
    for sources, destination in copies:
        target = src / destination.removeprefix("/src").lstrip("/")
        for source in sources:
            origin = REPO / source
            if origin.is_dir():
                shutil.copytree(origin, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy(origin, target / origin.name)
    out = tmp_path / "out"
    done = subprocess.run(
        [
            "make",
            "-s",
            "-C",
            str(src),
            "install",
            f"DESTDIR={out}",
            f"INSTALL_PY={sys.executable}",
            "PIP_INSTALL_ARGS=--no-deps --no-index",
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    for rel in ("usr/bin/netd", "usr/lib/netd/python/netd/cli.py", "usr/lib/netd/python/ebpf/roce_parser.c"):
        assert (out / rel).is_file(), rel
    assert (out / f"usr/lib/{MULTIARCH}/libnccl-tuner-netd.so").is_file()


def test_the_wrapper_points_at_the_fhs_directory(destdir: Path):
    text = (destdir / "usr/bin/netd").read_text()
    assert text.startswith("#!/bin/sh\n")
    assert 'PYTHONPATH="/usr/lib/netd/python' in text  # the installed path, never DESTDIR
    assert "exec /usr/bin/python3 -P -m netd" in text
    assert str(destdir) not in text


def _verify(root: Path, *units: str) -> subprocess.CompletedProcess[str]:
    """systemd-analyze verify with ``root`` as the file system: it resolves ExecStart= there and
    needs the host's own targets (sysinit.target, ...) beside the units."""
    for unit in Path("/usr/lib/systemd/system").iterdir():
        target = root / "usr/lib/systemd/system" / unit.name
        if not target.exists() and not unit.is_dir():
            shutil.copy(unit, target, follow_symlinks=False)
    (root / "bin").mkdir(exist_ok=True)
    if not (root / "bin/kill").exists():
        shutil.copy("/bin/kill", root / "bin/kill")
    return subprocess.run(
        ["systemd-analyze", "verify", "--man=no", f"--root={root}", *units],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze (Debian systemd)")
def test_units_verify_clean(destdir: Path):
    dropins = destdir / "etc/systemd/system/netd.service.d"
    dropins.mkdir(parents=True, exist_ok=True)
    shutil.copy(destdir / "usr/share/netd/systemd/tuning.conf", dropins / "tuning.conf")
    done = _verify(destdir, "netd.service", "netd-fabric.service")
    assert done.returncode == 0, done.stderr
    assert done.stdout + done.stderr == ""  # not even a warning


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze (Debian systemd)")
def test_verify_catches_a_broken_unit(destdir: Path, tmp_path: Path):
    root = tmp_path / "root"
    shutil.copytree(destdir, root, symlinks=True)
    unit = root / "usr/lib/systemd/system/netd.service"
    unit.write_text(unit.read_text().replace("ProtectSystem=strict", "ProtectSystem=stric"))
    done = _verify(root, "netd.service")
    assert "Failed to parse protect system value" in done.stdout + done.stderr


CAPABILITY_H = Path("/usr/include/linux/capability.h")


@pytest.mark.skipif(not CAPABILITY_H.exists(), reason="needs the kernel's uapi headers (linux-libc-dev)")
@pytest.mark.parametrize("unit", ["netd.service", "netd-fabric.service", "tuning.conf"])
def test_every_capability_exists_and_is_justified(unit: str):
    """systemd ignores an unknown capability name without a word, so the names are checked against
    the kernel's header; each granted one must carry its reason in a comment of the same file."""
    known = set(re.findall(r"#define (CAP_[A-Z_]+)\s+\d+", CAPABILITY_H.read_text()))
    text = (REPO / "deploy/systemd" / unit).read_text()
    granted: set[str] = set()
    for line in text.splitlines():
        if line.startswith(("CapabilityBoundingSet=", "AmbientCapabilities=")):
            granted |= set(line.split("=", 1)[1].split())
    assert granted <= known, granted - known
    comments = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    for cap in granted:
        assert re.search(rf"^# {cap}\s+\S", comments, re.MULTILINE), f"{cap} has no reason in {unit}"
    bounding = [line for line in text.splitlines() if line.startswith("CapabilityBoundingSet=")]
    ambient = [line for line in text.splitlines() if line.startswith("AmbientCapabilities=")]
    assert [b.split("=")[1] for b in bounding] == [a.split("=")[1] for a in ambient]


def test_reinstall_keeps_the_operators_configuration(destdir: Path):
    conf = destdir / "etc/netd/netd.toml"
    conf.write_text('listen = "0.0.0.0:9469"\n')
    done = _install(destdir)
    assert done.returncode == 0, done.stderr
    assert conf.read_text() == 'listen = "0.0.0.0:9469"\n'


def test_default_configuration_loads(destdir: Path):
    from netd.config.settings import load_config

    run = load_config(destdir / "etc/netd/netd.toml", environ={})
    fabric = load_config(destdir / "etc/netd/fabric.toml", environ={})
    assert run.listen_address()[1] != fabric.listen_address()[1]  # both services fit on one host


def test_the_plugin_loads_as_nccl_would(destdir: Path):
    lib = ctypes.CDLL(str(destdir / f"usr/lib/{MULTIARCH}/libnccl-tuner-netd.so"))
    assert any(hasattr(lib, f"ncclTunerPlugin_v{v}") for v in range(2, 6))
